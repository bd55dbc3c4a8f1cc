"""OneDnnHandler's max and average pooling (a mixin of the handler).

The ops run as oneDNN pooling primitives on NHWC images, where the
operands allow (``OneDnnHandler._checked``: float32, of matching shapes,
written ones writeable; no window of padding only; no NaN or inf before
max pooling); elsewhere the next class in the handler's MRO,
NumpyHandler, runs them. Max pooling keeps NumpyHandler's ``argmax``
(``brainstorm.handlers.onednn._pool`` translates it from and to oneDNN's
workspace).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from brainstorm.handlers import _numpy_conv as _conv
from brainstorm.handlers import _numpy_maxpool as _maxpool
from brainstorm.handlers.onednn import _pool
from brainstorm.handlers.onednn._operands import (
    _address,
    _finite,
    _has_empty_window,
)
from brainstorm.handlers.onednn.plans import PoolPlan
from brainstorm.shapes import check_image_geometry, padding_sides

__all__ = ['PoolingOps']

if TYPE_CHECKING:
    from brainstorm.handlers.numpy_handler import NumpyHandler

    class _Host(NumpyHandler):
        """What the mixin uses of :class:`OneDnnHandler`, for mypy."""

        def _plan(self, key, make): ...
        def _checked(self, images, read, written) -> bool: ...
        def _dense(self, name: str, array, copy_in: bool = True): ...
        def _scratchpad(self, *primitives) -> int: ...
        def _delta_target(self, in_deltas, overwrite: bool, *read): ...
        def _deliver(self, in_deltas, dx, overwrite: bool) -> None: ...

else:
    _Host = object


class PoolingOps(_Host):
    """Max and average pooling on oneDNN (a mixin of :class:`OneDnnHandler`)."""

    def _pool_plan(self, kind, inputs, window, outputs, padding, stride, read, written):
        """The plan, or None where NumpyHandler's op must run (see ``_conv_plan``)."""
        if not self._checked((inputs, outputs), read, written):
            return None
        # as for convolutions: sizes breaking the contract are refused
        check_image_geometry(
            f'{kind} pooling', inputs.shape[1:3], window, padding, stride,
            outputs.shape[1:3],
        )  # fmt: skip
        window = tuple(int(k) for k in window)
        stride = tuple(int(s) for s in stride)
        top, _, left, _ = padding_sides(padding)
        key = (kind, inputs.shape, outputs.shape, window, top, left, stride)
        if _has_empty_window(
            window, (top, left), stride, outputs.shape[1:3], inputs.shape[1:3]
        ):
            return None
        return self._plan(
            key,
            lambda: PoolPlan(
                self._lib,
                kind,
                inputs.shape,
                outputs.shape,
                window,
                (top, left),
                stride,
            ),
        )

    def maxpool2d_forward_batch(  # noqa: D102 - documented in the op table
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        argmax,
    ) -> None:
        plan = self._pool_plan(
            'max', inputs, window, outputs, padding, stride,
            [], [(outputs, np.shape(outputs)), (argmax, np.shape(outputs))],
        )  # fmt: skip
        if plan is None:  # NumpyHandler's op, which checks argmax's range too
            super().maxpool2d_forward_batch(
                inputs, window, outputs, padding, stride, argmax
            )
            return
        _maxpool.check_argmax_range(
            'maxpool2d_forward_batch', inputs, window, outputs, padding, stride,
            self.dtype,
        )  # fmt: skip
        x = self._dense('onednn_x', inputs)
        if not _finite(x):
            # oneDNN's maximum skips NaN; NumpyHandler's passes it on
            super().maxpool2d_forward_batch(
                inputs, window, outputs, padding, stride, argmax
            )
            return
        y = self._dense('onednn_y', outputs, copy_in=False)
        memo = _pool.forward_memo(self, plan, argmax)
        with plan.lock:
            plan.forward.run(
                (_address(x), _address(y), _address(memo.workspace)),
                self._scratchpad(plan.forward),
            )
        if y is not outputs:
            np.copyto(outputs, y)
        _pool.argmax_from_workspace(
            self, memo.workspace, window, _conv._top_left(padding), stride,
            inputs.shape[1:], argmax,
        )  # fmt: skip
        np.copyto(memo.argmax, argmax)

    def maxpool2d_backward_batch(  # noqa: D102 - documented in the op table
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
        plan = self._pool_plan(
            'max', inputs, window, outputs, padding, stride,
            [(argmax, np.shape(outputs)), (out_deltas, np.shape(outputs))],
            [(in_deltas, np.shape(inputs))],
        )  # fmt: skip
        if plan is None:  # NumpyHandler's op, which checks argmax's range too
            super().maxpool2d_backward_batch(
                inputs, window, outputs, padding, stride, argmax, in_deltas,
                out_deltas, overwrite_in_deltas=overwrite_in_deltas,
            )  # fmt: skip
            return
        _maxpool.check_argmax_range(
            'maxpool2d_backward_batch', inputs, window, out_deltas, padding,
            stride, self.dtype,
        )  # fmt: skip
        ws = _pool.known_workspace(self, plan, argmax)
        if ws is None:
            ws = self._buffer('onednn_ws', argmax.shape, plan.workspace_dtype)
            _pool.workspace_from_argmax(
                self,
                argmax,
                window,
                _conv._top_left(padding),
                stride,
                inputs.shape[1:],
                ws,
            )
        self._pool_backward(plan, ws, in_deltas, out_deltas, overwrite_in_deltas)

    def _pool_backward(self, plan, ws, in_deltas, out_deltas, overwrite) -> None:
        """Add (or write) the input deltas of pooling ``plan`` to ``in_deltas``."""
        dy = self._dense('onednn_y', out_deltas)
        dx = self._delta_target(in_deltas, overwrite, dy)
        backward = plan.backward
        pointers = [_address(dy), _address(dx)]
        if ws is not None:
            pointers.append(_address(ws))
        with plan.lock:
            backward.run(pointers, self._scratchpad(backward))
        self._deliver(in_deltas, dx, overwrite)

    def avgpool2d_forward_batch(  # noqa: D102 - documented in the op table
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
    ) -> None:
        plan = self._pool_plan(
            'avg', inputs, window, outputs, padding, stride,
            [], [(outputs, np.shape(outputs))],
        )  # fmt: skip
        if plan is None:
            super().avgpool2d_forward_batch(inputs, window, outputs, padding, stride)
            return
        x = self._dense('onednn_x', inputs)
        y = self._dense('onednn_y', outputs, copy_in=False)
        with plan.lock:
            plan.forward.run((_address(x), _address(y)), self._scratchpad(plan.forward))
        if y is not outputs:
            np.copyto(outputs, y)

    def avgpool2d_backward_batch(  # noqa: D102 - documented in the op table
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
        plan = self._pool_plan(
            'avg', inputs, window, outputs, padding, stride,
            [(out_deltas, np.shape(outputs))], [(in_deltas, np.shape(inputs))],
        )  # fmt: skip
        if plan is None:
            super().avgpool2d_backward_batch(
                inputs, window, outputs, padding, stride, in_deltas, out_deltas,
                overwrite_in_deltas=overwrite_in_deltas,
            )  # fmt: skip
            return
        self._pool_backward(plan, None, in_deltas, out_deltas, overwrite_in_deltas)
