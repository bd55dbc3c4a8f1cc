"""Tests for brainstorm.utils: errors, names, paths and view helpers."""

import warnings

import numpy as np
import pytest

import brainstorm.shapes
from brainstorm.structure.buffer_views import BufferView
from brainstorm.utils import (
    NAME_BLACKLIST,
    InitializationError,
    IteratorValidationError,
    LayerValidationError,
    NetworkValidationError,
    StructureValidationError,
    ValidationError,
    flatten_all_but_last,
    flatten_features,
    flatten_keys,
    flatten_time,
    flatten_time_and_features,
    get_brainstorm_info,
    get_by_path,
    get_inheritors,
    get_normalized_path,
    is_valid_layer_name,
    reshape_view,
)

# ------------------------------------------------------------------ errors ---


@pytest.mark.parametrize(
    'error',
    [
        NetworkValidationError,
        LayerValidationError,
        IteratorValidationError,
        StructureValidationError,
    ],
)
def test_validation_errors_share_one_base(error):
    assert issubclass(error, ValidationError)
    assert issubclass(error, Exception)
    with pytest.raises(ValidationError, match='culprit'):
        raise error('culprit')


def test_initialization_error_is_not_a_validation_error():
    assert issubclass(InitializationError, Exception)
    assert not issubclass(InitializationError, ValidationError)


def test_validation_error_subclasses_are_distinct():
    subclasses = [
        NetworkValidationError,
        LayerValidationError,
        IteratorValidationError,
        StructureValidationError,
    ]
    for a in subclasses:
        for b in subclasses:
            assert issubclass(a, b) == (a is b)


# ------------------------------------------------------------------- names ---


@pytest.mark.parametrize(
    'name',
    ['Input', 'Hid1', '_private', 'a', 'A_2', 'lstm_layer_3', 'Default', 'fallback_1'],
)
def test_valid_layer_names(name):
    assert is_valid_layer_name(name)


@pytest.mark.parametrize(
    'name',
    [
        'default',
        'fallback',
        '',
        '1abc',
        'a b',
        'a.b',
        'a-b',
        'a@b',
        '..x',
        None,
        3,
        b'abc',
        ['a'],
    ],
)
def test_invalid_layer_names(name):
    assert not is_valid_layer_name(name)


def test_name_blacklist():
    assert NAME_BLACKLIST == {'default', 'fallback'}


# ------------------------------------------------------------------- paths ---


def test_get_by_path_follows_dots():
    d = {'a': {'b': {'c': 5}}, 'x': 1}
    assert get_by_path(d, 'a.b.c') == 5
    assert get_by_path(d, 'a.b') == {'c': 5}
    assert get_by_path(d, 'x') == 1


def test_get_by_path_unknown_key_lists_available_keys():
    d = {'a': {'b': 1, 'c': 2}}
    with pytest.raises(KeyError) as info:
        get_by_path(d, 'a.zzz')
    message = str(info.value)
    assert 'zzz' in message
    assert "'b'" in message and "'c'" in message


def test_get_by_path_through_a_leaf_raises_key_error():
    with pytest.raises(KeyError, match='deeper'):
        get_by_path({'a': 1}, 'a.deeper')


def test_get_by_path_works_on_buffer_views():
    inner = BufferView(['W', 'bias'], [np.zeros(2), np.ones(3)])
    root = BufferView(['L'], [BufferView(['parameters'], [inner])])
    assert get_by_path(root, 'L.parameters.bias').shape == (3,)
    with pytest.raises(KeyError, match='nope'):
        get_by_path(root, 'L.nope')


@pytest.mark.parametrize(
    'parts, expected',
    [
        (('L', 'outputs', '..parameters.W'), 'L.parameters.W'),
        (('L.outputs.default',), 'L.outputs.default'),
        (('a', 'b', 'c'), 'a.b.c'),
        (('a.b', 'c.d'), 'a.b.c.d'),
        (('a', 'b', '....c'), 'c'),
        (('a', 'b', '..', 'c'), 'a.c'),
        (('L', '..internals.Ha'), 'internals.Ha'),
        (('a', '', 'b'), 'a.b'),
    ],
)
def test_get_normalized_path(parts, expected):
    assert get_normalized_path(*parts) == expected


