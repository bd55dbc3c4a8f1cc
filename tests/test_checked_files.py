"""The rules of the file code at their edges: atomic writes, the cleanup of
stale temporary files, checksums of what was meant, and the checks a
reader makes before it allocates anything."""

import errno
import json
import os
import stat
import sys

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm import files
from brainstorm.errors import FileWriteError, NetworkValidationError
from brainstorm.files import (
    CHECKSUM_ATTRIBUTE,
    CheckedReader,
    CheckedWriter,
    write_atomically,
    write_hdf5,
)
from brainstorm.structure import network_io

linux_only = pytest.mark.skipif(
    not sys.platform.startswith('linux'), reason='reads /proc/self/fd'
)


def text_writer(text):
    def write(tmp):
        with open(tmp, 'w') as f:
            f.write(text)

    return write


# ------------------------------------------------------- write_atomically --


@linux_only
def test_the_data_is_synced_before_the_rename_and_the_folder_after(
    tmp_path, monkeypatch
):
    target = tmp_path / 'x.txt'
    target.write_text('old')
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        name = os.readlink(f'/proc/self/fd/{fd}')
        content = open(name).read() if os.path.isfile(name) else None
        events.append(('fsync', name, content))
        real_fsync(fd)

    def replace(src, dst):
        events.append(('replace', src, dst, target.read_text()))
        real_replace(src, dst)

    monkeypatch.setattr(os, 'fsync', fsync)
    monkeypatch.setattr(os, 'replace', replace)
    write_atomically(target, text_writer('new'))
    tmp = events[0][1]
    assert os.path.dirname(tmp) == str(tmp_path) and tmp != str(target)
    assert events == [
        ('fsync', tmp, 'new'),  # the whole new content, before the rename
        ('replace', tmp, str(target), 'old'),
        ('fsync', str(tmp_path), None),  # the rename made durable
    ]
    assert target.read_text() == 'new'


def test_a_failed_sync_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / 'x.txt'
    target.write_text('old')

    def fsync(fd):
        raise OSError(errno.EIO, 'Input/output error')

    monkeypatch.setattr(os, 'fsync', fsync)
    with pytest.raises(FileWriteError, match=r"x\.txt': Input/output error") as info:
        write_atomically(target, text_writer('new'))
    assert info.value.errno == errno.EIO
    assert target.read_text() == 'old'
    assert os.listdir(tmp_path) == ['x.txt']


def test_a_failed_rename_keeps_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    target = tmp_path / 'x.txt'
    target.write_text('old')

    def replace(src, dst):
        raise OSError(errno.EXDEV, 'Invalid cross-device link')

    monkeypatch.setattr(os, 'replace', replace)
    with pytest.raises(FileWriteError, match='cross-device'):
        write_atomically(target, text_writer('new'))
    assert target.read_text() == 'old'
    assert os.listdir(tmp_path) == ['x.txt']


def test_an_hdf5_runtime_error_becomes_a_file_write_error(tmp_path):
    def write(tmp):
        raise RuntimeError("Can't decrement id ref count")

    with pytest.raises(FileWriteError, match="x.h5': Can't decrement") as info:
        write_atomically(tmp_path / 'x.h5', write)
    assert info.value.errno is None
    assert isinstance(info.value.__cause__, RuntimeError)
    assert os.listdir(tmp_path) == []


def test_a_file_write_error_of_the_writer_is_raised_as_it_is(tmp_path):
    inner = FileWriteError(errno.ENOSPC, 'inner')

    def write(tmp):
        raise inner

    with pytest.raises(FileWriteError) as info:
        write_atomically(tmp_path / 'x', write)
    assert info.value is inner
    assert os.listdir(tmp_path) == []


