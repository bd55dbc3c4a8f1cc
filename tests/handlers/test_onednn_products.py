"""OneDnnHandler's products in passes of networks with Lstm layers.

There every float32 product of at least ONEDNN_PRODUCT_MIN multiply-adds
runs on oneDNN's matmul (OpenBLAS on one thread), and products by the
operand of a ``fixed_operand`` block use a copy of it packed once in the
block (docs/cpu.rst). Elsewhere products are NumPy's, bit for bit.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.debug_handler import DebugHandlerError
from tests.onednn_support import onednn_handler

LSTM_PASS = {'Input', 'Lstm', 'FullyConnected'}


@pytest.fixture
def handler(monkeypatch):
    """A OneDnnHandler that runs products of every size on oneDNN (the
    tests' small shapes; see test_small_products_stay_with_numpy)."""
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'ONEDNN_PRODUCT_MIN', 0)
    return onednn_handler(np.float32, seed=1)


def test_small_products_stay_with_numpy(monkeypatch):
    """Below ONEDNN_PRODUCT_MIN multiply-adds a product runs on NumPy (its
    bits), at it on oneDNN."""
    from brainstorm.handlers.onednn import handler as module

    h = onednn_handler(np.float32, seed=1)
    rnd = np.random.RandomState(2)
    m, k = 32, 128
    n = module.ONEDNN_PRODUCT_MIN // (m * k)
    a, b = rnd.rand(m, k).astype(np.float32), rnd.rand(n, k).astype(np.float32)
    with h.network_pass(LSTM_PASS):
        small = np.zeros((m, n - 1), np.float32)
        h.dot_mm(a, b[:-1], small, transb=True)
        assert matmul_plans(h) == []
        expected = np.zeros_like(small)
        NumpyHandler(np.float32).dot_mm(a, b[:-1], expected, transb=True)
        np.testing.assert_array_equal(small, expected)
        h.dot_mm(a, b, np.zeros((m, n), np.float32), transb=True)
        assert len(matmul_plans(h)) == 1


def operands(rnd, m, k, n, transa, transb, strided):
    """``a``, ``b`` and ``out`` of ``out (+)= op(a) . op(b)``, as stored."""

    def matrix(rows, cols, transposed):
        shape = (cols, rows) if transposed else (rows, cols)
        if strided:  # a feature slice of wider rows
            wide = rnd.uniform(-1, 1, (shape[0], shape[1] + 5)).astype(np.float32)
            return wide[:, 2 : 2 + shape[1]]
        return rnd.uniform(-1, 1, shape).astype(np.float32)

    return matrix(m, k, transa), matrix(k, n, transb), matrix(m, n, False)


def matmul_plans(handler):
    return [key for key in handler._plans if key[0] == 'matmul']


