"""Softmax: normalised exponentials over the last feature axis."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import flatten_time
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def Softmax(name: str | None = None) -> ConstructionWrapper:
    """Softmax over the last feature axis: ``y = exp(x) / sum(exp(x))``.

    For outputs that are not a loss (attention weights, probabilities to
    show); for training a classifier ``SoftmaxCE`` is the faster and more
    accurate choice. The maximum of each row is subtracted first, so large
    inputs stay finite.

    Backward: ``dx += y * (dy - sum(dy * y))``, the sum over the last axis.

    Args:
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ..., F)`` -> default output of the same
        shape, each ``F``-vector summing to 1.
    """
    return ConstructionWrapper.create(SoftmaxLayerImpl, name=name)


class SoftmaxLayerImpl(Layer):
    """Implementation of :func:`Softmax`."""

    overwrites_backward_internals = True

    expected_inputs = {'default': time_template()}
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        """Output of the input's shape; backward-only scratch internals."""
        shape = in_shapes['default'].shape
        outputs = OrderedDict(default=BufferStructure(*shape))
        internals = OrderedDict(
            scratch=BufferStructure(*shape, is_backward_only=True),
            row_sums=BufferStructure(*shape[:-1], 1, is_backward_only=True),
        )
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """``y = softmax(x)`` over the last axis."""
        _h = self.handler
        for x, y in zip(_rows(buffers.inputs.default), _rows(buffers.outputs.default)):
            _h.softmax_m(x, y)

    def backward_pass(self, buffers):
        """Add ``y * (dy - sum(dy * y))`` to the input deltas."""
        _h = self.handler
        for y, dy, dx, scratch, sums in zip(
            _rows(buffers.outputs.default),
            _rows(buffers.output_deltas.default),
            _rows(buffers.input_deltas.default),
            _rows(buffers.internals.scratch),
            _rows(buffers.internals.row_sums),
        ):
            _h.mult_tt(dy, y, scratch)
            _h.sum_t(scratch, 1, sums)
            _h.subtract_mv(dy, sums, scratch)
            _h.mult_add_tt(scratch, y, dx)


def _rows(array) -> list:
    """2-D views ``(T*B, F)`` covering a ``(T, B, ..., F)`` buffer.

    Network buffers are feature slices of a larger array, so with several
    feature axes ``(T*B*..., F)`` is not a view; one matrix per index of the
    middle axes is.
    """
    flat = flatten_time(array)
    return [flat[(slice(None),) + index] for index in np.ndindex(*flat.shape[1:-1])]
