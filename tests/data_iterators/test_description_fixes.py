"""An iterator recreated from an edited description checks that its state
fits its data (before: extra empty batches, lost samples, bare IndexError
and ValueError); descriptions the library writes, and those of
Brainstorm 0.5, still load."""

import json

import numpy as np
import pytest

from brainstorm.data_iterators import (
    AddGaussianNoise,
    Flip,
    Minibatches,
    OneHot,
    Pad,
    Shard,
    Undivided,
)
from brainstorm.describable import create_from_description, get_description
from brainstorm.utils import IteratorValidationError

IDS = np.arange(7, dtype=float).reshape(1, 7, 1)


def _described(iterator):
    return json.loads(json.dumps(get_description(iterator)))


def _edited(iterator, **changes):
    description = _described(iterator)
    description.update(changes)
    return description


def _refused(description):
    with pytest.raises(IteratorValidationError) as info:
        create_from_description(description)
    return str(info.value)


def _ids(iterator):
    return [batch['default'][0, :, 0].astype(int).tolist() for batch in iterator()]


@pytest.mark.parametrize(
    'changes, message',
    [
        (
            {'length': 5},
            'length must be the number of batches of 3 of its 7 samples: 3. '
            'Received: length=5',
        ),
        (
            {'sample_size': 20},
            'sample_size must be the number of samples of the data: 7 (B of its '
            'shape (1, 7, 1)). Received: sample_size=20',
        ),
        (
            {'sample_size': 4},
            'sample_size must be the number of samples of the data: 7 (B of its '
            'shape (1, 7, 1)). Received: sample_size=4',
        ),
        (
            {'sample_size': 20, 'shuffle': 'samples'},
            'sample_size must be the number of samples of the data: 7',
        ),
        (
            {'seq_lens': [1, 1]},
            'seq_lens must be None or one sequence length in [0, 1] per sample: '
            '7 ints (B of its shape (1, 7, 1)). Received: seq_lens=[1, 1]',
        ),
        (
            {'seq_lens': [1, 1, 1, 2, 1, 1, 1]},
            'seq_lens must be None or one sequence length in [0, 1] per sample',
        ),
        ({'seq_lens': [1, 1, 1, -1, 1, 1, 1]}, 'seq_lens[3] must be an int >= 0'),
        ({'seq_lens': [1, 1, 1, 0.5, 1, 1, 1]}, 'seq_lens[3] must be an int >= 0'),
        (
            {'data_shapes': {'default': [1, 9, 1]}},
            "data_shapes must be the shapes of the data {'default': (1, 7, 1)}. "
            "Received: data_shapes={'default': (1, 9, 1)}",
        ),
        (
            {'data_shapes': {'other': [1, 7, 1]}},
            "data_shapes must be the shapes of the data {'default': (1, 7, 1)}",
        ),
        (
            {'data': {'default': [[]]}, 'data_shapes': {'default': [1, 0]}},
            'must be a numeric array with at least 3 dimensions',
        ),
    ],
    ids=[
        'length',
        'sample_size-more',
        'sample_size-fewer',
        'shuffle-samples',
        'seq_lens-short',
        'seq_lens-too-long',
        'seq_lens-negative',
        'seq_lens-fraction',
        'data_shapes',
        'data_shapes-names',
        'data-2d',
    ],
)
def test_an_edited_minibatches_description_is_refused(changes, message):
    description = _edited(Minibatches(3, shuffle=True, default=IDS), **changes)
    refused = _refused(description)
    assert refused.startswith('Minibatches (from a description): '), refused
    assert message in refused


@pytest.mark.parametrize(
    'changes, message',
    [
        (
            {'total_size': 3},
            'total_size must be the number of samples of the data: 7 (B of its '
            'shape (1, 7, 1)). Received: total_size=3',
        ),
        ({'length': 2}, 'length must be 1. Received: length=2'),
        (
            {'data_shapes': {'default': [2, 7, 1]}},
            "data_shapes must be the shapes of the data {'default': (1, 7, 1)}",
        ),
    ],
    ids=['total_size', 'length', 'data_shapes'],
)
def test_an_edited_undivided_description_is_refused(changes, message):
    refused = _refused(_edited(Undivided(default=IDS), **changes))
    assert refused.startswith('Undivided (from a description): ' + message), refused