def test_the_file_write_error_message_and_attributes():
    err = files._write_error('a/b.h5', OSError(errno.ENOSPC, 'No space left on device'))
    assert isinstance(err, OSError) and not isinstance(err, ValueError)
    assert str(err) == (
        "Cannot write 'a/b.h5': No space left on device (OSError). "
        'The file keeps its previous content.'
    )
    assert (err.errno, err.filename) == (errno.ENOSPC, 'a/b.h5')
    plain = files._write_error('c', OSError('no errno'))
    assert plain.errno is None and "'c': no errno (OSError)" in str(plain)


def test_an_existing_temporary_name_is_never_written_into(tmp_path, monkeypatch):
    import secrets

    monkeypatch.setattr(secrets, 'token_hex', lambda n: 'same')
    target = tmp_path / 'x'
    taken = tmp_path / f'.x.brainstorm-{os.getpid()}-{files._owner_token()}-same.tmp'
    taken.write_text('someone else')
    files._LIVE_TEMPORARIES.add(str(taken))  # live: the cleanup keeps it
    try:
        with pytest.raises(FileWriteError, match='File exists'):
            write_atomically(target, text_writer('new'))
    finally:
        files._LIVE_TEMPORARIES.discard(str(taken))
    assert taken.read_text() == 'someone else'
    assert sorted(os.listdir(tmp_path)) == [taken.name]


def test_the_live_temporary_is_registered_only_while_writing(tmp_path):
    seen = []

    def write(tmp):
        seen.append(tmp in files._LIVE_TEMPORARIES)
        open(tmp, 'w').close()

    write_atomically(tmp_path / 'x', write)
    assert seen == [True]
    assert not any(str(tmp_path) in name for name in files._LIVE_TEMPORARIES)

    def fail(tmp):
        raise OSError(errno.EIO, 'broken')

    with pytest.raises(FileWriteError):
        write_atomically(tmp_path / 'x', fail)
    assert not any(str(tmp_path) in name for name in files._LIVE_TEMPORARIES)


def test_a_new_file_gets_the_umask_and_a_replaced_file_keeps_its_mode(tmp_path):
    old = os.umask(0o077)
    try:
        write_atomically(tmp_path / 'new', text_writer('a'))
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / 'new').st_mode) == 0o600
    os.chmod(tmp_path / 'new', 0o751)
    write_atomically(tmp_path / 'new', text_writer('b'))
    assert stat.S_IMODE(os.stat(tmp_path / 'new').st_mode) == 0o751


@pytest.mark.parametrize('bad', [b'x', '', 'a\0b', 3, None])
def test_write_atomically_refuses_names_that_are_no_paths(bad, tmp_path):
    with pytest.raises(TypeError, match='write_atomically: a file name'):
        write_atomically(bad, text_writer('x'))


def test_as_file_name_raises_the_given_error_naming_the_owner():
    import pathlib

    assert files.as_file_name(pathlib.Path('a/b')) == 'a/b'
    with pytest.raises(NetworkValidationError, match=r"^owner: .*Received: b'x'$"):
        files.as_file_name(b'x', 'owner', NetworkValidationError)


# ------------------------------------------------------- stale temporaries --

PREFIX = '.x.brainstorm-'


def make_temporaries(folder, *pids):
    names = [f'{PREFIX}{pid}-abcd.tmp' for pid in pids]
    for name in names:
        (folder / name).write_text('t')
    return names


def fake_kill(outcome):
    def kill(pid, sig):
        assert sig == 0
        if outcome is not None:
            raise outcome(f'pid {pid}')

    return kill


@pytest.mark.parametrize(
    'outcome, removed',
    [
        (None, False),  # os.kill works: the process is alive
        (ProcessLookupError, True),  # no such process: its file is stale
        (PermissionError, False),  # alive, owned by another user
        (OSError, False),  # anything else: leave it
    ],
)
def test_a_temporary_of_another_process_is_removed_only_if_it_is_gone(
    outcome, removed, tmp_path, monkeypatch
):
    other = os.getpid() + 1
    (name,) = make_temporaries(tmp_path, other)
    monkeypatch.setattr(os, 'kill', fake_kill(outcome))
    files._remove_stale_temporaries(str(tmp_path), PREFIX)
    assert (tmp_path / name).exists() is not removed


