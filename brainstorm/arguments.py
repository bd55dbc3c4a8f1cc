"""Declared arguments: one place per class for what its arguments may be.

A class lists its arguments once, in ``__arguments__`` (merged along the
MRO)::

    class Hook(Describable):
        __arguments__ = {
            'name': Arg(Optional(Str()), default=None, attr='__name__'),
            'timescale': Arg(Choice('epoch', 'update'), default='epoch'),
            'interval': Arg(Int(1), default=1),
        }

The declarations are used

* by ``__init__``: :class:`~brainstorm.describable.Describable` wraps the
  ``__init__`` of every class that declares arguments, so each declared
  argument is checked (and normalised, e.g. ``np.int64(3)`` -> ``3``) when
  the constructor is called, before its body runs;
* by restoring from a description
  (:func:`~brainstorm.describable.create_from_description`): only declared
  attributes are taken, each goes through the same check, and a nested
  ``@type`` must be of the kind the check expects where it stands
  (:class:`Instance` gives the kind);
* by the tests: every check lists ``invalid_examples`` (values it must
  refuse) and an ``example`` (a value it accepts), from which the bad-input
  suite is generated.

A check is any object with ``expected`` (a phrase completing "must be
..."), ``example``, ``invalid_examples``, ``normalize(value)`` (return the
normalised value or raise ``ValueError``/``TypeError``) and
``restore(described)`` (turn a described value back into an object, refusing
descriptions of the wrong kind). The layer constraints of
:mod:`brainstorm.layers.attributes` follow the same protocol.
"""

from __future__ import annotations

import functools
import inspect
import math
import numbers

import numpy as np

from brainstorm.utils import DescriptionError, TrainingValidationError

__all__ = ['REQUIRED', 'Arg', 'Check', 'Int', 'Real', 'Bool', 'Str',
           'Choice', 'Optional', 'Instance', 'ListOf', 'DictOf', 'AnyOf',
           'NumericArray', 'check_arguments', 'declared_arguments']


class _Required:
    def __repr__(self):
        return 'REQUIRED'


REQUIRED = _Required()

#: Largest size or count accepted anywhere (beyond it NumPy would fail
#: without naming the argument).
MAX_INT = 2 ** 31 - 1


def _is_int(value) -> bool:
    return (isinstance(value, (int, np.integer))
            and not isinstance(value, (bool, np.bool_)))


def _is_description(value) -> bool:
    return isinstance(value, dict) and '@type' in value


class Check:
    """Base of the checks: accepts anything, restores plain values only."""

    expected = 'valid'
    example = None
    invalid_examples: tuple = ()
    kind = None  # the Describable class expected here, if any

    def normalize(self, value):
        return value

    def restore(self, described):
        """A plain (non-Describable) value: any ``@type`` inside is refused."""
        from brainstorm.describable import create_from_description
        return create_from_description(described, expected=())

    def __repr__(self):
        return self.expected


class Int(Check):
    """An int (or NumPy integer, not bool) in ``[low, high]``."""

    def __init__(self, low: int | None = None, high: int = MAX_INT):
        self.low, self.high = low, high
        self.expected = (f'an int in [{low}, {high}]' if low is not None
                         else f'an int <= {high}')
        self.example = low if low is not None else 0
        invalid = [1.5, 'x', True, None, high + 1]
        if low is not None:
            invalid.append(low - 1)
        self.invalid_examples = tuple(invalid)

    def normalize(self, value):
        if not _is_int(value) or value > self.high or (
                self.low is not None and value < self.low):
            raise ValueError
        return int(value)


