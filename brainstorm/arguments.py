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
from collections.abc import Callable as Callable_
from typing import Any

import numpy as np

from brainstorm.utils import DescriptionError, TrainingValidationError

__all__ = ['REQUIRED', 'Arg', 'Check', 'Int', 'Real', 'Bool', 'Str',
           'Choice', 'Optional', 'Instance', 'Callable', 'Writable',
           'FloatDtype', 'SEED', 'ListOf',
           'DictOf', 'AnyOf',
           'NumericArray', 'check_arguments', 'declared_arguments', 'declare']


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

    # plain class attributes here; subclasses may compute them (properties)
    expected: Any = 'valid'
    example: Any = None
    invalid_examples: Any = ()
    kind: Any = None  # the Describable class expected here, if any

    def normalize(self, value: Any) -> Any:
        return value

    def restore(self, described: object) -> object:
        """A plain (non-Describable) value: any ``@type`` inside is refused."""
        from brainstorm.describable import create_from_description
        return create_from_description(described, expected=())

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
            self.expected = (f'an int in [{low}, {high}]' if low is not None
                             else f'an int <= {high}')
        self.example = low if low is not None else 0
        invalid = [1.5, 'x', True, None, high + 1]
        if low is not None:
            invalid.append(low - 1)
        self.invalid_examples = tuple(invalid)

    def normalize(self, value: Any) -> Any:
        if not _is_int(value) or value > self.high or (
                self.low is not None and value < self.low):
            raise ValueError
        return int(value)


class Real(Check):
    """A finite real number (ints accepted, converted to float)."""

    def __init__(self, low: float = -math.inf, high: float = math.inf,
                 include_low: bool = True, include_high: bool = True,
                 finite: bool = True) -> None:
        self.low, self.high = low, high
        self.include_low, self.include_high = include_low, include_high
        self.finite = finite
        left = '[' if include_low else '('
        right = ']' if include_high else ')'
        word = 'a finite number' if finite else 'a number'
        if math.isinf(low) and math.isinf(high):
            self.expected = word
        elif math.isinf(high):
            self.expected = f"{word} {'>=' if include_low else '>'} {low}"
        elif math.isinf(low):
            self.expected = f"{word} {'<=' if include_high else '<'} {high}"
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

    def normalize(self, value: Any) -> Any:
        if (not isinstance(value, numbers.Real)
                or isinstance(value, (bool, np.bool_)) or math.isnan(value)
                or (self.finite and not math.isfinite(value))):
            raise ValueError
        number = float(value)
        too_low = number < self.low if self.include_low else number <= self.low
        too_high = (number > self.high if self.include_high
                    else number >= self.high)
        if too_low or too_high:
            raise ValueError
        return float(value)


class Bool(Check):
    """True or False (NumPy bools accepted); no other truthy value."""

    expected = 'a bool'
    example = True
    invalid_examples = ('no', 0, 1, None, 'True')

    def normalize(self, value: Any) -> Any:
        if not isinstance(value, (bool, np.bool_)):
            raise ValueError
        return bool(value)


class Str(Check):
    """A str; optionally non-empty or a Python identifier."""

    def __init__(self, nonempty: bool = False,
                 identifier: bool = False) -> None:
        self.nonempty, self.identifier = nonempty, identifier
        self.expected = ('a name (str, Python identifier)' if identifier else
                         'a non-empty str' if nonempty else 'a str')
        self.example = 'a'
        invalid: list[object] = [5, None, b'a', ['a']]
        if nonempty or identifier:
            invalid.append('')
        if identifier:
            invalid.append('a b')
        self.invalid_examples = tuple(invalid)

    def normalize(self, value: Any) -> Any:
        if not isinstance(value, str):
            raise ValueError
        if (self.nonempty or self.identifier) and not value:
            raise ValueError
        if self.identifier and not value.isidentifier():
            raise ValueError
        return str(value)


class Choice(Check):
    """One of a fixed set of values (compared by type and value)."""

    def __init__(self, *choices: object) -> None:
        self.choices = choices
        self.expected = 'one of ' + ', '.join(repr(c) for c in choices)
        self.example = choices[0]
        self.invalid_examples = ('no such choice', 3, None, ['a'])

    def normalize(self, value: Any) -> Any:
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
        return tuple(v for v in self.check.invalid_examples if v is not None)

    @property
    def kind(self) -> Any:
        return self.check.kind

    def normalize(self, value: Any) -> Any:
        return None if value is None else self.check.normalize(value)

    def restore(self, described: object) -> object:
        return None if described is None else self.check.restore(described)