def test_flatten_keys():
    d = {'a': {'b': 1, 'c': {'d': 2}}, 'e': 3}
    assert flatten_keys(d) == {'a.b', 'a.c.d', 'e'}
    assert flatten_keys({}) == set()


# ------------------------------------------------------------------ shapes ---


def feature_slice(T, B, F, start, stop, *features):
    """A view like the time-sized buffers of a network: a feature slice of
    a (T, B, F) array, reshaped to (T, B, *features)."""
    base = np.arange(T * B * F, dtype=np.float64).reshape(T, B, F)
    view = base[:, :, start:stop]
    if features:
        view = reshape_view(view, (T, B) + features)
    return base, view


def test_flatten_time_gives_a_view_of_a_feature_slice():
    base, view = feature_slice(3, 2, 7, 2, 6, 2, 2)
    flat = flatten_time(view)
    assert flat.shape == (6, 2, 2)
    flat[...] = -1
    assert np.all(base[:, :, 2:6] == -1)
    assert np.all(base[:, :, :2] >= 0) and np.all(base[:, :, 6:] >= 0)


def test_flatten_time_and_features_gives_a_view():
    base, view = feature_slice(3, 2, 9, 1, 7, 2, 3)
    flat = flatten_time_and_features(view)
    assert flat.shape == (6, 6)
    np.testing.assert_array_equal(flat, base[:, :, 1:7].reshape(6, 6))
    flat[0, 0] = -5
    assert base[0, 0, 1] == -5


def test_flatten_features():
    a = np.zeros((2, 3, 4, 5))
    assert flatten_features(a).shape == (2, 3, 20)
    assert flatten_features(a, start_idx=1).shape == (2, 60)
    assert flatten_features(a, start_idx=3).shape == (2, 3, 4, 5)
    assert np.shares_memory(flatten_features(a), a)


def test_flatten_all_but_last():
    a = np.arange(24.0).reshape(2, 3, 4)
    flat = flatten_all_but_last(a)
    assert flat.shape == (6, 4)
    assert np.shares_memory(flat, a)
    _, view = feature_slice(3, 2, 8, 0, 5)
    assert flatten_all_but_last(view).shape == (6, 5)


def test_flatten_all_but_last_refuses_a_copy_with_several_feature_axes():
    base, view = feature_slice(3, 2, 9, 1, 7, 2, 3)
    with pytest.raises(ValueError, match='without copying'):
        flatten_all_but_last(view)


def test_reshape_view_refuses_to_copy():
    a = np.arange(24.0).reshape(4, 6)[:, 1:5]
    with pytest.raises(ValueError, match=r'\(4, 4\)'):
        reshape_view(a.T, (16,))
    with pytest.raises(ValueError):
        reshape_view(a, (16,))


def test_reshape_view_shares_memory():
    a = np.arange(12.0)
    r = reshape_view(a, (3, np.int64(4)))
    assert r.shape == (3, 4)
    r[1, 1] = 100
    assert a[5] == 100
    assert a.shape == (12,)


def test_reshape_view_wrong_size_raises_value_error():
    with pytest.raises(ValueError):
        reshape_view(np.zeros(12), (5, 2))


# -------------------------------------------------------------------- misc ---


def test_get_inheritors_is_transitive():
    class A:
        pass

    class B(A):
        pass

    class C(B):
        pass

    class D(A):
        pass

    assert get_inheritors(A) == {B, C, D}
    assert get_inheritors(C) == set()


def test_get_brainstorm_info():
    info = get_brainstorm_info()
    assert isinstance(info, bytes)
    assert info == b'Created with brainstorm 1.0.0'


