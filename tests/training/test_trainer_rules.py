"""Rules of the Trainer's loop that the mutation runs showed unstated."""

import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.hooks import Hook, StopAfterEpoch
from brainstorm.training import Trainer
from brainstorm.training.steppers import SgdStepper
from brainstorm.training.utils import TrainingValidationError
from brainstorm.utils import IteratorValidationError
from tests.training.nets import Recorder, minibatches, xor_data, xor_net
from tests.training.test_resume_other_iterator import _batches, _net, _StopAtUpdate


class Starts(Hook):
    """Records its start and end calls."""

    __undescribed__ = {'calls': None}

    def __init__(self, name, calls):
        super().__init__(name, 'epoch', 1)
        self.calls = calls

    def start(self, net, stepper, verbose, named_data_iters):
        super().start(net, stepper, verbose, named_data_iters)
        self.calls.append(('start', self.__name__))

    def end(self):
        self.calls.append(('end', self.__name__))

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return None


@pytest.mark.parametrize('method', ['train', 'evaluate'])
def test_a_bad_interval_is_refused_before_any_hook_starts(method):
    calls = []
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(Starts('first', calls))
    late = StopAfterEpoch(1)
    trainer.add_hook(late)
    late.interval = 0
    net = xor_net()
    data = minibatches(xor_data(), batch_size=2, shuffle=False)
    with pytest.raises(TrainingValidationError, match='interval=0'):
        if method == 'train':
            trainer.train(net, data)
        else:
            trainer.evaluate(net, data=data)
    assert calls == []
    assert trainer.current_update_nr == 0


def _headers(text):
    return [line.strip('- ') for line in text.splitlines() if '- Epoch ' in line]


def test_a_verbose_trainer_heads_each_epoch_emission_of_train_only(capsys):
    trainer = Trainer(SgdStepper(0.1), verbose=True)
    trainer.add_hook(Recorder('upd', 'update'))
    trainer.add_hook(StopAfterEpoch(2))
    net = xor_net()
    data = minibatches(xor_data(), batch_size=2, shuffle=False)
    trainer.train(net, data)
    assert _headers(capsys.readouterr().out) == ['Epoch 0', 'Epoch 1', 'Epoch 2']
    trainer.evaluate(net, data=data)
    assert _headers(capsys.readouterr().out) == []


def test_a_quiet_trainer_prints_no_epoch_header(capsys):
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(xor_net(), minibatches(xor_data(), batch_size=2, shuffle=False))
    assert _headers(capsys.readouterr().out) == []


def test_a_checkpoint_at_the_last_batch_of_an_epoch_resumes_exactly(tmp_path):
    # written by an update hook after the epoch's last batch, before its
    # epoch hooks: all 8 batches done, the epoch not complete; an iterator
    # of exactly 8 batches is the right one
    path = str(tmp_path / 'run.ckpt')
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.SaveCheckpoint(path, timescale='update', interval=16))
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    trainer.add_hook(_StopAtUpdate(16))
    trainer.train(_net(), _batches(5))
    resumed, net = bs.Trainer.from_checkpoint(path)
    del resumed.hooks['StopAtUpdate']
    resumed.train(net, _batches(5))
    whole = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    whole.add_hook(bs.hooks.StopAfterEpoch(3))
    reference = _net()
    whole.train(reference, _batches(5))
    assert resumed.current_update_nr == whole.current_update_nr == 24
    assert resumed.current_epoch_nr == 3
    np.testing.assert_array_equal(net.get('parameters'), reference.get('parameters'))


class Breaks(Hook):
    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if update_nr == 2:
            raise ValueError('broken at update 2')


