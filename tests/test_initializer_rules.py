"""Rules of the initializers that draw every value
(brainstorm/initializers/dense.py): the range and sign of the scaled uniform
draws, the noise that Identity adds, the shapes it refuses, and RandomWalk's
default scale at small sizes; each stated at its edge, so that mutation
testing (tools/mutation.py) finds no gap."""

import math

import numpy as np
import pytest

from brainstorm.initializers import (
    DenseSqrtFanIn,
    DenseSqrtFanInOut,
    Gaussian,
    Identity,
    RandomWalk,
    evaluate_initializer,
)
from brainstorm.utils import InitializationError


@pytest.mark.parametrize(
    'init, bound',
    [
        # fan_in = 4 * 5 = 20
        (DenseSqrtFanIn('linear'), 1.0 / math.sqrt(20)),
        # n_out + fan_in = 50 + 20 = 70
        (DenseSqrtFanInOut('linear'), 1.0 / math.sqrt(70)),
    ],
    ids=['fan_in', 'fan_in_out'],
)
def test_dense_values_fill_the_symmetric_range(init, bound):
    """The draws are uniform in (-bound, bound): both signs, each reaching
    near its end, centred on 0 (not [0, bound) nor (-bound, 0])."""
    values = evaluate_initializer(init, (50, 4, 5), seed=3)
    assert values.min() >= -bound and values.max() <= bound
    assert values.min() < -0.95 * bound
    assert values.max() > 0.95 * bound
    assert abs(values.mean()) < 0.05 * bound
    # about half of the values are negative
    assert 0.4 < (values < 0).mean() < 0.6


@pytest.mark.parametrize('scale', [2.0, 0.0, -1.5])
def test_identity_adds_the_gaussian_draw_of_its_seed(scale):
    """Identity is scale * eye plus the noise Gaussian(std) draws with the
    same seed: the noise is added, not subtracted."""
    shape = (4, 4)
    values = evaluate_initializer(Identity(scale=scale, std=0.5), shape, seed=3)
    noise = evaluate_initializer(Gaussian(std=0.5), shape, seed=3)
    np.testing.assert_array_equal(values, scale * np.eye(4) + noise)


def test_identity_without_a_square_enforced_adds_noise_to_the_diagonal():
    values = evaluate_initializer(
        Identity(scale=1.0, std=0.25, enforce_square=False), (2, 3), seed=9
    )
    noise = evaluate_initializer(Gaussian(std=0.25), (2, 3), seed=9)
    np.testing.assert_array_equal(values, np.eye(2, 3) + noise)


@pytest.mark.parametrize('shape', [(3,), (2, 3, 4), ()])
def test_identity_without_a_square_enforced_still_needs_2d(shape):
    """enforce_square=False allows rectangles, never other ranks: a vector
    is refused (np.eye would make a (3, 3) matrix of it)."""
    init = Identity(std=0.0, enforce_square=False)
    with pytest.raises(InitializationError, match=r'Identity needs a 2-D parameter'):
        init(shape)


def test_identity_refusal_hands_a_bias_to_the_fallback():
    """A refused shape goes to the fallback, as a network's initialize does
    for the biases next to an Identity matrix."""
    values = evaluate_initializer(
        Identity(std=0.0, enforce_square=False), (3,), fallback=0.5
    )
    np.testing.assert_array_equal(values, np.full(3, 0.5))


@pytest.mark.parametrize('n', [1, 2, 4, 7])
def test_random_walk_linear_default_scale_at_small_sizes(n):
    """For 'linear' the default scale is exp(1 / (2 N)): visible at small N,
    where it is far from 1 (exp(0.5) at N = 1)."""
    values = evaluate_initializer(RandomWalk('linear'), (n, n), seed=6)
    draws = np.random.RandomState(6).normal(size=(n, n))
    expected = math.exp(1 / (2 * n)) * draws / math.sqrt(n)
    np.testing.assert_allclose(values, expected, rtol=1e-12)


@pytest.mark.parametrize('n', [6, 7, 10])
def test_random_walk_rel_default_scale_from_six_up(n):
    """For 'rel' the default scale is sqrt(2) * exp(1.2 / (N - 2.4)) for
    N >= 6 (N itself, not 6, above it)."""
    values = evaluate_initializer(RandomWalk('rel'), (n, n), seed=6)
    draws = np.random.RandomState(6).normal(size=(n, n))
    expected = math.sqrt(2) * math.exp(1.2 / (n - 2.4)) * draws / math.sqrt(n)
    np.testing.assert_allclose(values, expected, rtol=1e-12)


def test_random_walk_given_scale_replaces_the_default():
    values = evaluate_initializer(RandomWalk('rel', scale=0.5), (3, 3), seed=6)
    draws = np.random.RandomState(6).normal(size=(3, 3))
    np.testing.assert_allclose(values, 0.5 * draws / math.sqrt(3), rtol=1e-12)
