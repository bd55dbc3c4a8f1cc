"""Lstm: SPEC parameters and internals, forward pass against plain NumPy
with a context, exact gradients with a context, contexts continuing a
sequence, initialization patterns, argument validation."""

import numpy as np
import pytest

from brainstorm.initializers import Gaussian
from brainstorm.layers import FullyConnected, Input, Lstm
from brainstorm.layers.lstm_layer import LstmLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_recurrent import (
    LSTM_INTERNALS,
    LSTM_PARAMETERS,
    gradient_error_with_context,
    lstm_reference,
    regression_data,
    regression_net,
)


def test_parameters_internals_and_outputs_follow_the_spec():
    layer = instantiate_layer(LstmLayerImpl, {'default': (2, 3)}, size=5)
    assert list(layer.parameter_shapes) == LSTM_PARAMETERS
    shapes = {n: s.shape for n, s in layer.parameter_shapes.items()}
    for gate in 'zifo':
        assert shapes['W' + gate] == (5, 6)
        assert shapes['R' + gate] == (5, 5)
        assert shapes['b' + gate] == (5,)
    for gate in 'ifo':
        assert shapes['p' + gate] == (1, 5)
    assert list(layer.internal_shapes) == LSTM_INTERNALS + [
        'd' + n for n in LSTM_INTERNALS
    ]
    for name, structure in layer.internal_shapes.items():
        assert structure.shape == ('T', 'B', 5)
        assert structure.context_size == 1
        assert structure.is_backward_only == name.startswith('d')
    out = layer.out_shapes['default']
    assert out.shape == ('T', 'B', 5) and out.context_size == 1


def test_size_defaults_to_the_flattened_input_size():
    layer = instantiate_layer(LstmLayerImpl, {'default': (2, 3)})
    assert layer.out_shapes['default'].shape == ('T', 'B', 6)
    assert layer.activation == 'tanh'


@pytest.mark.parametrize(
    'kwargs, match',
    [
        ({'size': -3}, 'size must be a positive int. Received: size=-3'),
        ({'size': 2.5}, 'size must be a positive int'),
        ({'size': 4, 'activation': 'swish'}, 'activation must be one of'),
        ({'size': 4, 'peepholes': False}, 'unexpected argument'),
    ],
)
def test_invalid_arguments_are_rejected(kwargs, match):
    with pytest.raises(LayerValidationError, match=match):
        instantiate_layer(LstmLayerImpl, {'default': (3,)}, name='Lstm1', **kwargs)


@pytest.mark.parametrize('activation', ['tanh', 'sigmoid', 'rel', 'linear', 'el'])
def test_forward_pass_matches_numpy_with_a_context(activation):
    T, B, size = 4, 3, 5
    layer = instantiate_layer(
        LstmLayerImpl, {'default': (2, 3)}, size=size, activation=activation
    )
    buffers, manager = set_up_layer(layer, {'time_steps': T, 'batch_size': B})
    h = manager.handler
    rnd = np.random.RandomState(3)
    y0, c0 = rnd.randn(B, size), rnd.randn(B, size)
    h.set_from_numpy(buffers.outputs.default[T], y0)
    h.set_from_numpy(buffers.internals.Ca[T], c0)
    layer.forward_pass(buffers)

    params = {n: h.get_numpy_copy(a) for n, a in buffers.parameters.items()}
    x = h.get_numpy_copy(buffers.inputs.default)
    y_ref, c_ref = lstm_reference(x, params, y0, c0, activation)
    y = h.get_numpy_copy(buffers.outputs.default)
    np.testing.assert_allclose(y[:T], y_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        h.get_numpy_copy(buffers.internals.Ca)[:T], c_ref, rtol=1e-10, atol=1e-12
    )
    # the context itself is left alone
    np.testing.assert_array_equal(y[T], y0)


def test_gradients_are_exact_with_a_context():
    # Brainstorm 0.5 used the zero delta slots dy[-1], dCa[-1] instead of
    # the context y[-1], Ca[-1] (and dIa for the pf term): wrong gradients
    # for Rz..Ro, pi and pf whenever a context was given
    net = regression_net(Lstm(4, name='Lstm'))
    net.initialize(Gaussian(0.5), seed=3)
    assert gradient_error_with_context(net) < 1e-7


def test_a_context_continues_a_sequence():
    net = regression_net(Lstm(4, name='Lstm'))
    net.initialize(Gaussian(0.5), seed=4)
    data = regression_data(6, 2)
    net.provide_external_data(data)
    net.forward_pass()
    full = net.get('Lstm.outputs.default')[:6]
    net.provide_external_data({k: v[:2] for k, v in data.items()})
    net.forward_pass()
    context = net.get_context()
    net.provide_external_data({k: v[2:] for k, v in data.items()})
    net.forward_pass(context=context)
    np.testing.assert_allclose(
        net.get('Lstm.outputs.default')[:4], full[2:], rtol=1e-12, atol=1e-14
    )


def test_initialize_pattern_reaches_exactly_the_forget_gate_bias():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    net = Network.from_layer(
        inp >> Lstm(4, name='Lstm') >> FullyConnected(2, name='Out')
    )
    net.initialize({'Lstm*': {'bf': 1.0}, 'default': 0.0})
    np.testing.assert_array_equal(net.get('Lstm.parameters.bf'), np.ones(4))
    for name in LSTM_PARAMETERS:
        if name != 'bf':
            assert not net.get(f'Lstm.parameters.{name}').any(), name
    assert net.get('parameters').sum() == 4.0


def test_backward_pass_leaves_forward_internals_alone():
    net = regression_net(Lstm(4, name='Lstm'))
    net.initialize(Gaussian(0.5), seed=5)
    net.provide_external_data(regression_data(3, 2))
    net.forward_pass()
    internals = {n: net.get(f'Lstm.internals.{n}') for n in LSTM_INTERNALS}
    net.backward_pass()
    for name, before in internals.items():
        np.testing.assert_array_equal(
            net.get(f'Lstm.internals.{name}'), before, err_msg=name
        )
