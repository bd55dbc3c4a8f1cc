"""NumpyHandler's max pooling, forward and backward.

The forward pass runs all its passes over chunks of about
:data:`_POOL_CHUNK_BYTES` of images, which then stay in the cache, and
ranks equal maxima with small unsigned ints so that the first maximum wins
without an argmax pass. A NaN is the maximum of its window (the first NaN
cell wins), found only where some window has no maximum equal to one of
its cells. The backward pass is one scatter-add of all deltas at their
argmax. Like :mod:`brainstorm.handlers._numpy_conv`, every function takes
the handler first and uses only its scratch memory and constants.
"""

from __future__ import annotations

import math

import numpy as np

from brainstorm.errors import shown_number
from brainstorm.handlers import _numpy_conv as _conv
from brainstorm.shapes import check_image_geometry, padding_sides

__all__ = [
    'check_argmax_cells',
    'check_argmax_range',
    'largest_argmax_number',
    'maxpool2d_backward_batch',
    'maxpool2d_forward_batch',
    'ranked_base',
]

# Max pooling runs all its passes over chunks of images of about this size
# (inputs), which then stay in the cache.
_POOL_CHUNK_BYTES = 1 << 20


def check_argmax_range(
    op: str, inputs, window, outputs, padding, stride, dtype, *, integers=False
):
    """Raise unless ``argmax`` of ``dtype`` is exact for this geometry.

    ``argmax`` holds flat in-image indices in the handler's float dtype.
    NumPy and oneDNN compute them in that dtype, through numbers up to
    :func:`largest_argmax_number`; a handler that computes them in
    integers (``integers=True``) only stores numbers below ``H * W * C``.
    Every number up to 2**24 (float32) or 2**53 (float64) is exact; beyond,
    indices would round to a neighbouring cell and the deltas of max
    pooling go to the wrong cells.
    """
    if getattr(inputs, 'ndim', None) != 4 or len(getattr(outputs, 'shape', ())) != 4:
        return  # the op's own checks say what is wrong
    h, w, c = inputs.shape[1:]
    if integers:
        largest = h * w * c - 1
    else:
        largest = largest_argmax_number(
            inputs.shape[1:], window, outputs.shape[1:3], padding, stride
        )
    limit = 2 ** (np.finfo(dtype).nmant + 1)
    if largest > limit:
        raise ValueError(
            f'{op}: max pooling records where each maximum lies (argmax) as '
            f'{np.dtype(dtype).name} numbers, exact up to {limit}; images of '
            f'{h} x {w} x {c} cells pooled in {window[0]} x {window[1]} '
            f'windows need numbers up to {largest}. Use a float64 handler, '
            f'or smaller images or windows, or fewer channels.'
        )


def check_argmax_cells(op: str, argmax, in_deltas) -> float:
    """Raise unless ``argmax`` names cells of its image or -1; its minimum.

    The backward pass scatters into the memory that holds the rows of
    ``in_deltas``: an index outside ``[-1, H * W * C)`` would land in
    another image or between the rows, in another array's memory. Two
    reductions over ``argmax`` (a fraction of the scatter's cost).

    Raises:
        ValueError: naming the range and the values received (NaN too).
    """
    if not argmax.size:
        return 0.0
    cells = math.prod(in_deltas.shape[1:])
    lowest, highest = float(argmax.min()), float(argmax.max())
    if not (lowest >= -1 and highest < cells):  # also False for NaN
        raise ValueError(
            f'{op}: argmax must hold flat in-image indices in [0, {cells}) '
            f'(or -1: no cell) as maxpool2d_forward_batch writes them. '
            f'Received values from {shown_number(lowest)} to {shown_number(highest)}.'
        )
    return lowest


