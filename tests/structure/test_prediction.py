"""Network.predict, clear output-name errors and the refusal of never
initialised parameters (issue 26, points 1, 3 and 6)."""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.external_data import MissingInputError
from brainstorm.structure.prediction import (
    UninitializedNetworkError,
    UnknownOutputError,
)

PREDICTIONS = 'Output.outputs.predictions'


def mlp(handler=None, seed=1, initialize=True):
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(6, activation='tanh', name='Hid') >> out
    )
    net.set_handler(handler or NumpyHandler(np.float64, seed=seed))
    if initialize:
        net.initialize(bs.initializers.Gaussian(0.5), seed=seed)
    return net


def lstm_net(seed=1):
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Lstm(5, name='Lstm')
        >> bs.layers.Dropout(0.4, name='Drop')
        >> out
    )
    net.set_handler(NumpyHandler(np.float64, seed=seed))
    net.initialize(bs.initializers.Gaussian(0.5), seed=seed)
    return net


def samples(T, B, seed=0):
    return np.random.default_rng(seed).normal(size=(T, B, 4))


def forward(net, x):
    net.provide_external_data({'default': x}, all_inputs=False)
    net.forward_pass()
    return net.get(PREDICTIONS)


# ------------------------------------------------------------- predict ---


@pytest.mark.parametrize('make', [mlp, lstm_net], ids=['mlp', 'lstm'])
@pytest.mark.parametrize('T, B', [(1, 1), (1, 7), (5, 1), (4, 6)])
def test_predict_returns_exactly_the_forward_pass_outputs(make, T, B):
    net = make()
    x = samples(T, B)
    got = net.predict({'default': x}, out_name=PREDICTIONS)
    assert got.shape == (T, B, 3)
    np.testing.assert_array_equal(got, forward(make(), x))


@pytest.mark.parametrize('make', [mlp, lstm_net], ids=['mlp', 'lstm'])
@pytest.mark.parametrize('batch_size', [1, 2, 5, 6, 100])
def test_predict_in_batches_keeps_every_sample_in_its_place(make, batch_size):
    net = make()
    x = samples(3, 6)
    # each sample alone: the reference for its column
    alone = np.concatenate([forward(make(), x[:, i : i + 1]) for i in range(6)], axis=1)
    got = net.predict(x, batch_size=batch_size, out_name=PREDICTIONS)
    np.testing.assert_allclose(got, alone, rtol=1e-12, atol=1e-14)
    # the samples really differ, so a mix-up would show
    assert np.ptp(alone, axis=1).min() > 1e-6


def test_predict_uses_output_name_and_takes_a_layer_name():
    net = mlp()
    x = samples(2, 3)
    net.output_name = 'Output.outputs.probabilities'
    with pytest.raises(UnknownOutputError):
        net.predict(x)  # not an output of this network
    net.output_name = PREDICTIONS
    np.testing.assert_array_equal(net.predict(x), forward(mlp(), x))
    hidden = net.predict(x, out_name='Hid')  # its single output
    net.provide_external_data({'default': x}, all_inputs=False)
    net.forward_pass()
    np.testing.assert_array_equal(hidden, net.get('Hid.outputs.default'))


def test_predict_without_an_output_name_lists_the_outputs():
    net = mlp()
    assert net.output_name is None
    with pytest.raises(NetworkValidationError, match='out_name') as info:
        net.predict(samples(1, 2))
    assert PREDICTIONS in str(info.value)


def test_batch_first_data_for_one_time_step():
    net = mlp()
    x = samples(1, 5)
    got = net.predict(x[0], out_name=PREDICTIONS)
    assert got.shape == (5, 3)
    np.testing.assert_array_equal(got, net.predict(x, out_name=PREDICTIONS)[0])


def test_mixed_layouts_are_refused():
    inp = bs.layers.Input({'a': ('T', 'B', 2), 'b': ('T', 'B', 2)})
    merged = bs.layers.Merge(name='M')
    inp - 'a' >> 'inputs_1' - merged
    inp - 'b' >> 'inputs_2' - merged
    net = bs.Network.from_layer(merged >> bs.layers.FullyConnected(2, name='Out'))
    net.initialize(1.0)
    a = np.ones((1, 3, 2))
    with pytest.raises(NetworkValidationError, match='not both'):
        net.predict({'a': a, 'b': a[0]}, out_name='Out')
    with pytest.raises(NetworkValidationError, match='batch size'):
        net.predict({'a': a, 'b': np.ones((1, 4, 2))}, out_name='Out')
    with pytest.raises(NetworkValidationError, match='dict'):
        net.predict(a, out_name='Out')  # two inputs needed
    assert net.predict({'a': a, 'b': a}, out_name='Out').shape == (1, 3, 2)


