"""Hooks and data iterators in the cases that used to fail.

SaveLogs with a log of str (the reason StopOnNan logs), SaveLogsCSV named
a group of logs, ReduceOnPlateau reused by another trainer, a trainer with
a ProgressBar on a stream being copied or pickled, and the dtypes of an
iterator's data through its description.
"""

import copy
import io
import json
import pickle
import sys

import h5py
import numpy as np
import pytest

from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.describable import create_from_description, get_description
from brainstorm.errors import IteratorValidationError, TrainingValidationError
from brainstorm.hooks import (
    Hook,
    MonitorLoss,
    ProgressBar,
    ReduceOnPlateau,
    SaveCheckpoint,
    SaveLogs,
    SaveLogsCSV,
    StopAfterEpoch,
    StopOnNan,
)
from brainstorm.training import SgdStepper, Trainer
from tests.training.nets import xor_data, xor_net


def call(hook, logs, epoch_nr=1, update_nr=1):
    """Start and call a hook once."""
    net, stepper = xor_net(), SgdStepper()
    hook.start(net, stepper, False, {})
    return hook(epoch_nr, update_nr, net, stepper, logs)


class Values(Hook):
    """Logs ``values[epoch]`` under its name at each epoch."""

    def __init__(self, values, name='val'):
        super().__init__(name=name)
        self.values = values

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return self.values[epoch_nr]


# ------------------------------------------------------- SaveLogs and str ---


def test_save_logs_writes_the_reason_stop_on_nan_logs(tmp_path):
    """StopOnNan logs its reason (a str) when it catches a NaN: SaveLogs
    raised h5py's 'No conversion path for dtype' then, and the logs of
    that epoch were never written."""
    filename = tmp_path / 'logs.h5'
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(Values([1.0, 1.0, float('nan'), 1.0], name='figure'))
    trainer.add_hook(StopOnNan(logs_to_check='figure'))
    trainer.add_hook(SaveLogs(str(filename)))
    trainer.add_hook(StopAfterEpoch(3))
    trainer.train(xor_net(), Minibatches(2, **xor_data()))
    assert trainer.current_epoch_nr == 2
    with h5py.File(filename, 'r') as f:
        assert f['StopOnNan'].asstr()[()].tolist() == list(trainer.logs['StopOnNan'])
        assert "'figure'" in f['StopOnNan'].asstr()[0]
        np.testing.assert_array_equal(f['figure'][()], [1.0, 1.0, np.nan])


def test_save_logs_writes_logs_of_str_as_utf8_strings(tmp_path):
    filename = str(tmp_path / 'logs.h5')
    call(SaveLogs(filename), {'notes': {'text': ['first', 'zweite Zeile: ü']}})
    with h5py.File(filename, 'r') as f:
        dataset = f['notes/text']
        assert h5py.check_string_dtype(dataset.dtype).encoding == 'utf-8'
        assert dataset.asstr()[()].tolist() == ['first', 'zweite Zeile: ü']


@pytest.mark.parametrize(
    'log, message',
    [
        (
            [1.0, 'stopped'],
            r'mixes str with other entries: it holds 1\.0 \(float\) '
            r"at entry 0 and 'stopped' \(str\) at entry 1",
        ),
        ([0.5, None], r'holds None \(NoneType\) at entry 1'),
        (
            [np.ones(2), np.ones(3)],
            r'different shapes: \(2,\) at entry 0 and '
            r'\(3,\) at entry 1',
        ),
        ([{'a': 1}], r"holds \{'a': 1\} \(dict\) at entry 0"),
    ],
    ids=['str-and-number', 'none', 'ragged', 'object'],
)
def test_save_logs_names_the_log_and_entry_it_cannot_store(tmp_path, log, message):
    filename = tmp_path / 'logs.h5'
    call(SaveLogs(str(filename)), {'fine': [1.0]})
    before = filename.read_bytes()
    with pytest.raises(TrainingValidationError) as info:
        call(SaveLogs(str(filename)), {'fine': [1.0, 2.0], 'group': {'bad': log}})
    text = str(info.value)
    assert text.startswith("SaveLogs 'SaveLogs': the log 'group.bad' ")
    assert 'all numbers (or arrays of one shape), or all str' in text
    assert info.match(message)
    assert filename.read_bytes() == before  # the file keeps its content


# ------------------------------------------------ SaveLogsCSV and a group ---


def _train_with_csv(tmp_path, log_names):
    filename = tmp_path / 'logs.csv'
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    data = Minibatches(2, **xor_data())
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    trainer.add_hook(SaveLogsCSV(str(filename), log_names=log_names))
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(xor_net(), data, valid=data)
    return trainer, filename.read_text()


