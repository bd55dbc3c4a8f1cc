"""Fixes of handler ops found by a bug hunt.

* float16 ``gelu_deriv`` gave NaN from ``|x| >= 80`` (the cubic term of
  ``x`` clipped only to +-1000 overflowed: ``inf * 0``);
* float16 ``binarize_v`` with more than 2049 classes lit two columns for
  one id (the column ids were made in float16);
* a valid id just below a class count that the dtype cannot hold (float16:
  2049) was refused by NumpyHandler and DebugHandler;
* max pooling's backward pass with an ``argmax`` outside the image wrote
  into the memory between ``in_deltas``' rows (another array's) or into
  another image; DebugHandler let a bare IndexError through;
* DebugHandler checked the "must not overlap" of the op contracts only for
  the LSTM steps and the updates (``reverse_time_t(a, None, out=a)`` gave a
  wrong result silently);
* the op table said the derivatives of rel, sigmoid, tanh and linear must
  not alias although the Handler contract allows it for every activation
  derivative (and Convolution2D calls them with ``dx is dy``);
* DebugHandler took arrays of another dtype than its handler's;
* ops on operands with an empty axis raised bare NumPy errors.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.debug_array import DebugArray, DebugHandlerError
from brainstorm.handlers.ops import OPS
from tests.onednn_support import onednn_handler

# ----------------------------------------------------------- float16 GELU


LARGE = [10.0, 80.0, 81.8, 100.0, 255.0, 256.0, 300.0, 999.0, 6.0e4]


def test_float16_gelu_and_its_derivative_stay_finite_for_large_inputs():
    h = NumpyHandler(np.float16)
    x = np.array(LARGE + [-v for v in LARGE], np.float16)
    y, dx = np.zeros_like(x), np.zeros_like(x)
    with np.errstate(all='raise'):  # no overflow on the way either
        h.gelu(x, y)
        h.gelu_deriv(x, y, np.ones_like(x), dx)
    positive = x > 0
    np.testing.assert_array_equal(y[positive], x[positive])
    np.testing.assert_array_equal(y[~positive], 0.0)
    np.testing.assert_array_equal(dx, positive.astype(np.float16))


def test_every_float16_input_gives_finite_gelu_and_derivative():
    h = NumpyHandler(np.float16)
    x = np.arange(0x10000, dtype=np.uint16).view(np.float16)
    x = x[np.isfinite(x)]
    y, dx = np.zeros_like(x), np.zeros_like(x)
    with np.errstate(over='raise', invalid='raise'):  # tiny x: underflow
        h.gelu(x, y)
        h.gelu_deriv(x, y, np.ones_like(x), dx)
    assert np.isfinite(y).all() and np.isfinite(dx).all()


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_gelu_keeps_its_limits_beyond_the_clip_in_float32_and_float64(dtype):
    """What the clip at 1000 gave there: tanh is +-1, derivative 1 or 0."""
    h = NumpyHandler(dtype)
    magnitude = np.concatenate([np.linspace(10, 1500, 3001), [1e5, 1e30]])
    x = np.concatenate([magnitude, -magnitude]).astype(dtype)
    y, dx = np.zeros_like(x), np.zeros_like(x)
    h.gelu(x, y)
    h.gelu_deriv(x, y, np.ones_like(x), dx)
    positive = x > 0
    np.testing.assert_array_equal(y[positive], x[positive])
    np.testing.assert_array_equal(y[~positive], 0.0)
    np.testing.assert_array_equal(dx, positive.astype(dtype))


# --------------------------------------------------------- class ids


def float16_handlers():
    return [NumpyHandler(np.float16), DebugHandler(NumpyHandler(np.float16))]


@pytest.mark.parametrize('h', float16_handlers(), ids=['numpy', 'debug'])
def test_float16_binarize_lights_one_column_per_id_beyond_2048_classes(h):
    v = h.create_from_numpy(np.array([[2048.0], [2050.0], [2047.0], [0.0]]))
    out = h.zeros((4, 2052))
    h.binarize_v(v, out)
    hot = [np.flatnonzero(row).tolist() for row in h.get_numpy_copy(out)]
    assert hot == [[2048], [2050], [2047], [0]]


def test_float16_softmax_ce_deltas_shift_only_the_target_class():
    net = bs.tools.create_net_from_spec('classification', 4, 2050, '')
    net.set_handler(NumpyHandler(np.float16))
    net.initialize(bs.initializers.Gaussian(0.01), seed=1)
    targets = np.array([[[2048.0]]])
    net.provide_external_data({'default': np.zeros((1, 1, 4)), 'targets': targets})
    net.forward_pass(training_pass=True)
    net.backward_pass()
    p = net.get('Output.outputs.predictions')[0, 0]
    deltas = net.get('Output.input_deltas.default')[0, 0]
    shifted = np.flatnonzero(deltas < 0).tolist()
    assert shifted == [2048], shifted
    np.testing.assert_allclose(deltas[2048], p[2048] - 1, atol=1e-3)


@pytest.mark.parametrize('h', float16_handlers(), ids=['numpy', 'debug'])
def test_an_id_below_a_class_count_the_dtype_cannot_hold_is_valid(h):
    """2049 classes in float16 (2049 rounds to 2048): id 2048 is valid."""
    k = 2049
    ids = h.create_from_numpy(np.array([[2048.0], [1.0]]))
    table = h.create_from_numpy(np.arange(2 * k).reshape(2, k) % 7)
    out = h.zeros((2, 1))
    h.index_m_by_v(table, ids, out)
    np.testing.assert_array_equal(h.get_numpy_copy(out).ravel(), [2048 % 7, 2050 % 7])
    hot = h.zeros((2, k))
    h.binarize_v(ids, hot)
    assert [np.flatnonzero(r).tolist() for r in h.get_numpy_copy(hot)] == [[2048], [1]]
    rows = h.create_from_numpy(np.arange(k).reshape(k, 1) % 5)
    gathered = h.zeros((2, 1))
    h.gather_m_by_v(rows, ids, gathered)
    np.testing.assert_array_equal(h.get_numpy_copy(gathered).ravel(), [2048 % 5, 1])
    summed = h.zeros((k, 1))
    h.scatter_add_m_by_v(h.ones((2, 1)), ids, summed)
    assert np.flatnonzero(h.get_numpy_copy(summed)).tolist() == [1, 2048]


@pytest.mark.parametrize('h', float16_handlers(), ids=['numpy', 'debug'])
def test_an_id_equal_to_the_class_count_is_still_refused(h):
    ids = h.create_from_numpy(np.array([[2048.0]]))
    with pytest.raises((NetworkValidationError, DebugHandlerError), match='2048'):
        h.index_m_by_v(h.zeros((1, 2048)), ids, h.zeros((1, 1)))


# ------------------------------------------------- max pooling's argmax


N, H, W, C, GAP = 2, 4, 4, 1, 8
CELLS = H * W * C


def pooled(h):
    x = np.random.default_rng(0).standard_normal((N, H, W, C)).astype(h.dtype)
    out, argmax = np.zeros((N, 2, 2, C), h.dtype), np.zeros((N, 2, 2, C), h.dtype)
    h.maxpool2d_forward_batch(x, (2, 2), out, 0, (2, 2), argmax)
    return x, out, argmax


def backward_into_rows_with_gaps(h, bad):
    """in_deltas: each image's cells, then GAP floats of another array."""
    x, out, argmax = pooled(h)
    argmax[0, 0, 0, 0] = bad
    big = np.zeros((N, CELLS + GAP), h.dtype)
    in_deltas = big[:, :CELLS].reshape(N, H, W, C)
    try:
        h.maxpool2d_backward_batch(
            x, (2, 2), out, 0, (2, 2), argmax, in_deltas, np.ones_like(out)
        )
    finally:
        assert not big[:, CELLS:].any(), 'wrote outside in_deltas'
    return in_deltas


