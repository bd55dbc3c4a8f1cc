"""The op table's ``'attention'`` section (see :mod:`brainstorm.handlers.ops`).

Batched matrix products over the middle axes of time-major tensors and a
masked softmax with its deltas: what
``MultiHeadAttention`` is composed of.
"""

from __future__ import annotations

from brainstorm.handlers.op_spec import Op

__all__ = ['ATTENTION_OPS']

#: The rows of the ``'attention'`` section.
ATTENTION_OPS: tuple[Op, ...] = (
    Op(
        'batch_dot_tt',
        'a, b, out, transa: bool = False, transb: bool = False',
        """Batched matrix products over the middle axes: ``out = op(a) @ op(b)``.

        The first and the last axis of each operand are the two axes of
        its matrices; all axes between them are batch axes, equal for
        ``a``, ``b`` and ``out``: for every batch index ``i``,
        ``out[:, i, :] = op(a[:, i, :]) @ op(b[:, i, :])``, where ``op``
        transposes the matrix if ``transa`` (``transb``) is set. This is
        the time-major layout of attention: with ``q`` and ``k`` of shape
        ``(T, B, heads, d)``, ``batch_dot_tt(q, k, scores, transb=True)``
        gives the ``(T, B, heads, T)`` scores of every sequence and head.

        Args:
            a: ``(M, *batch, K)``, or ``(K, *batch, M)`` with ``transa``.
            b: ``(K, *batch, N)``, or ``(N, *batch, K)`` with ``transb``.
            out: ``(M, *batch, N)``, overwritten; must not overlap ``a``
                or ``b``.
            transa: transpose the matrices of ``a``.
            transb: transpose the matrices of ``b``.
        """,
        check='batch_dot',
    ),
    Op(
        'batch_dot_add_tt',
        'a, b, out, transa: bool = False, transb: bool = False',
        """Like :meth:`batch_dot_tt`, but ADDS the products to ``out``.""",
        check='batch_dot',
    ),
    Op(
        'masked_softmax_t',
        'x, mask, out, causal: bool = False',
        """Softmax of attention scores over their last axis, with masks.

        ``x`` holds scores ``x[t, i..., s]`` of query position ``t``
        for key position ``s`` (``i...`` are batch axes, the first of
        them the sequence ``b``). A key takes part if ``mask[s, b] != 0``
        and, with ``causal``, ``s <= t``; ``out[t, i..., :]`` is the
        softmax over those keys and 0 at all others. A query with
        ``mask[t, b] == 0``, or without any key, gets a row of zeros.
        So padding positions neither give nor receive attention.

        Args:
            x: ``(T, B, ..., S)``.
            mask: None (every position is real) or ``(L, B, 1)`` with
                ``L >= max(T, S)``; non-zero marks a real position.
            out: of ``x``'s shape, overwritten; may alias ``x``.
            causal: let position ``t`` attend only to ``s <= t``.
        """,
        alias=True,
        optional=('mask',),
        check='masked_softmax',
    ),
    Op(
        'softmax_deriv_t',
        'y, dy, dx',
        """Deltas of a softmax over the last axis: ``dx = y * (dy - sum(dy * y))``.

        The sum runs over the last axis (keepdims). Entries where
        ``y == 0`` (masked ones of :meth:`masked_softmax_t`) get 0.

        Args:
            y: the softmax output, any shape.
            dy: the deltas of ``y``, of ``y``'s shape.
            dx: of ``y``'s shape, overwritten; may alias ``dy``.
        """,
        writes=('dx',),
        alias=True,
    ),
)