class Real(Check):
    """A finite real number (ints accepted, converted to float)."""

    def __init__(self, low=-math.inf, high=math.inf, include_low=True,
                 include_high=True, finite=True):
        self.low, self.high = low, high
        self.include_low, self.include_high = include_low, include_high
        self.finite = finite
        left = '[' if include_low else '('
        right = ']' if include_high else ')'
        word = 'a finite number' if finite else 'a number'
        self.expected = (word if math.isinf(low) and math.isinf(high) else
                         f'{word} in {left}{low}, {high}{right}')
        if math.isfinite(low) and math.isfinite(high):
            self.example = (low + high) / 2
        elif math.isfinite(low):
            self.example = low + 1
        elif math.isfinite(high):
            self.example = high - 1
        else:
            self.example = 1.0
        invalid = ['x', float('nan'), None, True, [1.0]]
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

    def normalize(self, value):
        if (not isinstance(value, numbers.Real)
                or isinstance(value, (bool, np.bool_)) or math.isnan(value)
                or (self.finite and not math.isfinite(value))):
            raise ValueError
        too_low = value < self.low if self.include_low else value <= self.low
        too_high = (value > self.high if self.include_high
                    else value >= self.high)
        if too_low or too_high:
            raise ValueError
        return float(value)


class Bool(Check):
    """True or False (NumPy bools accepted); no other truthy value."""

    expected = 'a bool'
    example = True
    invalid_examples = ('no', 0, 1, None, 'True')

    def normalize(self, value):
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError
        return bool(value)


class Str(Check):
    """A str; optionally non-empty or a Python identifier."""

    def __init__(self, nonempty: bool = False, identifier: bool = False):
        self.nonempty, self.identifier = nonempty, identifier
        self.expected = ('a name (str, Python identifier)' if identifier else
                         'a non-empty str' if nonempty else 'a str')
        self.example = 'a'
        invalid = [5, None, b'a', ['a']]
        if nonempty or identifier:
            invalid.append('')
        if identifier:
            invalid.append('a b')
        self.invalid_examples = tuple(invalid)

    def normalize(self, value):
        if not isinstance(value, str):
            raise ValueError
        if (self.nonempty or self.identifier) and not value:
            raise ValueError
        if self.identifier and not value.isidentifier():
            raise ValueError
        return str(value)


class Choice(Check):
    """One of a fixed set of values (compared by type and value)."""

    def __init__(self, *choices):
        self.choices = choices
        self.expected = 'one of ' + ', '.join(repr(c) for c in choices)
        self.example = choices[0]
        self.invalid_examples = ('no such choice', 3, None, ['a'])

    def normalize(self, value):
        for choice in self.choices:
            if type(value) is type(choice) and value == choice:
                return value
        raise ValueError


class Optional(Check):
    """None, or a value passing ``check``."""

    def __init__(self, check):
        self.check = check
        self.expected = f'None or {check.expected}'
        self.example = check.example
        self.invalid_examples = tuple(v for v in check.invalid_examples
                                      if v is not None)
        self.kind = check.kind

    def normalize(self, value):
        return None if value is None else self.check.normalize(value)

    def restore(self, described):
        return None if described is None else self.check.restore(described)


class Instance(Check):
    """An instance of ``kind`` (a class, or a tuple of classes).

    Restoring requires a description whose ``@type`` names a subclass of
    ``kind``.
    """

    def __init__(self, kind, what: str | None = None, example=None):
        self.kind = kind
        kinds = kind if isinstance(kind, tuple) else (kind,)
        self.expected = what or ('an instance of '
                                 + ' or '.join(k.__name__ for k in kinds))
        self._example = example
        self.invalid_examples = (5, 'x', None, kinds[0], object())

    @property
    def example(self):
        return self._example() if callable(self._example) else self._example

    def normalize(self, value):
        if isinstance(value, type) or not isinstance(value, self.kind):
            raise TypeError
        return value

    def restore(self, described):
        from brainstorm.describable import create_from_description
        if not _is_description(described):
            raise DescriptionError(
                f'expected a description of {self.expected} (a dict with '
                f"'@type'). Received: {_short(described)}")
        return create_from_description(described, expected=self.kind)