def test_a_pid_beyond_any_process_is_left_alone(tmp_path):
    (name,) = make_temporaries(tmp_path, 10**30)
    files._remove_stale_temporaries(str(tmp_path), PREFIX)
    assert (tmp_path / name).exists()


def test_temporaries_of_this_process_are_kept_only_while_live(tmp_path):
    live, dead = f'{PREFIX}{os.getpid()}-live.tmp', f'{PREFIX}{os.getpid()}-dead.tmp'
    for name in (live, dead):
        (tmp_path / name).write_text('t')
    files._LIVE_TEMPORARIES.add(str(tmp_path / live))
    try:
        files._remove_stale_temporaries(str(tmp_path), PREFIX)
    finally:
        files._LIVE_TEMPORARIES.discard(str(tmp_path / live))
    assert sorted(os.listdir(tmp_path)) == [live]


@pytest.mark.parametrize(
    'name',
    [
        f'{PREFIX}1-abcd.tmpx',  # not a temporary
        f'{PREFIX}1-abcd.txt',
        '.y.brainstorm-1-abcd.tmp',  # another file's
        f'{PREFIX}x1-abcd.tmp',  # no pid
        f'{PREFIX}\u00b2-abcd.tmp',  # a digit that is no ASCII digit
        f'{PREFIX}-abcd.tmp',
        'x.brainstorm-1-abcd.tmp',
    ],
)
def test_files_that_are_no_stale_temporaries_are_kept(name, tmp_path, monkeypatch):
    monkeypatch.setattr(os, 'kill', fake_kill(ProcessLookupError))
    (tmp_path / name).write_text('t')
    files._remove_stale_temporaries(str(tmp_path), PREFIX)
    assert os.listdir(tmp_path) == [name]


def test_a_stale_temporary_is_found_by_the_next_write(tmp_path, monkeypatch):
    (name,) = make_temporaries(tmp_path, os.getpid() + 1)
    (tmp_path / 'x').write_text('old')
    monkeypatch.setattr(os, 'kill', fake_kill(ProcessLookupError))
    write_atomically(tmp_path / 'x', text_writer('new'))
    assert os.listdir(tmp_path) == ['x']


def test_a_missing_folder_is_no_error_for_the_cleanup(tmp_path):
    files._remove_stale_temporaries(str(tmp_path / 'missing'), PREFIX)


def test_a_temporary_that_cannot_be_removed_is_no_error(tmp_path, monkeypatch):
    (name,) = make_temporaries(tmp_path, os.getpid())

    def remove(path):
        raise PermissionError(path)

    monkeypatch.setattr(os, 'remove', remove)
    files._remove_stale_temporaries(str(tmp_path), PREFIX)
    assert os.listdir(tmp_path) == [name]


# ------------------------------------------------------- folder sync -------


def test_a_folder_that_cannot_be_synced_is_no_error(tmp_path, monkeypatch):
    closed = []
    real_close = os.close

    def fsync(fd):
        raise OSError(errno.EINVAL, 'not supported')

    def close(fd):
        closed.append(fd)
        real_close(fd)

    monkeypatch.setattr(os, 'fsync', fsync)
    monkeypatch.setattr(os, 'close', close)
    files._fsync_directory(str(tmp_path))
    assert len(closed) == 1  # the folder's descriptor is closed
    files._fsync_directory(str(tmp_path / 'missing'))
    assert len(closed) == 1


# ------------------------------------------------------ checksums meant ----


