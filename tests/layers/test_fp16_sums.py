"""Sums whose result fits float16 no longer overflow on the way.

L2Decay summed ``x^2`` over the features before halving it (512 features of
12: a loss of 36864, finite in float16, came out inf, and a Trainer stopped
with a false NonFiniteError); it now sums the halved terms. The CPU
handlers' ``softmax_m`` summed the exponentials of a float16 row in float16
(70000 near-equal logits: the sum overflowed and every probability was 0);
float16 rows are now summed in float32 scratch. float32 and float64 keep
their bits. Every float16 result is compared with a float64 reference.
"""

import tracemalloc
import warnings

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.layers.l2_decay_layer import L2DecayLayerImpl
from brainstorm.layers.softmax_layer import SoftmaxLayerImpl
from brainstorm.testing import instantiate_layer, set_up_layer
from tests.onednn_support import onednn_handler

HANDLERS = ['numpy', 'onednn']

# float16 results: a few units of float16's 2**-11 relative precision
F16_TOL = 4e-3


def _handler(kind, dtype):
    if kind == 'onednn':
        return onednn_handler(dtype)
    return NumpyHandler(dtype)


def _forward(layer_class, x, handler, out):
    """A training forward pass of a lone layer; ``out`` as float64."""
    layer = instantiate_layer(layer_class, {'default': x.shape[2:]})
    spec = {'time_steps': x.shape[0], 'batch_size': x.shape[1], 'default': x}
    buffers, _ = set_up_layer(layer, spec, handler)
    with warnings.catch_warnings():
        warnings.simplefilter('error')  # an overflow in the pass fails the test
        layer.forward_pass(buffers, training_pass=True)
    return handler.get_numpy_copy(buffers.outputs[out]).astype(np.float64)


def _assert_close(got, ref, tol, what):
    """Finite and ``max |got - ref| <= tol * max |ref|``, saying what was got."""
    assert np.isfinite(got).all(), f'{what}: expected finite values, got {got}'
    err = np.abs(got - ref).max()
    assert err <= tol * np.abs(ref).max(), (
        f'{what}: expected {ref.ravel()[:4]} (float64), got {got.ravel()[:4]}; '
        f'max error {err}'
    )


# --------------------------------------------------------------------- L2Decay


@pytest.mark.parametrize('kind', HANDLERS)
@pytest.mark.parametrize(
    'features, value',
    [
        (512, 12.0),  # sum of x^2 73728 > 65504, loss 36864
        (1, 300.0),  # x^2 90000 > 65504, loss 45000
        (3, 200.0),  # loss 60000, near float16's largest 65504
    ],
)
def test_l2_decay_float16_loss_that_fits_is_finite(kind, features, value):
    x = np.full((2, 3, features), value, np.float16)
    x[1, 2] *= -0.5
    loss = _forward(L2DecayLayerImpl, x, _handler(kind, np.float16), 'loss')
    ref = 0.5 * (x.astype(np.float64) ** 2).sum(axis=2, keepdims=True)
    _assert_close(loss, ref, F16_TOL, 'float16 L2Decay loss')


@pytest.mark.parametrize('features, std', [(512, 0.1), (4096, 0.01), (64, 0.01)])
def test_l2_decay_float16_keeps_small_values(features, std):
    """Small squares keep their float16 precision (no subnormal terms)."""
    x = (np.random.RandomState(0).randn(2, 3, features) * std).astype(np.float16)
    loss = _forward(L2DecayLayerImpl, x, NumpyHandler(np.float16), 'loss')
    ref = 0.5 * (x.astype(np.float64) ** 2).sum(axis=2, keepdims=True)
    _assert_close(loss, ref, F16_TOL, 'float16 L2Decay loss of small values')


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('scale', [1e-3, 1.0, 1e4])
def test_l2_decay_float32_and_float64_keep_their_bits(dtype, scale):
    """Halving the terms first changes no bit of ``0.5 * sum(x * x)``."""
    x = (np.random.RandomState(1).randn(3, 4, 700) * scale).astype(dtype)
    loss = _forward(L2DecayLayerImpl, x, NumpyHandler(dtype), 'loss')
    flat = x.reshape(12, 700)
    ref = np.sum(flat * flat, axis=1, keepdims=True) * dtype(0.5)
    np.testing.assert_array_equal(loss.reshape(12, 1), ref.astype(np.float64))


