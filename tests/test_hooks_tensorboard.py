"""SaveLogsTensorBoard: the logs written in TensorBoard's event format,
read back with TensorBoard's own EventAccumulator."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from brainstorm.data_iterators import Undivided
from brainstorm.errors import TrainingValidationError
from brainstorm.hooks import (
    MonitorLoss,
    MonitorScores,
    SaveCheckpoint,
    SaveLogsTensorBoard,
    StopAfterEpoch,
)
from brainstorm.scorers import Accuracy
from brainstorm.training import SgdStepper, Trainer
from tests.training.nets import xor_data, xor_net

pytest.importorskip('tensorboardX')
event_accumulator = pytest.importorskip(
    'tensorboard.backend.event_processing.event_accumulator'
)


def read_events(log_dir):
    """tag -> [(step, value)] of the scalars, and the histograms' tags."""
    acc = event_accumulator.EventAccumulator(
        str(log_dir), size_guidance={'scalars': 0, 'histograms': 0}
    )
    acc.Reload()
    tags = acc.Tags()
    scalars = {
        tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in tags['scalars']
    }
    histograms = {tag: acc.Histograms(tag) for tag in tags['histograms']}
    return scalars, histograms


def _trainer(*hooks, epochs=3):
    trainer = Trainer(SgdStepper(0.5), verbose=False)
    trainer.train_scorers = [Accuracy()]
    trainer.add_hook(MonitorScores('valid', [Accuracy()], name='validation'))
    for hook in hooks:
        trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(epochs))
    return trainer


def _train(trainer, net=None):
    net = net or xor_net()
    trainer.train(net, Undivided(**xor_data()), valid=Undivided(**xor_data()))
    return net


def _as_float32(log):
    return [float(np.float32(v)) for v in log]


def test_scalars_are_the_logs_at_their_epochs(tmp_path):
    log_dir = tmp_path / 'run'
    trainer = _trainer(SaveLogsTensorBoard(log_dir))
    _train(trainer)
    scalars, histograms = read_events(log_dir)
    logs = trainer.logs
    assert set(scalars) >= {
        'validation/total_loss',
        'validation/Accuracy',
        'rolling_training/total_loss',
        'rolling_training/Accuracy',
    }
    assert histograms == {}
    for group, steps in (('validation', [0, 1, 2, 3]), ('rolling_training', [1, 2, 3])):
        for quantity in ('total_loss', 'Accuracy'):
            written = scalars[f'{group}/{quantity}']
            assert [s for s, _ in written] == steps
            assert [v for _, v in written] == _as_float32(logs[group][quantity])


def test_chosen_logs_and_parameter_histograms(tmp_path):
    log_dir = tmp_path / 'run'
    hook = SaveLogsTensorBoard(log_dir, 'validation.total_loss', histograms=True)
    trainer = _trainer(hook, epochs=2)
    net = _train(trainer)
    scalars, histograms = read_events(log_dir)
    assert list(scalars) == ['validation/total_loss']
    assert set(histograms) == {
        f'parameters/{layer}/{name}'
        for layer in ('Hid', 'Output_projection')
        for name in ('W', 'bias')
    }
    last = histograms['parameters/Hid/W']
    assert [h.step for h in last] == [0, 1, 2]
    values = net.get('Hid.parameters.W')
    summary = last[-1].histogram_value
    assert summary.num == values.size
    assert summary.min == pytest.approx(values.min())
    assert summary.max == pytest.approx(values.max())
    assert summary.sum == pytest.approx(values.sum())


def test_update_timescale_writes_at_the_updates(tmp_path):
    log_dir = tmp_path / 'run'
    trainer = Trainer(SgdStepper(0.5), verbose=False)
    trainer.add_hook(MonitorLoss('valid', name='validation', timescale='update'))
    trainer.add_hook(SaveLogsTensorBoard(log_dir, timescale='update', interval=2))
    trainer.add_hook(StopAfterEpoch(2))
    data = xor_data()
    halves = {k: np.concatenate([v, v], axis=1) for k, v in data.items()}
    from brainstorm.data_iterators import Minibatches

    trainer.train(
        xor_net(),
        Minibatches(4, shuffle=False, **halves),  # two updates per epoch
        valid=Undivided(**data),
    )
    scalars, _ = read_events(log_dir)
    written = scalars['validation/total_loss']
    assert [s for s, _ in written] == [0, 1, 2, 3, 4]
    assert [v for _, v in written] == _as_float32(
        trainer.logs['validation']['total_loss']
    )


