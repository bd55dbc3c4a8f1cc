"""The pooling ops of :class:`PyCudaHandler` (kernels in ``cu/pool.cu``).

Max and average pooling gather: one thread per output cell forward, one
per input cell backward, so no atomics and every result is deterministic.
The image geometry (sizes, padding per side, strides) comes from the
handler's ``_geometry`` and is checked there.
"""

from __future__ import annotations

from brainstorm.handlers.cuda.views import check_shapes

__all__ = ['PoolingKernels']


class PoolingKernels:
    """Max and average pooling on the GPU (a mixin of :class:`PyCudaHandler`)."""

    def maxpool2d_forward_batch(  # noqa: D102 - documented in the op table
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        argmax,
    ) -> None:
        geometry = self._geometry(  # type: ignore[attr-defined]
            inputs,
            window,
            outputs,
            padding,
            stride,
            inputs.shape[3],
            'maxpool2d_forward_batch',
        )
        check_shapes('maxpool2d_forward_batch', outputs, argmax)
        self._launch(  # type: ignore[attr-defined]
            'pool',
            'maxpool_forward',
            outputs.size,
            *geometry,
            inputs.ptr,
            *inputs.strides,
            outputs.ptr,
            *outputs.strides,
            argmax.ptr,
            *argmax.strides,
        )

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
    ) -> None:
        geometry = self._geometry(  # type: ignore[attr-defined]
            inputs,
            window,
            out_deltas,
            padding,
            stride,
            inputs.shape[3],
            'maxpool2d_backward_batch',
        )
        check_shapes('maxpool2d_backward_batch', out_deltas, argmax)
        check_shapes('maxpool2d_backward_batch', inputs, in_deltas)
        self._launch(  # type: ignore[attr-defined]
            'pool',
            'maxpool_backward_add',
            in_deltas.size,
            *geometry,
            argmax.ptr,
            *argmax.strides,
            out_deltas.ptr,
            *out_deltas.strides,
            in_deltas.ptr,
            *in_deltas.strides,
        )

    def avgpool2d_forward_batch(  # noqa: D102 - documented in the op table
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
    ) -> None:
        geometry = self._geometry(  # type: ignore[attr-defined]
            inputs,
            window,
            outputs,
            padding,
            stride,
            inputs.shape[3],
            'avgpool2d_forward_batch',
        )
        self._launch(  # type: ignore[attr-defined]
            'pool',
            'avgpool_forward',
            outputs.size,
            *geometry,
            inputs.ptr,
            *inputs.strides,
            outputs.ptr,
            *outputs.strides,
        )

    def avgpool2d_backward_batch(  # noqa: D102 - documented in the op table
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        in_deltas,
        out_deltas,
    ) -> None:
        geometry = self._geometry(  # type: ignore[attr-defined]
            inputs,
            window,
            out_deltas,
            padding,
            stride,
            inputs.shape[3],
            'avgpool2d_backward_batch',
        )
        check_shapes('avgpool2d_backward_batch', inputs, in_deltas)
        self._launch(  # type: ignore[attr-defined]
            'pool',
            'avgpool_backward_add',
            in_deltas.size,
            *geometry,
            out_deltas.ptr,
            *out_deltas.strides,
            in_deltas.ptr,
            *in_deltas.strides,
        )
