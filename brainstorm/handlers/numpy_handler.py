"""The CPU handler: the executable reference of the :class:`Handler` ops."""

from __future__ import annotations

import math
import threading

import numpy as np

from brainstorm.arguments import SEED, Arg, FloatDtype, Optional
from brainstorm.errors import NetworkValidationError, shown_number
from brainstorm.handlers import _numpy_conv as _conv
from brainstorm.handlers import _numpy_lstm as _lstm
from brainstorm.handlers import _numpy_maxpool as _maxpool
from brainstorm.handlers import _numpy_update as _update
from brainstorm.handlers.base_handler import FirstUseRandomState, Handler
from brainstorm.randomness import (
    RandomState,
    global_rnd,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)

__all__ = ['NumpyHandler']


class NumpyHandler(Handler):
    """Runs every op with NumPy on ``numpy.ndarray`` in main memory.

    Each op writes into its output with NumPy's ``out=``. Temporaries the
    size of an operand (for ``dot_add_mm``, ``mult_add_*``, the activation
    derivatives, convolution and pooling) live in scratch buffers kept
    between calls, so the hot path does not allocate. Each thread has
    scratch buffers of its own: networks in separate threads may share
    one handler (``brainstorm.handlers.default_handler``, say) without
    writing into each other's temporaries.

    Args:
        dtype: the floating point type of all arrays.
        seed: seed of the handler's random state ``rnd``. If None, the
            seed is drawn from :data:`brainstorm.randomness.global_rnd`
            when ``rnd`` is first needed (see
            :class:`~brainstorm.handlers.base_handler.FirstUseRandomState`).
    """

    __arguments__ = {
        'dtype': Arg(FloatDtype()),
        'seed': Arg(Optional(SEED), init_only=True),
    }

    array_type = np.ndarray
    context = 'numpy'
    rnd = FirstUseRandomState()
    _per_thread: threading.local  # made on first use, see _scratch

    def __init__(self, dtype=np.float32, seed: int | None = None):
        self.dtype = np.dtype(dtype).type
        self.EMPTY = np.zeros(0, dtype=self.dtype)
        self.rnd = None if seed is None else RandomState(seed)
        # (name, dtype) -> flat buffer per thread, see _scratch
        # index and count arrays of pooling geometries (never written after
        # they are made, so one copy serves every thread)
        self._constants: dict = {}

    def __describe__(self) -> dict:
        """``{'@type': 'NumpyHandler', 'dtype': 'float32'}``."""
        return {'@type': 'NumpyHandler', 'dtype': np.dtype(self.dtype).name}

    def __init_from_description__(self, description: dict) -> None:
        """Recreate from :meth:`__describe__`'s output (fresh ``rnd``)."""
        type(self).__init__(self, self.dtype)

    def __repr__(self) -> str:
        """``NumpyHandler(dtype=np.float32)`` (the class name of subclasses)."""
        return f'{type(self).__name__}(dtype=np.{np.dtype(self.dtype).name})'

    def __getstate__(self):
        """The state for ``copy.deepcopy`` and pickle.

        Scratch buffers and constants are caches: copies start without
        them. The copy gets the random state ``rnd`` as it is now (drawn
        from ``global_rnd`` first, if it has not been yet, as its first use
        would) and keeps it: a network's copy draws the same dropout masks
        as the original, in this process or another one, whatever
        ``global_rnd`` does there (as copies of a
        :class:`~brainstorm.handlers.cuda.handler.PyCudaHandler` do).
        """
        state = dict(self.__dict__)
        state.pop('_per_thread', None)
        state['_constants'] = {}
        state['_rnd'] = self.rnd
        state['_rnd_seedings'] = None
        return state

    @property
    def _scratch(self) -> dict:
        """The calling thread's scratch buffers: (name, dtype) -> flat array.

        They live in a ``threading.local`` made on first use (a copy or
        pickle of the handler leaves it out and starts afresh).
        """
        try:
            return self._per_thread.scratch
        except AttributeError:
            pass
        # setdefault is atomic: two threads starting at once share one local
        per_thread = self.__dict__.setdefault('_per_thread', threading.local())
        scratch = per_thread.scratch = {}
        return scratch

    def _buffer(self, name: str, shape: tuple[int, ...], dtype=None):
        """Return a scratch array of ``shape`` with arbitrary content.

        Each name owns one flat buffer grown to the largest size asked for
        (changing sizes do not pile up memory); one array per name at a time
        and thread.
        """
        dtype = self.dtype if dtype is None else dtype
        size = math.prod(shape)
        scratch = self._scratch
        flat = scratch.get((name, dtype))
        if flat is None or flat.size < size:
            flat = scratch[name, dtype] = np.empty(size, dtype=dtype)
        return flat[:size].reshape(shape)

    def _leading(self, key, n: int, make):
        """Return the first ``n`` entries of the constant ``make(size)``.

        Kept under ``key``, remade only for a larger ``n``: changing batch
        sizes or sequence lengths do not pile up one constant each.
        """
        constant = self._constants.get(key)
        if constant is None or len(constant) < n:
            constant = self._constants[key] = make(n)
        return constant[:n]

    # ------------------------------------------------------------ allocation

    def allocate(self, shape: tuple[int, ...]):
        return np.zeros(shape, dtype=self.dtype)

    def zeros(self, shape: tuple[int, ...]):
        return np.zeros(shape, dtype=self.dtype)

    def ones(self, shape: tuple[int, ...]):
        return np.ones(shape, dtype=self.dtype)

    def create_from_numpy(self, arr):
        return np.array(arr, dtype=self.dtype)

    def get_numpy_copy(self, mem):
        assert isinstance(mem, np.ndarray), type(mem)
        return np.array(mem, dtype=self.dtype)

    def set_from_numpy(self, mem, arr) -> None:
        mem[...] = arr

    # ------------------------------------------------------------- copy/fill

    def copy_to(self, src, dest) -> None:
        np.copyto(dest, src)

    def _nonzero(self, cond):
        """``cond != 0`` in a scratch boolean array."""
        mask = self._buffer('cond', cond.shape, np.bool_)
        np.not_equal(cond, 0, out=mask)
        return mask

    def copy_to_if(self, src, dest, cond) -> None:
        np.copyto(dest, src, where=self._nonzero(cond))

    def fill(self, mem, val: float) -> None:
        mem.fill(val)

    def fill_if(self, mem, val: float, cond) -> None:
        np.copyto(mem, val, where=self._nonzero(cond))

    def fill_gaussian(self, mean: float, std: float, out) -> None:
        out[...] = self.rnd.normal(mean, std, out.shape)

    def generate_probability_mask(self, mask, probability: float) -> None:
        # the draws of rnd.random_sample(mask.shape), but into a scratch
        # array (a Generator on the same bit generator fills ``out=`` with
        # the same doubles): Dropout calls this in every training pass
        bits = getattr(self.rnd, '_bit_generator', None)  # private NumPy
        if bits is None:  # pragma: no cover (NumPy renamed it)
            np.less(self.rnd.random_sample(mask.shape), probability, out=mask)
            return
        draws = self._buffer('random', mask.shape, np.float64)
        np.random.Generator(bits).random(out=draws)
        np.less(draws, probability, out=mask)

    # ---------------------------------------------------------------- checks

    def is_fully_finite(self, a) -> bool:
        finite = self._buffer('cond', a.shape, np.bool_)
        np.isfinite(a, out=finite)
        return bool(finite.all())

    # ----------------------------------------------------------- math A to Z

    def abs_t(self, a, out) -> None:
        np.abs(a, out=out)

    def add_into_if(self, a, out, cond) -> None:
        np.add(out, a, out=out, where=self._nonzero(cond))

    def add_mv(self, m, v, out) -> None:
        np.add(m, v, out=out)

    def add_st(self, s: float, t, out) -> None:
        np.add(t, s, out=out)

    def add_tt(self, a, b, out) -> None:
        np.add(a, b, out=out)

    def binarize_v(self, v, out) -> None:
        n = out.shape[1]
        _check_ids('binarize_v', v, n)
        # the column ids in the dtype where it holds each exactly (float16:
        # up to 2048), else in ints (2049 would round to 2048: two hot columns)
        exact = n <= 2 ** (np.finfo(self.dtype).nmant + 1) + 1
        key, dtype = ('ids', self.dtype) if exact else ('int ids', np.intp)
        ids = self._leading(key, n, lambda size: np.arange(size, dtype=dtype))
        np.equal(v, ids[None, :], out=out)

    def broadcast_t(self, a, axis: int, out) -> None:
        np.copyto(out, a)

    def clip_t(self, a, a_min: float, a_max: float, out) -> None:
        np.clip(a, a_min, a_max, out=out)

    def divide_mv(self, m, v, out) -> None:
        np.divide(m, v, out=out)

    def divide_tt(self, a, b, out) -> None:
        np.divide(a, b, out=out)

    def dot_add_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        _conv.product(self, a, b, out, transa, transb, add=True)

    def dot_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        _conv.product(self, a, b, out, transa, transb, add=False)

    def index_m_by_v(self, m, v, out) -> None:
        _check_ids('index_m_by_v', v, m.shape[1])
        rows = np.arange(m.shape[0])
        out[:, 0] = m[rows, v[:, 0].astype(np.intp)]

    def log_t(self, a, out) -> None:
        np.log(a, out=out)

    def merge_tt(self, a, b, out) -> None:
        n = a.shape[-1]
        out[..., :n] = a
        out[..., n:] = b

    def modulo_tt(self, a, b, out) -> None:
        np.fmod(a, b, out=out)

    def mult_add_mv(self, m, v, out) -> None:
        tmp = self._buffer('tmp', out.shape)
        np.multiply(m, v, out=tmp)
        np.add(out, tmp, out=out)

    def mult_add_st(self, s: float, t, out) -> None:
        tmp = self._buffer('tmp', out.shape)
        np.multiply(t, s, out=tmp)
        np.add(out, tmp, out=out)

    def mult_add_tt(self, a, b, out) -> None:
        tmp = self._buffer('tmp', out.shape)
        np.multiply(a, b, out=tmp)
        np.add(out, tmp, out=out)

    def mult_mv(self, m, v, out) -> None:
        np.multiply(m, v, out=out)

    def mult_st(self, s: float, t, out) -> None:
        np.multiply(t, s, out=out)

    def mult_tt(self, a, b, out) -> None:
        np.multiply(a, b, out=out)

    def sign_t(self, a, out) -> None:
        np.sign(a, out=out)

    def softmax_m(self, m, out) -> None:
        if not m.size:
            return  # no rows or no columns: nothing to compute (no row max)
        row = self._buffer('row', (m.shape[0], 1))
        np.max(m, axis=1, keepdims=True, out=row)
        np.subtract(m, row, out=out)
        np.exp(out, out=out)
        # float16 sums in float32 (from 65504 columns the sum overflowed)
        total = self._buffer('softmax_sum', row.shape, _conv.summing_dtype(self))
        np.sum(out, axis=1, keepdims=True, out=total, dtype=total.dtype)
        np.divide(out, total, out=out)

    def split_add_tt(self, x, out_a, out_b) -> None:
        n = out_a.shape[-1]
        np.add(out_a, x[..., :n], out=out_a)
        np.add(out_b, x[..., n:], out=out_b)

    def sqrt_t(self, a, out) -> None:
        np.sqrt(a, out=out)

    def subtract_mv(self, m, v, out) -> None:
        np.subtract(m, v, out=out)

    def subtract_tt(self, a, b, out) -> None:
        np.subtract(a, b, out=out)

    def sum_t(self, a, axis: int | None, out) -> None:
        if axis is None:
            out[...] = np.sum(a)
        elif axis == 0 and a.ndim == 2 and a.shape[0] >= 64:
            # column sums of a tall matrix (bias gradients over a batch or
            # all time steps) as a product with ones: BLAS is about 5x
            # faster than NumPy's reduction over the first axis
            ones = self._leading('ones', a.shape[0], self.ones)
            np.matmul(ones, a, out=out.reshape(a.shape[1:]))
        else:
            _conv.axis_sum(self, a, axis, out)

    # ----------------------------------------------------------- activations

    def el(self, x, y) -> None:
        negative = self._buffer('cond', x.shape, np.bool_)
        np.less_equal(x, 0, out=negative)
        np.copyto(y, x)
        np.expm1(x, out=y, where=negative)

    def el_deriv(self, x, y, dy, dx) -> None:
        tmp = self._buffer('tmp', y.shape)
        np.add(y, 1, out=tmp)
        np.minimum(tmp, 1, out=tmp)
        np.multiply(dy, tmp, out=dx)

    def rel(self, x, y) -> None:
        np.maximum(x, 0, out=y)

    def rel_deriv(self, x, y, dy, dx) -> None:
        tmp = self._buffer('tmp', y.shape)
        np.greater(y, 0, out=tmp)
        np.multiply(dy, tmp, out=dx)

    def sigmoid(self, x, y) -> None:
        # 1 / (1 + exp(-x)), which keeps the relative precision of small
        # results (SigmoidCE takes their logarithm); the faster
        # (1 + tanh(x / 2)) / 2 loses it below about 1e-4 in float32
        with np.errstate(over='ignore'):
            # not np.negative: NumPy 2.4.6 writes it wrongly into a strided
            # output from a column of width 1 in rows of 16 bytes (float32)
            # or 64 bytes (float64), such as a gate column of a layer of size 1
            np.multiply(x, -1, out=y)
            np.exp(y, out=y)
        np.add(y, 1, out=y)
        np.divide(1, y, out=y)  # same result; faster than np.reciprocal

    def sigmoid_deriv(self, x, y, dy, dx) -> None:
        tmp = self._buffer('tmp', y.shape)
        np.subtract(1, y, out=tmp)
        np.multiply(tmp, y, out=tmp)
        np.multiply(dy, tmp, out=dx)

    def tanh(self, x, y) -> None:
        np.tanh(x, out=y)

    def tanh_deriv(self, x, y, dy, dx) -> None:
        tmp = self._buffer('tmp', y.shape)
        np.multiply(y, y, out=tmp)
        np.subtract(1, tmp, out=tmp)
        np.multiply(dy, tmp, out=dx)

    # ------------------------------------------------------------- embedding

    def gather_m_by_v(self, m, v, out) -> None:
        _check_ids('gather_m_by_v', v, m.shape[0])
        np.take(m, v[:, 0].astype(np.intp), axis=0, out=out, mode='clip')

    def scatter_add_m_by_v(self, m, v, out) -> None:
        _check_ids('scatter_add_m_by_v', v, out.shape[0])
        np.add.at(out, v[:, 0].astype(np.intp), m)

    # ------------------------------------------------------ more activations

    def gelu(self, x, y) -> None:
        u = self._buffer('tmp', x.shape)
        # tanh's argument from x clipped to +-_GELU_FLAT (the same tanh, +-1;
        # x**2 of a larger x would overflow)
        xc = np.clip(x, -_GELU_FLAT, _GELU_FLAT, out=self._buffer('tmp4', x.shape))
        np.multiply(xc, xc, out=u)
        np.multiply(u, _GELU_CUBIC, out=u)
        np.add(u, 1.0, out=u)
        np.multiply(u, xc, out=u)
        np.multiply(u, _SQRT_2_OVER_PI, out=u)
        np.tanh(u, out=u)
        np.add(u, 1.0, out=u)
        np.multiply(u, 0.5, out=u)
        np.multiply(x, u, out=y)

    def gelu_deriv(self, x, y, dy, dx) -> None:
        # 0.5 * (1 + t) + 0.5 * k * x * (1 + 3c x**2) * (1 - t**2), with
        # t = tanh(k * x * (1 + c x**2)), k = sqrt(2 / pi); computed at x
        # clipped to +-_GELU_FLAT, where t is +-1 exactly and the derivative
        # its limit 0 or 1 (x**2 of a larger x overflows: inf * 0 = NaN)
        t = self._buffer('tmp', x.shape)
        s = self._buffer('tmp2', x.shape)
        w = self._buffer('tmp3', x.shape)
        x = np.clip(x, -_GELU_FLAT, _GELU_FLAT, out=self._buffer('tmp4', x.shape))
        np.multiply(x, x, out=s)
        np.multiply(s, _GELU_CUBIC, out=t)
        np.add(t, 1.0, out=t)
        np.multiply(t, x, out=t)
        np.multiply(t, _SQRT_2_OVER_PI, out=t)
        np.tanh(t, out=t)
        np.multiply(s, 3 * _GELU_CUBIC, out=s)
        np.add(s, 1.0, out=s)
        np.multiply(s, x, out=s)
        np.multiply(s, 0.5 * _SQRT_2_OVER_PI, out=s)
        np.multiply(t, t, out=w)
        np.subtract(1.0, w, out=w)
        np.multiply(s, w, out=s)
        np.add(t, 1.0, out=t)
        np.multiply(t, 0.5, out=t)
        np.add(s, t, out=s)
        np.multiply(dy, s, out=dx)

    def leaky_rel(self, x, y) -> None:
        negative = self._buffer('cond', x.shape, np.bool_)
        np.less_equal(x, 0, out=negative)
        np.copyto(y, x)
        np.multiply(x, LEAKY_SLOPE, out=y, where=negative)

    def leaky_rel_deriv(self, x, y, dy, dx) -> None:
        negative = self._buffer('cond', y.shape, np.bool_)
        np.less_equal(y, 0, out=negative)
        np.copyto(dx, dy)
        np.multiply(dy, LEAKY_SLOPE, out=dx, where=negative)

    def softplus(self, x, y) -> None:
        # max(x, 0) + ln(1 + exp(-|x|)): no overflow for large |x|
        tmp = self._buffer('tmp', x.shape)
        np.abs(x, out=tmp)
        np.multiply(tmp, -1, out=tmp)  # not np.negative: see sigmoid
        np.exp(tmp, out=tmp)
        np.log1p(tmp, out=tmp)
        np.maximum(x, 0, out=y)
        np.add(y, tmp, out=y)

    def softplus_deriv(self, x, y, dy, dx) -> None:
        tmp = self._buffer('tmp', y.shape)
        np.multiply(y, -1, out=tmp)  # not np.negative: see sigmoid
        np.expm1(tmp, out=tmp)
        np.multiply(tmp, -1, out=tmp)
        np.multiply(dy, tmp, out=dx)

    # -------------------------------------------------------------- conv/pool

    # Each op delegates to its namesake in _numpy_conv, which holds the speed
    # strategies and their notes; the base Handler documents what it computes.

    def keeps_conv_columns(self, out_cells: int) -> bool:
        return out_cells >= _conv.MIN_CELLS_TO_KEEP_COLUMNS

    def conv2d_forward_batch(
        self,
        inputs,
        weights,
        bias,
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        *,
        columns=None,
        activation: str = 'linear',
    ) -> None:
        if not np.shape(inputs)[0]:
            return  # no images (an empty batch): nothing to compute
        activate = self._activation_after(activation)
        _conv.conv2d_forward_batch(
            self, inputs, weights, bias, outputs, padding, stride, columns=columns
        )
        if activate is not None:
            activate(outputs)

    def conv2d_backward_batch(
        self,
        inputs,
        weights,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        in_deltas,
        out_deltas,
        weight_deltas,
        bias_deltas,
        *,
        columns=None,
        skip_in_deltas: bool = False,
        overwrite_in_deltas: bool = False,
    ) -> None:
        if not np.shape(inputs)[0]:  # no images: gradients of nothing
            self.fill(weight_deltas, 0.0)
            self.fill(bias_deltas, 0.0)
            return
        if overwrite_in_deltas and not skip_in_deltas:
            self.fill(in_deltas, 0.0)
        _conv.conv2d_backward_batch(
            self,
            inputs,
            weights,
            padding,
            stride,
            in_deltas,
            out_deltas,
            weight_deltas,
            bias_deltas,
            columns=columns,
            skip_in_deltas=skip_in_deltas,
        )

    def maxpool2d_forward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        argmax,
    ) -> None:
        if not np.shape(inputs)[0]:
            return  # no images (an empty batch): nothing to compute
        _maxpool.maxpool2d_forward_batch(
            self, inputs, window, outputs, padding, stride, argmax
        )

    def maxpool2d_backward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        argmax,
        in_deltas,
        out_deltas,
        *,
        overwrite_in_deltas: bool = False,
    ) -> None:
        if not np.shape(inputs)[0]:
            return
        if overwrite_in_deltas:
            self.fill(in_deltas, 0.0)
        _maxpool.maxpool2d_backward_batch(
            self,
            inputs,
            window,
            outputs,
            padding,
            stride,
            argmax,
            in_deltas,
            out_deltas,
        )

    def avgpool2d_forward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
    ) -> None:
        if not np.shape(inputs)[0]:
            return  # no images (an empty batch): nothing to compute
        _conv.avgpool2d_forward_batch(self, inputs, window, outputs, padding, stride)

    def avgpool2d_backward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        in_deltas,
        out_deltas,
        *,
        overwrite_in_deltas: bool = False,
    ) -> None:
        if not np.shape(inputs)[0]:
            return
        if overwrite_in_deltas:
            self.fill(in_deltas, 0.0)
        _conv.avgpool2d_backward_batch(
            self, inputs, window, outputs, padding, stride, in_deltas, out_deltas
        )

    # -------------------------------------------------------------- recurrent

    def lstm_forward_step(  # noqa: D102 - documented in the table
        self, gates, c_prev, pi, pf, po, activation: str, gate_outputs, c, c_out, y
    ) -> None:
        _lstm.forward_step(
            self, gates, c_prev, pi, pf, po, activation, gate_outputs, c, c_out, y
        )

    def lstm_backward_step(  # noqa: D102 - documented in the table
        self, dy, factors, c_factor, d_gates_next, dc_next, f_next, pi, pf, po,
        d_gates, dc,
    ) -> None:  # fmt: skip
        _lstm.backward_step(
            self, dy, factors, c_factor, d_gates_next, dc_next, f_next, pi, pf, po,
            d_gates, dc,
        )  # fmt: skip

    # ---------------------------------------------------------- sequences

    def reverse_time_t(self, a, mask, out) -> None:
        # step by step and sequence by sequence: NumPy copies the whole
        # source first where the operands' memory bounds overlap (they lie
        # side by side in the rows of one network buffer)
        if mask is None:
            T = a.shape[0]
            for t in range(T):
                source = a[T - 1 - t]
                if T - 1 - t == t:  # the same row: through scratch memory
                    source = self._buffer('reverse', source.shape)
                    np.copyto(source, a[t])
                np.copyto(out[t], source)
            return
        lengths = _sequence_lengths('reverse_time_t', mask)[0].tolist()
        for b, n in enumerate(lengths):
            if n:
                np.copyto(out[:n, b], a[n - 1 :: -1, b])
            np.copyto(out[n:, b], a[n:, b])

    # ------------------------------------------------------------- attention

    def batch_dot_tt(
        self, a, b, out, transa: bool = False, transb: bool = False
    ) -> None:
        np.matmul(_matrices(a, transa), _matrices(b, transb), out=_matrices(out, False))

    def batch_dot_add_tt(
        self, a, b, out, transa: bool = False, transb: bool = False
    ) -> None:
        target = _matrices(out, False)
        product = self._buffer('batch_dot', target.shape)
        np.matmul(_matrices(a, transa), _matrices(b, transb), out=product)
        np.add(target, product, out=target)

    def _attention_keep(self, shape: tuple, mask, causal: bool):
        """Boolean scratch array: which scores take part in the softmax."""
        keep = self._buffer('attention_keep', shape, np.bool_)
        keep.fill(True)
        rows, cols = shape[0], shape[-1]
        middle = (1,) * (len(shape) - 3)
        if mask is not None:
            real = mask[:, :, 0] != 0  # (L, B)
            batch = shape[1]
            keep &= real[:rows].reshape((rows, batch, *middle, 1))
            keep &= real[:cols].T.reshape((1, batch, *middle, cols))
        if causal:
            lower = np.arange(cols) <= np.arange(rows)[:, None]
            keep &= lower.reshape((rows,) + (1,) * (len(shape) - 2) + (cols,))
        return keep

    def masked_softmax_t(self, x, mask, out, causal: bool = False) -> None:
        if not x.size:
            return  # no queries or no keys (S = 0): nothing to compute
        keep = self._attention_keep(x.shape, mask, causal)
        rows = x.shape[:-1] + (1,)
        z = self._buffer('masked_softmax', x.shape)
        z.fill(-np.inf)
        np.copyto(z, x, where=keep)
        top = self._buffer('masked_softmax_max', rows)
        np.max(z, axis=-1, keepdims=True, out=top)
        np.copyto(top, 0.0, where=np.isneginf(top))  # rows without keys
        np.subtract(z, top, out=z)
        np.exp(z, out=z)  # exp(-inf) = 0 for the masked scores
        total = self._buffer('masked_softmax_sum', rows, _conv.summing_dtype(self))
        np.sum(z, axis=-1, keepdims=True, out=total, dtype=total.dtype)
        np.copyto(total, 1.0, where=total == 0)
        np.divide(z, total, out=out)

    def softmax_deriv_t(self, y, dy, dx) -> None:
        product = self._buffer('softmax_deriv', y.shape)
        np.multiply(dy, y, out=product)
        total = self._buffer('softmax_deriv_sum', y.shape[:-1] + (1,))
        np.sum(product, axis=-1, keepdims=True, out=total)
        np.subtract(dy, total, out=dx)
        np.multiply(dx, y, out=dx)

    # --------------------------------------------------------------- updates
    # the base class's sequences of ops, one cache-sized chunk at a time
    # (bit-identical results): see _numpy_update.py

    def sgd_update(self, parameters, gradients, learning_rate: float) -> None:
        _update.sgd_update(self, parameters, gradients, learning_rate)

    def momentum_update(
        self, parameters, gradients, velocity, learning_rate: float, momentum: float
    ) -> None:
        _update.momentum_update(
            self, parameters, gradients, velocity, learning_rate, momentum
        )

    def nesterov_lookahead(self, parameters, velocity, momentum: float) -> None:
        _update.nesterov_lookahead(self, parameters, velocity, momentum)

    def nesterov_update(
        self, parameters, gradients, velocity, learning_rate: float
    ) -> None:
        _update.nesterov_update(self, parameters, gradients, velocity, learning_rate)

    def rmsprop_update(
        self, parameters, gradients, mean_square, scratch, learning_rate: float,
        decay: float, epsilon: float,
    ) -> None:  # fmt: skip
        _update.rmsprop_update(
            self, parameters, gradients, mean_square, scratch, learning_rate, decay,
            epsilon,
        )  # fmt: skip

    def adam_update(
        self, parameters, gradients, m, v, mask, scratch, learning_rate: float,
        beta1: float, beta2: float, epsilon: float, step: int, weight_decay: float,
    ) -> None:  # fmt: skip
        _update.adam_update(
            self, parameters, gradients, m, v, mask, scratch, learning_rate, beta1,
            beta2, epsilon, step, weight_decay,
        )  # fmt: skip


