"""Embedding: a learned vector for each class id."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.errors import NetworkValidationError, shown_number
from brainstorm.layers.attributes import Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer
from brainstorm.shapes import flatten_time_and_features
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper


def Embedding(
    vocab_size: int, size: int, name: str | None = None
) -> ConstructionWrapper:
    """Look up a learned vector for each class id: ``y[t, b] = W[x[t, b, 0]]``.

    The ids come as floats holding whole numbers, like the targets of
    ``SoftmaxCE``. An id outside ``[0, vocab_size)`` or with a fractional
    part raises ``NetworkValidationError`` in the forward pass, naming the
    layer, the id and its time step and sequence (this reads the ids back
    from the handler each pass). This holds for padding positions too:
    pad sequences with a valid id such as 0 (as the data iterators do) and
    let a mask (e.g. a ``Mask`` layer before the loss) keep them out of
    the gradients.

    Backward: ``dW[k] = sum of dy[t, b]`` over the positions whose id is
    ``k`` (repeated ids accumulate). The ids get no deltas.

    Args:
        vocab_size: the number of ids (rows of ``W``).
        size: the size of each vector.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', 1)`` of class ids -> default output
        ``('T', 'B', size)``; parameter ``W (vocab_size, size)``.
    """
    return ConstructionWrapper.create(
        EmbeddingLayerImpl, name=name, vocab_size=vocab_size, size=size
    )


class EmbeddingLayerImpl(Layer):
    """Implementation of :func:`Embedding`."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 1)}
    declared_kwargs = {
        'vocab_size': Kwarg(PositiveInt(), description='number of ids'),
        'size': Kwarg(PositiveInt(), description='size of each vector'),
    }
    computes_no_input_deltas_for = ('default',)
    id_inputs = ('default',)
    overwrites_gradients = True

    def setup(self, kwargs, in_shapes):
        """Output ``('T', 'B', size)``; parameter ``W (vocab_size, size)``."""
        self.vocab_size = kwargs['vocab_size']
        size = kwargs['size']
        outputs = OrderedDict(default=BufferStructure('T', 'B', size))
        parameters = OrderedDict(W=BufferStructure(self.vocab_size, size))
        return outputs, parameters, OrderedDict()

    def _check_ids(self, ids) -> None:
        """Raise NetworkValidationError naming the first bad id and its place."""
        values = self.handler.get_numpy_copy(ids)[..., 0]
        with np.errstate(invalid='ignore'):
            bad = (
                (values != np.floor(values))
                | (values < 0)
                | (values >= self.vocab_size)
            )
        if not bad.any():
            return
        t, b = (int(i) for i in np.argwhere(bad)[0])
        more = int(bad.sum()) - 1
        others = f' ({more} more bad id(s))' if more else ''
        raise NetworkValidationError(
            f'{self._desc()}: the input must hold whole class ids in '
            f'[0, {self.vocab_size}). Received {shown_number(values[t, b])} at '
            f'time step {t}, sequence {b}{others}.'
        )

    def forward_pass(self, buffers, training_pass=True):
        """``y[t, b] = W[x[t, b, 0]]``, after checking the ids.

        Raises:
            NetworkValidationError: an id is fractional or outside
                ``[0, vocab_size)``.
        """
        _h = self.handler
        W = buffers.parameters.W
        x = buffers.inputs.default
        self._check_ids(x)
        y = flatten_time_and_features(buffers.outputs.default)

        _h.gather_m_by_v(W, flatten_time_and_features(x), y)

    def backward_pass(self, buffers):
        """Overwrite ``dW`` with the output deltas summed per id."""
        _h = self.handler
        dW = buffers.gradients.W
        x = flatten_time_and_features(buffers.inputs.default)
        dy = flatten_time_and_features(buffers.output_deltas.default)

        _h.fill(dW, 0.0)
        _h.scatter_add_m_by_v(dy, x, dW)