class Instance(Check):
    """An instance of ``kind`` (a class, or a tuple of classes).

    Restoring requires a description whose ``@type`` names a subclass of
    ``kind``.
    """

    def __init__(self, kind: type | tuple | str, what: str | None = None,
                 example: object = None) -> None:
        # ``kind`` may be 'module:Class', imported on first use (for classes
        # whose module imports the declaring one)
        self._kind = kind
        kinds = kind if isinstance(kind, tuple) else (kind,)
        names = [k.rsplit(':', 1)[-1] if isinstance(k, str) else k.__name__
                 for k in kinds]
        self.expected = what or ' or '.join(
            ('an ' if n[0] in 'AEIOU' else 'a ') + n for n in names)
        self._example = example

    @property
    def kind(self) -> Any:
        if isinstance(self._kind, str):
            import importlib
            module, name = self._kind.split(':')
            self._kind = getattr(importlib.import_module(module), name)
        return self._kind

    @property
    def invalid_examples(self) -> tuple:
        kinds = self.kind if isinstance(self.kind, tuple) else (self.kind,)
        return (5, 'x', None, kinds[0], object())

    @property
    def example(self) -> object:
        return self._example() if callable(self._example) else self._example

    def normalize(self, value: Any) -> Any:
        if isinstance(value, type) or not isinstance(value, self.kind):
            raise TypeError
        return value

    def restore(self, described: object) -> object:
        from brainstorm.describable import create_from_description
        if not _is_description(described):
            raise DescriptionError(
                f'expected a description of {self.expected} (a dict with '
                f"'@type'). Received: {_short(described)}")
        return create_from_description(described, expected=self.kind)


class Callable(Check):
    """Any callable that is not a class (a function, a bound method...).

    Never restored from a description: code does not come from files.
    """

    expected = 'a callable (not a class)'
    invalid_examples = (5, 'x', None, int)

    @property
    def example(self) -> object:
        return _identity

    def normalize(self, value: Any) -> Any:
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
        import io
        return io.StringIO()

    def normalize(self, value: Any) -> Any:
        if not callable(getattr(value, 'write', None)):
            raise TypeError
        return value


class FloatDtype(Check):
    """A NumPy floating dtype (a type like ``np.float32`` or its name)."""

    expected = "a NumPy float dtype (e.g. np.float32 or 'float64')"
    example = np.float32
    invalid_examples = (object, 'day', np.int32, 5, None, 'object')

    def normalize(self, value: Any) -> Any:
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
SEED = Int(0, 2 ** 32 - 1)


class ListOf(Check):
    """A list or tuple of values passing ``check`` (normalised to a list,
    or to a tuple with ``as_tuple``), optionally of a fixed ``length``."""

    def __init__(self, check: Check, nonempty: bool = False,
                 as_tuple: bool = False,
                 length: int | None = None) -> None:
        self.check, self.nonempty = check, nonempty
        self.as_tuple, self.length = as_tuple, length
        self.expected = ('a non-empty ' if nonempty else 'a ') + \
            (f'list of {length} ' if length else 'list of ') + \
            f'({check.expected})'

    @property
    def example(self) -> object:
        return [self.check.example] * (self.length or 1)

    @property
    def invalid_examples(self) -> tuple:
        invalid = [5, 'x', {'a': self.check.example}]
        invalid += [[v] for v in self.check.invalid_examples[:2]]
        if self.nonempty:
            invalid.append([])
        if self.length:
            invalid.append([self.check.example] * (self.length + 1))
        return tuple(invalid)

    @property
    def kind(self) -> Any:
        return self.check.kind

    def normalize(self, value: Any) -> Any:
        if isinstance(value, np.ndarray) and value.ndim == 1:
            value = value.tolist()  # NumPy scalars become Python numbers
        if not isinstance(value, (list, tuple)):
            raise ValueError
        if (self.nonempty and not value) or (
                self.length is not None and len(value) != self.length):
            raise ValueError
        result = [_inner(self.check, v, f'[{i}]') for i, v in enumerate(value)]
        return tuple(result) if self.as_tuple else result

    def restore(self, described: object) -> object:
        if not isinstance(described, list):
            raise DescriptionError(f'expected a list. Received: '
                                   f'{_short(described)}')
        return [self.check.restore(v) for v in described]