def largest_argmax_number(image, window, out_hw, padding, stride) -> int:
    """The largest number max pooling computes on its way to ``argmax``.

    ``argmax = shifted - rank * C`` (:func:`ranked_base`): ``rank * C``
    reaches ``R * C``, and ``shifted = base + R * C`` is largest at the last
    output cell, whose ``base`` is its window's first cell (which padding
    may put before the image, a negative base).
    """
    _, w, c = image
    (kh, kw), (sy, sx) = window, stride
    top, _, left, _ = padding_sides(padding)
    ranks = ((kh - 1) * w + kw) * c  # R * C
    last_base = (((out_hw[0] - 1) * sy - top) * w + (out_hw[1] - 1) * sx - left) * c
    return ranks + max(0, last_base + c - 1)


def maxpool2d_forward_batch(
    handler,
    inputs,
    window: tuple[int, int],
    outputs,
    padding: int | tuple[int, int, int, int],
    stride: tuple[int, int],
    argmax,
) -> None:
    check_image_geometry(
        'maxpool2d_forward_batch', inputs.shape[1:3], window, padding, stride,
        outputs.shape[1:3],
    )  # fmt: skip
    check_argmax_range(
        'maxpool2d_forward_batch', inputs, window, outputs, padding, stride,
        handler.dtype,
    )  # fmt: skip
    if not outputs.size:
        return  # no channels (C = 0): nothing to compute
    h, w, c = inputs.shape[1:]
    sides = padding_sides(padding)
    top_left = sides[0], sides[2]  # only the top and left ones move windows
    offsets = list(
        _conv._window_offsets(window, top_left, stride, outputs.shape[1:3], (h, w))
    )
    # The first maximum in row-major window order is the one with the
    # smallest offset (u*W + v), i.e. the largest rank R - (u*W + v)
    # among the cells equal to the maximum (rank 0: none). Ranks are
    # small unsigned ints: each offset costs one comparison of floats
    # and two cheap byte-sized passes.
    top, shifted = ranked_base(handler, window, top_left, stride, outputs.shape[1:], w)
    ranks = np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.uint32
    # chunks of images that stay in the cache through all the passes,
    # with chunk-sized scratch arrays
    n = inputs.shape[0]
    chunk = _conv._chunk_size(n, h * w * c * inputs.itemsize, _POOL_CHUNK_BYTES)
    shape = (chunk,) + outputs.shape[1:]
    scratch = (
        handler._buffer('pool', shape),
        handler._buffer('pool_score', shape, ranks),
        handler._buffer('pool_match', shape, ranks),
        handler._buffer('pool_index_f', shape),
    )
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        _maxpool_images(
            handler,
            inputs[a:b],
            outputs[a:b],
            argmax[a:b],
            offsets,
            any(sides),
            [array[: b - a] for array in scratch],
            shifted,
            ranks(top),
        )


def ranked_base(handler, window, top_left, stride, out_shape, width: int):
    """``(R, shifted)``: the top rank and ``base + R * C`` per output cell.

    A window cell ``(u, v)`` has rank ``R - (u * W + v)``, with ``R = (kh -
    1) * W + kw`` (rank 0: no cell); argmax ``= base + (R - rank) * C =
    shifted - rank * C``, with ``base`` the window's first cell
    (:func:`_numpy_conv._pool_base`) and ``shifted`` a float constant of
    shape ``out_shape`` ``(OH, OW, C)``. OneDnnHandler computes argmax the
    same way from oneDNN's workspace.
    """
    top = (window[0] - 1) * width + window[1]
    shifted = _conv._pool_base(
        handler, top_left, stride, out_shape, width, float(top * out_shape[-1])
    )
    return top, shifted