@pytest.mark.parametrize('transa', [False, True])
@pytest.mark.parametrize('transb', [False, True])
@pytest.mark.parametrize('strided', [False, True])
@pytest.mark.parametrize('fixed', [False, True])
def test_products_in_lstm_passes_run_on_onednn(handler, transa, transb, strided, fixed):
    rnd = np.random.RandomState(int(transa) + 2 * transb + 4 * strided)
    a, b, out = operands(rnd, 7, 33, 20, transa, transb, strided)
    op_a, op_b = (a.T if transa else a), (b.T if transb else b)
    start = out.copy()
    with handler.network_pass(LSTM_PASS), handler.fixed_operand(b if fixed else a):
        handler.dot_add_mm(a, b, out, transa, transb)
        added = out.copy()
        handler.dot_mm(a, b, out, transa, transb)
    want = op_a.astype(np.float64) @ op_b
    np.testing.assert_allclose(added, start + want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
    keys = matmul_plans(handler)
    assert len(keys) == 2 and {k[-1] for k in keys} == {fixed}


def test_a_fixed_operand_is_packed_once_per_block(handler):
    """Packed on first use in a block, reused there; the next block packs
    again, so a change between blocks (an update) is seen."""
    rnd = np.random.RandomState(1)
    a, b, out = operands(rnd, 4, 64, 48, False, True, False)
    with handler.network_pass(LSTM_PASS), handler.fixed_operand(b):
        handler.dot_mm(a, b, out, transb=True)  # makes the plan
    (key,) = matmul_plans(handler)
    pack = handler._plans[key].pack.primitive
    packs, original = [], pack.run
    pack.run = lambda *args: (packs.append(args), original(*args))
    with handler.network_pass(LSTM_PASS):
        for block in range(2):
            with handler.fixed_operand(b):
                for _ in range(3):
                    handler.dot_mm(a, b, out, transb=True)
                    np.testing.assert_allclose(out, a @ b.T, rtol=1e-5, atol=1e-5)
            assert len(packs) == block + 1
            b *= 2  # between the blocks, as an update would
    assert matmul_plans(handler) == [key]


def test_products_elsewhere_are_numpys_bit_for_bit(handler):
    rnd = np.random.RandomState(2)
    a, b, out = operands(rnd, 6, 40, 30, False, False, False)
    expected = NumpyHandler(np.float32)
    want = out.copy()
    expected.dot_add_mm(a, b, want)
    for types in ({'Input', 'FullyConnected'}, {'Input', 'Convolution2D'}):
        got = out.copy()
        with handler.network_pass(types), handler.fixed_operand(b):
            handler.dot_add_mm(a, b, got)
        np.testing.assert_array_equal(got, want)
    assert not matmul_plans(handler)
    double = onednn_handler(np.float64)
    with double.network_pass(LSTM_PASS):
        double.dot_mm(
            a.astype(np.float64), b.astype(np.float64), out.astype(np.float64)
        )
    assert not matmul_plans(double)


@pytest.mark.parametrize(
    'case', ['overlap', 'read-only', 'reversed', 'empty', 'one-row']
)
def test_operands_onednn_cannot_take_get_numpys_product(handler, case):
    rnd = np.random.RandomState(3)
    a, b, out = operands(rnd, 5, 5, 5, False, False, False)
    if case == 'overlap':  # out is a: NumPy's product reads before it writes
        a = out
    elif case == 'read-only':
        out.flags.writeable = False
    elif case == 'reversed':
        a = a[::-1]
    elif case == 'empty':
        a, b, out = a[:, :0], b[:0], out
    elif case == 'one-row':  # the control: oneDNN takes it
        a, b, out = a[:1], b, out[:1]
    with handler.network_pass(LSTM_PASS):
        if case == 'read-only':
            with pytest.raises(ValueError, match='read-only'):
                handler.dot_mm(a, b, out)
            return
        want = a.astype(np.float64) @ b
        handler.dot_mm(a, b, out)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)
    assert [k[1] for k in matmul_plans(handler)] == (
        [(1, 5)] if case == 'one-row' else []
    )


def lstm_network(handler, lstm=None):
    inp, out = bs.tools.get_in_out_layers('classification', 11, 5)
    net = bs.Network.from_layer(inp >> (lstm or bs.layers.Lstm(24)) >> out)
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.2), seed=3)
    rnd = np.random.RandomState(4)
    net.provide_external_data(
        {'default': rnd.rand(6, 3, 11), 'targets': rnd.randint(0, 5, (6, 3, 1))}
    )
    return net


def test_an_lstm_computes_what_numpy_handler_computes(handler):
    """Outputs, loss and gradients of every kind agree within float32's
    precision; the recurrent weights were packed (forward and backward)."""
    results = []
    for h in (handler, NumpyHandler(np.float32)):
        net = lstm_network(h)
        net.forward_pass(training_pass=True)
        net.backward_pass()
        results.append(
            {
                'y': net.get('Lstm.outputs.default'),
                'loss': net.get('Loss.outputs.loss'),
                **{
                    n: net.get('Lstm.gradients.' + n)
                    for n in ('Wz', 'Rz', 'Ro', 'bi', 'pf')
                },
            }
        )
    for name, got in results[0].items():
        np.testing.assert_allclose(
            got, results[1][name], rtol=2e-4, atol=1e-6, err_msg=name
        )
    packed = [k for k in matmul_plans(handler) if k[-1]]
    assert len(packed) == 2  # R^T forward, R backward


def test_a_subclassed_lstm_with_a_type_of_its_own_gets_packed_products(handler):
    """The network tells the handler the types its layers derive from."""
    from brainstorm.layers.lstm_layer import LstmLayerImpl
    from brainstorm.structure.construction import ConstructionWrapper

    class PeepLstmLayerImpl(LstmLayerImpl):
        pass

    net = lstm_network(handler, ConstructionWrapper.create(PeepLstmLayerImpl, size=24))
    net.forward_pass(training_pass=True)
    net.backward_pass()
    packed = [k for k in matmul_plans(handler) if k[-1]]
    assert len(packed) == 2  # R^T forward, R backward
    assert {'PeepLstm', 'Lstm'} <= net._layer_types()