def test_the_writer_checksums_equal_the_readers_for_every_kind_of_value(tmp_path):
    values = {
        'str': 'näme',
        'bytes': np.bytes_(b'fmt'),
        'int': 7,
        'float': 0.25,
        'bool': True,
        'uint32': np.uint32(5),
        'array': np.arange(3, dtype=np.int16),
    }

    def build(writer):
        for key, value in values.items():
            writer.set_attribute('', key, value)
        writer.group('g')
        writer.group('g/h')
        writer.set_attribute('g/h', 'length', 2)
        writer.dataset('g/f4', np.arange(6, dtype=np.float32).reshape(2, 3))
        writer.dataset('g/scalar', np.float64(1.5))
        writer.dataset('g/empty', np.zeros((0, 2)))
        writer.dataset('g/be', np.arange(4, dtype='>f8'))
        writer.dataset('g/bool', np.array([True, False]))
        writer.dataset('zipped', np.arange(100.0), compression='gzip')
        writer.set_attribute('zipped', 'name', 'z')

    write_hdf5(tmp_path / 'x.h5', build)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader = CheckedReader(f, 'x.h5', NetworkValidationError, 'File')
        assert reader.checked
        objects = []
        f.visititems(lambda name, obj: objects.append((name, obj)))
        assert len(objects) == 8
        for name, obj in objects:
            assert CHECKSUM_ATTRIBUTE in obj.attrs
            if isinstance(obj, h5py.Group):
                reader.group(name)
            else:
                reader.array(name, shape=obj.shape)


def test_checksums_cover_what_was_meant_not_what_was_stored(tmp_path):
    def build(writer):
        writer.dataset('data', np.arange(10.0))
        writer.file['data'][3] = -1.0  # the bytes that reach the file differ

    write_hdf5(tmp_path / 'x.h5', build)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader = CheckedReader(f, 'x.h5', NetworkValidationError, 'File')
        with pytest.raises(NetworkValidationError, match="'data': its checksum"):
            reader.array('data')


def test_an_attribute_stored_differently_is_refused(tmp_path):
    def build(writer):
        writer.group('g')
        writer.set_attribute('g', 'name', 'meant')
        writer.file['g'].attrs['name'] = 'other'

    write_hdf5(tmp_path / 'x.h5', build)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader = CheckedReader(f, 'x.h5', NetworkValidationError, 'File')
        with pytest.raises(NetworkValidationError, match="'g': its checksum"):
            reader.group('g')


def test_a_member_added_behind_the_writers_back_is_refused(tmp_path):
    def build(writer):
        writer.group('g')
        writer.file['g'].create_group('extra')

    write_hdf5(tmp_path / 'x.h5', build)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        with pytest.raises(NetworkValidationError, match="'/': it has no checksum|'g'"):
            reader = CheckedReader(f, 'x.h5', NetworkValidationError, 'File')
            reader.group('g')


def test_without_checksums_nothing_gets_one(tmp_path):
    def build(writer):
        writer.set_attribute('', 'format', np.bytes_(b'x'))
        writer.dataset('d', [1, 2])

    write_hdf5(tmp_path / 'x.h5', build, checksums=False)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        assert CHECKSUM_ATTRIBUTE not in f.attrs
        assert CHECKSUM_ATTRIBUTE not in f['d'].attrs
        assert list(f['d'][()]) == [1, 2] and f.attrs['format'] == b'x'


@pytest.mark.parametrize(
    'step',
    [
        lambda w: w.group('missing/child'),  # parent first
        lambda w: w.dataset('missing/d', [1]),
        lambda w: (w.group('g'), w.group('g')),  # once
        lambda w: w.group(''),
        lambda w: w.group('g/'),
        lambda w: w.set_attribute('missing', 'a', 1),
        lambda w: w.set_attribute('', CHECKSUM_ATTRIBUTE, 'x'),
    ],
)
def test_the_writer_refuses_what_its_checksums_could_not_cover(step):
    writer = CheckedWriter()
    try:
        with pytest.raises(ValueError, match='CheckedWriter: cannot'):
            step(writer)
    finally:
        writer.close()


