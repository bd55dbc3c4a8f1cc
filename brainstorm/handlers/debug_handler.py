"""A handler that checks every op call before passing it on to another one.

Use ``DebugHandler(NumpyHandler(np.float64))`` to test layers: it catches
wrong shapes, wrong argument kinds, non-finite results, and any code that
touches memory without going through handler ops.

Its ops are made from the op table (:mod:`brainstorm.handlers.ops`): each
checks its operands' kinds (:data:`~brainstorm.handlers.op_spec.KINDS`),
then their shapes by the row's check rule: the op-name grammar's rules
(``same``, ``mv``, ``dot``) for most, ``_check_<rule>`` methods below else,
then the overlaps of its operands (``debug_overlaps.py``).
"""

from __future__ import annotations

import math

import numpy as np

from brainstorm.arguments import Arg, Instance
from brainstorm.describable import get_description
from brainstorm.handlers import debug_attention as _attention_checks
from brainstorm.handlers.base_handler import Handler
from brainstorm.handlers.debug_array import (
    KIND_CHECKS,
    DebugArray,
    DebugHandlerError,
    _check_dtype,
    _check_whole_numbers,
    _checked_fixed_block,
    _is_int,
    _is_scalar,
    _unwrap,
    assert_debug_arrays,
    assert_is_scalar,
    assert_is_shape,
    assert_shapes_equal,
    check_for_inf_or_nan,
)
from brainstorm.handlers.debug_overlaps import expect_no_overlap
from brainstorm.handlers.debug_writes import ReadOnlyBlocks
from brainstorm.handlers.numpy_handler import NumpyHandler, _sequence_lengths
from brainstorm.handlers.ops import OPS, Op, install_ops, signature
from brainstorm.shapes import padding_sides

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

# op-table sections returning values or reading raw memory: no finite check
_UNCHECKED_SECTIONS = ('allocation', 'checks')


