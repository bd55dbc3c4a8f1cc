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
    Choice,
    DictOf,
    Int,
    ListOf,
    NumericArray,
    Optional,
)
from brainstorm.errors import IteratorValidationError
from brainstorm.files import dataset_closed
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


def reads_on_demand(array) -> bool:
    """True for data that is read batch by batch, never whole.

    An ``h5py.Dataset`` (or another array-like object that is not a NumPy
    array) and a ``np.memmap`` are read on demand; other NumPy arrays are
    in memory already.
    """
    return isinstance(array, np.memmap) or not isinstance(array, np.ndarray)


def _check_finite_data(owner: str, data: dict, check_finite: bool) -> None:
    """Raise if a float array of ``data`` held in memory has NaN or inf.

    Checked once, when the iterator is built, instead of a NaN training run
    later. Data read on demand (see :func:`reads_on_demand`) is not read
    here: :func:`_check_finite_batch` checks each batch of it when it is
    read.

    Each array is checked in blocks of about a million values, so the
    check needs little memory: several whole time steps per block, or,
    where one time step holds more, blocks of its samples. The error names
    the first non-finite value in the data's order. ``check_finite=False``
    skips it.
    """
    if not check_finite:
        return
    for name, array in data.items():
        if reads_on_demand(array) or not np.issubdtype(array.dtype, np.inexact):
            continue  # integers and booleans are always finite
        for first_step, samples, block in _blocks(array):
            _check_finite_batch(owner, name, block, samples, first_step)


#: the number of values in a block of :func:`_blocks`
_BLOCK_VALUES = 2**20


