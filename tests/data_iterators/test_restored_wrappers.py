"""The wrappers accept an iterator without a length (a FromGenerator built
without one was refused: "length must be an int >= 0"), and a wrapper
recreated from a description makes its constructor's checks against the
wrapped iterator (an edited description loaded and failed at the first
batch with a bare KeyError, IndexError or ValueError); Pad and RandomCrop
check their data_shapes and read Brainstorm 0.5's, the wrapped iterator's,
as the padded or cropped ones (they were kept as described)."""

import json

import numpy as np
import pytest

from brainstorm.data_iterators import (
    AddGaussianNoise,
    AddSaltNPepper,
    DataIterator,
    Flip,
    FromGenerator,
    Minibatches,
    MultiHot,
    OneHot,
    Pad,
    RandomCrop,
    Shard,
)
from brainstorm.describable import create_from_description, get_description
from brainstorm.utils import IteratorValidationError

#: images (T, B, H, W, C) with 3 channels, and ids (T, B, 1)
IMAGES = np.random.RandomState(0).rand(1, 4, 6, 5, 3)
IDS = np.arange(4).reshape(1, 4, 1) % 3


def _minibatches():
    return Minibatches(2, shuffle=False, default=IMAGES, targets=IDS)


def _described(iterator):
    return json.loads(json.dumps(get_description(iterator)))


WRAPPERS = {
    'OneHot': lambda it: OneHot(it, {'targets': 3}),
    'MultiHot': lambda it: MultiHot(it, {'targets': 3}),
    'AddGaussianNoise': lambda it: AddGaussianNoise(it, {'default': 0.1}),
    'AddSaltNPepper': lambda it: AddSaltNPepper(it, {'default': 0.1}),
    'Flip': lambda it: Flip(it, {'default': 0.5}),
    'Pad': lambda it: Pad(it, {'default': 1}),
    'RandomCrop': lambda it: RandomCrop(it, {'default': (4, 3)}),
    'Shard': lambda it: Shard(it, 0, 1),
}


# ------------------------------------------------------ without a length ---


def _batches_without_length():
    batch = {'default': IMAGES[:, :2], 'targets': IDS[:, :2]}
    return FromGenerator([batch, batch, batch])


@pytest.mark.parametrize('make', WRAPPERS.values(), ids=WRAPPERS.keys())
def test_wrappers_accept_an_iterator_without_a_length(make):
    source = _batches_without_length()
    assert source.length is None
    wrapper = make(source)
    assert wrapper.length is None
    batches = list(wrapper())
    assert len(batches) == 3
    for batch in batches:
        shapes = {name: values.shape[2:] for name, values in batch.items()}
        expected = {name: shape[2:] for name, shape in wrapper.data_shapes.items()}
        assert shapes == expected


@pytest.mark.parametrize('make', WRAPPERS.values(), ids=WRAPPERS.keys())
def test_wrappers_without_a_length_are_recreated_from_their_description(make):
    description = _described(make(_batches_without_length()))
    assert description['length'] is None
    restored = create_from_description(description)
    assert restored.length is None
    assert get_description(restored) == description
    assert len(list(restored())) == 3


def test_an_iterator_of_a_user_may_leave_its_length_out():
    """Brainstorm 0.5 documented ``DataIterator.length`` as int | None."""

    class Unknown(DataIterator):
        def __init__(self):
            super().__init__({'default': (1, 2, 4)}, None)

        def __call__(self, handler=None):
            yield {'default': np.zeros((1, 2, 4))}

    assert Unknown().length is None
    noisy = AddGaussianNoise(Unknown(), {'default': 0.1})
    assert noisy.length is None
    assert next(noisy())['default'].shape == (1, 2, 4)
    with pytest.raises(IteratorValidationError) as info:
        DataIterator({'default': (1, 2, 4)}, -1)
    assert str(info.value).startswith(
        'DataIterator: length must be None or an int >= 0. Received: length=-1'
    )


# ---------------------------------------------------- edited descriptions ---

