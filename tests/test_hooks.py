"""Every hook: its behaviour, its errors and its description."""

import io
import json
import os
import signal

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.hooks import (
    BokehVisualizer,
    EarlyStopper,
    Hook,
    InfoUpdater,
    ModifyStepperAttribute,
    MonitorLayerDeltas,
    MonitorLayerGradients,
    MonitorLayerInOuts,
    MonitorLayerParameters,
    MonitorLoss,
    MonitorScores,
    ProgressBar,
    ReduceOnPlateau,
    SaveBestNetwork,
    SaveCheckpoint,
    SaveLogs,
    SaveLogsCSV,
    SaveLogsTensorBoard,
    SaveNetwork,
    SavePlot,
    StopAfterEpoch,
    StopAfterThresholdReached,
    StopOnNan,
    StopOnSigQuit,
)
from brainstorm.scorers import Accuracy
from brainstorm.structure.network import Network
from brainstorm.tools import evaluate
from brainstorm.training import Trainer
from brainstorm.training.schedules import Linear
from brainstorm.training.steppers import (
    AdamStepper,
    MultiStepper,
    SgdStepper,
)
from brainstorm.utils import TrainingValidationError, UnknownNameError, ValidationError
from tests.training.nets import roundtrip, xor_data, xor_net


def call(
    hook,
    logs=None,
    epoch_nr=1,
    update_nr=1,
    net=None,
    stepper=None,
    named=None,
    start=True,
):
    """Start (optionally) and call a hook once."""
    net = net if net is not None else xor_net()
    stepper = stepper if stepper is not None else SgdStepper()
    if start:
        hook.start(net, stepper, False, named or {})
    return hook(
        epoch_nr=epoch_nr,
        update_nr=update_nr,
        net=net,
        stepper=stepper,
        logs={} if logs is None else logs,
    )


def passes(net):
    net.provide_external_data(xor_data())
    net.forward_pass(training_pass=True)
    net.backward_pass()
    return net


# ------------------------------------------------------------------- base ---


def test_base_hook_arguments():
    hook = Hook()
    assert (hook.__name__, hook.timescale, hook.interval, hook.priority) == (
        'Hook',
        'epoch',
        1,
        0,
    )
    with pytest.raises(TrainingValidationError, match='timescale'):
        Hook(timescale='week')
    with pytest.raises(TrainingValidationError, match='interval'):
        Hook(interval=0)
    with pytest.raises(NotImplementedError):
        call(Hook())


def test_verbosity_follows_hook_then_trainer(capsys):
    quiet_hook = Hook(name='h', verbose=False)
    quiet_hook.start(None, None, True, {})
    quiet_hook.message('hidden')
    loud = Hook(name='h')
    loud.start(None, None, True, {})
    loud.message('shown')
    assert capsys.readouterr().out == 'h >> shown\n'
    loud.start(None, None, False, {})
    assert loud.run_verbosity is False


# ----------------------------------------------------------------- saving ---


def test_save_best_network_in_memory():
    net = xor_net()
    hook = SaveBestNetwork('val.loss', criterion='min')
    assert call(hook, {'val': {'loss': [1.0]}}, net=net) is None
    first = net.get('parameters')
    np.testing.assert_array_equal(hook.load_best_network(), first)
    net.handler.set_from_numpy(net.buffer.parameters, first + 1)
    call(hook, {'val': {'loss': [1.0, 1.0]}}, net=net)  # not strictly better
    np.testing.assert_array_equal(hook.parameters, first)
    call(hook, {'val': {'loss': [1.0, 1.0, 0.5]}}, net=net)
    np.testing.assert_array_equal(hook.parameters, first + 1)
    assert hook.get_state()['parameters'] is hook.parameters


def test_save_best_network_to_file(tmp_path):
    filename = str(tmp_path / 'best.hdf5')
    net = xor_net()
    hook = SaveBestNetwork('acc', filename=filename)
    call(hook, {'acc': [0.5]}, net=net)
    assert os.path.exists(filename)
    os.remove(filename)
    call(hook, {'acc': [0.5, 0.4]}, net=net)
    assert not os.path.exists(filename)
    call(hook, {'acc': [0.5, 0.4, 0.9]}, net=net)
    best = hook.load_best_network()
    assert isinstance(best, Network)
    np.testing.assert_array_equal(best.get('parameters'), net.get('parameters'))


