"""CUDA C sources of every kernel of :class:`PyCudaHandler`.

Plain Python: nothing here needs PyCUDA, so the sources can be read, parsed
and compiled with ``nvcc --ptx`` on machines without a GPU (the test suite
does that wherever nvcc is installed).

``KERNEL_SOURCES`` maps a module name to one self-contained CUDA C source
(no ``#include``; only what nvcc provides by itself). Every kernel is
``extern "C"`` so PyCUDA finds it by its plain name, and
:func:`kernel_arg_formats` derives each kernel's PyCUDA ``prepare`` format
from its C signature, so the Python side cannot disagree with the C side
about argument types.

**The strided operand convention.** Handler arrays are strided views (see
:class:`~brainstorm.handlers.pycuda_handler.GPUView`). Elementwise kernels
iterate over a logical C-order index ``i < n`` of a shape padded to four
dimensions ``(d0, d1, d2, d3)`` (``n = d0*d1*d2*d3``; ``d0`` is implied)
and every operand ``x`` comes as a pointer ``p_x`` with four element
strides ``x_0 .. x_3``, so the element of operand ``x`` at ``i`` is
``p_x[i0*x_0 + i1*x_1 + i2*x_2 + i3*x_3]`` with ``(i0, i1, i2, i3)`` the
digits of ``i``. A stride of 0 broadcasts. Image kernels take the four
strides of each ``(N, H, W, C)`` operand the same way.

All indices are ``int`` (the handler refuses arrays of 2**30 or more
elements); offsets are computed in ``long long``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from brainstorm.handlers.ops import OPS

__all__ = [
    'ELEMENTWISE',
    'ELEMENTWISE_OPS',
    'elementwise_op',
    'ElementwiseOp',
    'KERNEL_SOURCES',
    'BLOCK_SIZE',
    'REDUCE_BLOCKS',
    'kernel_arg_formats',
    'elementwise_source',
]

BLOCK_SIZE = 256  # threads per block of the 1-D kernels (a power of two)
REDUCE_BLOCKS = 128  # partial sums of the first pass of a full reduction
SUM_TILE = (32, 8)  # block of the column-sum kernel: columns x row groups


class ElementwiseOp(NamedTuple):
    """One elementwise kernel: operands, scalars and the per-element body.

    ``inputs`` are read into ``const float`` locals of the same name before
    the body runs; ``outputs`` are ``float&`` references (so ``out += x``
    reads and writes). Because all inputs are loaded first, an output may
    be the very same array as an input. ``scalars`` are ``(name, C type)``
    pairs passed by value. The body may also use ``i``, the logical C-order
    index of the element.
    """

    inputs: tuple
    outputs: tuple
    scalars: tuple
    body: str


_F = 'float'
_U = 'unsigned int'

#: The elementwise ops of the op table
#: (:data:`brainstorm.handlers.ops.OPS`): op name -> the CUDA C statement
#: that computes one element, in the op's own parameter names. The
#: operands the op writes are ``float&`` references (so ``out = out + a``
#: reads and writes), the arrays it reads ``const float`` values and its
#: scalars ``float`` values; the handler gets these ops from this table.
ELEMENTWISE = {
    # copy/fill
    'copy_to': 'dest = src;',
    'copy_to_if': 'if (cond != 0.0f) dest = src;',
    'fill': 'mem = val;',
    'fill_if': 'if (cond != 0.0f) mem = val;',
    # math A to Z
    'abs_t': 'out = fabsf(a);',
    'add_into_if': 'if (cond != 0.0f) out = out + a;',
    'add_mv': 'out = m + v;',
    'add_st': 'out = t + s;',
    'add_tt': 'out = a + b;',
    # comparisons instead of fminf/fmaxf so that NaN stays NaN (as in NumPy)
    'clip_t': 'out = (a < a_min) ? a_min : ((a > a_max) ? a_max : a);',
    'divide_mv': 'out = m / v;',
    'divide_tt': 'out = a / b;',
    'log_t': 'out = logf(a);',
    'modulo_tt': 'out = fmodf(a, b);',
    'mult_add_mv': 'out = out + m * v;',
    'mult_add_st': 'out = out + s * t;',
    'mult_add_tt': 'out = out + a * b;',
    'mult_mv': 'out = m * v;',
    'mult_st': 'out = s * t;',
    'mult_tt': 'out = a * b;',
    'sign_t': 'out = (a > 0.0f) ? 1.0f : ((a < 0.0f) ? -1.0f : a);',
    'sqrt_t': 'out = sqrtf(a);',
    'subtract_mv': 'out = m - v;',
    'subtract_tt': 'out = a - b;',
    # activations: f(x), and the derivative from y alone
    'el': 'y = (x > 0.0f) ? x : expm1f(x);',
    'el_deriv': 'dx = dy * fminf(y + 1.0f, 1.0f);',
    'rel': 'y = (x > 0.0f) ? x : 0.0f;',
    'rel_deriv': 'dx = dy * ((y > 0.0f) ? 1.0f : 0.0f);',
    # exp(-x) overflows to inf for x << 0, giving the correct limit 0
    'sigmoid': 'y = 1.0f / (1.0f + expf(-x));',
    'sigmoid_deriv': 'dx = dy * (y * (1.0f - y));',
    'tanh': 'y = tanhf(x);',
    'tanh_deriv': 'dx = dy * (1.0f - y * y);',
}


def elementwise_op(name: str, statement: str) -> ElementwiseOp:
    """The kernel of the op ``name`` of the op table computing ``statement``.

    Its outputs are the operands the op writes; its inputs the other array
    operands the statement uses (an activation derivative does not read
    ``x``); its scalars the op's scalar operands, as ``float``.
    """
    op = OPS[name]
    used = set(re.findall(r'\w+', statement))
    kinds = op.kinds
    inputs = tuple(
        n for n, k in kinds.items() if k == 'array' and n not in op.writes and n in used
    )
    scalars = tuple((n, _F) for n, k in kinds.items() if k == 'scalar')
    return ElementwiseOp(inputs, op.writes, scalars, statement)


# the draws of fill_gaussian and generate_probability_mask
_RANDOM = {
    'gaussian': ElementwiseOp(
        (),
        ('out',),
        (('k0', _U), ('k1', _U), ('mean', _F), ('stddev', _F)),
        'bs_u32x4 r = bs_philox((unsigned int)i, k0, k1);\n'
        'float u1 = (float)((r.x >> 8) + 1u) * BS_2POW_M24;\n'
        'float u2 = (float)(r.y >> 8) * BS_2POW_M24;\n'
        'out = mean + stddev * (sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));',
    ),
    'bernoulli': ElementwiseOp(
        (),
        ('out',),
        (('k0', _U), ('k1', _U), ('p', _F)),
        'bs_u32x4 r = bs_philox((unsigned int)i, k0, k1);\n'
        'out = ((float)(r.x >> 8) * BS_2POW_M24 < p) ? 1.0f : 0.0f;',
    ),
}

#: Every elementwise kernel: ``ew_<name>`` for each name.
ELEMENTWISE_OPS = {
    **{
        name: elementwise_op(name, statement) for name, statement in ELEMENTWISE.items()
    },
    **_RANDOM,
}

# Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2,
# 3", SC 2011): a counter-based generator, so element i of a draw is a pure
# function of (i, key) and needs no per-thread state.
_PHILOX = r"""
#define BS_2POW_M24 5.9604644775390625e-08f

