"""L2Decay: ``loss = 0.5 * sum_features x^2``."""

import numpy as np
import pytest

from brainstorm.layers import L2Decay
from brainstorm.layers.l2_decay_layer import L2DecayLayerImpl
from brainstorm.testing import instantiate_layer
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_the_layer():
    assert L2Decay().layer.layer_type == 'L2Decay'


@pytest.mark.parametrize('features', [(4,), (2, 3)])
def test_forward_and_backward_match_numpy(features):
    x = random_data(0, 3, 2, *features)
    dloss = random_data(1, 3, 2, 1)
    result = run_layer(
        L2DecayLayerImpl,
        {'default': x},
        output_deltas={'loss': dloss},
        prefill_deltas=1.0,
    )
    axes = tuple(range(2, x.ndim))
    np.testing.assert_allclose(
        result.outputs['loss'], 0.5 * (x**2).sum(axis=axes)[..., None], rtol=1e-12
    )
    per_row = dloss.reshape((3, 2) + (1,) * len(features))
    np.testing.assert_allclose(
        result.input_deltas['default'], 1 + x * per_row, rtol=1e-12
    )


def test_shapes_and_no_unused_internal():
    layer = instantiate_layer(L2DecayLayerImpl, {'default': (2, 3)})
    assert layer.out_shapes['loss'].shape == ('T', 'B', 1)
    # 0.5's unused backward internal 'dsq_activations' is not allocated
    assert list(layer.internal_shapes) == ['tmp']
