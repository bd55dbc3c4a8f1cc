"""The arrays of the :class:`~brainstorm.handlers.debug_handler.DebugHandler`.

:class:`DebugArray` wraps an array of the checked handler and allows only
shape queries, indexing and reshaping, so that code computing on arrays
without handler ops fails loudly. The ``assert_*`` helpers and
:func:`check_for_inf_or_nan` are Brainstorm 0.5's checks of the same
module, kept for code written against it.
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np

from brainstorm.handlers.base_handler import ACTIVATIONS

__all__ = [
    'DebugArray',
    'DebugHandlerError',
    'DebugHandlerWriteError',
    'check_for_inf_or_nan',
    'assert_is_shape',
    'assert_debug_arrays',
    'assert_shapes_equal',
    'assert_is_scalar',
]

_NO_ARITHMETIC = (
    'DebugArray supports no arithmetic or NumPy functions: use '
    'the handler ops (e.g. handler.add_tt, handler.mult_st) so '
    'the code runs on every handler.'
)


class DebugHandlerError(AssertionError):
    """A handler op was called with arguments that break its contract."""


class DebugHandlerWriteError(DebugHandlerError):
    """An op wrote into an array that ``DebugHandler.read_only`` protects.

    Attributes:
        op: the op's name.
        argument: the operand it wrote through.
        label: the protected array's label, as given to ``read_only``.
    """

    def __init__(self, message: str, op: str, argument: str, label: str):
        super().__init__(message)
        self.op = op
        self.argument = argument
        self.label = label


class DebugArray:
    """Wraps a handler array; allows only shape queries, indexing and reshape.

    It deliberately has no arithmetic operators and cannot be turned into a
    NumPy array, so code that bypasses the handler fails loudly with a
    TypeError.

    Args:
        arr: the wrapped array of the inner handler.

    Attributes:
        array: the wrapped array.
        shape: its shape.
        size: its number of elements.
    """

    def __init__(self, arr):
        self.array = arr
        self.shape = tuple(arr.shape)
        self.size = int(arr.size)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    @property
    def dtype(self):
        """The wrapped array's dtype (None if it has none)."""
        return getattr(self.array, 'dtype', None)

    def __getitem__(self, item) -> DebugArray:
        """Index by ints and step-less slices (or a tuple of them)."""
        parts = item if isinstance(item, tuple) else (item,)
        for part in parts:
            if isinstance(part, slice):
                if part.step not in (None, 1):
                    raise DebugHandlerError(
                        f'DebugArray: slices must not have a step. Received: {item!r}'
                    )
            elif not isinstance(part, (int, np.integer)) or isinstance(part, bool):
                raise DebugHandlerError(
                    f'DebugArray: index with ints and slices only. Received: {item!r}'
                )
        if len(parts) > len(self.shape):
            raise DebugHandlerError(
                f'DebugArray: {len(parts)} indices for an array of shape {self.shape}.'
            )
        result = self.array[parts]
        if isinstance(result, np.generic):  # keep a 0-d view, not a copy
            result = self.array[parts + (Ellipsis,)]
        return DebugArray(result)

    def reshape(self, *shape) -> DebugArray:
        """Reshape to non-negative ints, given as arguments or as one tuple.

        Raises:
            DebugHandlerError: for other sizes, or if the result would be a
                copy (writes into it would be lost).
        """
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0
            for s in shape
        ):
            raise DebugHandlerError(
                f'DebugArray.reshape: the shape must consist of non-negative '
                f'ints. Received: {shape!r}'
            )
        if math.prod(shape) != self.size:
            raise DebugHandlerError(
                f'DebugArray.reshape: cannot reshape {self.shape} (size '
                f'{self.size}) into {shape}.'
            )
        result = self.array.reshape(shape)
        if (
            isinstance(result, np.ndarray)
            and self.size > 0
            and not np.may_share_memory(result, self.array)
        ):
            raise DebugHandlerError(
                f'DebugArray.reshape: reshaping this non-contiguous view of '
                f'shape {self.shape} (strides {self.array.strides}) to '
                f'{shape} would copy it, so writes would be lost.'
            )
        return DebugArray(result)

    def __repr__(self) -> str:
        return f'DebugArray(shape={self.shape})'

    def _forbidden(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    def __array__(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    def __array_ufunc__(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    def __array_function__(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    __add__ = __radd__ = __iadd__ = _forbidden
    __sub__ = __rsub__ = __isub__ = _forbidden
    __mul__ = __rmul__ = __imul__ = _forbidden
    __truediv__ = __rtruediv__ = __itruediv__ = _forbidden
    __floordiv__ = __rfloordiv__ = __ifloordiv__ = _forbidden
    __mod__ = __rmod__ = __imod__ = _forbidden
    __pow__ = __rpow__ = __ipow__ = _forbidden
    __matmul__ = __rmatmul__ = __imatmul__ = _forbidden
    __neg__ = __pos__ = __abs__ = _forbidden
    __lt__ = __le__ = __gt__ = __ge__ = _forbidden
    # == and truth would answer silently (False, True) where NumPy gives an
    # array or raises: a layer would branch differently under the debug
    # handler. Hashing stays by identity.
    __eq__ = __ne__ = __bool__ = _forbidden
    __hash__ = object.__hash__
    __float__ = __int__ = _forbidden

    def __len__(self) -> int:
        """The length of the first axis, as NumPy's ``len``.

        Raises:
            TypeError: for a 0-d array, as NumPy does.
        """
        if not self.shape:
            raise TypeError('len() of unsized object')
        return self.shape[0]


def _check_dtype(op: str, name: str, value: DebugArray, dtype) -> None:
    """Raise DebugHandlerError unless ``value`` wraps an array of ``dtype``.

    Every array operand of the op table is in the handler's dtype (max
    pooling's ``argmax`` and class ids too: whole numbers in floats). An
    array without a ``dtype`` attribute passes.
    """
    found = getattr(value.array, 'dtype', None)
    if found is not None and np.dtype(found) != np.dtype(dtype):
        raise DebugHandlerError(
            f"DebugHandler.{op}: argument '{name}' must be an array of this "
            f"handler's dtype {np.dtype(dtype).name}. Received: a DebugArray "
            f'of {np.dtype(found).name}'
        )


def _check_whole_numbers(op: str, name: str, values, low, limit, what) -> None:
    """Raise DebugHandlerError unless ``values`` are whole numbers in [low, limit).

    ``values`` is a NumPy array (class ids, max pooling's ``argmax``),
    compared in float64: it holds every value and limit of the float dtypes
    exactly (float16 would round a limit of 2049 to 2048, refusing id 2048).
    NaN is refused, as no whole number.
    """
    found = np.asarray(values, dtype=np.float64)
    bad = (found != np.round(found)) | (found < low) | (found >= limit)
    if bad.any():
        raise DebugHandlerError(
            f"DebugHandler.{op}: argument '{name}' must hold integral {what} in "
            f'[{low}, {limit}). Received: {found[bad].ravel()[:5].tolist()} '
            f'among others'
        )


def _is_scalar(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


# ------------------------------------------ Brainstorm 0.5's helper functions


def _finite(handler, value) -> bool:
    if isinstance(value, DebugArray):
        return bool(handler.is_fully_finite(value))
    if _is_scalar(value):
        return math.isfinite(value)
    return True


def check_for_inf_or_nan(f):
    """Decorate a handler method to check its arguments after each call.

    Args:
        f: a function whose first argument is a :class:`DebugHandler`.

    Returns:
        A function that calls ``f`` and then raises ``ValueError`` naming
        the argument (by position from 1, or by keyword) if a
        :class:`DebugArray` or a number among the arguments holds NaN or Inf.
    """

    @functools.wraps(f)
    def checked(*args, **kwargs):
        result = f(*args, **kwargs)
        handler = args[0]
        named = [(f'{i}.', arg) for i, arg in enumerate(args, start=1)]
        for name, value in named + list(kwargs.items()):
            if not _finite(handler, value):
                raise ValueError(f'NaN or Inf encountered in argument {name!r}')
        return result

    return checked


def _unwrap(value):
    """The wrapped array of a :class:`DebugArray`; anything else as it is."""
    return value.array if isinstance(value, DebugArray) else value


@contextlib.contextmanager
def _checked_fixed_block(handler, default, array):
    """``handler.fixed_operand`` (else ``default``) on the array in ``array``.

    DebugHandler's ``fixed_operand``: raises :class:`DebugHandlerError` if
    ``array`` is no DebugArray, or if its values changed in the block.
    """
    if not isinstance(array, DebugArray):
        raise DebugHandlerError(
            "fixed_operand: argument 'array' must be a DebugArray. "
            f'Received: {type(array).__name__}'
        )
    inner = array.array
    before = handler.get_numpy_copy(inner)
    with getattr(handler, 'fixed_operand', default)(inner):
        yield
    if not np.array_equal(before, handler.get_numpy_copy(inner), equal_nan=True):
        raise DebugHandlerError(
            f'fixed_operand: the array of shape {tuple(inner.shape)} promised '
            'fixed was written inside the block'
        )


def assert_is_shape(shape) -> None:
    """Check that ``shape`` is a tuple of non-negative ints.

    Args:
        shape: the value to check.

    Raises:
        DebugHandlerError: naming what was received.
    """
    if not isinstance(shape, tuple):
        raise DebugHandlerError(
            f'a shape must be a tuple. Received: {type(shape).__name__} {shape!r}'
        )
    for dim in shape:
        if not _is_int(dim) or dim < 0:
            raise DebugHandlerError(
                f'a shape must hold non-negative ints. Received: {shape!r}'
            )


def assert_debug_arrays(*arrays) -> None:
    """Check that every argument is a :class:`DebugArray`.

    Args:
        *arrays: the values to check.

    Raises:
        DebugHandlerError: naming the position (from 0) and the type found.
    """
    for i, array in enumerate(arrays):
        if not isinstance(array, DebugArray):
            raise DebugHandlerError(
                f'argument {i} must be a DebugArray. Received: {type(array).__name__}'
            )


def assert_shapes_equal(ref_shape, *shapes) -> None:
    """Check that shapes (or the shapes of DebugArrays) equal ``ref_shape``.

    Args:
        ref_shape: a shape tuple or a :class:`DebugArray`.
        *shapes: shape tuples or DebugArrays to compare with it.

    Raises:
        DebugHandlerError: if one is no shape or the shapes differ.
    """
    if isinstance(ref_shape, DebugArray):
        ref_shape = ref_shape.shape
    assert_is_shape(ref_shape)
    for i, shape in enumerate(shapes, start=1):
        if isinstance(shape, DebugArray):
            shape = shape.shape
        assert_is_shape(shape)
        if shape != ref_shape:
            raise DebugHandlerError(
                f'shape mismatch: argument {i} has shape {shape}, '
                f'argument 0 has shape {ref_shape}'
            )


def assert_is_scalar(value) -> None:
    """Check that ``value`` is an int or a float (not a bool).

    Args:
        value: the value to check.

    Raises:
        DebugHandlerError: naming the type found.
    """
    if not _is_scalar(value):
        raise DebugHandlerError(
            f'expected a scalar (int or float). '
            f'Received: {type(value).__name__} {value!r}'
        )


# ------------------------------------------ operand kinds of the op table


def _is_pair(value) -> bool:
    return (
        isinstance(value, tuple)
        and len(value) == 2
        and all(_is_int(x) and x > 0 for x in value)
    )


def _is_padding(value) -> bool:
    sides = value if isinstance(value, tuple) and len(value) == 4 else (value,)
    return all(_is_int(x) and x >= 0 for x in sides)


def _is_shape(shape) -> bool:
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    return all(_is_int(d) and d >= 0 for d in dims)


# kind -> (test, what is expected), for the kinds that are no arrays
KIND_CHECKS = {
    'scalar': (_is_scalar, 'a Python int or float'),
    'positive_int': (lambda value: _is_int(value) and value >= 1, 'an int >= 1'),
    'flag': (lambda value: isinstance(value, bool), 'a bool'),
    'pair': (_is_pair, 'a tuple of two positive ints'),
    'padding': (_is_padding, 'an int >= 0 or a tuple (top, bottom, left, right)'),
    'shape': (_is_shape, 'a tuple of ints >= 0'),
    'numpy': (lambda value: isinstance(value, np.ndarray), 'a numpy array'),
    'activation': (lambda value: value in ACTIVATIONS, f'one of {ACTIVATIONS}'),
}