struct bs_u32x4 { unsigned int x, y, z, w; };

__device__ bs_u32x4 bs_philox(unsigned int counter, unsigned int k0,
                              unsigned int k1)
{
    bs_u32x4 c;
    c.x = counter; c.y = 0u; c.z = 0u; c.w = 0u;
    for (int round = 0; round < 10; ++round) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        unsigned int hi0 = __umulhi(0xD2511F53u, c.x);
        unsigned int lo0 = 0xD2511F53u * c.x;
        unsigned int hi1 = __umulhi(0xCD9E8D57u, c.z);
        unsigned int lo1 = 0xCD9E8D57u * c.z;
        bs_u32x4 next;
        next.x = hi1 ^ c.y ^ k0;
        next.y = lo1;
        next.z = hi0 ^ c.w ^ k1;
        next.w = lo0;
        c = next;
    }
    return c;
}
"""

# the digits of the logical index i in the padded shape (d0, d1, d2, d3)
_DIGITS = """\
        int i3 = i % d3;
        int r_ = i / d3;
        int i2 = r_ % d2;
        r_ /= d2;
        int i1 = r_ % d1;
        int i0 = r_ / d1;
"""


def _offset(name: str) -> str:
    return (
        f'(long long)i0 * {name}_0 + (long long)i1 * {name}_1 + '
        f'(long long)i2 * {name}_2 + (long long)i3 * {name}_3'
    )


def elementwise_source(name: str, op: ElementwiseOp) -> str:
    """The CUDA C source of the elementwise kernel ``ew_<name>``."""
    params = ['int n', 'int d1', 'int d2', 'int d3']
    for operand in op.inputs + op.outputs:
        const = 'const ' if operand in op.inputs else ''
        params.append(f'{const}float* p_{operand}')
        params += [f'int {operand}_{k}' for k in range(4)]
    params += [f'{ctype} {sname}' for sname, ctype in op.scalars]
    loads = ''.join(
        f'        const float {x} = p_{x}[{_offset(x)}];\n' for x in op.inputs
    )
    refs = ''.join(f'        float& {x} = p_{x}[{_offset(x)}];\n' for x in op.outputs)
    body = ''.join(f'        {line}\n' for line in op.body.splitlines())
    signature = ',\n    '.join(params)
    return (
        f'extern "C" __global__ void ew_{name}(\n    {signature})\n'
        '{\n'
        '    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;\n'
        '         i += blockDim.x * gridDim.x) {\n'
        f'{_DIGITS}{loads}{refs}{body}'
        '    }\n'
        '}\n'
    )


_ELEMENTWISE = _PHILOX + '\n'.join(
    elementwise_source(name, op) for name, op in ELEMENTWISE_OPS.items()
)

_REDUCE = r"""
#define BS_TILE_X 32
#define BS_TILE_Y 8

