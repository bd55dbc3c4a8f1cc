"""Products by fixed weights (``Handler.fixed_weights``): OneDnnHandler
packs the weights once per context and runs oneDNN matmul primitives on
them; results agree with NumpyHandler's within float32's precision, the
weights are packed again in every new context (they may have changed in
between), and DebugHandler holds the caller to its promise."""

import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.debug_array import DebugHandlerError
from tests.onednn_support import onednn_handler


@pytest.fixture
def handler():
    return onednn_handler(np.float32, seed=1)


def close(got, expected):
    np.testing.assert_allclose(got, expected, rtol=2e-5, atol=2e-5)


def wide_views(rng, rows, cols, pad=3):
    """A (rows, cols) view into a wider float32 buffer (as network buffers
    lay out a layer's outputs), with sentinels around it."""
    wide = np.full((rows, cols + 2 * pad), 7.0, np.float32)
    view = wide[:, pad : pad + cols]
    view[...] = rng.randn(rows, cols)
    return wide, view


@pytest.mark.parametrize('transb', [False, True])
@pytest.mark.parametrize('add', [False, True])
def test_products_by_fixed_weights_match_numpy_handler(handler, transb, add):
    rng = np.random.RandomState(1)
    m, k, n = 5, 24, 40
    w = rng.randn(n, k).astype(np.float32) if transb else rng.randn(k, n)
    w = w.astype(np.float32)
    _, a = wide_views(rng, m, k)
    wide, out = wide_views(rng, m, n)
    expected = out.astype(np.float64) * add + a.astype(np.float64) @ (
        w.T if transb else w
    ).astype(np.float64)
    op = handler.dot_add_mm if add else handler.dot_mm
    with handler.fixed_weights(w):
        op(a, w, out, transb=transb)
        assert len(handler._plans) == 1, 'the product ran outside oneDNN'
    close(out, expected)
    assert (wide[:, :3] == 7).all() and (wide[:, -3:] == 7).all()


def test_weights_are_packed_once_per_context_and_again_in_the_next(handler):
    rng = np.random.RandomState(2)
    w = rng.randn(16, 12).astype(np.float32)
    a = rng.randn(4, 16).astype(np.float32)
    out = np.zeros((4, 12), np.float32)
    with handler.fixed_weights(w):
        handler.dot_mm(a, w, out)
        (plan,) = handler._plans.values()
        packs = []
        original = plan.pack.run
        plan.pack.run = lambda *args: (packs.append(1), original(*args))
        for _ in range(5):
            handler.dot_mm(a, w, out)
        assert packs == []  # packed at the first product only
    close(out, a @ w)
    w *= -2  # the network's update between two passes
    with handler.fixed_weights(w):
        handler.dot_mm(a, w, out)
        handler.dot_mm(a, w, out)
    assert packs == [1]
    close(out, a @ w)


def test_outside_the_context_products_are_numpy_handlers(handler):
    rng = np.random.RandomState(3)
    w, a = rng.randn(8, 6).astype(np.float32), rng.randn(3, 8).astype(np.float32)
    out, expected = np.zeros((3, 6), np.float32), np.zeros((3, 6), np.float32)
    with handler.fixed_weights(w):
        pass
    handler.dot_mm(a, w, out)
    NumpyHandler(np.float32).dot_mm(a, w, expected)
    np.testing.assert_array_equal(out, expected)
    assert handler._plans == {}
    # a transposed first operand is not a product by fixed weights either
    with handler.fixed_weights(w):
        handler.dot_mm(a.T.copy(), w, out, transa=True)
    assert handler._plans == {}


def lstm_net(handler, layer):
    inp, out = bs.tools.get_in_out_layers('classification', 6, 4)
    net = bs.Network.from_layer(inp >> layer >> out)
    init = {'default': bs.initializers.Gaussian(0.3)}
    if 'timing' in net.buffer['Rec'].parameters:
        init['Rec'] = {'timing': [1, 2, 3] * 3}
    net.initialize(init, seed=4)
    net.set_handler(handler)
    return net