@pytest.mark.parametrize(
    'changes, message',
    [
        (
            {'length': 5},
            'length must be the length of the wrapped iterator (Minibatches): 3, '
            'as it yields one batch per batch of it. Received: length=5',
        ),
        (
            {'data_shapes': {'default': [1, 9, 1]}},
            'data_shapes must give the data of the wrapped iterator '
            "(Minibatches): {'default': (1, 7, 1)}. Received: "
            "data_shapes={'default': (1, 9, 1)}",
        ),
        (
            {'data_shapes': {'other': [1, 7, 1]}},
            'data_shapes must give the data of the wrapped iterator',
        ),
    ],
    ids=['length', 'data_shapes', 'data_shapes-names'],
)
def test_an_edited_shard_description_is_refused(changes, message):
    shard = Shard(Minibatches(3, shuffle=False, default=IDS), 0, 2)
    refused = _refused(_edited(shard, **changes))
    assert refused.startswith('Shard (from a description): ' + message), refused


def test_an_edited_one_hot_description_is_refused():
    base = Minibatches(2, default=IDS, targets=np.zeros((1, 7, 1), int))
    description = _edited(OneHot(base, {'targets': 4}))
    assert description['data_shapes']['targets'] == [1, 7, 4]
    description['data_shapes']['targets'] = [1, 7, 5]
    refused = _refused(description)
    assert refused.startswith(
        'OneHot (from a description): data_shapes must give the data of the '
        "wrapped iterator (Minibatches): {'default': (1, 7, 1), 'targets': "
        '(1, 7, 4)}'
    )


def test_a_brainstorm_05_one_hot_description_loads_with_the_encoded_shapes():
    """0.5 described the wrapped iterator's data shapes (the ids' last
    dimension 1, not V)."""
    base = Minibatches(2, shuffle=False, default=IDS, targets=np.zeros((1, 7, 1), int))
    description = _edited(OneHot(base, {'targets': 4}))
    description['data_shapes']['targets'] = [1, 7, 1]  # as 0.5 wrote it
    restored = create_from_description(description)
    assert restored.data_shapes['targets'] == (1, 7, 4)
    batch = next(iter(restored()))
    assert batch['targets'].shape == (1, 2, 4)


def _images():
    return np.random.RandomState(0).rand(1, 4, 3, 3, 1)


@pytest.mark.parametrize(
    'make',
    [
        lambda: Minibatches(3, shuffle='samples', default=IDS),
        lambda: Minibatches(3, default=IDS, mask=np.ones((1, 7, 1))),
        lambda: Minibatches(3, default=IDS, cut_according_to=[1, 0, 1, 1, 0, 1, 1]),
        lambda: Minibatches(3, default=IDS, check_finite=False),
        lambda: Undivided(default=IDS),
        lambda: Shard(Minibatches(3, default=IDS), 1, 2),
        lambda: Shard(Undivided(default=IDS), 1, 3),
        lambda: OneHot(Minibatches(3, targets=IDS.astype(int)), {'targets': 7}),
        lambda: AddGaussianNoise(
            Shard(Minibatches(2, default=_images()), 0, 2), {'default': 0.1}
        ),
        lambda: Flip(
            Pad(Undivided(default=_images()), {'default': 1}), {'default': 0.5}
        ),
    ],
    ids=[
        'samples',
        'mask',
        'seq_lens',
        'check_finite',
        'Undivided',
        'Shard',
        'Shard-Undivided',
        'OneHot',
        'noise-Shard',
        'Flip-Pad',
    ],
)
def test_descriptions_the_library_writes_still_load(make):
    original = make()
    description = _described(original)
    restored = create_from_description(description)
    assert get_description(restored) == description
    assert restored.length == original.length
    assert restored.data_shapes == original.data_shapes
    assert [b.keys() for b in restored()] == [b.keys() for b in original()]


