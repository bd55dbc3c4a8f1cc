"""The attention ops of :class:`~brainstorm.handlers.cuda.handler.PyCudaHandler`.

Module-level functions taking the handler as ``self``; the handler class
installs them as its methods (:func:`install_attention_ops`). Their kernels are
``cu/attention.cu``.
"""

from __future__ import annotations

import abc

import numpy as np

from brainstorm.handlers.cuda.views import check_shapes, coalesce
from brainstorm.handlers.ops import OPS

__all__ = [
    'install_attention_ops',
    'batch_dot_tt',
    'batch_dot_add_tt',
    'masked_softmax_t',
    'softmax_deriv_t',
]


def _batch_dot(self, a, b, out, transa: bool, transb: bool, add: bool) -> None:
    a_rows, a_inner = (a.shape[-1], a.shape[0]) if transa else (a.shape[0], a.shape[-1])
    b_inner, b_cols = (b.shape[-1], b.shape[0]) if transb else (b.shape[0], b.shape[-1])
    batch = out.shape[1:-1]
    if (
        a.ndim < 2
        or a.shape[1:-1] != batch
        or b.shape[1:-1] != batch
        or a_inner != b_inner
        or out.shape != (a_rows, *batch, b_cols)
    ):
        raise ValueError(
            f'batch_dot_tt: operands do not fit (rows, batch..., columns) '
            f'products. Received: {a.shape}, {b.shape}, {out.shape} '
            f'(transa={transa}, transb={transb})'
        )
    a_r, a_k = (
        (a.strides[-1], a.strides[0]) if transa else (a.strides[0], a.strides[-1])
    )
    b_k, b_c = (
        (b.strides[-1], b.strides[0]) if transb else (b.strides[0], b.strides[-1])
    )
    for (n1, n2), offsets, (sa, sb, so) in _batch_axes(
        batch, [a.strides[1:-1], b.strides[1:-1], out.strides[1:-1]], 2
    ):
        self._launch(
            'attention',
            'batch_dot',
            a_rows * n1 * n2 * b_cols,
            n1,
            n2,
            b_cols,
            a_inner,
            int(add),
            a.ptr + 4 * offsets[0],
            a_r,
            *sa,
            a_k,
            b.ptr + 4 * offsets[1],
            b_k,
            *sb,
            b_c,
            out.ptr + 4 * offsets[2],
            out.strides[0],
            *so,
            out.strides[-1],
        )


def batch_dot_tt(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
    """The op ``batch_dot_tt`` of the handler contract (see the op table)."""
    _batch_dot(self, a, b, out, transa, transb, add=False)


def batch_dot_add_tt(
    self, a, b, out, transa: bool = False, transb: bool = False
) -> None:
    """The op ``batch_dot_add_tt`` of the handler contract (see the op table)."""
    _batch_dot(self, a, b, out, transa, transb, add=True)


def masked_softmax_t(self, x, mask, out, causal: bool = False) -> None:
    """The op ``masked_softmax_t`` of the handler contract (see the op table)."""
    if x.ndim < 3 or out.shape != x.shape:
        raise ValueError(
            f'masked_softmax_t: x and out must be (T, B, ..., S) arrays of one '
            f'shape. Received: {x.shape}, {out.shape}'
        )
    rows, batch, cols = x.shape[0], x.shape[1], x.shape[-1]
    if mask is not None and (
        mask.ndim != 3
        or mask.shape[1:] != (batch, 1)
        or mask.shape[0] < max(rows, cols)
    ):
        raise ValueError(
            f'masked_softmax_t: mask must have shape (L, {batch}, 1) with L >= '
            f'{max(rows, cols)}. Received: {mask.shape}'
        )
    m_ptr, m_t, m_b = (x.ptr, 0, 0) if mask is None else (mask.ptr, *mask.strides[:2])
    for (heads,), offsets, (sx, so) in _batch_axes(
        x.shape[2:-1], [x.strides[2:-1], out.strides[2:-1]], 1
    ):
        self._launch(
            'attention',
            'masked_softmax_rows',
            rows * batch * heads,
            batch,
            heads,
            cols,
            int(causal),
            int(mask is not None),
            x.ptr + 4 * offsets[0],
            x.strides[0],
            x.strides[1],
            *sx,
            x.strides[-1],
            m_ptr,
            m_t,
            m_b,
            out.ptr + 4 * offsets[1],
            out.strides[0],
            out.strides[1],
            *so,
            out.strides[-1],
        )


def softmax_deriv_t(self, y, dy, dx) -> None:
    """The op ``softmax_deriv_t`` of the handler contract (see the op table)."""
    check_shapes('softmax_deriv_t', y, dy)
    check_shapes('softmax_deriv_t', y, dx)
    if y.ndim == 0 or y.size == 0:
        return
    cols = y.shape[-1]
    for (n0, n1, n2), offsets, (sy, sd, sx) in _batch_axes(
        y.shape[:-1], [y.strides[:-1], dy.strides[:-1], dx.strides[:-1]], 3
    ):
        self._launch(
            'attention',
            'softmax_deriv_rows',
            n0 * n1 * n2,
            n1,
            n2,
            cols,
            y.ptr + 4 * offsets[0],
            *sy,
            y.strides[-1],
            dy.ptr + 4 * offsets[1],
            *sd,
            dy.strides[-1],
            dx.ptr + 4 * offsets[2],
            *sx,
            dx.strides[-1],
        )


def _batch_axes(shape: tuple, strides_list: list, keep: int):
    """Split coalesced axes into a loop over leading ones and ``keep`` inner ones.

    Yields ``(inner dims, element offsets, inner strides)``: the inner dims
    padded in front with 1 to ``keep`` axes, one offset and one tuple of
    ``keep`` strides per operand.
    """
    dims, strides = coalesce(tuple(shape), [tuple(st) for st in strides_list])
    n_lead = max(0, len(dims) - keep)
    inner = (1,) * (keep - len(dims[n_lead:])) + tuple(dims[n_lead:])
    padded = [(0,) * (keep - len(st[n_lead:])) + tuple(st[n_lead:]) for st in strides]
    for index in np.ndindex(*dims[:n_lead]):
        offsets = [sum(i * s for i, s in zip(index, st[:n_lead])) for st in strides]
        yield inner, offsets, padded


def install_attention_ops(cls: type) -> None:
    """Give the handler class ``cls`` the attention ops, with the table's docs."""
    for function in (batch_dot_tt, batch_dot_add_tt, masked_softmax_t, softmax_deriv_t):
        function.__doc__ = OPS[function.__name__].doc
        function.__qualname__ = f'{cls.__name__}.{function.__name__}'
        setattr(cls, function.__name__, function)
    abc.update_abstractmethods(cls)  # type: ignore[arg-type]
