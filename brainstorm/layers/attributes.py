"""Declared layer arguments: type, default, constraint and description.

A layer class lists its keyword arguments once, in ``declared_kwargs``::

    declared_kwargs = {
        'drop_prob': Kwarg(FloatIn(0, 1, include_high=False), default=0.5,
                           description='probability of dropping a unit'),
    }

Validation (at construction and at instantiation), error messages, the layer
listing of :func:`brainstorm.layers.describe_layers` and the docs' layer
reference all come from these declarations.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from brainstorm.errors import LayerValidationError
from brainstorm.handlers.base_handler import ACTIVATION_NAMES

__all__ = [
    'REQUIRED',
    'Kwarg',
    'Constraint',
    'PositiveInt',
    'NonNegativeInt',
    'PositiveIntOrTuple',
    'PairOfPositiveInts',
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
MAX_SIZE = 2**31 - 1


class _Required:
    def __repr__(self):
        return 'REQUIRED'


REQUIRED = _Required()


def _is_int(value) -> bool:
    return bool(
        isinstance(value, (int, np.integer))
        and not isinstance(value, (bool, np.bool_))
        and value <= MAX_SIZE
    )


class Constraint:
    """Checks and normalises one argument value.

    Subclasses set ``expected`` (a phrase completing "must be ..."),
    ``example`` (a valid value) and ``invalid_examples`` (values that must be
    rejected; used by the tests), and implement ``normalize(value)``,
    returning the normalised value or raising ``ValueError``.
    """

    expected = 'valid'
    example: Any = None
    invalid_examples: tuple = ()

    def normalize(self, value):
        """Return the normalised ``value``; this base class accepts any value.

        Raises:
            ValueError: ``value`` violates the constraint (the caller turns it
                into a LayerValidationError naming the layer and argument).
        """
        return value

    def __repr__(self):
        return self.expected


class PositiveInt(Constraint):
    """An int greater than 0 (and at most ``MAX_SIZE``)."""

    expected = 'a positive int'
    example = 2
    invalid_examples = (0, -3, 2.5, 'x', True, 10**40)

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if not _is_int(value) or value <= 0:
            raise ValueError
        return int(value)


class NonNegativeInt(Constraint):
    """An int of at least 0 (and at most ``MAX_SIZE``)."""

    expected = 'an int >= 0'
    example = 0
    invalid_examples = (-1, 1.5, 'x', 10**40)

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if not _is_int(value) or value < 0:
            raise ValueError
        return int(value)


class PositiveIntOrTuple(Constraint):
    """A positive int, or a non-empty tuple or list of them (made a tuple)."""

    expected = 'a positive int or a tuple of positive ints'
    example = 2
    invalid_examples = (0, -3, (2, 0), (), 'x', 2.5, 10**40, (2, 10**40))

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if _is_int(value) and value > 0:
            return int(value)
        if (
            isinstance(value, (tuple, list))
            and value
            and all(_is_int(v) and v > 0 for v in value)
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
            and all(_is_int(v) and v > 0 for v in value)
        ):
            return tuple(int(v) for v in value)
        raise ValueError


class FloatIn(Constraint):
    """A real number in an interval (ints are accepted and converted)."""

    def __init__(self, low=-np.inf, high=np.inf, include_low=True, include_high=True):
        self.low, self.high = low, high
        self.include_low, self.include_high = include_low, include_high
        left = '[' if include_low else '('
        right = ']' if include_high else ')'
        if np.isinf(low) and np.isinf(high):
            self.expected = 'a finite float'
        else:
            self.expected = f'a float in {left}{low}, {high}{right}'
        if np.isfinite(low) and np.isfinite(high):
            self.example = (low + high) / 2
        elif np.isfinite(low):
            self.example = low + 1
        elif np.isfinite(high):
            self.example = high - 1
        else:
            self.example = 1.0
        invalid = ['x', float('nan'), None]
        if np.isfinite(low):
            invalid.append(low - 1.0)
            if not include_low:
                invalid.append(low)
        if np.isfinite(high):
            invalid.append(high + 1.0)
            if not include_high:
                invalid.append(high)
        self.invalid_examples = tuple(invalid)

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if (
            not isinstance(value, numbers.Real)
            or isinstance(value, bool)
            or not np.isfinite(value)
        ):
            raise ValueError
        too_low = value < self.low if self.include_low else value <= self.low
        too_high = value > self.high if self.include_high else value >= self.high
        if too_low or too_high:
            raise ValueError
        return float(value)


class Number(FloatIn):
    """Any finite real number."""


class OneOf(Constraint):
    """One of the given choices, compared with ``==``.

    Args:
        *choices: the accepted values; the first is the example.
    """

    def __init__(self, *choices):
        self.choices = choices
        self.expected = 'one of ' + ', '.join(repr(c) for c in choices)
        self.example = choices[0]
        self.invalid_examples = ('no such choice', 3)

    def normalize(self, value):
        """Return the normalised ``value``; raise ValueError if it does not fit."""
        if value not in self.choices:
            raise ValueError
        return value


class Activation(OneOf):
    """The name of an activation function."""

    def __init__(self):
        super().__init__(*ACTIVATIONS)


class ShapeDict(Constraint):
    """A dict of output names to shapes: ``('T', 'B')`` or ``'B'``, then positive ints.

    The names must be identifiers; the result maps them to tuples.
    """

    expected = "a dict of output names to shapes like ('T', 'B', 784) or ('B', 10)"
    example = {'default': ('T', 'B', 3)}
    invalid_examples = (
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
                or not all(_is_int(f) and f > 0 for f in features)
            ):
                raise ValueError
            result[name] = shape[:lead] + tuple(int(f) for f in features)
        return result


class Kwarg:
    """The declaration of one layer argument.

    Args:
        constraint: a :class:`Constraint` the value must satisfy.
        default: the value used when the argument is absent, or
            :data:`REQUIRED`. ``None`` is always accepted when it is the
            default (meaning "decided by the layer", e.g. size from input).
        description: one line for error messages and the docs.
    """

    def __init__(self, constraint: Constraint, default=REQUIRED, description: str = ''):
        self.constraint = constraint
        self.default = default
        self.description = description

    def resolve(self, layer_desc: str, name: str, kwargs: dict):
        """The normalised value of argument ``name`` in ``kwargs``.

        Raises:
            LayerValidationError: naming the layer, argument, what was
                expected and what was received.
        """
        if name not in kwargs:
            if self.default is REQUIRED:
                raise LayerValidationError(
                    f'{layer_desc}: argument {name} is required '
                    f'({self.constraint.expected}).'
                )
            return self.default
        value = kwargs[name]
        if value is None and self.default is None:
            return None
        try:
            return self.constraint.normalize(value)
        except (ValueError, TypeError):
            raise LayerValidationError(
                f'{layer_desc}: {name} must be {self.constraint.expected}. '
                f'Received: {name}={value!r}'
            ) from None

    def __repr__(self):
        return (
            f'Kwarg({self.constraint.expected}, default={self.default!r}, '
            f'{self.description!r})'
        )