def test_a_failed_build_writes_nothing_and_closes_the_memory_file(tmp_path):
    writers = []

    def build(writer):
        writers.append(writer)
        writer.dataset('d', [1.0])
        raise KeyError('bug')

    (tmp_path / 'x.h5').write_text('old')
    with pytest.raises(KeyError):
        write_hdf5(tmp_path / 'x.h5', build)
    assert (tmp_path / 'x.h5').read_text() == 'old'
    assert os.listdir(tmp_path) == ['x.h5']
    assert not writers[0].file.id.valid


def test_the_memory_file_touches_no_disk(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    writer = CheckedWriter()
    writer.dataset('d', np.arange(5.0))
    image = writer.image()
    assert image[:8] == b'\x89HDF\r\n\x1a\n'
    assert os.listdir(tmp_path) == []
    writer.close()  # twice is harmless


def test_two_writers_at_once_do_not_clash():
    first, second = CheckedWriter(), CheckedWriter()
    first.dataset('d', [1])
    second.dataset('d', [2])
    assert first.image() != second.image()


# ---------------------------------------------------- sizes before reading --


def unchecked_file(path, build):
    with h5py.File(path, 'w') as f:
        build(f)


@pytest.mark.parametrize(
    'written, refused',
    [(1000, False), (999, True), (500, True), (0, True)],
)
def test_a_dataset_may_not_claim_more_bytes_than_the_file_stores(
    written, refused, tmp_path
):
    # 1000 float64 claim 8000 bytes; in chunks of 1 element only the written
    # ones are stored, so 500 written store 4000 bytes (> 1000 elements)
    def build(f):
        ds = f.create_dataset('d', shape=(1000,), dtype='f8', chunks=(1,))
        if written:
            ds[:written] = 1.0

    unchecked_file(tmp_path / 'x.h5', build)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader = CheckedReader(f, 'x.h5', NetworkValidationError, 'File')
        if refused:
            with pytest.raises(
                NetworkValidationError,
                match=f'claims 8000 bytes but the file stores only {written * 8}',
            ):
                reader.array('d')
        else:
            assert reader.array('d').sum() == 1000.0


def test_a_compressed_dataset_is_read_only_with_a_checked_shape(tmp_path):
    unchecked_file(
        tmp_path / 'x.h5',
        lambda f: f.create_dataset('z', data=np.zeros(1000), compression='gzip'),
    )
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader = CheckedReader(f, 'x.h5', NetworkValidationError, 'File')
        assert f['z'].id.get_storage_size() < 8000  # compressed
        with pytest.raises(NetworkValidationError, match='uncompressed'):
            reader.array('z')
        assert reader.array('z', shape=(1000,)).shape == (1000,)
        with pytest.raises(NetworkValidationError, match=r'expected shape \(999,\)'):
            reader.array('z', shape=(999,))


def spy_reads(monkeypatch):
    read = []
    real = CheckedReader.array

    def array(self, path, shape=None):
        read.append(path)
        return real(self, path, shape)

    monkeypatch.setattr(CheckedReader, 'array', array)
    return read


def network_file(path, parameters=None):
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(4) >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    params = net.get('parameters') if parameters is None else parameters
    network_io.write_network_file(path, bs.get_description(net), params)
    return net


@pytest.mark.parametrize('delta', [-1, 1])
def test_the_parameter_count_is_checked_before_the_parameters_are_read(
    delta, tmp_path, monkeypatch
):
    net = network_file(tmp_path / 'ok.h5')
    n = net.get('parameters').size  # 26
    network_file(tmp_path / 'bad.h5', np.zeros(n + delta))
    read = spy_reads(monkeypatch)
    with pytest.raises(
        NetworkValidationError,
        match=rf'holds \({n + delta},\) parameters, its architecture needs \({n},\)',
    ):
        bs.Network.from_hdf5(tmp_path / 'bad.h5')
    assert read == ['description']  # never the parameters
    read.clear()
    loaded = bs.Network.from_hdf5(tmp_path / 'ok.h5')
    assert read == ['description', 'parameters']
    assert np.array_equal(loaded.get('parameters'), net.get('parameters'))


def test_a_constant_buffer_at_its_limit_loads_and_beyond_is_refused():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    description = {
        '@type': 'Network',
        'architecture': bs.generate_architecture(
            inp >> bs.layers.FullyConnected(4) >> out
        ),
    }
    from brainstorm.structure.layout import constant_size, plan_network

    _, _, layout = plan_network(
        description['architecture'], bs.handlers.default_handler
    )
    n = int(layout['parameters']['@slice'][1] - layout['parameters']['@slice'][0])
    constant = constant_size(layout)
    limit = 3 * n + network_io._CONSTANT_ALLOWANCE
    assert constant <= limit
    network_io.check_stored_sizes(description, n, 'f', NetworkValidationError)
    old = network_io._CONSTANT_ALLOWANCE
    try:
        network_io._CONSTANT_ALLOWANCE = constant - 3 * n  # exactly at the limit
        network_io.check_stored_sizes(description, n, 'f', NetworkValidationError)
        network_io._CONSTANT_ALLOWANCE = constant - 3 * n - 1
        with pytest.raises(
            NetworkValidationError,
            match=rf'constant buffer of {constant} elements for {n} parameters '
            rf'\(at most {constant - 1} allowed\)',
        ):
            network_io.check_stored_sizes(description, n, 'f', NetworkValidationError)
    finally:
        network_io._CONSTANT_ALLOWANCE = old


def test_a_network_file_written_today_has_the_documented_layout(tmp_path):
    net = network_file(tmp_path / 'n.h5')
    network_io.write_network_file(
        tmp_path / 'c.h5', bs.get_description(net), net.get('parameters'), 'hi ü'
    )
    with h5py.File(tmp_path / 'c.h5', 'r') as f:
        assert f.attrs['format'] == network_io.NETWORK_FILE_FORMAT
        assert f.attrs['info'] == files.get_brainstorm_info()
        assert f.attrs['comment'] == 'hi ü'.encode()
        assert sorted(f) == ['description', 'parameters']
        assert f['parameters'].compression == 'gzip'
        assert f['description'].dtype == np.uint8
        assert json.loads(f['description'][()].tobytes()) == bs.get_description(net)
    with h5py.File(tmp_path / 'n.h5', 'r') as f:
        assert 'comment' not in f.attrs


def test_the_temporary_is_private_hidden_and_named_after_the_file(tmp_path):
    base = 'n' * 200 + '.hdf5'  # long names are cut to 180 characters
    seen = []

    def write(tmp):
        seen.append((os.path.basename(tmp), stat.S_IMODE(os.stat(tmp).st_mode)))
        open(tmp, 'w').close()

    old = os.umask(0)
    try:
        write_atomically(tmp_path / base, write)
    finally:
        os.umask(old)
    ((name, mode),) = seen
    assert mode == 0o600  # nobody else reads it while it is written
    # the pid, the owner's machine and PID namespace (8 hex digits), a
    # random token
    owner = files._owner_token()
    assert len(owner) == 8 and set(owner) <= set('0123456789abcdef')
    prefix = f'.{"n" * 180}.brainstorm-{os.getpid()}-{owner}-'
    assert name.startswith(prefix) and name.endswith('.tmp')
    token = name[len(prefix) : -len('.tmp')]
    assert len(token) == 16 and set(token) <= set('0123456789abcdef')
    assert stat.S_IMODE(os.stat(tmp_path / base).st_mode) == 0o666


# ------------------------------------------------- nothing left behind ----


def open_fds():
    return sorted(os.listdir('/proc/self/fd'))


@linux_only
def test_writing_leaves_no_descriptor_open_and_the_umask_as_it_was(tmp_path):
    old = os.umask(0o077)
    try:
        before = open_fds()
        write_atomically(tmp_path / 'x', text_writer('x'))
        write_hdf5(tmp_path / 'y.h5', lambda w: w.dataset('d', [1.0]))
        assert open_fds() == before
        assert os.umask(0o077) == 0o077  # reading the umask gave it back
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / 'x').st_mode) == 0o600


