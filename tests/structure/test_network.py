"""The Network: running, gradients, initialization, contexts, files."""

import json

import h5py
import numpy as np
import pytest

from brainstorm.describable import create_from_description, get_description
from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.debug_handler import DebugHandler
from brainstorm.initializers import Gaussian, Uniform
from brainstorm.layers import (
    FullyConnected,
    Input,
    Loss,
    Recurrent,
    SquaredError,
)
from brainstorm.structure.network import Network
from brainstorm.testing import approx_fprime
from brainstorm.tools import get_in_out_layers
from brainstorm.utils import NetworkValidationError, add_checksums


def small_net(handler=None):
    inp, out = get_in_out_layers('classification', 3, 4)
    net = Network.from_layer(
        inp
        >> Recurrent(5, name='Rnn')
        >> FullyConnected(6, activation='tanh', name='Hid')
        >> out
    )
    net.set_handler(handler or NumpyHandler(np.float64))
    net.initialize(Gaussian(0.5), seed=1)
    return net


def small_data(T=3, B=2, seed=0):
    rnd = np.random.RandomState(seed)
    return {
        'default': rnd.randn(T, B, 3),
        'targets': rnd.randint(0, 4, (T, B, 1)).astype(float),
    }


def loss_at(net, params, data):
    net.handler.set_from_numpy(net.buffer.parameters, params)
    net.provide_external_data(data)
    net.forward_pass()
    return net.get_loss_values()['total_loss']


def assert_gradients_match_finite_differences(net, data):
    """The gradient of the total loss with respect to all parameters."""
    params = net.get('parameters')
    net.provide_external_data(data)
    net.forward_pass()
    net.backward_pass()
    analytic = net.get('gradients')
    numeric = approx_fprime(params, lambda p: loss_at(net, p, data), 1e-6)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize(
    'handler',
    [NumpyHandler(np.float64), DebugHandler(NumpyHandler(np.float64))],
    ids=['numpy', 'debug'],
)
def test_network_gradient_matches_finite_differences(handler):
    net = small_net(handler)
    assert_gradients_match_finite_differences(net, small_data())


def test_gradients_do_not_accumulate_across_backward_passes():
    net = small_net()
    net.provide_external_data(small_data())
    net.forward_pass()
    net.backward_pass()
    first = net.get('gradients')
    net.backward_pass()
    np.testing.assert_array_equal(net.get('gradients'), first)


def test_get_returns_copies_and_rejects_views():
    net = small_net()
    net.provide_external_data(small_data())
    net.forward_pass()
    out = net.get('Hid.outputs.default')
    out[:] = 123.0
    assert net.get('Hid.outputs.default').max() < 123.0
    np.testing.assert_array_equal(net.get_input('targets'), small_data()['targets'])
    with pytest.raises(KeyError, match='view'):
        net.get('Hid.outputs')
    with pytest.raises(KeyError, match='Available keys'):
        net.get('Hid.outputs.nonexistent')


def test_loss_values_for_one_and_several_loss_layers():
    net = small_net()
    net.provide_external_data(small_data())
    net.forward_pass()
    losses = net.get_loss_values()
    assert list(losses) == ['total_loss']
    p = net.get('Output.outputs.predictions')
    t = small_data()['targets'].astype(int)
    expected = -np.log(np.take_along_axis(p, t, axis=2)).sum() / 2
    assert losses['total_loss'] == pytest.approx(expected)

    inp = Input(out_shapes={'default': ('T', 'B', 2), 'targets': ('T', 'B', 2)})
    a, b = SquaredError(name='A'), SquaredError(name='B')
    inp >> a
    inp >> b
    inp - 'targets' >> 'targets' - a
    inp - 'targets' >> 'targets' - b
    a - 'loss' >> Loss(importance=1.0, name='LossA')
    b - 'loss' >> Loss(importance=3.0, name='LossB')
    net = Network.from_layer(a)
    net.provide_external_data(
        {'default': np.ones((1, 2, 2)), 'targets': np.zeros((1, 2, 2))}
    )
    net.forward_pass()
    losses = net.get_loss_values()
    assert list(losses) == ['LossA', 'LossB', 'total_loss']
    assert losses['LossA'] == pytest.approx(1.0)
    assert losses['LossB'] == pytest.approx(3.0)
    assert losses['total_loss'] == pytest.approx(4.0)


