"""Elementwise: applies an activation function to every element."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.attributes import Activation, Kwarg
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def Elementwise(
    activation: str = 'rel', name: str | None = None
) -> ConstructionWrapper:
    """Apply an activation function elementwise: ``y = f(x)``.

    Backward: ``dx += f'(x) * dy``, computed from ``y`` (from ``x`` for
    ``'gelu'``).

    Activations: ``'sigmoid'``, ``'tanh'``, ``'rel'`` (rectified linear;
    ``'relu'`` is the same), ``'linear'``, ``'el'`` (exponential linear),
    ``'softplus'`` (``ln(1 + exp(x))``), ``'leaky_rel'`` (``x`` for ``x >
    0``, else ``0.01 * x``: the slope is fixed, PyTorch's default) and
    ``'gelu'`` (the tanh approximation, ``torch.nn.GELU(approximate='tanh')``).
    Only this layer takes ``'gelu'``: its derivative needs the input ``x``,
    which the other layers do not keep (they compute their activation in
    place), so ``FullyConnected(size, activation='linear') >>
    Elementwise('gelu')`` is the GELU layer.

    Args:
        activation: the name of the activation function.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output of the same shape.
    """
    return ConstructionWrapper.create(
        ElementwiseLayerImpl, name=name, activation=activation
    )


class ElementwiseLayerImpl(Layer):
    """Implementation of :func:`Elementwise`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'activation': Kwarg(
            Activation(needs_input_ok=True), description='activation function'
        ),
    }

    def setup(self, kwargs, in_shapes):
        """Output ``default`` with the input's features; no parameters or internals."""
        self.activation = kwargs['activation']
        features = in_shapes['default'].feature_shape
        outputs = OrderedDict(default=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        """``y = f(x)`` element by element."""
        _h = self.handler
        x, y = buffers.inputs.default, buffers.outputs.default

        _h.act_func[self.activation](x, y)

    def backward_pass(self, buffers):
        """Add ``f'(x) dy`` to the input deltas.

        The output deltas are replaced by ``f'(x) dy`` on the way.
        """
        _h = self.handler
        x, y = buffers.inputs.default, buffers.outputs.default
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default

        # the layer owns its output deltas, so they serve as the scratch
        # buffer for f'(x) * dy (as in FullyConnected)
        _h.act_func_deriv[self.activation](x, y, dy, dy)
        _h.add_tt(dx, dy, dx)