@linux_only
def test_a_file_with_damaged_attributes_is_closed_again(tmp_path, monkeypatch):
    unchecked_file(tmp_path / 'x.h5', lambda f: f.create_dataset('d', data=[1]))
    before = open_fds()

    def get(self, name, default=None):
        raise OSError('damaged attribute')

    monkeypatch.setattr(h5py.AttributeManager, 'get', get)
    with pytest.raises(NetworkValidationError, match='attributes are damaged') as info:
        files.open_hdf5(tmp_path / 'x.h5', NetworkValidationError, 'network file')
    # closed at once, not when the error (whose traceback holds it) is gone
    assert info.value.__traceback__ is not None
    assert open_fds() == before


# ------------------------------------------------------ digest definition --


def test_value_bytes_tell_every_kind_apart_exactly():
    vb = files._value_bytes
    assert vb('a') == b'str:a'
    assert vb('\udc80') == b'str:\xed\xb2\x80'  # lone surrogates pass
    assert vb(b'a') == b'bytes:a' and vb(np.bytes_(b'a')) == b'bytes:a'
    assert vb(np.array(['a', 1], dtype=object)) == b"object:['a', 1]"
    assert vb(np.int16(3)) == b'<i2():\x03\x00'
    assert vb(np.arange(2, dtype='>i2')) == b'>i2(2,):\x00\x00\x00\x01'
    transposed = np.arange(4, dtype=np.uint8).reshape(2, 2).T
    assert vb(transposed) == b'|u1(2, 2):\x00\x02\x01\x03'
    assert vb(7) == vb(np.int64(7)) and vb(0.5) == vb(np.float64(0.5))