def test_a_train_after_one_ended_mid_epoch_begins_a_new_epoch():
    # 4 batches an epoch; the first run ends with an error after update 2
    calls = []
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(Recorder('upd', 'update', calls=calls))
    trainer.add_hook(Breaks('breaks', 'update'))
    data = minibatches(xor_data(), batch_size=1, shuffle=False)
    net = xor_net()
    with pytest.raises(ValueError, match='broken at update 2'):
        trainer.train(net, data)
    assert calls[-1] == ('update', 1, 2)
    del trainer.hooks['breaks']
    trainer.add_hook(StopAfterEpoch(2))
    del calls[:]
    trainer.train(net, data)
    # all 4 batches of epoch 2, none skipped as done in the broken epoch
    assert calls == [
        ('update', 2, 3),
        ('update', 2, 4),
        ('update', 2, 5),
        ('update', 2, 6),
    ]
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (2, 6)


def test_a_trainer_from_before_check_finite_still_checks():
    # a trainer pickled by a version without check_finite checks by default
    from brainstorm.errors import NonFiniteError

    trainer = Trainer(SgdStepper(1e8), verbose=False)
    trainer.add_hook(StopAfterEpoch(3))
    del trainer.__dict__['check_finite']
    data = minibatches(xor_data(), batch_size=2, shuffle=False)
    with np.errstate(all='ignore'), pytest.raises(NonFiniteError):
        trainer.train(xor_net(), data)
    assert trainer.current_epoch_nr < 3


def test_a_checkpoint_that_cannot_be_written_names_its_hook(tmp_path):
    blocker = tmp_path / 'blocker'
    blocker.write_text('a file, not a folder')
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.SaveCheckpoint(str(blocker / 'run.ckpt'), name='ckpt'))
    trainer.add_hook(StopAfterEpoch(1))
    with pytest.raises(Exception) as info:
        trainer.train(xor_net(), minibatches(xor_data(), batch_size=2, shuffle=False))
    notes = getattr(info.value, '__notes__', [])
    assert any("hook 'ckpt'" in note and 'its epoch call' in note for note in notes)


@pytest.mark.parametrize('method', ['train', 'evaluate'])
def test_a_network_is_free_for_another_thread_after_train_or_evaluate(method):
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    net = xor_net()
    data = minibatches(xor_data(), batch_size=2, shuffle=False)
    if method == 'train':
        trainer.train(net, data)
    else:
        trainer.evaluate(net, data=data)
    errors = []

    def other():
        try:
            later = Trainer(SgdStepper(0.1), verbose=False)
            later.add_hook(StopAfterEpoch(1))
            later.train(net, data)
        except Exception as err:  # reported below
            errors.append(err)

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert errors == []


def test_training_a_network_never_initialised_is_refused():
    from brainstorm.structure.prediction import UninitializedNetworkError
    from brainstorm.tools import get_in_out_layers

    inp, proj = get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> proj)
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    data = minibatches(xor_data(), batch_size=2, shuffle=False)
    with pytest.raises(UninitializedNetworkError, match='never initialised'):
        trainer.train(net, data)
    assert trainer.current_update_nr == 0


def _epoch_run(size, batches_done, rank=1):
    from types import SimpleNamespace

    from brainstorm.training.progress import TrainingProgress

    progress = TrainingProgress()
    progress.epoch_nr = 2
    progress.batches_done = batches_done
    return SimpleNamespace(
        processes=SimpleNamespace(size=size, rank=rank), progress=progress
    )


def _with_length(length):
    """A stand-in training iterator: only its length is read."""
    from types import SimpleNamespace

    return SimpleNamespace() if length is None else SimpleNamespace(length=length)


def test_each_rank_must_yield_the_batches_its_training_iterator_declares():
    # the other ranks still expect a step's collectives: a short epoch on
    # one rank is refused unless a stop ended it
    with pytest.raises(
        IteratorValidationError,
        match='rank 1: the training iterator yielded 3 batches in epoch 2, '
        'but its length is 4',
    ):
        Trainer._check_epoch_length(_epoch_run(2, 3), _with_length(4), False)
    Trainer._check_epoch_length(_epoch_run(2, 4), _with_length(4), False)
    Trainer._check_epoch_length(_epoch_run(2, 3), _with_length(4), True)
    Trainer._check_epoch_length(_epoch_run(2, 3), _with_length(None), False)
    # a single process has no other rank waiting
    Trainer._check_epoch_length(_epoch_run(1, 3, rank=0), _with_length(4), False)
