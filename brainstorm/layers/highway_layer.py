"""Highway: a gated mix of a transformation and the layer's input."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def Highway(name: str | None = None) -> ConstructionWrapper:
    """The gating of a highway network: ``y = T * H + (1 - T) * x``.

    ``H`` is the transformed signal, ``T`` the transform gate (usually a
    sigmoid layer) and ``x`` the carried input. Backward:
    ``dH += T * dy``, ``dT += (H - x) * dy``, ``dx += (1 - T) * dy``.

    Args:
        name: the layer name.

    Shapes:
        inputs ``H``, ``T`` and ``x``, all ``('T', 'B', ...)`` of identical
        shape -> default output of that shape.
    """
    return ConstructionWrapper.create(HighwayLayerImpl, name=name)


class HighwayLayerImpl(Layer):
    """Implementation of :func:`Highway`."""

    expected_inputs = {'H': time_template(), 'T': time_template(), 'x': time_template()}
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        """Output ``default`` with the features of ``x``.

        Raises:
            LayerValidationError: ``H``, ``T`` and ``x`` differ in shape.
        """
        shapes = {n: in_shapes[n].shape for n in ('H', 'T', 'x')}
        if len(set(shapes.values())) != 1:
            raise LayerValidationError(
                f'{self._desc()}: inputs H, T and x must have identical '
                f'shapes. Received: {shapes}'
            )
        features = in_shapes['x'].feature_shape
        outputs = OrderedDict(default=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        """``y = T * H + (1 - T) * x``, computed as ``T * (H - x) + x``."""
        _h = self.handler
        H, T, x = buffers.inputs.H, buffers.inputs.T, buffers.inputs.x
        y = buffers.outputs.default

        # y = T * (H - x) + x
        _h.subtract_tt(H, x, y)
        _h.mult_tt(T, y, y)
        _h.add_tt(y, x, y)

    def backward_pass(self, buffers):
        """Add ``T dy`` to ``dH``, ``(H - x) dy`` to ``dT``, ``(1 - T) dy`` to dx."""
        _h = self.handler
        H, T, x = buffers.inputs.H, buffers.inputs.T, buffers.inputs.x
        dH, dT, dx = (
            buffers.input_deltas.H,
            buffers.input_deltas.T,
            buffers.input_deltas.x,
        )
        dy = buffers.output_deltas.default

        _h.mult_add_tt(T, dy, dH)
        _h.mult_add_tt(H, dy, dT)
        _h.add_tt(dx, dy, dx)
        # The minus terms reuse mult_add_tt on the negated dy instead of a
        # scratch buffer; negating twice restores dy exactly.
        _h.mult_st(-1.0, dy, dy)
        _h.mult_add_tt(T, dy, dx)
        _h.mult_add_tt(x, dy, dT)
        _h.mult_st(-1.0, dy, dy)
