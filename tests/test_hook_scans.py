"""Hooks that watch a log read only the entries appended since their last call.

EarlyStopper, StopAfterThresholdReached, SaveBestNetwork and
ReduceOnPlateau used to read their whole log at every call: at the update
timescale a run of n updates cost time in n squared (30-40 ms a call at
100 000 entries). Their decisions must stay those of a whole read, for
any log, across copies, pickles and new runs.
"""

import copy
import math
import pickle

import numpy as np
import pytest

from brainstorm.describable import create_from_description, get_description
from brainstorm.hooks import (
    EarlyStopper,
    ReduceOnPlateau,
    SaveBestNetwork,
    StopAfterThresholdReached,
)
from brainstorm.training.steppers import SgdStepper
from tests.training.nets import xor_net

NET = xor_net()


class WatchedLog(list):
    """A log that records the lowest index read through indexing or iteration."""

    lowest = math.inf

    def __getitem__(self, item):
        if isinstance(item, slice):
            start, stop, _ = item.indices(len(self))
            if start < stop:
                self.lowest = min(self.lowest, start)
        else:
            self.lowest = min(self.lowest, item % len(self))
        return super().__getitem__(item)

    def __iter__(self):
        if len(self):
            self.lowest = 0
        return super().__iter__()


def run(hook, log, epoch_nr=1):
    """Call ``hook`` once on ``log``; 'stop' if it stops, else its effect."""
    stepper = SgdStepper(learning_rate=1.0)
    hook.start(NET, stepper, False, {})
    if isinstance(hook, SaveBestNetwork):
        # parameters that tell which call saved them
        values = np.full(NET.buffer.parameters.shape, len(log), np.float64)
        NET.handler.set_from_numpy(NET.buffer.parameters, values)
    try:
        hook(epoch_nr, len(log), NET, stepper, {'val': {'loss': log}})
    except StopIteration:
        return 'stop'
    if isinstance(hook, SaveBestNetwork):
        return None if hook.parameters is None else float(hook.parameters[0])
    if isinstance(hook, ReduceOnPlateau):
        return stepper.learning_rate
    return None


def make(kind, criterion):
    if kind == 'early':
        return EarlyStopper('val.loss', patience=3, criterion=criterion, verbose=False)
    if kind == 'threshold':
        return StopAfterThresholdReached(
            'val.loss', 0.2 if criterion == 'min' else 0.8, criterion, verbose=False
        )
    if kind == 'best':
        return SaveBestNetwork('val.loss', criterion=criterion, verbose=False)
    return ReduceOnPlateau(
        'val.loss',
        'learning_rate',
        factor=0.5,
        patience=2,
        criterion=criterion,
        verbose=False,
    )


KINDS = ['early', 'threshold', 'best', 'plateau']


@pytest.mark.parametrize('kind', KINDS)
def test_a_call_reads_only_the_entries_appended_since_the_last(kind):
    hook = make(kind, 'min')
    log = WatchedLog([1.0 + i for i in range(1000)])  # never improving after 0
    if kind == 'early':
        hook.patience = 10_000
    run(hook, log)
    for _ in range(3):
        log.append(5000.0)
        log.lowest = math.inf
        assert run(hook, log) != 'stop'
        # SaveBestNetwork reads the entry before the last as an earlier one
        assert log.lowest >= len(log) - 2, (kind, log.lowest, len(log))


