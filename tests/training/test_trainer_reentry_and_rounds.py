"""The Trainer: a train() after a failure at count 0, training on batches
without samples, train() and evaluate() called from their own hooks, hook
names the trainer logs under itself, and hooks whose timescale or interval
was changed after add_hook."""

import pickle

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import FromGenerator
from brainstorm.hooks import (
    EarlyStopper,
    Hook,
    MonitorLoss,
    SaveCheckpoint,
    StopAfterEpoch,
)
from brainstorm.parallel import processes_of
from brainstorm.scorers import gather_from_all_ranks
from brainstorm.training import Trainer
from brainstorm.training import checkpoint as ck
from brainstorm.training.progress import TrainingProgress, TrainingRun
from brainstorm.training.steppers import SgdStepper
from brainstorm.utils import IteratorValidationError, TrainingValidationError
from tests.training.nets import Recorder, StopAtUpdate, blob_data, minibatches
from tests.training.test_data_parallel import FakeGatherComm


def blob_iter():
    return minibatches(blob_data(30), batch_size=10, shuffle=False)


def blob_net():
    return bs.tools.create_net_from_spec('classification', 4, 3, 'F5')


class FailsOnce(Hook):
    """Raises OSError at its first call (a missing folder, say), then
    records its calls as ``(timescale, epoch_nr, update_nr)``."""

    def __init__(self, name=None, timescale='epoch', calls=None):
        super().__init__(name, timescale, 1)
        self.failed = False
        self.calls = [] if calls is None else calls

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if not self.failed:
            self.failed = True
            raise OSError('the folder is missing')
        self.calls.append((self.timescale, epoch_nr, update_nr))


# ------------------------------------- a train() after a failure at 0 ----


def test_a_train_after_a_failure_at_epoch_0_completes_the_round_once():
    """A hook failed in the epoch round at count 0. The next train() used
    to run the whole round again: the hooks before the failing one got a
    second call at epoch 0 (a second validation entry for epoch 0)."""
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Recorder('before', 'epoch', calls=calls, value=1))
    trainer.add_hook(FailsOnce('fails', 'epoch', calls=calls))
    trainer.add_hook(Recorder('after', 'epoch', calls=calls, value=2))
    trainer.add_hook(StopAfterEpoch(1))
    net = blob_net()
    with pytest.raises(OSError, match='the folder is missing'):
        trainer.train(net, blob_iter())
    assert calls == [('epoch', 0, 0)]  # 'before' only
    trainer.train(net, blob_iter())
    # 'fails' and 'after' get their epoch-0 call now, 'before' not again
    assert calls == [
        ('epoch', 0, 0),
        ('epoch', 0, 0),
        ('epoch', 0, 0),
        ('epoch', 1, 3),
        ('epoch', 1, 3),
        ('epoch', 1, 3),
    ]
    assert trainer.logs['before'].epochs == [0, 1]
    assert trainer.logs['after'].epochs == [0, 1]
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (1, 3)


def test_the_reported_early_stopper_run_trains_after_the_fix():
    """The tester's run: SaveLogs failed at epoch 0; after the user fixed
    the folder, EarlyStopper saw two validation entries for epoch 0 and
    stopped with 0 updates."""
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    trainer.add_hook(FailsOnce('fails', 'epoch'))
    trainer.add_hook(EarlyStopper('validation.total_loss', patience=1))
    trainer.add_hook(StopAfterEpoch(3))
    net = blob_net()
    with pytest.raises(OSError):
        trainer.train(net, blob_iter(), valid=blob_iter())
    trainer.train(net, blob_iter(), valid=blob_iter())
    epochs = trainer.logs['validation']['total_loss'].epochs
    assert epochs == list(range(trainer.current_epoch_nr + 1))
    assert trainer.current_update_nr > 0


def test_a_train_after_a_failure_at_update_0_calls_the_later_update_hooks():
    """A hook failed in the update round at count 0. The next train() used
    to skip the round: the hooks after the failing one never got their
    update-0 call."""
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Recorder('before', 'update', calls=calls))
    trainer.add_hook(FailsOnce('fails', 'update', calls=calls))
    trainer.add_hook(Recorder('after', 'update', calls=calls))
    trainer.add_hook(StopAfterEpoch(1))
    net = blob_net()
    with pytest.raises(OSError):
        trainer.train(net, blob_iter())
    trainer.train(net, blob_iter())
    # 'before' in the first call; 'fails' and 'after' at update 0 in the
    # second, then all three at updates 1 to 3
    assert calls[:3] == [('update', 0, 0)] * 3
    assert calls[3:] == [('update', 1, u) for u in (1, 2, 3) for _ in range(3)]