class DebugHandler(ReadOnlyBlocks, Handler):
    """Checks the arguments of every op, then runs it on a wrapped handler.

    Arrays are :class:`DebugArray` objects around the wrapped handler's
    arrays. Before each op it checks the contract of the :class:`Handler`
    docstrings (argument kinds, shapes, scalar types, flags, axes, window
    and stride tuples, padding, value ranges, and overlaps: a written
    operand shares memory with another operand only by being the very same
    array where the op allows it: ``debug_overlaps.py``) and raises
    :class:`DebugHandlerError` naming the op, the argument, what was
    expected and what was received. After each op it raises ``ValueError``
    if any array or scalar argument holds NaN or Inf. The allocation and
    conversion ops and ``is_fully_finite`` skip the finiteness check. In a
    :meth:`~ReadOnlyBlocks.read_only` block, writes into its arrays fail.

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

    def __repr__(self) -> str:
        """``DebugHandler(NumpyHandler(dtype=np.float64))``."""
        return f'DebugHandler({self.handler!r})'

    def __describe__(self) -> dict:
        """``{'@type': 'DebugHandler', 'handler': <inner description>}``."""
        return {'@type': 'DebugHandler', 'handler': get_description(self.handler)}

    def __init_from_description__(self, description: dict) -> None:
        """Finish recreating: ``self.handler`` is already rebuilt."""
        type(self).__init__(self, self.handler)

    def keeps_conv_columns(self, out_cells: int) -> bool:  # the wrapped one's
        keeps = getattr(self.handler, 'keeps_conv_columns', None)  # 0.5's: none
        return bool(keeps(out_cells)) if keeps is not None else False

    def network_pass(self, layer_types):  # the wrapped handler's, if it has one
        return getattr(self.handler, 'network_pass', super().network_pass)(layer_types)

    def fixed_operand(self, array):  # the wrapped handler's, checked
        return _checked_fixed_block(self.handler, super().fixed_operand, array)

    # ------------------------------------------------------- every op call

    def _call(self, op: Op, args: dict):
        """Check the arguments of ``op``, run it on the wrapped handler."""
        for name, kind in op.kinds.items():
            self._expect_kind(op, name, kind, args[name])
        self._expect_writable(op, args)  # in a read_only block
        getattr(self, f'_check_{op.rule}')(op.name, args)
        expect_no_overlap(op, args)  # the aliases the row allows, no others
        parameters = signature(op).parameters
        positional = [
            _unwrap(v)
            for n, v in args.items()
            if parameters[n].kind is not parameters[n].KEYWORD_ONLY
        ]
        # keyword-only options only when not at their defaults, so that a
        # wrapped handler written against the 0.5 signatures still works
        keywords = {
            n: _unwrap(v)
            for n, v in args.items()
            if parameters[n].kind is parameters[n].KEYWORD_ONLY
            and v is not parameters[n].default
        }
        result = getattr(self.handler, op.name)(*positional, **keywords)
        if op.section in _UNCHECKED_SECTIONS:
            creates = not any(isinstance(v, DebugArray) for v in args.values())
            return DebugArray(result) if creates else result
        for name, value in args.items():
            if parameters[name].kind is not parameters[name].KEYWORD_ONLY:
                self._expect_finite(op.name, name, value)
        return None

    # -------------------------------------------------------- kind checks

    @staticmethod
    def _fail(op: str, message: str):
        raise DebugHandlerError(f'DebugHandler.{op}: {message}')

    def _expect_kind(self, op: Op, name: str, kind: str, value) -> None:
        if kind == 'array':
            if value is None and name in op.optional:
                return
            if not isinstance(value, DebugArray):
                self._fail(
                    op.name,
                    f"argument '{name}' must be a DebugArray (created by this "
                    f'handler). Received: {type(value).__name__}',
                )
            _check_dtype(op.name, name, value, self.dtype)
        elif kind in KIND_CHECKS:
            valid, expected = KIND_CHECKS[kind]
            if not valid(value):
                received = f'{type(value).__name__} {value!r}'
                if kind in ('pair', 'padding'):
                    received = repr(value)
                self._fail(
                    op.name,
                    f"argument '{name}' must be {expected}. Received: {received}",
                )

    def _expect_finite(self, op: str, name: str, value) -> None:
        if isinstance(value, DebugArray):
            finite = self.handler.is_fully_finite(value.array)
        elif _is_scalar(value):
            finite = math.isfinite(value)
        else:
            return
        if not finite:
            raise ValueError(
                f"DebugHandler.{op}: argument '{name}' holds NaN or Inf after the op."
            )

    # ------------------------------------------------------- shape checks

    def _expect_same_shape(self, op: str, **arrays) -> None:
        (first, ref), *others = arrays.items()
        for name, value in others:
            if value.shape != ref.shape:
                self._fail(
                    op,
                    f"argument '{name}' must have the shape {ref.shape} of "
                    f"'{first}'. Received: shape {value.shape}",
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

    def _expect_ids(self, op: str, name: str, v, limit: int, low=0, what='ids'):
        values = self.handler.get_numpy_copy(v.array)
        _check_whole_numbers(op, name, values, low, limit, what)

    # ------------------------------------ check rules of the op-name grammar

    def _check_same(self, op: str, args: dict) -> None:
        arrays = {n: v for n, v in args.items() if isinstance(v, DebugArray)}
        if len(arrays) > 1:
            self._expect_same_shape(op, **arrays)

    def _check_mv(self, op: str, args: dict, allow_full: bool = False) -> None:
        m, v, out = args['m'], args['v'], args['out']
        self._expect_ndim(op, 'm', m, 2)
        self._expect_same_shape(op, m=m, out=out)
        rows, cols = m.shape
        shapes = [(1, cols), (rows, 1)] + ([m.shape] if allow_full else [])
        self._expect_shape(op, 'v', v, shapes)

    def _check_mv_full(self, op: str, args: dict) -> None:
        self._check_mv(op, args, allow_full=True)

    def _check_dot(self, op: str, args: dict) -> None:
        a, b, out = args['a'], args['b'], args['out']
        for name in ('a', 'b', 'out'):
            self._expect_ndim(op, name, args[name], 2)
        a_shape = a.shape[::-1] if args['transa'] else a.shape
        b_shape = b.shape[::-1] if args['transb'] else b.shape
        if a_shape[1] != b_shape[0]:
            self._fail(
                op,
                f'op(a) has shape {a_shape} and op(b) {b_shape}; '
                f'their inner dimensions must match.',
            )
        self._expect_shape(op, 'out', out, [(a_shape[0], b_shape[1])])

    # ------------------------------------------- check rules of single ops

    def _check_shape(self, op: str, args: dict) -> None:
        """Allocation: the kind check of ``shape`` says it all."""

    def _check_numpy(self, op: str, args: dict) -> None:
        mem, arr = args.get('mem'), args['arr']
        if mem is not None and arr.shape != mem.shape:
            self._fail(
                op,
                f"argument 'arr' must have the shape {mem.shape} of 'mem'. "
                f'Received: shape {arr.shape}',
            )

    def _check_gaussian(self, op: str, args: dict) -> None:
        if args['std'] < 0:
            self._fail(op, f"argument 'std' must be >= 0. Received: {args['std']}")

    def _check_probability(self, op: str, args: dict) -> None:
        probability = args['probability']
        if not 0 <= probability <= 1:
            self._fail(
                op, f"argument 'probability' must be in [0, 1]. Received: {probability}"
            )

    def _check_clip(self, op: str, args: dict) -> None:
        self._check_same(op, args)
        if args['a_min'] > args['a_max']:
            self._fail(
                op,
                f'a_min must be <= a_max. Received: a_min={args["a_min"]}, '
                f'a_max={args["a_max"]}',
            )

    def _check_binarize(self, op: str, args: dict) -> None:
        v, out = args['v'], args['out']
        self._expect_ndim(op, 'out', out, 2)
        self._expect_shape(op, 'v', v, [(out.shape[0], 1)])
        self._expect_ids(op, 'v', v, out.shape[1])

    def _check_broadcast(self, op: str, args: dict) -> None:
        a, axis, out = args['a'], args['axis'], args['out']
        if not (_is_int(axis) and 0 <= axis < len(out.shape)):
            self._fail(
                op,
                f"argument 'axis' must be an int in [0, {len(out.shape)}). "
                f'Received: {axis!r}',
            )
        expected = out.shape[:axis] + (1,) + out.shape[axis + 1 :]
        self._expect_shape(op, 'a', a, [expected])

    def _check_index(self, op: str, args: dict) -> None:
        m, v, out = args['m'], args['v'], args['out']
        self._expect_ndim(op, 'm', m, 2)
        self._expect_shape(op, 'v', v, [(m.shape[0], 1)])
        self._expect_shape(op, 'out', out, [(m.shape[0], 1)])
        self._expect_ids(op, 'v', v, m.shape[1])

    def _check_rows_by_id(self, op: str, args: dict) -> None:
        m, v, out = args['m'], args['v'], args['out']
        table, rows = (m, out) if op.startswith('gather') else (out, m)
        self._expect_ndim(op, 'm', m, 2)
        self._expect_shape(op, 'v', v, [(rows.shape[0], 1)])
        self._expect_shape(op, 'out', out, [(out.shape[0], m.shape[1])])
        self._expect_ids(op, 'v', v, table.shape[0])

    def _check_merge(self, op: str, args: dict) -> None:
        a, b, out = args['a'], args['b'], args['out']
        self._expect_ndim(op, 'b', b, len(a.shape))
        self._expect_shape(op, 'b', b, [a.shape[:-1] + b.shape[-1:]])
        merged = a.shape[:-1] + (a.shape[-1] + b.shape[-1],)
        self._expect_shape(op, 'out', out, [merged])

    def _check_softmax(self, op: str, args: dict) -> None:
        self._expect_ndim(op, 'm', args['m'], 2)
        self._check_same(op, args)

    def _check_split(self, op: str, args: dict) -> None:
        x, out_a, out_b = args['x'], args['out_a'], args['out_b']
        self._expect_ndim(op, 'out_a', out_a, len(x.shape))
        self._expect_shape(op, 'out_a', out_a, [x.shape[:-1] + out_a.shape[-1:]])
        rest = x.shape[-1] - out_a.shape[-1]
        self._expect_shape(op, 'out_b', out_b, [x.shape[:-1] + (rest,)])

    def _check_sum(self, op: str, args: dict) -> None:
        a, axis, out = args['a'], args['axis'], args['out']
        if axis is None:
            if out.size != 1:
                self._fail(
                    op,
                    f"argument 'out' must have exactly one element for "
                    f'axis=None. Received: shape {out.shape}',
                )
            return
        if not (_is_int(axis) and len(a.shape) in (1, 2) and 0 <= axis < len(a.shape)):
            self._fail(
                op,
                f"argument 'axis' must be None or an axis of the 1-D/2-D 'a'. "
                f'Received: axis={axis!r} for shape {a.shape}',
            )
        kept = a.shape[:axis] + (1,) + a.shape[axis + 1 :]
        dropped = a.shape[:axis] + a.shape[axis + 1 :]
        self._expect_shape(op, 'out', out, [dropped, kept])

    def _image_geometry(self, op: str, args: dict, kernel: tuple) -> tuple:
        """Check the input images; return the expected ``(N, OH, OW)``."""
        inputs, stride = args['inputs'], args['stride']
        top, bottom, left, right = padding_sides(args['padding'])
        self._expect_ndim(op, 'inputs', inputs, 4)
        n, h, w = inputs.shape[:3]
        padded = (h + top + bottom, w + left + right)
        oh, ow = ((p - k) // s + 1 for p, k, s in zip(padded, kernel, stride))
        if oh < 1 or ow < 1:
            self._fail(op, f'window {kernel} does not fit the padded input {padded}')
        return n, oh, ow

    def _check_deltas(self, op: str, args: dict, *pairs: tuple[str, str]) -> None:
        """Each delta (second name) has the shape of its value, if present."""
        for value, delta in pairs:
            if delta in args:
                self._expect_same_shape(op, **{value: args[value], delta: args[delta]})

    def _check_conv(self, op: str, args: dict) -> None:
        inputs, weights = args['inputs'], args['weights']
        self._expect_ndim(op, 'weights', weights, 4)
        n, oh, ow = self._image_geometry(op, args, weights.shape[1:3])
        channels, filters = inputs.shape[3], weights.shape[0]
        if weights.shape[3] != channels:
            self._fail(
                op,
                f"argument 'weights' must have {channels} input channels (last "
                f'axis) like inputs. Received: shape {weights.shape}',
            )
        outputs = 'outputs' if 'outputs' in args else 'out_deltas'
        self._expect_shape(op, outputs, args[outputs], [(n, oh, ow, filters)])
        self._check_deltas(op, args, ('inputs', 'in_deltas'))
        self._check_deltas(op, args, ('weights', 'weight_deltas'))
        bias = 'bias' if 'bias' in args else 'bias_deltas'
        self._expect_shape(op, bias, args[bias], [(filters,)])
        if args['columns'] is not None:
            cells = (n, oh, ow, math.prod(weights.shape[1:]))
            self._expect_shape(op, 'columns', args['columns'], [cells])

    def _check_pool(self, op: str, args: dict) -> None:
        n, oh, ow = self._image_geometry(op, args, args['window'])
        channels = args['inputs'].shape[3]
        self._expect_shape(op, 'outputs', args['outputs'], [(n, oh, ow, channels)])
        self._check_deltas(op, args, ('outputs', 'argmax'), ('outputs', 'out_deltas'))
        self._check_deltas(op, args, ('inputs', 'in_deltas'))
        if op == 'maxpool2d_backward_batch':  # where the deltas go: in the image
            cells = math.prod(args['inputs'].shape[1:])
            what = 'flat in-image indices (-1: no cell)'
            self._expect_ids(op, 'argmax', args['argmax'], cells, -1, what)

    def _check_reverse_time(self, op: str, args: dict) -> None:
        a, mask = args['a'], args['mask']
        self._expect_ndim(op, 'a', a, 3)
        self._expect_same_shape(op, a=a, out=args['out'])
        if mask is not None:
            self._expect_shape(op, 'mask', mask, [a.shape[:2] + (1,)])
            _sequence_lengths(op, self.handler.get_numpy_copy(mask.array))

    def _check_lstm(self, op: str, args: dict) -> None:
        state = 'c' if 'c' in args else 'dc'
        self._expect_ndim(op, state, args[state], 2)
        b, s = args[state].shape
        for name, value in args.items():
            if name in ('pi', 'pf', 'po'):
                self._expect_shape(op, name, value, [(1, s)])
            elif name in _FOUR_GATES:
                self._expect_shape(op, name, value, [(b, 4 * s)])
            elif name != 'activation':
                self._expect_shape(op, name, value, [(b, s)])

    # the attention ops' checks (brainstorm/handlers/debug_attention.py)
    _check_batch_dot = _attention_checks.check_batch_dot
    _check_masked_softmax = _attention_checks.check_masked_softmax


#: the operands of the LSTM step ops that hold the four gates side by side
_FOUR_GATES = ('gates', 'gate_outputs', 'factors', 'd_gates', 'd_gates_next')


install_ops(DebugHandler, OPS.values(), DebugHandler._call)
