"""Loss: turns a loss buffer into the scalar the network minimises."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import FloatIn, Kwarg
from brainstorm.layers.base_layer import Layer
from brainstorm.shapes import summing_shrink
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
        # the input's terms divided by a power of two before they are summed
        internals = OrderedDict(
            shrunk=BufferStructure(*in_shapes['default'].shape),
        )
        return outputs, OrderedDict(), internals

    def _count(self, x) -> int:
        buffer_type = self.in_shapes['default'].buffer_type
        # sequences are counted along B: axis 1 of (T, B, ...), axis 0 of
        # (B, ...); a constant input is one value; an empty batch (before
        # any data was provided) has a zero loss
        return max(x.shape[buffer_type - 1], 1) if buffer_type else 1

    def _scale(self, x) -> float:
        return self.importance / self._count(x)

    def forward_pass(self, buffers, training_pass=True):
        """``loss = importance * sum(x) / n``.

        The terms are divided by the smallest power of two ``2**k >= n``
        before they are summed, so that the sum stays within the range of
        ``sum(x) / n`` (in float16 a sum over a batch overflows long before
        the mean loss does). Being a power of two, it changes no bits of a
        float32 or float64 loss (unless terms fall below the smallest
        normal number); in float16 each term of the sum is off by at most
        ``2**-25``, about ``6e-8 * importance`` in the loss.
        """
        _h = self.handler
        x = buffers.inputs.default
        loss = buffers.outputs.loss
        n = self._count(x)
        if n == 1:
            _h.sum_t(x, None, loss)
            _h.mult_st(self.importance, loss, loss)
            return
        shrink = summing_shrink(n)
        shrunk = buffers.internals.shrunk
        _h.mult_st(shrink, x, shrunk)
        _h.sum_t(shrunk, None, loss)
        _h.mult_st(self.importance / (shrink * n), loss, loss)

    def backward_pass(self, buffers):
        """Add ``importance / n`` to every input delta."""
        _h = self.handler
        x, dx = buffers.inputs.default, buffers.input_deltas.default

        _h.add_st(self._scale(x), dx, dx)
