"""The rules of the stopping hooks and SaveBestNetwork at their edges.

Declared arguments and their defaults, the bounds of thresholds, which
entry and which loss StopOnNan looks at, and what the hooks say when they
stop (found by mutation testing, tools/mutation.py).
"""

import inspect
import logging
import math

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.arguments import REQUIRED, declared_arguments
from brainstorm.describable import create_from_description
from brainstorm.hooks import (
    EarlyStopper,
    SaveBestNetwork,
    StopAfterThresholdReached,
    StopOnNan,
)
from brainstorm.training.utils import LogEntries
from brainstorm.utils import TrainingValidationError

HOOKS = [EarlyStopper, StopAfterThresholdReached, StopOnNan, SaveBestNetwork]


def _logs(**entries):
    return {'validation': {k: LogEntries(v) for k, v in entries.items()}}


@pytest.mark.parametrize('cls', HOOKS)
def test_declared_defaults_are_the_signature_defaults(cls):
    """A description without a key restores the same value as a call
    without the argument."""
    parameters = inspect.signature(cls.__init__).parameters
    checked = 0
    for name, arg in declared_arguments(cls).items():
        if name in parameters and arg.default is not REQUIRED:
            assert arg.default == parameters[name].default, name
            checked += 1
    assert checked >= 2


def test_the_defaults():
    stopper = EarlyStopper('validation.total_loss')
    assert (stopper.patience, stopper.criterion) == (1, 'min')
    restored = create_from_description(
        {'@type': 'EarlyStopper', 'log_name': 'validation.total_loss'}
    )
    assert (restored.patience, restored.criterion) == (1, 'min')
    nan = create_from_description({'@type': 'StopOnNan'})
    assert nan.check_parameters is True and nan.check_training_loss is True
    assert StopOnNan().check_parameters is True
    assert StopOnNan().check_training_loss is True
    assert StopAfterThresholdReached('a', 1).criterion == 'min'
    assert SaveBestNetwork('a').criterion == 'max'
    assert SaveBestNetwork('a').filename is None


GOOD = {
    EarlyStopper: dict(log_name='x', patience=1, criterion='max'),
    StopAfterThresholdReached: dict(log_name='x', threshold=1, criterion='max'),
    SaveBestNetwork: dict(log_name='x', filename='a.h5', criterion='min'),
}


@pytest.mark.parametrize(
    'cls, bad, message',
    [
        (EarlyStopper, dict(patience=0), 'patience must be a positive int'),
        (EarlyStopper, dict(criterion='mean'), 'criterion must be one of'),
        (EarlyStopper, dict(log_name=''), 'log_name must be a non-empty str'),
        (StopAfterThresholdReached, dict(log_name=''), 'log_name must be a non-empty'),
        (StopAfterThresholdReached, dict(threshold=math.nan), 'threshold must be a'),
        (StopAfterThresholdReached, dict(threshold=math.inf), 'threshold must be a'),
        (StopAfterThresholdReached, dict(criterion='avg'), 'criterion must be'),
        (SaveBestNetwork, dict(log_name=''), 'log_name must be a non-empty'),
        (SaveBestNetwork, dict(criterion='best'), 'criterion must be'),
        (SaveBestNetwork, dict(filename=''), 'filename must be None or'),
    ],
)
def test_bad_arguments_are_refused(cls, bad, message):
    # a control: with good arguments the hook is made
    assert isinstance(cls(**GOOD[cls]), cls)
    with pytest.raises(TrainingValidationError, match=message):
        cls(**{**GOOD[cls], **bad})


def test_the_smallest_patience_is_one():
    stopper = EarlyStopper('validation.v', patience=1)
    stopper.run_verbosity = False
    assert stopper(1, 1, None, None, _logs(v=[1.0])) is None
    with pytest.raises(StopIteration):
        stopper(2, 2, None, None, _logs(v=[1.0, 1.0]))


@pytest.mark.parametrize(
    'criterion, values', [('min', [2.0, 1.0]), ('max', [0.0, 1.0])]
)
def test_the_threshold_itself_is_reached(criterion, values):
    hook = StopAfterThresholdReached('validation.v', 1.0, criterion=criterion)
    hook.run_verbosity = False
    assert hook(1, 1, None, None, _logs(v=values[:1])) is None
    with pytest.raises(StopIteration):
        hook(2, 2, None, None, _logs(v=values))
    nearly = np.nextafter(1.0, values[0])
    assert hook(2, 2, None, None, _logs(v=[values[0], nearly])) is None


def test_the_hooks_say_why_they_stop(caplog):
    stopper = EarlyStopper('validation.v', patience=2)
    threshold = StopAfterThresholdReached('validation.v', 0.5)
    for hook in (stopper, threshold):
        hook.run_verbosity = True
    with caplog.at_level(logging.INFO, logger='brainstorm'):
        with pytest.raises(StopIteration):
            stopper(3, 3, None, None, _logs(v=[1.0, 2.0, 3.0]))
        with pytest.raises(StopIteration):
            threshold(3, 3, None, None, _logs(v=[1.0, 0.5]))
    text = caplog.text
    assert "EarlyStopper >> Stopping because 'validation.v' did not improve" in text
    assert 'for 2 checks.' in text
    assert 'reached the threshold 0.5.' in text


# ----------------------------------------------------------- StopOnNan ---


