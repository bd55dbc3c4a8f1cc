"""Data iterators: feed named data to a network batch by batch.

A data iterator is called with a handler and returns a generator; each item
is a dict mapping data names (the names of the network's Input outputs) to
NumPy arrays of shape ``(T, B, ...)``. ``length`` is the number of batches
per pass and ``data_shapes`` maps each name to the full shape of its data.

:class:`Undivided` and :class:`Minibatches` read the user's arrays; the
others wrap another iterator (kept in the attribute ``iter``) and change
some of its data. Guarantees:

* The user's arrays are never modified. The base iterators yield read-only
  views, and wrappers always write their results into new arrays, so
  nothing accumulates across passes.
* Every random draw comes from the iterator's own ``rnd`` and happens while
  the pass runs. Saving ``it.rnd.get_state()`` for an iterator and every
  iterator below it (follow ``.iter``) between passes and restoring these
  states later reproduces the following passes exactly.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    DictOf,
    Instance,
    Int,
    ListOf,
    NumericArray,
    Optional,
    Real,
    Str,
)
from brainstorm.parallel import world_rank_and_size
from brainstorm.randomness import RandomState, Seedable
from brainstorm.utils import IteratorValidationError

__all__ = ['DataIterator', 'Undivided', 'Minibatches', 'AddGaussianNoise',
           'AddSaltNPepper', 'Flip', 'OneHot', 'MultiHot', 'Pad',
           'RandomCrop', 'Shard']


# --------------------------------------------------------------- helpers ---

def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view of ``array`` (the array itself stays writeable)."""
    view = array.view()
    view.flags.writeable = False
    return view


def _check_named_data(owner: str, named_data: dict) -> dict:
    """Validate the data of a base iterator and return it as arrays.

    NumPy arrays are kept as they are (no copy); other array-likes are
    converted with ``np.asarray``.
    """
    if not named_data:
        raise IteratorValidationError(
            f'{owner}: needs at least one named data array. Received none.')
    result = {}
    first_name = first_shape = None
    for name, data in named_data.items():
        if not isinstance(data, np.ndarray):
            data = np.asarray(data)
        if data.ndim < 3:
            raise IteratorValidationError(
                f"{owner}: data '{name}' must have at least 3 dimensions "
                f'(T, B, ...). Received: shape={data.shape}')
        if first_shape is None:
            first_name, first_shape = name, data.shape
        elif data.shape[:2] != first_shape[:2]:
            raise IteratorValidationError(
                f"{owner}: all data must have the same time and batch sizes "
                f"(T, B). Data '{first_name}' has {first_shape[:2]} but "
                f"'{name}' has {data.shape[:2]}")
        result[name] = data
    return result


