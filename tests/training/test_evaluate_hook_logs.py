"""Trainer.evaluate gives its hooks the training logs, and other trainer fixes.

``evaluate`` used to call the hooks with ``logs=trainer.results``: a
SaveLogs hook rewrote the logs file with the evaluation's one entry, a
SaveBestNetwork judged that entry as a new run's first (and saved the
current, worse network over the best one), ReduceOnPlateau started
afresh. As in Brainstorm 0.5, hooks now read ``trainer.logs``, and only
their results go into ``trainer.results``.
"""

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import DataIterator, Minibatches
from brainstorm.errors import IteratorValidationError
from brainstorm.hooks import (
    Hook,
    MonitorLoss,
    ProgressBar,
    ReduceOnPlateau,
    SaveBestNetwork,
    SaveLogs,
    StopAfterEpoch,
)
from brainstorm.training import SgdStepper, Trainer
from tests.training.nets import minibatches, xor_net


def _data(n=24, seed=0):
    """Points in 2-D (the XOR net's input), class 1 above the diagonal."""
    x = np.random.RandomState(seed).rand(1, n, 2)
    return {'default': x, 'targets': (x[..., 1:] > x[..., :1]).astype(int)}


def _validation():
    return Minibatches(4, shuffle=False, **_data(12, seed=5))


def _trained(*hooks, epochs=4, learning_rate=0.5):
    net = xor_net()
    trainer = Trainer(SgdStepper(learning_rate), verbose=False)
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    for hook in hooks:
        trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(epochs))
    valid = _validation()
    trainer.train(net, minibatches(_data(), 8), valid=valid)
    return net, trainer, valid


def test_evaluate_leaves_the_logs_file_of_save_logs(tmp_path):
    filename = str(tmp_path / 'logs.h5')
    net, trainer, valid = _trained(SaveLogs(filename))
    with h5py.File(filename, 'r') as f:
        before = f['validation/total_loss'][()]
    assert len(before) == 5
    results = trainer.evaluate(net, valid=valid)
    assert len(results['validation']['total_loss']) == 1
    with h5py.File(filename, 'r') as f:
        np.testing.assert_array_equal(f['validation/total_loss'][()], before)
        assert 'rolling_training' in f


def test_evaluate_does_not_overwrite_the_best_network(tmp_path):
    filename = str(tmp_path / 'best.hdf5')
    hook = SaveBestNetwork('validation.total_loss', filename=filename, criterion='min')
    net, trainer, valid = _trained(hook)
    best = bs.Network.from_hdf5(filename).get('parameters')
    # the network now differs from the best one saved
    net.handler.set_from_numpy(net.buffer.parameters, net.get('parameters') + 1.0)
    trainer.evaluate(net, valid=valid)
    np.testing.assert_array_equal(
        bs.Network.from_hdf5(filename).get('parameters'), best
    )


def test_evaluate_keeps_the_state_of_reduce_on_plateau():
    hook = ReduceOnPlateau('validation.total_loss', patience=1, criterion='max')
    net, trainer, valid = _trained(hook)
    state = (hook._best, hook._bad_checks, hook._seen)
    rate = trainer.stepper.learning_rate
    trainer.evaluate(net, valid=valid)
    assert (hook._best, hook._bad_checks, hook._seen) == state
    assert trainer.stepper.learning_rate == rate


def test_evaluate_logs_the_results_of_hooks_that_read_the_logs():
    class Length(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            return len(logs['validation']['total_loss'])

    net, trainer, valid = _trained(Length(name='length'))
    assert trainer.logs['length'][-1] == 5
    results = trainer.evaluate(net, valid=valid)
    # the hook saw the 5 training entries, not the evaluation's 1
    assert results['length'] == [5]
    assert trainer.logs['length'][-1] == 5 and len(trainer.logs['length']) == 5


def test_evaluate_runs_with_a_progress_bar():
    """ProgressBar.start refused the missing training iterator."""
    net, trainer, valid = _trained(ProgressBar())
    results = trainer.evaluate(net, valid=valid)
    assert list(results['validation']) == ['total_loss']


def test_reduce_on_plateau_counts_each_entry_whatever_its_interval():
    """Bad checks in a row past the patience were lost when a good entry
    followed before the next call: interval 3 and 4 reduced less often."""
    sequence = [1.0, 2.0, 3.0, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]

    class Scripted(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            return sequence[epoch_nr]

    rates = []
    for interval in (1, 2, 3, 4):
        trainer = Trainer(SgdStepper(1.0), verbose=False)
        trainer.add_hook(Scripted(name='metric'))
        trainer.add_hook(
            ReduceOnPlateau('metric', factor=0.5, patience=1, interval=interval)
        )
        trainer.add_hook(StopAfterEpoch(12))
        trainer.train(xor_net(), minibatches(_data(), 8))
        rates.append(trainer.stepper.learning_rate)
    assert rates == [0.03125] * 4


class _Empty(DataIterator):
    def __init__(self):
        super().__init__({'default': (1, 4, 2), 'targets': (1, 4, 1)}, 0)

    def __call__(self, handler=None):
        return iter(())


def test_a_train_refused_for_an_empty_iterator_counts_no_epoch():
    """The refused epoch stayed counted: a retry numbered its first epoch
    2, and StopAfterEpoch(3) trained two epochs."""
    net = xor_net()
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(StopAfterEpoch(3))
    with pytest.raises(IteratorValidationError, match='yielded no batch in epoch 1'):
        trainer.train(net, _Empty())
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (0, 0)
    trainer.train(net, minibatches(_data(), 8))
    assert trainer.logs['rolling_training']['total_loss'].epochs == [1, 2, 3]


def _regression(valid_targets, dtype=np.float64):
    inp, out = bs.tools.get_in_out_layers('regression', 4, 2)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(bs.handlers.NumpyHandler(dtype))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    x = np.random.RandomState(0).rand(1, 40, 4)
    y = np.random.RandomState(1).rand(1, 40, 2)
    train = Minibatches(10, shuffle=False, default=x, targets=y)
    valid = Minibatches(40, default=x, targets=np.full_like(y, valid_targets))
    return net, train, valid


def test_stop_on_nan_after_an_update_monitor_reads_the_training_loss():
    """The monitor's evaluation left its own (overflowing) loss in the
    network: StopOnNan stopped for a finite training loss."""
    net, train, valid = _regression(1e30, np.float32)  # squares overflow
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(
        MonitorLoss('valid', name='validation', timescale='update', interval=3)
    )
    trainer.add_hook(bs.hooks.StopOnNan(timescale='update', check_parameters=False))
    trainer.add_hook(StopAfterEpoch(2))
    with np.errstate(over='ignore', invalid='ignore'):
        trainer.train(net, train, valid=valid)
    assert not np.isfinite(trainer.logs['validation']['total_loss'][-1])
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (2, 8)
    assert 'StopOnNan' not in trainer.logs


def test_an_update_monitor_leaves_the_training_batch_loss_in_the_network():
    class Loss(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            return net.get_loss_values()['total_loss']

    net, train, valid = _regression(3.0)
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(MonitorLoss('valid', name='validation', timescale='update'))
    trainer.add_hook(Loss(name='seen', timescale='update'))
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(net, train, valid=valid)
    seen = trainer.logs['seen'][1:]  # after each update (not at count 0)
    assert len(seen) == 4
    # the mean of the batch losses is the epoch's rolling training loss
    np.testing.assert_allclose(
        np.mean(seen), trainer.logs['rolling_training']['total_loss'][-1]
    )
