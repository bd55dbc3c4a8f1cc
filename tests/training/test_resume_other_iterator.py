"""A run resumed mid-epoch with a training iterator of fewer batches.

``train`` skips the batches the checkpoint's run had done in its epoch; an
iterator with fewer batches (another batch size) was skipped whole, and
the epoch ended without an update, silently.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import TrainingValidationError

RNG = np.random.RandomState(0)
X = RNG.rand(1, 40, 4)
Y = X.argmax(2)[:, :, None] % 3


class _StopAtUpdate(bs.hooks.Hook):
    def __init__(self, last):
        super().__init__(name='StopAtUpdate', timescale='update', interval=1)
        self.last = last

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if update_nr >= self.last:
            raise StopIteration


def _net():
    bs.global_rnd.set_seed(2)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    return net


def _batches(size):
    return bs.data_iterators.Minibatches(size, shuffle=False, default=X, targets=Y)


def _generated(size):
    """The batches of ``_batches(size)`` from a generator (no length)."""

    def batches():
        for start in range(0, 40, size):
            yield {
                'default': X[:, start : start + size],
                'targets': Y[:, start : start + size],
            }

    return bs.data_iterators.FromGenerator(batches)


def _checkpoint(tmp_path):
    """Train on batches of 5 (8 an epoch); checkpoint at update 12 (epoch 2,
    4 batches done)."""
    path = str(tmp_path / 'run.ckpt')
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.SaveCheckpoint(path, timescale='update', interval=12))
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    trainer.add_hook(_StopAtUpdate(12))
    trainer.train(_net(), _batches(5))
    return path


def _resumed(path):
    trainer, net = bs.Trainer.from_checkpoint(path)
    del trainer.hooks['StopAtUpdate']
    return trainer, net


def test_an_iterator_with_a_length_is_refused_before_anything_is_restored(tmp_path):
    path = _checkpoint(tmp_path)
    trainer, net = _resumed(path)
    before = net.get('parameters')
    with pytest.raises(
        TrainingValidationError, match='after 4 batches of epoch 2.*has 2 batches'
    ):
        trainer.train(net, _batches(20))
    np.testing.assert_array_equal(net.get('parameters'), before)
    assert trainer.current_update_nr == 12
    # the same trainer then continues exactly with the right iterator
    trainer.train(net, _batches(5))
    whole = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    whole.add_hook(bs.hooks.StopAfterEpoch(3))
    reference = _net()
    whole.train(reference, _batches(5))
    assert trainer.current_update_nr == whole.current_update_nr == 24
    np.testing.assert_array_equal(net.get('parameters'), reference.get('parameters'))


def test_an_iterator_without_a_length_is_refused_when_its_batches_run_out(tmp_path):
    path = _checkpoint(tmp_path)
    trainer, net = _resumed(path)
    before = net.get('parameters')
    with pytest.raises(
        TrainingValidationError, match='after 4 batches of epoch 2.*only 2'
    ):
        trainer.train(net, _generated(20))
    np.testing.assert_array_equal(net.get('parameters'), before)
    assert trainer.current_update_nr == 12
