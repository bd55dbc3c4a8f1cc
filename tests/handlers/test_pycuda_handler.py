"""PyCudaHandler: strided views, cuBLAS mapping, kernels, and the op table.

Three levels, so that most of the handler is checked on machines without a
GPU:

* pure Python: :class:`GPUView` indexing/reshape against NumPy views,
  axis coalescing, the row-major -> column-major SGEMM mapping against a
  NumPy emulation of ``cublasSgemm``, the Philox transcription against its
  published known-answer vectors, the kernel signature parser, the
  ImportError without PyCUDA, and ``nvcc --ptx`` of every kernel source
  (where nvcc is installed);
* emulated (where g++ is installed): the real handler code drives the real
  CUDA C kernels, compiled for the CPU with a small shim (one OS thread per
  GPU thread for kernels that synchronise), fake PyCUDA modules whose
  device memory is NumPy memory fenced by guard cells, and the SGEMM
  emulation. The op table of ``test_handler_ops.py``, every registered
  layer and a short training run are compared with NumPy in float64;
* real GPU (marker ``gpu``): the same checks on PyCUDA and an NVIDIA GPU,
  skipped with the reason where there is none.
"""

import ctypes
import hashlib
import inspect
import math
import os
import re
import shutil
import subprocess
import sys
import types
import weakref
from pathlib import Path

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # tests.layers for the layer registry
    sys.path.insert(0, str(ROOT))

import brainstorm.handlers.cuda.handler as pycuda_handler  # noqa: E402
from brainstorm.handlers import NumpyHandler  # noqa: E402
from brainstorm.handlers.base_handler import Handler  # noqa: E402
from brainstorm.handlers.cuda import (  # noqa: E402  # noqa: E402
    GPUView,
    PyCudaHandler,
    coalesce,
    cublas,
    kernels,
)

try:
    from tests.handlers import test_handler_ops as ops
    from tests.handlers import test_max_pooling_nan as nan_pooling
    from tests.handlers import test_overwrite_in_deltas as overwrite_in_deltas
except ImportError:  # tests/handlers is not a package: pytest's sys.path
    import test_handler_ops as ops
    import test_max_pooling_nan as nan_pooling
    import test_overwrite_in_deltas as overwrite_in_deltas


# ============================================================ pure Python ===


def test_class_is_importable_and_concrete_without_pycuda():
    assert inspect.isclass(PyCudaHandler)
    assert not inspect.isabstract(PyCudaHandler)
    assert PyCudaHandler.array_type is GPUView
    assert PyCudaHandler.dtype is np.float32


def test_every_op_has_the_base_signature():
    # the class itself or one of its mixins (cuda/pooling.py, ...) defines it
    own = [k for k in PyCudaHandler.__mro__ if k not in Handler.__mro__]
    for name in Handler.__abstractmethods__:
        method = next((vars(k)[name] for k in own if name in vars(k)), None)
        assert method is not None, f'PyCudaHandler.{name} is missing'
        assert inspect.signature(method) == inspect.signature(getattr(Handler, name)), (
            name
        )


def test_without_pycuda_the_constructor_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, 'pycuda', None)
    monkeypatch.setitem(sys.modules, 'pycuda.driver', None)
    with pytest.raises(ImportError, match=r"pip install 'brainstorm-nn\[pycuda\]'"):
        PyCudaHandler()
    from brainstorm.describable import create_from_description

    with pytest.raises(ImportError, match='CUDA toolkit'):
        create_from_description({'@type': 'PyCudaHandler'})


def test_import_brainstorm_needs_no_cuda():
    code = (
        'import sys; sys.modules["pycuda"] = None; import brainstorm; '
        'from brainstorm.handlers import PyCudaHandler; '
        'print(PyCudaHandler.__name__)'
    )
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'PyCudaHandler'


# ------------------------------------------------------------ GPUView ---


