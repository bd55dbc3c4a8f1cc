"""GlobalPooling: the mean or maximum over all positions of each channel."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import Kwarg, OneOf
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import flatten_time
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def GlobalPooling(type: str = 'avg', name: str | None = None) -> ConstructionWrapper:
    """Pool each channel over all spatial positions: ``(T, B, H, W, C) -> (T, B, C)``.

    ``'avg'`` takes the mean over the ``H * W`` positions, ``'max'`` the
    maximum (its deltas go to the first maximal position). Sequences of
    vectors ``(T, B, L, C)`` are pooled over ``L`` the same way. It is
    ``Pooling2D`` with the whole image as its window, and uses the same
    handler ops.

    Args:
        type: ``'avg'`` or ``'max'``.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', H, W, C)`` or ``('T', 'B', L, C)`` ->
        default output ``('T', 'B', C)``. Max pooling keeps the internal
        ``argmax`` ``('T', 'B', 1, 1, C)``: the flat in-image index
        ``(row * W + col) * C + c`` of each maximum.
    """
    return ConstructionWrapper.create(GlobalPoolingLayerImpl, name=name, type=type)


class GlobalPoolingLayerImpl(Layer):
    """Implementation of :func:`GlobalPooling`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'type': Kwarg(OneOf('avg', 'max'), description='pooling function'),
    }

    def setup(self, kwargs, in_shapes):
        """Output ``('T', 'B', C)``; internal ``argmax`` for max pooling.

        Raises:
            LayerValidationError: the input has not 2 or 3 feature axes.
        """
        self.type = kwargs['type']
        features = in_shapes['default'].feature_shape
        if len(features) not in (2, 3):
            raise LayerValidationError(
                f'{self._desc()}: the input must be images (T, B, H, W, C) or '
                f'sequences of vectors (T, B, L, C). Received shape '
                f'{in_shapes["default"].shape}'
            )
        self.window = (features[0], features[1] if len(features) == 3 else 1)
        channels = features[-1]
        outputs = OrderedDict(default=BufferStructure('T', 'B', channels))
        internals = OrderedDict()
        if self.type == 'max':
            internals['argmax'] = BufferStructure('T', 'B', 1, 1, channels)
        return outputs, OrderedDict(), internals

    def _image(self, array):
        """``(T, B, H, W, C)`` or ``(T, B, L, C)`` as ``(T*B, H, W, C)``."""
        flat = flatten_time(array)
        n, c = flat.shape[0], flat.shape[-1]
        return flat.reshape((n, *self.window, c))

    def _cells(self, array):
        """The ``(T, B, C)`` output as ``(T*B, 1, 1, C)`` images."""
        flat = flatten_time(array)
        return flat.reshape((flat.shape[0], 1, 1, flat.shape[1]))

    def forward_pass(self, buffers, training_pass=True):
        """The mean or maximum of each channel over all positions."""
        _h = self.handler
        x = self._image(buffers.inputs.default)
        y = self._cells(buffers.outputs.default)

        if self.type == 'max':
            argmax = flatten_time(buffers.internals.argmax)
            _h.maxpool2d_forward_batch(x, self.window, y, 0, (1, 1), argmax)
        else:
            _h.avgpool2d_forward_batch(x, self.window, y, 0, (1, 1))

    def backward_pass(self, buffers):
        """Add the output deltas to the positions they came from.

        ``'max'`` routes each delta to the position in ``argmax``; ``'avg'``
        spreads it evenly over all positions.
        """
        _h = self.handler
        x = self._image(buffers.inputs.default)
        y = self._cells(buffers.outputs.default)
        dx = self._image(buffers.input_deltas.default)
        dy = self._cells(buffers.output_deltas.default)

        if self.type == 'max':
            argmax = flatten_time(buffers.internals.argmax)
            _h.maxpool2d_backward_batch(x, self.window, y, 0, (1, 1), argmax, dx, dy)
        else:
            _h.avgpool2d_backward_batch(x, self.window, y, 0, (1, 1), dx, dy)