RECURRENT = {
    'Lstm': lambda: bs.layers.Lstm(9, name='Rec'),
    'ClockworkLstm': lambda: bs.layers.ClockworkLstm(9, name='Rec'),
    'Recurrent': lambda: bs.layers.Recurrent(9, name='Rec'),
    'Clockwork': lambda: bs.layers.Clockwork(9, name='Rec'),
    'GRU': lambda: bs.layers.GRU(9, name='Rec'),
    'Lstm reverse': lambda: bs.layers.Lstm(9, name='Rec', reverse=True),
}


@pytest.mark.parametrize('make', RECURRENT.values(), ids=list(RECURRENT))
def test_recurrent_training_matches_numpy_handler(handler, make):
    rng = np.random.RandomState(5)
    data = {
        'default': rng.randn(7, 3, 6).astype(np.float32),
        'targets': rng.randint(0, 4, (7, 3, 1)).astype(np.float32),
    }
    results = []
    for h in (handler, NumpyHandler(np.float32)):
        net = lstm_net(h, make())
        stepper = bs.training.MomentumStepper(0.1, 0.9)
        stepper.start(net)
        for _ in range(4):
            net.provide_external_data(data)
            stepper.run()
        results.append(net.get('parameters'))
    assert any(key[0] == 'matmul' for key in handler._plans)
    np.testing.assert_allclose(results[0], results[1], rtol=1e-4, atol=1e-5)


def test_debug_handler_fails_where_fixed_weights_change(handler):
    debug = DebugHandler(handler)
    w = debug.create_from_numpy(np.ones((3, 3), np.float32))
    with debug.fixed_weights(w):
        pass  # unchanged: fine
    with pytest.raises(DebugHandlerError, match='fixed_weights.*changed'):
        with debug.fixed_weights(w):
            debug.fill(w, 2.0)


def test_threads_keep_their_own_fixed_weights(handler):
    """Each thread's context packs its own weights: products by different
    weights in two threads at once give each thread's own results."""
    rng = np.random.RandomState(6)
    a = rng.randn(4, 32).astype(np.float32)
    weights = [rng.randn(32, 32).astype(np.float32) for _ in range(2)]
    results: dict = {}
    barrier = threading.Barrier(2)

    def run(i):
        out = np.zeros((4, 32), np.float32)
        with handler.fixed_weights(weights[i]):
            for _ in range(50):
                barrier.wait(10)
                handler.dot_mm(a, weights[i], out)
        results[i] = out

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in (0, 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not any(thread.is_alive() for thread in threads), 'a thread hangs'
    for i in (0, 1):
        close(results[i], a @ weights[i])


def train(handler, layer, steps=3):
    rng = np.random.RandomState(7)
    net = lstm_net(handler, layer)
    stepper = bs.training.MomentumStepper(0.1, 0.9)
    stepper.start(net)
    data = {
        'default': rng.randn(5, 3, 6).astype(handler.dtype),
        'targets': rng.randint(0, 4, (5, 3, 1)).astype(handler.dtype),
    }
    for _ in range(steps):
        net.provide_external_data(data)
        stepper.run()
    return net.get('parameters')


def test_what_is_bit_identical_across_the_cpu_handlers():
    """As docs/reproducibility.rst says: float64 recurrent networks and
    float32 networks without convolution, pooling or recurrent layers
    train bit for bit alike on both CPU handlers."""
    h64 = onednn_handler(np.float64)
    np.testing.assert_array_equal(
        train(h64, bs.layers.Lstm(9, name='Rec')),
        train(NumpyHandler(np.float64), bs.layers.Lstm(9, name='Rec')),
    )
    h32 = onednn_handler(np.float32)
    np.testing.assert_array_equal(
        train(h32, bs.layers.FullyConnected(9, name='Rec', activation='tanh')),
        train(
            NumpyHandler(np.float32),
            bs.layers.FullyConnected(9, name='Rec', activation='tanh'),
        ),
    )
