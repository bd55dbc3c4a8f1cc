"""BinomialCrossEntropy: cross-entropy of probabilities, summed per row."""

import numpy as np
import pytest

from brainstorm.layers import BinomialCrossEntropy
from brainstorm.layers.binomial_cross_entropy_layer import (
    BinomialCrossEntropyLayerImpl,
)
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def reference_loss(y, t):
    axes = tuple(range(2, y.ndim))
    elementwise = t * np.log(np.clip(y, 1e-6, 1)) + (1 - t) * np.log(
        np.clip(1 - y, 1e-6, 1)
    )
    return -elementwise.sum(axis=axes)[..., None]


def reference_delta(y, t, dout):
    dout = dout.reshape(dout.shape[:2] + (1,) * (y.ndim - 2))
    return dout * (y - t) / np.clip(y - y**2, 1e-6, 1)


def test_constructor_builds_the_layer():
    assert BinomialCrossEntropy().layer.layer_type == 'BinomialCrossEntropy'


@pytest.mark.parametrize('features', [(1,), (4,), (2, 3), (2, 2, 2)])
def test_forward_and_backward_match_numpy(features):
    # Brainstorm 0.5's backward worked only for 1-D features
    shape = (3, 2) + features
    rnd = np.random.RandomState(0)
    y = rnd.uniform(0.05, 0.95, shape)
    t = rnd.uniform(0, 1, shape)
    dout = random_data(1, 3, 2, 1)
    result = run_layer(
        BinomialCrossEntropyLayerImpl,
        {'default': y, 'targets': t},
        output_deltas={'default': dout},
        prefill_deltas=1.0,
    )
    np.testing.assert_allclose(
        result.outputs['default'], reference_loss(y, t), rtol=1e-10
    )
    np.testing.assert_allclose(
        result.input_deltas['default'], 1 + reference_delta(y, t, dout), rtol=1e-10
    )
    np.testing.assert_array_equal(result.input_deltas['targets'], np.ones(shape))
    np.testing.assert_array_equal(result.output_deltas['default'], dout)


def test_certain_predictions_are_clipped_and_finite():
    y = np.array([[[0.0, 1.0, 1.0, 0.0]]])
    t = np.array([[[0.0, 1.0, 0.0, 1.0]]])
    result = run_layer(
        BinomialCrossEntropyLayerImpl,
        {'default': y, 'targets': t},
        output_deltas={'default': np.ones((1, 1, 1))},
    )
    np.testing.assert_allclose(
        result.outputs['default'], reference_loss(y, t), rtol=1e-12
    )
    np.testing.assert_allclose(
        result.input_deltas['default'], reference_delta(y, t, np.ones((1, 1, 1)))
    )


def test_targets_must_have_the_input_features():
    with pytest.raises(
        LayerValidationError,
        match=r"BinomialCrossEntropy 'BinomialCrossEntropy': "
        r'targets must have the same features',
    ):
        instantiate_layer(
            BinomialCrossEntropyLayerImpl, {'default': (2, 3), 'targets': (6,)}
        )


def test_output_and_internal_shapes():
    layer = instantiate_layer(
        BinomialCrossEntropyLayerImpl, {'default': (2, 3), 'targets': (2, 3)}
    )
    assert layer.out_shapes['default'].shape == ('T', 'B', 1)
    assert list(layer.internal_shapes) == ['cee', 'ceed']
    assert layer.internal_shapes['ceed'].is_backward_only
    assert not layer.internal_shapes['cee'].is_backward_only