/* out[j * o_c] = sum_i a[i * a_r + j * a_c] for j < cols: column sums of a
   rows x cols matrix (any strides). Block (32, 8): threadIdx.x picks the
   column, threadIdx.y a group of rows; the 8 partial sums of a column are
   added in shared memory. No atomics, so the result is deterministic. */
extern "C" __global__ void sum_columns(
    int rows, int cols, const float* a, int a_r, int a_c, float* out,
    int o_c)
{
    __shared__ float part[BS_TILE_Y][BS_TILE_X + 1];
    for (int j0 = blockIdx.x * BS_TILE_X; j0 < cols;
         j0 += gridDim.x * BS_TILE_X) {
        int j = j0 + threadIdx.x;
        float acc = 0.0f;
        if (j < cols) {
            for (int i = threadIdx.y; i < rows; i += BS_TILE_Y) {
                acc += a[(long long)i * a_r + (long long)j * a_c];
            }
        }
        part[threadIdx.y][threadIdx.x] = acc;
        __syncthreads();
        if (threadIdx.y == 0 && j < cols) {
            float total = 0.0f;
            for (int k = 0; k < BS_TILE_Y; ++k) {
                total += part[k][threadIdx.x];
            }
            out[(long long)j * o_c] = total;
        }
        __syncthreads();
    }
}

/* First pass of a full reduction over a strided 4-D operand (see the module
   docstring): block b writes the sum of its grid-stride share to
   partial[b]. With count_nonfinite != 0 it counts NaN/Inf elements
   instead. blockDim.x must be a power of two <= 256. */
extern "C" __global__ void sum_all_partial(
    int n, int d1, int d2, int d3, const float* p_a, int a_0, int a_1,
    int a_2, int a_3, float* partial, int count_nonfinite)
{
    __shared__ float buf[256];
    float acc = 0.0f;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += blockDim.x * gridDim.x) {
DIGITS        float x = p_a[OFFSET];
        if (count_nonfinite) {
            acc += isfinite(x) ? 0.0f : 1.0f;
        } else {
            acc += x;
        }
    }
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            buf[threadIdx.x] += buf[threadIdx.x + s];
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = buf[0];
    }
}
""".replace('DIGITS', _DIGITS).replace('OFFSET', _offset('a'))

_ROWS = r"""
/* Row-wise softmax of a rows x cols matrix: one block per row (grid-stride
   over rows), blockDim.x a power of two <= 256. Three sweeps over the row:
   maximum, sum of exp(x - max), then the output. Each output element is
   written by the thread that read it last, so out may alias m. */
