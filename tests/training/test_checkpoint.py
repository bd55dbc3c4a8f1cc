"""Checkpoints: exact resume, atomic writes, bad files."""

import os

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import AddGaussianNoise, Minibatches
from brainstorm.hooks import (
    MonitorLoss,
    ReduceOnPlateau,
    SaveBestNetwork,
    SaveCheckpoint,
    StopAfterEpoch,
)
from brainstorm.scorers import Accuracy
from brainstorm.training import Trainer, checkpoint_file
from brainstorm.training import checkpoint as checkpoint_module
from brainstorm.training.steppers import (
    AdamStepper,
    MomentumStepper,
    MultiStepper,
)
from brainstorm.utils import TrainingValidationError
from tests.training.nets import StopAtUpdate, blob_data, dropout_net, xor_net


def iterators(seed=5):
    """Shuffled, noisy training batches and shuffled validation batches."""
    train = blob_data(40, seed=1)
    valid = blob_data(20, seed=2)
    train_iter = AddGaussianNoise(
        Minibatches(8, shuffle=True, **train), {'default': 0.3}
    )
    valid_iter = Minibatches(7, shuffle=True, **valid)
    return train_iter, {'valid': valid_iter}


def make_run(epochs, filename=None, timescale='epoch', interval=1):
    """A seeded run with dropout, shuffling, noise and stateful steppers."""
    bs.global_rnd.set_seed(123)
    net = dropout_net(seed=7, dtype=np.float64)
    stepper = MultiStepper(
        {'Hid1': AdamStepper(0.01), 'default': MomentumStepper(0.1, 0.9)}
    )
    trainer = Trainer(stepper, verbose=False)
    trainer.train_scorers = [Accuracy()]
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    trainer.add_hook(SaveBestNetwork('validation.total_loss', criterion='min'))
    trainer.add_hook(
        ReduceOnPlateau(
            'validation.total_loss',
            attr_name='steppers.default.learning_rate',
            patience=0,
            factor=0.5,
        )
    )
    if filename is not None:
        trainer.add_hook(
            SaveCheckpoint(filename, timescale=timescale, interval=interval)
        )
    trainer.add_hook(StopAfterEpoch(epochs))
    train_iter, named = iterators()
    return trainer, net, train_iter, named


def test_resume_is_bit_identical(tmp_path):
    filename = str(tmp_path / 'run.ckpt')
    trainer, net, train_iter, named = make_run(4)
    trainer.train(net, train_iter, **named)
    full_params = net.get('parameters')
    full_logs = trainer.logs

    trainer, net, train_iter, named = make_run(2, filename)
    trainer.train(net, train_iter, **named)
    assert trainer.current_epoch_nr == 2
    assert not np.array_equal(net.get('parameters'), full_params)
    del trainer, net
    # something in between uses the global random state
    bs.global_rnd.set_seed(999)
    np.random.seed(0)

    resumed, net = Trainer.from_checkpoint(filename)
    assert (resumed.current_epoch_nr, resumed.current_update_nr) == (2, 10)
    resumed.hooks['StopAfterEpoch'].max_epochs = 4
    train_iter, named = iterators()
    resumed.train(net, train_iter, **named)
    np.testing.assert_array_equal(net.get('parameters'), full_params)
    assert resumed.logs == full_logs
    assert resumed.current_update_nr == 20
    best = resumed.hooks['SaveBestNetwork'].parameters
    assert best is not None and best.shape == full_params.shape


def test_resume_from_the_middle_of_an_epoch(tmp_path):
    filename = str(tmp_path / 'mid.ckpt')
    trainer, net, train_iter, named = make_run(3)
    trainer.train(net, train_iter, **named)
    full_params = net.get('parameters')

    trainer, net, train_iter, named = make_run(3, filename, 'update', 7)
    trainer.add_hook(StopAtUpdate(7))
    trainer.train(net, train_iter, **named)

    resumed, net = Trainer.from_checkpoint(filename)
    assert (resumed.current_epoch_nr, resumed.current_update_nr) == (2, 7)
    del resumed.hooks['StopAtUpdate']
    train_iter, named = iterators()
    resumed.train(net, train_iter, **named)
    assert resumed.current_update_nr == 15
    np.testing.assert_array_equal(net.get('parameters'), full_params)


