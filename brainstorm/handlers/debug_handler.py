"""A handler that checks every op call before passing it on to another one.

Use ``DebugHandler(NumpyHandler(np.float64))`` to test layers: it catches
wrong shapes, wrong argument kinds, non-finite results, and any code that
touches memory without going through handler ops.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from brainstorm.arguments import Arg, Instance
from brainstorm.describable import get_description
from brainstorm.handlers.base_handler import Handler
from brainstorm.handlers.numpy_handler import NumpyHandler

__all__ = [
    'DebugHandler',
    'DebugArray',
    'DebugHandlerError',
    'check_for_inf_or_nan',
    'assert_is_shape',
    'assert_debug_arrays',
    'assert_shapes_equal',
    'assert_is_scalar',
]

_NO_ARITHMETIC = (
    'DebugArray supports no arithmetic or NumPy functions: use '
    'the handler ops (e.g. handler.add_tt, handler.mult_st) so '
    'the code runs on every handler.'
)


class DebugHandlerError(AssertionError):
    """A handler op was called with arguments that break its contract."""


class DebugArray:
    """Wraps a handler array; allows only shape queries, indexing and reshape.

    It deliberately has no arithmetic operators and cannot be turned into a
    NumPy array, so code that bypasses the handler fails loudly with a
    TypeError.

    Args:
        arr: the wrapped array of the inner handler.

    Attributes:
        array: the wrapped array.
        shape: its shape.
        size: its number of elements.
    """

    def __init__(self, arr):
        self.array = arr
        self.shape = tuple(arr.shape)
        self.size = int(arr.size)

    @property
    def ndim(self) -> int:
        """Number of dimensions."""
        return len(self.shape)

    def __getitem__(self, item) -> DebugArray:
        """Index by ints and step-less slices (or a tuple of them)."""
        parts = item if isinstance(item, tuple) else (item,)
        for part in parts:
            if isinstance(part, slice):
                if part.step not in (None, 1):
                    raise DebugHandlerError(
                        f'DebugArray: slices must not have a step. Received: {item!r}'
                    )
            elif not isinstance(part, (int, np.integer)) or isinstance(part, bool):
                raise DebugHandlerError(
                    f'DebugArray: index with ints and slices only. Received: {item!r}'
                )
        if len(parts) > len(self.shape):
            raise DebugHandlerError(
                f'DebugArray: {len(parts)} indices for an array of shape {self.shape}.'
            )
        result = self.array[parts]
        if isinstance(result, np.generic):  # keep a 0-d view, not a copy
            result = self.array[parts + (Ellipsis,)]
        return DebugArray(result)

    def reshape(self, *shape) -> DebugArray:
        """Reshape to non-negative ints, given as arguments or as one tuple.

        Raises:
            DebugHandlerError: for other sizes, or if the result would be a
                copy (writes into it would be lost).
        """
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        if not all(
            isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0
            for s in shape
        ):
            raise DebugHandlerError(
                f'DebugArray.reshape: the shape must consist of non-negative '
                f'ints. Received: {shape!r}'
            )
        if math.prod(shape) != self.size:
            raise DebugHandlerError(
                f'DebugArray.reshape: cannot reshape {self.shape} (size '
                f'{self.size}) into {shape}.'
            )
        result = self.array.reshape(shape)
        if (
            isinstance(result, np.ndarray)
            and self.size > 0
            and not np.may_share_memory(result, self.array)
        ):
            raise DebugHandlerError(
                f'DebugArray.reshape: reshaping this non-contiguous view of '
                f'shape {self.shape} (strides {self.array.strides}) to '
                f'{shape} would copy it, so writes would be lost.'
            )
        return DebugArray(result)

    def __repr__(self) -> str:
        return f'DebugArray(shape={self.shape})'

    def _forbidden(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    def __array__(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    def __array_ufunc__(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    def __array_function__(self, *args, **kwargs):
        raise TypeError(_NO_ARITHMETIC)

    __add__ = __radd__ = __iadd__ = _forbidden
    __sub__ = __rsub__ = __isub__ = _forbidden
    __mul__ = __rmul__ = __imul__ = _forbidden
    __truediv__ = __rtruediv__ = __itruediv__ = _forbidden
    __floordiv__ = __rfloordiv__ = __ifloordiv__ = _forbidden
    __mod__ = __rmod__ = __imod__ = _forbidden
    __pow__ = __rpow__ = __ipow__ = _forbidden
    __matmul__ = __rmatmul__ = __imatmul__ = _forbidden
    __neg__ = __pos__ = __abs__ = _forbidden
    __lt__ = __le__ = __gt__ = __ge__ = _forbidden
    __float__ = __int__ = _forbidden


def _is_scalar(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _is_int(x) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, bool)


class DebugHandler(Handler):
    """Checks the arguments of every op, then runs it on a wrapped handler.

    Arrays are :class:`DebugArray` objects around the wrapped handler's
    arrays. Before each op it checks the contract of the :class:`Handler`
    docstrings (argument kinds, shapes, scalar types, flags, axes, window
    and stride tuples, padding, value ranges) and raises
    :class:`DebugHandlerError` naming the op, the argument, what was
    expected and what was received. After each op it raises ``ValueError``
    if any array or scalar argument holds NaN or Inf. The allocation and
    conversion ops and ``is_fully_finite`` skip the finiteness check.

    Args:
        handler: the handler that does the work.
    """

    __arguments__ = {
        'handler': Arg(Instance(Handler, example=lambda: NumpyHandler(np.float64))),
    }

    array_type = DebugArray

    def __init__(self, handler: Handler):
        self.handler = handler
        self.context = handler.context
        self.EMPTY = DebugArray(handler.EMPTY)

    @property
    def dtype(self):
        """The wrapped handler's dtype."""
        return self.handler.dtype

    @property
    def rnd(self):
        """The wrapped handler's random state."""
        return self.handler.rnd

    @rnd.setter
    def rnd(self, value):
        self.handler.rnd = value

    def __describe__(self) -> dict:
        """``{'@type': 'DebugHandler', 'handler': <inner description>}``."""
        return {'@type': 'DebugHandler', 'handler': get_description(self.handler)}

    def __init_from_description__(self, description: dict) -> None:
        """Finish recreating: ``self.handler`` is already rebuilt."""
        type(self).__init__(self, self.handler)

    # ------------------------------------------------------- check helpers

    @staticmethod
    def _fail(op: str, message: str):
        raise DebugHandlerError(f'DebugHandler.{op}: {message}')

    def _expect_arrays(self, op: str, **arrays) -> None:
        for name, value in arrays.items():
            if not isinstance(value, DebugArray):
                self._fail(
                    op,
                    f"argument '{name}' must be a DebugArray "
                    f'(created by this handler). Received: '
                    f'{type(value).__name__}',
                )

    def _expect_same_shape(self, op: str, **arrays) -> None:
        (first, ref), *others = arrays.items()
        for name, value in others:
            if value.shape != ref.shape:
                self._fail(
                    op,
                    f"argument '{name}' must have the shape "
                    f"{ref.shape} of '{first}'. Received: shape "
                    f'{value.shape}',
                )

    def _expect_shape(self, op: str, name: str, value, shapes) -> None:
        shapes = [tuple(s) for s in shapes]
        if value.shape not in shapes:
            expected = ' or '.join(str(s) for s in dict.fromkeys(shapes))
            self._fail(
                op,
                f"argument '{name}' must have shape {expected}. "
                f'Received: shape {value.shape}',
            )

    def _expect_ndim(self, op: str, name: str, value, ndim: int) -> None:
        if len(value.shape) != ndim:
            self._fail(
                op, f"argument '{name}' must be {ndim}-D. Received: shape {value.shape}"
            )

    def _expect_scalars(self, op: str, **scalars) -> None:
        for name, value in scalars.items():
            if not _is_scalar(value):
                self._fail(
                    op,
                    f"argument '{name}' must be a Python int or "
                    f'float. Received: {type(value).__name__} '
                    f'{value!r}',
                )

    def _expect_flags(self, op: str, **flags) -> None:
        for name, value in flags.items():
            if not isinstance(value, bool):
                self._fail(
                    op,
                    f"argument '{name}' must be a bool. Received: "
                    f'{type(value).__name__} {value!r}',
                )

    def _expect_pairs(self, op: str, **pairs) -> None:
        for name, value in pairs.items():
            if not (
                isinstance(value, tuple)
                and len(value) == 2
                and all(_is_int(x) and x > 0 for x in value)
            ):
                self._fail(
                    op,
                    f"argument '{name}' must be a tuple of two "
                    f'positive ints. Received: {value!r}',
                )

    def _expect_padding(self, op: str, padding) -> None:
        if not (_is_int(padding) and padding >= 0):
            self._fail(
                op, f"argument 'padding' must be an int >= 0. Received: {padding!r}"
            )

    def _expect_ids(self, op: str, name: str, v, limit: int) -> None:
        ids = self.handler.get_numpy_copy(v.array)
        bad = (ids != np.round(ids)) | (ids < 0) | (ids >= limit)
        if np.any(bad):
            self._fail(
                op,
                f"argument '{name}' must hold integral ids in "
                f'[0, {limit}). Received: '
                f'{ids[bad].ravel()[:5].tolist()} among others',
            )

    def _expect_finite(self, op: str, **values) -> None:
        for name, value in values.items():
            if isinstance(value, DebugArray):
                finite = self.handler.is_fully_finite(value.array)
            elif _is_scalar(value):
                finite = math.isfinite(value)
            else:
                continue
            if not finite:
                raise ValueError(
                    f"DebugHandler.{op}: argument '{name}' holds "
                    f'NaN or Inf after the op.'
                )

    def _run(self, op: str, keywords: dict | None = None, **args) -> None:
        """Call ``op`` of the wrapped handler, then check finiteness.

        ``args`` are passed by position and checked for finiteness after
        the op. ``keywords`` are keyword-only options, given only when not
        at their defaults (so that older wrapped handlers still work) and
        not checked: a workspace may hold anything.
        """

        def unwrap(a):
            return a.array if isinstance(a, DebugArray) else a

        getattr(self.handler, op)(
            *[unwrap(a) for a in args.values()],
            **{k: unwrap(a) for k, a in (keywords or {}).items()},
        )
        self._expect_finite(op, **args)

    def _elementwise(self, op: str, **arrays) -> None:
        self._expect_arrays(op, **arrays)
        self._expect_same_shape(op, **arrays)
        self._run(op, **arrays)

    def _matrix_vector(self, op: str, m, v, out, allow_full=False) -> None:
        self._expect_arrays(op, m=m, v=v, out=out)
        self._expect_ndim(op, 'm', m, 2)
        self._expect_same_shape(op, m=m, out=out)
        rows, cols = m.shape
        shapes = [(1, cols), (rows, 1)] + ([m.shape] if allow_full else [])
        self._expect_shape(op, 'v', v, shapes)
        self._run(op, m=m, v=v, out=out)

    def _scalar_tensor(self, op: str, s, t, out) -> None:
        self._expect_scalars(op, s=s)
        self._expect_arrays(op, t=t, out=out)
        self._expect_same_shape(op, t=t, out=out)
        self._run(op, s=s, t=t, out=out)

    def _dot(self, op, a, b, out, transa, transb) -> None:
        self._expect_arrays(op, a=a, b=b, out=out)
        self._expect_flags(op, transa=transa, transb=transb)
        for name, value in (('a', a), ('b', b), ('out', out)):
            self._expect_ndim(op, name, value, 2)
        a_shape = a.shape[::-1] if transa else a.shape
        b_shape = b.shape[::-1] if transb else b.shape
        if a_shape[1] != b_shape[0]:
            self._fail(
                op,
                f'op(a) has shape {a_shape} and op(b) {b_shape}; '
                f'their inner dimensions must match.',
            )
        self._expect_shape(op, 'out', out, [(a_shape[0], b_shape[1])])
        self._run(op, a=a, b=b, out=out, transa=transa, transb=transb)

    def _activation(self, op: str, x, y) -> None:
        self._elementwise(op, x=x, y=y)

    def _activation_deriv(self, op: str, x, y, dy, dx) -> None:
        self._expect_arrays(op, y=y, dy=dy, dx=dx)
        self._expect_same_shape(op, y=y, dy=dy, dx=dx)
        if x is not None:
            self._expect_arrays(op, x=x)
            self._expect_same_shape(op, y=y, x=x)
        self._run(op, x=x, y=y, dy=dy, dx=dx)

    def _image_geometry(self, op, inputs, kernel, padding, stride):
        """Check the image arguments; return the expected ``(OH, OW)``."""
        self._expect_ndim(op, 'inputs', inputs, 4)
        self._expect_padding(op, padding)
        self._expect_pairs(op, stride=stride)
        h, w = inputs.shape[1:3]
        oh = (h + 2 * padding - kernel[0]) // stride[0] + 1
        ow = (w + 2 * padding - kernel[1]) // stride[1] + 1
        if oh < 1 or ow < 1:
            self._fail(
                op,
                f'the window {kernel} does not fit into the '
                f'padded input {(h + 2 * padding, w + 2 * padding)}',
            )
        return oh, ow

    def _pool_check(self, op, inputs, window, outputs, padding, stride):
        self._expect_pairs(op, window=window)
        oh, ow = self._image_geometry(op, inputs, window, padding, stride)
        n, _, _, c = inputs.shape
        self._expect_shape(op, 'outputs', outputs, [(n, oh, ow, c)])

    # ------------------------------------------------------------ allocation

    def _expect_shape_arg(self, op: str, shape) -> None:
        dims = shape if isinstance(shape, (tuple, list)) else (shape,)
        if not all(_is_int(d) and d >= 0 for d in dims):
            self._fail(
                op,
                f"argument 'shape' must be a tuple of ints >= 0. Received: {shape!r}",
            )

    def allocate(self, shape: tuple[int, ...]):
        self._expect_shape_arg('allocate', shape)
        return DebugArray(self.handler.allocate(shape))

    def zeros(self, shape: tuple[int, ...]):
        self._expect_shape_arg('zeros', shape)
        return DebugArray(self.handler.zeros(shape))

    def ones(self, shape: tuple[int, ...]):
        self._expect_shape_arg('ones', shape)
        return DebugArray(self.handler.ones(shape))

    def create_from_numpy(self, arr):
        if not isinstance(arr, np.ndarray):
            self._fail(
                'create_from_numpy',
                f"argument 'arr' must be a numpy array. Received: {type(arr).__name__}",
            )
        return DebugArray(self.handler.create_from_numpy(arr))

    def get_numpy_copy(self, mem):
        self._expect_arrays('get_numpy_copy', mem=mem)
        return self.handler.get_numpy_copy(mem.array)

    def set_from_numpy(self, mem, arr) -> None:
        self._expect_arrays('set_from_numpy', mem=mem)
        if not isinstance(arr, np.ndarray):
            self._fail(
                'set_from_numpy',
                f"argument 'arr' must be a numpy array. Received: {type(arr).__name__}",
            )
        if arr.shape != mem.shape:
            self._fail(
                'set_from_numpy',
                f"argument 'arr' must have the "
                f"shape {mem.shape} of 'mem'. "
                f'Received: shape {arr.shape}',
            )
        self.handler.set_from_numpy(mem.array, arr)

    # ------------------------------------------------------------- copy/fill

    def copy_to(self, src, dest) -> None:
        self._elementwise('copy_to', src=src, dest=dest)

    def copy_to_if(self, src, dest, cond) -> None:
        self._elementwise('copy_to_if', src=src, dest=dest, cond=cond)

    def fill(self, mem, val: float) -> None:
        self._expect_arrays('fill', mem=mem)
        self._expect_scalars('fill', val=val)
        self._run('fill', mem=mem, val=val)

    def fill_if(self, mem, val: float, cond) -> None:
        self._expect_arrays('fill_if', mem=mem, cond=cond)
        self._expect_scalars('fill_if', val=val)
        self._expect_same_shape('fill_if', mem=mem, cond=cond)
        self._run('fill_if', mem=mem, val=val, cond=cond)

    def fill_gaussian(self, mean: float, std: float, out) -> None:
        self._expect_scalars('fill_gaussian', mean=mean, std=std)
        self._expect_arrays('fill_gaussian', out=out)
        if std < 0:
            self._fail('fill_gaussian', f"argument 'std' must be >= 0. Received: {std}")
        self._run('fill_gaussian', mean=mean, std=std, out=out)

    def generate_probability_mask(self, mask, probability: float) -> None:
        op = 'generate_probability_mask'
        self._expect_arrays(op, mask=mask)
        self._expect_scalars(op, probability=probability)
        if not 0 <= probability <= 1:
            self._fail(
                op, f"argument 'probability' must be in [0, 1]. Received: {probability}"
            )
        self._run(op, mask=mask, probability=probability)

    # ---------------------------------------------------------------- checks

    def is_fully_finite(self, a) -> bool:
        self._expect_arrays('is_fully_finite', a=a)
        return self.handler.is_fully_finite(a.array)

    # ----------------------------------------------------------- math A to Z

    def abs_t(self, a, out) -> None:
        self._elementwise('abs_t', a=a, out=out)

    def add_into_if(self, a, out, cond) -> None:
        self._elementwise('add_into_if', a=a, out=out, cond=cond)

    def add_mv(self, m, v, out) -> None:
        self._matrix_vector('add_mv', m, v, out)

    def add_st(self, s: float, t, out) -> None:
        self._scalar_tensor('add_st', s, t, out)

    def add_tt(self, a, b, out) -> None:
        self._elementwise('add_tt', a=a, b=b, out=out)

    def binarize_v(self, v, out) -> None:
        self._expect_arrays('binarize_v', v=v, out=out)
        self._expect_ndim('binarize_v', 'out', out, 2)
        self._expect_shape('binarize_v', 'v', v, [(out.shape[0], 1)])
        self._expect_ids('binarize_v', 'v', v, out.shape[1])
        self._run('binarize_v', v=v, out=out)

    def broadcast_t(self, a, axis: int, out) -> None:
        self._expect_arrays('broadcast_t', a=a, out=out)
        if not (_is_int(axis) and 0 <= axis < len(out.shape)):
            self._fail(
                'broadcast_t',
                f"argument 'axis' must be an int in "
                f'[0, {len(out.shape)}). Received: '
                f'{axis!r}',
            )
        expected = out.shape[:axis] + (1,) + out.shape[axis + 1 :]
        self._expect_shape('broadcast_t', 'a', a, [expected])
        self._run('broadcast_t', a=a, axis=axis, out=out)

    def clip_t(self, a, a_min: float, a_max: float, out) -> None:
        self._expect_arrays('clip_t', a=a, out=out)
        self._expect_scalars('clip_t', a_min=a_min, a_max=a_max)
        self._expect_same_shape('clip_t', a=a, out=out)
        if a_min > a_max:
            self._fail(
                'clip_t',
                f'a_min must be <= a_max. Received: a_min={a_min}, a_max={a_max}',
            )
        self._run('clip_t', a=a, a_min=a_min, a_max=a_max, out=out)

    def divide_mv(self, m, v, out) -> None:
        self._matrix_vector('divide_mv', m, v, out)

    def divide_tt(self, a, b, out) -> None:
        self._elementwise('divide_tt', a=a, b=b, out=out)

    def dot_add_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        self._dot('dot_add_mm', a, b, out, transa, transb)

    def dot_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        self._dot('dot_mm', a, b, out, transa, transb)

    def index_m_by_v(self, m, v, out) -> None:
        self._expect_arrays('index_m_by_v', m=m, v=v, out=out)
        self._expect_ndim('index_m_by_v', 'm', m, 2)
        self._expect_shape('index_m_by_v', 'v', v, [(m.shape[0], 1)])
        self._expect_shape('index_m_by_v', 'out', out, [(m.shape[0], 1)])
        self._expect_ids('index_m_by_v', 'v', v, m.shape[1])
        self._run('index_m_by_v', m=m, v=v, out=out)

    def log_t(self, a, out) -> None:
        self._elementwise('log_t', a=a, out=out)

    def merge_tt(self, a, b, out) -> None:
        self._expect_arrays('merge_tt', a=a, b=b, out=out)
        self._expect_ndim('merge_tt', 'b', b, len(a.shape))
        self._expect_shape('merge_tt', 'b', b, [a.shape[:-1] + b.shape[-1:]])
        self._expect_shape(
            'merge_tt', 'out', out, [a.shape[:-1] + (a.shape[-1] + b.shape[-1],)]
        )
        self._run('merge_tt', a=a, b=b, out=out)

    def modulo_tt(self, a, b, out) -> None:
        self._elementwise('modulo_tt', a=a, b=b, out=out)

    def mult_add_mv(self, m, v, out) -> None:
        self._matrix_vector('mult_add_mv', m, v, out, allow_full=True)

    def mult_add_st(self, s: float, t, out) -> None:
        self._scalar_tensor('mult_add_st', s, t, out)

    def mult_add_tt(self, a, b, out) -> None:
        self._elementwise('mult_add_tt', a=a, b=b, out=out)

    def mult_mv(self, m, v, out) -> None:
        self._matrix_vector('mult_mv', m, v, out, allow_full=True)

    def mult_st(self, s: float, t, out) -> None:
        self._scalar_tensor('mult_st', s, t, out)

    def mult_tt(self, a, b, out) -> None:
        self._elementwise('mult_tt', a=a, b=b, out=out)

    def sign_t(self, a, out) -> None:
        self._elementwise('sign_t', a=a, out=out)

    def softmax_m(self, m, out) -> None:
        self._expect_arrays('softmax_m', m=m, out=out)
        self._expect_ndim('softmax_m', 'm', m, 2)
        self._elementwise('softmax_m', m=m, out=out)

    def split_add_tt(self, x, out_a, out_b) -> None:
        self._expect_arrays('split_add_tt', x=x, out_a=out_a, out_b=out_b)
        self._expect_ndim('split_add_tt', 'out_a', out_a, len(x.shape))
        self._expect_shape(
            'split_add_tt', 'out_a', out_a, [x.shape[:-1] + out_a.shape[-1:]]
        )
        self._expect_shape(
            'split_add_tt',
            'out_b',
            out_b,
            [x.shape[:-1] + (x.shape[-1] - out_a.shape[-1],)],
        )
        self._run('split_add_tt', x=x, out_a=out_a, out_b=out_b)

    def sqrt_t(self, a, out) -> None:
        self._elementwise('sqrt_t', a=a, out=out)

    def subtract_mv(self, m, v, out) -> None:
        self._matrix_vector('subtract_mv', m, v, out)

    def subtract_tt(self, a, b, out) -> None:
        self._elementwise('subtract_tt', a=a, b=b, out=out)

    def sum_t(self, a, axis: int | None, out) -> None:
        self._expect_arrays('sum_t', a=a, out=out)
        if axis is None:
            if out.size != 1:
                self._fail(
                    'sum_t',
                    f"argument 'out' must have exactly one "
                    f'element for axis=None. Received: shape '
                    f'{out.shape}',
                )
        else:
            if not (
                _is_int(axis) and len(a.shape) in (1, 2) and 0 <= axis < len(a.shape)
            ):
                self._fail(
                    'sum_t',
                    f"argument 'axis' must be None or an "
                    f"axis of the 1-D/2-D 'a'. Received: "
                    f'axis={axis!r} for shape {a.shape}',
                )
            kept = a.shape[:axis] + (1,) + a.shape[axis + 1 :]
            dropped = a.shape[:axis] + a.shape[axis + 1 :]
            self._expect_shape('sum_t', 'out', out, [dropped, kept])
        self._run('sum_t', a=a, axis=axis, out=out)

    # ----------------------------------------------------------- activations

    def el(self, x, y) -> None:
        self._activation('el', x, y)

    def el_deriv(self, x, y, dy, dx) -> None:
        self._activation_deriv('el_deriv', x, y, dy, dx)

    def linear(self, x, y) -> None:
        self._activation('linear', x, y)

    def linear_deriv(self, x, y, dy, dx) -> None:
        self._activation_deriv('linear_deriv', x, y, dy, dx)

    def rel(self, x, y) -> None:
        self._activation('rel', x, y)

    def rel_deriv(self, x, y, dy, dx) -> None:
        self._activation_deriv('rel_deriv', x, y, dy, dx)

    def sigmoid(self, x, y) -> None:
        self._activation('sigmoid', x, y)

    def sigmoid_deriv(self, x, y, dy, dx) -> None:
        self._activation_deriv('sigmoid_deriv', x, y, dy, dx)

    def tanh(self, x, y) -> None:
        self._activation('tanh', x, y)

    def tanh_deriv(self, x, y, dy, dx) -> None:
        self._activation_deriv('tanh_deriv', x, y, dy, dx)

    # -------------------------------------------------------------- conv/pool

    def _conv_check(self, op, inputs, weights, padding, stride, outputs):
        self._expect_ndim(op, 'weights', weights, 4)
        oh, ow = self._image_geometry(op, inputs, weights.shape[1:3], padding, stride)
        n, _, _, c = inputs.shape
        if weights.shape[3] != c:
            self._fail(
                op,
                f"argument 'weights' must have {c} input "
                f'channels (last axis) like inputs. Received: '
                f'shape {weights.shape}',
            )
        self._expect_shape(op, outputs[0], outputs[1], [(n, oh, ow, weights.shape[0])])

    def keeps_conv_columns(self, out_cells: int) -> bool:
        # the wrapped handler decides (one written for 0.5 has no say)
        keeps = getattr(self.handler, 'keeps_conv_columns', None)
        return bool(keeps(out_cells)) if keeps is not None else False

    def _conv_columns(self, op, columns, weights, outputs) -> dict:
        """Check the optional ``columns`` workspace; the keywords to pass."""
        if columns is None:
            return {}
        self._expect_arrays(op, columns=columns)
        self._expect_shape(
            op,
            'columns',
            columns,
            [outputs.shape[:3] + (math.prod(weights.shape[1:]),)],
        )
        return {'columns': columns}

    def conv2d_forward_batch(
        self,
        inputs,
        weights,
        bias,
        outputs,
        padding: int,
        stride: tuple[int, int],
        *,
        columns=None,
    ) -> None:
        op = 'conv2d_forward_batch'
        self._expect_arrays(
            op, inputs=inputs, weights=weights, bias=bias, outputs=outputs
        )
        self._conv_check(op, inputs, weights, padding, stride, ('outputs', outputs))
        self._expect_shape(op, 'bias', bias, [(weights.shape[0],)])
        keywords = self._conv_columns(op, columns, weights, outputs)
        self._run(
            op,
            keywords,
            inputs=inputs,
            weights=weights,
            bias=bias,
            outputs=outputs,
            padding=padding,
            stride=stride,
        )

    def conv2d_backward_batch(
        self,
        inputs,
        weights,
        padding: int,
        stride: tuple[int, int],
        in_deltas,
        out_deltas,
        weight_deltas,
        bias_deltas,
        *,
        columns=None,
        skip_in_deltas: bool = False,
    ) -> None:
        op = 'conv2d_backward_batch'
        self._expect_flags(op, skip_in_deltas=skip_in_deltas)
        self._expect_arrays(
            op,
            inputs=inputs,
            weights=weights,
            in_deltas=in_deltas,
            out_deltas=out_deltas,
            weight_deltas=weight_deltas,
            bias_deltas=bias_deltas,
        )
        self._conv_check(
            op, inputs, weights, padding, stride, ('out_deltas', out_deltas)
        )
        self._expect_same_shape(op, inputs=inputs, in_deltas=in_deltas)
        self._expect_same_shape(op, weights=weights, weight_deltas=weight_deltas)
        self._expect_shape(op, 'bias_deltas', bias_deltas, [(weights.shape[0],)])
        keywords = self._conv_columns(op, columns, weights, out_deltas)
        if skip_in_deltas:
            keywords['skip_in_deltas'] = True
        self._run(
            op,
            keywords,
            inputs=inputs,
            weights=weights,
            padding=padding,
            stride=stride,
            in_deltas=in_deltas,
            out_deltas=out_deltas,
            weight_deltas=weight_deltas,
            bias_deltas=bias_deltas,
        )

    def maxpool2d_forward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int,
        stride: tuple[int, int],
        argmax,
    ) -> None:
        op = 'maxpool2d_forward_batch'
        self._expect_arrays(op, inputs=inputs, outputs=outputs, argmax=argmax)
        self._pool_check(op, inputs, window, outputs, padding, stride)
        self._expect_same_shape(op, outputs=outputs, argmax=argmax)
        self._run(
            op,
            inputs=inputs,
            window=window,
            outputs=outputs,
            padding=padding,
            stride=stride,
            argmax=argmax,
        )

    def maxpool2d_backward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int,
        stride: tuple[int, int],
        argmax,
        in_deltas,
        out_deltas,
    ) -> None:
        op = 'maxpool2d_backward_batch'
        self._expect_arrays(
            op,
            inputs=inputs,
            outputs=outputs,
            argmax=argmax,
            in_deltas=in_deltas,
            out_deltas=out_deltas,
        )
        self._pool_check(op, inputs, window, outputs, padding, stride)
        self._expect_same_shape(
            op, outputs=outputs, argmax=argmax, out_deltas=out_deltas
        )
        self._expect_same_shape(op, inputs=inputs, in_deltas=in_deltas)
        self._run(
            op,
            inputs=inputs,
            window=window,
            outputs=outputs,
            padding=padding,
            stride=stride,
            argmax=argmax,
            in_deltas=in_deltas,
            out_deltas=out_deltas,
        )

    def avgpool2d_forward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int,
        stride: tuple[int, int],
    ) -> None:
        op = 'avgpool2d_forward_batch'
        self._expect_arrays(op, inputs=inputs, outputs=outputs)
        self._pool_check(op, inputs, window, outputs, padding, stride)
        self._run(
            op,
            inputs=inputs,
            window=window,
            outputs=outputs,
            padding=padding,
            stride=stride,
        )

    def avgpool2d_backward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int,
        stride: tuple[int, int],
        in_deltas,
        out_deltas,
    ) -> None:
        op = 'avgpool2d_backward_batch'
        self._expect_arrays(
            op,
            inputs=inputs,
            outputs=outputs,
            in_deltas=in_deltas,
            out_deltas=out_deltas,
        )
        self._pool_check(op, inputs, window, outputs, padding, stride)
        self._expect_same_shape(op, outputs=outputs, out_deltas=out_deltas)
        self._expect_same_shape(op, inputs=inputs, in_deltas=in_deltas)
        self._run(
            op,
            inputs=inputs,
            window=window,
            outputs=outputs,
            padding=padding,
            stride=stride,
            in_deltas=in_deltas,
            out_deltas=out_deltas,
        )