@pytest.mark.parametrize('bad', [CELLS, CELLS + 1.0, 1e6, -2.0, np.nan, np.inf])
def test_numpy_max_pool_backward_refuses_an_argmax_outside_the_image(bad):
    with pytest.raises(ValueError, match=r'argmax must hold .*\[0, 16\)'):
        backward_into_rows_with_gaps(NumpyHandler(np.float32), bad)


@pytest.mark.parametrize('bad', [CELLS + 1.0, -2.0, np.nan])
def test_onednn_max_pool_backward_writes_only_into_in_deltas(bad):
    h = onednn_handler(np.float32)
    try:
        with np.errstate(invalid='ignore'):  # NaN cast to an int
            backward_into_rows_with_gaps(h, bad)
    except ValueError:
        pass  # refusing is fine too; what matters is no write outside


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_an_argmax_of_minus_one_passes_nothing_also_without_padding(dtype):
    """-1 (no cell) passes nothing (before, without padding, it hit the
    memory before the image: the gap of the previous row, another array)."""
    in_deltas = backward_into_rows_with_gaps(NumpyHandler(dtype), -1.0)
    assert in_deltas[0].sum() == 3 and in_deltas[1].sum() == 4


def debug_backward(argmax_value):
    d = DebugHandler(NumpyHandler(np.float32))
    x, out, argmax = pooled(NumpyHandler(np.float32))
    argmax[0, 0, 0, 0] = argmax_value
    arrays = (x, out, argmax, np.zeros(x.shape), np.ones(out.shape))
    x, out, argmax, dx, dy = (d.create_from_numpy(a) for a in arrays)
    d.maxpool2d_backward_batch(x, (2, 2), out, 0, (2, 2), argmax, dx, dy)
    return d.get_numpy_copy(dx)


