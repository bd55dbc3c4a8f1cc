"""NumpyHandler's speed strategies: matrix products, convolution, pooling.

:class:`~brainstorm.handlers.numpy_handler.NumpyHandler` stays the plain
reference of the :class:`~brainstorm.handlers.base_handler.Handler` ops;
where a plain NumPy expression was measurably slow (``benchmarks/
bench_ops.py`` for single ops, ``benchmarks/bench_step.py`` for whole
training steps), its op calls the function of the same name here. Every
function takes the handler first and uses only its scratch memory
(``handler._buffer``), its cached constants (``handler._constants``,
``handler._leading``), its ``dtype`` and its ops.

Notes on the strategies (measured with OpenBLAS on a few cores):

* **Products** (:func:`product`): OpenBLAS is slow for products with few
  rows and many columns (a batch of 32-100 times a weight matrix), the more
  so with the second operand transposed, so those run transposed.
* **Convolution** gathers the receptive fields into a matrix and runs
  GEMMs (im2col), in chunks of images whose fields take about
  :data:`_FIELD_CHUNK_BYTES`, so a gathered chunk is still in the cache
  when the GEMM reads it. With a ``columns`` workspace (kept for big
  images, see :data:`MIN_CELLS_TO_KEEP_COLUMNS`) the forward pass stores
  the fields there and the backward pass reuses them.
* **Input deltas** of a convolution take one of three routes: a stride-1
  convolution with enough channels is itself a convolution of the padded
  output deltas with the flipped kernel (:func:`_conv_deltas_by_correlation`,
  which can also give the weight gradient from the same fields); images
  with few channels (RGB) use one GEMM for all kernel offsets
  (:func:`_conv_input_deltas_few_channels`); everything else runs one GEMM
  per kernel offset (:func:`_conv_input_deltas_per_offset`).
* **Max pooling** is in :mod:`brainstorm.handlers._numpy_maxpool`.
* Results accumulate in contiguous scratch buffers and touch the caller's
  (maybe strided) arrays once (:func:`_add_into`): NumPy sometimes copies a
  whole strided 4-D view of a big network buffer before updating it.

The chunk sizes are module constants so that tests can make them tiny and
exercise the chunk boundaries.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from brainstorm.shapes import check_image_geometry, padding_sides

#: Convolution2D keeps the receptive fields of the forward pass (its
#: internal ``columns``, kh*kw*C values per output cell) for the backward
#: pass with NumpyHandler if an image has at least this many output cells
#: (``NumpyHandler.keeps_conv_columns``). The GEMMs then run per image;
#: compared with gathering the fields again chunk by chunk that pays only
#: for big images (measured in the CIFAR-10 network: keeping 32x32 saves
#: time, keeping 15x15 or 7x7 costs time).
MIN_CELLS_TO_KEEP_COLUMNS = 512


# Convolutions gather receptive fields (of the inputs, or of the output
# deltas for the input deltas) of about this many bytes at a time (see
# _field_chunks); bigger chunks fall out of the cache and were measured
# slower.
_FIELD_CHUNK_BYTES = 4 << 20


#: Products with more rows than this are never computed transposed (see
#: :func:`product`).
_MAX_ROWS_TO_TRANSPOSE = 256


def product(handler, a, b, out, transa, transb, add):
    """Compute ``out (+)= op(a) @ op(b)``, transposed where that is faster.

    The transposed form is ``(op(b).T @ op(a).T).T``.

    OpenBLAS is slow for products with few rows and many columns (a
    batch of 32-100 times a weight matrix), the more so with the second
    operand transposed: the transposed product is 1.2-1.7x faster for
    the Lstm and FullyConnected shapes even with the extra transposing
    pass (benchmarks/bench_ops.py). Products with many rows (the input
    projections of all time steps of an Lstm, 1600 x 205 . 205 x 2048) are
    2.4x slower transposed, the transposing pass then costing more than
    the product: they run as they are.
    """
    left = a.T if transa else a
    right = b.T if transb else b
    rows, cols = out.shape
    if rows < cols and rows <= _MAX_ROWS_TO_TRANSPOSE and (transb or rows <= 64):
        product = handler._buffer('dot', (cols, rows))
        np.matmul(right.T, left.T, out=product)
        product = product.T
    elif add:
        product = handler._buffer('dot', out.shape)
        np.matmul(left, right, out=product)
    else:
        np.matmul(left, right, out=out)
        return
    if add:
        np.add(out, product, out=out)
    else:
        np.copyto(out, product)


def _padded(handler, images, rows: int, cols: int):
    """Zero-pad ``images`` into a scratch array.

    ``rows`` zero rows and ``cols`` zero columns go on both sides;
    ``images`` itself is returned if both are 0.
    """
    if not (rows or cols):
        return images
    n, h, w, c = images.shape
    xpad = handler._buffer('pad', (n, h + 2 * rows, w + 2 * cols, c))
    xpad[:, :rows] = 0
    xpad[:, rows + h :] = 0
    xpad[:, rows : rows + h, :cols] = 0
    xpad[:, rows : rows + h, cols + w :] = 0
    xpad[:, rows : rows + h, cols : cols + w] = images
    return xpad


def _fields(handler, inputs, kernel, padding, stride, out_shape):
    """Return a read-only ``(N, OH, OW, kh, kw, C)`` view of every field.

    The receptive fields are those of a zero-padded scratch copy of
    ``inputs`` if there is padding.

    ``padding`` is ``(ph, pw)``: zero rows and columns on both sides.
    Field ``(n, i, j)`` is ``xpad[n, i*sy:i*sy+kh, j*sx:j*sx+kw, :]``;
    flattened in ``(u, v, c)`` order it matches ``weights.reshape(F,
    K)``.
    """
    n, _, _, c = inputs.shape
    kh, kw = kernel
    sy, sx = stride
    oh, ow = out_shape
    xpad = _padded(handler, inputs, *padding)
    s0, s1, s2, s3 = xpad.strides
    return as_strided(
        xpad,
        shape=(n, oh, ow, kh, kw, c),
        strides=(s0, s1 * sy, s2 * sx, s1, s2, s3),
        writeable=False,
    )


def _field_chunks(handler, fields):
    """Split the images into chunks of ``(start, stop, rows)``.

    The fields of a chunk take about ``_FIELD_CHUNK_BYTES``, so that a
    chunk gathered into a matrix is still in the cache when a GEMM reads
    it.
    """
    n = fields.shape[0]
    chunk = _chunk_size(
        n, math.prod(fields.shape[1:]) * fields.itemsize, _FIELD_CHUNK_BYTES
    )
    cells = fields.shape[1] * fields.shape[2]
    for start in range(0, n, chunk):
        stop = min(n, start + chunk)
        yield start, stop, slice(start * cells, stop * cells)


def _gather(handler, fields):
    """Copy the fields of some images into the scratch (M, K) matrix."""
    k = math.prod(fields.shape[3:])
    col = handler._buffer(
        'col', (fields.shape[0] * fields.shape[1] * fields.shape[2], k)
    )
    np.copyto(_view_as(col, fields.shape), fields)
    return col


def _columns(handler, columns, weights, out_shape):
    """Return ``columns`` as ``(N, OH*OW, K)`` image blocks, or None.

    None if it cannot hold the receptive fields (then they are
    recomputed).

    The GEMMs then run per image (a batched ``matmul``): each image's
    block is contiguous in a layer internal, the whole batch is not.
    """
    n, oh, ow = out_shape
    k = math.prod(weights.shape[1:])
    if (
        columns is None
        or columns.shape != (n, oh, ow, k)
        or columns.dtype != handler.dtype
        or (n and not columns[0].flags.c_contiguous)
    ):
        return None
    return _view_as(columns, (n, oh * ow, k))


def conv2d_forward_batch(
    handler,
    inputs,
    weights,
    bias,
    outputs,
    padding: int | tuple[int, int, int, int],
    stride: tuple[int, int],
    *,
    columns=None,
) -> None:
    check_image_geometry(
        'conv2d_forward_batch', inputs.shape[1:3], weights.shape[1:3], padding,
        stride, outputs.shape[1:3],
    )  # fmt: skip
    if not outputs.size:
        return  # no filters (F = 0): nothing to compute
    sides = padding_sides(padding)
    pad = sides[0]
    if len(set(sides)) > 1:  # asymmetric: convolve a padded copy
        inputs, pad = _padded_sides(handler, inputs, sides), 0
    n, oh, ow, f = outputs.shape
    kept = _columns(handler, columns, weights, (n, oh, ow))
    fields = _fields(handler, inputs, weights.shape[1:3], (pad, pad), stride, (oh, ow))
    wt = weights.reshape(f, -1).T
    if kept is not None:
        target = _view_as(columns, fields.shape)
    # gather and multiply chunk by chunk, while the fields are cached;
    # adding the bias writes each chunk into the (maybe strided) outputs
    for start, stop, _ in _field_chunks(handler, fields):
        result = handler._buffer('conv_out', (stop - start, oh * ow, f))
        if kept is None:
            col = _gather(handler, fields[start:stop])
            np.matmul(col, wt, out=result.reshape(-1, f))
        else:
            np.copyto(target[start:stop], fields[start:stop])
            np.matmul(kept[start:stop], wt, out=result)
        np.add(result.reshape(outputs[start:stop].shape), bias, out=outputs[start:stop])


def conv2d_backward_batch(
    handler,
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
) -> None:
    check_image_geometry(
        'conv2d_backward_batch', inputs.shape[1:3], weights.shape[1:3], padding,
        stride, out_deltas.shape[1:3],
    )  # fmt: skip
    if not out_deltas.size:  # no filters (F = 0): no output, no gradient
        weight_deltas.fill(0.0)
        bias_deltas.fill(0.0)
        return
    sides = padding_sides(padding)
    if len(set(sides)) > 1:
        _conv_backward_asymmetric(
            handler,
            inputs,
            sides,
            weights,
            stride,
            in_deltas,
            out_deltas,
            weight_deltas,
            bias_deltas,
            columns=columns,
            skip_in_deltas=skip_in_deltas,
        )
        return
    pad = sides[0]
    n, oh, ow, f = out_deltas.shape
    kh, kw = weights.shape[1:3]
    dy = _rows_view(out_deltas)
    if dy is None:
        dy = handler._buffer('conv_out', (n * oh * ow, f))
        np.copyto(dy.reshape(out_deltas.shape), out_deltas)
    handler.sum_t(dy, 0, bias_deltas)  # a GEMV: NumPy's sum is 5x slower

    kept = _columns(handler, columns, weights, (n, oh, ow))
    c = weights.shape[3]
    by_correlation = (
        not skip_in_deltas and c >= 8 and tuple(stride) == (1, 1) and pad < min(kh, kw)
    )
    if by_correlation and kept is None:
        # both gradients from the same gathered fields
        _conv_deltas_by_correlation(
            handler, dy, weights, pad, in_deltas, (oh, ow), (inputs, weight_deltas)
        )
        return
    dw = handler._buffer('dw', (f, kh * kw * c))
    if kept is not None:
        # per image dy_n.T @ col_n, then the sum over the images
        products = handler._buffer('conv_dw_images', (n,) + dw.shape)
        np.matmul(dy.reshape(n, oh * ow, f).transpose(0, 2, 1), kept, out=products)
        np.sum(products, axis=0, out=dw)
    else:
        # chunk by chunk: dw = sum over the chunks of dy.T @ col
        fields = _fields(handler, inputs, (kh, kw), (pad, pad), stride, (oh, ow))
        part = handler._buffer('dw_part', dw.shape)
        for start, stop, rows in _field_chunks(handler, fields):
            col = _gather(handler, fields[start:stop])
            np.matmul(dy[rows].T, col, out=part if start else dw)
            if start:
                np.add(dw, part, out=dw)
    np.copyto(weight_deltas, dw.reshape(weight_deltas.shape))

    if skip_in_deltas:
        return
    if by_correlation:
        _conv_deltas_by_correlation(handler, dy, weights, pad, in_deltas, (oh, ow))
    elif c < 8:
        _conv_input_deltas_few_channels(
            handler, dy, weights, pad, stride, in_deltas, (oh, ow)
        )
    else:
        _conv_input_deltas_per_offset(
            handler, dy, weights, pad, stride, in_deltas, (oh, ow)
        )


def _padded_sides(handler, images, sides):
    """Zero-pad ``images`` by ``(top, bottom, left, right)`` into scratch."""
    top, bottom, left, right = sides
    n, h, w, c = images.shape
    xpad = handler._buffer('pad_sides', (n, top + h + bottom, left + w + right, c))
    xpad.fill(0)
    xpad[:, top : top + h, left : left + w] = images
    return xpad


def _conv_backward_asymmetric(handler, inputs, sides, *args, **keywords):
    """:func:`conv2d_backward_batch` with padding that differs by side.

    ``args`` are ``weights, stride, in_deltas, out_deltas, weight_deltas,
    bias_deltas``: the gradients of a padded copy of the inputs without
    padding, whose inner cells' input deltas are those of the inputs.
    """
    weights, stride, in_deltas, *rest = args
    xpad = _padded_sides(handler, inputs, sides)
    dxpad = handler._buffer('pad_sides_deltas', xpad.shape)
    dxpad.fill(0)
    conv2d_backward_batch(handler, xpad, weights, 0, stride, dxpad, *rest, **keywords)
    if not keywords['skip_in_deltas']:
        (top, _, left, _), (h, w) = sides, inputs.shape[1:3]
        inner = handler._buffer('pad_sides_inner', in_deltas.shape)
        np.copyto(inner, dxpad[:, top : top + h, left : left + w])
        _add_into(in_deltas, inner)


def _conv_input_deltas_per_offset(
    handler, dy, weights, padding, stride, in_deltas, out_hw
):
    """Add the input deltas, the general way.

    The cells seen at kernel offset ``(u, v)`` get ``dy @ weights[:, u,
    v, :]`` (one GEMM per offset, added in place).
    """
    n = in_deltas.shape[0]
    _, kh, kw, c = weights.shape
    oh, ow = out_hw
    part = handler._buffer('conv_part', (n * oh * ow, c))
    dx = handler._buffer('dx', in_deltas.shape)
    dx.fill(0)
    for u, v, out_part, in_part in _window_offsets(
        (kh, kw), (padding, padding), stride, out_hw, in_deltas.shape[1:3]
    ):
        np.matmul(dy, weights[:, u, v, :], out=part)
        target = dx[in_part]
        np.add(target, part.reshape(n, oh, ow, c)[out_part], out=target)
    _add_into(in_deltas, dx)


def _conv_deltas_by_correlation(
    handler, dy, weights, padding, in_deltas, out_hw, gradient=None
):
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
    flip = handler._buffer('conv_flip', (kh, kw, f, c))
    np.copyto(flip, weights[:, ::-1, ::-1, :].transpose(1, 2, 0, 3))
    fields = _fields(
        handler,
        dy.reshape(n, oh, ow, f),
        (kh, kw),
        (kh - 1 - padding, kw - 1 - padding),
        (1, 1),
        (h, w),
    )
    result = handler._buffer('dx', (n * h * w, c))
    if gradient is not None:
        dw = handler._buffer('dw', (c, k))
        part = handler._buffer('dw_part', (c, k))
    for start, stop, rows in _field_chunks(handler, fields):
        col = _gather(handler, fields[start:stop])
        np.matmul(col, flip.reshape(k, c), out=result[rows])
        if gradient is not None:
            x = handler._buffer('conv_x', (stop - start, h, w, c))
            np.copyto(x, gradient[0][start:stop])
            np.matmul(x.reshape(-1, c).T, col, out=part if start else dw)
            if start:
                np.add(dw, part, out=dw)
    _add_into(in_deltas, result)
    if gradient is not None:
        np.copyto(
            gradient[1],
            dw.reshape(c, kh, kw, f)[:, ::-1, ::-1, :].transpose(3, 1, 2, 0),
        )


def _conv_input_deltas_few_channels(
    handler, dy, weights, padding, stride, in_deltas, out_hw
):
    """Input deltas for images with few channels (an RGB input).

    Per-offset GEMMs would have only C output columns; instead one GEMM
    gives every (offset, channel) row ``weights[:, u, v, c] @ dy.T``
    over all output cells, and those rows are added channel-major
    (runs of OW cells instead of C), then transposed once.
    """
    n, h, w, c = in_deltas.shape
    f, kh, kw, _ = weights.shape
    oh, ow = out_hw
    rows = handler._buffer('col', (kh * kw * c, n * oh * ow))
    np.matmul(weights.reshape(f, -1).T, dy.T, out=rows)
    parts = rows.reshape(kh, kw, c, n, oh, ow)
    dx = handler._buffer('dx_channels', (c, n, h, w))
    dx.fill(0)
    every = (slice(None),)
    for u, v, out_part, in_part in _window_offsets(
        (kh, kw), (padding, padding), stride, out_hw, (h, w)
    ):
        target = dx[every + in_part]
        np.add(target, parts[(u, v) + every + out_part], out=target)
    image = handler._buffer('dx', in_deltas.shape)
    np.copyto(image, dx.transpose(1, 2, 3, 0))
    _add_into(in_deltas, image)


# Pooling and the input deltas accumulate in contiguous scratch buffers
# and touch the caller's arrays once: NumPy sometimes copies a whole
# strided 4-D view of a big network buffer before updating it in place.


def avgpool2d_forward_batch(
    handler,
    inputs,
    window: tuple[int, int],
    outputs,
    padding: int | tuple[int, int, int, int],
    stride: tuple[int, int],
) -> None:
    in_hw, out_hw = inputs.shape[1:3], outputs.shape[1:3]
    check_image_geometry(
        'avgpool2d_forward_batch', in_hw, window, padding, stride, out_hw
    )
    top_left = _top_left(padding)
    wide = summing_dtype(handler)
    total = handler._buffer('pool', outputs.shape, wide)
    total.fill(0)
    for _, _, out_part, in_part in _window_offsets(
        window, top_left, stride, out_hw, in_hw
    ):
        part = total[out_part]
        np.add(part, inputs[in_part], out=part)
    counts = _pool_counts(handler, window, top_left, stride, out_hw, in_hw, wide)
    np.divide(total, counts, out=outputs)


def avgpool2d_backward_batch(
    handler,
    inputs,
    window: tuple[int, int],
    outputs,
    padding: int | tuple[int, int, int, int],
    stride: tuple[int, int],
    in_deltas,
    out_deltas,
) -> None:
    in_hw, out_hw = inputs.shape[1:3], out_deltas.shape[1:3]
    check_image_geometry(
        'avgpool2d_backward_batch', in_hw, window, padding, stride, out_hw
    )
    top_left = _top_left(padding)
    wide = summing_dtype(handler)
    share = handler._buffer('pool', out_deltas.shape, wide)
    counts = _pool_counts(handler, window, top_left, stride, out_hw, in_hw, wide)
    np.divide(out_deltas, counts, out=share)
    dx = handler._buffer('dx', in_deltas.shape, wide)
    dx.fill(0)
    for _, _, out_part, in_part in _window_offsets(
        window, top_left, stride, out_hw, in_hw
    ):
        target = dx[in_part]
        np.add(target, share[out_part], out=target)
    _add_into(in_deltas, dx)


def summing_dtype(handler):
    """The dtype sums are taken in: float32 below float32, else the handler's.

    A float16 window sum of average pooling overflows from a window mean
    of 65504 / count (a 16x16 global average of 256), a softmax row sum
    from 65504 columns; summing in float32 scratch and rounding once into
    the outputs (or input deltas) also gives float16 the correctly rounded
    result. float32 and float64 add in their own type.
    """
    if np.dtype(handler.dtype).itemsize < 4:
        return np.float32
    return handler.dtype


def axis_sum(handler, a, axis: int, out) -> None:
    """Sum ``a`` over ``axis`` into ``out`` (``sum_t``'s NumPy reductions).

    float16 column sums (axis 0) are taken in float32 scratch and rounded
    once: NumPy adds the rows one by one in float16 there (2048 plus 62
    ones gave 2048, not 2110), where its row sums and the product with
    ones that ``sum_t`` uses from 64 rows accumulate in float32.
    """
    keep = out.ndim == a.ndim
    if axis == 0 and summing_dtype(handler) != a.dtype:
        total = handler._buffer('column_sums', out.shape, np.float32)
        np.sum(a, axis=0, out=total, keepdims=keep, dtype=np.float32)
        np.copyto(out, total, casting='same_kind')
    else:
        np.sum(a, axis=axis, out=out, keepdims=keep)


def _top_left(padding) -> tuple[int, int]:
    """The top and left padding: where the windows start.

    The bottom and right padding only decide the output size, which the
    outputs' shape gives.
    """
    sides = padding_sides(padding)
    return sides[0], sides[2]


def _pool_base(handler, padding, stride, out_shape, width: int, shift: float = 0.0):
    """Flat input index of window offset (0, 0) per output cell, plus shift.

    That is ``((i*sy - pt) * W + (j*sx - pl)) * C + c + shift``, of shape
    ``(OH, OW, C)``, with ``padding`` the pair ``(pt, pl)``.
    """
    key = ('pool_base', padding, tuple(stride), tuple(out_shape), width, shift)
    base = handler._constants.get(key)
    if base is None:
        oh, ow, c = out_shape
        rows = np.arange(oh)[:, None, None] * stride[0] - padding[0]
        cols = np.arange(ow)[None, :, None] * stride[1] - padding[1]
        base = (rows * width + cols) * c + np.arange(c) + shift
        base = handler._constants[key] = base.astype(handler.dtype)
    return base


def _image_starts(handler, n: int, step: int, ints=np.intp):
    """``(N, 1, 1, 1)`` integer offsets ``i * step`` of image ``i``."""

    def make(size):
        starts = np.arange(size, dtype=np.intp) * step
        return starts.astype(ints).reshape(size, 1, 1, 1)

    return handler._leading(('image_starts', step, ints), n, make)


def _pool_counts(handler, window, padding, stride, out_hw, in_hw, dtype):
    """``(OH, OW, 1)`` in-bounds cells per window (1 where there are none).

    ``padding`` is the pair ``(top, left)``; ``dtype`` that of the counts.
    """
    key = ('counts', tuple(window), padding, tuple(stride), out_hw, in_hw)
    if dtype != handler.dtype:
        key += (np.dtype(dtype).name,)
    counts = handler._constants.get(key)
    if counts is None:
        rows = np.zeros(out_hw[0])
        cols = np.zeros(out_hw[1])
        for u in range(window[0]):
            i0, i1, _ = _offset_range(u, padding[0], stride[0], out_hw[0], in_hw[0])
            rows[i0:i1] += 1
        for v in range(window[1]):
            j0, j1, _ = _offset_range(v, padding[1], stride[1], out_hw[1], in_hw[1])
            cols[j0:j1] += 1
        counts = np.maximum(np.outer(rows, cols), 1)[:, :, None]
        counts = handler._constants[key] = counts.astype(dtype)
    return counts


def _chunk_size(n: int, image_bytes: int, budget: int) -> int:
    """Images per chunk of about ``budget`` bytes (at least one)."""
    return max(1, min(n, budget // max(1, image_bytes)))


def _view_as(a, shape):
    """Reshape ``a`` to ``shape`` without a copy.

    Raises:
        ValueError: if that is impossible (writes into a silent copy would
            be lost).
    """
    view = a.reshape(shape)
    if (
        view.size
        and view.__array_interface__['data'][0] != a.__array_interface__['data'][0]
    ):
        raise ValueError(
            f'no view of shape {shape} exists for an array of '
            f'shape {a.shape} and strides {a.strides}'
        )
    return view


def _mergeable(a, start: int, stop: int) -> bool:
    """Can axes ``[start, stop)`` of ``a`` be merged into one without a copy?

    Checks the strides instead of trying ``reshape``, which would copy.
    """
    axes = [i for i in range(start, stop) if a.shape[i] != 1]
    return a.size == 0 or all(
        a.strides[i] == a.strides[j] * a.shape[j] for i, j in zip(axes[:-1], axes[1:])
    )


def _rows_view(a):
    """``a`` as an ``(rows, last)`` 2-D view, or None if that needs a copy."""
    if not _mergeable(a, 0, a.ndim - 1):
        return None
    return a.reshape(math.prod(a.shape[:-1]), a.shape[-1])


def _row_memory(a):
    """Return ``(flat, step)``, the memory holding the rows of ``a``.

    ``flat`` is a 1-D view of the memory from ``a``'s first to its last
    element and ``step`` the distance of consecutive rows ``a[i]`` in it.

    Only for arrays whose rows are each one contiguous block (like a
    ``flatten_time`` view of a network buffer); None otherwise. Elements
    between the rows belong to other arrays: index only ``a``'s own.
    """
    n, size = a.shape[0], a[0].size if a.shape[0] else 0
    item = a.itemsize
    if (
        n == 0
        or not a[0].flags.c_contiguous
        or a.strides[0] % item
        or (n > 1 and a.strides[0] < size * item)
    ):
        return None
    step = a.strides[0] // item if n > 1 else size
    return as_strided(a, shape=((n - 1) * step + size,), strides=(item,)), step


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
    # none when the offset reaches past the input for every output (o1
    # would be below o0, even negative: a slice end counting from the back)
    o1 = max(o0, min(out_len, (in_len - 1 + padding - offset) // stride + 1))
    start = o0 * stride + offset - padding
    return o0, o1, slice(start, start + (o1 - o0 - 1) * stride + 1, stride)


def _window_offsets(window, padding, stride, out_hw, in_hw):
    """Yield ``(u, v, out_part, in_part)`` for each window offset ``(u, v)``.

    ``out_part`` indexes the outputs ``[:, i0:i1, j0:j1]`` whose window cell
    ``(u, v)`` is in bounds, and ``in_part`` the strided input cells
    ``[:, rows, cols]`` they see there. Offsets seeing only padding are
    skipped. ``padding`` is the pair ``(top, left)``.
    """
    for u in range(window[0]):
        i0, i1, rows = _offset_range(u, padding[0], stride[0], out_hw[0], in_hw[0])
        if i1 <= i0:
            continue
        for v in range(window[1]):
            j0, j1, cols = _offset_range(v, padding[1], stride[1], out_hw[1], in_hw[1])
            if j1 > j0:
                yield (
                    u,
                    v,
                    (slice(None), slice(i0, i1), slice(j0, j1)),
                    (slice(None), rows, cols),
                )
