"""Means and sums over many values stay in range in float16 (and float32).

LayerNorm, BatchNorm and Loss divide their terms by a power of two before
summing them, and average pooling adds float16 windows in float32 scratch:
each sum stays within the range of the mean it computes. Before, the sums
overflowed for ordinary float16 values (LayerNorm over 512 features of
std 12, BatchNorm over 16384 values of std 3, a 16x16 average of 300, a
loss of 310 summed over a batch of 256) and the layers silently gave beta,
NaN or inf. Every result is compared with a float64 NumPy reference.
"""

import warnings

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.initializers import Gaussian
from brainstorm.layers.batch_norm_layer import BatchNormLayerImpl
from brainstorm.layers.global_pooling_layer import GlobalPoolingLayerImpl
from brainstorm.layers.layer_norm_layer import LayerNormLayerImpl
from brainstorm.layers.loss_layer import LossLayerImpl
from brainstorm.layers.pooling_2d_layer import Pooling2DLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.tools import get_in_out_layers
from tests.onednn_support import onednn_handler

HANDLERS = ['numpy', 'onednn']


def _handler(kind, dtype):
    if kind == 'onednn':
        return onednn_handler(dtype)
    return NumpyHandler(dtype)


def _run(layer_class, in_shapes, kwargs, spec, handler, dy, out='default'):
    """One training forward and backward pass of a lone layer.

    Returns the outputs, input deltas, gradients and parameters (after the
    pass) as float64 arrays.
    """
    layer = instantiate_layer(layer_class, in_shapes, **kwargs)
    buffers, manager = set_up_layer(layer, spec, handler)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # an overflow in a pass fails the test
        layer.forward_pass(buffers, training_pass=True)
        manager.clear_backward_buffers()
        handler.set_from_numpy(buffers.output_deltas[out], dy)
        layer.backward_pass(buffers)

    def get(view):
        return {
            name: handler.get_numpy_copy(array).astype(np.float64)
            for name, array in view.items()
        }

    return (
        get(buffers.outputs),
        get(buffers.input_deltas),
        get(buffers.gradients),
        get(buffers.parameters),
    )


def _assert_close(got, ref, tol):
    """``max |got - ref| <= tol * max |ref|``, everything finite."""
    assert np.isfinite(got).all()
    err = np.abs(got - ref).max()
    assert err <= tol * np.abs(ref).max(), (err, np.abs(ref).max())


# float16 results: a few units of float16's 2**-11 relative precision
F16_TOL = 4e-3


# ------------------------------------------------------------------ LayerNorm


def _layer_norm_reference(x, gamma, beta, dy, epsilon):
    mean = x.mean(axis=2, keepdims=True)
    std = np.sqrt(x.var(axis=2, keepdims=True) + epsilon)
    x_hat = (x - mean) / std
    g = gamma * dy
    dx = g - g.mean(2, keepdims=True) - x_hat * (g * x_hat).mean(2, keepdims=True)
    dx /= std
    y = x_hat * gamma + beta
    return y, dx, (dy * x_hat).sum((0, 1)), dy.sum((0, 1))


def _layer_norm(x, gamma, beta, dy, handler):
    spec = {
        'time_steps': x.shape[0],
        'batch_size': x.shape[1],
        'default': x,
        'inits': {'gamma': gamma, 'beta': beta},
    }
    features = x.shape[2:]
    return _run(
        LayerNormLayerImpl,
        {'default': features},
        {'epsilon': 1e-5},
        spec,
        handler,
        dy,
    )


@pytest.mark.parametrize('std', [12.0, 100.0])
def test_layer_norm_float16_over_512_features_of_a_large_rms(std):
    """The sum of 512 squares of std 12 (74000) overflowed: y was beta."""
    rng = np.random.RandomState(0)
    x = (rng.randn(2, 3, 512) * std + std / 4).astype(np.float16)
    gamma = (1 + 0.1 * rng.randn(512)).astype(np.float16)
    beta = (0.1 * rng.randn(512)).astype(np.float16)
    dy = rng.randn(2, 3, 512).astype(np.float16)
    ref = _layer_norm_reference(
        *(a.astype(np.float64) for a in (x, gamma, beta, dy)), 1e-5
    )
    outputs, deltas, grads, _ = _layer_norm(
        x, gamma, beta, dy, NumpyHandler(np.float16)
    )
    _assert_close(outputs['default'], ref[0], F16_TOL)
    _assert_close(deltas['default'], ref[1], F16_TOL)
    _assert_close(grads['gamma'], ref[2], F16_TOL)
    _assert_close(grads['beta'], ref[3], F16_TOL)


