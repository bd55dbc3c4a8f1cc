"""The rules at the edges of the clip code's exact scaling.

``tests/training/test_clip_norm_fp16.py`` states what the clip code is for
(norms and clip factors outside the dtype's normal range); these tests
state its rules where they meet the dtype's limits: the floor below which
a clip factor zeroes every gradient, the bound on what the underflow took
from a sum of squares, the number of passes over the gradients the norm
takes, and the scaled norm of sums near the top of float16.
"""

import math

import numpy as np
import pytest

from brainstorm.training.steppers import SgdStepper
from brainstorm.training.steppers.base import TrainingStepper, _powers_of_two
from tests.training.test_clip_norm_fp16 import (
    NORM_RTOL,
    assert_scaled_as_rounded,
    clipped,
    exact_norm,
    linear_net,
)

# ------------------------------------------------- the clip factor's floor ---


@pytest.mark.parametrize('exponent', range(-44, -36))
def test_float16_factors_near_the_floor_scale_the_largest_gradient_as_rounded(
    monkeypatch, exponent
):
    """A float16 gradient of 60000 clipped by factors 2**-44 to 2**-37: it
    becomes 0 where its exact product is below half the smallest subnormal
    (2**-25; from 2**-41 down), and the subnormal it rounds to above. The
    factor's exponent is cut at a floor below which every finite float16
    gradient becomes 0 anyway; a floor set too high would scale the small
    factors up to a nonzero gradient."""
    values = np.array([60000.0, 1.0])
    norm = exact_norm(values.astype(np.float16))
    stepper, gradients = clipped(monkeypatch, np.float16, values, norm * 2.0**exponent)
    factor = stepper.clip_norm / stepper.last_gradient_norm
    assert_scaled_as_rounded(np.float16, values, factor, gradients)
    assert (gradients[0] != 0) == (exponent >= -40), gradients


# ------------------------------------------ the bound on what was lost ---


def test_squares_that_just_round_to_zero_do_not_overflow_the_scaled_sum(monkeypatch):
    """Two float16 gradients of 2**-12 (squares 2**-24, the smallest
    subnormal) and seven of 1.72e-4 (squares 2.96e-8, just below half of
    it: 0). The squares summed to 2**-23 and lost 2.07e-7, more than they
    kept; the scale is chosen from a bound above the whole sum (the sum
    kept, doubled, plus the most each square can have lost), so the scaled
    sum stays finite. A bound below it (the loss subtracted) overflowed to
    an infinite norm, which zeroed every gradient."""
    values = np.array([2.0**-12] * 2 + [1.72e-4] * 7).astype(np.float16)
    assert (values * values).tolist() == [2.0**-24] * 2 + [0.0] * 7
    stepper, gradients = clipped(monkeypatch, np.float16, values, 6e4)
    assert stepper.last_gradient_norm == pytest.approx(
        exact_norm(values), rel=NORM_RTOL[np.float16], abs=0.0
    )
    np.testing.assert_array_equal(gradients, values)


# ---------------------------------------------------- the passes taken ---


def count_passes(monkeypatch):
    """A list that counts the sums of squares the steppers take."""
    passes = []
    original = TrainingStepper._squared_gradient_norm

    def counted(self, *scales):
        passes.append(scales)
        return original(self, *scales)

    monkeypatch.setattr(TrainingStepper, '_squared_gradient_norm', counted)
    return passes


def magnitudes(dtype, count):
    """``count`` magnitudes from the smallest subnormal of ``dtype`` up to a
    third of the square root of its smallest normal number: gradients of
    one to three times them have squares that underflow, in sum too."""
    info = np.finfo(dtype)
    low = math.log10(float(info.smallest_subnormal))
    high = math.log10(math.sqrt(float(info.tiny)) / 3)
    return [10.0**e for e in np.linspace(low, high, count)]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('size', [2, 50, 1000])
def test_float32_and_float64_norms_take_one_scaled_pass(monkeypatch, dtype, size):
    """Gradients whose squares underflow float32 or float64, from the
    smallest subnormal up: the scale chosen from the first sum brings the
    second within the dtype's precision of the norm. One pass over the
    gradients to measure and one to measure again: no more."""
    passes = count_passes(monkeypatch)
    for magnitude in magnitudes(dtype, 12):
        values = np.linspace(magnitude, 3 * magnitude, size).astype(dtype)
        passes.clear()
        stepper, _ = clipped(monkeypatch, dtype, values, 1e300)
        assert stepper.last_gradient_norm == pytest.approx(
            exact_norm(values), rel=NORM_RTOL[dtype], abs=0.0
        ), magnitude
        assert len(passes) == 2, (magnitude, passes)


@pytest.mark.parametrize('size', [2, 50, 1000])
def test_float16_norms_take_one_scaled_pass_above_the_subnormal_gradients(
    monkeypatch, size
):
    """float16 squares lose more: gradients of 2e-6 to 2.6e-3 (squares 0 to
    subnormal) still take one scaled pass; those near the smallest
    subnormal (6e-8), in 50 or more, take two. Never more."""
    passes = count_passes(monkeypatch)
    for magnitude in magnitudes(np.float16, 24):
        values = np.full(size, magnitude).astype(np.float16)
        passes.clear()
        stepper, _ = clipped(monkeypatch, np.float16, values, 6e4)
        assert stepper.last_gradient_norm == pytest.approx(
            exact_norm(values), rel=NORM_RTOL[np.float16], abs=0.0
        ), magnitude
        allowed = 2 if magnitude >= 2e-6 else 3
        assert len(passes) <= allowed, (magnitude, passes)


