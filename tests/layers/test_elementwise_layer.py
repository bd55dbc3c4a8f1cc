"""Elementwise: ``y = f(x)`` for every activation."""

import numpy as np
import pytest

from brainstorm.layers import Elementwise
from brainstorm.layers.elementwise_layer import ElementwiseLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer

REFERENCE = {
    'sigmoid': (
        lambda x: 1 / (1 + np.exp(-x)),
        lambda x: np.exp(-x) / (1 + np.exp(-x)) ** 2,
    ),
    'tanh': (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
    'rel': (lambda x: np.maximum(x, 0), lambda x: (x > 0) * 1.0),
    'linear': (lambda x: x, np.ones_like),
    'el': (
        lambda x: np.where(x > 0, x, np.exp(x) - 1),
        lambda x: np.where(x > 0, 1.0, np.exp(x)),
    ),
}


def test_default_activation_is_rel():
    assert Elementwise().layer.layer_kwargs['activation'] == 'rel'
    layer = instantiate_layer(ElementwiseLayerImpl, {'default': (2,)})
    assert layer.activation == 'rel'


def test_unknown_activation_is_rejected():
    with pytest.raises(
        LayerValidationError,
        match=r"Elementwise 'Elementwise': activation must be"
        r".*'swish'",
    ):
        instantiate_layer(ElementwiseLayerImpl, {'default': (2,)}, activation='swish')


@pytest.mark.parametrize('activation', sorted(REFERENCE))
def test_matches_numpy_for_multidim_features(activation):
    f, f_deriv = REFERENCE[activation]
    x = random_data(0, 3, 2, 2, 3)
    dy = random_data(1, 3, 2, 2, 3)
    result = run_layer(
        ElementwiseLayerImpl,
        {'default': x},
        kwargs={'activation': activation},
        output_deltas={'default': dy},
        prefill_deltas=2.0,
    )
    np.testing.assert_allclose(result.outputs['default'], f(x), rtol=1e-12, atol=1e-15)
    np.testing.assert_allclose(
        result.input_deltas['default'], 2.0 + f_deriv(x) * dy, rtol=1e-10, atol=1e-12
    )