def test_save_and_load_give_bit_identical_outputs(tmp_path):
    net = small_net(NumpyHandler(np.float32))
    net.output_name = 'Output.outputs.predictions'
    filename = str(tmp_path / 'net.hdf5')
    net.save_as_hdf5(filename, comment='a test network')
    loaded = Network.from_hdf5(filename)
    data = small_data()
    for n in (net, loaded):
        n.provide_external_data(data)
        n.forward_pass()
    assert loaded.output_name == 'Output.outputs.predictions'
    np.testing.assert_array_equal(net.get('parameters'), loaded.get('parameters'))
    np.testing.assert_array_equal(
        net.get('Output.outputs.predictions'), loaded.get('Output.outputs.predictions')
    )
    with h5py.File(filename, 'r') as f:
        assert f.attrs['format'] == b'Network file v1.0'
        assert f.attrs['info'] == b'Created with brainstorm 1.0.0'
        assert f.attrs['comment'] == b'a test network'


def test_saving_never_leaves_a_half_written_file(tmp_path, monkeypatch):
    net = small_net()
    filename = str(tmp_path / 'net.hdf5')
    net.save_as_hdf5(filename)
    before = open(filename, 'rb').read()

    def broken(*args, **kwargs):
        raise RuntimeError('disk full')

    # fail in the middle of writing the HDF5 file
    monkeypatch.setattr(h5py.Group, 'create_dataset', broken)
    with pytest.raises(RuntimeError):
        net.save_as_hdf5(filename)
    assert open(filename, 'rb').read() == before
    assert [p.name for p in tmp_path.iterdir()] == ['net.hdf5']


def test_description_survives_json_and_rebuilds_the_network():
    net = small_net()
    net.set_weight_modifiers({'Hid': {'W': []}})
    description = get_description(net)
    text = json.dumps(description)
    rebuilt = create_from_description(json.loads(text))
    assert isinstance(rebuilt, Network)
    assert rebuilt.architecture == net.architecture
    assert list(rebuilt.layers) == list(net.layers)
    assert get_description(rebuilt) == json.loads(text)


def test_uniform_initialised_network_reloads(tmp_path):
    net = small_net()
    net.initialize(Uniform(0.2), seed=3)
    filename = str(tmp_path / 'u.hdf5')
    net.save_as_hdf5(filename)
    loaded = Network.from_hdf5(filename)
    np.testing.assert_array_equal(loaded.get('parameters'), net.get('parameters'))


def test_set_handler_keeps_parameters():
    net = small_net(NumpyHandler(np.float64))
    params = net.get('parameters')
    net.set_handler(DebugHandler(NumpyHandler(np.float64)))
    np.testing.assert_array_equal(net.get('parameters'), params)
    net.provide_external_data(small_data())
    net.forward_pass()
    net.backward_pass()
    net.set_handler(NumpyHandler(np.float32))
    np.testing.assert_allclose(net.get('parameters'), params, rtol=1e-6)
    assert net.get('parameters').dtype == np.float32


def test_context_continues_a_sequence():
    net = small_net()
    data = small_data(T=6)
    net.provide_external_data(data)
    net.forward_pass()
    full = net.get('Rnn.outputs.default')[:6]
    first = {k: v[:3] for k, v in data.items()}
    second = {k: v[3:] for k, v in data.items()}
    net.provide_external_data(first)
    net.forward_pass()
    context = net.get_context()
    net.provide_external_data(second)
    net.forward_pass(context=context)
    np.testing.assert_allclose(net.get('Rnn.outputs.default')[:3], full[3:], rtol=1e-12)
    net.forward_pass()
    assert not np.allclose(net.get('Rnn.outputs.default')[:3], full[3:])
    with pytest.raises(NetworkValidationError, match='batch size'):
        net.provide_external_data(small_data(T=2, B=5))
        net.forward_pass(context=context)


