"""DebugHandler's overlap check, the kind of ``step`` and ConstrainL2Norm.

Fixes of a bug hunt:

* ``softmax_deriv_t(y, dy, dx)`` with ``dx is y`` gave wrong deltas on
  NumpyHandler (its row lets ``dx`` alias ``dy`` only), and DebugHandler
  took it: it checked overlaps only for the ``disjoint`` rows;
* partial overlaps (``x = buf[0:4]``, ``y = buf[1:5]``) in elementwise ops
  gave wrong results, and two written operands sharing memory
  (``maxpool2d_forward_batch``'s ``outputs`` and ``argmax``,
  ``conv2d_backward_batch``'s ``in_deltas`` and ``weight_deltas``) too;
  DebugHandler took them all;
* ``adam_update``'s ``step`` was checked as any number: 0 gave a bare
  ZeroDivisionError, -1 a math domain error, 2.5 was computed;
* ``ConstrainL2Norm`` let the sum of squares of a large row overflow to
  inf and handled it after, so DebugHandler refused it.
"""

import numpy as np
import pytest

from brainstorm.handlers import DebugHandler, NumpyHandler, debug_overlaps
from brainstorm.handlers.debug_array import DebugHandlerError
from brainstorm.handlers.ops import OPS
from brainstorm.value_modifiers import ConstrainL2Norm


def debug64():
    return DebugHandler(NumpyHandler(np.float64))


def arrays(h, *shapes):
    rng = np.random.default_rng(0)
    return [h.create_from_numpy(rng.uniform(0.1, 0.9, shape)) for shape in shapes]


# --------------------------------------------------------- softmax_deriv_t


def test_softmax_deriv_refuses_dx_being_y():
    d = debug64()
    y, dy = arrays(d, (2, 3), (2, 3))
    with pytest.raises(DebugHandlerError) as error:
        d.softmax_deriv_t(y, dy, y)
    message = str(error.value)
    assert message.startswith("DebugHandler.softmax_deriv_t: 'dx' overlaps 'y'")
    assert "'dx' may be only the very same array as 'dy'" in message
    assert "Received: 'dx' is 'y' (shape (2, 3)" in message


def test_softmax_deriv_takes_dx_being_dy_and_computes_it():
    d = debug64()
    y, dy = arrays(d, (2, 3), (2, 3))
    y_, dy_ = d.get_numpy_copy(y), d.get_numpy_copy(dy)
    d.softmax_deriv_t(y, dy, dy)
    expected = y_ * (dy_ - (dy_ * y_).sum(-1, keepdims=True))
    np.testing.assert_allclose(d.get_numpy_copy(dy), expected, rtol=1e-12)


# -------------------------------------------------------- partial overlaps


PARTIAL = {
    'el': lambda d, b: d.el(b[0:4], b[1:5]),
    'leaky_rel': lambda d, b: d.leaky_rel(b[0:4], b[1:5]),
    'tanh_deriv': lambda d, b: d.tanh_deriv(None, b[0:4], b[2:6], b[1:5]),
    'add_tt': lambda d, b: d.add_tt(b[0:4], b[4:8], b[3:7]),
    'mult_st': lambda d, b: d.mult_st(2.0, b[1:5], b[0:4]),
    'copy_to': lambda d, b: d.copy_to(b[0:4], b[2:6]),
    'sum_t': lambda d, b: d.sum_t(b[0:4], None, b[3:4]),
    'merge_tt': lambda d, b: d.merge_tt(
        b[0:2].reshape(1, 2), b[2:4].reshape(1, 2), b[1:5].reshape(1, 4)
    ),
}


@pytest.mark.parametrize('case', PARTIAL)
def test_a_written_operand_partly_overlapping_an_input_is_refused(case):
    d = debug64()
    (buf,) = arrays(d, (8,))
    with pytest.raises(DebugHandlerError, match=r'partly overlaps .* bytes from'):
        PARTIAL[case](d, buf)


def test_the_message_names_op_operands_allowed_and_received():
    d = debug64()
    (buf,) = arrays(d, (5,))
    with pytest.raises(DebugHandlerError) as error:
        d.el(buf[0:4], buf[1:5])
    assert str(error.value) == (
        "DebugHandler.el: 'y' overlaps 'x': 'y' may be only the very same "
        "array as 'x', and overlap no operand otherwise. Received: 'y' "
        "(shape (4,), strides (8,)) partly overlaps 'x' (shape (4,), "
        'strides (8,)), +8 bytes from its start'
    )


