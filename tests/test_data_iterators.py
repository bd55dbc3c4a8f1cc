"""Tests for brainstorm.data_iterators."""

import tracemalloc

import numpy as np
import pytest

from brainstorm.data_iterators import (
    AddGaussianNoise,
    AddSaltNPepper,
    DataIterator,
    Flip,
    Minibatches,
    MultiHot,
    OneHot,
    Pad,
    RandomCrop,
    Undivided,
)
from brainstorm.utils import IteratorValidationError


def images(t=2, b=4, h=3, w=5, c=2, seed=0):
    return np.random.RandomState(seed).rand(t, b, h, w, c)


def collect(iterator, handler=None):
    return [{k: v.copy() for k, v in batch.items()} for batch in iterator(handler)]


def walk(iterator):
    while iterator is not None:
        yield iterator
        iterator = getattr(iterator, 'iter', None)


# ----------------------------------------------------------- validation ---


def test_data_needs_three_dimensions():
    with pytest.raises(
        IteratorValidationError, match=r"Undivided: data 'x'.*3 dimensions.*\(4, 2\)"
    ):
        Undivided(x=np.zeros((4, 2)))


@pytest.mark.parametrize('klass', [Undivided, Minibatches])
def test_unequal_time_or_batch_sizes(klass):
    with pytest.raises(IteratorValidationError, match=rf"{klass.__name__}.*'a'.*'b'"):
        klass(a=np.zeros((2, 3, 1)), b=np.zeros((2, 4, 1)))
    with pytest.raises(IteratorValidationError, match='same time'):
        klass(a=np.zeros((2, 3, 1)), b=np.zeros((3, 3, 1)))


def test_no_data():
    with pytest.raises(IteratorValidationError, match='at least one'):
        Minibatches(batch_size=2)


@pytest.mark.parametrize('batch_size', [0, 2.0, -1])
def test_bad_batch_size(batch_size):
    with pytest.raises(IteratorValidationError, match='batch_size'):
        Minibatches(batch_size=batch_size, x=np.zeros((1, 3, 1)))


@pytest.mark.parametrize(
    'factory, pattern',
    [
        (
            lambda it: AddGaussianNoise(it, {'nope': 1.0}),
            r"AddGaussianNoise: std_dict names unknown data 'nope'",
        ),
        (
            lambda it: AddGaussianNoise(it, {'default': 1.0}, {'targets': 0.0}),
            r'AddGaussianNoise: mean_dict and std_dict',
        ),
        (
            lambda it: AddGaussianNoise(it, {'default': -1.0}),
            r"AddGaussianNoise: std_dict\['default'\]",
        ),
        (
            lambda it: AddSaltNPepper(it, {'default': 1.5}),
            r"AddSaltNPepper: prob_dict\['default'\]",
        ),
        (
            lambda it: AddSaltNPepper(it, {'default': 0.1}, {'targets': 0.5}),
            r"AddSaltNPepper: ratio_dict names 'targets'",
        ),
        (lambda it: Flip(it, {'targets': 0.5}), r"Flip: data 'targets'.*5-D"),
        (lambda it: Flip(it, {'x': 0.5}), r"Flip: prob_dict names unknown.*'x'"),
        (
            lambda it: OneHot(it, {'targets': 3.0}),
            r"OneHot: vocab_size_dict\['targets'\] must be a positive int",
        ),
        (
            lambda it: OneHot(it, {'default': 3}),
            r"OneHot: data 'default' must have size 1",
        ),
        (
            lambda it: MultiHot(it, {'targets': '3'}),
            r"MultiHot: vocab_size_dict\['targets'\]",
        ),
        (lambda it: Pad(it, {'default': -1}), r"Pad: size_dict\['default'\]"),
        (lambda it: Pad(it, {'targets': 1}), r"Pad: data 'targets'"),
        (
            lambda it: Pad(it, {'default': 1}, {'targets': 1.0}),
            r'Pad: value_dict names',
        ),
        (
            lambda it: RandomCrop(it, {'default': (4, 2)}),
            r"RandomCrop: crop \(4, 2\) for data 'default' is larger.*\(3, 5\)",
        ),
        (lambda it: RandomCrop(it, {'default': 3}), r'RandomCrop: shape_dict'),
        (lambda it: RandomCrop(it, {'missing': (1, 1)}), r'RandomCrop.*missing'),
        (
            lambda it: AddGaussianNoise([1, 2], {'default': 1.0}),
            r'AddGaussianNoise: iter must be a DataIterator',
        ),
    ],
)
def test_wrapper_validation(factory, pattern):
    base = Undivided(default=images(), targets=np.zeros((2, 4, 1)))
    with pytest.raises(IteratorValidationError, match=pattern):
        factory(base)


