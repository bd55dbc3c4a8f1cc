"""The layer registry: layer classes by name.

Every subclass of :class:`~brainstorm.layers.base_layer.Layer` registers
itself here when its class statement runs (``Layer.__init_subclass__``),
built-in or defined in a user's script. Architectures name a layer type
without the ``LayerImpl`` suffix (``'FullyConnected'``);
:mod:`brainstorm.structure` looks the class up here, so it never imports
:mod:`brainstorm.layers`.

The registry holds weak references, as Python's own list of subclasses
does: a class that no longer exists is not found. If several live classes
share a name, the one defined last is found. A class that displaces a live
class of its name defined elsewhere (another module or qualified name)
gives a ``UserWarning`` naming both; defining a class again in the same
place (a re-run notebook cell, ``importlib.reload``) is silent.
"""

from __future__ import annotations

import gc
import sys
import warnings
import weakref
from types import FrameType

__all__ = [
    'register_layer_class',
    'get_layer_class',
    'is_registered',
    'layer_classes',
    'warn_if_not_found',
    'qualified_name',
]

#: class name -> weak references to the classes of that name, oldest first
_CLASSES: dict[str, list[weakref.ref]] = {}


def register_layer_class(layer_class: type) -> None:
    """Make ``layer_class`` findable by its class name.

    Warns (``UserWarning``) if it displaces a live class of the same name
    defined in another module or under another qualified name: networks
    are built from the class defined last.

    Args:
        layer_class: a layer class (its name usually ends in ``LayerImpl``).
    """
    name = layer_class.__name__
    if _displaced(name, layer_class) is not None:
        # a class defined in a function that has returned lives on until
        # the cycle collector runs: collect (holding no reference to it)
        # before warning about it
        gc.collect()
        displaced = _displaced(name, layer_class)
        if displaced is not None:
            warnings.warn(
                _displacement_message(layer_class, displaced),
                UserWarning,
                stacklevel=_stacklevel_outside_brainstorm(),
            )
    refs = _CLASSES.setdefault(name, [])
    refs[:] = [r for r in refs if r() is not None and r() is not layer_class]
    refs.append(weakref.ref(layer_class))


def qualified_name(cls: type) -> str:
    """Where ``cls`` is defined: ``'module.QualifiedName'``."""
    return f'{cls.__module__}.{cls.__qualname__}'


def _displaced(name: str, layer_class: type) -> type | None:
    """The class that registering ``layer_class`` displaces from ``name``.

    The live class found now (``layer_class`` aside), if it is defined in
    another place; None if there is none, or if it is an earlier
    definition of ``layer_class`` in the same place.
    """
    others = [c for c in _live(name) if c is not layer_class]
    if others and qualified_name(others[-1]) != qualified_name(layer_class):
        return others[-1]
    return None


def _is_builtin(cls: type) -> bool:
    """Whether ``cls`` is one of brainstorm's own layer classes."""
    return cls.__module__.startswith('brainstorm.layers.')


def _built_from(cls: type) -> str:
    """What the registry now does with ``cls``, for the warnings."""
    name = cls.__name__
    if name.endswith('LayerImpl'):
        return (
            f"networks build every '{name[: -len('LayerImpl')]}' layer from "
            f'{qualified_name(cls)}'
        )
    return f'the registry finds {qualified_name(cls)} under the name {name!r}'


def _displacement_message(new: type, old: type) -> str:
    """The warning for ``new`` displacing ``old`` (another class, same name)."""
    if _is_builtin(old):
        type_name = old.__name__[: -len('LayerImpl')]
        return (
            f"Layer class {qualified_name(new)} replaces brainstorm's built-in "
            f'{qualified_name(old)}: {_built_from(new)} (the class defined last is '
            f'found), including those made by brainstorm.layers.{type_name}'
            "(...) or by brainstorm's tools and those of networks loaded from "
            'files (a network saved with the built-in may no longer load). To add a '
            'layer of your own beside the built-in, give its class a name of '
            f"its own, e.g. 'My{old.__name__}'."
        )
    return (
        f'Layer class {qualified_name(new)} displaces {qualified_name(old)}, a '
        f'live layer class of the same name defined elsewhere: '
        f'{_built_from(new)} (the '
        'class defined last is found), in networks loaded from files too. '
        'Give one of them another name to use both.'
    )


def _stacklevel_outside_brainstorm() -> int:
    """The ``stacklevel`` of the first caller outside brainstorm.

    For a warning raised by the function calling this one: it then points
    at the user's class statement or call, not at brainstorm's code.
    """
    level = 1
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and (
        frame.f_globals.get('__name__', '').partition('.')[0] == 'brainstorm'
    ):
        frame = frame.f_back
        level += 1
    return level


def _live(name: str) -> list:
    """The live classes registered under ``name``, oldest first."""
    refs = _CLASSES.get(name, [])
    classes = [r() for r in refs]
    return [c for c in classes if c is not None]


def get_layer_class(class_name: str) -> type:
    """The registered layer class named ``class_name``.

    Args:
        class_name: the class name, e.g. ``'FullyConnectedLayerImpl'``.

    Returns:
        The live class of that name defined last.

    Raises:
        TypeError: if no live layer class has that name.
    """
    classes = _live(class_name)
    if classes:
        return classes[-1]
    raise TypeError(
        f"Layer type '{class_name}' is unknown. Built-in layers are "
        'in brainstorm.layers; import the module defining a custom'
        ' layer before building a network with it.'
    )


def is_registered(cls: type) -> bool:
    """Whether ``cls`` is a registered (live) layer class."""
    return any(c is cls for c in _live(cls.__name__))


def warn_if_not_found(layer_class: type) -> None:
    """Warn if networks build layers of this class's name from another class.

    That is the case for a registered class that a later class of the same
    name displaced (one defined elsewhere, or the same class statement run
    again): architectures keep only the type name, and networks are built
    from the class defined last. :meth:`ConstructionWrapper.create
    <brainstorm.structure.construction.ConstructionWrapper.create>` calls
    it for the class it is given.

    Args:
        layer_class: the class a layer was made with.
    """
    if not is_registered(layer_class):
        return
    name = layer_class.__name__
    if get_layer_class(name) is layer_class:
        return
    gc.collect()  # the later class may be garbage not yet collected
    found = get_layer_class(name)
    if found is layer_class:
        return
    if qualified_name(found) == qualified_name(layer_class):
        given = f'an older definition of {qualified_name(layer_class)}'
        why = (
            'its newest definition (the module or cell defining it ran '
            'again), not the one given'
        )
    else:
        given = f'layer class {qualified_name(layer_class)}'
        why = 'the class of that name defined last, not the one given'
    warnings.warn(
        f'ConstructionWrapper.create got {given}, but {_built_from(found)}, '
        f"{why}; any check of the layer's arguments ran in the class given. "
        'Make the layer with the class networks build, or give the classes '
        'names of their own.',
        UserWarning,
        stacklevel=_stacklevel_outside_brainstorm(),
    )


def layer_classes() -> list:
    """All live registered layer classes, sorted by class name.

    Where several classes share a name, only the one defined last is
    listed.
    """
    return [_live(name)[-1] for name in sorted(_CLASSES) if _live(name)]
