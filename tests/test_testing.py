"""brainstorm.testing catches the layer bugs it is meant to catch."""

from collections import OrderedDict

import pytest

from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.testing import LayerTestError, instantiate_layer, run_layer_tests

SPEC = {'time_steps': 2, 'batch_size': 2}


class CopyLayerImpl(Layer):
    """y = x, correct."""
    expected_inputs = {'default': StructureTemplate('T', 'B', '...')}

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        return (OrderedDict(default=s), OrderedDict(),
                OrderedDict(tmp=BufferStructure(*s.shape,
                                                is_backward_only=True)))

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h = self.handler
        _h.copy_to(buffers.output_deltas.default, buffers.internals.tmp)
        _h.add_tt(buffers.input_deltas.default, buffers.internals.tmp,
                  buffers.input_deltas.default)


class StaleBackwardLayerImpl(CopyLayerImpl):
    """Reads its backward internal before writing it."""

    def backward_pass(self, buffers):
        _h = self.handler
        tmp = buffers.internals.tmp
        _h.add_tt(tmp, buffers.output_deltas.default, tmp)
        _h.add_tt(buffers.input_deltas.default, tmp,
                  buffers.input_deltas.default)


class OverwritingLayerImpl(CopyLayerImpl):
    """Overwrites its input deltas instead of adding to them."""

    def backward_pass(self, buffers):
        self.handler.copy_to(buffers.output_deltas.default,
                             buffers.input_deltas.default)


class StaleForwardLayerImpl(CopyLayerImpl):
    """Accumulates into its output instead of writing it."""

    def forward_pass(self, buffers, training_pass=True):
        y = buffers.outputs.default
        self.handler.add_tt(y, buffers.inputs.default, y)


def test_a_correct_layer_passes():
    run_layer_tests(instantiate_layer(CopyLayerImpl, {'default': (3,)}), SPEC)


@pytest.mark.parametrize('layer_class, message', [
    (StaleBackwardLayerImpl, 'previous contents of backward internals'),
    (OverwritingLayerImpl, 'overwritten instead of added'),
    (StaleForwardLayerImpl, 'does not match finite differences'),
])
def test_buggy_layers_fail_with_a_named_error(layer_class, message):
    layer = instantiate_layer(layer_class, {'default': (3,)})
    with pytest.raises(LayerTestError, match=message) as info:
        run_layer_tests(layer, SPEC)
    assert layer_class.__name__ in str(info.value)