@pytest.mark.parametrize('features, std', [(512, 0.1), (4096, 0.01), (64, 0.01)])
def test_layer_norm_float16_keeps_small_values(features, std):
    """Small squares divided by F before they were summed would be lost.

    (Subnormal or zero in float16: 4096 features of std 0.01 were 9% off.)
    """
    rng = np.random.RandomState(1)
    x = (rng.randn(2, 3, features) * std).astype(np.float16)
    gamma = np.ones(features, np.float16)
    beta = np.zeros(features, np.float16)
    dy = rng.randn(2, 3, features).astype(np.float16)
    ref = _layer_norm_reference(
        *(a.astype(np.float64) for a in (x, gamma, beta, dy)), 1e-5
    )
    outputs, deltas, _, _ = _layer_norm(x, gamma, beta, dy, NumpyHandler(np.float16))
    _assert_close(outputs['default'], ref[0], F16_TOL)
    _assert_close(deltas['default'], ref[1], F16_TOL)


@pytest.mark.parametrize(
    'dtype, scale, tol',
    [
        (np.float32, 1e19, 1e-6),  # the sum of squares overflowed float32
        (np.float32, 3.0, 1e-6),
        (np.float64, 1e150, 1e-13),
        (np.float64, 3.0, 1e-13),
    ],
)
def test_layer_norm_float32_and_float64(dtype, scale, tol):
    rng = np.random.RandomState(2)
    x = (rng.randn(3, 2, 6) * scale).astype(dtype)
    gamma, beta = rng.randn(6).astype(dtype), rng.randn(6).astype(dtype)
    dy = rng.randn(3, 2, 6).astype(dtype)
    ref = _layer_norm_reference(
        *(a.astype(np.float64) for a in (x, gamma, beta, dy)), 1e-5
    )
    outputs, deltas, grads, _ = _layer_norm(x, gamma, beta, dy, NumpyHandler(dtype))
    _assert_close(outputs['default'], ref[0], tol)
    _assert_close(deltas['default'], ref[1], tol)
    _assert_close(grads['gamma'], ref[2], tol)


# ------------------------------------------------------------------ BatchNorm


def _batch_norm_reference(x, gamma, beta, dy, epsilon):
    axes = tuple(range(x.ndim - 1))
    mean = x.mean(axis=axes)
    sigma_b = np.sqrt(x.var(axis=axes) + epsilon)
    x_hat = (x - mean) / sigma_b
    dx = (
        gamma
        / sigma_b
        * (dy - x_hat * (dy * x_hat).mean(axis=axes) - dy.mean(axis=axes))
    )
    return x_hat * gamma + beta, dx, mean, sigma_b


@pytest.mark.parametrize('kind', HANDLERS)
@pytest.mark.parametrize('std, mean', [(3.0, 0.0), (1.0, 5.0), (0.1, 0.0)])
def test_batch_norm_float16_over_16384_values_per_channel(kind, std, mean):
    """64 images 16x16x4: std 3 gave beta, mean 5 NaN, sigma became inf."""
    rng = np.random.RandomState(3)
    x = (rng.randn(1, 64, 16, 16, 4) * std + mean).astype(np.float16)
    gamma = (1 + 0.1 * rng.randn(4)).astype(np.float16)
    beta = (0.1 * rng.randn(4)).astype(np.float16)
    dy = rng.randn(*x.shape).astype(np.float16)
    spec = {
        'time_steps': 1,
        'batch_size': 64,
        'default': x,
        'inits': {
            'gamma': gamma,
            'beta': beta,
            'mu': np.zeros(4, np.float16),
            'sigma': np.ones(4, np.float16),
        },
    }
    outputs, deltas, _, params = _run(
        BatchNormLayerImpl,
        {'default': (16, 16, 4)},
        {'decay': 0.5},
        spec,
        _handler(kind, np.float16),
        dy,
    )
    y, dx, batch_mean, sigma_b = _batch_norm_reference(
        *(a.astype(np.float64) for a in (x, gamma, beta, dy)), 1e-5
    )
    _assert_close(outputs['default'], y, F16_TOL)
    _assert_close(deltas['default'], dx, 2 * F16_TOL)
    np.testing.assert_allclose(
        params['mu'], 0.5 * batch_mean, rtol=2e-3, atol=2e-3 * std
    )
    np.testing.assert_allclose(params['sigma'], 0.5 + 0.5 * sigma_b, rtol=2e-3)


