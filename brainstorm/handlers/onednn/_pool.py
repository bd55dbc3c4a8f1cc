"""Max pooling's ``argmax`` and oneDNN's workspace, each from the other.

oneDNN's max pooling records, per output cell, which cell ``(u, v)`` of
the window held the maximum: ``u * kw + v``, in its workspace (uint8 for
windows of fewer than 256 cells, else int32). The Pooling2D layer keeps
NumpyHandler's ``argmax`` instead, the flat index of that cell in the
image: ``(r * W + q) * C + c`` for the image cell ``(r, q)``.

The forward pass computes ``argmax`` from the workspace: integer
arithmetic, then the two float operations NumpyHandler ends with, so the
values are NumpyHandler's bit for bit. The backward pass needs the
workspace again. Each thread keeps, per ``argmax`` address (a view of
another shape there, such as a smaller last batch, replaces it), the
workspace its forward pass wrote and a copy of the ``argmax`` written with
it (about 1.25 to 2 times the pooled outputs' memory, for at most
:data:`POOL_MEMOS` addresses, and none of networks that are gone or were
laid out for another batch size: see :func:`forward_memo`); when
``argmax`` still
holds those values, the backward pass takes that workspace. Otherwise
(changed values, another thread, no forward pass on this handler) the
caller translates ``argmax`` back (:func:`workspace_from_argmax`). The
translation is exact, so equal values give the same workspace either way.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict

import numpy as np

from brainstorm.handlers import _numpy_maxpool as _maxpool

__all__ = [
    'POOL_MEMOS',
    'argmax_from_workspace',
    'forward_memo',
    'known_workspace',
    'workspace_from_argmax',
]

#: the most (argmax, workspace) pairs each thread keeps (the oldest go first)
POOL_MEMOS = 32


def _base(array) -> np.ndarray:
    """The array that owns ``array``'s memory (a network's flat buffer)."""
    while isinstance(array.base, np.ndarray):
        array = array.base
    return array


class _Memo:
    """The workspace a forward pass wrote, and the ``argmax`` it gave.

    It notes (weakly) the array owning ``argmax``'s memory, and the
    images in ``argmax``: the memos of a network that is gone, or of its
    layout for another batch size, are dropped when the next memo is made
    (see :func:`forward_memo`).
    """

    __slots__ = ('argmax', 'layout', 'owner', 'plan', 'workspace')

    def __init__(self, plan, argmax, dtype, workspace_dtype):
        self.plan = plan
        self.layout = (argmax.shape, argmax.strides)
        self.owner = weakref.ref(_base(argmax))
        self.argmax = np.empty(argmax.shape, dtype)
        self.workspace = np.empty(argmax.shape, workspace_dtype)

    def outdated_by(self, owner, images: int) -> bool:
        """Is this memo stale once ``owner`` holds an argmax of ``images``?

        Its array is gone, or it lies in the same array laid out for
        another number of images (a network's buffers for another batch
        size: its old addresses now hold other buffers).
        """
        own = self.owner()
        return own is None or (own is owner and self.layout[0][0] != images)

    def serves(self, plan, argmax) -> bool:
        """Is this the memo of ``plan`` writing ``argmax`` (its layout)?"""
        return self.plan is plan and self.layout == (argmax.shape, argmax.strides)


def _memos(handler) -> OrderedDict:
    """The calling thread's memos by argmax address (made on first use)."""
    handler._scratch  # noqa: B018 - makes the thread's state
    state = handler._per_thread
    memos = getattr(state, 'onednn_pool_memos', None)
    if memos is None:
        memos = state.onednn_pool_memos = OrderedDict()
    return memos


def _address(array) -> int:
    return array.__array_interface__['data'][0]


def forward_memo(handler, plan, argmax) -> _Memo:
    """The memo a forward pass of ``plan`` writing ``argmax`` fills.

    Its ``workspace`` receives oneDNN's; the caller then copies the
    ``argmax`` it computes into its ``argmax``. One memo per address: a
    view of other shape at the same address replaces it. A new memo also
    drops the memos whose ``argmax`` lay in an array that is gone (a
    network dropped) or in its own array laid out for another number of
    images (a network fed another batch size puts its buffers at other
    addresses), so neither dropped networks nor changing batch sizes pile
    up memos. Making a memo is rare: a network's passes reuse theirs.
    """
    memos = _memos(handler)
    key = _address(argmax)
    memo = memos.get(key)
    if memo is None or not memo.serves(plan, argmax):
        memos.pop(key, None)
        owner, images = _base(argmax), argmax.shape[0]
        for stale in [k for k, m in memos.items() if m.outdated_by(owner, images)]:
            del memos[stale]
        while len(memos) >= POOL_MEMOS:
            memos.popitem(last=False)
        memo = memos[key] = _Memo(plan, argmax, handler.dtype, plan.workspace_dtype)
    else:
        memos.move_to_end(key)
    return memo