def _matrices(x, trans: bool):
    """The matrices of a ``batch_dot`` operand: ``(*batch, rows, cols)`` view."""
    matrices = np.moveaxis(x, 0, -2)
    return np.swapaxes(matrices, -1, -2) if trans else matrices


def _sequence_lengths(op: str, mask):
    """The length of each sequence of a ``(T, B, 1)`` mask, as ``(1, B)`` ints.

    Raises:
        NetworkValidationError: unless the mask is 1 up to each sequence's
            length and 0 after it.
    """
    m = mask[:, :, 0]
    ones = m == 1
    valid = ones | (m == 0)
    if m.shape[0] > 1:
        valid[1:] &= ~(ones[1:] & ~ones[:-1])  # no 1 after a 0
    if not valid.all():
        t, b = (int(i[0]) for i in np.nonzero(~valid))
        where = 'after a 0' if m[t, b] == 1 else 'which is neither 0 nor 1'
        raise NetworkValidationError(
            f"{op}: the mask must be 1 up to each sequence's length and 0 "
            f'after it. Received {shown_number(m[t, b])} at time step {t} of '
            f'sequence {b}, '
            f'{where}.'
        )
    return ones.sum(axis=0, keepdims=True)


#: The slope of ``leaky_rel`` for negative inputs.
LEAKY_SLOPE = 0.01
_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_CUBIC = 0.044715
#: Beyond this |x|, GELU's derivative is its limit (0 or 1) in every float
#: dtype: tanh of the approximation's argument (43.6 here) is +-1 exactly,
#: and the cubic terms stay finite in float16 (from |x| ~ 80 they overflow)
_GELU_FLAT = 10.0


def _check_ids(op: str, v, n: int) -> None:
    """Raise NetworkValidationError unless ``v`` holds whole ids in ``[0, n)``.

    Other ids would raise a bare IndexError (too large) or silently wrap
    around (negative).
    """
    if not v.size:
        return
    # NaN would be cast to a huge negative index, 0.7 silently to 0 (while
    # binarize_v compares exactly and disagrees)
    fraction = v != np.floor(v)
    if fraction.any():
        bad = v[fraction].ravel()
        raise NetworkValidationError(
            f'{op}: class ids must be whole numbers in [0, {n}). Received '
            f'{int(fraction.sum())} other value(s), e.g. {shown_number(bad[0])} at '
            f'position {int(np.flatnonzero(fraction.ravel())[0])}.'
        )
    # as Python numbers: n in the dtype may round down (float16: 2049 -> 2048)
    if float(v.min()) < 0 or float(v.max()) >= n:
        raise NetworkValidationError(
            f'{op}: class ids must lie in [0, {n}). Received ids from '
            f'{shown_number(v.min())} to {shown_number(v.max())}.'
        )
