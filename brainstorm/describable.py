"""Turning objects into JSON-friendly descriptions and back.

A :class:`Describable` object describes itself as a dict holding its class
name under ``'@type'`` and its (described) instance members. Such a
description can be stored as JSON or HDF5 and turned back into an equivalent
object with :func:`create_from_description`.
"""

from __future__ import annotations

import copy
from copy import deepcopy  # noqa: F401 - in Brainstorm 0.5's namespace of this module

import numpy as np

from brainstorm.arguments import (
    REQUIRED,
    check_value,
    checked_init,
    declared_arguments,
    register_restorer,
    resolve_defaults,
)
from brainstorm.errors import DescriptionError

__all__ = ['Describable', 'get_description', 'create_from_description']


class Describable:
    """Base class for everything that can be saved as a description.

    Class attributes (merged along the MRO):

    * ``__undescribed__``: a set of member names left out of the
      description, or a dict mapping such names to the value they get when
      the object is recreated.
    * ``__default_values__``: a dict of member names to default values; a
      member equal to its default is left out and restored on load. For a
      declared argument, ``Arg(..., omit_default=True)`` does the same
      with its declared default, which is then not written a second time.
    * ``__arguments__``: a dict of argument names to
      :class:`brainstorm.arguments.Arg` declarations. The ``__init__`` of a
      class with declarations checks them when called, and restoring from
      a description accepts only the declared attributes, each through the
      same check (see :mod:`brainstorm.arguments`). A declared argument of
      the constructor takes its default from the signature.
    * ``__validate__()`` (optional method): checks between arguments
      (e.g. ``low <= high``), raising the class's ValidationError; run after
      the outermost ``__init__`` of a declaring class and after restoring.

    Descriptions written by Brainstorm 0.5 hold every attribute its objects
    had, some under other names or in other forms than here. Restoring
    reads them through these (merged along the MRO; a key the class
    declares is never renamed or dropped):

    * ``__renamed_05__``: a dict of 0.5 keys to the declared keys that
      took their place (``LstmOptInit``: ``{'block_input':
      'input_block'}``); the value is checked as the new key's. A
      description holding both keys is refused.
    * ``__dropped_05__``: a set of 0.5 keys of runtime state that is not
      kept here (``MonitorLoss``: ``{'iter'}``, the data iterator the hook
      was last started with); their values are ignored, not recreated.
    * ``__upgrade_05__(description)`` (optional classmethod): returns the
      description with a 0.5 form of its values turned into this
      package's (``MultiStep``'s ``steps``), or the description itself;
      it runs after the renaming and dropping, before the checks.

    Every other key is checked as described above.
    """

    __undescribed__: set | dict = set()
    __default_values__: dict = {}
    __arguments__: dict = {}
    __renamed_05__: dict = {}
    __dropped_05__: set | frozenset = frozenset()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get('__arguments__')
        if own:
            # each default once: a constructor argument's is the signature's
            cls.__arguments__ = resolve_defaults(own, cls.__init__)
        init = cls.__dict__.get('__init__')
        if init is not None and not getattr(init, '__checked__', False):
            if declared_arguments(cls):
                cls.__init__ = checked_init(init)

    @classmethod
    def __get_all_undescribed__(cls) -> dict:
        result = {}
        for klass in reversed(cls.__mro__):
            ud = klass.__dict__.get('__undescribed__', {})
            if isinstance(ud, dict):
                result.update(ud)
            else:
                result.update({name: None for name in ud})
        return result

    @classmethod
    def __get_all_05_keys__(cls) -> tuple[dict, set]:
        """The merged ``__renamed_05__`` and ``__dropped_05__`` of the MRO."""
        renamed: dict = {}
        dropped: set = set()
        for klass in reversed(cls.__mro__):
            renamed.update(klass.__dict__.get('__renamed_05__', {}))
            dropped.update(klass.__dict__.get('__dropped_05__', ()))
        return renamed, dropped

    @classmethod
    def __get_all_default_values__(cls) -> dict:
        result = {}
        for klass in reversed(cls.__mro__):
            for name, arg in klass.__dict__.get('__arguments__', {}).items():
                if arg.omit_default and arg.default is not REQUIRED:
                    result[arg.attr or name] = arg.default
            result.update(klass.__dict__.get('__default_values__', {}))
        return result

    def __describe__(self) -> dict:
        """Return a description of this object (see :func:`get_description`)."""
        undescribed = self.__get_all_undescribed__()
        defaults = self.__get_all_default_values__()
        description = {}
        for key, value in self.__dict__.items():
            if key in undescribed:
                continue
            if key in defaults and _equal(defaults[key], value):
                continue
            try:
                description[key] = get_description(value)
            except TypeError as err:
                raise TypeError(f'{err} (in {type(self).__name__}.{key})') from None
        description['@type'] = type(self).__name__
        return description

    @classmethod
    def __new_from_description__(cls, description: dict):
        """Create an instance from a description without calling __init__.

        Each described attribute goes through the check declared for it in
        ``__arguments__`` (the one ``__init__`` uses). A class that declares
        its own ``__arguments__`` (and every class of the library) accepts
        no other key; a user's subclass without own declarations also
        accepts undeclared keys. Dunder keys are refused unless declared,
        and private ``_x`` keys of declaring classes too. A declared
        attribute missing from the description (declared state included)
        gets its declared default.

        Raises:
            DescriptionError: for unknown, private or dunder keys, a
                missing declared attribute without a default, and a
                nested ``@type`` of the wrong kind.
            ValidationError: (the class's own) for a value its declaration
                refuses.
        """
        declared = declared_arguments(cls)
        # The library's own classes describe nothing beyond their
        # declarations; a user's subclass may add undeclared members.
        strict = (
            '__arguments__' in cls.__dict__
            or cls.__module__.split('.')[0] == 'brainstorm'
        )
        by_attr = {}
        for name, arg in declared.items():
            if not arg.init_only and not name.startswith('**'):
                by_attr[arg.attr or name] = (name, arg)
        owner = f'{cls.__name__} (from a description)'
        description = _from_05(cls, owner, description, by_attr)
        instance = cls.__new__(cls)
        for key, value in cls.__get_all_undescribed__().items():
            setattr(instance, key, copy.deepcopy(value))
        for key, value in cls.__get_all_default_values__().items():
            setattr(instance, key, copy.deepcopy(value))
        for key, value in description.items():
            if key == '@type':
                continue
            if key in by_attr:
                restored = _restore_declared(owner, cls, key, by_attr[key], value)
            else:
                _check_undeclared_key(owner, key, strict, by_attr)
                restored = create_from_description(value)
            setattr(instance, key, restored)
        _set_missing_defaults(instance, owner, description, by_attr)
        instance.__init_from_description__(description)
        # the checks between arguments that the constructor makes too
        validate = getattr(instance, '__validate__', None)
        if validate is not None:
            validate()
        return instance

    def __init_from_description__(self, description: dict) -> None:
        """Hook for subclasses to finish recreating themselves."""


