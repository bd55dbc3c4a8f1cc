"""The checks of single values, and the helpers every check shares.

A check says what a value must be (``expected``), normalises a value it
accepts and refuses any other, and restores a described value. Restoring
a nested ``@type`` needs :func:`brainstorm.describable.create_from_description`,
one level above this package: :mod:`brainstorm.describable` hands it in with
:func:`register_restorer` when it is imported.
"""

from __future__ import annotations

import importlib
import io
import math
import numbers
from collections.abc import Callable as Callable_
from typing import Any

import numpy as np

from brainstorm.errors import DescriptionError

#: The function turning a description back into an object, registered by
#: :mod:`brainstorm.describable` under the key ``restore`` (empty until then).
_RESTORER: dict[str, Callable_] = {}


def register_restorer(restore: Callable_) -> None:
    """Install the function that recreates objects from descriptions.

    :mod:`brainstorm.describable` registers its ``create_from_description``
    when it is imported, so this package need not import it back.

    Args:
        restore: called as ``restore(described, expected=kind)``.
    """
    _RESTORER['restore'] = restore


def _restore(described: object, expected: Any) -> object:
    restore = _RESTORER.get('restore')
    if restore is None:
        raise RuntimeError(
            'no restorer registered: import brainstorm.describable first'
        )
    return restore(described, expected=expected)


#: Largest size or count accepted anywhere (beyond it NumPy would fail
#: without naming the argument).
MAX_INT = 2**31 - 1


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(
        value, (bool, np.bool_)
    )


def _is_description(value) -> bool:
    return isinstance(value, dict) and '@type' in value


class Check:
    """Base of the checks: accepts anything, restores plain values only."""

    # plain class attributes here; subclasses may compute them (properties)
    expected: Any = 'valid'
    example: Any = None
    invalid_examples: Any = ()
    kind: Any = None  # the Describable class expected here, if any

    def normalize(self, value: Any) -> Any:
        """Return ``value`` normalised, or raise ValueError/TypeError to refuse it."""
        return value

    def restore(self, described: object) -> object:
        """A plain (non-Describable) value: any ``@type`` inside is refused."""
        return _restore(described, ())

    def __repr__(self):
        return self.expected


class Int(Check):
    """An int (or NumPy integer, not bool) in ``[low, high]``."""

    def __init__(self, low: int | None = None, high: int = MAX_INT) -> None:
        self.low, self.high = low, high
        if low == 1 and high == MAX_INT:
            self.expected = 'a positive int'
        elif high == MAX_INT:
            self.expected = f'an int >= {low}' if low is not None else 'an int'
        else:
            self.expected = (
                f'an int in [{low}, {high}]' if low is not None else f'an int <= {high}'
            )
        self.example = low if low is not None else min(0, high)
        # both bools: one of them may lie inside the bounds
        invalid = [1.5, 'x', False, True, None, high + 1]
        if low is not None:
            invalid.append(low - 1)
        self.invalid_examples = tuple(invalid)

    def normalize(self, value: Any) -> Any:
        """Return ``value`` as an int; refuse bools, other types, out of range."""
        if (
            not _is_int(value)
            or value > self.high
            or (self.low is not None and value < self.low)
        ):
            raise ValueError
        return int(value)


class Real(Check):
    """A finite real number (ints accepted, converted to float)."""

    def __init__(
        self,
        low: float = -math.inf,
        high: float = math.inf,
        include_low: bool = True,
        include_high: bool = True,
        finite: bool = True,
    ) -> None:
        self.low, self.high = low, high
        self.include_low, self.include_high = include_low, include_high
        self.finite = finite
        left = '[' if include_low else '('
        right = ']' if include_high else ')'
        word = 'a finite number' if finite else 'a number'
        if math.isinf(low) and math.isinf(high):
            self.expected = word
        elif math.isinf(high):
            self.expected = f'{word} {">=" if include_low else ">"} {low}'
        elif math.isinf(low):
            self.expected = f'{word} {"<=" if include_high else "<"} {high}'
        else:
            self.expected = f'{word} in {left}{low}, {high}{right}'
        if math.isfinite(low) and math.isfinite(high):
            self.example = (low + high) / 2
        elif math.isfinite(low):
            self.example = low + 1
        elif math.isfinite(high):
            self.example = high - 1
        else:
            self.example = 1.0
        invalid = ['x', float('nan'), None, False, True, [1.0]]
        if finite:
            invalid.append(float('inf'))
        if math.isfinite(low):
            invalid.append(low - 1.0)
            if not include_low:
                invalid.append(low)
        if math.isfinite(high):
            invalid.append(high + 1.0)
            if not include_high:
                invalid.append(high)
        self.invalid_examples = tuple(invalid)

    def normalize(self, value: Any) -> Any:
        """Return ``value`` as a float, refusing bools, NaN, and values out of range."""
        if not isinstance(value, numbers.Real) or isinstance(value, (bool, np.bool_)):
            raise ValueError
        try:
            number = float(value)
        except OverflowError:  # an int beyond the float range
            raise ValueError('too large for a float') from None
        if math.isnan(number) or (self.finite and not math.isfinite(number)):
            raise ValueError
        too_low = number < self.low if self.include_low else number <= self.low
        too_high = number > self.high if self.include_high else number >= self.high
        if too_low or too_high:
            raise ValueError
        return number