def test_the_very_same_array_through_other_views_is_an_alias():
    d = debug64()
    (buf,) = arrays(d, (2, 4))
    before = d.get_numpy_copy(buf)
    d.el(buf[:, 1:3], buf[:, 1:3])  # two views, one pointer, shape, strides
    d.add_tt(buf.reshape(8), buf.reshape(8), buf.reshape(8))
    expected = before.copy()
    expected[:, 1:3] = np.where(before[:, 1:3] > 0, before[:, 1:3], 0)
    np.testing.assert_allclose(d.get_numpy_copy(buf), 2 * expected)


def test_views_of_one_buffer_that_do_not_overlap_pass():
    d = debug64()
    (buf,) = arrays(d, (3, 6))
    d.add_tt(buf[:, 0:2], buf[:, 2:4], buf[:, 4:6])  # interleaved, disjoint
    d.tanh(buf[0], buf[1])


def test_an_op_without_aliases_refuses_the_very_same_array():
    d = debug64()
    a, cond = arrays(d, (2, 3), (2, 3))
    with pytest.raises(DebugHandlerError, match="'out' must overlap no other"):
        d.add_into_if(a, a, cond)


# ------------------------------------------------ written operands overlap


def test_maxpool_refuses_outputs_being_argmax():
    d = debug64()
    (x,) = arrays(d, (1, 4, 4, 1))
    out = d.zeros((1, 2, 2, 1))
    with pytest.raises(DebugHandlerError) as error:
        d.maxpool2d_forward_batch(x, (2, 2), out, 0, (2, 2), out)
    assert "'outputs' overlaps 'argmax': written operands must not overlap" in str(
        error.value
    )


def test_conv_backward_refuses_in_deltas_sharing_weight_deltas():
    d = debug64()
    inputs, weights, out_deltas = arrays(d, (1, 1, 2, 2), (2, 1, 1, 2), (1, 1, 2, 2))
    buf = d.zeros((1, 1, 2, 2))
    with pytest.raises(DebugHandlerError, match="'in_deltas' overlaps 'weight_deltas'"):
        d.conv2d_backward_batch(
            inputs,
            weights,
            0,
            (1, 1),
            buf,
            out_deltas,
            buf.reshape((2, 1, 1, 2)),
            d.zeros((2,)),
        )


def test_split_add_refuses_overlapping_outputs():
    d = debug64()
    (x,) = arrays(d, (2, 4))
    out = d.zeros((2, 3))
    with pytest.raises(DebugHandlerError, match="'out_a' overlaps 'out_b'"):
        d.split_add_tt(x, out[:, 0:2], out[:, 1:3])


def test_disjoint_rows_still_refuse_every_overlap():
    d = debug64()
    (a,) = arrays(d, (4, 4))
    with pytest.raises(DebugHandlerError, match="'out' overlaps 'a': must not overlap"):
        d.dot_mm(a, a, a)


# ------------------------------------------------------ the table's aliases


def test_the_aliases_of_the_rows():
    assert OPS['softmax_deriv_t'].aliases == {'dx': ('dy',)}
    assert OPS['masked_softmax_t'].aliases == {'out': ('x',)}
    assert OPS['el'].aliases == {'y': ('x',)}
    assert OPS['add_tt'].aliases == {'out': ('a', 'b')}
    assert OPS['copy_to'].aliases == {'dest': ('src',)}
    for name in ('subtract_mv', 'divide_mv', 'add_mv', 'mult_mv'):
        assert OPS[name].aliases['out'][0] == 'm', name  # layers use it
    for name, op in OPS.items():
        if name.endswith('_deriv'):  # the Handler contract; tested aliased
            assert op.aliases == {'dx': ('x', 'y', 'dy')}, name
        if op.disjoint or not op.alias and not op.may_be:
            assert op.aliases == {}, name
        for written, names in op.aliases.items():
            assert written in op.writes and not set(names) & set(op.writes), name


def test_the_subtract_and_divide_of_normalizing_layers_may_alias():
    d = debug64()
    m, v = arrays(d, (3, 4), (1, 4))
    expected = d.get_numpy_copy(m) / d.get_numpy_copy(v)
    d.divide_mv(m, v, m)
    d.subtract_mv(m, v, m)
    np.testing.assert_allclose(d.get_numpy_copy(m), expected - d.get_numpy_copy(v))


