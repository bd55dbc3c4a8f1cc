"""Declared layer arguments: type, default, constraint and description.

A layer class lists its keyword arguments once, in ``declared_kwargs``::

    declared_kwargs = {
        'drop_prob': Kwarg(FloatIn(0, 1, include_high=False), default=0.5,
                           description='probability of dropping a unit'),
    }

These are declarations of :mod:`brainstorm.arguments`, the one language
every class of the library declares its arguments in: :class:`Kwarg` is an
:class:`~brainstorm.arguments.Arg` (and ``Arg(Real(0, 1), default=0.5,
doc='...')`` works as well), :data:`REQUIRED` is the same object as
:data:`brainstorm.arguments.REQUIRED`, and each constraint here is a
:class:`~brainstorm.arguments.Check` (``FloatIn`` is
:class:`~brainstorm.arguments.Real`, ``PositiveInt`` is ``Int(1)``,
``OneOf`` is :class:`~brainstorm.arguments.Choice`), named as layer
messages have always named them.

Validation (at construction and at instantiation), error messages, the layer
listing of :func:`brainstorm.layers.describe_layers` and the docs' layer
reference all come from these declarations.
"""

from __future__ import annotations

import math
from typing import Any

from brainstorm.arguments import REQUIRED, Arg, Check, Choice, Int, Real
from brainstorm.arguments.checks import MAX_INT, _is_int
from brainstorm.arguments.declaring import check_value
from brainstorm.errors import LayerValidationError
from brainstorm.handlers.base_handler import (
    ACTIVATION_ALIASES,
    ACTIVATION_NAMES,
    NEEDS_INPUT,
)

__all__ = [
    'REQUIRED',
    'Kwarg',
    'Constraint',
    'PositiveInt',
    'NonNegativeInt',
    'PositiveIntOrTuple',
    'PairOfPositiveInts',
    'ImagePadding',
    'FloatIn',
    'Number',
    'OneOf',
    'Activation',
    'ShapeDict',
    'ACTIVATIONS',
]

#: The activation names (the handler's one list of activation ops).
ACTIVATIONS = ACTIVATION_NAMES

#: Largest size accepted (beyond it NumPy fails without naming the layer).
MAX_SIZE = MAX_INT

#: The base of the layer constraints: the checks of
#: :mod:`brainstorm.arguments` (``expected``, ``example``,
#: ``invalid_examples``, ``normalize``).
Constraint = Check


def _is_size(value) -> bool:
    """An int (not bool) of at most ``MAX_SIZE``."""
    return _is_int(value) and value <= MAX_SIZE


class PositiveInt(Int):
    """An int greater than 0 (and at most ``MAX_SIZE``): ``Int(1)``."""

    def __init__(self) -> None:
        super().__init__(1)
        self.example = 2


class NonNegativeInt(Int):
    """An int of at least 0 (and at most ``MAX_SIZE``): ``Int(0)``."""

    def __init__(self) -> None:
        super().__init__(0)


class PositiveIntOrTuple(Constraint):
    """A positive int, or a non-empty tuple or list of them (made a tuple)."""

    expected = 'a positive int or a tuple of positive ints'
    example = 2
    invalid_examples = (0, -3, (2, 0), (), 'x', 2.5, 10**40, (2, 10**40))

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if _is_size(value) and value > 0:
            return int(value)
        if (
            isinstance(value, (tuple, list))
            and value
            and all(_is_size(v) and v > 0 for v in value)
        ):
            return tuple(int(v) for v in value)
        raise ValueError


class PairOfPositiveInts(Constraint):
    """Two positive ints, as a tuple or list (made a tuple)."""

    expected = 'a pair (tuple or list of 2) of positive ints'
    example = (2, 2)
    invalid_examples = (3, (2,), (2, 0), (1, 2, 3), ('a', 1))

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if (
            isinstance(value, (tuple, list))
            and len(value) == 2
            and all(_is_size(v) and v > 0 for v in value)
        ):
            return tuple(int(v) for v in value)
        raise ValueError


class ImagePadding(Constraint):
    """The padding of an image layer.

    An int ``>= 0`` (that many cells on every side), ``'same'``,
    ``'valid'`` (no padding) or a tuple or list ``(top, bottom, left,
    right)`` of ints ``>= 0`` (made a tuple).
    """

    expected = (
        "an int >= 0, 'same', 'valid' or a tuple (top, bottom, left, right) "
        'of ints >= 0'
    )
    example = 'same'
    invalid_examples = (-1, 'full', (1, 1), (1, 1, 1, -1), 2.5, True, 10**40)

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if isinstance(value, str) and value in ('same', 'valid'):
            return value
        if _is_size(value) and value >= 0:
            return int(value)
        if (
            isinstance(value, (tuple, list))
            and len(value) == 4
            and all(_is_size(v) and v >= 0 for v in value)
        ):
            return tuple(int(v) for v in value)
        raise ValueError