def test_checkpoint_holds_stepper_and_random_states(tmp_path):
    filename = str(tmp_path / 'state.ckpt')
    trainer, net, train_iter, named = make_run(1, filename)
    trainer.train(net, train_iter, **named)
    data = checkpoint_module.read_checkpoint(filename)
    stepper_state = data['stepper_state']
    assert 'steppers.Hid1.step_count' in stepper_state
    assert int(stepper_state['steppers.Hid1.step_count']) == 5
    velocity = stepper_state['steppers.default.part0.velocity']
    assert velocity.any()
    randoms = data['random_states']
    assert set(randoms['iterators']) == {'training_data_iter', 'valid'}
    assert len(randoms['iterators']['training_data_iter']) == 2
    assert randoms['handler'] is not None
    assert data['progress']['logs']['validation']['total_loss']
    assert 'SaveBestNetwork' in data['hook_states']
    np.testing.assert_array_equal(data['parameters'], net.get('parameters'))


def test_checkpoint_at_epoch_zero(tmp_path):
    """A checkpoint written before training resumes without repeating the
    emission at count 0."""
    filename = str(tmp_path / 'zero.ckpt')
    trainer, net, train_iter, named = make_run(2)
    trainer.train(net, train_iter, **named)
    full_params, full_logs = net.get('parameters'), trainer.logs

    trainer, net, train_iter, named = make_run(0, filename)
    trainer.train(net, train_iter, **named)
    resumed, net = Trainer.from_checkpoint(filename)
    resumed.hooks['StopAfterEpoch'].max_epochs = 2
    train_iter, named = iterators()
    resumed.train(net, train_iter, **named)
    np.testing.assert_array_equal(net.get('parameters'), full_params)
    assert resumed.logs == full_logs


# ------------------------------------------------------------ atomicity ---


def test_crash_during_write_keeps_previous_checkpoint(tmp_path, monkeypatch):
    filename = str(tmp_path / 'safe.ckpt')
    trainer, net, train_iter, named = make_run(1, filename)
    trainer.train(net, train_iter, **named)
    before = os.listdir(tmp_path)

    def crash(*args, **kwargs):
        raise RuntimeError('killed while writing')

    monkeypatch.setattr(checkpoint_file, '_write_random_states', crash)
    trainer.hooks['StopAfterEpoch'].max_epochs = 2
    with pytest.raises(RuntimeError, match='killed while writing'):
        trainer.train(net, train_iter, **named)
    monkeypatch.undo()
    assert os.listdir(tmp_path) == before  # no temporary file left behind
    resumed, _ = Trainer.from_checkpoint(filename)
    assert resumed.current_epoch_nr == 1


def test_unstorable_logs_leave_no_file(tmp_path):
    filename = str(tmp_path / 'bad.ckpt')
    trainer, net, train_iter, named = make_run(1, filename)
    trainer.logs['weird'] = [object()]
    trainer._progress.started = True
    with pytest.raises(TrainingValidationError, match='cannot be stored'):
        trainer.train(net, train_iter, **named)
    assert os.listdir(tmp_path) == []


def test_save_checkpoint_outside_training_is_an_error(tmp_path):
    with pytest.raises(TrainingValidationError, match='during train'):
        Trainer(AdamStepper()).save_checkpoint(str(tmp_path / 'x.ckpt'))


# ------------------------------------------------------------ bad input ---


def test_corrupt_and_foreign_files(tmp_path):
    garbage = tmp_path / 'garbage.ckpt'
    garbage.write_bytes(b'not an hdf5 file at all')
    with pytest.raises(TrainingValidationError, match='garbage.ckpt'):
        Trainer.from_checkpoint(str(garbage))
    with pytest.raises(TrainingValidationError, match='missing'):
        Trainer.from_checkpoint(str(tmp_path / 'nothing.ckpt'))
    network_file = str(tmp_path / 'net.hdf5')
    xor_net().save_as_hdf5(network_file)
    with pytest.raises(TrainingValidationError, match='not a brainstorm checkpoint'):
        Trainer.from_checkpoint(network_file)


