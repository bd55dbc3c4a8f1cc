"""SigmoidCE: sigmoid predictions with elementwise cross-entropy."""

import numpy as np
import pytest

from brainstorm.layers import SigmoidCE
from brainstorm.layers.sigmoid_ce_layer import SigmoidCELayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def reference(x, t):
    p = 1 / (1 + np.exp(-x))
    loss = -(
        t * np.log(np.clip(p, 1e-6, 1)) + (1 - t) * np.log(np.clip(1 - p, 1e-6, 1))
    )
    return p, loss


def test_constructor_builds_a_sigmoid_ce_layer():
    assert SigmoidCE(name='Out').layer.layer_type == 'SigmoidCE'


@pytest.mark.parametrize('features', [(4,), (2, 3)])
def test_forward_and_backward_match_numpy(features):
    shape = (3, 2) + features
    x = random_data(0, *shape) * 2
    t = np.random.RandomState(1).uniform(0, 1, shape)
    dloss = random_data(2, *shape)
    result = run_layer(
        SigmoidCELayerImpl,
        {'default': x, 'targets': t},
        output_deltas={'loss': dloss, 'predictions': random_data(3, *shape)},
        prefill_deltas=1.0,
    )
    p, loss = reference(x, t)
    np.testing.assert_allclose(result.outputs['predictions'], p, rtol=1e-12)
    np.testing.assert_allclose(result.outputs['loss'], loss, rtol=1e-10)
    # deltas arriving at predictions are ignored
    np.testing.assert_allclose(
        result.input_deltas['default'], 1 + dloss * (p - t), rtol=1e-10
    )
    np.testing.assert_array_equal(result.input_deltas['targets'], np.ones(shape))


def test_extreme_inputs_give_the_clipped_loss():
    x = np.array([[[-50.0, -20.0, 0.0, 20.0, 50.0]]])
    t = np.array([[[1.0, 0.0, 0.5, 1.0, 0.0]]])
    result = run_layer(SigmoidCELayerImpl, {'default': x, 'targets': t})
    _, expected = reference(x, t)
    np.testing.assert_allclose(result.outputs['loss'], expected, rtol=1e-6)
    assert result.outputs['loss'].max() <= -np.log(1e-6) + 1e-12


def test_targets_must_have_the_input_features():
    with pytest.raises(
        LayerValidationError,
        match=r"SigmoidCE 'SigmoidCE': targets must have the "
        r'same features',
    ):
        instantiate_layer(SigmoidCELayerImpl, {'default': (3,), 'targets': (1,)})


def test_output_and_internal_shapes():
    layer = instantiate_layer(
        SigmoidCELayerImpl, {'default': (2, 3), 'targets': (2, 3)}
    )
    assert list(layer.out_shapes) == ['predictions', 'loss']
    assert layer.out_shapes['loss'].shape == ('T', 'B', 2, 3)
    assert list(layer.internal_shapes) == ['dcee']
    assert layer.internal_shapes['dcee'].is_backward_only