def test_disjoint_operands_cost_no_exact_test(monkeypatch):
    d = debug64()
    a, b, out = arrays(d, (3, 4), (3, 4), (3, 4))
    exact = []
    monkeypatch.setattr(
        debug_overlaps.np, 'shares_memory', lambda *args: exact.append(args)
    )
    d.add_tt(a, b, out)
    d.add_tt(a, b, a)
    assert exact == []


# ------------------------------------------------------ adam_update's step


def adam(h, step):
    p, g, m, v, s = (h.create_from_numpy(np.full(3, x)) for x in (1, 0.5, 0, 0, 0))
    h.adam_update(p, g, m, v, None, s, 0.1, 0.9, 0.999, 1e-8, step, 0.0)
    return h.get_numpy_copy(p)


@pytest.mark.parametrize('step', [0, -1, 2.5, True, 1.0])
def test_adam_step_must_be_a_positive_int(step):
    expected = f'{type(step).__name__} {step!r}'
    with pytest.raises(DebugHandlerError) as error:
        adam(debug64(), step)
    assert str(error.value) == (
        "DebugHandler.adam_update: argument 'step' must be an int >= 1. "
        f'Received: {expected}'
    )


@pytest.mark.parametrize('step', [1, 7, np.int64(3)])
def test_adam_takes_positive_int_steps(step):
    np.testing.assert_array_equal(
        adam(debug64(), step), adam(NumpyHandler(np.float64), step)
    )


# --------------------------------------------------- ConstrainL2Norm: no inf


def constrain(handler, values, limit=1.0):
    view = handler.create_from_numpy(np.asarray(values, dtype=np.float64))
    ConstrainL2Norm(limit)(handler, view)
    return handler.get_numpy_copy(view).astype(np.float64)


LARGE_ROWS = {
    'float16 9.0 x 1000': (np.float16, np.full((2, 1000), 9.0), 1.0),
    'float16 60000 x 1000': (np.float16, np.full((1, 1000), 60000.0), 2.0),
    'float16 under the limit': (np.float16, np.full((2, 1000), 9.0), 1000.0),
    'float32 2e19': (np.float32, [[2e19, 1.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0]], 1.0),
    'float32 3e38': (np.float32, [[3e38, -3e38], [0.5, 0.0]], 1.0),
    'float64 1e308': (np.float64, [[1e308, 1e308, 1e-300], [1.0, 2.0, 3.0]], 1.0),
}


@pytest.mark.parametrize('case', LARGE_ROWS)
def test_constrain_l2_norm_of_large_rows_runs_under_the_debug_handler(case):
    dtype, values, limit = LARGE_ROWS[case]
    checked = constrain(DebugHandler(NumpyHandler(dtype)), values, limit)
    plain = constrain(NumpyHandler(dtype), values, limit)
    np.testing.assert_array_equal(checked, plain)
    rows = np.asarray(values, np.float64)
    top = np.abs(rows).max(axis=1, keepdims=True)  # no overflow in float64
    norms = top[:, 0] * np.sqrt(((rows / top) ** 2).sum(axis=1))
    expected = np.minimum(norms, limit)
    np.testing.assert_allclose(np.sqrt((plain**2).sum(axis=1)), expected, rtol=2e-3)


def plain_constrain(h, values, limit):
    """The computation without any overflow handling, in handler ops."""
    m = h.create_from_numpy(values)
    squares, norms = h.zeros(values.shape), h.zeros((values.shape[0], 1))
    h.mult_tt(m, m, squares)
    h.sum_t(squares, 1, norms)
    h.sqrt_t(norms, norms)
    h.add_st(-limit, norms, norms)
    h.rel(norms, norms)
    h.add_st(limit, norms, norms)
    factors = h.zeros(norms.shape)
    h.fill(factors, limit)
    h.divide_tt(factors, norms, factors)
    h.mult_mv(m, factors, m)
    return h.get_numpy_copy(m)


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_constrain_l2_norm_of_ordinary_rows_is_bit_for_bit_the_plain_one(dtype):
    rng = np.random.default_rng(2)
    for scale, columns in [(0.01, 300), (0.5, 1000), (3.0, 5), (1.0, 64)]:
        values = (rng.standard_normal((6, columns)) * scale).astype(dtype)
        for limit in (0.1, 1.0, 10.0):
            expected = plain_constrain(NumpyHandler(dtype), values, limit)
            for h in (NumpyHandler(dtype), DebugHandler(NumpyHandler(dtype))):
                view = h.create_from_numpy(values)
                ConstrainL2Norm(limit)(h, view)
                np.testing.assert_array_equal(h.get_numpy_copy(view), expected)