def test_a_stop_asked_at_count_0_before_the_failure_still_holds():
    """An update hook asked to stop at count 0, then an epoch hook failed:
    the next train() stops after completing the rounds, as the first would
    have."""
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(StopAtUpdate(0))
    trainer.add_hook(FailsOnce('fails', 'epoch'))
    trainer.add_hook(StopAfterEpoch(1))
    net = blob_net()
    with pytest.raises(OSError):
        trainer.train(net, blob_iter())
    trainer.train(net, blob_iter())
    assert trainer.hooks['fails'].calls == [('epoch', 0, 0)]
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (0, 0)


def test_a_checkpoint_due_at_count_0_is_written_when_the_round_completes(
    tmp_path,
):
    filename = str(tmp_path / 'epoch0.ckpt')
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(SaveCheckpoint(filename))
    trainer.add_hook(FailsOnce('fails', 'epoch'))
    trainer.add_hook(StopAfterEpoch(0))
    net = blob_net()
    with pytest.raises(OSError):
        trainer.train(net, blob_iter())
    assert not (tmp_path / 'epoch0.ckpt').exists()
    trainer.train(net, blob_iter())
    progress = ck.read_checkpoint(filename)['progress']
    assert progress['current_epoch_nr'] == 0 and progress['started'] is True


def test_a_successful_first_train_still_runs_the_rounds_once():
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Recorder('u', 'update', calls=calls))
    trainer.add_hook(Recorder('e', 'epoch', calls=calls))
    trainer.add_hook(StopAfterEpoch(1))
    net = blob_net()
    trainer.train(net, blob_iter())
    trainer.train(net, blob_iter())
    assert calls.count(('update', 0, 0)) == 1 and calls.count(('epoch', 0, 0)) == 1
    assert trainer._progress.initial_calls == {}


def test_a_progress_record_pickled_before_initial_calls_loads():
    progress = TrainingProgress()
    del progress.initial_calls
    restored = pickle.loads(pickle.dumps(progress))
    assert restored.initial_calls == {}


# ---------------------------------------- batches without samples ----


def empty_batch():
    return {'default': np.zeros((1, 0, 4)), 'targets': np.zeros((1, 0, 1))}


def test_training_on_batches_without_samples_is_refused():
    """Like evaluate, training refuses an epoch whose batches all hold no
    samples; it used to run updates and log a training loss of 0.0."""
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(StopAfterEpoch(2))

    def batches():
        yield empty_batch()
        yield empty_batch()

    with pytest.raises(IteratorValidationError) as info:
        trainer.train(blob_net(), FromGenerator(batches))
    message = str(info.value)
    assert "training iterator ('training_data_iter', FromGenerator)" in message
    assert 'yielded 2 batches in epoch 1, all without samples' in message
    assert 'rolling_training' not in trainer.logs


def test_an_epoch_with_some_empty_batches_trains():
    data = blob_data(10)

    def batches():
        yield empty_batch()
        yield data

    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(blob_net(), FromGenerator(batches))
    assert trainer.current_update_nr == 4
    assert all(loss > 0 for loss in trainer.logs['rolling_training']['total_loss'])


@pytest.mark.parametrize('other_rank', [[(2, 0.5)], []])
def test_a_rank_without_samples_trains_if_another_rank_has_some(other_rank):
    """Data-parallel: this rank's part of each batch is empty (a small data
    set split over ranks); the epoch is refused only if every rank's is."""
    comm = FakeGatherComm([{'total_loss': other_rank}])
    progress = TrainingProgress()
    progress.epoch_nr, progress.batches_done = 1, 1
    run = TrainingRun(None, {}, processes_of(comm), progress)
    scores = gather_from_all_ranks({'total_loss': [(0, 0.0)]}, run.processes)
    if other_rank:
        Trainer._check_epoch_samples(run, None, scores)
    else:
        with pytest.raises(IteratorValidationError, match=r'on all 2 ranks'):
            Trainer._check_epoch_samples(run, None, scores)


# ------------------------------------------- calls from own hooks ----


def calls_the_trainer(trainer, method):
    """A hook that at epoch 1 calls ``trainer.<method>`` and records its
    error (the trainer is kept out of the hook's description)."""

    class CallsTheTrainer(Hook):
        errors: list = []

        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if epoch_nr != 1:
                return
            try:
                if method == 'train':
                    trainer.train(blob_net(), blob_iter())
                else:
                    trainer.evaluate(net)
            except TrainingValidationError as err:
                self.errors.append(str(err))

    return CallsTheTrainer('calls')


