"""GlobalPooling: mean or maximum over all positions of each channel."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.layers import Convolution2D, GlobalPooling, Input
from brainstorm.layers.global_pooling_layer import GlobalPoolingLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer
from tests.layers.layer_specs_modern import network_round_trips


def test_public_name():
    assert bs.layers.GlobalPooling is GlobalPooling
    assert GlobalPooling(name='Pool').layer.layer_type == 'GlobalPooling'


@pytest.mark.parametrize('features', [(3, 4, 2), (5, 3), (1, 1, 4)])
def test_average_and_its_deltas(features):
    x = random_data(0, 2, 3, *features)
    dy = random_data(1, 2, 3, features[-1])
    result = run_layer(
        GlobalPoolingLayerImpl,
        {'default': x},
        kwargs={'type': 'avg'},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    axes = tuple(range(2, x.ndim - 1))
    np.testing.assert_allclose(result.outputs['default'], x.mean(axis=axes), rtol=1e-12)
    count = int(np.prod(features[:-1]))
    spread = dy.reshape(2, 3, *(1,) * len(axes), features[-1]) / count
    np.testing.assert_allclose(
        result.input_deltas['default'], 1 + np.broadcast_to(spread, x.shape), rtol=1e-12
    )


@pytest.mark.parametrize('features', [(3, 4, 2), (5, 3)])
def test_maximum_routes_deltas_to_the_maximum(features):
    x = random_data(2, 2, 3, *features)
    dy = random_data(3, 2, 3, features[-1])
    result = run_layer(
        GlobalPoolingLayerImpl,
        {'default': x},
        kwargs={'type': 'max'},
        output_deltas={'default': dy},
    )
    axes = tuple(range(2, x.ndim - 1))
    y = x.max(axis=axes)
    np.testing.assert_array_equal(result.outputs['default'], y)
    is_max = x == y.reshape(2, 3, *(1,) * len(axes), features[-1])
    expected = np.where(is_max, dy.reshape(2, 3, *(1,) * len(axes), -1), 0.0)
    np.testing.assert_allclose(result.input_deltas['default'], expected, rtol=1e-12)


def test_default_type_is_avg():
    layer = instantiate_layer(GlobalPoolingLayerImpl, {'default': (2, 2, 3)})
    assert layer.type == 'avg'
    assert layer.out_shapes['default'].shape == ('T', 'B', 3)
    assert dict(layer.internal_shapes) == {}


@pytest.mark.parametrize('kind', ['avg', 'max'])
def test_after_a_convolution_with_round_trips(kind, tmp_path):
    inp = Input({'default': ('T', 'B', 5, 4, 2)})
    (
        inp
        >> Convolution2D(3, (3, 3), padding=1, name='Conv')
        >> GlobalPooling(kind, name='Pool')
    )
    net = bs.Network.from_layer(inp)
    x = random_data(4, 2, 3, 5, 4, 2)
    outputs = network_round_trips(net, {'default': x}, tmp_path)
    reduce = np.mean if kind == 'avg' else np.max
    np.testing.assert_allclose(
        outputs['Pool'], reduce(outputs['Conv'], axis=(2, 3)), rtol=1e-12
    )


@pytest.mark.parametrize('features', [(4,), (2, 2, 2, 2)])
def test_other_shapes_are_refused_naming_the_layer(features):
    with pytest.raises(LayerValidationError, match=r"GlobalPooling 'G'.*images"):
        instantiate_layer(GlobalPoolingLayerImpl, {'default': features}, name='G')


def test_bad_type_names_layer_and_argument():
    with pytest.raises(LayerValidationError, match=r"GlobalPooling 'G'.*type"):
        GlobalPooling('sum', name='G')