@pytest.mark.parametrize('kind', HANDLERS)
def test_batch_norm_float16_keeps_small_values(kind):
    """64 images 64x64x2 of std 0.01: squares divided by m = 262144 before
    they were summed would be lost (subnormal or zero in float16)."""
    rng = np.random.RandomState(11)
    x = (rng.randn(1, 64, 64, 64, 2) * 0.01).astype(np.float16)
    dy = rng.randn(*x.shape).astype(np.float16)
    ones, zeros = np.ones(2, np.float16), np.zeros(2, np.float16)
    spec = {
        'time_steps': 1,
        'batch_size': 64,
        'default': x,
        'inits': {'gamma': ones, 'beta': zeros, 'mu': zeros, 'sigma': ones},
    }
    outputs, deltas, _, _ = _run(
        BatchNormLayerImpl,
        {'default': (64, 64, 2)},
        {},
        spec,
        _handler(kind, np.float16),
        dy,
    )
    y, dx, _, _ = _batch_norm_reference(
        *(a.astype(np.float64) for a in (x, ones, zeros, dy)), 1e-5
    )
    _assert_close(outputs['default'], y, F16_TOL)
    _assert_close(deltas['default'], dx, 2 * F16_TOL)


@pytest.mark.parametrize(
    'dtype, scale, tol',
    [
        (np.float32, 1e18, 1e-5),  # the sum of squares overflowed float32
        (np.float32, 2.0, 1e-5),
        (np.float64, 2.0, 1e-12),
    ],
)
def test_batch_norm_float32_and_float64(dtype, scale, tol):
    rng = np.random.RandomState(4)
    x = (rng.randn(2, 70, 3, 2, 5) * scale).astype(dtype)
    gamma, beta = rng.randn(5).astype(dtype), rng.randn(5).astype(dtype)
    dy = rng.randn(*x.shape).astype(dtype)
    spec = {
        'time_steps': 2,
        'batch_size': 70,
        'default': x,
        'inits': {'gamma': gamma, 'beta': beta, 'mu': np.zeros(5), 'sigma': np.ones(5)},
    }
    outputs, deltas, _, params = _run(
        BatchNormLayerImpl,
        {'default': (3, 2, 5)},
        {'decay': 0.0},
        spec,
        NumpyHandler(dtype),
        dy,
    )
    y, dx, batch_mean, sigma_b = _batch_norm_reference(
        *(a.astype(np.float64) for a in (x, gamma, beta, dy)), 1e-5
    )
    _assert_close(outputs['default'], y, tol)
    _assert_close(deltas['default'], dx, tol)
    _assert_close(params['sigma'], sigma_b, tol)


# ------------------------------------------------------------ average pooling


def _avg_pool_reference(x, window, stride, padding):
    """Mean of the in-bounds cells, and the input deltas for dy = ones."""
    n, h, w, c = x.shape
    kh, kw = window
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (w + 2 * padding - kw) // stride + 1
    y = np.zeros((n, oh, ow, c))
    dx = np.zeros_like(x)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * stride - padding, j * stride - padding
            rows = slice(max(r0, 0), min(r0 + kh, h))
            cols = slice(max(c0, 0), min(c0 + kw, w))
            cells = x[:, rows, cols]
            y[:, i, j] = cells.mean(axis=(1, 2))
            dx[:, rows, cols] += 1.0 / (cells.shape[1] * cells.shape[2])
    return y, dx


@pytest.mark.parametrize('kind', HANDLERS)
def test_global_average_of_a_16x16_float16_image_of_300(kind):
    """256 values of ~300 summed to 76800 > 65504: the average was inf."""
    rng = np.random.RandomState(5)
    x = rng.uniform(250, 350, (1, 2, 16, 16, 3)).astype(np.float16)
    dy = np.ones((1, 2, 3), np.float16)
    spec = {'time_steps': 1, 'batch_size': 2, 'default': x}
    outputs, deltas, _, _ = _run(
        GlobalPoolingLayerImpl,
        {'default': (16, 16, 3)},
        {'type': 'avg'},
        spec,
        _handler(kind, np.float16),
        dy,
    )
    y, dx = _avg_pool_reference(x[0].astype(np.float64), (16, 16), 16, 0)
    _assert_close(outputs['default'][0], y[:, 0, 0], 2**-11)  # rounded once
    _assert_close(deltas['default'][0], dx, 2**-11)