def _from_05(
    cls: type[Describable], owner: str, description: dict, by_attr: dict
) -> dict:
    """``description`` with Brainstorm 0.5's keys and forms turned into ours.

    See ``__renamed_05__``, ``__dropped_05__`` and ``__upgrade_05__`` in
    :class:`Describable`. Keys the class declares are left as they are.

    Raises:
        DescriptionError: for a description holding a 0.5 key and the key
            that took its place.
    """
    renamed, dropped = cls.__get_all_05_keys__()
    if renamed or dropped:
        converted = {}
        for key, value in description.items():
            if not isinstance(key, str) or key in by_attr:
                converted[key] = value
            elif key in renamed:
                new = renamed[key]
                if new in description:
                    raise DescriptionError(
                        f'{owner}: the keys {key!r} (Brainstorm 0.5) and '
                        f'{new!r} name the same attribute; give only {new!r}.'
                    )
                converted[new] = value
            elif key not in dropped:
                converted[key] = value
        description = converted
    upgrade = getattr(cls, '__upgrade_05__', None)
    if upgrade is not None:
        description = upgrade(description)
    return description


def _restore_declared(
    owner: str, cls: type, key: str, declaration: tuple, value: object
) -> object:
    """Restore the described ``value`` of a declared attribute and check it."""
    name, arg = declaration
    try:
        restored = arg.check.restore(value)
    except DescriptionError as err:
        raise DescriptionError(f'{owner}: {key}: {err}') from None
    return check_value(
        owner, cls, name, arg, restored, shown=key if key != name else None
    )


def _check_undeclared_key(owner: str, key: object, strict: bool, by_attr: dict) -> None:
    """Refuse an undeclared key: always if private or special, else if strict."""
    if (
        not isinstance(key, str)
        or (key.startswith('__') and key.endswith('__'))
        or (strict and key.startswith('_'))
    ):
        raise DescriptionError(
            f'{owner}: the key {key!r} is not allowed (private '
            f'or special attribute). Allowed keys: '
            f'{sorted(by_attr)}'
        )
    if strict:
        raise DescriptionError(
            f'{owner}: unknown key {key!r}. Allowed keys: {sorted(by_attr)}'
        )


