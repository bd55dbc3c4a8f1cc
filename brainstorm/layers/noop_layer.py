"""NoOp: passes its input through unchanged."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def NoOp(name: str | None = None) -> ConstructionWrapper:
    """Copy the input to the output: ``y = x``; backward ``dx += dy``.

    Useful as a named junction point in an architecture.

    Args:
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output of the same shape.
    """
    return ConstructionWrapper.create(NoOpLayerImpl, name=name)


class NoOpLayerImpl(Layer):
    """Implementation of :func:`NoOp`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        """Output ``default`` with the input's features; no parameters or internals."""
        features = in_shapes['default'].feature_shape
        outputs = OrderedDict(default=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        """Copy the input to the output unchanged."""
        _h = self.handler
        x, y = buffers.inputs.default, buffers.outputs.default

        _h.copy_to(x, y)

    def backward_pass(self, buffers):
        """Add the output deltas to the input deltas unchanged."""
        _h = self.handler
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default

        _h.add_tt(dx, dy, dx)