class TestInitialize:
    def test_default_and_patterns(self):
        net = small_net()
        net.initialize(
            {'default': 0.5, 'Rnn': {'R': 2.0, 'b*': 3.0}, 'H*': {'default': 4.0}}
        )
        assert np.all(net.get('Rnn.parameters.R') == 2.0)
        assert np.all(net.get('Rnn.parameters.bias') == 3.0)
        assert np.all(net.get('Rnn.parameters.W') == 0.5)
        assert np.all(net.get('Hid.parameters.W') == 4.0)
        assert np.all(net.get('Output_projection.parameters.W') == 0.5)

    def test_kwargs_and_conflicts(self):
        net = small_net()
        net.initialize(default=1.0, Rnn=2.0)
        assert np.all(net.get('Rnn.parameters.W') == 2.0)
        assert np.all(net.get('Hid.parameters.W') == 1.0)
        with pytest.raises(TypeError, match='Conflicting values'):
            net.initialize({'Rnn': 1.0}, Rnn=2.0)

    def test_the_users_dict_is_not_mutated(self):
        net = small_net()
        refs = {'default': 1.0}
        net.initialize(refs, Rnn=2.0)
        assert refs == {'default': 1.0}

    def test_fallback_is_used_when_the_initializer_cannot_fill(self):
        from brainstorm.initializers import Identity

        net = small_net()
        net.initialize(
            {
                'default': Identity(std=0.0),
                'fallback': 0.25,
                'Hid': Gaussian(),
                'Output*': Gaussian(),
            }
        )
        assert np.all(net.get('Rnn.parameters.bias') == 0.25)
        np.testing.assert_array_equal(net.get('Rnn.parameters.R'), np.eye(5))

    def test_errors_name_the_parameter(self):
        net = small_net()
        with pytest.raises(NetworkValidationError, match='No initializer for'):
            net.initialize({'Rnn': 1.0})
        with pytest.raises(
            NetworkValidationError, match='Multiple initializers for Rnn.R'
        ):
            net.initialize({'default': 0.0, 'R*': 1.0, '*nn': 2.0})
        with pytest.raises(NetworkValidationError, match="'Foo' matches no"):
            net.initialize({'default': 0.0, 'Foo': 1.0})
        with pytest.raises(NetworkValidationError, match="'X' .*matches no"):
            net.initialize({'default': 0.0, 'Rnn': {'X': 1.0}})

    def test_equal_numbers_collapse(self):
        net = small_net()
        net.initialize({'default': 0.0, 'R*': 1.0, '*nn': 1})
        assert np.all(net.get('Rnn.parameters.W') == 1.0)

    def test_arrays_and_lists(self):
        net = small_net()
        net.initialize({'default': 0.0, 'Rnn': {'bias': [1, 2, 3, 4, 5]}})
        np.testing.assert_array_equal(net.get('Rnn.parameters.bias'), [1, 2, 3, 4, 5])
        with pytest.raises(NetworkValidationError, match='Rnn.bias'):
            net.initialize({'default': 0.0, 'Rnn': {'bias': [1, 2]}})

    def test_seed_makes_it_reproducible(self):
        net = small_net()
        net.initialize(Gaussian(), seed=7)
        first = net.get('parameters')
        net.initialize(Gaussian(), seed=8)
        assert not np.array_equal(first, net.get('parameters'))
        net.initialize(Gaussian(), seed=7)
        np.testing.assert_array_equal(first, net.get('parameters'))


def test_gradient_modifiers_are_installed_per_parameter_and_applied():
    from brainstorm.value_modifiers import ClipValues

    net = small_net()
    net.set_gradient_modifiers({'Hid': ClipValues(-1e-3, 1e-3)})
    assert set(net.gradient_modifiers) == {'Hid'}
    mods = net.gradient_modifiers['Hid']
    assert set(mods) == {'W', 'bias'}
    assert mods['W'][0] is not mods['bias'][0]
    assert (mods['W'][0].layer_name, mods['W'][0].view_name) == ('Hid', 'W')
    net.provide_external_data(small_data())
    net.forward_pass()
    net.backward_pass()
    assert np.abs(net.get('Hid.gradients.W')).max() <= 1e-3
    assert np.abs(net.get('Rnn.gradients.W')).max() > 1e-3


def test_weight_modifiers_apply_in_order():
    from brainstorm.value_modifiers import ClipValues

    net = small_net()
    net.set_weight_modifiers(Hid=[ClipValues(-0.1, 0.1), ClipValues(0, 1)])
    net.apply_weight_modifiers()
    w = net.get('Hid.parameters.W')
    assert w.min() >= 0 and w.max() <= 0.1