class Bool(Check):
    """True or False (NumPy bools accepted); no other truthy value."""

    expected = 'a bool'
    example = True
    invalid_examples = ('no', 0, 1, None, 'True')

    def normalize(self, value: Any) -> Any:
        """Return ``value`` as a bool, refusing every non-bool."""
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError
        return bool(value)


class Str(Check):
    """A str; optionally non-empty or a Python identifier."""

    def __init__(self, nonempty: bool = False, identifier: bool = False) -> None:
        self.nonempty, self.identifier = nonempty, identifier
        self.expected = (
            'a name (str, Python identifier)'
            if identifier
            else 'a non-empty str'
            if nonempty
            else 'a str'
        )
        self.example = 'a'
        invalid: list[object] = [5, None, b'a', ['a']]
        if nonempty or identifier:
            invalid.append('')
        if identifier:
            invalid.append('a b')
        self.invalid_examples = tuple(invalid)

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it is a str of the configured kind."""
        if not isinstance(value, str):
            raise ValueError
        if (self.nonempty or self.identifier) and not value:
            raise ValueError
        if self.identifier and not value.isidentifier():
            raise ValueError
        return str(value)


class FileName(Check):
    """A file name: a non-empty str or ``os.PathLike`` (such as ``pathlib.Path``).

    It is normalised to a str, so descriptions (JSON) can hold it. Bytes
    names and names with a NUL character are refused.
    """

    expected = 'a file name (a non-empty str or os.PathLike)'
    example = 'a.h5'
    invalid_examples = (5, None, b'a.h5', '', 'a\0b', ['a'])

    def normalize(self, value: Any) -> Any:
        """Return ``os.fspath(value)`` if it is a non-empty str without NUL."""
        import os

        if not isinstance(value, (str, os.PathLike)):
            raise ValueError
        name = os.fspath(value)
        if not isinstance(name, str) or not name or '\0' in name:
            raise ValueError
        return name


class Choice(Check):
    """One of a fixed set of values (compared by type and value)."""

    def __init__(self, *choices: object) -> None:
        self.choices = choices
        self.expected = 'one of ' + ', '.join(repr(c) for c in choices)
        self.example = choices[0]
        self.invalid_examples = tuple(
            v for v in ('no such choice', 3, None, ['a']) if not _passes(self, v)
        )

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it equals one of the choices (and has its type)."""
        for choice in self.choices:
            if type(value) is type(choice) and value == choice:
                return value
        raise ValueError


class Optional(Check):
    """None, or a value passing ``check``."""

    def __init__(self, check: Check) -> None:
        self.check = check
        self.expected = f'None or {check.expected}'
        self.example = check.example

    @property
    def invalid_examples(self) -> tuple:
        """The inner check's invalid examples, except None."""
        return tuple(v for v in self.check.invalid_examples if v is not None)

    @property
    def kind(self) -> Any:
        """The inner check's kind."""
        return self.check.kind

    def normalize(self, value: Any) -> Any:
        """Return None for None, else the inner check's result."""
        return None if value is None else self.check.normalize(value)

    def restore(self, described: object) -> object:
        """Return None for None, else the inner check's restored value."""
        return None if described is None else self.check.restore(described)


