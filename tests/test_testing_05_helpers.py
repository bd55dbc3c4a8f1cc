"""Brainstorm 0.5's helper forms in brainstorm.testing (SPEC 5.3).

0.5's ``brainstorm.tests.helpers`` had ``HANDLER`` and
``run_deltas_test(layer, specs, inputs_name, outputs_name)`` /
``run_gradients_test(layer, specs, parameter_name, outputs_name)``
returning True or False; a 0.5 layer test ported with only its import
changed called them so and failed with a TypeError.
"""

import numpy as np
import pytest

from brainstorm.handlers import DebugHandler
from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.testing import (
    HANDLER,
    LayerTestSpecError,
    get_test_configurations,
    instantiate_layer,
    run_deltas_test,
    run_gradients_test,
)
from tests.test_testing import CopyLayerImpl


class HalfDeltasLayerImpl(CopyLayerImpl):
    """y = x, but its input deltas are half what they should be."""

    def backward_pass(self, buffers):
        _h = self.handler
        _h.mult_st(0.5, buffers.output_deltas.default, buffers.internals.tmp)
        _h.add_tt(
            buffers.input_deltas.default,
            buffers.internals.tmp,
            buffers.input_deltas.default,
        )


def test_the_05_handler_is_the_test_handler():
    assert isinstance(HANDLER, DebugHandler) and HANDLER.dtype == np.float64


@pytest.mark.parametrize('spec', list(get_test_configurations()))
def test_05_tests_of_a_correct_layer_pass(spec):
    """As 0.5's test_layers.py called them, with its configurations."""
    layer = instantiate_layer(
        FullyConnectedLayerImpl, {'default': (3,)}, size=2, activation='linear'
    )
    assert run_deltas_test(layer, spec, 'default', 'default') is True
    for parameter in ('W', 'bias'):
        assert run_gradients_test(layer, spec, parameter, 'default') is True


def test_05_deltas_test_of_a_wrong_layer_returns_false(capsys):
    layer = instantiate_layer(HalfDeltasLayerImpl, {'default': (3,)})
    assert run_deltas_test(layer, {}, 'default', 'default') is False
    assert "the check of 'default' for the output 'default' failed" in (
        capsys.readouterr().out
    )


def test_05_tests_name_unknown_buffers():
    layer = instantiate_layer(FullyConnectedLayerImpl, {'default': (3,)}, size=2)
    with pytest.raises(LayerTestSpecError, match="'inputs' is not an input.*'default'"):
        run_deltas_test(layer, {}, 'inputs', 'default')
    with pytest.raises(LayerTestSpecError, match="'w' is not a parameter.*'W'"):
        run_gradients_test(layer, {}, 'w', 'default')
    with pytest.raises(LayerTestSpecError, match="'out' is not an output"):
        run_deltas_test(layer, {}, 'default', 'out')
