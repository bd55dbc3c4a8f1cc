"""Shape helpers of layers: reshape time-major buffers as views, never as copies.

A layer's buffers are views into the network's memory; time-sized ones
(``(T, B, ...)``) are strided views of a larger buffer (the context slot of
recurrent layers lies beside them). Writing into a reshaped copy would
lose the result, so layers reshape only with these helpers, which return a
view or raise ``ValueError``.

The usual pattern in a pass::

    x = flatten_time_and_features(buffers.inputs.default)   # (T*B, F)
    y = flatten_time_and_features(buffers.outputs.default)
    _h.dot_mm(x, W, y, transb=True)

Layer authors import them with the rest of what a layer needs from
:mod:`brainstorm.layers.authoring`. This module sits at the bottom of the
package, beside the error family, because the handlers (PyCUDA's keeps
Brainstorm 0.5's ``flatten_all_but_last``) and the scorers use it too.
"""

from __future__ import annotations

import numbers
import operator
from functools import reduce

import numpy as np

__all__ = [
    'product',
    'reshape_view',
    'flatten_time',
    'flatten_time_and_features',
    'flatten_features',
    'flatten_all_but_last',
    'as_rows',
    'padding_sides',
]


def product(numbers):
    """The product of an iterable of numbers (1 for an empty one).

    Args:
        numbers: an iterable of numbers, e.g. a shape.

    Returns:
        The product, with Python's arithmetic (ints stay exact).
    """
    return reduce(operator.mul, numbers, 1)


def reshape_view(array, shape: tuple):
    """``array.reshape(shape)``, but never a silent copy of a NumPy array.

    Buffers are views into the network's flat memory; writing into a copy
    would lose the result. Raises ValueError if no view is possible.
    """
    shape = tuple(int(s) for s in shape)
    if isinstance(array, np.ndarray):
        try:
            return _reshape_without_copy(array, shape)
        except (AttributeError, ValueError):
            raise ValueError(
                f'Cannot reshape an array of shape {array.shape} with strides '
                f'{array.strides} to {shape} without copying it.'
            ) from None
    return array.reshape(shape)


def _reshape_without_copy(array: np.ndarray, shape: tuple) -> np.ndarray:
    """A reshaped view, or an error where only a copy could reshape.

    NumPy 2.1 and later say so with ``reshape(copy=False)``; NumPy 2.5
    deprecates the older way, setting ``shape`` on a view.
    """
    if _RESHAPE_TAKES_COPY:
        return np.reshape(array, shape, copy=False)
    view = array.view()
    view.shape = shape
    return view


_RESHAPE_TAKES_COPY = np.lib.NumpyVersion(np.__version__) >= '2.1.0'


def flatten_time(array):
    """``(T, B, ...)`` -> ``(T*B, ...)`` as a view."""
    shape = array.shape
    return reshape_view(array, (shape[0] * shape[1],) + tuple(shape[2:]))


def flatten_time_and_features(array):
    """``(T, B, f1, f2, ...)`` -> ``(T*B, f1*f2*...)`` as a view."""
    shape = array.shape
    return reshape_view(array, (shape[0] * shape[1], product(shape[2:])))


def flatten_features(array, start_idx: int = 2):
    """Merge all axes from ``start_idx`` on into one."""
    shape = array.shape
    return reshape_view(array, tuple(shape[:start_idx]) + (product(shape[start_idx:]),))


def as_rows(array):
    """``(N, ...)`` -> ``(N, prod(...))`` as a view where one exists.

    Where it does not (a slice of a longer last axis, say), ``array``
    itself. For elementwise ops in place: NumPy may copy a whole strided
    operand of more than two axes before an in-place ufunc, but not rows.
    """
    try:
        return flatten_features(array, 1)
    except ValueError:
        return array


def flatten_all_but_last(array):
    """``(..., F)`` -> ``(prod(...), F)`` as a view.

    Raises ValueError for feature-slice views with several feature axes,
    which cannot be flattened this way without a copy; use
    :func:`flatten_time` and handle the remaining axes instead.
    """
    shape = array.shape
    return reshape_view(array, (product(shape[:-1]), shape[-1]))


def padding_sides(padding) -> tuple[int, int, int, int]:
    """The ``(top, bottom, left, right)`` cells of an image op's ``padding``.

    The convolution and pooling ops take ``padding`` as an int (that many
    cells on every side, Brainstorm 0.5's form) or as a tuple
    ``(top, bottom, left, right)``.

    >>> padding_sides(2)
    (2, 2, 2, 2)
    >>> padding_sides((0, 1, 0, 1))
    (0, 1, 0, 1)
    """
    if isinstance(padding, (tuple, list)):
        top, bottom, left, right = (int(p) for p in padding)
        return top, bottom, left, right
    p = int(padding)
    return p, p, p, p


def check_image_geometry(op: str, in_hw, window, padding, stride, out_hw) -> None:
    """Refuse an image op's operands whose sizes do not follow each other.

    ``out_hw`` must be ``(in + top + bottom - window) // stride + 1`` on
    each axis, with ints ``window >= 1``, ``stride >= 1`` and
    ``padding >= 0`` (the op
    contract). The handlers read the receptive fields through strided
    views: a geometry breaking it would read memory outside the inputs
    (garbage or a crash) instead of failing.

    Raises:
        ValueError: naming the op and every size.
    """
    sides = padding if isinstance(padding, (tuple, list)) else (padding,) * 4
    ok = (
        len(sides) == 4
        and len(stride) == 2
        and len(window) == 2
        and all(isinstance(s, numbers.Integral) and int(s) >= 1 for s in stride)
        and all(isinstance(k, numbers.Integral) and int(k) >= 1 for k in window)
        and all(isinstance(p, numbers.Integral) and int(p) >= 0 for p in sides)
    )
    if ok:
        top, bottom, left, right = sides
        for size, k, before, after, s, out in zip(
            in_hw, window, (top, left), (bottom, right), stride, out_hw
        ):
            ok = ok and out == (size + before + after - k) // s + 1 and out >= 0
    if not ok:
        raise ValueError(
            f'{op}: outputs of size {tuple(out_hw)} do not follow from images '
            f'of size {tuple(in_hw)}, window {tuple(window)}, padding '
            f'{padding!r} and stride {tuple(stride)}: expected (size + top + '
            'bottom - window) // stride + 1 on each axis, with int windows '
            'and strides >= 1 and int paddings >= 0.'
        )


#: Squares of deviations are divided by ``2**SQUARE_SHIFT`` before they are
#: summed (LayerNorm, BatchNorm): in float16 the squares of deviations up to
#: 1024, not only 256, stay finite.
SQUARE_SHIFT = 4


def summing_shrink(count: int) -> float:
    """``2**-k`` for the smallest power of two ``2**k >= count``, >= ``2**-24``.

    ``2**-24`` is the smallest float16. Terms multiplied by it before they
    are summed keep every partial sum of ``count`` terms within the largest
    term (a plain sum of float16 values overflows long before their mean
    does); a power of two changes no value but the summation's rounding.
    """
    return 2.0 ** -min((max(count, 1) - 1).bit_length(), 24)
