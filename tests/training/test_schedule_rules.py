"""The rules of the schedules at their edges (brainstorm/training/schedules.py).

Each test states one rule that a schedule could break without a word: a
change counted early or late, a boundary value, the smallest argument a
schedule accepts.
"""

import json
import math

import pytest

from brainstorm.describable import create_from_description, get_description
from brainstorm.training.schedules import (
    CosineWithWarmup,
    DecreaseAfterEpoch,
    Exponential,
    Linear,
    MultiStep,
    Schedule,
)
from brainstorm.utils import TrainingValidationError


def values(schedule, counts, interval=1):
    """The schedule's values at these update counts."""
    return [schedule(0, c, 'update', interval, None, None, {}) for c in counts]


def test_exponential_changes_only_after_whole_intervals():
    """k = count // interval: counts 7 and 8 of interval 3 are still the
    second change, 9 is the third."""
    assert values(Exponential(1.0, 0.5), [5, 6, 7, 8, 9], interval=3) == [
        0.5,
        0.25,
        0.25,
        0.25,
        0.125,
    ]


def test_cosine_changes_only_after_whole_intervals():
    schedule = CosineWithWarmup(1.0, 4, warmup_changes=2, warmup_start=0.0)
    assert values(schedule, range(10), interval=2) == pytest.approx(
        [0.0, 0.0, 0.5, 0.5, 1.0, 1.0, 0.5, 0.5, 0.0, 0.0]
    )


def test_cosine_warm_up_ends_exactly_at_its_peak():
    """At k = warmup_changes the cosine starts, at exactly initial_value
    (with final_value 0); the warm-up line would give 0.9000000000000001."""
    schedule = CosineWithWarmup(0.9, 6, warmup_changes=3, warmup_start=0.1)
    assert values(schedule, [3]) == [0.9]


def test_exponential_minimum_may_equal_maximum():
    """Only a minimum greater than the maximum is refused; equal bounds
    make a constant."""
    schedule = Exponential(1.0, 0.5, minimum=0.3, maximum=0.3)
    assert values(schedule, [0, 1, 5]) == [0.3, 0.3, 0.3]


def test_exponential_overflow_of_a_positive_factor_is_positive_at_odd_changes():
    """Beyond the float range, the power of a positive factor is +inf at
    odd and even k alike (only a negative factor alternates)."""
    assert values(Exponential(1e-6, 2.0), [1025]) == [math.inf]
    assert values(Exponential(1e-6, 2.0, minimum=-1.0, maximum=1.0), [1025]) == [1.0]
    assert values(Exponential(-1e-6, 2.0), [1025]) == [-math.inf]


def test_multistep_may_change_at_count_0():
    """steps hold counts >= 0: a step at 0 replaces the initial value from
    the start."""
    schedule = MultiStep(1.0, [0, 2], [0.5, 0.25])
    assert values(schedule, [0, 1, 2, 3]) == [0.5, 0.5, 0.25, 0.25]


def test_multistep_refuses_a_repeated_step():
    with pytest.raises(TrainingValidationError, match='increasing'):
        MultiStep(1.0, [2, 2], [0.5, 0.25])


def test_the_smallest_number_of_changes_is_1():
    """num_changes and T are ints >= 1: 1 is accepted and changes once."""
    assert values(Linear(1.0, 0.0, 1), [0, 1, 2]) == [1.0, 0.0, 0.0]
    assert values(CosineWithWarmup(1.0, 1), [0, 1, 2]) == [1.0, 0.0, 0.0]
    decrease = DecreaseAfterEpoch(2.0, 1)
    assert [decrease(e, 0, 'epoch', 1, None, None, {}) for e in range(4)] == [
        2.0,
        1.0,
        2.0 / 3.0,
        0.5,
    ]


def test_cosine_refuses_no_changes_as_no_positive_int():
    """num_changes=0 is refused by its declaration (an int >= 1), before
    the comparison with warmup_changes."""
    with pytest.raises(TrainingValidationError, match='num_changes must be a positive'):
        CosineWithWarmup(1.0, 0)


def test_cosine_accepts_no_warm_up():
    """warmup_changes is an int >= 0: 0 given explicitly means no warm-up,
    and warmup_start is then never used."""
    schedule = CosineWithWarmup(1.0, 2, warmup_changes=0, warmup_start=5.0)
    assert values(schedule, [0, 1, 2]) == pytest.approx([1.0, 0.5, 0.0])


def test_the_base_schedule_has_no_value():
    with pytest.raises(NotImplementedError):
        Schedule()(0, 0, 'update', 1, None, None, {})


def test_05_multistep_without_steps_loads_as_a_constant():
    """0.5 stored MultiStep(v, [], []) as steps [0, inf] and values [v]."""
    description = {
        'initial_value': 0.3,
        'steps': [0, math.inf],
        'values': [0.3],
        '@type': 'MultiStep',
    }
    schedule = create_from_description(json.loads(json.dumps(description)))
    assert (schedule.initial_value, schedule.steps, schedule.values) == (0.3, [], [])
    assert values(schedule, [0, 1, 100]) == [0.3, 0.3, 0.3]
    assert get_description(schedule) == get_description(MultiStep(0.3, [], []))


def test_exponential_bounds_may_be_infinite():
    """minimum and maximum may be -inf and inf (no bound on that side, as
    their defaults), given or read from a description."""
    schedule = Exponential(1.0, 0.5, minimum=-math.inf, maximum=math.inf)
    assert values(schedule, [0, 1, 2]) == [1.0, 0.5, 0.25]
    bounded_below = Exponential(1e-6, 2.0, minimum=0.0, maximum=math.inf)
    assert values(bounded_below, [1, 1025]) == [2e-6, math.inf]
    description = {
        'initial_value': 1.0,
        'factor': 2.0,
        'minimum': -math.inf,
        'maximum': math.inf,
        '@type': 'Exponential',
    }
    loaded = create_from_description(json.loads(json.dumps(description)))
    assert (loaded.minimum, loaded.maximum) == (-math.inf, math.inf)
    assert values(loaded, [3]) == [8.0]


def test_cosine_warm_up_rises_linearly_from_warmup_start():
    """During the warm-up: warmup_start + (initial_value - warmup_start) *
    k / warmup_changes."""
    schedule = CosineWithWarmup(1.0, 6, warmup_changes=4, warmup_start=0.2)
    assert values(schedule, range(5)) == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    falling = CosineWithWarmup(0.5, 3, warmup_changes=2, warmup_start=1.5)
    assert values(falling, [0, 1, 2]) == pytest.approx([1.5, 1.0, 0.5])


@pytest.mark.parametrize(
    ('factor', 'even', 'odd'),
    [
        (0.5, 0.0, 0.0),
        (-0.5, 0.0, 0.0),
        (0.0, 0.0, 0.0),
        (1.0, 1.0, 1.0),
        (-1.0, 1.0, -1.0),
        (2.0, math.inf, math.inf),
        (-2.0, math.inf, -math.inf),
    ],
)
def test_exponential_at_counts_too_large_for_a_float(factor, even, odd):
    """From k = 2**1024 Python's float power raises OverflowError for any
    base (the exponent is no float): a factor between -1 and 1 gives 0, +-1
    gives +-1 by the parity of k, larger factors +-inf. A factor of 0.5
    gave inf (a learning rate that should be 0)."""
    k = 2**1024
    assert values(Exponential(1.0, factor), [k, k + 1]) == [even, odd]
