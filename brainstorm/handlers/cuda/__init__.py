"""The CUDA side: ``PyCudaHandler`` and what it is made of.

* :mod:`~brainstorm.handlers.cuda.handler`: the handler;
* :mod:`~brainstorm.handlers.cuda.views`: ``GPUView``, its array type;
* ``brainstorm.handlers.cuda.cublas``: the ctypes binding of cuBLAS;
* ``brainstorm.handlers.cuda.kernels``: the elementwise kernel table
  and the CUDA C sources (``cu/*.cu``, package data).

Everything imports without PyCUDA; creating a handler needs it.
``brainstorm.handlers.pycuda_handler`` is the earlier path of the handler.

Design
======

**Arrays are strided views.** A network's memory is three flat buffers and
every layer array is a feature slice of one of them: a time-sized array is
``big[:T+c, :, start:stop]`` of a ``(T+C, B, F)`` buffer, so its rows are
``F`` elements apart and it is not contiguous. PyCUDA's ``GPUArray``
arithmetic and ``ElementwiseKernel`` need contiguous arrays, so the array
type of this handler is :class:`~brainstorm.handlers.cuda.views.GPUView`: a
device pointer into a PyCUDA allocation (a flat float32 ``GPUArray``), a
shape and strides counted in elements. Indexing with ints, slices, ``...``
and ``None`` and :meth:`~brainstorm.handlers.cuda.views.GPUView.reshape`
follow NumPy's view rules and never copy; a reshape that would need a copy
raises ValueError (as :func:`brainstorm.shapes.reshape_view` does for NumPy),
so no write can land in a temporary copy.

**Kernels take strides.** Before a launch, the common shape of the operands
is coalesced (:func:`~brainstorm.handlers.cuda.views.coalesce`): size-1 axes
are dropped and neighbouring axes merged wherever that holds for every
operand. A feature slice of any rank becomes ``(rows, cols)`` with a row
stride, a contiguous array a single axis. The shape, padded to four axes
(rare longer ones are looped over in Python), and each operand's four
strides are the kernel arguments; the kernel indexes ``p[i0*s0 + i1*s1 +
i2*s2 + i3*s3]`` (see ``brainstorm.handlers.cuda.kernels``: the elementwise
kernels come from its table, the others from ``.cu`` files). Broadcasting
(the ``_mv`` ops, ``broadcast_t``, the conv bias) is a stride of 0. Every
output is written only at its own elements, so views never clobber their
neighbours.

**Matrix products** call ``cublasSgemm_v2`` through ctypes
(``brainstorm.handlers.cuda.cublas``). Row-major operands with unit column
stride pass their row stride as leading dimension, so feature slices need no
copy; other operands go through a contiguous scratch buffer.

**Convolution** is im2col + GEMM, with the adjoint col2im for the input
deltas, processed in chunks of images so the column buffer stays bounded.
Reductions, softmax, one-hot and pooling are own kernels. All of them
gather instead of scattering with atomics, so every result is
deterministic.

**Randomness** comes from a counter-based Philox4x32-10 kernel: element
``i`` of a draw is a function of ``i`` and a 64-bit key drawn from
``rnd`` for each call. Seeding ``handler.rnd`` therefore reproduces the
draws exactly, and no generator state lives on the GPU.

**Order.** Kernels, cuBLAS calls and copies all run on the default stream,
so they execute in call order; copies to the host wait for the results.
Kernels are compiled once per CUDA context and module (PyCUDA also caches
the binaries on disk) and scratch buffers are kept and only grow, so the
hot path neither compiles nor allocates.

**Optional.** This package imports without PyCUDA, so the class can be
inspected and its kernel sources compiled anywhere; creating a
``PyCudaHandler`` without PyCUDA raises an ImportError that says how to
install it. The handler uses the CUDA context that is current when it is
created, or creates one on the first device (``pycuda.autoinit``).

**Limits.** float32 only; arrays of fewer than 2**30 elements; slices with
positive steps; ``maxpool2d`` argmax indices are exact up to 2**24 cells
per image (they are stored as float32).
"""

from brainstorm.handlers.cuda.handler import INSTALL_HINT, PyCudaHandler
from brainstorm.handlers.cuda.views import GPUView, coalesce

__all__ = ['PyCudaHandler', 'GPUView', 'coalesce', 'INSTALL_HINT']