# ------------------------------------------------------------ Undivided ---


def test_undivided_yields_all_data_once_without_exposing_it():
    x = np.arange(24.0).reshape(2, 4, 3)
    it = Undivided(default=x)
    assert it.length == 1 and it.total_size == 4
    assert it.data_shapes == {'default': (2, 4, 3)}
    batches = list(it(None))
    assert len(batches) == 1
    np.testing.assert_array_equal(batches[0]['default'], x)
    with pytest.raises(ValueError):
        batches[0]['default'] += 1
    assert x.flags.writeable
    # a fresh dict per pass: replacing an entry does not affect later passes
    batches[0]['default'] = None
    np.testing.assert_array_equal(next(it())['default'], x)


def test_noise_does_not_accumulate_across_passes():
    # Note fix: 0.5's Undivided yielded its stored dict and noise piled up.
    x = np.zeros((1, 500, 4))
    it = AddGaussianNoise(Undivided(default=x), {'default': 1.0})
    for _ in range(5):
        noisy = next(it())['default']
        assert 0.9 < noisy.std() < 1.1
    np.testing.assert_array_equal(x, 0.0)


# ---------------------------------------------------------- Minibatches ---


def test_minibatches_content_and_length():
    x = np.arange(10.0).reshape(1, 10, 1)
    y = np.arange(10, 20.0).reshape(1, 10, 1)
    it = Minibatches(batch_size=3, shuffle=False, default=x, targets=y)
    assert it.length == 4
    assert it.sample_size == 10
    assert it.seq_lens is None
    batches = list(it())
    assert [b['default'].ravel().tolist() for b in batches] == [
        [0, 1, 2],
        [3, 4, 5],
        [6, 7, 8],
        [9],
    ]
    assert [b['targets'].ravel().tolist() for b in batches] == [
        [10, 11, 12],
        [13, 14, 15],
        [16, 17, 18],
        [19],
    ]


def test_minibatches_shuffle_permutes_batch_order_per_pass():
    x = np.arange(12.0).reshape(1, 12, 1)
    it = Minibatches(batch_size=2, shuffle=True, default=x)
    it.rnd.set_seed(3)
    passes = [[tuple(b['default'].ravel()) for b in it()] for _ in range(4)]
    expected = sorted(tuple(x.ravel()[i : i + 2]) for i in range(0, 12, 2))
    for batches in passes:
        assert sorted(batches) == expected
    assert len({tuple(p) for p in passes}) > 1


def test_minibatches_yields_read_only_views():
    x = np.random.RandomState(0).rand(3, 8, 2)
    it = Minibatches(batch_size=3, default=x)
    for batch in it():
        assert np.shares_memory(batch['default'], x)
        assert not batch['default'].flags.writeable
    assert x.flags.writeable


def test_minibatches_large_data_is_never_copied():
    data = np.zeros((1, 60000, 784), dtype=np.float32)
    targets = np.zeros((1, 60000, 1), dtype=np.float32)
    tracemalloc.start()
    try:
        it = Minibatches(batch_size=100, shuffle=True, default=data, targets=targets)
        count = 0
        for batch in it():
            assert batch['default'].shape == (1, 100, 784)
            assert np.shares_memory(batch['default'], data)
            assert np.shares_memory(batch['targets'], targets)
            count += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 600
    assert peak < data.nbytes / 20, (peak, data.nbytes)


