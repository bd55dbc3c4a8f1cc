"""FullyConnected: an affine projection followed by an activation."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.errors import LayerValidationError  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.layers.attributes import Activation, Kwarg, PositiveIntOrTuple
from brainstorm.layers.base_layer import Layer, default_size, time_template
from brainstorm.shapes import (  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    flatten_time,
    flatten_time_and_features,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def FullyConnected(
    size=None, activation: str = 'rel', name: str | None = None
) -> ConstructionWrapper:
    """A fully connected layer: ``y = f(x W^T + bias)``.

    Multi-dimensional input features are flattened.

    Args:
        size: output feature size (int) or shape (tuple of ints); defaults
            to the input's feature shape.
        activation: 'sigmoid', 'tanh', 'rel' (or 'relu'), 'linear', 'el',
            'softplus' or 'leaky_rel'.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output
        ``('T', 'B', *size)``; parameters ``W (out, in)``, ``bias (out,)``.
    """
    kwargs = {'activation': activation}
    if size is not None:
        kwargs['size'] = size
    return ConstructionWrapper.create(FullyConnectedLayerImpl, name=name, **kwargs)


class FullyConnectedLayerImpl(Layer):
    """Implementation of :func:`FullyConnected`."""

    overwrites_gradients = True
    can_overwrite_input_deltas = True
    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'size': Kwarg(
            PositiveIntOrTuple(),
            description='output feature size or shape (default: '
            'the input feature shape)',
        ),
        'activation': Kwarg(Activation(), description='activation function'),
    }

    def setup(self, kwargs, in_shapes):
        """Output ``default`` of ``size``; parameters ``W (out, in)``, ``bias``."""
        self.activation = kwargs['activation']
        size = default_size(kwargs['size'], in_shapes['default'])
        n_in = in_shapes['default'].feature_size
        n_out = int(np.prod(size))
        outputs = OrderedDict(default=BufferStructure('T', 'B', *size))
        parameters = OrderedDict(
            W=BufferStructure(n_out, n_in), bias=BufferStructure(n_out)
        )
        return outputs, parameters, OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        """``y = f(x W^T + bias)`` for all time steps in one matrix product."""
        _h = self.handler
        W, bias = buffers.parameters
        x = flatten_time_and_features(buffers.inputs.default)
        y = flatten_time_and_features(buffers.outputs.default)

        _h.dot_mm(x, W, y, transb=True)
        _h.add_mv(y, bias.reshape((1, bias.shape[0])), y)
        _h.act_func[self.activation](y, y)

    def backward_pass(self, buffers):
        """Add ``(f'(y) dy) W`` to the input deltas; overwrite ``dW`` and ``dbias``.

        The output deltas ``dy`` are replaced by ``f'(y) dy`` on the way.
        """
        _h = self.handler
        W, bias = buffers.parameters
        dW, dbias = buffers.gradients
        x = flatten_time_and_features(buffers.inputs.default)
        y = flatten_time_and_features(buffers.outputs.default)
        dx = flatten_time_and_features(buffers.input_deltas.default)
        dy = flatten_time_and_features(buffers.output_deltas.default)

        _h.act_func_deriv[self.activation](y, y, dy, dy)
        if 'default' not in self.skip_input_deltas:
            if 'default' in self.overwrite_input_deltas:
                _h.dot_mm(dy, W, dx)
            else:
                _h.dot_add_mm(dy, W, dx)
        # the gradients are this layer's own: overwrite, no accumulation
        _h.dot_mm(dy, x, dW, transa=True)
        _h.sum_t(dy, 0, dbias)