@pytest.mark.parametrize('bad', [1e6, CELLS, -2.0, 0.5, np.nan])
def test_debug_handler_names_an_argmax_outside_the_image(bad):
    with pytest.raises(DebugHandlerError, match=r"'argmax' .*\[-1, 16\)"):
        debug_backward(bad)


@pytest.mark.parametrize('good', [-1.0, 0.0, CELLS - 1.0])
def test_debug_handler_takes_every_cell_and_minus_one(good):
    assert debug_backward(good).sum() == 8 - (good == -1)


# -------------------------------------------- overlaps the contract forbids


def debug64():
    return DebugHandler(NumpyHandler(np.float64))


OVERLAPS = {
    'reverse_time_t': lambda d, a: d.reverse_time_t(a, None, a),
    'dot_mm': lambda d, a: d.dot_mm(a[0], a[0], a[0]),
    'dot_add_mm': lambda d, a: d.dot_add_mm(a[0], a[0], a[0]),
    'dot_mm-partial': lambda d, a: d.dot_mm(a[:, 0, 0:2], a[0:2, 1, :], a[:, 0, :]),
    'batch_dot_tt': lambda d, a: d.batch_dot_tt(
        a[:, :, 0:2], a[:, :, 2:4], a[0:2, :, 0:2], transa=True
    ),
    'batch_dot_add_tt': lambda d, a: d.batch_dot_add_tt(
        a[:, :, 0:2], a[:, :, 2:4], a[2:4, :, 2:4], transa=True
    ),
}


@pytest.mark.parametrize('case', OVERLAPS)
def test_debug_handler_refuses_overlaps_the_op_contract_forbids(case):
    d = debug64()
    a = d.create_from_numpy(np.arange(64.0).reshape(4, 4, 4) / 64)
    with pytest.raises(DebugHandlerError, match='must not overlap'):
        OVERLAPS[case](d, a)


