"""Iterators over the user's arrays: all at once or in minibatches."""

from __future__ import annotations

import math

import numpy as np

from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    DictOf,
    Int,
    ListOf,
    Optional,
    Str,
)
from brainstorm.data_iterators.base import (
    _DATA,
    DataIterator,
    _check_finite_data,
    _check_named_data,
    _read_only,
)
from brainstorm.errors import IteratorValidationError


def _example_iterator():
    """A small valid iterator (the declarations' example for ``iter``)."""
    return Undivided(a=np.zeros((1, 2, 4, 4, 1)))


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
        'check_finite': Arg(Bool(), init_only=True),
    }

    def __init__(self, check_finite: bool = True, **named_data: np.ndarray):
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
        'batch_size': Arg(Int(1)),
        'shuffle': Arg(Bool()),
        'cut_according_to': Arg(Optional(AnyOf(Str(), ListOf(Int(0)))), init_only=True),
        '**named_data': Arg(_DATA, label="data '{}'"),
        'data': Arg(DictOf(_DATA), state=True),
        'sample_size': Arg(Int(0), state=True),
        'seq_lens': Arg(Optional(ListOf(Int(0))), state=True),
        'check_finite': Arg(Bool(), init_only=True),
    }

    def __init__(
        self,
        batch_size: int = 1,
        shuffle: bool = True,
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
        self.shuffle = bool(shuffle)
        self.sample_size = sample_size
        self.seq_lens = self._get_sequence_lengths(
            cut_according_to, data, time_steps, sample_size
        )

    @staticmethod
    def _get_sequence_lengths(cut_according_to, data, time_steps, sample_size):
        if isinstance(cut_according_to, str) or cut_according_to is None:
            if cut_according_to not in data:
                return None
            mask = data[cut_according_to]
            nonzero = mask.reshape(time_steps, sample_size, -1).any(axis=2)
            last = time_steps - np.argmax(nonzero[::-1], axis=0)
            return np.where(nonzero.any(axis=0), last, 0)
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
            yield {
                name: _read_only(d[time_cut, start:stop])
                for name, d in self.data.items()
            }


# -------------------------------------------------------------- wrappers ---
