"""The abstract handler interface: every array operation a layer may use.

Layers never touch memory directly. They call the ops of ``self.handler``,
so the same layer code runs on the CPU (:class:`NumpyHandler`), on the GPU
(``PyCudaHandler``) and under the checking :class:`DebugHandler`. The
docstrings of :class:`Handler` are the specification all of them follow.
"""

from __future__ import annotations

import abc
import functools
import inspect
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any

from brainstorm.describable import Describable
from brainstorm.errors import NetworkValidationError
from brainstorm.randomness import global_rnd

__all__ = [
    'Handler',
    'ACTIVATIONS',
    'ACTIVATION_NAMES',
    'ActivationTable',
    'UnknownActivationError',
    'FirstUseRandomState',
]

#: The names of the activation functions, listed here and nowhere else.
#: Each name is a handler op ``name(x, y)`` with its derivative op
#: ``name_deriv(x, y, dy, dx)``; layer arguments (``activation=``) accept
#: exactly these.
ACTIVATIONS = ('sigmoid', 'tanh', 'rel', 'linear', 'el')

#: The same tuple under its earlier name.
ACTIVATION_NAMES = ACTIVATIONS


class FirstUseRandomState:
    """Descriptor for a handler's ``rnd``: created when first read.

    A handler made without a seed takes its seed from
    :data:`~brainstorm.randomness.global_rnd` the first time its random
    state is needed (a dropout mask, ``fill_gaussian``) after the latest
    ``global_rnd.set_seed``, not when the handler is created. So
    ``brainstorm.handlers.default_handler``, created at import, follows a
    later ``global_rnd.set_seed(s)`` like everything else. Assigning
    ``rnd`` fixes it (a seeded state is kept across ``set_seed``);
    assigning None goes back to "not drawn yet".
    """

    def __get__(self, handler, owner=None):
        if handler is None:
            return self
        d = handler.__dict__
        rnd = d.get('_rnd')
        if rnd is None or d.get('_rnd_seedings', -1) not in (None, global_rnd.seedings):
            rnd = d['_rnd'] = global_rnd.create_random_state()
            d['_rnd_seedings'] = global_rnd.seedings
        return rnd

    def __set__(self, handler, value) -> None:
        # an assigned state is the user's (or a checkpoint's): kept
        handler.__dict__['_rnd'] = value
        handler.__dict__['_rnd_seedings'] = None


def first_use_owner(handler):
    """Return the handler whose ``rnd`` is a :class:`FirstUseRandomState`.

    A wrapping DebugHandler is unwrapped; None for other handlers.
    """
    inner = getattr(handler, 'handler', None)  # a wrapping DebugHandler
    if isinstance(inner, Handler):
        return first_use_owner(inner)
    for cls in type(handler).__mro__:
        if isinstance(cls.__dict__.get('rnd'), FirstUseRandomState):
            return handler
    return None


def peek_random_state(handler):
    """Return the handler's random state if it exists already, else None.

    Unlike reading ``handler.rnd`` this never draws a seed from
    ``global_rnd`` (writing a checkpoint must not change the run it
    records).
    """
    owner = first_use_owner(handler)
    if owner is not None:
        d = owner.__dict__
        if d.get('_rnd_seedings', -1) not in (None, global_rnd.seedings):
            return None  # would be redrawn when next needed
        return d.get('_rnd')
    return getattr(handler, 'rnd', None)


