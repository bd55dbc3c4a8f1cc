"""SquaredDifference: ``y = (x1 - x2)^2``."""

import numpy as np
import pytest

from brainstorm.layers import SquaredDifference
from brainstorm.layers.squared_difference_layer import (
    SquaredDifferenceLayerImpl,
)
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_the_layer():
    assert SquaredDifference().layer.layer_type == 'SquaredDifference'


@pytest.mark.parametrize('features', [(4,), (2, 3)])
def test_forward_and_backward_match_numpy(features):
    shape = (3, 2) + features
    a, b, dy = (random_data(i, *shape) for i in range(3))
    result = run_layer(
        SquaredDifferenceLayerImpl,
        {'inputs_1': a, 'inputs_2': b},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    np.testing.assert_allclose(result.outputs['default'], (a - b) ** 2, rtol=1e-12)
    np.testing.assert_allclose(result.internals['diff'], a - b, rtol=1e-12)
    np.testing.assert_allclose(
        result.input_deltas['inputs_1'], 1 + 2 * dy * (a - b), rtol=1e-12
    )
    np.testing.assert_allclose(
        result.input_deltas['inputs_2'], 1 - 2 * dy * (a - b), rtol=1e-12
    )


def test_backward_leaves_the_output_deltas_unchanged():
    # Brainstorm 0.5 doubled its output deltas in place
    a, b, dy = (random_data(i, 2, 3, 4) for i in range(3))
    result = run_layer(
        SquaredDifferenceLayerImpl,
        {'inputs_1': a, 'inputs_2': b},
        output_deltas={'default': dy},
    )
    np.testing.assert_array_equal(result.output_deltas['default'], dy)


def test_inputs_must_have_the_same_features():
    with pytest.raises(
        LayerValidationError,
        match=r"SquaredDifference 'SquaredDifference': inputs_1"
        r' and inputs_2 must have the same features',
    ):
        instantiate_layer(
            SquaredDifferenceLayerImpl, {'inputs_1': (3,), 'inputs_2': (4,)}
        )