def test_training_again_appends_without_duplicates(tmp_path):
    log_dir = tmp_path / 'run'
    hook = SaveLogsTensorBoard(log_dir, 'validation.total_loss')
    trainer = _trainer(hook, epochs=2)
    net = _train(trainer)
    trainer.hooks['StopAfterEpoch'].max_epochs = 4
    _train(trainer, net)
    scalars, _ = read_events(log_dir)
    written = scalars['validation/total_loss']
    assert [s for s, _ in written] == [0, 1, 2, 3, 4]
    assert [v for _, v in written] == _as_float32(
        trainer.logs['validation']['total_loss']
    )


def test_resumed_checkpoint_goes_on_without_duplicates(tmp_path, monkeypatch):
    """The checkpoint after epoch 2 is resumed after a run that went on to
    epoch 3: TensorBoard drops the old epoch 3 and each step is there once."""
    monkeypatch.chdir(tmp_path)
    trainer = _trainer(
        SaveLogsTensorBoard('run', 'validation.total_loss'),
        SaveCheckpoint('run.ckpt', interval=2),
        epochs=3,
    )
    _train(trainer)
    first = read_events('run')[0]['validation/total_loss']
    assert [s for s, _ in first] == [0, 1, 2, 3]
    resumed, net = Trainer.from_checkpoint('run.ckpt')
    resumed.hooks['StopAfterEpoch'].max_epochs = 4
    _train(resumed, net)
    written = read_events('run')[0]['validation/total_loss']
    assert [s for s, _ in written] == [0, 1, 2, 3, 4]
    assert [v for _, v in written] == _as_float32(
        resumed.logs['validation']['total_loss']
    )


def test_restored_log_dir_must_be_a_safe_path(tmp_path, monkeypatch):
    """A checkpoint's hook must not make training write anywhere: the
    event folder is checked like the file names of other hooks."""
    work = tmp_path / 'work'
    work.mkdir()
    monkeypatch.chdir(work)
    outside = str(tmp_path / 'outside')
    trainer = _trainer(
        SaveLogsTensorBoard(outside, 'validation.total_loss'),
        SaveCheckpoint('run.ckpt'),
        epochs=1,
    )
    _train(trainer)
    with pytest.raises(TrainingValidationError, match='refusing to write'):
        Trainer.from_checkpoint('run.ckpt')
    resumed, _ = Trainer.from_checkpoint('run.ckpt', trusted=True)
    assert resumed.hooks['SaveLogsTensorBoard'].log_dir == outside


def test_a_group_of_logs_is_refused_by_name(tmp_path):
    trainer = _trainer(SaveLogsTensorBoard(tmp_path / 'run', 'validation'))
    with pytest.raises(TrainingValidationError, match="'validation' is a group"):
        _train(trainer)


def test_bad_arguments_are_refused():
    with pytest.raises(TrainingValidationError, match='histograms'):
        SaveLogsTensorBoard('run', histograms='yes')
    with pytest.raises(TrainingValidationError, match='log_dir'):
        SaveLogsTensorBoard('')


USER_FLOW = textwrap.dedent(
    """
    import sys
    import numpy as np
    import brainstorm as bs

    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(4) >> out)
    net.initialize(bs.initializers.Gaussian(0.5))
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], float).reshape(1, 4, 2)
    t = np.array([0, 1, 1, 0]).reshape(1, 4, 1)
    trainer = bs.Trainer(bs.training.SgdStepper(0.5), verbose=False)
    trainer.add_hook(bs.hooks.MonitorLoss('valid', name='validation'))
    trainer.add_hook(bs.hooks.SaveLogsTensorBoard(sys.argv[1], histograms=True))
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    getter = bs.data_iterators.Undivided(default=x, targets=t)
    trainer.train(net, getter, valid=getter)
    print(list(trainer.logs['validation']['total_loss']))
    """
)