def test_trainer_float16_l2_decay_raises_no_false_non_finite_error():
    """The float16 network of the report: a loss of 36864 is no divergence."""
    F = 512
    inp = bs.layers.Input({'default': ('T', 'B', F)})
    net = bs.Network.from_layer(
        inp
        >> bs.layers.FullyConnected(F, activation='linear', name='FC')
        >> bs.layers.L2Decay(name='Decay') - 'loss'
        >> bs.layers.Loss(name='Loss')
    )
    net.set_handler(NumpyHandler(np.float16))
    net.initialize({'FC': {'W': 0.0, 'bias': 12.0}})
    data = bs.data_iterators.Undivided(default=np.zeros((1, 2, F)))
    trainer = bs.Trainer(bs.training.SgdStepper(learning_rate=0.0), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        trainer.train(net, data)  # raised NonFiniteError ('training diverged')
    total = net.get_loss_values()['total_loss']
    assert total == 36864.0, f'expected a total loss of 36864.0, got {total}'


# --------------------------------------------------------------------- softmax


def _softmax_reference(x):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


@pytest.mark.parametrize('kind', HANDLERS)
def test_softmax_float16_over_70000_near_equal_logits(kind):
    """The row sum of exp (~70000) overflowed float16: every p was 0."""
    x = (np.random.RandomState(2).randn(1, 2, 70000) * 0.01).astype(np.float16)
    p = _forward(SoftmaxLayerImpl, x, _handler(kind, np.float16), 'default')
    ref = _softmax_reference(x)
    _assert_close(p, ref, F16_TOL, 'float16 Softmax probabilities')
    sums = p.sum(axis=-1)
    assert np.allclose(sums, 1.0, atol=1e-2), f'expected row sums of 1, got {sums}'


@pytest.mark.parametrize('kind', HANDLERS)
def test_softmax_m_float16_wide_rows(kind):
    """The handler op itself, on rows of 70000 and of 3 columns.

    Logits of std 0.01 sum to ~70000 (inf in float16), of std 2 to ~100.
    """
    h = _handler(kind, np.float16)
    rng = np.random.RandomState(3)
    for cols, scale in ((70000, 0.01), (70000, 2.0), (3, 2.0)):
        m = (rng.randn(4, cols) * scale).astype(np.float16)
        out = h.zeros(m.shape)
        h.softmax_m(h.create_from_numpy(m), out)
        got = h.get_numpy_copy(out).astype(np.float64)
        _assert_close(got, _softmax_reference(m), F16_TOL, f'softmax_m of {cols}')


@pytest.mark.parametrize('kind', HANDLERS)
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_softmax_m_float32_and_float64_keep_their_bits(kind, dtype):
    h = _handler(kind, dtype)
    m = (np.random.RandomState(4).randn(5, 1000) * 3).astype(dtype)
    out = h.zeros(m.shape)
    h.softmax_m(h.create_from_numpy(m), out)
    e = np.exp(m - m.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(
        h.get_numpy_copy(out), e / e.sum(axis=1, keepdims=True)
    )


def test_softmax_m_float16_allocates_nothing_after_warm_up():
    """No float32 copy of the rows: only NumPy's small ufunc buffers."""
    h = NumpyHandler(np.float16)
    m = h.create_from_numpy(np.random.RandomState(5).randn(4, 70000))
    out = h.zeros(m.shape)  # 560 KB; a float32 copy would be 1.1 MB
    h.softmax_m(m, out)
    tracemalloc.start()
    try:
        h.softmax_m(m, out)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak <= 256 * 1024, f'expected at most 256 KB allocated, got {peak} bytes'


@pytest.mark.parametrize('kind', HANDLERS)
def test_masked_softmax_t_float16_over_70000_keys(kind):
    """The attention softmax summed its float16 rows in float16 too: over
    70000 keys of near-equal scores every weight was 0."""
    h = _handler(kind, np.float16)
    x = (np.random.RandomState(4).randn(1, 2, 70000) * 0.01).astype(np.float16)
    out = h.zeros(x.shape)
    h.masked_softmax_t(h.create_from_numpy(x), None, out)
    got = h.get_numpy_copy(out).astype(np.float64)
    ref = _softmax_reference(x)
    _assert_close(got, ref, F16_TOL, 'float16 masked_softmax_t')
    assert np.allclose(got.sum(axis=-1), 1.0, atol=1e-2)