class ListOf(Check):
    """A list or tuple of values passing ``check`` (normalised to a list)."""

    def __init__(self, check, nonempty: bool = False):
        self.check, self.nonempty = check, nonempty
        self.expected = ('a non-empty ' if nonempty else 'a ') + \
            f'list of ({check.expected})'
        self.example = [check.example]
        invalid = [5, 'x', {'a': check.example}]
        invalid += [[v] for v in check.invalid_examples[:2]]
        if nonempty:
            invalid.append([])
        self.invalid_examples = tuple(invalid)
        self.kind = check.kind

    def normalize(self, value):
        if not isinstance(value, (list, tuple)):
            raise ValueError
        if self.nonempty and not value:
            raise ValueError
        return [self.check.normalize(v) for v in value]

    def restore(self, described):
        if not isinstance(described, list):
            raise DescriptionError(f'expected a list. Received: '
                                   f'{_short(described)}')
        return [self.check.restore(v) for v in described]


class DictOf(Check):
    """A dict of str keys to values passing ``check``."""

    def __init__(self, check, nonempty: bool = False, keys=None):
        self.check, self.nonempty = check, nonempty
        self.keys = keys or Str()
        self.expected = ('a non-empty ' if nonempty else 'a ') + \
            f'dict of {self.keys.expected} to ({check.expected})'
        self.example = {self.keys.example: check.example}
        invalid = [5, 'x', [check.example], {3: check.example}]
        invalid += [{self.keys.example: v} for v in check.invalid_examples[:2]]
        if nonempty:
            invalid.append({})
        self.invalid_examples = tuple(invalid)
        self.kind = check.kind

    def normalize(self, value):
        if not isinstance(value, dict) or (self.nonempty and not value):
            raise ValueError
        return type(value)((self.keys.normalize(k), self.check.normalize(v))
                           for k, v in value.items())

    def restore(self, described):
        if not isinstance(described, dict) or '@type' in described:
            raise DescriptionError(f'expected a dict. Received: '
                                   f'{_short(described)}')
        return {self.keys.normalize(k) if isinstance(k, str) else k:
                self.check.restore(v) for k, v in described.items()}


class AnyOf(Check):
    """A value passing any one of ``checks`` (tried in order)."""

    def __init__(self, *checks):
        self.checks = checks
        self.expected = ' or '.join(c.expected for c in checks)
        self.example = checks[0].example
        invalid = []
        for check in checks:
            for bad in check.invalid_examples:
                if not any(_passes(c, bad) for c in checks) and \
                        not any(bad is v for v in invalid):
                    invalid.append(bad)
        self.invalid_examples = tuple(invalid)
        kinds = tuple(c.kind for c in checks if c.kind is not None)
        self.kind = kinds[0] if len(kinds) == 1 else (kinds or None)

    def normalize(self, value):
        for check in self.checks:
            try:
                return check.normalize(value)
            except (ValueError, TypeError):
                pass
        raise ValueError

    def restore(self, described):
        if _is_description(described):
            for check in self.checks:
                if check.kind is not None:
                    return check.restore(described)
        errors = []
        for check in self.checks:
            try:
                return check.restore(described)
            except DescriptionError as err:
                errors.append(err)
        raise errors[0]


class NumericArray(Check):
    """A NumPy array (or nested lists) of finite real numbers; not ragged,
    not masked."""

    def __init__(self, min_ndim: int = 0, allow_bool: bool = True):
        self.min_ndim = min_ndim
        self.allow_bool = allow_bool
        self.expected = ('an array of finite numbers'
                         + (f' with at least {min_ndim} dimensions'
                            if min_ndim else ''))
        self.example = np.ones((2,) * max(min_ndim, 1))
        self.invalid_examples = (
            'x', None, [[1.0], [1.0, 2.0]], np.array([1.0, np.nan]),
            np.ma.masked_array([1.0, 2.0], mask=[True, False]),
            np.array(['a', 'b']))

    def normalize(self, value):
        if isinstance(value, np.ma.MaskedArray):
            raise ValueError('masked arrays are not supported (their mask '
                             'would be lost); pass .filled(...) or a mask '
                             'input')
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):
            raise ValueError('ragged or malformed nested sequence') from None
        if array.dtype == object or not (
                np.issubdtype(array.dtype, np.number)
                or (self.allow_bool and array.dtype == np.bool_)):
            raise ValueError
        if np.issubdtype(array.dtype, np.complexfloating):
            raise ValueError
        if array.ndim < self.min_ndim:
            raise ValueError
        if np.issubdtype(array.dtype, np.floating) and \
                not np.isfinite(array).all():
            raise ValueError('it holds NaN or Inf')
        return value if isinstance(value, np.ndarray) else array