class DictOf(Check):
    """A dict of str keys to values passing ``check``."""

    def __init__(self, check: Check, nonempty: bool = False,
                 keys: Check | None = None) -> None:
        self.check, self.nonempty = check, nonempty
        self.keys = keys or Str()
        self.expected = ('a non-empty ' if nonempty else 'a ') + \
            f'dict of {self.keys.expected} to ({check.expected})'

    @property
    def example(self) -> object:
        return {self.keys.example: self.check.example}

    @property
    def invalid_examples(self) -> tuple:
        example = self.check.example
        invalid = [5, 'x', [example], {3: example}]
        invalid += [{self.keys.example: v}
                    for v in self.check.invalid_examples[:2]]
        if self.nonempty:
            invalid.append({})
        return tuple(invalid)

    @property
    def kind(self) -> Any:
        return self.check.kind

    def normalize(self, value: Any) -> Any:
        if not isinstance(value, dict) or (self.nonempty and not value):
            raise ValueError
        return type(value)((_inner(self.keys, k, f' key {k!r}'),
                            _inner(self.check, v, f'[{k!r}]'))
                           for k, v in value.items())

    def restore(self, described: object) -> object:
        if not isinstance(described, dict) or '@type' in described:
            raise DescriptionError(f'expected a dict. Received: '
                                   f'{_short(described)}')
        return {self.keys.normalize(k) if isinstance(k, str) else k:
                self.check.restore(v) for k, v in described.items()}


class AnyOf(Check):
    """A value passing any one of ``checks`` (tried in order)."""

    def __init__(self, *checks: Check) -> None:
        self.checks = checks
        self.expected = ' or '.join(c.expected for c in checks)

    @property
    def invalid_examples(self) -> tuple:
        invalid: list[object] = []
        for check in self.checks:
            for bad in check.invalid_examples:
                if not any(_passes(c, bad) for c in self.checks) and \
                        not any(bad is v for v in invalid):
                    invalid.append(bad)
        return tuple(invalid)

    @property
    def kind(self) -> Any:
        kinds = tuple(c.kind for c in self.checks if c.kind is not None)
        return kinds[0] if len(kinds) == 1 else (kinds or None)

    @property
    def example(self) -> object:
        return self.checks[0].example

    def normalize(self, value: Any) -> Any:
        for check in self.checks:
            try:
                return check.normalize(value)
            except (ValueError, TypeError):
                pass
        raise ValueError

    def restore(self, described: object) -> object:
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

    def __init__(self, min_ndim: int = 0, allow_bool: bool = True,
                 finite: bool = True) -> None:
        self.min_ndim = min_ndim
        self.allow_bool = allow_bool
        self.finite = finite
        self.expected = (('a numeric array of finite values' if finite
                          else 'a numeric array')
                         + (f' with at least {min_ndim} dimensions'
                            if min_ndim else ''))
        self.example = np.ones((2,) * max(min_ndim, 1))
        invalid = [
            'x', None, [[1.0], [1.0, 2.0]],
            np.ma.masked_array(self.example, mask=True),
            np.array(['a', 'b']), np.zeros(2, dtype=object)]
        if finite:
            invalid.append(np.full(self.example.shape, np.nan))
        if min_ndim:
            invalid.append(np.ones((2,) * (min_ndim - 1)))
        self.invalid_examples = tuple(invalid)

    def normalize(self, value: Any) -> Any:
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
            raise ValueError(f'it has shape {array.shape}')
        if self.finite and np.issubdtype(array.dtype, np.floating) and \
                not np.isfinite(array).all():
            raise ValueError('it holds NaN or Inf')
        return value if isinstance(value, np.ndarray) else array