def _check_finite_data(owner: str, data: dict, check_finite) -> None:
    """Raise if a float array of ``data`` holds NaN or inf (once, when the
    iterator is built, instead of a NaN training run later).

    Each array is checked in blocks of about a million values, so the
    check needs little memory. ``check_finite=False`` skips it (for huge
    memory-mapped data that should not be read here).
    """
    if not isinstance(check_finite, bool):
        raise IteratorValidationError(
            f'{owner}: check_finite must be a bool. Received: '
            f'check_finite={check_finite!r}')
    if not check_finite:
        return
    for name, array in data.items():
        if not np.issubdtype(array.dtype, np.inexact):
            continue  # integers and booleans are always finite
        step = max(1, 2 ** 20 // max(1, math.prod(array.shape[2:])))
        for t in range(array.shape[0]):
            for b in range(0, array.shape[1], step):
                block = array[t, b:b + step]
                finite = np.isfinite(block)
                if finite.all():
                    continue
                where = np.unravel_index(int(np.argmin(finite)),
                                         finite.shape)
                index = (t, b + int(where[0]), *map(int, where[1:]))
                raise IteratorValidationError(
                    f"{owner}: data '{name}' holds NaN or infinite values "
                    f'(the first at index {index}: {block[where]}). Clean '
                    'the data, or pass check_finite=False to skip this '
                    'check (e.g. for huge memory-mapped arrays).')


def _check_iterator(owner: str, iterator) -> None:
    if not isinstance(iterator, DataIterator):
        raise IteratorValidationError(
            f'{owner}: iter must be a DataIterator. Received: '
            f'{type(iterator).__name__}')


def _check_names(owner: str, argument: str, names, iterator: DataIterator
                 ) -> None:
    if not isinstance(names, Mapping):
        raise IteratorValidationError(
            f'{owner}: {argument} must be a dict of data names. '
            f'Received: {names!r}')
    for name in names:
        if name not in iterator.data_shapes:
            raise IteratorValidationError(
                f"{owner}: {argument} names unknown data '{name}'. "
                f'Available: {sorted(iterator.data_shapes)}')


def _check_5d(owner: str, names, iterator: DataIterator) -> None:
    for name in names:
        shape = iterator.data_shapes[name]
        if len(shape) != 5:
            raise IteratorValidationError(
                f"{owner}: data '{name}' must be 5-D (T, B, H, W, C). "
                f'Received: shape={tuple(shape)}')


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (isinstance(value, (int, float, np.integer, np.floating))
            and not isinstance(value, bool) and math.isfinite(value))


def _check_numbers(owner: str, argument: str, values: Mapping,
                   low: float | None = None, high: float | None = None
                   ) -> None:
    for name, value in values.items():
        ok = _is_number(value)
        if ok and low is not None:
            ok = value >= low
        if ok and high is not None:
            ok = value <= high
        if not ok:
            bounds = ''
            if low is not None or high is not None:
                bounds = f' in [{low}, {high}]'
            raise IteratorValidationError(
                f"{owner}: {argument}['{name}'] must be a number{bounds}. "
                f'Received: {value!r}')


# ------------------------------------------------------------------ base ---

#: Named data: numeric arrays (T, B, ...); NaN/Inf are the data's business.
_DATA = NumericArray(min_ndim=3, finite=False)


def _example_iterator():
    """A small valid iterator (the declarations' example for ``iter``)."""
    return Undivided(a=np.zeros((1, 2, 4, 4, 1)))


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
        self.data_shapes = {name: tuple(shape)
                            for name, shape in self.data_shapes.items()}
        if isinstance(getattr(self, 'data', None), dict):
            self.data: dict = {name: np.asarray(d)
                               for name, d in self.data.items()}
        if isinstance(getattr(self, 'seq_lens', None), list):
            self.seq_lens: Any = np.asarray(self.seq_lens)


class Undivided(DataIterator):
    """Yield all the data as a single batch.

    The batch holds read-only views of the given arrays.

    Args:
        check_finite: check once, here, that the data holds no NaN or inf
            (False skips it, e.g. for huge memory-mapped arrays).
        **named_data: arrays of shape ``(T, B, ...)`` with equal T and B.

    Attributes:
        total_size: the number of samples (B).
    """

    __arguments__ = {
        '**named_data': Arg(_DATA, label="data '{}'"),
        'data': Arg(DictOf(_DATA), state=True),
        'total_size': Arg(Int(0), state=True),
        'check_finite': Arg(Bool(), default=True, init_only=True),
    }

    def __init__(self, check_finite: bool = True,
                 **named_data: np.ndarray):
        data = _check_named_data('Undivided', named_data)
        _check_finite_data('Undivided', data, check_finite)
        super().__init__({name: d.shape for name, d in data.items()}, 1)
        self.data = data
        self.total_size = next(iter(data.values())).shape[1]

    def __call__(self, handler=None):
        """Return a generator yielding the whole data once."""
        yield {name: _read_only(d) for name, d in self.data.items()}


class Minibatches(DataIterator):
    """Yield consecutive batches of ``batch_size`` samples.

    Batch ``k`` holds samples ``[k * batch_size, (k + 1) * batch_size)`` as
    read-only views of the given arrays (nothing is copied). With ``shuffle``
    the order of the batches (not their content) is permuted, freshly for
    every pass.

    The time axis of each batch is cut to its longest sequence. Sequence
    lengths come from ``cut_according_to``: the name of a mask of shape
    ``(T, B, 1)`` (length = last non-zero step + 1, 0 if there is none) or
    an explicit list with one length per sample. If it is a name that is not
    in the data, nothing is cut. A batch keeps at least one time step.

    Args:
        batch_size: samples per batch.
        shuffle: permute the batch order in every pass.
        cut_according_to: mask name or list of sequence lengths.
        check_finite: check once, here, that the data holds no NaN or inf
            (False skips it, e.g. for huge memory-mapped arrays).
        **named_data: arrays of shape ``(T, B, ...)`` with equal T and B.

    Attributes:
        sample_size: the number of samples (B of the data).
        seq_lens: per-sample sequence lengths, or None if nothing is cut.
    """

    __arguments__ = {
        'batch_size': Arg(Int(1), default=1),
        'shuffle': Arg(Bool(), default=True),
        'cut_according_to': Arg(Optional(AnyOf(Str(), ListOf(Int(0)))),
                            default='mask',
                                init_only=True),
        '**named_data': Arg(_DATA, label="data '{}'"),
        'data': Arg(DictOf(_DATA), state=True),
        'sample_size': Arg(Int(0), state=True),
        'seq_lens': Arg(Optional(ListOf(Int(0))), state=True),
        'check_finite': Arg(Bool(), default=True, init_only=True),
    }

    def __init__(self, batch_size: int = 1, shuffle: bool = True,
                 cut_according_to='mask', check_finite: bool = True,
                 **named_data: np.ndarray):
        data = _check_named_data('Minibatches', named_data)
        _check_finite_data('Minibatches', data, check_finite)
        if not _is_int(batch_size) or batch_size < 1:
            raise IteratorValidationError(
                'Minibatches: batch_size must be a positive int. '
                f'Received: batch_size={batch_size!r}')
        first = next(iter(data.values()))
        time_steps, sample_size = first.shape[:2]
        super().__init__({name: d.shape for name, d in data.items()},
                         int(math.ceil(sample_size / batch_size)))
        self.data = data
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.sample_size = sample_size
        self.seq_lens = self._get_sequence_lengths(cut_according_to, data,
                                                   time_steps, sample_size)

    @staticmethod
    def _get_sequence_lengths(cut_according_to, data, time_steps,
                              sample_size):
        if isinstance(cut_according_to, str) or cut_according_to is None:
            if cut_according_to not in data:
                return None
            mask = data[cut_according_to]
            nonzero = mask.reshape(time_steps, sample_size, -1).any(axis=2)
            last = time_steps - np.argmax(nonzero[::-1], axis=0)
            return np.where(nonzero.any(axis=0), last, 0)
        lengths = np.asarray(cut_according_to)
        if (lengths.shape != (sample_size,)
                or not np.issubdtype(lengths.dtype, np.integer)
                or lengths.min(initial=0) < 0
                or lengths.max(initial=0) > time_steps):
            raise IteratorValidationError(
                'Minibatches: cut_according_to must be a data name or a list '
                f'of {sample_size} ints in [0, {time_steps}]. '
                f'Received: {cut_according_to!r}')
        return lengths

    def __call__(self, handler=None):
        """Return a generator over the batches of one pass."""
        if self.shuffle:
            order = self.rnd.permutation(self.length)
        else:
            order = range(self.length)
        for k in order:
            start = int(k) * self.batch_size
            stop = min(start + self.batch_size, self.sample_size)
            if self.seq_lens is None:
                time_cut = slice(None)
            else:
                time_cut = slice(max(int(self.seq_lens[start:stop].max()), 1))
            yield {name: _read_only(d[time_cut, start:stop])
                   for name, d in self.data.items()}


# -------------------------------------------------------------- wrappers ---

class AddGaussianNoise(DataIterator):
    """Add Gaussian noise to some of the data (into new arrays).

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        std_dict: data name -> standard deviation of the noise.
        mean_dict: data name -> mean of the noise (default 0); must have the
            same names as ``std_dict`` if given.
    """

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'std_dict': Arg(DictOf(Real(0))),
        'mean_dict': Arg(Optional(DictOf(Real())), default=None),
    }

    def __init__(self, iter: DataIterator, std_dict: dict[str, float],
                 mean_dict: dict[str, float] | None = None):
        _check_iterator('AddGaussianNoise', iter)
        _check_names('AddGaussianNoise', 'std_dict', std_dict, iter)
        _check_numbers('AddGaussianNoise', 'std_dict', std_dict, low=0)
        if mean_dict is None:
            mean_dict = {name: 0.0 for name in std_dict}
        _check_names('AddGaussianNoise', 'mean_dict', mean_dict, iter)
        if set(mean_dict) != set(std_dict):
            raise IteratorValidationError(
                'AddGaussianNoise: mean_dict and std_dict must name the same '
                f'data. Received: std_dict keys {sorted(std_dict)}, '
                f'mean_dict keys {sorted(mean_dict)}')
        _check_numbers('AddGaussianNoise', 'mean_dict', mean_dict)
        super().__init__(dict(iter.data_shapes), iter.length)
        self.iter = iter
        self.std_dict = dict(std_dict)
        self.mean_dict = dict(mean_dict)

    def __call__(self, handler=None):
        """Return a generator over the noisy batches of one pass."""
        for data in self.iter(handler):
            data = dict(data)
            for name, std in self.std_dict.items():
                values = data[name]
                noise = self.rnd.normal(self.mean_dict[name], std,
                                        size=values.shape)
                if np.issubdtype(values.dtype, np.floating):
                    noise = noise.astype(values.dtype)
                data[name] = values + noise
            yield data