extern "C" __global__ void softmax_rows(
    int rows, int cols, const float* m, int m_r, int m_c, float* out,
    int o_r, int o_c)
{
    __shared__ float buf[256];
    const int t = threadIdx.x;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const float* mr = m + (long long)r * m_r;
        float* orow = out + (long long)r * o_r;
        float best = -__int_as_float(0x7f800000);
        for (int c = t; c < cols; c += blockDim.x) {
            best = fmaxf(best, mr[(long long)c * m_c]);
        }
        buf[t] = best;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (t < s) {
                buf[t] = fmaxf(buf[t], buf[t + s]);
            }
            __syncthreads();
        }
        best = buf[0];
        __syncthreads();
        float total = 0.0f;
        for (int c = t; c < cols; c += blockDim.x) {
            total += expf(mr[(long long)c * m_c] - best);
        }
        buf[t] = total;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (t < s) {
                buf[t] += buf[t + s];
            }
            __syncthreads();
        }
        total = buf[0];
        __syncthreads();
        for (int c = t; c < cols; c += blockDim.x) {
            orow[(long long)c * o_c] =
                expf(mr[(long long)c * m_c] - best) / total;
        }
    }
}

/* One-hot: out[r, c] = (v[r] == c) for the total = rows * cols elements
   of a rows x cols out. */
extern "C" __global__ void binarize_rows(
    int total, int cols, const float* v, int v_r, float* out, int o_r,
    int o_c)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int r = e / cols;
        int c = e % cols;
        out[(long long)r * o_r + (long long)c * o_c] =
            (v[(long long)r * v_r] == (float)c) ? 1.0f : 0.0f;
    }
}

/* out[r] = m[r, (int)v[r]]; an id outside [0, cols) gives NaN instead of
   reading outside the matrix. */
extern "C" __global__ void index_rows(
    int rows, int cols, const float* m, int m_r, int m_c, const float* v,
    int v_r, float* out, int o_r)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < rows;
         r += blockDim.x * gridDim.x) {
        float id = v[(long long)r * v_r];
        int c = (int)id;
        float value = __int_as_float(0x7fc00000);
        if (id >= 0.0f && c < cols) {
            value = m[(long long)r * m_r + (long long)c * m_c];
        }
        out[(long long)r * o_r] = value;
    }
}
"""

# Image geometry shared by the conv/pool kernels (see the Handler docstring):
# output (i, j) reads input rows i*sy - pad + u (0 <= u < kh) and columns
# j*sx - pad + v (0 <= v < kw).
_GEOMETRY = (
    'int H, int W, int C, int OH, int OW, int KH, int KW, int pad, int sy, int sx'
)

_CONV = r"""
/* col[r, q] for the contiguous (N*OH*OW) x (KH*KW*C) matrix of receptive
   fields: row r = (n, i, j), column q = (u, v, c); zero where the cell is
   padding. x is (N, H, W, C) with element strides x0..x3. */
extern "C" __global__ void im2col(
    int total, GEOMETRY, const float* x, int x0, int x1, int x2, int x3,
    float* col)
{
    const int K = KH * KW * C;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int q = e % K;
        int r = e / K;
        int c = q % C;
        int t = q / C;
        int v = t % KW;
        int u = t / KW;
        int j = r % OW;
        t = r / OW;
        int i = t % OH;
        int n = t / OH;
        int y = i * sy - pad + u;
        int xx = j * sx - pad + v;
        float value = 0.0f;
        if (y >= 0 && y < H && xx >= 0 && xx < W) {
            value = x[(long long)n * x0 + (long long)y * x1 +
                      (long long)xx * x2 + (long long)c * x3];
        }
        col[e] = value;
    }
}

/* The adjoint of im2col, ADDED: every input cell (n, y, x, c) gathers the
   column entries of all outputs whose window covers it (no atomics). dx is
   (N, H, W, C) with element strides d0..d3; col as in im2col. */