# ------------------------------------------ Brainstorm 0.5's helper functions


def _finite(handler, value) -> bool:
    if isinstance(value, DebugArray):
        return bool(handler.is_fully_finite(value))
    if _is_scalar(value):
        return math.isfinite(value)
    return True


def check_for_inf_or_nan(f):
    """Decorate a handler method to check its arguments after each call.

    Args:
        f: a function whose first argument is a :class:`DebugHandler`.

    Returns:
        A function that calls ``f`` and then raises ``ValueError`` naming
        the argument (by position from 1, or by keyword) if a
        :class:`DebugArray` or a number among the arguments holds NaN or Inf.
    """

    @functools.wraps(f)
    def checked(*args, **kwargs):
        result = f(*args, **kwargs)
        handler = args[0]
        named = [(f'{i}.', arg) for i, arg in enumerate(args, start=1)]
        for name, value in named + list(kwargs.items()):
            if not _finite(handler, value):
                raise ValueError(f'NaN or Inf encountered in argument {name!r}')
        return result

    return checked


def assert_is_shape(shape) -> None:
    """Check that ``shape`` is a tuple of non-negative ints.

    Args:
        shape: the value to check.

    Raises:
        DebugHandlerError: naming what was received.
    """
    if not isinstance(shape, tuple):
        raise DebugHandlerError(
            f'a shape must be a tuple. Received: {type(shape).__name__} {shape!r}'
        )
    for dim in shape:
        if not _is_int(dim) or dim < 0:
            raise DebugHandlerError(
                f'a shape must hold non-negative ints. Received: {shape!r}'
            )