def test_save_logs_csv_refuses_a_group_of_logs_naming_its_entries(tmp_path):
    """Named a group of logs, SaveLogsCSV wrote its key names as values
    ('0,,total_loss'), as if the group were a log."""
    with pytest.raises(TrainingValidationError) as info:
        _train_with_csv(tmp_path, ['validation'])
    assert str(info.value).startswith(
        "SaveLogsCSV 'SaveLogsCSV': the log 'validation' is a group of logs "
        "with the entries ['total_loss'], not a list of values"
    )
    assert "'validation.total_loss'" in str(info.value)
    assert not (tmp_path / 'logs.csv').exists()


def test_save_logs_csv_writes_the_entries_of_a_group_named_one_by_one(tmp_path):
    trainer, text = _train_with_csv(tmp_path, ['validation.total_loss'])
    lines = text.splitlines()
    assert lines[0] == 'epoch,update,validation.total_loss'
    values = [float(line.split(',')[2]) for line in lines[1:]]
    assert values == list(trainer.logs['validation']['total_loss'])


# ------------------------------------------- ReduceOnPlateau for new runs ---


def _train_with_plateau(hook, values, checkpoint=None):
    stepper = SgdStepper(0.1)
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(Values(values))
    trainer.add_hook(hook)
    if checkpoint is not None:
        trainer.add_hook(SaveCheckpoint(checkpoint))
    trainer.add_hook(StopAfterEpoch(len(values) - 1))
    trainer.train(xor_net(), Minibatches(2, **xor_data()))
    return trainer, stepper


def test_reduce_on_plateau_reused_by_another_trainer_starts_afresh():
    """A reused hook compared the new run's log with the best of the old
    run, and lowered the learning rate of a run that improved every
    epoch."""
    hook = ReduceOnPlateau('val', factor=0.5, patience=1)
    _, stepper = _train_with_plateau(hook, [5, 4, 3, 2, 1, 0.5])
    assert stepper.learning_rate == 0.1
    _, stepper = _train_with_plateau(hook, [9, 8, 7, 6, 5, 4])
    assert stepper.learning_rate == 0.1
    assert (hook._best, hook._bad_checks, hook._seen) == (4, 0, 6)
    # and it still reduces on a plateau of the new run
    _, stepper = _train_with_plateau(hook, [9, 9, 9])
    assert stepper.learning_rate == 0.05


def test_reduce_on_plateau_called_with_a_shorter_log_forgets_the_old_best():
    hook = ReduceOnPlateau('val', factor=0.5, patience=0)
    stepper = SgdStepper(1.0)
    hook.start(xor_net(), stepper, False, {})
    hook(1, 1, None, stepper, {'val': [1.0, 0.5, 0.25]})
    hook(1, 1, None, stepper, {'val': [2.0]})  # a new run's first entry
    assert (hook._best, hook._bad_checks, hook._seen) == (2.0, 0, 1)
    assert stepper.learning_rate == 1.0


def test_reduce_on_plateau_keeps_its_state_through_a_checkpoint(tmp_path):
    """A resumed run (its log as long as at the checkpoint) goes on with
    the hook's state, as the run without the break."""
    values = [3, 2, 2, 2, 2, 1]
    _, whole = _train_with_plateau(ReduceOnPlateau('val', patience=1), values)
    filename = str(tmp_path / 'run.ckpt')
    _train_with_plateau(ReduceOnPlateau('val', patience=1), values[:3], filename)
    resumed, net = Trainer.from_checkpoint(filename)
    resumed.hooks['val'].values = values
    resumed.hooks['StopAfterEpoch'].max_epochs = len(values) - 1
    resumed.train(net, Minibatches(2, **xor_data()))
    hook = resumed.hooks['ReduceOnPlateau']
    assert (hook._best, hook._bad_checks, hook._seen) == (1, 0, 6)
    assert resumed.stepper.learning_rate == whole.learning_rate == 0.1 * 0.1


# ------------------------------------------ ProgressBar copies and pickles ---


def _trainer_with_bar(stream):
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(ProgressBar(file=stream, force=True))
    trainer.add_hook(StopAfterEpoch(1))
    return trainer


def test_a_trainer_with_a_progress_bar_on_stdout_copies_and_pickles():
    """A ProgressBar on sys.stdout made the trainer impossible to copy or
    pickle (TypeError: cannot pickle '_io.TextIOWrapper' object)."""
    trainer = _trainer_with_bar(sys.stdout)
    assert copy.deepcopy(trainer).hooks['ProgressBar'].file is sys.stdout
    assert copy.copy(trainer.hooks['ProgressBar']).file is sys.stdout
    restored = pickle.loads(pickle.dumps(trainer))
    assert restored.hooks['ProgressBar'].file is sys.stdout
    assert restored.hooks['ProgressBar'].force is True
    stderr_bar = pickle.loads(pickle.dumps(ProgressBar(file=sys.stderr)))
    assert stderr_bar.file is sys.stderr


