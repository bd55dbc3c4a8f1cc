"""The ops' ``overwrite_in_deltas``: input deltas written, not added to.

On every CPU handler the overwritten deltas equal the deltas added to
zeros, whatever the memory held before (NaN included); a handler written
against the older signatures gets its deltas zeroed before its op.
"""

import numpy as np
import pytest

from brainstorm.handlers import DebugHandler, NumpyHandler
from tests.onednn_support import onednn_handler

HANDLERS = {
    'numpy32': lambda: NumpyHandler(np.float32),
    'numpy64': lambda: NumpyHandler(np.float64),
    'onednn': onednn_handler,
    'debug': lambda: DebugHandler(NumpyHandler(np.float64)),
}


def _dtype(h):
    return (h.handler if isinstance(h, DebugHandler) else h).dtype


def _pool_operands(h, rng):
    x = rng.standard_normal((3, 9, 8, 4))
    y, argmax = h.zeros((3, 4, 4, 4)), h.zeros((3, 4, 4, 4))
    x = h.create_from_numpy(x.astype(_dtype(h)))
    h.maxpool2d_forward_batch(x, (3, 2), y, (1, 0, 0, 0), (2, 2), argmax)
    dy = h.create_from_numpy(rng.standard_normal((3, 4, 4, 4)).astype(_dtype(h)))
    return x, y, argmax, dy


def _call(h, op, rng, in_deltas, **keywords):
    """Run ``op`` with ``in_deltas``; the same operands for the same ``rng`` seed."""
    x, y, argmax, dy = _pool_operands(h, rng)
    geometry = ((1, 0, 0, 0), (2, 2))
    if op == 'max':
        h.maxpool2d_backward_batch(
            x, (3, 2), y, *geometry, argmax, in_deltas, dy, **keywords
        )
    elif op == 'avg':
        h.avgpool2d_backward_batch(x, (3, 2), y, *geometry, in_deltas, dy, **keywords)
    else:
        w = h.create_from_numpy(rng.standard_normal((4, 3, 2, 4)).astype(_dtype(h)))
        out = h.create_from_numpy(rng.standard_normal((3, 4, 4, 4)).astype(_dtype(h)))
        dw, db = h.zeros((4, 3, 2, 4)), h.zeros((4,))
        h.conv2d_backward_batch(x, w, *geometry, in_deltas, out, dw, db, **keywords)


@pytest.mark.parametrize('garbage', ['random', 'nan'])
@pytest.mark.parametrize('op', ['max', 'avg', 'conv'])
@pytest.mark.parametrize('name', list(HANDLERS))
def test_overwritten_deltas_equal_deltas_added_to_zeros(name, op, garbage):
    check_overwrite(HANDLERS[name](), op, garbage)


def check_overwrite(h, op, garbage):
    """Overwritten deltas equal deltas added to zeros (also run on the
    emulated PyCudaHandler by test_pycuda_handler.py)."""
    added = h.zeros((3, 9, 8, 4))
    _call(h, op, np.random.default_rng(1), added)
    stale = np.random.default_rng(2).standard_normal((3, 9, 8, 4)) * 1e3
    if garbage == 'nan':
        stale[:] = np.nan
    written = h.create_from_numpy(stale.astype(_dtype(h)))
    _call(h, op, np.random.default_rng(1), written, overwrite_in_deltas=True)
    expected, got = h.get_numpy_copy(added), h.get_numpy_copy(written)
    assert np.abs(expected).sum() > 0
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize('op', ['max', 'avg', 'conv'])
def test_onednn_writes_strided_deltas_too(op):
    """Deltas that are a strided view take the scratch path; same results."""
    h = onednn_handler()
    added = h.zeros((3, 9, 8, 4))
    _call(h, op, np.random.default_rng(1), added)
    wide = np.full((3, 9, 8, 8), np.nan, np.float32)
    _call(h, op, np.random.default_rng(1), wide[..., :4], overwrite_in_deltas=True)
    np.testing.assert_array_equal(wide[..., :4], added)
    assert np.isnan(wide[..., 4:]).all()


def test_skipped_deltas_stay_untouched_when_also_overwritten():
    for h in (NumpyHandler(np.float32), onednn_handler()):
        stale = np.full((3, 9, 8, 4), 5.0, np.float32)
        _call(
            h, 'conv', np.random.default_rng(1), stale,
            skip_in_deltas=True, overwrite_in_deltas=True,
        )  # fmt: skip
        assert (stale == 5.0).all()


