"""L1Decay: the L1 norm of each row of activations, as a loss."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import flatten_time_and_features
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def L1Decay(name: str | None = None) -> ConstructionWrapper:
    """L1 penalty on activations: ``loss = sum_features |x|``.

    Backward: ``dx += sign(x) * dloss``. Connect ``loss`` to a
    :func:`~brainstorm.layers.Loss` layer to add it to the network loss.

    Args:
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> output ``loss ('T', 'B', 1)``.
    """
    return ConstructionWrapper.create(L1DecayLayerImpl, name=name)


class L1DecayLayerImpl(Layer):
    """Implementation of :func:`L1Decay`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        """Output ``loss (T, B, 1)``; internal scratch ``tmp`` of the input's shape."""
        features = in_shapes['default'].feature_shape
        outputs = OrderedDict(loss=BufferStructure('T', 'B', 1))
        # tmp is scratch for both passes; neither reads what the other wrote
        internals = OrderedDict(tmp=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """``loss = sum(|x|)`` over the features of each sample."""
        _h = self.handler
        x = flatten_time_and_features(buffers.inputs.default)
        loss = flatten_time_and_features(buffers.outputs.loss)
        tmp = flatten_time_and_features(buffers.internals.tmp)

        _h.abs_t(x, tmp)
        _h.sum_t(tmp, 1, loss)

    def backward_pass(self, buffers):
        """Add ``sign(x) * dloss`` to the input deltas."""
        _h = self.handler
        x = flatten_time_and_features(buffers.inputs.default)
        dx = flatten_time_and_features(buffers.input_deltas.default)
        dloss = flatten_time_and_features(buffers.output_deltas.loss)
        tmp = flatten_time_and_features(buffers.internals.tmp)

        _h.sign_t(x, tmp)
        _h.mult_add_mv(tmp, dloss, dx)