class AddSaltNPepper(DataIterator):
    """Set random entries to 1 (salt) or 0 (pepper), in a copy of the data.

    For each entry ``u ~ U[0, 1)`` is drawn: ``u >= 1 - p * r`` sets it to 1
    and ``u <= p * (1 - r)`` sets it to 0, so a fraction ``p`` of the entries
    is changed and ``r`` of those become 1.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        prob_dict: data name -> probability ``p`` in [0, 1].
        ratio_dict: data name -> salt ratio ``r`` in [0, 1] (default 0.5).
    """

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'prob_dict': Arg(DictOf(Real(0, 1))),
        'ratio_dict': Arg(Optional(DictOf(Real(0, 1))), default=None),
    }

    def __init__(self, iter: DataIterator, prob_dict: dict[str, float],
                 ratio_dict: dict[str, float] | None = None):
        _check_iterator('AddSaltNPepper', iter)
        _check_names('AddSaltNPepper', 'prob_dict', prob_dict, iter)
        _check_numbers('AddSaltNPepper', 'prob_dict', prob_dict, 0, 1)
        ratio_dict = {} if ratio_dict is None else ratio_dict
        _check_names('AddSaltNPepper', 'ratio_dict', ratio_dict, iter)
        _check_numbers('AddSaltNPepper', 'ratio_dict', ratio_dict, 0, 1)
        for name in ratio_dict:
            if name not in prob_dict:
                raise IteratorValidationError(
                    f"AddSaltNPepper: ratio_dict names '{name}' which is not "
                    f'in prob_dict {sorted(prob_dict)}')
        super().__init__(dict(iter.data_shapes), iter.length)
        self.iter = iter
        self.prob_dict = dict(prob_dict)
        self.ratio_dict = {name: ratio_dict.get(name, 0.5)
                           for name in prob_dict}

    def __call__(self, handler=None):
        """Return a generator over the noisy batches of one pass."""
        for data in self.iter(handler):
            data = dict(data)
            for name, prob in self.prob_dict.items():
                ratio = self.ratio_dict[name]
                values = np.array(data[name])
                u = self.rnd.uniform(size=values.shape)
                values[u >= 1 - prob * ratio] = 1
                values[u <= prob * (1 - ratio)] = 0
                data[name] = values
            yield data


