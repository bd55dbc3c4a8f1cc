"""Building architectures with ``>>`` and ``-``.

Constructor functions such as ``FullyConnected(100)`` return a
:class:`ConstructionWrapper`. ``a >> b`` connects the selected output of
``a`` to the selected input of ``b``; ``layer - 'name'`` selects an output and
``'name' - layer`` an input. Names are made unique lazily among all layers
joined by ``>>``.
"""

from __future__ import annotations

import itertools

from brainstorm.describable import get_description
from brainstorm.errors import NetworkValidationError
from brainstorm.naming import (
    LAYER_NAME_RULE,
    is_valid_layer_name,
)
from brainstorm.registry import warn_if_not_found

__all__ = ['UniquelyNamed', 'LayerDetails', 'ConstructionWrapper']

_creation_counter = itertools.count()


class _Scope(set):
    """The members of one naming scope, with their names once computed.

    ``names`` maps each member to its name; it is computed for all members
    in one pass when a name is first read, and dropped when the scope
    grows.
    """

    names: dict | None = None


def _compute_names(scope) -> dict:
    """The name of every member of ``scope`` (see :class:`UniquelyNamed`)."""
    by_basename: dict = {}
    for member in scope:
        by_basename.setdefault(member._basename, []).append(member)
    taken = {b for b, members in by_basename.items() if len(members) == 1}
    names = {}
    for basename, members in by_basename.items():
        if len(members) == 1:
            names[members[0]] = basename
            continue
        number = 0
        for member in sorted(members, key=lambda m: m._creation_id):
            number += 1
            while f'{basename}_{number}' in taken:
                number += 1
            names[member] = f'{basename}_{number}'
    return names


class UniquelyNamed:
    """An object whose name is made unique within its scope when read.

    Layers sharing a basename in a scope are numbered ``base_1, base_2, ...``
    in creation order, skipping numbers already held by a layer whose own
    basename is unique in that scope.

    The names of a scope are computed together when one is read and kept
    until the scope changes, so naming all layers of a scope takes time
    linear in its size.
    """

    def __init__(self, basename: str):
        self._basename = basename
        self._creation_id = next(_creation_counter)
        self.scope = _Scope((self,))

    def merge_scopes(self, other: UniquelyNamed) -> None:
        """Join the naming scopes of ``self`` and ``other``.

        The smaller scope is added to the larger one, which all members
        then share.
        """
        if other.scope is self.scope:
            return
        big, small = self.scope, other.scope
        if len(big) < len(small):
            big, small = small, big
        big |= small
        big.names = None
        for member in small:
            member.scope = big

    @property
    def name(self) -> str:
        """The base name, numbered (``'Hid_2'``) if its scope shares it."""
        scope = self.scope
        if scope.names is None:
            scope.names = _compute_names(scope)
        names = scope.names
        if self not in names:
            raise AssertionError('layer missing from its own naming scope')
        return names[self]

    def __hash__(self):
        return id(self)

    def __eq__(self, other):
        return self is other


class LayerDetails(UniquelyNamed):
    """Everything known about a layer while an architecture is being built.

    Attributes:
        layer_type: the type name, e.g. ``'FullyConnected'``.
        incoming: list of ``(layer_details, output_name, input_name)``.
        outgoing: list of ``(output_name, input_name, layer_details)``.
        layer_kwargs: the keyword arguments of the layer.
    """

    def __init__(
        self, layer_type: str, name: str | None = None, kwargs: dict | None = None
    ):
        if not is_valid_layer_name(layer_type):
            raise NetworkValidationError(
                f'Invalid layer type {layer_type!r}: a layer type must be '
                f'{LAYER_NAME_RULE}.'
            )
        if name is not None and not is_valid_layer_name(name):
            raise NetworkValidationError(
                f'{layer_type}: invalid layer name {name!r}. A layer name '
                f'must be {LAYER_NAME_RULE}.'
            )
        super().__init__(name or layer_type)
        self.layer_type = layer_type
        self.incoming: list = []
        self.outgoing: list = []
        self.layer_kwargs = dict(kwargs or {})

    def collect_connected_layers(self) -> set:
        """All layers transitively connected to this one (itself included)."""
        seen = {self}
        todo = [self]
        while todo:
            layer = todo.pop()
            neighbours = [src for src, _, _ in layer.incoming] + [
                dst for _, _, dst in layer.outgoing
            ]
            for n in neighbours:
                if n not in seen:
                    seen.add(n)
                    todo.append(n)
        return seen

    def connect_to(
        self, other: LayerDetails, output_name: str, input_name: str
    ) -> None:
        """Connect ``output_name`` of this layer to ``input_name`` of ``other``."""
        self.outgoing.append((output_name, input_name, other))
        other.incoming.append((self, output_name, input_name))
        self.merge_scopes(other)

    def __repr__(self):
        return f'<Layer: {self.name!r} - {self.layer_type}>'