def test_the_debug_handler_checks_the_promise(handler):
    h = DebugHandler(handler)
    b = h.create_from_numpy(np.ones((4, 4), np.float32))
    a, out = h.create_from_numpy(np.ones((2, 4), np.float32)), h.zeros((2, 4))
    with h.network_pass(LSTM_PASS), h.fixed_operand(b):
        h.dot_mm(a, b, out)
    np.testing.assert_array_equal(h.get_numpy_copy(out), 4.0)
    assert [k[-1] for k in matmul_plans(handler)] == [True]
    with pytest.raises(DebugHandlerError, match='fixed_operand.*written'):
        with h.fixed_operand(b):
            h.fill(b, 2.0)
    with pytest.raises(DebugHandlerError, match="'array' must be a DebugArray"):
        with h.fixed_operand(np.ones(3)):
            pass


def test_nested_blocks_keep_their_packed_copies_apart(handler):
    """Two fixed operands open at once, packed in either order and used
    alternately: each product uses its own operand's copy."""
    rnd = np.random.RandomState(6)
    a = rnd.uniform(-1, 1, (4, 16)).astype(np.float32)
    r1, r2 = (rnd.uniform(-1, 1, (16, 16)).astype(np.float32) for _ in range(2))
    r3 = rnd.uniform(-1, 1, (16, 24)).astype(np.float32)  # another size
    outs = [np.zeros((4, n), np.float32) for n in (16, 16, 24)]
    with handler.network_pass(LSTM_PASS), handler.fixed_operand(r1):
        with handler.fixed_operand(r2):
            for _ in range(2):
                handler.dot_mm(a, r2, outs[1])
                handler.dot_mm(a, r1, outs[0])
                with handler.fixed_operand(r3):
                    handler.dot_mm(a, r3, outs[2])
                for out, r in zip(outs, (r1, r2, r3)):
                    np.testing.assert_allclose(out, a @ r, rtol=1e-5, atol=1e-5)
        with handler.fixed_operand(r3):  # the slot r2 had
            handler.dot_mm(a, r3, outs[2])
            handler.dot_mm(a, r1, outs[0])
        np.testing.assert_allclose(outs[2], a @ r3, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(outs[0], a @ r1, rtol=1e-5, atol=1e-5)


def test_blocks_ending_out_of_order_keep_their_packed_copies_apart(handler):
    """Blocks were numbered by how many were open: after the first of two
    open blocks ended (interleaved generators), a new block took the
    number of the one still open and packed over its copy, so that
    block's products used the new operand's values (max |error| 97.6)."""
    rnd = np.random.RandomState(7)
    a = rnd.uniform(-1, 1, (4, 16)).astype(np.float32)
    r1, r2, r3 = (rnd.uniform(-1, 1, (16, 16)).astype(np.float32) for _ in range(3))
    out = np.zeros((4, 16), np.float32)
    with handler.network_pass(LSTM_PASS):
        first, second = handler.fixed_operand(r1), handler.fixed_operand(r2)
        first.__enter__()
        second.__enter__()
        handler.dot_mm(a, r2, out)
        first.__exit__(None, None, None)  # the outer block ends first
        with handler.fixed_operand(r3):
            handler.dot_mm(a, r3, out)
            np.testing.assert_allclose(out, a @ r3, rtol=1e-5, atol=1e-5)
            handler.dot_mm(a, r2, out)
            np.testing.assert_allclose(out, a @ r2, rtol=1e-5, atol=1e-5)
        second.__exit__(None, None, None)


def test_a_result_overlapping_a_factor_gets_numpys_product(handler):
    rnd = np.random.RandomState(7)
    both = rnd.uniform(-1, 1, (8, 8)).astype(np.float32)
    a = rnd.uniform(-1, 1, (8, 8)).astype(np.float32)
    want = a.astype(np.float64) @ both
    with handler.network_pass(LSTM_PASS), handler.fixed_operand(both):
        handler.dot_mm(a, both, both)  # out is b
    np.testing.assert_allclose(both, want, rtol=1e-5, atol=1e-5)
    assert not matmul_plans(handler)


def test_blocks_end_on_errors(handler):
    b = np.ones((4, 4), np.float32)
    with pytest.raises(KeyError), handler.network_pass(LSTM_PASS):
        with handler.fixed_operand(b):
            raise KeyError('inside')
    assert handler._fixed_operands() is None
    with handler.network_pass(LSTM_PASS), handler.fixed_operand(b):
        assert len(handler._fixed_operands()) == 1
    assert handler._fixed_operands() is None


def test_threads_sharing_a_handler_pack_their_own_copies(handler):
    """Each thread has its own pass state and packed copies."""
    import threading

    rnd = np.random.RandomState(8)
    a = rnd.uniform(-1, 1, (8, 32)).astype(np.float32)
    weights = [rnd.uniform(-1, 1, (32, 32)).astype(np.float32) for _ in range(4)]
    errors = []

    def work(r):
        try:
            out = np.zeros((8, 32), np.float32)
            for _ in range(20):
                with handler.network_pass(LSTM_PASS), handler.fixed_operand(r):
                    for _ in range(3):
                        handler.dot_mm(a, r, out)
                        np.testing.assert_allclose(out, a @ r, rtol=1e-5, atol=1e-5)
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(r,)) for r in weights]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_old_product_shapes_are_forgotten(handler, monkeypatch):
    """Changing sequence lengths make new shapes: the plans are capped."""
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'MATMUL_PLANS', 3)
    b = np.ones((5, 3), np.float32)
    with handler.network_pass(LSTM_PASS):
        for rows in range(1, 8):
            out = np.zeros((rows, 3), np.float32)
            handler.dot_mm(np.ones((rows, 5), np.float32), b, out)
            np.testing.assert_array_equal(out, 5.0)
    assert [k[1][0] for k in matmul_plans(handler)] == [5, 6, 7]


