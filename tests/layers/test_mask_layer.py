"""Mask: ``y = x * mask`` with a full or broadcast mask."""

import numpy as np
import pytest

from brainstorm.layers import Mask
from brainstorm.layers.mask_layer import MaskLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_a_mask_layer():
    assert Mask(name='M').layer.layer_type == 'Mask'


@pytest.mark.parametrize(
    'features, mask_features',
    [
        ((3,), (3,)),
        ((3,), (1,)),
        ((1,), (1,)),
        ((2, 3), (2, 3)),
        ((2, 3), (2, 1)),
        ((2, 3), (1,)),
        ((2, 2, 3), (2, 2, 1)),
        ((2, 2, 3), (1,)),
    ],
)
def test_forward_and_backward_match_numpy(features, mask_features):
    x = random_data(0, 3, 2, *features)
    dy = random_data(1, 3, 2, *features)
    rnd = np.random.RandomState(2)
    mask = rnd.randint(0, 2, (3, 2) + mask_features).astype(float)
    if mask_features == (1,) and len(features) > 1:
        broadcast = mask.reshape((3, 2) + (1,) * len(features))
    else:
        broadcast = mask
    result = run_layer(
        MaskLayerImpl,
        {'default': x, 'mask': mask},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    np.testing.assert_array_equal(result.outputs['default'], x * broadcast)
    np.testing.assert_allclose(
        result.input_deltas['default'], 1 + dy * broadcast, rtol=1e-12
    )
    # the mask gets no deltas: its delta buffer keeps the pre-filled value
    np.testing.assert_array_equal(result.input_deltas['mask'], np.ones_like(mask))


@pytest.mark.parametrize('mask_features', [(2,), (3, 1), (2, 3, 1), (1, 3)])
def test_other_mask_shapes_are_rejected(mask_features):
    with pytest.raises(
        LayerValidationError,
        match=r"Mask 'Mask': the features of input 'mask' "
        r'must be \(2, 3\), \(2, 1\) or \(1,\)',
    ):
        instantiate_layer(MaskLayerImpl, {'default': (2, 3), 'mask': mask_features})


def test_output_has_the_shape_of_the_input():
    layer = instantiate_layer(MaskLayerImpl, {'default': (2, 3), 'mask': (1,)})
    assert layer.out_shapes['default'].shape == ('T', 'B', 2, 3)