class Flip(DataIterator):
    """Randomly mirror images along their width axis.

    Each sample of 5-D data ``(T, B, H, W, C)`` is flipped along W (axis 3)
    with the given probability, the same way at all time steps. Flipped
    batches are new arrays; the source data is never changed.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        prob_dict: data name -> flip probability in [0, 1]; default
            ``{'default': 0.5}``.
    """

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'prob_dict': Arg(Optional(DictOf(Real(0, 1))), default=None),
    }

    def __init__(self, iter: DataIterator,
                 prob_dict: dict[str, float] | None = None):
        _check_iterator('Flip', iter)
        prob_dict = {'default': 0.5} if prob_dict is None else prob_dict
        _check_names('Flip', 'prob_dict', prob_dict, iter)
        _check_numbers('Flip', 'prob_dict', prob_dict, 0, 1)
        _check_5d('Flip', prob_dict, iter)
        super().__init__(dict(iter.data_shapes), iter.length)
        self.iter = iter
        self.prob_dict = dict(prob_dict)

    def __call__(self, handler=None):
        """Return a generator over the randomly flipped batches."""
        for data in self.iter(handler):
            data = dict(data)
            for name, prob in self.prob_dict.items():
                values = data[name]
                flip = self.rnd.uniform(size=values.shape[1]) < prob
                if flip.any():
                    flipped = np.array(values)
                    flipped[:, flip] = values[:, flip, :, ::-1]
                    data[name] = flipped
            yield data