extern "C" __global__ void col2im_add(
    int total, GEOMETRY, const float* col, float* dx, int d0, int d1,
    int d2, int d3)
{
    const int K = KH * KW * C;
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int xx = t % W;
        t /= W;
        int y = t % H;
        int n = t / H;
        float acc = 0.0f;
        for (int u = 0; u < KH; ++u) {
            int ty = y + pad - u;
            if (ty < 0 || ty % sy != 0 || ty / sy >= OH) continue;
            int i = ty / sy;
            for (int v = 0; v < KW; ++v) {
                int tx = xx + pad - v;
                if (tx < 0 || tx % sx != 0 || tx / sx >= OW) continue;
                int j = tx / sx;
                acc += col[((long long)(n * OH + i) * OW + j) * K +
                           (u * KW + v) * C + c];
            }
        }
        float* target = dx + (long long)n * d0 + (long long)y * d1 +
                        (long long)xx * d2 + (long long)c * d3;
        *target += acc;
    }
}
""".replace('GEOMETRY', _GEOMETRY)

_POOL = r"""
/* The outputs (i, j) whose window covers input row y: i in [*lo, *hi]. */
__device__ void bs_covering(int y, int pad, int k, int s, int out_len,
                            int* lo, int* hi)
{
    int first = y + pad - k + 1;
    *lo = (first <= 0) ? 0 : (first + s - 1) / s;
    int last = (y + pad) / s;
    *hi = (last < out_len - 1) ? last : out_len - 1;
}

/* Number of in-bounds cells of window position i along one axis. */
__device__ int bs_inside(int i, int pad, int k, int s, int len)
{
    int start = i * s - pad;
    int stop = start + k;
    if (start < 0) start = 0;
    if (stop > len) stop = len;
    return (stop > start) ? stop - start : 0;
}

/* One thread per output (n, i, j, c): the first maximum (row-major window
   order) over the in-bounds cells and its flat in-image index
   (row * W + col) * C + c; output 0 and argmax -1 for a window of padding
   only. */
extern "C" __global__ void maxpool_forward(
    int total, GEOMETRY, const float* x, int x0, int x1, int x2, int x3,
    float* y, int y0, int y1, int y2, int y3, float* am, int a0, int a1,
    int a2, int a3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int j = t % OW;
        t /= OW;
        int i = t % OH;
        int n = t / OH;
        float best = 0.0f;
        float arg = -1.0f;
        int found = 0;
        for (int u = 0; u < KH; ++u) {
            int r = i * sy - pad + u;
            if (r < 0 || r >= H) continue;
            for (int v = 0; v < KW; ++v) {
                int q = j * sx - pad + v;
                if (q < 0 || q >= W) continue;
                float value = x[(long long)n * x0 + (long long)r * x1 +
                                (long long)q * x2 + (long long)c * x3];
                if (!found || value > best) {
                    best = value;
                    arg = (float)((r * W + q) * C + c);
                    found = 1;
                }
            }
        }
        y[(long long)n * y0 + (long long)i * y1 + (long long)j * y2 +
          (long long)c * y3] = best;
        am[(long long)n * a0 + (long long)i * a1 + (long long)j * a2 +
           (long long)c * a3] = arg;
    }
}

/* One thread per input cell (n, y, x, c): ADD the deltas of all outputs
   whose argmax is this cell (a gather, so no atomics). */
extern "C" __global__ void maxpool_backward_add(
    int total, GEOMETRY, const float* am, int a0, int a1, int a2, int a3,
    const float* dy, int g0, int g1, int g2, int g3, float* dx, int d0,
    int d1, int d2, int d3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int xx = t % W;
        t /= W;
        int y = t % H;
        int n = t / H;
        float me = (float)((y * W + xx) * C + c);
        int i_lo, i_hi, j_lo, j_hi;
        bs_covering(y, pad, KH, sy, OH, &i_lo, &i_hi);
        bs_covering(xx, pad, KW, sx, OW, &j_lo, &j_hi);
        float acc = 0.0f;
        for (int i = i_lo; i <= i_hi; ++i) {
            for (int j = j_lo; j <= j_hi; ++j) {
                long long o = (long long)n * a0 + (long long)i * a1 +
                              (long long)j * a2 + (long long)c * a3;
                if (am[o] == me) {
                    acc += dy[(long long)n * g0 + (long long)i * g1 +
                              (long long)j * g2 + (long long)c * g3];
                }
            }
        }
        dx[(long long)n * d0 + (long long)y * d1 + (long long)xx * d2 +
           (long long)c * d3] += acc;
    }
}

