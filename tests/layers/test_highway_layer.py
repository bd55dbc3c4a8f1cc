"""Highway: ``y = T * H + (1 - T) * x``."""

import numpy as np
import pytest

from brainstorm.layers import Highway
from brainstorm.layers.highway_layer import HighwayLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_a_highway_layer():
    assert Highway(name='Hw').layer.layer_type == 'Highway'


@pytest.mark.parametrize('features', [(4,), (2, 3)])
def test_forward_and_backward_match_numpy(features):
    shape = (3, 2) + features
    H, x, dy = (random_data(i, *shape) for i in range(3))
    T = np.random.RandomState(3).uniform(0, 1, shape)
    result = run_layer(HighwayLayerImpl, {'H': H, 'T': T, 'x': x},
                       output_deltas={'default': dy}, prefill_deltas=1.0)
    np.testing.assert_allclose(result.outputs['default'],
                               T * H + (1 - T) * x, rtol=1e-12, atol=1e-14)
    deltas = result.input_deltas
    np.testing.assert_allclose(deltas['H'], 1 + T * dy, rtol=1e-12)
    np.testing.assert_allclose(deltas['T'], 1 + (H - x) * dy, rtol=1e-12)
    np.testing.assert_allclose(deltas['x'], 1 + (1 - T) * dy, rtol=1e-12)
    # the output deltas serve as scratch but are restored exactly
    np.testing.assert_array_equal(result.output_deltas['default'], dy)


def test_output_has_the_shape_of_x():
    layer = instantiate_layer(HighwayLayerImpl,
                              {'H': (2, 5), 'T': (2, 5), 'x': (2, 5)})
    assert layer.out_shapes['default'].shape == ('T', 'B', 2, 5)


@pytest.mark.parametrize('shapes', [
    {'H': (3,), 'T': (3,), 'x': (4,)},
    {'H': (3,), 'T': (1,), 'x': (3,)},
    {'H': (2, 3), 'T': (3, 2), 'x': (2, 3)},
])
def test_inputs_of_different_shapes_are_rejected(shapes):
    with pytest.raises(LayerValidationError,
                       match=r"Highway 'Highway': inputs H, T and x must have"
                             r" identical shapes"):
        instantiate_layer(HighwayLayerImpl, shapes)


def test_missing_input_is_rejected():
    with pytest.raises(LayerValidationError, match=r"input 'T' is not "
                                                   r'connected'):
        instantiate_layer(HighwayLayerImpl, {'H': (3,), 'x': (3,)})