def test_a_copied_trainer_draws_its_progress_bar_on_the_same_stream():
    stream = io.StringIO()
    trainer = _trainer_with_bar(stream)
    trainer.train(xor_net(), Minibatches(2, **xor_data()))
    drawn = stream.getvalue()
    copied = copy.deepcopy(trainer)
    assert copied.hooks['ProgressBar'].file is stream
    copied.hooks['StopAfterEpoch'].max_epochs = 2
    copied.train(xor_net(), Minibatches(2, **xor_data()))
    assert 'Epoch 2' in stream.getvalue()[len(drawn) :]


def test_a_pickled_progress_bar_keeps_a_stream_that_pickles(tmp_path):
    stream = io.StringIO('drawn before')
    restored = pickle.loads(pickle.dumps(ProgressBar(file=stream)))
    assert isinstance(restored.file, io.StringIO)
    assert restored.file.getvalue() == 'drawn before'


def test_a_pickled_progress_bar_drops_a_stream_that_cannot_be_pickled(tmp_path):
    with open(tmp_path / 'bar.txt', 'w') as stream:
        trainer = _trainer_with_bar(stream)
        restored = pickle.loads(pickle.dumps(trainer))
        assert trainer.hooks['ProgressBar'].file is stream
    bar = restored.hooks['ProgressBar']
    assert bar.file is None  # the default: sys.stderr
    assert bar.force is True


# --------------------------------------------- data dtypes in descriptions ---


def _data():
    return {
        'default': np.linspace(0, 1, 24, dtype=np.float32).reshape(2, 4, 3),
        'targets': np.arange(8, dtype=np.uint8).reshape(2, 4, 1),
        'mask': np.ones((2, 4, 1), dtype=bool),
        'half': np.full((2, 4, 1), 0.1, dtype=np.float16),
        'counts': np.arange(8, dtype=np.int32).reshape(2, 4, 1),
    }


@pytest.mark.parametrize(
    'make',
    [lambda: Minibatches(2, shuffle=False, **_data()), lambda: Undivided(**_data())],
    ids=['Minibatches', 'Undivided'],
)
def test_a_description_round_trip_keeps_the_dtypes_of_the_batches(make):
    """float32 data gave float64 batches after a description round trip,
    uint8 targets int64 ones."""
    original = make()
    description = json.loads(json.dumps(get_description(original)))
    restored = create_from_description(description)
    assert 'data_dtypes' not in vars(restored)
    for before, after in zip(original(), restored()):
        for name in before:
            assert after[name].dtype == before[name].dtype, name
            np.testing.assert_array_equal(after[name], before[name])
    assert get_description(restored) == get_description(original)


def test_a_description_without_dtypes_loads_as_before():
    description = json.loads(json.dumps(get_description(Undivided(**_data()))))
    description.pop('data_dtypes', None)  # as written by earlier versions
    batch = next(create_from_description(description)())
    assert batch['default'].dtype == np.float64
    assert batch['targets'].dtype == np.int64
    assert batch['mask'].dtype == np.bool_


@pytest.mark.parametrize(
    'dtypes, values, message',
    [
        (
            {'targets': 'int8'},
            300,
            "data 'targets' holds 300 at index \\(0, 0, 0\\), which its dtype 'int8'",
        ),
        ({'targets': 'int64'}, 1.5, "data 'targets' holds 1.5 at index"),
        ({'targets': 'float32'}, 1e300, "data 'targets' holds 1e\\+300 at index"),
        ({'other': 'float32'}, 1, "data_dtypes names unknown data 'other'"),
        ({'targets': 'object'}, 1, "data_dtypes\\['targets'\\] must be one of"),
    ],
    ids=['out-of-range', 'fraction', 'overflow', 'unknown-name', 'bad-dtype'],
)
def test_a_description_whose_dtype_cannot_hold_the_data_is_refused(
    dtypes, values, message
):
    description = get_description(Undivided(targets=np.zeros((1, 2, 1), dtype=int)))
    description['data']['targets'][0][0][0] = values
    description['data_dtypes'] = dtypes
    with pytest.raises(IteratorValidationError, match=message) as info:
        create_from_description(description)
    assert str(info.value).startswith('Undivided (from a description): ')
