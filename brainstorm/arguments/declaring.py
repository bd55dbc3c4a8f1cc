"""Declaring arguments and checking them where they are given.

:class:`Arg` declares one argument; :func:`checked_init` wraps a
constructor and :func:`declare` a function so that the declared arguments
are checked (and normalised) on every call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable as Callable_

from brainstorm.arguments.checks import Check, _At, _short
from brainstorm.errors import TrainingValidationError


class _Required:
    def __repr__(self):
        return 'REQUIRED'


REQUIRED = _Required()


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

    def __init__(
        self,
        check: Check,
        default: object = REQUIRED,
        attr: str | None = None,
        init_only: bool = False,
        state: bool = False,
        doc: str = '',
        label: str = "'{}'",
    ) -> None:
        self.check = check
        self.default = default
        self.attr = attr
        self.init_only = init_only
        self.state = state
        self.doc = doc
        self.label = label

    def __repr__(self):
        return (
            f'Arg({self.check.expected}, default={self.default!r}'
            + (f', attr={self.attr!r}' if self.attr else '')
            + ')'
        )


def declared_arguments(cls: type) -> dict:
    """All argument declarations of ``cls``, merged along its MRO."""
    result = {}
    for klass in reversed(cls.__mro__):
        result.update(klass.__dict__.get('__arguments__', {}))
    return result


def _error_class(cls):
    return getattr(cls, '__argument_error__', TrainingValidationError)


def check_value(
    owner: str, cls: type, name: str, arg: Arg, value: object, shown: str | None = None
):
    """Check one value against its declaration; return it normalised.

    Raises:
        ValidationError: the class's ``__argument_error__``, naming the
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
            f'{detail}. Received: {shown or name}={_short(value)}'
        ) from None
    except (ValueError, TypeError) as err:
        detail = f' ({err})' if str(err) else ''
        received = f'{name}={_short(value)}' if shown is None else _short(value)
        raise _error_class(cls)(
            f'{owner}: {shown or name} must be {arg.check.expected}{detail}. '
            f'Received: {received}'
        ) from None


def check_arguments(cls: type, owner: str, values: dict) -> dict:
    """Check ``values`` (argument name -> value) against ``cls``'s declarations.

    Returns:
        the values normalised; undeclared names are passed through.
    """
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
    var_kw = next(
        (p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None
    )

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
                        k: check_value(
                            owner, cls, k, each, v, shown=each.label.format(k)
                        )
                        for k, v in value.items()
                    }
                continue
            arg = declared.get(name)
            if arg is not None and not arg.state:
                bound.arguments[name] = check_value(owner, cls, name, arg, value)
        init(*bound.args, **bound.kwargs)
        # checks between arguments, once the outermost __init__ is done
        if type(self).__init__ is __init__:
            validate = getattr(self, '__validate__', None)
            if validate is not None:
                validate()

    __init__.__checked__ = True  # type: ignore[attr-defined]
    return __init__


def declare(error: type = TrainingValidationError, **arguments: Arg) -> Callable_:
    """Declare and check the arguments of a function or method.

    ``@declare(NetworkValidationError, seed=Arg(Optional(SEED)))`` checks
    ``seed`` on every call (normalised values are passed on) and keeps the
    declarations in ``function.__arguments__`` (with the error class in
    ``function.__argument_error__``), where the tests find them.
    """

    def decorate(function):
        signature = inspect.signature(function)
        owner = function.__qualname__
        holder = type(
            owner, (), {'__arguments__': arguments, '__argument_error__': error}
        )

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
                            k: check_value(
                                owner, holder, k, each, v, shown=each.label.format(k)
                            )
                            for k, v in value.items()
                        }
                elif kind is inspect.Parameter.VAR_POSITIONAL:
                    each = arguments.get('*' + name)
                    if each is not None:
                        bound.arguments[name] = tuple(
                            check_value(owner, holder, f'{name}[{i}]', each, v)
                            for i, v in enumerate(value)
                        )
                elif name in arguments:
                    bound.arguments[name] = check_value(
                        owner, holder, name, arguments[name], value
                    )
            return function(*bound.args, **bound.kwargs)

        wrapper.__arguments__ = arguments
        wrapper.__argument_error__ = error
        return wrapper

    return decorate
