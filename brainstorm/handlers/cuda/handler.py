"""The GPU handler: every :class:`Handler` op on an NVIDIA GPU.

How it works (strided views, kernels, matrix products, randomness) is the
subject of the package docstring, :mod:`brainstorm.handlers.cuda`.
"""

from __future__ import annotations

import functools
import math
import operator

import numpy as np

from brainstorm.__about__ import install_hint
from brainstorm.arguments import SEED, Arg, Optional
from brainstorm.handlers.base_handler import FirstUseRandomState, Handler
from brainstorm.handlers.cuda import kernels
from brainstorm.handlers.cuda.attention import install_attention_ops
from brainstorm.handlers.cuda.cublas import Cublas, row_major_gemm, row_major_ld
from brainstorm.handlers.cuda.embedding import install_embedding_ops
from brainstorm.handlers.cuda.pooling import PoolingKernels
from brainstorm.handlers.cuda.recurrent import RecurrentKernels
from brainstorm.handlers.cuda.views import (
    GPUView,
    broadcast_mv,
    check_channels,
    check_shapes,
    coalesce,
)
from brainstorm.handlers.ops import OPS, Op, install_ops
from brainstorm.randomness import RandomState
from brainstorm.shapes import padding_sides

__all__ = ['PyCudaHandler', 'INSTALL_HINT']

INSTALL_HINT = (
    'PyCudaHandler needs PyCUDA, the CUDA toolkit (nvcc) and an '
    f'NVIDIA GPU. Install PyCUDA with {install_hint("pycuda")} '
    'after installing the CUDA toolkit.'
)

MAX_ELEMENTS = 2**30  # kernels index with int
MAX_BLOCKS = 4096  # grid size of the grid-stride loops
COL_ELEMENTS = 2**25  # im2col buffer budget per chunk of images


# ------------------------------------------------ compiled code per context

_MODULES: dict = {}  # (context handle, module name) -> (SourceModule, {kernel: fn})
_BLAS: dict = {}  # context handle -> Cublas


@functools.cache
def _arg_formats(module: str) -> dict:
    return kernels.kernel_arg_formats(kernels.KERNEL_SOURCES[module])


