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

import brainstorm.handlers.pycuda_handler as pycuda_handler  # noqa: E402
from brainstorm.handlers import NumpyHandler  # noqa: E402
from brainstorm.handlers import _cublas as cublas  # noqa: E402
from brainstorm.handlers import _cuda_kernels as kernels  # noqa: E402
from brainstorm.handlers.base_handler import Handler  # noqa: E402
from brainstorm.handlers.pycuda_handler import (  # noqa: E402
    GPUView,
    PyCudaHandler,
    coalesce,
)

try:
    from tests.handlers import test_handler_ops as ops
except ImportError:  # tests/handlers is not a package: pytest's sys.path
    import test_handler_ops as ops


# ============================================================ pure Python ===

def test_class_is_importable_and_concrete_without_pycuda():
    assert inspect.isclass(PyCudaHandler)
    assert not inspect.isabstract(PyCudaHandler)
    assert PyCudaHandler.array_type is GPUView
    assert PyCudaHandler.dtype is np.float32


def test_every_op_has_the_base_signature():
    for name in Handler.__abstractmethods__:
        method = PyCudaHandler.__dict__.get(name)
        assert method is not None, f'PyCudaHandler.{name} is missing'
        assert inspect.signature(method) == inspect.signature(
            getattr(Handler, name)), name


def test_without_pycuda_the_constructor_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, 'pycuda', None)
    monkeypatch.setitem(sys.modules, 'pycuda.driver', None)
    with pytest.raises(ImportError, match=r'pip install brainstorm\[pycuda\]'):
        PyCudaHandler()
    from brainstorm.describable import create_from_description
    with pytest.raises(ImportError, match='CUDA toolkit'):
        create_from_description({'@type': 'PyCudaHandler'})


def test_import_brainstorm_needs_no_cuda():
    code = ('import sys; sys.modules["pycuda"] = None; import brainstorm; '
            'from brainstorm.handlers import PyCudaHandler; '
            'print(PyCudaHandler.__name__)')
    result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'PyCudaHandler'


# ------------------------------------------------------------ GPUView ---

