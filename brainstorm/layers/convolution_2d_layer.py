"""Convolution2D: a 2-D cross-correlation of images, plus bias and activation."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import (
    Activation,
    ImagePadding,
    Kwarg,
    PairOfPositiveInts,
    PositiveInt,
)
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import (
    flatten_time,
    flatten_time_and_features,
    padding_sides,
)
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def Convolution2D(
    num_filters: int,
    kernel_size: tuple[int, int],
    stride: tuple[int, int] = (1, 1),
    padding: int | str | tuple[int, int, int, int] = 0,
    activation: str = 'rel',
    name: str | None = None,
) -> ConstructionWrapper:
    """A 2-D convolution layer (cross-correlation) over channels-last images.

    ``y[n, i, j, f] = act(bias[f] + sum_{u, v, c} W[f, u, v, c] *
    xpad[n, i*sy + u, j*sx + v, c])`` where ``xpad`` is the input with
    ``top``, ``bottom``, ``left`` and ``right`` zero cells on its sides. The
    output size is ``OH = (H + top + bottom - kh) // sy + 1`` (likewise
    ``OW``).

    ``padding`` gives those cells (see ``image_padding`` in this module): an int is
    that many on every side; ``'valid'`` is none; ``'same'`` pads so that
    ``OH = ceil(H / sy)`` and ``OW = ceil(W / sx)`` (the input size for
    stride 1), with the padding an odd total cannot split evenly on the
    bottom and right (TensorFlow's and Keras' convention: ``top = total //
    2``, ``bottom = total - top``, where ``total = max((OH - 1)*sy + kh -
    H, 0)``); a tuple is ``(top, bottom, left, right)``.

    Args:
        num_filters: number of filters (output channels), a positive int.
        kernel_size: ``(kh, kw)``, two positive ints.
        stride: ``(sy, sx)``, two positive ints.
        padding: an int >= 0 (zero cells on every side), ``'same'``,
            ``'valid'`` or ``(top, bottom, left, right)``.
        activation: 'sigmoid', 'tanh', 'rel' (or 'relu'), 'linear', 'el',
            'softplus' or 'leaky_rel'.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', H, W, C)`` -> default output
        ``('T', 'B', OH, OW, num_filters)``; parameters
        ``W (num_filters, kh, kw, C)``, ``bias (num_filters,)``. If the handler
        the network runs on keeps them (``Handler.keeps_conv_columns``;
        NumpyHandler does for images of at least 512 output cells
        ``OH * OW``), the layer keeps the receptive fields of the forward
        pass for the backward pass in the internal workspace ``columns``
        ``('T', 'B', OH, OW, kh*kw*C)`` (see
        ``Handler.conv2d_forward_batch``); on other handlers it has no such
        buffer.
    """
    return ConstructionWrapper.create(
        Convolution2DLayerImpl,
        name=name,
        num_filters=num_filters,
        kernel_size=kernel_size,
        stride=stride,
        padding=padding,
        activation=activation,
    )


def image_padding(
    padding: int | str | tuple[int, int, int, int],
    image: tuple[int, int],
    kernel_size: tuple[int, int],
    stride: tuple[int, int],
) -> int | tuple[int, int, int, int]:
    """The padding of an image layer in the form the handler ops take.

    Args:
        padding: the layer's argument: an int, ``'same'``, ``'valid'`` or
            ``(top, bottom, left, right)``.
        image: the input's ``(H, W)``.
        kernel_size: ``(kh, kw)``.
        stride: ``(sy, sx)``.

    Returns:
        An int where the padding is the same on every side (the form of
        Brainstorm 0.5's networks and handlers), else the tuple ``(top,
        bottom, left, right)``. ``'same'`` gives a total of ``max((ceil(H /
        sy) - 1)*sy + kh - H, 0)`` rows, ``total // 2`` of them on top and the
        rest at the bottom (likewise for the columns, the rest on the right).

    >>> image_padding('same', (8, 8), (3, 3), (1, 1))
    1
    >>> image_padding('same', (8, 8), (2, 2), (1, 1))
    (0, 1, 0, 1)
    >>> image_padding('same', (7, 8), (3, 3), (2, 2))
    (1, 1, 0, 1)
    """
    if padding == 'valid':
        return 0
    if padding == 'same' and len(image) == 2:  # (else image_output_shape fails)
        sides: list[int] = []
        for size, kernel, step in zip(image, kernel_size, stride):
            out = -(-size // step)
            total = max((out - 1) * step + kernel - size, 0)
            sides += [total // 2, total - total // 2]
        padding = (sides[0], sides[1], sides[2], sides[3])
    if isinstance(padding, tuple):
        return padding[0] if len(set(padding)) == 1 else padding
    return padding if isinstance(padding, int) else 0


def image_output_shape(
    layer: Layer,
    in_shape: BufferStructure,
    kernel_size: tuple[int, int],
    stride: tuple[int, int],
    padding: int | tuple[int, int, int, int],
) -> tuple[int, int, int]:
    """Check an image input ``(T, B, H, W, C)`` against a window.

    Args:
        layer: the layer (for the error messages).
        in_shape: the input's structure.
        kernel_size: ``(kh, kw)``.
        stride: ``(sy, sx)``.
        padding: an int or ``(top, bottom, left, right)`` (the form of
            :func:`image_padding`).

    Returns:
        ``(OH, OW, C)``: the output's height and width, the input channels.

    Raises:
        LayerValidationError: if the input does not have exactly three
            feature dimensions or the window is larger than the padded image.
    """
    features = in_shape.feature_shape
    if len(features) != 3:
        raise LayerValidationError(
            f'{layer._desc()}: input default must be images of shape '
            f'(T, B, height, width, channels), i.e. have 3 feature '
            f'dimensions. Received shape {in_shape.shape}'
        )
    height, width, channels = features
    top, bottom, left, right = padding_sides(padding)
    padded = (height + top + bottom, width + left + right)
    if kernel_size[0] > padded[0] or kernel_size[1] > padded[1]:
        raise LayerValidationError(
            f'{layer._desc()}: kernel_size {kernel_size} is larger than the '
            f'padded input {padded} (input {height}x{width}, padding '
            f'{padding}). Use a smaller kernel or more padding.'
        )
    out_h = (padded[0] - kernel_size[0]) // stride[0] + 1
    out_w = (padded[1] - kernel_size[1]) // stride[1] + 1
    return out_h, out_w, channels


class Convolution2DLayerImpl(Layer):
    """Implementation of :func:`Convolution2D`."""

    overwrites_gradients = True
    can_overwrite_input_deltas = True
    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'num_filters': Kwarg(
            PositiveInt(), description='number of filters (output channels)'
        ),
        'kernel_size': Kwarg(
            PairOfPositiveInts(), description='(height, width) of the filters'
        ),
        'stride': Kwarg(
            PairOfPositiveInts(),
            description='(vertical, horizontal) step',
        ),
        'padding': Kwarg(
            ImagePadding(),
            description=(
                "zero cells added on every side, 'same', 'valid' or "
                '(top, bottom, left, right)'
            ),
        ),
        'activation': Kwarg(Activation(), description='activation function'),
    }

    def setup(self, kwargs, in_shapes):
        """The output, W and bias shapes (the window checked against the image)."""
        self.activation = kwargs['activation']
        self.kernel_size = kwargs['kernel_size']
        self.stride = kwargs['stride']
        self.padding = image_padding(
            kwargs['padding'],
            in_shapes['default'].feature_shape[:2],
            self.kernel_size,
            self.stride,
        )
        num_filters = kwargs['num_filters']
        out_h, out_w, channels = image_output_shape(
            self, in_shapes['default'], self.kernel_size, self.stride, self.padding
        )
        outputs = OrderedDict(
            default=BufferStructure('T', 'B', out_h, out_w, num_filters)
        )
        parameters = OrderedDict(
            W=BufferStructure(num_filters, *self.kernel_size, channels),
            bias=BufferStructure(num_filters),
        )
        # the receptive fields of all output cells, if the handler keeps them
        self._out_cells = out_h * out_w
        self._columns_structure = BufferStructure(
            'T', 'B', out_h, out_w, self.kernel_size[0] * self.kernel_size[1] * channels
        )
        return outputs, parameters, OrderedDict()

    def workspace_shapes(self, handler):
        """The ``columns`` workspace if ``handler`` keeps conv columns."""
        if handler.keeps_conv_columns(self._out_cells):
            return OrderedDict(columns=self._columns_structure)
        return OrderedDict()

    def _columns(self, buffers):
        """The ``columns`` workspace for the conv ops (None if not kept)."""
        if 'columns' not in self.internal_shapes:
            return None
        return flatten_time(buffers.internals.columns)

    def forward_pass(self, buffers, training_pass=True):
        """``y = act(conv(x, W) + bias)``, keeping the columns if laid out."""
        _h = self.handler
        W, bias = buffers.parameters
        x = flatten_time(buffers.inputs.default)
        y = flatten_time(buffers.outputs.default)
        # the activation is the op's: a handler may fuse it with the product
        _h.conv2d_forward_batch(
            x,
            W,
            bias,
            y,
            self.padding,
            self.stride,
            columns=self._columns(buffers),
            activation=self.activation,
        )

    def backward_pass(self, buffers):
        """Through the activation, then input deltas, ``dW`` and ``dbias``."""
        _h = self.handler
        W = buffers.parameters.W
        dW, dbias = buffers.gradients
        x = flatten_time(buffers.inputs.default)
        dx = flatten_time(buffers.input_deltas.default)
        dy = flatten_time(buffers.output_deltas.default)
        y_rows = flatten_time_and_features(buffers.outputs.default)
        dy_rows = flatten_time_and_features(buffers.output_deltas.default)

        _h.inplace_act_func_deriv[self.activation](y_rows, dy_rows)
        _h.conv2d_backward_batch(
            x,
            W,
            self.padding,
            self.stride,
            dx,
            dy,
            dW,
            dbias,
            columns=self._columns(buffers),
            skip_in_deltas='default' in self.skip_input_deltas,
            overwrite_in_deltas='default' in self.overwrite_input_deltas,
        )