def test_open_hdf5_reads_the_format_and_names_unreadable_files(tmp_path):
    import h5py

    from brainstorm.utils import NetworkValidationError, open_hdf5

    for kind, value in (('str', 'fmt-1'), ('bytes', np.bytes_(b'fmt-1'))):
        name = str(tmp_path / f'{kind}.h5')
        with h5py.File(name, 'w') as f:
            f.attrs['format'] = value
        f, fmt = open_hdf5(name, NetworkValidationError, 'network file')
        with f:
            assert fmt == b'fmt-1'
    (tmp_path / 'text.h5').write_text('not HDF5')
    with pytest.raises(
        NetworkValidationError,
        match=r"Cannot read network file '.*text\.h5': it is "
        'not an HDF5 file, or is damaged',
    ):
        open_hdf5(str(tmp_path / 'text.h5'), NetworkValidationError, 'network file')


# ------------------------------------------------------ write_atomically ---


def _write_text(text):
    def write(tmp):
        with open(tmp, 'w') as f:
            f.write(text)

    return write


def test_write_atomically_honours_the_umask_and_keeps_modes(tmp_path):
    import os
    import stat

    from brainstorm.utils import write_atomically

    old = os.umask(0o027)
    try:
        write_atomically(str(tmp_path / 'a.txt'), _write_text('a'))
        os.umask(0o002)
        write_atomically(str(tmp_path / 'b.txt'), _write_text('b'))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / 'a.txt').st_mode) == 0o640
    assert stat.S_IMODE(os.stat(tmp_path / 'b.txt').st_mode) == 0o664
    os.chmod(tmp_path / 'b.txt', 0o600)  # the user's choice stays
    write_atomically(str(tmp_path / 'b.txt'), _write_text('c'))
    assert stat.S_IMODE(os.stat(tmp_path / 'b.txt').st_mode) == 0o600
    assert (tmp_path / 'b.txt').read_text() == 'c'


def test_a_killed_write_leaves_a_temporary_the_next_write_removes(tmp_path):
    import os
    import subprocess
    import sys

    target = tmp_path / 'net.hdf5'
    code = (
        'import os, signal, sys\n'
        'from brainstorm.utils import write_atomically\n'
        'def write(tmp):\n'
        '    open(tmp, "w").write("half")\n'
        '    os.kill(os.getpid(), signal.SIGKILL)\n'
        'write_atomically(sys.argv[1], write)\n'
    )
    done = subprocess.run([sys.executable, '-c', code, str(target)], timeout=120)
    assert done.returncode == -9
    left = [p.name for p in tmp_path.iterdir()]
    assert len(left) == 1 and left[0].startswith('.net.hdf5.brainstorm-')
    # a temporary of a live process (this one's parent) is left alone
    alive = tmp_path / f'.net.hdf5.brainstorm-{os.getppid()}-0000.tmp'
    alive.write_text('busy')
    from brainstorm.utils import write_atomically

    write_atomically(str(target), _write_text('whole'))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [alive.name, 'net.hdf5']
    )
    assert target.read_text() == 'whole'


def test_writing_through_a_symlink_replaces_its_target(tmp_path):
    import os

    from brainstorm.utils import write_atomically

    (tmp_path / 'store').mkdir()
    real = tmp_path / 'store' / 'logs.csv'
    real.write_text('old')
    link = tmp_path / 'logs.csv'
    link.symlink_to(real)
    write_atomically(str(link), _write_text('new'))
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == 'new'
    assert sorted(os.listdir(tmp_path / 'store')) == ['logs.csv']


def test_write_atomically_syncs_the_file_and_its_folder(tmp_path, monkeypatch):
    import os
    import stat

    from brainstorm.utils import write_atomically

    synced = []
    real_fsync = os.fsync

    def fsync(fd):
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, 'fsync', fsync)
    write_atomically(str(tmp_path / 'x'), _write_text('x'))
    assert synced == [False, True]