def test_reverse_time_into_another_array_still_works():
    d = debug64()
    a = d.create_from_numpy(np.arange(4.0).reshape(4, 1, 1))
    out = d.zeros((4, 1, 1))
    d.reverse_time_t(a, None, out)
    np.testing.assert_array_equal(d.get_numpy_copy(out).ravel(), [3, 2, 1, 0])


def test_debug_handler_still_takes_the_aliasing_the_contracts_allow():
    d = debug64()
    a = d.create_from_numpy(np.full((3, 4), 0.5))
    d.add_tt(a, a, a)
    d.softmax_m(a, a)
    for name in ('rel', 'sigmoid', 'tanh', 'linear', 'el', 'gelu'):
        getattr(d, name + '_deriv')(a, a, a, a)  # dx is x, y and dy
    d.masked_softmax_t(a.reshape(3, 1, 4), None, a.reshape(3, 1, 4))


def test_the_table_marks_exactly_the_ops_whose_contract_forbids_overlaps():
    disjoint = {name for name, op in OPS.items() if op.disjoint}
    assert {'dot_mm', 'dot_add_mm', 'reverse_time_t'} <= disjoint
    assert {'batch_dot_tt', 'batch_dot_add_tt', 'sgd_update'} <= disjoint
    assert {'lstm_forward_step', 'lstm_backward_step'} <= disjoint
    for name, op in OPS.items():
        assert not (op.alias and op.disjoint), name
        says = 'must not overlap' in op.doc or 'must not alias' in op.doc
        assert not says or op.disjoint, f'{name}: its doc forbids overlaps'


# ------------------------------------------ aliasing activation derivatives


DERIVATIVES = [name for name in OPS if name.endswith('_deriv')]


def test_every_activation_derivative_may_alias_in_the_table():
    assert len(DERIVATIVES) == 8
    assert [n for n in DERIVATIVES if not OPS[n].alias] == []


CPU_HANDLERS = {
    'numpy32': lambda: NumpyHandler(np.float32),
    'numpy64': lambda: NumpyHandler(np.float64),
    'onednn': lambda: onednn_handler(np.float32),
}


@pytest.mark.parametrize('size', [7, 1 << 17])  # oneDNN from 1 << 16 on
@pytest.mark.parametrize('name', CPU_HANDLERS)
def test_activation_derivatives_give_the_same_result_aliased(name, size):
    h = CPU_HANDLERS[name]()
    rng = np.random.default_rng(1)
    y0 = rng.uniform(-0.9, 0.9, size).astype(h.dtype)  # y of every activation
    dy0 = rng.standard_normal(size).astype(h.dtype)
    for op in DERIVATIVES:
        want = np.zeros_like(y0)
        getattr(h, op)(y0.copy(), y0.copy(), dy0.copy(), want)
        for alias in ('dx is dy', 'dx is y', 'dx is x'):
            x, y, dy = y0.copy(), y0.copy(), dy0.copy()
            dx = {'dx is dy': dy, 'dx is y': y, 'dx is x': x}[alias]
            getattr(h, op)(x, y, dy, dx)
            np.testing.assert_array_equal(dx, want, err_msg=f'{op}, {alias}')


# ------------------------------------------------------------- dtypes


def test_debug_handler_refuses_arrays_of_another_dtype():
    d64 = debug64()
    a32 = DebugHandler(NumpyHandler(np.float32)).create_from_numpy(np.ones((2, 3)))
    out = d64.zeros((2, 3))
    with pytest.raises(DebugHandlerError, match=r"'a' .*float64.*float32"):
        d64.add_tt(a32, a32, out)
    ints = DebugArray(np.ones((2, 3), int))
    with pytest.raises(DebugHandlerError, match=r"'a' .*float64.*int64"):
        d64.add_tt(ints, out, out)
    with pytest.raises(DebugHandlerError, match=r"'out' .*float64.*int64"):
        d64.add_tt(out, out, ints)