def test_descriptions_without_the_newer_fields_still_load():
    mb = _described(Minibatches(3, shuffle=True, default=IDS.astype(np.float32)))
    for key in ('data_dtypes', 'check_finite'):
        mb.pop(key, None)
    restored = create_from_description(mb)
    assert sorted(sum(_ids(restored), [])) == list(range(7))
    undivided = _described(Undivided(default=IDS))
    undivided.pop('data_dtypes')
    assert _ids(create_from_description(undivided)) == [list(range(7))]


def _data_05():
    x = np.arange(30.0).reshape(2, 5, 3)
    y = np.arange(10).reshape(2, 5, 1)
    return {'default': x.tolist(), 'targets': y.tolist()}


def test_a_brainstorm_05_minibatches_description_loads():
    """Brainstorm 0.5 wrote the values per batch as sample_size (here
    (2 * 3 + 2 * 1) * 2 = 16) and seq_lens of T for every sample."""
    description = {
        'data_shapes': {'default': [2, 5, 3], 'targets': [2, 5, 1]},
        'length': 3,
        'data': _data_05(),
        'shuffle': False,
        'batch_size': 2,
        'seq_lens': [2, 2, 2, 2, 2],
        'sample_size': 16,
        '@type': 'Minibatches',
    }
    restored = create_from_description(description)
    assert restored.sample_size == 5
    batches = [b['targets'][:, :, 0].tolist() for b in restored()]
    assert batches == [[[0, 1], [5, 6]], [[2, 3], [7, 8]], [[4], [9]]]
    restored.shuffle = 'samples'
    assert sorted(sum((b['targets'][0, :, 0].tolist() for b in restored()), [])) == [
        0,
        1,
        2,
        3,
        4,
    ]


def test_a_brainstorm_05_undivided_description_loads_and_shards():
    """Brainstorm 0.5 wrote the number of all values as total_size (40):
    a Shard of the restored iterator gave every rank all the samples."""
    description = {
        'data_shapes': {'default': [2, 5, 3], 'targets': [2, 5, 1]},
        'length': 1,
        'data': _data_05(),
        'total_size': 40,
        '@type': 'Undivided',
    }
    restored = create_from_description(description)
    assert restored.total_size == 5
    assert [b['targets'][0, :, 0].tolist() for b in restored()] == [[0, 1, 2, 3, 4]]
    parts = [
        next(Shard(restored, rank, 2)())['targets'][0, :, 0].tolist() for rank in (0, 1)
    ]
    assert parts == [[0, 1], [2, 3, 4]]


@pytest.mark.parametrize(
    'make, keeps_shapes',
    [
        (lambda it: AddGaussianNoise(it, {'default': 0.1}), True),
        (lambda it: Flip(it, {'default': 0.5}), True),
        (lambda it: Pad(it, {'default': 1}), False),
    ],
    ids=['AddGaussianNoise', 'Flip', 'Pad'],
)
def test_edited_wrapper_descriptions_are_refused(make, keeps_shapes):
    wrapper = make(Minibatches(3, default=_images()))
    name = type(wrapper).__name__
    refused = _refused(_edited(wrapper, length=7))
    assert refused.startswith(
        f'{name} (from a description): length must be the length of the wrapped '
        'iterator (Minibatches): 2'
    )
    shapes = {'default': [1, 4, 9, 9, 1]}
    if keeps_shapes:
        assert _refused(_edited(wrapper, data_shapes=shapes)).startswith(
            f'{name} (from a description): data_shapes must give the data of the '
            "wrapped iterator (Minibatches): {'default': (1, 4, 3, 3, 1)}"
        )
    refused = _refused(_edited(wrapper, data_shapes={'other': [1, 4, 3, 3, 1]}))
    assert 'data_shapes must give the data of the wrapped iterator' in refused