def _best_network_run(monitor_interval, save_first=False, epochs=4, timescale='epoch'):
    """A run whose validation gets worse after epoch 2 (the learning rate
    jumps); returns the validation log, the kept parameters and the
    parameters after each epoch."""
    bs.global_rnd.set_seed(1)
    rnd = np.random.RandomState(0)
    x = rnd.randn(1, 40, 4)
    y = x.argmax(2)[:, :, None].astype(float)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 4)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(bs.training.SgdStepper(0.5), verbose=False)
    trainer.add_hook(
        bs.hooks.ModifyStepperAttribute(
            bs.training.schedules.MultiStep(0.5, [2], [200.0])
        )
    )
    monitor = bs.hooks.MonitorLoss(
        'valid', name='validation', interval=monitor_interval, timescale=timescale
    )
    saver = SaveBestNetwork(
        'validation.total_loss', criterion='min', timescale=timescale
    )
    snapshots = {}

    class Snapshot(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            snapshots[epoch_nr] = net.get('parameters')

    for hook in [saver, monitor] if save_first else [monitor, saver]:
        trainer.add_hook(hook)
    trainer.add_hook(Snapshot(name='snapshot'))
    trainer.add_hook(StopAfterEpoch(epochs))
    data = {'default': x, 'targets': y}
    trainer.train(
        net,
        Minibatches(10, shuffle=False, **data),
        valid=Minibatches(10, shuffle=False, **data),
    )
    return trainer.logs['validation']['total_loss'], saver.parameters, snapshots


def test_save_best_network_keeps_the_network_that_reached_the_best_value():
    """Validated every 2 epochs and judged every epoch, the hook judged the
    same (best) entry again at the odd epochs and kept those networks,
    which were never evaluated (here 4x worse than the best)."""
    log, kept, snapshots = _best_network_run(monitor_interval=2)
    assert list(log.epochs) == [0, 2, 4]
    best_epoch = log.epochs[int(np.argmin(log))]
    assert best_epoch == 2  # the run got worse after it
    np.testing.assert_array_equal(kept, snapshots[best_epoch])


@pytest.mark.parametrize('timescale', ['epoch', 'update'])
def test_save_best_network_run_before_its_monitor_is_refused(timescale):
    """Run before the monitor at the same count, it judged the previous
    count's entry and kept the network of this count (never evaluated)."""
    with pytest.raises(TrainingValidationError, match='after the hook that'):
        _best_network_run(monitor_interval=1, save_first=True, timescale=timescale)


def test_a_save_best_network_made_from_its_description_judges_the_first_entry():
    hook = bs.create_from_description(
        bs.get_description(SaveBestNetwork('val.loss', criterion='min'))
    )
    net = xor_net()
    call(hook, {'val': {'loss': [1.0]}}, net=net)
    np.testing.assert_array_equal(hook.load_best_network(), net.get('parameters'))


def test_save_best_network_missing_log():
    hook = SaveBestNetwork('validation.Accuracy')
    assert call(hook, {'other': [1]}, epoch_nr=0) is None
    with pytest.raises(UnknownNameError, match=r"'validation.Accuracy'.*\['other'\]"):
        call(hook, {'other': [1]}, epoch_nr=1)
    with pytest.raises(TrainingValidationError, match='criterion'):
        SaveBestNetwork('x', criterion='best')


def test_save_logs(tmp_path):
    filename = str(tmp_path / 'logs.hdf5')
    logs = {'rolling_training': {'total_loss': [3.0, 2.0]}, 'acc': [0.5]}
    call(SaveLogs(filename), logs)
    with h5py.File(filename, 'r') as f:
        assert f.attrs['format'] == b'Logs file v1.0'
        assert f.attrs['info'].startswith(b'Created with brainstorm')
        assert f['rolling_training/total_loss'][()].tolist() == [3.0, 2.0]
        assert f['acc'][()].tolist() == [0.5]
    logs['acc'].append(0.7)
    call(SaveLogs(filename), logs)
    with h5py.File(filename, 'r') as f:
        assert f['acc'][()].tolist() == [0.5, 0.7]


def test_save_network(tmp_path):
    filename = str(tmp_path / 'net.hdf5')
    net = xor_net()
    hook = SaveNetwork(filename)
    call(hook, net=net)
    loaded = hook.load_network()
    np.testing.assert_array_equal(loaded.get('parameters'), net.get('parameters'))


def test_save_logs_csv(tmp_path):
    filename = str(tmp_path / 'logs.csv')
    logs = {
        'validation': {'loss': [1.0, 0.5], 'acc': [0.1, 0.2]},
        'rolling_training': {'total_loss': [0.75]},
    }
    call(SaveLogsCSV(filename), logs)
    lines = open(filename).read().splitlines()
    # plain lists (logs made by hand) count their entries as epochs 0, 1...
    assert lines == [
        'epoch,update,validation.loss,validation.acc,rolling_training.total_loss',
        '0,,1.0,0.1,0.75',
        '1,,0.5,0.2,',
    ]
    call(SaveLogsCSV(filename, log_names='validation.acc'), logs)
    assert open(filename).read().splitlines() == [
        'epoch,update,validation.acc',
        '0,,0.1',
        '1,,0.2',
    ]
    with pytest.raises(UnknownNameError, match="'validation.los'"):
        call(SaveLogsCSV(filename, ['validation.los']), logs, epoch_nr=2)


def test_save_plot(tmp_path):
    pytest.importorskip('matplotlib')
    filename = str(tmp_path / 'plot.png')
    logs = {'validation': {'loss': [1.0, 0.5, 0.4]}}
    call(SavePlot(filename, ['validation.loss']), logs)
    with open(filename, 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    with pytest.raises(TrainingValidationError, match='log_names'):
        SavePlot(filename, [])


def test_save_checkpoint_arguments():
    hook = SaveCheckpoint('run.ckpt', timescale='update', interval=10)
    assert call(hook) is None  # the trainer writes the file
    with pytest.raises(TrainingValidationError, match='filename'):
        SaveCheckpoint('')


# ------------------------------------------------------------- monitoring ---


def test_monitor_loss_and_scores():
    net = xor_net()
    data = Undivided(**xor_data())
    loss = call(MonitorLoss('xor'), net=net, named={'xor': data})
    assert loss == evaluate(net, data)
    scores = call(MonitorScores('xor', [Accuracy()]), net=net, named={'xor': data})
    assert list(scores) == ['total_loss', 'Accuracy']
    assert scores == evaluate(net, data, [Accuracy()])
    with pytest.raises(KeyError, match=r"no data iterator named 'valid'"):
        call(MonitorLoss('valid'), named={'xor': data})


def test_monitor_layer_parameters():
    net = xor_net()
    hook = MonitorLayerParameters('Hid')
    assert hook.__name__ == 'MonitorParameters_Hid'
    result = call(hook, net=net)
    W = net.get('Hid.parameters.W')
    norms = np.sqrt((W**2).sum(axis=1))
    assert result['W'] == pytest.approx(
        {
            'min': W.min(),
            'avg': W.mean(),
            'max': W.max(),
            'min_L2_norm': norms.min(),
            'avg_L2_norm': norms.mean(),
            'max_L2_norm': norms.max(),
        }
    )
    bias = net.get('Hid.parameters.bias')
    assert result['bias'] == pytest.approx(
        {'min': bias.min(), 'avg': bias.mean(), 'max': bias.max()}
    )
    with pytest.raises(UnknownNameError, match="no layer 'Hidden'"):
        call(MonitorLayerParameters('Hidden'), net=net)


def test_monitor_layer_gradients():
    net = passes(xor_net())
    hook = MonitorLayerGradients('Hid')
    assert hook.__name__ == 'MonitorGradients_Hid'
    result = call(hook, net=net)
    dW = net.get('Hid.gradients.W')
    assert result['W'] == pytest.approx(
        {'min': dW.min(), 'avg': dW.mean(), 'max': dW.max()}
    )
    assert set(result) == {'W', 'bias'}


def test_monitor_layer_in_outs():
    net = passes(xor_net())
    hook = MonitorLayerInOuts('Hid')
    assert hook.__name__ == 'MonitorInOuts_Hid'
    result = call(hook, net=net)
    y = net.get('Hid.outputs.default')
    assert result['outputs']['default'] == pytest.approx(
        {'min': y.min(), 'avg': y.mean(), 'max': y.max()}
    )
    assert result['inputs']['default']['max'] == 1.0


def test_monitor_layer_deltas_includes_input_deltas():
    """0.5 Note: the input part raised KeyError."""
    net = passes(xor_net())
    hook = MonitorLayerDeltas('Output_projection', name='deltas')
    result = call(hook, net=net)
    assert set(result) == {'internals', 'output_deltas', 'input_deltas'}
    dx = net.get('Output_projection.input_deltas.default')
    assert np.abs(dx).max() > 0
    assert result['input_deltas']['default'] == pytest.approx(
        {'min': dx.min(), 'avg': dx.mean(), 'max': dx.max()}
    )
    dy = net.get('Output_projection.output_deltas.default')
    assert result['output_deltas']['default']['max'] == pytest.approx(dy.max())


# --------------------------------------------------------------- stopping ---


def test_early_stopper():
    hook = EarlyStopper('loss', patience=2)
    assert call(hook, {'loss': [3, 2, 2.5]}) is None
    with pytest.raises(StopIteration):
        call(hook, {'loss': [3, 2, 2.5, 2.1]})
    maximiser = EarlyStopper('acc', patience=1, criterion='max')
    assert call(maximiser, {'acc': [0.1, 0.5]}) is None
    with pytest.raises(StopIteration):
        call(maximiser, {'acc': [0.1, 0.5, 0.5]})
    assert call(hook, {}, epoch_nr=0) is None
    with pytest.raises(UnknownNameError, match="'loss'"):
        call(hook, {'los': [1]}, epoch_nr=1)
    with pytest.raises(ValueError, match='criterion'):
        EarlyStopper('loss', criterion='lowest')


def test_stop_after_epoch():
    hook = StopAfterEpoch(3)
    assert call(hook, epoch_nr=2) is None
    with pytest.raises(StopIteration):
        call(hook, epoch_nr=3)
    with pytest.raises(TrainingValidationError, match='max_epochs'):
        StopAfterEpoch(-1)


def test_stop_after_threshold_reached():
    """0.5 Note: no guard at epoch 0, where the log may not exist yet."""
    hook = StopAfterThresholdReached('validation.loss', 0.1)
    assert call(hook, {}, epoch_nr=0) is None
    assert call(hook, {'validation': {'loss': [0.5, 0.2]}}) is None
    with pytest.raises(StopIteration):
        call(hook, {'validation': {'loss': [0.5, 0.1]}})
    maximiser = StopAfterThresholdReached('acc', 0.9, criterion='max')
    assert call(maximiser, {'acc': [0.5]}) is None
    with pytest.raises(StopIteration):
        call(maximiser, {'acc': [0.5, 0.95]})
    with pytest.raises(UnknownNameError):
        call(hook, {}, epoch_nr=1)


def test_stop_on_nan():
    net = xor_net()
    hook = StopOnNan(logs_to_check='validation.loss')
    logs = {'validation': {'loss': [1.0]}, 'rolling_training': {'total_loss': [1.0]}}
    assert call(hook, logs, net=net) is None
    logs['validation']['loss'].append(float('nan'))
    with pytest.raises(StopIteration):
        call(hook, logs, net=net)
    logs = {'rolling_training': {'total_loss': [float('inf')]}}
    with pytest.raises(StopIteration):
        call(StopOnNan(), logs, net=net)
    assert call(StopOnNan(check_training_loss=False), logs, net=net) is None
    params = net.get('parameters')
    params[0] = np.nan
    net.handler.set_from_numpy(net.buffer.parameters, params)
    with pytest.raises(StopIteration):
        call(StopOnNan(), {}, net=net)
    assert call(StopOnNan(check_parameters=False), {}, net=net) is None


def test_stop_on_nan_at_update_timescale_checks_the_batch_loss():
    net = passes(xor_net())
    hook = StopOnNan(timescale='update')
    assert call(hook, {}, net=net) is None
    net.get_loss_values = lambda: {'total_loss': float('nan')}
    with pytest.raises(StopIteration):
        call(hook, {}, net=net)


@pytest.mark.skipif(not hasattr(signal, 'SIGQUIT'), reason='no SIGQUIT')
def test_stop_on_sigquit():
    previous = signal.getsignal(signal.SIGQUIT)
    try:
        hook = StopOnSigQuit()
        assert call(hook) is None
        os.kill(os.getpid(), signal.SIGQUIT)
        with pytest.raises(StopIteration):
            call(hook, start=False)
        assert call(hook, start=False) is None
    finally:
        signal.signal(signal.SIGQUIT, previous)


# --------------------------------------------------------------- progress ---


def train_with_progress_bar(bar, epochs=2):
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(bar)
    trainer.add_hook(StopAfterEpoch(epochs))
    trainer.train(xor_net(), Minibatches(2, **xor_data()))


def test_progress_bar_draws_each_epoch_with_running_loss():
    stream = io.StringIO()
    train_with_progress_bar(ProgressBar(file=stream, force=True))
    text = stream.getvalue()
    assert 'Epoch 1' in text and 'Epoch 2' in text
    assert '2/2' in text and 'loss=' in text


def test_progress_bar_is_quiet_when_not_a_terminal():
    stream = io.StringIO()
    train_with_progress_bar(ProgressBar(file=stream))
    assert stream.getvalue() == ''


def test_progress_bar_needs_iterator_length():
    with pytest.raises(TrainingValidationError, match='length'):
        ProgressBar().start(None, None, True, {'training_data_iter': object()})


# -------------------------------------------------------- stepper changes ---


def test_modify_stepper_attribute():
    stepper = SgdStepper(1.0)
    hook = ModifyStepperAttribute(Linear(1.0, 0.0, 4))
    call(hook, epoch_nr=1, stepper=stepper)
    assert stepper.learning_rate == 0.75
    with pytest.raises(KeyError, match="no attribute 'momentum'"):
        call(ModifyStepperAttribute(Linear(1.0, 0.0, 4), 'momentum'), stepper=stepper)
    with pytest.raises(TrainingValidationError, match='callable'):
        ModifyStepperAttribute(0.1)


def test_modify_stepper_attribute_inside_multi_stepper():
    adam = AdamStepper(0.1)
    stepper = MultiStepper({'Hid': adam, 'default': SgdStepper(0.5)})
    hook = ModifyStepperAttribute(
        Linear(1.0, 0.0, 4), 'steppers.Hid.learning_rate', timescale='update'
    )
    call(hook, update_nr=2, stepper=stepper)
    assert adam.learning_rate == 0.5
    with pytest.raises(KeyError, match="'Conv' not found"):
        call(
            ModifyStepperAttribute(Linear(1.0, 0.0, 4), 'steppers.Conv.learning_rate'),
            stepper=stepper,
        )


@pytest.mark.parametrize(
    'attr_name',
    [
        '__class__',
        '__dict__',
        '_parts',
        'net',
        'run',
        'get_state',
        '__class__.__init__.__globals__.sys.path',
        'net.handler.dtype',
        'steppers.Hid.__class__',
        'steppers.Hid._parts',
        'steppers',
        'steppers.Hid.net.rnd',
        'steppers.__class__.learning_rate',
        'assignment.Hid',
        'steppers.Hid.steppers.learning_rate',
    ],
)
def test_stepper_attribute_paths_reach_only_hyperparameters(attr_name):
    adam = AdamStepper(0.1)
    stepper = MultiStepper({'Hid': adam, 'default': SgdStepper(0.5)})
    before = {k: v for k, v in vars(adam).items()}
    hook = ModifyStepperAttribute(Linear(1.0, 0.0, 4), attr_name)
    with pytest.raises(TrainingValidationError, match='attr_name|has no'):
        call(hook, stepper=stepper)
    plateau = ReduceOnPlateau('loss', attr_name=attr_name, patience=0)
    with pytest.raises(TrainingValidationError, match='attr_name|has no'):
        call(plateau, {'loss': [1.0, 2.0]}, stepper=stepper)
    assert vars(adam) == before


def test_stepper_attribute_paths_through_data_parallel():
    from brainstorm.training.data_parallel import DataParallel

    adam = AdamStepper(0.1)
    stepper = DataParallel(MultiStepper({'Hid': adam, 'default': SgdStepper(0.5)}))
    for path in ('steppers.Hid.beta1', 'stepper.steppers.Hid.beta1'):
        call(
            ModifyStepperAttribute(Linear(1.0, 0.0, 4), path),
            update_nr=2,
            stepper=stepper,
        )
        assert adam.beta1 == 0.75
        adam.beta1 = 0.9
    single = DataParallel(SgdStepper(1.0))
    call(ModifyStepperAttribute(Linear(1.0, 0.0, 4)), stepper=single)
    assert single.stepper.learning_rate == 0.75
    with pytest.raises(UnknownNameError, match='comm'):
        call(ModifyStepperAttribute(Linear(1.0, 0.0, 4), 'comm'), stepper=single)


def test_reduce_on_plateau():
    stepper = SgdStepper(1.0)
    hook = ReduceOnPlateau('loss', factor=0.5, patience=1, minimum=0.3)
    log = []
    for value, expected_lr in [
        (1.0, 1.0),
        (0.9, 1.0),
        (0.95, 1.0),
        (0.92, 0.5),
        (0.91, 0.5),
        (0.8, 0.5),
        (0.85, 0.5),
        (0.85, 0.3),
        (0.9, 0.3),
        (0.9, 0.3),
    ]:
        log.append(value)
        call(hook, {'loss': log}, stepper=stepper, start=not log[:-1])
        assert stepper.learning_rate == expected_lr, log
    call(hook, {'loss': log}, stepper=stepper, start=False)  # nothing new
    assert hook.get_state()['seen'] == len(log)
    other = ReduceOnPlateau('loss', factor=0.5, patience=1, minimum=0.3)
    other.set_state(hook.get_state())
    assert (other._best, other._bad_checks) == (hook._best, hook._bad_checks)


@pytest.mark.parametrize(
    'kwargs, message',
    [
        ({'factor': 1.0}, 'factor'),
        ({'factor': 0}, 'factor'),
        ({'patience': -1}, 'patience'),
        ({'minimum': -1}, 'minimum'),
        ({'criterion': 'up'}, 'criterion'),
    ],
)
def test_reduce_on_plateau_bad_arguments(kwargs, message):
    with pytest.raises(ValidationError, match=message):
        ReduceOnPlateau('loss', **kwargs)


# --------------------------------------------------- logs through trainer ---


def test_missing_log_is_reported_once_at_the_first_epoch():
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(MonitorLoss('xor', name='validation'))
    trainer.add_hook(EarlyStopper('validation.Accuracy'))
    data = Undivided(**xor_data())
    with pytest.raises(UnknownNameError) as info:
        trainer.train(xor_net(), data, xor=data)
    message = str(info.value)
    assert "'validation.Accuracy'" in message and 'epoch 1' in message
    assert "'validation.total_loss'" in message
    assert "'rolling_training.total_loss'" in message
    assert trainer.current_epoch_nr == 1


# ------------------------------------------------------------ description ---


class _InfoRun:
    """A stand-in for a sacred run: anything with an ``info`` dict."""

    def __init__(self):
        self.info = {}


ALL_HOOKS = [
    SaveBestNetwork(
        'validation.Accuracy', filename='best.hdf5', criterion='max', name='best'
    ),
    SaveLogs('logs.hdf5', interval=2),
    SaveNetwork('net.hdf5', timescale='update', interval=100),
    SaveCheckpoint('run.ckpt'),
    SaveLogsCSV('logs.csv', ['validation.total_loss']),
    SavePlot('plot.png', ['validation.total_loss']),
    MonitorLoss('valid', name='validation'),
    MonitorScores('valid', [Accuracy()], name='validation'),
    MonitorLayerParameters('Hid'),
    MonitorLayerGradients('Hid'),
    MonitorLayerInOuts('Hid'),
    MonitorLayerDeltas('Hid', verbose=True),
    EarlyStopper('validation.total_loss', patience=3),
    StopAfterEpoch(10),
    StopAfterThresholdReached('acc', 0.9, 'max'),
    StopOnNan(['validation.total_loss'], check_parameters=False),
    StopOnSigQuit(),
    ProgressBar(force=True),
    ModifyStepperAttribute(Linear(0.1, 0.01, 5), 'learning_rate'),
    ReduceOnPlateau('validation.total_loss', factor=0.2, patience=2),
    BokehVisualizer(['validation.total_loss'], 'logs.html'),
    InfoUpdater(_InfoRun()),
    SaveLogsTensorBoard('runs/a', ['validation.total_loss'], histograms=True),
]


@pytest.mark.parametrize('hook', ALL_HOOKS, ids=lambda h: type(h).__name__)
def test_description_round_trip(hook):
    description = bs.get_description(hook)
    json.dumps(description)
    copy = roundtrip(hook)
    assert type(copy) is type(hook)
    assert bs.get_description(copy) == description
    assert copy.__name__ == hook.__name__
    assert (copy.timescale, copy.interval) == (hook.timescale, hook.interval)


def test_every_public_hook_is_covered():
    import brainstorm.hooks as hooks

    covered = {type(h).__name__ for h in ALL_HOOKS}
    assert set(hooks.__all__) - covered == {'Hook'}


def _train_with_logs(tmp_path, *hooks):
    from brainstorm.hooks import MonitorScores, StopAfterEpoch
    from brainstorm.scorers import Accuracy
    from brainstorm.training import SgdStepper, Trainer

    net = xor_net()
    trainer = Trainer(SgdStepper(0.5), verbose=False)
    trainer.train_scorers = [Accuracy()]
    trainer.add_hook(MonitorScores('valid', [Accuracy()], name='validation'))
    for hook in hooks:
        trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(3))
    trainer.train(net, Undivided(**xor_data()), valid=Undivided(**xor_data()))
    return trainer


def test_save_logs_csv_aligns_logs_by_epoch(tmp_path):
    """The CSV has epoch and update columns, and rolling_training (logged
    from epoch 1) sits in the row of its epoch, beside the validation
    figures of the same epoch. (Guards against: pairing entries by
    position, which shifted rolling_training one epoch.)"""
    import csv

    filename = str(tmp_path / 'logs.csv')
    trainer = _train_with_logs(tmp_path, SaveLogsCSV(filename))
    with open(filename) as f:
        rows = list(csv.DictReader(f))
    assert [r['epoch'] for r in rows] == ['0', '1', '2', '3']
    assert [r['update'] for r in rows] == ['0', '1', '2', '3']
    logs = trainer.logs
    assert rows[0]['rolling_training.total_loss'] == ''
    for epoch in (1, 2, 3):
        row = rows[epoch]
        assert (
            float(row['rolling_training.total_loss'])
            == logs['rolling_training']['total_loss'][epoch - 1]
        )
        assert (
            float(row['validation.total_loss'])
            == logs['validation']['total_loss'][epoch]
        )
    assert logs['rolling_training']['total_loss'].epochs == [1, 2, 3]
    assert logs['validation']['total_loss'].epochs == [0, 1, 2, 3]


def test_save_plot_draws_each_entry_at_its_epoch(tmp_path, monkeypatch):
    """The drawn lines have their points at the epochs the entries were
    logged at (rolling_training from 1, validation from 0); losses share a
    panel, accuracy has its own; axes are labelled and have a legend.
    (Guards against: plotting by position, one epoch off.)"""
    pytest.importorskip('matplotlib')
    from matplotlib.figure import Figure

    figures = []
    original = Figure.savefig

    def capture(self, *args, **kwargs):
        figures.append(self)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Figure, 'savefig', capture)
    filename = str(tmp_path / 'plot.png')
    names = [
        'rolling_training.total_loss',
        'validation.total_loss',
        'rolling_training.Accuracy',
        'validation.Accuracy',
    ]
    trainer = _train_with_logs(tmp_path, SavePlot(filename, names))
    with open(filename, 'rb') as f:
        assert f.read(8) == b'\x89PNG\r\n\x1a\n'
    loss_axes, accuracy_axes = figures[-1].axes
    assert loss_axes.get_ylabel() == 'loss'
    assert accuracy_axes.get_ylabel() == 'Accuracy'
    for axes, quantity in ((loss_axes, 'total_loss'), (accuracy_axes, 'Accuracy')):
        assert axes.get_xlabel() == 'epoch'
        lines = {line.get_label(): line for line in axes.get_lines()}
        assert set(lines) == {f'rolling_training.{quantity}', f'validation.{quantity}'}
        legend = [t.get_text() for t in axes.get_legend().get_texts()]
        assert sorted(legend) == sorted(lines)
        rolling = lines[f'rolling_training.{quantity}']
        np.testing.assert_array_equal(rolling.get_xdata(), [1, 2, 3])
        np.testing.assert_array_equal(
            rolling.get_ydata(), trainer.logs['rolling_training'][quantity]
        )
        valid = lines[f'validation.{quantity}']
        np.testing.assert_array_equal(valid.get_xdata(), [0, 1, 2, 3])
        np.testing.assert_array_equal(
            valid.get_ydata(), trainer.logs['validation'][quantity]
        )


