"""Which values a handler's dtype cannot hold: :func:`find_unrepresentable`.

Data, initial values and modifier values are checked against the dtype of
the handler that will hold them (a float64 ``1e39`` becomes inf in
float32). Here, below the network and the value modifiers, which both use
it.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ['find_unrepresentable', 'find_overflow', 'narrows']


def find_unrepresentable(array: np.ndarray, dtype) -> tuple | None:
    """The first value of ``array`` that is not finite once cast to ``dtype``.

    NaN, inf and values beyond the range of ``dtype`` (a float64 1e39
    becomes inf in float32) count. The usual case costs one ``max`` and
    one ``min`` of the array: NaN propagates through both, and the cast
    of the extremes is exactly the cast of every value that overflows.
    Only when they fail is the array searched.

    Args:
        array: a NumPy array of numbers or bools.
        dtype: the float dtype the values are stored in.

    Returns:
        None if every value is finite in ``dtype``, else ``(index, value,
        what)``: the index (a tuple) and value of the first bad one and a
        description (``'NaN'``, ``'an infinite value'`` or ``'a value
        beyond the float32 range (...)'``).
    """
    if not array.size or array.dtype == np.bool_:
        return None
    with np.errstate(over='ignore', invalid='ignore'):
        extremes = np.array([array.max(), array.min()]).astype(dtype)
        if np.isfinite(extremes).all():
            return None
        bad = ~np.isfinite(array.astype(dtype))
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), array.shape))
    value = array[index].item()
    if np.isnan(value):
        what = 'NaN'
    elif np.isinf(value):
        what = 'an infinite value'
    else:
        what = (
            f'a value beyond the {np.dtype(dtype).name} range (largest '
            f'{float(np.finfo(dtype).max):.6g})'
        )
    return index, value, what


def narrows(old_dtype, new_dtype) -> bool:
    """Whether some values of ``old_dtype`` overflow in ``new_dtype``.

    True from float64 to float32 or float16, False to an equal or wider
    dtype: one dtype comparison, all that moving memory to a handler of a
    dtype holding every value costs.
    """
    return not np.can_cast(old_dtype, new_dtype)


def find_overflow(array: np.ndarray, dtype) -> tuple | None:
    """The first finite value of ``array`` that is inf once cast to ``dtype``.

    As :func:`~brainstorm.handlers.representable.find_unrepresentable`
    (and with its result), but NaN and inf already in ``array`` do not
    count: the cast keeps them, and only what it breaks is refused (the
    memory of a network whose training diverged can still be moved). The
    usual case costs one ``max`` and one ``min``.
    """
    found = find_unrepresentable(array, dtype)
    if found is None or math.isfinite(found[1]):
        return found
    return find_unrepresentable(np.where(np.isfinite(array), array, 0), dtype)
