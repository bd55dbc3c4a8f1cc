"""Minibatches(shuffle='samples'): the samples are permuted in every pass,
reproducibly under the global seed; shuffle=True keeps 0.5's batch
shuffling."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches
from brainstorm.describable import create_from_description, get_description
from brainstorm.utils import IteratorValidationError
from tests.data_iterators.helpers import batch_ids, samples


def epochs(shuffle, seed=1, count=3, b=10, batch_size=3):
    bs.global_rnd.set_seed(seed)
    it = Minibatches(batch_size, shuffle=shuffle, x=samples(b=b))
    return [batch_ids(it()) for _ in range(count)]


def contiguous(batch_size=3, b=10):
    return [list(range(s, min(s + batch_size, b))) for s in range(0, b, batch_size)]


def test_each_pass_holds_every_sample_once_in_new_batches():
    runs = epochs('samples')
    for ids in runs:
        assert sorted(sum(ids, [])) == list(range(10))
        assert [len(batch) for batch in ids] == [3, 3, 3, 1]
    # the batches are not the contiguous blocks, and they change per pass
    blocks = {tuple(block) for block in contiguous()}
    assert any(tuple(sorted(batch)) not in blocks for batch in runs[0])
    assert runs[0] != runs[1] != runs[2]


def test_the_default_shuffles_batches_as_in_brainstorm_05():
    assert Minibatches(x=samples()).shuffle is True
    for ids in epochs(True):
        assert sorted(ids) == contiguous()
    assert epochs('batches') == epochs(True)
    assert epochs(False) == [contiguous()] * 3


def test_the_global_seed_reproduces_the_shuffled_passes():
    assert epochs('samples', seed=5) == epochs('samples', seed=5)
    assert epochs('samples', seed=5) != epochs('samples', seed=6)


def test_restoring_the_random_state_reproduces_the_following_passes():
    bs.global_rnd.set_seed(2)
    it = Minibatches(3, shuffle='samples', x=samples())
    batch_ids(it())
    state = it.rnd.get_state()
    following = [batch_ids(it()) for _ in range(2)]
    it.rnd.set_state(state)
    assert [batch_ids(it()) for _ in range(2)] == following


def test_sequences_are_cut_to_the_longest_in_each_shuffled_batch():
    lengths = [1, 4, 2, 1, 3, 1]
    bs.global_rnd.set_seed(3)
    it = Minibatches(
        2, shuffle='samples', cut_according_to=lengths, x=samples(t=4, b=6)
    )
    for batch in it():
        ids = batch['x'][0, :, 0].astype(int)
        assert batch['x'].shape[0] == max(lengths[i] for i in ids)


def test_the_batches_are_read_only_copies():
    x = samples()
    batch = next(Minibatches(3, shuffle='samples', x=x)())
    assert not batch['x'].flags.writeable
    assert not np.shares_memory(batch['x'], x)


@pytest.mark.parametrize('bad', ['sample', 'Samples', 1, None])
def test_an_unknown_shuffle_is_refused_with_the_choices(bad):
    with pytest.raises(IteratorValidationError) as info:
        Minibatches(3, shuffle=bad, x=samples())
    message = str(info.value)
    assert 'Minibatches: shuffle must be' in message
    assert "'batches', 'samples'" in message
    assert f'Received: shuffle={bad!r}' in message


def test_the_shuffle_mode_round_trips_through_a_description():
    bs.global_rnd.set_seed(1)
    it = Minibatches(3, shuffle='samples', x=samples())
    description = json.loads(json.dumps(get_description(it)))
    assert description['shuffle'] == 'samples'
    restored = create_from_description(description)
    assert restored.shuffle == 'samples'
    restored.rnd.set_state(it.rnd.get_state())
    assert batch_ids(restored()) == batch_ids(it())