def _grid(n: int, block: int = kernels.BLOCK_SIZE) -> tuple:
    return (max(1, min(-(-n // block), MAX_BLOCKS)), 1)


def _check_size(n: int, what: str = 'array') -> None:
    if n >= MAX_ELEMENTS:
        raise ValueError(
            f'PyCudaHandler supports arrays of fewer than 2**30 '
            f'elements. Received: an {what} of {n} elements.'
        )


def _pad4(values: tuple, fill: int) -> tuple:
    return (fill,) * (4 - len(values)) + tuple(values)


def _out_size(size: int, kernel: int, before: int, after: int, stride: int) -> int:
    return (size + before + after - kernel) // stride + 1


class PyCudaHandler(RecurrentKernels, PoolingKernels, Handler):
    """Runs every op on an NVIDIA GPU with PyCUDA kernels and cuBLAS.

    Arrays are :class:`GPUView` objects (float32). The package docstring
    (:mod:`brainstorm.handlers.cuda`) tells how strided views, kernels,
    matrix products and randomness work.

    Args:
        seed: seed of the handler's random state ``rnd``. If None, the
            seed is drawn from :data:`brainstorm.randomness.global_rnd`
            when ``rnd`` is first needed.

    Raises:
        ImportError: if PyCUDA cannot be imported (with install hints).
    """

    __arguments__ = {
        'seed': Arg(Optional(SEED), init_only=True),
    }

    dtype = np.float32
    array_type = GPUView
    context = 'cuda'
    rnd = FirstUseRandomState()

    def __init__(self, seed: int | None = None):
        try:
            import pycuda.driver as drv
            from pycuda import gpuarray  # noqa: F401
            from pycuda.compiler import SourceModule  # noqa: F401
        except ImportError as err:
            raise ImportError(f'{INSTALL_HINT} ({err})') from err
        drv.init()
        ctx = drv.Context.get_current()
        if ctx is None:
            import pycuda.autoinit  # noqa: F401

            ctx = drv.Context.get_current()
        self._context_key = ctx.handle
        self.rnd = None if seed is None else RandomState(seed)
        self._scratch_buffers: dict = {}
        blas = _BLAS.get(self._context_key)
        if blas is None:
            blas = _BLAS[self._context_key] = Cublas()
            blas.set_stream(None)
        self._blas = blas
        self.EMPTY = self.allocate((0,))

    def __describe__(self) -> dict:
        """``{'@type': 'PyCudaHandler'}``."""
        return {'@type': 'PyCudaHandler'}

    def __init_from_description__(self, description: dict) -> None:
        """Recreate from :meth:`__describe__`'s output (fresh ``rnd``)."""
        type(self).__init__(self)

    def __getstate__(self):
        # device memory, kernels and the cuBLAS handle do not travel
        return {'rnd': self.rnd}

    def __setstate__(self, state):
        self.__init__()
        self.rnd = state['rnd']

    # -------------------------------------------------------- internals ---

    def _function(self, module: str, kernel: str):
        """The prepared kernel, compiling its module once per context."""
        key = (self._context_key, module)
        entry: tuple | None = _MODULES.get(key)
        if entry is None:
            from pycuda.compiler import SourceModule

            entry = _MODULES[key] = (
                SourceModule(kernels.KERNEL_SOURCES[module], no_extern_c=True),
                {},
            )
        source_module, functions = entry
        function = functions.get(kernel)
        if function is None:
            function = source_module.get_function(kernel)
            function.prepare(_arg_formats(module)[kernel])
            functions[kernel] = function
        return function

    def _launch(self, module: str, kernel: str, total: int, *args) -> None:
        """Run a grid-stride kernel over ``total`` items: ``kernel(total, *args)``."""
        if total <= 0:
            return
        _check_size(total)
        self._function(module, kernel).prepared_call(
            _grid(total), (kernels.BLOCK_SIZE, 1, 1), total, *args
        )

    def _ew(self, name: str, *arrays, scalars: tuple = ()) -> None:
        """Run the elementwise kernel ``name`` (inputs first, then outputs)."""
        op = kernels.ELEMENTWISE_OPS[name]
        assert len(arrays) == len(op.inputs) + len(op.outputs), name
        assert len(scalars) == len(op.scalars), name
        shape = arrays[0].shape
        for x in arrays[1:]:
            if x.shape != shape:
                raise ValueError(
                    f'PyCudaHandler {name}: all operands need one shape. '
                    f'Received: {[tuple(y.shape) for y in arrays]}'
                )
        size = math.prod(shape)
        if size == 0:
            return
        _check_size(size)
        dims, strides = coalesce(shape, [x.strides for x in arrays])
        n_lead = max(0, len(dims) - 4)
        inner = _pad4(dims[n_lead:], 1)
        n = math.prod(inner)
        values = [
            float(s) if ctype == 'float' else int(s)
            for s, (_, ctype) in zip(scalars, op.scalars)
        ]
        function = self._function('elementwise', f'ew_{name}')
        for index in np.ndindex(*dims[:n_lead]):
            args = [n, inner[1], inner[2], inner[3]]
            for x, st in zip(arrays, strides):
                lead = sum(i * s for i, s in zip(index, st[:n_lead]))
                args.append(x.ptr + 4 * lead)
                args += _pad4(st[n_lead:], 0)
            function.prepared_call(_grid(n), (kernels.BLOCK_SIZE, 1, 1), *args, *values)

    def _elementwise(self, op: Op, args: dict) -> None:
        """Run op ``op`` of the kernel table (its operands by name in ``args``).

        The vector of an ``_mv`` op is broadcast over the matrix first.
        """
        kernel = kernels.ELEMENTWISE_OPS[op.name]
        arrays = {name: args[name] for name in kernel.inputs + kernel.outputs}
        if 'v' in arrays and op.rule in ('mv', 'mv_full'):
            arrays['v'] = broadcast_mv(args['m'], args['v'], op.name)
        scalars = tuple(args[name] for name, _ in kernel.scalars)
        self._ew(op.name, *arrays.values(), scalars=scalars)

    def _scratch(self, name: str, shape: tuple) -> GPUView:
        """A contiguous view of a cached buffer (content: whatever was left)."""
        size = math.prod(shape)
        buf = self._scratch_buffers.get(name)
        if buf is None or buf.size < size:
            buf = self._scratch_buffers[name] = self.allocate((max(size, 1),))
        return GPUView(buf.base, buf.base_ptr, buf.offset, shape)

    def _contiguous(self, x: GPUView, name: str) -> GPUView:
        """``x`` itself if contiguous, else a contiguous scratch copy."""
        if x.is_contiguous:
            return x
        copy = self._scratch(name, x.shape)
        self._ew('copy_to', x, copy)
        return copy

    def _rows_matrix(
        self, x: GPUView, rows: int, cols: int, name: str, load: bool = True
    ):
        """``x`` as a ``(rows, cols)`` view, else via a contiguous scratch.

        Returns ``(matrix, spill)``: ``spill`` is None if ``matrix`` views
        ``x`` itself, else the scratch array of ``x``'s shape behind
        ``matrix`` (holding ``x``'s values if ``load``), which the caller
        copies back after writing.
        """
        try:
            return x.reshape(rows, cols), None
        except ValueError:
            spill = self._scratch(name, x.shape)
            if load:
                self._ew('copy_to', x, spill)
            return spill.reshape(rows, cols), spill

    def _gemm(self, a, b, out, transa: bool, transb: bool, beta: float) -> None:
        """``out = op(a) @ op(b) + beta * out`` with cuBLAS."""
        if a.ndim != 2 or b.ndim != 2 or out.ndim != 2:
            raise ValueError(
                f'dot: operands must be matrices. Received '
                f'shapes {a.shape}, {b.shape}, {out.shape}'
            )
        m, k = a.shape[::-1] if transa else a.shape
        k_b, n = b.shape[::-1] if transb else b.shape
        if k != k_b or out.shape != (m, n):
            raise ValueError(
                f'dot: shapes do not fit: op(a) {(m, k)} @ op(b) {(k_b, n)} '
                f'-> out {out.shape}'
            )
        if m == 0 or n == 0:
            return
        a, lda = self._gemm_operand(a, 'gemm_a')
        b, ldb = self._gemm_operand(b, 'gemm_b')
        target, ldc = out, row_major_ld(m, n, *out.strides)
        if ldc is None:
            target = self._scratch('gemm_c', (m, n))
            ldc = row_major_ld(m, n, *target.strides)
            assert ldc is not None  # a contiguous scratch array has one
            if beta:
                self._ew('copy_to', out, target)
        call = row_major_gemm(m, n, k, transa, transb, lda, ldb, ldc)
        self._blas.sgemm(call, 1.0, b.ptr, a.ptr, beta, target.ptr)
        if target is not out:
            self._ew('copy_to', target, out)

    def _gemm_operand(self, x: GPUView, name: str):
        ld = row_major_ld(x.shape[0], x.shape[1], *x.strides)
        if ld is None:
            copy = self._scratch(name, x.shape)
            self._ew('copy_to', x, copy)
            x, ld = copy, row_major_ld(copy.shape[0], copy.shape[1], *copy.strides)
        return x, ld

    def _sum_columns(
        self,
        rows: int,
        cols: int,
        a_ptr: int,
        a_r: int,
        a_c: int,
        out_ptr: int,
        out_c: int,
    ) -> None:
        """``out[j] = sum_i a[i, j]`` for a strided ``rows x cols`` matrix."""
        if cols <= 0:
            return
        tile_x, tile_y = kernels.SUM_TILE
        self._function('reduce', 'sum_columns').prepared_call(
            _grid(cols, tile_x),
            (tile_x, tile_y, 1),
            rows,
            cols,
            a_ptr,
            a_r,
            a_c,
            out_ptr,
            out_c,
        )

    def _sum_all(self, a: GPUView, out: GPUView, count_nonfinite: bool):
        """Write the total of ``a`` (or its number of NaN/Inf) into ``out``."""
        if out.size != 1:
            raise ValueError(
                f'sum_t: out must have one element. Received shape {out.shape}'
            )
        if a.size == 0:
            self._ew('fill', out, scalars=(0.0,))
            return
        _check_size(a.size)
        dims, (strides,) = coalesce(a.shape, [a.strides])
        if len(dims) > 4:
            a = self._contiguous(a, 'reduce_copy')
            dims, strides = (a.size,), (1,)
        dims, strides = _pad4(dims, 1), _pad4(strides, 0)
        n = math.prod(dims)
        blocks = min(kernels.REDUCE_BLOCKS, -(-n // kernels.BLOCK_SIZE))
        partial = self._scratch('partial', (kernels.REDUCE_BLOCKS,))
        self._function('reduce', 'sum_all_partial').prepared_call(
            (blocks, 1),
            (kernels.BLOCK_SIZE, 1, 1),
            n,
            dims[1],
            dims[2],
            dims[3],
            a.ptr,
            *strides,
            partial.ptr,
            int(count_nonfinite),
        )
        self._sum_columns(blocks, 1, partial.ptr, 1, 0, out.ptr, 0)

    def _philox_key(self) -> tuple:
        k0, k1 = self.rnd.randint(0, 2**32, size=2, dtype=np.uint32)
        return int(k0), int(k1)

    def _random(self, name: str, out: GPUView, scalars: tuple) -> None:
        """A random elementwise op; element i depends on its C-order index."""
        dims, _ = coalesce(out.shape, [out.strides])
        target = out if len(dims) <= 4 else self._scratch('random', out.shape)
        self._ew(name, target, scalars=self._philox_key() + scalars)
        if target is not out:
            self._ew('copy_to', target, out)

    def _geometry(
        self, inputs, window, outputs, padding, stride, channels: int, what: str
    ) -> tuple:
        """Return the kernel geometry arguments, checking the output shape.

        An inconsistent shape would make a kernel access foreign memory.
        """
        n, h, w, c = inputs.shape
        kh, kw = window
        sy, sx = stride
        top, bottom, left, right = padding_sides(padding)
        oh = _out_size(h, kh, top, bottom, sy)
        ow = _out_size(w, kw, left, right, sx)
        if tuple(outputs.shape) != (n, oh, ow, channels):
            raise ValueError(
                f'{what}: inputs {inputs.shape}, window {(kh, kw)}, padding '
                f'{padding} and stride {(sy, sx)} give outputs '
                f'{(n, oh, ow, channels)}. Received: {outputs.shape}'
            )
        # the kernels take the top and left padding: where windows start
        return h, w, c, oh, ow, kh, kw, top, left, sy, sx

    def _batch_chunks(self, n: int, per_image: int):
        step = max(1, COL_ELEMENTS // max(per_image, 1))
        for start in range(0, n, step):
            yield start, min(start + step, n)

    def _im2col(self, x: GPUView, geometry: tuple) -> GPUView:
        h, w, c, oh, ow, kh, kw, top, left, sy, sx = geometry
        rows, k = x.shape[0] * oh * ow, kh * kw * c
        col = self._scratch('col', (rows, k))
        self._launch('conv', 'im2col', rows * k, *geometry, x.ptr, *x.strides, col.ptr)
        return col

    # ------------------------------------------------------------ allocation

    def allocate(self, shape: tuple[int, ...]):
        from pycuda import gpuarray

        shape = (shape,) if isinstance(shape, (int, np.integer)) else shape
        shape = tuple(operator.index(n) for n in shape)
        size = math.prod(shape)
        _check_size(size)
        base = gpuarray.empty((max(size, 1),), np.float32)
        return GPUView(base, int(base.gpudata), 0, shape)

    def zeros(self, shape: tuple[int, ...]):
        import pycuda.driver as drv

        mem = self.allocate(shape)
        if mem.size:
            drv.memset_d32(mem.ptr, 0, mem.size)
        return mem

    def ones(self, shape: tuple[int, ...]):
        import pycuda.driver as drv

        mem = self.allocate(shape)
        if mem.size:
            drv.memset_d32(mem.ptr, 0x3F800000, mem.size)  # bits of 1.0f
        return mem

    def create_from_numpy(self, arr):
        import pycuda.driver as drv

        host = np.ascontiguousarray(arr, dtype=np.float32)
        mem = self.allocate(host.shape)
        if mem.size:
            drv.memcpy_htod(mem.ptr, host)
        return mem

    def get_numpy_copy(self, mem):
        import pycuda.driver as drv

        assert isinstance(mem, GPUView), type(mem)
        result = np.empty(mem.shape, dtype=np.float32)
        if mem.size:
            drv.memcpy_dtoh(result, self._contiguous(mem, 'transfer').ptr)
        return result

    def set_from_numpy(self, mem, arr) -> None:
        import pycuda.driver as drv

        host = np.ascontiguousarray(
            np.broadcast_to(np.asarray(arr, dtype=np.float32), mem.shape)
        )
        if not mem.size:
            return
        if mem.is_contiguous:
            drv.memcpy_htod(mem.ptr, host)
        else:
            staging = self._scratch('transfer', mem.shape)
            drv.memcpy_htod(staging.ptr, host)
            self._ew('copy_to', staging, mem)

    # ------------------------------------------------------------- copy/fill

    def fill_gaussian(self, mean: float, std: float, out) -> None:
        self._random('gaussian', out, (mean, std))

    def generate_probability_mask(self, mask, probability: float) -> None:
        self._random('bernoulli', mask, (probability,))

    # ---------------------------------------------------------------- checks

    def is_fully_finite(self, a) -> bool:
        import pycuda.driver as drv

        flag = self._scratch('flag', (1,))
        self._sum_all(a, flag, count_nonfinite=True)
        count = np.empty(1, dtype=np.float32)
        drv.memcpy_dtoh(count, flag.ptr)
        return bool(count[0] == 0)

    # ----------------------------------------------------------- math A to Z

    def binarize_v(self, v, out) -> None:
        rows, cols = out.shape
        if tuple(v.shape) != (rows, 1):
            raise ValueError(
                f'binarize_v: v must be ({rows}, 1) for out '
                f'{out.shape}. Received: {v.shape}'
            )
        self._launch(
            'rows',
            'binarize_rows',
            rows * cols,
            cols,
            v.ptr,
            v.strides[0],
            out.ptr,
            *out.strides,
        )

    def broadcast_t(self, a, axis: int, out) -> None:
        self._ew('copy_to', a.broadcast_to(out.shape), out)

    def dot_add_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        self._gemm(a, b, out, transa, transb, 1.0)

    def dot_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        self._gemm(a, b, out, transa, transb, 0.0)

    def index_m_by_v(self, m, v, out) -> None:
        rows, cols = m.shape
        if tuple(v.shape) != (rows, 1) or tuple(out.shape) != (rows, 1):
            raise ValueError(
                f'index_m_by_v: v and out must be ({rows}, 1) '
                f'for m {m.shape}. Received: {v.shape}, '
                f'{out.shape}'
            )
        self._launch(
            'rows',
            'index_rows',
            rows,
            cols,
            m.ptr,
            *m.strides,
            v.ptr,
            v.strides[0],
            out.ptr,
            out.strides[0],
        )

    def merge_tt(self, a, b, out) -> None:
        n = a.shape[-1]
        self._ew('copy_to', a, out[..., :n])
        self._ew('copy_to', b, out[..., n:])

    def softmax_m(self, m, out) -> None:
        if m.ndim != 2 or out.shape != m.shape:
            raise ValueError(
                f'softmax_m: m and out must be matrices of one '
                f'shape. Received: {m.shape}, {out.shape}'
            )
        rows, cols = m.shape
        if rows == 0 or cols == 0:
            return
        block = 32
        while block < min(cols, kernels.BLOCK_SIZE):
            block *= 2
        self._function('rows', 'softmax_rows').prepared_call(
            (min(rows, MAX_BLOCKS), 1),
            (block, 1, 1),
            rows,
            cols,
            m.ptr,
            *m.strides,
            out.ptr,
            *out.strides,
        )

    def split_add_tt(self, x, out_a, out_b) -> None:
        n = out_a.shape[-1]
        self._ew('add_tt', out_a, x[..., :n], out_a)
        self._ew('add_tt', out_b, x[..., n:], out_b)

    def sum_t(self, a, axis: int | None, out) -> None:
        if axis is not None and axis < 0:
            axis += a.ndim
        if axis is None or (a.ndim == 1 and axis == 0):
            self._sum_all(a, out, count_nonfinite=False)
            return
        if a.ndim != 2 or axis not in (0, 1):
            raise ValueError(
                f'sum_t: axis must be None, or 0 or 1 of a 1-D '
                f'or 2-D array. Received: axis={axis} for shape '
                f'{a.shape}'
            )
        rows, cols = a.shape if axis == 0 else a.shape[::-1]
        a_r, a_c = a.strides if axis == 0 else a.strides[::-1]
        flat = out.reshape(out.size)
        if flat.size != cols:
            raise ValueError(
                f'sum_t: out must hold {cols} elements for '
                f'axis {axis} of {a.shape}. Received: '
                f'{out.shape}'
            )
        self._sum_columns(rows, cols, a.ptr, a_r, a_c, flat.ptr, flat.strides[0])

    # ----------------------------------------------------------- activations

    # -------------------------------------------------------------- conv/pool

    def conv2d_forward_batch(
        self,
        inputs,
        weights,
        bias,
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        *,
        columns=None,
        activation: str = 'linear',
    ) -> None:
        # ``columns`` is not used: the receptive fields are recomputed in
        # batch chunks by the im2col kernel, cheap on the GPU
        activate = self._activation_after(activation)
        f, kh, kw, c = weights.shape
        geometry = self._geometry(
            inputs, (kh, kw), outputs, padding, stride, f, 'conv2d_forward_batch'
        )
        check_channels('conv2d_forward_batch', inputs, weights, bias)
        n, oh, ow = outputs.shape[:3]
        rows, k = n * oh * ow, kh * kw * c
        out_mat, spill = self._rows_matrix(outputs, rows, f, 'conv_out', load=False)
        target = outputs if spill is None else spill
        self._ew('copy_to', bias.reshape(1, 1, 1, f).broadcast_to(target.shape), target)
        if k:
            w_mat, _ = self._rows_matrix(weights, f, k, 'conv_w')
            for n0, n1 in self._batch_chunks(n, oh * ow * k):
                col = self._im2col(inputs[n0:n1], geometry)
                self._gemm(
                    col, w_mat, out_mat[n0 * oh * ow : n1 * oh * ow], False, True, 1.0
                )
        if activate is not None:  # on the rows just written, before a spill
            activate(out_mat)
        if spill is not None:
            self._ew('copy_to', spill, outputs)

    def conv2d_backward_batch(
        self,
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
        overwrite_in_deltas: bool = False,
    ) -> None:
        f, kh, kw, c = weights.shape
        geometry = self._geometry(
            inputs, (kh, kw), out_deltas, padding, stride, f, 'conv2d_backward_batch'
        )
        check_channels('conv2d_backward_batch', inputs, weights, bias_deltas)
        check_shapes('conv2d_backward_batch', inputs, in_deltas)
        check_shapes('conv2d_backward_batch', weights, weight_deltas)
        if overwrite_in_deltas and not skip_in_deltas:  # col2im adds
            self.fill(in_deltas, 0.0)
        n, oh, ow = out_deltas.shape[:3]
        rows, k = n * oh * ow, kh * kw * c
        dy, _ = self._rows_matrix(out_deltas, rows, f, 'conv_dy')
        self.sum_t(dy, 0, bias_deltas)
        if rows == 0 or k == 0:
            self.fill(weight_deltas, 0.0)
            return
        w_mat, _ = self._rows_matrix(weights, f, k, 'conv_w')
        dw, spill = self._rows_matrix(weight_deltas, f, k, 'conv_dw', load=False)
        beta = 0.0
        for n0, n1 in self._batch_chunks(n, oh * ow * k):
            r0, r1 = n0 * oh * ow, n1 * oh * ow
            col = self._im2col(inputs[n0:n1], geometry)
            self._gemm(dy[r0:r1], col, dw, True, False, beta)
            beta = 1.0
            if skip_in_deltas:
                continue
            # the column buffer now receives the deltas of every field
            self._gemm(dy[r0:r1], w_mat, col, False, False, 0.0)
            dx = in_deltas[n0:n1]
            self._launch(
                'conv', 'col2im_add', dx.size, *geometry, col.ptr, dx.ptr, *dx.strides
            )
        if spill is not None:
            self._ew('copy_to', spill, weight_deltas)

    def reverse_time_t(self, a, mask, out) -> None:
        check_shapes('reverse_time_t', a, out)
        m = a if mask is None else mask  # any valid pointer without a mask
        args = (*a.shape, a.ptr, *a.strides, m.ptr, *m.strides[:2], int(m is mask))
        self._launch('sequences', 'reverse_time', a.size, *args, out.ptr, *out.strides)


# the elementwise ops, one kernel each, from the kernel table
install_ops(
    PyCudaHandler,
    [OPS[name] for name in kernels.ELEMENTWISE],
    PyCudaHandler._elementwise,
)

# the embedding and attention ops, written in their own modules (see there)
install_embedding_ops(PyCudaHandler)
install_attention_ops(PyCudaHandler)
