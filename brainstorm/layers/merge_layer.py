"""Merge: concatenates two inputs along their last axis."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.base_layer import Layer
from brainstorm.shapes import (
    flatten_all_but_last,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.buffer_structure import (
    BUFFER_TYPE_NAMES,
    BufferStructure,
    StructureTemplate,
)
from brainstorm.structure.construction import ConstructionWrapper


def Merge(name: str | None = None) -> ConstructionWrapper:
    """Concatenate ``inputs_1`` and ``inputs_2`` along the last axis.

    Backward splits the output deltas and adds each part to the deltas of
    the input it came from.

    Args:
        name: the layer name.

    Shapes:
        inputs ``inputs_1 (..., F1)`` and ``inputs_2 (..., F2)`` of the same
        buffer type (time-sized, batch-sized or constant) and equal other
        dimensions -> default output ``(..., F1 + F2)``.
    """
    return ConstructionWrapper.create(MergeLayerImpl, name=name)


class MergeLayerImpl(Layer):
    """Implementation of :func:`Merge`."""

    expected_inputs = {
        'inputs_1': StructureTemplate('...'),
        'inputs_2': StructureTemplate('...'),
    }
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        """Output ``default``: both inputs joined along the last feature axis.

        Raises:
            LayerValidationError: the inputs differ in buffer type or in any
                dimension but the last.
        """
        a, b = in_shapes['inputs_1'], in_shapes['inputs_2']
        if a.buffer_type != b.buffer_type:
            raise LayerValidationError(
                f'{self._desc()}: inputs_1 and inputs_2 must both be '
                f'{BUFFER_TYPE_NAMES[a.buffer_type]} (like inputs_1 '
                f'{a.shape}). Received inputs_2 of shape {b.shape} '
                f'({BUFFER_TYPE_NAMES[b.buffer_type]})'
            )
        if a.feature_shape[:-1] != b.feature_shape[:-1]:
            raise LayerValidationError(
                f'{self._desc()}: inputs_1 and inputs_2 must match in all '
                f'dimensions but the last. Received shapes {a.shape} and '
                f'{b.shape}'
            )
        shape = a.shape[:-1] + (a.shape[-1] + b.shape[-1],)
        outputs = OrderedDict(default=BufferStructure(*shape))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        """Concatenate ``inputs_1`` and ``inputs_2`` along the last axis."""
        _h = self.handler
        a, b = buffers.inputs.inputs_1, buffers.inputs.inputs_2
        y = buffers.outputs.default

        _h.merge_tt(a, b, y)

    def backward_pass(self, buffers):
        """Split the output deltas and add each part to its input's deltas."""
        _h = self.handler
        da, db = buffers.input_deltas.inputs_1, buffers.input_deltas.inputs_2
        dy = buffers.output_deltas.default

        _h.split_add_tt(dy, da, db)