def _numpy_layout(view: np.ndarray, base: np.ndarray):
    """(element offset, element strides) of a NumPy view of ``base``."""
    offset = (view.__array_interface__['data'][0] -
              base.__array_interface__['data'][0]) // base.itemsize
    return offset, tuple(s // base.itemsize for s in view.strides)


def _emulate(view: GPUView, memory: np.ndarray) -> np.ndarray:
    """The elements a GPUView addresses, read from a flat NumPy memory."""
    if view.size == 0:
        return np.zeros(view.shape)
    return as_strided(memory[view.offset:], view.shape,
                      [s * memory.itemsize for s in view.strides])


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
            assert all(s == t for s, t, n in zip(view.strides, strides,
                                                 view.shape) if n > 1)


@pytest.mark.parametrize('item, error', [
    ((0, 0, 0, 0), IndexError), ((7,), IndexError), ((-7,), IndexError),
    ((slice(None, None, -1),), IndexError), ((Ellipsis, Ellipsis), IndexError),
    ((1.5,), IndexError), ((True,), IndexError)])
def test_gpuview_rejects_bad_indices(item, error):
    with pytest.raises(error):
        GPUView(None, 0, 0, (6, 4, 10))[item]


def _carve(memory, t, c, b, f_total, start, stop, feature_shape):
    """A BufferManager-style feature slice, NumPy and GPUView alike."""
    big = memory[:(t + c) * b * f_total]
    np_big = big.reshape(t + c, b, f_total)
    view = GPUView(None, 0, 0, (len(big),)).reshape(t + c, b, f_total)
    shape = (t + c, b) + feature_shape
    return (np_big[:, :, start:stop].reshape(shape),
            view[:, :, start:stop].reshape(shape))


RESHAPES = [
    (3, 1, 2, 10, 2, 8, (6,), [(8, 6), (4, 2, 6), (48,)]),
    (3, 1, 2, 10, 2, 8, (2, 3), [(8, 6), (8, 2, 3), (4, 2, 2, 3), (8, 3, 2),
                                 (8, 1, 6)]),
    (2, 0, 3, 7, 0, 7, (7,), [(6, 7), (42,), (3, 2, 7), (6, 7, 1)]),
    (4, 1, 1, 9, 3, 4, (1,), [(5,), (5, 1), (1, 5, 1)]),
    (2, 0, 2, 5, 1, 1, (0,), [(0,), (4, 0), (0, 3)]),
]


@pytest.mark.parametrize('t, c, b, f_total, start, stop, features, shapes',
                         RESHAPES)
def test_gpuview_reshape_is_a_view_exactly_when_numpy_can(
        t, c, b, f_total, start, stop, features, shapes):
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
        np.testing.assert_array_equal(_emulate(helper(view), memory),
                                      helper(np_view))
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


@pytest.mark.parametrize('shape, strides, expected', [
    ((5, 3, 8), [(120, 40, 1), (24, 8, 1)], ((15, 8), [(40, 1), (8, 1)])),
    ((5, 3, 8), [(24, 8, 1)], ((120,), [(1,)])),
    ((1, 4, 1), [(0, 7, 3)], ((4,), [(7,)])),
    ((1, 1), [(5, 5)], ((1,), [(0,)])),
    ((4, 5), [(0, 1), (5, 1)], ((4, 5), [(0, 1), (5, 1)])),
    ((2, 3, 4, 5, 6), [(1000, 300, 70, 13, 2)],
     ((2, 3, 4, 5, 6), [(1000, 300, 70, 13, 2)])),
    ((2, 3, 4), [(720, 240, 60)], ((24,), [(60,)])),
])
def test_coalesce(shape, strides, expected):
    assert coalesce(shape, strides) == expected


# ----------------------------------------------------------- cuBLAS ---

def emulate_sgemm(call, alpha, a_mem, a_off, b_mem, b_off, beta, c_mem,
                  c_off):
    """``cublasSgemm`` on flat NumPy memories, with cuBLAS's argument checks."""
    m, n, k = call.m, call.n, call.k
    assert min(m, n, k) >= 0, call
    a_shape = (m, k) if call.transa == cublas.CUBLAS_OP_N else (k, m)
    b_shape = (k, n) if call.transb == cublas.CUBLAS_OP_N else (n, k)
    for ld, rows, what in ((call.lda, a_shape[0], 'lda'),
                           (call.ldb, b_shape[0], 'ldb'),
                           (call.ldc, m, 'ldc')):
        assert ld >= max(1, rows), f'CUBLAS_STATUS_INVALID_VALUE: {what} {call}'
    if m == 0 or n == 0:
        return

    def column_major(mem, off, shape, ld):
        if 0 in shape:
            return np.zeros(shape)
        assert off >= 0 and off + (shape[1] - 1) * ld + shape[0] <= mem.size, \
            f'operand outside its memory: {call}'
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
    view = as_strided(memory[offset:], (rows, cols),
                      (memory.itemsize * stride, memory.itemsize))
    return memory, view, stride


GEMM_SIZES = [(3, 4, 5), (1, 4, 5), (3, 1, 5), (3, 4, 1), (1, 1, 1),
              (2, 3, 0), (0, 3, 2), (4, 0, 2), (1, 1, 7)]


@pytest.mark.parametrize('m, n, k', GEMM_SIZES)
@pytest.mark.parametrize('transa', [False, True])
@pytest.mark.parametrize('transb', [False, True])
@pytest.mark.parametrize('gap', [0, 3])
def test_row_major_gemm_mapping_against_column_major_emulation(
        m, n, k, transa, transb, gap):
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
        as_strided(touched[4:], (m, n),
                   (touched.itemsize * c_stride, touched.itemsize))[...] = True
    np.testing.assert_array_equal(c_mem[~touched], c_mem_before[~touched])


@pytest.mark.parametrize('rows, cols, row_stride, col_stride, expected', [
    (3, 4, 4, 1, 4), (3, 4, 9, 1, 9), (1, 4, 0, 1, 4), (3, 1, 7, 5, 7),
    (3, 4, 4, 2, None), (3, 4, 3, 1, None), (3, 4, 0, 1, None),
    (0, 4, 0, 1, 4), (5, 0, 0, 1, 1), (1, 1, 0, 0, 1)])
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
    monkeypatch.setattr(cublas, 'library_candidates',
                        lambda: ['/nonexistent/libcublas.so.99'])
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
        c = [((p1 >> 32) ^ c[1] ^ k0) & mask, p1 & mask,
             ((p0 >> 32) ^ c[3] ^ k1) & mask, p0 & mask]
    return c


@pytest.mark.parametrize('counter, key, expected', [  # Random123's KAT
    ([0, 0, 0, 0], [0, 0], [0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8]),
    ([0xffffffff] * 4, [0xffffffff] * 2,
     [0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd]),
    ([0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344],
     [0xa4093822, 0x299f31d0],
     [0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1]),
])
def test_philox_transcription_matches_known_answers(counter, key, expected):
    assert philox(counter, *key) == expected
    source = kernels.KERNEL_SOURCES['elementwise']
    for constant in ('0xD2511F53u', '0xCD9E8D57u', '0x9E3779B9u',
                     '0xBB67AE85u', 'round < 10'):
        assert constant in source


def test_kernel_arg_formats_follow_the_c_signatures():
    formats = kernels.kernel_arg_formats(
        'extern "C" __global__ void k(int n, const float* a, float* b,\n'
        '    unsigned int key, float s)\n{}\n')
    assert formats == {'k': 'iPPIf'}
    with pytest.raises(ValueError, match='double'):
        kernels.kernel_arg_formats(
            'extern "C" __global__ void k(double x) {}')
    every = {}
    for source in kernels.KERNEL_SOURCES.values():
        every.update(kernels.kernel_arg_formats(source))
    assert {f'ew_{name}' for name in kernels.ELEMENTWISE_OPS} <= set(every)
    handler_source = inspect.getsource(pycuda_handler)
    used = set(re.findall(r"_launch\(\s*'\w+', '(\w+)'", handler_source))
    used |= set(re.findall(r"_function\(\s*'\w+', '(\w+)'", handler_source))
    assert used and used <= set(every), used - set(every)


@pytest.mark.skipif(shutil.which('nvcc') is None, reason='nvcc is not installed')
@pytest.mark.parametrize('module', sorted(kernels.KERNEL_SOURCES))
def test_every_kernel_source_compiles_to_ptx(module, tmp_path):
    source = tmp_path / f'{module}.cu'
    source.write_text(kernels.KERNEL_SOURCES[module])
    ptx = tmp_path / f'{module}.ptx'
    result = subprocess.run(
        ['nvcc', '--ptx', '-arch=sm_80', '-Werror', 'all-warnings',
         str(source), '-o', str(ptx)], capture_output=True, text=True,
        timeout=300)
    assert result.returncode == 0, f'nvcc failed on {module}:\n{result.stderr}'
    entries = set(re.findall(r'\.entry\s+(\w+)', ptx.read_text()))
    assert entries == set(kernels.kernel_arg_formats(
        kernels.KERNEL_SOURCES[module]))
