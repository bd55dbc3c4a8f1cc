"""The checkpoint file format's rules at their edges (written and read
directly, without training)."""

import json

import h5py
import numpy as np
import pytest

from brainstorm.randomness import RandomState
from brainstorm.training.checkpoint_file import (
    CHECKPOINT_FORMAT,
    check_random_state,
    get_random_state,
    iterator_chain,
    read_checkpoint,
    set_random_state,
    write_checkpoint,
)
from brainstorm.utils import (
    CHECKSUM_ATTRIBUTE,
    TrainingValidationError,
    add_checksums,
    get_brainstorm_info,
)


def state(seed=1):
    return get_random_state(np.random.RandomState(seed))


def contents(ranks=False):
    random_states = {
        'global': state(1),
        'network': state(2),
        'handler': None,
        'iterators': {'train': [state(3), None], 'valid': []},
    }
    if ranks:
        random_states['ranks'] = [
            {
                'global': state(4),
                'network': state(5),
                'handler': state(6),
                'iterators': {'train': [None, state(7)]},
            }
        ]
    return {
        'network': {'@type': 'Network', 'n': 1},
        'parameters': np.arange(5.0, dtype=np.float32),
        'trainer': {'@type': 'Trainer'},
        'progress': {'epoch': 2, 'logs': [1.5]},
        'stepper_state': {'velocity': np.ones(3), 'step': np.int64(4)},
        'hook_states': {'keeps': {'best': np.zeros(2)}, 'empty': {}},
        'random_states': random_states,
    }


def write(path, ranks=False):
    c = contents(ranks)
    write_checkpoint(
        path,
        c['network'],
        c['parameters'],
        c['trainer'],
        c['progress'],
        c['stepper_state'],
        c['hook_states'],
        c['random_states'],
    )
    return c


def same_state(a, b):
    return a.keys() == b.keys() and all(
        np.array_equal(a[k], b[k]) if k == 'keys' else a[k] == b[k] for k in a
    )


def test_everything_written_is_read_back(tmp_path):
    c = write(tmp_path / 'c.h5', ranks=True)
    data = read_checkpoint(tmp_path / 'c.h5')
    assert data['network'] == c['network'] and data['trainer'] == c['trainer']
    assert data['progress'] == c['progress']
    assert np.array_equal(data['parameters'], c['parameters'])
    assert data['parameters'].dtype == np.float32
    assert sorted(data['stepper_state']) == ['step', 'velocity']
    assert np.array_equal(data['stepper_state']['velocity'], np.ones(3))
    assert (
        data['stepper_state']['step'].shape == () and data['stepper_state']['step'] == 4
    )
    # a hook without state is not stored
    assert list(data['hook_states']) == ['keeps']
    assert np.array_equal(data['hook_states']['keeps']['best'], np.zeros(2))
    r = data['random_states']
    want = c['random_states']
    assert same_state(r['global'], want['global'])
    assert same_state(r['network'], want['network'])
    assert r['handler'] is None
    assert sorted(r['iterators']) == ['train', 'valid']
    assert r['iterators']['valid'] == []
    first, second = r['iterators']['train']
    assert same_state(first, want['iterators']['train'][0]) and second is None
    (rank,) = r['ranks']
    assert same_state(rank['handler'], state(6))
    assert rank['iterators']['train'][0] is None
    assert same_state(rank['iterators']['train'][1], state(7))
    assert 'ranks' not in rank


def test_the_file_layout(tmp_path):
    write(tmp_path / 'c.h5')
    with h5py.File(tmp_path / 'c.h5', 'r') as f:
        assert f.attrs['format'] == CHECKPOINT_FORMAT
        assert f.attrs['info'] == get_brainstorm_info()
        assert sorted(f) == [
            'hooks',
            'network',
            'parameters',
            'progress',
            'random',
            'stepper',
            'trainer',
        ]
        assert f['hooks/0'].attrs['name'] == 'keeps' and '1' not in f['hooks']
        assert f['random/iterators/train'].attrs['length'] == 2
        assert sorted(f['random/iterators/train']) == ['0']
        assert 'ranks' not in f['random'] and 'handler' not in f['random']
        assert f['random/global'].attrs['pos'] == state(1)['pos']
        assert json.loads(f['progress'][()].tobytes()) == {'epoch': 2, 'logs': [1.5]}
        for name in ('network', 'trainer', 'progress'):
            assert f[name].dtype == np.uint8