def test_targets_are_not_needed_but_other_inputs_are():
    net = mlp()
    with pytest.raises(MissingInputError, match=r"\['default'\]"):
        net.predict({}, out_name=PREDICTIONS)
    with pytest.raises(NetworkValidationError, match='unknown inputs'):
        net.predict({'defualt': samples(1, 2)}, out_name=PREDICTIONS)
    x = samples(1, 4)
    with_targets = net.predict(
        {'default': x, 'targets': np.ones((1, 4, 1))}, out_name=PREDICTIONS
    )
    np.testing.assert_array_equal(with_targets, net.predict(x, out_name=PREDICTIONS))


TASK_TARGETS = {
    'classification': lambda rng, T, B: rng.integers(0, 3, (T, B, 1)),
    'multi-label': lambda rng, T, B: rng.integers(0, 2, (T, B, 3)),
    'regression': lambda rng, T, B: rng.normal(size=(T, B, 3)),
}


def task_net(task):
    inp, out = bs.tools.get_in_out_layers(task, 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5, name='Hid') >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


@pytest.mark.parametrize('task', sorted(TASK_TARGETS))
@pytest.mark.parametrize(
    'out_name, path',
    [
        ('Output.outputs.loss', 'Output.outputs.loss'),
        ('Loss', 'Loss.outputs.loss'),
        ('Loss.outputs.loss', 'Loss.outputs.loss'),
    ],
)
def test_losses_need_the_targets(task, out_name, path):
    net = task_net(task)
    x = samples(2, 5)
    with pytest.raises(MissingInputError, match=r"inputs \['targets'\] is missing"):
        net.predict({'default': x}, out_name=out_name)
    with pytest.raises(MissingInputError, match=r"\['default', 'targets'\]"):
        net.predict(x, out_name=out_name)  # one array cannot be both
    t = TASK_TARGETS[task](np.random.default_rng(2), 2, 5)
    got = net.predict({'default': x, 'targets': t}, out_name=out_name)
    net.provide_external_data({'default': x, 'targets': t})
    net.forward_pass(training_pass=False)
    np.testing.assert_array_equal(got, net.get(path))
    # the predictions still need no targets
    np.testing.assert_array_equal(
        net.predict(x, out_name=PREDICTIONS), net.get(PREDICTIONS)
    )


