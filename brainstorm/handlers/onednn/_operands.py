"""Addresses and checks of the NumPy arrays OneDnnHandler gives oneDNN."""

from __future__ import annotations

import math

import numpy as np

# oneDNN's own allocations are 64-byte aligned; so are the scratchpads and
# reordered weights it gets from the handler
_ALIGNMENT = 64


def _address(array) -> int:
    """The address of ``array``'s first element."""
    return array.__array_interface__['data'][0]


def _operand_key(array):
    """``(address, shape, strides)`` of a NumPy array, else None."""
    if not isinstance(array, np.ndarray):
        return None
    return _address(array), array.shape, array.strides


def _matmul_operands(left, right, out) -> bool:
    """Can oneDNN's matmul compute ``out (+)= left . right`` in place?"""
    arrays = (left, right, out)
    if not all(
        isinstance(x, np.ndarray)
        and x.dtype == np.float32
        and x.ndim == 2
        and x.size
        and all(s > 0 and s % 4 == 0 for s in x.strides)
        for x in arrays
    ):
        return False
    (m, k), (k2, n) = left.shape, right.shape
    return (
        k == k2
        and out.shape == (m, n)
        and out.flags.writeable
        and not np.may_share_memory(out, left)
        and not np.may_share_memory(out, right)
    )


def _conforming(read, written) -> bool:
    """Are these float32 arrays of the given shapes, the ``written`` writeable?

    ``read`` and ``written`` hold ``(array, shape)`` pairs. oneDNN takes
    each operand by its address, with the shape its plan was made for: an
    array of another dtype or shape would be read or written past its end,
    a read-only one written. Anything else runs NumpyHandler's op, which
    computes what the op's contract says or raises.
    """
    return all(
        isinstance(array, np.ndarray)
        and array.dtype == np.float32
        and array.shape == shape
        and (array.flags.writeable or pairs is read)
        for pairs in (read, written)
        for array, shape in pairs
    )


def _dense_float32(arrays, least: int) -> bool:
    """Whether these are C-contiguous float32 arrays of one shape and size >= least."""
    first = arrays[0]
    return (
        all(
            isinstance(a, np.ndarray)
            and a.dtype == np.float32
            and a.shape == first.shape
            and a.flags.c_contiguous
            for a in arrays
        )
        and first.size >= least
    )


def _overlapping(arrays) -> bool:
    """Do two of these C-contiguous arrays share memory without being one?"""
    spans = sorted({(_address(a), _address(a) + a.nbytes) for a in arrays})
    return any(b[0] < a[1] for a, b in zip(spans, spans[1:]))


def _finite(array) -> bool:
    """Whether every value of the C-contiguous ``array`` is finite (no NaN, inf).

    One dot product of the array with itself: NaN and inf propagate. A
    huge finite value may overflow it and answer False, which only costs
    speed (the callers then run NumpyHandler's op).
    """
    flat = array.reshape(-1)
    with np.errstate(over='ignore', invalid='ignore'):
        return bool(np.isfinite(np.dot(flat, flat)))


def _bounded(x, weights, bias) -> bool:
    """Whether no output or partial sum of this convolution can overflow.

    Each output is a bias plus a sum of products of one window of ``x``
    with one filter; every partial sum of it is at most ``|x| |weights| +
    |bias|`` in size (Cauchy-Schwarz, ``|.|`` the Euclidean norm of the
    whole array), far below float32's largest value here. Three dot
    products of C-contiguous arrays; NaN, inf or a norm that overflows
    answers False.
    """
    norms = []
    with np.errstate(over='ignore', invalid='ignore'):
        for array in (x, weights, bias):
            flat = array.reshape(-1)
            norms.append(math.sqrt(float(np.dot(flat, flat))) if flat.size else 0.0)
    bound = norms[0] * norms[1] + norms[2]
    return math.isfinite(bound) and bound < _SAFE_MAGNITUDE


#: far below float32's largest value (about 2**128): room for the rounding
#: of sums of up to billions of terms
_SAFE_MAGNITUDE = 2.0**100


def _has_empty_window(window, top_left, stride, out_hw, in_hw) -> bool:
    """Does some window hold padding only (no in-bounds cell)?

    ``top_left`` is the padding above and left of the image; the output
    size bounds the windows on the other sides.
    """
    for k, padding, s, n_out, n_in in zip(window, top_left, stride, out_hw, in_hw):
        # the first and the last window of the axis are the emptiest
        first_end = k - padding  # exclusive end of the first window
        last_start = (n_out - 1) * s - padding
        if first_end <= 0 or last_start >= n_in:
            return True
    return False