def test_truncated_checkpoint(tmp_path):
    filename = str(tmp_path / 'cut.ckpt')
    trainer, net, train_iter, named = make_run(0, filename)
    trainer.train(net, train_iter, **named)
    data = open(filename, 'rb').read()
    with open(filename, 'wb') as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(TrainingValidationError, match='cut.ckpt'):
        Trainer.from_checkpoint(filename)


def test_checkpoint_from_another_network(tmp_path):
    filename = str(tmp_path / 'other.ckpt')
    trainer, net, train_iter, named = make_run(1, filename)
    trainer.train(net, train_iter, **named)
    resumed, _ = Trainer.from_checkpoint(filename)
    train_iter, named = iterators()
    with pytest.raises(TrainingValidationError, match='another network'):
        resumed.train(xor_net(), train_iter, **named)


def test_resume_needs_the_same_iterator_names(tmp_path):
    filename = str(tmp_path / 'names.ckpt')
    trainer, net, train_iter, named = make_run(1, filename)
    trainer.train(net, train_iter, **named)
    resumed, net = Trainer.from_checkpoint(filename)
    train_iter, named = iterators()
    with pytest.raises(TrainingValidationError, match=r"\['training_data"):
        resumed.train(net, train_iter, validation=named['valid'])
    train_iter, named = iterators()
    with pytest.raises(TrainingValidationError, match='wraps 0 iterators'):
        resumed.train(net, train_iter.iter, **named)


def test_hook_state_with_any_name(tmp_path):
    filename = str(tmp_path / 'names.ckpt')
    trainer, net, train_iter, named = make_run(1, filename)
    trainer.add_hook(
        SaveBestNetwork('validation.total_loss', name='best/a_b', criterion='min')
    )
    trainer.train(net, train_iter, **named)
    resumed, _ = Trainer.from_checkpoint(filename)
    assert 'best/a_b' in resumed._progress.resume['hook_states']
    np.testing.assert_array_equal(
        resumed._progress.resume['hook_states']['best/a_b']['parameters'],
        trainer.hooks['best/a_b'].parameters,
    )


# ------------------------------------------------------ module layout -----


def test_file_format_names_stay_importable_from_checkpoint():
    from brainstorm.training import checkpoint_file

    for name in (
        'CHECKPOINT_FORMAT',
        'write_checkpoint',
        'read_checkpoint',
        'get_random_state',
        'set_random_state',
        'check_random_state',
        'iterator_chain',
    ):
        assert getattr(checkpoint_module, name) is getattr(checkpoint_file, name)


@pytest.mark.parametrize(
    'path', ['../x.csv', '/etc/x.csv', 'a/.git/x', 'x.py', 'sitecustomize.txt', '']
)
def test_check_restored_path_refuses_unsafe_paths(path, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainingValidationError, match="hook 'h': refusing"):
        checkpoint_module.check_restored_path("hook 'h'", path)


def test_check_restored_path_accepts_the_checkpoint_folder(tmp_path, monkeypatch):
    run = tmp_path / 'run'
    run.mkdir()
    monkeypatch.chdir(tmp_path)
    checkpoint_module.check_restored_path('h', 'logs.csv')
    monkeypatch.chdir(run)
    with pytest.raises(TrainingValidationError):
        checkpoint_module.check_restored_path('h', str(tmp_path / 'x.csv'))
    checkpoint_module.check_restored_path('h', str(tmp_path / 'x.csv'), [str(tmp_path)])


def test_save_checkpoint_outside_train_is_refused(tmp_path):
    trainer = Trainer(bs.training.SgdStepper(), verbose=False)
    with pytest.raises(TrainingValidationError, match='only possible during'):
        trainer.save_checkpoint(str(tmp_path / 'x.ckpt'))


def test_from_checkpoint_refuses_a_non_bool_trusted(tmp_path):
    with pytest.raises(TrainingValidationError, match='trusted must be a bool'):
        Trainer.from_checkpoint(str(tmp_path / 'x.ckpt'), trusted=1)