@pytest.mark.parametrize('method', ['train', 'evaluate'])
def test_train_or_evaluate_from_a_hook_of_train_is_refused(method, tmp_path):
    """The nested call used to run: wrong counters, and its end set the
    outer run to None, so SaveCheckpoint silently wrote nothing after it."""
    filename = str(tmp_path / 'run.ckpt')
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    hook = calls_the_trainer(trainer, method)
    trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(2))
    trainer.add_hook(SaveCheckpoint(filename))
    trainer.train(blob_net(), blob_iter())
    assert len(hook.errors) == 1
    expected = f'Trainer: {method}() was called while train() of the same'
    assert expected in hook.errors[0]
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (2, 6)
    assert trainer.logs['rolling_training']['total_loss'].epochs == [1, 2]
    assert ck.read_checkpoint(filename)['progress']['current_epoch_nr'] == 2
    trainer.add_hook(Recorder('late'))  # free again


@pytest.mark.parametrize('method', ['train', 'evaluate'])
def test_train_or_evaluate_from_a_hook_of_evaluate_is_refused(method):
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.current_epoch_nr = 1
    hook = calls_the_trainer(trainer, method)
    trainer.add_hook(hook)
    trainer.evaluate(blob_net())
    assert len(hook.errors) == 1
    expected = f'Trainer: {method}() was called while evaluate() of the same'
    assert expected in hook.errors[0]
    trainer.add_hook(Recorder('late'))


# ------------------------------------------------------ hook names ----


def test_a_hook_named_like_the_training_log_is_refused():
    """A hook named 'rolling_training' was accepted; its entries mixed
    into the trainer's own training log."""
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    with pytest.raises(TrainingValidationError) as info:
        trainer.add_hook(MonitorLoss('valid', name='rolling_training'))
    message = str(info.value)
    assert "Trainer.add_hook: a hook cannot be named 'rolling_training'" in message
    assert '(MonitorLoss)' in message and "logs under 'rolling_training'" in message
    assert not trainer.hooks


def test_a_reserved_name_set_without_add_hook_is_refused_by_train():
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    calls = []
    trainer.hooks['rolling_training'] = Recorder('rolling_training', calls=calls)
    trainer.add_hook(StopAfterEpoch(1))
    with pytest.raises(TrainingValidationError, match=r'Trainer.train: a hook cannot'):
        trainer.train(blob_net(), blob_iter())
    assert calls == [] and 'rolling_training' not in trainer.logs


# ------------------------------------------ timescale and interval ----


@pytest.mark.parametrize('value', [0, -1, 1.5, True, None, '2'])
def test_a_bad_interval_set_after_add_hook_is_refused_naming_the_hook(value):
    """interval = 0 used to fail with a bare ZeroDivisionError."""
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    hook = StopAfterEpoch(2)
    trainer.add_hook(hook)
    hook.interval = value
    for call in (
        lambda: trainer.train(blob_net(), blob_iter()),
        lambda: trainer.evaluate(blob_net()),
    ):
        with pytest.raises(TrainingValidationError) as info:
            call()
        message = str(info.value)
        assert "hook 'StopAfterEpoch' (StopAfterEpoch)" in message
        assert f'interval={value!r}; expected an int >= 1' in message
    assert trainer.current_update_nr == 0


def test_a_numpy_int_interval_set_after_add_hook_is_an_int():
    """A NumPy integer is accepted as the constructor accepts it."""
    import numpy as np

    trainer = Trainer(SgdStepper(0.01), verbose=False)
    hook = StopAfterEpoch(2)
    trainer.add_hook(hook)
    hook.interval = np.int64(1)
    trainer.train(blob_net(), blob_iter())
    assert trainer.current_epoch_nr == 2


@pytest.mark.parametrize('value', ['Epoch', 'updates', None])
def test_a_bad_timescale_set_after_add_hook_is_refused_naming_the_hook(value):
    """timescale = 'Epoch' used to make the hook never due: a stopping
    hook never stopped the run."""
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    calls = []
    hook = Recorder('rec', calls=calls)
    trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(1))  # ends the run without the fix
    hook.timescale = value
    with pytest.raises(TrainingValidationError) as info:
        trainer.train(blob_net(), blob_iter())
    message = str(info.value)
    assert f"hook 'rec' (Recorder) has timescale={value!r}" in message
    assert "expected 'epoch' or 'update'" in message
    assert trainer.current_update_nr == 0


def test_an_interval_changed_during_training_is_refused_naming_the_hook():
    trainer = Trainer(SgdStepper(0.01), verbose=False)

    class Breaks(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if update_nr == 2:
                trainer.hooks['StopAfterEpoch'].interval = 0

    trainer.add_hook(Breaks('breaks', 'update'))
    trainer.add_hook(StopAfterEpoch(2))
    with pytest.raises(TrainingValidationError, match="hook 'StopAfterEpoch'"):
        trainer.train(blob_net(), blob_iter())
    assert trainer.current_update_nr == 3