def _blocks(array):
    """Yield ``(first time step, samples slice, block)`` over ``array``.

    The blocks of about :data:`_BLOCK_VALUES` values follow the data's
    order: whole time steps, several per block, or, where one time step
    holds more values, blocks of the samples of one time step. Works for
    any array-like that is sliced by ``[t0:t1, b0:b1]`` (an h5py dataset
    is read block by block).
    """
    time_steps, samples = array.shape[:2]
    per_sample = max(1, math.prod(array.shape[2:]))
    per_step = samples * per_sample
    if per_step <= _BLOCK_VALUES:
        steps = max(1, _BLOCK_VALUES // max(1, per_step))
        for t in range(0, time_steps, steps):
            yield t, slice(0, None), array[t : t + steps]
        return
    step = max(1, _BLOCK_VALUES // per_sample)
    for t in range(time_steps):
        for b in range(0, samples, step):
            yield t, slice(b, None), array[t : t + 1, b : b + step]


def _check_finite_batch(
    owner: str, name: str, block: np.ndarray, samples, first_step: int = 0
) -> None:
    """Raise if ``block`` (T, B, ...) holds NaN or inf, naming where in the data.

    Args:
        owner: the iterator, for the message.
        name: the data's name.
        block: the values read.
        samples: the data's sample indices of the block's samples: a slice
            (from its start) or an int array.
        first_step: the data's time index of the block's first time step.
    """
    if not np.issubdtype(block.dtype, np.inexact):
        return
    finite = np.isfinite(block)
    if finite.all():
        return
    where = np.unravel_index(int(np.argmin(finite)), finite.shape)
    if isinstance(samples, slice):
        sample = (samples.start or 0) + int(where[1])
    else:
        sample = int(samples[where[1]])
    index = (first_step + int(where[0]), sample, *map(int, where[2:]))
    raise IteratorValidationError(
        f"{owner}: data '{name}' holds NaN or infinite values (the first "
        f'at index {index}: {block[where]}). Clean the data, or pass '
        'check_finite=False to skip this check.'
    )


def _closed_error(owner: str, name: str, error: Exception) -> IteratorValidationError:
    """The error for data ``name`` whose h5py file was closed (h5py's ``error``)."""
    return IteratorValidationError(
        f"{owner}: data '{name}' cannot be read: it is an h5py dataset whose "
        f'file was closed (h5py: {error}). Keep the file open while the '
        'iterator is used (iterate inside the "with h5py.File(...)" block), '
        'or open the file again and build a new iterator over its dataset.'
    )


def _current_shape(owner: str, name: str, array) -> tuple:
    """The shape of ``array`` now; a clear error if its h5py file was closed."""
    try:
        return tuple(array.shape)
    except (RuntimeError, ValueError, OSError) as error:
        if dataset_closed(array):
            raise _closed_error(owner, name, error) from error
        raise


def _check_shapes_unchanged(owner: str, data: dict, data_shapes: dict) -> None:
    """Refuse data whose shape changed since the iterator was built.

    A resizable ``h5py.Dataset`` can grow or shrink under the iterator,
    whose number of batches and samples were fixed from its shape: the
    passes would then yield empty or partial batches, batches whose inputs
    differ in T, or fail on an index. Checked at the start of every pass
    and before every batch is read (reading a dataset's shape is cheap).
    A dataset whose file was closed is refused too, naming the data.
    """
    for name, array in data.items():
        recorded, now = tuple(data_shapes[name]), _current_shape(owner, name, array)
        if now != recorded:
            raise IteratorValidationError(
                f"{owner}: data '{name}' had shape {recorded} when the "
                f'iterator was built and now has shape {now} (was its file '
                'resized?). Build a new iterator over the data as it is now.'
            )


def _describe_source(array) -> str:
    """The data behind ``array`` for a message: an h5py dataset and its file."""
    try:
        file = getattr(array, 'file', None)
        if isinstance(getattr(array, 'name', None), str) and file is not None:
            return f"the dataset '{array.name}' of the file '{file.filename}'"
        filename = getattr(array, 'filename', None)  # a np.memmap
    except Exception:  # a closed h5py dataset names neither
        filename = None
    return f"the file '{filename}'" if filename else type(array).__name__


def _read(array, time_cut: slice, samples) -> np.ndarray:
    """Read time steps ``time_cut`` of samples ``samples`` of ``array``.

    ``samples`` is a slice or an int array in any order. An array in
    memory gives a view for a slice; a file (h5py) is read in increasing
    order, as h5py needs, and put in the asked order after reading.
    """
    if isinstance(samples, slice) or isinstance(array, np.ndarray):
        return array[time_cut, samples]
    if len(samples) == 0:
        steps = len(range(*time_cut.indices(array.shape[0])))
        return np.empty((steps, 0, *array.shape[2:]), dtype=array.dtype)
    order = np.argsort(samples, kind='stable')
    block = array[time_cut, samples[order]]
    inverse = np.empty_like(order)
    inverse[order] = np.arange(len(order))
    return block[:, inverse]


def _mask_lengths(mask, time_steps: int, sample_size: int) -> np.ndarray:
    """Per sample: the last time step with a non-zero mask value + 1 (or 0).

    The mask is read in blocks of samples of about a million values, so a
    mask in a file is read once, and never whole.
    """
    lengths = np.zeros(sample_size, dtype=np.int64)
    per_sample = max(1, time_steps * math.prod(mask.shape[2:]))
    step = max(1, 2**20 // per_sample)
    for start in range(0, sample_size, step):
        block = np.asarray(mask[:, start : start + step])
        nonzero = np.asarray(block.reshape(time_steps, block.shape[1], -1).any(axis=2))
        last = time_steps - np.argmax(nonzero[::-1], axis=0)
        lengths[start : start + block.shape[1]] = np.where(nonzero.any(axis=0), last, 0)
    return lengths


def _check_names(owner: str, argument: str, names, iterator: DataIterator) -> None:
    """Refuse a name in the dict ``names`` that ``iterator`` does not provide."""
    for name in names:
        if name not in iterator.data_shapes:
            raise IteratorValidationError(
                f"{owner}: {argument} names unknown data '{name}'. "
                f'Available: {sorted(iterator.data_shapes)}'
            )


def _check_5d(owner: str, names, iterator: DataIterator) -> None:
    """Refuse data named in ``names`` that is not images ``(T, B, H, W, C)``."""
    for name in names:
        shape = iterator.data_shapes[name]
        if len(shape) != 5:
            raise IteratorValidationError(
                f"{owner}: data '{name}' must be 5-D (T, B, H, W, C). "
                f'Received: shape={tuple(shape)}'
            )


def _part_bounds(batch_size: int, rank: int, size: int) -> tuple[int, int]:
    """``(start, stop)`` of part ``rank`` of ``size`` of a batch."""
    return rank * batch_size // size, (rank + 1) * batch_size // size


def _restored_data_error(
    owner: str, field: str, expected: str, received
) -> IteratorValidationError:
    """An error for a field of a description that does not fit the data."""
    return IteratorValidationError(
        f'{owner}: {field} must be {expected}. Received: {field}={received!r} '
        '(was the description edited?)'
    )


def _check_restored_data(owner: str, iterator: DataIterator) -> dict:
    """Check a restored base iterator's ``data`` and ``data_shapes``; return the data.

    The data must pass the checks of the constructor (see
    :func:`_check_named_data`) and ``data_shapes`` must give their shapes.
    """
    data = _check_named_data(owner, iterator.data)  # type: ignore[attr-defined]
    shapes = {name: tuple(shape) for name, shape in iterator.data_shapes.items()}
    actual = {name: tuple(array.shape) for name, array in data.items()}
    if shapes != actual:
        raise _restored_data_error(
            owner, 'data_shapes', f'the shapes of the data {actual}', shapes
        )
    return data


# ------------------------------------------------------------------ base ---

#: Named data: numeric arrays (T, B, ...), in memory or read on demand
#: (h5py datasets); NaN/Inf are checked by the iterators.
_DATA = NumericArray(min_ndim=3, finite=False, on_demand=True)

#: The dtypes a description records for data (NumPy's names): the bool,
#: integer and floating types that data may have.
_DATA_DTYPE_NAMES = tuple(
    dict.fromkeys(
        np.dtype(kind).name
        for kind in (
            np.float32,
            np.float64,
            np.float16,
            np.longdouble,
            np.int8,
            np.int16,
            np.int32,
            np.int64,
            np.uint8,
            np.uint16,
            np.uint32,
            np.uint64,
            np.bool_,
        )
    )
)


def _restored_data(
    owner: str, name: str, values, dtype_name, in_batch: str = ''
) -> np.ndarray:
    """Data restored from a description, with its recorded dtype (if any).

    A description holds the data as nested lists, which NumPy reads as
    int64, float64 or bool; ``dtype_name`` (from ``data_dtypes``) gives
    the dtype back. Floats are rounded to the recorded precision; a value
    the dtype cannot hold (an int out of range, a fraction for an int, a
    float that becomes infinite) is refused.

    Args:
        owner: the iterator, for the message.
        name: the data's name.
        values: the data as described.
        dtype_name: the recorded dtype, or None.
        in_batch: said after the data's name (``' of batch 2'``).

    Returns:
        The array; ``values`` as they are where they are no array (ragged
        nested lists), for the checks of the data to refuse, naming them,
        as they refuse such data described without a dtype.

    Raises:
        IteratorValidationError: naming the iterator, the data and a value
            that does not fit the dtype.
    """
    try:
        array = np.asarray(values)
    except (ValueError, TypeError):
        return values
    if dtype_name is None or array.dtype == np.dtype(dtype_name):
        return array
    dtype = np.dtype(dtype_name)
    with np.errstate(invalid='ignore', over='ignore'):
        cast = array.astype(dtype)
    if np.issubdtype(dtype, np.floating) and np.issubdtype(array.dtype, np.floating):
        fits = np.isfinite(cast) == np.isfinite(array)
    else:
        fits = cast == array
    if not fits.all():
        where = np.unravel_index(int(np.argmin(fits)), fits.shape)
        raise IteratorValidationError(
            f"{owner}: data '{name}'{in_batch} holds {array[where].item()!r} at "
            f"index {tuple(map(int, where))}, which its dtype '{dtype_name}' (given "
            'by data_dtypes) cannot hold.'
        )
    return cast


class DataIterator(Seedable):
    """Base class of all data iterators.

    A description (see :mod:`brainstorm.describable`) of an iterator
    holding its data in memory (``data``) stores the arrays as nested lists
    and their dtypes under ``data_dtypes`` (``{'default': 'float32'}``), so
    the recreated iterator yields batches of the same dtypes. Descriptions
    without ``data_dtypes`` (written by earlier versions) load as before:
    the dtypes NumPy gives the lists (int64, float64, bool).

    Args:
        data_shapes: maps each data name to the full shape of its data.
        length: number of batches per pass, or None where it is not known
            (a :class:`~brainstorm.data_iterators.FromGenerator` built
            without it); a progress bar and data-parallel training need
            it.
    """

    #: A wrapper of the library (over another iterator, its ``iter``) whose
    #: restored description is checked against the wrapped iterator's
    #: (see :meth:`_check_restored`): ``'same shapes'`` where its batches
    #: have the wrapped iterator's data shapes, ``'other shapes'`` where
    #: they differ; None for the others.
    _wraps: str | None = None

    __argument_error__ = IteratorValidationError
    __arguments__ = {
        'data_shapes': Arg(DictOf(ListOf(Int(0), as_tuple=True))),
        'length': Arg(Optional(Int(0))),
        # only in descriptions: the dtype of each array of ``data``
        'data_dtypes': Arg(
            Optional(DictOf(Choice(*_DATA_DTYPE_NAMES))),
            default=None,
            state=True,
            omit_default=True,
            doc='the dtype of each data array (descriptions only)',
        ),
    }

    def __init__(self, data_shapes: dict[str, tuple[int, ...]], length: int | None):
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

    def _part(self, handler, rank: int, size: int) -> Iterator[dict[str, np.ndarray]]:
        """Return a generator over part ``rank`` of ``size`` of every batch.

        Used by :class:`~brainstorm.data_iterators.Shard`: the part of a
        batch of ``B`` samples is its samples
        ``[rank * B // size, (rank + 1) * B // size)``. This default reads
        every whole batch and cuts it; iterators that read their data on
        demand read only the part.
        """
        for data in self(handler):
            first = next(iter(data.values()))
            start, stop = _part_bounds(first.shape[1], rank, size)
            yield {name: values[:, start:stop] for name, values in data.items()}

    def __describe__(self) -> dict:
        """The description, with ``data_dtypes`` for data held in memory."""
        description = super().__describe__()
        data = self.__dict__.get('data')
        if isinstance(data, dict) and 'data' in description:
            # an h5py dataset tells its dtype without being read
            dtypes = {
                name: np.dtype(getattr(d, 'dtype', None) or np.asarray(d).dtype).name
                for name, d in data.items()
            }
            kind = description.pop('@type')
            # other dtypes (of a user's subclass) are inferred, as before
            description['data_dtypes'] = {
                name: dtype
                for name, dtype in dtypes.items()
                if dtype in _DATA_DTYPE_NAMES
            }
            description['@type'] = kind
        return description

    @classmethod
    def __new_from_description__(cls, description: dict):
        """Recreate an iterator; ``data_dtypes`` is not kept as an attribute.

        :meth:`__init_from_description__` uses and removes it; this also
        removes the declared default (None) from iterators whose own
        ``__init_from_description__`` does not call this class's (Shard).
        """
        instance = super().__new_from_description__(description)
        instance.__dict__.pop('data_dtypes', None)
        instance._check_restored(f'{cls.__name__} (from a description)')
        return instance

    def _check_restored(self, owner: str) -> None:
        """Refuse a state restored from a description that does not fit.

        A description can be edited (or written by hand): its counts and
        shapes must agree with its data, or the passes would yield extra
        empty batches, lose samples or fail on an index. This default
        checks the library's wrappers (``Shard``, the augmenting
        iterators, ``OneHot``/``MultiHot``): the same number of batches as
        the wrapped iterator, the same data names, and the data shapes
        they make of its shapes (see :meth:`_restored_data_shapes`). The
        base iterators check their data.

        Brainstorm 0.5 described the wrappers that change shapes
        (``OneHot``, ``MultiHot``, ``Pad``, ``RandomCrop``) with the
        wrapped iterator's data shapes; such ``data_shapes`` are read as
        the changed ones.

        Args:
            owner: the iterator, for the message.

        Raises:
            IteratorValidationError: naming the iterator, the field, what
                it should be and what it is.
        """
        wrapped = self.__dict__.get('iter')
        if not isinstance(wrapped, DataIterator) or self._wraps is None:
            return
        inner = type(wrapped).__name__
        if self.length != wrapped.length:
            raise IteratorValidationError(
                f'{owner}: length must be the length of the wrapped iterator '
                f'({inner}): {wrapped.length}, as it yields one batch per '
                f'batch of it. Received: length={self.length!r}'
            )
        expected = self._restored_data_shapes(wrapped)
        shapes = {name: tuple(shape) for name, shape in self.data_shapes.items()}
        if (
            self._wraps == 'other shapes'
            and expected is not None
            and shapes == {k: tuple(v) for k, v in wrapped.data_shapes.items()}
        ):
            self.data_shapes = shapes = expected  # as Brainstorm 0.5 wrote them
        if sorted(shapes) != sorted(wrapped.data_shapes) or (
            expected is not None and shapes != expected
        ):
            shown = expected if expected is not None else dict(wrapped.data_shapes)
            raise IteratorValidationError(
                f'{owner}: data_shapes must give the data of the wrapped '
                f'iterator ({inner}): {shown}. Received: data_shapes={shapes}'
            )

    def _restored_data_shapes(self, wrapped: DataIterator) -> dict | None:
        """The data shapes a restored wrapper of ``wrapped`` must have.

        Called after ``__validate__`` has checked the wrapper's arguments
        against ``wrapped``. None where this class cannot tell (only the
        names are checked); the wrappers that change shapes compute them.
        """
        if self._wraps == 'same shapes':
            return {name: tuple(shape) for name, shape in wrapped.data_shapes.items()}
        return None

    def __init_from_description__(self, description: dict) -> None:
        # a description stores arrays and shapes as (nested) lists, and
        # the dtypes of the data under data_dtypes (not kept: the arrays
        # hold them)
        super().__init_from_description__(description)
        dtypes = self.__dict__.pop('data_dtypes', None) or {}
        self.data_shapes = {
            name: tuple(shape) for name, shape in self.data_shapes.items()
        }
        data = getattr(self, 'data', None)
        owner = f'{type(self).__name__} (from a description)'
        unknown = [
            name for name in dtypes if not isinstance(data, dict) or name not in data
        ]
        if unknown:
            raise IteratorValidationError(
                f"{owner}: data_dtypes names unknown data '{unknown[0]}'. "
                f'Available: {sorted(data) if isinstance(data, dict) else []}'
            )
        if isinstance(data, dict):
            self.data: dict = {
                name: _restored_data(owner, name, d, dtypes.get(name))
                for name, d in data.items()
            }
        if isinstance(getattr(self, 'seq_lens', None), list):
            self.seq_lens: Any = np.asarray(self.seq_lens)
