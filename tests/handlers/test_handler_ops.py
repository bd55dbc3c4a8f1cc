"""Every handler op against an independent float64 NumPy computation.

``CASES`` is the one table of op cases: each row names an op, its arguments
(array specs, scalars, flags) and a reference computed in plain float64
NumPy (slow explicit loops for convolution and pooling). The table runs
against every handler in ``HANDLERS``; adding an op adds one row. Array
arguments can be non-contiguous feature-slice views of a bigger buffer
(the way the network lays out memory), aliases of another argument, or
derived from the other arguments.
"""

import copy
import pickle
import tracemalloc

import numpy as np
import pytest

import brainstorm.handlers
from brainstorm.describable import create_from_description, get_description
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.base_handler import ACTIVATION_NAMES, NEEDS_INPUT
from brainstorm.handlers.debug_handler import DebugArray, DebugHandlerError
from brainstorm.handlers.ops import OPS
from tests.onednn_support import onednn_handler

HANDLERS = {
    'numpy-float32': lambda: NumpyHandler(np.float32, seed=1),
    'numpy-float64': lambda: NumpyHandler(np.float64, seed=1),
    'debug-numpy-float64': lambda: DebugHandler(NumpyHandler(np.float64, seed=1)),
    # float32: oneDNN's convolution and pooling; float64: NumpyHandler's ops
    'onednn-float32': lambda: onednn_handler(np.float32, seed=1),
    'onednn-float64': lambda: onednn_handler(np.float64, seed=1),
    'debug-onednn-float32': lambda: DebugHandler(onednn_handler(np.float32, seed=1)),
}
TOLERANCES = {
    np.float32: {'rtol': 2e-4, 'atol': 2e-4},
    np.float64: {'rtol': 1e-9, 'atol': 1e-11},
}
PAD = 2  # extra feature columns on each side of a view


# --------------------------------------------------------- argument specs ---


class A:
    """An array argument of ``shape``.

    ``values``: 'uniform' in [low, high), 'away' (|x| in [low, high), random
    sign), 'ids' (integers in [0, high)), 'cond' (zeros mixed with non-zero
    values), 'zeros_mixed' (uniform with exact zeros), or a function
    ``(rng, shape) -> array``. ``view``: None (contiguous), 'last' (a slice
    of a bigger last axis), 'rows' (a slice of flattened rows, reshaped) or
    an int ``k`` (every k-th entry of a bigger last axis: no axis is
    contiguous).
    """

    def __init__(self, *shape, values='uniform', low=-2.0, high=2.0, view=None):
        self.shape, self.values = shape, values
        self.low, self.high, self.view = low, high, view

    def with_view(self, view):
        """This spec with another ``view``."""
        return A(
            *self.shape, values=self.values, low=self.low, high=self.high, view=view
        )

    def sample(self, rng, shape=None):
        shape = self.shape if shape is None else shape
        if callable(self.values):
            return np.asarray(self.values(rng, shape), dtype=np.float64)
        if self.values == 'ids':
            return rng.randint(0, int(self.high), shape).astype(np.float64)
        x = np.asarray(rng.uniform(self.low, self.high, shape))
        if self.values == 'away':
            return x * rng.choice([-1.0, 1.0], shape)
        if self.values == 'cond':
            return x * (rng.uniform(size=shape) < 0.5)
        if self.values == 'zeros_mixed':
            return x * (rng.uniform(size=shape) < 0.7)
        return x


class Same:
    """The very same handler array as argument ``name`` (aliasing)."""

    def __init__(self, name):
        self.name = name


class Derived:
    """A contiguous array argument computed from the earlier values."""

    def __init__(self, fn):
        self.fn = fn


class Raw:
    """A plain NumPy float64 array passed as is (conversion ops)."""

    def __init__(self, *shape):
        self.shape = shape


def case(op, args, ref=None, check=None, variant=''):
    """One row: ``ref(**values) -> {arg name or '@return': expected}``."""
    return pytest.param(op, args, ref, check, id=f'{op}{variant}')


def _pad_last(shape):
    return shape[:-1] + (shape[-1] + 2 * PAD,)


def build_args(h, args, rng):
    """Handler arguments, float64 values and view bookkeeping for a row.

    Derived arguments are computed last, from all the other values.
    """
    dtype = np.dtype(h.dtype)
    values, call, bigs = {}, {}, {}
    for name, spec in args.items():
        if isinstance(spec, A):
            if spec.view is None:
                x = spec.sample(rng).astype(dtype).astype(np.float64)
                call[name] = h.create_from_numpy(x)
            elif spec.view == 'last':
                big = spec.sample(rng, _pad_last(spec.shape))
                big = big.astype(dtype).astype(np.float64)
                big_h = h.create_from_numpy(big)
                x = big[..., PAD:-PAD]
                index = (slice(None),) * (len(spec.shape) - 1)
                call[name] = big_h[index + (slice(PAD, PAD + spec.shape[-1]),)]
                bigs[name] = (big_h, big, (Ellipsis, slice(PAD, -PAD)))
            elif isinstance(spec.view, int):  # every k-th entry, from the 2nd
                k, last = spec.view, spec.shape[-1]
                inner = (Ellipsis, slice(1, 1 + last * k, k))
                big = rng.uniform(-2, 2, spec.shape[:-1] + (last * k + 1,))
                big[inner] = spec.sample(rng)  # the values a row expects
                big = big.astype(dtype).astype(np.float64)
                big_h = h.create_from_numpy(big)
                x = big[inner]
                call[name] = big_h[inner]
                bigs[name] = (big_h, big, inner)
            else:  # 'rows'
                width = int(np.prod(spec.shape[1:]))
                big = spec.sample(rng, (spec.shape[0], width + 2 * PAD))
                big = big.astype(dtype).astype(np.float64)
                big_h = h.create_from_numpy(big)
                x = big[:, PAD : PAD + width].reshape(spec.shape)
                call[name] = big_h[:, PAD : PAD + width].reshape(spec.shape)
                bigs[name] = (big_h, big, (slice(None), slice(PAD, -PAD)))
            values[name] = x.copy()
        elif isinstance(spec, Raw):
            values[name] = call[name] = rng.uniform(-2, 2, spec.shape)
        elif not isinstance(spec, (Same, Derived)):
            values[name] = call[name] = spec
    for name, spec in args.items():
        if isinstance(spec, Derived):
            x = np.asarray(spec.fn(**values), dtype=np.float64)
            values[name] = x.astype(dtype).astype(np.float64)
            call[name] = h.create_from_numpy(values[name])
    for name, spec in args.items():
        if isinstance(spec, Same):
            call[name] = call[spec.name]
            values[name] = values[spec.name].copy()
    call = {name: call[name] for name in args}
    values = {name: values[name] for name in args}
    return values, call, bigs


@pytest.fixture(params=list(HANDLERS))
def handler(request):
    return HANDLERS[request.param]()


# ------------------------------------------------------- slow references ---


def _sides(padding):
    """``(top, bottom, left, right)`` of an int or 4-tuple padding."""
    return tuple(padding) if isinstance(padding, tuple) else (padding,) * 4


def _out_size(size, kernel, padding, stride, axis=0):
    """Output length along ``axis`` (0: rows, 1: columns)."""
    before, after = _sides(padding)[2 * axis : 2 * axis + 2]
    return (size + before + after - kernel) // stride + 1


def _cells(i, j, window, padding, stride, hw):
    """In-bounds input cells of output (i, j), in row-major window order."""
    top, _, left, _ = _sides(padding)
    for u in range(window[0]):
        for v in range(window[1]):
            r = i * stride[0] + u - top
            q = j * stride[1] + v - left
            if 0 <= r < hw[0] and 0 <= q < hw[1]:
                yield u, v, r, q


def conv_forward_ref(inputs, weights, bias, padding, stride):
    n, h, w, _ = inputs.shape
    f, kh, kw, _ = weights.shape
    oh = _out_size(h, kh, padding, stride[0])
    ow = _out_size(w, kw, padding, stride[1], 1)
    out = np.zeros((n, oh, ow, f))
    for i in range(oh):
        for j in range(ow):
            out[:, i, j] = bias
            for u, v, r, q in _cells(i, j, (kh, kw), padding, stride, (h, w)):
                out[:, i, j] += inputs[:, r, q] @ weights[:, u, v].T
    return out


def conv_backward_ref(
    inputs, weights, padding, stride, in_deltas, out_deltas, weight_deltas, bias_deltas
):
    h, w = inputs.shape[1:3]
    kh, kw = weights.shape[1:3]
    dx, dw = in_deltas.copy(), np.zeros_like(weights)
    for i in range(out_deltas.shape[1]):
        for j in range(out_deltas.shape[2]):
            for u, v, r, q in _cells(i, j, (kh, kw), padding, stride, (h, w)):
                dx[:, r, q] += out_deltas[:, i, j] @ weights[:, u, v]
                dw[:, u, v] += out_deltas[:, i, j].T @ inputs[:, r, q]
    return {
        'in_deltas': dx,
        'weight_deltas': dw,
        'bias_deltas': out_deltas.sum(axis=(0, 1, 2)),
    }


def pool_ref(inputs, window, padding, stride, kind):
    """Max (with argmax) or average pooling by explicit loops over windows."""
    n, h, w, c = inputs.shape
    oh = _out_size(h, window[0], padding, stride[0])
    ow = _out_size(w, window[1], padding, stride[1], 1)
    out, argmax = np.zeros((n, oh, ow, c)), -np.ones((n, oh, ow, c))
    for i in range(oh):
        for j in range(ow):
            cells = list(_cells(i, j, window, padding, stride, (h, w)))
            if not cells:
                continue
            stack = np.stack([inputs[:, r, q] for _, _, r, q in cells], 1)
            if kind == 'avg':
                out[:, i, j] = stack.mean(axis=1)
                continue
            best = stack.argmax(axis=1)  # (n, c), first maximum wins
            out[:, i, j] = stack.max(axis=1)
            flat = np.array([r * w + q for _, _, r, q in cells])
            argmax[:, i, j] = flat[best] * c + np.arange(c)
    return out, argmax


def pool_backward_ref(inputs, window, padding, stride, in_deltas, out_deltas, kind):
    n, h, w, c = inputs.shape
    _, argmax = pool_ref(inputs, window, padding, stride, 'max')
    dx = in_deltas.copy()
    for i in range(out_deltas.shape[1]):
        for j in range(out_deltas.shape[2]):
            cells = list(_cells(i, j, window, padding, stride, (h, w)))
            for _, _, r, q in cells:
                if kind == 'avg':
                    dx[:, r, q] += out_deltas[:, i, j] / len(cells)
                else:
                    hit = argmax[:, i, j] == (r * w + q) * c + np.arange(c)
                    dx[:, r, q] += out_deltas[:, i, j] * hit
    return dx


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _el(x):
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)))


def _gelu(x):
    k = np.sqrt(2 / np.pi)
    return 0.5 * x * (1 + np.tanh(k * (x + 0.044715 * x**3)))


