"""DeltasScaling: identity forward, scaled deltas backward."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.layers.attributes import FloatIn, Kwarg
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def DeltasScaling(factor: float, name: str | None = None) -> ConstructionWrapper:
    """Copy forward, scale the deltas backward: ``y = x``, ``dx += factor * dy``.

    With a negative factor this is a gradient reversal layer.

    Args:
        factor: the (required) factor the deltas are multiplied with.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output of the same shape.
    """
    return ConstructionWrapper.create(DeltasScalingLayerImpl, name=name, factor=factor)


class DeltasScalingLayerImpl(Layer):
    """Implementation of :func:`DeltasScaling`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'factor': Kwarg(FloatIn(), description='factor applied to the deltas'),
    }

    def setup(self, kwargs, in_shapes):
        """Output ``default`` with the input's features; no parameters or internals."""
        self.factor = kwargs['factor']
        features = in_shapes['default'].feature_shape
        outputs = OrderedDict(default=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        """Copy the input to the output unchanged."""
        _h = self.handler
        x, y = buffers.inputs.default, buffers.outputs.default

        _h.copy_to(x, y)

    def backward_pass(self, buffers):
        """Add ``factor * dy`` to the input deltas."""
        _h = self.handler
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default

        _h.mult_add_st(self.factor, dy, dx)
