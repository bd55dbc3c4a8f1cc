"""Mask: multiplies its input with a (possibly broadcast) mask."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.errors import LayerValidationError
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import (
    flatten_time,
    flatten_time_and_features,
    product,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    reshape_view,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def Mask(name: str | None = None) -> ConstructionWrapper:
    """Multiply the input with a mask: ``y = x * mask``.

    The mask either has the input's features ``F``, or ``F[:-1] + (1,)``
    (one value per position, broadcast over the last axis), or ``(1,)``
    (one value per time step and sequence). Backward:
    ``dx += dy * mask``; the mask gets no deltas.

    Args:
        name: the layer name.

    Shapes:
        inputs ``default ('T', 'B', *F)`` and ``mask ('T', 'B', *F)``,
        ``('T', 'B', *F[:-1], 1)`` or ``('T', 'B', 1)`` -> default output
        ``('T', 'B', *F)``.
    """
    return ConstructionWrapper.create(MaskLayerImpl, name=name)


class MaskLayerImpl(Layer):
    """Implementation of :func:`Mask`."""

    expected_inputs = {'default': time_template(), 'mask': time_template()}
    declared_kwargs = {}
    computes_no_input_deltas_for = ('mask',)

    def setup(self, kwargs, in_shapes):
        """Output ``default`` of the input's features; picks how the mask applies.

        The mask's features decide the mode: ``full`` (same features as the
        input), ``per_step`` (one value per time step and sample) or ``per_row``
        (one value per position, shared by the last axis).

        Raises:
            LayerValidationError: the mask's features fit none of the modes.
        """
        features = in_shapes['default'].feature_shape
        mask_features = in_shapes['mask'].feature_shape
        allowed = {'full': features, 'per_step': (1,), 'per_row': features[:-1] + (1,)}
        # where forms coincide the earlier, cheaper one is used
        modes = [m for m, f in allowed.items() if f == mask_features]
        if not modes:
            raise LayerValidationError(
                f"{self._desc()}: the features of input 'mask' must be "
                f'{features}, {features[:-1] + (1,)} or (1,) for an input '
                f"'default' of shape {in_shapes['default'].shape}. Received "
                f'mask of shape {in_shapes["mask"].shape}'
            )
        self.mode = modes[0]
        outputs = OrderedDict(default=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), OrderedDict()

    def _rows(self, x, mask, y):
        """Triples of 2-D views ``(x_i, mask_i, y_i)`` that ``mult_mv`` combines.

        The mask is a column vector ``(N, 1)`` in each.
        """
        if self.mode == 'per_step':
            return [
                (
                    flatten_time_and_features(x),
                    flatten_time_and_features(mask),
                    flatten_time_and_features(y),
                )
            ]
        # Feature-slice views with several feature axes cannot become one
        # (N, F[-1]) matrix without a copy: take one matrix per position.
        positions = int(np.prod(x.shape[2:-1]))

        def split(a):
            flat = flatten_time(a)
            return reshape_view(flat, (flat.shape[0], positions, flat.shape[-1]))

        x3, m3, y3 = split(x), split(mask), split(y)
        return [(x3[:, i], m3[:, i], y3[:, i]) for i in range(positions)]

    def forward_pass(self, buffers, training_pass=True):
        """``y = x * mask``, the mask broadcast as its mode says."""
        _h = self.handler
        x, mask = buffers.inputs.default, buffers.inputs.mask
        y = buffers.outputs.default

        if self.mode == 'full':
            _h.mult_tt(x, mask, y)
            return
        for x_i, mask_i, y_i in self._rows(x, mask, y):
            _h.mult_mv(x_i, mask_i, y_i)

    def backward_pass(self, buffers):
        """Add ``dy * mask`` to the input deltas; the mask gets none."""
        _h = self.handler
        mask = buffers.inputs.mask
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default

        if self.mode == 'full':
            _h.mult_add_tt(dy, mask, dx)
            return
        for dy_i, mask_i, dx_i in self._rows(dy, mask, dx):
            _h.mult_add_mv(dy_i, mask_i, dx_i)