def _passes(check, value) -> bool:
    try:
        check.normalize(value)
        return True
    except (ValueError, TypeError):
        return False


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


class Arg:
    """The declaration of one argument.

    Args:
        check: what the value must be (a :class:`Check`).
        default: the value when the argument is absent, or :data:`REQUIRED`.
        attr: the instance attribute (description key) holding the value;
            default: the argument's name. ``None`` with ``init_only=True``.
        init_only: the argument is checked at construction but not stored
            under a described attribute (nothing is restored for it).
        state: the attribute is described state, not a constructor argument
            (checked only when restoring).
        doc: one line for the docs.
    """

    def __init__(self, check, default=REQUIRED, attr: str | None = None,
                 init_only: bool = False, state: bool = False,
                 doc: str = ''):
        self.check = check
        self.default = default
        self.attr = attr
        self.init_only = init_only
        self.state = state
        self.doc = doc

    def __repr__(self):
        return (f'Arg({self.check.expected}, default={self.default!r}'
                + (f', attr={self.attr!r}' if self.attr else '') + ')')


def declared_arguments(cls) -> dict:
    """All argument declarations of ``cls``, merged along its MRO."""
    result = {}
    for klass in reversed(cls.__mro__):
        result.update(klass.__dict__.get('__arguments__', {}))
    return result


def _error_class(cls):
    return getattr(cls, '__argument_error__', TrainingValidationError)


def check_value(owner: str, cls, name: str, arg: Arg, value):
    """Check one value against its declaration; return it normalised.

    Raises:
        the class's ``__argument_error__`` (a ValidationError) naming the
        owner, the argument, what was expected and what was received.
    """
    if value is None and arg.default is None:
        return None
    try:
        return arg.check.normalize(value)
    except (ValueError, TypeError) as err:
        detail = f' ({err})' if str(err) else ''
        raise _error_class(cls)(
            f'{owner}: {name} must be {arg.check.expected}{detail}. '
            f'Received: {name}={_short(value)}') from None


def check_arguments(cls, owner: str, values: dict) -> dict:
    """Check ``values`` (argument name -> value) against the declarations of
    ``cls``; return them normalised. Undeclared names are passed through."""
    declared = declared_arguments(cls)
    result = dict(values)
    for name, value in values.items():
        arg = declared.get(name)
        if arg is not None and not arg.state:
            result[name] = check_value(owner, cls, name, arg, value)
    return result


def checked_init(init):
    """Wrap ``init`` so its declared arguments are checked before it runs."""
    signature = inspect.signature(init)
    var_kw = next((p.name for p in signature.parameters.values()
                   if p.kind is p.VAR_KEYWORD), None)

    @functools.wraps(init)
    def __init__(self, *args, **kwargs):
        cls = type(self)
        declared = declared_arguments(cls)
        bound = signature.bind(self, *args, **kwargs)
        owner = cls.__name__
        for name, value in list(bound.arguments.items()):
            if name == var_kw:
                each = declared.get('**' + name)
                if each is not None:
                    bound.arguments[name] = {
                        k: check_value(owner, cls, k, each, v)
                        for k, v in value.items()}
                continue
            arg = declared.get(name)
            if arg is not None and not arg.state:
                bound.arguments[name] = check_value(owner, cls, name, arg,
                                                    value)
        init(*bound.args, **bound.kwargs)

    __init__.__checked__ = True
    return __init__