class Handler(Describable, abc.ABC):
    """Abstract base class of all handlers; its docstrings are the contract.

    **Op names** follow ``<verb>[_add]_<kinds>``. The kinds name the operands
    in argument order, the output excluded:

    * ``s``: a scalar, a Python ``int`` or ``float``;
    * ``v``: a vector, a 2-D array with one dimension of size 1;
    * ``m``: a matrix, a 2-D array;
    * ``t``: a tensor of any shape; all ``t`` operands of one op (and its
      output) have the same shape, there is no implicit broadcasting.

    ``_add`` means the result is added to ``out`` instead of overwriting it
    (``mult_add_tt``: ``out += a * b``). Two suffixes outside this grammar
    keep their 0.5 names: ``_if`` makes an op act only where a condition
    array is non-zero (``copy_to_if``), and ``_batch`` marks the
    convolution/pooling ops, which work on a whole batch of images. The
    allocation, conversion, copy/fill and check ops (``allocate``,
    ``copy_to``, ``fill_gaussian``, ``is_fully_finite``, ...) are named
    after what they do. A new op fits this grammar, or the grammar is
    amended here first.

    **Calling convention.** Results go into a caller-owned output argument
    (``out``, ``y``, ``dx``, ...) and every op returns None, except the
    allocation/conversion ops and ``is_fully_finite``. Nothing allocates
    memory of the size of an operand on the hot path (implementations may
    keep scratch buffers between calls). For every elementwise op (all
    ``_t``, ``_tt``, ``_st``, ``_mv`` ops, ``clip_t``, ``softmax_m``, the
    activations and their derivatives) ``out`` may be the very same array as
    an input; other partial overlaps are not supported. Operands may be
    non-contiguous views (a feature slice ``big[:, :, 10:20]`` of a larger
    buffer); an op reads and writes only the elements of its operands.

    **Images** for the ``*_batch`` ops are 4-D ``(N, H, W, C)`` arrays
    (channels last; layers pass ``flatten_time`` views, ``N = T*B``).
    ``padding`` is an ``int >= 0`` of zero cells added on all four sides;
    ``window`` is ``(kh, kw)`` and ``stride`` is ``(sy, sx)``, tuples of two
    positive ints. The output size is ``OH = (H + 2*padding - kh) // sy + 1``
    and ``OW = (W + 2*padding - kw) // sx + 1``; output cell ``(i, j)``
    looks at input rows ``i*sy - padding + u`` (``0 <= u < kh``) and columns
    ``j*sx - padding + v`` (``0 <= v < kw``).

    Attributes:
        dtype: the NumPy scalar type of every array (e.g. ``numpy.float32``).
        array_type: the class of the arrays this handler works on.
        context: the device context the arrays live in (``'numpy'`` for
            main memory).
        EMPTY: an array of size 0, used as a placeholder.
        rnd: the handler's own :class:`brainstorm.randomness.RandomState`,
            used by ``fill_gaussian`` and ``generate_probability_mask``.
    The four activation tables ``act_func``, ``act_func_deriv``,
    ``inplace_act_func`` and ``inplace_act_func_deriv``
    (:class:`ActivationTable`, see the properties below) have the names of
    :data:`ACTIVATIONS` as keys and look the ops up on access, so a
    subclass that overrides ``tanh`` gets its own ``tanh`` from
    ``act_func['tanh']``; an unknown name raises
    :class:`UnknownActivationError` (a ``KeyError``) listing the valid
    names.
    """

    #: the error raised for bad constructor arguments (see
    #: :mod:`brainstorm.arguments`)
    __argument_error__ = NetworkValidationError

    # set by each concrete handler (Any: their types differ per handler)
    dtype: Any = None
    array_type: Any = None
    context: Any = None
    EMPTY: Any = None
    rnd: Any = None

    def __init_subclass__(cls, **kwargs) -> None:
        """Let handlers written against Brainstorm 0.5's op signatures work.

        The optional keywords of the convolution ops (``columns``,
        ``skip_in_deltas``) came after 0.5; layers pass them to every
        handler. A subclass op that does not accept one is wrapped once
        here, at class creation, to drop it: both are hints, ignoring them
        gives the same results.
        """
        super().__init_subclass__(**kwargs)
        for op, keywords in _OPTIONAL_KEYWORDS.items():
            method = cls.__dict__.get(op)
            if method is None or getattr(method, '__isabstractmethod__', False):
                continue
            parameters = inspect.signature(method).parameters
            if any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
            ):
                continue
            missing = tuple(k for k in keywords if k not in parameters)
            if missing:
                setattr(cls, op, _dropping(method, missing))

    # ---------------------------------------------------- activation tables

    @property
    def act_func(self) -> ActivationTable:
        """Activation name -> op ``f(x, y)`` computing ``y = f(x)``."""
        return ActivationTable(self, 'act_func')

    @property
    def act_func_deriv(self) -> ActivationTable:
        """Activation name -> op ``f(x, y, dy, dx)``: ``dx = f'(x) * dy``."""
        return ActivationTable(self, 'act_func_deriv')

    @property
    def inplace_act_func(self) -> ActivationTable:
        """Activation name -> ``f(x)`` replacing ``x`` by ``f(x)``."""
        return ActivationTable(self, 'inplace_act_func')

    @property
    def inplace_act_func_deriv(self) -> ActivationTable:
        """Activation name -> ``f(y, dy)`` replacing ``dy`` by ``f'(x) * dy``."""
        return ActivationTable(self, 'inplace_act_func_deriv')

    # ------------------------------------------------------------ allocation

    @abc.abstractmethod
    def allocate(self, shape: tuple[int, ...]):
        """Return a new array of ``shape`` and the handler dtype.

        The content is arbitrary (the NumPy handler gives zeros); use
        :meth:`zeros` where it matters.
        """

    @abc.abstractmethod
    def zeros(self, shape: tuple[int, ...]):
        """Return a new array of ``shape`` filled with 0."""

    @abc.abstractmethod
    def ones(self, shape: tuple[int, ...]):
        """Return a new array of ``shape`` filled with 1."""

    @abc.abstractmethod
    def create_from_numpy(self, arr):
        """Return a new handler array holding a copy of the NumPy ``arr``.

        The values are cast to the handler dtype; the shape is kept.
        """

    @abc.abstractmethod
    def get_numpy_copy(self, mem):
        """Return a new NumPy array (handler dtype) with the content of ``mem``.

        Changing the result never changes ``mem``.
        """

    @abc.abstractmethod
    def set_from_numpy(self, mem, arr) -> None:
        """Overwrite the handler array ``mem`` with the NumPy ``arr``.

        Both have the same shape; the values are cast to the handler dtype.
        """

    # ------------------------------------------------------------- copy/fill

    @abc.abstractmethod
    def copy_to(self, src, dest) -> None:
        """Copy ``src`` into ``dest`` (note the order: source first).

        Args:
            src: tensor.
            dest: tensor of the same shape, overwritten.
        """

    @abc.abstractmethod
    def copy_to_if(self, src, dest, cond) -> None:
        """Copy ``src`` into ``dest`` where ``cond`` is non-zero.

        Args:
            src: tensor.
            dest: tensor of the same shape; elements where ``cond == 0``
                keep their value.
            cond: tensor of the same shape.
        """

    @abc.abstractmethod
    def fill(self, mem, val: float) -> None:
        """Set every element of the tensor ``mem`` to the scalar ``val``."""

    @abc.abstractmethod
    def fill_if(self, mem, val: float, cond) -> None:
        """Set the elements of ``mem`` where ``cond`` is non-zero to ``val``.

        Args:
            mem: tensor, changed in place.
            val: scalar.
            cond: tensor of the same shape as ``mem``.
        """

    @abc.abstractmethod
    def fill_gaussian(self, mean: float, std: float, out) -> None:
        """Fill ``out`` with samples of N(mean, std**2) drawn from ``self.rnd``.

        Args:
            mean: scalar.
            std: scalar, ``>= 0``.
            out: tensor, overwritten.
        """

    @abc.abstractmethod
    def generate_probability_mask(self, mask, probability: float) -> None:
        """Fill ``mask`` with 1 with ``probability`` and 0 otherwise.

        Each element is drawn independently from ``self.rnd``.

        Args:
            mask: tensor, overwritten.
            probability: scalar in ``[0, 1]``.
        """

    # ---------------------------------------------------------------- checks

    @abc.abstractmethod
    def is_fully_finite(self, a) -> bool:
        """Return True if the tensor ``a`` holds no NaN and no +-Inf."""

    # ----------------------------------------------------------- math A to Z

    @abc.abstractmethod
    def abs_t(self, a, out) -> None:
        """Elementwise ``out = |a|``; ``out`` has ``a``'s shape, may alias it."""

    @abc.abstractmethod
    def add_into_if(self, a, out, cond) -> None:
        """Elementwise ``out += a`` where ``cond`` is non-zero.

        Args:
            a: tensor.
            out: tensor of the same shape; unchanged where ``cond == 0``.
            cond: tensor of the same shape.
        """

    @abc.abstractmethod
    def add_mv(self, m, v, out) -> None:
        """``out = m + v`` with ``v`` broadcast over ``m``.

        Args:
            m: matrix ``(M, N)``.
            v: vector ``(1, N)`` (added to every row) or ``(M, 1)`` (added to
                every column).
            out: matrix ``(M, N)``; may alias ``m``.
        """

    @abc.abstractmethod
    def add_st(self, s: float, t, out) -> None:
        """Elementwise ``out = t + s`` for a scalar ``s``; ``out`` may alias ``t``."""

    @abc.abstractmethod
    def add_tt(self, a, b, out) -> None:
        """Elementwise ``out = a + b``; all of one shape, ``out`` may alias."""

    @abc.abstractmethod
    def binarize_v(self, v, out) -> None:
        """One-hot encode class ids: ``out[i, k] = 1 if v[i, 0] == k else 0``.

        Args:
            v: vector ``(N, 1)`` of integral ids in ``[0, K)``.
            out: matrix ``(N, K)``, overwritten.
        """

    @abc.abstractmethod
    def broadcast_t(self, a, axis: int, out) -> None:
        """Replicate ``a`` along ``axis`` into ``out``.

        Args:
            a: tensor with size 1 along ``axis``.
            axis: int in ``[0, out.ndim)``.
            out: tensor of ``a``'s shape except along ``axis``.
        """

    @abc.abstractmethod
    def clip_t(self, a, a_min: float, a_max: float, out) -> None:
        """Elementwise ``out = min(max(a, a_min), a_max)``.

        Args:
            a: tensor.
            a_min: scalar lower bound.
            a_max: scalar upper bound, ``>= a_min``.
            out: tensor of ``a``'s shape; may alias ``a``.
        """

    @abc.abstractmethod
    def divide_mv(self, m, v, out) -> None:
        """``out = m / v`` with ``v`` broadcast as in :meth:`add_mv`."""

    @abc.abstractmethod
    def divide_tt(self, a, b, out) -> None:
        """Elementwise ``out = a / b``; all of one shape, ``out`` may alias."""

    @abc.abstractmethod
    def dot_add_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        """Matrix product added to ``out``: ``out += op(a) @ op(b)``.

        Args:
            a: matrix; ``op(a)`` is ``a.T`` if ``transa`` else ``a``,
                of shape ``(M, K)``.
            b: matrix; ``op(b)`` is ``b.T`` if ``transb`` else ``b``,
                of shape ``(K, N)``.
            out: matrix ``(M, N)``; must not overlap ``a`` or ``b``.
            transa: bool.
            transb: bool.
        """

    @abc.abstractmethod
    def dot_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        """Matrix product ``out = op(a) @ op(b)``.

        Arguments as in :meth:`dot_add_mm`.
        """

    @abc.abstractmethod
    def index_m_by_v(self, m, v, out) -> None:
        """Pick one entry per row: ``out[i, 0] = m[i, int(v[i, 0])]``.

        Args:
            m: matrix ``(N, K)``.
            v: vector ``(N, 1)`` of integral column ids in ``[0, K)``.
            out: vector ``(N, 1)``, overwritten.
        """

    @abc.abstractmethod
    def log_t(self, a, out) -> None:
        """Elementwise natural log ``out = ln(a)``; ``out`` may alias ``a``."""

    @abc.abstractmethod
    def merge_tt(self, a, b, out) -> None:
        """Concatenate ``a`` and ``b`` along the last axis into ``out``.

        Args:
            a: tensor ``(..., Fa)``.
            b: tensor ``(..., Fb)`` with the same leading dimensions.
            out: tensor ``(..., Fa + Fb)``, overwritten.
        """

    @abc.abstractmethod
    def modulo_tt(self, a, b, out) -> None:
        """Elementwise C-style remainder ``out = fmod(a, b)``.

        The result has the sign of ``a``. All of one shape, ``out`` may alias.
        """

    @abc.abstractmethod
    def mult_add_mv(self, m, v, out) -> None:
        """``out += m * v`` with ``v`` broadcast as in :meth:`mult_mv`.

        ``out`` is a matrix ``(M, N)`` and may alias ``m``.
        """

    @abc.abstractmethod
    def mult_add_st(self, s: float, t, out) -> None:
        """Elementwise ``out += s * t`` for a scalar ``s``; ``out`` may alias ``t``."""

    @abc.abstractmethod
    def mult_add_tt(self, a, b, out) -> None:
        """Elementwise ``out += a * b``; all of one shape, ``out`` may alias."""

    @abc.abstractmethod
    def mult_mv(self, m, v, out) -> None:
        """``out = m * v`` elementwise with ``v`` broadcast over ``m``.

        Args:
            m: matrix ``(M, N)``.
            v: vector ``(1, N)`` or ``(M, 1)`` (broadcast as in
                :meth:`add_mv`), or a matrix ``(M, N)``.
            out: matrix ``(M, N)``; may alias ``m``.
        """

    @abc.abstractmethod
    def mult_st(self, s: float, t, out) -> None:
        """Elementwise ``out = s * t`` for a scalar ``s``; ``out`` may alias ``t``."""

    @abc.abstractmethod
    def mult_tt(self, a, b, out) -> None:
        """Elementwise ``out = a * b``; all of one shape, ``out`` may alias."""

    @abc.abstractmethod
    def sign_t(self, a, out) -> None:
        """Elementwise sign (-1, 0 or 1) of ``a``; ``out`` may alias ``a``."""

    @abc.abstractmethod
    def softmax_m(self, m, out) -> None:
        """Softmax over each row: ``out[i] = exp(m[i] - max m[i]) / sum(...)``.

        Subtracting the row maximum keeps it finite for large inputs.

        Args:
            m: matrix ``(M, N)``.
            out: matrix ``(M, N)``; may alias ``m``.
        """

    @abc.abstractmethod
    def split_add_tt(self, x, out_a, out_b) -> None:
        """Undo :meth:`merge_tt`, adding the two parts to the outputs.

        ``out_a += x[..., :Fa]`` and ``out_b += x[..., Fa:]``.

        Args:
            x: tensor ``(..., Fa + Fb)``.
            out_a: tensor ``(..., Fa)``.
            out_b: tensor ``(..., Fb)``.
        """

    @abc.abstractmethod
    def sqrt_t(self, a, out) -> None:
        """Elementwise square root; ``out`` may alias ``a``."""

    @abc.abstractmethod
    def subtract_mv(self, m, v, out) -> None:
        """``out = m - v`` with ``v`` broadcast as in :meth:`add_mv`."""

    @abc.abstractmethod
    def subtract_tt(self, a, b, out) -> None:
        """Elementwise ``out = a - b``; all of one shape, ``out`` may alias."""

    @abc.abstractmethod
    def sum_t(self, a, axis: int | None, out) -> None:
        """Sum ``a`` over ``axis`` (or over everything) into ``out``.

        Args:
            a: tensor; any shape if ``axis`` is None, else 1-D or 2-D.
            axis: None, or an axis of ``a`` (0 or 1).
            out: for ``axis=None`` an array with one element (any shape,
                e.g. ``()``, ``(1,)`` or ``(1, 1)``); otherwise ``a``'s
                shape without ``axis`` or with size 1 at ``axis``
                (``(M, N)``, axis 0 -> ``(N,)`` or ``(1, N)``).
        """

    # ----------------------------------------------------------- activations

    # The activation ops, one pair per name in ACTIVATIONS. ``linear`` is
    # not abstract: its default (a copy through copy_to) serves every
    # handler, including those written before it was an op.

    @abc.abstractmethod
    def el(self, x, y) -> None:
        """Exponential linear unit (alpha 1): ``y = x if x > 0 else exp(x) - 1``.

        ``y`` has ``x``'s shape and may alias it.
        """

    @abc.abstractmethod
    def el_deriv(self, x, y, dy, dx) -> None:
        """``dx = dy if y >= 0 else dy * (y + 1)`` (uses only ``y``).

        Args:
            x: the activation input (unused, may be None).
            y: ``el(x)``.
            dy: delta of ``y``.
            dx: delta of ``x``, overwritten; same shape, may alias ``dy``.
        """

    def linear(self, x, y) -> None:
        """Identity ``y = x``; nothing to do if ``y`` is ``x`` itself.

        ``y`` has ``x``'s shape and may alias it.
        """
        if y is not x:
            self.copy_to(x, y)

    def linear_deriv(self, x, y, dy, dx) -> None:
        """``dx = dy``; nothing to do if ``dx`` is ``dy`` itself.

        Arguments as in :meth:`el_deriv`.
        """
        if dx is not dy:
            self.copy_to(dy, dx)

    @abc.abstractmethod
    def rel(self, x, y) -> None:
        """Rectified linear: ``y = max(0, x)``; ``y`` may alias ``x``."""

    @abc.abstractmethod
    def rel_deriv(self, x, y, dy, dx) -> None:
        """``dx = dy * (y > 0)``; arguments as in :meth:`el_deriv`."""

    @abc.abstractmethod
    def sigmoid(self, x, y) -> None:
        """Logistic sigmoid ``y = 1 / (1 + exp(-x))``; ``y`` may alias ``x``.

        Finite (0 or 1 at the extremes) for every finite ``x``.
        """

    @abc.abstractmethod
    def sigmoid_deriv(self, x, y, dy, dx) -> None:
        """``dx = dy * y * (1 - y)``; arguments as in :meth:`el_deriv`."""

    @abc.abstractmethod
    def tanh(self, x, y) -> None:
        """Hyperbolic tangent of ``x`` into ``y``, which may alias ``x``."""

    @abc.abstractmethod
    def tanh_deriv(self, x, y, dy, dx) -> None:
        """``dx = dy * (1 - y**2)``; arguments as in :meth:`el_deriv`."""

    # -------------------------------------------------------------- conv/pool

    def keeps_conv_columns(self, out_cells: int) -> bool:
        """Should a convolution keep its receptive fields between passes?

        Asked by ``Convolution2D`` when it lays out its buffers (at network
        creation): if True it declares the internal ``columns`` workspace
        and passes it to :meth:`conv2d_forward_batch` and
        :meth:`conv2d_backward_batch`, else it has no such buffer. The
        base handler declines (a handler that ignores ``columns`` should
        not pay for its memory); NumpyHandler keeps them for big images.

        Args:
            out_cells: output cells per image, ``OH * OW``.
        """
        return False

    @abc.abstractmethod
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
        """2-D cross-correlation of a batch of images, plus bias.

        ``outputs[n, i, j, f] = bias[f] + sum_{u, v, c} weights[f, u, v, c]
        * xpad[n, i*sy + u, j*sx + v, c]``, where ``xpad`` is ``inputs`` with
        ``padding`` zero cells on every side (see the class docstring for
        the output size).

        Args:
            inputs: ``(N, H, W, C)``.
            weights: ``(F, kh, kw, C)``.
            bias: ``(F,)``.
            outputs: ``(N, OH, OW, F)``, overwritten.
            padding: int ``>= 0``.
            stride: ``(sy, sx)``.
            columns: keyword-only; None or an ``(N, OH, OW, kh*kw*C)``
                workspace that the caller keeps unchanged until the
                :meth:`conv2d_backward_batch` of the same inputs, which gets
                it too (a layer internal). The handler may store there
                what that backward pass needs (NumpyHandler: the receptive
                fields, ``columns[n, i, j, (u*kw + v)*C + c] = xpad[n,
                i*sy + u, j*sx + v, c]``) instead of recomputing it; its
                content is otherwise unspecified and it may stay untouched.
                Handlers whose op lacks this keyword (Brainstorm 0.5's
                signature) get it dropped by ``Handler.__init_subclass__``.
        """

    @abc.abstractmethod
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
        """Gradients of :meth:`conv2d_forward_batch`.

        Args:
            inputs: ``(N, H, W, C)``, as in the forward pass.
            weights: ``(F, kh, kw, C)``.
            padding: int ``>= 0``.
            stride: ``(sy, sx)``.
            in_deltas: ``(N, H, W, C)``; the input gradient is ADDED.
            out_deltas: ``(N, OH, OW, F)``, the output gradient.
            weight_deltas: ``(F, kh, kw, C)``, OVERWRITTEN.
            bias_deltas: ``(F,)``, OVERWRITTEN.
            columns: keyword-only; the workspace given to the forward pass
                of the same inputs (or None, also if the forward pass got
                None); read only.
            skip_in_deltas: keyword-only; if True the input gradient is
                not computed and ``in_deltas`` is left untouched (for a
                caller whose input deltas nobody reads). Handlers whose op
                lacks this keyword get it dropped (then the deltas are
                added anyway, which nobody reads).
        """

    @abc.abstractmethod
    def maxpool2d_forward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int,
        stride: tuple[int, int],
        argmax,
    ) -> None:
        """Max pooling over windows of in-bounds cells (padding is ignored).

        ``argmax`` receives the position of each maximum as the flat
        in-image index ``(row * W + col) * C + c`` (the first maximum in
        row-major window order wins ties). A window holding only padding
        gives output 0 and argmax -1.

        Args:
            inputs: ``(N, H, W, C)``.
            window: ``(kh, kw)``.
            outputs: ``(N, OH, OW, C)``, overwritten.
            padding: int ``>= 0``.
            stride: ``(sy, sx)``.
            argmax: ``(N, OH, OW, C)`` in the handler dtype, overwritten.
        """

    @abc.abstractmethod
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
        """Gradient of :meth:`maxpool2d_forward_batch`.

        ``out_deltas[n, i, j, c]`` is ADDED to ``in_deltas[n]`` at the flat
        index ``argmax[n, i, j, c]`` (nothing for -1).

        Args:
            inputs: ``(N, H, W, C)``, as in the forward pass.
            window: ``(kh, kw)``.
            outputs: ``(N, OH, OW, C)``, as in the forward pass.
            padding: int ``>= 0``.
            stride: ``(sy, sx)``.
            argmax: ``(N, OH, OW, C)`` from the forward pass.
            in_deltas: ``(N, H, W, C)``, added to.
            out_deltas: ``(N, OH, OW, C)``.
        """

    @abc.abstractmethod
    def avgpool2d_forward_batch(
        self,
        inputs,
        window: tuple[int, int],
        outputs,
        padding: int,
        stride: tuple[int, int],
    ) -> None:
        """Average pooling: the mean over the in-bounds cells of each window.

        Padding cells do not count; a window of padding only gives 0.

        Args:
            inputs: ``(N, H, W, C)``.
            window: ``(kh, kw)``.
            outputs: ``(N, OH, OW, C)``, overwritten.
            padding: int ``>= 0``.
            stride: ``(sy, sx)``.
        """

    @abc.abstractmethod
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
        """Gradient of :meth:`avgpool2d_forward_batch`.

        Each in-bounds cell of a window gets ``out_delta / count`` ADDED,
        ``count`` being the number of in-bounds cells of that window.

        Args:
            inputs: ``(N, H, W, C)``.
            window: ``(kh, kw)``.
            outputs: ``(N, OH, OW, C)``.
            padding: int ``>= 0``.
            stride: ``(sy, sx)``.
            in_deltas: ``(N, H, W, C)``, added to.
            out_deltas: ``(N, OH, OW, C)``.
        """


