"""Merge: concatenation along the last axis."""

import numpy as np
import pytest

from brainstorm.layers import Merge
from brainstorm.layers.merge_layer import MergeLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_a_merge_layer():
    assert Merge(name='Cat').layer.layer_type == 'Merge'


@pytest.mark.parametrize(
    'features_1, features_2',
    [((2,), (3,)), ((4,), (4,)), ((2, 1), (2, 3)), ((3, 2, 1), (3, 2, 2))],
)
def test_forward_and_backward_match_numpy(features_1, features_2):
    a = random_data(0, 3, 2, *features_1)
    b = random_data(1, 3, 2, *features_2)
    expected = np.concatenate([a, b], axis=-1)
    dy = random_data(2, *expected.shape)
    result = run_layer(
        MergeLayerImpl,
        {'inputs_1': a, 'inputs_2': b},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    np.testing.assert_array_equal(result.outputs['default'], expected)
    n = a.shape[-1]
    np.testing.assert_allclose(
        result.input_deltas['inputs_1'], 1 + dy[..., :n], rtol=1e-12
    )
    np.testing.assert_allclose(
        result.input_deltas['inputs_2'], 1 + dy[..., n:], rtol=1e-12
    )


def test_batch_sized_inputs_give_a_batch_sized_output():
    a, b = random_data(0, 4, 2), random_data(1, 4, 3)
    result = run_layer(MergeLayerImpl, {'inputs_1': a, 'inputs_2': b}, time_sized=False)
    assert result.layer.out_shapes['default'].shape == ('B', 5)
    np.testing.assert_array_equal(
        result.outputs['default'], np.concatenate([a, b], axis=1)
    )


def test_output_shape_sums_the_last_dimensions():
    layer = instantiate_layer(MergeLayerImpl, {'inputs_1': (4, 2), 'inputs_2': (4, 5)})
    assert layer.out_shapes['default'].shape == ('T', 'B', 4, 7)


@pytest.mark.parametrize('shape_2', [(3, 5), (4, 5, 1), (5,)])
def test_other_dimensions_must_match(shape_2):
    with pytest.raises(
        LayerValidationError,
        match=r"Merge 'Merge': inputs_1 and inputs_2 must "
        r'match in all dimensions but the last',
    ):
        instantiate_layer(MergeLayerImpl, {'inputs_1': (4, 2), 'inputs_2': shape_2})


def test_buffer_types_must_match():
    with pytest.raises(
        LayerValidationError,
        match=r"Merge 'Merge': inputs_1 and inputs_2 must both"
        r' be time-sized.*batch-sized',
    ):
        instantiate_layer(MergeLayerImpl, {'inputs_1': (2,), 'inputs_2': ('B', 2)})