def _numpy_layout(view: np.ndarray, base: np.ndarray):
    """(element offset, element strides) of a NumPy view of ``base``."""
    offset = (
        view.__array_interface__['data'][0] - base.__array_interface__['data'][0]
    ) // base.itemsize
    return offset, tuple(s // base.itemsize for s in view.strides)


def _emulate(view: GPUView, memory: np.ndarray) -> np.ndarray:
    """The elements a GPUView addresses, read from a flat NumPy memory."""
    if view.size == 0:
        return np.zeros(view.shape)
    return as_strided(
        memory[view.offset :], view.shape, [s * memory.itemsize for s in view.strides]
    )


INDEXINGS = [
    ((6, 4, 10), [(slice(None, 5), slice(None), slice(3, 7))]),
    ((6, 4, 10), [(slice(None, 5), slice(None), slice(3, 7)), (-1,)]),
    ((6, 4, 10), [(slice(None, 5), slice(None), slice(3, 7)), 0, (2,)]),
    ((6, 4, 10), [(Ellipsis, slice(2, -2))]),
    ((6, 4, 10), [(slice(1, None, 2), 3)]),
    ((6, 4, 10), [(None, slice(None), Ellipsis, None)]),
    ((6, 4, 10), [(2, 3, 4)]),
    ((6, 4, 10), [(slice(4, 2),)]),
    ((30,), [(slice(3, 27),), (slice(None, None, 3),)]),
    ((5, 12), [(slice(None), slice(2, 8)), (slice(1, 4), -2)]),
]


@pytest.mark.parametrize('shape, steps', INDEXINGS)
def test_gpuview_indexing_matches_numpy(shape, steps):
    memory = np.arange(math.prod(shape), dtype=np.float64)
    np_view, view = memory.reshape(shape), GPUView(None, 0, 0, shape)
    for item in steps:
        np_view, view = np_view[item], view[item]
        assert view.shape == np_view.shape, item
        np.testing.assert_array_equal(_emulate(view, memory), np_view)
        if isinstance(np_view, np.ndarray) and np_view.size:
            offset, strides = _numpy_layout(np_view, memory)
            assert view.offset == offset
            assert all(
                s == t for s, t, n in zip(view.strides, strides, view.shape) if n > 1
            )


@pytest.mark.parametrize(
    'item, error',
    [
        ((0, 0, 0, 0), IndexError),
        ((7,), IndexError),
        ((-7,), IndexError),
        ((slice(None, None, -1),), IndexError),
        ((Ellipsis, Ellipsis), IndexError),
        ((1.5,), IndexError),
        ((True,), IndexError),
    ],
)
def test_gpuview_rejects_bad_indices(item, error):
    with pytest.raises(error):
        GPUView(None, 0, 0, (6, 4, 10))[item]


def _carve(memory, t, c, b, f_total, start, stop, feature_shape):
    """A BufferManager-style feature slice, NumPy and GPUView alike."""
    big = memory[: (t + c) * b * f_total]
    np_big = big.reshape(t + c, b, f_total)
    view = GPUView(None, 0, 0, (len(big),)).reshape(t + c, b, f_total)
    shape = (t + c, b) + feature_shape
    return (
        np_big[:, :, start:stop].reshape(shape),
        view[:, :, start:stop].reshape(shape),
    )


RESHAPES = [
    (3, 1, 2, 10, 2, 8, (6,), [(8, 6), (4, 2, 6), (48,)]),
    (
        3,
        1,
        2,
        10,
        2,
        8,
        (2, 3),
        [(8, 6), (8, 2, 3), (4, 2, 2, 3), (8, 3, 2), (8, 1, 6)],
    ),
    (2, 0, 3, 7, 0, 7, (7,), [(6, 7), (42,), (3, 2, 7), (6, 7, 1)]),
    (4, 1, 1, 9, 3, 4, (1,), [(5,), (5, 1), (1, 5, 1)]),
    (2, 0, 2, 5, 1, 1, (0,), [(0,), (4, 0), (0, 3)]),
]


@pytest.mark.parametrize('t, c, b, f_total, start, stop, features, shapes', RESHAPES)
def test_gpuview_reshape_is_a_view_exactly_when_numpy_can(
    t, c, b, f_total, start, stop, features, shapes
):
    memory = np.arange(200, dtype=np.float64)
    np_view, view = _carve(memory, t, c, b, f_total, start, stop, features)
    np.testing.assert_array_equal(_emulate(view, memory), np_view)
    for shape in shapes:
        np_result = np_view.view()
        try:
            np_result.shape = shape
        except AttributeError:
            with pytest.raises(ValueError, match='without copying'):
                view.reshape(shape)
            continue
        result = view.reshape(shape)
        assert result.shape == shape
        np.testing.assert_array_equal(_emulate(result, memory), np_result)


def test_gpuview_reshape_forms_and_errors():
    view = GPUView(None, 0, 0, (4, 6))
    assert view.reshape(2, -1).shape == (2, 12)
    assert view.reshape([3, 8]).shape == (3, 8)
    assert view.reshape(np.int64(24)).shape == (24,)
    for bad in [(5, 5), (-1, -1), (7, -1)]:
        with pytest.raises(ValueError):
            view.reshape(bad)


def test_brainstorm_view_helpers_work_on_gpuviews():
    from brainstorm.utils import (
        flatten_all_but_last,
        flatten_time,
        flatten_time_and_features,
        reshape_view,
    )

    memory = np.arange(400, dtype=np.float64)
    np_view, view = _carve(memory, 4, 1, 3, 12, 2, 8, (2, 3))
    for helper in (flatten_time, flatten_time_and_features):
        np.testing.assert_array_equal(_emulate(helper(view), memory), helper(np_view))
    with pytest.raises(ValueError):
        flatten_all_but_last(view)
    flat = GPUView(None, 0, 0, (40,))
    assert reshape_view(flat[4:16], (3, 4)).strides == (4, 1)


def test_gpuview_broadcast_and_interfaces():
    view = GPUView(None, 4096, 3, (1, 5))
    wide = view.broadcast_to((4, 5))
    assert wide.strides == (0, 1) and wide.shape == (4, 5)
    with pytest.raises(ValueError):
        view.broadcast_to((4, 6))
    interface = view[0, 1:].__cuda_array_interface__
    assert interface['data'] == (4096 + 4 * 4, False)
    assert interface['strides'] == (4,) and interface['typestr'] == '<f4'
    with pytest.raises(TypeError, match='get_numpy_copy'):
        np.asarray(view)
    assert len(view) == 1 and view.ndim == 2 and view.size == 5
    assert GPUView(None, 0, 0, (3, 4))[:, :2].is_contiguous is False
    assert GPUView(None, 0, 0, (3, 4))[1:].is_contiguous is True


@pytest.mark.parametrize(
    'shape, strides, expected',
    [
        ((5, 3, 8), [(120, 40, 1), (24, 8, 1)], ((15, 8), [(40, 1), (8, 1)])),
        ((5, 3, 8), [(24, 8, 1)], ((120,), [(1,)])),
        ((1, 4, 1), [(0, 7, 3)], ((4,), [(7,)])),
        ((1, 1), [(5, 5)], ((1,), [(0,)])),
        ((4, 5), [(0, 1), (5, 1)], ((4, 5), [(0, 1), (5, 1)])),
        (
            (2, 3, 4, 5, 6),
            [(1000, 300, 70, 13, 2)],
            ((2, 3, 4, 5, 6), [(1000, 300, 70, 13, 2)]),
        ),
        ((2, 3, 4), [(720, 240, 60)], ((24,), [(60,)])),
    ],
)
def test_coalesce(shape, strides, expected):
    assert coalesce(shape, strides) == expected


# ----------------------------------------------------------- cuBLAS ---


def emulate_sgemm(call, alpha, a_mem, a_off, b_mem, b_off, beta, c_mem, c_off):
    """``cublasSgemm`` on flat NumPy memories, with cuBLAS's argument checks."""
    m, n, k = call.m, call.n, call.k
    assert min(m, n, k) >= 0, call
    a_shape = (m, k) if call.transa == cublas.CUBLAS_OP_N else (k, m)
    b_shape = (k, n) if call.transb == cublas.CUBLAS_OP_N else (n, k)
    for ld, rows, what in (
        (call.lda, a_shape[0], 'lda'),
        (call.ldb, b_shape[0], 'ldb'),
        (call.ldc, m, 'ldc'),
    ):
        assert ld >= max(1, rows), f'CUBLAS_STATUS_INVALID_VALUE: {what} {call}'
    if m == 0 or n == 0:
        return

    def column_major(mem, off, shape, ld):
        if 0 in shape:
            return np.zeros(shape)
        assert off >= 0 and off + (shape[1] - 1) * ld + shape[0] <= mem.size, (
            f'operand outside its memory: {call}'
        )
        return as_strided(mem[off:], shape, (mem.itemsize, mem.itemsize * ld))

    a = column_major(a_mem, a_off, a_shape, call.lda).astype(np.float64)
    b = column_major(b_mem, b_off, b_shape, call.ldb).astype(np.float64)
    a = a.T if call.transa == cublas.CUBLAS_OP_T else a
    b = b.T if call.transb == cublas.CUBLAS_OP_T else b
    c = column_major(c_mem, c_off, (m, n), call.ldc)
    result = alpha * (a @ b)
    if beta != 0:  # cuBLAS does not read C for beta == 0
        result = result + beta * c
    c[...] = result


def _embedded(rng, rows, cols, gap, offset):
    """A (rows, cols) matrix inside a flat memory, rows ``cols + gap`` apart."""
    stride = cols + gap
    memory = rng.uniform(-1, 1, offset + rows * stride + 3)
    view = as_strided(
        memory[offset:], (rows, cols), (memory.itemsize * stride, memory.itemsize)
    )
    return memory, view, stride


GEMM_SIZES = [
    (3, 4, 5),
    (1, 4, 5),
    (3, 1, 5),
    (3, 4, 1),
    (1, 1, 1),
    (2, 3, 0),
    (0, 3, 2),
    (4, 0, 2),
    (1, 1, 7),
]


@pytest.mark.parametrize('m, n, k', GEMM_SIZES)
@pytest.mark.parametrize('transa', [False, True])
@pytest.mark.parametrize('transb', [False, True])
@pytest.mark.parametrize('gap', [0, 3])
def test_row_major_gemm_mapping_against_column_major_emulation(
    m, n, k, transa, transb, gap
):
    rng = np.random.RandomState(m * 100 + n * 10 + k)
    a_shape = (k, m) if transa else (m, k)
    b_shape = (n, k) if transb else (k, n)
    a_mem, a, a_stride = _embedded(rng, *a_shape, gap, 2)
    b_mem, b, b_stride = _embedded(rng, *b_shape, gap, 1)
    c_mem, c, c_stride = _embedded(rng, m, n, gap, 4)
    c_before, c_mem_before = c.copy(), c_mem.copy()
    lda = cublas.row_major_ld(*a_shape, a_stride, 1)
    ldb = cublas.row_major_ld(*b_shape, b_stride, 1)
    ldc = cublas.row_major_ld(m, n, c_stride, 1)
    call = cublas.row_major_gemm(m, n, k, transa, transb, lda, ldb, ldc)
    # cuBLAS's first operand is our b, its second our a
    emulate_sgemm(call, 1.0, b_mem, 1, a_mem, 2, 0.5, c_mem, 4)
    op_a = a.T if transa else a
    op_b = b.T if transb else b
    np.testing.assert_allclose(c, op_a @ op_b + 0.5 * c_before, atol=1e-12)
    touched = np.zeros(c_mem.shape, bool)
    if m * n:
        as_strided(
            touched[4:], (m, n), (touched.itemsize * c_stride, touched.itemsize)
        )[...] = True
    np.testing.assert_array_equal(c_mem[~touched], c_mem_before[~touched])


@pytest.mark.parametrize(
    'rows, cols, row_stride, col_stride, expected',
    [
        (3, 4, 4, 1, 4),
        (3, 4, 9, 1, 9),
        (1, 4, 0, 1, 4),
        (3, 1, 7, 5, 7),
        (3, 4, 4, 2, None),
        (3, 4, 3, 1, None),
        (3, 4, 0, 1, None),
        (0, 4, 0, 1, 4),
        (5, 0, 0, 1, 1),
        (1, 1, 0, 0, 1),
    ],
)
def test_row_major_ld(rows, cols, row_stride, col_stride, expected):
    assert cublas.row_major_ld(rows, cols, row_stride, col_stride) == expected


def test_cublas_candidates_prefer_the_toolkit(monkeypatch, tmp_path):
    lib = tmp_path / 'lib64'
    lib.mkdir()
    (lib / 'libcublas.so.12').write_bytes(b'')
    (lib / 'libcublasLt.so.12').write_bytes(b'')
    monkeypatch.setenv('CUDA_HOME', str(tmp_path))
    candidates = cublas.library_candidates()
    assert candidates[0] == str(lib / 'libcublas.so.12')
    assert not any('cublasLt' in c for c in candidates)
    assert 'libcublas.so.12' in candidates


def test_cublas_missing_raises_import_error_listing_tries(monkeypatch):
    monkeypatch.setattr(
        cublas, 'library_candidates', lambda: ['/nonexistent/libcublas.so.99']
    )
    with pytest.raises(ImportError, match='nonexistent/libcublas.so.99'):
        cublas.load_cublas()


# ---------------------------------------------------------- kernels ---


def philox(counter, k0, k1):
    """Python transcription of ``bs_philox`` in _cuda_kernels (4 words)."""
    mask = 0xFFFFFFFF
    c = list(counter)
    for round_ in range(10):
        if round_ > 0:
            k0, k1 = (k0 + 0x9E3779B9) & mask, (k1 + 0xBB67AE85) & mask
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [
            ((p1 >> 32) ^ c[1] ^ k0) & mask,
            p1 & mask,
            ((p0 >> 32) ^ c[3] ^ k1) & mask,
            p0 & mask,
        ]
    return c


@pytest.mark.parametrize(
    'counter, key, expected',
    [  # Random123's KAT
        ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
        (
            [0xFFFFFFFF] * 4,
            [0xFFFFFFFF] * 2,
            [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD],
        ),
        (
            [0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344],
            [0xA4093822, 0x299F31D0],
            [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1],
        ),
    ],
)
def test_philox_transcription_matches_known_answers(counter, key, expected):
    assert philox(counter, *key) == expected
    source = kernels.KERNEL_SOURCES['elementwise']
    for constant in (
        '0xD2511F53u',
        '0xCD9E8D57u',
        '0x9E3779B9u',
        '0xBB67AE85u',
        'round < 10',
    ):
        assert constant in source


def test_kernel_arg_formats_follow_the_c_signatures():
    formats = kernels.kernel_arg_formats(
        'extern "C" __global__ void k(int n, const float* a, float* b,\n'
        '    unsigned int key, float s)\n{}\n'
    )
    assert formats == {'k': 'iPPIf'}
    with pytest.raises(ValueError, match='double'):
        kernels.kernel_arg_formats('extern "C" __global__ void k(double x) {}')
    every = {}
    for source in kernels.KERNEL_SOURCES.values():
        every.update(kernels.kernel_arg_formats(source))
    assert {f'ew_{name}' for name in kernels.ELEMENTWISE_OPS} <= set(every)
    handler_source = inspect.getsource(pycuda_handler)
    used = set(re.findall(r"_launch\(\s*'\w+', '(\w+)'", handler_source))
    used |= set(re.findall(r"_function\(\s*'\w+', '(\w+)'", handler_source))
    assert used and used <= set(every), used - set(every)


def test_kernel_sources_are_the_cu_files_and_the_elementwise_table():
    directory = Path(kernels.__file__).parent / 'cu'
    for module in ('reduce', 'rows', 'conv', 'pool', 'embedding', 'attention'):
        source = (directory / f'{module}.cu').read_text()
        assert kernels.KERNEL_SOURCES[module] == source
    elementwise = kernels.KERNEL_SOURCES['elementwise']
    assert elementwise.startswith((directory / 'philox.cu').read_text())
    for name in kernels.ELEMENTWISE_OPS:
        assert f'void ew_{name}(' in elementwise, name


def test_elementwise_ops_come_from_the_op_table_and_the_kernel_table():
    """One kernel per op, its operands named as the op's parameters; the
    handler's method is made from the op table's row (no hand-written
    one-liner per op)."""
    from brainstorm.handlers.ops import OPS, signature

    for name, body in kernels.ELEMENTWISE.items():
        op = OPS[name]
        kernel = kernels.ELEMENTWISE_OPS[name]
        assert kernel.body == body and kernel.outputs == op.writes
        parameters = signature(op).parameters
        for operand in kernel.inputs + tuple(s for s, _ in kernel.scalars):
            assert operand in parameters, (name, operand)
        method = vars(PyCudaHandler)[name]
        assert inspect.signature(method) == signature(op)
        assert inspect.getsourcefile(method) != inspect.getsourcefile(pycuda_handler)
    assert 'x' not in kernels.ELEMENTWISE_OPS['tanh_deriv'].inputs  # reads y only


def test_old_module_paths_are_the_cuda_package():
    import brainstorm.handlers.pycuda_handler as old

    assert old.PyCudaHandler is PyCudaHandler and old.GPUView is GPUView
    assert PyCudaHandler.__module__ == 'brainstorm.handlers.cuda.handler'


@pytest.mark.skipif(shutil.which('nvcc') is None, reason='nvcc is not installed')
@pytest.mark.parametrize('module', sorted(kernels.KERNEL_SOURCES))
def test_every_kernel_source_compiles_to_ptx(module, tmp_path):
    source = tmp_path / f'{module}.cu'
    source.write_text(kernels.KERNEL_SOURCES[module])
    ptx = tmp_path / f'{module}.ptx'
    result = subprocess.run(
        [
            'nvcc',
            '--ptx',
            '-arch=sm_80',
            '-Werror',
            'all-warnings',
            str(source),
            '-o',
            str(ptx),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f'nvcc failed on {module}:\n{result.stderr}'
    entries = set(re.findall(r'\.entry\s+(\w+)', ptx.read_text()))
    assert entries == set(kernels.kernel_arg_formats(kernels.KERNEL_SOURCES[module]))


# ================================================ CPU emulation of the GPU ===

_SHIM = r"""
#include <barrier>
#include <cmath>
#include <cstring>
#include <math.h>
#include <thread>
#include <vector>
struct dim3 { unsigned int x, y, z; };
static dim3 gridDim, blockDim, blockIdx;
static thread_local dim3 threadIdx;
static std::barrier<>* bs_barrier = nullptr;
#define __global__
#define __device__
#define __shared__ static
static inline void __syncthreads() { bs_barrier->arrive_and_wait(); }
static inline unsigned int __umulhi(unsigned int a, unsigned int b)
{ return (unsigned int)(((unsigned long long)a * b) >> 32); }
static inline float __int_as_float(int i)
{ float f; std::memcpy(&f, &i, sizeof f); return f; }
static inline float cospif(float x)
{ return (float)std::cos(3.14159265358979323846 * (double)x); }
using std::isfinite;
static inline float atomicAdd(float* a, float v)
{ float o = *a; *a = o + v; return o; }
"""

_SIGNATURE = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')


def _launchers(source: str) -> str:
    """A ``launch_<kernel>(grid, block, args...)`` C++ wrapper per kernel.

    Threads of a block run one after the other, except in kernels that
    call __syncthreads: there every GPU thread is an OS thread and
    __syncthreads a barrier.
    """
    matches = list(_SIGNATURE.finditer(source))
    code = []
    for k, match in enumerate(matches):
        name, params = match.group(1), ' '.join(match.group(2).split())
        end = matches[k + 1].start() if k + 1 < len(matches) else len(source)
        threaded = '__syncthreads' in source[match.end() : end]
        args = ', '.join(p.split()[-1].lstrip('*') for p in params.split(','))
        set_thread = (
            'threadIdx = dim3{bs_t % bs_bx, (bs_t / bs_bx) % bs_by, '
            'bs_t / (bs_bx * bs_by)};'
        )
        if threaded:
            body = (
                f'std::barrier<> bs_bar(bs_nt); bs_barrier = &bs_bar;\n'
                f'std::vector<std::thread> bs_pool;\n'
                f'for (unsigned bs_t = 0; bs_t < bs_nt; ++bs_t) '
                f'bs_pool.emplace_back([=]() {{ {set_thread} '
                f'{name}({args}); }});\n'
                f'for (auto& bs_th : bs_pool) bs_th.join();'
            )
        else:
            body = (
                f'for (unsigned bs_t = 0; bs_t < bs_nt; ++bs_t) {{ '
                f'{set_thread} {name}({args}); }}'
            )
        code.append(
            f'extern "C" void launch_{name}(unsigned bs_gx, unsigned bs_gy, '
            f'unsigned bs_bx, unsigned bs_by, unsigned bs_bz, {params}) {{\n'
            f'gridDim = dim3{{bs_gx, bs_gy, 1}};\n'
            f'blockDim = dim3{{bs_bx, bs_by, bs_bz}};\n'
            f'unsigned bs_nt = bs_bx * bs_by * bs_bz;\n'
            f'for (unsigned bs_y = 0; bs_y < bs_gy; ++bs_y) '
            f'for (unsigned bs_x = 0; bs_x < bs_gx; ++bs_x) {{\n'
            f'blockIdx = dim3{{bs_x, bs_y, 0}};\n{body}\n}}\n}}\n'
        )
    return '\n'.join(code)


_LIBRARIES = {}  # source digest -> ctypes library
_CTYPES = {
    'P': ctypes.c_void_p,
    'i': ctypes.c_int,
    'I': ctypes.c_uint,
    'f': ctypes.c_float,
}
_RANGES = {'i': (-(2**31), 2**31), 'I': (0, 2**32)}
GUARD = 16  # fence cells on each side of every emulated allocation
GUARD_VALUE = np.float32(-7.25e33)


class FakeAllocation:
    """Emulated device memory: NaN-filled (content is arbitrary) and fenced."""

    live = weakref.WeakSet()

    def __init__(self, shape, dtype=np.float32):
        assert np.dtype(dtype) == np.float32
        self.size = int(np.prod(shape))
        self.host = np.full(self.size + 2 * GUARD, np.nan, np.float32)
        self.host[:GUARD] = self.host[-GUARD:] = GUARD_VALUE
        self.start = self.host.ctypes.data + 4 * GUARD
        self.gpudata = self.start
        FakeAllocation.live.add(self)

    def elements(self, ptr: int, count: int) -> np.ndarray:
        """The ``count`` float32 cells from device address ``ptr``."""
        offset = (ptr - self.start) // 4
        assert (ptr - self.start) % 4 == 0
        assert 0 <= offset and offset + count <= self.size, (
            f'access outside an allocation of {self.size}: [{offset}, {offset + count})'
        )
        return self.host[GUARD + offset : GUARD + offset + count]

    @staticmethod
    def find(ptr: int) -> 'FakeAllocation':
        for alloc in FakeAllocation.live:
            if alloc.start <= ptr <= alloc.start + 4 * alloc.size:
                return alloc
        raise AssertionError(f'pointer {ptr:#x} is in no live allocation')

    @staticmethod
    def check_guards() -> None:
        for alloc in list(FakeAllocation.live):
            assert np.all(alloc.host[:GUARD] == GUARD_VALUE) and np.all(
                alloc.host[-GUARD:] == GUARD_VALUE
            ), 'a kernel wrote outside its allocation'


class FakeFunction:
    """A kernel of the CPU-compiled library, called like PyCUDA's."""

    def __init__(self, library, name):
        self.launch = getattr(library, f'launch_{name}')
        self.name = name

    def prepare(self, arg_format):
        self.format = arg_format
        self.launch.argtypes = [ctypes.c_uint] * 5 + [_CTYPES[c] for c in arg_format]
        self.launch.restype = None
        return self

    def prepared_call(self, grid, block, *args):
        assert len(args) == len(self.format), (self.name, args)
        for char, arg in zip(self.format, args):
            if char in _RANGES:
                low, high = _RANGES[char]
                assert isinstance(arg, int) and low <= arg < high, (
                    self.name,
                    char,
                    arg,
                )
            elif char == 'P':
                FakeAllocation.find(arg)
        grid = tuple(grid) + (1,) * (3 - len(grid))
        assert grid[2] == 1 and 0 < grid[0] < 2**31 and 0 < grid[1] < 65536
        assert len(block) == 3 and 0 < math.prod(block) <= 1024, block
        self.launch(grid[0], grid[1], *block, *args)
        FakeAllocation.check_guards()


class FakeSourceModule:
    """Compiles a kernel source for the CPU (g++) and hands out kernels."""

    def __init__(self, source, no_extern_c=False, **kwargs):
        assert no_extern_c and '#include' not in source
        digest = hashlib.sha1(source.encode()).hexdigest()
        library = _LIBRARIES.get(digest)
        if library is None:
            directory = Path(os.environ.get('PYTEST_EMULATION_DIR', '/tmp'))
            target = directory / f'bs_kernels_{digest}.so'
            if not target.exists():
                code = directory / f'bs_kernels_{digest}.cpp'
                code.write_text(_SHIM + source + _launchers(source))
                subprocess.run(
                    [
                        'g++',
                        '-std=c++20',
                        '-O1',
                        '-shared',
                        '-fPIC',
                        '-pthread',
                        str(code),
                        '-o',
                        str(target),
                    ],
                    check=True,
                    capture_output=True,
                    timeout=300,
                )
            library = _LIBRARIES[digest] = ctypes.CDLL(str(target))
        self.library = library

    def get_function(self, name):
        return FakeFunction(self.library, name)


class FakeCublas:
    """cuBLAS replaced by :func:`emulate_sgemm` on emulated memory."""

    def set_stream(self, stream):
        assert stream is None

    def sgemm(self, call, alpha, a_ptr, b_ptr, beta, c_ptr):
        memories = []
        for ptr in (a_ptr, b_ptr, c_ptr):
            alloc = FakeAllocation.find(ptr)
            memories.append((alloc.host, GUARD + (ptr - alloc.start) // 4))
        (a_mem, a_off), (b_mem, b_off), (c_mem, c_off) = memories
        emulate_sgemm(call, alpha, a_mem, a_off, b_mem, b_off, beta, c_mem, c_off)
        FakeAllocation.check_guards()


def _fake_pycuda_modules() -> dict:
    def memset_d32(ptr, value, count):
        cells = FakeAllocation.find(ptr).elements(ptr, count)
        cells.view(np.uint32)[...] = value

    def memcpy_htod(ptr, host):
        host = np.ascontiguousarray(host)
        assert host.dtype == np.float32
        FakeAllocation.find(ptr).elements(ptr, host.size)[...] = host.ravel()

    def memcpy_dtoh(host, ptr):
        assert host.dtype == np.float32 and host.flags.c_contiguous
        host.reshape(-1)[...] = FakeAllocation.find(ptr).elements(ptr, host.size)

    context = types.SimpleNamespace(handle=12345)
    driver = types.ModuleType('pycuda.driver')
    driver.init = lambda *args: None
    driver.Context = types.SimpleNamespace(get_current=lambda: context)
    driver.memset_d32 = memset_d32
    driver.memcpy_htod = memcpy_htod
    driver.memcpy_dtoh = memcpy_dtoh
    gpuarray = types.ModuleType('pycuda.gpuarray')
    gpuarray.empty = FakeAllocation
    compiler = types.ModuleType('pycuda.compiler')
    compiler.SourceModule = FakeSourceModule
    package = types.ModuleType('pycuda')
    package.driver, package.gpuarray, package.compiler = driver, gpuarray, compiler
    return {
        'pycuda': package,
        'pycuda.driver': driver,
        'pycuda.gpuarray': gpuarray,
        'pycuda.compiler': compiler,
    }


# ======================================================= handler backends ===


def _gpu_problem():
    """None if PyCUDA, a GPU and cuBLAS are usable, else the reason."""
    try:
        import pycuda.driver as drv

        drv.init()
        if drv.Device.count() == 0:
            return 'no CUDA device'
        cublas.load_cublas()
    except Exception as err:  # ImportError, CUDA driver errors
        return f'needs PyCUDA, cuBLAS and an NVIDIA GPU ({err})'
    return None


GPU_PROBLEM = _gpu_problem()
BACKENDS = [
    pytest.param(
        'emulated',
        marks=pytest.mark.skipif(
            shutil.which('g++') is None,
            reason='the CPU emulation of the kernels needs g++',
        ),
    ),
    pytest.param(
        'gpu',
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(GPU_PROBLEM is not None, reason=str(GPU_PROBLEM)),
        ],
    ),
]


@pytest.fixture(scope='session')
def emulation_dir(tmp_path_factory):
    return tmp_path_factory.mktemp('cuda_emulation')


@pytest.fixture(params=BACKENDS)
def make_handler(request, monkeypatch, emulation_dir):
    """A factory of PyCudaHandlers, real or emulated on the CPU."""
    if request.param == 'emulated':
        for name, module in _fake_pycuda_modules().items():
            monkeypatch.setitem(sys.modules, name, module)
        monkeypatch.setattr(pycuda_handler, 'Cublas', FakeCublas)
        monkeypatch.setattr(pycuda_handler, '_MODULES', {})
        monkeypatch.setattr(pycuda_handler, '_BLAS', {})
        monkeypatch.setenv('PYTEST_EMULATION_DIR', str(emulation_dir))
    return PyCudaHandler


@pytest.fixture
def handler(make_handler):
    return make_handler(seed=1)


# ===================================================== the shared op table ===


@pytest.mark.parametrize('op, args, ref, check', ops.CASES)
def test_op_table(handler, op, args, ref, check):
    ops.test_op(handler, op, args, ref, check)


@pytest.mark.parametrize('geometry', nan_pooling.GEOMETRIES)
@pytest.mark.parametrize('nans', ['all', 'last window', 'some'])
def test_nan_pooling_windows_point_at_their_first_nan(handler, geometry, nans):
    nan_pooling.check_nan_windows(handler, geometry, nans)


@pytest.mark.parametrize('channels', [2, 9])
def test_conv2d_backward_can_skip_the_input_deltas(handler, channels):
    ops.test_conv2d_backward_can_skip_the_input_deltas(handler, channels)


@pytest.mark.parametrize('op', ['max', 'avg', 'conv'])
def test_the_backward_ops_overwrite_their_input_deltas_when_asked(handler, op):
    overwrite_in_deltas.check_overwrite(handler, op, 'nan')


@pytest.mark.parametrize('layout', ['images', 'strided'])
def test_conv2d_columns_workspace(handler, layout):
    ops.test_conv2d_columns_workspace(
        handler, layout, (2, 5, 6, 2, 3, (3, 3), 1, (2, 1))
    )


@pytest.mark.parametrize('op, args, ref, check', ops.conv_rows())
def test_chunked_convolution_matches_numpy(handler, monkeypatch, op, args, ref, check):
    """With an im2col budget of one element every image is its own chunk;
    forward and backward convolutions must still match NumPy float64.
    (Guards against: dropping ``beta = 1.0`` in the weight-gradient GEMM, so
    each chunk overwrote the gradient of the chunks before it; ordinary CNN
    sizes take the chunked path, no test shape did.)"""
    monkeypatch.setattr(pycuda_handler, 'COL_ELEMENTS', 1)
    chunkings = []
    original = PyCudaHandler._batch_chunks

    def spy(self, n, per_image):
        chunks = list(original(self, n, per_image))
        chunkings.append((n, chunks))
        return iter(chunks)

    monkeypatch.setattr(PyCudaHandler, '_batch_chunks', spy)
    ops.run_case(handler, op, args, ref, check)
    assert chunkings, 'the chunked path was not taken'
    assert all(len(chunks) == n for n, chunks in chunkings)


@pytest.mark.parametrize('name', ops.ACTIVATION_NAMES)
def test_conv2d_forward_batch_applies_its_activation(handler, name):
    """Also where the outputs are strided and the rows spill to scratch."""
    ops.test_conv2d_forward_batch_applies_its_activation(handler, name)


@pytest.mark.parametrize('name', ops.ACTIVATIONS)
def test_activation_dicts(handler, name):
    ops.test_activation_dicts(handler, name)


def test_handler_basics(handler):
    ops.test_get_numpy_copy_is_a_copy(handler)
    ops.test_handler_attributes(handler)
    ops.test_seeded_handlers_draw_the_same_numbers(handler)
    import copy
    import pickle

    ops.test_copied_handlers_own_their_activation_dicts(handler, copy.deepcopy)
    ops.test_copied_handlers_own_their_activation_dicts(
        handler, lambda h: pickle.loads(pickle.dumps(h))
    )
    from brainstorm.describable import get_description

    assert get_description(handler) == {'@type': 'PyCudaHandler'}


# ======================================= layers and networks against NumPy ===


def _layer_cases():
    from tests.layers.test_layer_registry import _cases

    return _cases()


def _compare(what, got, want):
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(
        got,
        want,
        rtol=1e-4,
        atol=1e-4 * scale,
        err_msg=f'{what} (float32 vs float64, shape {np.shape(want)})',
    )


def _run_layer(entry, kwargs, spec, handler, training_pass, seed):
    """Forward and backward of one registry layer; its results in NumPy."""
    from brainstorm.testing import instantiate_layer, set_up_layer

    layer = instantiate_layer(entry['layer_class'], entry['in_shapes'], **kwargs)
    buffers, manager = set_up_layer(layer, spec, handler)
    handler.rnd.set_seed(seed)
    layer.forward_pass(buffers, training_pass=training_pass)
    manager.clear_backward_buffers()
    rng = np.random.RandomState(11)
    t = spec['time_steps']
    for name, array in buffers.output_deltas.items():
        deltas = rng.randn(*array.shape)
        structure = layer.out_shapes[name]
        if structure.buffer_type == 2 and structure.context_size:
            deltas[t:] = 0  # the backward context slot stays zero
        handler.set_from_numpy(array, deltas)
    layer.backward_pass(buffers)
    get = handler.get_numpy_copy
    return {
        f'{category}.{name}': get(array)
        for category in ('outputs', 'parameters', 'input_deltas', 'gradients')
        for name, array in buffers[category].items()
    }


@pytest.mark.parametrize('entry, time_steps, batch_size, activation', _layer_cases())
def test_layer_matches_numpy_float64(
    make_handler, entry, time_steps, batch_size, activation
):
    kwargs = dict(entry.get('kwargs', {}))
    if activation:
        kwargs['activation'] = activation
    rnd = np.random.RandomState(7)
    spec = {'time_steps': time_steps, 'batch_size': batch_size}
    for key, value in entry.get('spec', {}).items():
        spec[key] = value(time_steps, batch_size, rnd) if callable(value) else value
    # random layers (Dropout) draw differently on the GPU: they are
    # compared in inference mode
    runs = [
        _run_layer(entry, kwargs, spec, NumpyHandler(np.float64), True, seed)
        for seed in (5, 6)
    ]
    training_pass = all(np.array_equal(runs[0][k], runs[1][k]) for k in runs[0])
    want = (
        runs[0]
        if training_pass
        else _run_layer(entry, kwargs, spec, NumpyHandler(np.float64), False, 5)
    )
    got = _run_layer(entry, kwargs, spec, make_handler(seed=1), training_pass, 5)
    assert got.keys() == want.keys()
    for key in want:
        _compare(f'{entry["id"]} {key}', got[key], want[key])


def _small_nets():
    from brainstorm.layers import (
        Convolution2D,
        FullyConnected,
        Pooling2D,
        Recurrent,
    )
    from brainstorm.structure.network import Network
    from brainstorm.tools import get_in_out_layers

    inp, proj = get_in_out_layers('classification', 3, 4)
    recurrent = Network.from_layer(
        inp
        >> Recurrent(5, name='Rec')
        >> FullyConnected(6, activation='rel', name='Hid')
        >> proj
    )
    inp, proj = get_in_out_layers('classification', (5, 4, 2), 3)
    convolutional = Network.from_layer(
        inp
        >> Convolution2D(3, (3, 3), padding=1, activation='tanh', name='Conv')
        >> Pooling2D((2, 2), stride=(2, 2), name='Pool')
        >> proj
    )
    rng = np.random.RandomState(0)
    return [
        (
            recurrent,
            {'default': rng.randn(4, 3, 3), 'targets': rng.randint(0, 4, (4, 3, 1))},
        ),
        (
            convolutional,
            {
                'default': rng.randn(2, 3, 5, 4, 2),
                'targets': rng.randint(0, 3, (2, 3, 1)),
            },
        ),
    ]


def _train(net, handler, data, steps=3):
    from brainstorm.initializers import Gaussian

    net.set_handler(handler)
    net.initialize(Gaussian(0.5), seed=3)
    losses = []
    for _ in range(steps):
        net.provide_external_data(data)
        net.forward_pass(training_pass=True)
        net.backward_pass()
        losses.append(net.get_loss_values()['total_loss'])
        handler.mult_add_st(-0.1, net.buffer.gradients, net.buffer.parameters)
    return net.get('parameters'), np.array(losses)


@pytest.mark.parametrize('index', [0, 1], ids=['recurrent', 'conv'])
def test_training_steps_match_cpu(make_handler, index):
    net, data = _small_nets()[index]
    want, want_losses = _train(net, NumpyHandler(np.float64), data)
    net, data = _small_nets()[index]
    got, got_losses = _train(net, make_handler(seed=1), data)
    assert got.dtype == np.float32
    _compare('losses', got_losses, want_losses)
    _compare('parameters after 3 SGD steps', got, want)
    assert not np.allclose(want, _small_nets()[index][0].get('parameters'))


def test_set_handler_moves_buffers_and_saving_matches_cpu(make_handler, tmp_path):
    import h5py

    from brainstorm.initializers import Gaussian

    net, data = _small_nets()[0]
    net.set_handler(NumpyHandler(np.float32))
    net.initialize(Gaussian(0.5), seed=3)
    net.provide_external_data(data)
    net.forward_pass()
    cpu_params, cpu_out = net.get('parameters'), net.get('Output.outputs.predictions')
    net.save_as_hdf5(str(tmp_path / 'cpu.hdf5'))
    gpu = make_handler(seed=1)
    net.set_handler(gpu)
    assert isinstance(net.buffer.parameters, GPUView)
    assert all(isinstance(a, GPUView) for a in net.buffer.Rec.parameters)
    np.testing.assert_array_equal(net.get('parameters'), cpu_params)
    net.provide_external_data(data)
    net.forward_pass()
    got = net.get('Output.outputs.predictions')
    assert isinstance(got, np.ndarray)
    _compare('predictions after set_handler', got, cpu_out)
    net.save_as_hdf5(str(tmp_path / 'gpu.hdf5'))
    with h5py.File(tmp_path / 'cpu.hdf5') as a, h5py.File(tmp_path / 'gpu.hdf5') as b:
        assert dict(a.attrs) == dict(b.attrs)
        np.testing.assert_array_equal(a['parameters'][()], b['parameters'][()])
        assert a['parameters'].dtype == b['parameters'].dtype
        import json

        descriptions = [json.loads(f['description'][()].tobytes()) for f in (a, b)]
    handlers = [d.pop('handler') for d in descriptions]
    assert descriptions[0] == descriptions[1]
    assert handlers == [
        {'@type': 'NumpyHandler', 'dtype': 'float32'},
        {'@type': 'PyCudaHandler'},
    ]


@pytest.mark.parametrize('index', [0, 1], ids=['recurrent', 'conv'])
def test_predict_matches_forward_pass_and_cpu(make_handler, index):
    """``Network.predict`` on the handler: exactly its own forward pass's
    outputs (all at once and in batches of 2, samples in order), within
    float32 tolerance of NumPy float64, and the network's last batch left
    as it was (issue 26)."""
    from brainstorm.initializers import Gaussian

    def run(handler):
        net, data = _small_nets()[index]
        net.set_handler(handler)
        net.initialize(Gaussian(0.5), seed=3)
        x = {'default': data['default']}
        net.provide_external_data(data)
        net.forward_pass()
        before = net.get('Output.outputs.predictions')
        got = net.predict(x, out_name='Output.outputs.predictions')
        batched = net.predict(x, batch_size=2, out_name='Output.outputs.predictions')
        np.testing.assert_array_equal(got, before)
        np.testing.assert_array_equal(net.get('Output.outputs.predictions'), before)
        return got, batched

    want, _ = run(NumpyHandler(np.float64))
    got, batched = run(make_handler(seed=1))
    assert isinstance(got, np.ndarray) and got.dtype == np.float32
    _compare('predict', got, want)
    _compare('predict in batches of 2', batched, want)


@pytest.mark.parametrize('index', [0, 1], ids=['recurrent', 'conv'])
def test_trainer_runs_match_cpu(make_handler, index):
    """Updates of a Trainer with a MomentumStepper, same seed and data,
    on PyCudaHandler and on NumPy float64: the parameters and the epoch
    losses agree within float32 tolerance. (The training comparison of
    docs/gpu.rst; the three plain SGD steps above do not go through the
    Trainer, the stepper's update ops or the data iterators.)"""
    from brainstorm.data_iterators import Minibatches
    from brainstorm.hooks import StopAfterEpoch
    from brainstorm.initializers import Gaussian
    from brainstorm.training import MomentumStepper, Trainer

    def train(handler):
        net, data = _small_nets()[index]
        net.set_handler(handler)
        net.initialize(Gaussian(0.3), seed=3)
        trainer = Trainer(
            MomentumStepper(learning_rate=0.02, momentum=0.9), verbose=False
        )
        trainer.add_hook(StopAfterEpoch(20))
        batches = Minibatches(1, shuffle=False, **data)  # three updates per epoch
        trainer.train(net, batches)
        return net.get('parameters'), np.array(
            trainer.logs['rolling_training']['total_loss']
        )

    want, want_losses = train(NumpyHandler(np.float64))
    got, got_losses = train(make_handler(seed=1))
    assert got.dtype == np.float32 and len(got_losses) == len(want_losses) == 20
    scale = max(1.0, float(np.max(np.abs(want))))
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * scale)
    np.testing.assert_allclose(got_losses, want_losses, rtol=1e-3, atol=1e-4)
    assert want_losses[-1] < want_losses[0]  # it really trained


def test_lstm_steps_are_one_kernel_each_and_fall_back_where_they_must(
    handler, monkeypatch
):
    """The fused kernels run for feature slices (adjacent columns); a view
    with spaced columns takes the base class's composition; both agree with
    the equations (the op-table rows check the values of the fused path)."""
    launches = []
    original = PyCudaHandler._launch

    def spy(self, module, kernel, total, *args):
        launches.append((module, kernel))
        return original(self, module, kernel, total, *args)

    monkeypatch.setattr(PyCudaHandler, '_launch', spy)
    (row,) = [r for r in ops.CASES if r.id == 'lstm_forward_step-tanh']
    ops.run_case(handler, *row.values)
    assert launches == [('recurrent', 'lstm_forward_step')]
    launches.clear()
    (row,) = [r for r in ops.CASES if r.id == 'lstm_backward_step-last']
    ops.run_case(handler, *row.values)
    assert launches == [('recurrent', 'lstm_backward_step')]

    launches.clear()
    rng = np.random.RandomState(3)
    B, S = 2, 3
    spaced = handler.create_from_numpy(rng.randn(B, 8 * S))[:, ::2]
    args = [handler.create_from_numpy(rng.randn(*shape)) for shape in
            [(B, S), (1, S), (1, S), (1, S)]]  # fmt: skip
    outs = [handler.create_from_numpy(np.zeros(shape)) for shape in
            [(B, 4 * S), (B, S), (B, S), (B, S)]]  # fmt: skip
    values = [handler.get_numpy_copy(a) for a in [spaced, *args]]
    handler.lstm_forward_step(spaced, *args, 'tanh', *outs)
    assert ('recurrent', 'lstm_forward_step') not in launches
    want = ops._lstm_forward_ref(*values, 'tanh', None, None, None, None)
    got = [handler.get_numpy_copy(a) for a in [spaced, *outs]]
    for name, array in zip(['gates', 'gate_outputs', 'c', 'c_out', 'y'], got):
        np.testing.assert_allclose(array, want[name], rtol=1e-5, atol=1e-5)