def test_the_digest_is_defined_over_sorted_names_and_exact_bytes():
    import hashlib

    def sha(*parts):
        return hashlib.sha256(b''.join(parts)).hexdigest()

    group = files._digest_of(
        {'b': 'y', CHECKSUM_ATTRIBUTE: 'left out', 'a': np.int8(1)}, members=['n', 'm']
    )
    assert group == sha(
        b'attribute\0a\0',
        b'|i1():\x01',
        b'attribute\0b\0',
        b'str:y',
        b'member\0m\0',
        b'member\0n\0',
    )
    assert files._digest_of({}, members=[]) == sha()
    dataset = files._digest_of({'a': 'x'}, data=np.zeros(1, np.uint8))
    assert dataset == sha(b'attribute\0a\0', b'str:x', b'data\0', b'|u1(1,):\x00')
    assert files._digest_of({}, data=b'') == sha(b'data\0', b'bytes:')


def test_checksums_are_the_default(tmp_path):
    writer = CheckedWriter()
    writer.dataset('d', [1.0])
    (tmp_path / 'x.h5').write_bytes(writer.image())
    write_hdf5(tmp_path / 'y.h5', lambda w: w.dataset('d', [1.0]))
    for name in ('x.h5', 'y.h5'):
        with h5py.File(tmp_path / name, 'r') as f:
            assert CHECKSUM_ATTRIBUTE in f.attrs
            assert CHECKSUM_ATTRIBUTE in f['d'].attrs


# ------------------------------------------------------- reader's rules ----


def signed_file(path):
    def build(writer):
        writer.set_attribute('', 'format', np.bytes_(b'F'))
        writer.group('g')
        writer.dataset('g/d', np.arange(3.0))

    write_hdf5(path, build)


def reader_of(f):
    return CheckedReader(f, 'x.h5', NetworkValidationError, 'File')


