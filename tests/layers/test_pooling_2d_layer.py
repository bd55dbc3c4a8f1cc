"""Pooling2D: max/avg forward and backward against explicit loops, argmax,
all-padding windows, validation."""

import numpy as np
import pytest

from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.layers import Input, Pooling2D
from brainstorm.layers.pooling_2d_layer import Pooling2DLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.utils import LayerValidationError
from tests.onednn_support import onednn_handler


def pool_reference(x, kernel, padding, stride, kind):
    """Slow pooling of (N, H, W, C) images with explicit loops.

    Returns ``(outputs, argmax)``; argmax is the flat in-image index
    ``(row * W + col) * C + c`` of the first maximum (max pooling only), -1
    for windows of padding only.
    """
    n, height, width, channels = x.shape
    kh, kw = kernel
    sy, sx = stride
    oh = (height + 2 * padding - kh) // sy + 1
    ow = (width + 2 * padding - kw) // sx + 1
    y = np.zeros((n, oh, ow, channels))
    argmax = -np.ones((n, oh, ow, channels))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for c in range(channels):
                    values, indices = [], []
                    for u in range(kh):
                        for v in range(kw):
                            row = i * sy + u - padding
                            col = j * sx + v - padding
                            if 0 <= row < height and 0 <= col < width:
                                values.append(x[b, row, col, c])
                                indices.append((row * width + col) * channels + c)
                    if not values:
                        continue
                    if kind == 'avg':
                        y[b, i, j, c] = np.mean(values)
                    else:
                        best = int(np.argmax(values))
                        y[b, i, j, c] = values[best]
                        argmax[b, i, j, c] = indices[best]
    return y, argmax