def test_log_counters_survive_a_checkpoint(tmp_path):
    """A resumed trainer's logs still know the epoch of each entry."""
    from brainstorm.training import Trainer

    filename = str(tmp_path / 'run.ckpt')
    trainer = _train_with_logs(tmp_path, SaveCheckpoint(filename))
    resumed, _ = Trainer.from_checkpoint(filename)
    for path in ('rolling_training.total_loss', 'validation.total_loss'):
        first, second = path.split('.')
        log, original = resumed.logs[first][second], trainer.logs[first][second]
        assert list(log) == list(original)
        assert log.epochs == original.epochs
        assert log.updates == original.updates


def test_bokeh_visualizer_writes_an_interactive_page(tmp_path, monkeypatch):
    """0.5 scripts use bs.hooks.BokehVisualizer (HISTORY promised it): a
    standalone HTML page whose lines have their points at the epochs of
    the entries."""
    pytest.importorskip('bokeh')
    import bokeh.embed

    import brainstorm as bs

    layouts = []
    original = bokeh.embed.file_html

    def capture(models, *args, **kwargs):
        layouts.append(models)
        return original(models, *args, **kwargs)

    monkeypatch.setattr(bokeh.embed, 'file_html', capture)
    filename = str(tmp_path / 'logs.html')
    hook = bs.hooks.BokehVisualizer(
        ['rolling_training.total_loss', 'validation.total_loss', 'validation.Accuracy'],
        filename,
    )
    trainer = _train_with_logs(tmp_path, hook)
    text = open(filename, encoding='utf-8').read()
    assert text.lstrip().lower().startswith('<!doctype html>')
    assert 'validation.total_loss' in text
    assert 'cdn.bokeh.org' not in text  # standalone: the JS is inline
    loss, accuracy = layouts[-1].children
    assert loss.yaxis[0].axis_label == 'loss'
    assert accuracy.yaxis[0].axis_label == 'Accuracy'
    assert loss.xaxis[0].axis_label == 'epoch'
    drawn = {}
    for plot in (loss, accuracy):
        for item in plot.legend[0].items:
            renderer = item.renderers[0]
            drawn[item.label['value']] = renderer.data_source.data
    logs = trainer.logs
    assert list(drawn['rolling_training.total_loss']['x']) == [1, 2, 3]
    assert list(drawn['rolling_training.total_loss']['y']) == list(
        logs['rolling_training']['total_loss']
    )
    assert list(drawn['validation.Accuracy']['x']) == [0, 1, 2, 3]
    assert list(drawn['validation.Accuracy']['y']) == list(
        logs['validation']['Accuracy']
    )