def test_minibatches_cut_according_to_mask():
    mask = np.zeros((5, 4, 1))
    mask[:2, 0] = 1
    mask[:4, 1] = 1
    mask[0, 3] = 1
    mask[2, 3] = 1  # a gap: the last non-zero step counts
    x = np.arange(20.0).reshape(5, 4, 1)
    it = Minibatches(batch_size=2, shuffle=False, default=x, mask=mask)
    np.testing.assert_array_equal(it.seq_lens, [2, 4, 0, 3])
    first, second = list(it())
    assert first['default'].shape == (4, 2, 1)
    assert first['mask'].shape == (4, 2, 1)
    np.testing.assert_array_equal(first['default'], x[:4, :2])
    assert second['default'].shape == (3, 2, 1)


def test_minibatches_cut_keeps_at_least_one_step():
    mask = np.zeros((3, 2, 1))
    it = Minibatches(batch_size=2, shuffle=False, mask=mask)
    assert next(it())['mask'].shape == (1, 2, 1)


def test_minibatches_cut_by_explicit_lengths_and_unknown_name():
    x = np.arange(12.0).reshape(4, 3, 1)
    it = Minibatches(batch_size=1, shuffle=False, cut_according_to=[1, 4, 2], default=x)
    assert [b['default'].shape[0] for b in it()] == [1, 4, 2]
    it = Minibatches(
        batch_size=1, shuffle=False, cut_according_to='not_there', default=x
    )
    assert it.seq_lens is None
    assert [b['default'].shape[0] for b in it()] == [4, 4, 4]
    with pytest.raises(IteratorValidationError, match='cut_according_to'):
        Minibatches(cut_according_to=[1, 2], default=x)
    with pytest.raises(IteratorValidationError, match='cut_according_to'):
        Minibatches(cut_according_to=[1, 2, 5], default=x)


# ------------------------------------------------------------- wrappers ---


def test_wrappers_keep_inner_iterator_in_iter():
    base = Minibatches(batch_size=2, default=images(), targets=np.zeros((2, 4, 1)))
    it = RandomCrop(
        Pad(
            Flip(
                AddSaltNPepper(
                    AddGaussianNoise(base, {'default': 0.1}), {'default': 0.1}
                ),
                {'default': 0.5},
            ),
            {'default': 1},
        ),
        {'default': (2, 2)},
    )
    assert [type(i).__name__ for i in walk(it)] == [
        'RandomCrop',
        'Pad',
        'Flip',
        'AddSaltNPepper',
        'AddGaussianNoise',
        'Minibatches',
    ]
    assert it.length == base.length == 2


def test_checkpointing_random_states_reproduces_passes():
    x = images(b=6)
    it = Flip(
        AddGaussianNoise(Minibatches(batch_size=2, default=x), {'default': 0.5}),
        {'default': 0.5},
    )
    for i, sub in enumerate(walk(it)):
        sub.rnd.set_seed(i + 1)
    collect(it)
    states = [sub.rnd.get_state() for sub in walk(it)]
    later = [collect(it) for _ in range(2)]
    for sub, state in zip(walk(it), states):
        sub.rnd.set_state(state)
    again = [collect(it) for _ in range(2)]
    for run_a, run_b in zip(later, again):
        for a, b in zip(run_a, run_b):
            np.testing.assert_array_equal(a['default'], b['default'])
    assert not np.array_equal(later[0][0]['default'], later[1][0]['default'])


def test_add_gaussian_noise_values():
    x = np.full((1, 1000, 4), 5.0, dtype=np.float32)
    it = AddGaussianNoise(
        Undivided(default=x, other=x), {'default': 2.0}, {'default': 1.0}
    )
    batch = next(it())
    noisy = batch['default']
    assert noisy.dtype == np.float32
    assert abs(noisy.mean() - 6.0) < 0.1
    assert abs(noisy.std() - 2.0) < 0.1
    np.testing.assert_array_equal(batch['other'], x)
    np.testing.assert_array_equal(x, 5.0)


