"""Add: the elementwise sum of two or more inputs, for residual connections."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.arguments import Int
from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import Kwarg
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import (
    BUFFER_TYPE_NAMES,
    BufferStructure,
    StructureTemplate,
)
from brainstorm.structure.construction import ConstructionWrapper


def Add(num_inputs: int = 2, name: str | None = None) -> ConstructionWrapper:
    """Sum the inputs ``inputs_1, ..., inputs_N`` elementwise: ``y = x_1 + ... + x_N``.

    A second connection into one input concatenates (as in Brainstorm 0.5),
    so the summands come into separate named inputs, selected with
    ``'inputs_k' - layer``. A residual connection around ``block``::

        add = Add(name='Residual')
        x >> 'inputs_1' - add
        x >> block >> 'inputs_2' - add
        add >> FullyConnected(10)

    Backward adds the output deltas to the deltas of every input.

    Args:
        num_inputs: the number ``N >= 2`` of inputs.
        name: the layer name.

    Shapes:
        inputs ``inputs_1 ... inputs_N``, all of one shape and buffer type
        (e.g. ``('T', 'B', ...)``) -> default output of that shape.
    """
    return ConstructionWrapper.create(AddLayerImpl, name=name, num_inputs=num_inputs)


def _input_names(count: int) -> list:
    return [f'inputs_{k}' for k in range(1, count + 1)]


class AddLayerImpl(Layer):
    """Implementation of :func:`Add`.

    ``expected_inputs`` lists the two inputs of the default ``num_inputs``;
    each layer has one input per summand.
    """

    expected_inputs = {name: StructureTemplate('...') for name in _input_names(2)}
    declared_kwargs = {
        'num_inputs': Kwarg(Int(2), description='number of inputs'),
    }

    def __init__(
        self, name, in_shapes, incoming_connections, outgoing_connections, **kwargs
    ):
        """Create the layer with one input per summand (see :class:`Layer`)."""
        count = self.check_kwargs(name, kwargs)['num_inputs']
        self.expected_inputs = {
            n: StructureTemplate('...') for n in _input_names(count)
        }
        super().__init__(
            name, in_shapes, incoming_connections, outgoing_connections, **kwargs
        )

    def setup(self, kwargs, in_shapes):
        """Output ``default`` of the inputs' common shape.

        Raises:
            LayerValidationError: the inputs differ in shape or buffer type.
        """
        names = _input_names(kwargs['num_inputs'])
        first = in_shapes[names[0]]
        for other in names[1:]:
            s = in_shapes[other]
            if (
                s.buffer_type != first.buffer_type
                or s.feature_shape != first.feature_shape
            ):
                raise LayerValidationError(
                    f'{self._desc()}: all inputs must have one shape and buffer '
                    f'type, like inputs_1 {first.shape} '
                    f'({BUFFER_TYPE_NAMES[first.buffer_type]}). Received '
                    f'{other} of shape {s.shape} '
                    f'({BUFFER_TYPE_NAMES[s.buffer_type]})'
                )
        self.summands = names
        outputs = OrderedDict(default=BufferStructure(*first.shape))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        """``y = x_1 + x_2 + ... + x_N``."""
        _h = self.handler
        y = buffers.outputs.default
        x = [buffers.inputs[n] for n in self.summands]

        _h.add_tt(x[0], x[1], y)
        for more in x[2:]:
            _h.add_tt(y, more, y)

    def backward_pass(self, buffers):
        """Add the output deltas to the deltas of every input."""
        _h = self.handler
        dy = buffers.output_deltas.default

        for n in self.summands:
            if n not in self.skip_input_deltas:
                dx = buffers.input_deltas[n]
                _h.add_tt(dx, dy, dx)
