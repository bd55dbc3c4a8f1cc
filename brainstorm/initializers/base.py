"""The base class of initializers, argument checks, and evaluating one.

:func:`evaluate_initializer` turns an initializer, a number or an array into
the values of a parameter, with a fallback for shapes it cannot fill.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from numbers import Real

import numpy as np

from brainstorm.arguments import Arg, Int, ListOf, NumericArray, declare
from brainstorm.describable import Describable
from brainstorm.errors import (
    InitializationError,
    NetworkValidationError,
)
from brainstorm.randomness import Seedable

__all__ = ['Initializer', 'ArrayInitializer', 'evaluate_initializer']


class Initializer(Seedable, Describable):
    """Base class of all initializers.

    Subclasses implement ``__call__``; they draw random numbers only from
    ``self.rnd``.
    """

    __argument_error__ = NetworkValidationError

    def __call__(self, shape: tuple[int, ...]) -> np.ndarray:
        """Return an array of the given shape.

        Raises:
            InitializationError: if this initializer cannot fill ``shape``.
        """
        raise NotImplementedError

    def _check_at_least_2d(self, shape: tuple[int, ...]) -> None:
        if len(shape) < 2:
            raise InitializationError(
                f'{type(self).__name__} needs a parameter with at least 2 '
                f'dimensions. Received: shape={tuple(shape)}'
            )

    def _check_2d(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 2:
            raise InitializationError(
                f'{type(self).__name__} needs a 2-D parameter. '
                f'Received: shape={tuple(shape)}'
            )

    def _check_square(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 2 or shape[0] != shape[1]:
            raise InitializationError(
                f'{type(self).__name__} needs a square 2-D parameter. '
                f'Received: shape={tuple(shape)}'
            )


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


class ArrayInitializer(Initializer):
    """Initialize with a given array.

    It describes itself as a plain (nested) list; a list found in an
    initializer description is turned back into an ArrayInitializer by
    :meth:`Network.initialize` (and by :func:`evaluate_initializer`).

    Args:
        array: the values (array-like); the parameter must have its shape.
    """

    __arguments__ = {'array': Arg(NumericArray())}

    def __init__(self, array):
        super().__init__()
        self.array = np.array(array)

    def __call__(self, shape):
        """A copy of the array, which must have ``shape``."""
        if self.array.shape != tuple(shape):
            raise InitializationError(
                f'ArrayInitializer: the array has shape {self.array.shape} '
                f'but the parameter has shape {tuple(shape)}'
            )
        return self.array.copy()

    def __describe__(self):
        return self.array.tolist()


def _fit_shape(initializer, result: np.ndarray, shape: tuple) -> np.ndarray:
    """``result`` broadcast to ``shape`` (a new array), or InitializationError."""
    if result.shape == shape:
        return result
    try:
        return np.array(np.broadcast_to(result, shape))
    except ValueError:
        raise InitializationError(
            f'{type(initializer).__name__} returned values of shape '
            f'{result.shape} for a parameter of shape {shape}: expected '
            'that shape or one that broadcasts to it.'
        ) from None


#: A parameter's shape: a list or tuple of ints >= 0 (NumPy ints too).
_SHAPE = ListOf(Int(0, sys.maxsize), as_tuple=True)


@declare(NetworkValidationError, shape=Arg(_SHAPE))
def evaluate_initializer(
    initializer, shape: Sequence[int], fallback=None, seed: int | None = None
) -> np.ndarray:
    """Create the values for a parameter of shape ``shape``.

    Args:
        initializer: an :class:`Initializer`, a number (a constant array), or
            a list/array (used as :class:`ArrayInitializer`).
        shape: shape of the parameter.
        fallback: used (with the same seed) if ``initializer`` raises
            :class:`InitializationError`.
        seed: if given, the initializer's ``rnd`` is reseeded with it first.

    Returns:
        A NumPy array of shape ``shape``. An initializer may return values
        that broadcast to ``shape`` (a row for all rows, as Brainstorm 0.5
        copied them in); they are broadcast.

    Raises:
        InitializationError: if the initializer fails and there is no
            fallback (or the fallback fails too), or returns values that
            do not broadcast to ``shape`` (the fallback is not tried).
        TypeError: if ``initializer`` is of an unsupported type.
        NetworkValidationError: if ``shape`` is not a list or tuple of
            ints >= 0.
    """
    dims = tuple(shape)  # a tuple of ints already: checked as declared above
    if isinstance(initializer, (list, np.ndarray)):
        initializer = ArrayInitializer(initializer)
    if isinstance(initializer, Initializer):
        if seed is not None:
            initializer.rnd.set_seed(seed)
        try:
            result = np.asarray(initializer(dims))
        except InitializationError:
            if fallback is None:
                raise
            return evaluate_initializer(fallback, dims, seed=seed)
        return _fit_shape(initializer, result, dims)
    if _is_number(initializer):
        return np.full(dims, initializer, dtype=np.float64)
    raise TypeError(
        f'Cannot initialize with {initializer!r} of type '
        f'{type(initializer).__name__}: expected an Initializer, '
        'a number, a list or a NumPy array'
    )
