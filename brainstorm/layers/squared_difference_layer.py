"""SquaredDifference: the elementwise squared difference of two inputs."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import (
    flatten_time_and_features,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def SquaredDifference(name: str | None = None) -> ConstructionWrapper:
    """Elementwise squared difference: ``y = (x1 - x2)^2``.

    Backward: ``dx1 += 2 dy (x1 - x2)`` and ``dx2 -= 2 dy (x1 - x2)``; the
    output deltas are left unchanged.

    Args:
        name: the layer name.

    Shapes:
        inputs ``inputs_1`` and ``inputs_2`` ``('T', 'B', ...)`` with equal
        features -> default output of the same shape.
    """
    return ConstructionWrapper.create(SquaredDifferenceLayerImpl, name=name)


class SquaredDifferenceLayerImpl(Layer):
    """Implementation of :func:`SquaredDifference`."""

    expected_inputs = {'inputs_1': time_template(), 'inputs_2': time_template()}
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        """Output ``default`` and internal ``diff``, both of the inputs' features.

        Raises:
            LayerValidationError: the two inputs differ in features.
        """
        a, b = in_shapes['inputs_1'], in_shapes['inputs_2']
        if a.feature_shape != b.feature_shape:
            raise LayerValidationError(
                f'{self._desc()}: inputs_1 and inputs_2 must have the same '
                f'features. Received shapes {a.shape} and {b.shape}'
            )
        shape = BufferStructure('T', 'B', *a.feature_shape)
        return (OrderedDict(default=shape), OrderedDict(), OrderedDict(diff=shape))

    def forward_pass(self, buffers, training_pass=True):
        """``y = (a - b)^2`` element by element."""
        _h = self.handler
        a, b = buffers.inputs.inputs_1, buffers.inputs.inputs_2
        y = buffers.outputs.default
        diff = buffers.internals.diff

        _h.subtract_tt(a, b, diff)
        _h.mult_tt(diff, diff, y)

    def backward_pass(self, buffers):
        """Add ``2 dy (a - b)`` to the deltas of ``a`` and subtract it from ``b``'s."""
        _h = self.handler
        da, db = buffers.input_deltas.inputs_1, buffers.input_deltas.inputs_2
        dy = buffers.output_deltas.default
        diff = buffers.internals.diff

        # Add +-2 dy diff without a scratch buffer and without touching dy:
        # scale the delta by 1/(+-2), add dy * diff, scale back. Scaling by
        # powers of two is exact, so this rounds like a direct addition.
        for delta, scale in ((da, 2.0), (db, -2.0)):
            _h.mult_st(1.0 / scale, delta, delta)
            _h.mult_add_tt(dy, diff, delta)
            _h.mult_st(scale, delta, delta)