def test_an_unstorable_description_is_refused_before_anything_is_written(tmp_path):
    c = contents()
    with pytest.raises(TrainingValidationError, match=r"c\.h5': the logs cannot"):
        write_checkpoint(
            str(tmp_path / 'c.h5'),
            c['network'],
            c['parameters'],
            c['trainer'],
            {'bad': object()},
            c['stepper_state'],
            c['hook_states'],
            c['random_states'],
        )
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------- crafted files --


def crafted(tmp_path, edit, ranks=False):
    path = tmp_path / 'c.h5'
    write(path, ranks)
    with h5py.File(path, 'r+') as f:
        edit(f)
        add_checksums(f)  # an attacker re-signs the file
    return path


def refused(path, match):
    with pytest.raises(TrainingValidationError, match=match):
        read_checkpoint(path)


def set_attr(path, key, value):
    def edit(f):
        f[path].attrs[key] = value

    return edit


@pytest.mark.parametrize(
    'length, ok',
    [(0, True), (2, True), (1 + 64, True), (1 + 65, False), (-1, False)],
)
def test_a_stored_length_is_bounded_by_the_members_present(length, ok, tmp_path):
    path = crafted(tmp_path, set_attr('random/iterators/train', 'length', length))
    if ok:
        chain = read_checkpoint(path)['random_states']['iterators']['train']
        assert len(chain) == length
        assert all(s is None for s in chain[1:])
    else:
        refused(path, 'attribute length must be a small int')


@pytest.mark.parametrize('value', [True, 2.0, 'two', np.bool_(False)])
def test_a_length_that_is_no_int_is_refused(value, tmp_path):
    refused(
        crafted(tmp_path, set_attr('random/iterators/train', 'length', value)),
        "'/random/iterators/train': attribute length must be a small int",
    )


def test_a_missing_length_is_refused(tmp_path):
    def edit(f):
        del f['random/iterators/train'].attrs['length']

    refused(crafted(tmp_path, edit), "attribute 'length' is missing")


@pytest.mark.parametrize('key', ['global', 'network'])
def test_the_global_and_network_random_states_are_required(key, tmp_path):
    def edit(f):
        del f[f'random/{key}']

    refused(crafted(tmp_path, edit), f"'random/{key}': the random state is missing")


def test_ranks_do_not_nest(tmp_path):
    def edit(f):
        f.copy(f['random/ranks'], f['random/ranks/0'], name='ranks')

    refused(crafted(tmp_path, edit, ranks=True), "'random/ranks/0/ranks': ranks do not")


def test_a_missing_rank_is_refused(tmp_path):
    refused(
        crafted(tmp_path, set_attr('random/ranks', 'length', 2), ranks=True),
        'random/ranks/1',
    )


@pytest.mark.parametrize(
    'edit, match',
    [
        (set_attr('hooks/0', 'name', 5), 'attribute name must be a str naming one'),
        (
            lambda f: f.copy(f['hooks/0'], f['hooks'], name='1'),
            "'hooks/1': attribute name must be a str naming one hook. "
            "Received: 'keeps'",
        ),
        (lambda f: f['hooks/0'].attrs.__delitem__('name'), "'name' is missing"),
    ],
)
def test_hook_states_need_one_str_name_each(edit, match, tmp_path):
    refused(crafted(tmp_path, edit), match)


def replace(name, data):
    def edit(f):
        del f[name]
        f.create_dataset(name, data=data)

    return edit


def json_bytes(obj):
    return np.frombuffer(json.dumps(obj).encode(), dtype=np.uint8)


