"""The kernels of :class:`PyCudaHandler`: the elementwise table and the CUDA C.

Plain Python: nothing here needs PyCUDA, so the sources can be read, parsed
and compiled with ``nvcc --ptx`` on machines without a GPU (the test suite
does that wherever nvcc is installed).

``KERNEL_SOURCES`` maps a module name to one self-contained CUDA C source
(no ``#include``; only what nvcc provides by itself). The elementwise
kernels are made from :data:`ELEMENTWISE`, one per op of the op table;
the others are the ``.cu`` files of ``brainstorm/handlers/cuda/cu/``
(package data), read when this module is imported. Every kernel is
``extern "C"`` so PyCUDA finds it by its plain name, and
:func:`kernel_arg_formats` derives each kernel's PyCUDA ``prepare`` format
from its C signature, so the Python side cannot disagree with the C side
about argument types.

**The strided operand convention.** Handler arrays are strided views (see
:class:`~brainstorm.handlers.cuda.views.GPUView`). Elementwise kernels
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
from importlib import resources
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
    # more activations; gelu's derivative reads x (NEEDS_INPUT). As in
    # NumpyHandler, tanh's argument comes from x clipped to +-1000 (where
    # t is +-1): x * x of a larger x overflows, and inf * 0 is NaN. The
    # comparisons keep a NaN x (fminf/fmaxf would drop it).
    'gelu': (
        'const float c = x > 1000.0f ? 1000.0f : (x < -1000.0f ? -1000.0f : x);\n'
        'const float t = tanhf(0.7978845608f * c * (1.0f + 0.044715f * c * c));\n'
        'y = 0.5f * x * (1.0f + t);'
    ),
    'gelu_deriv': (
        'const float c = x > 1000.0f ? 1000.0f : (x < -1000.0f ? -1000.0f : x);\n'
        'const float t = tanhf(0.7978845608f * c * (1.0f + 0.044715f * c * c));\n'
        'dx = dy * (0.5f * (1.0f + t) + 0.3989422804f * c\n'
        '           * (1.0f + 0.134145f * c * c) * (1.0f - t * t));'
    ),
    'leaky_rel': 'y = (x > 0.0f) ? x : 0.01f * x;',
    'leaky_rel_deriv': 'dx = (y > 0.0f) ? dy : 0.01f * dy;',
    # max(x, 0) + log(1 + exp(-|x|)): no overflow for large |x|
    'softplus': 'y = fmaxf(x, 0.0f) + log1pf(expf(-fabsf(x)));',
    'softplus_deriv': 'dx = dy * -expm1f(-y);',
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


#: The modules written as ``.cu`` files in ``cu/`` (besides ``philox.cu``).
_CU_MODULES = (
    'reduce',
    'rows',
    'conv',
    'pool',
    'recurrent',
    'embedding',
    'sequences',
    'attention',
)


def _read(name: str) -> str:
    return (resources.files(__package__) / 'cu' / f'{name}.cu').read_text()


def _sources() -> dict:
    """Module name -> CUDA C source.

    The ``.cu`` files, and the elementwise kernels made from
    :data:`ELEMENTWISE` after the Philox generator.
    """
    elementwise = '\n'.join(
        elementwise_source(name, op) for name, op in ELEMENTWISE_OPS.items()
    )
    return {
        'elementwise': _read('philox') + '\n' + elementwise,
        **{name: _read(name) for name in _CU_MODULES},
    }


KERNEL_SOURCES = _sources()

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