@pytest.mark.parametrize('kind', HANDLERS)
@pytest.mark.parametrize(
    'window, stride, padding, low, high',
    [
        ((3, 3), 3, 0, 15000, 25000),
        ((3, 3), 1, 1, -40000, 40000),
        ((2, 2), 2, 0, -1, 1),
    ],
)
def test_average_pooling_float16_adds_in_float32(
    kind, window, stride, padding, low, high
):
    rng = np.random.RandomState(6)
    x = rng.uniform(low, high, (1, 2, 6, 6, 3)).astype(np.float16)
    ref, dx = _avg_pool_reference(x[0].astype(np.float64), window, stride, padding)
    dy = np.ones((1,) + ref.shape, np.float16)
    spec = {'time_steps': 1, 'batch_size': 2, 'default': x}
    kwargs = {
        'kernel_size': window,
        'type': 'avg',
        'stride': (stride, stride),
        'padding': padding,
    }
    outputs, deltas, _, _ = _run(
        Pooling2DLayerImpl,
        {'default': (6, 6, 3)},
        kwargs,
        spec,
        _handler(kind, np.float16),
        dy,
    )
    # the mean of the float16 inputs, rounded once
    np.testing.assert_array_equal(outputs['default'][0], ref.astype(np.float16))
    np.testing.assert_array_equal(deltas['default'][0], dx.astype(np.float16))


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_average_pooling_float32_and_float64_are_unchanged(dtype):
    """They still add in their own type: the window sums, then the division."""
    rng = np.random.RandomState(7)
    x = rng.randn(1, 2, 6, 6, 3).astype(dtype)
    spec = {'time_steps': 1, 'batch_size': 2, 'default': x}
    kwargs = {'kernel_size': (3, 3), 'type': 'avg', 'stride': (3, 3)}
    dy = np.ones((1, 2, 2, 2, 3), dtype)
    outputs, _, _, _ = _run(
        Pooling2DLayerImpl,
        {'default': (6, 6, 3)},
        kwargs,
        spec,
        NumpyHandler(dtype),
        dy,
    )
    total = np.zeros((2, 2, 2, 3), dtype)
    for u in range(3):
        for v in range(3):
            total += x[0, :, u::3, v::3]
    np.testing.assert_array_equal(outputs['default'][0], total / dtype(9))


# ----------------------------------------------------------------------- Loss


@pytest.mark.parametrize('importance', [1.0, 0.25])
def test_loss_float16_of_a_batch_whose_sum_exceeds_65504(importance):
    """T=50, B=256 losses of ~5.6 sum to ~72000: the loss was inf."""
    rng = np.random.RandomState(8)
    x = rng.uniform(5.0, 6.3, (50, 256, 1)).astype(np.float16)
    spec = {'time_steps': 50, 'batch_size': 256, 'default': x}
    outputs, deltas, _, _ = _run(
        LossLayerImpl,
        {'default': (1,)},
        {'importance': importance},
        spec,
        NumpyHandler(np.float16),
        np.zeros(1, np.float16),
        out='loss',
    )
    ref = importance * x.astype(np.float64).sum() / 256
    _assert_close(outputs['loss'], np.array([ref]), 2**-10)
    np.testing.assert_array_equal(
        deltas['default'], np.full(x.shape, np.float16(importance / 256))
    )


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('batch', [1, 3, 256])
def test_loss_float32_and_float64_are_unchanged(dtype, batch):
    """The power-of-two shrink changes no bit of ``sum(x) * (importance / n)``."""
    rng = np.random.RandomState(9)
    x = rng.uniform(0, 3, (5, batch, 2)).astype(dtype)
    spec = {'time_steps': 5, 'batch_size': batch, 'default': x}
    outputs, _, _, _ = _run(
        LossLayerImpl,
        {'default': (2,)},
        {'importance': 0.3},
        spec,
        NumpyHandler(dtype),
        np.zeros(1, dtype),
        out='loss',
    )
    assert outputs['loss'][0] == np.sum(x) * dtype(0.3 / batch)


def test_float16_network_loss_is_finite():
    """The total loss of a float16 SoftmaxCE network over T=50, B=256."""
    inp, out = get_in_out_layers('classification', 2, 256)
    net = Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float16))
    net.initialize(Gaussian(0.01))
    rng = np.random.RandomState(10)
    net.provide_external_data(
        {'default': rng.randn(50, 256, 2), 'targets': rng.randint(0, 256, (50, 256, 1))}
    )
    net.forward_pass()
    per_position = net.get('Output.outputs.loss').astype(np.float64)
    total = net.get_loss_values()['total_loss']
    assert np.isfinite(total)
    assert abs(total - per_position.sum() / 256) <= 2**-10 * total