class _At(ValueError):
    """A value inside a container failed its check: ``path`` locates it
    (e.g. ``"['a']"`` or ``"[2]"``), ``expected`` says what it must be."""

    def __init__(self, path: str, expected: str, detail: str = ''):
        super().__init__(detail)
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
        kind = 'masked array' if isinstance(value, np.ma.MaskedArray) \
            else 'array'
        return f'{kind} of shape {value.shape} and dtype {value.dtype}'
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
        label: for ``'**name'`` declarations (each value of a ``**kwargs``
            argument): how a value is named in messages, e.g.
            ``"data '{}'"``.
    """

    def __init__(self, check: Check, default: object = REQUIRED,
                 attr: str | None = None,
                 init_only: bool = False, state: bool = False,
                 doc: str = '', label: str = "'{}'") -> None:
        self.check = check
        self.default = default
        self.attr = attr
        self.init_only = init_only
        self.state = state
        self.doc = doc
        self.label = label

    def __repr__(self):
        return (f'Arg({self.check.expected}, default={self.default!r}'
                + (f', attr={self.attr!r}' if self.attr else '') + ')')


def declared_arguments(cls: type) -> dict:
    """All argument declarations of ``cls``, merged along its MRO."""
    result = {}
    for klass in reversed(cls.__mro__):
        result.update(klass.__dict__.get('__arguments__', {}))
    return result


def _error_class(cls):
    return getattr(cls, '__argument_error__', TrainingValidationError)


def check_value(owner: str, cls: type, name: str, arg: Arg, value: object,
                shown: str | None = None):
    """Check one value against its declaration; return it normalised.

    Raises:
        the class's ``__argument_error__`` (a ValidationError) naming the
        owner, the argument, what was expected and what was received.
    """
    if value is None and arg.default is None:
        return None
    try:
        return arg.check.normalize(value)
    except _At as err:
        detail = f' ({err.detail})' if err.detail else ''
        raise _error_class(cls)(
            f'{owner}: {shown or name}{err.path} must be {err.expected}'
            f'{detail}. Received: {shown or name}={_short(value)}') from None
    except (ValueError, TypeError) as err:
        detail = f' ({err})' if str(err) else ''
        received = f'{name}={_short(value)}' if shown is None else \
            _short(value)
        raise _error_class(cls)(
            f'{owner}: {shown or name} must be {arg.check.expected}{detail}. '
            f'Received: {received}') from None


def check_arguments(cls: type, owner: str, values: dict) -> dict:
    """Check ``values`` (argument name -> value) against the declarations of
    ``cls``; return them normalised. Undeclared names are passed through."""
    declared = declared_arguments(cls)
    result = dict(values)
    for name, value in values.items():
        arg = declared.get(name)
        if arg is not None and not arg.state:
            result[name] = check_value(owner, cls, name, arg, value)
    return result


def checked_init(init: Callable_) -> Callable_:
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
                        k: check_value(owner, cls, k, each, v,
                                       shown=each.label.format(k))
                        for k, v in value.items()}
                continue
            arg = declared.get(name)
            if arg is not None and not arg.state:
                bound.arguments[name] = check_value(owner, cls, name, arg,
                                                    value)
        init(*bound.args, **bound.kwargs)
        # checks between arguments, once the outermost __init__ is done
        if type(self).__init__ is __init__:
            validate = getattr(self, '__validate__', None)
            if validate is not None:
                validate()

    __init__.__checked__ = True  # type: ignore[attr-defined]
    return __init__


def declare(error: type = TrainingValidationError, **arguments: Arg
            ) -> Callable_:
    """Declare and check the arguments of a function or method.

    ``@declare(NetworkValidationError, seed=Arg(Optional(SEED)))`` checks
    ``seed`` on every call (normalised values are passed on) and keeps the
    declarations in ``function.__arguments__`` (with the error class in
    ``function.__argument_error__``), where the tests find them.
    """
    def decorate(function):
        signature = inspect.signature(function)
        owner = function.__qualname__
        holder = type(owner, (), {'__arguments__': arguments,
                                  '__argument_error__': error})

        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            try:
                bound = signature.bind(*args, **kwargs)
            except TypeError as err:
                # Python's own message, with the function named
                raise TypeError(f'{owner}: {err}') from None
            for name, value in list(bound.arguments.items()):
                kind = signature.parameters[name].kind
                if kind is inspect.Parameter.VAR_KEYWORD:
                    each = arguments.get('**' + name)
                    if each is not None:
                        bound.arguments[name] = {
                            k: check_value(owner, holder, k, each, v,
                                           shown=each.label.format(k))
                            for k, v in value.items()}
                elif kind is inspect.Parameter.VAR_POSITIONAL:
                    each = arguments.get('*' + name)
                    if each is not None:
                        bound.arguments[name] = tuple(
                            check_value(owner, holder, f'{name}[{i}]', each,
                                        v) for i, v in enumerate(value))
                elif name in arguments:
                    bound.arguments[name] = check_value(
                        owner, holder, name, arguments[name], value)
            return function(*bound.args, **bound.kwargs)

        wrapper.__arguments__ = arguments
        wrapper.__argument_error__ = error
        return wrapper
    return decorate
