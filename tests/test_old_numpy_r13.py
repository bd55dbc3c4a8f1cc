"""The oldest NumPy the project declares (1.24) against the newest: the same
rules on every version.

OneDnnHandler's updates are NumpyHandler's also where NumPy 1.x computes
with a scalar in float64 (from 3.4e38) or rounds an int another way; a
description leaves out an array default of another shape without NumPy
1.24's 'elementwise comparison failed' DeprecationWarning.
"""

import re
import warnings

import numpy as np
import pytest

from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.onednn.handler import ELEMENTWISE_MIN
from tests.handlers.test_onednn_updates import (
    OPS,
    check_update,
    count_numpy_updates,
    operands,
    same_bits,
    same_values,
)
from tests.onednn_support import onednn_handler

BIG_SCALARS = {  # learning rate, momentum
    '3.4e38': (3.4e38, -3.4e38),
    'float32 max': (float(np.finfo(np.float32).max), 0.5),
    'rounding to float32 max': (3.4028235677973362e38, 0.5),
    'rounding to inf': (3.4028235677973366e38, 1e39),
    'beyond float32': (3.5e38, -1e300),
    'ints not exact in float64': (2**60 + 2**36 + 1, -(2**60 + 2**36 + 1)),
    'ints beyond int64': (2**64, 2**64),
    'ints beyond float64': (10**400, 0.5),
    'a big learning rate, a usual momentum': (3.5e38, 0.9),
    'a usual learning rate, a big momentum': (0.37, 3.5e38),
}


@pytest.mark.parametrize('scalars', list(BIG_SCALARS))
@pytest.mark.parametrize('op', list(OPS))
def test_bigger_scalars_take_numpy_handlers_update(monkeypatch, op, scalars):
    """From 3.4e38 NumPy 1.x computes with a float in float64 (where
    oneDNN's float32 scale would differ: 3.5e38 rounds to inf); it rounds an
    int beyond 2**53 to float32 otherwise than through float64, or refuses
    it. NumpyHandler's op runs, on every NumPy version, with its results
    (NaN compare by place: both handlers run NumPy's loops, whose NaN
    signs vary) or its error."""
    hyper = BIG_SCALARS[scalars][: len(OPS[op][1])]
    if len(hyper) == 1 and 'big momentum' in scalars:
        pytest.skip(f'{op} has no momentum')
    onednn = onednn_handler(np.float32)
    try:
        with np.errstate(all='ignore'):
            getattr(NumpyHandler(np.float32), op)(
                *operands(OPS[op][0], ELEMENTWISE_MIN), *hyper
            )
    except (TypeError, OverflowError) as numpy_error:  # ints NumPy refuses
        numpy_calls = count_numpy_updates(monkeypatch, op)
        with pytest.raises(type(numpy_error), match=re.escape(str(numpy_error))):
            with np.errstate(all='ignore'):
                getattr(onednn, op)(*operands(OPS[op][0], ELEMENTWISE_MIN), *hyper)
        assert numpy_calls == [op]
        return
    check_update(
        monkeypatch, op, ELEMENTWISE_MIN, hyper, on_onednn=False, same=same_values
    )


@pytest.mark.parametrize('learning_rate', [3.4028235677973362e38, 3.5e38])
def test_a_learning_rate_beyond_float32_steps_as_on_numpy_handler(learning_rate):
    """A gradient of 1e-30: NumPy 1.x steps by -3.4e8 and -3.5e8, NumPy 2
    by the float32 learning rate's product (-3.4e8 and -inf); OneDnnHandler
    gave -inf for both on NumPy 1.x."""
    steps = []
    for handler in (NumpyHandler(np.float32), onednn_handler(np.float32)):
        p = np.zeros(ELEMENTWISE_MIN, np.float32)
        g = np.full(ELEMENTWISE_MIN, 1e-30, np.float32)
        with np.errstate(over='ignore'):
            handler.sgd_update(p, g, learning_rate)
        steps.append(p)
    assert same_bits(steps[1], steps[0])
    with np.errstate(over='ignore'):
        expected = np.float32(1e-30) * -learning_rate  # this NumPy's rule
    np.testing.assert_array_equal(steps[0], np.float32(expected))


class DescShapedDefault(Describable):
    __default_values__ = {'w': np.zeros(3)}

    def __init__(self, w):
        self.w = w


@pytest.mark.parametrize(
    'value',
    [np.zeros(2), np.zeros((3, 2)), np.zeros((2, 1, 4)), [0.0, 0.0]],
)
def test_an_array_default_of_another_shape_compares_without_warning(value):
    """Shapes that do not broadcast: NumPy 1.24 warned 'elementwise
    comparison failed' (an error under the test suite's filter); later ones
    raise ValueError. Either way the value is described, and restored with
    its shape."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        description = get_description(DescShapedDefault(value))
    assert [str(w.message) for w in caught] == []
    assert description['w'] == np.asarray(value).tolist()
    restored = create_from_description(description)
    assert np.shape(restored.w) == np.shape(value)
    np.testing.assert_array_equal(restored.w, value)


def test_an_array_default_equal_to_the_value_is_still_left_out():
    for value in (np.zeros(3), [0.0, 0.0, 0.0]):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter('always')
            description = get_description(DescShapedDefault(value))
        assert caught == []
        assert 'w' not in description
    assert 'w' in get_description(DescShapedDefault(np.array([0.0, 1.0, 0.0])))