def test_bokeh_visualizer_without_bokeh_names_the_install_command(monkeypatch):
    """A clear ImportError with the pip command, when bokeh is missing."""
    from brainstorm import optional
    from brainstorm.hooks import BokehVisualizer

    monkeypatch.setattr(optional, 'has_bokeh', False)
    hook = BokehVisualizer('validation.total_loss')
    with pytest.raises(ImportError, match=r"pip install 'brainstorm-nn\[bokeh\]'"):
        hook.start(xor_net(), None, False, {})
    with pytest.raises(TrainingValidationError, match='log_names'):
        BokehVisualizer([])


def test_info_updater_writes_logs_into_any_run_object(tmp_path):
    """0.5's InfoUpdater filled a sacred run's info dict; any object with
    an info dict works, without sacred."""
    import json

    import brainstorm as bs

    class Run:
        def __init__(self):
            self.info = {}

    run = Run()
    trainer = _train_with_logs(tmp_path, bs.hooks.InfoUpdater(run))
    assert run.info['epoch_nr'] == 3
    assert run.info['update_nr'] == 3
    assert run.info['nr_parameters'] == xor_net().buffer.parameters.size
    assert run.info['logs']['validation']['total_loss'] == list(
        trainer.logs['validation']['total_loss']
    )
    json.dumps(run.info)  # plain data, as sacred stores it
    with pytest.raises(TrainingValidationError, match='info'):
        bs.hooks.InfoUpdater(object())


