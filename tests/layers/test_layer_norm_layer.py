"""LayerNorm: normalisation over the features of each position."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.layers import FullyConnected, Input, LayerNorm
from brainstorm.layers.layer_norm_layer import LayerNormLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data
from tests.layers.layer_specs_modern import network_round_trips


def _reference(x, gamma, beta, epsilon):
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    var = x.var(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * gamma + beta


def test_public_name():
    assert bs.layers.LayerNorm is LayerNorm
    assert LayerNorm(name='Norm').layer.layer_type == 'LayerNorm'


@pytest.mark.parametrize('features', [(4,), (2, 3), (3, 2, 2)])
@pytest.mark.parametrize('epsilon', [1e-5, 0.3])
def test_forward_matches_numpy(features, epsilon):
    from brainstorm.testing import set_up_layer

    x = random_data(0, 3, 2, *features) * 3 + 1
    gamma, beta = random_data(1, *features), random_data(2, *features)
    layer = instantiate_layer(
        LayerNormLayerImpl, {'default': features}, epsilon=epsilon
    )
    spec = {
        'time_steps': 3,
        'batch_size': 2,
        'default': x,
        'inits': {'gamma': gamma, 'beta': beta},
    }
    buffers, manager = set_up_layer(layer, spec)
    layer.forward_pass(buffers)
    got = manager.handler.get_numpy_copy(buffers.outputs.default)
    np.testing.assert_allclose(got, _reference(x, gamma, beta, epsilon), rtol=1e-10)
    assert layer.parameter_shapes['gamma'].shape == features


def test_positions_are_independent_of_each_other():
    """A constant (e.g. padded, all-zero) position gives beta, finite."""
    from brainstorm.testing import set_up_layer

    x = random_data(0, 2, 2, 3)
    x[1, 1] = 0.0
    layer = instantiate_layer(LayerNormLayerImpl, {'default': (3,)})
    spec = {
        'time_steps': 2,
        'batch_size': 2,
        'default': x,
        'inits': {'gamma': 2.0, 'beta': 0.5},
    }
    buffers, manager = set_up_layer(layer, spec)
    layer.forward_pass(buffers)
    got = manager.handler.get_numpy_copy(buffers.outputs.default)
    np.testing.assert_allclose(got[1, 1], 0.5)
    np.testing.assert_allclose(got[0], _reference(x, 2.0, 0.5, 1e-5)[0], rtol=1e-10)


def test_in_a_network_with_description_and_hdf5_round_trips(tmp_path):
    inp = Input({'default': ('T', 'B', 2, 3)})
    inp >> LayerNorm(name='Norm') >> FullyConnected(2, name='Out')
    net = bs.Network.from_layer(inp)
    x = random_data(3, 4, 2, 2, 3)
    outputs = network_round_trips(net, {'default': x}, tmp_path)
    gamma = net.get('Norm.parameters.gamma')
    beta = net.get('Norm.parameters.beta')
    np.testing.assert_allclose(
        outputs['Norm'], _reference(x, gamma, beta, 1e-5), rtol=1e-10
    )


@pytest.mark.parametrize('epsilon', [0, -1e-3, 'x', float('inf'), float('nan')])
def test_bad_epsilon_is_refused_naming_layer_and_argument(epsilon):
    with pytest.raises(LayerValidationError, match=r"LayerNorm 'N'.*epsilon"):
        LayerNorm(epsilon=epsilon, name='N')