#: (class, arguments of a valid wrapper, an edit that its constructor refuses)
EDITS = {
    'Flip-unknown': (Flip, {'prob_dict': {'default': 0.5}}, {'prob_dict': {'x': 0.5}}),
    'Flip-not-5-D': (
        Flip,
        {'prob_dict': {'default': 0.5}},
        {'prob_dict': {'targets': 0.5}},
    ),
    'Pad-unknown': (Pad, {'size_dict': {'default': 1}}, {'size_dict': {'x': 1}}),
    'Pad-not-5-D': (Pad, {'size_dict': {'default': 1}}, {'size_dict': {'targets': 1}}),
    'Pad-value_dict': (
        Pad,
        {'size_dict': {'default': 1}},
        {'value_dict': {'default': 0.0, 'targets': 1.0}},
    ),
    'RandomCrop-too-large': (
        RandomCrop,
        {'shape_dict': {'default': (4, 3)}},
        {'shape_dict': {'default': (4, 9)}},
    ),
    'RandomCrop-not-5-D': (
        RandomCrop,
        {'shape_dict': {'default': (4, 3)}},
        {'shape_dict': {'targets': (1, 1)}},
    ),
    'RandomCrop-unknown': (
        RandomCrop,
        {'shape_dict': {'default': (4, 3)}},
        {'shape_dict': {'x': (1, 1)}},
    ),
    'AddGaussianNoise-unknown': (
        AddGaussianNoise,
        {'std_dict': {'default': 0.1}},
        {'std_dict': {'x': 0.1}},
    ),
    'AddGaussianNoise-mean_dict': (
        AddGaussianNoise,
        {'std_dict': {'default': 0.1}},
        {'mean_dict': {'default': 0.0, 'targets': 0.0}},
    ),
    'AddSaltNPepper-unknown': (
        AddSaltNPepper,
        {'prob_dict': {'default': 0.1}},
        {'prob_dict': {'x': 0.1}},
    ),
    'AddSaltNPepper-ratio_dict': (
        AddSaltNPepper,
        {'prob_dict': {'default': 0.1}},
        {'ratio_dict': {'default': 0.5, 'targets': 0.5}},
    ),
    'OneHot-unknown': (
        OneHot,
        {'vocab_size_dict': {'targets': 3}},
        {'vocab_size_dict': {'x': 3}},
    ),
    'OneHot-not-ids': (
        OneHot,
        {'vocab_size_dict': {'targets': 3}},
        {'vocab_size_dict': {'default': 3}},
    ),
    'MultiHot-unknown': (
        MultiHot,
        {'vocab_size_dict': {'targets': 3}},
        {'vocab_size_dict': {'x': 3}},
    ),
}


@pytest.mark.parametrize('cls, arguments, edit', EDITS.values(), ids=EDITS.keys())
def test_an_edited_description_is_refused_as_the_constructor_refuses(
    cls, arguments, edit
):
    with pytest.raises(IteratorValidationError) as built:
        cls(_minibatches(), **{**arguments, **edit})
    description = _described(cls(_minibatches(), **arguments))
    description.update(json.loads(json.dumps(edit)))
    with pytest.raises(IteratorValidationError) as restored:
        create_from_description(description)
    assert str(restored.value) == str(built.value)
    assert str(built.value).startswith(f'{cls.__name__}: ')


def test_the_crop_error_says_what_fits():
    with pytest.raises(IteratorValidationError) as info:
        RandomCrop(_minibatches(), {'default': (4, 9)})
    assert str(info.value) == (
        "RandomCrop: crop (4, 9) for data 'default' is larger than its images "
        '(6, 5): shape_dict must give (h, w) with h <= 6 and w <= 5'
    )


def test_a_flip_described_without_probabilities_flips_the_default_data():
    description = _described(Flip(_minibatches()))
    description['prob_dict'] = None
    restored = create_from_description(description)
    assert restored.prob_dict == {'default': 0.5}
    assert next(restored())['default'].shape == (1, 2, 6, 5, 3)


# ------------------------------------------------- Pad and RandomCrop shapes ---

RESHAPING = {
    'Pad': (lambda it: Pad(it, {'default': 2}), (1, 4, 10, 9, 3)),
    'RandomCrop': (lambda it: RandomCrop(it, {'default': (4, 3)}), (1, 4, 4, 3, 3)),
}


@pytest.mark.parametrize('make, shape', RESHAPING.values(), ids=RESHAPING.keys())
def test_a_brainstorm_05_description_loads_with_the_changed_shapes(make, shape):
    """0.5 described Pad and RandomCrop with the wrapped iterator's shapes."""
    description = _described(make(_minibatches()))
    assert description['data_shapes']['default'] == list(shape)
    description['data_shapes'] = description['iter']['data_shapes']  # as 0.5
    restored = create_from_description(description)
    assert restored.data_shapes == {'default': shape, 'targets': (1, 4, 1)}
    assert next(restored())['default'].shape == (1, 2) + shape[2:]


@pytest.mark.parametrize('make, shape', RESHAPING.values(), ids=RESHAPING.keys())
def test_edited_data_shapes_of_pad_and_random_crop_are_refused(make, shape):
    wrapper = make(_minibatches())
    description = _described(wrapper)
    description['data_shapes']['default'] = [1, 4, 7, 7, 3]
    with pytest.raises(IteratorValidationError) as info:
        create_from_description(description)
    assert str(info.value) == (
        f'{type(wrapper).__name__} (from a description): data_shapes must give '
        'the data of the wrapped iterator (Minibatches): '
        f"{{'default': {shape}, 'targets': (1, 4, 1)}}. Received: "
        "data_shapes={'default': (1, 4, 7, 7, 3), 'targets': (1, 4, 1)}"
    )


@pytest.mark.parametrize(
    'make',
    [
        *WRAPPERS.values(),
        lambda it: AddSaltNPepper(it, {'default': 0.1, 'targets': 0.2}, {'targets': 1}),
        lambda it: Pad(it, {'default': 1}, {'default': -1.0}),
        lambda it: Flip(Pad(it, {'default': 1})),
    ],
    ids=[*WRAPPERS, 'AddSaltNPepper-ratio', 'Pad-value', 'Flip-Pad'],
)
def test_descriptions_of_the_wrappers_still_load(make):
    original = make(_minibatches())
    description = _described(original)
    restored = create_from_description(description)
    assert get_description(restored) == description
    assert restored.data_shapes == original.data_shapes
    batch = next(restored())
    assert {k: v.shape[2:] for k, v in batch.items()} == {
        k: s[2:] for k, s in original.data_shapes.items()
    }