@pytest.mark.slow
def test_fresh_process_user_flow(tmp_path):
    log_dir = tmp_path / 'runs' / 'first'
    done = subprocess.run(
        [sys.executable, '-c', USER_FLOW, str(log_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    losses = [float(v) for v in done.stdout.strip()[1:-1].split(',')]
    assert os.listdir(log_dir)
    scalars, histograms = read_events(log_dir)
    written = scalars['validation/total_loss']
    assert [s for s, _ in written] == [0, 1, 2]
    assert [v for _, v in written] == _as_float32(losses)
    assert 'parameters/FullyConnected/W' in histograms


def test_fresh_process_without_tensorboardx_says_how_to_install(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        sys.modules['tensorboardX'] = None  # as if it were not installed
        import brainstorm as bs
        from tests.training.nets import xor_data, xor_net
        trainer = bs.Trainer(bs.training.SgdStepper(0.5), verbose=False)
        trainer.add_hook(bs.hooks.SaveLogsTensorBoard(sys.argv[1]))
        trainer.add_hook(bs.hooks.StopAfterEpoch(1))
        try:
            trainer.train(xor_net(), bs.data_iterators.Undivided(**xor_data()))
        except ImportError as err:
            print(err)
        print(bs.optional.has_tensorboardx)
        try:
            bs.optional.tensorboardx_mock.SummaryWriter
        except ImportError as err:
            print(err)
        """
    )
    done = subprocess.run(
        [sys.executable, '-c', code, str(tmp_path / 'run')],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert "SaveLogsTensorBoard 'SaveLogsTensorBoard' needs tensorboardX" in lines[0]
    assert "pip install 'brainstorm-nn[tensorboard]'" in lines[0]
    assert lines[1] == 'False'
    assert "Install it with pip install 'brainstorm-nn[tensorboard]'" in lines[2]
    assert not (tmp_path / 'run').exists()


# A run whose event file hits a file-size limit (RLIMIT_FSIZE with SIGXFSZ
# ignored, so a write fails with EFBIG, as on a full disk). It prints what
# train raised as JSON on its last line.
FILE_SIZE_LIMIT = textwrap.dedent(
    """
    import json, resource, signal, sys
    import brainstorm as bs
    from brainstorm.data_iterators import Undivided
    from tests.training.nets import xor_data, xor_net

    log_dir, limit = sys.argv[1], int(sys.argv[2])
    trainer = bs.Trainer(bs.training.SgdStepper(0.5), verbose=False)
    trainer.add_hook(bs.hooks.MonitorLoss('valid', name='validation'))
    trainer.add_hook(bs.hooks.SaveLogsTensorBoard(log_dir, histograms=True, name='tb'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(5000))
    import tensorboardX  # imported before the limit, like a running program
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    result = {'error': None}
    try:
        trainer.train(xor_net(), Undivided(**xor_data()), valid=Undivided(**xor_data()))
    except Exception as err:
        result = {
            'error': type(err).__name__,
            'is_os_error': isinstance(err, OSError),
            'message': str(err),
            'errno': getattr(err, 'errno', None),
            'filename': getattr(err, 'filename', None),
            'notes': getattr(err, '__notes__', []),
        }
    result['epoch'] = trainer.current_epoch_nr
    print(json.dumps(result))
    """
)


@pytest.mark.slow
@pytest.mark.skipif(
    not sys.platform.startswith('linux'), reason='RLIMIT_FSIZE semantics (Linux)'
)
@pytest.mark.parametrize(
    'limit, first_call',
    [(20000, True), (200000, False)],  # an epoch of histograms is ~38 kB
    ids=['at the first call', 'after some epochs'],
)
def test_a_file_size_limit_ends_training_with_an_error_not_a_hang(
    tmp_path, limit, first_call
):
    """The event file cannot grow: training ends with FileWriteError naming
    the folder and the system's error, with a note naming the hook, instead
    of waiting for ever on a writer thread that died; the process exits."""
    import errno
    import json

    log_dir = tmp_path / 'runs' / 'first'
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        done = subprocess.run(
            [sys.executable, '-c', FILE_SIZE_LIMIT, str(log_dir), str(limit)],
            capture_output=True,
            text=True,
            timeout=90,
            cwd=root,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f'training under a file-size limit hung for {err.timeout} s')
    assert done.returncode == 0, (done.returncode, done.stdout, done.stderr[-3000:])
    assert 'Exception in thread' not in done.stderr, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result['error'] == 'FileWriteError', result
    assert result['is_os_error'], result
    assert result['errno'] == errno.EFBIG, result
    assert str(log_dir) in result['message'], result
    assert os.strerror(errno.EFBIG) in result['message'], result
    assert os.path.dirname(result['filename']) == str(log_dir), result
    assert (result['epoch'] == 0) if first_call else (0 < result['epoch'] < 50), result
    notes = result['notes']
    assert any(
        "Raised in hook 'tb' (SaveLogsTensorBoard) during its epoch call" in note
        for note in notes
    ), notes
    # ending the hook after the failed write raises nothing more
    assert not any('also failed to end' in note for note in notes), notes
    # what was written before the limit reads back, from step 0 on
    scalars, _ = read_events(log_dir)
    steps = [s for s, _ in scalars.get('validation/total_loss', [])]
    assert steps == list(range(len(steps))), steps
    assert first_call or len(steps) >= 2, steps


def test_a_tensorboardx_without_a_part_it_writes_with_is_named(tmp_path, monkeypatch):
    """The hook writes with tensorboardX's RecordWriter and summary
    functions: a version without one is refused at the start, by name."""
    import tensorboardX

    monkeypatch.delattr(tensorboardX, 'RecordWriter')
    log_dir = tmp_path / 'run'
    trainer = _trainer(SaveLogsTensorBoard(log_dir, name='tb'), epochs=1)
    with pytest.raises(ImportError) as info:
        _train(trainer)
    message = str(info.value)
    assert message.startswith("SaveLogsTensorBoard 'tb': writes with tensorboardX's")
    assert 'RecordWriter' in message and tensorboardX.__version__ in message
    assert "pip install 'brainstorm-nn[tensorboard]'" in message
    assert trainer.current_epoch_nr == 0
    assert not log_dir.exists()


def test_a_call_after_a_failed_write_writes_again_what_that_call_lost(
    tmp_path, monkeypatch
):
    """A write that fails midway through a call loses the events of that
    call still in the file's buffer, also those of logs written before the
    failing one. They were counted as written, so the next call (a second
    train() after freeing space) never wrote them again."""
    import errno
    import io

    import tensorboardX.record_writer as record_writer

    from brainstorm.errors import FileWriteError

    space = {'left': 10**9}

    class Disk(io.RawIOBase):
        def __init__(self, path):
            self.file = open(path, 'wb', buffering=0)

        def writable(self):
            return True

        def write(self, data):
            if len(data) > space['left']:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            space['left'] -= len(data)
            return self.file.write(data)

        def fileno(self):
            return self.file.fileno()

        def close(self):
            self.file.close()
            super().close()

    monkeypatch.setattr(
        record_writer,
        'open_file',
        lambda path: io.BufferedWriter(Disk(path), buffer_size=8192),
    )
    hook = SaveLogsTensorBoard(str(tmp_path), name='tb')
    logs = {'a': [0.5, 0.4], 'b': [float(i) for i in range(400)]}
    space['left'] = 200  # the first events fit, then the disk is full
    with pytest.raises(FileWriteError):
        hook(1, None, None, None, logs)
    space['left'] = 10**9  # space freed
    logs['a'].append(0.3)
    logs['b'].append(1.0)
    hook(2, None, None, None, logs)
    hook.end()
    scalars, _ = read_events(str(tmp_path))
    assert [value for _, value in scalars['a']] == pytest.approx(logs['a'])
    assert len(scalars['b']) == len(logs['b'])


@pytest.mark.parametrize('log_names', [None, ('validation.total_loss',)])
def test_each_call_reads_only_the_new_entries_of_a_log(
    tmp_path, monkeypatch, log_names
):
    """Each call checked and copied the whole log before writing its new
    entries: at every update of a long run a call took 19 ms at 10 000
    entries and 850 ms at a million (the run's time grew with the square
    of its length). Now a call reads its new entries only."""
    from brainstorm.hooks import base, tensorboard
    from brainstorm.training.utils import add_log

    checked = []

    def counted(value):
        checked.append(value)
        return isinstance(value, float)

    monkeypatch.setattr(tensorboard, '_is_number', counted)
    monkeypatch.setattr(base, '_is_number', counted)
    names = () if log_names is None else log_names
    hook = SaveLogsTensorBoard(tmp_path / 'run', *names, timescale='update')
    hook.start(None, None, None, None)
    logs = {}
    for update in range(1, 201):
        add_log(logs, 'validation', {'total_loss': float(update)}, 0, update)
        hook(0, update, None, None, logs)
    assert len(checked) == 200  # each entry once (quadratic: 20 100)
    hook.end()
    scalars, _ = read_events(tmp_path / 'run')
    assert [s for s, _ in scalars['validation/total_loss']] == list(range(1, 201))
