"""Turning objects into JSON-friendly descriptions and back.

A :class:`Describable` object describes itself as a dict holding its class
name under ``'@type'`` and its (described) instance members. Such a
description can be stored as JSON or HDF5 and turned back into an equivalent
object with :func:`create_from_description`.
"""

from __future__ import annotations

import copy

import numpy as np

from brainstorm.utils import get_inheritors

__all__ = ['Describable', 'get_description', 'create_from_description']


class Describable:
    """Base class for everything that can be saved as a description.

    Class attributes (merged along the MRO):

    * ``__undescribed__``: a set of member names left out of the
      description, or a dict mapping such names to the value they get when
      the object is recreated.
    * ``__default_values__``: a dict of member names to default values; a
      member equal to its default is left out and restored on load.
    """

    __undescribed__: set | dict = set()
    __default_values__: dict = {}

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
    def __get_all_default_values__(cls) -> dict:
        result = {}
        for klass in reversed(cls.__mro__):
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
                raise TypeError(f'{err} (in {type(self).__name__}.{key})') \
                    from None
        description['@type'] = type(self).__name__
        return description

    @classmethod
    def __new_from_description__(cls, description: dict):
        """Create an instance from a description without calling __init__."""
        instance = cls.__new__(cls)
        for key, value in cls.__get_all_undescribed__().items():
            setattr(instance, key, copy.deepcopy(value))
        for key, value in cls.__get_all_default_values__().items():
            setattr(instance, key, copy.deepcopy(value))
        for key, value in description.items():
            if key != '@type':
                setattr(instance, key, create_from_description(value))
        instance.__init_from_description__(description)
        return instance

    def __init_from_description__(self, description: dict) -> None:
        """Hook for subclasses to finish recreating themselves."""


def _equal(a, b) -> bool:
    try:
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


def _find_describable_class(name: str):
    for klass in get_inheritors(Describable):
        if klass.__name__ == name:
            return klass
    raise TypeError(f"No Describable class named '{name}' is known. Import the "
                    'module that defines it before loading the description.')


def create_from_description(description):
    """Recreate an object from its description (see :func:`get_description`)."""
    if isinstance(description, dict):
        if '@type' in description:
            klass = _find_describable_class(description['@type'])
            return klass.__new_from_description__(description)
        return {k: create_from_description(v) for k, v in description.items()}
    if isinstance(description, list):
        return [create_from_description(x) for x in description]
    return description
