"""The DebugHandler checks of the attention ops.

The ops are those of the ``attention`` section of
:mod:`brainstorm.handlers.ops_layers`.

Functions taking the debug handler as ``self``; the class binds them as its
``_check_batch_dot`` and ``_check_masked_softmax``.
"""

from __future__ import annotations

__all__ = ['check_batch_dot', 'check_masked_softmax']


def check_batch_dot(self, op: str, args: dict) -> None:
    """Operands ``(rows, batch..., cols)`` with one batch shape and fitting matrices."""
    a, b, out = args['a'], args['b'], args['out']
    for name in ('a', 'b', 'out'):
        if len(args[name].shape) < 2:
            self._fail(
                op,
                f"argument '{name}' must have at least 2 axes (rows, "
                f'batch axes..., columns). Received: shape {args[name].shape}',
            )
    batch = out.shape[1:-1]
    for name in ('a', 'b'):
        if args[name].shape[1:-1] != batch:
            self._fail(
                op,
                f"argument '{name}' must have the batch axes {batch} of "
                f"'out'. Received: shape {args[name].shape}",
            )
    a_rows, a_cols = a.shape[0], a.shape[-1]
    b_rows, b_cols = b.shape[0], b.shape[-1]
    if args['transa']:
        a_rows, a_cols = a_cols, a_rows
    if args['transb']:
        b_rows, b_cols = b_cols, b_rows
    if a_cols != b_rows:
        self._fail(
            op,
            f'op(a) has matrices of shape {(a_rows, a_cols)} and op(b) '
            f'{(b_rows, b_cols)}; their inner dimensions must match.',
        )
    self._expect_shape(op, 'out', out, [(a_rows, *batch, b_cols)])


def check_masked_softmax(self, op: str, args: dict) -> None:
    """``out`` of ``x``'s shape; a mask ``(L, B, 1)`` with ``L >= max(T, S)``."""
    x, mask = args['x'], args['mask']
    self._check_same(op, {'x': x, 'out': args['out']})
    if mask is None:
        if len(x.shape) < 2:
            self._expect_ndim(op, 'x', x, 2)
        return
    if len(x.shape) < 3:
        self._fail(
            op,
            f"argument 'x' must have at least 3 axes (T, B, ..., S) with a "
            f'mask. Received: shape {x.shape}',
        )
    self._expect_ndim(op, 'mask', mask, 3)
    needed = max(x.shape[0], x.shape[-1])
    if mask.shape[1:] != (x.shape[1], 1) or mask.shape[0] < needed:
        self._fail(
            op,
            f"argument 'mask' must have shape (L, {x.shape[1]}, 1) with L >= "
            f'{needed}. Received: shape {mask.shape}',
        )