class OldSignatureHandler(NumpyHandler):
    """Ops with Brainstorm 0.5's signatures: they add, with no keywords."""

    def maxpool2d_backward_batch(
        self, inputs, window, outputs, padding, stride, argmax, in_deltas, out_deltas
    ):
        super().maxpool2d_backward_batch(
            inputs, window, outputs, padding, stride, argmax, in_deltas, out_deltas
        )

    def avgpool2d_backward_batch(
        self, inputs, window, outputs, padding, stride, in_deltas, out_deltas
    ):
        super().avgpool2d_backward_batch(
            inputs, window, outputs, padding, stride, in_deltas, out_deltas
        )

    def conv2d_backward_batch(
        self, inputs, weights, padding, stride, in_deltas, out_deltas,
        weight_deltas, bias_deltas, **hints,
    ):  # fmt: skip
        super().conv2d_backward_batch(
            inputs, weights, padding, stride, in_deltas, out_deltas,
            weight_deltas, bias_deltas,
        )  # fmt: skip


def _check_written_over(h, op, garbage=np.nan):
    """Deltas full of ``garbage``, overwritten, equal deltas added to zeros."""
    added = h.zeros((3, 9, 8, 4))
    _call(h, op, np.random.default_rng(1), added)
    stale = np.full((3, 9, 8, 4), garbage)
    _call(h, op, np.random.default_rng(1), stale, overwrite_in_deltas=True)
    np.testing.assert_array_equal(stale, added)
    return stale


@pytest.mark.parametrize('op', ['max', 'avg', 'conv'])
def test_a_handler_lacking_the_keyword_gets_its_deltas_zeroed_first(op):
    h = OldSignatureHandler(np.float64)
    stale = _check_written_over(h, op)
    # in_deltas passed by keyword reach the wrapper too
    stale[:] = np.nan
    x, y, argmax, dy = _pool_operands(h, np.random.default_rng(1))
    if op == 'max':
        h.maxpool2d_backward_batch(
            x, (3, 2), y, (1, 0, 0, 0), (2, 2), argmax,
            in_deltas=stale, out_deltas=dy, overwrite_in_deltas=True,
        )  # fmt: skip
        assert not np.isnan(stale).any()


class PartlyNewSignatureHandler(NumpyHandler):
    """Names overwrite_in_deltas but not the hint ``columns``: it is wrapped
    (for the hint), and the keyword must still reach it."""

    def conv2d_backward_batch(
        self, inputs, weights, padding, stride, in_deltas, out_deltas,
        weight_deltas, bias_deltas, *, skip_in_deltas=False,
        overwrite_in_deltas=False,
    ):  # fmt: skip
        self.seen = overwrite_in_deltas
        super().conv2d_backward_batch(
            inputs, weights, padding, stride, in_deltas, out_deltas,
            weight_deltas, bias_deltas, skip_in_deltas=skip_in_deltas,
            overwrite_in_deltas=overwrite_in_deltas,
        )  # fmt: skip


def test_a_wrapped_op_naming_the_keyword_gets_it():
    h = PartlyNewSignatureHandler(np.float64)
    _check_written_over(h, 'conv', 100.0)
    assert h.seen is True


class OldPoolingMixin:
    """Brainstorm 0.5's pooling ops in a mixin that is no Handler."""

    def maxpool2d_backward_batch(
        self, inputs, window, outputs, padding, stride, argmax, in_deltas, out_deltas
    ):
        NumpyHandler.maxpool2d_backward_batch(
            self, inputs, window, outputs, padding, stride, argmax, in_deltas,
            out_deltas,
        )  # fmt: skip

    def avgpool2d_backward_batch(
        self, inputs, window, outputs, padding, stride, in_deltas, out_deltas
    ):
        NumpyHandler.avgpool2d_backward_batch(
            self, inputs, window, outputs, padding, stride, in_deltas, out_deltas
        )


class MixedHandler(OldPoolingMixin, NumpyHandler):
    pass


@pytest.mark.parametrize('op', ['max', 'avg'])
def test_old_ops_from_a_mixin_get_their_deltas_zeroed_too(op):
    _check_written_over(MixedHandler(np.float64), op)