def _set_missing_defaults(
    instance: object, owner: str, description: dict, by_attr: dict
) -> None:
    """Give each declared attribute absent from ``description`` its default.

    Attributes set from ``__default_values__`` or ``__undescribed__`` count
    as present. Declared state (``Arg(state=True)``) is no exception: an
    object restored without it would fail later.

    Raises:
        DescriptionError: for a missing attribute that has no default.
    """
    for key, (_name, arg) in by_attr.items():
        if key in description or key in instance.__dict__:
            continue
        if arg.default is REQUIRED:
            raise DescriptionError(
                f'{owner}: the key {key!r} is missing ({arg.check.expected}).'
            )
        setattr(instance, key, copy.deepcopy(arg.default))


def _equal(a, b) -> bool:
    """Whether ``a`` equals ``b``; an array equals only values of its shape.

    Other shapes are unequal before comparing: NumPy 1.24 warns comparing
    arrays whose shapes do not broadcast (later versions raise).
    """
    try:
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            if np.shape(a) != np.shape(b):
                return False
        result = a == b
        if isinstance(result, np.ndarray):
            return bool(result.all()) and np.shape(a) == np.shape(b)
        return bool(result)
    except (ValueError, TypeError):
        return False


def get_description(this):
    """Turn ``this`` into a JSON-serialisable description.

    Describable objects describe themselves, lists and tuples become lists,
    NumPy arrays nested lists, dicts stay dicts, and scalars stay as they are.

    Raises:
        TypeError: for anything else, naming its type.
    """
    if isinstance(this, Describable):
        return this.__describe__()
    if isinstance(this, (list, tuple)):
        return [get_description(x) for x in this]
    if isinstance(this, np.ndarray):
        return this.tolist()
    if isinstance(this, dict):
        result = {}
        for key, value in this.items():
            try:
                result[key] = get_description(value)
            except TypeError as err:
                raise TypeError(f'{err} (under key {key!r})') from None
        return result
    if this is None or isinstance(this, (bool, str)):
        return this
    if isinstance(this, np.bool_):
        return bool(this)
    if isinstance(this, (int, np.integer)):
        return int(this)
    if isinstance(this, (float, np.floating)):
        return float(this)
    raise TypeError(f'Type {type(this).__name__} is not describable: {this!r}')


def _find_describable_class(name):
    if not isinstance(name, str):
        raise DescriptionError(f"'@type' must be a str. Received: {name!r}")
    for klass in get_inheritors(Describable):
        if klass.__name__ == name:
            return klass
    raise DescriptionError(
        f"No Describable class named '{name}' is known. Import the module "
        'that defines it before loading the description.'
    )


_PLAIN = (str, int, float, bool, type(None))


def create_from_description(description, expected=None):
    """Recreate an object from its description (see :func:`get_description`).

    Args:
        description: a description: a dict (with ``'@type'`` for a
            Describable object), a list, a str, a number, a bool or None.
        expected: the kind of object wanted here: None for any Describable,
            a class (or tuple of classes) that every top-level ``@type``
            must name a subclass of, or ``()`` for plain values only.

    Raises:
        DescriptionError: (a TypeError) for a value that is no description
            (a module, tuple, set, arbitrary object...), an unknown
            ``@type``, or one of another kind than ``expected``.
    """
    if isinstance(description, dict):
        if '@type' in description:
            klass = _find_describable_class(description['@type'])
            if expected is not None and not (expected and issubclass(klass, expected)):
                kinds = expected if isinstance(expected, tuple) else (expected,)
                wanted = (
                    ' or '.join(k.__name__ for k in kinds)
                    if kinds
                    else 'a plain value (no @type)'
                )
                raise DescriptionError(
                    f"'@type' {klass.__name__!r} is not allowed here: "
                    f'expected {wanted}.'
                )
            return klass.__new_from_description__(description)
        return {k: create_from_description(v, expected) for k, v in description.items()}
    if isinstance(description, list):
        return [create_from_description(x, expected) for x in description]
    if isinstance(description, _PLAIN):
        return description
    raise DescriptionError(
        f'create_from_description: {type(description).__name__} is not a '
        f'description (expected a dict, list, str, number, bool or None). '
        f'Received: {description!r:.80}'
    )


# Checks restore nested descriptions through this function; the arguments
# package sits below this module and cannot import it.
register_restorer(create_from_description)


def get_inheritors(cls) -> set:
    """All transitive subclasses of ``cls``."""
    result = set()
    todo = [cls]
    while todo:
        parent = todo.pop()
        for child in parent.__subclasses__():
            if child not in result:
                result.add(child)
                todo.append(child)
    return result
