"""L1Decay: ``loss = sum_features |x|``."""

import numpy as np
import pytest

from brainstorm.layers import L1Decay
from brainstorm.layers.l1_decay_layer import L1DecayLayerImpl
from brainstorm.testing import instantiate_layer
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_the_layer():
    assert L1Decay().layer.layer_type == 'L1Decay'


@pytest.mark.parametrize('features', [(4,), (2, 3)])
def test_forward_and_backward_match_numpy(features):
    x = random_data(0, 3, 2, *features)
    dloss = random_data(1, 3, 2, 1)
    result = run_layer(
        L1DecayLayerImpl,
        {'default': x},
        output_deltas={'loss': dloss},
        prefill_deltas=1.0,
    )
    axes = tuple(range(2, x.ndim))
    np.testing.assert_allclose(
        result.outputs['loss'], np.abs(x).sum(axis=axes)[..., None], rtol=1e-12
    )
    per_row = dloss.reshape((3, 2) + (1,) * len(features))
    np.testing.assert_allclose(
        result.input_deltas['default'], 1 + np.sign(x) * per_row, rtol=1e-12
    )


def test_shapes():
    layer = instantiate_layer(L1DecayLayerImpl, {'default': (2, 3)})
    assert list(layer.out_shapes) == ['loss']
    assert layer.out_shapes['loss'].shape == ('T', 'B', 1)
    assert layer.internal_shapes['tmp'].shape == ('T', 'B', 2, 3)