def _net_with_loss(value):
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.5)
    targets = np.full((1, 2, 1), value)
    net.provide_external_data(
        {'default': np.ones((1, 2, 2)), 'targets': targets}, check_finite=False
    )
    with np.errstate(all='ignore'):
        net.forward_pass()
    return net


def test_stop_on_nan_per_update_ignores_the_loss_before_the_first_update():
    """At update 0 no batch of this run was seen: the network's loss is
    that of an earlier forward pass, not of training."""
    net = _net_with_loss(math.nan)
    hook = StopOnNan(timescale='update', check_parameters=False)
    assert hook(0, 0, net, None, {}) is None
    with pytest.raises(StopIteration, match='the training loss is not finite'):
        hook(1, 1, net, None, {})
    assert StopOnNan(timescale='update')(1, 1, _net_with_loss(0.0), None, {}) is None


def test_stop_on_nan_per_epoch_checks_the_last_rolling_loss():
    net = _net_with_loss(0.0)
    hook = StopOnNan(check_parameters=False)
    logs = {'rolling_training': {'total_loss': [math.nan, 1.0]}}
    assert hook(2, 2, net, None, logs) is None
    logs = {'rolling_training': {'total_loss': [1.0, math.inf]}}
    with pytest.raises(StopIteration):
        hook(2, 2, net, None, logs)
    # a network with several losses logs 'total_loss' too; without
    # rolling_training (epoch 0) there is nothing to check
    assert hook(0, 0, net, None, {}) is None


def test_stop_on_nan_checks_the_parameters_unless_told_not_to():
    net = _net_with_loss(0.0)
    params = net.buffer.parameters
    params[1] = math.nan
    with pytest.raises(StopIteration, match='a parameter is not finite'):
        StopOnNan(check_training_loss=False)(1, 1, net, None, {})
    assert StopOnNan(check_parameters=False)(1, 1, net, None, {}) is None


def test_stop_on_nan_warns_even_when_quiet(caplog):
    hook = StopOnNan('validation.v', check_parameters=False, check_training_loss=False)
    hook.run_verbosity = False
    with caplog.at_level(logging.WARNING, logger='brainstorm'):
        with pytest.raises(StopIteration):
            hook(1, 1, None, None, _logs(v=[math.nan]))
    assert "StopOnNan >> Stopping because log 'validation.v' is not finite." in (
        caplog.text
    )


# ----------------------------------------------------- SaveBestNetwork ---


class _Net:
    def __init__(self):
        self.saved = []

    def get(self, what):
        self.saved.append(what)
        return np.arange(3.0)

    def save_as_hdf5(self, filename):
        self.saved.append(filename)


@pytest.mark.parametrize(
    'criterion, earlier, between',
    [('min', [0.5, 0.3], 0.4), ('max', [0.5, 0.7], 0.6)],
)
def test_save_best_network_compares_with_the_best_not_the_worst(
    criterion, earlier, between
):
    best = min(earlier) if criterion == 'min' else max(earlier)
    better = best - 0.1 if criterion == 'min' else best + 0.1
    # each a new hook: one judges each entry once
    for last, saved in [(between, []), (best, []), (better, ['parameters'])]:
        hook = SaveBestNetwork('validation.v', criterion=criterion)
        hook.run_verbosity = False
        net = _Net()
        hook(3, 3, net, None, _logs(v=[*earlier, last]))  # equal: not better
        assert net.saved == saved, last


def test_save_best_network_says_what_it_keeps(caplog, tmp_path):
    in_memory = SaveBestNetwork('validation.v', name='best')
    to_file = SaveBestNetwork(
        'validation.v', filename=str(tmp_path / 'best.h5'), name='best_file'
    )
    for hook in (in_memory, to_file):
        hook.run_verbosity = True
    with caplog.at_level(logging.INFO, logger='brainstorm'):
        in_memory(1, 1, _Net(), None, _logs(v=[0.25]))
        to_file(1, 1, _Net(), None, _logs(v=[0.25]))
    assert 'best >> validation.v improved to 0.25; keeping the parameters.' in (
        caplog.text
    )
    assert (
        f'best_file >> validation.v improved to 0.25; saving network to '
        f"'{tmp_path / 'best.h5'}'." in caplog.text
    )


def test_save_best_network_state_round_trip():
    hook = SaveBestNetwork('validation.v')
    assert hook.get_state() == {'judged': 0}
    hook.set_state({})
    assert hook.parameters is None
    hook.run_verbosity = False
    hook(1, 1, _Net(), None, _logs(v=[0.5]))
    state = hook.get_state()
    np.testing.assert_array_equal(state['parameters'], np.arange(3.0))
    other = SaveBestNetwork('validation.v')
    other.set_state(state)
    np.testing.assert_array_equal(other.parameters, np.arange(3.0))
    np.testing.assert_array_equal(other.load_best_network(), np.arange(3.0))


@pytest.mark.parametrize('timescale, updates', [('epoch', 8), ('update', 5)])
def test_stop_after_epoch_at_each_timescale(timescale, updates):
    """As its docstring says: whole epochs at the epoch timescale; at the
    update timescale, the first update of epoch max_epochs ends the run."""
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    x = np.random.RandomState(0).rand(1, 16, 2)
    data = bs.data_iterators.Minibatches(
        4, default=x, targets=(x[..., :1] > 0.5).astype(int)
    )
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2, timescale=timescale))
    trainer.train(net, data)
    assert trainer.current_update_nr == updates