def test_layers_are_in_canonical_order_and_loss_layers_found():
    net = small_net()
    assert list(net.layers) == [
        'Input',
        'Rnn',
        'Hid',
        'Output_projection',
        'Output',
        'Loss',
    ]
    assert net.loss_layers == ['Loss']
    assert type(net.layers['Output']).__name__ == 'SoftmaxCELayerImpl'


def test_a_gpu_network_file_loads_without_cuda(tmp_path):
    from brainstorm.optional import has_pycuda

    if has_pycuda:
        pytest.skip('PyCUDA is installed: the fallback is not needed')
    net = small_net(NumpyHandler(np.float32))
    filename = str(tmp_path / 'gpu.hdf5')
    net.save_as_hdf5(filename)
    with h5py.File(filename, 'r+') as f:
        description = json.loads(f['description'][()].tobytes())
        description['handler'] = {'@type': 'PyCudaHandler'}
        del f['description']
        f['description'] = np.frombuffer(
            json.dumps(description).encode(), dtype=np.uint8
        )
        add_checksums(f)  # as written on a machine with a GPU
    with pytest.warns(RuntimeWarning, match='PyCudaHandler') as caught:
        loaded = Network.from_hdf5(filename)
    assert isinstance(loaded.handler, NumpyHandler)
    # the warning names the handler the network got (the default handler)
    assert f'using {loaded.handler!r} instead' in str(caught[0].message)
    np.testing.assert_array_equal(loaded.get('parameters'), net.get('parameters'))


@pytest.mark.parametrize(
    'layer_type, exposed',
    [
        ('FullyConnected', 'W'),
        ('FullyConnected', 'bias'),
        ('Recurrent', 'W'),
        ('Lstm', 'Wz'),
        ('Lstm', 'bo'),
    ],
)
def test_gradients_of_exposed_parameters_include_the_consumers_deltas(
    layer_type, exposed
):
    """A Loss fed with '..parameters.X' adds deltas for X before the owner's
    backward pass, which may overwrite its gradients: the network adds them
    afterwards."""
    from brainstorm import layers

    inp, out = get_in_out_layers('classification', 3, 4)
    hidden = getattr(layers, layer_type)(4, name='H')
    inp >> hidden >> out
    hidden - f'..parameters.{exposed}' >> Loss(importance=0.3, name='Penalty')
    net = Network.from_layer(hidden)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(0.5), seed=2)
    assert_gradients_match_finite_differences(net, small_data())


def test_deltas_for_an_exposed_recurrent_internal_reach_the_parameters():
    from brainstorm.layers import L2Decay

    inp, out = get_in_out_layers('classification', 3, 4)
    hidden = Recurrent(4, name='H')
    inp >> hidden >> out
    penalty = L2Decay(name='Penalty')
    hidden - '..internals.Ha' >> penalty
    penalty - 'loss' >> Loss(name='PenaltyLoss')
    net = Network.from_layer(hidden)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(0.5), seed=2)
    assert_gradients_match_finite_differences(net, small_data())


def test_exposing_an_internal_without_delta_support_warns():
    from brainstorm.layers import L2Decay, Lstm

    inp, out = get_in_out_layers('classification', 3, 4)
    hidden = Lstm(4, name='H')
    inp >> hidden >> out
    penalty = L2Decay(name='Penalty')
    hidden - '..internals.Za' >> penalty
    penalty - 'loss' >> Loss(name='PenaltyLoss')
    with pytest.warns(RuntimeWarning, match=r"Lstm 'H'.*'Za'.*ignored"):
        Network.from_layer(hidden)


def _first_layer_net(first):
    inp, out = get_in_out_layers('classification', 3, 4)
    net = Network.from_layer(
        inp >> first >> FullyConnected(6, activation='tanh', name='Hid') >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(0.5), seed=1)
    return net


@pytest.mark.parametrize('first', ['FullyConnected', 'Recurrent', 'Lstm'])
def test_backward_without_input_deltas_keeps_gradients(first):
    from brainstorm import layers

    net = _first_layer_net(getattr(layers, first)(5, name='First'))
    net.provide_external_data(small_data())
    net.forward_pass(training_pass=True)
    net.backward_pass()
    gradients = net.get('gradients')
    data_deltas = net.get('Input.output_deltas.default')
    assert np.abs(data_deltas).max() > 1e-6
    net.backward_pass(input_deltas=False)
    np.testing.assert_array_equal(net.get('gradients'), gradients)
    np.testing.assert_array_equal(net.get('Input.output_deltas.default'), 0)
    assert net.layers['First'].skip_input_deltas == frozenset()
    net.backward_pass()
    np.testing.assert_array_equal(net.get('Input.output_deltas.default'), data_deltas)


