"""PositionEmbedding: adds a learned vector per time step."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import NetworkValidationError
from brainstorm.layers.attributes import Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import flatten_features
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def PositionEmbedding(
    max_len: int = 256, name: str | None = None
) -> ConstructionWrapper:
    """Learned position embeddings: ``y[t, b] = x[t, b] + E[t]``.

    Gives a model without recurrence (a Transformer) the position of each
    time step: the row ``E[t]`` of a learned table is added to every
    sequence's input at time step ``t``. The gradient of ``E[t]`` is the sum
    of the output deltas of step ``t`` over the batch; rows beyond the
    sequence length get a zero gradient.

    Args:
        max_len: the number of rows of ``E``, the longest sequence the
            layer accepts; longer ones raise a NetworkValidationError.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', *F)`` -> default output of the same
        shape; parameter ``E (max_len, *F)``.
    """
    return ConstructionWrapper.create(
        PositionEmbeddingLayerImpl, name=name, max_len=max_len
    )


class PositionEmbeddingLayerImpl(Layer):
    """Implementation of :func:`PositionEmbedding`."""

    overwrites_gradients = True
    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'max_len': Kwarg(PositiveInt(), description='longest sequence accepted'),
    }

    def setup(self, kwargs, in_shapes):
        """Output ``default`` of the input's shape; parameter ``E (max_len, *F)``."""
        self.max_len = kwargs['max_len']
        features = in_shapes['default'].feature_shape
        outputs = OrderedDict(default=BufferStructure('T', 'B', *features))
        parameters = OrderedDict(E=BufferStructure(self.max_len, *features))
        return outputs, parameters, OrderedDict()

    def _time_steps(self, buffers) -> int:
        steps = buffers.inputs.default.shape[0]
        if steps > self.max_len:
            raise NetworkValidationError(
                f'{self._desc()}: the sequences have {steps} time steps, more '
                f'than its max_len={self.max_len}. Create the layer with '
                f'max_len >= {steps}.'
            )
        return steps

    def forward_pass(self, buffers, training_pass=True):
        """``y[t] = x[t] + E[t]``, one broadcast sum per time step.

        Raises:
            NetworkValidationError: if the sequences are longer than
                ``max_len``.
        """
        _h = self.handler
        steps = self._time_steps(buffers)
        x = flatten_features(buffers.inputs.default)
        y = flatten_features(buffers.outputs.default)
        table = flatten_features(buffers.parameters.E, 1)
        for t in range(steps):
            _h.add_mv(x[t], table[t : t + 1], y[t])

    def backward_pass(self, buffers):
        """``dx += dy``; ``dE[t]`` = the sum of ``dy[t]`` over the batch."""
        _h = self.handler
        steps = self._time_steps(buffers)
        dy = flatten_features(buffers.output_deltas.default)
        grad = flatten_features(buffers.gradients.E, 1)
        if 'default' not in self.skip_input_deltas:
            dx = flatten_features(buffers.input_deltas.default)
            _h.add_tt(dx, dy, dx)
        for t in range(steps):
            _h.sum_t(dy[t], 0, grad[t])
        if steps < self.max_len:
            _h.fill(grad[steps:], 0.0)