def _maxpool_images(
    handler, inputs, outputs, argmax, offsets, padding, scratch, shifted, top
):
    c = inputs.shape[3]
    best, score, match, index = scratch
    # without padding the first offset covers every output cell and
    # initialises the running maximum and score (one pass less each)
    # (``padding``: whether there is any)
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
    _rank_cells(inputs, offsets, score, match, top, full, np.equal, best)
    np.copyto(outputs, best)
    if not score.min():  # windows of padding only, or with NaN (no cell equals NaN)
        nan = handler._buffer('pool_nan', score.shape, np.bool_)
        np.isnan(best, out=nan)
        if nan.any():
            # A window holding a NaN has the maximum NaN and so no score
            # yet; the rank of its first NaN cell (only such windows hold
            # NaN cells) makes argmax point there, as for ties.
            _rank_cells(inputs, offsets, score, match, top, False, np.isnan)
    np.multiply(score, handler.dtype(c), out=index)  # in floats: no wrap
    np.subtract(shifted, index, out=index)
    if not full:
        empty = handler._buffer('pool_empty', outputs.shape, np.bool_)
        np.equal(score, 0, out=empty)  # windows of padding only
        np.copyto(index, -1, where=empty)
        np.copyto(outputs, 0, where=empty)
    np.copyto(argmax, index)


def _rank_cells(inputs, offsets, score, match, top, first_sets, test, *against):
    """Keep in ``score`` the largest rank of the cells ``test`` accepts.

    The rank of window cell ``(u, v)`` is ``top - (u * W + v)``: the first
    accepted cell in row-major window order has the largest. ``test`` is
    ``np.equal`` (with the running maximum as ``against``) or ``np.isnan``.
    With ``first_sets`` the first offset, which covers every window,
    writes ``score`` (no padding: one pass less).
    """
    w = inputs.shape[2]
    for k, (u, v, out_part, in_part) in enumerate(offsets):
        first = first_sets and k == 0
        hit = score if first else match[out_part]
        test(inputs[in_part], *[a[out_part] for a in against], out=hit)
        np.multiply(hit, top - type(top)(u * w + v), out=hit)
        if not first:
            part = score[out_part]
            np.maximum(part, hit, out=part)


def maxpool2d_backward_batch(
    handler,
    inputs,
    window: tuple[int, int],
    outputs,
    padding: int | tuple[int, int, int, int],
    stride: tuple[int, int],
    argmax,
    in_deltas,
    out_deltas,
) -> None:
    check_image_geometry(
        'maxpool2d_backward_batch', inputs.shape[1:3], window, padding, stride,
        out_deltas.shape[1:3],
    )  # fmt: skip
    check_argmax_range(
        'maxpool2d_backward_batch', inputs, window, out_deltas, padding, stride,
        handler.dtype,
    )  # fmt: skip
    lowest = check_argmax_cells('maxpool2d_backward_batch', argmax, in_deltas)
    # one scatter-add of all deltas at their argmax, straight into the
    # memory of in_deltas (rows of one image are contiguous there)
    n = in_deltas.shape[0]
    memory = _conv._row_memory(in_deltas)
    dx = None
    if memory is None:
        dx = handler._buffer('dx', in_deltas.shape)
        dx.fill(0)
        memory = dx.reshape(-1), dx[0].size
    flat, step = memory
    # int32 indices where they suffice: casting and scattering with
    # them are faster; cast first, then add in integers (a mixed
    # float + int add is several times slower)
    ints = np.int32 if flat.size < 2**31 else np.intp
    starts = _conv._image_starts(handler, n, step, ints)
    index = handler._buffer('pool_index', out_deltas.shape, ints)
    np.copyto(index, argmax, casting='unsafe')
    np.add(index, starts, out=index)
    values = handler._buffer('pool', out_deltas.shape)
    np.copyto(values, out_deltas)
    if lowest < 0:  # windows of padding only (argmax -1) pass nothing
        empty = handler._buffer('pool_empty', out_deltas.shape, np.bool_)
        np.less(argmax, 0, out=empty)
        np.copyto(values, 0, where=empty)
        np.copyto(index, starts, where=empty)
    np.add.at(flat, index.reshape(-1), values.reshape(-1))
    if dx is not None:
        _conv._add_into(in_deltas, dx)