def _storable_kwargs(given: dict, resolved: dict) -> dict:
    """The arguments ``given`` to a layer, as its architecture keeps them.

    A value the architecture can describe stays as given, so the
    architecture of ``Dropout(0)`` still says ``0``, as Brainstorm 0.5's
    did. Any other value that the layer's declared check accepted (a
    ``Fraction``, a ``pathlib.Path``) is kept normalised, as the check
    returned it: a layer accepted when it is made is then not refused
    when its network is built. Only the given names are kept; defaults
    stay out of the architecture.
    """
    stored = {}
    for key, value in given.items():
        if key in resolved:
            try:
                get_description(value)
            except TypeError:
                value = resolved[key]
        stored[key] = value
    return stored


class ConstructionWrapper:
    """What constructor functions return: a layer to be connected with ``>>``.

    It holds the layer's details and a selected input and output.

    Args:
        layer_details: the :class:`LayerDetails` of the layer.
        input_name: the input used when something connects into this layer.
        output_name: the output used when this layer connects onwards.
    """

    def __init__(
        self,
        layer_details: LayerDetails,
        input_name: str = 'default',
        output_name: str = 'default',
    ):
        self.layer = layer_details
        self.input_name = input_name
        self.output_name = output_name

    @classmethod
    def create(cls, layer_type, name: str | None = None, **kwargs):
        """Make a wrapper for a new layer.

        Args:
            layer_type: a Layer class, or its name, ending in ``LayerImpl``.
            name: the layer's name (defaults to the type name).
            **kwargs: the layer's arguments; they go into the architecture,
                so they must be describable (numbers, strings, lists, dicts)
                or, where the layer declares the argument, accepted by its
                check, which then gives the value kept.

        Networks are built from the class of that name defined last (the
        architecture keeps only the type name): a class that a later one of
        its name displaced gives a ``UserWarning`` naming both.

        Raises:
            NetworkValidationError: for a bad type or name.
            LayerValidationError: if the layer class declares its arguments
                and one of them is invalid.
        """
        layer_class = None
        if isinstance(layer_type, type):
            layer_class = layer_type
            layer_type = layer_type.__name__
            warn_if_not_found(layer_class)
        if not isinstance(layer_type, str) or not layer_type.endswith('LayerImpl'):
            raise NetworkValidationError(
                f'Layer type must be a class or class name ending in '
                f"'LayerImpl'. Received: {layer_type!r}"
            )
        type_name = layer_type[: -len('LayerImpl')]
        details = LayerDetails(type_name, name, kwargs)
        check = getattr(layer_class, 'check_kwargs', None)
        if check is not None:
            resolved = check(name or type_name, kwargs)
            if isinstance(resolved, dict):
                details.layer_kwargs = _storable_kwargs(kwargs, resolved)
        return cls(details)

    def __rshift__(self, other):
        if not isinstance(other, ConstructionWrapper):
            raise TypeError(
                f'Cannot connect {self.layer!r} to {other!r}: only layers '
                'made by layer constructor functions can be connected with >>.'
            )
        self.layer.connect_to(other.layer, self.output_name, other.input_name)
        return other

    def __sub__(self, other):
        if not isinstance(other, str):
            raise TypeError(
                f'Select an output of {self.layer!r} with a string '
                f'name. Received: {other!r}'
            )
        return ConstructionWrapper(self.layer, self.input_name, other)

    def __rsub__(self, other):
        if not isinstance(other, str):
            raise TypeError(
                f'Select an input of {self.layer!r} with a string '
                f'name. Received: {other!r}'
            )
        return ConstructionWrapper(self.layer, other, self.output_name)

    def __repr__(self):
        return (
            f'<{self.layer.layer_type} {self.layer.name!r} '
            f'in={self.input_name!r} out={self.output_name!r}>'
        )
