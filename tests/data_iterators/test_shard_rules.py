"""Shard's rules at their edges: rank and size each default to the
process's place in ``MPI.COMM_WORLD`` on their own (a given one is kept,
and the world is not asked when both are given), a size below 1 is refused
as a size, and a Shard built and one recreated from its description hold
the same random state (it draws nothing, so the states a checkpoint stores
do not depend on how the Shard was made)."""

import json

import numpy as np
import pytest

from brainstorm.data_iterators import Minibatches, Shard, sharding
from brainstorm.describable import create_from_description, get_description
from brainstorm.training.checkpoint import iterator_states
from brainstorm.utils import IteratorValidationError
from tests.data_iterators.helpers import batch_ids, samples


def _base():
    return Minibatches(6, shuffle=False, x=samples(b=12))


@pytest.fixture
def world_rank_1_of_3(monkeypatch):
    """This process as rank 1 of 3 in ``MPI.COMM_WORLD``."""
    asked = []

    def world():
        asked.append(True)
        return 1, 3

    monkeypatch.setattr(sharding, 'world_rank_and_size', world)
    return asked


def test_without_rank_and_size_the_shard_takes_both_from_the_world(
    world_rank_1_of_3,
):
    shard = Shard(_base())
    assert (shard.rank, shard.size) == (1, 3)
    assert batch_ids(shard()) == [[2, 3], [8, 9]]


def test_a_given_size_is_kept_and_the_rank_comes_from_the_world(world_rank_1_of_3):
    shard = Shard(_base(), size=2)
    assert (shard.rank, shard.size) == (1, 2)
    assert batch_ids(shard()) == [[3, 4, 5], [9, 10, 11]]


def test_a_given_rank_is_kept_and_the_size_comes_from_the_world(world_rank_1_of_3):
    shard = Shard(_base(), rank=0)
    assert (shard.rank, shard.size) == (0, 3)
    assert batch_ids(shard()) == [[0, 1], [6, 7]]


def test_with_rank_and_size_given_the_world_is_not_asked(world_rank_1_of_3):
    shard = Shard(_base(), rank=0, size=2)
    assert (shard.rank, shard.size) == (0, 2)
    assert batch_ids(shard()) == [[0, 1, 2], [6, 7, 8]]
    assert world_rank_1_of_3 == []


@pytest.mark.parametrize('size', [0, -1])
def test_a_size_below_one_is_refused_as_a_size(size):
    """Not as a rank outside the empty range [0, 0)."""
    with pytest.raises(IteratorValidationError) as info:
        Shard(_base(), rank=0, size=size)
    assert str(info.value).startswith(
        f'Shard: size must be None or a positive int. Received: size={size}'
    )


def test_a_shard_and_its_recreation_hold_the_same_random_state():
    shard = Shard(_base(), rank=1, size=2)
    restored = create_from_description(json.loads(json.dumps(get_description(shard))))
    assert shard.rnd.get_seed() == restored.rnd.get_seed() == 0
    built, recreated = iterator_states({'x': shard}), iterator_states({'x': restored})
    assert _plain(built['x'][0]) == _plain(recreated['x'][0])


def _plain(state):
    return {key: np.asarray(value).tolist() for key, value in state.items()}