def known_workspace(handler, plan, argmax):
    """The workspace of the forward pass that wrote ``argmax``'s values, or None."""
    memo = _memos(handler).get(_address(argmax))
    if memo is None or not memo.serves(plan, argmax):
        return None
    same = handler._buffer('onednn_pool_same', argmax.shape, np.bool_)
    np.equal(argmax, memo.argmax, out=same)
    return memo.workspace if same.all() else None


def _ints(bound: int):
    """int16 where the results stay within ``bound`` in size, else int64.

    int16 passes are the fastest; an image so wide that int16 does not
    do is rare enough for int64.
    """
    return np.int16 if bound <= np.iinfo(np.int16).max else np.int64


def argmax_from_workspace(handler, workspace, window, top_left, stride, image,
                          argmax) -> None:  # fmt: skip
    """Write NumpyHandler's ``argmax`` of the cells the workspace names.

    ``image`` is ``(H, W, C)`` of the inputs, ``top_left`` the padding
    above and left of them.

    NumpyHandler computes ``shifted - score * C`` with the constants of
    ``_numpy_maxpool.ranked_base`` and ``score = top - (u * W + v)``. Here
    ``score`` comes from ``(u, v) = divmod(workspace, kw)`` in integers
    (exact), then the same two float operations give the same bits,
    whatever the image size.
    """
    kh, kw = window
    _, width, channels = image
    top, shifted = _maxpool.ranked_base(
        handler, window, top_left, stride, argmax.shape[1:], width
    )
    # the scores lie in [1, top]; a partial result may wrap around in
    # between (integer arithmetic is modular), the scores do not
    ints = _ints(top)
    rows = handler._buffer('onednn_pool_rows', workspace.shape, workspace.dtype)
    np.floor_divide(workspace, workspace.dtype.type(kw), out=rows)  # u
    score = handler._buffer('onednn_pool_score', workspace.shape, ints)
    np.multiply(rows, ints(kw - width), out=score, dtype=ints)
    np.subtract(score, workspace, out=score, dtype=ints)  # -(u * W + v)
    np.add(score, ints(top), out=score)
    dtype = handler.dtype
    np.multiply(score, dtype(channels), out=argmax, dtype=dtype)
    np.subtract(shifted, argmax, out=argmax)


def workspace_from_argmax(handler, argmax, window, top_left, stride, image,
                          workspace) -> None:  # fmt: skip
    """Write the workspace ``u * kw + v`` of the cells ``argmax`` names.

    The cell ``(r, q) = divmod(argmax // C, W)`` of the image (two
    divisions by scalars: NumPy's divmod of arrays is 8x slower), less the
    window's first cell ``(i * sy - top, j * sx - left)``, is ``(u, v)``:
    exact for every geometry (a table from ``u * W + v`` would confuse
    cells of windows wider than the image). Values that name no cell of
    the window (an ``argmax`` not written by a forward pass) are clipped
    into the window, so oneDNN never reads a cell outside it.
    """
    kh, kw = window
    height, width, channels = image
    out_h, out_w = argmax.shape[1:3]
    # argmax (< H W C), r * kw + q and the windows' first cells (padding is
    # less than the window here) stay below this in size
    bound = (height + kh) * (width + kw) * channels
    ints = np.int32 if bound < 2**31 else np.int64
    cells = handler._buffer('onednn_pool_cells', argmax.shape, ints)
    np.copyto(cells, argmax, casting='unsafe')
    np.floor_divide(cells, ints(channels), out=cells)  # r * W + q
    rows = handler._buffer('onednn_pool_rows_back', argmax.shape, ints)
    np.floor_divide(cells, ints(width), out=rows)  # r
    np.multiply(rows, ints(width - kw), out=rows)
    np.subtract(cells, rows, out=cells)  # r * kw + q
    key = ('onednn_pool_origin', tuple(top_left), tuple(stride), out_h, out_w, kw, ints)
    origin = handler._constants.get(key)
    if origin is None:
        r0 = np.arange(out_h)[:, None, None] * stride[0] - top_left[0]
        q0 = np.arange(out_w)[None, :, None] * stride[1] - top_left[1]
        origin = handler._constants[key] = (r0 * kw + q0).astype(ints)
    np.subtract(cells, origin, out=cells)  # u * kw + v
    np.clip(cells, 0, kh * kw - 1, out=cells)
    np.copyto(workspace, cells, casting='unsafe')
