"""Every writer on a full disk, under a file-size limit and on a faulty disk.

The writers are run in fresh processes through the public API, the way the
operating system hits them: ``RLIMIT_FSIZE`` (with ``SIGXFSZ`` ignored, so
``write`` fails with ``EFBIG``) and a real full file system (a small tmpfs,
where the sandbox lets the test mount one). On a failed write the library
raises ``FileWriteError`` naming the file, the previous file is untouched
and still loads, no temporary file is left, and the process exits normally.
"""

import errno
import json
import os
import pathlib
import subprocess
import sys
import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.utils import FileWriteError, NetworkValidationError, write_atomically

ROOT = pathlib.Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith('linux'), reason='RLIMIT_FSIZE and tmpfs (Linux)'
)

# The child: writes a good file, then (under a limit, or on a full disk) a
# bigger one, and reports what happened as JSON on its last line.
CHILD = r"""
import hashlib, json, os, resource, signal, sys, warnings
import numpy as np
import brainstorm as bs
from brainstorm.data_iterators import Undivided
from brainstorm.utils import FileWriteError

kind, path, limit = sys.argv[1], sys.argv[2], int(sys.argv[3])
folder = os.path.dirname(path)


def net_of(hidden):
    inp, out = bs.tools.get_in_out_layers('classification', 50, 10)
    net = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(hidden, name='Hid') >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


def data(n):
    rnd = np.random.RandomState(0)
    return {'default': rnd.rand(1, n, 50),
            'targets': rnd.randint(0, 10, (1, n, 1)).astype(float)}


def train(net, hook, epochs=1):
    trainer = bs.Trainer(bs.training.SgdStepper(0.01), verbose=False)
    trainer.add_hook(bs.hooks.MonitorLoss('valid', name='validation'))
    trainer.add_hook(hook)
    trainer.add_hook(bs.hooks.StopAfterEpoch(epochs))
    trainer.train(net, Undivided(**data(20)), valid=Undivided(**data(20)))


def write(size):
    net = net_of(size)
    if kind == 'network':
        net.save_as_hdf5(path)
    elif kind == 'checkpoint':
        train(net, bs.hooks.SaveCheckpoint(path))
    elif kind == 'extract':
        bs.tools.extract_and_save(
            net, Undivided(**data(size)), 'Hid.outputs.default', path)
    elif kind == 'logs':
        train(net, bs.hooks.SaveLogs(path), epochs=1 if size < 50 else 30)
    elif kind == 'csv':
        train(net, bs.hooks.SaveLogsCSV(path), epochs=1 if size < 50 else 30)
    elif kind == 'plot':
        train(net, bs.hooks.SavePlot(path, ['validation.total_loss']),
              epochs=1 if size < 50 else 30)
    elif kind == 'dataset':  # the data scripts in data/
        import _common
        rnd = np.random.RandomState(size)
        _common.write_hdf5_atomically(
            path, lambda f: f.create_dataset('x', data=rnd.rand(size * 100),
                                              chunks=True, compression='gzip'))
    elif kind == 'dot':
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            bs.tools.draw_network(net, path[:-4] + '.png')
    else:
        raise SystemExit('unknown kind ' + kind)


def load():
    if kind == 'network':
        return bs.Network.from_hdf5(path).get('parameters').sum()
    if kind == 'checkpoint':
        return bs.Trainer.from_checkpoint(path)[1].get('parameters').sum()
    if kind in ('extract', 'logs', 'dataset'):
        import h5py
        with h5py.File(path, 'r') as f:
            return sorted(f)
    return len(open(path, 'rb').read())


def digest():
    with open(path, 'rb') as f:
        return hashlib.sha256(f.read()).hexdigest()


root = os.getcwd()
os.chdir(folder)
if kind == 'dataset':
    sys.path.insert(0, os.path.join(root, 'data'))
write(2)
good, before = digest(), load()
if limit > 0:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
else:  # fill the file system, leaving -limit bytes free
    fd = os.open(os.path.join(folder, 'filler'), os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(fd, b'\0' * 4096)
    except OSError:  # full; free a little, so a new file is cut off midway
        os.ftruncate(fd, max(0, os.fstat(fd).st_size + limit))
        os.close(fd)
result = {}
try:
    write(400)
    result['error'] = None
except FileWriteError as err:
    result.update(error='FileWriteError', message=str(err), errno=err.errno,
                  filename=err.filename, cause=type(err.__cause__).__name__)
except BaseException as err:
    result.update(error=type(err).__name__, message=str(err))
result['same'] = digest() == good
result['loads'] = str(load()) == str(before)
result['leftovers'] = [n for n in os.listdir(folder) if n.endswith('.tmp')]
print(json.dumps(result))
"""


