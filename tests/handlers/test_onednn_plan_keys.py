"""OneDnnHandler's plan keys tell apart every geometry a primitive depends on.

A plan (oneDNN primitives made for one geometry) is kept under a key; a key
that missed a part of the geometry would reuse a primitive made for other
operands, reading or writing the wrong memory silently. Each case below
runs two calls on one handler that agree in every part of the key but one,
the second after the first made its plan, and both must give NumpyHandler's
result. (Found by dropping each part of each key in turn: the other tests
passed without most of them.)
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from tests.onednn_support import onednn_handler

LSTM_PASS = {'Input', 'Lstm', 'FullyConnected'}

# (in_h, in_w), (kh, kw), padding (top, bottom, left, right), stride:
# each pair differs in one part of the convolution's key only
CONV_PAIRS = {
    'weights': [
        ((6, 6), (3, 3), (1, 1, 1, 1), (1, 1)),
        ((6, 6), (2, 2), (1, 0, 1, 0), (1, 1)),
    ],
    'outputs': [
        ((6, 6), (3, 3), (1, 1, 1, 1), (1, 1)),
        ((6, 6), (3, 3), (1, 0, 1, 1), (1, 1)),
    ],
    'top': [
        ((6, 6), (2, 2), (1, 0, 0, 0), (1, 1)),
        ((6, 6), (2, 2), (0, 1, 0, 0), (1, 1)),
    ],
    'left': [
        ((6, 6), (2, 2), (0, 0, 1, 0), (1, 1)),
        ((6, 6), (2, 2), (0, 0, 0, 1), (1, 1)),
    ],
    'stride': [
        ((10, 10), (2, 2), (0, 0, 0, 0), (3, 3)),
        ((10, 10), (2, 2), (0, 0, 0, 0), (4, 4)),
    ],
}


def out_size(n, k, before, after, s):
    return (n + before + after - k) // s + 1


def conv_case(rnd, image, kernel, padding, stride, channels=3, filters=4):
    (h, w), (kh, kw), (t, b, le, r) = image, kernel, padding
    oh, ow = out_size(h, kh, t, b, stride[0]), out_size(w, kw, le, r, stride[1])
    inputs = rnd.uniform(-1, 1, (2, h, w, channels)).astype(np.float32)
    weights = rnd.uniform(-1, 1, (filters, kh, kw, channels)).astype(np.float32)
    bias = rnd.uniform(-1, 1, filters).astype(np.float32)
    return inputs, weights, bias, (2, oh, ow, filters)


@pytest.mark.parametrize('part', sorted(CONV_PAIRS))
def test_convolutions_differing_in_one_part_of_the_key(part):
    handler = onednn_handler(np.float32)
    reference = NumpyHandler(np.float32)
    rnd = np.random.RandomState(1)
    keys = set()
    for image, kernel, padding, stride in CONV_PAIRS[part]:
        inputs, weights, bias, out_shape = conv_case(
            rnd, image, kernel, padding, stride
        )
        got, want = np.zeros(out_shape, np.float32), np.zeros(out_shape, np.float32)
        handler.conv2d_forward_batch(inputs, weights, bias, got, padding, stride)
        reference.conv2d_forward_batch(inputs, weights, bias, want, padding, stride)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        keys |= {key for key in handler._plans if key[0] == 'conv'}
    assert len(keys) == 2, keys  # both ran on oneDNN


# (in_h, in_w), window, padding, stride; the kind is the fifth part. The
# convolution's pairs hold for pooling too (the window for the kernel).
POOL_PAIRS = {
    'inputs': [
        ((6, 6), (2, 2), (0, 0, 0, 0), (2, 2)),
        ((7, 7), (2, 2), (0, 0, 0, 0), (2, 2)),
    ],
    'window': CONV_PAIRS['weights'],
    **{part: CONV_PAIRS[part] for part in ('outputs', 'top', 'left', 'stride')},
}


@pytest.mark.parametrize('kind', ['max', 'avg'])
@pytest.mark.parametrize('part', sorted(POOL_PAIRS))
def test_poolings_differing_in_one_part_of_the_key(part, kind):
    handler = onednn_handler(np.float32)
    reference = NumpyHandler(np.float32)
    rnd = np.random.RandomState(2)
    for (h, w), window, padding, stride in POOL_PAIRS[part]:
        t, b, le, r = padding
        oh = out_size(h, window[0], t, b, stride[0])
        ow = out_size(w, window[1], le, r, stride[1])
        inputs = rnd.uniform(-1, 1, (2, h, w, 3)).astype(np.float32)
        results = []
        for h_ in (handler, reference):
            out = np.zeros((2, oh, ow, 3), np.float32)
            if kind == 'max':
                argmax = np.zeros((2, oh, ow, 3), np.float32)
                h_.maxpool2d_forward_batch(inputs, window, out, padding, stride, argmax)
                results.append((out, argmax))
            else:
                h_.avgpool2d_forward_batch(inputs, window, out, padding, stride)
                results.append((out,))
        for got, want in zip(*results):
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    plans = [key for key in handler._plans if key[0] in ('max', 'avg')]
    assert len(plans) == 2 and None not in [handler._plans[k] for k in plans], plans


def strided(rnd, shape):
    """A ``shape`` view into wider rows (other strides than a dense array)."""
    wide = rnd.uniform(-1, 1, (shape[0], shape[1] + 3)).astype(np.float32)
    return wide[:, 1 : 1 + shape[1]]


@pytest.mark.parametrize('operand', ['left', 'right', 'out'])
def test_products_differing_in_one_operands_strides(operand, monkeypatch):
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'ONEDNN_PRODUCT_MIN', 0)
    handler = onednn_handler(np.float32)
    rnd = np.random.RandomState(4)
    m, k, n = 6, 20, 12
    for layout in ('dense', 'strided'):
        shapes = {'left': (m, k), 'right': (k, n), 'out': (m, n)}
        arrays = {
            name: (strided(rnd, shape) if layout == 'strided' and name == operand
                   else rnd.uniform(-1, 1, shape).astype(np.float32))
            for name, shape in shapes.items()
        }  # fmt: skip
        a, b, out = arrays['left'], arrays['right'], arrays['out']
        with handler.network_pass(LSTM_PASS):
            handler.dot_mm(a, b, out)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    plans = [key for key in handler._plans if key[0] == 'matmul']
    assert len(plans) == 2 and None not in [handler._plans[k] for k in plans]


def test_products_differing_in_the_right_operands_shape_only(monkeypatch):
    """``k x n`` against ``k x n'``, all strides and the left operand the
    same."""
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'ONEDNN_PRODUCT_MIN', 0)
    handler = onednn_handler(np.float32)
    rnd = np.random.RandomState(5)
    a = rnd.uniform(-1, 1, (6, 20)).astype(np.float32)
    wide_b = rnd.uniform(-1, 1, (20, 16)).astype(np.float32)
    for n in (16, 12):
        wide_out = np.full((6, 16), 7.0, np.float32)
        b, out = wide_b[:, :n], wide_out[:, :n]  # same strides, other shapes
        with handler.network_pass(LSTM_PASS):
            handler.dot_mm(a, b, out)
        np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
        assert (wide_out[:, n:] == 7).all()  # nothing written beside ``out``
    plans = [key for key in handler._plans if key[0] == 'matmul']
    assert len(plans) == 2 and None not in [handler._plans[k] for k in plans]