@pytest.mark.parametrize(
    ('dtype', 'size', 'scaled'),
    [
        (np.float16, 2, 2),
        (np.float16, 50, 2),
        (np.float16, 1000, 3),
        (np.float32, 2, 2),
        (np.float32, 70000, 2),
        (np.float64, 2, 2),
        (np.float64, 70000, 2),
    ],
)
def test_zero_gradients_end_the_search_in_few_passes(monkeypatch, dtype, size, scaled):
    """All-zero gradients: no scale makes their sum grow; the search stops
    where the square of the smallest subnormal, scaled, would overflow:
    two scaled passes (three for 1000 float16 gradients, whose bound on
    the loss is larger and so gains less per pass)."""
    passes = count_passes(monkeypatch)
    stepper, _ = clipped(monkeypatch, dtype, np.zeros(size), 1.0)
    assert stepper.last_gradient_norm == 0.0
    assert len(passes) == 1 + scaled, passes


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
@pytest.mark.parametrize('size', [2, 1000, 70000])
def test_one_smallest_subnormal_among_zeros_is_found(monkeypatch, dtype, size):
    """The search that ends for all-zero gradients must not end before it
    sees a single smallest subnormal among them: its square is lost until
    the scale is large (float16 among 70000 zeros: 2**30; the search of
    all-zero gradients stops once past 2**32). The norm is that subnormal,
    not 0."""
    values = np.zeros(size, dtype)
    values[size // 2] = np.finfo(dtype).smallest_subnormal
    stepper, gradients = clipped(monkeypatch, dtype, values, 1.0)
    assert stepper.last_gradient_norm == float(values[size // 2])
    np.testing.assert_array_equal(gradients, values)


# ----------------------------------- float16 sums near the top, modelled ---


def modelled_stepper(monkeypatch, count, value):
    """A float16 stepper whose gradients are ``count`` copies of ``value``
    (more than a test can hold: ``count`` up to 2**35). Each sum of
    squares is taken as the handler would: the value scaled by each factor
    and squared in float16, the sum of the copies rounded to float16."""
    stepper = SgdStepper(0.0, clip_norm=1.0)
    stepper.start(linear_net(np.float16, 3))
    passes = []

    def modelled(*scales):
        assert len(passes) < 20, f'the search does not end: {passes}'
        passes.append(scales)
        x = np.float16(value)
        for factor in scales:
            x = np.float16(x * np.float16(factor))
        return float(np.float16(count * float(np.float16(x * x))))

    monkeypatch.setattr(stepper, '_squared_gradient_norm', modelled)
    return stepper, modelled, passes


def test_a_float16_sum_just_below_its_threshold_near_the_top_is_taken_as_it_is(
    monkeypatch,
):
    """2**26 gradients of 2**-7 - 2**-18, whose squares (2**-14 - 2**-24)
    are just subnormal: they sum to 4092, below the threshold of 2**26
    times the smallest normal number (4096), but no power of two scales
    that sum up without risking an overflow, and none is needed: what the
    squares lost is within float16's precision of it. The norm is taken
    from it as it is (64, not halved), with no further pass."""
    count, value = 2**26, 2.0**-7 - 2.0**-18
    stepper, modelled, passes = modelled_stepper(monkeypatch, count, value)
    squared = modelled()
    assert squared == 4092.0
    norm = stepper._scaled_up_norm(squared, count)
    assert norm == pytest.approx(math.sqrt(count) * value, rel=1e-3, abs=0.0)
    assert len(passes) == 1, passes


def test_a_float16_sum_all_lost_in_very_many_gradients_is_scaled_up(monkeypatch):
    """2**35 gradients of 2**-13, whose squares (2**-26) all round to 0:
    the bound on the loss (2**35 halves of the smallest subnormal, 1024)
    leaves room to scale the gradients by only 2 at first; that one factor
    of 2 makes the squares visible (2048 in all), after which the sum is
    near the top. The norm is the exact one, 22.6, not 0."""
    count, value = 2**35, 2.0**-13
    stepper, modelled, passes = modelled_stepper(monkeypatch, count, value)
    norm = stepper._scaled_up_norm(modelled(), count)
    assert norm == pytest.approx(math.sqrt(count) * value, rel=1e-3, abs=0.0)
    assert [math.prod(scales) for scales in passes[1:]] == [2.0]


def test_no_power_of_two_factor_is_one():
    """Each factor is a pass over the gradients: none multiplies by 1,
    except the single factor of the exponent 0."""
    for dtype in (np.float16, np.float32, np.float64):
        info = np.finfo(dtype)
        lowest = int(info.minexp) - int(info.nmant)
        for exponent in range(3 * lowest, 3 * int(info.maxexp)):
            if exponent == 0:
                continue
            factors = _powers_of_two(exponent, dtype)
            assert 1.0 not in factors, (np.dtype(dtype).name, exponent, factors)
