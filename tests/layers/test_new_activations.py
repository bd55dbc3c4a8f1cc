"""The activations added to every layer ('relu', 'softplus', 'leaky_rel')
and 'gelu', which only Elementwise takes."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import ACTIVATIONS
from brainstorm.handlers.base_handler import NEEDS_INPUT
from brainstorm.layers import Elementwise, FullyConnected, Input, Lstm, Recurrent
from brainstorm.layers.elementwise_layer import ElementwiseLayerImpl
from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.testing import get_test_configurations, instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer
from tests.layers.layer_specs_modern import network_round_trips

FORMULAS = {
    'softplus': lambda x: np.log1p(np.exp(x)),
    'leaky_rel': lambda x: np.where(x > 0, x, 0.01 * x),
    'gelu': lambda x: (
        0.5 * x * (1 + np.tanh(0.7978845608028654 * (x + 0.044715 * x**3)))
    ),
    'relu': lambda x: np.maximum(x, 0),
}


@pytest.mark.parametrize('name', sorted(FORMULAS))
def test_elementwise_computes_the_formula(name):
    x = random_data(0, 3, 2, 4) * 3
    result = run_layer(
        ElementwiseLayerImpl, {'default': x}, kwargs={'activation': name}
    )
    np.testing.assert_allclose(result.outputs['default'], FORMULAS[name](x), rtol=1e-12)


def test_gelu_is_within_1e3_of_the_exact_gelu():
    from math import erf

    x = np.linspace(-6, 6, 121).reshape(1, 1, -1)
    exact = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / np.sqrt(2))))(x)
    result = run_layer(
        ElementwiseLayerImpl, {'default': x}, kwargs={'activation': 'gelu'}
    )
    assert np.abs(result.outputs['default'] - exact).max() < 1e-3


def test_relu_is_rel_and_the_architecture_keeps_the_spelling(tmp_path):
    layer = instantiate_layer(
        FullyConnectedLayerImpl, {'default': (3,)}, size=2, activation='relu'
    )
    assert layer.activation == 'rel'
    inp = Input({'default': ('T', 'B', 3)})
    (
        inp
        >> FullyConnected(2, activation='relu', name='Hid')
        >> Elementwise('relu', name='Act')
    )
    net = bs.Network.from_layer(inp)
    assert net.architecture['Hid']['activation'] == 'relu'
    outputs = network_round_trips(net, {'default': random_data(1, 3, 2, 3)}, tmp_path)
    assert (outputs['Hid'] >= 0).all() and (outputs['Hid'] == 0).any()


@pytest.mark.parametrize('name', ['softplus', 'leaky_rel', 'relu'])
def test_every_activation_layer_accepts_the_new_names(name):
    for make in (
        lambda: FullyConnected(3, activation=name),
        lambda: Recurrent(3, activation=name),
        lambda: Lstm(3, activation=name),
        lambda: Elementwise(name),
    ):
        assert make().layer.layer_kwargs['activation'] == name


@pytest.mark.parametrize(
    'make, layer',
    [
        (
            lambda: FullyConnected(3, activation='gelu', name='Hid'),
            "FullyConnected 'Hid'",
        ),
        (lambda: Recurrent(3, activation='gelu', name='Rec'), "Recurrent 'Rec'"),
    ],
)
def test_gelu_is_refused_outside_elementwise_saying_where_it_works(make, layer):
    with pytest.raises(LayerValidationError) as info:
        make()
    message = str(info.value)
    assert layer in message and 'activation' in message, message
    assert "'gelu' only in Elementwise" in message and "'gelu'" in message


def test_unknown_names_list_the_valid_ones():
    with pytest.raises(LayerValidationError) as info:
        Elementwise('swish', name='E')
    message = str(info.value)
    assert "Elementwise 'E'" in message and 'swish' in message
    for name in ACTIVATIONS + ('relu',):
        assert repr(name) in message


def test_test_configurations_cover_every_activation_all_layers_take():
    covered = {c['activation'] for c in get_test_configurations()}
    assert covered == set(ACTIVATIONS) - set(NEEDS_INPUT)


def _cpu_handlers():
    from brainstorm.handlers import NumpyHandler
    from brainstorm.handlers.onednn import OneDnnHandler, onednn_available

    handlers = [NumpyHandler(np.float32), NumpyHandler(np.float64)]
    if onednn_available()[0]:
        handlers.append(OneDnnHandler(np.float32))
    return handlers


@pytest.mark.parametrize('handler', _cpu_handlers(), ids=repr)
def test_gelu_and_its_derivative_are_their_limits_for_huge_inputs(handler):
    """x**2 overflowed from |x| ~ 2e19 (float32) or 1e154 (float64): the
    derivative was inf * 0 = NaN there, and the forward pass warned."""
    big = float(np.finfo(handler.dtype).max)
    x = np.array([-big, -2e19, -1e3, 1e3, 2e19, big, -3.0, 0.5], handler.dtype)
    y, dx = np.zeros_like(x), np.zeros_like(x)
    with np.errstate(all='raise'):
        handler.gelu(x, y)
        handler.gelu_deriv(x, y, np.ones_like(x), dx)
    np.testing.assert_array_equal(y[:6], np.concatenate([np.zeros(3), x[3:6]]))
    np.testing.assert_array_equal(dx[:6], [0, 0, 0, 1, 1, 1])
    assert np.isfinite(y[6:]).all() and np.isfinite(dx[6:]).all()
    # unchanged where nothing overflows: the formula
    np.testing.assert_allclose(
        y[6:], FORMULAS['gelu'](x[6:].astype(float)), rtol=1e-4, atol=1e-7
    )