def assert_debug_arrays(*arrays) -> None:
    """Check that every argument is a :class:`DebugArray`.

    Args:
        *arrays: the values to check.

    Raises:
        DebugHandlerError: naming the position (from 0) and the type found.
    """
    for i, array in enumerate(arrays):
        if not isinstance(array, DebugArray):
            raise DebugHandlerError(
                f'argument {i} must be a DebugArray. Received: {type(array).__name__}'
            )


def assert_shapes_equal(ref_shape, *shapes) -> None:
    """Check that shapes (or the shapes of DebugArrays) equal ``ref_shape``.

    Args:
        ref_shape: a shape tuple or a :class:`DebugArray`.
        *shapes: shape tuples or DebugArrays to compare with it.

    Raises:
        DebugHandlerError: if one is no shape or the shapes differ.
    """
    if isinstance(ref_shape, DebugArray):
        ref_shape = ref_shape.shape
    assert_is_shape(ref_shape)
    for i, shape in enumerate(shapes, start=1):
        if isinstance(shape, DebugArray):
            shape = shape.shape
        assert_is_shape(shape)
        if shape != ref_shape:
            raise DebugHandlerError(
                f'shape mismatch: argument {i} has shape {shape}, '
                f'argument 0 has shape {ref_shape}'
            )


def assert_is_scalar(value) -> None:
    """Check that ``value`` is an int or a float (not a bool).

    Args:
        value: the value to check.

    Raises:
        DebugHandlerError: naming the type found.
    """
    if not _is_scalar(value):
        raise DebugHandlerError(
            f'expected a scalar (int or float). '
            f'Received: {type(value).__name__} {value!r}'
        )