def run_child(kind, path, limit, timeout=120):
    done = subprocess.run(
        [sys.executable, '-c', CHILD, kind, str(path), str(limit)],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, 'MPLBACKEND': 'Agg'},
    )
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    # no HDF5 error was swallowed and printed instead of raised
    assert 'Exception ignored' not in done.stderr, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


FILES = {
    'network': 'net.hdf5',
    'checkpoint': 'run.ckpt',
    'extract': 'outputs.hdf5',
    'logs': 'logs.hdf5',
    'csv': 'logs.csv',
    'plot': 'curves.png',
    'dot': 'net.dot',
    'dataset': 'MNIST.hdf5',
}
LIMITS = {
    'network': 40000,
    'checkpoint': 40000,
    'extract': 40000,
    'logs': 1500,
    'csv': 10,
    'plot': 3000,
    'dot': 40,
    'dataset': 40000,
}


def check_refused(result, filename, number):
    assert result['error'] == 'FileWriteError', result
    assert filename in result['message'] and result['filename'].endswith(filename)
    assert result['errno'] == number, result
    assert result['same'] and result['loads'], result
    assert result['leftovers'] == [], result


def needs(kind):
    if kind == 'plot':
        pytest.importorskip('matplotlib')


@pytest.mark.parametrize('kind', sorted(FILES))
def test_a_file_size_limit_keeps_the_previous_file(kind, tmp_path):
    needs(kind)
    result = run_child(kind, tmp_path / FILES[kind], LIMITS[kind])
    check_refused(result, FILES[kind], errno.EFBIG)