def test_the_plans_used_every_step_are_kept(handler, monkeypatch):
    """The plans go least recently used first: a shape run between new
    ones (the recurrent product, every step) stays."""
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'MATMUL_PLANS', 3)
    b = np.ones((5, 3), np.float32)
    with handler.network_pass(LSTM_PASS):
        for rows in range(1, 8):
            for n in (rows, 1):  # a new shape, then the one of 1 row again
                out = np.zeros((n, 3), np.float32)
                handler.dot_mm(np.ones((n, 5), np.float32), b, out)
                np.testing.assert_array_equal(out, 5.0)
    assert sorted(k[1][0] for k in matmul_plans(handler)) == [1, 6, 7]


def test_the_least_recently_used_plan_goes_not_the_oldest(handler, monkeypatch):
    """Shapes A, B, C, then A again, then D under a cap of 3: B goes (it
    was used last longest ago), A stays although it came first."""
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'MATMUL_PLANS', 3)
    b = np.ones((5, 3), np.float32)
    with handler.network_pass(LSTM_PASS):
        for rows in (1, 2, 3, 1, 4):
            out = np.zeros((rows, 3), np.float32)
            handler.dot_mm(np.ones((rows, 5), np.float32), b, out)
            np.testing.assert_array_equal(out, 5.0)
    assert sorted(k[1][0] for k in matmul_plans(handler)) == [1, 3, 4]


def test_a_block_nested_in_a_block_of_the_same_operand_keeps_the_outer_packing(
    handler,
):
    """An inner ``fixed_operand`` block for the operand an outer block
    already fixes changes nothing: after it the outer block still uses its
    packed copy (packed once), and both blocks end cleanly."""
    rnd = np.random.RandomState(4)
    a, b, out = operands(rnd, 4, 64, 48, False, True, False)
    with handler.network_pass(LSTM_PASS), handler.fixed_operand(b):
        handler.dot_mm(a, b, out, transb=True)  # makes the plan, packs b
        (key,) = matmul_plans(handler)
        pack = handler._plans[key].pack.primitive
        packs, original = [], pack.run
        pack.run = lambda *args: (packs.append(args), original(*args))
        with handler.fixed_operand(b):
            handler.dot_mm(a, b, out, transb=True)
        assert len(handler._fixed_operands()) == 1
        handler.dot_mm(a, b, out, transb=True)
        np.testing.assert_allclose(out, a @ b.T, rtol=1e-5, atol=1e-5)
        assert packs == []  # the outer block's copy served all three
    assert handler._fixed_operands() is None


def test_a_product_whose_plan_onednn_refuses_is_numpys(handler, monkeypatch):
    """Where oneDNN cannot make a matmul primitive for the shape (its
    error while making the plan), NumPy computes the product."""
    from brainstorm.handlers.onednn import _dnnl
    from brainstorm.handlers.onednn import handler as module

    def refuse(*args, **kwargs):
        raise _dnnl.OneDnnError('unimplemented (as oneDNN says for a shape)')

    monkeypatch.setattr(module, 'MatmulPlan', refuse)
    rnd = np.random.RandomState(5)
    a, b, out = operands(rnd, 5, 24, 12, False, False, False)
    start = out.copy()
    with handler.network_pass(LSTM_PASS), handler.fixed_operand(b):
        handler.dot_add_mm(a, b, out)
        added = out.copy()
        handler.dot_mm(a, b, out)
    assert [handler._plans[key] for key in matmul_plans(handler)] == [None, None]
    want = a.astype(np.float64) @ b
    np.testing.assert_allclose(added, start + want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)
