"""Data iterators: feed named data to a network batch by batch.

A data iterator is called with a handler and returns a generator; each item
is a dict mapping data names (the names of the network's Input outputs) to
NumPy arrays of shape ``(T, B, ...)``. ``length`` is the number of batches
per pass and ``data_shapes`` maps each name to the full shape of its data.

:class:`Undivided` and :class:`Minibatches` read the user's arrays (in
memory, or read on demand from an ``h5py.Dataset`` or a ``np.memmap``),
:class:`FromGenerator` takes batches from a Python function or generator;
the others wrap another iterator (kept in the attribute ``iter``) and change
some of its data. Guarantees:

* The user's arrays are never modified. The base iterators yield read-only
  views, and wrappers always write their results into new arrays, so
  nothing accumulates across passes.
* Every random draw comes from the iterator's own ``rnd`` and happens while
  the pass runs. Saving ``it.rnd.get_state()`` for an iterator and every
  iterator below it (follow ``.iter``) between passes and restoring these
  states later reproduces the following passes exactly.
"""

import math

import numpy as np

from brainstorm.data_iterators.augmentation import (
    AddGaussianNoise,
    AddSaltNPepper,
    Flip,
    Pad,
    RandomCrop,
)
from brainstorm.data_iterators.base import DataIterator
from brainstorm.data_iterators.encoding import MultiHot, OneHot
from brainstorm.data_iterators.sharding import Shard
from brainstorm.data_iterators.sources import FromGenerator, Minibatches, Undivided
from brainstorm.errors import IteratorValidationError
from brainstorm.randomness import Seedable

# math, np, Seedable and IteratorValidationError: the names Brainstorm 0.5's
# module brainstorm/data_iterators.py imported stay importable from here
# (tests/test_compat_05.py)
__all__ = [
    'DataIterator',
    'Undivided',
    'Minibatches',
    'FromGenerator',
    'AddGaussianNoise',
    'AddSaltNPepper',
    'Flip',
    'OneHot',
    'MultiHot',
    'Pad',
    'RandomCrop',
    'Shard',
]
