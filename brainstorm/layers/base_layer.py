"""The base class of every layer, built-in or user-defined.

A layer declares the inputs it expects (shape templates) and its arguments,
computes in ``setup`` the shapes of its outputs, parameters and internals,
and implements ``forward_pass`` and ``backward_pass`` on the buffer views it
is handed, using only handler operations.
"""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.attributes import Kwarg
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.utils import LayerValidationError, get_inheritors

__all__ = ['Layer', 'get_layer_class_from_typename']


class Layer:
    """Base class of all layers (class names end in ``LayerImpl``).

    Class attributes:
        expected_inputs: input name -> :class:`StructureTemplate`.
        declared_kwargs: argument name -> :class:`Kwarg` (type, default,
            constraint and description). Layers written for Brainstorm 0.5
            may give only ``expected_kwargs`` (a set of names) instead.
        expected_kwargs: the set of accepted argument names (derived from
            ``declared_kwargs`` when that is given).
        computes_no_input_deltas_for: inputs without deltas (for the tests).
        computes_no_gradients_for: parameters without gradients.
        takes_no_output_deltas_from: outputs whose deltas are ignored.

    Args:
        name: the layer's name.
        in_shapes: input name -> :class:`BufferStructure`.
        incoming_connections: connections into this layer.
        outgoing_connections: connections out of this layer.
        **kwargs: the layer's arguments.
    """

    expected_inputs: dict = {}
    expected_kwargs: set = set()
    declared_kwargs: dict = {}
    computes_no_input_deltas_for: tuple = ()
    computes_no_gradients_for: tuple = ()
    takes_no_output_deltas_from: tuple = ()

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if 'declared_kwargs' in cls.__dict__ and \
                'expected_kwargs' not in cls.__dict__:
            cls.expected_kwargs = set(cls.declared_kwargs)

    def __init__(self, name: str, in_shapes: dict, incoming_connections,
                 outgoing_connections, **kwargs):
        self.name = name
        self.kwargs = kwargs
        self.in_shapes = OrderedDict(sorted(in_shapes.items()))
        self.incoming = incoming_connections
        self.outgoing = outgoing_connections
        self.handler = None
        resolved = self.check_kwargs(name, kwargs)
        self._validate_in_shapes()
        outputs, parameters, internals = self.setup(resolved, self.in_shapes)
        self.out_shapes = outputs
        self.parameter_shapes = parameters
        self.internal_shapes = internals
        self._validate_out_shapes()
        self._validate_connections()

    # ------------------------------------------------------------ naming ---

    @classmethod
    def get_type_name(cls) -> str:
        """The type name used in architectures (class name minus LayerImpl)."""
        name = cls.__name__
        return name[:-len('LayerImpl')] if name.endswith('LayerImpl') else name

    @property
    def layer_type(self) -> str:
        return self.get_type_name()

    def _desc(self) -> str:
        return f"{self.layer_type} '{self.name}'"

    # -------------------------------------------------------- validation ---

    @classmethod
    def check_kwargs(cls, name: str, kwargs: dict) -> dict:
        """Validate ``kwargs`` against the declarations; return them with
        defaults filled in and values normalised.

        Raises:
            LayerValidationError: for unknown or invalid arguments.
        """
        desc = f"{cls.get_type_name()} '{name}'"
        unexpected = set(kwargs) - set(cls.expected_kwargs)
        if unexpected:
            raise LayerValidationError(
                f'{desc}: unexpected argument(s) {sorted(unexpected)}. '
                f'Expected only: {sorted(cls.expected_kwargs)}')
        resolved = dict(kwargs)
        for kw_name, declaration in cls.declared_kwargs.items():
            if isinstance(declaration, Kwarg):
                resolved[kw_name] = declaration.resolve(desc, kw_name, kwargs)
        return resolved

    def _validate_in_shapes(self) -> None:
        for in_name in self.in_shapes:
            if in_name not in self.expected_inputs:
                raise LayerValidationError(
                    f'{self._desc()}: has no input {in_name!r}. Its inputs '
                    f'are: {sorted(self.expected_inputs)}')
        for in_name, template in self.expected_inputs.items():
            if in_name not in self.in_shapes:
                raise LayerValidationError(
                    f'{self._desc()}: input {in_name!r} is not connected. '
                    f'Expected a buffer matching {template}.')
            if not template.matches(self.in_shapes[in_name]):
                raise LayerValidationError(
                    f'{self._desc()}: input {in_name!r} must match '
                    f'{template}. Received shape '
                    f'{self.in_shapes[in_name].shape}')

    def _validate_out_shapes(self) -> None:
        for category in ('out_shapes', 'parameter_shapes', 'internal_shapes'):
            shapes = getattr(self, category)
            if not isinstance(shapes, dict) or not all(
                    isinstance(s, BufferStructure) for s in shapes.values()):
                raise LayerValidationError(
                    f'{self._desc()}: setup() must return three OrderedDicts '
                    f'of names to BufferStructures; {category} is {shapes!r}')

    def _validate_connections(self) -> None:
        for conn in self.outgoing:
            out_name = conn.output_name
            if out_name.startswith('..'):
                continue
            if out_name not in self.out_shapes:
                raise LayerValidationError(
                    f'{self._desc()}: has no output {out_name!r} (connected '
                    f'to {conn.end_layer}.{conn.input_name}). Its outputs are:'
                    f' {list(self.out_shapes)}')

    # ------------------------------------------------------------- API -----

    def setup(self, kwargs: dict, in_shapes: dict):
        """Return ``(outputs, parameters, internals)``: three OrderedDicts
        mapping names to :class:`BufferStructure`."""
        raise NotImplementedError(
            f'{type(self).__name__} must implement setup()')

    def set_handler(self, new_handler) -> None:
        """Use ``new_handler`` for all further computations."""
        self.handler = new_handler

    def forward_pass(self, buffers, training_pass: bool = True) -> None:
        """Compute the outputs (and internals) from the inputs."""

    def backward_pass(self, buffers) -> None:
        """Add input deltas and compute gradients from the output deltas."""

    def get_shape(self, path: str) -> tuple:
        """The shape template of a buffer, e.g. ``'outputs.default'``."""
        category, _, name = path.partition('.')
        shapes = {'parameters': self.parameter_shapes,
                  'inputs': self.in_shapes,
                  'outputs': self.out_shapes,
                  'internals': self.internal_shapes}
        if category not in shapes:
            raise KeyError(f'{self._desc()}: unknown category {category!r}; '
                           f'use one of {sorted(shapes)}')
        if name not in shapes[category]:
            raise KeyError(f'{self._desc()}: no {category} buffer {name!r}; '
                           f'available: {list(shapes[category])}')
        return shapes[category][name].shape

    def __repr__(self):
        return f'<{type(self).__name__} {self.name!r}>'


def get_layer_class_from_typename(typename: str) -> type:
    """The Layer subclass with class name ``typename`` (e.g.
    ``'FullyConnectedLayerImpl'``).

    Raises:
        TypeError: if no imported Layer subclass has that name.
    """
    for layer_class in get_inheritors(Layer):
        if layer_class.__name__ == typename:
            return layer_class
    raise TypeError(f"Layer type '{typename}' is unknown. Built-in layers are "
                    'in brainstorm.layers; import the module defining a custom'
                    ' layer before building a network with it.')


def default_size(size, in_shape: BufferStructure):
    """``size`` as a tuple, or the input's feature shape if size is None."""
    if size is None:
        return in_shape.feature_shape
    return (size,) if isinstance(size, int) else tuple(size)


def time_template(*features, **kwargs) -> StructureTemplate:
    """``StructureTemplate('T', 'B', *features)`` (default ``'...'``)."""
    return StructureTemplate('T', 'B', *(features or ('...',)), **kwargs)
