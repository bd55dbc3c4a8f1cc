"""The rules of ``_powers_of_two``, the exact scaling of the clip code.

``2**exponent`` comes as factors the dtype holds exactly, whose product is
``2**exponent``: one factor where the dtype holds it, else several; below
the subnormal range the last is the smallest subnormal, so that values
shrink as late as they can and only the last step rounds.
"""

import math

import numpy as np
import pytest

from brainstorm.training.steppers.base import _powers_of_two

DTYPES = [np.float16, np.float32, np.float64]


def _range(dtype):
    info = np.finfo(dtype)
    lowest = int(info.minexp) - int(info.nmant)
    highest = int(info.maxexp) - 1
    return lowest, highest


def _exponent(factor: float) -> int:
    mantissa, exponent = math.frexp(factor)
    assert mantissa == 0.5, factor  # a power of two
    return exponent - 1


@pytest.mark.parametrize('dtype', DTYPES)
def test_the_factors_multiply_to_the_power_and_the_dtype_holds_each(dtype):
    lowest, highest = _range(dtype)
    for exponent in range(
        3 * lowest - 5, 3 * highest + 6, 7 if dtype is np.float64 else 1
    ):
        factors = _powers_of_two(exponent, dtype)
        assert sum(_exponent(f) for f in factors) == exponent, (exponent, factors)
        for factor in factors:
            held = float(np.asarray(factor, dtype))
            assert held == factor and math.isfinite(held), (exponent, factor)


@pytest.mark.parametrize('dtype', DTYPES)
def test_one_factor_where_the_dtype_holds_the_power(dtype):
    lowest, highest = _range(dtype)
    for exponent in (lowest, lowest + 1, -1, 0, 1, highest - 1, highest):
        assert _powers_of_two(exponent, dtype) == [math.ldexp(1.0, exponent)]


@pytest.mark.parametrize('dtype', DTYPES)
def test_below_the_subnormals_the_smallest_subnormal_comes_last(dtype):
    lowest, highest = _range(dtype)
    info = np.finfo(dtype)
    for exponent in (lowest - 1, lowest - 30, 2 * lowest, 3 * lowest - 3):
        factors = _powers_of_two(exponent, dtype)
        assert factors[-1] == math.ldexp(1.0, lowest), (exponent, factors)
        # the factors before it are normal numbers: nothing rounds before
        for factor in factors[:-1]:
            assert factor >= float(info.tiny), (exponent, factors)


@pytest.mark.parametrize('dtype', DTYPES)
def test_above_the_range_the_largest_power_is_repeated(dtype):
    _, highest = _range(dtype)
    for exponent in (highest + 1, 2 * highest, 2 * highest + 3):
        factors = _powers_of_two(exponent, dtype)
        assert factors[:-1] == [math.ldexp(1.0, highest)] * (len(factors) - 1)
        assert len(factors) == -(-exponent // highest)
