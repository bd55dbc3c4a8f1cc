"""SigmoidCE: sigmoid outputs with elementwise binary cross-entropy."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.handlers.base_handler import Handler  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import (  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    flatten_time,
    flatten_time_and_features,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper

CLIP_MIN = 1e-6


def SigmoidCE(name: str | None = None) -> ConstructionWrapper:
    """Sigmoid output with elementwise cross-entropy loss.

    ``predictions = p = sigmoid(x)`` and
    ``loss = -(t ln clip(p) + (1 - t) ln clip(1 - p))`` with clipping to
    ``[1e-6, 1]``; the targets ``t`` are probabilities in ``[0, 1]``.
    Backward: ``dx += dloss * (p - t)``; targets get no deltas and deltas
    arriving at ``predictions`` are ignored.

    Args:
        name: the layer name.

    Shapes:
        inputs ``default`` and ``targets`` ``('T', 'B', ...)`` with equal
        features -> outputs ``predictions`` and ``loss`` of the same shape.
    """
    return ConstructionWrapper.create(SigmoidCELayerImpl, name=name)


class SigmoidCELayerImpl(Layer):
    """Implementation of :func:`SigmoidCE`."""

    overwrites_backward_internals = True

    expected_inputs = {'default': time_template(), 'targets': time_template()}
    declared_kwargs = {}
    computes_no_input_deltas_for = ('targets',)
    takes_no_output_deltas_from = ('predictions',)

    def setup(self, kwargs, in_shapes):
        """Outputs ``predictions`` and ``loss`` of the input's shape.

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
        internals = OrderedDict(
            dcee=BufferStructure('T', 'B', *x.feature_shape, is_backward_only=True)
        )
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """``p = sigmoid(x)``, ``loss = -(t ln p + (1 - t) ln(1 - p))`` (clipped)."""
        _h = self.handler
        x, t = buffers.inputs.default, buffers.inputs.targets
        p, loss = buffers.outputs.predictions, buffers.outputs.loss

        # loss = A + t * (B - A) with A = ln clip(1 - p), B = ln clip(p);
        # 1 - p is computed as sigmoid(-x) to keep its precision, and the
        # predictions buffer holds B until p is written last.
        _h.mult_st(-1.0, x, loss)
        _h.sigmoid(loss, loss)
        _h.clip_t(loss, CLIP_MIN, 1.0, loss)
        _h.log_t(loss, loss)
        _h.sigmoid(x, p)
        _h.clip_t(p, CLIP_MIN, 1.0, p)
        _h.log_t(p, p)
        _h.subtract_tt(p, loss, p)
        _h.mult_add_tt(t, p, loss)
        _h.mult_st(-1.0, loss, loss)
        _h.sigmoid(x, p)

    def backward_pass(self, buffers):
        """Add ``dloss * (p - t)`` to the input deltas."""
        _h = self.handler
        t = buffers.inputs.targets
        p = buffers.outputs.predictions
        dx, dloss = buffers.input_deltas.default, buffers.output_deltas.loss
        dcee = buffers.internals.dcee

        _h.subtract_tt(p, t, dcee)
        _h.mult_add_tt(dloss, dcee, dx)
