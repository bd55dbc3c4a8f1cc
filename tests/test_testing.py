"""brainstorm.testing catches the layer bugs it is meant to catch."""

from collections import OrderedDict

import pytest

from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.testing import LayerTestError, instantiate_layer, run_layer_tests
from brainstorm.utils import flatten_time

SPEC = {'time_steps': 2, 'batch_size': 2}


class CopyLayerImpl(Layer):
    """y = x, correct."""

    expected_inputs = {'default': StructureTemplate('T', 'B', '...')}

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        return (
            OrderedDict(default=s),
            OrderedDict(),
            OrderedDict(tmp=BufferStructure(*s.shape, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h = self.handler
        _h.copy_to(buffers.output_deltas.default, buffers.internals.tmp)
        _h.add_tt(
            buffers.input_deltas.default,
            buffers.internals.tmp,
            buffers.input_deltas.default,
        )


class StaleBackwardLayerImpl(CopyLayerImpl):
    """Reads its backward internal before writing it."""

    def backward_pass(self, buffers):
        _h = self.handler
        tmp = buffers.internals.tmp
        _h.add_tt(tmp, buffers.output_deltas.default, tmp)
        _h.add_tt(buffers.input_deltas.default, tmp, buffers.input_deltas.default)


class OverwritingLayerImpl(CopyLayerImpl):
    """Overwrites its input deltas instead of adding to them."""

    def backward_pass(self, buffers):
        self.handler.copy_to(
            buffers.output_deltas.default, buffers.input_deltas.default
        )


class StaleForwardLayerImpl(CopyLayerImpl):
    """Accumulates into its output instead of writing it."""

    def forward_pass(self, buffers, training_pass=True):
        y = buffers.outputs.default
        self.handler.add_tt(y, buffers.inputs.default, y)


class ScaleLayerImpl(Layer):
    """y = x * w per feature; overwrites its gradient, correctly."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 'F')}
    overwrites_gradients = True

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        n = s.feature_size
        return (
            OrderedDict(default=s),
            OrderedDict(w=BufferStructure(n)),
            OrderedDict(tmp=BufferStructure('T', 'B', n, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        x, y = buffers.inputs.default, buffers.outputs.default
        n = x.shape[2]
        self.handler.mult_mv(
            flatten_time(x), buffers.parameters.w.reshape((1, n)), flatten_time(y)
        )

    def _gradient(self, buffers, tmp, dw):
        self.handler.sum_t(tmp, 0, dw)

    def backward_pass(self, buffers):
        _h = self.handler
        x, dx = buffers.inputs.default, buffers.input_deltas.default
        dy, w = buffers.output_deltas.default, buffers.parameters.w
        n = x.shape[2]
        tmp = flatten_time(buffers.internals.tmp)
        _h.mult_add_mv(flatten_time(dy), w.reshape((1, n)), flatten_time(dx))
        _h.mult_tt(flatten_time(dy), flatten_time(x), tmp)
        self._gradient(buffers, tmp, buffers.gradients.w)


class FalselyOverwritingLayerImpl(ScaleLayerImpl):
    """Declares overwrites_gradients but adds into its gradient."""

    def _gradient(self, buffers, tmp, dw):
        scratch = flatten_time(buffers.outputs.default)[0]
        self.handler.sum_t(tmp, 0, scratch)
        self.handler.add_tt(dw, scratch, dw)


class CopyOrOverwriteLayerImpl(CopyLayerImpl):
    """Adds its input deltas, or overwrites them when asked to: correct."""

    can_overwrite_input_deltas = True

    def backward_pass(self, buffers):
        if 'default' in self.overwrite_input_deltas:
            self.handler.copy_to(
                buffers.output_deltas.default, buffers.input_deltas.default
            )
        else:
            super().backward_pass(buffers)


class FalselyOverwritingInputsLayerImpl(CopyLayerImpl):
    """Declares can_overwrite_input_deltas but always adds."""

    can_overwrite_input_deltas = True


class PartlyOverwritingInputsLayerImpl(CopyOrOverwriteLayerImpl):
    """Asked to overwrite, writes all but the last time step."""

    def backward_pass(self, buffers):
        if 'default' not in self.overwrite_input_deltas:
            super().backward_pass(buffers)
            return
        dy, dx = buffers.output_deltas.default, buffers.input_deltas.default
        self.handler.copy_to(dy[:-1], dx[:-1])
        self.handler.add_tt(dx[-1], dy[-1], dx[-1])


class FalselyOverwritingInternalsLayerImpl(StaleBackwardLayerImpl):
    """Declares overwrites_backward_internals but reads its internal first."""

    overwrites_backward_internals = True


class TwoInputsLayerImpl(Layer):
    """y = a + b; asked to overwrite any input's deltas, overwrites both."""

    expected_inputs = {
        'a': StructureTemplate('T', 'B', '...'),
        'b': StructureTemplate('T', 'B', '...'),
    }
    can_overwrite_input_deltas = True

    def setup(self, kwargs, in_shapes):
        return OrderedDict(default=in_shapes['a']), OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs
        self.handler.add_tt(x.a, x.b, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h, dy = self.handler, buffers.output_deltas.default
        for name in ('a', 'b'):
            dx = buffers.input_deltas[name]
            if self.overwrite_input_deltas:  # wrong: should test the name
                _h.copy_to(dy, dx)
            else:
                _h.add_tt(dx, dy, dx)


def test_a_correct_layer_passes():
    run_layer_tests(instantiate_layer(CopyLayerImpl, {'default': (3,)}), SPEC)
    run_layer_tests(instantiate_layer(ScaleLayerImpl, {'default': (3,)}), SPEC)
    run_layer_tests(
        instantiate_layer(CopyOrOverwriteLayerImpl, {'default': (3,)}), SPEC
    )


@pytest.mark.parametrize(
    'layer_class, message',
    [
        (StaleBackwardLayerImpl, 'previous contents of backward internals'),
        (OverwritingLayerImpl, 'overwritten instead of added'),
        (StaleForwardLayerImpl, 'does not match finite differences'),
        (FalselyOverwritingLayerImpl, 'or of the gradients'),
        (FalselyOverwritingInputsLayerImpl, 'declares can_overwrite_input_deltas'),
        (PartlyOverwritingInputsLayerImpl, 'declares can_overwrite_input_deltas'),
        (FalselyOverwritingInternalsLayerImpl, 'overwrites_backward_internals is'),
        (TwoInputsLayerImpl, "'b' were not added to"),
    ],
)
def test_buggy_layers_fail_with_a_named_error(layer_class, message):
    inputs = {'a': (3,), 'b': (3,)} if layer_class is TwoInputsLayerImpl else None
    layer = instantiate_layer(layer_class, inputs or {'default': (3,)})
    with pytest.raises(LayerTestError, match=message) as info:
        run_layer_tests(layer, SPEC)
    assert layer_class.__name__ in str(info.value)