def _check_vocabulary_sizes(owner: str, vocab_size_dict, iterator) -> None:
    _check_names(owner, 'vocab_size_dict', vocab_size_dict, iterator)
    for name, size in vocab_size_dict.items():
        if not _is_int(size) or size < 1:
            raise IteratorValidationError(
                f"{owner}: vocab_size_dict['{name}'] must be a positive int. "
                f'Received: {size!r}')


def _as_ids(owner: str, name: str, values: np.ndarray, vocab_size: int
            ) -> np.ndarray:
    ids = np.asarray(values)
    if ids.size and (not np.all(np.mod(ids, 1) == 0) or ids.min() < 0
                     or ids.max() >= vocab_size):
        raise IteratorValidationError(
            f"{owner}: data '{name}' must hold integer ids in "
            f'[0, {vocab_size}). Received values in [{ids.min()}, '
            f'{ids.max()}]')
    return ids.astype(np.intp)


class MultiHot(DataIterator):
    """Turn ``K`` integer ids ``(T, B, K)`` into a multi-hot ``(T, B, V)``.

    Each id sets its entry to True, so K distinct ids give K ones.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        vocab_size_dict: data name -> vocabulary size V (int).
    """

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'vocab_size_dict': Arg(DictOf(Int(1))),
    }

    def __init__(self, iter: DataIterator, vocab_size_dict: dict[str, int]):
        kind = type(self).__name__
        _check_iterator(kind, iter)
        _check_vocabulary_sizes(kind, vocab_size_dict, iter)
        self._check_id_shapes(iter, vocab_size_dict)
        data_shapes = dict(iter.data_shapes)
        for name, size in vocab_size_dict.items():
            data_shapes[name] = tuple(data_shapes[name][:-1]) + (int(size),)
        super().__init__(data_shapes, iter.length)
        self.iter = iter
        self.vocab_size_dict = dict(vocab_size_dict)

    def _check_id_shapes(self, iter, vocab_size_dict) -> None:
        """Any number K of ids per step is fine here."""

    def __call__(self, handler=None):
        """Return a generator over the batches with encoded data."""
        for data in self.iter(handler):
            data = dict(data)
            for name, size in self.vocab_size_dict.items():
                ids = _as_ids(type(self).__name__, name, data[name], size)
                multi_hot = np.zeros(ids.shape[:-1] + (size,), dtype=bool)
                np.put_along_axis(multi_hot, ids, True, axis=-1)
                data[name] = multi_hot
            yield data


class OneHot(MultiHot):
    """Turn integer ids of shape ``(T, B, 1)`` into one-hot ``(T, B, V)``.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        vocab_size_dict: data name -> vocabulary size V (int).
    """

    def _check_id_shapes(self, iter, vocab_size_dict) -> None:
        for name in vocab_size_dict:
            shape = tuple(iter.data_shapes[name])
            if shape[-1] != 1:
                raise IteratorValidationError(
                    f"OneHot: data '{name}' must have size 1 in its last "
                    f'dimension. Received: shape={shape}')


