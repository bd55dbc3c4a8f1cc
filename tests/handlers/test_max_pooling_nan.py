"""A NaN is the maximum of its pooling window: the output is NaN and argmax
the first NaN cell (row-major window order), on every CPU handler.

Before, NumpyHandler's argmax pointed one cell past such a window, so the
backward pass sent the delta to a neighbour's cell, or raised IndexError
for the last window of the batch; OneDnnHandler sent it to the window's
last cell.
"""

import itertools

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from tests.onednn_support import onednn_handler

HANDLERS = ['numpy32', 'numpy64', 'onednn']


def make(name):
    if name == 'onednn':
        return onednn_handler(np.float32, seed=1)
    return NumpyHandler(np.float32 if name == 'numpy32' else np.float64)


def reference(x, window, padding, stride, out_hw):
    """Plain loops: outputs and argmax as the op table defines them."""
    n, h, w, c = x.shape
    top, left = padding
    y = np.zeros((n,) + out_hw + (c,))
    argmax = np.zeros_like(y)
    for b, i, j, k in itertools.product(range(n), *map(range, out_hw), range(c)):
        cells = [
            (r, q)
            for r in range(i * stride[0] - top, i * stride[0] - top + window[0])
            for q in range(j * stride[1] - left, j * stride[1] - left + window[1])
            if 0 <= r < h and 0 <= q < w
        ]
        if not cells:
            y[b, i, j, k], argmax[b, i, j, k] = 0, -1
            continue
        values = [x[b, r, q, k] for r, q in cells]
        nans = [cell for cell, v in zip(cells, values) if np.isnan(v)]
        if nans:
            best, (r, q) = np.nan, nans[0]
        else:
            best = max(values)
            r, q = cells[values.index(best)]
        y[b, i, j, k], argmax[b, i, j, k] = best, (r * w + q) * c + k
    return y, argmax


GEOMETRIES = [  # x shape, window, padding (top, bottom, left, right), stride
    ((2, 4, 4, 1), (2, 2), (0, 0, 0, 0), (2, 2)),
    ((2, 9, 8, 3), (3, 3), (0, 0, 0, 0), (2, 2)),
    ((2, 8, 8, 3), (3, 3), (1, 1, 1, 1), (2, 2)),
    ((1, 7, 9, 2), (2, 3), (0, 1, 2, 0), (1, 2)),
    ((3, 5, 5, 2), (2, 2), (2, 2, 2, 2), (2, 2)),  # windows of padding only
]


def pool(h, x, window, padding, stride):
    top, bottom, left, right = padding
    oh = (x.shape[1] + top + bottom - window[0]) // stride[0] + 1
    ow = (x.shape[2] + left + right - window[1]) // stride[1] + 1
    y = h.zeros((x.shape[0], oh, ow, x.shape[3]))
    argmax = h.zeros(y.shape)
    h.maxpool2d_forward_batch(
        h.create_from_numpy(x), window, y, padding, stride, argmax
    )
    return y, argmax, (oh, ow)


@pytest.mark.parametrize('name', HANDLERS)
@pytest.mark.parametrize('geometry', GEOMETRIES)
@pytest.mark.parametrize('nans', ['all', 'last window', 'some'])
def test_nan_windows_point_at_their_first_nan(name, geometry, nans):
    check_nan_windows(make(name), geometry, nans)


@pytest.mark.parametrize('name', ['numpy32', 'numpy64'])
@pytest.mark.parametrize('geometry', GEOMETRIES)
def test_nan_windows_in_chunks_of_one_image(monkeypatch, name, geometry):
    """NumpyHandler pools chunks of images; NaN windows in every chunk."""
    from brainstorm.handlers import _numpy_maxpool

    monkeypatch.setattr(_numpy_maxpool, '_POOL_CHUNK_BYTES', 1)
    check_nan_windows(make(name), geometry, 'some')


def check_nan_windows(h, geometry, nans):
    """Forward and backward of max pooling against ``reference`` (also
    run on PyCudaHandler by test_pycuda_handler.py)."""
    shape, window, padding, stride = geometry
    rnd = np.random.RandomState(3)
    x = rnd.randn(*shape)
    if nans == 'all':
        x[...] = np.nan
    elif nans == 'last window':
        x[-1, -window[0] :, -window[1] :, -1] = np.nan
    else:
        x[rnd.rand(*shape) < 0.2] = np.nan
    y, argmax, out_hw = pool(h, x, window, padding, stride)
    expected_y, expected_argmax = reference(x, window, padding[::2], stride, out_hw)
    np.testing.assert_array_equal(h.get_numpy_copy(argmax), expected_argmax)
    np.testing.assert_array_equal(h.get_numpy_copy(y), expected_y.astype(h.dtype))

    # the backward pass sends each delta to its argmax cell
    dy = rnd.randint(-3, 4, expected_y.shape).astype(np.float64)
    dx = h.zeros(x.shape)
    h.maxpool2d_backward_batch(
        h.create_from_numpy(x), window, y, padding, stride, argmax, dx,
        h.create_from_numpy(dy),
    )  # fmt: skip
    expected_dx = np.zeros(x.shape)
    flat = expected_dx.reshape(len(x), -1)
    for b, index in zip(*np.nonzero(expected_argmax.reshape(len(x), -1) >= 0)):
        flat[b, int(expected_argmax.reshape(len(x), -1)[b, index])] += dy.reshape(
            len(x), -1
        )[b, index]
    np.testing.assert_array_equal(h.get_numpy_copy(dx), expected_dx)


@pytest.mark.parametrize('name', HANDLERS)
def test_a_cnn_with_a_nan_image_passes_backward_with_a_nan_loss(name):
    """The loss shows the NaN; the backward pass does not raise (the data
    check is off, as a user may turn it off)."""
    inp, out = bs.tools.get_in_out_layers('classification', (8, 8, 2), 3)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(4, kernel_size=(3, 3), padding=1)
        >> bs.layers.Pooling2D(kernel_size=(2, 2), stride=(2, 2))
        >> out
    )
    net.set_handler(make(name))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    rnd = np.random.RandomState(2)
    images = rnd.rand(1, 2, 8, 8, 2)
    images[0, -1, -1, -1, :] = np.nan  # the last cell of the last image
    net.provide_external_data(
        {'default': images, 'targets': rnd.randint(0, 3, (1, 2, 1))},
        check_finite=False,
    )
    with np.errstate(invalid='ignore'):
        net.forward_pass()
        net.backward_pass()
    loss = net.get('Loss.outputs.loss')
    assert np.isnan(loss).any()