def test_only_what_follows_from_the_predictions_needs_no_targets():
    inp = bs.layers.Input({'default': ('T', 'B', 4), 'targets': ('T', 'B', 4)})
    out = bs.layers.SquaredError(name='Out')
    inp - 'targets' >> 'targets' - out
    inp >> out
    out - 'loss' >> bs.layers.FullyConnected(2, name='AfterLoss')
    out - 'predictions' >> bs.layers.FullyConnected(2, name='AfterPredictions')
    net = bs.Network.from_layer(out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    x = samples(1, 3)
    assert net.predict(x, out_name='AfterPredictions').shape == (1, 3, 2)
    with pytest.raises(MissingInputError, match=r"\['targets'\]"):
        net.predict({'default': x}, out_name='AfterLoss')
    t = np.ones((1, 3, 4))
    got = net.predict({'default': x, 'targets': t}, out_name='AfterLoss')
    net.provide_external_data({'default': x, 'targets': t})
    net.forward_pass(training_pass=False)
    np.testing.assert_array_equal(got, net.get('AfterLoss.outputs.default'))


@pytest.mark.parametrize('batch_size', [0, -1, 1.5, True, '2'])
def test_bad_batch_size(batch_size):
    with pytest.raises(NetworkValidationError, match='batch_size'):
        mlp().predict(samples(1, 2), batch_size=batch_size, out_name=PREDICTIONS)


def test_no_samples_and_non_finite_data_are_refused():
    net = mlp()
    with pytest.raises(NetworkValidationError, match='no sample'):
        net.predict(np.zeros((1, 0, 4)), out_name=PREDICTIONS)
    x = samples(1, 3)
    x[0, 1, 2] = np.nan
    with pytest.raises(NetworkValidationError, match='NaN'):
        net.predict(x, out_name=PREDICTIONS)


class SlicedOnly:
    """Array-like data (as an h5py.Dataset) that records the slices read
    from it and fails if it is read whole."""

    def __init__(self, array):
        self._array = array
        self.shape = array.shape
        self.dtype = array.dtype
        self.ndim = array.ndim
        self.reads = []

    def __len__(self):
        return self.shape[0]

    def __getitem__(self, key):
        self.reads.append(key)
        return self._array[key].copy()

    def __array__(self, dtype=None, copy=None):
        raise AssertionError('predict read the whole dataset')


def _samples_read(reads, axis):
    """The number of samples of each read: a slice along the batch axis."""
    counts = []
    for key in reads:
        key = key if isinstance(key, tuple) else (key,)
        assert all(k == slice(None) for k in key[:axis]), key
        counts.append(len(range(*key[axis].indices(10**9))))
    return counts


@pytest.mark.parametrize('batch_first', [False, True], ids=['TBF', 'BF'])
def test_array_like_data_is_read_one_batch_at_a_time(batch_first):
    net = mlp()
    x = samples(1, 11) if batch_first else samples(3, 11)
    if batch_first:
        x = x[0]
    on_disk = SlicedOnly(x)
    got = net.predict(on_disk, batch_size=4, out_name=PREDICTIONS)
    np.testing.assert_array_equal(got, net.predict(x, out_name=PREDICTIONS))
    assert _samples_read(on_disk.reads, 0 if batch_first else 1) == [4, 4, 3]


def test_an_hdf5_dataset_is_read_one_batch_at_a_time(tmp_path):
    h5py = pytest.importorskip('h5py')
    net = mlp()
    x = samples(2, 9)
    with h5py.File(tmp_path / 'data.h5', 'w') as f:
        f['x'] = x
        f['text'] = np.array([b'a'] * 9 * 4).reshape(1, 9, 4)
    with h5py.File(tmp_path / 'data.h5', 'r') as f:
        on_disk = SlicedOnly(f['x'])  # records the reads of the real dataset
        got = net.predict(on_disk, batch_size=2, out_name=PREDICTIONS)
        assert _samples_read(on_disk.reads, 1) == [2, 2, 2, 2, 1]
        np.testing.assert_array_equal(got, net.predict(x, out_name=PREDICTIONS))
        np.testing.assert_array_equal(
            net.predict(f['x'], batch_size=2, out_name=PREDICTIONS), got
        )
        # shape and dtype are checked before anything is read
        text = SlicedOnly(f['text'])
        with pytest.raises(NetworkValidationError, match='numeric'):
            net.predict(text, batch_size=2, out_name=PREDICTIONS)
        assert text.reads == []


def test_array_like_data_is_checked_as_arrays_are():
    net = mlp()
    wrong = SlicedOnly(samples(1, 5)[..., :3])
    with pytest.raises(NetworkValidationError, match='feature shape'):
        net.predict(wrong, batch_size=2, out_name=PREDICTIONS)
    assert wrong.reads == []
    x = samples(1, 5)
    x[0, 3, 1] = np.inf  # in the second batch: found when it is read
    with pytest.raises(NetworkValidationError, match='infinite'):
        net.predict(SlicedOnly(x), batch_size=2, out_name=PREDICTIONS)


def test_predict_on_the_debug_handler():
    x = samples(3, 4)
    net = mlp(handler=DebugHandler(NumpyHandler(np.float64)))
    got = net.predict(x, batch_size=3, out_name=PREDICTIONS)
    np.testing.assert_allclose(got, mlp().predict(x, out_name=PREDICTIONS))


def _state(net):
    """Everything of a network that predict must leave alone."""
    manager = net.buffer_manager
    return {
        'buffers': [net.handler.get_numpy_copy(b).copy() for b in manager.full_buffer],
        'sizes': (manager.time_size, manager.batch_size),
        'flat_ids': [id(f) for f in manager._flat],
        'net_rnd': net.rnd.get_state()[1].copy(),
        'handler_rnd': net.handler.rnd.get_state()[1].copy(),
        'global_rnd': bs.global_rnd.get_state()[1].copy(),
        'flags': {
            name: (layer.skip_input_deltas, layer.handler)
            for name, layer in net.layers.items()
        },
        'parameters_set': net._parameters_set,
        'context': net.get_context(),
    }


def _assert_same(before, after):
    assert before.keys() == after.keys()
    for key in before:
        if key == 'buffers':
            for a, b in zip(before[key], after[key]):
                np.testing.assert_array_equal(a, b)
        elif key == 'context':
            assert (before[key] is None) == (after[key] is None)
            if before[key] is not None:
                np.testing.assert_array_equal(before[key][2], after[key][2])
        elif key.endswith('rnd'):
            np.testing.assert_array_equal(before[key], after[key])
        else:
            assert before[key] == after[key], key


def test_predict_leaves_the_training_state_as_it_was():
    net = lstm_net()
    data = {'default': samples(4, 3), 'targets': np.ones((4, 3, 1))}
    net.provide_external_data(data)
    net.forward_pass(training_pass=True)  # dropout draws
    net.backward_pass()
    before = _state(net)
    assert before['context'] is not None
    for T, B, batch_size in [(7, 9, 4), (1, 2, None), (4, 3, 1)]:
        net.predict(samples(T, B, seed=T), batch_size, out_name=PREDICTIONS)
    _assert_same(before, _state(net))
    # and the memory still is the network's: a pass writes where it reads
    net.forward_pass()
    assert net.get(PREDICTIONS).shape == (4, 3, 3)


def test_predict_between_training_steps_changes_no_training_result():
    def train(call_predict):
        net = lstm_net()
        trainer = bs.Trainer(bs.training.MomentumStepper(0.05, 0.9), verbose=False)
        trainer.add_hook(bs.hooks.StopAfterEpoch(3))
        if call_predict:
            trainer.add_hook(PredictEveryUpdate())
        x = samples(4, 6)
        bs.global_rnd.set_seed(3)  # the same shuffling in both runs
        data = bs.data_iterators.Minibatches(2, default=x, targets=np.ones((4, 6, 1)))
        trainer.train(net, data)
        return net.get('parameters'), trainer.logs['rolling_training']

    class PredictEveryUpdate(bs.hooks.Hook):
        calls = 0

        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            net.predict(samples(2, 5, seed=update_nr), out_name=PREDICTIONS)
            PredictEveryUpdate.calls += 1

    PredictEveryUpdate.__init__ = lambda self: bs.hooks.Hook.__init__(
        self, timescale='update', interval=1
    )
    want, want_logs = train(False)
    got, got_logs = train(True)
    assert PredictEveryUpdate.calls >= 9  # every update (and more)
    np.testing.assert_array_equal(got, want)
    assert got_logs == want_logs


# ------------------------------------------------------- output names ---


def test_wrong_out_name_lists_the_outputs_everywhere():
    net = mlp()
    data = bs.data_iterators.Minibatches(
        2, default=samples(1, 4), targets=np.zeros((1, 4, 1))
    )
    calls = {
        'evaluate': lambda: bs.tools.evaluate(
            net, data, [bs.scorers.Accuracy()], out_name='Output.outputs.nope'
        ),
        'scorer': lambda: bs.tools.evaluate(
            net, data, [bs.scorers.Accuracy(out_name='Outptu')]
        ),
        'extract': lambda: bs.tools.extract(net, data, 'Output.outputs.nope'),
        'predict': lambda: net.predict(samples(1, 2), out_name='Output.outputs.nope'),
    }
    for who, call in calls.items():
        with pytest.raises(UnknownOutputError) as info:
            call()
        message = str(info.value)
        assert PREDICTIONS in message and 'Hid.outputs.default' in message, who
        assert isinstance(info.value, KeyError)  # as the BufferView error


def test_missing_targets_say_how_to_run_without_them():
    net = mlp()
    with pytest.raises(MissingInputError) as info:
        net.provide_external_data({'default': samples(1, 2)})
    message = str(info.value)
    assert "'targets' is missing" in message
    assert 'all_inputs=False' in message and 'net.predict(data)' in message


# ------------------------------------------- never initialised weights ---


def _never_initialised_calls(net):
    x = samples(1, 4)
    data = bs.data_iterators.Minibatches(2, default=x, targets=np.zeros((1, 4, 1)))

    def train():
        trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
        trainer.add_hook(bs.hooks.StopAfterEpoch(1))
        trainer.train(net, data)

    def forward():
        net.provide_external_data({'default': x}, all_inputs=False)
        net.forward_pass()

    return {
        'forward_pass': forward,
        'predict': lambda: net.predict(x, out_name=PREDICTIONS),
        'evaluate': lambda: bs.tools.evaluate(net, data),
        'extract': lambda: bs.tools.extract(net, data, PREDICTIONS),
        'train': train,
    }


@pytest.mark.parametrize(
    'what', ['forward_pass', 'predict', 'evaluate', 'extract', 'train']
)
def test_never_initialised_networks_are_refused(what):
    net = mlp(initialize=False)
    with pytest.raises(UninitializedNetworkError, match=r'net\.initialize\('):
        _never_initialised_calls(net)[what]()
    assert not net.get('parameters').any()  # nothing trained on the zeros


def test_training_refuses_before_any_hook_runs():
    net = mlp(initialize=False)
    started = []

    class Spy(bs.hooks.Hook):
        def start(self, net, stepper, verbose, named_data_iters):
            started.append(True)

        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            pass

    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(Spy())
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    data = bs.data_iterators.Minibatches(
        2, default=samples(1, 4), targets=np.zeros((1, 4, 1))
    )
    with pytest.raises(UninitializedNetworkError):
        trainer.train(net, data)
    assert started == []


def _set_by_buffer(net):
    net.buffer.parameters[:] = np.linspace(-1, 1, net.buffer.parameters.size)


def _set_by_handler(net):
    net.handler.set_from_numpy(
        net.buffer.Hid.parameters.W, np.ones(net.buffer.Hid.parameters.W.shape)
    )


def _set_by_view(net):
    net.buffer.Hid.parameters.bias[1] = 0.5


@pytest.mark.parametrize(
    'how',
    [
        lambda net: net.initialize(0.0),
        lambda net: net.initialize({'default': 0.0, 'Hid': {'W': 1.0}}),
        _set_by_buffer,
        _set_by_handler,
        _set_by_view,
    ],
    ids=['initialize(0.0)', 'initialize dict', 'buffer', 'handler', 'view'],
)
def test_parameters_set_by_the_user_run(how):
    net = mlp(initialize=False)
    how(net)
    assert net.predict(samples(1, 2), out_name=PREDICTIONS).shape == (1, 2, 3)


def test_zero_parameters_loaded_from_a_file_run(tmp_path):
    net = mlp(initialize=False)
    net.initialize(0.0)
    net.save_as_hdf5(tmp_path / 'zeros.h5')
    loaded = bs.Network.from_hdf5(tmp_path / 'zeros.h5')
    assert not loaded.get('parameters').any()
    assert loaded.predict(samples(1, 2), out_name=PREDICTIONS).shape == (1, 2, 3)


def test_copies_and_other_handlers_keep_what_was_set():
    net = mlp(initialize=False)
    net.initialize(0.0)
    for other in [
        copy.deepcopy(net),
        pickle.loads(pickle.dumps(net)),
        bs.structure.network.Network.__new_from_description__(
            bs.describable.get_description(net)
        ),
    ]:
        other.predict(samples(1, 2), out_name=PREDICTIONS)
    net.set_handler(NumpyHandler(np.float32))
    net.predict(samples(1, 2), out_name=PREDICTIONS)
    never = mlp(initialize=False)
    for other in [copy.deepcopy(never), pickle.loads(pickle.dumps(never))]:
        with pytest.raises(UninitializedNetworkError):
            other.predict(samples(1, 2), out_name=PREDICTIONS)


def test_pickles_from_before_the_flag_look_at_the_parameters():
    net = mlp()
    state = net.__getstate__()
    del state['_parameters_set']
    old = bs.structure.network.Network.__new__(bs.structure.network.Network)
    old.__setstate__(state)
    old.predict(samples(1, 2), out_name=PREDICTIONS)  # trained values: fine
    state = mlp(initialize=False).__getstate__()
    del state['_parameters_set']
    old = bs.structure.network.Network.__new__(bs.structure.network.Network)
    old.__setstate__(state)
    with pytest.raises(UninitializedNetworkError):
        old.predict(samples(1, 2), out_name=PREDICTIONS)


def test_networks_without_parameters_need_no_initialize():
    inp = bs.layers.Input({'default': ('T', 'B', 3), 'targets': ('T', 'B', 1)})
    out = bs.layers.SoftmaxCE(name='Output')
    inp - 'targets' >> 'targets' - out
    net = bs.Network.from_layer(inp >> out - 'loss' >> bs.layers.Loss())
    assert net.buffer.parameters.size == 0
    assert net.predict(samples(1, 2)[..., :3], out_name=PREDICTIONS).shape == (1, 2, 3)


def test_the_check_looks_at_the_parameters_once(monkeypatch):
    net = mlp()
    net._parameters_set = False  # as a network whose values a user wrote
    calls = []
    original = net.handler.get_numpy_copy

    def spy(array):
        if array is net.buffer.parameters:
            calls.append(1)
        return original(array)

    monkeypatch.setattr(net.handler, 'get_numpy_copy', spy)
    for _ in range(3):
        net.predict(samples(1, 2), out_name=PREDICTIONS)
    assert calls == [1]


# ------------------------------------- independent_outputs: custom layers ---


class LabelledLayerImpl(Layer):
    """An output layer named otherwise: 'probabilities' (its input as it
    is, independent of the labels) and 'loss' (squared difference)."""

    expected_inputs = {
        'default': StructureTemplate('T', 'B', 'F'),
        'labels': StructureTemplate('T', 'B', 'F'),
    }
    independent_outputs = {'probabilities': ('labels',)}

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        return (
            OrderedDict(probabilities=s, loss=BufferStructure('T', 'B', 1)),
            OrderedDict(),
            OrderedDict(diff=BufferStructure(*s.shape)),
        )

    def forward_pass(self, buffers, training_pass=True):
        _h, x = self.handler, buffers.inputs
        _h.copy_to(x.default, buffers.outputs.probabilities)
        diff = buffers.internals.diff
        _h.subtract_tt(x.default, x.labels, diff)
        _h.mult_tt(diff, diff, diff)
        _h.sum_t(diff, 2, buffers.outputs.loss)

    def backward_pass(self, buffers):
        pass


class UndeclaredLabelledLayerImpl(LabelledLayerImpl):
    independent_outputs = {}


def labelled_net(layer_class):
    inp = bs.layers.Input({'default': ('T', 'B', 3), 'labels': ('T', 'B', 3)})
    out = ConstructionWrapper.create(layer_class, name='Out')
    inp - 'labels' >> 'labels' - out
    inp >> out
    net = bs.Network.from_layer(out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def test_a_custom_layer_declares_the_inputs_its_outputs_do_not_need():
    """Only an output named 'predictions' was known not to need the
    targets: a custom output layer's predictions needed its labels."""
    net = labelled_net(LabelledLayerImpl)
    x = np.random.default_rng(3).normal(size=(2, 4, 3))
    got = net.predict(x, out_name='Out.outputs.probabilities')
    np.testing.assert_array_equal(got, x)
    with pytest.raises(MissingInputError, match=r"\['labels'\]"):
        net.predict({'default': x}, out_name='Out.outputs.loss')
    undeclared = labelled_net(UndeclaredLabelledLayerImpl)
    with pytest.raises(MissingInputError, match=r"\['labels'\]"):
        undeclared.predict({'default': x}, out_name='Out.outputs.probabilities')


@pytest.mark.parametrize(
    'declared',
    [{'probabilities': 'labels'}, [('probabilities', ('labels',))], {1: ('a',)},
     {'probabilities': (1,)}, None],
)  # fmt: skip
def test_a_bad_independent_outputs_declaration_is_refused(declared):
    with pytest.raises(TypeError, match='independent_outputs must be a dict') as info:
        type('BadLayerImpl', (LabelledLayerImpl,), {'independent_outputs': declared})
    assert 'BadLayerImpl' in str(info.value)


# --------------------------------------------- found by a tester, fixed ---


def test_predict_leaves_a_moved_network_refusing_backward_pass():
    """predict's forward pass cleared the 'memory moved' flag, and the old
    (empty) batch came back: backward_pass then ran on zeros."""
    net = mlp()
    data = {'default': samples(1, 4), 'targets': np.zeros((1, 4, 1))}
    net.provide_external_data(data)
    net.forward_pass()
    net.set_handler(NumpyHandler(np.float64))
    net.predict(data['default'], out_name=PREDICTIONS)
    with pytest.raises(NetworkValidationError, match='before a forward_pass'):
        net.backward_pass()


def test_a_value_for_the_whole_batch_is_not_split_into_batches():
    """out_name='Loss' with batch_size returned the last batch's loss."""
    net = mlp()
    data = {'default': samples(1, 7), 'targets': np.ones((1, 7, 1))}
    whole = net.predict(data, out_name='Loss')
    assert net.predict(data, out_name='Loss', batch_size=7).tolist() == whole.tolist()
    with pytest.raises(NetworkValidationError, match='one value for the whole batch'):
        net.predict(data, out_name='Loss', batch_size=3)


@pytest.mark.parametrize('batch_size', [None, 3])
def test_non_finite_data_is_named_at_its_index_in_the_data_given(batch_size):
    net = mlp()
    x = samples(2, 10)
    x[1, 7, 2] = np.nan
    with pytest.raises(NetworkValidationError, match=r'NaN at index \(1, 7, 2\)'):
        net.predict(x, out_name=PREDICTIONS, batch_size=batch_size)
    batch_first = samples(1, 10)[0]
    batch_first[7, 2] = np.inf
    with pytest.raises(
        NetworkValidationError, match=r'infinite value at index \(7, 2\)'
    ):
        net.predict(batch_first, out_name=PREDICTIONS, batch_size=batch_size)


@pytest.mark.parametrize('root', ['parameters', 'gradients'])
def test_predict_of_the_parameters_is_refused_naming_net_get(root):
    """It raised a bare KeyError."""
    with pytest.raises(NetworkValidationError, match=rf"net.get\('{root}'\)"):
        mlp().predict(samples(1, 2), out_name=root)


@pytest.mark.parametrize('value', [None, 0, 'no', 1.0])
def test_check_finite_must_be_a_bool(value):
    with pytest.raises(NetworkValidationError, match='check_finite must be a bool'):
        mlp().predict(samples(1, 2), out_name=PREDICTIONS, check_finite=value)


# ------------------------------------------ predict between two passes ---


def bn_net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(5, name='F') >> bs.layers.BatchNorm() >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def test_predict_between_the_passes_leaves_the_gradients_alone():
    # BatchNorm notes on itself whether its last forward pass was an
    # inference pass, which decides its backward pass: predict left the
    # note of its own (inference) pass, and the training batch's backward
    # pass computed other gradients.
    rnd = np.random.RandomState(0)
    data = {'default': rnd.randn(1, 8, 4), 'targets': rnd.randint(0, 3, (1, 8, 1))}

    def gradients(call_predict):
        net = bn_net()
        net.provide_external_data(data)
        net.forward_pass(training_pass=True)
        if call_predict:
            net.predict(rnd.randn(1, 5, 4), out_name=PREDICTIONS)
        net.backward_pass()
        return net.get('gradients')

    expected = gradients(False)
    assert np.abs(expected).max() > 0.01
    np.testing.assert_array_equal(gradients(True), expected)


@pytest.mark.parametrize(
    'name', ['Hid.output_deltas.default', 'Hid.input_deltas.default', 'Hid.gradients.W']
)
def test_predict_refuses_what_no_forward_pass_computes(name):
    # these came back as zeros (computed in fresh memory), without a word
    net = mlp()
    with pytest.raises(NetworkValidationError, match='not computed by a forward pass'):
        net.predict(samples(1, 2), out_name=name)


def test_predict_refuses_a_backward_only_internal():
    # a LayerNorm's 'scratch' is written by its backward pass only:
    # predict returned zeros
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.LayerNorm(name='LN') >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    assert net.layers['LN'].internal_shapes['scratch'].is_backward_only
    with pytest.raises(NetworkValidationError, match='not computed by a forward pass'):
        net.predict(samples(1, 2), out_name='LN.internals.scratch')
    forward_internal = next(
        name
        for name, shape in net.layers['LN'].internal_shapes.items()
        if not shape.is_backward_only
    )
    got = net.predict(samples(1, 2), out_name=f'LN.internals.{forward_internal}')
    assert got.shape[:2] == (1, 2)