def test_add_salt_n_pepper_values():
    x = np.full((1, 1000, 10), 0.5)
    it = AddSaltNPepper(
        Minibatches(batch_size=1000, default=x), {'default': 0.4}, {'default': 0.25}
    )
    out = next(it())['default']
    assert set(np.unique(out)) == {0.0, 0.5, 1.0}
    assert abs((out != 0.5).mean() - 0.4) < 0.02
    assert abs((out == 1.0).mean() - 0.1) < 0.01
    assert abs((out == 0.0).mean() - 0.3) < 0.02
    np.testing.assert_array_equal(x, 0.5)
    same = AddSaltNPepper(Undivided(default=x), {'default': 0.0})
    np.testing.assert_array_equal(next(same())['default'], x)


def test_flip_mirrors_samples_and_never_changes_the_source():
    # Note fix: 0.5 flipped in place, altering the data behind Minibatches.
    x = images(b=40)
    original = x.copy()
    it = Flip(Minibatches(batch_size=20, shuffle=False, default=x))
    flipped_count = 0
    for _ in range(3):
        for k, batch in enumerate(it()):
            out = batch['default']
            source = original[:, k * 20 : (k + 1) * 20]
            for i in range(20):
                if np.array_equal(out[:, i], source[:, i]):
                    continue
                np.testing.assert_array_equal(out[:, i], source[:, i, :, ::-1])
                flipped_count += 1
    np.testing.assert_array_equal(x, original)
    assert 30 < flipped_count < 90
    always = Flip(Undivided(default=x), {'default': 1.0})
    np.testing.assert_array_equal(next(always())['default'], original[:, :, :, ::-1])
    never = Flip(Undivided(default=x), {'default': 0.0})
    np.testing.assert_array_equal(next(never())['default'], original)


def test_one_hot_values_and_shapes():
    ids = np.array([[[0], [2]], [[1], [1]]])
    it = OneHot(Undivided(targets=ids), {'targets': 3})
    assert it.data_shapes == {'targets': (2, 2, 3)}
    out = next(it())['targets']
    assert out.dtype == bool
    np.testing.assert_array_equal(out, [[[1, 0, 0], [0, 0, 1]], [[0, 1, 0], [0, 1, 0]]])
    bad = OneHot(Undivided(targets=ids + 2), {'targets': 3})
    with pytest.raises(IteratorValidationError, match=r"OneHot: data 'targets'"):
        next(bad())


def test_multi_hot_values_and_shapes():
    ids = np.array([[[0, 3], [1, 2]]], dtype=float)
    it = MultiHot(Undivided(targets=ids), {'targets': 4})
    assert it.data_shapes == {'targets': (1, 2, 4)}
    out = next(it(None))['targets']
    np.testing.assert_array_equal(out, [[[1, 0, 0, 1], [0, 1, 1, 0]]])
    # Note fix: handler defaults to None
    assert next(it())['targets'].shape == (1, 2, 4)
    bad = MultiHot(Undivided(targets=ids * 2), {'targets': 4})
    with pytest.raises(IteratorValidationError, match='MultiHot'):
        next(bad())


def test_pad_values_shapes_and_size_zero():
    x = images(h=2, w=3)
    it = Pad(Undivided(default=x), {'default': 2}, {'default': -1.0})
    assert it.data_shapes['default'] == (2, 4, 6, 7, 2)
    out = next(it())['default']
    assert out.shape == (2, 4, 6, 7, 2) and out.dtype == np.float64
    np.testing.assert_array_equal(out[:, :, 2:4, 2:5], x)
    assert np.all(out[:, :, :2] == -1) and np.all(out[:, :, :, 5:] == -1)
    # Note fix: size 0 failed in 0.5
    zero = Pad(Undivided(default=x), {'default': 0})
    assert zero.data_shapes['default'] == x.shape
    np.testing.assert_array_equal(next(zero())['default'], x)


