"""Which operands of an op call may share memory: the debug handler's check.

The Handler contract lets the output of an elementwise op be the very same
array as an input ("other partial overlaps are not supported"), some rows
narrow that (``softmax_deriv_t``: ``dx`` may be ``dy``, not ``y``) and the
``disjoint`` rows forbid any overlap. :func:`expect_no_overlap` refuses,
for every op call, a written operand that shares memory with another
array operand unless it is exactly that array (same data pointer, shape
and strides) and the row allows it (:attr:`~brainstorm.handlers.op_spec.Op.aliases`).
Written operands never overlap each other.

The cost per call is a bounds test (``np.may_share_memory``) per pair of a
written and another operand; the exact ``np.shares_memory`` runs only
where the bounds overlap. Arrays other than NumPy's (a GPU handler's) are
not checked.
"""

from __future__ import annotations

import numpy as np

from brainstorm.handlers.debug_array import DebugArray, DebugHandlerError
from brainstorm.handlers.op_spec import Op

__all__ = ['expect_no_overlap', 'same_array']

# op name -> (the row, its written array operands, all its array operands,
# the aliases it allows); made at the first call of each op
_PLANS: dict[str, tuple[Op, tuple[str, ...], tuple[str, ...], dict]] = {}


def _plan(op: Op) -> tuple[Op, tuple[str, ...], tuple[str, ...], dict]:
    plan = _PLANS.get(op.name)
    if plan is None or plan[0] is not op:  # another row of that name: anew
        arrays = tuple(n for n, kind in op.kinds.items() if kind == 'array')
        writes = tuple(n for n in op.writes if n in arrays)
        plan = _PLANS[op.name] = (op, writes, arrays, op.aliases)
    return plan


def _start(a: np.ndarray) -> int:
    return a.__array_interface__['data'][0]


def same_array(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether ``a`` and ``b`` are one array: data pointer, shape and strides."""
    return a is b or (
        a.shape == b.shape and a.strides == b.strides and _start(a) == _start(b)
    )


def _describe(a: np.ndarray) -> str:
    return f'shape {a.shape}, strides {a.strides}'


def expect_no_overlap(op: Op, args: dict) -> None:
    """Raise DebugHandlerError if a written operand overlaps another operand.

    Allowed: a written operand that is the very same array as an operand it
    may alias by ``op.aliases``. Everything else that shares memory with a
    written operand is refused, naming the op, both operands, what is
    allowed and what was received.

    Args:
        op: the row of the op called.
        args: its arguments by name (DebugArrays for the array operands).
    """
    _, writes, arrays, allowed = _plan(op)
    for written in writes:
        w = args[written]
        if not isinstance(w, DebugArray) or not isinstance(w.array, np.ndarray):
            continue
        for name in arrays:
            other = args[name]
            if name == written or not isinstance(other, DebugArray):
                continue
            a = other.array
            if not isinstance(a, np.ndarray) or not np.may_share_memory(w.array, a):
                continue
            same = same_array(w.array, a)
            if same and name in allowed.get(written, ()):
                continue
            if same or np.shares_memory(w.array, a):
                _refuse(op, written, name, w.array, a, same, allowed)


def _refuse(op: Op, written: str, name: str, w, a, same: bool, allowed: dict):
    if op.disjoint:  # the contract: "must not overlap"
        rule = 'must not overlap'
    elif name in op.writes:
        rule = 'written operands must not overlap each other'
    elif allowed.get(written):
        rule = f'{written!r} may be only the very same array as ' + ' or '.join(
            repr(n) for n in allowed[written]
        )
        rule += ', and overlap no operand otherwise'
    else:
        rule = f'{written!r} must overlap no other operand'
    if same:
        received = f'{written!r} is {name!r} ({_describe(w)})'
    else:
        offset = _start(w) - _start(a)
        received = (
            f'{written!r} ({_describe(w)}) partly overlaps {name!r} '
            f'({_describe(a)}), {offset:+d} bytes from its start'
        )
    raise DebugHandlerError(
        f'DebugHandler.{op.name}: {written!r} overlaps {name!r}: {rule}. '
        f'Received: {received}'
    )