# The optional keyword-only parameters of ops, added after Brainstorm 0.5.
_OPTIONAL_KEYWORDS = {
    'conv2d_forward_batch': ('columns',),
    'conv2d_backward_batch': ('columns', 'skip_in_deltas'),
}


def _dropping(method, keywords: tuple[str, ...]):
    """``method`` accepting and ignoring the keyword arguments ``keywords``."""

    @functools.wraps(method)
    def op(self, *args, **kwargs):
        for keyword in keywords:
            kwargs.pop(keyword, None)
        return method(self, *args, **kwargs)

    # the base op's signature, so the wrapped op reads like every other
    op.__signature__ = inspect.signature(  # type: ignore[attr-defined]
        Handler.__dict__[method.__name__]
    )
    return op


class UnknownActivationError(KeyError):
    """An activation table was asked for a name not in :data:`ACTIVATIONS`.

    A ``KeyError`` (what the dicts of earlier versions raised) whose
    message names the unknown name and the valid ones.
    """

    def __init__(self, name):
        valid = ', '.join(repr(n) for n in ACTIVATIONS)
        super().__init__(f'Unknown activation {name!r}. Valid activations: {valid}.')
        self.name = name

    def __str__(self) -> str:
        return str(self.args[0])

    def __reduce__(self):
        return type(self), (self.name,)


