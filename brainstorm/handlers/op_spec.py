"""What a row of the op table is, and the methods made from rows.

:class:`Op` is one row of :data:`brainstorm.handlers.ops.OPS`;
:func:`signature` reads its parameters, :func:`op_method` makes a method of
it and :func:`install_contract` gives the base handler its abstract ops.
"""

from __future__ import annotations

import abc
import ast
import inspect
from collections.abc import Callable, Iterable, Mapping
from typing import Any, NamedTuple

__all__ = [
    'Op',
    'KINDS',
    'grammar_check',
    'signature',
    'op_method',
    'install_ops',
    'install_contract',
]

#: Parameter name -> operand kind, for the parameters that are no arrays:
#: ``s``, ``val``, ``mean``, ``std``, ``probability``, ``a_min`` and
#: ``a_max`` are Python scalars (and so are the hyperparameters of the
#: update ops: ``learning_rate``, ``momentum``, ``decay``, ``epsilon``,
#: ``beta1``, ``beta2`` and ``weight_decay``), ``step`` (Adam's update
#: count, 1 at the first) a positive int, ``transa``, ``transb``,
#: ``skip_in_deltas``, ``overwrite_in_deltas`` and ``causal`` flags,
#: ``window`` and ``stride`` tuples of two positive ints, ``padding`` an
#: int ``>= 0`` (the same on every side) or a tuple ``(top, bottom, left,
#: right)`` of them, ``axis`` an axis, ``shape`` a shape tuple and ``arr``
#: a NumPy array. Every other parameter is an array of
#: the handler, in its dtype.
KINDS = {
    **dict.fromkeys(('s', 'val', 'mean', 'std', 'probability'), 'scalar'),
    **dict.fromkeys(('a_min', 'a_max'), 'scalar'),
    # the hyperparameters of the update ops
    **dict.fromkeys(
        ('learning_rate', 'momentum', 'decay', 'epsilon', 'beta1', 'beta2'), 'scalar'
    ),
    'weight_decay': 'scalar',
    'step': 'positive_int',
    **dict.fromkeys(
        ('transa', 'transb', 'skip_in_deltas', 'overwrite_in_deltas', 'causal'), 'flag'
    ),
    **dict.fromkeys(('window', 'stride'), 'pair'),
    'padding': 'padding',
    'activation': 'activation',
    'axis': 'axis',
    'shape': 'shape',
    'arr': 'numpy',
}


class Op(NamedTuple):
    """One op of the handler contract: a row of the op table."""

    #: the op name, following the grammar of the
    #: :class:`~brainstorm.handlers.base_handler.Handler` docstring
    name: str
    #: its parameters after ``self``, as written in a ``def`` (annotations,
    #: defaults and ``*`` for keyword-only ones included); every handler
    #: implements exactly this signature
    params: str
    #: the contract text, the docstring of the op on every handler
    doc: str
    #: the operands the op writes (all others are only read)
    writes: tuple[str, ...] = ('out',)
    #: whether an output may be the very same array as an input
    alias: bool = False
    #: whether the contract forbids any overlap of a written operand with
    #: another operand (``dot_mm``: "must not overlap"); the debug handler
    #: refuses such calls
    disjoint: bool = False
    #: pairs ``(written, operand)``: the written operand may be the very same
    #: array as that one (see ``aliases``); empty: derived from ``alias``
    may_be: tuple[tuple[str, str], ...] = ()
    #: the rule the debug handler checks the operands with; empty where the
    #: op-name grammar decides (:func:`grammar_check`)
    check: str = ''
    #: the return annotation (``''``: the op returns a value, unannotated)
    returns: str = 'None'
    #: array operands that may be None
    optional: tuple[str, ...] = ()
    #: False for the ops the base class implements itself
    abstract: bool = True
    #: the part of the handler files the op stands in
    section: str = ''

    @property
    def rule(self) -> str:
        """The check rule, ``check`` or else the one the name grammar gives."""
        return self.check or grammar_check(self.name)

    @property
    def aliases(self) -> dict[str, tuple[str, ...]]:
        """Written operand -> the operands it may be the very same array as.

        The row's ``may_be`` where it has one; else, for an ``alias`` row,
        every array operand the op only reads (the Handler contract: an
        output "may be the very same array as an input"); else none, and
        none for a ``disjoint`` row. A written operand is never allowed to
        be another written one, and no other overlap is allowed (the debug
        handler refuses it).
        """
        if self.disjoint:
            return {}
        pairs = self.may_be
        if not pairs and self.alias:
            read = [n for n, k in self.kinds.items() if k == 'array']
            pairs = tuple(
                (w, n) for w in self.writes for n in read if n not in self.writes
            )
        allowed: dict[str, tuple[str, ...]] = {}
        for written, name in pairs:
            if name not in self.writes:
                allowed[written] = allowed.get(written, ()) + (name,)
        return allowed

    @property
    def kinds(self) -> dict[str, str]:
        """Parameter name -> kind (``'array'`` unless :data:`KINDS` says)."""
        return {
            name: KINDS.get(name, 'array')
            for name in signature(self).parameters
            if name != 'self'
        }