@pytest.mark.parametrize(
    'edit',
    [
        lambda f: f.attrs.__setitem__('format', np.bytes_(b'G')),
        lambda f: f.attrs.__setitem__('extra', 1),
        lambda f: f.create_group('added'),
    ],
)
def test_the_root_is_verified_when_the_file_is_opened(edit, tmp_path):
    signed_file(tmp_path / 'x.h5')
    with h5py.File(tmp_path / 'x.h5', 'r+') as f:
        edit(f)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        with pytest.raises(NetworkValidationError, match="'/': its checksum does not"):
            reader_of(f)


@pytest.mark.parametrize(
    'value', [np.array([b'ab', b'cd']), 5, np.float64(1.0), np.array([1, 2])]
)
def test_a_malformed_checksum_is_refused(value, tmp_path):
    signed_file(tmp_path / 'x.h5')
    with h5py.File(tmp_path / 'x.h5', 'r+') as f:
        f['g'].attrs[CHECKSUM_ATTRIBUTE] = value
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        with pytest.raises(NetworkValidationError, match="'g': malformed checksum"):
            reader_of(f).group('g')


def test_a_checksum_stored_as_text_is_accepted(tmp_path):
    signed_file(tmp_path / 'x.h5')
    with h5py.File(tmp_path / 'x.h5', 'r+') as f:
        f['g'].attrs[CHECKSUM_ATTRIBUTE] = f['g'].attrs[CHECKSUM_ATTRIBUTE].decode()
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader_of(f).group('g')


@pytest.mark.parametrize(
    'link, name',
    [
        (lambda f: h5py.SoftLink('/g/d'), 'SoftLink'),
        (lambda f: h5py.ExternalLink('other.h5', '/g/d'), 'ExternalLink'),
    ],
)
def test_links_are_refused(link, name, tmp_path):
    signed_file(tmp_path / 'x.h5')
    with h5py.File(tmp_path / 'x.h5', 'r+') as f:
        f['g/link'] = link(f)
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader = CheckedReader(f, 'x.h5', NetworkValidationError, 'File')
        with pytest.raises(
            NetworkValidationError,
            match=f"'g/link': expected stored data. Received: {name}",
        ):
            reader.array('g/link')


def test_the_reader_names_what_it_expected(tmp_path):
    signed_file(tmp_path / 'x.h5')
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        reader = reader_of(f)
        with pytest.raises(NetworkValidationError, match="'g/d': expected a group"):
            reader.group('g/d')
        with pytest.raises(NetworkValidationError, match="'g': expected a dataset"):
            reader.array('g')
        with pytest.raises(NetworkValidationError, match="'nothing': expected a group"):
            reader.group('nothing')
        assert list(reader.array('g/d')) == [0.0, 1.0, 2.0]


def test_a_refused_step_leaves_the_writer_consistent(tmp_path):
    writer = CheckedWriter()
    for step in (
        lambda: writer.dataset('missing/d', [1]),
        lambda: writer.group('missing/g'),
    ):
        with pytest.raises(ValueError, match='CheckedWriter: cannot create'):
            step()
    writer.dataset('ok', [1])
    (tmp_path / 'x.h5').write_bytes(writer.image())
    assert not writer.file.id.valid  # image() closes the memory file
    with h5py.File(tmp_path / 'x.h5', 'r') as f:
        assert list(f) == ['ok']
        reader_of(f).array('ok')


@pytest.mark.parametrize(
    'value, expected',
    [
        (np.bytes_(b'F v1'), b'F v1'),
        ('F v1', b'F v1'),
        (np.int64(5), np.int64(5)),
        (None, None),
    ],
)
def test_open_hdf5_gives_the_format_as_bytes_and_anything_else_as_it_is(
    value, expected, tmp_path
):
    def build(f):
        if value is not None:
            f.attrs['format'] = value

    unchecked_file(tmp_path / 'x.h5', build)
    f, fmt = files.open_hdf5(tmp_path / 'x.h5', NetworkValidationError, 'file')
    f.close()
    assert fmt == expected and type(fmt) is type(expected)
