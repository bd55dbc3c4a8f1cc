"""NoOp: a copy forward, an added copy backward."""

import numpy as np

from brainstorm.layers import NoOp
from brainstorm.layers.noop_layer import NoOpLayerImpl
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_a_noop_layer():
    wrapper = NoOp(name='Junction')
    assert wrapper.layer.layer_type == 'NoOp'
    assert wrapper.layer.name == 'Junction'


def test_forward_copies_and_backward_adds_for_multidim_features():
    x = random_data(0, 3, 2, 2, 3)
    dy = random_data(1, 3, 2, 2, 3)
    result = run_layer(
        NoOpLayerImpl, {'default': x}, output_deltas={'default': dy}, prefill_deltas=0.5
    )
    np.testing.assert_array_equal(result.outputs['default'], x)
    np.testing.assert_allclose(result.input_deltas['default'], dy + 0.5)
    assert result.layer.out_shapes['default'].shape == ('T', 'B', 2, 3)