class Instance(Check):
    """An instance of ``kind`` (a class, or a tuple of classes).

    Restoring requires a description whose ``@type`` names a subclass of
    ``kind``.
    """

    def __init__(
        self, kind: type | tuple | str, what: str | None = None, example: object = None
    ) -> None:
        # ``kind`` may be 'module:Class', imported on first use (for classes
        # whose module imports the declaring one)
        self._kind = kind
        kinds = kind if isinstance(kind, tuple) else (kind,)
        names = [
            k.rsplit(':', 1)[-1] if isinstance(k, str) else k.__name__ for k in kinds
        ]
        self.expected = what or ' or '.join(
            ('an ' if n[0] in 'AEIOU' else 'a ') + n for n in names
        )
        self._example = example

    @property
    def kind(self) -> Any:
        """The expected class (or tuple); a ``'module:Class'`` is imported here."""
        if isinstance(self._kind, str):
            module, name = self._kind.split(':')
            self._kind = getattr(importlib.import_module(module), name)
        return self._kind

    @property
    def invalid_examples(self) -> tuple:
        """Values of other types, None, and the class itself (those refused)."""
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        candidates = (5, 'x', None, kinds[0], object())
        return tuple(v for v in candidates if not _passes(self, v))

    @property
    def example(self) -> object:
        """The example given (called first if it is callable)."""
        return self._example() if callable(self._example) else self._example

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it is an instance (not a class) of ``kind``."""
        if isinstance(value, type) or not isinstance(value, self.kind):
            raise TypeError
        return value

    def restore(self, described: object) -> object:
        """Recreate the described object, whose ``@type`` must be a ``kind``."""
        if not _is_description(described):
            raise DescriptionError(
                f'expected a description of {self.expected} (a dict with '
                f"'@type'). Received: {_short(described)}"
            )
        return _restore(described, self.kind)


class Callable(Check):
    """Any callable that is not a class (a function, a bound method...).

    Never restored from a description: code does not come from files.
    """

    expected = 'a callable (not a class)'
    invalid_examples = (5, 'x', None, int)

    @property
    def example(self) -> object:
        """A plain function."""
        return _identity

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it is callable and not a class."""
        if not callable(value) or isinstance(value, type):
            raise TypeError
        return value


def _identity(*args, **kwargs):
    return args[0] if args else None


class Writable(Check):
    """A file object open for writing text (anything with ``write``)."""

    expected = 'a file object with a write() method (e.g. sys.stdout)'
    invalid_examples = ('x', 5, b'')

    @property
    def example(self) -> object:
        """A fresh in-memory text file."""
        return io.StringIO()

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it has a callable ``write``."""
        if not callable(getattr(value, 'write', None)):
            raise TypeError
        return value


class FloatDtype(Check):
    """A NumPy floating dtype (a type like ``np.float32`` or its name)."""

    expected = "a NumPy float dtype (e.g. np.float32 or 'float64')"
    example = np.float32
    invalid_examples = (object, 'day', np.int32, 5, None, 'object')

    def normalize(self, value: Any) -> Any:
        """Return the NumPy floating type named or given by ``value``."""
        if value is None:
            raise TypeError
        try:
            dtype = np.dtype(value)
        except (TypeError, ValueError):
            raise ValueError from None
        if not np.issubdtype(dtype, np.floating):
            raise ValueError
        return dtype.type


#: Seeds accepted by NumPy's RandomState.
SEED = Int(0, 2**32 - 1)


class _At(ValueError):
    """A value inside a container failed its check.

    ``path`` locates it (e.g. ``"['a']"`` or ``"[2]"``), ``expected`` says
    what it must be.
    """

    def __init__(self, path: str, expected: str, detail: str = ''):
        shown = f' ({detail})' if detail else ''
        super().__init__(f'{path} must be {expected}{shown}')
        self.path, self.expected, self.detail = path, expected, detail


def _inner(check, value, path: str):
    try:
        return check.normalize(value)
    except _At as err:
        raise _At(path + err.path, err.expected, err.detail) from None
    except (ValueError, TypeError) as err:
        raise _At(path, check.expected, str(err)) from None


def _passes(check, value) -> bool:
    try:
        check.normalize(value)
        return True
    except (ValueError, TypeError):
        return False


def _short(value) -> str:
    if isinstance(value, np.ndarray):
        # an array's values say little; its shape and dtype say what is wrong
        kind = 'masked array' if isinstance(value, np.ma.MaskedArray) else 'array'
        return f'{kind} of shape {value.shape} and dtype {value.dtype}'
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'