def test_random_crop_values_and_shapes():
    x = images(t=2, b=50, h=4, w=5)
    it = RandomCrop(Undivided(default=x), {'default': (2, 3)})
    it.rnd.set_seed(3)  # unseeded, 50 draws miss a corner 2.5 % of the time
    assert it.data_shapes['default'] == (2, 50, 2, 3, 2)
    out = next(it())['default']
    assert out.shape == (2, 50, 2, 3, 2) and out.dtype == np.float64
    corners = set()
    for i in range(50):
        matches = [
            (top, left)
            for top in range(3)
            for left in range(3)
            if np.array_equal(out[:, i], x[:, i, top : top + 2, left : left + 3])
        ]
        assert len(matches) == 1
        corners.add(matches[0])
    # all 9 corners, including the last ones, are drawn
    assert corners == {(t, l) for t in range(3) for l in range(3)}
    full = RandomCrop(Undivided(default=x), {'default': (4, 5)})
    np.testing.assert_array_equal(next(full())['default'], x)


def test_wrapper_data_shapes_reflect_changes():
    base = Undivided(default=images(h=6, w=6), targets=np.zeros((2, 4, 1)))
    it = OneHot(
        RandomCrop(Pad(base, {'default': 1}), {'default': (5, 4)}), {'targets': 7}
    )
    assert it.data_shapes == {'default': (2, 4, 5, 4, 2), 'targets': (2, 4, 7)}
    batch = next(it())
    assert {k: v.shape for k, v in batch.items()} == it.data_shapes


def test_base_iterator_is_abstract():
    it = DataIterator({'x': (1, 2, 3)}, 4)
    assert it.length == 4 and it.data_shapes == {'x': (1, 2, 3)}
    with pytest.raises(NotImplementedError):
        it(None)


def _iterator_zoo():
    """Every iterator of the SPEC on small data, as (name, factory)."""

    def data():
        rnd = np.random.RandomState(3)
        return {
            'default': rnd.rand(2, 6, 4, 5, 1),
            'targets': rnd.randint(0, 3, (2, 6, 1)),
        }

    def mb():
        return Minibatches(2, shuffle=True, **data())

    return [
        ('Undivided', lambda: Undivided(**data())),
        ('Minibatches', mb),
        ('AddGaussianNoise', lambda: AddGaussianNoise(mb(), {'default': 0.1})),
        ('AddSaltNPepper', lambda: AddSaltNPepper(mb(), {'default': 0.2})),
        ('Flip', lambda: Flip(mb(), {'default': 0.5})),
        ('OneHot', lambda: OneHot(mb(), {'targets': 3})),
        ('MultiHot', lambda: MultiHot(mb(), {'targets': 3})),
        ('Pad', lambda: Pad(mb(), {'default': 1})),
        ('RandomCrop', lambda: RandomCrop(mb(), {'default': (3, 3)})),
    ]


@pytest.mark.parametrize(
    'name, make', _iterator_zoo(), ids=[n for n, _ in _iterator_zoo()]
)
def test_iterator_description_round_trips_through_json(name, make):
    import json

    from brainstorm.describable import create_from_description, get_description

    original = make()
    text = json.dumps(get_description(original))
    recreated = create_from_description(json.loads(text))
    assert type(recreated) is type(original)
    assert recreated.data_shapes == original.data_shapes
    assert recreated.length == original.length
    # same random draws once both random states are set alike
    inner_a, inner_b = original, recreated
    while inner_a is not None:
        inner_b.rnd.set_state(inner_a.rnd.get_state())
        inner_a, inner_b = (
            getattr(inner_a, 'iter', None),
            getattr(inner_b, 'iter', None),
        )
    for a, b in zip(original(), recreated()):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(
                np.asarray(a[key], dtype=float), np.asarray(b[key], dtype=float)
            )
