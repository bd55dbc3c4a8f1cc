"""Schedules: their values, argument checks and descriptions."""

import math

import pytest

import brainstorm as bs
from brainstorm.training.schedules import (
    CosineWithWarmup,
    DecreaseAfterEpoch,
    Exponential,
    Linear,
    MultiStep,
)
from brainstorm.utils import TrainingValidationError
from tests.training.nets import roundtrip


def values(schedule, counts, timescale='epoch', interval=1):
    result = []
    for c in counts:
        epoch, update = (c, 1000 + c) if timescale == 'epoch' else (99, c)
        result.append(schedule(epoch, update, timescale, interval, None, None, {}))
    return result


def test_linear():
    schedule = Linear(1.0, 0.0, 4)
    assert values(schedule, range(7)) == [1.0, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0]
    assert values(schedule, [0, 1, 2, 3, 4], 'update', interval=2) == [
        1.0,
        1.0,
        0.75,
        0.75,
        0.5,
    ]


def test_linear_reaches_its_final_value_exactly():
    """At k = num_changes the formula gave 0.07000000000000006 for 0.07."""
    assert values(Linear(0.7, 0.07, 10), [9, 10, 11])[1:] == [0.07, 0.07]
    for initial, final, n in [(0.7, 0.07, 10), (0.3, 0.1, 3), (1e-3, 7e-5, 7)]:
        assert values(Linear(initial, final, n), [n]) == [final]


def test_exponential_clips():
    schedule = Exponential(1.0, 0.5, minimum=0.2)
    assert values(schedule, range(5)) == [1.0, 0.5, 0.25, 0.2, 0.2]
    growing = Exponential(1.0, 2.0, maximum=5.0)
    assert values(growing, range(5)) == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert values(Exponential(1.0, 0.5), [6], 'update', interval=3) == [0.25]


def test_multi_step():
    schedule = MultiStep(1.0, [2, 5], [0.1, 0.01])
    assert values(schedule, range(7)) == [1.0, 1.0, 0.1, 0.1, 0.1, 0.01, 0.01]
    assert values(schedule, [4, 5], 'update') == [0.1, 0.01]


def test_multi_step_needs_interval_1():
    with pytest.raises(TrainingValidationError, match='interval=1'):
        values(MultiStep(1.0, [2], [0.1]), [3], interval=2)


def test_decrease_after_epoch():
    schedule = DecreaseAfterEpoch(1.0, 3)
    assert values(schedule, range(6)) == [1.0, 1.0, 1.0, 0.75, 0.6, 0.5]
    # always counts epochs
    assert values(schedule, [0], 'update') == [pytest.approx(3 / 100)]


def test_cosine_with_warmup():
    schedule = CosineWithWarmup(
        1.0, num_changes=6, final_value=0.1, warmup_changes=2, warmup_start=0.0
    )
    got = values(schedule, range(8))
    expected = [0.0, 0.5] + [
        0.1 + 0.9 * (1 + math.cos(math.pi * p)) / 2 for p in (0, 0.25, 0.5, 0.75, 1, 1)
    ]
    assert got == pytest.approx(expected)
    assert values(CosineWithWarmup(2.0, 4), [0, 2, 4, 9]) == pytest.approx(
        [2.0, 1.0, 0.0, 0.0]
    )


@pytest.mark.parametrize(
    'make, message',
    [
        (lambda: MultiStep(1.0, [1, 2], [0.1]), 'same length'),
        (lambda: MultiStep(1.0, [3, 2], [0.1, 0.2]), 'increasing'),
        (lambda: MultiStep(1.0, [1.5], [0.1]), 'steps'),
        (lambda: Linear(1.0, 0.0, 0), 'num_changes'),
        (lambda: Exponential(1.0, 0.5, minimum=2, maximum=1), 'minimum'),
        (lambda: DecreaseAfterEpoch(1.0, 0), 'T'),
        (lambda: CosineWithWarmup(1.0, num_changes=2, warmup_changes=2), 'num_changes'),
        (lambda: Linear('a', 0.0, 3), 'initial_value'),
    ],
)
def test_bad_arguments(make, message):
    with pytest.raises(TrainingValidationError, match=message):
        make()


def test_bad_timescale():
    with pytest.raises(TrainingValidationError, match='timescale'):
        Linear(1.0, 0.0, 2)(1, 1, 'day', 1, None, None, {})


@pytest.mark.parametrize(
    'schedule',
    [
        Linear(0.1, 0.01, 10),
        Exponential(0.1, 0.9),
        Exponential(1, 2, 0, 5),
        MultiStep(0.1, [10, 20], [0.01, 0.001]),
        DecreaseAfterEpoch(0.1, 5),
        CosineWithWarmup(0.1, 100, warmup_changes=5),
    ],
    ids=lambda s: type(s).__name__,
)
def test_description_round_trip(schedule):
    copy = roundtrip(schedule)
    assert bs.get_description(copy) == bs.get_description(schedule)
    assert values(copy, range(30)) == values(schedule, range(30))
