"""The abstract handler interface: every array operation a layer may use.

Layers never touch memory directly. They call the ops of ``self.handler``,
so the same layer code runs on the CPU (:class:`NumpyHandler`), on the GPU
(``PyCudaHandler``) and under the checking :class:`DebugHandler`. The
docstrings of :class:`Handler` are the specification all of them follow;
each op and its docstring come from the op table,
:mod:`brainstorm.handlers.ops`.
"""

from __future__ import annotations

import abc
import contextlib
import functools
import inspect
import math
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import TYPE_CHECKING, Any

from brainstorm.describable import Describable
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers.ops import OPS, install_contract, signature
from brainstorm.randomness import global_rnd
from brainstorm.shapes import as_rows

__all__ = [
    'Handler',
    'ACTIVATIONS',
    'ACTIVATION_NAMES',
    'ACTIVATION_ALIASES',
    'NEEDS_INPUT',
    'ActivationTable',
    'UnknownActivationError',
    'FirstUseRandomState',
]

#: The names of the activation functions, listed here and nowhere else.
#: Each name is a handler op ``name(x, y)`` with its derivative op
#: ``name_deriv(x, y, dy, dx)``; layer arguments (``activation=``) accept
#: these (those of :data:`NEEDS_INPUT` only where the layer says so) and
#: the :data:`ACTIVATION_ALIASES`.
ACTIVATIONS = (
    'sigmoid',
    'tanh',
    'rel',
    'linear',
    'el',
    'softplus',
    'leaky_rel',
    'gelu',
)

#: The activations whose derivative needs the input ``x``: for all others
#: it follows from ``y = f(x)`` alone, which lets layers compute ``f`` in
#: place and keep only ``y``. Only layers that keep their input
#: (``Elementwise``) accept these.
NEEDS_INPUT = ('gelu',)

