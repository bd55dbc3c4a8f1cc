"""OneHot and MultiHot compare float ids with the vocabulary size exactly
(NumPy 2 compared them in the ids' dtype, which rounds the size), and name
a NaN or infinite id (the message said 'values in [nan, nan]' and inf ids
emitted a RuntimeWarning)."""

import warnings

import numpy as np
import pytest

from brainstorm.data_iterators import MultiHot, OneHot, Undivided
from brainstorm.utils import IteratorValidationError


@pytest.mark.parametrize(
    'dtype, vocab_size, last_id',
    [(np.float16, 2049, 2048), (np.float32, 2**24 + 1, 2**24)],
    ids=['float16', 'float32'],
)
def test_the_largest_id_of_the_vocabulary_is_encoded(dtype, vocab_size, last_id):
    ids = np.array([[[last_id], [0]]], dtype=dtype)
    batch = next(OneHot(Undivided(t=ids), {'t': vocab_size})())
    assert batch['t'].shape == (1, 2, vocab_size)
    assert np.flatnonzero(batch['t'][0, 0]).tolist() == [last_id]
    assert np.flatnonzero(batch['t'][0, 1]).tolist() == [0]


@pytest.mark.parametrize(
    'dtype, vocab_size, too_big',
    [(np.float16, 2048, 2048), (np.float32, 2**24, 2**24)],
    ids=['float16', 'float32'],
)
def test_an_id_equal_to_the_vocabulary_size_is_still_refused(
    dtype, vocab_size, too_big
):
    ids = np.array([[[too_big]]], dtype=dtype)
    with pytest.raises(IteratorValidationError) as info:
        next(OneHot(Undivided(t=ids), {'t': vocab_size})())
    assert str(info.value) == (
        f"OneHot: data 't' must hold integer ids in [0, {vocab_size}). "
        f'Received values in [{float(too_big)}, {float(too_big)}]'
    )


@pytest.mark.parametrize(
    'values, shown',
    [
        ([0.0, np.nan], 'nan at index (0, 1, 0)'),
        ([np.inf, 0.0], 'inf at index (0, 0, 0)'),
        ([1.0, -np.inf], '-inf at index (0, 1, 0)'),
        ([1.0, 1.5], '1.5 at index (0, 1, 0)'),
    ],
    ids=['nan', 'inf', '-inf', 'fraction'],
)
@pytest.mark.parametrize('wrapper', [OneHot, MultiHot])
def test_a_non_finite_or_fractional_id_is_named_without_a_warning(
    wrapper, values, shown
):
    ids = np.array(values).reshape(1, 2, 1)
    it = wrapper(Undivided(t=ids, check_finite=False), {'t': 3})
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with pytest.raises(IteratorValidationError) as info:
            next(it())
    assert str(info.value) == (
        f"{wrapper.__name__}: data 't' must hold integer ids in [0, 3). "
        f'Received {shown}'
    )


def test_integer_ids_of_a_small_dtype_and_a_large_vocabulary():
    ids = np.array([[[0], [127]]], dtype=np.int8)
    batch = next(OneHot(Undivided(t=ids), {'t': 300})())
    assert np.flatnonzero(batch['t'][0, 1]).tolist() == [127]
    with pytest.raises(IteratorValidationError, match=r'Received values in \[0, 127\]'):
        next(OneHot(Undivided(t=ids), {'t': 127})())
