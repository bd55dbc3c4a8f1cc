"""The base of the data iterators and the checks they share.

:class:`DataIterator` is what every iterator derives from; the helpers check
named data, names and numbers given to iterators and raise
:class:`~brainstorm.errors.IteratorValidationError` naming the iterator.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np

from brainstorm.arguments import (
    Arg,
    DictOf,
    Int,
    ListOf,
    NumericArray,
)
from brainstorm.errors import IteratorValidationError
from brainstorm.randomness import Seedable

# --------------------------------------------------------------- helpers ---


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array`` (the array itself stays writeable)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _check_named_data(owner: str, named_data: dict) -> dict:
    """Check the data of a base iterator beyond what each array's declaration does.

    Each array has passed its declared check (a numeric array of at least
    3 dimensions, converted with ``np.asarray``; NumPy arrays are kept, no
    copy). Here the arrays are checked together: at least one, none
    without time steps or sequences (``T == 0`` or ``B == 0``: the
    empty-data rule), and all with the same T and B.
    """
    if not named_data:
        raise IteratorValidationError(
            f'{owner}: needs at least one named data array. Received none.'
        )
    result = {}
    first_name = first_shape = None
    for name, data in named_data.items():
        if data.shape[0] == 0 or data.shape[1] == 0:
            raise IteratorValidationError(
                f"{owner}: data '{name}' holds no samples (shape "
                f'{data.shape}: {data.shape[0]} time steps, {data.shape[1]} '
                'sequences). An iterator over no data would yield nothing '
                'to train on or evaluate, and a loss of 0.0 over nothing '
                'would look like a perfect score.'
            )
        if first_shape is None:
            first_name, first_shape = name, data.shape
        elif data.shape[:2] != first_shape[:2]:
            raise IteratorValidationError(
                f'{owner}: all data must have the same time and batch sizes '
                f"(T, B). Data '{first_name}' has {first_shape[:2]} but "
                f"'{name}' has {data.shape[:2]}"
            )
        result[name] = data
    return result


def _check_finite_data(owner: str, data: dict, check_finite: bool) -> None:
    """Raise if a float array of ``data`` holds NaN or inf.

    Checked once, when the iterator is built, instead of a NaN training run
    later.

    Each array is checked in blocks of about a million values, so the
    check needs little memory. ``check_finite=False`` skips it (for huge
    memory-mapped data that should not be read here).
    """
    if not check_finite:
        return
    for name, array in data.items():
        if not np.issubdtype(array.dtype, np.inexact):
            continue  # integers and booleans are always finite
        step = max(1, 2**20 // max(1, math.prod(array.shape[2:])))
        for t in range(array.shape[0]):
            for b in range(0, array.shape[1], step):
                block = array[t, b : b + step]
                finite = np.isfinite(block)
                if finite.all():
                    continue
                where = np.unravel_index(int(np.argmin(finite)), finite.shape)
                index = (t, b + int(where[0]), *map(int, where[1:]))
                raise IteratorValidationError(
                    f"{owner}: data '{name}' holds NaN or infinite values "
                    f'(the first at index {index}: {block[where]}). Clean '
                    'the data, or pass check_finite=False to skip this '
                    'check (e.g. for huge memory-mapped arrays).'
                )


def _check_names(owner: str, argument: str, names, iterator: DataIterator) -> None:
    """Refuse a name in the dict ``names`` that ``iterator`` does not provide."""
    for name in names:
        if name not in iterator.data_shapes:
            raise IteratorValidationError(
                f"{owner}: {argument} names unknown data '{name}'. "
                f'Available: {sorted(iterator.data_shapes)}'
            )


def _check_5d(owner: str, names, iterator: DataIterator) -> None:
    for name in names:
        shape = iterator.data_shapes[name]
        if len(shape) != 5:
            raise IteratorValidationError(
                f"{owner}: data '{name}' must be 5-D (T, B, H, W, C). "
                f'Received: shape={tuple(shape)}'
            )


# ------------------------------------------------------------------ base ---

#: Named data: numeric arrays (T, B, ...); NaN/Inf are the data's business.
_DATA = NumericArray(min_ndim=3, finite=False)


class DataIterator(Seedable):
    """Base class of all data iterators.

    Args:
        data_shapes: maps each data name to the full shape of its data.
        length: number of batches per pass.
    """

    __argument_error__ = IteratorValidationError
    __arguments__ = {
        'data_shapes': Arg(DictOf(ListOf(Int(0), as_tuple=True))),
        'length': Arg(Int(0)),
    }

    def __init__(self, data_shapes: dict[str, tuple[int, ...]], length: int):
        super().__init__()
        self.data_shapes = data_shapes
        self.length = length

    def __call__(self, handler=None) -> Iterator[dict[str, np.ndarray]]:
        """Return a generator over one pass of the data.

        Args:
            handler: the handler of the network the data is for (unused by
                the built-in iterators, which yield NumPy arrays).
        """
        raise NotImplementedError

    def __init_from_description__(self, description: dict) -> None:
        # a description stores arrays and shapes as (nested) lists
        super().__init_from_description__(description)
        self.data_shapes = {
            name: tuple(shape) for name, shape in self.data_shapes.items()
        }
        if isinstance(getattr(self, 'data', None), dict):
            self.data: dict = {name: np.asarray(d) for name, d in self.data.items()}
        if isinstance(getattr(self, 'seq_lens', None), list):
            self.seq_lens: Any = np.asarray(self.seq_lens)
