"""The CPU handler: the executable reference of the :class:`Handler` ops."""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from brainstorm.arguments import SEED, Arg, FloatDtype, Optional
from brainstorm.handlers.base_handler import FirstUseRandomState, Handler
from brainstorm.randomness import RandomState

__all__ = ['NumpyHandler']


class NumpyHandler(Handler):
    """Runs every op with NumPy on ``numpy.ndarray`` in main memory.

    Each op writes into its output with NumPy's ``out=``. Temporaries the
    size of an operand (for ``dot_add_mm``, ``mult_add_*``, the activation
    derivatives, convolution and pooling) live in scratch buffers kept
    between calls, so the hot path does not allocate.

    Args:
        dtype: the floating point type of all arrays.
        seed: seed of the handler's random state ``rnd``. If None, the
            seed is drawn from :data:`brainstorm.randomness.global_rnd`
            when ``rnd`` is first needed (see
            :class:`~brainstorm.handlers.base_handler.FirstUseRandomState`).
    """

    __arguments__ = {
        'dtype': Arg(FloatDtype(), default=np.float32),
        'seed': Arg(Optional(SEED), default=None, init_only=True),
    }

    array_type = np.ndarray
    context = 'numpy'
    rnd = FirstUseRandomState()

    def __init__(self, dtype=np.float32, seed: int | None = None):
        self.dtype = np.dtype(dtype).type
        self.EMPTY = np.zeros(0, dtype=self.dtype)
        self.rnd = None if seed is None else RandomState(seed)
        self._scratch: dict = {}  # name -> flat buffer, grown to the largest use
        self._constants: dict = {}  # index and count arrays of pooling geometries
        super().__init__()

    def __describe__(self) -> dict:
        """``{'@type': 'NumpyHandler', 'dtype': 'float32'}``."""
        return {'@type': 'NumpyHandler', 'dtype': np.dtype(self.dtype).name}

    def __init_from_description__(self, description: dict) -> None:
        """Recreate from :meth:`__describe__`'s output (fresh ``rnd``)."""
        type(self).__init__(self, self.dtype)

    def __getstate__(self):
        state = super().__getstate__()
        state['_scratch'], state['_constants'] = {}, {}
        return state

    def _buffer(self, name: str, shape: tuple[int, ...], dtype=None):
        """A scratch array of ``shape`` with arbitrary content.

        Each name owns one flat buffer grown to the largest size asked for,
        so changing batch sizes or sequence lengths do not pile up memory.
        An op must not use one name for two arrays at the same time.
        """
        dtype = self.dtype if dtype is None else dtype
        size = math.prod(shape)
        flat = self._scratch.get((name, dtype))
        if flat is None or flat.size < size:
            flat = self._scratch[name, dtype] = np.empty(size, dtype=dtype)
        return flat[:size].reshape(shape)

    def _leading(self, key, n: int, make):
        """The first ``n`` entries of the constant array ``make(size)`` kept
        under ``key``, remade only for a larger ``n``: changing batch sizes
        or sequence lengths do not pile up one constant each."""
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
        _check_ids('binarize_v', v, out.shape[1])
        ids = self._constants.get(('ids', out.shape[1]))
        if ids is None:
            ids = np.arange(out.shape[1], dtype=self.dtype)[None, :]
            self._constants['ids', out.shape[1]] = ids
        np.equal(v, ids, out=out)

    def broadcast_t(self, a, axis: int, out) -> None:
        np.copyto(out, a)

    def clip_t(self, a, a_min: float, a_max: float, out) -> None:
        np.clip(a, a_min, a_max, out=out)

    def divide_mv(self, m, v, out) -> None:
        np.divide(m, v, out=out)

    def divide_tt(self, a, b, out) -> None:
        np.divide(a, b, out=out)

    def _product(self, a, b, out, transa, transb, add):
        """``out (+)= op(a) @ op(b)``, as ``(op(b).T @ op(a).T).T`` when that
        is faster.

        OpenBLAS is slow for products with few rows and many columns (a
        batch of 32-100 times a weight matrix), the more so with the second
        operand transposed: the transposed product is 1.2-1.7x faster for
        the Lstm and FullyConnected shapes even with the extra transposing
        pass (benchmarks/bench_ops.py).
        """
        left = a.T if transa else a
        right = b.T if transb else b
        rows, cols = out.shape
        if rows < cols and (transb or rows <= 64):
            product = self._buffer('dot', (cols, rows))
            np.matmul(right.T, left.T, out=product)
            product = product.T
        elif add:
            product = self._buffer('dot', out.shape)
            np.matmul(left, right, out=product)
        else:
            np.matmul(left, right, out=out)
            return
        if add:
            np.add(out, product, out=out)
        else:
            np.copyto(out, product)

    def dot_add_mm(self, a, b, out, transa: bool = False,
                   transb: bool = False) -> None:
        self._product(a, b, out, transa, transb, add=True)

    def dot_mm(self, a, b, out, transa: bool = False,
               transb: bool = False) -> None:
        self._product(a, b, out, transa, transb, add=False)

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
        row = self._buffer('row', (m.shape[0], 1))
        np.max(m, axis=1, keepdims=True, out=row)
        np.subtract(m, row, out=out)
        np.exp(out, out=out)
        np.sum(out, axis=1, keepdims=True, out=row)
        np.divide(out, row, out=out)

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
            np.sum(a, axis=axis, out=out, keepdims=out.ndim == a.ndim)

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
            np.negative(x, out=y)
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

    # -------------------------------------------------------------- conv/pool

    def _padded(self, images, rows: int, cols: int):
        """``images`` with ``rows`` zero rows and ``cols`` zero columns on
        both sides, in a scratch array (``images`` itself if none)."""
        if not (rows or cols):
            return images
        n, h, w, c = images.shape
        xpad = self._buffer('pad', (n, h + 2 * rows, w + 2 * cols, c))
        xpad[:, :rows] = 0
        xpad[:, rows + h:] = 0
        xpad[:, rows:rows + h, :cols] = 0
        xpad[:, rows:rows + h, cols + w:] = 0
        xpad[:, rows:rows + h, cols:cols + w] = images
        return xpad

    def _fields(self, inputs, kernel, padding, stride, out_shape):
        """A read-only ``(N, OH, OW, kh, kw, C)`` view of every receptive
        field (of a zero-padded scratch copy of ``inputs`` if padding).

        ``padding`` is ``(ph, pw)``: zero rows and columns on both sides.
        Field ``(n, i, j)`` is ``xpad[n, i*sy:i*sy+kh, j*sx:j*sx+kw, :]``;
        flattened in ``(u, v, c)`` order it matches ``weights.reshape(F,
        K)``.
        """
        n, _, _, c = inputs.shape
        kh, kw = kernel
        sy, sx = stride
        oh, ow = out_shape
        xpad = self._padded(inputs, *padding)
        s0, s1, s2, s3 = xpad.strides
        return as_strided(xpad, shape=(n, oh, ow, kh, kw, c),
                          strides=(s0, s1 * sy, s2 * sx, s1, s2, s3),
                          writeable=False)

    def _field_chunks(self, fields):
        """``(start, stop, rows)``: images whose fields take about
        _FIELD_CHUNK_BYTES, so that a chunk gathered into a matrix is still
        in the cache when a GEMM reads it."""
        n = fields.shape[0]
        chunk = _chunk_size(n, math.prod(fields.shape[1:]) * fields.itemsize,
                            _FIELD_CHUNK_BYTES)
        cells = fields.shape[1] * fields.shape[2]
        for start in range(0, n, chunk):
            stop = min(n, start + chunk)
            yield start, stop, slice(start * cells, stop * cells)

    def _gather(self, fields):
        """Copy the fields of some images into the scratch (M, K) matrix."""
        k = math.prod(fields.shape[3:])
        col = self._buffer('col', (fields.shape[0] * fields.shape[1] *
                                   fields.shape[2], k))
        np.copyto(_view_as(col, fields.shape), fields)
        return col

    def _columns(self, columns, weights, out_shape):
        """``columns`` as ``(N, OH*OW, K)`` image blocks, or None if it
        cannot hold the receptive fields (then they are recomputed).

        The GEMMs then run per image (a batched ``matmul``): each image's
        block is contiguous in a layer internal, the whole batch is not.
        """
        n, oh, ow = out_shape
        k = math.prod(weights.shape[1:])
        if columns is None or columns.shape != (n, oh, ow, k) or \
                columns.dtype != self.dtype or \
                (n and not columns[0].flags.c_contiguous):
            return None
        return _view_as(columns, (n, oh * ow, k))

    def conv2d_forward_batch(self, inputs, weights, bias, outputs,
                             padding: int, stride: tuple[int, int], *,
                             columns=None) -> None:
        n, oh, ow, f = outputs.shape
        kept = self._columns(columns, weights, (n, oh, ow))
        fields = self._fields(inputs, weights.shape[1:3], (padding, padding),
                              stride, (oh, ow))
        wt = weights.reshape(f, -1).T
        if kept is not None:
            target = _view_as(columns, fields.shape)
        # gather and multiply chunk by chunk, while the fields are cached;
        # adding the bias writes each chunk into the (maybe strided) outputs
        for start, stop, _ in self._field_chunks(fields):
            result = self._buffer('conv_out', (stop - start, oh * ow, f))
            if kept is None:
                col = self._gather(fields[start:stop])
                np.matmul(col, wt, out=result.reshape(-1, f))
            else:
                np.copyto(target[start:stop], fields[start:stop])
                np.matmul(kept[start:stop], wt, out=result)
            np.add(result.reshape(outputs[start:stop].shape), bias,
                   out=outputs[start:stop])

    def conv2d_backward_batch(self, inputs, weights, padding: int,
                              stride: tuple[int, int], in_deltas, out_deltas,
                              weight_deltas, bias_deltas, *, columns=None,
                              skip_in_deltas: bool = False) -> None:
        n, oh, ow, f = out_deltas.shape
        kh, kw = weights.shape[1:3]
        dy = _rows_view(out_deltas)
        if dy is None:
            dy = self._buffer('conv_out', (n * oh * ow, f))
            np.copyto(dy.reshape(out_deltas.shape), out_deltas)
        self.sum_t(dy, 0, bias_deltas)  # a GEMV: NumPy's sum is 5x slower

        kept = self._columns(columns, weights, (n, oh, ow))
        c = weights.shape[3]
        by_correlation = not skip_in_deltas and c >= 8 and \
            tuple(stride) == (1, 1) and padding < min(kh, kw)
        if by_correlation and kept is None:
            # both gradients from the same gathered fields
            self._conv_deltas_by_correlation(dy, weights, padding, in_deltas,
                                             (oh, ow), (inputs, weight_deltas))
            return
        dw = self._buffer('dw', (f, kh * kw * c))
        if kept is not None:
            # per image dy_n.T @ col_n, then the sum over the images
            products = self._buffer('conv_dw_images', (n,) + dw.shape)
            np.matmul(dy.reshape(n, oh * ow, f).transpose(0, 2, 1), kept,
                      out=products)
            np.sum(products, axis=0, out=dw)
        else:
            # chunk by chunk: dw = sum over the chunks of dy.T @ col
            fields = self._fields(inputs, (kh, kw), (padding, padding),
                                  stride, (oh, ow))
            part = self._buffer('dw_part', dw.shape)
            for start, stop, rows in self._field_chunks(fields):
                col = self._gather(fields[start:stop])
                np.matmul(dy[rows].T, col, out=part if start else dw)
                if start:
                    np.add(dw, part, out=dw)
        np.copyto(weight_deltas, dw.reshape(weight_deltas.shape))

        if skip_in_deltas:
            return
        if by_correlation:
            self._conv_deltas_by_correlation(dy, weights, padding, in_deltas,
                                             (oh, ow))
        elif c < 8:
            self._conv_input_deltas_few_channels(dy, weights, padding, stride,
                                                 in_deltas, (oh, ow))
        else:
            self._conv_input_deltas_per_offset(dy, weights, padding, stride,
                                               in_deltas, (oh, ow))

    def _conv_input_deltas_per_offset(self, dy, weights, padding, stride,
                                      in_deltas, out_hw):
        """Input deltas, the general way: the cells seen at kernel offset
        ``(u, v)`` get ``dy @ weights[:, u, v, :]`` (one GEMM per offset,
        added in place)."""
        n = in_deltas.shape[0]
        _, kh, kw, c = weights.shape
        oh, ow = out_hw
        part = self._buffer('conv_part', (n * oh * ow, c))
        dx = self._buffer('dx', in_deltas.shape)
        dx.fill(0)
        for u, v, out_part, in_part in _window_offsets(
                (kh, kw), padding, stride, out_hw, in_deltas.shape[1:3]):
            np.matmul(dy, weights[:, u, v, :], out=part)
            target = dx[in_part]
            np.add(target, part.reshape(n, oh, ow, c)[out_part], out=target)
        _add_into(in_deltas, dx)

    def _conv_deltas_by_correlation(self, dy, weights, padding, in_deltas,
                                    out_hw, gradient=None):
        """Input deltas of a stride-1 convolution as a convolution.

        ``dx[n, r, q] = sum_{u, v} dypad[n, r + u, q + v] @ flip[u, v]``,
        ``dypad`` being ``dy`` with ``kh-1-padding`` (``kw-1-padding``) zero
        rows (columns) on both sides and ``flip[u, v] = weights[:, kh-1-u,
        kw-1-v, :]``: the receptive fields of ``dypad`` are gathered and
        multiplied in chunks of images whose field matrix stays in the
        cache, instead of kh*kw GEMMs each followed by a strided add over
        all input deltas. With ``gradient = (inputs, weight_deltas)`` the
        same fields also give the weight gradient, ``weight_deltas[f, u, v,
        c] = sum_{n, r, q} x[n, r, q, c] * field[n, r, q][kh-1-u, kw-1-v,
        f]`` (overwritten), so the inputs' fields need no gathering.
        """
        n, h, w, c = in_deltas.shape
        f, kh, kw, _ = weights.shape
        oh, ow = out_hw
        k = kh * kw * f
        flip = self._buffer('conv_flip', (kh, kw, f, c))
        np.copyto(flip, weights[:, ::-1, ::-1, :].transpose(1, 2, 0, 3))
        fields = self._fields(dy.reshape(n, oh, ow, f), (kh, kw),
                              (kh - 1 - padding, kw - 1 - padding), (1, 1),
                              (h, w))
        result = self._buffer('dx', (n * h * w, c))
        if gradient is not None:
            dw = self._buffer('dw', (c, k))
            part = self._buffer('dw_part', (c, k))
        for start, stop, rows in self._field_chunks(fields):
            col = self._gather(fields[start:stop])
            np.matmul(col, flip.reshape(k, c), out=result[rows])
            if gradient is not None:
                x = self._buffer('conv_x', (stop - start, h, w, c))
                np.copyto(x, gradient[0][start:stop])
                np.matmul(x.reshape(-1, c).T, col, out=part if start else dw)
                if start:
                    np.add(dw, part, out=dw)
        _add_into(in_deltas, result)
        if gradient is not None:
            np.copyto(gradient[1], dw.reshape(c, kh, kw, f)[
                :, ::-1, ::-1, :].transpose(3, 1, 2, 0))

    def _conv_input_deltas_few_channels(self, dy, weights, padding, stride,
                                        in_deltas, out_hw):
        """Input deltas for images with few channels (an RGB input).

        Per-offset GEMMs would have only C output columns; instead one GEMM
        gives every (offset, channel) row ``weights[:, u, v, c] @ dy.T``
        over all output cells, and those rows are added channel-major
        (runs of OW cells instead of C), then transposed once.
        """
        n, h, w, c = in_deltas.shape
        f, kh, kw, _ = weights.shape
        oh, ow = out_hw
        rows = self._buffer('col', (kh * kw * c, n * oh * ow))
        np.matmul(weights.reshape(f, -1).T, dy.T, out=rows)
        parts = rows.reshape(kh, kw, c, n, oh, ow)
        dx = self._buffer('dx_channels', (c, n, h, w))
        dx.fill(0)
        every = (slice(None),)
        for u, v, out_part, in_part in _window_offsets(
                (kh, kw), padding, stride, out_hw, (h, w)):
            target = dx[every + in_part]
            np.add(target, parts[(u, v) + every + out_part], out=target)
        image = self._buffer('dx', in_deltas.shape)
        np.copyto(image, dx.transpose(1, 2, 3, 0))
        _add_into(in_deltas, image)

    # Pooling and the input deltas accumulate in contiguous scratch buffers
    # and touch the caller's arrays once: NumPy sometimes copies a whole
    # strided 4-D view of a big network buffer before updating it in place.

    def maxpool2d_forward_batch(self, inputs, window: tuple[int, int],
                                outputs, padding: int,
                                stride: tuple[int, int], argmax) -> None:
        h, w, c = inputs.shape[1:]
        offsets = list(_window_offsets(window, padding, stride,
                                       outputs.shape[1:3], (h, w)))
        # The first maximum in row-major window order is the one with the
        # smallest offset (u*W + v), i.e. the largest rank R - (u*W + v)
        # among the cells equal to the maximum (rank 0: none). Ranks are
        # small unsigned ints: each offset costs one comparison of floats
        # and two cheap byte-sized passes.
        top = (window[0] - 1) * w + window[1]
        ranks = np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF \
            else np.uint32
        # argmax = base + (R - rank) * C = (base + R*C) - rank * C
        shifted = self._pool_base(padding, stride, outputs.shape[1:], w,
                                  float(top * c))
        # chunks of images that stay in the cache through all the passes,
        # with chunk-sized scratch arrays
        n = inputs.shape[0]
        chunk = _chunk_size(n, h * w * c * inputs.itemsize, _POOL_CHUNK_BYTES)
        shape = (chunk,) + outputs.shape[1:]
        scratch = (self._buffer('pool', shape),
                   self._buffer('pool_score', shape, ranks),
                   self._buffer('pool_match', shape, ranks),
                   self._buffer('pool_index_f', shape))
        for a in range(0, n, chunk):
            b = min(n, a + chunk)
            self._maxpool_images(
                inputs[a:b], outputs[a:b], argmax[a:b], offsets, padding,
                [array[:b - a] for array in scratch], shifted, ranks(top))

    def _maxpool_images(self, inputs, outputs, argmax, offsets, padding,
                        scratch, shifted, top):
        w, c = inputs.shape[2:]
        best, score, match, index = scratch
        # without padding the first offset covers every output cell and
        # initialises the running maximum and score (one pass less each)
        full = not padding
        if full:
            np.copyto(best, inputs[offsets[0][3]])
        else:
            best.fill(-np.inf)
        for _, _, out_part, in_part in offsets[full:]:
            part = best[out_part]
            np.maximum(part, inputs[in_part], out=part)
        if not full:
            score.fill(0)
        for k, (u, v, out_part, in_part) in enumerate(offsets):
            first = full and k == 0
            hit = score if first else match[out_part]
            np.equal(inputs[in_part], best[out_part], out=hit)
            np.multiply(hit, top - type(top)(u * w + v), out=hit)
            if not first:
                part = score[out_part]
                np.maximum(part, hit, out=part)
        np.copyto(outputs, best)
        np.multiply(score, self.dtype(c), out=index)  # in floats: no wrap
        np.subtract(shifted, index, out=index)
        if not full:
            empty = self._buffer('pool_empty', outputs.shape, np.bool_)
            np.equal(score, 0, out=empty)  # windows of padding only
            np.copyto(index, -1, where=empty)
            np.copyto(outputs, 0, where=empty)
        np.copyto(argmax, index)

    def maxpool2d_backward_batch(self, inputs, window: tuple[int, int],
                                 outputs, padding: int,
                                 stride: tuple[int, int], argmax, in_deltas,
                                 out_deltas) -> None:
        # one scatter-add of all deltas at their argmax, straight into the
        # memory of in_deltas (rows of one image are contiguous there)
        n = in_deltas.shape[0]
        memory = _row_memory(in_deltas)
        dx = None
        if memory is None:
            dx = self._buffer('dx', in_deltas.shape)
            dx.fill(0)
            memory = dx.reshape(-1), dx[0].size
        flat, step = memory
        # int32 indices where they suffice: casting and scattering with
        # them are faster; cast first, then add in integers (a mixed
        # float + int add is several times slower)
        ints = np.int32 if flat.size < 2 ** 31 else np.intp
        starts = self._image_starts(n, step, ints)
        index = self._buffer('pool_index', out_deltas.shape, ints)
        np.copyto(index, argmax, casting='unsafe')
        np.add(index, starts, out=index)
        values = self._buffer('pool', out_deltas.shape)
        np.copyto(values, out_deltas)
        if padding:  # windows of padding only (argmax -1) pass nothing
            empty = self._buffer('pool_empty', out_deltas.shape, np.bool_)
            np.less(argmax, 0, out=empty)
            np.copyto(values, 0, where=empty)
            np.copyto(index, starts, where=empty)
        np.add.at(flat, index.reshape(-1), values.reshape(-1))
        if dx is not None:
            _add_into(in_deltas, dx)

    def avgpool2d_forward_batch(self, inputs, window: tuple[int, int],
                                outputs, padding: int,
                                stride: tuple[int, int]) -> None:
        in_hw, out_hw = inputs.shape[1:3], outputs.shape[1:3]
        total = self._buffer('pool', outputs.shape)
        total.fill(0)
        for _, _, out_part, in_part in _window_offsets(
                window, padding, stride, out_hw, in_hw):
            part = total[out_part]
            np.add(part, inputs[in_part], out=part)
        counts = self._pool_counts(window, padding, stride, out_hw, in_hw)
        np.divide(total, counts, out=outputs)

    def avgpool2d_backward_batch(self, inputs, window: tuple[int, int],
                                 outputs, padding: int,
                                 stride: tuple[int, int], in_deltas,
                                 out_deltas) -> None:
        in_hw, out_hw = inputs.shape[1:3], outputs.shape[1:3]
        share = self._buffer('pool', out_deltas.shape)
        counts = self._pool_counts(window, padding, stride, out_hw, in_hw)
        np.divide(out_deltas, counts, out=share)
        dx = self._buffer('dx', in_deltas.shape)
        dx.fill(0)
        for _, _, out_part, in_part in _window_offsets(
                window, padding, stride, out_hw, in_hw):
            target = dx[in_part]
            np.add(target, share[out_part], out=target)
        _add_into(in_deltas, dx)

    def _pool_base(self, padding, stride, out_shape, width: int,
                   shift: float = 0.0):
        """``((i*sy - p) * W + (j*sx - p)) * C + c + shift``: the flat input
        index of window offset (0, 0) for each output cell, plus ``shift``;
        shape (OH, OW, C)."""
        key = ('pool_base', padding, tuple(stride), tuple(out_shape), width,
               shift)
        base = self._constants.get(key)
        if base is None:
            oh, ow, c = out_shape
            rows = np.arange(oh)[:, None, None] * stride[0] - padding
            cols = np.arange(ow)[None, :, None] * stride[1] - padding
            base = (rows * width + cols) * c + np.arange(c) + shift
            base = self._constants[key] = base.astype(self.dtype)
        return base

    def _image_starts(self, n: int, step: int, ints=np.intp):
        """``(N, 1, 1, 1)`` integer offsets ``i * step`` of image ``i``."""
        def make(size):
            starts = np.arange(size, dtype=np.intp) * step
            return starts.astype(ints).reshape(size, 1, 1, 1)
        return self._leading(('image_starts', step, ints), n, make)

    def _pool_counts(self, window, padding, stride, out_hw, in_hw):
        """``(OH, OW, 1)`` in-bounds cells per window (1 where there are none)."""
        key = ('counts', tuple(window), padding, tuple(stride), out_hw, in_hw)
        counts = self._constants.get(key)
        if counts is None:
            rows = np.zeros(out_hw[0])
            cols = np.zeros(out_hw[1])
            for u in range(window[0]):
                i0, i1, _ = _offset_range(u, padding, stride[0], out_hw[0],
                                          in_hw[0])
                rows[i0:i1] += 1
            for v in range(window[1]):
                j0, j1, _ = _offset_range(v, padding, stride[1], out_hw[1],
                                          in_hw[1])
                cols[j0:j1] += 1
            counts = np.maximum(np.outer(rows, cols), 1)[:, :, None]
            counts = self._constants[key] = counts.astype(self.dtype)
        return counts


