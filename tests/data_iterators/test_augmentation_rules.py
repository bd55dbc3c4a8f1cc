"""The rules of the augmentation wrappers at their edges.

``brainstorm/data_iterators/augmentation.py`` changes another iterator's
data while a network trains: AddGaussianNoise adds noise, AddSaltNPepper
sets entries to 1 or 0, Flip mirrors images along their width, Pad pads
them and RandomCrop cuts a window out of them. These tests state that a
name the data lacks is refused as unknown data under the argument that
names it (not under another one, nor as a mismatch of two arguments);
where the draws that decide salt, pepper and flips end (each bound, with
the draws fixed); and that a wrapper recreated from its description keeps
its probabilities and crops.
"""

import json

import numpy as np
import pytest

from brainstorm.data_iterators import (
    AddGaussianNoise,
    AddSaltNPepper,
    Flip,
    Pad,
    RandomCrop,
    Undivided,
)
from brainstorm.describable import create_from_description, get_description
from brainstorm.utils import IteratorValidationError

#: images (T, B, H, W, C) and targets (T, B, 1)
IMAGES = np.random.RandomState(0).rand(2, 4, 3, 5, 2)
TARGETS = np.zeros((2, 4, 1))
AVAILABLE = "Available: ['default', 'targets']"


def _source():
    return Undivided(default=IMAGES, targets=TARGETS)


def _fix_draws(iterator, draws):
    """Make ``iterator`` draw ``draws`` from U[0, 1) (in their shape)."""
    draws = np.asarray(draws, dtype=np.float64)

    def uniform(low=0.0, high=1.0, size=None):
        assert (low, high) == (0.0, 1.0)
        assert tuple(np.atleast_1d(size)) == draws.shape
        return draws.copy()

    iterator.rnd.uniform = uniform


def _restored(iterator):
    """``iterator`` recreated from its description (through JSON)."""
    return create_from_description(json.loads(json.dumps(get_description(iterator))))


# ---------------------------------------------------------- unknown names ---


@pytest.mark.parametrize(
    'make, refused',
    [
        (lambda it: AddGaussianNoise(it, {'nope': 1.0}), 'AddGaussianNoise: std_dict'),
        (
            lambda it: AddGaussianNoise(it, {'default': 1.0}, {'nope': 0.0}),
            'AddGaussianNoise: mean_dict',
        ),
        (lambda it: AddSaltNPepper(it, {'nope': 0.1}), 'AddSaltNPepper: prob_dict'),
        (
            lambda it: AddSaltNPepper(it, {'default': 0.1}, {'nope': 0.5}),
            'AddSaltNPepper: ratio_dict',
        ),
        (lambda it: Flip(it, {'nope': 0.5}), 'Flip: prob_dict'),
        (lambda it: Pad(it, {'nope': 1}), 'Pad: size_dict'),
        (lambda it: Pad(it, {'default': 1}, {'nope': 1.0}), 'Pad: value_dict'),
        (lambda it: RandomCrop(it, {'nope': (1, 1)}), 'RandomCrop: shape_dict'),
    ],
    ids=[
        'noise-std',
        'noise-mean',
        'salt-prob',
        'salt-ratio',
        'flip-prob',
        'pad-size',
        'pad-value',
        'crop-shape',
    ],
)
def test_a_name_the_data_lacks_is_refused_as_unknown_under_its_argument(make, refused):
    """Refused as unknown data, with the names there are, under the argument
    the user gave it: a probability is not blamed on the ratios its defaults
    fill, a ratio or a padding value not on the names of the dict it belongs
    to, a mean not on a mismatch of the means and deviations."""
    with pytest.raises(IteratorValidationError) as info:
        make(_source())
    assert str(info.value) == f"{refused} names unknown data 'nope'. {AVAILABLE}"


# ------------------------------------------------------ salt and pepper ---


