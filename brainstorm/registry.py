"""The layer registry: layer classes by name.

Every subclass of :class:`~brainstorm.layers.base_layer.Layer` registers
itself here when its class statement runs (``Layer.__init_subclass__``),
built-in or defined in a user's script. Architectures name a layer type
without the ``LayerImpl`` suffix (``'FullyConnected'``);
:mod:`brainstorm.structure` looks the class up here, so it never imports
:mod:`brainstorm.layers`.

The registry holds weak references, as Python's own list of subclasses
does: a class that no longer exists is not found. If several live classes
share a name, the one defined last is found.
"""

from __future__ import annotations

import weakref

__all__ = ['register_layer_class', 'get_layer_class', 'is_registered', 'layer_classes']

#: class name -> weak references to the classes of that name, oldest first
_CLASSES: dict[str, list[weakref.ref]] = {}


def register_layer_class(layer_class: type) -> None:
    """Make ``layer_class`` findable by its class name.

    Args:
        layer_class: a layer class (its name usually ends in ``LayerImpl``).
    """
    refs = _CLASSES.setdefault(layer_class.__name__, [])
    refs[:] = [r for r in refs if r() is not None and r() is not layer_class]
    refs.append(weakref.ref(layer_class))


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


def layer_classes() -> list:
    """All live registered layer classes, sorted by class name.

    Where several classes share a name, only the one defined last is
    listed.
    """
    return [_live(name)[-1] for name in sorted(_CLASSES) if _live(name)]
