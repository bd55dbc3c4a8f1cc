"""L2Decay: half the squared L2 norm of each row of activations."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import flatten_time_and_features
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def L2Decay(name: str | None = None) -> ConstructionWrapper:
    """L2 penalty on activations: ``loss = 0.5 * sum_features x^2``.

    Backward: ``dx += x * dloss``. Connect ``loss`` to a
    :func:`~brainstorm.layers.Loss` layer to add it to the network loss.

    Args:
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> output ``loss ('T', 'B', 1)``.
    """
    return ConstructionWrapper.create(L2DecayLayerImpl, name=name)


class L2DecayLayerImpl(Layer):
    """Implementation of :func:`L2Decay`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        """Output ``loss (T, B, 1)``; internal scratch ``tmp`` of the input's shape."""
        features = in_shapes['default'].feature_shape
        outputs = OrderedDict(loss=BufferStructure('T', 'B', 1))
        # Brainstorm 0.5 also declared a backward internal
        # 'dsq_activations' that it never used; it is left out.
        internals = OrderedDict(tmp=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """``loss = 0.5 * sum(x^2)`` over the features of each sample.

        The terms ``(0.5 * x) * x`` are halved before they are summed:
        being nonnegative, every partial sum stays within the loss, so the
        sum (or a square) overflows only where the loss does (float16
        summed ``x^2`` first: 512 features of 12 gave inf for a loss of
        36864). Halving is exact, so float32 and float64 losses keep their
        bits (unless terms fall below the smallest normal number).
        """
        _h = self.handler
        x = flatten_time_and_features(buffers.inputs.default)
        loss = flatten_time_and_features(buffers.outputs.loss)
        tmp = flatten_time_and_features(buffers.internals.tmp)

        _h.mult_st(0.5, x, tmp)
        _h.mult_tt(tmp, x, tmp)
        _h.sum_t(tmp, 1, loss)

    def backward_pass(self, buffers):
        """Add ``x * dloss`` to the input deltas."""
        _h = self.handler
        x = flatten_time_and_features(buffers.inputs.default)
        dx = flatten_time_and_features(buffers.input_deltas.default)
        dloss = flatten_time_and_features(buffers.output_deltas.loss)

        _h.mult_add_mv(x, dloss, dx)