def _gelu_deriv(x):
    k = np.sqrt(2 / np.pi)
    t = np.tanh(k * (x + 0.044715 * x**3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * k * (1 + 3 * 0.044715 * x**2)


ACTIVATIONS = {  # name: (f(x), f'(x) from (x, y); x is None for "from y")
    'sigmoid': (_sigmoid, lambda x, y: y * (1 - y)),
    'tanh': (np.tanh, lambda x, y: 1 - y**2),
    'rel': (lambda x: np.maximum(x, 0), lambda x, y: (y > 0) * 1.0),
    'el': (_el, lambda x, y: np.where(y >= 0, 1.0, y + 1)),
    'linear': (lambda x: x, lambda x, y: np.ones_like(y)),
    'softplus': (lambda x: np.logaddexp(0, x), lambda x, y: -np.expm1(-y)),
    'leaky_rel': (
        lambda x: np.where(x > 0, x, 0.01 * x),
        lambda x, y: np.where(y > 0, 1.0, 0.01),
    ),
    'gelu': (_gelu, lambda x, y: _gelu_deriv(x)),  # needs x
}


# ------------------------------------------------------------ row helpers ---


def elementwise_rows(op, fn, a=None, b=None, extra=None, accumulate=False):
    """Rows for an ``(a, b, out)`` or ``(a, out)`` elementwise op.

    Variants: plain, feature-slice views, ``out`` aliasing ``a``, and
    size-1 dimensions (T=1, B=1). ``fn(a, [b], *extra)`` is the result,
    added to ``out`` if ``accumulate``; ``extra`` holds scalar arguments
    that come before ``out``.
    """
    a = a or {}
    binary = b is not None

    def ref(out, **kw):
        result = fn(*kw.values())
        return {'out': out + result if accumulate else result}

    rows = []
    for variant, shape, view in [
        ('', (3, 4), None),
        ('-views', (2, 3, 5), 'last'),
        ('-T1B1', (1, 1, 3), None),
        ('-alias', (4, 2), None),
    ]:
        args = {'a': A(*shape, view=view, **a)}
        if binary:
            args['b'] = A(*shape, view=view, **b)
        args.update(extra or {})
        args['out'] = Same('a') if variant == '-alias' else A(*shape, view=view)
        rows.append(case(op, args, ref, variant=variant))
    return rows


def scalar_rows(op, fn, accumulate=False):
    """Rows for ``(s, t, out)`` ops with a float and an int scalar."""

    def ref(s, t, out):
        return {'out': out + fn(s, t) if accumulate else fn(s, t)}

    return [
        case(op, {'s': 0.75, 't': A(3, 4), 'out': A(3, 4)}, ref),
        case(
            op,
            {'s': -2, 't': A(2, 1, 4, view='last'), 'out': A(2, 1, 4, view='last')},
            ref,
            variant='-int-views',
        ),
        case(op, {'s': 1.5, 't': A(1, 5), 'out': Same('t')}, ref, variant='-alias'),
    ]


def mv_rows(op, fn, v=None, full=False, accumulate=False):
    """Rows for ``(m, v, out)``: v of shape (1, N) or (M, 1) [or (M, N)]."""
    v = v or {}

    def ref(m, v, out):
        return {'out': out + fn(m, v) if accumulate else fn(m, v)}

    rows = [
        case(
            op, {'m': A(3, 4), 'v': A(1, 4, **v), 'out': A(3, 4)}, ref, variant='-row'
        ),
        case(
            op,
            {'m': A(3, 4), 'v': A(3, 1, **v), 'out': A(3, 4)},
            ref,
            variant='-column',
        ),
        case(
            op,
            {
                'm': A(4, 5, view='last'),
                'v': A(1, 5, view='last', **v),
                'out': A(4, 5, view='last'),
            },
            ref,
            variant='-views',
        ),
        case(
            op,
            {'m': A(1, 3), 'v': A(1, 1, **v), 'out': Same('m')},
            ref,
            variant='-M1-alias',
        ),
        case(op, {'m': A(3, 1), 'v': A(3, 1, **v), 'out': A(3, 1)}, ref, variant='-N1'),
    ]
    if full:
        rows.append(
            case(
                op,
                {'m': A(3, 4), 'v': A(3, 4, **v), 'out': A(3, 4)},
                ref,
                variant='-full',
            )
        )
    return rows


def dot_rows(op, accumulate):
    def ref(a, b, out, transa, transb):
        result = (a.T if transa else a) @ (b.T if transb else b)
        return {'out': out + result if accumulate else result}

    rows = []
    for ta in (False, True):
        for tb in (False, True):
            a_shape = (4, 3) if ta else (3, 4)
            b_shape = (5, 4) if tb else (4, 5)
            rows.append(
                case(
                    op,
                    {
                        'a': A(*a_shape),
                        'b': A(*b_shape),
                        'out': A(3, 5),
                        'transa': ta,
                        'transb': tb,
                    },
                    ref,
                    variant=f'-{ta:d}{tb:d}',
                )
            )
            rows.append(
                case(
                    op,
                    {
                        'a': A(*a_shape, view='last'),
                        'b': A(*b_shape, view='last'),
                        'out': A(3, 5, view='last'),
                        'transa': ta,
                        'transb': tb,
                    },
                    ref,
                    variant=f'-{ta:d}{tb:d}-views',
                )
            )
    for m, k, n in [(1, 4, 3), (3, 1, 2), (3, 4, 1), (1, 1, 1)]:
        rows.append(
            case(
                op,
                {
                    'a': A(m, k),
                    'b': A(k, n, view='last'),
                    'out': A(m, n, view='last'),
                    'transa': False,
                    'transb': False,
                },
                ref,
                variant=f'-{m}{k}{n}',
            )
        )
    return rows


def activation_rows(name):
    f, deriv = ACTIVATIONS[name]
    low, high = (-100.0, 100.0) if name == 'sigmoid' else (-3.0, 3.0)
    y_values = {
        'sigmoid': (0.0, 1.0),
        'tanh': (-1.0, 1.0),
        'rel': (0.0, 3.0),
        'el': (-1.0, 3.0),
        'linear': (-3.0, 3.0),
        'softplus': (0.0, 3.0),
        'leaky_rel': (-0.03, 3.0),
        'gelu': (-0.17, 3.0),
    }[name]
    zeros_in_y = {'rel': 'zeros_mixed'}.get(name, 'uniform')

    def ref(x, y):
        return {'y': f(x)}

    def ref_deriv(x, y, dy, dx):
        return {'dx': dy * deriv(x, y)}

    y_spec = {'low': y_values[0], 'high': y_values[1], 'values': zeros_in_y}
    return [
        case(name, {'x': A(3, 4, low=low, high=high), 'y': A(3, 4)}, ref),
        case(
            name,
            {
                'x': A(2, 3, 4, view='last', values='zeros_mixed'),
                'y': A(2, 3, 4, view='last'),
            },
            ref,
            variant='-views',
        ),
        case(name, {'x': A(1, 1, 5), 'y': Same('x')}, ref, variant='-alias'),
        case(
            name + '_deriv',
            {'x': A(3, 4), 'y': A(3, 4, **y_spec), 'dy': A(3, 4), 'dx': A(3, 4)},
            ref_deriv,
        ),
        case(
            name + '_deriv',
            {
                'x': A(2, 3, view='last'),
                'y': A(2, 3, view='last', **y_spec),
                'dy': A(2, 3, view='last'),
                'dx': A(2, 3, view='last'),
            },
            ref_deriv,
            variant='-views',
        ),
        *(
            []
            if name in NEEDS_INPUT
            else [
                case(
                    name + '_deriv',
                    {
                        'x': None,
                        'y': A(1, 4, **y_spec),
                        'dy': A(1, 4),
                        'dx': Same('dy'),
                    },
                    ref_deriv,
                    variant='-alias-no-x',
                )
            ]
        ),
    ]


CONV_GEOMETRIES = [  # N, H, W, C, F, (kh, kw), padding, stride
    (2, 5, 6, 2, 3, (3, 2), 0, (1, 1)),
    (2, 5, 6, 2, 3, (3, 3), 1, (2, 1)),
    (1, 7, 5, 3, 2, (2, 3), 2, (2, 3)),
    (3, 4, 4, 1, 1, (1, 1), 0, (1, 1)),
    (2, 3, 3, 2, 2, (3, 3), 2, (1, 1)),
    # 8+ channels: input deltas by one GEMM per kernel offset
    (2, 5, 6, 9, 3, (3, 2), 1, (1, 1)),
    (2, 4, 5, 8, 2, (3, 3), 2, (1, 1)),
    (1, 3, 3, 8, 2, (1, 1), 0, (1, 1)),
    (2, 3, 3, 8, 2, (2, 2), 2, (1, 1)),
    (2, 6, 5, 8, 3, (3, 3), 1, (2, 1)),
    # padding that differs by side: (top, bottom, left, right)
    (2, 5, 6, 2, 3, (2, 2), (0, 1, 0, 1), (1, 1)),
    (2, 6, 5, 9, 2, (4, 3), (1, 2, 1, 1), (2, 2)),
    (1, 5, 7, 8, 2, (2, 3), (1, 0, 2, 0), (1, 3)),
    (2, 4, 4, 3, 2, (3, 3), (1, 1, 1, 1), (1, 1)),
]


def _prefix_mask(rng, shape):
    """A ``(T, B, 1)`` mask of ones up to random lengths in [0, T]."""
    lengths = rng.randint(0, shape[0] + 1, shape[1])
    lengths[0] = shape[0]  # a full sequence, and one of length 1
    lengths[-1] = min(1, shape[0])
    return (np.arange(shape[0])[:, None] < lengths[None, :])[:, :, None]


def reverse_time_ref(a, mask, out):
    """Explicit loops: each sequence reversed within its length."""
    out = a.copy()
    for b in range(a.shape[1]):
        n = a.shape[0] if mask is None else int(mask[:, b, 0].sum())
        out[:n, b] = a[:n, b][::-1]
    return {'out': out}


def reverse_time_rows():
    rows = []
    for g, (t, b, f) in enumerate([(5, 4, 3), (1, 2, 2), (6, 1, 4)]):
        view = ('rows', 'last', None)[g]
        for masked in (False, True):
            mask = A(t, b, 1, values=_prefix_mask) if masked else None
            rows.append(
                case(
                    'reverse_time_t',
                    {
                        'a': A(t, b, f, view=view),
                        'mask': mask,
                        'out': A(t, b, f, view=view),
                    },
                    reverse_time_ref,
                    variant=f'-{g}' + ('-masked' if masked else ''),
                )
            )
    return rows


def conv_rows():
    rows = []
    for g, (n, h, w, c, f, k, p, s) in enumerate(CONV_GEOMETRIES):
        oh, ow = _out_size(h, k[0], p, s[0]), _out_size(w, k[1], p, s[1], 1)
        view = ('rows', 'last')[g % 2]
        rows.append(
            case(
                'conv2d_forward_batch',
                {
                    'inputs': A(n, h, w, c, view=view),
                    'weights': A(f, *k, c),
                    'bias': A(f),
                    'outputs': A(n, oh, ow, f, view=view),
                    'padding': p,
                    'stride': s,
                },
                lambda inputs, weights, bias, outputs, padding, stride: {
                    'outputs': conv_forward_ref(inputs, weights, bias, padding, stride)
                },
                variant=f'-{g}',
            )
        )
        rows.append(
            case(
                'conv2d_backward_batch',
                {
                    'inputs': A(n, h, w, c, view=view),
                    'weights': A(f, *k, c),
                    'padding': p,
                    'stride': s,
                    'in_deltas': A(n, h, w, c, view=view),
                    'out_deltas': A(n, oh, ow, f, view=view),
                    'weight_deltas': A(f, *k, c),
                    'bias_deltas': A(f),
                },
                conv_backward_ref,
                variant=f'-{g}',
            )
        )
    return rows


POOL_GEOMETRIES = [  # N, H, W, C, window, padding, stride
    (2, 5, 6, 2, (3, 3), 0, (2, 2)),
    (2, 4, 5, 3, (3, 2), 1, (1, 2)),
    (1, 4, 5, 2, (2, 2), 2, (1, 1)),  # corner windows see only padding
    (3, 3, 3, 1, (1, 1), 0, (1, 1)),
    (2, 6, 4, 2, (2, 3), 1, (3, 2)),
    (2, 5, 9, 40, (3, 3), 0, (2, 2)),  # rank * channels > 255
    # padding that differs by side: (top, bottom, left, right)
    (2, 5, 6, 2, (2, 2), (0, 1, 0, 1), (1, 1)),
    (2, 5, 5, 3, (3, 2), (1, 1, 0, 1), (2, 2)),
    (1, 4, 6, 2, (2, 3), (0, 3, 2, 0), (1, 2)),  # a window of padding only
    (2, 3, 3, 1, (2, 2), (1, 1, 1, 1), (1, 1)),
]


def pool_rows():
    rows = []
    for g, (n, h, w, c, win, p, s) in enumerate(POOL_GEOMETRIES):
        oh, ow = _out_size(h, win[0], p, s[0]), _out_size(w, win[1], p, s[1], 1)
        view = ('rows', 'last')[g % 2]

        def max_ref(inputs, window, outputs, padding, stride, argmax):
            out, arg = pool_ref(inputs, window, padding, stride, 'max')
            return {'outputs': out, 'argmax': arg}

        def avg_ref(inputs, window, outputs, padding, stride):
            out, _ = pool_ref(inputs, window, padding, stride, 'avg')
            return {'outputs': out}

        def max_outputs(inputs, window, padding, stride, **_):
            return pool_ref(inputs, window, padding, stride, 'max')[0]

        def max_argmax(inputs, window, padding, stride, **_):
            return pool_ref(inputs, window, padding, stride, 'max')[1]

        def avg_outputs(inputs, window, padding, stride, **_):
            return pool_ref(inputs, window, padding, stride, 'avg')[0]

        def backward_ref(kind):
            def ref(
                inputs,
                window,
                outputs,
                padding,
                stride,
                in_deltas,
                out_deltas,
                argmax=None,
            ):
                return {
                    'in_deltas': pool_backward_ref(
                        inputs, window, padding, stride, in_deltas, out_deltas, kind
                    )
                }

            return ref

        rows += [
            case(
                'maxpool2d_forward_batch',
                {
                    'inputs': A(n, h, w, c, view=view),
                    'window': win,
                    'outputs': A(n, oh, ow, c, view=view),
                    'padding': p,
                    'stride': s,
                    'argmax': A(n, oh, ow, c),
                },
                max_ref,
                variant=f'-{g}',
            ),
            case(
                'maxpool2d_backward_batch',
                {
                    'inputs': A(n, h, w, c, view=view),
                    'window': win,
                    'outputs': Derived(max_outputs),
                    'padding': p,
                    'stride': s,
                    'argmax': Derived(max_argmax),
                    'in_deltas': A(n, h, w, c, view=view),
                    'out_deltas': A(n, oh, ow, c, view=view),
                },
                backward_ref('max'),
                variant=f'-{g}',
            ),
            case(
                'avgpool2d_forward_batch',
                {
                    'inputs': A(n, h, w, c, view=view),
                    'window': win,
                    'outputs': A(n, oh, ow, c, view=view),
                    'padding': p,
                    'stride': s,
                },
                avg_ref,
                variant=f'-{g}',
            ),
            case(
                'avgpool2d_backward_batch',
                {
                    'inputs': A(n, h, w, c, view=view),
                    'window': win,
                    'outputs': Derived(avg_outputs),
                    'padding': p,
                    'stride': s,
                    'in_deltas': A(n, h, w, c, view=view),
                    'out_deltas': A(n, oh, ow, c, view=view),
                },
                backward_ref('avg'),
                variant=f'-{g}',
            ),
        ]
        if g in (1, 2):  # few distinct values: ties go to the first maximum
            rows += [
                case(
                    'maxpool2d_forward_batch',
                    {
                        'inputs': A(n, h, w, c, view=view, values='ids', high=3),
                        'window': win,
                        'outputs': A(n, oh, ow, c),
                        'padding': p,
                        'stride': s,
                        'argmax': A(n, oh, ow, c, view=view),
                    },
                    max_ref,
                    variant=f'-{g}-ties',
                ),
                case(
                    'maxpool2d_backward_batch',
                    {
                        'inputs': A(n, h, w, c, values='ids', high=3),
                        'window': win,
                        'outputs': Derived(max_outputs),
                        'padding': p,
                        'stride': s,
                        'argmax': Derived(max_argmax),
                        'in_deltas': A(n, h, w, c),
                        'out_deltas': A(n, oh, ow, c, view=view),
                    },
                    backward_ref('max'),
                    variant=f'-{g}-ties',
                ),
            ]
    return rows


def _with_nan(rng, shape):
    x = rng.uniform(-1, 1, shape)
    x[..., shape[-1] // 2] = np.nan
    return x


def _with_inf(rng, shape):
    x = rng.uniform(-1, 1, shape)
    x[..., shape[-1] // 2] = -np.inf
    return x


def _check_gaussian(h, result, values):
    out = result['out']
    assert abs(out.mean() - 2.0) < 0.03, f'mean {out.mean()} != 2 +- 0.03'
    assert abs(out.std() - 0.5) < 0.03, f'std {out.std()} != 0.5 +- 0.03'


def _check_mask(probability):
    def check(h, result, values):
        mask = result['mask']
        assert set(np.unique(mask)) <= {0.0, 1.0}, np.unique(mask)
        assert abs(mask.mean() - probability) < 0.03, (
            f'fraction of ones {mask.mean()} != {probability} +- 0.03'
        )

    return check


def _check_allocation(shape, fill=None):
    def check(h, result, values):
        arr = h.get_numpy_copy(result['@return'])
        assert arr.shape == shape and arr.dtype == np.dtype(h.dtype), (
            arr.shape,
            arr.dtype,
        )
        if fill is not None:
            assert np.all(arr == fill), arr

    return check


# ----------------------------------------------------------------- table ---


def _lstm_forward_ref(gates, c_prev, pi, pf, po, activation, gate_outputs, c, c_out, y):
    """The LSTM step from its equations (docs of ``Lstm``), in float64."""
    g = ACTIVATIONS[activation][0]
    Z, I, F, O = np.split(gates.copy(), 4, axis=1)
    I += c_prev * pi
    F += c_prev * pf
    Zb, Ib, Fb = g(Z), _sigmoid(I), _sigmoid(F)
    c = Ib * Zb + Fb * c_prev
    O += c * po
    Ob = _sigmoid(O)
    return {
        'gates': np.hstack([Z, I, F, O]),
        'gate_outputs': np.hstack([Zb, Ib, Fb, Ob]),
        'c': c,
        'c_out': g(c),
        'y': Ob * g(c),
    }


def _lstm_backward_ref(
    dy, factors, c_factor, d_gates_next, dc_next, f_next, pi, pf, po, d_gates, dc
):
    PZ, PI, PF, PO = np.split(factors, 4, axis=1)
    _, dI_next, dF_next, _ = np.split(d_gates_next, 4, axis=1)
    dO = dy * PO
    dc = dy * c_factor + dO * po + dI_next * pi + dF_next * pf + f_next * dc_next
    return {'d_gates': np.hstack([dc * PZ, dc * PI, dc * PF, dO]), 'dc': dc}


def lstm_rows():
    """Both LSTM step ops for every activation, on strided views (as the
    layer gives them: feature slices of the time-sized buffers)."""
    B, S = 3, 5
    rows = []
    for activation in ACTIVATIONS:
        view = 'last' if activation != 'linear' else None
        rows.append(
            case(
                'lstm_forward_step',
                {
                    'gates': A(B, 4 * S, view=view),
                    'c_prev': A(B, S, view=view),
                    'pi': A(1, S),
                    'pf': A(1, S),
                    'po': A(1, S),
                    'activation': activation,
                    'gate_outputs': A(B, 4 * S, view=view),
                    'c': A(B, S, view=view),
                    'c_out': A(B, S, view=view),
                    'y': A(B, S, view=view),
                },
                _lstm_forward_ref,
                variant=f'-{activation}',
            )
        )
    for view in (None, 'last'):
        rows.append(
            case(
                'lstm_backward_step',
                {
                    'dy': A(B, S, view=view),
                    'factors': A(B, 4 * S, view=view),
                    'c_factor': A(B, S, view=view),
                    'd_gates_next': A(B, 4 * S, view=view),
                    'dc_next': A(B, S, view=view),
                    'f_next': A(B, S, view=view, low=0.0, high=1.0),
                    'pi': A(1, S),
                    'pf': A(1, S),
                    'po': A(1, S),
                    'd_gates': A(B, 4 * S, view=view),
                    'dc': A(B, S, view=view),
                },
                _lstm_backward_ref,
                variant=f'-{view or "contiguous"}',
            )
        )
    return rows


CASES = [
    # allocation
    case('allocate', {'shape': (2, 3)}, check=_check_allocation((2, 3))),
    case('zeros', {'shape': (3, 1, 2)}, check=_check_allocation((3, 1, 2), 0)),
    case('ones', {'shape': (4,)}, check=_check_allocation((4,), 1)),
    case('create_from_numpy', {'arr': Raw(2, 3, 4)}, lambda arr: {'@return': arr}),
    case('get_numpy_copy', {'mem': A(3, 4, view='last')}, lambda mem: {'@return': mem}),
    case(
        'set_from_numpy',
        {'mem': A(2, 3, 4, view='last'), 'arr': Raw(2, 3, 4)},
        lambda mem, arr: {'mem': arr},
    ),
    # copy/fill
    *elementwise_rows('copy_to', lambda src: src),
    case(
        'copy_to_if',
        {'src': A(3, 4), 'dest': A(3, 4), 'cond': A(3, 4, values='cond')},
        lambda src, dest, cond: {'dest': np.where(cond != 0, src, dest)},
    ),
    case(
        'copy_to_if',
        {
            'src': A(2, 2, 3, view='last'),
            'dest': A(2, 2, 3, view='last'),
            'cond': A(2, 2, 3, view='last', values='cond'),
        },
        lambda src, dest, cond: {'dest': np.where(cond != 0, src, dest)},
        variant='-views',
    ),
    case(
        'fill',
        {'mem': A(2, 3, 4, view='last'), 'val': 1.5},
        lambda mem, val: {'mem': np.full_like(mem, val)},
    ),
    case(
        'fill',
        {'mem': A(1, 1), 'val': -3},
        lambda mem, val: {'mem': np.full_like(mem, val)},
        variant='-int',
    ),
    case(
        'fill_if',
        {'mem': A(3, 5, view='last'), 'val': 0.25, 'cond': A(3, 5, values='cond')},
        lambda mem, val, cond: {'mem': np.where(cond != 0, val, mem)},
    ),
    case(
        'fill_gaussian',
        {'mean': 2.0, 'std': 0.5, 'out': A(100, 60, view='last')},
        check=_check_gaussian,
    ),
    case(
        'generate_probability_mask',
        {'mask': A(100, 60, view='last'), 'probability': 0.3},
        check=_check_mask(0.3),
    ),
    case(
        'generate_probability_mask',
        {'mask': A(10, 6), 'probability': 1.0},
        lambda mask, probability: {'mask': np.ones_like(mask)},
        variant='-one',
    ),
    case(
        'generate_probability_mask',
        {'mask': A(10, 6), 'probability': 0},
        lambda mask, probability: {'mask': np.zeros_like(mask)},
        variant='-zero',
    ),
    # checks
    case('is_fully_finite', {'a': A(3, 4, view='last')}, lambda a: {'@return': True}),
    case(
        'is_fully_finite',
        {'a': A(3, 4, values=_with_nan)},
        lambda a: {'@return': False},
        variant='-nan',
    ),
    case(
        'is_fully_finite',
        {'a': A(2, 5, values=_with_inf, view='last')},
        lambda a: {'@return': False},
        variant='-inf',
    ),
    # math A to Z
    *elementwise_rows('abs_t', np.abs),
    case(
        'add_into_if',
        {'a': A(3, 4), 'out': A(3, 4), 'cond': A(3, 4, values='cond')},
        lambda a, out, cond: {'out': np.where(cond != 0, out + a, out)},
    ),
    case(
        'add_into_if',
        {
            'a': A(2, 3, view='last'),
            'out': A(2, 3, view='last'),
            'cond': A(2, 3, values='cond', view='last'),
        },
        lambda a, out, cond: {'out': np.where(cond != 0, out + a, out)},
        variant='-views',
    ),
    *mv_rows('add_mv', lambda m, v: m + v),
    *scalar_rows('add_st', lambda s, t: t + s),
    *elementwise_rows('add_tt', np.add, b={}),
    case(
        'binarize_v',
        {'v': A(5, 1, values='ids', high=4), 'out': A(5, 4)},
        lambda v, out: {'out': (v == np.arange(4)) * 1.0},
    ),
    case(
        'binarize_v',
        {'v': A(3, 1, values='ids', high=6, view='last'), 'out': A(3, 6, view='last')},
        lambda v, out: {'out': (v == np.arange(6)) * 1.0},
        variant='-views',
    ),
    case(
        'binarize_v',
        {'v': A(1, 1, values='ids', high=1), 'out': A(1, 1)},
        lambda v, out: {'out': np.ones((1, 1))},
        variant='-1x1',
    ),
    case(
        'broadcast_t',
        {'a': A(1, 4), 'axis': 0, 'out': A(3, 4)},
        lambda a, axis, out: {'out': np.repeat(a, 3, axis=0)},
    ),
    case(
        'broadcast_t',
        {'a': A(3, 1, view='last'), 'axis': 1, 'out': A(3, 5, view='last')},
        lambda a, axis, out: {'out': np.repeat(a, 5, axis=1)},
        variant='-axis1-views',
    ),
    case(
        'broadcast_t',
        {'a': A(2, 1, 3), 'axis': 1, 'out': A(2, 4, 3, view='last')},
        lambda a, axis, out: {'out': np.repeat(a, 4, axis=1)},
        variant='-3d',
    ),
    *elementwise_rows('clip_t', np.clip, extra={'a_min': -0.5, 'a_max': 0.7}),
    case(
        'clip_t',
        {'a': A(3, 4), 'a_min': -1, 'a_max': 1, 'out': A(3, 4)},
        lambda a, a_min, a_max, out: {'out': np.clip(a, -1, 1)},
        variant='-int-bounds',
    ),
    *mv_rows('divide_mv', lambda m, v: m / v, v={'values': 'away', 'low': 0.5}),
    *elementwise_rows('divide_tt', np.divide, b={'values': 'away', 'low': 0.5}),
    *dot_rows('dot_add_mm', accumulate=True),
    *dot_rows('dot_mm', accumulate=False),
    case(
        'index_m_by_v',
        {'m': A(5, 4), 'v': A(5, 1, values='ids', high=4), 'out': A(5, 1)},
        lambda m, v, out: {'out': m[np.arange(5), v[:, 0].astype(int)][:, None]},
    ),
    case(
        'index_m_by_v',
        {
            'm': A(3, 6, view='last'),
            'v': A(3, 1, values='ids', high=6, view='last'),
            'out': A(3, 1, view='last'),
        },
        lambda m, v, out: {'out': m[np.arange(3), v[:, 0].astype(int)][:, None]},
        variant='-views',
    ),
    *elementwise_rows('log_t', np.log, a={'low': 0.1, 'high': 4.0}),
    case(
        'merge_tt',
        {'a': A(2, 3, 2), 'b': A(2, 3, 4), 'out': A(2, 3, 6, view='last')},
        lambda a, b, out: {'out': np.concatenate([a, b], axis=-1)},
    ),
    case(
        'merge_tt',
        {'a': A(1, 1, 1, view='last'), 'b': A(1, 1, 3), 'out': A(1, 1, 4)},
        lambda a, b, out: {'out': np.concatenate([a, b], axis=-1)},
        variant='-T1B1',
    ),
    *elementwise_rows(
        'modulo_tt',
        np.fmod,
        a={'low': -5.0, 'high': 5.0},
        b={'values': 'away', 'low': 0.5, 'high': 2.0},
    ),
    *mv_rows('mult_add_mv', lambda m, v: m * v, full=True, accumulate=True),
    *scalar_rows('mult_add_st', lambda s, t: s * t, accumulate=True),
    *elementwise_rows('mult_add_tt', np.multiply, b={}, accumulate=True),
    *mv_rows('mult_mv', lambda m, v: m * v, full=True),
    *scalar_rows('mult_st', lambda s, t: s * t),
    *elementwise_rows('mult_tt', np.multiply, b={}),
    *elementwise_rows('sign_t', np.sign, a={'values': 'zeros_mixed'}),
    case(
        'softmax_m',
        {'m': A(4, 5, low=-100.0, high=100.0), 'out': A(4, 5)},
        lambda m, out: {'out': _softmax(m)},
    ),
    case(
        'softmax_m',
        {'m': A(3, 6, view='last'), 'out': A(3, 6, view='last')},
        lambda m, out: {'out': _softmax(m)},
        variant='-views',
    ),
    case(
        'softmax_m',
        {'m': A(1, 3), 'out': Same('m')},
        lambda m, out: {'out': _softmax(m)},
        variant='-alias',
    ),
    case(
        'softmax_m',
        {'m': A(4, 1), 'out': A(4, 1)},
        lambda m, out: {'out': np.ones((4, 1))},
        variant='-N1',
    ),
    case(
        'split_add_tt',
        {'x': A(2, 3, 6, view='last'), 'out_a': A(2, 3, 2), 'out_b': A(2, 3, 4)},
        lambda x, out_a, out_b: {
            'out_a': out_a + x[..., :2],
            'out_b': out_b + x[..., 2:],
        },
    ),
    case(
        'split_add_tt',
        {'x': A(1, 1, 4), 'out_a': A(1, 1, 3, view='last'), 'out_b': A(1, 1, 1)},
        lambda x, out_a, out_b: {
            'out_a': out_a + x[..., :3],
            'out_b': out_b + x[..., 3:],
        },
        variant='-T1B1',
    ),
    *elementwise_rows('sqrt_t', np.sqrt, a={'low': 0.0, 'high': 4.0}),
    *mv_rows('subtract_mv', lambda m, v: m - v),
    *elementwise_rows('subtract_tt', np.subtract, b={}),
    case(
        'sum_t',
        {'a': A(2, 3, 4, view='last'), 'axis': None, 'out': A(1)},
        lambda a, axis, out: {'out': np.array([a.sum()])},
    ),
    case(
        'sum_t',
        {'a': A(3, 4), 'axis': None, 'out': A()},
        lambda a, axis, out: {'out': np.array(a.sum())},
        variant='-0d',
    ),
    case(
        'sum_t',
        {'a': A(3, 4, view='last'), 'axis': 0, 'out': A(4)},
        lambda a, axis, out: {'out': a.sum(0)},
        variant='-axis0',
    ),
    case(
        'sum_t',
        {'a': A(3, 4), 'axis': 0, 'out': A(1, 4, view='last')},
        lambda a, axis, out: {'out': a.sum(0, keepdims=True)},
        variant='-axis0-keepdims',
    ),
    case(
        'sum_t',
        {'a': A(3, 4, view='last'), 'axis': 1, 'out': A(3, 1, view='last')},
        lambda a, axis, out: {'out': a.sum(1, keepdims=True)},
        variant='-axis1-keepdims',
    ),
    case(
        'sum_t',
        {'a': A(1, 4), 'axis': 1, 'out': A(1)},
        lambda a, axis, out: {'out': a.sum(1)},
        variant='-axis1',
    ),
    case(
        'sum_t',
        {'a': A(5), 'axis': 0, 'out': A(1)},
        lambda a, axis, out: {'out': a.sum(0, keepdims=True)},
        variant='-1d',
    ),
    # activations (each with its derivative)
    *activation_rows('el'),
    *activation_rows('linear'),
    *activation_rows('rel'),
    *activation_rows('sigmoid'),
    *activation_rows('tanh'),
    *activation_rows('gelu'),
    *activation_rows('leaky_rel'),
    *activation_rows('softplus'),
    # conv/pool
    *conv_rows(),
    *pool_rows(),
    # recurrent
    *lstm_rows(),
    # sequences
    *reverse_time_rows(),
]


def _softmax(m):
    e = np.exp(m - m.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _op_names(params):
    return {p.values[0] for p in params}


def numpy_reference_rows(op):
    """Rows for an elementwise op of the op table, NumPy float64 the reference.

    The op's NumpyHandler implementation in float64 gives the expected
    ``out``; the variants are those of :func:`elementwise_rows` (plain,
    feature-slice views, T=1 B=1, and ``out`` aliasing the first operand
    where the table allows it). Array operands are drawn from [0.5, 2),
    scalars are 0.75.
    """
    kinds = op.kinds
    first = next(name for name, kind in kinds.items() if kind == 'array')

    def ref(**values):
        h = NumpyHandler(np.float64)
        call = {
            name: h.create_from_numpy(v) if isinstance(v, np.ndarray) else v
            for name, v in values.items()
        }
        getattr(h, op.name)(*call.values())
        return {'out': call['out']}

    variants = [('', (3, 4), None), ('-views', (2, 3, 5), 'last')]
    variants += [('-T1B1', (1, 1, 3), None)]
    if op.alias:
        variants.append(('-alias', (4, 2), None))
    rows = []
    for variant, shape, view in variants:
        args = {}
        for name, kind in kinds.items():
            if kind == 'scalar':
                args[name] = 0.75
            elif name == 'out' and variant == '-alias':
                args[name] = Same(first)
            else:
                args[name] = A(*shape, view=view, low=0.5, high=2.0)
        rows.append(case(op.name, args, ref, variant=variant + '-numpy-ref'))
    return rows


def table_rows(cases):
    """Rows for the elementwise ops of the op table that ``cases`` lacks.

    So an op added as docs/custom_handler.rst shows (a table row, a NumPy
    line and a CUDA statement) is checked on every handler at once.
    Elementwise: the grammar's ``'same'`` check, writing only ``out``, with
    array and scalar operands only.
    """
    covered = _op_names(cases)
    return [
        row
        for op in OPS.values()
        if op.name not in covered
        and op.rule == 'same'
        and op.writes == ('out',)
        and set(op.kinds.values()) <= {'array', 'scalar'}
        for row in numpy_reference_rows(op)
    ]


# ------------------------------------------------------------- attention ---


def _batch_matrices(x, trans):
    """(rows, batch..., cols) -> the same with rows and cols swapped if trans."""
    return np.swapaxes(x, 0, -1) if trans else x


def batch_dot_rows(op, accumulate):
    def ref(a, b, out, transa, transb):
        left, right = _batch_matrices(a, transa), _batch_matrices(b, transb)
        result = np.zeros(out.shape)
        for index in np.ndindex(*out.shape[1:-1]):
            at = (slice(None), *index, slice(None))
            result[at] = left[at] @ right[at]
        return {'out': out + result if accumulate else result}

    rows = []
    for ta in (False, True):
        for tb in (False, True):
            for batch, view, variant in (
                ((2, 3), 'last', ''),
                ((4,), None, '-3d'),
                ((), None, '-2d'),
                ((1, 1), 'last', '-B1'),
            ):
                a_shape = (4, *batch, 3) if ta else (3, *batch, 4)
                b_shape = (5, *batch, 4) if tb else (4, *batch, 5)
                rows.append(
                    case(
                        op,
                        {
                            'a': A(*a_shape, view=view),
                            'b': A(*b_shape),
                            'out': A(3, *batch, 5, view=view),
                            'transa': ta,
                            'transb': tb,
                        },
                        ref,
                        variant=f'-{ta:d}{tb:d}{variant}',
                    )
                )
    return rows


def masked_softmax_ref(x, mask, out, causal):
    result = np.zeros(x.shape)
    rows, batch, cols = x.shape[0], x.shape[1], x.shape[-1]
    for t in range(rows):
        for b in range(batch):
            if mask is not None and mask[t, b, 0] == 0:
                continue
            keys = [
                s
                for s in range(cols)
                if (mask is None or mask[s, b, 0] != 0) and (not causal or s <= t)
            ]
            for index in np.ndindex(*x.shape[2:-1]):
                if not keys:
                    continue
                scores = x[(t, b, *index, keys)]
                e = np.exp(scores - scores.max())
                result[(t, b, *index, keys)] = e / e.sum()
    return {'out': result}


def _binary_mask(rng, shape):
    mask = (rng.uniform(size=shape) < 0.6).astype(float)
    mask[0, 0] = 0.0  # a padding query and key in every case
    mask[-1, -1] = 1.0
    return mask


def masked_softmax_rows():
    rows = []
    for causal in (False, True):
        rows += [
            case(
                'masked_softmax_t',
                {
                    'x': A(4, 3, 2, 4, low=-5.0, high=5.0, view='last'),
                    'mask': A(4, 3, 1, values=_binary_mask),
                    'out': A(4, 3, 2, 4, view='last'),
                    'causal': causal,
                },
                masked_softmax_ref,
                variant=f'-causal{causal:d}',
            ),
            case(
                'masked_softmax_t',
                {
                    'x': A(3, 2, 3, low=-50.0, high=50.0),
                    'mask': None,
                    'out': Same('x'),
                    'causal': causal,
                },
                masked_softmax_ref,
                variant=f'-nomask-alias-causal{causal:d}',
            ),
            case(
                'masked_softmax_t',
                {
                    'x': A(3, 2, 2, 2, 3),
                    'mask': A(5, 2, 1, values=_binary_mask, view='last'),
                    'out': A(3, 2, 2, 2, 3),
                    'causal': causal,
                },
                masked_softmax_ref,
                variant=f'-longer-mask-2heads-axes-causal{causal:d}',
            ),
        ]
    rows.append(
        case(
            'masked_softmax_t',
            {
                'x': A(1, 1, 1, 1),
                'mask': A(1, 1, 1, values=lambda rng, shape: np.ones(shape)),
                'out': A(1, 1, 1, 1),
                'causal': True,
            },
            masked_softmax_ref,
            variant='-T1B1',
        )
    )
    return rows


def _softmax_deriv_ref(y, dy, dx):
    return {'dx': y * (dy - (dy * y).sum(axis=-1, keepdims=True))}


CASES += [
    *batch_dot_rows('batch_dot_add_tt', accumulate=True),
    *batch_dot_rows('batch_dot_tt', accumulate=False),
    *masked_softmax_rows(),
    case(
        'softmax_deriv_t',
        {'y': A(3, 2, 2, 5, view='last'), 'dy': A(3, 2, 2, 5), 'dx': A(3, 2, 2, 5)},
        _softmax_deriv_ref,
    ),
    case(
        'softmax_deriv_t',
        {'y': A(4, 3), 'dy': A(4, 3, view='last'), 'dx': Same('dy')},
        _softmax_deriv_ref,
        variant='-alias',
    ),
    case(
        'softmax_deriv_t',
        {'y': A(1, 1, 1), 'dy': A(1, 1, 1), 'dx': A(1, 1, 1)},
        _softmax_deriv_ref,
        variant='-T1B1',
    ),
]


# ------------------------------------------------------------- embedding


def _gather(m, v, out):
    return {'out': m[v[:, 0].astype(int)]}


def _scatter_add(m, v, out):
    total = out.copy()
    for row, k in zip(m, v[:, 0].astype(int)):
        total[k] += row  # repeated ids accumulate
    return {'out': total}


CASES += [
    case(
        'gather_m_by_v',
        {'m': A(4, 3), 'v': A(6, 1, values='ids', high=4), 'out': A(6, 3)},
        _gather,
    ),
    case(
        'gather_m_by_v',
        {
            'm': A(5, 2, view='last'),
            'v': A(3, 1, values='ids', high=5, view='last'),
            'out': A(3, 2, view='last'),
        },
        _gather,
        variant='-views',
    ),
    case(
        'scatter_add_m_by_v',
        # 9 rows into 3 ids: every id is repeated
        {'m': A(9, 4), 'v': A(9, 1, values='ids', high=3), 'out': A(3, 4)},
        _scatter_add,
    ),
    case(
        'scatter_add_m_by_v',
        {
            'm': A(4, 2, view='last'),
            'v': A(4, 1, values='ids', high=6, view='last'),
            'out': A(6, 2, view='last'),
        },
        _scatter_add,
        variant='-views',
    ),
]


# ------------------------------------------------------- parameter updates


def _keeps_read_only_operands(handler, written, values):
    """The update ops write parameters, states and scratch only."""
    assert written.pop('@return') is None
    for name in ('gradients', 'mask'):
        if name in written:
            np.testing.assert_array_equal(
                written[name], values[name], err_msg=f'changed its input {name!r}'
            )


def _mask(rng, shape):
    return (rng.uniform(size=shape) < 0.7).astype(float)


def _adam_ref(
    parameters, gradients, m, v, mask, scratch, learning_rate, beta1, beta2,
    epsilon, step, weight_decay,
):  # fmt: skip
    keep = 1.0 if mask is None else mask
    decayed = parameters - learning_rate * weight_decay * keep * parameters
    m = beta1 * m + (1 - beta1) * gradients
    v = beta2 * v + (1 - beta2) * gradients**2
    m_hat, v_hat = m / (1 - beta1**step), v / (1 - beta2**step)
    step_ = learning_rate * m_hat / (np.sqrt(v_hat) + epsilon)
    return {'parameters': decayed - step_, 'm': m, 'v': v}


def _rmsprop_ref(
    parameters, gradients, mean_square, scratch, learning_rate, decay, epsilon
):
    s = decay * mean_square + (1 - decay) * gradients**2
    step_ = learning_rate * gradients / (np.sqrt(s) + epsilon)
    return {'parameters': parameters - step_, 'mean_square': s}


def update_rows():
    """Each update op from its equations in float64: on a flat array (as
    the steppers call them) and on feature-slice views."""
    rows = []
    for shape, view in (((37,), None), ((3, 5), 'last')):
        variant = '' if view is None else '-views'

        def arrays(*names, nonnegative=(), shape=shape, view=view):
            low = {n: 0.0 for n in nonnegative}
            return {n: A(*shape, view=view, low=low.get(n, -2.0)) for n in names}

        def row(op, args, ref, suffix='', variant=variant):
            rows.append(
                case(op, args, ref, _keeps_read_only_operands, variant + suffix)
            )

        row(
            'sgd_update',
            {**arrays('parameters', 'gradients'), 'learning_rate': 0.3},
            lambda parameters, gradients, learning_rate: {
                'parameters': parameters - learning_rate * gradients
            },
        )

        def momentum_ref(parameters, gradients, velocity, learning_rate, momentum):
            v = momentum * velocity - learning_rate * gradients
            return {'parameters': parameters + v, 'velocity': v}

        row(
            'momentum_update',
            {
                **arrays('parameters', 'gradients', 'velocity'),
                'learning_rate': 0.3,
                'momentum': 0.9,
            },
            momentum_ref,
        )
        row(
            'nesterov_lookahead',
            {**arrays('parameters', 'velocity'), 'momentum': 0.9},
            lambda parameters, velocity, momentum: {
                'parameters': parameters + momentum * velocity,
                'velocity': momentum * velocity,
            },
        )
        row(
            'nesterov_update',
            {**arrays('parameters', 'gradients', 'velocity'), 'learning_rate': 0.3},
            lambda parameters, gradients, velocity, learning_rate: {
                'parameters': parameters - learning_rate * gradients,
                'velocity': velocity - learning_rate * gradients,
            },
        )
        row(
            'rmsprop_update',
            {
                **arrays(
                    'parameters',
                    'gradients',
                    'mean_square',
                    'scratch',
                    nonnegative=('mean_square',),
                ),
                'learning_rate': 0.1,
                'decay': 0.9,
                'epsilon': 1e-3,
            },
            _rmsprop_ref,
        )
        for suffix, mask, weight_decay in (
            ('', None, 0.0),
            ('-decay', None, 0.2),
            ('-decay-mask', A(*shape, values=_mask, view=view), 0.2),
        ):
            row(
                'adam_update',
                {
                    **arrays('parameters', 'gradients', 'm', 'v', nonnegative=('v',)),
                    'mask': mask,
                    **arrays('scratch'),
                    'learning_rate': 0.1,
                    'beta1': 0.9,
                    'beta2': 0.999,
                    'epsilon': 1e-3,
                    'step': 3,
                    'weight_decay': weight_decay,
                },
                _adam_ref,
                suffix,
            )
    return rows


CASES += update_rows()

CASES += table_rows(CASES)


# ----------------------------------------------------------------- tests ---


def test_table_covers_every_op():
    missing = set(OPS) - _op_names(CASES)
    assert not missing, f'ops without a row in CASES: {sorted(missing)}'


def test_elementwise_ops_without_rows_get_numpy_reference_rows():
    """A table op without hand-written rows is compared with its NumPy line."""
    op = OPS['abs_t']
    rows = table_rows([])
    assert {p.values[0] for p in rows} >= {'abs_t', 'add_st', 'mult_add_tt'}
    assert not {'sum_t', 'dot_mm', 'add_mv', 'clip_t'} & _op_names(rows)
    own = numpy_reference_rows(op)
    assert [p.id for p in own] == [
        f'abs_t{v}-numpy-ref' for v in ('', '-views', '-T1B1', '-alias')
    ]
    for param in own:
        run_case(NumpyHandler(np.float32), *param.values)
    # a wrong float32 implementation fails against the float64 reference
    wrong = NumpyHandler(np.float32)
    wrong.abs_t = lambda a, out: wrong.sign_t(a, out)
    with pytest.raises(AssertionError, match='abs_t'):
        run_case(wrong, *own[0].values)


def run_case(handler, op, args, ref, check, seed=42):
    """Run one table row on ``handler`` and compare with its reference."""
    rng = np.random.RandomState(seed)
    values, call, bigs = build_args(handler, args, rng)
    returned = getattr(handler, op)(*call.values())
    tol = TOLERANCES[np.dtype(handler.dtype).type]
    written = {}
    expected = (
        ref(
            **{
                k: (v.copy() if isinstance(v, np.ndarray) else v)
                for k, v in values.items()
            }
        )
        if ref
        else {}
    )
    for name, value in call.items():
        if isinstance(args[name], (A, Same, Derived)):
            written[name] = handler.get_numpy_copy(value)
    if check is not None:
        check(handler, {**written, '@return': returned}, values)
    if '@return' in expected:
        want = expected.pop('@return')
        if isinstance(want, bool):
            assert returned is want, f'{op} returned {returned!r}, want {want}'
        else:
            got = (
                returned
                if isinstance(returned, np.ndarray)
                else handler.get_numpy_copy(returned)
            )
            assert got.dtype == np.dtype(handler.dtype), got.dtype
            np.testing.assert_allclose(
                got, want, **tol, err_msg=f'{op}: returned value'
            )
    elif check is None:
        assert returned is None, f'{op} returned {returned!r}, not None'
    aliased = {n for n, s in args.items() if isinstance(s, Same)}
    aliased |= {args[n].name for n in aliased}
    for name, got in written.items():
        if name in expected:
            want = np.broadcast_to(expected[name], got.shape)
            np.testing.assert_allclose(
                got,
                want,
                **tol,
                err_msg=f'{op}: argument {name!r} (shape {got.shape}, rtol/atol {tol})',
            )
        elif name not in aliased and check is None:
            np.testing.assert_array_equal(
                got, values[name], err_msg=f'{op} changed its input {name!r}'
            )
    for name, (big_h, big, inner) in bigs.items():
        after = handler.get_numpy_copy(big_h)
        after[inner], big = 0, big.copy()
        big[inner] = 0
        np.testing.assert_array_equal(
            after, big, err_msg=f'{op} wrote outside the view {name!r}'
        )


@pytest.mark.parametrize('op, args, ref, check', CASES)
def test_op(handler, op, args, ref, check):
    run_case(handler, op, args, ref, check)


STEPPED_HANDLERS = ('numpy-float32', 'numpy-float64', 'onednn-float32')


@pytest.mark.parametrize('step', [2, 4, 8])
@pytest.mark.parametrize('handler_name', STEPPED_HANDLERS)
@pytest.mark.parametrize('op, args, ref, check', CASES)
def test_op_on_views_with_no_contiguous_axis(handler_name, step, op, args, ref, check):
    # every contiguous array operand taken as every step-th entry of a longer
    # last axis: NumPy then runs its strided loops, some of which were wrong
    # in some releases (2.4.6: np.negative into strided float32 output from
    # 16-byte input strides, isfinite and signbit into strided bool outputs)
    stepped = {
        name: spec.with_view(step)
        if isinstance(spec, A) and spec.view is None and spec.shape
        else spec
        for name, spec in args.items()
    }
    run_case(HANDLERS[handler_name](), op, stepped, ref, check)


def test_whole_table_on_one_handler(handler):
    """Scratch buffers kept between calls must not leak between ops, shapes
    and geometries (e.g. two paddings giving the same padded size)."""
    for seed in (1, 2):
        for param in CASES:
            run_case(handler, *param.values, seed=seed)
    run_case(
        handler,
        'conv2d_forward_batch',
        {
            'inputs': A(1, 6, 6, 1),
            'weights': A(1, 3, 3, 1),
            'bias': A(1),
            'outputs': A(1, 6, 6, 1),
            'padding': 1,
            'stride': (1, 1),
        },
        lambda inputs, weights, bias, outputs, padding, stride: {
            'outputs': conv_forward_ref(inputs, weights, bias, padding, stride)
        },
        None,
    )
    run_case(
        handler,
        'conv2d_forward_batch',
        {
            'inputs': A(1, 4, 4, 1),
            'weights': A(1, 3, 3, 1),
            'bias': A(1),
            'outputs': A(1, 6, 6, 1),
            'padding': 2,
            'stride': (1, 1),
        },
        lambda inputs, weights, bias, outputs, padding, stride: {
            'outputs': conv_forward_ref(inputs, weights, bias, padding, stride)
        },
        None,
    )


@pytest.mark.parametrize('name', ACTIVATION_NAMES)
def test_conv2d_forward_batch_applies_its_activation(handler, name):
    """``activation=name`` gives exactly the outputs of the op without it
    followed by ``inplace_act_func[name]``, on contiguous and strided
    operands (the geometries of the table, views alternating)."""
    for g, (n, h, w, c, f, k, p, s) in enumerate(CONV_GEOMETRIES):
        oh, ow = _out_size(h, k[0], p, s[0]), _out_size(w, k[1], p, s[1], 1)
        view = (None, 'rows', 'last')[g % 3]
        args = {
            'inputs': A(n, h, w, c, view=view),
            'weights': A(f, *k, c),
            'bias': A(f),
            'outputs': A(n, oh, ow, f, view=view),
            'padding': p,
            'stride': s,
        }
        _, call, _ = build_args(handler, args, np.random.RandomState(g))
        handler.conv2d_forward_batch(*call.values(), activation=name)
        fused = handler.get_numpy_copy(call['outputs'])
        handler.conv2d_forward_batch(*call.values())
        handler.inplace_act_func[name](call['outputs'])
        separate = handler.get_numpy_copy(call['outputs'])
        # the same bits: a ReLU giving -0.0 for negative values differs
        np.testing.assert_array_equal(
            fused.view(np.uint8), separate.view(np.uint8), err_msg=f'geometry {g}'
        )


@pytest.mark.parametrize('name', ACTIVATION_NAMES)
def test_activation_dicts(handler, name):
    f, deriv = ACTIVATIONS[name]
    rng = np.random.RandomState(3)
    tol = TOLERANCES[np.dtype(handler.dtype).type]
    dtype = np.dtype(handler.dtype)
    x = rng.uniform(-3, 3, (4, 5)).astype(dtype).astype(np.float64)
    dy = rng.uniform(-1, 1, (4, 5)).astype(dtype).astype(np.float64)
    x_h, y_h = handler.create_from_numpy(x), handler.zeros((4, 5))
    handler.act_func[name](x_h, y_h)
    y = handler.get_numpy_copy(y_h).astype(np.float64)
    np.testing.assert_allclose(y, f(x), **tol, err_msg=f'act_func[{name!r}]')
    dy_h, dx_h = handler.create_from_numpy(dy), handler.zeros((4, 5))
    handler.act_func_deriv[name](x_h, y_h, dy_h, dx_h)
    np.testing.assert_allclose(
        handler.get_numpy_copy(dx_h),
        dy * deriv(x, y),
        **tol,
        err_msg=f'act_func_deriv[{name!r}]',
    )
    handler.inplace_act_func[name](x_h)
    np.testing.assert_allclose(
        handler.get_numpy_copy(x_h), f(x), **tol, err_msg=f'inplace_act_func[{name!r}]'
    )
    if name in NEEDS_INPUT:
        with pytest.raises(ValueError, match=f'derivative of {name!r} needs the input'):
            handler.inplace_act_func_deriv[name](y_h, dy_h)
        return
    handler.inplace_act_func_deriv[name](y_h, dy_h)
    np.testing.assert_allclose(
        handler.get_numpy_copy(dy_h),
        dy * deriv(x, y),
        **tol,
        err_msg=f'inplace_act_func_deriv[{name!r}]',
    )


def test_get_numpy_copy_is_a_copy(handler):
    mem = handler.create_from_numpy(np.ones((2, 3)))
    copied = handler.get_numpy_copy(mem)
    copied[:] = 5
    assert np.all(handler.get_numpy_copy(mem) == 1)


def test_handler_attributes(handler):
    assert handler.dtype in (np.float32, np.float64)
    assert isinstance(handler.EMPTY, handler.array_type)
    assert handler.EMPTY.size == 0
    assert handler.context is not None
    assert set(handler.act_func) == set(ACTIVATION_NAMES)
    assert set(handler.act_func_deriv) == set(ACTIVATION_NAMES)
    assert set(handler.inplace_act_func) == set(ACTIVATION_NAMES)
    assert set(handler.inplace_act_func_deriv) == set(ACTIVATION_NAMES)


def test_seeded_handlers_draw_the_same_numbers(handler):
    other = create_from_description(get_description(handler))
    handler.rnd.set_seed(7)
    other.rnd.set_seed(7)
    a, b = handler.zeros((4, 3)), other.zeros((4, 3))
    handler.fill_gaussian(0.0, 1.0, a)
    other.fill_gaussian(0.0, 1.0, b)
    np.testing.assert_array_equal(handler.get_numpy_copy(a), other.get_numpy_copy(b))


# ------------------------------------------------- descriptions, copying ---


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
def test_numpy_handler_description_roundtrip(dtype):
    h = NumpyHandler(dtype)
    description = get_description(h)
    assert description == {'@type': 'NumpyHandler', 'dtype': np.dtype(dtype).name}
    recreated = create_from_description(description)
    assert isinstance(recreated, NumpyHandler)
    assert recreated.dtype is dtype
    assert recreated.act_func['tanh'].__self__ is recreated


def test_debug_handler_description_roundtrip():
    h = DebugHandler(NumpyHandler(np.float64))
    description = get_description(h)
    assert description == {
        '@type': 'DebugHandler',
        'handler': {'@type': 'NumpyHandler', 'dtype': 'float64'},
    }
    recreated = create_from_description(description)
    assert isinstance(recreated, DebugHandler)
    assert recreated.dtype is np.float64
    x = recreated.create_from_numpy(np.array([[0.0, 1.0]]))
    recreated.act_func['sigmoid'](x, x)
    np.testing.assert_allclose(recreated.get_numpy_copy(x), [[0.5, _sigmoid(1.0)]])


@pytest.mark.parametrize(
    'duplicate', [copy.deepcopy, lambda h: pickle.loads(pickle.dumps(h))]
)
def test_copied_handlers_own_their_activation_dicts(handler, duplicate):
    other = duplicate(handler)
    x = other.create_from_numpy(np.array([[-1.0, 2.0]]))
    other.inplace_act_func['rel'](x)
    np.testing.assert_array_equal(other.get_numpy_copy(x), [[0.0, 2.0]])
    assert other.act_func['rel'].__self__ is other


def test_package_exports():
    assert isinstance(brainstorm.handlers.default_handler, NumpyHandler)
    assert brainstorm.handlers.default_handler.dtype is np.float32
    assert 'DebugHandler' not in brainstorm.handlers.__all__
    assert {'NumpyHandler', 'PyCudaHandler', 'default_handler'} <= set(
        brainstorm.handlers.__all__
    )


# ------------------------------------------------ no allocation hot path ---


def _hot_path_call(h, op, channels):
    """A repeatable call of ``op`` on interleaved feature-slice views."""
    rng = np.random.RandomState(0)
    n, size = 128, 16 * 16 * channels  # NumPy's iteration buffers: < 0.21 MB
    big = h.create_from_numpy(rng.randn(n, 3 * size + 5))
    x, y, z = (
        big[:, k * size : (k + 1) * size].reshape(n, 16, 16, channels) for k in range(3)
    )
    w = h.create_from_numpy(rng.randn(channels, 3, 3, channels))
    b = w[:, 0, 0, 0]
    fields = 16 * 16 * 9 * channels  # a Convolution2D 'columns' internal
    columns = h.zeros((n, fields + 3))[:, 1 : 1 + fields].reshape(
        n, 16, 16, 9 * channels
    )
    seq_a, seq_b = big[:, :size], big[:, size : 2 * size]  # (T*B, F) slices
    matrix, product = big[:, : 3 * size], h.zeros((size, size))
    calls = {
        'dot_add_mm': lambda: h.dot_add_mm(
            matrix[:, :size], matrix[:, size : 2 * size], product, transa=True
        ),
        'mult_add_tt': lambda: h.mult_add_tt(seq_a, seq_a, seq_b),
        'sigmoid_deriv': lambda: h.sigmoid_deriv(None, seq_a, seq_b, seq_b),
        'generate_probability_mask': lambda: h.generate_probability_mask(seq_b, 0.3),
        'conv2d_forward_batch': lambda: h.conv2d_forward_batch(x, w, b, y, 1, (1, 1)),
        'conv2d_forward_batch kept': lambda: h.conv2d_forward_batch(
            x, w, b, y, 1, (1, 1), columns=columns
        ),
        'conv2d_backward_batch': lambda: h.conv2d_backward_batch(
            x, w, 1, (1, 1), z, y, h.zeros(w.shape), h.zeros(b.shape)
        ),
        'conv2d_backward_batch kept': lambda: h.conv2d_backward_batch(
            x, w, 1, (1, 1), z, y, h.zeros(w.shape), h.zeros(b.shape), columns=columns
        ),
        'conv2d_backward_batch stride 2': lambda: h.conv2d_backward_batch(
            x, w, 1, (2, 2), z, y[:, :8, :8], h.zeros(w.shape), h.zeros(b.shape)
        ),
        'maxpool2d_forward_batch': lambda: h.maxpool2d_forward_batch(
            x, (3, 3), y, 1, (1, 1), z
        ),
        'maxpool2d_backward_batch': lambda: h.maxpool2d_backward_batch(
            x, (3, 3), y, 1, (1, 1), z, x, y
        ),
        'avgpool2d_forward_batch': lambda: h.avgpool2d_forward_batch(
            x, (3, 3), y, 1, (1, 1)
        ),
        'avgpool2d_backward_batch': lambda: h.avgpool2d_backward_batch(
            x, (3, 3), y, 1, (1, 1), z, y
        ),
    }
    if op == 'maxpool2d_backward_batch':  # an argmax naming cells of the images
        h.maxpool2d_forward_batch(x, (3, 3), y, 1, (1, 1), z)
    return calls[op], x.nbytes


# every convolution code path: few channels, and with 8 channels the
# input deltas by correlation (stride 1) or per kernel offset (stride 2)
_CONV_CALLS = [
    f'conv2d_{kind}'
    for kind in (
        'forward_batch',
        'forward_batch kept',
        'backward_batch',
        'backward_batch kept',
        'backward_batch stride 2',
    )
]


@pytest.mark.parametrize(
    'op, channels',
    [
        ('avgpool2d_backward_batch', 4),
        ('avgpool2d_forward_batch', 4),
        *[(op, c) for op in _CONV_CALLS for c in (4, 8)],
        ('dot_add_mm', 4),
        ('generate_probability_mask', 4),
        ('maxpool2d_backward_batch', 4),
        ('maxpool2d_forward_batch', 4),
        ('mult_add_tt', 4),
        ('sigmoid_deriv', 4),
    ],
)
def test_numpy_ops_do_not_allocate_operand_sized_memory(op, channels):
    """Repeated calls reuse scratch buffers (NumPy's own fixed-size
    iteration buffers stay far below the operand size)."""
    h = NumpyHandler(np.float64)
    run, nbytes = _hot_path_call(h, op, channels)
    run()  # the first call may create scratch buffers
    tracemalloc.start()
    try:
        run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < nbytes / 2, (
        f'{op} allocated {peak} bytes on a repeated call (operand: {nbytes})'
    )


# --------------------------------------------------- DebugHandler checks ---


def _debug():
    return DebugHandler(NumpyHandler(np.float64))


def _arr(h, *shape, value=0.5):
    return h.create_from_numpy(np.full(shape, value))


ADAM = (0.1, 0.9, 0.99, 1e-8, 1, 0.1)  # adam_update's scalars

DEBUG_CHECKS = {  # name: (call on a fresh DebugHandler, expected substrings)
    'not-a-debug-array': (
        lambda h: h.add_tt(_arr(h, 3, 4), np.zeros((3, 4)), _arr(h, 3, 4)),
        ['add_tt', "'b'", 'DebugArray', 'ndarray'],
    ),
    'shape-mismatch': (
        lambda h: h.add_tt(_arr(h, 3, 4), _arr(h, 3, 5), _arr(h, 3, 4)),
        ['add_tt', "'b'", '(3, 4)', '(3, 5)'],
    ),
    'out-shape-mismatch': (
        lambda h: h.sigmoid(_arr(h, 2, 3), _arr(h, 3, 2)),
        ['sigmoid', "'y'", '(2, 3)', '(3, 2)'],
    ),
    'mv-vector-shape': (
        lambda h: h.add_mv(_arr(h, 3, 4), _arr(h, 3, 4), _arr(h, 3, 4)),
        ['add_mv', "'v'", '(1, 4) or (3, 1)', '(3, 4)'],
    ),
    'mv-matrix-1d': (
        lambda h: h.mult_mv(_arr(h, 4), _arr(h, 1, 4), _arr(h, 4)),
        ['mult_mv', "'m'", '2-D', '(4,)'],
    ),
    'dot-inner': (
        lambda h: h.dot_mm(_arr(h, 3, 4), _arr(h, 5, 2), _arr(h, 3, 2)),
        ['dot_mm', '(3, 4)', '(5, 2)', 'inner'],
    ),
    'dot-out': (
        lambda h: h.dot_add_mm(
            _arr(h, 4, 3), _arr(h, 4, 2), _arr(h, 3, 3), transa=True
        ),
        ['dot_add_mm', "'out'", '(3, 2)', '(3, 3)'],
    ),
    'trans-flag': (
        lambda h: h.dot_mm(_arr(h, 3, 4), _arr(h, 4, 2), _arr(h, 3, 2), transa=1),
        ['dot_mm', "'transa'", 'bool', 'int 1'],
    ),
    'scalar-numpy-type': (
        lambda h: h.mult_st(np.float32(2), _arr(h, 2), _arr(h, 2)),
        ['mult_st', "'s'", 'Python int or float', 'float32'],
    ),
    'scalar-array': (
        lambda h: h.fill(_arr(h, 2), np.ones(1)),
        ['fill', "'val'", 'Python int or float', 'ndarray'],
    ),
    'sum-axis': (
        lambda h: h.sum_t(_arr(h, 3, 4), 2, _arr(h, 3)),
        ['sum_t', "'axis'", 'axis=2', '(3, 4)'],
    ),
    'sum-out-shape': (
        lambda h: h.sum_t(_arr(h, 3, 4), 0, _arr(h, 3)),
        ['sum_t', "'out'", '(4,) or (1, 4)', '(3,)'],
    ),
    'broadcast-axis': (
        lambda h: h.broadcast_t(_arr(h, 1, 4), 2, _arr(h, 3, 4)),
        ['broadcast_t', "'axis'", '[0, 2)', '2'],
    ),
    'window-list': (
        lambda h: h.maxpool2d_forward_batch(
            _arr(h, 1, 4, 4, 1),
            [2, 2],
            _arr(h, 1, 3, 3, 1),
            0,
            (1, 1),
            _arr(h, 1, 3, 3, 1),
        ),
        ['maxpool2d_forward_batch', "'window'", 'tuple of two positive ints', '[2, 2]'],
    ),
    'stride-length': (
        lambda h: h.avgpool2d_forward_batch(
            _arr(h, 1, 4, 4, 1), (2, 2), _arr(h, 1, 3, 3, 1), 0, (1,)
        ),
        ['avgpool2d_forward_batch', "'stride'", '(1,)'],
    ),
    'padding-negative': (
        lambda h: h.conv2d_forward_batch(
            _arr(h, 1, 4, 4, 1),
            _arr(h, 2, 1, 1, 1),
            _arr(h, 2),
            _arr(h, 1, 4, 4, 2),
            -1,
            (1, 1),
        ),
        ['conv2d_forward_batch', "'padding'", 'int >= 0', '-1'],
    ),
    'padding-float': (
        lambda h: h.conv2d_forward_batch(
            _arr(h, 1, 4, 4, 1),
            _arr(h, 2, 1, 1, 1),
            _arr(h, 2),
            _arr(h, 1, 4, 4, 2),
            1.0,
            (1, 1),
        ),
        ['conv2d_forward_batch', "'padding'", '1.0'],
    ),
    'conv-channels': (
        lambda h: h.conv2d_forward_batch(
            _arr(h, 1, 4, 4, 3),
            _arr(h, 2, 1, 1, 1),
            _arr(h, 2),
            _arr(h, 1, 4, 4, 2),
            0,
            (1, 1),
        ),
        ['conv2d_forward_batch', "'weights'", '3 input channels', '(2, 1, 1, 1)'],
    ),
    'conv-activation': (
        lambda h: h.conv2d_forward_batch(
            _arr(h, 1, 4, 4, 1),
            _arr(h, 2, 3, 3, 1),
            _arr(h, 2),
            _arr(h, 1, 2, 2, 2),
            0,
            (1, 1),
            activation='relu6',
        ),
        ['conv2d_forward_batch', "'activation'", 'relu6', "'rel'"],
    ),
    'conv-outputs': (
        lambda h: h.conv2d_forward_batch(
            _arr(h, 1, 4, 4, 1),
            _arr(h, 2, 3, 3, 1),
            _arr(h, 2),
            _arr(h, 1, 4, 4, 2),
            0,
            (1, 1),
        ),
        ['conv2d_forward_batch', "'outputs'", '(1, 2, 2, 2)', '(1, 4, 4, 2)'],
    ),
    'conv-in-deltas': (
        lambda h: h.conv2d_backward_batch(
            _arr(h, 1, 4, 4, 1),
            _arr(h, 2, 3, 3, 1),
            1,
            (1, 1),
            _arr(h, 1, 4, 4, 2),
            _arr(h, 1, 4, 4, 2),
            _arr(h, 2, 3, 3, 1),
            _arr(h, 2),
        ),
        ['conv2d_backward_batch', "'in_deltas'", '(1, 4, 4, 1)'],
    ),
    'window-too-big': (
        lambda h: h.maxpool2d_forward_batch(
            _arr(h, 1, 2, 2, 1),
            (3, 3),
            _arr(h, 1, 1, 1, 1),
            0,
            (1, 1),
            _arr(h, 1, 1, 1, 1),
        ),
        ['maxpool2d_forward_batch', '(3, 3)', 'does not fit'],
    ),
    'padding-sides': (
        lambda h: h.maxpool2d_forward_batch(
            _arr(h, 1, 4, 4, 1),
            (2, 2),
            _arr(h, 1, 4, 4, 1),
            (1, 1),
            (1, 1),
            _arr(h, 1, 4, 4, 1),
        ),
        [
            'maxpool2d_forward_batch',
            "'padding'",
            '(top, bottom, left, right)',
            '(1, 1)',
        ],
    ),
    'padding-sides-fit': (
        lambda h: h.avgpool2d_forward_batch(
            _arr(h, 1, 2, 2, 1), (4, 3), _arr(h, 1, 1, 1, 1), (0, 1, 0, 1), (1, 1)
        ),
        ['avgpool2d_forward_batch', '(4, 3)', 'does not fit', '(3, 3)'],
    ),
    'reverse-time-mask-shape': (
        lambda h: h.reverse_time_t(
            _arr(h, 3, 2, 4), _arr(h, 3, 2, 2), _arr(h, 3, 2, 4)
        ),
        ['reverse_time_t', "'mask'", '(3, 2, 1)', '(3, 2, 2)'],
    ),
    'reverse-time-out-shape': (
        lambda h: h.reverse_time_t(_arr(h, 3, 2, 4), None, _arr(h, 2, 3, 4)),
        ['reverse_time_t', "'out'", '(3, 2, 4)'],
    ),
    'clip-bounds': (
        lambda h: h.clip_t(_arr(h, 2), 1.0, 0.0, _arr(h, 2)),
        ['clip_t', 'a_min=1.0', 'a_max=0.0'],
    ),
    'probability': (
        lambda h: h.generate_probability_mask(_arr(h, 2), 1.5),
        ['generate_probability_mask', "'probability'", '[0, 1]', '1.5'],
    ),
    'std': (
        lambda h: h.fill_gaussian(0.0, -1.0, _arr(h, 2)),
        ['fill_gaussian', "'std'", '>= 0', '-1.0'],
    ),
    'binarize-ids': (
        lambda h: h.binarize_v(
            h.create_from_numpy(np.array([[0.0], [4.0]])), _arr(h, 2, 4)
        ),
        ['binarize_v', "'v'", '[0, 4)', '4.0'],
    ),
    'binarize-fractional-ids': (
        lambda h: h.binarize_v(h.create_from_numpy(np.array([[0.5]])), _arr(h, 1, 4)),
        ['binarize_v', "'v'", 'integral', '0.5'],
    ),
    'index-ids': (
        lambda h: h.index_m_by_v(
            _arr(h, 2, 3), h.create_from_numpy(np.array([[0.0], [-1.0]])), _arr(h, 2, 1)
        ),
        ['index_m_by_v', "'v'", '[0, 3)', '-1.0'],
    ),
    'gather-ids': (
        lambda h: h.gather_m_by_v(
            _arr(h, 3, 2), h.create_from_numpy(np.array([[0.0], [3.0]])), _arr(h, 2, 2)
        ),
        ['gather_m_by_v', "'v'", '[0, 3)', '3.0'],
    ),
    'gather-out-shape': (
        lambda h: h.gather_m_by_v(
            _arr(h, 3, 2), h.create_from_numpy(np.array([[0.0], [1.0]])), _arr(h, 2, 3)
        ),
        ['gather_m_by_v', "'out'", '(2, 2)', '(2, 3)'],
    ),
    'scatter-ids': (
        lambda h: h.scatter_add_m_by_v(
            _arr(h, 2, 2), h.create_from_numpy(np.array([[0.5], [1.0]])), _arr(h, 3, 2)
        ),
        ['scatter_add_m_by_v', "'v'", 'integral', '0.5'],
    ),
    'scatter-v-shape': (
        lambda h: h.scatter_add_m_by_v(
            _arr(h, 2, 2), h.create_from_numpy(np.array([[0.0]])), _arr(h, 3, 2)
        ),
        ['scatter_add_m_by_v', "'v'", '(2, 1)', '(1, 1)'],
    ),
    'merge-shapes': (
        lambda h: h.merge_tt(_arr(h, 2, 3), _arr(h, 2, 4), _arr(h, 2, 6)),
        ['merge_tt', "'out'", '(2, 7)', '(2, 6)'],
    ),
    'set-from-numpy-shape': (
        lambda h: h.set_from_numpy(_arr(h, 2, 3), np.zeros((3, 2))),
        ['set_from_numpy', "'arr'", '(2, 3)', '(3, 2)'],
    ),
    'update-state-shape': (
        lambda h: h.momentum_update(_arr(h, 6), _arr(h, 6), _arr(h, 5), 0.1, 0.9),
        ['momentum_update', "'velocity'", '(6,)', '(5,)'],
    ),
    'update-mask-shape': (
        lambda h: h.adam_update(
            *(_arr(h, 4) for _ in range(4)), _arr(h, 2, 2), _arr(h, 4), *ADAM
        ),
        ['adam_update', "'mask'", '(4,)', '(2, 2)'],
    ),
    'update-scalar-kind': (
        lambda h: h.sgd_update(_arr(h, 3), _arr(h, 3), np.array(0.1)),
        ['sgd_update', "'learning_rate'", 'Python int or float', 'ndarray'],
    ),
    'activation-deriv-shape': (
        lambda h: h.tanh_deriv(None, _arr(h, 2, 3), _arr(h, 2, 3), _arr(h, 2, 2)),
        ['tanh_deriv', "'dx'", '(2, 3)', '(2, 2)'],
    ),
}


@pytest.mark.parametrize('name', sorted(DEBUG_CHECKS))
def test_debug_handler_check_fires_with_a_clear_message(name):
    call, expected = DEBUG_CHECKS[name]
    with pytest.raises(DebugHandlerError) as info:
        call(_debug())
    assert isinstance(info.value, AssertionError)
    message = str(info.value)
    assert message.startswith('DebugHandler.'), message
    for part in expected:
        assert part in message, f'{part!r} missing from: {message}'


@pytest.mark.parametrize(
    'bad, name', [(np.nan, "'a'"), (np.inf, "'a'"), (-np.inf, "'a'")]
)
def test_debug_handler_rejects_non_finite_arguments(bad, name):
    h = _debug()
    a = h.create_from_numpy(np.array([[1.0, bad]]))
    with pytest.raises(ValueError, match=f'add_tt: argument {name} holds NaN'):
        h.add_tt(a, _arr(h, 1, 2), _arr(h, 1, 2))


def test_debug_handler_rejects_non_finite_results_and_scalars():
    h = _debug()
    with (
        pytest.raises(ValueError, match="mult_st: argument 'out' holds NaN"),
        np.errstate(over='ignore'),
    ):
        h.mult_st(1e300, _arr(h, 2, value=1e300), _arr(h, 2))
    with pytest.raises(ValueError, match="fill: argument 'mem' holds NaN"):
        h.fill(_arr(h, 2), float('inf'))


def test_debug_handler_is_fully_finite_does_not_raise():
    h = _debug()
    assert h.is_fully_finite(h.create_from_numpy(np.array([np.nan]))) is False
    assert h.is_fully_finite(_arr(h, 3)) is True


class _SpecSignatureHandler(NumpyHandler):
    """Convolution ops with the SPEC signatures (no keyword-only options)."""

    def conv2d_forward_batch(self, inputs, weights, bias, outputs, padding, stride):
        super().conv2d_forward_batch(inputs, weights, bias, outputs, padding, stride)

    def conv2d_backward_batch(
        self,
        inputs,
        weights,
        padding,
        stride,
        in_deltas,
        out_deltas,
        weight_deltas,
        bias_deltas,
    ):
        super().conv2d_backward_batch(
            inputs,
            weights,
            padding,
            stride,
            in_deltas,
            out_deltas,
            weight_deltas,
            bias_deltas,
        )


def test_debug_handler_passes_keyword_options_only_when_given():
    h = DebugHandler(_SpecSignatureHandler(np.float64))
    x, w, b = _arr(h, 1, 4, 4, 1), _arr(h, 2, 3, 3, 1), _arr(h, 2)
    y, dx, dw = _arr(h, 1, 2, 2, 2), _arr(h, 1, 4, 4, 1), _arr(h, 2, 3, 3, 1)
    h.conv2d_forward_batch(x, w, b, y, 0, (1, 1))
    h.conv2d_backward_batch(x, w, 0, (1, 1), dx, y, dw, b)
    np.testing.assert_allclose(h.get_numpy_copy(y), 0.5 + 9 * 0.5**2)
    # the base Handler lets the 0.5-style ops take (and ignore) the options
    h.conv2d_backward_batch(x, w, 0, (1, 1), dx, y, dw, b, skip_in_deltas=True)
    h.conv2d_forward_batch(x, w, b, y, 0, (1, 1), columns=_arr(h, 1, 2, 2, 9))
    # (b now holds the bias deltas of the backward pass)
    np.testing.assert_allclose(
        h.get_numpy_copy(y),
        np.broadcast_to(h.get_numpy_copy(b) + 9 * 0.5**2, (1, 2, 2, 2)),
    )


def test_handlers_without_the_activation_keyword_get_it_applied():
    """A conv2d_forward_batch with 0.5's signature gets ``activation``
    applied after it by the base class; unknown names fail before it runs."""
    h = _SpecSignatureHandler(np.float64)
    x = h.create_from_numpy(np.full((1, 4, 4, 1), 0.5))
    w = h.create_from_numpy(np.full((2, 3, 3, 1), 0.5) * [[[[1.0]]], [[[-1.0]]]])
    b, y = h.zeros((2,)), h.create_from_numpy(np.full((1, 2, 2, 2), 7.0))
    h.conv2d_forward_batch(x, w, b, y, 0, (1, 1), activation='rel')
    np.testing.assert_array_equal(y[..., 0], 9 * 0.5**2)
    np.testing.assert_array_equal(y[..., 1], 0.0)  # -2.25 through the ReLU
    h.conv2d_forward_batch(
        x, w, b, outputs=y, padding=0, stride=(1, 1), activation='tanh'
    )
    np.testing.assert_allclose(y[..., 1], np.tanh(-9 * 0.5**2))
    y[...] = 7.0
    with pytest.raises(KeyError, match='nope'):
        h.conv2d_forward_batch(x, w, b, y, 0, (1, 1), activation='nope')
    np.testing.assert_array_equal(y, 7.0)


class _KeywordsHandler(NumpyHandler):
    """A convolution taking its options as ``**kwargs`` (recording them)."""

    def conv2d_forward_batch(
        self, inputs, weights, bias, outputs, padding, stride, **hints
    ):
        self.seen.append(hints)
        NumpyHandler.conv2d_forward_batch(
            self, inputs, weights, bias, outputs, padding, stride
        )


def _my_conv(self, inputs, weights, bias, outputs, padding, stride, *, activation):
    """Names ``activation`` but lacks ``columns``; applies the activation."""
    self.seen.append(activation)
    NumpyHandler.conv2d_forward_batch(
        self, inputs, weights, bias, outputs, padding, stride, activation=activation
    )


class _NamedActivationHandler(NumpyHandler):
    seen: list

    conv2d_forward_batch = _my_conv  # assigned under another name


@pytest.mark.parametrize('kind', ['kwargs', 'named'])
def test_the_activation_is_applied_once_whatever_the_op_signature(kind):
    """An op taking ``**kwargs`` gets the activation applied after it (it is
    no hint to drop); one naming it applies it itself, and still gets the
    hints it lacks dropped."""
    h = _KeywordsHandler(np.float64) if kind == 'kwargs' else _NamedActivationHandler()
    h.seen = []
    x = h.create_from_numpy(np.full((1, 4, 4, 1), 0.5))
    w = h.create_from_numpy(np.full((2, 3, 3, 1), 0.5) * [[[[1.0]]], [[[-1.0]]]])
    b, y = h.zeros((2,)), h.zeros((1, 2, 2, 2))
    h.conv2d_forward_batch(x, w, b, y, 0, (1, 1), columns=None, activation='tanh')
    np.testing.assert_allclose(y[..., 1], np.tanh(-9 * 0.5**2))
    # the hints reach **kwargs; the activation does not (applied after)
    assert h.seen == ([{'columns': None}] if kind == 'kwargs' else ['tanh'])


def test_debug_handler_delegates_dtype_and_rnd():
    inner = NumpyHandler(np.float32, seed=3)
    h = DebugHandler(inner)
    assert h.dtype is np.float32
    assert h.rnd is inner.rnd
    assert h.context == inner.context
    assert isinstance(h.EMPTY, DebugArray) and h.EMPTY.size == 0


FORBIDDEN = {
    'add': lambda a: a + a,
    'radd': lambda a: 1 + a,
    'mul': lambda a: a * 2,
    'iadd': lambda a: a.__iadd__(1),
    'neg': lambda a: -a,
    'matmul': lambda a: a @ a,
    'compare': lambda a: a < 1,
    'asarray': np.asarray,
    'ufunc': lambda a: np.add(a, a),
    'numpy-function': np.sum,
    'float': float,
}


@pytest.mark.parametrize('name', sorted(FORBIDDEN))
def test_debug_array_forbids_direct_computation(name):
    a = _debug().create_from_numpy(np.ones((2, 3)))
    with pytest.raises(TypeError, match='use the handler ops'):
        FORBIDDEN[name](a)


def test_debug_array_indexing_and_reshape():
    h = _debug()
    a = h.create_from_numpy(np.arange(24.0).reshape(2, 3, 4))
    assert isinstance(a[1], DebugArray) and a[1].shape == (3, 4)
    assert a[:, 1:3].shape == (2, 2, 4)
    assert a[1, 2, 3].shape == () and a[0, :, 1:2].shape == (3, 1)
    assert a.reshape(6, 4).shape == (6, 4) == a.reshape((6, 4)).shape
    assert a.size == 24 and a.ndim == 3
    view = a[:, :, 1:3].reshape(6, 2)  # merges T and B: still a view
    h.fill(view, 0.0)
    assert np.all(h.get_numpy_copy(a)[:, :, 1:3] == 0)
    for bad in [
        lambda: a[::2],
        lambda: a[[0, 1]],
        lambda: a[0.5],
        lambda: a[0, 0, 0, 0],
        lambda: a.reshape(-1, 4),
        lambda: a.reshape(5, 5),
        lambda: a[:, :, 1:3].reshape(2, 6),
    ]:
        with pytest.raises(DebugHandlerError):
            bad()


def test_numpy_scratch_memory_is_bounded_by_the_largest_call():
    h = NumpyHandler(np.float64)
    for rows in [10, 30, 20, 5, 30, 7]:  # e.g. changing sequence lengths
        a = h.ones((rows, 6))
        h.mult_add_tt(a, a, h.zeros((rows, 6)))
        h.conv2d_forward_batch(
            h.ones((rows, 5, 5, 2)),
            h.ones((3, 3, 3, 2)),
            h.zeros((3,)),
            h.zeros((rows, 5, 5, 3)),
            1,
            (1, 1),
        )
    sizes = {name: buf.size for (name, _), buf in h._scratch.items()}
    assert sizes == {
        'tmp': 30 * 6,
        'pad': 30 * 7 * 7 * 2,
        'col': 30 * 25 * 18,
        'conv_out': 30 * 25 * 3,
    }, sizes


@pytest.mark.parametrize('channels', [2, 9])  # both input-delta code paths
def test_conv2d_backward_can_skip_the_input_deltas(handler, channels):
    rng = np.random.RandomState(4)
    x, w = rng.randn(2, 5, 6, channels), rng.randn(3, 3, 3, channels)
    dy = rng.randn(2, 3, 3, 3)
    geometry = (1, (2, 2))  # padding, stride: output 3x3
    full = {
        name: handler.create_from_numpy(a)
        for name, a in (
            ('dx', rng.randn(*x.shape)),
            ('dw', w * 0),
            ('db', w[:, 0, 0, 0]),
        )
    }
    skipped = {
        name: handler.create_from_numpy(handler.get_numpy_copy(a))
        for name, a in full.items()
    }
    before = handler.get_numpy_copy(skipped['dx'])
    args = [handler.create_from_numpy(a) for a in (x, w)]
    handler.conv2d_backward_batch(
        *args,
        *geometry,
        full['dx'],
        handler.create_from_numpy(dy),
        full['dw'],
        full['db'],
    )
    handler.conv2d_backward_batch(
        *args,
        *geometry,
        skipped['dx'],
        handler.create_from_numpy(dy),
        skipped['dw'],
        skipped['db'],
        skip_in_deltas=True,
    )
    np.testing.assert_array_equal(handler.get_numpy_copy(skipped['dx']), before)
    assert np.abs(handler.get_numpy_copy(full['dx']) - before).max() > 1e-3
    for name in ('dw', 'db'):
        np.testing.assert_array_equal(
            handler.get_numpy_copy(skipped[name]), handler.get_numpy_copy(full[name])
        )


@pytest.mark.parametrize('layout', ['images', 'strided'])
@pytest.mark.parametrize(
    'geometry', [(2, 5, 6, 2, 3, (3, 3), 1, (2, 1)), (3, 4, 4, 9, 2, (2, 2), 0, (1, 1))]
)
def test_conv2d_columns_workspace(handler, layout, geometry):
    """A forward pass given ``columns`` and the backward pass given the same
    array match the references; the workspace may be a layer internal
    (contiguous per image, 'images') or any other view ('strided')."""
    n, h, w, c, f, k, p, s = geometry
    oh, ow = _out_size(h, k[0], p, s[0]), _out_size(w, k[1], p, s[1], 1)
    rng = np.random.RandomState(5)
    x, weights, bias = rng.randn(n, h, w, c), rng.randn(f, *k, c), rng.randn(f)
    dy, dx = rng.randn(n, oh, ow, f), rng.randn(n, h, w, c)
    size = k[0] * k[1] * c
    if layout == 'images':  # a feature slice of a wider buffer
        wide = handler.zeros((n, oh * ow * size + 7))
        columns = wide[:, 3 : 3 + oh * ow * size].reshape(n, oh, ow, size)
    else:
        columns = handler.zeros((n, oh, ow, 2 * size))[:, :, :, :size]
    on = handler.create_from_numpy
    outputs = handler.zeros((n, oh, ow, f))
    handler.conv2d_forward_batch(
        on(x), on(weights), on(bias), outputs, p, s, columns=columns
    )
    tol = TOLERANCES[np.dtype(handler.dtype).type]
    np.testing.assert_allclose(
        handler.get_numpy_copy(outputs), conv_forward_ref(x, weights, bias, p, s), **tol
    )
    # NumpyHandler keeps the receptive fields (OneDnnHandler's float32
    # convolution needs none: it keeps no columns for any image size)
    if isinstance(handler, NumpyHandler) and handler.keeps_conv_columns(10**9):
        kept = np.abs(handler.get_numpy_copy(columns)).max() > 0
        assert kept == (layout == 'images')
    grads = [on(dx), handler.zeros(weights.shape), handler.zeros((f,))]
    handler.conv2d_backward_batch(
        on(x), on(weights), p, s, grads[0], on(dy), grads[1], grads[2], columns=columns
    )
    expected = conv_backward_ref(x, weights, p, s, dx, dy, None, None)
    for name, got in zip(('in_deltas', 'weight_deltas', 'bias_deltas'), grads):
        np.testing.assert_allclose(
            handler.get_numpy_copy(got), expected[name], **tol, err_msg=name
        )


def test_conv2d_in_chunks_of_one_image(monkeypatch):
    """NumpyHandler gathers receptive fields (of the inputs, and of the
    output deltas for the input deltas) in chunks of images; chunks of a
    single image give the same results."""
    from brainstorm.handlers import _numpy_conv

    monkeypatch.setattr(_numpy_conv, '_FIELD_CHUNK_BYTES', 1)
    rows = conv_rows()
    assert len(rows) == 2 * len(CONV_GEOMETRIES)
    for handler in (NumpyHandler(np.float64), NumpyHandler(np.float32)):
        for row in rows:
            run_case(handler, *row.values)
        for layout in ('images', 'strided'):
            test_conv2d_columns_workspace(
                handler, layout, (3, 4, 4, 9, 2, (2, 2), 0, (1, 1))
            )


def test_maxpool2d_forward_in_chunks_of_one_image(monkeypatch):
    """NumpyHandler's max pooling works through chunks of images; chunks
    of a single image give the same outputs and argmax."""
    from brainstorm.handlers import _numpy_maxpool

    monkeypatch.setattr(_numpy_maxpool, '_POOL_CHUNK_BYTES', 1)
    rows = [row for row in pool_rows() if row.values[0] == 'maxpool2d_forward_batch']
    assert len(rows) == len(POOL_GEOMETRIES) + 2
    for handler in (NumpyHandler(np.float64), NumpyHandler(np.float32)):
        for row in rows:
            run_case(handler, *row.values)


# ------------------------------------------------------ chunked paths ------


def _record_chunk_sizes(monkeypatch):
    """Make NumpyHandler's chunks one image each; return the sizes used."""
    from brainstorm.handlers import _numpy_conv as numpy_handler
    from brainstorm.handlers import _numpy_maxpool

    sizes = []
    original = numpy_handler._chunk_size

    def spy(n, image_bytes, budget):
        sizes.append((n, original(n, image_bytes, budget)))
        return sizes[-1][1]

    monkeypatch.setattr(numpy_handler, '_FIELD_CHUNK_BYTES', 1)
    monkeypatch.setattr(_numpy_maxpool, '_POOL_CHUNK_BYTES', 1)
    monkeypatch.setattr(numpy_handler, '_chunk_size', spy)
    return sizes


@pytest.mark.parametrize('op, args, ref, check', conv_rows() + pool_rows())
def test_numpy_chunked_paths_match_float64_reference(monkeypatch, op, args, ref, check):
    """With a chunk of one image, convolution and pooling (forward and
    backward) still equal the float64 reference. (Guards against: a chunk
    overwriting instead of adding to the weight gradient of the chunks
    before it; ordinary CNN batches take the chunked path, no test shape
    did.)"""
    sizes = _record_chunk_sizes(monkeypatch)
    handler = NumpyHandler(np.float64)
    run_case(handler, op, args, ref, check)
    if op.startswith('conv2d_backward'):
        assert sizes, 'the chunked path was not taken'
    assert all(chunk == 1 for _, chunk in sizes)