#: The other accepted spellings of activation names (alias -> name).
ACTIVATION_ALIASES = {'relu': 'rel'}

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

    Each op is one row of the op table, :data:`brainstorm.handlers.ops.OPS`,
    which gives this class the op as an abstract method with its signature
    and contract as docstring.

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
    after what they do, and so are the ops of one layer
    (``lstm_forward_step``) and the parameter updates of one stepper, named
    ``<rule>_update`` (``momentum_update``, ``adam_update``; Nesterov's
    momentum has two: ``nesterov_lookahead`` and ``nesterov_update``). A new
    op fits this grammar, or the grammar is amended here first.

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
    ``padding`` is an ``int >= 0`` of zero cells added on all four sides,
    or a tuple ``(top, bottom, left, right)`` of ints ``>= 0`` for padding
    that differs by side (``brainstorm.shapes.padding_sides`` turns either
    form into the tuple; an int ``p`` is ``(p, p, p, p)``). ``window`` is
    ``(kh, kw)`` and ``stride`` is ``(sy, sx)``, tuples of two positive
    ints. The output size is ``OH = (H + top + bottom - kh) // sy + 1`` and
    ``OW = (W + left + right - kw) // sx + 1``; output cell ``(i, j)`` looks
    at input rows ``i*sy - top + u`` (``0 <= u < kh``) and columns ``j*sx -
    left + v`` (``0 <= v < kw``). The bottom and right padding thus only
    decide the output size. Layers pass an int where the padding is the
    same on every side, so a handler written for Brainstorm 0.5's int
    padding runs every network that has no padding differing by side.

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

    if TYPE_CHECKING:
        # the ops are set from the op table when this module is imported,
        # so a type checker does not see them: to it they are Any
        def __getattr__(self, name: str) -> Any: ...

    def __init_subclass__(cls, **kwargs) -> None:
        """Let handlers written against Brainstorm 0.5's op signatures work.

        The optional keywords of the convolution and pooling ops
        (``columns``, ``skip_in_deltas``, ``activation``,
        ``overwrite_in_deltas``) came after 0.5; layers pass them to every
        handler. A subclass op that does not accept one (also an op from a
        mixin class that is no Handler) is wrapped once here, at class
        creation, to drop it: ``columns`` and
        ``skip_in_deltas`` are hints, ignoring them gives the same results;
        ``activation`` is applied after the op, through
        ``inplace_act_func``; for ``overwrite_in_deltas`` the input deltas
        are zeroed before the op, which then adds to them (both also for an
        op taking ``**kwargs``: a handler that does the work itself names
        the parameter; a mixin's op taking ``**kwargs`` is taken to pass
        them on, and is left as it is).
        """
        super().__init_subclass__(**kwargs)
        for op, keywords in _OPTIONAL_KEYWORDS.items():
            # the op as this class defines it, or as a mixin that is no
            # Handler does (wrapped here, where it joins a handler)
            owner = next((k for k in cls.__mro__ if op in k.__dict__), None)
            if owner is None or (owner is not cls and issubclass(owner, Handler)):
                continue
            method = owner.__dict__[op]
            if getattr(method, '__isabstractmethod__', False):
                continue
            parameters = inspect.signature(method).parameters
            if any(
                p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
            ):
                if owner is not cls:  # a mixin forwarding them (timing, logs)
                    continue
                # hints may go into **kwargs; keywords that change the
                # results must be named
                missing = tuple(
                    k for k in keywords if k in _NAMED and k not in parameters
                )
            else:
                missing = tuple(k for k in keywords if k not in parameters)
            if missing:
                setattr(cls, op, _accepting(op, method, missing))

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

    # The ops are the rows of the op table (brainstorm.handlers.ops), which
    # install_contract below turns into abstract methods with their
    # signatures and docstrings. ``linear`` is not abstract: its default (a
    # copy through copy_to) serves every handler, including those written
    # before it was an op; its contract text is the table's.

    # ----------------------------------------------------------- activations

    def linear(self, x, y) -> None:  # noqa: D102 - documented in the table
        if y is not x:
            self.copy_to(x, y)

    def linear_deriv(self, x, y, dy, dx) -> None:  # noqa: D102 - as linear
        if dx is not dy:
            self.copy_to(dy, dx)

    # -------------------------------------------------------------- recurrent

    def lstm_forward_step(  # noqa: D102 - documented in the table
        self, gates, c_prev, pi, pf, po, activation: str, gate_outputs, c, c_out, y
    ) -> None:
        S = c.shape[1]
        Z, I, F, O = (gates[:, k * S : (k + 1) * S] for k in range(4))
        Zb, Ib, Fb, Ob = (gate_outputs[:, k * S : (k + 1) * S] for k in range(4))
        act = self.act_func[activation]
        self.mult_add_mv(c_prev, pi, I)
        self.mult_add_mv(c_prev, pf, F)
        act(Z, Zb)
        self.sigmoid(gates[:, S : 3 * S], gate_outputs[:, S : 3 * S])
        self.mult_tt(Ib, Zb, c)
        self.mult_add_tt(Fb, c_prev, c)
        self.mult_add_mv(c, po, O)
        self.sigmoid(O, Ob)
        act(c, c_out)
        self.mult_tt(Ob, c_out, y)

    def lstm_backward_step(  # noqa: D102 - documented in the table
        self,
        dy,
        factors,
        c_factor,
        d_gates_next,
        dc_next,
        f_next,
        pi,
        pf,
        po,
        d_gates,
        dc,
    ) -> None:
        S = dc.shape[1]
        PZ, PI, PF, PO = (factors[:, k * S : (k + 1) * S] for k in range(4))
        dZ, dI, dF, dO = (d_gates[:, k * S : (k + 1) * S] for k in range(4))
        self.mult_tt(dy, PO, dO)
        self.mult_tt(dy, c_factor, dc)
        self.mult_add_mv(dO, po, dc)
        self.mult_add_mv(d_gates_next[:, S : 2 * S], pi, dc)
        self.mult_add_mv(d_gates_next[:, 2 * S : 3 * S], pf, dc)
        self.mult_add_tt(f_next, dc_next, dc)
        self.mult_tt(dc, PZ, dZ)
        self.mult_tt(dc, PI, dI)
        self.mult_tt(dc, PF, dF)

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

    # ---------------------------------------------------------------- passes

    def network_pass(self, layer_types):
        """A context around one forward or backward pass of a network.

        ``Network`` runs its layers' passes inside it (in the calling
        thread), telling the handler the types of its layers, so that a
        handler may prepare for the ops such a network runs.
        OneDnnHandler keeps NumPy's OpenBLAS threads asleep in passes of
        networks with convolution or pooling layers (see :doc:`/cpu`). The
        base handler does nothing.

        Args:
            layer_types: the set of the network's layer types, like
                ``{'Input', 'Convolution2D', 'FullyConnected'}``, with the
                types of the layer classes they derive from (a subclass of
                ``LstmLayerImpl`` brings ``'Lstm'`` too).
        """
        return contextlib.nullcontext()

    def _activation_after(self, activation: str):
        """``f(outputs)``, applying ``activation`` to an op's outputs in place.

        None for ``'linear'``. The name is looked up now, so an unknown one
        raises before the op writes anything. ``f`` runs the in-place
        activation on a 2-D view of the outputs where one exists.
        """
        if activation == 'linear':
            return None
        act = self.inplace_act_func[activation]
        return lambda outputs: act(as_rows(outputs))

    def fixed_operand(self, array):
        """A context in which ``array`` stays as it is: a hint for products.

        The caller promises that nothing writes ``array`` while the block
        runs. Products whose ``b`` is this very array (the same memory,
        shape and strides) may then use a copy of it in a faster layout,
        made once in the block: a recurrent layer multiplies by its
        recurrent weights once per time step. OneDnnHandler packs such
        weights in passes of networks with ``Lstm`` layers (see
        :doc:`/cpu`); DebugHandler checks the promise; the base handler
        does nothing.

        Args:
            array: an array of the handler, typically a parameter.
        """
        return contextlib.nullcontext()

    # ---------------------------------------------------------------- updates
    # Each update op is the sequence of general ops the steppers ran before
    # it was an op, in the same order, so results stay bit-identical on
    # every handler (resumed runs and the reproducibility tests rely on it).

    def sgd_update(  # noqa: D102 - documented in the table
        self, parameters, gradients, learning_rate: float
    ) -> None:
        self.mult_add_st(-learning_rate, gradients, parameters)

    def momentum_update(  # noqa: D102 - documented in the table
        self, parameters, gradients, velocity, learning_rate: float, momentum: float
    ) -> None:
        self.mult_st(momentum, velocity, velocity)
        self.mult_add_st(-learning_rate, gradients, velocity)
        self.add_tt(parameters, velocity, parameters)

    def nesterov_lookahead(  # noqa: D102 - documented in the table
        self, parameters, velocity, momentum: float
    ) -> None:
        self.mult_st(momentum, velocity, velocity)
        self.add_tt(parameters, velocity, parameters)

    def nesterov_update(  # noqa: D102 - documented in the table
        self, parameters, gradients, velocity, learning_rate: float
    ) -> None:
        self.mult_add_st(-learning_rate, gradients, velocity)
        self.mult_add_st(-learning_rate, gradients, parameters)

    def rmsprop_update(  # noqa: D102 - documented in the table
        self,
        parameters,
        gradients,
        mean_square,
        scratch,
        learning_rate: float,
        decay: float,
        epsilon: float,
    ) -> None:
        self.mult_st(decay, mean_square, mean_square)
        # (1 - decay) * g * g, left to right as torch.optim: g * g first
        # overflowed from |g| near 1.8e19 in float32 (256 in float16), and
        # the infinite mean square stopped the parameter for good
        self.mult_st(1.0 - decay, gradients, scratch)
        self.mult_add_tt(scratch, gradients, mean_square)
        self.sqrt_t(mean_square, scratch)
        self.add_st(epsilon, scratch, scratch)
        self.divide_tt(gradients, scratch, scratch)
        self.mult_add_st(-learning_rate, scratch, parameters)

    def adam_update(  # noqa: D102 - documented in the table
        self,
        parameters,
        gradients,
        m,
        v,
        mask,
        scratch,
        learning_rate: float,
        beta1: float,
        beta2: float,
        epsilon: float,
        step: int,
        weight_decay: float,
    ) -> None:
        decay = learning_rate * weight_decay
        if decay != 0.0:
            if mask is None:
                self.mult_st(1.0 - decay, parameters, parameters)
            else:
                self.mult_tt(parameters, mask, scratch)
                self.mult_add_st(-decay, scratch, parameters)
        correction1 = 1.0 - beta1**step
        root_correction2 = math.sqrt(1.0 - beta2**step)
        self.mult_st(beta1, m, m)
        self.mult_add_st(1.0 - beta1, gradients, m)
        self.mult_st(beta2, v, v)
        # (1 - beta2) * g * g, left to right as torch.optim (see above)
        self.mult_st(1.0 - beta2, gradients, scratch)
        self.mult_add_tt(scratch, gradients, v)
        self.sqrt_t(v, scratch)
        self.mult_st(1.0 / root_correction2, scratch, scratch)
        self.add_st(epsilon, scratch, scratch)
        self.divide_tt(m, scratch, scratch)
        self.mult_add_st(-learning_rate / correction1, scratch, parameters)


