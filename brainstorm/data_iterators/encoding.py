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
    ids = np.asarray(values)
    if ids.size and (
        not np.all(np.mod(ids, 1) == 0) or ids.min() < 0 or ids.max() >= vocab_size
    ):
        raise IteratorValidationError(
            f"{owner}: data '{name}' must hold integer ids in "
            f'[0, {vocab_size}). Received values in [{ids.min()}, '
            f'{ids.max()}]'
        )
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
        _check_names(kind, 'vocab_size_dict', vocab_size_dict, iter)
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
                    f'dimension. Received: shape={shape}'
                )
