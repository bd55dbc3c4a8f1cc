"""Hooks watching a log: wrong kinds of logs, and non-finite entries.

A log of the wrong kind gets the library's error naming the hook, the log
and what it holds (before: a bare KeyError, TypeError or ValueError, or a
None taken for NaN). NaN and infinite entries are never the best value.
"""

import math

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.training.utils import LogEntries
from brainstorm.utils import TrainingValidationError

NAN, INF = math.nan, math.inf


class _FakeNet:
    """Just enough network for the hooks that keep parameters."""

    def __init__(self):
        self.saved = []

    def get(self, what):
        self.saved.append(what)
        return np.zeros(1)


def _logs(**entries):
    return {'validation': {k: LogEntries(v) for k, v in entries.items()}}


def _watchers(log_name):
    return [
        bs.hooks.SaveBestNetwork(log_name, name='best'),
        bs.hooks.EarlyStopper(log_name, name='early'),
        bs.hooks.StopAfterThresholdReached(log_name, 0.1, name='threshold'),
        bs.hooks.ReduceOnPlateau(log_name, name='plateau'),
    ]


def _call(hook, logs, epoch=3):
    hook.run_verbosity = False
    stepper = bs.training.SgdStepper(learning_rate=1.0)
    return hook(epoch, epoch, _FakeNet(), stepper, logs)


@pytest.mark.parametrize('index', range(4))
def test_a_group_of_logs_is_refused_naming_hook_log_and_entries(index):
    hook = _watchers('validation')[index]
    logs = _logs(total_loss=[1.0, 0.5], Accuracy=[0.2, 0.3])
    with pytest.raises(TrainingValidationError) as info:
        _call(hook, logs)
    message = str(info.value)
    assert f"'{hook.__name__}'" in message
    assert "log 'validation'" in message
    assert "'total_loss'" in message and "'Accuracy'" in message
    assert "'validation.total_loss'" in message


@pytest.mark.parametrize('index', range(4))
@pytest.mark.parametrize(
    'bad, shown',
    [
        ('high', "'high' (str)"),
        (None, 'None (NoneType)'),
        ({'a': 1}, "{'a': 1} (dict)"),
    ],
)
def test_an_entry_that_is_no_number_is_refused(index, bad, shown):
    hook = _watchers('validation.total_loss')[index]
    logs = _logs(total_loss=[1.0, bad, 0.5])
    with pytest.raises(TrainingValidationError) as info:
        _call(hook, logs)
    message = str(info.value)
    assert f"'{hook.__name__}'" in message
    assert "'validation.total_loss'" in message
    assert shown in message and 'entry 1' in message


def test_stop_on_nan_refuses_a_group_and_a_non_numeric_entry():
    hook = bs.hooks.StopOnNan(
        'validation', check_parameters=False, check_training_loss=False
    )
    with pytest.raises(TrainingValidationError, match="log 'validation' is a group"):
        _call(hook, _logs(total_loss=[1.0]))
    hook = bs.hooks.StopOnNan(
        'validation.x', check_parameters=False, check_training_loss=False
    )
    with pytest.raises(TrainingValidationError, match=r"ends with 'nan' \(str\)"):
        _call(hook, _logs(x=[1.0, 'nan']))


@pytest.mark.parametrize('last', [NAN, INF, -INF])
def test_stop_on_nan_stops_on_each_non_finite_kind(last):
    hook = bs.hooks.StopOnNan(
        'validation.x', check_parameters=False, check_training_loss=False
    )
    with pytest.raises(StopIteration):
        _call(hook, _logs(x=[1.0, last]))
    # arrays: one bad element among good ones
    with pytest.raises(StopIteration):
        _call(hook, _logs(x=[np.array([1.0, last, 2.0])]))
    assert _call(hook, _logs(x=[last, 1.0])) is None
    assert _call(hook, _logs(x=[np.array([1.0, 2.0])])) is None


# ------------------------------------------------ EarlyStopper and NaN ---


