"""'same', 'valid' and per-side padding of Convolution2D and Pooling2D."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.layers.convolution_2d_layer import (
    Convolution2DLayerImpl,
    image_padding,
)
from brainstorm.layers.pooling_2d_layer import Pooling2DLayerImpl
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.utils import LayerValidationError


def padded_windows(x, kernel, stride, sides, fill):
    """Every window of ``x`` padded by ``sides`` with ``fill``:
    ``(N, OH, OW, kh, kw, C)``."""
    top, bottom, left, right = sides
    xp = np.pad(x, ((0, 0), (top, bottom), (left, right), (0, 0)), constant_values=fill)
    kh, kw = kernel
    sy, sx = stride
    oh = (xp.shape[1] - kh) // sy + 1
    ow = (xp.shape[2] - kw) // sx + 1
    return np.stack(
        [
            np.stack(
                [xp[:, i * sy : i * sy + kh, j * sx : j * sx + kw] for j in range(ow)],
                1,
            )
            for i in range(oh)
        ],
        1,
    )


def tf_same(size, kernel, stride):
    """TensorFlow's 'same' padding of one axis, written from its docs."""
    out = -(-size // stride)
    total = max((out - 1) * stride + kernel - size, 0)
    return total // 2, total - total // 2


CASES = [  # image (H, W, C), kernel, stride
    ((4, 5, 2), (3, 3), (1, 1)),
    ((4, 5, 2), (2, 2), (1, 1)),
    ((5, 4, 2), (2, 3), (2, 2)),
    ((5, 7, 1), (3, 4), (2, 3)),
    ((6, 6, 2), (1, 1), (2, 2)),
]


def run_forward(layer_class, image, **kwargs):
    layer = instantiate_layer(layer_class, {'default': image}, **kwargs)
    buffers, _ = set_up_layer(layer, {'time_steps': 2, 'batch_size': 3, 'seed': 4})
    layer.forward_pass(buffers, training_pass=False)
    h = layer.handler
    x = h.get_numpy_copy(buffers.inputs.default).reshape((6,) + image)
    y = h.get_numpy_copy(buffers.outputs.default)
    return layer, buffers, x, y.reshape((6,) + y.shape[2:])


@pytest.mark.parametrize('image, kernel, stride', CASES)
def test_same_conv_matches_explicit_padding(image, kernel, stride):
    layer, buffers, x, y = run_forward(
        Convolution2DLayerImpl,
        image,
        num_filters=3,
        kernel_size=kernel,
        stride=stride,
        padding='same',
        activation='linear',
    )
    sides = tf_same(image[0], kernel[0], stride[0]) + tf_same(
        image[1], kernel[1], stride[1]
    )
    h = layer.handler
    W = h.get_numpy_copy(buffers.parameters.W)
    bias = h.get_numpy_copy(buffers.parameters.bias)
    windows = padded_windows(x, kernel, stride, sides, 0.0)
    expected = np.einsum('nijuvc,fuvc->nijf', windows, W) + bias
    assert y.shape[1:3] == (-(-image[0] // stride[0]), -(-image[1] // stride[1]))
    np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('kind', ['max', 'avg'])
@pytest.mark.parametrize('image, kernel, stride', CASES)
def test_same_pooling_ignores_the_padding_cells(image, kernel, stride, kind):
    _, _, x, y = run_forward(
        Pooling2DLayerImpl,
        image,
        kernel_size=kernel,
        stride=stride,
        padding='same',
        type=kind,
    )
    sides = tf_same(image[0], kernel[0], stride[0]) + tf_same(
        image[1], kernel[1], stride[1]
    )
    windows = padded_windows(x, kernel, stride, sides, np.nan)
    reduce = np.nanmax if kind == 'max' else np.nanmean
    expected = reduce(windows, axis=(3, 4))
    assert y.shape[1:3] == (-(-image[0] // stride[0]), -(-image[1] // stride[1]))
    np.testing.assert_allclose(y, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize('layer_class', [Convolution2DLayerImpl, Pooling2DLayerImpl])
def test_valid_is_no_padding_and_tuples_are_top_bottom_left_right(layer_class):
    extra = {'num_filters': 2} if layer_class is Convolution2DLayerImpl else {}
    valid = instantiate_layer(
        layer_class,
        {'default': (5, 6, 2)},
        kernel_size=(2, 3),
        padding='valid',
        **extra,
    )
    assert valid.padding == 0
    assert valid.get_shape('outputs.default')[2:4] == (4, 4)
    sided = instantiate_layer(
        layer_class,
        {'default': (5, 6, 2)},
        kernel_size=(2, 3),
        padding=[0, 2, 1, 0],
        **extra,
    )
    assert sided.padding == (0, 2, 1, 0)
    assert sided.get_shape('outputs.default')[2:4] == (6, 5)
    even = instantiate_layer(
        layer_class,
        {'default': (5, 6, 2)},
        kernel_size=(2, 3),
        padding=(1, 1, 1, 1),
        **extra,
    )
    assert even.padding == 1  # the int form where every side is the same


def test_image_padding_puts_the_odd_cell_bottom_and_right():
    assert image_padding('same', (8, 8), (2, 4), (1, 1)) == (0, 1, 1, 2)
    assert image_padding('same', (8, 8), (3, 3), (1, 1)) == 1
    assert image_padding('same', (9, 9), (3, 3), (3, 3)) == 0
    # 10 -> 4 outputs: 3*3 + 3 - 10 = 2 cells, one on each side
    assert image_padding('same', (10, 10), (3, 3), (3, 3)) == 1
    assert image_padding(2, (8, 8), (3, 3), (1, 1)) == 2
    assert image_padding('valid', (8, 8), (3, 3), (1, 1)) == 0


@pytest.mark.parametrize(
    'padding', ['full', -1, (1, 1), (0, 0, 0, -1), 1.5, True, 'SAME']
)
@pytest.mark.parametrize('factory', ['Convolution2D', 'Pooling2D'])
def test_bad_padding_names_the_layer_and_argument(factory, padding):
    args = (2, (3, 3)) if factory == 'Convolution2D' else ((3, 3),)
    with pytest.raises(LayerValidationError) as info:
        getattr(bs.layers, factory)(*args, padding=padding, name='Pic')
    message = str(info.value)
    assert 'Pic' in message and 'padding' in message and "'same'" in message


@pytest.mark.parametrize(
    'padding', ['same', 'valid', (0, 1, 2, 1), 1], ids=['same', 'valid', 'tuple', 'int']
)
def test_description_and_hdf5_round_trip(padding, tmp_path):
    inp = bs.layers.Input({'default': ('T', 'B', 5, 6, 2)})
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(3, (2, 3), stride=(2, 1), padding=padding, name='C')
        >> bs.layers.Pooling2D((2, 2), type='max', padding=padding, name='P')
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    architecture = json.loads(json.dumps(net.architecture))
    assert architecture['C']['padding'] == (
        list(padding) if isinstance(padding, tuple) else padding
    )
    x = np.random.RandomState(0).randn(2, 3, 5, 6, 2)
    net.provide_external_data({'default': x})
    net.forward_pass()
    expected = net.get('P.outputs.default')

    path = str(tmp_path / 'net.hdf5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    loaded.set_handler(NumpyHandler(np.float64))
    loaded.provide_external_data({'default': x})
    loaded.forward_pass()
    np.testing.assert_array_equal(loaded.get('P.outputs.default'), expected)
    assert loaded.layers['C'].padding == net.layers['C'].padding