class _ShapeIsReadOnly(np.ndarray):
    """An array on which setting ``shape`` fails, as NumPy 2.5 deprecates it
    (and the suite turns brainstorm's DeprecationWarnings into errors)."""

    @property
    def shape(self):
        return np.ndarray.shape.__get__(self)

    @shape.setter
    def shape(self, value):
        raise AssertionError(f'shape set to {value}: deprecated since NumPy 2.5')


_OLDER_RESHAPE = pytest.mark.skipif(
    not brainstorm.shapes._RESHAPE_TAKES_COPY,
    reason='NumPy < 2.1 has no reshape(copy=False): reshape_view sets the '
    'shape of a view there (deprecated only from NumPy 2.5)',
)


@_OLDER_RESHAPE
def test_reshape_view_does_not_set_the_shape_attribute():
    """(Guards against: every BufferManager failing on NumPy 2.5 with
    "Setting the shape on a NumPy array has been deprecated", first seen on
    the GPU machine, whose NumPy is newer than the one CI installs.)"""
    from brainstorm.utils import reshape_view

    flat = np.arange(12.0).view(_ShapeIsReadOnly)
    view = reshape_view(flat, (3, 4))
    assert view.shape == (3, 4) and np.shares_memory(view, flat)
    view[1, 2] = -1
    assert flat[6] == -1


@pytest.mark.parametrize(
    'takes_copy', [pytest.param(True, marks=_OLDER_RESHAPE), False]
)
def test_reshape_view_refuses_to_copy_on_every_numpy(monkeypatch, takes_copy):
    """Both ways (NumPy >= 2.1 and older) give views, and refuse a reshape
    that only a copy could do."""
    import brainstorm.shapes as shapes

    monkeypatch.setattr(shapes, '_RESHAPE_TAKES_COPY', takes_copy)
    flat = np.arange(24.0)
    with warnings.catch_warnings():
        # the older way is deprecated on NumPy 2.5, where it is never taken
        warnings.simplefilter('ignore', DeprecationWarning)
        view = shapes.reshape_view(flat, (2, 3, 4))
        assert np.shares_memory(view, flat) and view.shape == (2, 3, 4)
        with pytest.raises(ValueError, match='without copying'):
            shapes.reshape_view(view[:, :, :2], (12,))


def test_temporaries_of_writers_in_other_pid_namespaces_are_kept_while_fresh(tmp_path):
    """Two writers in different containers (PID namespaces) sharing a folder
    deleted each other's temporaries mid-write: the other's pid (1 in both,
    or one not found here) was taken for a dead process of this one, and
    the write failed with "No such file or directory". A temporary names
    its machine and namespace; others' are removed only when stale."""
    import os
    import time

    from brainstorm import files
    from brainstorm.utils import write_atomically

    target = tmp_path / 'net.hdf5'
    own = getattr(files, '_owner_token', lambda: 'eeeeeeee')()
    assert own != 'ffffffff'
    dead_pid = 2**22 + 12345  # beyond pid_max: no such process here
    # a live writer elsewhere: its pid is not found here
    fresh = tmp_path / f'.net.hdf5.brainstorm-{dead_pid + 1}-ffffffff-{"0" * 16}.tmp'
    stale = tmp_path / f'.net.hdf5.brainstorm-{dead_pid}-ffffffff-{"1" * 16}.tmp'
    own_dead = tmp_path / f'.net.hdf5.brainstorm-{dead_pid}-{own}-{"2" * 16}.tmp'
    for path in (fresh, stale, own_dead):
        path.write_text('busy')
    age = getattr(files, 'FOREIGN_TEMPORARY_AGE', 0) + 60
    os.utime(stale, (time.time() - age, time.time() - age))
    write_atomically(str(target), _write_text('whole'))
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [fresh.name, 'net.hdf5']
    )
    # this process's own temporary names its owner token
    seen = []
    write_atomically(
        str(target), lambda tmp: (seen.append(tmp), open(tmp, 'w').close())
    )
    assert f'-{own}-' in os.path.basename(seen[0])
