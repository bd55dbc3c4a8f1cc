"""A minimal ctypes binding of cuBLAS: a handle, its stream and SGEMM.

Only what :class:`~brainstorm.handlers.cuda.handler.PyCudaHandler`
needs, called directly through ctypes (no scikit-cuda). The library is
looked up in the system CUDA toolkit (``CUDA_HOME``, ``CUDA_PATH``,
``/usr/local/cuda``), then in the ``nvidia-cublas`` wheels, then wherever
the dynamic loader finds it.

**Row-major products.** cuBLAS is column-major. A row-major matrix with
row stride ``ld`` read column-major is its transpose with leading dimension
``ld``, so the row-major ``C = op(A) @ op(B)`` is computed as the
column-major ``C.T = op(B).T @ op(A).T``: cuBLAS gets our ``b`` as its
first operand and our ``a`` as its second, ``m = N`` and ``n = M``, and the
transpose flags stay attached to their matrices. :func:`row_major_gemm`
does this mapping and :func:`row_major_ld` finds the leading dimension of a
strided view; both are plain Python and tested without a GPU.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import importlib.util
import os
from typing import NamedTuple

__all__ = [
    'Cublas',
    'CublasError',
    'GemmCall',
    'row_major_gemm',
    'row_major_ld',
    'library_candidates',
    'load_cublas',
    'CUBLAS_OP_N',
    'CUBLAS_OP_T',
]

CUBLAS_OP_N = 0
CUBLAS_OP_T = 1

_STATUS_NAMES = {
    1: 'CUBLAS_STATUS_NOT_INITIALIZED',
    3: 'CUBLAS_STATUS_ALLOC_FAILED',
    7: 'CUBLAS_STATUS_INVALID_VALUE',
    8: 'CUBLAS_STATUS_ARCH_MISMATCH',
    11: 'CUBLAS_STATUS_MAPPING_ERROR',
    13: 'CUBLAS_STATUS_EXECUTION_FAILED',
    14: 'CUBLAS_STATUS_INTERNAL_ERROR',
    15: 'CUBLAS_STATUS_NOT_SUPPORTED',
    16: 'CUBLAS_STATUS_LICENSE_ERROR',
}


class CublasError(RuntimeError):
    """A cuBLAS call returned a status other than CUBLAS_STATUS_SUCCESS."""


class GemmCall(NamedTuple):
    """The arguments of one column-major ``cublasSgemm`` call.

    Named as in cuBLAS: its ``A`` operand is the row-major ``b`` and its
    ``B`` operand the row-major ``a`` (see the module docstring).
    """

    transa: int
    transb: int
    m: int
    n: int
    k: int
    lda: int
    ldb: int
    ldc: int


def row_major_ld(rows: int, cols: int, row_stride: int, col_stride: int) -> int | None:
    """Leading dimension of a strided row-major matrix for cuBLAS, or None.

    The matrix qualifies if its columns are adjacent (``col_stride == 1``,
    irrelevant for a single column) and its rows do not overlap
    (``row_stride >= cols``, irrelevant for a single row). A degenerate
    matrix (one row, or no columns) gets ``max(cols, 1)``, the smallest
    value cuBLAS accepts. None means the operand must be copied into a
    contiguous buffer first.
    """
    if cols > 1 and col_stride != 1:
        return None
    if rows <= 1 or cols == 0:
        return max(cols, 1)
    if row_stride < cols:
        return None
    return row_stride


def row_major_gemm(
    m: int, n: int, k: int, transa: bool, transb: bool, lda: int, ldb: int, ldc: int
) -> GemmCall:
    """Map the row-major ``C (m, n) = op(A) (m, k) @ op(B) (k, n)`` to cuBLAS.

    Args:
        m: rows of ``op(A)`` and ``C``.
        n: columns of ``op(B)`` and ``C``.
        k: columns of ``op(A)``, rows of ``op(B)``.
        transa: whether ``A`` is stored transposed.
        transb: whether ``B`` is stored transposed.
        lda: row stride (from :func:`row_major_ld`) of the stored ``A``.
        ldb: row stride of the stored ``B``.
        ldc: row stride of ``C``.

    Returns:
        The :class:`GemmCall`, whose first operand is ``B`` and second ``A``.
    """
    return GemmCall(
        transa=CUBLAS_OP_T if transb else CUBLAS_OP_N,
        transb=CUBLAS_OP_T if transa else CUBLAS_OP_N,
        m=n,
        n=m,
        k=k,
        lda=ldb,
        ldb=lda,
        ldc=ldc,
    )


# ----------------------------------------------------------- the library ---

_SONAMES = ('libcublas.so', 'libcublas.so.13', 'libcublas.so.12', 'libcublas.so.11')
_DLL_PATTERN = 'cublas64_*.dll'


def _toolkit_dirs() -> list:
    roots = [os.environ.get(v) for v in ('CUDA_HOME', 'CUDA_PATH', 'CUDA_ROOT')]
    roots.append('/usr/local/cuda')
    dirs = []
    for root in filter(None, roots):
        dirs += [
            os.path.join(root, 'lib64'),
            os.path.join(root, 'lib'),
            os.path.join(root, 'bin'),
        ]
        dirs += sorted(glob.glob(os.path.join(root, 'targets', '*', 'lib')))
    return dirs


def _wheel_dirs() -> list:
    try:
        spec = importlib.util.find_spec('nvidia')
    except (ImportError, ValueError):
        return []
    if spec is None or not spec.submodule_search_locations:
        return []
    dirs = []
    for root in spec.submodule_search_locations:
        # nvidia/cublas/lib (CUDA 12 wheels), nvidia/cu13/lib (CUDA 13)
        for sub in ('lib', 'bin'):
            dirs += sorted(glob.glob(os.path.join(root, '*', sub)))
    return dirs


def library_candidates() -> list:
    """Paths and names to try for libcublas, most preferred first."""
    found = []
    for directory in _toolkit_dirs() + _wheel_dirs():
        for pattern in ('libcublas.so*', _DLL_PATTERN):
            found += sorted(glob.glob(os.path.join(directory, pattern)))
    by_loader = ctypes.util.find_library('cublas')
    if by_loader:
        found.append(by_loader)
    found += list(_SONAMES)
    unique = []
    for name in found:
        if name not in unique and 'cublasLt' not in name:
            unique.append(name)
    return unique


def load_cublas() -> ctypes.CDLL:
    """Load libcublas (see :func:`library_candidates`).

    Raises:
        ImportError: listing what was tried, if no candidate loads.
    """
    errors = []
    for name in library_candidates():
        directory = os.path.dirname(name)
        if directory:
            # libcublas needs libcublasLt, which may not be on the loader path
            for lt in sorted(glob.glob(os.path.join(directory, 'libcublasLt.so*'))):
                try:
                    ctypes.CDLL(lt, mode=ctypes.RTLD_GLOBAL)
                    break
                except OSError:
                    pass
        try:
            return ctypes.CDLL(name)
        except OSError as err:
            errors.append(f'{name}: {err}')
    raise ImportError(
        'PyCudaHandler needs cuBLAS, but libcublas could not be loaded. '
        'Install the CUDA toolkit (and set CUDA_HOME) or the nvidia-cublas '
        'wheel. Tried: ' + '; '.join(errors)
    )


def _check(status: int, what: str) -> None:
    if status != 0:
        name = _STATUS_NAMES.get(status, f'status {status}')
        raise CublasError(f'{what} failed with {name}.')


class Cublas:
    """One cuBLAS handle bound to the CUDA context current at creation.

    Args:
        library: a loaded libcublas (default: :func:`load_cublas`).
    """

    def __init__(self, library: ctypes.CDLL | None = None):
        lib = library if library is not None else load_cublas()
        c_int, c_void_p = ctypes.c_int, ctypes.c_void_p
        c_float_p = ctypes.POINTER(ctypes.c_float)
        lib.cublasCreate_v2.argtypes = [ctypes.POINTER(c_void_p)]
        lib.cublasCreate_v2.restype = c_int
        lib.cublasDestroy_v2.argtypes = [c_void_p]
        lib.cublasDestroy_v2.restype = c_int
        lib.cublasSetStream_v2.argtypes = [c_void_p, c_void_p]
        lib.cublasSetStream_v2.restype = c_int
        lib.cublasSgemm_v2.argtypes = [
            c_void_p,
            c_int,
            c_int,
            c_int,
            c_int,
            c_int,
            c_float_p,
            c_void_p,
            c_int,
            c_void_p,
            c_int,
            c_float_p,
            c_void_p,
            c_int,
        ]
        lib.cublasSgemm_v2.restype = c_int
        self.lib = lib
        self.handle = c_void_p()
        _check(lib.cublasCreate_v2(ctypes.byref(self.handle)), 'cublasCreate_v2')

    def set_stream(self, stream: int | None) -> None:
        """Run this handle's calls on ``stream`` (None: the default stream)."""
        _check(
            self.lib.cublasSetStream_v2(self.handle, ctypes.c_void_p(stream or None)),
            'cublasSetStream_v2',
        )

    def sgemm(
        self,
        call: GemmCall,
        alpha: float,
        a_ptr: int,
        b_ptr: int,
        beta: float,
        c_ptr: int,
    ) -> None:
        """Run ``C = alpha * op(A) @ op(B) + beta * C`` on the GPU.

        Column-major, with cuBLAS's operand names (see
        :func:`row_major_gemm`); pointers are device addresses as ints.
        """
        _check(
            self.lib.cublasSgemm_v2(
                self.handle,
                call.transa,
                call.transb,
                call.m,
                call.n,
                call.k,
                ctypes.byref(ctypes.c_float(alpha)),
                ctypes.c_void_p(a_ptr),
                call.lda,
                ctypes.c_void_p(b_ptr),
                call.ldb,
                ctypes.byref(ctypes.c_float(beta)),
                ctypes.c_void_p(c_ptr),
                call.ldc,
            ),
            'cublasSgemm_v2',
        )

    def destroy(self) -> None:
        """Release the handle (its context must still be alive)."""
        if self.handle:
            _check(self.lib.cublasDestroy_v2(self.handle), 'cublasDestroy_v2')
            self.handle = ctypes.c_void_p()
