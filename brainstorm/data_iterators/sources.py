"""Iterators over the user's arrays: all at once or in minibatches."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable

import numpy as np

from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    Callable,
    Choice,
    DictOf,
    Instance,
    Int,
    ListOf,
    NumericArray,
    Optional,
    Str,
    check_value,
)
from brainstorm.data_iterators.base import (
    _DATA,
    _DATA_DTYPE_NAMES,
    DataIterator,
    _check_finite_batch,
    _check_finite_data,
    _check_named_data,
    _check_restored_data,
    _check_shapes_unchanged,
    _closed_error,
    _describe_source,
    _mask_lengths,
    _part_bounds,
    _read,
    _read_only,
    _restored_data,
    _restored_data_error,
    reads_on_demand,
)
from brainstorm.errors import IteratorValidationError
from brainstorm.files import dataset_closed


def _example_iterator():
    """A small valid iterator (the declarations' example for ``iter``)."""
    return Undivided(a=np.zeros((1, 2, 4, 4, 1)))


class _Iterable(Instance):
    """An iterable that is no 0-d array.

    ``isinstance(value, Iterable)`` only asks for an ``__iter__`` method: a
    0-d NumPy array has one, but refuses to be iterated. The check does not
    call ``iter()``: that starts the worker processes of some loaders.
    """

    def __init__(self) -> None:
        super().__init__(Iterable, what='an iterable of batches (e.g. a generator)')

    @property
    def invalid_examples(self) -> tuple:
        """Those of :class:`Instance`, and a 0-d array."""
        return super().invalid_examples + (np.array(3),)

    def normalize(self, value):
        """Return ``value`` if it is iterable and no 0-d array."""
        value = super().normalize(value)
        if isinstance(value, np.ndarray) and value.ndim == 0:
            raise TypeError('a 0-d array cannot be iterated')
        return value


def _checked_batch(
    owner: str,
    data: dict,
    data_shapes: dict,
    check_finite: bool,
    time_cut: slice,
    samples,
) -> dict:
    """Read time steps ``time_cut`` of ``samples`` (a slice or indices) of ``data``.

    The data must still have the shapes ``data_shapes`` it had when the
    iterator was built (a resizable h5py dataset can change in a pass) and
    an h5py file must still be open. Values read from data in memory were
    checked when the iterator was built; those read from a file (or a
    ``np.memmap``) are checked here, as they are read (unless
    ``check_finite`` is False).
    """
    _check_shapes_unchanged(owner, data, data_shapes)
    batch = {}
    for name, array in data.items():
        try:
            block = _read(array, time_cut, samples)
        except (OSError, RuntimeError, ValueError) as error:
            if dataset_closed(array):
                raise _closed_error(owner, name, error) from error
            if not isinstance(error, OSError):
                raise
            raise IteratorValidationError(
                f"{owner}: data '{name}' could not be read from "
                f'{_describe_source(array)}: {error}'
            ) from error
        if check_finite and reads_on_demand(array):
            _check_finite_batch(owner, name, block, samples)
        batch[name] = _read_only(np.asarray(block))
    return batch


class Undivided(DataIterator):
    """Yield all the data as a single batch.

    The batch holds read-only views of the given arrays in memory. Data
    read on demand (an ``h5py.Dataset``, a ``np.memmap``) is not read
    here: each pass reads it when its batch is taken (all of it, being
    one batch; :class:`Minibatches` reads one batch at a time).

    Args:
        check_finite: check that the data holds no NaN or inf: once, here,
            for arrays in memory; for data read on demand, each time it is
            read (False skips the check).
        **named_data: arrays of shape ``(T, B, ...)`` with equal T and B.

    Attributes:
        total_size: the number of samples (B).
    """

    __arguments__ = {
        '**named_data': Arg(_DATA, label="data '{}'"),
        'data': Arg(DictOf(_DATA), state=True),
        'total_size': Arg(Int(0), state=True),
        'check_finite': Arg(Bool(), omit_default=True),
    }

    def __init__(self, check_finite: bool = True, **named_data: np.ndarray):
        data = _check_named_data('Undivided', named_data)
        _check_finite_data('Undivided', data, check_finite)
        super().__init__({name: d.shape for name, d in data.items()}, 1)
        self.data = data
        self.total_size = next(iter(data.values())).shape[1]
        self.check_finite = bool(check_finite)

    def __call__(self, handler=None):
        """Return a generator yielding the whole data once."""
        return self._part(handler, 0, 1)

    def _part(self, handler, rank: int, size: int):
        start, stop = _part_bounds(self.total_size, rank, size)
        yield _checked_batch(
            'Undivided',
            self.data,
            self.data_shapes,
            self.check_finite,
            slice(None),
            slice(start, stop),
        )

    def _check_restored(self, owner: str) -> None:
        """Refuse a description whose counts do not fit its data.

        ``data_shapes`` must give the data's shapes, ``length`` be 1 and
        ``total_size`` the number of samples (B). Brainstorm 0.5 wrote the
        number of values of all the data as ``total_size``; that value is
        read as B.
        """
        data = _check_restored_data(owner, self)
        first = next(iter(data.values()))
        samples = int(first.shape[1])
        if self.length != 1:
            raise _restored_data_error(owner, 'length', '1', self.length)
        if self.total_size == sum(int(d.size) for d in data.values()):
            self.total_size = samples  # written by Brainstorm 0.5
        if self.total_size != samples:
            raise _restored_data_error(
                owner,
                'total_size',
                f'the number of samples of the data: {samples} (B of its '
                f'shape {tuple(first.shape)})',
                self.total_size,
            )


#: the values of Minibatches' ``shuffle`` and what each shuffles
_SHUFFLE_MODES = {
    False: None,
    True: 'batches',
    'batches': 'batches',
    'samples': 'samples',
}
_SHUFFLE_NAMES = [mode for mode in _SHUFFLE_MODES if isinstance(mode, str)]


class Minibatches(DataIterator):
    """Yield consecutive batches of ``batch_size`` samples.

    Batch ``k`` holds samples ``[k * batch_size, (k + 1) * batch_size)`` as
    read-only views of the given arrays (nothing is copied).

    ``shuffle`` chooses what is shuffled, freshly for every pass, with the
    iterator's random stream (seeded from the global seed, see
    :doc:`/reproducibility`):

    * ``True`` or ``'batches'`` (the default, as in Brainstorm 0.5): the
      order of the batches is permuted, their content is not: the same
      samples always share a batch.
    * ``'samples'``: the samples are permuted, then cut into batches, so
      the batches differ in every pass. Each batch is a copy of its
      samples, in the permuted order.
    * ``False``: the batches come in the data's order.

    Data read on demand (an ``h5py.Dataset``, a ``np.memmap``) is never
    read whole: each batch is read when it is taken, also when shuffled
    (the samples of a batch are read from a file in increasing order and
    then put in the batch's order), and under a
    :class:`~brainstorm.data_iterators.Shard` each process reads only its
    part of each batch.

    The time axis of each batch is cut to its longest sequence. Sequence
    lengths come from ``cut_according_to``: the name of a mask of shape
    ``(T, B, 1)`` (length = last non-zero step + 1, 0 if there is none) or
    an explicit list with one length per sample. If it is a name that is not
    in the data, nothing is cut. A batch keeps at least one time step. A
    mask in a file is read once, here, in blocks.

    Args:
        batch_size: samples per batch.
        shuffle: ``True``/``'batches'``, ``'samples'`` or ``False``, see
            above.
        cut_according_to: mask name or list of sequence lengths.
        check_finite: check that the data holds no NaN or inf: once, here,
            for arrays in memory; for data read on demand, each batch when
            it is read (False skips the check).
        **named_data: arrays of shape ``(T, B, ...)`` with equal T and B.

    Attributes:
        sample_size: the number of samples (B of the data).
        seq_lens: per-sample sequence lengths, or None if nothing is cut.
    """

    __arguments__ = {
        'batch_size': Arg(Int(1)),
        'shuffle': Arg(AnyOf(Bool(), Choice(*_SHUFFLE_NAMES))),
        'cut_according_to': Arg(Optional(AnyOf(Str(), ListOf(Int(0)))), init_only=True),
        '**named_data': Arg(_DATA, label="data '{}'"),
        'data': Arg(DictOf(_DATA), state=True),
        'sample_size': Arg(Int(0), state=True),
        'seq_lens': Arg(Optional(ListOf(Int(0))), state=True),
        'check_finite': Arg(Bool(), omit_default=True),
    }

    def __init__(
        self,
        batch_size: int = 1,
        shuffle: bool | str = True,
        cut_according_to='mask',
        check_finite: bool = True,
        **named_data: np.ndarray,
    ):
        data = _check_named_data('Minibatches', named_data)
        _check_finite_data('Minibatches', data, check_finite)
        first = next(iter(data.values()))
        time_steps, sample_size = first.shape[:2]
        super().__init__(
            {name: d.shape for name, d in data.items()},
            int(math.ceil(sample_size / batch_size)),
        )
        self.data = data
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.sample_size = sample_size
        self.seq_lens = self._get_sequence_lengths(
            cut_according_to, data, time_steps, sample_size
        )
        self.check_finite = bool(check_finite)

    @staticmethod
    def _get_sequence_lengths(cut_according_to, data, time_steps, sample_size):
        if isinstance(cut_according_to, str) or cut_according_to is None:
            if cut_according_to not in data:
                return None
            return _mask_lengths(data[cut_according_to], time_steps, sample_size)
        lengths = np.asarray(cut_according_to)
        if (
            lengths.shape != (sample_size,)
            or not np.issubdtype(lengths.dtype, np.integer)
            or lengths.min(initial=0) < 0
            or lengths.max(initial=0) > time_steps
        ):
            raise IteratorValidationError(
                'Minibatches: cut_according_to must be a data name or a list '
                f'of {sample_size} ints in [0, {time_steps}]. '
                f'Received: {cut_according_to!r}'
            )
        return lengths

    def __call__(self, handler=None):
        """Return a generator over the batches of one pass."""
        return self._part(handler, 0, 1)

    def _batch_samples(self):
        """The samples of each batch of a pass, in the pass's order.

        Each is a slice, or with ``shuffle='samples'`` an int array. The
        random draw happens when the first batch is asked for.
        """
        mode = _SHUFFLE_MODES[self.shuffle]
        size = self.batch_size
        if mode == 'samples':
            permutation = self.rnd.permutation(self.sample_size)
            for start in range(0, self.sample_size, size):
                yield permutation[start : start + size]
            return
        order = self.rnd.permutation(self.length) if mode else range(self.length)
        for k in order:
            start = int(k) * size
            yield slice(start, min(start + size, self.sample_size))

    def _part(self, handler, rank: int, size: int):
        _check_shapes_unchanged('Minibatches', self.data, self.data_shapes)
        for samples in self._batch_samples():
            # the time cut of the whole batch, whichever part is read
            if self.seq_lens is None:
                time_cut = slice(None)
            else:
                time_cut = slice(max(int(self.seq_lens[samples].max()), 1))
            if isinstance(samples, slice):
                low, high = _part_bounds(samples.stop - samples.start, rank, size)
                part: slice | np.ndarray = slice(
                    samples.start + low, samples.start + high
                )
            else:
                low, high = _part_bounds(len(samples), rank, size)
                part = samples[low:high]
            yield _checked_batch(
                'Minibatches',
                self.data,
                self.data_shapes,
                self.check_finite,
                time_cut,
                part,
            )

    def _check_restored(self, owner: str) -> None:
        """Refuse a description whose counts do not fit its data.

        ``data_shapes`` must give the data's shapes, ``sample_size`` its
        number of samples (B), ``length`` the number of batches of
        ``batch_size`` and ``seq_lens`` (if any) one length in [0, T] per
        sample. Brainstorm 0.5 wrote the values of a batch as
        ``sample_size``; that value is read as B.
        """
        data = _check_restored_data(owner, self)
        first = next(iter(data.values()))
        time_steps, samples = (int(n) for n in first.shape[:2])
        shown = f'(B of its shape {tuple(first.shape)})'
        values_05 = sum(
            int(d.shape[0]) * math.prod(d.shape[2:]) * self.batch_size
            for d in data.values()
        )
        if self.sample_size == values_05 and self.sample_size != samples:
            self.sample_size = samples  # written by Brainstorm 0.5
        if self.sample_size != samples:
            raise _restored_data_error(
                owner,
                'sample_size',
                f'the number of samples of the data: {samples} {shown}',
                self.sample_size,
            )
        batches = math.ceil(samples / self.batch_size)
        if self.length != batches:
            raise _restored_data_error(
                owner,
                'length',
                f'the number of batches of {self.batch_size} of its {samples} '
                f'samples: {batches}',
                self.length,
            )
        if self.seq_lens is not None:
            lengths = np.asarray(self.seq_lens)
            if lengths.shape != (samples,) or lengths.max(initial=0) > time_steps:
                raise _restored_data_error(
                    owner,
                    'seq_lens',
                    f'None or one sequence length in [0, {time_steps}] per '
                    f'sample: {samples} ints {shown}',
                    lengths.tolist(),
                )
            self.seq_lens = lengths.astype(np.int64)


#: each array of a generated batch (checked as it comes)
_BATCH_VALUES = Arg(NumericArray(min_ndim=3, finite=False))


class FromGenerator(DataIterator):
    """Yield the batches a Python function or generator makes.

    For data that is not an array: batches built on the fly, read from a
    database or from many files. Each batch is a dict mapping the data
    names to arrays of shape ``(T, B, ...)`` (T and B may change from
    batch to batch; the other dimensions may not). The arrays are checked
    as they come and yielded read-only.

    What ``batches`` may be, and what a pass (an epoch) is:

    * a function (any callable) returning an iterable of batches: it is
      called, without arguments, at the start of every pass. This is the
      form for training over several epochs.
    * an iterable that is not its own iterator (a list of batches): every
      pass goes over it anew.
    * a generator (any iterator): it gives one pass only. A second pass
      raises an :class:`~brainstorm.errors.IteratorValidationError`: pass
      the function that makes the generator instead.

    ``data_shapes`` may be left out: the first batch then gives it (a
    function is called once more for that, here; a generator's first batch
    is kept for its pass). A checkpoint resumed mid-epoch replays the
    batches done (as for every iterator): only a function that makes the
    same batches in every pass resumes exactly.

    Args:
        batches: a function returning the batches of one pass, a list of
            batches, or a generator of batches.
        data_shapes: maps each data name to its shape ``(T, B, ...)``;
            only the dimensions after T and B are checked.
        length: the number of batches per pass, if known (a progress bar
            and data-parallel training need it); a pass yielding another
            number raises an error.
        check_finite: check each batch for NaN or inf when it comes.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> def batches():
        ...     for start in range(0, 6, 2):
        ...         x = np.full((1, 2, 3), start, dtype=float)
        ...         yield {'default': x, 'targets': x[:, :, :1]}
        >>> it = bs.data_iterators.FromGenerator(batches, length=3)
        >>> it.data_shapes
        {'default': (1, 2, 3), 'targets': (1, 2, 1)}
        >>> [float(batch['default'][0, 0, 0]) for batch in it()]
        [0.0, 2.0, 4.0]
    """

    __arguments__ = {
        'batches': Arg(
            AnyOf(
                Callable(),
                _Iterable(),
            )
        ),
        'data_shapes': Arg(Optional(DictOf(ListOf(Int(0), as_tuple=True)))),
        'length': Arg(Optional(Int(0))),
        'check_finite': Arg(Bool(), omit_default=True),
    }
    __undescribed__ = {'_first': None, '_passes': 0}

    def __init__(
        self,
        batches,
        data_shapes: dict[str, tuple[int, ...]] | None = None,
        length: int | None = None,
        check_finite: bool = True,
    ):
        if isinstance(batches, (str, bytes, dict)):
            # iterable, but of characters or names, not of batches
            raise IteratorValidationError(
                'FromGenerator: batches must be a function returning batches, '
                'a list of batches or a generator of batches (a single batch '
                f'goes in a list). Received: batches={batches!r:.80}'
            )
        self.batches = batches
        self.check_finite = bool(check_finite)
        self._passes = 0
        self._first = None
        if data_shapes is None:
            data_shapes = self._peek()
        super().__init__(data_shapes, length)  # type: ignore[arg-type]
        # a list that contradicts length failed only after a whole pass
        self._check_length('FromGenerator', '')

    def __describe__(self) -> dict:
        """The description, with ``data_dtypes`` for a list of batches.

        The batches are described as nested lists, which NumPy reads back
        as int64, float64 or bool; ``data_dtypes`` records, for each data
        name, the dtype all the batches give it (a name whose dtype differs
        between batches is left out and read as before).
        """
        description = super().__describe__()
        dtypes = self._batch_dtypes()
        if dtypes:
            kind = description.pop('@type')
            description['data_dtypes'] = dtypes
            description['@type'] = kind
        return description

    def _batch_dtypes(self) -> dict:
        """Each data name's dtype, where all batches of a list agree on it."""
        if not isinstance(self.batches, (list, tuple)):
            return {}
        found: dict = {}
        for batch in self.batches:
            if not isinstance(batch, dict):
                return {}
            for name, values in batch.items():
                try:
                    dtype = np.asarray(values).dtype.name
                except (TypeError, ValueError):  # refused when it is used
                    dtype = 'object'
                found.setdefault(name, set()).add(dtype)
        return {
            name: next(iter(kinds))
            for name, kinds in found.items()
            if len(kinds) == 1 and next(iter(kinds)) in _DATA_DTYPE_NAMES
        }

    def __init_from_description__(self, description: dict) -> None:
        # data_dtypes apply to the batches of a described list (the base
        # class applies them to ``data``, which this iterator has not)
        dtypes = self.__dict__.pop('data_dtypes', None) or {}
        super().__init_from_description__(description)
        owner = 'FromGenerator (from a description)'
        unknown = [name for name in dtypes if name not in self.data_shapes]
        if unknown:
            raise IteratorValidationError(
                f"{owner}: data_dtypes names unknown data '{unknown[0]}'. "
                f'Available: {sorted(self.data_shapes)}'
            )
        if dtypes and isinstance(self.batches, (list, tuple)):
            self.batches = [
                {
                    name: _restored_data(
                        owner, name, values, dtypes.get(name), f' of batch {number}'
                    )
                    for name, values in batch.items()
                }
                if isinstance(batch, dict)
                else batch
                for number, batch in enumerate(self.batches)
            ]

    def _check_restored(self, owner: str) -> None:
        """Refuse a described list of batches that contradicts ``length``."""
        self._check_length(owner, ' (was the description edited?)')

    def _check_length(self, owner: str, note: str) -> None:
        """Refuse a list of batches that contradicts ``length``."""
        batches = self.batches
        if (
            isinstance(batches, (list, tuple))
            and self.length is not None
            and self.length != len(batches)
        ):
            raise IteratorValidationError(
                f'{owner}: length must be None or the number of batches '
                f'given: {len(batches)}. Received: length={self.length!r}{note}'
            )

    def _made(self):
        """An iterator over what the function ``batches`` returns."""
        made = self.batches()
        try:
            return iter(made)
        except TypeError:
            raise IteratorValidationError(
                'FromGenerator: batches() must return an iterable of batches '
                f'(e.g. a generator). Received: {type(made).__name__} {made!r:.80}'
            ) from None

    def _peek(self) -> dict[str, tuple[int, ...]]:
        source = self._made() if callable(self.batches) else iter(self.batches)
        first = next(source, None)
        if first is None:
            raise IteratorValidationError(
                'FromGenerator: the batches given yield no batch, so they '
                f'give no data_shapes. Received: batches={self.batches!r:.80}'
            )
        shapes = {}
        for name, values in self._check_names(first, None, 0).items():
            shapes[name] = tuple(self._array(name, values, 0).shape)
        if source is self.batches:
            self._first = first  # the generator's first batch, for its pass
        elif hasattr(source, 'close'):
            source.close()
        return shapes

    def _source(self):
        """The iterator of this pass's batches."""
        self._passes += 1
        if callable(self.batches):
            return self._made()
        if iter(self.batches) is not self.batches:
            return iter(self.batches)
        if self._passes > 1:
            raise IteratorValidationError(
                'FromGenerator: the generator given was used up by the first '
                'pass; a generator gives one pass only. For more passes '
                '(epochs), pass the function that makes the generator: '
                'FromGenerator(make_batches), not '
                'FromGenerator(make_batches()).'
            )
        if self._first is None:
            return self.batches
        first, self._first = self._first, None
        return itertools.chain([first], self.batches)

    def __call__(self, handler=None):
        """Return a generator over the batches of one pass."""
        count = 0
        for batch in self._source():
            yield self._checked(batch, count)
            count += 1
        if self.length is not None and count != self.length:
            raise IteratorValidationError(
                f'FromGenerator: a pass yielded {count} batches, but length is '
                f'{self.length}.'
            )

    def _check_names(self, batch, expected, number: int) -> dict:
        if not isinstance(batch, dict) or not batch:
            raise IteratorValidationError(
                f'FromGenerator: batch {number} of the pass must be a dict '
                'of data names to arrays (T, B, ...). Received: '
                f'{type(batch).__name__} {batch!r:.80}'
            )
        if expected is not None and set(batch) != set(expected):
            raise IteratorValidationError(
                f'FromGenerator: batch {number} of the pass has data '
                f'{sorted(batch)}, but data_shapes names {sorted(expected)}.'
            )
        return batch

    @staticmethod
    def _array(name, values, number: int) -> np.ndarray:
        return check_value(
            'FromGenerator',
            FromGenerator,
            name,
            _BATCH_VALUES,
            values,
            shown=f"data '{name}' of batch {number}",
        )

    def _checked(self, batch, number: int) -> dict:
        """Check one batch against the data shapes; return it read-only."""
        self._check_names(batch, self.data_shapes, number)
        result = {}
        first_name = None
        for name in self.data_shapes:
            array = np.asarray(self._array(name, batch[name], number))
            expected = self.data_shapes[name][2:]
            if array.shape[2:] != tuple(expected):
                raise IteratorValidationError(
                    f"FromGenerator: data '{name}' of batch {number} must "
                    f'have shape (T, B, {", ".join(map(str, expected))}). '
                    f'Received: shape={array.shape}'
                )
            if first_name is None:
                first_name = name
            elif array.shape[:2] != result[first_name].shape[:2]:
                raise IteratorValidationError(
                    f'FromGenerator: all data of batch {number} must have '
                    f"the same (T, B). Data '{first_name}' has "
                    f"{result[first_name].shape[:2]}, '{name}' has "
                    f'{array.shape[:2]}'
                )
            if array.shape[0] == 0 and array.shape[1] > 0:
                raise IteratorValidationError(
                    f"FromGenerator: data '{name}' of batch {number} of the "
                    'pass has no time steps: expected a shape (T, B, ...) '
                    f'with T >= 1 for its {array.shape[1]} samples. Received: '
                    f'shape={array.shape}. A loss over no time steps is 0.0, '
                    'which would count as a perfect score for its samples.'
                )
            if self.check_finite:
                _check_finite_batch(
                    f'FromGenerator (batch {number} of the pass)',
                    name,
                    array,
                    slice(0, None),
                )
            result[name] = _read_only(array)
        return result


# -------------------------------------------------------------- wrappers ---
