"""Wrappers that turn integer ids into one-hot or multi-hot vectors."""

from __future__ import annotations

import numpy as np

from brainstorm.arguments import (
    Arg,
    DictOf,
    Instance,
    Int,
)
from brainstorm.data_iterators.base import (
    DataIterator,
    _check_names,
)
from brainstorm.data_iterators.sources import _example_iterator
from brainstorm.errors import IteratorValidationError


def _as_ids(owner: str, name: str, values: np.ndarray, vocab_size: int) -> np.ndarray:
    """``values`` as integer ids (``np.intp``), checked to lie in [0, V).

    Float ids must be whole numbers. The bounds are compared exactly (as
    Python numbers): in the ids' own dtype a float16 or float32 id would be
    compared with a rounded vocabulary size (float16 rounds 2049 to 2048).

    Raises:
        IteratorValidationError: naming the iterator, the data, the ids
            expected and the value received (a NaN, an infinite value or
            a fraction at its index; else the range of the ids).
    """
    ids = np.asarray(values)
    if not ids.size:
        return ids.astype(np.intp)
    expected = f"{owner}: data '{name}' must hold integer ids in [0, {vocab_size})."
    if np.issubdtype(ids.dtype, np.inexact):
        bad = ~np.isfinite(ids)
        if not bad.any():
            bad = ids != np.floor(ids)
        if bad.any():
            where = np.unravel_index(int(np.argmax(bad)), bad.shape)
            raise IteratorValidationError(
                f'{expected} Received {ids[where].item()!r} at index '
                f'{tuple(map(int, where))}'
            )
    low, high = ids.min().item(), ids.max().item()
    if low < 0 or high >= vocab_size:
        raise IteratorValidationError(f'{expected} Received values in [{low}, {high}]')
    return ids.astype(np.intp)


def _encoded_shapes(data_shapes: dict, vocab_size_dict: dict) -> dict:
    """``data_shapes`` with the last dimension of each encoded data V.

    A name the data lacks is skipped: ``__validate__`` refuses it.
    """
    shapes = {name: tuple(shape) for name, shape in data_shapes.items()}
    for name, size in vocab_size_dict.items():
        if name in shapes:
            shapes[name] = shapes[name][:-1] + (int(size),)
    return shapes


class MultiHot(DataIterator):
    """Turn ``K`` integer ids ``(T, B, K)`` into a multi-hot ``(T, B, V)``.

    Each id sets its entry to True, so K distinct ids give K ones.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        vocab_size_dict: data name -> vocabulary size V (int).
    """

    _wraps = 'other shapes'

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'vocab_size_dict': Arg(DictOf(Int(1))),
    }

    def __init__(self, iter: DataIterator, vocab_size_dict: dict[str, int]):
        # the names and shapes of the data are checked by __validate__
        super().__init__(
            _encoded_shapes(iter.data_shapes, vocab_size_dict), iter.length
        )
        self.iter = iter
        self.vocab_size_dict = dict(vocab_size_dict)

    def __validate__(self) -> None:
        """Check ``vocab_size_dict`` against the data of ``iter``.

        Run after the constructor and after restoring from a description.
        """
        kind = type(self).__name__
        _check_names(kind, 'vocab_size_dict', self.vocab_size_dict, self.iter)
        self._check_id_shapes(self.iter, self.vocab_size_dict)

    def _check_id_shapes(self, iter, vocab_size_dict) -> None:
        """Any number K of ids per step is fine here."""

    def _restored_data_shapes(self, wrapped: DataIterator) -> dict:
        """Those of ``wrapped``, the encoded data's last dimension V."""
        return _encoded_shapes(wrapped.data_shapes, self.vocab_size_dict)

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
                    f'dimension. Received: shape={shape}'
                )
