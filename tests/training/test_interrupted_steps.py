"""A Ctrl-C during a training step or a SaveBestNetwork save leaves whole state.

A Ctrl-C inside the parameter update stopped it between two chunks: the
network held a mixture of two steps' parameters, and the update counter
already counted the step, without a word. A Ctrl-C while SaveBestNetwork
prepared its file (after it had recorded the entry as judged, before the
file was written) lost the best network for good: later entries were
compared with a network never saved. Both now hold the Ctrl-C back until
the step or the save is whole, then raise it.
"""

import signal
import threading

import numpy as np
import pytest

import brainstorm as bs


def _setup(stepper, *hooks, epochs=3):
    bs.global_rnd.set_seed(5)
    rnd = np.random.RandomState(1)
    x, y = rnd.randn(1, 24, 4), rnd.randint(0, 3, (1, 24, 1))
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(6, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(0.3), seed=2)
    trainer = bs.Trainer(stepper, verbose=False)
    trainer.add_hook(bs.hooks.MonitorLoss('valid', name='validation'))
    for hook in hooks:
        trainer.add_hook(hook)
    trainer.add_hook(bs.hooks.StopAfterEpoch(epochs))
    train = bs.data_iterators.Minibatches(4, default=x, targets=y, shuffle=False)
    valid = bs.data_iterators.Minibatches(
        6, default=x[:, :12] + 0.5, targets=y[:, :12], shuffle=False
    )
    return net, trainer, train, valid


class InterruptedMomentum(bs.training.MomentumStepper):
    """A Ctrl-C arrives at the start of the update of step ``at``."""

    at = 7
    steps = 0

    def _update(self):
        type(self).steps += 1
        if type(self).steps == self.at:
            signal.raise_signal(signal.SIGINT)
        super()._update()


@pytest.fixture
def default_sigint():
    if threading.current_thread() is not threading.main_thread():
        pytest.skip('signals go to the main thread')
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_step_interrupted_in_its_update_is_whole(default_sigint):
    net, trainer, train, valid = _setup(bs.training.MomentumStepper(0.1, 0.9))
    counts = []

    class Record(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            counts.append((update_nr, net.get('parameters').copy()))

    trainer.add_hook(Record(timescale='update'))
    trainer.train(net, train, valid=valid)
    after = dict(counts)

    InterruptedMomentum.steps = 0
    net, trainer, train, valid = _setup(InterruptedMomentum(0.1, 0.9))
    with pytest.raises(KeyboardInterrupt):
        trainer.train(net, train, valid=valid)
    assert trainer.current_update_nr == InterruptedMomentum.at
    np.testing.assert_array_equal(net.get('parameters'), after[InterruptedMomentum.at])
    trainer.train(net, train, valid=valid)  # goes on after the Ctrl-C
    assert trainer.current_update_nr > InterruptedMomentum.at
    assert np.isfinite(net.get('parameters')).all()


def test_a_save_of_the_best_network_interrupted_is_kept(tmp_path, default_sigint):
    best = bs.hooks.SaveBestNetwork(
        'validation.total_loss', filename=str(tmp_path / 'best.h5'), criterion='min'
    )
    net, trainer, train, valid = _setup(bs.training.SgdStepper(0.2), best, epochs=4)
    original = net.save_as_hdf5
    saves = []

    def interrupted_save(filename, comment=''):
        saves.append(filename)
        if len(saves) == 2:  # the second new best: Ctrl-C before the write
            signal.raise_signal(signal.SIGINT)
        original(filename, comment)

    net.save_as_hdf5 = interrupted_save
    with pytest.raises(KeyboardInterrupt):
        trainer.train(net, train, valid=valid)
    kept = net.get('parameters').copy()
    np.testing.assert_array_equal(
        bs.Network.from_hdf5(str(tmp_path / 'best.h5')).get('parameters'), kept
    )
    log = list(trainer.logs['validation']['total_loss'])
    assert log[-1] == min(log)  # the interrupted save was a new best