@pytest.mark.parametrize(
    'edit, match',
    [
        (replace('parameters', np.ones((2, 3))), "'parameters': expected a 1-d float"),
        (replace('parameters', np.arange(4)), "'parameters': expected a 1-d float"),
        (replace('parameters', np.float64(1)), "'parameters': expected a 1-d float"),
        (replace('network', json_bytes([1])), "'network': expected a JSON object"),
        (replace('trainer', json_bytes('x')), "'trainer': expected a JSON object"),
        (replace('progress', json_bytes(None)), "'progress': expected a JSON object"),
        (replace('progress', np.frombuffer(b'\xff{', np.uint8)), 'not UTF-8 JSON'),
        (replace('progress', np.frombuffer(b'{1', np.uint8)), 'not UTF-8 JSON'),
        (replace('network', np.ones(3, dtype=np.int8)), "'network': expected UTF-8"),
        (replace('network', np.ones((1, 3), np.uint8)), "'network': expected UTF-8"),
        (replace('stepper/velocity', np.bytes_(b'x')), 'expected a numeric array'),
        (replace('hooks/0/best', np.array([b'a'])), 'expected a numeric array'),
    ],
)
def test_malformed_entries_are_refused_naming_them(edit, match, tmp_path):
    refused(crafted(tmp_path, edit), match)


def test_numeric_entries_of_every_kind_are_accepted(tmp_path):
    def edit(f):
        for name, data in [
            ('b', np.array([True])),
            ('i', np.array([-1], np.int8)),
            ('u', np.array([1], np.uint16)),
            ('f', np.float32(2.0)),
        ]:
            f['stepper'].create_dataset(name, data=data)

    data = read_checkpoint(crafted(tmp_path, edit))['stepper_state']
    assert {k: v.dtype.kind for k, v in data.items()} == {
        'b': 'b',
        'i': 'i',
        'u': 'u',
        'f': 'f',
        'step': 'i',
        'velocity': 'f',
    }
    assert isinstance(data['f'], np.ndarray) and data['f'].shape == ()


@pytest.mark.parametrize('missing', ['network', 'stepper', 'hooks', 'random'])
def test_a_missing_entry_is_named(missing, tmp_path):
    def edit(f):
        del f[missing]

    refused(
        crafted(tmp_path, edit),
        rf"is not a brainstorm checkpoint.*missing \['{missing}'\]",
    )


def test_a_wrong_format_is_named(tmp_path):
    refused(
        crafted(tmp_path, set_attr('/', 'format', np.bytes_(b'Network file v1.0'))),
        "is not a brainstorm checkpoint: expected format b'Checkpoint file v1.0'",
    )


def test_an_unexpected_failure_while_reading_is_a_corrupt_file(tmp_path, monkeypatch):
    import brainstorm.training.checkpoint_file as module

    path = crafted(tmp_path, lambda f: None)

    def broken(*args):
        raise KeyError('surprise')

    monkeypatch.setattr(module, '_read_random_states', broken)
    refused(path, r"Checkpoint '.*c.h5' is corrupt: KeyError: 'surprise'")


def test_a_changed_random_state_is_refused_by_its_checksum(tmp_path):
    path = tmp_path / 'c.h5'
    write(path)
    with h5py.File(path, 'r+') as f:
        f['random/global'].attrs['pos'] = 3
    refused(path, "'random/global': its checksum does not match")
    with h5py.File(path, 'r+') as f:
        del f['random/global'].attrs[CHECKSUM_ATTRIBUTE]
    refused(path, "'random/global': it has no checksum")


# ---------------------------------------------------------- random states --


def good():
    rnd = np.random.RandomState(3)
    rnd.standard_normal()  # a cached Gaussian is part of the state
    return get_random_state(rnd)