def test_a_save_best_network_reused_for_a_new_run_judges_its_log_afresh():
    """Reused by a second trainer (a fresh log), the hook skipped the new
    run's first entries as judged already and kept the first run's
    network."""
    net = xor_net()
    hook = SaveBestNetwork('val.loss', criterion='min')
    for epoch in range(4):
        call(
            hook, {'val': {'loss': [1.0 - 0.1 * e for e in range(epoch + 1)]}}, net=net
        )
    first = hook.load_best_network().copy()
    net.handler.set_from_numpy(net.buffer.parameters, first + 1)
    call(hook, {'val': {'loss': [2.0]}}, net=net)  # the new run's first entry
    np.testing.assert_array_equal(hook.load_best_network(), first + 1)


def test_a_save_best_network_pickled_without_its_count_still_runs():
    import pickle

    hook = SaveBestNetwork('val.loss', criterion='min')
    del hook.__dict__['_judged']  # as pickled before the count was kept
    hook = pickle.loads(pickle.dumps(hook))
    net = xor_net()
    call(hook, {'val': {'loss': [1.0]}}, net=net)
    np.testing.assert_array_equal(hook.load_best_network(), net.get('parameters'))


def test_progress_bar_leaves_batches_without_samples_out_of_its_loss():
    """An empty batch (a data-parallel rank's empty part of a small last
    batch) counted as a loss of 0: the bar showed half the loss."""
    import re

    from brainstorm.data_iterators import FromGenerator

    x, y = np.ones((1, 4, 2)), np.full((1, 4, 1), 3.0)

    def batches():
        yield {'default': x, 'targets': y}
        yield {'default': x[:, :0], 'targets': y[:, :0]}

    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.0)  # predictions 0: each sample's loss 0.5 * 3**2
    stream = io.StringIO()
    trainer = Trainer(SgdStepper(0.0), verbose=False)
    trainer.add_hook(ProgressBar(file=stream, force=True))
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(net, FromGenerator(batches, length=2))
    shown = re.findall(r'loss=([\d.]+)', stream.getvalue())
    assert shown and float(shown[-1]) == pytest.approx(4.5)


def test_a_new_hook_runs_outside_a_trainer():
    """Its run attributes exist before start (a change had moved their
    setting out of __init__: message() raised AttributeError)."""
    from brainstorm.parallel import SingleProcess

    hook = StopAfterEpoch(2)
    assert hook.run_verbosity is None and hook.comm is None
    assert isinstance(hook.processes, SingleProcess)
    hook.message('hello')  # nothing to print without a run's verbosity


def test_a_restored_hook_runs_outside_a_trainer_as_a_new_one():
    from brainstorm.parallel import SingleProcess

    restored = bs.create_from_description(bs.get_description(StopAfterEpoch(2)))
    assert isinstance(restored.processes, SingleProcess)