def test_only_inputs_fed_by_the_data_alone_are_skipped():
    inp, out = get_in_out_layers('classification', 3, 4)
    hid = FullyConnected(3, name='Hid')
    mixed = FullyConnected(4, name='Mixed')
    inp >> hid >> mixed
    inp >> mixed  # Mixed's input concatenates Hid's output and the data
    net = Network.from_layer(mixed >> out)
    assert net._data_fed_inputs['Hid'] == frozenset({'default'})
    assert net._data_fed_inputs['Mixed'] == frozenset()
    assert net._data_fed_inputs['Output'] == frozenset({'targets'})


def test_gradients_their_layers_overwrite_are_not_zeroed_first():
    net = small_net()  # Recurrent adds into its gradients, Hid overwrites
    net.provide_external_data(small_data())
    net.forward_pass(training_pass=True)
    net.backward_pass()
    expected = net.get('gradients')
    skipped = net.buffer_manager._constant_clear
    hid = net.layout['Hid']['gradients']
    rnn = net.layout['Rnn']['gradients']

    def cleared(node):
        a, b = node['@slice']
        return any(s <= a and b <= e for s, e in skipped)

    assert not cleared(hid['W']) and not cleared(hid['bias'])
    assert cleared(rnn['W']) and cleared(rnn['R'])
    net.handler.fill(net.buffer.gradients, np.nan)
    net.backward_pass()
    np.testing.assert_array_equal(net.get('gradients'), expected)


class _ColumnsHandler(NumpyHandler):
    """A NumpyHandler that keeps convolution columns only if told to."""

    def __init__(self, keeps: bool):
        super().__init__(np.float64)
        self.keeps = keeps

    def keeps_conv_columns(self, out_cells: int) -> bool:
        return self.keeps


def _conv_net():
    from brainstorm.layers import Convolution2D, Input, Loss

    inp = Input({'default': ('T', 'B', 6, 5, 2)})
    return Network.from_layer(
        inp
        >> Convolution2D(3, (3, 3), padding=1, activation='tanh', name='Conv')
        >> Loss(name='Loss')
    )


def _run(net):
    net.provide_external_data(
        {'default': np.random.RandomState(3).randn(2, 3, 6, 5, 2)}
    )
    net.forward_pass(training_pass=True)
    net.backward_pass()
    return net.get('Conv.outputs.default'), net.get('gradients')


def test_workspaces_follow_the_handler_the_network_runs_on():
    """Convolution2D's 'columns' workspace exists only on a handler that
    keeps conv columns, also after set_handler moves the network, and the
    parameters, outputs and gradients do not depend on it."""
    net = _conv_net()
    net.set_handler(_ColumnsHandler(False))
    assert 'columns' not in net.buffer['Conv'].internals
    net.initialize(Gaussian(0.5), seed=2)
    params = net.get('parameters')
    without = _run(net)
    net.set_handler(_ColumnsHandler(True))
    assert 'columns' in net.buffer['Conv'].internals
    assert 'columns' in net.layers['Conv'].internal_shapes
    np.testing.assert_array_equal(net.get('parameters'), params)
    with_columns = _run(net)
    assert np.abs(net.get('Conv.internals.columns')).max() > 0
    for a, b in zip(without, with_columns):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    net.set_handler(_ColumnsHandler(False))
    assert 'columns' not in net.buffer['Conv'].internals
    np.testing.assert_array_equal(net.get('parameters'), params)
    for a, b in zip(without, _run(net)):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)


def test_a_network_created_with_a_handler_gets_its_workspaces():
    from brainstorm.structure.buffers import BufferManager
    from brainstorm.structure.layout import create_layout

    net = _conv_net()
    layers = net.layers
    for keeps in (True, False):
        for layer in layers.values():
            layer.use_workspaces_of(_ColumnsHandler(False))
        manager = BufferManager(create_layout(layers), _ColumnsHandler(False))
        made = Network(
            layers, manager, net.architecture, handler=_ColumnsHandler(keeps)
        )
        assert ('columns' in made.buffer['Conv'].internals) is keeps
