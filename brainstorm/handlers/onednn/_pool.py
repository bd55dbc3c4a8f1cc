"""Max pooling's ``argmax`` and oneDNN's workspace, each from the other.

oneDNN's max pooling records, per output cell, which cell ``(u, v)`` of
the window held the maximum: ``u * kw + v``, in its workspace (uint8 for
windows of fewer than 256 cells, else int32). The Pooling2D layer keeps
NumpyHandler's ``argmax`` instead, the flat index of that cell in the
image: ``base + (u * W + v) * C``, with ``base`` the index of the window's
first cell (``_numpy_conv._pool_base``), ``W`` the image width and ``C``
the channels.

The forward pass computes ``argmax`` from the workspace with integer
arithmetic (``u * W + v = ws + (ws // kw) * (W - kw)``, then one float
multiply and add: the values NumpyHandler computes, bit for bit). The
backward pass needs the workspace again. Each thread keeps, per ``argmax``
array (address, shape, strides), the workspace its forward pass wrote and
a copy of the ``argmax`` written with it; when ``argmax`` still holds
those values, the backward pass takes that workspace. Otherwise (changed
values, another thread, no forward pass on this handler) the caller
translates ``argmax`` back. Equal values give the same translation, so
the workspace used is the same either way.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

__all__ = ['POOL_MEMOS', 'argmax_from_workspace', 'forward_memo', 'known_workspace']

#: the most (argmax, workspace) pairs each thread keeps (the oldest go first)
POOL_MEMOS = 32


class _Memo:
    """The workspace a forward pass wrote, and the ``argmax`` it gave."""

    __slots__ = ('argmax', 'plan', 'workspace')

    def __init__(self, plan, shape, dtype, workspace_dtype):
        self.plan = plan
        self.argmax = np.empty(shape, dtype)
        self.workspace = np.empty(shape, workspace_dtype)


def _memos(handler) -> OrderedDict:
    """The calling thread's memos (made on first use)."""
    handler._scratch  # noqa: B018 - makes the thread's state
    state = handler._per_thread
    memos = getattr(state, 'onednn_pool_memos', None)
    if memos is None:
        memos = state.onednn_pool_memos = OrderedDict()
    return memos


def _key(array) -> tuple:
    return (array.__array_interface__['data'][0], array.shape, array.strides)


def forward_memo(handler, plan, argmax) -> _Memo:
    """The memo a forward pass of ``plan`` writing ``argmax`` fills.

    Its ``workspace`` receives oneDNN's; the caller then copies the
    ``argmax`` it computes into its ``argmax``.
    """
    memos = _memos(handler)
    key = _key(argmax)
    memo = memos.get(key)
    if memo is None or memo.plan is not plan:
        memos.pop(key, None)
        while len(memos) >= POOL_MEMOS:
            memos.popitem(last=False)
        memo = memos[key] = _Memo(
            plan, argmax.shape, handler.dtype, plan.workspace_dtype
        )
    else:
        memos.move_to_end(key)
    return memo


def known_workspace(handler, plan, argmax):
    """The workspace of the forward pass that wrote ``argmax``'s values, or None."""
    memo = _memos(handler).get(_key(argmax))
    if memo is None or memo.plan is not plan:
        return None
    same = handler._buffer('onednn_pool_same', argmax.shape, np.bool_)
    np.equal(argmax, memo.argmax, out=same)
    return memo.workspace if same.all() else None


def argmax_from_workspace(handler, workspace, window, width: int, channels: int,
                          base, argmax) -> None:  # fmt: skip
    """Write ``base + (u * width + v) * channels`` into ``argmax``.

    ``(u, v)`` is ``divmod(workspace, kw)``; ``u * width + v`` is computed
    in int32 (exact), its product with ``channels`` and the sum with
    ``base`` in the handler's float type (as NumpyHandler does).
    """
    kw = window[1]
    rows = handler._buffer('onednn_pool_rows', workspace.shape, workspace.dtype)
    np.floor_divide(workspace, workspace.dtype.type(kw), out=rows)
    cells = handler._buffer('onednn_pool_cells', workspace.shape, np.int32)
    np.multiply(rows, np.int32(width - kw), out=cells, dtype=np.int32)
    np.add(cells, workspace, out=cells, dtype=np.int32)
    dtype = handler.dtype
    np.multiply(cells, dtype(channels), out=argmax, dtype=dtype)
    np.add(argmax, base, out=argmax)
