"""DeltasScaling: identity forward, ``dx += factor * dy`` backward."""

import numpy as np
import pytest

from brainstorm.layers import DeltasScaling
from brainstorm.layers.deltas_scaling_layer import DeltasScalingLayerImpl
from brainstorm.structure.architecture import generate_architecture
from brainstorm.testing import (
    instantiate_layer,
    run_deltas_accumulate_test,
    run_stale_internals_test,
)
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def test_factor_is_required():
    with pytest.raises(
        LayerValidationError, match=r"DeltasScaling 'DS'.*factor is required"
    ):
        instantiate_layer(DeltasScalingLayerImpl, {'default': (3,)}, name='DS')


def test_factor_must_be_a_number():
    with pytest.raises(
        LayerValidationError, match=r"factor must be a finite float.*'big'"
    ):
        instantiate_layer(DeltasScalingLayerImpl, {'default': (3,)}, factor='big')


def test_constructor_records_the_factor_in_the_architecture():
    from brainstorm.layers import Input

    net_end = Input({'default': ('T', 'B', 3)}) >> DeltasScaling(-1.0, name='Rev')
    arch = generate_architecture(net_end)
    assert arch['Rev']['@type'] == 'DeltasScaling'
    assert arch['Rev']['factor'] == -1.0


@pytest.mark.parametrize('factor', [0.5, -2.0])
def test_forward_copies_and_backward_scales(factor):
    x = random_data(0, 2, 3, 2, 3)
    dy = random_data(1, 2, 3, 2, 3)
    result = run_layer(
        DeltasScalingLayerImpl,
        {'default': x},
        kwargs={'factor': factor},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    np.testing.assert_array_equal(result.outputs['default'], x)
    np.testing.assert_allclose(
        result.input_deltas['default'], 1.0 + factor * dy, rtol=1e-12
    )
    np.testing.assert_array_equal(result.output_deltas['default'], dy)


@pytest.mark.parametrize('factor', [0.5, -2.0])
def test_harness_invariants_other_than_finite_differences(factor):
    # the deltas deliberately differ from the true gradient by `factor`,
    # so only the accumulation and stale-buffer checks apply
    layer = instantiate_layer(DeltasScalingLayerImpl, {'default': (3,)}, factor=factor)
    spec = {'time_steps': 3, 'batch_size': 2}
    run_deltas_accumulate_test(layer, spec)
    run_stale_internals_test(layer, spec)