def reference(kind, criterion, log, state):
    """What a whole read of ``log`` decides (``state``: ReduceOnPlateau's counts)."""
    better = (lambda a, b: a < b) if criterion == 'min' else (lambda a, b: a > b)
    finite = [(i, v) for i, v in enumerate(log) if math.isfinite(v)]
    if kind == 'early':
        best, best_value = 0, None
        for i, v in finite:
            if best_value is None or better(v, best_value):
                best, best_value = i, v
        return 'stop' if len(log) > best + 3 else None
    if kind == 'threshold':
        limit = 0.2 if criterion == 'min' else 0.8
        reached = any(
            v <= limit if criterion == 'min' else v >= limit for _, v in finite
        )
        return 'stop' if reached else None
    if kind == 'best':
        last = log[-1]
        earlier = [v for _, v in finite if _ < len(log) - 1]
        if math.isfinite(last) and all(better(last, v) for v in earlier):
            state['saved'] = float(len(log))
        return state.get('saved')
    # ReduceOnPlateau: count the bad checks of each new entry; each
    # reduction halves the rate of 1.0 that run() gives each call
    reductions = 0
    for v in log[state.get('seen', 0) :]:
        if math.isfinite(v) and (state.get('best') is None or better(v, state['best'])):
            state['best'], state['bad'] = v, 0
        else:
            state['bad'] = state.get('bad', 0) + 1
            if state['bad'] > 2:
                state['bad'] = 0
                reductions += 1
    state['seen'] = len(log)
    return 0.5**reductions


def random_entries(rng, count):
    pool = [np.nan, np.inf, -np.inf]
    return [
        pool[rng.randint(3)] if rng.rand() < 0.15 else float(rng.randint(0, 10)) / 10
        for _ in range(count)
    ]


@pytest.mark.parametrize('criterion', ['min', 'max'])
@pytest.mark.parametrize('kind', KINDS)
def test_decisions_are_those_of_a_whole_read(kind, criterion):
    rng = np.random.RandomState(7)
    for trial in range(40):
        hook = make(kind, criterion)
        state: dict = {}
        log: list = []
        for step in range(12):
            log.extend(random_entries(rng, rng.randint(1, 4)))
            got = run(hook, log)
            want = reference(kind, criterion, log, state)
            assert got == want, (kind, criterion, trial, step, log, got, want)
            if got == 'stop':
                break
            if step == 5:
                # a copy or a pickle goes on from where the hook stood
                hook = (
                    copy.deepcopy
                    if trial % 2
                    else (lambda h: pickle.loads(pickle.dumps(h)))
                )(hook)


@pytest.mark.parametrize('kind', ['early', 'threshold', 'best'])
def test_another_log_object_is_read_from_its_first_entry(kind):
    """A new run (a new log) whose entries differ from what was read before."""
    hook = make(kind, 'min')
    first = [0.9, 0.8, 0.7]
    run(hook, first)
    second = [0.05, 0.8, 0.7, 0.6]  # another list: its first entry is the best
    got = run(hook, second)
    if kind == 'best':
        # 0.6 is no new best: the parameters kept are the first run's
        assert got == 3.0
    else:
        assert got == reference(kind, 'min', second, {}) == 'stop'


@pytest.mark.parametrize('kind', ['early', 'threshold', 'best'])
def test_what_a_hook_read_is_not_in_its_description(kind):
    hook = make(kind, 'min')
    run(hook, [0.9, 0.8])
    description = get_description(hook)
    assert '_scan' not in description
    recreated = create_from_description(description)
    log = [0.9, 0.8, 0.85, 0.86, 0.87, 0.88]
    assert run(recreated, log) == reference(kind, 'min', log, {})


@pytest.mark.parametrize(
    'kind, first, more, expected',
    [
        # the best for 'max' is entry 0: three entries without improvement
        ('early', [0.3, 0.2], [0.25, 0.1, 0.1], 'stop'),
        # 0.9 reaches the threshold 0.8 of 'max'
        ('threshold', [0.9, 0.5], [0.6], 'stop'),
        # 0.25 is no new best for 'max' (0.3 is): the parameters kept are
        # those the first call saved (0.1, the best for 'min', at length 3)
        ('best', [0.2, 0.3, 0.1], [0.25], 3.0),
    ],
)
def test_a_changed_criterion_reads_the_log_again(kind, first, more, expected):
    """What a hook kept of its log for 'min' is no summary for 'max'."""
    hook = make(kind, 'min')
    log = list(first)
    assert run(hook, log) != 'stop'
    hook.criterion = 'max'
    if kind == 'threshold':
        hook.threshold = 0.8
    log.extend(more)
    assert run(hook, log) == expected
