"""DebugArray refuses ``==``, ``!=`` and truth, as it refuses ``<``.

They answered silently: ``x == 0`` was False and ``bool(x)`` True whatever
the values, where NumPy gives an array of bools (or raises for the truth
of several values), so a layer branching on them took another branch
under DebugHandler than on the other handlers, without a word. ``len``
answers as NumPy's does instead of failing.
"""

import numpy as np
import pytest

from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.debug_array import DebugArray


def _array(values):
    handler = DebugHandler(NumpyHandler(np.float64))
    return handler.create_from_numpy(np.asarray(values, dtype=np.float64))


@pytest.mark.parametrize(
    'use',
    [
        lambda x: x == 0,
        lambda x: x != 0,
        lambda x: 0 == x,
        lambda x: x == x,
        bool,
        lambda x: 1 if x else 0,
        lambda x: not x,
    ],
)
def test_comparison_and_truth_are_refused(use):
    with pytest.raises(TypeError, match='handler ops'):
        use(_array([[0.0, 1.0]]))


def test_len_is_the_first_axis_and_a_scalar_has_none():
    assert len(_array(np.zeros((3, 2)))) == 3
    with pytest.raises(TypeError, match='unsized'):
        len(_array(np.zeros((3, 2)))[0, 1])


def test_arrays_stay_hashable_by_identity():
    a, b = _array([1.0]), _array([1.0])
    assert isinstance(a, DebugArray)
    assert len({a, b, a}) == 2
    assert {a: 1}[a] == 1
    assert a is not b