# Convolutions gather receptive fields (of the inputs, or of the output
# deltas for the input deltas) of about this many bytes at a time (see
# _field_chunks); bigger chunks fall out of the cache and were measured
# slower.
_FIELD_CHUNK_BYTES = 4 << 20


# Max pooling runs all its passes over chunks of images of about this size
# (inputs), which then stay in the cache.
_POOL_CHUNK_BYTES = 1 << 20


def _chunk_size(n: int, image_bytes: int, budget: int) -> int:
    """Images per chunk of about ``budget`` bytes (at least one)."""
    return max(1, min(n, budget // max(1, image_bytes)))


def _view_as(a, shape):
    """``a`` reshaped to ``shape`` without a copy (ValueError if that is
    impossible: writes into a silent copy would be lost)."""
    view = a.reshape(shape)
    if view.size and view.__array_interface__['data'][0] != \
            a.__array_interface__['data'][0]:
        raise ValueError(f'no view of shape {shape} exists for an array of '
                         f'shape {a.shape} and strides {a.strides}')
    return view


def _mergeable(a, start: int, stop: int) -> bool:
    """Can axes ``[start, stop)`` of ``a`` be merged into one without a copy?

    Checks the strides instead of trying ``reshape``, which would copy.
    """
    axes = [i for i in range(start, stop) if a.shape[i] != 1]
    return a.size == 0 or all(
        a.strides[i] == a.strides[j] * a.shape[j]
        for i, j in zip(axes[:-1], axes[1:]))


def _rows_view(a):
    """``a`` as an ``(rows, last)`` 2-D view, or None if that needs a copy."""
    if not _mergeable(a, 0, a.ndim - 1):
        return None
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _row_memory(a):
    """``(flat, step)``: a 1-D view of the memory from ``a``'s first to its
    last element, and the distance of consecutive rows ``a[i]`` in it.

    Only for arrays whose rows are each one contiguous block (like a
    ``flatten_time`` view of a network buffer); None otherwise. Elements
    between the rows belong to other arrays: index only ``a``'s own.
    """
    n, size = a.shape[0], a[0].size if a.shape[0] else 0
    item = a.itemsize
    if n == 0 or not a[0].flags.c_contiguous or a.strides[0] % item or \
            (n > 1 and a.strides[0] < size * item):
        return None
    step = a.strides[0] // item if n > 1 else size
    return as_strided(a, shape=((n - 1) * step + size,),
                      strides=(item,)), step


def _add_into(target, source):
    """``target += source`` for a contiguous ``source``.

    Works on the ``(N, rest)`` row view where possible, which NumPy updates
    in place without the hidden copy it may make of a strided 4-D view.
    """
    if target.ndim > 2 and _mergeable(target, 1, target.ndim):
        target = target.reshape(target.shape[0], -1)
    np.add(target, source.reshape(target.shape), out=target)


def _offset_range(offset, padding, stride, out_len, in_len):
    """Outputs ``[o0, o1)`` whose cell at window ``offset`` is in bounds.

    Output ``o`` reads input ``o * stride + offset - padding``. Returns
    ``(o0, o1, slice)`` with the slice selecting those inputs.
    """
    o0 = max(0, -(-(padding - offset) // stride))
    o1 = min(out_len, (in_len - 1 + padding - offset) // stride + 1)
    start = o0 * stride + offset - padding
    return o0, o1, slice(start, start + (o1 - o0 - 1) * stride + 1, stride)


def _window_offsets(window, padding, stride, out_hw, in_hw):
    """Yield ``(u, v, out_part, in_part)`` for each window offset ``(u, v)``.

    ``out_part`` indexes the outputs ``[:, i0:i1, j0:j1]`` whose window cell
    ``(u, v)`` is in bounds, and ``in_part`` the strided input cells
    ``[:, rows, cols]`` they see there. Offsets seeing only padding are
    skipped.
    """
    for u in range(window[0]):
        i0, i1, rows = _offset_range(u, padding, stride[0], out_hw[0],
                                     in_hw[0])
        if i1 <= i0:
            continue
        for v in range(window[1]):
            j0, j1, cols = _offset_range(v, padding, stride[1], out_hw[1],
                                         in_hw[1])
            if j1 > j0:
                yield (u, v, (slice(None), slice(i0, i1), slice(j0, j1)),
                       (slice(None), rows, cols))


def _check_ids(op: str, v, n: int) -> None:
    """Class ids index a row of ``n`` entries: out-of-range ids would raise a
    bare IndexError (too large) or silently wrap around (negative)."""
    if not v.size:
        return
    # NaN would be cast to a huge negative index, 0.7 silently to 0 (while
    # binarize_v compares exactly and disagrees)
    fraction = v != np.floor(v)
    if fraction.any():
        from brainstorm.utils import NetworkValidationError
        bad = v[fraction].ravel()
        raise NetworkValidationError(
            f'{op}: class ids must be whole numbers in [0, {n}). Received '
            f'{int(fraction.sum())} other value(s), e.g. {bad[0]:g} at '
            f'position {int(np.flatnonzero(fraction.ravel())[0])}.')
    if v.min() < 0 or v.max() >= n:
        from brainstorm.utils import NetworkValidationError
        raise NetworkValidationError(
            f'{op}: class ids must lie in [0, {n}). Received ids from '
            f'{v.min():g} to {v.max():g}.')