/* One thread per output: the mean over the in-bounds cells (0 if none). */
extern "C" __global__ void avgpool_forward(
    int total, GEOMETRY, const float* x, int x0, int x1, int x2, int x3,
    float* y, int y0, int y1, int y2, int y3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int j = t % OW;
        t /= OW;
        int i = t % OH;
        int n = t / OH;
        float acc = 0.0f;
        for (int u = 0; u < KH; ++u) {
            int r = i * sy - pad + u;
            if (r < 0 || r >= H) continue;
            for (int v = 0; v < KW; ++v) {
                int q = j * sx - pad + v;
                if (q < 0 || q >= W) continue;
                acc += x[(long long)n * x0 + (long long)r * x1 +
                         (long long)q * x2 + (long long)c * x3];
            }
        }
        int count = bs_inside(i, pad, KH, sy, H) * bs_inside(j, pad, KW, sx, W);
        y[(long long)n * y0 + (long long)i * y1 + (long long)j * y2 +
          (long long)c * y3] = (count > 0) ? acc / (float)count : 0.0f;
    }
}

/* One thread per input cell: ADD delta / count of every covering window. */
extern "C" __global__ void avgpool_backward_add(
    int total, GEOMETRY, const float* dy, int g0, int g1, int g2, int g3,
    float* dx, int d0, int d1, int d2, int d3)
{
    for (int e = blockIdx.x * blockDim.x + threadIdx.x; e < total;
         e += blockDim.x * gridDim.x) {
        int c = e % C;
        int t = e / C;
        int xx = t % W;
        t /= W;
        int y = t % H;
        int n = t / H;
        int i_lo, i_hi, j_lo, j_hi;
        bs_covering(y, pad, KH, sy, OH, &i_lo, &i_hi);
        bs_covering(xx, pad, KW, sx, OW, &j_lo, &j_hi);
        float acc = 0.0f;
        for (int i = i_lo; i <= i_hi; ++i) {
            int rows = bs_inside(i, pad, KH, sy, H);
            for (int j = j_lo; j <= j_hi; ++j) {
                int count = rows * bs_inside(j, pad, KW, sx, W);
                acc += dy[(long long)n * g0 + (long long)i * g1 +
                          (long long)j * g2 + (long long)c * g3] /
                       (float)count;
            }
        }
        dx[(long long)n * d0 + (long long)y * d1 + (long long)xx * d2 +
           (long long)c * d3] += acc;
    }
}
""".replace('GEOMETRY', _GEOMETRY)

KERNEL_SOURCES = {
    'elementwise': _ELEMENTWISE,
    'reduce': _REDUCE,
    'rows': _ROWS,
    'conv': _CONV,
    'pool': _POOL,
}

_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)\s*\(([^)]*)\)')
_FORMAT = {'int': 'i', 'unsigned int': 'I', 'float': 'f'}


def kernel_arg_formats(source: str) -> dict:
    """Kernel name -> PyCUDA ``prepare`` format, parsed from the C signature.

    Pointers map to ``'P'``, ``int`` to ``'i'``, ``unsigned int`` to ``'I'``
    and ``float`` to ``'f'``.

    Raises:
        ValueError: for a parameter of any other type.
    """
    formats = {}
    for name, params in _KERNEL.findall(source):
        chars = []
        for param in params.split(','):
            ctype = ' '.join(param.split()[:-1]).replace('const ', '')
            if '*' in param:
                chars.append('P')
            elif ctype in _FORMAT:
                chars.append(_FORMAT[ctype])
            else:
                raise ValueError(
                    f'kernel {name}: unsupported parameter type in {param.strip()!r}'
                )
        formats[name] = ''.join(chars)
    return formats
