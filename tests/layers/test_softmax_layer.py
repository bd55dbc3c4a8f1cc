"""Softmax: normalised exponentials over the last feature axis."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.layers import FullyConnected, Input, Softmax
from brainstorm.layers.softmax_layer import SoftmaxLayerImpl
from tests.layers.layer_specs_misc import random_data, run_layer
from tests.layers.layer_specs_modern import network_round_trips


def _softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_public_name():
    assert bs.layers.Softmax is Softmax
    assert Softmax(name='P').layer.layer_type == 'Softmax'


@pytest.mark.parametrize('features', [(5,), (2, 3), (3, 2, 4)])
def test_forward_and_backward_match_numpy(features):
    x = random_data(0, 3, 2, *features) * 4
    dy = random_data(1, 3, 2, *features)
    result = run_layer(
        SoftmaxLayerImpl,
        {'default': x},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    y = _softmax(x)
    np.testing.assert_allclose(result.outputs['default'], y, rtol=1e-12)
    np.testing.assert_allclose(result.outputs['default'].sum(axis=-1), 1.0)
    expected = y * (dy - (dy * y).sum(axis=-1, keepdims=True))
    np.testing.assert_allclose(result.input_deltas['default'], 1 + expected, rtol=1e-10)


def test_large_inputs_stay_finite():
    x = np.array([[[1000.0, 0.0, -1000.0]]])
    result = run_layer(SoftmaxLayerImpl, {'default': x})
    np.testing.assert_allclose(result.outputs['default'], [[[1.0, 0.0, 0.0]]])


def test_in_a_network_with_round_trips(tmp_path):
    inp = Input({'default': ('T', 'B', 3)})
    inp >> FullyConnected(4, activation='linear', name='Logits') >> Softmax(name='P')
    net = bs.Network.from_layer(inp)
    outputs = network_round_trips(net, {'default': random_data(2, 4, 2, 3)}, tmp_path)
    np.testing.assert_allclose(outputs['P'], _softmax(outputs['Logits']), rtol=1e-12)


def test_arguments_are_refused_naming_the_layer():
    from brainstorm.utils import LayerValidationError

    with pytest.raises(LayerValidationError, match=r"Softmax 'S'.*unexpected.*axis"):
        bs.structure.construction.ConstructionWrapper.create(
            SoftmaxLayerImpl, name='S', axis=1
        )