class Pad(DataIterator):
    """Pad images ``(T, B, H, W, C)`` by ``size`` on each side of H and W.

    The result is a new float64 array of shape
    ``(T, B, H + 2 size, W + 2 size, C)``.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        size_dict: data name -> padding size (int >= 0).
        value_dict: data name -> padding value (default 0).
    """

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'size_dict': Arg(DictOf(Int(0))),
        'value_dict': Arg(Optional(DictOf(Real())), default=None),
    }

    def __init__(self, iter: DataIterator, size_dict: dict[str, int],
                 value_dict: dict[str, float] | None = None):
        _check_iterator('Pad', iter)
        _check_names('Pad', 'size_dict', size_dict, iter)
        _check_5d('Pad', size_dict, iter)
        for name, size in size_dict.items():
            if not _is_int(size) or size < 0:
                raise IteratorValidationError(
                    f"Pad: size_dict['{name}'] must be an int >= 0. "
                    f'Received: {size!r}')
        value_dict = {} if value_dict is None else value_dict
        _check_names('Pad', 'value_dict', value_dict, iter)
        _check_numbers('Pad', 'value_dict', value_dict)
        for name in value_dict:
            if name not in size_dict:
                raise IteratorValidationError(
                    f"Pad: value_dict names '{name}' which is not in "
                    f'size_dict {sorted(size_dict)}')
        data_shapes = dict(iter.data_shapes)
        for name, size in size_dict.items():
            t, b, h, w, c = data_shapes[name]
            data_shapes[name] = (t, b, h + 2 * size, w + 2 * size, c)
        super().__init__(data_shapes, iter.length)
        self.iter = iter
        self.size_dict = {name: int(s) for name, s in size_dict.items()}
        self.value_dict = {name: value_dict.get(name, 0.0)
                           for name in size_dict}

    def __call__(self, handler=None):
        """Return a generator over the padded batches."""
        for data in self.iter(handler):
            data = dict(data)
            for name, size in self.size_dict.items():
                values = data[name]
                t, b, h, w, c = values.shape
                padded = np.full((t, b, h + 2 * size, w + 2 * size, c),
                                 self.value_dict[name], dtype=np.float64)
                padded[:, :, size:size + h, size:size + w] = values
                data[name] = padded
            yield data


class RandomCrop(DataIterator):
    """Crop a random ``(h, w)`` window out of images ``(T, B, H, W, C)``.

    Each sample gets its own corner, drawn uniformly from all valid corners
    (both ends inclusive), used at all time steps. The result is a new
    float64 array of shape ``(T, B, h, w, C)``.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        shape_dict: data name -> ``(h, w)`` with ``h <= H`` and ``w <= W``.
    """

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'shape_dict': Arg(DictOf(ListOf(Int(1), as_tuple=True, length=2))),
    }

    def __init__(self, iter: DataIterator,
                 shape_dict: dict[str, tuple[int, int]]):
        _check_iterator('RandomCrop', iter)
        _check_names('RandomCrop', 'shape_dict', shape_dict, iter)
        _check_5d('RandomCrop', shape_dict, iter)
        data_shapes = dict(iter.data_shapes)
        for name, crop in shape_dict.items():
            t, b, h, w, c = data_shapes[name]
            if (not isinstance(crop, (tuple, list)) or len(crop) != 2
                    or not all(_is_int(x) and x >= 1 for x in crop)):
                raise IteratorValidationError(
                    f"RandomCrop: shape_dict['{name}'] must be a tuple of two "
                    f'positive ints (h, w). Received: {crop!r}')
            if crop[0] > h or crop[1] > w:
                raise IteratorValidationError(
                    f"RandomCrop: crop {tuple(crop)} for data '{name}' is "
                    f'larger than its images ({h}, {w})')
            data_shapes[name] = (t, b, int(crop[0]), int(crop[1]), c)
        super().__init__(data_shapes, iter.length)
        self.iter = iter
        self.shape_dict = {name: (int(c[0]), int(c[1]))
                           for name, c in shape_dict.items()}

    def __call__(self, handler=None):
        """Return a generator over the randomly cropped batches."""
        for data in self.iter(handler):
            data = dict(data)
            for name, (crop_h, crop_w) in self.shape_dict.items():
                values = data[name]
                t, b, h, w, c = values.shape
                tops = self.rnd.randint(0, h - crop_h + 1, size=b)
                lefts = self.rnd.randint(0, w - crop_w + 1, size=b)
                cropped = np.empty((t, b, crop_h, crop_w, c), dtype=np.float64)
                for i, (top, left) in enumerate(zip(tops, lefts)):
                    cropped[:, i] = values[:, i, top:top + crop_h,
                                           left:left + crop_w]
                data[name] = cropped
            yield data


