"""Dropout: randomly zero units during training (inverted dropout)."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.attributes import FloatIn, Kwarg
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def Dropout(drop_prob: float = 0.5, name: str | None = None) -> ConstructionWrapper:
    """Dropout: ``y = x * mask / (1 - drop_prob)`` in training, else ``y = x``.

    Each element of ``mask`` is 1 with probability ``1 - drop_prob`` and 0
    otherwise, drawn from the handler's random state in every training
    forward pass. The backward pass is the exact derivative:
    ``dx += dy * mask / (1 - drop_prob)``.

    Args:
        drop_prob: probability of dropping a unit, a float in [0, 1).
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output of the same
        shape; internal ``mask`` of the same shape, holding the scaled mask
        (0 or ``1 / (1 - drop_prob)``).
    """
    return ConstructionWrapper.create(DropoutLayerImpl, name=name, drop_prob=drop_prob)


class DropoutLayerImpl(Layer):
    """Implementation of :func:`Dropout`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'drop_prob': Kwarg(
            FloatIn(0, 1, include_high=False),
            description='probability of dropping a unit',
        ),
    }

    def setup(self, kwargs, in_shapes):
        """Output ``default`` and internal ``mask``, both of the input's shape."""
        self.drop_prob = kwargs['drop_prob']
        shape = in_shapes['default']
        outputs = OrderedDict(default=BufferStructure(*shape.shape))
        internals = OrderedDict(mask=BufferStructure(*shape.shape))
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """Draw a new scaled ``mask`` and apply it, or copy ``x`` in inference.

        An inference pass fills ``mask`` with 1, so that a following backward
        pass lets the deltas through unchanged.
        """
        _h = self.handler
        x = buffers.inputs.default
        y = buffers.outputs.default
        mask = buffers.internals.mask

        if training_pass:
            keep_prob = 1.0 - self.drop_prob
            _h.generate_probability_mask(mask, keep_prob)
            _h.mult_st(1.0 / keep_prob, mask, mask)
            _h.mult_tt(x, mask, y)
        else:
            # a backward pass after an inference pass passes deltas through
            _h.fill(mask, 1.0)
            _h.copy_to(x, y)

    def backward_pass(self, buffers):
        """Add ``dy * mask`` to the input deltas."""
        _h = self.handler
        mask = buffers.internals.mask
        dx = buffers.input_deltas.default
        dy = buffers.output_deltas.default

        _h.mult_add_tt(dy, mask, dx)