def test_debug_handler_takes_argmax_and_ids_in_its_dtype():
    assert debug_backward(3.0).sum() == 8
    d = debug64()
    out = d.zeros((1, 3))
    d.binarize_v(d.create_from_numpy(np.array([[2.0]])), out)
    np.testing.assert_array_equal(d.get_numpy_copy(out), [[0, 0, 1]])


# ------------------------------------------------------ empty operands


EMPTY_HANDLERS = {
    'numpy': lambda: NumpyHandler(np.float32),
    'debug': lambda: DebugHandler(NumpyHandler(np.float32)),
    'onednn': lambda: onednn_handler(np.float32),
}


def arrays_of(h, *shapes, value=0.0):
    return [h.create_from_numpy(np.full(shape, value)) for shape in shapes]


@pytest.mark.parametrize('name', EMPTY_HANDLERS)
def test_softmaxes_over_no_columns_do_nothing(name):
    h = EMPTY_HANDLERS[name]()
    m, out = arrays_of(h, (3, 0), (3, 0))
    h.softmax_m(m, out)
    x, y = arrays_of(h, (3, 2, 0), (3, 2, 0))
    h.masked_softmax_t(x, None, y)
    h.masked_softmax_t(x, h.ones((3, 2, 1)), y, True)
    x, y = arrays_of(h, (0, 2, 3, 0), (0, 2, 3, 0))
    h.masked_softmax_t(x, None, y, True)


@pytest.mark.parametrize('name', EMPTY_HANDLERS)
def test_max_pooling_of_no_channels_does_nothing(name):
    h = EMPTY_HANDLERS[name]()
    x, dx = arrays_of(h, (2, 4, 4, 0), (2, 4, 4, 0))
    y, argmax = arrays_of(h, (2, 2, 2, 0), (2, 2, 2, 0))
    h.maxpool2d_forward_batch(x, (2, 2), y, 0, (2, 2), argmax)
    h.maxpool2d_backward_batch(x, (2, 2), y, 0, (2, 2), argmax, dx, y)


@pytest.mark.parametrize('overwrite', [False, True])
@pytest.mark.parametrize('name', EMPTY_HANDLERS)
def test_convolution_with_no_filters_has_no_output_and_no_gradient(name, overwrite):
    h = EMPTY_HANDLERS[name]()
    x, w, b, y = arrays_of(h, (2, 4, 4, 3), (0, 3, 3, 3), (0,), (2, 2, 2, 0))
    h.conv2d_forward_batch(x, w, b, y, 0, (1, 1), activation='rel')
    dw, db = arrays_of(h, (0, 3, 3, 3), (0,))
    (dx,) = arrays_of(h, (2, 4, 4, 3), value=5.0)
    h.conv2d_backward_batch(
        x, w, 0, (1, 1), dx, y, dw, db, overwrite_in_deltas=overwrite
    )
    want = 0.0 if overwrite else 5.0  # nothing added (or written: zeros)
    np.testing.assert_array_equal(h.get_numpy_copy(dx), np.full((2, 4, 4, 3), want))


def test_a_mask_value_wrong_beyond_six_digits_is_shown_as_it_is():
    # ':g' printed 0.9999999 as '1' in "Received 1 ..., which is neither 0
    # nor 1"; the id check of the gather ops did the same
    h = NumpyHandler(np.float64)
    mask = np.ones((3, 1, 1))
    mask[1, 0, 0] = 0.9999999
    x = np.zeros((3, 1, 2))
    with pytest.raises(NetworkValidationError, match=r'Received 0\.9999999 at'):
        h.reverse_time_t(x, mask, np.zeros_like(x))
    ids = np.array([[0.0], [2.0000001]])
    with pytest.raises(NetworkValidationError, match=r'e\.g\. 2\.0000001 at'):
        h.binarize_v(ids, np.zeros((2, 5)))