def test_salt_starts_at_the_draw_one_minus_p_times_r():
    """An entry whose draw u is at least 1 - p r becomes 1; one just below it
    (and above the pepper bound p (1 - r) = 0) is kept."""
    x = np.full((1, 2, 3), 0.25)
    it = AddSaltNPepper(Undivided(default=x), {'default': 0.5}, {'default': 1.0})
    _fix_draws(it, [[[0.4, np.nextafter(0.5, 0), 0.5], [0.5, 0.75, 0.999]]])
    out = next(it())['default']
    np.testing.assert_array_equal(out, [[[0.25, 0.25, 1.0], [1.0, 1.0, 1.0]]])


def test_pepper_ends_below_the_draw_p_times_one_minus_r():
    """An entry whose draw is below p (1 - r) becomes 0, one above it is kept,
    and no draw in [0, 1) reaches the salt bound 1 - p r = 1 for r = 0."""
    x = np.full((1, 2, 3), 0.25)
    it = AddSaltNPepper(Undivided(default=x), {'default': 0.5}, {'default': 0.0})
    _fix_draws(it, [[[0.1, 0.49, 0.51], [0.75, np.nextafter(1, 0), 0.2]]])
    out = next(it())['default']
    np.testing.assert_array_equal(out, [[[0.0, 0.0, 0.25], [0.25, 0.25, 0.0]]])


@pytest.mark.parametrize('prob, ratio, expected', [(0.0, 0.5, 0.25), (1.0, 1.0, 1.0)])
def test_a_draw_of_zero_is_no_pepper_where_no_pepper_is_due(prob, ratio, expected):
    """Probability 0 changes no entry and ratio 1 makes every changed entry
    salt: a fraction p (1 - r) of pepper, here none, takes u < p (1 - r), which
    no draw of U[0, 1) meets; u <= 0 is met by the draw 0.0."""
    x = np.full((1, 1, 3), 0.25)
    it = AddSaltNPepper(Undivided(default=x), {'default': prob}, {'default': ratio})
    _fix_draws(it, [[[0.0, 0.5, 0.25]]])
    out = next(it())['default']
    np.testing.assert_array_equal(out, np.full((1, 1, 3), expected))


# ------------------------------------------------------------------- Flip ---


def test_a_sample_is_flipped_where_its_draw_is_below_the_probability():
    """One draw per sample: a draw equal to the probability is no flip, so
    probability 0 never flips, even where the draw is 0.0."""
    it = Flip(Undivided(default=IMAGES), {'default': 0.5})
    _fix_draws(it, [0.0, np.nextafter(0.5, 0), 0.5, 0.75])
    out = next(it())['default']
    mirrored = IMAGES[:, :, :, ::-1]
    np.testing.assert_array_equal(out[:, :2], mirrored[:, :2])
    np.testing.assert_array_equal(out[:, 2:], IMAGES[:, 2:])
    never = Flip(Undivided(default=IMAGES), {'default': 0.0})
    _fix_draws(never, [0.0, 0.0, 0.5, 0.0])
    np.testing.assert_array_equal(next(never())['default'], IMAGES)


@pytest.mark.parametrize('prob', [0.0, 1.0])
def test_a_restored_flip_keeps_its_probability(prob):
    restored = _restored(Flip(_source(), {'default': prob}))
    assert restored.prob_dict == {'default': prob}
    expected = IMAGES[:, :, :, ::-1] if prob else IMAGES
    np.testing.assert_array_equal(next(restored())['default'], expected)


# ------------------------------------------------------------- RandomCrop ---


@pytest.mark.parametrize('shape', [(0, 3), (2, 0), (0, 0)])
def test_a_crop_without_rows_or_columns_is_refused(shape):
    with pytest.raises(IteratorValidationError, match=r'RandomCrop: shape_dict\['):
        RandomCrop(_source(), {'default': shape})


def test_a_restored_crop_keeps_its_window_as_the_constructor_gives_it():
    """``shape_dict`` holds ``(h, w)`` tuples, also where a description (whose
    JSON has lists) recreates the crop."""
    crop = RandomCrop(_source(), {'default': [2, 3]})
    assert crop.shape_dict == {'default': (2, 3)}
    restored = _restored(crop)
    assert restored.shape_dict == {'default': (2, 3)}
    assert restored.data_shapes['default'] == (2, 4, 2, 3, 2)
    assert next(restored())['default'].shape == (2, 4, 2, 3, 2)
