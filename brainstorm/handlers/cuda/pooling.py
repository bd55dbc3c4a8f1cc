"""The pooling ops of :class:`PyCudaHandler` (kernels in ``cu/pool.cu``).

Max and average pooling gather: one thread per output cell forward, one
per input cell backward, so no atomics and every result is deterministic.
The image geometry (sizes, padding per side, strides) comes from the
handler's ``_geometry`` and is checked there.
"""

from __future__ import annotations

from brainstorm.handlers._numpy_maxpool import check_argmax_range
from brainstorm.handlers.cuda.views import check_shapes

__all__ = ['PoolingKernels']


class PoolingKernels:
    """Max and average pooling on the GPU (a mixin of :class:`PyCudaHandler`)."""

    def _pool(
        self, op: str, kernel: str, count: int, geometry_args, *arrays, same=()
    ) -> None:
        """Launch ``kernel`` of ``cu/pool.cu`` on ``count`` threads.

        ``geometry_args`` are ``(inputs, window, outputs, padding, stride)``
        for the handler's ``_geometry``, which checks them (backward, the
        output deltas stand for the outputs); then each pair in ``same``
        must have one shape. ``arrays`` go to the kernel, pointer and
        strides each, in its order.
        """
        channels = geometry_args[0].shape[3]
        geometry = self._geometry(*geometry_args, channels, op)  # type: ignore[attr-defined]
        for pair in same:
            check_shapes(op, *pair)
        pointers = [value for a in arrays for value in (a.ptr, *a.strides)]
        self._launch('pool', kernel, count, *geometry, *pointers)  # type: ignore[attr-defined]

    def maxpool2d_forward_batch(  # noqa: D102 - documented in the op table
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        argmax,
    ) -> None:
        check_argmax_range(
            'maxpool2d_forward_batch', inputs, window, outputs, padding, stride,
            self.dtype, integers=True,  # type: ignore[attr-defined]
        )  # fmt: skip
        geometry_args = (inputs, window, outputs, padding, stride)
        self._pool('maxpool2d_forward_batch', 'maxpool_forward', outputs.size,
                   geometry_args, inputs, outputs, argmax,
                   same=[(outputs, argmax)])  # fmt: skip

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
        check_argmax_range(
            'maxpool2d_backward_batch', inputs, window, out_deltas, padding,
            stride, self.dtype, integers=True,  # type: ignore[attr-defined]
        )  # fmt: skip
        geometry_args = (inputs, window, out_deltas, padding, stride)
        if overwrite_in_deltas:  # the kernel adds
            self.fill(in_deltas, 0.0)  # type: ignore[attr-defined]
        self._pool('maxpool2d_backward_batch', 'maxpool_backward_add',
                   in_deltas.size, geometry_args, argmax, out_deltas, in_deltas,
                   same=[(out_deltas, argmax), (inputs, in_deltas)])  # fmt: skip

    def avgpool2d_forward_batch(  # noqa: D102 - documented in the op table
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
    ) -> None:
        geometry_args = (inputs, window, outputs, padding, stride)
        self._pool('avgpool2d_forward_batch', 'avgpool_forward', outputs.size,
                   geometry_args, inputs, outputs)  # fmt: skip

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
        geometry_args = (inputs, window, out_deltas, padding, stride)
        if overwrite_in_deltas:  # the kernel adds
            self.fill(in_deltas, 0.0)  # type: ignore[attr-defined]
        self._pool('avgpool2d_backward_batch', 'avgpool_backward_add',
                   in_deltas.size, geometry_args, out_deltas, in_deltas,
                   same=[(inputs, in_deltas)])  # fmt: skip
