"""The finite check of data in memory reads blocks of about a million values
whatever the shape (it read one time step per block: 8.7 s for a
(1_000_000, 2, 1) array that np.isfinite checks in milliseconds)."""

import numpy as np
import pytest

from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.data_iterators import base as iterator_base
from brainstorm.utils import IteratorValidationError


@pytest.mark.parametrize('make', [Undivided, lambda **d: Minibatches(10, **d)])
def test_many_short_time_steps_are_checked_in_few_blocks(make, monkeypatch):
    x = np.random.RandomState(0).rand(1_000_000, 2, 1).astype(np.float32)
    blocks = []
    check = iterator_base._check_finite_batch

    def counted(owner, name, block, *rest):
        blocks.append(block.size)
        return check(owner, name, block, *rest)

    monkeypatch.setattr(iterator_base, '_check_finite_batch', counted)
    it = make(default=x)
    # two blocks of about a million values each, every value checked (it
    # was one block per time step: a million Python loop passes, seconds)
    assert blocks == [2**20, 2_000_000 - 2**20]
    assert it.data_shapes == {'default': (1_000_000, 2, 1)}


@pytest.mark.parametrize(
    'shape, bad, first',
    [
        # several time steps per block: the first in (t, b, ...) order
        ((3000, 4, 2), [(2100, 3, 1), (2101, 0, 0), (2900, 0, 0)], (2100, 3, 1)),
        ((3000, 4, 2), [(5, 2, 0), (6, 0, 0)], (5, 2, 0)),
        # blocks cut across the data's end and time steps bigger than a block
        ((2, 2**20 + 7, 1), [(1, 2**20 + 5, 0), (1, 2**20 + 6, 0)], (1, 2**20 + 5, 0)),
        ((2, 2**20 + 7, 1), [(0, 2**20 + 6, 0), (1, 0, 0)], (0, 2**20 + 6, 0)),
        ((513, 2048, 1), [(512, 2047, 0)], (512, 2047, 0)),
    ],
    ids=['many-steps', 'early-step', 'big-step-tail', 'big-step-first', 'last-value'],
)
def test_the_first_non_finite_value_is_named_at_its_index(shape, bad, first):
    x = np.zeros(shape, dtype=np.float32)
    for index in bad:
        x[index] = np.nan
    with pytest.raises(IteratorValidationError) as info:
        Undivided(default=x)
    assert (
        f"Undivided: data 'default' holds NaN or infinite values (the first at "
        f'index {first}: nan)' in str(info.value)
    )


def test_infinite_values_in_a_later_block_are_found():
    x = np.zeros((5000, 300, 1))  # 1.5M values: two blocks of time steps
    x[4999, 299, 0] = -np.inf
    with pytest.raises(IteratorValidationError, match=r'\(4999, 299, 0\): -inf'):
        Minibatches(7, default=x)
    assert Minibatches(7, default=x, check_finite=False).length == 43
