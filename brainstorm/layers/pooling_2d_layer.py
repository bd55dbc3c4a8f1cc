"""Pooling2D: max or average pooling of channels-last images."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.attributes import (
    Constraint,
    ImagePadding,
    Kwarg,
    OneOf,
    PairOfPositiveInts,
)
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.layers.convolution_2d_layer import image_output_shape, image_padding
from brainstorm.shapes import flatten_time
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def Pooling2D(
    kernel_size: tuple[int, int],
    type: str = 'max',
    stride: tuple[int, int] = (1, 1),
    padding: int | str | tuple[int, int, int, int] = 0,
    name: str | None = None,
    activation_function: object = None,
) -> ConstructionWrapper:
    """A 2-D pooling layer over each channel of channels-last images.

    Output cell ``(i, j)`` pools the input cells of rows ``i*sy - top + u``
    and columns ``j*sx - left + v`` (``0 <= u < kh``, ``0 <= v < kw``).
    Padding cells are ignored: ``'max'`` takes the maximum and ``'avg'``
    the mean of the in-bounds cells (0 for a window of padding only). The
    output size is ``OH = (H + top + bottom - kh) // sy + 1`` (likewise
    ``OW``).

    ``padding`` gives ``top, bottom, left, right`` as for
    :func:`~brainstorm.layers.convolution_2d_layer.Convolution2D`: an int is
    that many on every side, ``'valid'`` none, ``'same'`` gives ``OH =
    ceil(H / sy)`` with the extra cell of an odd total at the bottom and
    right, and a tuple is ``(top, bottom, left, right)``.

    Args:
        kernel_size: ``(kh, kw)``, two positive ints.
        type: ``'max'`` or ``'avg'``.
        stride: ``(sy, sx)``, two positive ints.
        padding: an int >= 0 (cells on every side), ``'same'``,
            ``'valid'`` or ``(top, bottom, left, right)``.
        name: the layer name.
        activation_function: ignored. Brainstorm 0.5's Pooling2D accepted it
            in architectures, and so does this one; given here (not None) it
            goes into the architecture as given.

    Shapes:
        default input ``('T', 'B', H, W, C)`` -> default output
        ``('T', 'B', OH, OW, C)``. Max pooling keeps the internal ``argmax``
        (output shape): the flat in-image index ``(row * W + col) * C + c``
        of each maximum, -1 for a window of padding only.
    """
    # left out unless given, so the architectures of other calls stay as
    # Brainstorm 0.5 wrote them
    ignored = (
        {}
        if activation_function is None
        else {'activation_function': activation_function}
    )
    return ConstructionWrapper.create(
        Pooling2DLayerImpl,
        name=name,
        kernel_size=kernel_size,
        type=type,
        stride=stride,
        padding=padding,
        **ignored,
    )


class Pooling2DLayerImpl(Layer):
    """Implementation of :func:`Pooling2D`."""

    expected_inputs = {'default': time_template()}
    can_overwrite_input_deltas = True
    declared_kwargs = {
        'kernel_size': Kwarg(
            PairOfPositiveInts(), description='(height, width) of the window'
        ),
        'type': Kwarg(OneOf('max', 'avg'), description='pooling function'),
        'stride': Kwarg(
            PairOfPositiveInts(),
            description='(vertical, horizontal) step',
        ),
        'padding': Kwarg(
            ImagePadding(),
            description=(
                "cells added on every side, 'same', 'valid' or "
                '(top, bottom, left, right) (ignored by the pooling)'
            ),
        ),
        'activation_function': Kwarg(
            Constraint(),
            description='ignored; accepted for compatibility',
        ),
    }

    def setup(self, kwargs, in_shapes):
        """Output of the pooled image shape; internal ``argmax`` for max pooling."""
        self.type = kwargs['type']
        self.kernel_size = kwargs['kernel_size']
        self.stride = kwargs['stride']
        self.padding = image_padding(
            kwargs['padding'],
            in_shapes['default'].feature_shape[:2],
            self.kernel_size,
            self.stride,
        )
        out_shape = image_output_shape(
            self, in_shapes['default'], self.kernel_size, self.stride, self.padding
        )
        outputs = OrderedDict(default=BufferStructure('T', 'B', *out_shape))
        internals = OrderedDict()
        if self.type == 'max':
            internals['argmax'] = BufferStructure('T', 'B', *out_shape)
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """Max or average over each window, for all time steps at once."""
        _h = self.handler
        x = flatten_time(buffers.inputs.default)
        y = flatten_time(buffers.outputs.default)

        if self.type == 'max':
            argmax = flatten_time(buffers.internals.argmax)
            _h.maxpool2d_forward_batch(
                x, self.kernel_size, y, self.padding, self.stride, argmax
            )
        else:
            _h.avgpool2d_forward_batch(
                x, self.kernel_size, y, self.padding, self.stride
            )

    def backward_pass(self, buffers):
        """Add the output deltas to the inputs they came from.

        Max pooling routes each delta to the position recorded in ``argmax``;
        average pooling spreads it evenly over the window.
        """
        _h = self.handler
        x = flatten_time(buffers.inputs.default)
        y = flatten_time(buffers.outputs.default)
        dx = flatten_time(buffers.input_deltas.default)
        dy = flatten_time(buffers.output_deltas.default)
        # the keyword only where it is needed: the pooling ops took none
        # before, so a handler without it works wherever nothing overwrites
        keywords = {}
        if 'default' in self.overwrite_input_deltas:
            keywords['overwrite_in_deltas'] = True

        if self.type == 'max':
            argmax = flatten_time(buffers.internals.argmax)
            _h.maxpool2d_backward_batch(
                x, self.kernel_size, y, self.padding, self.stride, argmax, dx, dy,
                **keywords,
            )  # fmt: skip
        else:
            _h.avgpool2d_backward_batch(
                x, self.kernel_size, y, self.padding, self.stride, dx, dy, **keywords
            )
