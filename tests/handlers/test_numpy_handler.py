"""NumpyHandler's own choices (shape-dependent fast paths, scratch and
constant memory, random draws) keep the plain results."""

import tracemalloc

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.base_handler import ACTIVATIONS, Handler

SHAPES = [(3, 5, 7), (32, 64, 256), (100, 40, 120), (130, 30, 20), (20, 30, 90)]


def strided(rnd, shape, dtype):
    """A feature-slice view, like the network's buffers."""
    base = rnd.randn(shape[0], shape[1] + 7).astype(dtype)
    return base[:, 3 : 3 + shape[1]]


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('m, k, n', SHAPES)
@pytest.mark.parametrize(
    'transa, transb', [(False, False), (False, True), (True, False), (True, True)]
)
def test_products_match_numpy_for_every_shape_and_transposition(
    dtype, m, k, n, transa, transb
):
    rnd = np.random.RandomState(m + k + n)
    h = NumpyHandler(dtype)
    a = strided(rnd, (k, m) if transa else (m, k), dtype)
    b = strided(rnd, (n, k) if transb else (k, n), dtype)
    expected = (a.T if transa else a).astype(np.float64) @ (
        b.T if transb else b
    ).astype(np.float64)
    out = strided(rnd, (m, n), dtype)
    start = out.astype(np.float64)
    h.dot_add_mm(a, b, out, transa=transa, transb=transb)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, start + expected, rtol=tol, atol=tol)
    h.dot_mm(a, b, out, transa=transa, transb=transb)
    np.testing.assert_allclose(out, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize('rows', [1, 63, 64, 1600])
@pytest.mark.parametrize('out_shape', ['flat', 'row'])
def test_column_sums_of_tall_matrices(rows, out_shape):
    rnd = np.random.RandomState(rows)
    h = NumpyHandler(np.float64)
    a = strided(rnd, (rows, 9), np.float64)
    out = np.zeros(9) if out_shape == 'flat' else np.zeros((1, 9))
    h.sum_t(a, 0, out)
    np.testing.assert_allclose(out.reshape(-1), a.sum(axis=0), rtol=1e-12)


def test_sigmoid_keeps_the_relative_precision_of_small_values():
    h = NumpyHandler(np.float64)
    x = np.array([-800.0, -30.0, -1.0, 0.0, 0.5, 30.0, 800.0])
    y = np.empty_like(x)
    h.sigmoid(x, y)
    np.testing.assert_allclose(
        y, 1 / (1 + np.exp(-np.clip(x, -700, 700))), rtol=1e-12, atol=1e-300
    )
    assert y[0] == 0.0 and y[-1] == 1.0


def test_float32_sigmoid_of_large_negative_inputs_is_relatively_precise():
    h = NumpyHandler(np.float32)
    x = np.array([-20.0, -15.0, -10.0, -5.0], dtype=np.float32)
    y = np.empty_like(x)
    h.sigmoid(x, y)
    exact = 1 / (1 + np.exp(-x.astype(np.float64)))
    np.testing.assert_allclose(y, exact, rtol=1e-6)


def test_constants_do_not_pile_up_with_changing_lengths():
    """The ones of the column sums and the image offsets of max pooling are
    kept once, for the largest length, not once per length."""
    rnd = np.random.RandomState(0)
    h = NumpyHandler(np.float64)
    for rows in [70, 200, 90, 130]:  # e.g. T*B of changing sequence lengths
        a = strided(rnd, (rows, 5), np.float64)
        out = np.zeros(5)
        h.sum_t(a, 0, out)
        np.testing.assert_allclose(out, a.sum(axis=0), rtol=1e-12)
        x = rnd.randn(rows // 10, 4, 4, 2)
        y, argmax = np.zeros((2, rows // 10, 2, 2, 2))
        h.maxpool2d_forward_batch(x, (2, 2), y, 0, (2, 2), argmax)
        dx = np.zeros_like(x)
        h.maxpool2d_backward_batch(x, (2, 2), y, 0, (2, 2), argmax, dx, y)
        np.testing.assert_allclose(
            dx.sum(axis=(1, 2, 3)), y.sum(axis=(1, 2, 3)), rtol=1e-12
        )
    names = [key if isinstance(key, str) else key[0] for key in h._constants]
    assert names.count('ones') == 1, names
    assert names.count('image_starts') == 1, names
    assert len(h._constants['ones']) == 200


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_probability_mask_draws_what_random_sample_draws(dtype):
    """The mask comes from the handler's seeded rnd exactly as
    ``rnd.random_sample(shape) < p`` (the stream of NumPy's RandomState),
    drawn into scratch memory; the draws continue across calls."""
    h = NumpyHandler(dtype, seed=3)
    reference = np.random.RandomState(3)
    rnd = np.random.RandomState(0)
    for shape in [(40, 30), (0, 3), (7, 5)]:
        mask = strided(rnd, shape, dtype)
        h.generate_probability_mask(mask, 0.3)
        np.testing.assert_array_equal(mask, reference.random_sample(shape) < 0.3)
    assert h.rnd.random_sample() == reference.random_sample()


def test_is_fully_finite_does_not_allocate_a_mask():
    h = NumpyHandler(np.float64)
    a = np.random.RandomState(0).randn(1000, 1000)
    assert h.is_fully_finite(a)
    tracemalloc.start()
    try:
        assert h.is_fully_finite(a)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < a.nbytes / 64, f'{peak} bytes for an operand of {a.nbytes}'
    a[500, 999] = np.nan
    assert not h.is_fully_finite(a)


def test_each_thread_has_scratch_buffers_of_its_own():
    """Networks in separate threads may share one handler (the default
    handler): the temporaries of one thread's ops are not another's."""
    import threading

    h = NumpyHandler(np.float64)
    mine = h._buffer('tmp', (4, 3))
    theirs = []
    thread = threading.Thread(target=lambda: theirs.append(h._buffer('tmp', (4, 3))))
    thread.start()
    thread.join()
    assert not np.shares_memory(mine, theirs[0])
    # within a thread the buffer is kept between calls (no allocation)
    assert np.shares_memory(h._buffer('tmp', (2, 3)), mine)


@pytest.mark.parametrize('layout', ['strided', 'contiguous'])
@pytest.mark.parametrize('rows, size', [(3, 5), (32, 40)])
@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('activation', ACTIVATIONS)
def test_lstm_steps_are_the_base_composition_bit_for_bit(
    dtype, activation, rows, size, layout
):
    """NumpyHandler runs the LSTM step ops on contiguous scratch copies of
    its strided operands (contiguous results are written in place): the
    same bits as the base class's composition, in every output and every
    argument it writes, and nothing written outside the views."""
    rng = np.random.RandomState(3)
    margin = (7, 4) if layout == 'strided' else (0, 0)

    def wide(features):
        full = rng.randn(rows, features + sum(margin)).astype(dtype)
        return full, full[:, margin[0] : margin[0] + features]

    def case(shapes):
        fulls, views = zip(*(wide(f) if f else (None, None) for f in shapes))
        return list(fulls), list(views)

    h = NumpyHandler(dtype)
    peep = [rng.randn(1, size).astype(dtype) for _ in range(3)]
    fulls, views = case([4 * size, size, 0, 0, 0, 4 * size, size, size, size])
    views[2:5] = peep
    twins = [None if f is None else f.copy() for f in fulls]
    twin_views = [
        None if t is None else t[:, margin[0] : margin[0] + v.shape[1]]
        for t, v in zip(twins, views)
    ]
    twin_views[2:5] = peep
    h.lstm_forward_step(*views[:5], activation, *views[5:])
    Handler.lstm_forward_step(h, *twin_views[:5], activation, *twin_views[5:])
    for full, twin in zip(fulls, twins):
        if full is not None:
            np.testing.assert_array_equal(full, twin)

    sizes = [size, 4 * size, size, 4 * size, size, size, 0, 0, 0, 4 * size, size]
    fulls, views = case(sizes)
    views[6:9] = peep
    twins = [None if f is None else f.copy() for f in fulls]
    twin_views = [
        None if t is None else t[:, margin[0] : margin[0] + v.shape[1]]
        for t, v in zip(twins, views)
    ]
    twin_views[6:9] = peep
    h.lstm_backward_step(*views)
    Handler.lstm_backward_step(h, *twin_views)
    for full, twin in zip(fulls, twins):
        if full is not None:
            np.testing.assert_array_equal(full, twin)


def test_lstm_steps_with_wrong_shapes_raise_and_write_nothing_outside():
    """A gates operand narrower than 4 * S is an error, as in the base
    composition, and nothing beyond the view is written."""
    h = NumpyHandler(np.float32)
    rows, size = 3, 5
    full = np.zeros((rows, 4 * size + 5), np.float32)
    gates = full[:, : 3 * size]  # one gate short
    small = [np.zeros((rows, size), np.float32) for _ in range(5)]
    peep = [np.zeros((1, size), np.float32) for _ in range(3)]
    outputs = np.zeros((rows, 4 * size), np.float32)
    with pytest.raises(ValueError):
        h.lstm_forward_step(gates, small[0], *peep, 'tanh', outputs, *small[1:4])
    assert not full[:, 3 * size :].any()


def test_lstm_steps_in_another_dtype_give_the_base_compositions_results():
    h = NumpyHandler(np.float32)
    rng = np.random.RandomState(4)
    rows, size = 2, 3
    args = [rng.randn(rows, 4 * size), rng.randn(rows, size)]
    args += [rng.randn(1, size) for _ in range(3)]
    outs = [np.zeros((rows, 4 * size))] + [np.zeros((rows, size)) for _ in range(3)]
    twins = [a.copy() for a in args], [o.copy() for o in outs]
    h.lstm_forward_step(*args, 'tanh', *outs)
    Handler.lstm_forward_step(h, *twins[0], 'tanh', *twins[1])
    for got, want in zip(args + outs, twins[0] + twins[1]):
        np.testing.assert_array_equal(got, want)


def test_products_of_many_rows_are_not_computed_transposed():
    """Up to 256 rows a wide product with a transposed second operand runs
    transposed through the 'dot' scratch buffer (faster for batches); with
    more rows it runs as it is (the transposing pass cost more than it
    saved: the Lstm's input projection of all time steps)."""
    rng = np.random.RandomState(5)
    b = rng.rand(2048, 205).astype(np.float32)
    for rows, transposed in ((64, True), (256, True), (300, False)):
        h = NumpyHandler(np.float32)
        a = rng.rand(rows, 205).astype(np.float32)
        out = np.zeros((rows, 2048), np.float32)
        h.dot_mm(a, b, out, transb=True)
        np.testing.assert_allclose(out, a @ b.T, rtol=1e-5)
        assert any(name == 'dot' for name, _ in h._scratch) == transposed, rows