class Shard(DataIterator):
    """This process's part of every batch, for data-parallel training.

    Each batch of the wrapped iterator (a *global* batch) is split along
    the batch axis into ``size`` contiguous parts of (almost) equal size;
    rank ``r`` gets part ``r``: samples
    ``[r * B // size, (r + 1) * B // size)`` of a global batch of ``B``
    samples. All ranks build the same wrapped iterator from the same seed,
    so they walk through the same global batches in the same order and
    together see every sample of an epoch exactly once; ``size`` ranks
    with global batches of ``size * b`` samples train like one process with
    batches of ``size * b`` (see
    :class:`~brainstorm.training.data_parallel.DataParallel`).

    Wrap the base iterator (e.g. :class:`Minibatches`) directly, and put
    random augmentation around the Shard, so that each rank only
    transforms its own samples. Every rank yields one (possibly empty)
    batch per global batch, so all ranks make the same number of steps.
    ``data_shapes`` are those of the wrapped iterator.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        rank: this process's index in [0, size); default: its rank in
            ``MPI.COMM_WORLD`` (0 without mpi4py).
        size: the number of processes; default: the size of
            ``MPI.COMM_WORLD`` (1 without mpi4py).
    """

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'rank': Arg(Optional(Int(0)), default=None),
        'size': Arg(Optional(Int(1)), default=None),
    }

    def __init__(self, iter: DataIterator, rank: int | None = None,
                 size: int | None = None):
        _check_iterator('Shard', iter)
        if rank is None or size is None:
            world_rank, world_size = world_rank_and_size()
            rank = world_rank if rank is None else rank
            size = world_size if size is None else size
        if not _is_int(size) or size < 1:
            raise IteratorValidationError(
                f'Shard: size must be a positive int. Received: size={size!r}')
        if not _is_int(rank) or not 0 <= rank < size:
            raise IteratorValidationError(
                f'Shard: rank must be an int in [0, {size}). Received: '
                f'rank={rank!r}')
        # a Shard draws no random numbers; a fixed seed keeps it from
        # taking one from global_rnd, so wrapping an iterator in a Shard
        # changes no other seed (the network starts as without MPI)
        Seedable.__init__(self, seed=0)
        self.data_shapes = dict(iter.data_shapes)
        self.length = iter.length
        self.iter = iter
        self.rank = int(rank)
        self.size = int(size)

    def __init_from_description__(self, description: dict) -> None:
        self.data_shapes = {name: tuple(shape)
                            for name, shape in self.data_shapes.items()}
        self.rnd = RandomState(0)

    def __validate__(self) -> None:
        rank, size = self.rank, self.size
        if not (isinstance(rank, int) and isinstance(size, int)
                and 0 <= rank < size):
            raise IteratorValidationError(
                f'Shard: rank must be an int in [0, {self.size}). Received: '
                f'rank={self.rank!r}')

    def bounds(self, batch_size: int) -> tuple[int, int]:
        """``(start, stop)`` of this rank's part of a global batch of
        ``batch_size`` samples."""
        return (self.rank * batch_size // self.size,
                (self.rank + 1) * batch_size // self.size)

    def __call__(self, handler=None):
        """Return a generator over this rank's parts of the batches."""
        for data in self.iter(handler):
            first = next(iter(data.values()))
            start, stop = self.bounds(first.shape[1])
            yield {name: values[:, start:stop]
                   for name, values in data.items()}

