"""Declaring arguments and checking them where they are given.

:class:`Arg` declares one argument; :func:`checked_init` wraps a
constructor and :func:`declare` a function so that the declared arguments
are checked (and normalised) on every call.
"""

from __future__ import annotations

import copy
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

    The default is written once: for an argument of the constructor it is
    the signature's default (``def __init__(self, rate=0.1)``), taken when
    the class is created (see :func:`resolve_defaults`); ``default=`` is for
    what the signature does not hold (declared state, ``**kwargs`` values,
    layer arguments).

    Args:
        check: what the value must be (a :class:`Check`).
        default: the value when the argument is absent, or
            :data:`~brainstorm.arguments.REQUIRED` (for a constructor
            argument: the signature's default, if any).
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
        omit_default: the description leaves the attribute out while it
            equals the default, and restoring gives the default back (as
            ``__default_values__`` does, without writing the value again).
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
        omit_default: bool = False,
    ) -> None:
        self.check = check
        self.default = default
        self.attr = attr
        self.init_only = init_only
        self.state = state
        self.doc = doc
        self.label = label
        self.omit_default = omit_default
        #: whether :func:`resolve_defaults` took the default from a signature
        self.default_from_signature = False

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


def resolve_defaults(arguments: dict, function: Callable_) -> dict:
    """The declarations ``arguments`` with the defaults of ``function``.

    Each declared argument that is a parameter of ``function`` (declared
    state is not) and declares no default of its own gets the parameter's
    default, or stays :data:`~brainstorm.arguments.REQUIRED` if the
    parameter has none: the default is written once, in the signature. A
    default declared anyway is kept (the attribute's value where the
    constructor stores a changed value, e.g. ``items=()`` stored as a
    list). Declarations are copied,
    never changed.

    Args:
        arguments: name -> :class:`Arg`.
        function: the constructor (or function) whose signature is read.
    """
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return arguments
    result = {}
    for name, arg in arguments.items():
        if not isinstance(arg, Arg):
            result[name] = arg  # not a declaration (a 0.5 layer's entry)
            continue
        parameter = None if arg.state else parameters.get(name)
        if (
            parameter is not None
            and parameter.default is not parameter.empty
            and arg.default is REQUIRED
        ):
            arg = copy.copy(arg)
            arg.default = parameter.default
            arg.default_from_signature = True
        result[name] = arg
    return result


def _error_class(cls):
    return getattr(cls, '__argument_error__', TrainingValidationError)


def check_value(
    owner: str,
    cls: type | None,
    name: str,
    arg: Arg,
    value: object,
    shown: str | None = None,
    error: type | None = None,
):
    """Check one value against its declaration; return it normalised.

    Args:
        owner: who checks, first in the message (e.g. ``"SgdStepper"``).
        cls: the declaring class; its ``__argument_error__`` is raised.
        name: the argument's name.
        arg: its declaration.
        value: the value given.
        shown: how the value is named in the message (default: ``name``).
        error: the error class to raise instead of the class's.

    Raises:
        ValidationError: the class's ``__argument_error__`` (or ``error``),
            naming the owner, the argument, what was expected and what was
            received.
    """
    if value is None and arg.default is None:
        return None
    error = error or _error_class(cls)
    try:
        return arg.check.normalize(value)
    except _At as err:
        detail = f' ({err.detail})' if err.detail else ''
        raise error(
            f'{owner}: {shown or name}{err.path} must be {err.expected}'
            f'{detail}. Received: {shown or name}={_short(value)}'
        ) from None
    except (ValueError, TypeError) as err:
        detail = f' ({err})' if str(err) else ''
        received = f'{name}={_short(value)}' if shown is None else _short(value)
        raise error(
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


def check_attributes(instance: object) -> None:
    """Check the current values of ``instance``'s declared attributes.

    For attributes that may change after construction (a schedule sets a
    stepper's ``learning_rate``): the constructor's declarations are checked
    again, on the values held now. Declared state, ``init_only`` and
    ``**kwargs`` declarations are skipped, and so are attributes the
    instance does not have.

    Raises:
        ValidationError: as :func:`check_value`.
    """
    cls = type(instance)
    owner = cls.__name__
    for name, arg in declared_arguments(cls).items():
        if arg.state or arg.init_only or name.startswith('*'):
            continue
        attr = arg.attr or name
        if attr in vars(instance):
            check_value(owner, cls, name, arg, getattr(instance, attr))


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
        declared = resolve_defaults(arguments, function)
        holder = type(
            owner, (), {'__arguments__': declared, '__argument_error__': error}
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
                    each = declared.get('**' + name)
                    if each is not None:
                        bound.arguments[name] = {
                            k: check_value(
                                owner, holder, k, each, v, shown=each.label.format(k)
                            )
                            for k, v in value.items()
                        }
                elif kind is inspect.Parameter.VAR_POSITIONAL:
                    each = declared.get('*' + name)
                    if each is not None:
                        bound.arguments[name] = tuple(
                            check_value(owner, holder, f'{name}[{i}]', each, v)
                            for i, v in enumerate(value)
                        )
                elif name in declared:
                    bound.arguments[name] = check_value(
                        owner, holder, name, declared[name], value
                    )
            return function(*bound.args, **bound.kwargs)

        wrapper.__arguments__ = declared
        wrapper.__argument_error__ = error
        return wrapper

    return decorate