def grammar_check(name: str) -> str:
    """The check rule the op-name grammar gives ``name`` ('' if none).

    ``_t``, ``_tt``, ``_st``, the activations and their derivatives:
    ``'same'``; ``_mv``: ``'mv'``; ``_mm``: ``'dot'``.
    """
    suffix = name.rsplit('_', 1)[-1]
    if suffix in ('t', 'tt', 'st', 'deriv') or '_' not in name:
        return 'same'
    return {'mv': 'mv', 'mm': 'dot'}.get(suffix, '')


_SIGNATURES: dict[str, inspect.Signature] = {}


def signature(op: Op) -> inspect.Signature:
    """The signature of ``op`` as a method (``self`` first), from ``params``."""
    known = _SIGNATURES.get(op.params + op.returns)
    if known is not None:
        return known
    returns = f' -> {op.returns}' if op.returns else ''
    tree = ast.parse(f'def _(self, {op.params}){returns}: pass').body[0]
    assert isinstance(tree, ast.FunctionDef)
    args = tree.args

    def parameter(arg, kind, default=None):
        return inspect.Parameter(
            arg.arg,
            kind,
            default=inspect.Parameter.empty
            if default is None
            else ast.literal_eval(default),
            annotation=inspect.Parameter.empty
            if arg.annotation is None
            else ast.unparse(arg.annotation),
        )

    positional = args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + args.defaults
    parameters = [
        parameter(arg, inspect.Parameter.POSITIONAL_OR_KEYWORD, default)
        for arg, default in zip(positional, defaults)
    ] + [
        parameter(arg, inspect.Parameter.KEYWORD_ONLY, default)
        for arg, default in zip(args.kwonlyargs, args.kw_defaults)
    ]
    result = inspect.Signature(
        parameters,
        return_annotation=inspect.Signature.empty
        if tree.returns is None
        else ast.unparse(tree.returns),
    )
    _SIGNATURES[op.params + op.returns] = result
    return result


def op_method(
    op: Op, call: Callable[[Any, Op, dict], Any], owner: type
) -> Callable[..., Any]:
    """A method with ``op``'s signature and docstring that runs ``call``.

    ``call(self, op, arguments)`` gets the arguments by parameter name,
    defaults filled in.

    Args:
        op: the table row.
        call: what the method does.
        owner: the class the method is for (its ``__qualname__`` and
            ``__module__`` are the class's).
    """
    sig = signature(op)
    positional = [
        name
        for name, p in sig.parameters.items()
        if p.kind is p.POSITIONAL_OR_KEYWORD and name != 'self'
    ]
    keyword_defaults = {
        name: p.default
        for name, p in sig.parameters.items()
        if p.kind is p.KEYWORD_ONLY
    }

    def method(self, *args, **kwargs):
        if not kwargs and len(args) == len(positional):  # the usual call
            arguments = dict(zip(positional, args)) | keyword_defaults
        else:
            bound = sig.bind(self, *args, **kwargs)
            bound.apply_defaults()
            arguments = dict(bound.arguments)
            del arguments['self']
        return call(self, op, arguments)

    method.__name__ = op.name
    method.__qualname__ = f'{owner.__qualname__}.{op.name}'
    method.__module__ = owner.__module__
    method.__doc__ = inspect.cleandoc(op.doc)
    method.__signature__ = sig  # type: ignore[attr-defined]
    return method


def _not_implemented(self, op: Op, arguments: dict) -> None:
    raise NotImplementedError(f'{type(self).__name__} does not implement {op.name}')


def install_ops(
    cls: type,
    ops: Iterable[Op],
    call: Callable[[Any, Op, dict], Any],
    abstract: bool = False,
) -> None:
    """Give ``cls`` a method made by :func:`op_method` for each op.

    Args:
        cls: the class, already created.
        ops: the rows of the ops.
        call: what every method does, ``call(self, op, arguments)``.
        abstract: whether the methods are abstract.
    """
    for op in ops:
        method = op_method(op, call, cls)
        if abstract:
            method.__isabstractmethod__ = True  # type: ignore[attr-defined]
        setattr(cls, op.name, method)
    abc.update_abstractmethods(cls)  # type: ignore[arg-type]


def install_contract(cls: type, ops: Mapping[str, Op]) -> None:
    """Give the base handler class an abstract method for every abstract op.

    Each has the op's signature and contract as docstring; calling one
    (through ``super()``) raises NotImplementedError. The ops the class
    defines itself (``linear``) get the table's docstring.

    Args:
        cls: the base class.
        ops: the op table, name -> row.
    """
    for op in ops.values():
        if not op.abstract:
            getattr(cls, op.name).__doc__ = inspect.cleandoc(op.doc)
    abstract = [op for op in ops.values() if op.abstract]
    install_ops(cls, abstract, _not_implemented, abstract=True)