class FloatIn(Real):
    """A finite real number in an interval (ints accepted, made floats).

    The :class:`~brainstorm.arguments.Real` check, named as layers have
    always named it (``'a float in [0, 1)'``).
    """

    def __init__(
        self,
        low: float = -math.inf,
        high: float = math.inf,
        include_low: bool = True,
        include_high: bool = True,
    ) -> None:
        super().__init__(low, high, include_low, include_high)
        if math.isinf(low) and math.isinf(high):
            self.expected = 'a finite float'
        else:
            # an infinite bound is never included: the value must be finite
            left = '[' if include_low and not math.isinf(low) else '('
            right = ']' if include_high and not math.isinf(high) else ')'
            self.expected = f'a float in {left}{low}, {high}{right}'


class Number(FloatIn):
    """Any finite real number."""


class OneOf(Choice):
    """One of the given choices, compared with ``==``.

    Args:
        *choices: the accepted values; the first is the example.
    """

    def normalize(self, value: Any) -> Any:
        """Return the choice equal to ``value``; raise ValueError if none is."""
        for choice in self.choices:
            try:
                if value == choice:
                    return choice
            except (TypeError, ValueError):  # an array compared to a str
                continue
        raise ValueError


class Activation(OneOf):
    """The name of an activation function (an alias gives its name).

    Args:
        needs_input_ok: whether the activations of
            :data:`~brainstorm.handlers.base_handler.NEEDS_INPUT` (whose
            derivative needs the input, e.g. ``'gelu'``) are accepted: only
            for layers that keep their input.
    """

    def __init__(self, needs_input_ok: bool = False):
        names = [n for n in ACTIVATIONS if needs_input_ok or n not in NEEDS_INPUT]
        super().__init__(*names, *ACTIVATION_ALIASES)
        if not needs_input_ok:
            self.expected += (
                f' ({", ".join(map(repr, NEEDS_INPUT))} only in Elementwise)'
            )

    def normalize(self, value: Any) -> Any:
        """Return the activation name of ``value``; raise ValueError if none."""
        name = super().normalize(value)
        return ACTIVATION_ALIASES.get(name, name)


class ShapeDict(Constraint):
    """A dict of output names to shapes: ``('T', 'B')`` or ``'B'``, then positive ints.

    The names must be identifiers; the result maps them to tuples.
    """

    expected = "a dict of output names to shapes like ('T', 'B', 784) or ('B', 10)"
    example = {'default': ('T', 'B', 3)}
    invalid_examples: Any = (
        {},
        {'default': (3,)},
        {'default': ('T', 'B', 0)},
        {'default': ('T', 'B')},
        {'a b': ('T', 'B', 2)},
        [('T', 'B', 3)],
    )

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if not isinstance(value, dict) or not value:
            raise ValueError
        result = {}
        for name, shape in value.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError
            if not isinstance(shape, (tuple, list)):
                raise ValueError
            shape = tuple(shape)
            lead = 2 if shape[:2] == ('T', 'B') else 1 if shape[:1] == ('B',) else 0
            features = shape[lead:]
            if (
                lead == 0
                or not features
                or not all(_is_size(f) and f > 0 for f in features)
            ):
                raise ValueError
            result[name] = shape[:lead] + tuple(int(f) for f in features)
        return result


class Kwarg(Arg):
    """The declaration of one layer argument: an :class:`~brainstorm.arguments.Arg`.

    Layers may declare with ``Arg(check, default=..., doc=...)`` just as
    well; ``Kwarg`` keeps Brainstorm 0.5's argument names.

    Args:
        constraint: the check the value must pass (any check of
            :mod:`brainstorm.arguments`).
        default: the value used when the argument is absent, or
            :data:`REQUIRED`. ``None`` is always accepted when it is the
            default (meaning "decided by the layer", e.g. size from input).
        description: one line for error messages and the docs.
    """

    def __init__(
        self, constraint: Check, default: object = REQUIRED, description: str = ''
    ) -> None:
        super().__init__(constraint, default=default, doc=description)

    @property
    def constraint(self) -> Check:
        """The check (``check``)."""
        return self.check

    @property
    def description(self) -> str:
        """The one-line description (``doc``)."""
        return self.doc

    def resolve(self, layer_desc: str, name: str, kwargs: dict) -> Any:
        """The normalised value of argument ``name`` in ``kwargs``.

        Raises:
            LayerValidationError: naming the layer, argument, what was
                expected and what was received.
        """
        return resolve_kwarg(self, layer_desc, name, kwargs)

    def __repr__(self):
        return f'Kwarg({self.check.expected}, default={self.default!r}, {self.doc!r})'


def resolve_kwarg(arg: Arg, layer_desc: str, name: str, kwargs: dict) -> Any:
    """The normalised value of the declared layer argument ``name``.

    Args:
        arg: its declaration (a :class:`Kwarg` or any
            :class:`~brainstorm.arguments.Arg`).
        layer_desc: the layer, first in messages (``"LeakyRel 'Leaky'"``).
        name: the argument's name.
        kwargs: the arguments given.

    Raises:
        LayerValidationError: naming the layer, argument, what was
            expected and what was received.
    """
    if name not in kwargs:
        if arg.default is REQUIRED:
            raise LayerValidationError(
                f'{layer_desc}: argument {name} is required ({arg.check.expected}).'
            )
        return arg.default
    return check_value(
        layer_desc, None, name, arg, kwargs[name], error=LayerValidationError
    )