@pytest.mark.parametrize('bad', [NAN, -INF])
def test_early_stopper_min_never_takes_a_non_finite_entry_as_best(bad):
    # best finite entry is 0.5 at index 1; the bad entry at index 2 must
    # not reset the count: 4 entries > 1 + patience 2
    hook = bs.hooks.EarlyStopper('validation.total_loss', patience=2)
    with pytest.raises(StopIteration):
        _call(hook, _logs(total_loss=[1.0, 0.5, bad, 0.7]))


@pytest.mark.parametrize('bad', [NAN, INF])
def test_early_stopper_max_never_takes_a_non_finite_entry_as_best(bad):
    hook = bs.hooks.EarlyStopper('validation.A', patience=2, criterion='max')
    with pytest.raises(StopIteration):
        _call(hook, _logs(A=[0.1, 0.5, bad, 0.3]))


def test_early_stopper_first_best_counts_and_patience_is_exact():
    hook = bs.hooks.EarlyStopper('validation.total_loss', patience=2)
    # best at index 1; 3 entries is not more than 1 + 2
    assert _call(hook, _logs(total_loss=[1.0, 0.5, 0.7, NAN][:3])) is None
    assert _call(hook, _logs(total_loss=[1.0, 0.5, 0.5])) is None
    with pytest.raises(StopIteration):
        _call(hook, _logs(total_loss=[1.0, 0.5, 0.5, 0.5]))
    # a NaN first entry is not the best: the best is 0.5 at index 2
    assert _call(hook, _logs(total_loss=[NAN, 1.0, 0.5, 0.9])) is None
    hook = bs.hooks.EarlyStopper('validation.total_loss', patience=1)
    # no finite entry: index 0 counts as the best
    assert _call(hook, _logs(total_loss=[NAN])) is None
    with pytest.raises(StopIteration):
        _call(hook, _logs(total_loss=[NAN, NAN]))


@pytest.mark.parametrize('bad', [NAN, INF, -INF])
@pytest.mark.parametrize('criterion', ['min', 'max'])
def test_save_best_network_never_keeps_a_non_finite_value(bad, criterion):
    hook = bs.hooks.SaveBestNetwork('validation.v', criterion=criterion)
    net = _FakeNet()
    hook.run_verbosity = False
    better = 0.4 if criterion == 'min' else 0.6
    log = []
    for epoch, (value, saved) in enumerate(
        [(bad, 0), (0.5, 1), (bad, 1), (0.5, 1), (better, 2)]
    ):
        log.append(value)
        # each entry judged in the call at the count it was logged at
        entries = LogEntries(log, epochs=range(len(log)), updates=range(len(log)))
        hook(epoch, epoch, net, None, {'validation': {'v': entries}})
        # a non-finite entry never, and does not block a finite one after
        # it; equal is not better
        assert net.saved == ['parameters'] * saved, (epoch, value)


@pytest.mark.parametrize('bad', [NAN, -INF])
def test_threshold_is_not_reached_by_a_non_finite_entry(bad):
    hook = bs.hooks.StopAfterThresholdReached('validation.v', 0.1)
    assert _call(hook, _logs(v=[1.0, bad])) is None
    with pytest.raises(StopIteration):
        _call(hook, _logs(v=[1.0, bad, 0.1]))  # the bound itself reaches it


@pytest.mark.parametrize('bad', [NAN, -INF])
def test_reduce_on_plateau_never_takes_a_non_finite_entry_as_best(bad):
    stepper = bs.training.SgdStepper(learning_rate=1.0)
    hook = bs.hooks.ReduceOnPlateau('validation.v', patience=1, factor=0.5)
    hook.run_verbosity = False
    # the non-finite first entry is a bad check, 1.0 becomes the best
    hook(1, 1, None, stepper, _logs(v=[bad, 1.0]))
    assert stepper.learning_rate == 1.0
    hook(2, 2, None, stepper, _logs(v=[bad, 1.0, 0.9]))
    assert stepper.learning_rate == 1.0
    # two bad checks in a row (more than patience 1): reduced
    hook(3, 3, None, stepper, _logs(v=[bad, 1.0, 0.9, bad, 0.95]))
    assert stepper.learning_rate == 0.5