install_contract(Handler, OPS)

# The optional keyword-only parameters of ops (added after Brainstorm 0.5).
_OPTIONAL_KEYWORDS = {
    op.name: keywords
    for op in OPS.values()
    if (
        keywords := tuple(
            name
            for name, p in signature(op).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY
        )
    )
}


# The optional keywords that change an op's results: a handler whose op
# takes ``**kwargs`` must name them to get them (the others are hints).
_NAMED = ('activation', 'overwrite_in_deltas')


def _operand_position(name: str, operand: str) -> int:
    """The position of the op's ``operand`` among its arguments after self."""
    return list(signature(OPS[name]).parameters).index(operand) - 1


def _argument(args: tuple, kwargs: dict, position: int, name: str):
    """The argument passed at ``position`` or as the keyword ``name``."""
    return args[position] if len(args) > position else kwargs[name]


def _accepting(name: str, method, keywords: tuple[str, ...]):
    """``method``, the op ``name``, accepting the keywords ``keywords``.

    Hints are ignored; an ``activation`` is applied after the call to the
    operand the op writes, as ``inplace_act_func[activation]`` on a 2-D
    view; ``overwrite_in_deltas=True`` zeroes ``in_deltas`` before the call.
    """
    operand, position = None, 0
    if 'activation' in keywords:  # the written operand, its position after self
        (operand,) = OPS[name].writes
        position = _operand_position(name, operand)
    zeroed = None
    if 'overwrite_in_deltas' in keywords:
        zeroed = _operand_position(name, 'in_deltas')

    @functools.wraps(method)
    def op(self, *args, **kwargs):
        activate = None
        if operand is not None:
            activate = self._activation_after(kwargs.pop('activation', 'linear'))
        if (
            zeroed is not None
            and kwargs.pop('overwrite_in_deltas', False)
            and not kwargs.get('skip_in_deltas')
        ):
            self.fill(_argument(args, kwargs, zeroed, 'in_deltas'), 0.0)
        for keyword in keywords:
            kwargs.pop(keyword, None)
        result = method(self, *args, **kwargs)
        if activate is not None:
            activate(_argument(args, kwargs, position, operand))
        return result

    # the base op's signature, so the wrapped op reads like every other
    op.__signature__ = inspect.signature(  # type: ignore[attr-defined]
        Handler.__dict__[name]
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
    name = getattr(f_deriv, '__name__', '').removesuffix('_deriv')
    if name in NEEDS_INPUT:
        raise ValueError(
            f'inplace_act_func_deriv: the derivative of {name!r} needs '
            f'the input x; call act_func_deriv[{name!r}](x, y, dy, dx).'
        )
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
