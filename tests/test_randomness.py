"""Tests for brainstorm.randomness."""

import copy
import pickle

import numpy as np
import pytest

import brainstorm
from brainstorm.describable import create_from_description, get_description
from brainstorm.randomness import RandomState, Seedable, global_rnd


@pytest.fixture
def restore_global_rnd():
    state = global_rnd.get_state()
    seed = global_rnd.get_seed()
    yield
    global_rnd.set_seed(seed)
    global_rnd.set_state(state)


def test_is_a_numpy_random_state():
    rnd = RandomState(1)
    assert isinstance(rnd, np.random.RandomState)
    assert RandomState.seed_range == (0, 1000000000)


def test_same_seed_same_numbers():
    a, b = RandomState(42), RandomState(42)
    np.testing.assert_array_equal(a.randn(5), b.randn(5))
    assert a.get_seed() == 42
    np.testing.assert_array_equal(
        RandomState(42).rand(3), np.random.RandomState(42).rand(3)
    )


def test_different_seeds_differ():
    assert not np.array_equal(RandomState(1).randn(5), RandomState(2).randn(5))


def test_reset_repeats_the_sequence():
    rnd = RandomState(7)
    first = rnd.randn(4)
    rnd.randn(10)
    rnd.reset()
    np.testing.assert_array_equal(rnd.randn(4), first)
    assert rnd.get_seed() == 7


def test_set_seed_and_seed():
    rnd = RandomState(7)
    rnd.set_seed(11)
    assert rnd.get_seed() == 11
    np.testing.assert_array_equal(rnd.randn(3), RandomState(11).randn(3))
    rnd.seed(12)
    assert rnd.get_seed() == 12
    np.testing.assert_array_equal(rnd.randn(3), RandomState(12).randn(3))


def test_seed_none_draws_a_seed_in_range():
    rnd = RandomState(7)
    rnd.seed()
    low, high = RandomState.seed_range
    assert low <= rnd.get_seed() < high


def test_generate_seed_is_reproducible_and_in_range():
    a, b = RandomState(3), RandomState(3)
    seeds = [a.generate_seed() for _ in range(20)]
    assert seeds == [b.generate_seed() for _ in range(20)]
    assert all(type(s) is int for s in seeds)
    low, high = RandomState.seed_range
    assert all(low <= s < high for s in seeds)
    assert len(set(seeds)) > 15


def test_create_random_state():
    parent = RandomState(5)
    child = parent.create_random_state()
    assert isinstance(child, RandomState)
    assert child.get_seed() == RandomState(5).generate_seed()
    explicit = parent.create_random_state(99)
    assert explicit.get_seed() == 99


def test_unseeded_states_come_from_global_rnd(restore_global_rnd):
    global_rnd.set_seed(42)
    a = RandomState()
    b = Seedable()
    global_rnd.set_seed(42)
    c = RandomState()
    d = Seedable()
    assert a.get_seed() == c.get_seed()
    assert b.rnd.get_seed() == d.rnd.get_seed()
    assert a.get_seed() != b.rnd.get_seed()


def test_package_exposes_global_rnd():
    assert brainstorm.global_rnd is global_rnd
    assert isinstance(global_rnd, RandomState)


def test_pickles_and_copies_as_itself():
    rnd = RandomState(8)
    rnd.randn(3)
    for clone in (pickle.loads(pickle.dumps(rnd)), copy.deepcopy(rnd)):
        assert type(clone) is RandomState
        assert clone.get_seed() == 8
        np.testing.assert_array_equal(clone.randn(5), copy.deepcopy(rnd).randn(5))
        clone.reset()
        np.testing.assert_array_equal(clone.randn(3), RandomState(8).randn(3))


def test_seedable_owns_a_random_state():
    s = Seedable(seed=4)
    assert isinstance(s.rnd, RandomState)
    assert s.rnd.get_seed() == 4


def test_seedable_rnd_is_undescribed_and_fresh_after_loading():
    s = Seedable(seed=4)
    assert get_description(s) == {'@type': 'Seedable'}
    recreated = create_from_description(get_description(s))
    assert isinstance(recreated.rnd, RandomState)
    assert recreated.rnd is not s.rnd


def test_default_handler_follows_a_later_global_seed():
    """The default handler exists from import on; its random state is
    drawn from global_rnd when first needed after the latest set_seed."""
    from brainstorm.handlers import NumpyHandler, default_handler
    from brainstorm.handlers.base_handler import peek_random_state

    draws = []
    for _ in range(2):
        global_rnd.set_seed(17)
        assert peek_random_state(default_handler) is None  # not drawn yet
        mask = np.zeros(50, dtype=np.float32)
        default_handler.generate_probability_mask(mask, 0.5)
        draws.append(mask.copy())
    np.testing.assert_array_equal(*draws)
    seeded = NumpyHandler(seed=3)
    global_rnd.set_seed(18)
    assert seeded.rnd.get_seed() == 3  # an explicit seed is kept


def test_peeking_does_not_draw_from_global_rnd():
    from brainstorm.handlers import NumpyHandler
    from brainstorm.handlers.base_handler import peek_random_state

    handler = NumpyHandler()
    global_rnd.set_seed(5)
    before = global_rnd.get_state()[1].copy()
    assert peek_random_state(handler) is None
    np.testing.assert_array_equal(global_rnd.get_state()[1], before)
    assert peek_random_state(handler) is None
    assert peek_random_state(handler) is not handler.rnd  # drawn now
    assert peek_random_state(handler) is handler.rnd