@pytest.fixture
def full_disk(tmp_path):
    """A 1 MiB tmpfs mounted in tmp_path (root, and a sandbox that allows it)."""
    folder = tmp_path / 'disk'
    folder.mkdir()
    if os.geteuid() != 0:
        pytest.skip('mounting a tmpfs needs root')
    done = subprocess.run(
        ['mount', '-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', str(folder)],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        pytest.skip(f'cannot mount a tmpfs here: {done.stderr.strip()}')
    try:
        yield folder
    finally:
        subprocess.run(['umount', str(folder)], check=True)


@pytest.mark.parametrize('kind', ['network', 'checkpoint', 'extract', 'csv', 'dataset'])
def test_a_full_disk_keeps_the_previous_file(kind, full_disk):
    # a text file is smaller than the space left for the others
    free = 0 if kind == 'csv' else 16384
    result = run_child(kind, full_disk / FILES[kind], -free)
    check_refused(result, FILES[kind], errno.ENOSPC)


# ------------------------------------------------------------ faulty disk --

FAULTY = r"""
import sys
import h5py
import numpy as np
import brainstorm as bs

real = h5py.Group.create_dataset


def damaged(self, name, *args, **kwargs):
    # a disk that loses part of what it is given: 3400 weights land as 0
    data = kwargs.get('data')
    if data is not None and np.asarray(data).dtype.kind == 'f':
        data = np.array(data)
        data.reshape(-1)[:3400] = 0
        kwargs['data'] = data
    return real(self, name, *args, **kwargs)


h5py.Group.create_dataset = damaged
kind, path = sys.argv[1], sys.argv[2]
inp, out = bs.tools.get_in_out_layers('classification', 50, 10)
net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(400, name='Hid') >> out)
net.initialize(bs.initializers.Gaussian(0.1), seed=1)
if kind == 'network':
    net.save_as_hdf5(path)
else:
    from brainstorm.data_iterators import Undivided
    data = {'default': np.ones((1, 4, 50)), 'targets': np.zeros((1, 4, 1))}
    trainer = bs.Trainer(bs.training.SgdStepper(0.01), verbose=False)
    trainer.add_hook(bs.hooks.SaveCheckpoint(path))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(net, Undivided(**data))
h5py.Group.create_dataset = real
try:
    if kind == 'network':
        bs.Network.from_hdf5(path)
    else:
        bs.Trainer.from_checkpoint(path)
except bs.utils.ValidationError as err:
    print('refused:', type(err).__name__, err)
else:
    print('accepted')
"""


@pytest.mark.parametrize('kind', ['network', 'checkpoint'])
def test_a_file_damaged_on_its_way_to_the_disk_is_refused(kind, tmp_path):
    path = tmp_path / 'damaged.hdf5'
    done = subprocess.run(
        [sys.executable, '-c', FAULTY, kind, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    line = done.stdout.strip().splitlines()[-1]
    assert line.startswith('refused:'), line
    assert 'damaged.hdf5' in line and 'checksum does not match' in line


# ---------------------------------------------------------------- threads --


def test_threads_writing_one_path_keep_each_others_temporaries(tmp_path):
    """Both threads are inside their write at once: neither loses its file."""
    target = tmp_path / 'shared.txt'
    both_inside = threading.Barrier(2, timeout=30)
    errors = []

    def writer(text):
        def write(tmp):
            with open(tmp, 'w') as f:
                both_inside.wait()  # the other thread has cleaned up by now
                f.write(text)

        try:
            write_atomically(target, write)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ('a' * 9, 'b' * 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    assert target.read_text() in ('a' * 9, 'b' * 9)
    assert sorted(os.listdir(tmp_path)) == ['shared.txt']


def test_threads_saving_one_network_to_one_path(tmp_path):
    path = tmp_path / 'net.hdf5'
    nets = []
    for seed in (1, 2, 3):
        inp, out = bs.tools.get_in_out_layers('classification', 20, 3)
        net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(30) >> out)
        net.initialize(bs.initializers.Gaussian(0.1), seed=seed)
        nets.append(net)
    errors = []

    def save(net):
        try:
            for _ in range(15):
                net.save_as_hdf5(path)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=save, args=(net,)) for net in nets]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert errors == []
    loaded = bs.Network.from_hdf5(path).get('parameters')
    assert any(np.array_equal(loaded, net.get('parameters')) for net in nets)
    assert sorted(os.listdir(tmp_path)) == ['net.hdf5']


# ------------------------------------------------------------ path names --


def small_net():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(4, name='Hid') >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


def test_every_writer_takes_a_pathlib_path(tmp_path, monkeypatch):
    from brainstorm.data_iterators import Undivided

    monkeypatch.chdir(tmp_path)
    data = {'default': np.ones((1, 4, 3)), 'targets': np.zeros((1, 4, 1))}
    net = small_net()
    net.save_as_hdf5(tmp_path / 'net.hdf5')
    assert np.array_equal(
        bs.Network.from_hdf5(tmp_path / 'net.hdf5').get('parameters'),
        net.get('parameters'),
    )
    bs.tools.extract_and_save(
        net, Undivided(**data), 'Hid.outputs.default', tmp_path / 'out.hdf5'
    )
    trainer = bs.Trainer(bs.training.SgdStepper(0.01), verbose=False)
    trainer.add_hook(bs.hooks.MonitorLoss('valid', name='validation'))
    trainer.add_hook(bs.hooks.SaveLogs(pathlib.Path('logs.hdf5')))
    trainer.add_hook(bs.hooks.SaveLogsCSV(pathlib.Path('logs.csv')))
    trainer.add_hook(bs.hooks.SaveNetwork(pathlib.Path('every.hdf5')))
    trainer.add_hook(
        bs.hooks.SaveBestNetwork(
            'validation.total_loss', pathlib.Path('best.hdf5'), criterion='min'
        )
    )
    trainer.add_hook(bs.hooks.SaveCheckpoint(pathlib.Path('run.ckpt')))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(net, Undivided(**data), valid=Undivided(**data))
    assert sorted(os.listdir(tmp_path)) == [
        'best.hdf5',
        'every.hdf5',
        'logs.csv',
        'logs.hdf5',
        'net.hdf5',
        'out.hdf5',
        'run.ckpt',
    ]
    # the stored hook file names are plain str, so the checkpoint resumes
    resumed, _ = bs.Trainer.from_checkpoint(pathlib.Path('run.ckpt'))
    assert resumed.hooks['SaveCheckpoint'].filename == 'run.ckpt'


@pytest.mark.parametrize('bad', [b'net.hdf5', '', 'a\0b', 5])
def test_a_bad_file_name_is_refused_naming_the_argument(bad):
    with pytest.raises(NetworkValidationError, match='filename'):
        small_net().save_as_hdf5(bad)


def test_a_writer_error_that_is_no_os_error_passes_unchanged(tmp_path):
    def write(tmp):
        raise KeyError('bug')

    with pytest.raises(KeyError, match='bug'):
        write_atomically(tmp_path / 'x', write)
    assert os.listdir(tmp_path) == []


def test_a_folder_that_does_not_exist_is_a_file_write_error(tmp_path):
    target = tmp_path / 'missing' / 'net.hdf5'
    with pytest.raises(FileWriteError, match='missing/net.hdf5') as info:
        small_net().save_as_hdf5(target)
    assert info.value.errno == errno.ENOENT
    assert info.value.filename == str(target)
    assert isinstance(info.value.__cause__, FileNotFoundError)


# ------------------------------------------------ hidden checkpoint folder --


def test_a_checkpoint_in_a_hidden_folder_resumes(tmp_path, monkeypatch):
    """docs/data_format.rst allows paths inside the checkpoint's own folder."""
    from brainstorm.data_iterators import Undivided

    monkeypatch.chdir(tmp_path)
    (tmp_path / '.runs').mkdir()
    data = {'default': np.ones((1, 4, 3)), 'targets': np.zeros((1, 4, 1))}
    trainer = bs.Trainer(bs.training.SgdStepper(0.01), verbose=False)
    trainer.add_hook(bs.hooks.SaveLogsCSV('.runs/logs.csv'))
    trainer.add_hook(bs.hooks.SaveCheckpoint('.runs/run.ckpt'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(small_net(), Undivided(**data))
    resumed, _ = bs.Trainer.from_checkpoint('.runs/run.ckpt')
    assert resumed.hooks['SaveLogsCSV'].filename == '.runs/logs.csv'


@pytest.mark.parametrize(
    'path, accepted',
    [
        ('.runs/logs.csv', True),  # inside the checkpoint's (hidden) folder
        ('.runs/sub/logs.csv', True),
        ('.runs/.cache/logs.csv', False),  # hidden below the checkpoint's folder
        ('.runs/sub/.x', False),
        ('.other/logs.csv', False),  # hidden below the working folder
        ('logs.csv', True),
        ('.runs', False),  # the checkpoint's folder itself is no file
        ('.runs/x.py', False),
    ],
)
def test_hidden_parts_count_below_the_innermost_allowed_folder(
    path, accepted, tmp_path, monkeypatch
):
    from brainstorm.training.checkpoint import check_restored_path

    monkeypatch.chdir(tmp_path)
    folders = [str(tmp_path / '.runs')]
    if accepted:
        check_restored_path('hook', path, folders)
    else:
        with pytest.raises(bs.utils.TrainingValidationError, match='refusing'):
            check_restored_path('hook', path, folders)


def test_a_hidden_checkpoint_folder_deeper_than_the_working_folder(
    tmp_path, monkeypatch
):
    from brainstorm.training.checkpoint import check_restored_path

    monkeypatch.chdir(tmp_path)
    deep = tmp_path / 'a' / '.runs'
    check_restored_path('hook', 'a/.runs/logs.csv', [str(deep)])
    with pytest.raises(bs.utils.TrainingValidationError, match='hidden'):
        check_restored_path('hook', 'a/.runs/logs.csv', [])


def small_network():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(4) >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


@pytest.mark.parametrize('kind', ['fifo', 'link to a fifo'])
def test_a_target_that_is_no_regular_file_is_refused_and_kept(kind, tmp_path):
    """Files are replaced by renaming a finished temporary file over them;
    over a FIFO or a device (as root: /dev/null) that rename replaced the
    node with a regular file. Such a target is refused, naming it."""
    fifo = tmp_path / 'pipe'
    os.mkfifo(fifo)
    target = fifo
    if kind == 'link to a fifo':
        target = tmp_path / 'link'
        target.symlink_to(fifo)
    with pytest.raises(FileWriteError, match='not a regular file') as info:
        small_network().save_as_hdf5(target)
    assert str(target) in str(info.value) and 'FIFO' in str(info.value)
    assert os.path.exists(fifo) and not os.path.isfile(fifo)
    assert sorted(os.listdir(tmp_path)) == sorted({'pipe', target.name})


def test_a_character_device_is_refused_before_anything_is_written(tmp_path):
    # /dev/null itself: refused before a temporary file is made next to it
    # (so this test writes nothing to /dev)
    before = set(os.listdir('/dev'))
    with pytest.raises(FileWriteError, match='character device'):
        write_atomically('/dev/null', lambda tmp: pytest.fail('was written'))
    assert set(os.listdir('/dev')) == before
    assert not os.path.isfile('/dev/null')


def test_reading_the_umask_leaves_it_alone_in_other_threads(tmp_path):
    """The umask of a new file was read by setting the process's umask and
    setting it back: a thread reading it meanwhile saw the temporary value,
    and two threads could leave it changed for good."""
    from brainstorm import files

    old, interval = os.umask(0o077), sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns between any two calls
    try:
        seen, stop = set(), threading.Event()

        def read():
            while not stop.is_set():
                seen.add(files._current_umask())

        workers = [threading.Thread(target=read) for _ in range(3)]
        for worker in workers:
            worker.start()
        for _ in range(2000):
            seen.add(files._current_umask())
        stop.set()
        for worker in workers:
            worker.join()
        assert seen == {0o077}
        assert os.umask(0o077) == 0o077  # left as it was
    finally:
        os.umask(old)
        sys.setswitchinterval(interval)


def test_the_umask_is_read_without_setting_it_where_linux_shows_it(monkeypatch):
    """On Linux the umask is read from /proc/self/status: setting it to
    read it, even briefly, shows other threads a wrong umask."""
    from brainstorm import files

    if not os.path.exists('/proc/self/status'):
        pytest.skip('no /proc/self/status on this system')
    old = os.umask(0o027)
    calls = []
    monkeypatch.setattr(os, 'umask', lambda mask: calls.append(mask) or 0)
    try:
        assert files._current_umask() == 0o027
    finally:
        monkeypatch.undo()
        os.umask(old)
    assert calls == []


def test_without_proc_the_umask_is_read_and_put_back(monkeypatch):
    from brainstorm import files

    def no_proc(*args, **kwargs):
        raise OSError('no /proc here')

    monkeypatch.setattr(files, 'open', no_proc, raising=False)
    old = os.umask(0o027)
    try:
        assert files._current_umask() == 0o027
        assert os.umask(0o027) == 0o027  # put back
    finally:
        os.umask(old)


@pytest.fixture
def python_sigint():
    """SIGINT raising KeyboardInterrupt, as in a script (test runners may
    handle it otherwise)."""
    import signal

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def interrupted_build(times):
    """A ``write_hdf5`` build that receives ``times`` SIGINTs midway."""
    import signal

    def build(writer):
        writer.dataset('before', np.arange(3.0))
        for _ in range(times):
            os.kill(os.getpid(), signal.SIGINT)
        writer.dataset('after', np.arange(4.0))

    return build


def test_ctrl_c_during_a_write_ends_it_first_then_interrupts(tmp_path, python_sigint):
    """A Ctrl-C that arrived while h5py ran one of its weakref callbacks
    was lost (CPython ignores exceptions there: 'Exception ignored in'),
    and training went on. During a write it now waits for the write to
    end, and is raised then."""
    import h5py

    from brainstorm.files import write_hdf5

    target = tmp_path / 'x.h5'
    with pytest.raises(KeyboardInterrupt):
        write_hdf5(target, interrupted_build(1))
    with h5py.File(target, 'r') as f:  # written whole before the interrupt
        assert sorted(f) == ['after', 'before']


def test_a_second_ctrl_c_interrupts_a_write_at_once(tmp_path, python_sigint):
    from brainstorm.files import write_hdf5

    target = tmp_path / 'x.h5'
    with pytest.raises(KeyboardInterrupt):
        write_hdf5(target, interrupted_build(2))
    assert os.listdir(tmp_path) == []  # nothing written, nothing left


def test_writes_in_other_threads_leave_the_signal_alone(tmp_path, python_sigint):
    import signal

    from brainstorm.files import write_hdf5

    seen = []

    def build(writer):
        seen.append(signal.getsignal(signal.SIGINT))
        writer.dataset('data', np.arange(3.0))

    worker = threading.Thread(target=write_hdf5, args=(tmp_path / 'x.h5', build))
    worker.start()
    worker.join()
    assert seen == [signal.default_int_handler]
    assert os.path.isfile(tmp_path / 'x.h5')


def test_ctrl_c_during_a_write_that_fails_is_raised_with_the_failure(
    tmp_path, python_sigint
):
    import signal

    from brainstorm.files import write_hdf5

    def build(writer):
        os.kill(os.getpid(), signal.SIGINT)
        raise ValueError('the build failed')

    with pytest.raises(KeyboardInterrupt) as info:
        write_hdf5(tmp_path / 'x.h5', build)
    assert isinstance(info.value.__cause__, ValueError)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_failed_write_without_ctrl_c_raises_its_error_and_frees_ctrl_c(
    tmp_path, python_sigint
):
    """The build's own error, not a KeyboardInterrupt; nothing written; and
    Ctrl-C interrupts again at once after it (it is no longer held)."""
    import signal

    from brainstorm.files import write_hdf5

    def build(writer):
        writer.dataset('data', np.arange(3.0))
        raise ValueError('the build failed')

    with pytest.raises(ValueError, match='the build failed'):
        write_hdf5(tmp_path / 'x.h5', build)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    assert os.listdir(tmp_path) == []


def test_a_write_gives_ctrl_c_back_to_python_when_it_ends(tmp_path, python_sigint):
    """Held during the write only: after it (interrupted or not), Ctrl-C
    interrupts at once again."""
    import signal

    from brainstorm.files import write_hdf5

    write_hdf5(tmp_path / 'x.h5', lambda writer: writer.dataset('d', np.arange(3.0)))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with pytest.raises(KeyboardInterrupt):
        write_hdf5(tmp_path / 'y.h5', interrupted_build(1))
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
