"""The empty-data rule: no figure over no data, and no training on nothing.

Before, evaluating or training over an empty data source reported
``total_loss = 0.0``, a perfect score for SaveBestNetwork and EarlyStopper.
Now iterators refuse arrays without samples when they are built, and
``evaluate``, the monitors and the trainer refuse an iterator that yields
no batch (or only empty ones) where they use it, naming it.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import DataIterator, Minibatches, Undivided
from brainstorm.utils import IteratorValidationError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.1, seed=1)
    return net


def _good(n=4):
    return Minibatches(2, default=np.ones((1, n, 2)), targets=np.zeros((1, n, 1)))


class Empty(DataIterator):
    """A user's iterator that yields nothing (e.g. a filter that kept nothing)."""

    def __init__(self):
        super().__init__({'default': (1, 4, 2), 'targets': (1, 4, 1)}, 0)

    def __call__(self, handler=None):
        return iter(())


@pytest.mark.parametrize('shape', [(1, 0, 2), (0, 3, 2), (0, 0, 2)])
@pytest.mark.parametrize('make', [Minibatches, Undivided])
def test_iterators_refuse_data_without_samples(make, shape):
    kwargs = {'default': np.ones(shape), 'targets': np.zeros(shape[:2] + (1,))}
    with pytest.raises(IteratorValidationError) as info:
        make(**kwargs) if make is Undivided else make(2, **kwargs)
    message = str(info.value)
    assert f'{make.__name__}: data ' in message and 'holds no samples' in message
    assert str(shape) in message


def test_one_sample_and_one_time_step_are_enough():
    x, y = np.ones((1, 1, 2)), np.zeros((1, 1, 1))
    assert Minibatches(5, default=x, targets=y).length == 1
    result = bs.tools.evaluate(_net(), Undivided(default=x, targets=y))
    assert result['total_loss'] > 0


def test_evaluate_refuses_an_iterator_that_yields_no_batch():
    with pytest.raises(IteratorValidationError, match=r'evaluate: .* yielded no batch'):
        bs.tools.evaluate(_net(), Empty())
    with pytest.raises(IteratorValidationError, match='yielded no batch'):
        bs.tools.evaluate(_net(), [])


def test_evaluate_refuses_batches_without_samples():
    batch = {'default': np.ones((1, 0, 2)), 'targets': np.zeros((1, 0, 1))}
    with pytest.raises(IteratorValidationError, match='2 batches, all without samples'):
        bs.tools.evaluate(_net(), [batch, batch])


def test_a_monitor_on_an_empty_iterator_is_refused_naming_it():
    trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
    trainer.add_hook(bs.hooks.MonitorLoss('valid', name='validation'))
    trainer.add_hook(
        bs.hooks.SaveBestNetwork('validation.total_loss', criterion='min', name='best')
    )
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    with pytest.raises(IteratorValidationError) as info:
        trainer.train(_net(), _good(), valid=Empty())
    assert (
        "MonitorLoss 'validation': the data iterator 'valid' yielded no batch"
        in str(info.value)
    )
    # no 0.0 was logged for SaveBestNetwork to take as the best
    assert 'validation' not in trainer.logs
    assert trainer.hooks['best'].parameters is None


def test_monitor_scores_on_an_empty_iterator_is_refused_too():
    trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
    trainer.add_hook(
        bs.hooks.MonitorScores(
            'valid', [bs.scorers.Accuracy(out_name='Output.outputs.predictions')]
        )
    )
    with pytest.raises(IteratorValidationError, match="MonitorScores 'MonitorScores'"):
        trainer.evaluate(_net(), valid=Empty())


def test_training_on_an_iterator_that_yields_no_batch_is_refused():
    trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    with pytest.raises(IteratorValidationError) as info:
        trainer.train(_net(), Empty())
    message = str(info.value)
    assert "training iterator ('training_data_iter', Empty)" in message
    assert 'yielded no batch in epoch 1' in message
    assert 'rolling_training' not in trainer.logs


def test_the_rule_in_a_fresh_process(tmp_path):
    code = textwrap.dedent(
        """
        import numpy as np
        import brainstorm as bs
        inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
        net = bs.Network.from_layer(inp >> out)
        net.initialize(0.1)
        x = np.ones((1, 10, 2))[:, 10:]  # a filter that kept nothing
        try:
            data = bs.data_iterators.Minibatches(
                5, default=x, targets=np.zeros((1, 0, 1)))
            print('SCORE', bs.tools.evaluate(net, data)['total_loss'])
        except bs.utils.IteratorValidationError as err:
            print('REFUSED', err)
        """
    )
    result = subprocess.run(
        [sys.executable, '-c', code],
        cwd=tmp_path,
        env=dict(os.environ, PYTHONPATH=ROOT),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('REFUSED Minibatches'), result.stdout