@pytest.mark.parametrize(
    'entry, value, ok',
    [
        ('pos', 0, True),
        ('pos', 624, True),
        ('pos', np.int64(5), True),
        ('pos', -1, False),
        ('pos', 625, False),
        ('pos', True, False),
        ('pos', 3.0, False),
        ('has_gauss', 0, True),
        ('has_gauss', 1, True),
        ('has_gauss', 2, False),
        ('has_gauss', -1, False),
        ('has_gauss', np.bool_(True), False),
        ('seed', 0, True),
        ('seed', 2**32 - 1, True),
        ('seed', 2**32, False),
        ('seed', -1, False),
        ('cached_gaussian', 0, True),
        ('cached_gaussian', np.float32(1.5), True),
        ('cached_gaussian', float('inf'), False),
        ('cached_gaussian', float('-inf'), False),
        ('cached_gaussian', float('nan'), False),
        ('cached_gaussian', True, False),
        ('cached_gaussian', '0.5', False),
        ('name', 'MT19937', True),
        ('name', 'PCG64', False),
        ('name', None, False),
    ],
)
def test_random_state_entries_at_their_bounds(entry, value, ok):
    s = dict(good(), **{entry: value})
    if ok:
        check_random_state(s, 'here')
    else:
        with pytest.raises(
            TrainingValidationError, match=rf"^here: .*'{entry}' must be"
        ):
            check_random_state(s, 'here')


@pytest.mark.parametrize(
    'keys',
    [
        np.zeros(623, np.uint32),
        np.zeros(625, np.uint32),
        np.zeros(624, np.int64),
        np.zeros((624, 1), np.uint32),
        list(range(624)),
        None,
    ],
)
def test_random_state_keys_must_be_624_uint32(keys):
    with pytest.raises(TrainingValidationError, match="'keys' must be a uint32 array"):
        check_random_state(dict(good(), keys=keys), 'here')


@pytest.mark.parametrize('entry', ['pos', 'has_gauss', 'seed', 'cached_gaussian'])
def test_a_missing_random_state_entry_is_refused(entry):
    s = good()
    del s[entry]
    with pytest.raises(TrainingValidationError, match=f"'{entry}'"):
        check_random_state(s, 'here')


def test_a_random_state_is_restored_exactly_with_its_cached_gaussian_and_seed():
    rnd = RandomState(11)
    rnd.standard_normal()
    saved = get_random_state(rnd)
    assert saved['has_gauss'] == 1 and saved['seed'] == 11
    expected = [rnd.standard_normal() for _ in range(3)]
    other = RandomState(5)
    set_random_state(other, saved)
    assert [other.standard_normal() for _ in range(3)] == expected
    assert other.get_seed() == 11
    plain = np.random.RandomState(0)
    set_random_state(plain, saved)  # no seed to set on NumPy's own
    assert plain.standard_normal() == expected[0]
    before = plain.get_state()
    with pytest.raises(TrainingValidationError, match="set_random_state: .*'pos'"):
        set_random_state(plain, dict(saved, pos=900))
    # a refused state is refused before NumPy sees it: the generator is as it was
    after = plain.get_state()
    assert after[2] == before[2] and np.array_equal(after[1], before[1])


def test_get_random_state_gives_plain_values():
    s = get_random_state(np.random.RandomState(2))
    assert s['name'] == 'MT19937' and type(s['name']) is str
    assert s['keys'].dtype == np.uint32 and s['keys'].shape == (624,)
    assert type(s['pos']) is int and type(s['has_gauss']) is int
    assert type(s['cached_gaussian']) is float and s['seed'] == 0


# --------------------------------------------------------- iterator chain --


class Link:
    def __init__(self, inner=None):
        self.iter = inner


def test_the_iterator_chain_follows_iter_and_stops_at_a_cycle():
    inner = Link()
    outer = Link(Link(inner))
    chain = iterator_chain(outer)
    assert chain == [outer, outer.iter, inner]
    a, b = Link(), Link()
    a.iter, b.iter = b, a
    assert iterator_chain(a) == [a, b]
    a.iter = a
    assert iterator_chain(a) == [a]
    assert iterator_chain(None) == []
    assert iterator_chain(object.__new__(object)) != []


def test_the_library_error_is_raised_as_it_is_not_wrapped(tmp_path):
    path = crafted(tmp_path, set_attr('random/global', 'pos', 9999))
    with pytest.raises(TrainingValidationError) as info:
        read_checkpoint(path)
    assert str(info.value).startswith(
        f"Checkpoint '{path}', 'random/global': random state entry 'pos' must be"
    )
    assert 'is corrupt: TrainingValidationError' not in str(info.value)