def pool_backward_reference(x, dy, kernel, padding, stride, kind):
    """Input deltas of pooling by explicit loops."""
    n, height, width, channels = x.shape
    _, oh, ow, _ = dy.shape
    dx = np.zeros_like(x)
    _, argmax = pool_reference(x, kernel, padding, stride, 'max')
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for c in range(channels):
                    cells = [
                        (i * stride[0] + u - padding, j * stride[1] + v - padding)
                        for u in range(kernel[0])
                        for v in range(kernel[1])
                    ]
                    cells = [
                        (r, q) for r, q in cells if 0 <= r < height and 0 <= q < width
                    ]
                    if kind == 'avg':
                        for r, q in cells:
                            dx[b, r, q, c] += dy[b, i, j, c] / len(cells)
                    elif argmax[b, i, j, c] >= 0:
                        flat = int(argmax[b, i, j, c]) // channels
                        dx[b, flat // width, flat % width, c] += dy[b, i, j, c]
    return dx


CASES = [
    ((4, 5, 2), {'kernel_size': (2, 3)}),
    ((5, 4, 2), {'kernel_size': (2, 3), 'padding': 1, 'stride': (2, 1)}),
    ((6, 7, 3), {'kernel_size': (3, 3), 'padding': 1, 'stride': (2, 2)}),
    # padding 2 with a 2x2 window and stride 2: some windows see only padding
    ((3, 3, 2), {'kernel_size': (2, 2), 'padding': 2, 'stride': (2, 2)}),
]


def run_layer(kind, image, kwargs, T=2, B=3, seed=5):
    layer = instantiate_layer(
        Pooling2DLayerImpl, {'default': image}, type=kind, **kwargs
    )
    buffers, manager = set_up_layer(
        layer, {'time_steps': T, 'batch_size': B, 'seed': seed}
    )
    h = layer.handler
    layer.forward_pass(buffers, training_pass=True)
    manager.clear_backward_buffers()
    rnd = np.random.RandomState(seed + 1)
    dy = rnd.randn(*buffers.output_deltas.default.shape)
    h.set_from_numpy(buffers.output_deltas.default, dy)
    layer.backward_pass(buffers)
    x = h.get_numpy_copy(buffers.inputs.default)
    results = {
        'outputs': h.get_numpy_copy(buffers.outputs.default),
        'input_deltas': h.get_numpy_copy(buffers.input_deltas.default),
    }
    if 'argmax' in buffers.internals.keys():
        results['argmax'] = h.get_numpy_copy(buffers.internals.argmax)
    return layer, x, dy, results


@pytest.mark.parametrize('image, kwargs', CASES)
@pytest.mark.parametrize('kind', ['max', 'avg'])
def test_forward_and_backward_match_explicit_loops(kind, image, kwargs):
    T, B = 2, 3
    layer, x, dy, got = run_layer(kind, image, kwargs, T, B)
    padding = kwargs.get('padding', 0)
    stride = kwargs.get('stride', (1, 1))
    flat_x = x.reshape((T * B,) + image)
    expected, argmax = pool_reference(
        flat_x, kwargs['kernel_size'], padding, stride, kind
    )
    out_shape = (T, B) + expected.shape[1:]
    assert layer.get_shape('outputs.default') == ('T', 'B') + expected.shape[1:]
    np.testing.assert_allclose(
        got['outputs'], expected.reshape(out_shape), rtol=1e-12, atol=1e-12
    )
    if kind == 'max':
        np.testing.assert_array_equal(got['argmax'], argmax.reshape(out_shape))
    else:
        assert 'argmax' not in got
    dx = pool_backward_reference(
        flat_x, dy.reshape(expected.shape), kwargs['kernel_size'], padding, stride, kind
    )
    # the input deltas started at 0, so they equal dx
    np.testing.assert_allclose(
        got['input_deltas'], dx.reshape(x.shape), rtol=1e-12, atol=1e-12
    )


def test_all_padding_windows_give_zero_and_argmax_minus_one():
    _, _, _, got = run_layer(
        'max', (3, 3, 2), {'kernel_size': (2, 2), 'padding': 2, 'stride': (2, 2)}
    )
    # OH = (3 + 4 - 2)//2 + 1 = 3; window row 0 covers input rows -2, -1
    assert got['outputs'].shape[2:] == (3, 3, 2)
    assert np.all(got['argmax'][:, :, 0] == -1)
    assert np.all(got['outputs'][:, :, 0] == 0.0)
    assert np.all(got['argmax'][:, :, 1, 1] >= 0)


def test_max_pooling_prefers_the_first_maximum_on_ties():
    layer = instantiate_layer(
        Pooling2DLayerImpl, {'default': (2, 2, 1)}, kernel_size=(2, 2)
    )
    x = np.full((1, 1, 2, 2, 1), 3.0)
    buffers, _ = set_up_layer(layer, {'default': x})
    layer.forward_pass(buffers)
    assert layer.handler.get_numpy_copy(buffers.internals.argmax).item() == 0


def test_shapes_and_internals():
    layer = instantiate_layer(
        Pooling2DLayerImpl,
        {'default': (7, 9, 3)},
        kernel_size=(3, 2),
        padding=1,
        stride=(2, 3),
    )
    assert layer.type == 'max'
    assert layer.get_shape('outputs.default') == ('T', 'B', 4, 4, 3)
    assert layer.get_shape('internals.argmax') == ('T', 'B', 4, 4, 3)
    assert layer.parameter_shapes == {}
    avg = instantiate_layer(
        Pooling2DLayerImpl, {'default': (7, 9, 3)}, kernel_size=(3, 2), type='avg'
    )
    assert avg.internal_shapes == {}


def test_default_stride_is_one():
    layer = instantiate_layer(
        Pooling2DLayerImpl, {'default': (5, 5, 1)}, kernel_size=(2, 2)
    )
    assert layer.stride == (1, 1)
    assert layer.get_shape('outputs.default') == ('T', 'B', 4, 4, 1)


def test_accepts_the_unused_activation_function_argument():
    architecture = {
        'Input': {
            '@type': 'Input',
            'out_shapes': {'default': ['T', 'B', 4, 4, 1]},
            '@outgoing_connections': {'default': ['Pool']},
        },
        'Pool': {
            '@type': 'Pooling2D',
            'kernel_size': [2, 2],
            'type': 'avg',
            'activation_function': 'tanh',
            '@outgoing_connections': {},
        },
    }
    net = Network.from_architecture(architecture)
    assert net.layers['Pool'].type == 'avg'
    assert net.layers['Pool'].get_shape('outputs.default') == ('T', 'B', 3, 3, 1)


def test_constructor_builds_a_network():
    inp = Input({'default': ('T', 'B', 6, 6, 2)})
    net = Network.from_layer(inp >> Pooling2D((2, 2), stride=(2, 2), name='Pool'))
    assert net.architecture['Pool']['type'] == 'max'
    assert net.layers['Pool'].get_shape('outputs.default') == ('T', 'B', 3, 3, 2)


def test_kernel_larger_than_padded_input_is_rejected():
    with pytest.raises(
        LayerValidationError,
        match=r"Pooling2D 'Pool': kernel_size \(4, 2\) is "
        r'larger than the padded input \(3, 3\)',
    ):
        instantiate_layer(
            Pooling2DLayerImpl, {'default': (3, 3, 1)}, name='Pool', kernel_size=(4, 2)
        )


@pytest.mark.parametrize('features', [(5,), (4, 4)])
def test_input_must_have_three_feature_dims(features):
    with pytest.raises(LayerValidationError, match='3 feature dimensions'):
        instantiate_layer(Pooling2DLayerImpl, {'default': features}, kernel_size=(1, 1))


@pytest.mark.parametrize(
    'kwargs, message',
    [
        ({'kernel_size': (2, 2), 'type': 'sum'}, "type must be one of 'max', 'avg'"),
        ({'kernel_size': (0, 2)}, 'kernel_size must be a pair'),
        ({'kernel_size': (2, 2), 'stride': (1, 2, 3)}, 'stride must be a pair'),
        ({'kernel_size': (2, 2), 'padding': 1.5}, 'padding must be an int'),
        ({}, 'kernel_size is required'),
        ({'kernel_size': (2, 2), 'activation': 'rel'}, 'unexpected argument'),
    ],
)
def test_bad_arguments_raise_layer_validation_errors(kwargs, message):
    with pytest.raises(LayerValidationError, match=message):
        instantiate_layer(Pooling2DLayerImpl, {'default': (4, 4, 1)}, **kwargs)


def _avg_reference(x, dy, kernel, top_left, stride):
    """Average pooling and its input deltas by explicit loops, for (N, H, W,
    C) images, any output size (``dy``'s) and padding ``(top, left)``."""
    n, height, width, _ = x.shape
    _, oh, ow, _ = dy.shape
    y, dx = np.zeros(dy.shape), np.zeros_like(x)
    for i in range(oh):
        for j in range(ow):
            cells = [
                (row, col)
                for u in range(kernel[0])
                for v in range(kernel[1])
                for row, col in [
                    (i * stride[0] + u - top_left[0], j * stride[1] + v - top_left[1])
                ]
                if 0 <= row < height and 0 <= col < width
            ]
            for row, col in cells:
                y[:, i, j] += x[:, row, col] / len(cells)
                dx[:, row, col] += dy[:, i, j] / len(cells)
    return y, dx


@pytest.mark.parametrize('handler', ['numpy', 'onednn32', 'onednn64', 'debug'])
@pytest.mark.parametrize(
    'image, kwargs',
    [
        ((2, 1, 1), {'kernel_size': (7, 1), 'padding': 'same'}),
        ((3, 5, 2), {'kernel_size': (10, 3), 'padding': 'same'}),
        ((2, 1, 1), {'kernel_size': (7, 1), 'padding': (3, 9, 0, 0)}),
        ((3, 2, 2), {'kernel_size': (2, 6), 'padding': (0, 1, 2, 7), 'stride': (1, 2)}),
    ],
)
def test_avg_pooling_windows_reaching_far_past_the_image(handler, image, kwargs):
    """A window offset past the last input row for every output gave a
    negative end of its output range: ``rows[0:-k] += 1`` counted the
    offset for the first outputs, which divided by too many cells (a 2x1
    image [1, 3] under a 7x1 'same' window gave [1.33, 2] for [2, 2];
    the input deltas were wrong alike), on the NumPy code of every CPU
    handler."""
    make = {
        'numpy': lambda: NumpyHandler(np.float64),
        'onednn32': lambda: onednn_handler(np.float32),  # skips without oneDNN
        'onednn64': lambda: onednn_handler(np.float64),
        'debug': lambda: DebugHandler(NumpyHandler(np.float64)),
    }[handler]
    layer = instantiate_layer(
        Pooling2DLayerImpl, {'default': image}, type='avg', **kwargs
    )
    buffers, manager = set_up_layer(
        layer, {'time_steps': 2, 'batch_size': 3, 'seed': 3}, make()
    )
    h = layer.handler
    layer.forward_pass(buffers, training_pass=True)
    manager.clear_backward_buffers()
    dy = np.random.RandomState(4).randn(*buffers.output_deltas.default.shape)
    h.set_from_numpy(buffers.output_deltas.default, dy)
    layer.backward_pass(buffers)
    x = h.get_numpy_copy(buffers.inputs.default)
    top_left = (layer.padding[0], layer.padding[2])
    expected, dx = _avg_reference(
        x.reshape((6,) + image),
        dy.reshape((6,) + dy.shape[2:]),
        layer.kernel_size,
        top_left,
        layer.stride,
    )
    tolerance = 1e-5 if handler == 'onednn32' else 1e-12
    got = h.get_numpy_copy(buffers.outputs.default)
    np.testing.assert_allclose(
        got.reshape(expected.shape), expected, rtol=tolerance, atol=tolerance
    )
    deltas = h.get_numpy_copy(buffers.input_deltas.default)
    np.testing.assert_allclose(
        deltas.reshape(dx.shape), dx, rtol=tolerance, atol=tolerance
    )
