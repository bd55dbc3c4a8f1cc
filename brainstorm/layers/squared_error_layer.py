"""SquaredError: regression output with half squared error loss."""

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


def SquaredError(name: str | None = None) -> ConstructionWrapper:
    """Half squared error: ``predictions = x``, ``loss = 0.5 (x - t)^2``.

    The loss is elementwise (same shape as the input); the backward pass
    adds ``dloss * (x - t)`` to the input deltas. Targets get no deltas and
    deltas arriving at ``predictions`` are ignored.

    Shapes:
        inputs ``default`` and ``targets`` ``('T', 'B', ...)`` with equal
        features -> outputs ``predictions`` and ``loss`` of the same shape.
    """
    return ConstructionWrapper.create(SquaredErrorLayerImpl, name=name)


class SquaredErrorLayerImpl(Layer):
    """Implementation of :func:`SquaredError`."""

    expected_inputs = {'default': time_template(), 'targets': time_template()}
    declared_kwargs = {}
    computes_no_input_deltas_for = ('targets',)
    takes_no_output_deltas_from = ('predictions',)

    def setup(self, kwargs, in_shapes):
        """Outputs ``predictions``, ``loss`` and internal ``diff``: the input's shape.

        Raises:
            LayerValidationError: the targets' features differ from the input's.
        """
        x, t = in_shapes['default'], in_shapes['targets']
        if x.feature_shape != t.feature_shape:
            raise LayerValidationError(
                f'{self._desc()}: targets must have the same features as the '
                f'input {x.shape}. Received {t.shape}'
            )
        shape = BufferStructure('T', 'B', *x.feature_shape)
        outputs = OrderedDict(predictions=shape, loss=shape)
        internals = OrderedDict(diff=shape)
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """``predictions = x``; ``loss = 0.5 (x - t)^2`` element by element."""
        _h = self.handler
        x, t = buffers.inputs.default, buffers.inputs.targets
        predictions, loss = buffers.outputs
        diff = buffers.internals.diff

        _h.copy_to(x, predictions)
        _h.subtract_tt(x, t, diff)
        _h.mult_tt(diff, diff, loss)
        _h.mult_st(0.5, loss, loss)

    def backward_pass(self, buffers):
        """Add ``dloss * (x - t)`` to the input deltas."""
        _h = self.handler
        dx = buffers.input_deltas.default
        dloss = buffers.output_deltas.loss
        diff = buffers.internals.diff

        _h.mult_add_tt(dloss, diff, dx)
