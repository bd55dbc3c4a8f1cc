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


# ------------------------------------------------ rules at their edges ---

DUPLICATES = {
    'pickle': lambda rnd: pickle.loads(pickle.dumps(rnd)),
    'deepcopy': copy.deepcopy,
    'copy': copy.copy,
}


@pytest.mark.parametrize('duplicate', sorted(DUPLICATES))
@pytest.mark.parametrize('draws', [0, 1, 2, 3])
def test_a_copy_continues_the_stream_cached_gaussian_included(duplicate, draws):
    """Normal draws come in pairs: after an odd number of them one is
    cached in the state (``has_gauss``, ``cached_gaussian``), and a copy
    must draw it next, as the original does."""
    rnd = RandomState(8)
    rnd.randn(draws)
    state = rnd.get_state()
    assert state[3] == draws % 2  # has_gauss
    clone = DUPLICATES[duplicate](rnd)
    assert type(clone) is RandomState and clone is not rnd
    assert clone.get_seed() == 8
    clone_state = clone.get_state()
    assert clone_state[0] == state[0]
    np.testing.assert_array_equal(clone_state[1], state[1])
    assert clone_state[2:] == state[2:]
    # the original's own continuation, not another copy's
    np.testing.assert_array_equal(clone.randn(5), rnd.randn(5))
    np.testing.assert_array_equal(clone.rand(3), rnd.rand(3))


def test_a_restored_state_holds_the_cached_gaussian():
    from brainstorm.randomness import _restore_random_state

    rnd = RandomState(3)
    rnd.randn(1)
    restored = _restore_random_state(3, rnd.get_state())
    assert restored.get_state()[3] == 1
    assert restored.get_state()[4] == rnd.get_state()[4]
    assert restored.randn() == rnd.randn()


def test_reseeding_drops_the_cached_gaussian():
    rnd = RandomState(4)
    rnd.randn(3)
    rnd.set_seed(4)
    assert rnd.get_state()[3] == 0
    np.testing.assert_array_equal(rnd.randn(3), RandomState(4).randn(3))
    rnd.randn(1)
    rnd.reset()
    assert rnd.get_state()[3] == 0
    np.testing.assert_array_equal(rnd.randn(3), RandomState(4).randn(3))


def test_generated_seeds_are_numpys_draws_in_the_seed_range():
    """generate_seed is randint over seed_range, low included, high not."""
    low, high = RandomState.seed_range
    reference = np.random.RandomState(12)
    rnd = RandomState(12)
    assert [rnd.generate_seed() for _ in range(5)] == [
        int(reference.randint(low, high)) for _ in range(5)
    ]
    assert RandomState(12).create_random_state().get_seed() == int(
        np.random.RandomState(12).randint(low, high)
    )


@pytest.mark.parametrize('seed', [0, 1, 2**32 - 1, np.int64(7), np.uint32(9)])
def test_every_int_seed_numpy_accepts_is_accepted(seed):
    for rnd in (RandomState(seed), RandomState(1)):
        rnd.set_seed(seed)
        assert rnd.get_seed() == int(seed) and type(rnd.get_seed()) is int
        np.testing.assert_array_equal(
            rnd.rand(3), np.random.RandomState(int(seed)).rand(3)
        )
    assert RandomState(1).create_random_state(seed).get_seed() == int(seed)


@pytest.mark.parametrize('seed', [1.5, 2.0, '5', True, -1, 2**32, [3]])
def test_a_seed_that_is_no_int_in_range_is_refused(seed):
    from brainstorm.utils import ValidationError

    attempts = {
        'RandomState(seed)': lambda: RandomState(seed),
        'set_seed': lambda: RandomState(1).set_seed(seed),
        'seed': lambda: RandomState(1).seed(seed),
        'create_random_state': lambda: RandomState(1).create_random_state(seed),
        'Seedable': lambda: Seedable(seed=seed),
    }
    for name, attempt in attempts.items():
        with pytest.raises(ValidationError) as info:
            attempt()
        message = str(info.value)
        assert 'seed' in message and 'an int in [0, 4294967295]' in message, name
        assert repr(seed) in message, name


def test_a_refused_seed_leaves_the_state_alone():
    rnd = RandomState(6)
    rnd.randn(1)
    before = rnd.get_state()
    with pytest.raises(ValueError):
        rnd.set_seed(-1)
    assert rnd.get_seed() == 6
    assert rnd.get_state()[2:] == before[2:]
    np.testing.assert_array_equal(rnd.get_state()[1], before[1])


def test_set_seed_and_seed_count_the_seedings():
    """Handlers redraw their first-use random state when global_rnd's
    count changes: every set_seed and seed changes it, by one."""
    rnd = RandomState(1)
    start = rnd.seedings
    rnd.set_seed(2)
    assert rnd.seedings == start + 1
    rnd.seed(3)
    assert rnd.seedings == start + 2
    rnd.seed()
    assert rnd.seedings == start + 3
    rnd.reset()
    rnd.randn(2)
    assert rnd.seedings == start + 3


def test_seed_none_reseeds_from_global_rnd(restore_global_rnd):
    global_rnd.set_seed(21)
    expected = RandomState(21).generate_seed()
    rnd = RandomState(1)
    rnd.seed()
    assert rnd.get_seed() == expected
    rnd.seed(None)
    assert rnd.get_seed() != expected
    np.testing.assert_array_equal(
        rnd.rand(2), np.random.RandomState(rnd.get_seed()).rand(2)
    )


def test_the_seed_of_a_seedable_is_not_described_nor_restored():
    """``seed`` only seeds the new state: a description carries no seed,
    and one that claims a seed is refused instead of being ignored."""
    from brainstorm.utils import DescriptionError

    recreated = create_from_description({'@type': 'Seedable'})
    assert not hasattr(recreated, 'seed')
    with pytest.raises(DescriptionError, match="'seed'"):
        create_from_description({'@type': 'Seedable', 'seed': 5})
