"""Loss: turns a loss buffer into the scalar the network minimises."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import FloatIn, Kwarg
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper


def Loss(importance: float = 1.0, name: str | None = None) -> ConstructionWrapper:
    """Sum a loss buffer into one scalar: ``loss = importance * sum(x) / n``.

    ``n`` is the batch size for time- or batch-sized inputs and 1 for
    constant ones, so the loss is a sum over time and features and a mean
    over sequences. Its backward pass ignores its own output delta and adds
    ``importance / n`` to the input deltas.

    Args:
        importance: weight of this loss in the total loss.
        name: the layer name (not ``'total_loss'``).
    """
    return ConstructionWrapper.create(LossLayerImpl, name=name, importance=importance)


class LossLayerImpl(Layer):
    """Implementation of :func:`Loss`."""

    is_loss = True
    expected_inputs = {'default': StructureTemplate('...')}
    declared_kwargs = {
        'importance': Kwarg(FloatIn(0), description='weight of this loss in the total'),
    }

    def setup(self, kwargs, in_shapes):
        """One output ``loss`` of shape ``(1,)``; the name 'total_loss' is refused."""
        if self.name == 'total_loss':
            raise LayerValidationError(
                "Loss 'total_loss': this name is reserved for the sum of all "
                'losses; choose another name.'
            )
        self.importance = kwargs['importance']
        outputs = OrderedDict(loss=BufferStructure(1))
        return outputs, OrderedDict(), OrderedDict()

    def _scale(self, x) -> float:
        buffer_type = self.in_shapes['default'].buffer_type
        # sequences are counted along B: axis 1 of (T, B, ...), axis 0 of
        # (B, ...); a constant input is one value
        n = x.shape[buffer_type - 1] if buffer_type else 1
        # an empty batch (before any data was provided) has a zero loss
        return self.importance / max(n, 1)

    def forward_pass(self, buffers, training_pass=True):
        """``loss = importance * sum(x) / n``."""
        _h = self.handler
        x = buffers.inputs.default
        loss = buffers.outputs.loss

        _h.sum_t(x, None, loss)
        _h.mult_st(self._scale(x), loss, loss)

    def backward_pass(self, buffers):
        """Add ``importance / n`` to every input delta."""
        _h = self.handler
        x, dx = buffers.inputs.default, buffers.input_deltas.default

        _h.add_st(self._scale(x), dx, dx)