class ActivationTable:
    """Read-only mapping of the activation names to one form of their ops.

    A ``collections.abc.Mapping`` (registered as one) with the read-only
    dict methods.

    ``handler.act_func`` and its three siblings are tables: ``table[name]``
    looks the op up on the handler when asked, so a table holds nothing but
    its handler and form, handlers do not store tables, and copying or
    pickling a handler needs no special care.

    Args:
        handler: the handler whose ops are looked up.
        form: ``'act_func'`` (the op ``name``), ``'act_func_deriv'`` (the
            op ``name_deriv``), ``'inplace_act_func'`` (``f(x)``:
            ``name(x, x)``) or ``'inplace_act_func_deriv'`` (``f(y, dy)``:
            ``name_deriv(None, y, dy, dy)``).
    """

    __slots__ = ('handler', 'form', '_suffix', '_wrap')

    def __init__(self, handler: Handler, form: str):
        if form not in _FORMS:
            raise ValueError(
                f'ActivationTable: form must be one of {list(_FORMS)}. '
                f'Received: {form!r}'
            )
        self.handler = handler
        self.form = form
        self._suffix, self._wrap = _FORMS[form]

    def __getitem__(self, name: str):
        if not isinstance(name, str) or name not in _OP_NAMES:
            raise UnknownActivationError(name)
        op = getattr(self.handler, _OP_NAMES[name][self._suffix])
        return op if self._wrap is None else functools.partial(self._wrap, op)

    def __iter__(self) -> Iterator[str]:
        return iter(ACTIVATIONS)

    def __len__(self) -> int:
        return len(ACTIVATIONS)

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in _OP_NAMES

    def get(self, name, default=None):
        """Return ``self[name]``, or ``default`` for an unknown name."""
        return self[name] if name in self else default

    def keys(self):
        """Return a view of the activation names."""
        return KeysView(self)

    def values(self):
        """Return a view of the ops, in the order of the names."""
        return ValuesView(self)

    def items(self):
        """Return a view of the ``(name, op)`` pairs."""
        return ItemsView(self)

    def __repr__(self) -> str:
        return f'<{self.form} of {type(self.handler).__name__}: {ACTIVATIONS}>'


Mapping.register(ActivationTable)


def _inplace(f, x) -> None:
    f(x, x)


def _inplace_deriv(f_deriv, y, dy) -> None:
    f_deriv(None, y, dy, dy)


# the op names of each activation: (function, derivative)
_OP_NAMES = {name: (name, f'{name}_deriv') for name in ACTIVATIONS}

# form -> (index into _OP_NAMES' pairs, wrapper making the in-place call)
_FORMS = {
    'act_func': (0, None),
    'act_func_deriv': (1, None),
    'inplace_act_func': (0, _inplace),
    'inplace_act_func_deriv': (1, _inplace_deriv),
}
