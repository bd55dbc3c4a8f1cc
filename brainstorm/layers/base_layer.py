"""The base class of every layer, built-in or user-defined.

A layer declares the inputs it expects (shape templates) and its arguments,
computes in ``setup`` the shapes of its outputs, parameters and internals,
and implements ``forward_pass`` and ``backward_pass`` on the buffer views it
is handed, using only handler operations.
"""

from __future__ import annotations

import copy
import inspect
import sys
from collections import OrderedDict
from typing import Any

import numpy as np

from brainstorm.arguments import REQUIRED, Arg, resolve_defaults
from brainstorm.describable import get_inheritors as get_inheritors  # 0.5's namespace
from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import resolve_kwarg
from brainstorm.naming import get_by_path as get_by_path  # 0.5's namespace
from brainstorm.registry import get_layer_class, layer_classes, register_layer_class
from brainstorm.structure.buffer_structure import (
    BUFFER_TYPE_NAMES,
    BufferStructure,
    StructureTemplate,
)
from brainstorm.structure.buffer_views import BufferView

__all__ = ['Layer', 'get_layer_class_from_typename']


class Layer:
    """Base class of all layers (class names end in ``LayerImpl``).

    Attributes:
        expected_inputs: input name -> :class:`StructureTemplate`.
        optional_inputs: inputs the layer takes if they are connected
            (name -> :class:`StructureTemplate`), e.g. the ``mask`` of a
            recurrent layer with ``reverse=True``.
        declared_kwargs: argument name -> declaration: a
            :class:`~brainstorm.arguments.Arg` (or its layer spelling
            :class:`~brainstorm.layers.attributes.Kwarg`) with the check,
            default and description. Layers written for Brainstorm 0.5
            may give only ``expected_kwargs`` (a set of names) instead.
        expected_kwargs: the set of accepted argument names (derived from
            ``declared_kwargs`` when that is given).
        computes_no_input_deltas_for: inputs without deltas (for the tests).
            This and the other collections of names below are tuples (a
            list or set will do; a bare str is refused: mind the comma
            of ``('targets',)``).
        computes_no_gradients_for: parameters without gradients.
        takes_no_output_deltas_from: outputs whose deltas are ignored.
        passes_back_internal_deltas: internals ``X`` whose delta ``dX`` the
            backward pass adds to (rather than overwrites), so that a layer
            fed with ``'..internals.X'`` gets correct gradients. Exposing
            any other internal warns that its deltas are ignored.

    Args:
        name: the layer's name.
        in_shapes: input name -> :class:`BufferStructure`.
        incoming_connections: connections into this layer.
        outgoing_connections: connections out of this layer.
        **kwargs: the layer's arguments.
    """

    expected_inputs: dict = {}
    optional_inputs: dict = {}
    expected_kwargs: set = set()
    declared_kwargs: dict = {}
    computes_no_input_deltas_for: tuple = ()
    computes_no_gradients_for: tuple = ()
    takes_no_output_deltas_from: tuple = ()
    passes_back_internal_deltas: tuple = ()
    #: Parameters the layer maintains itself, name -> initial value (e.g.
    #: BatchNorm's running statistics ``{'mu': 0.0, 'sigma': 1.0}``):
    #: steppers and modifiers leave them alone, and ``net.initialize``
    #: gives them this value unless a pattern names them. They get no
    #: gradient, so they belong in ``computes_no_gradients_for`` too.
    untrained_parameters: dict = {}
    #: Inputs that hold whole-number ids (vocabulary ids, class indices),
    #: e.g. ``('default',)`` for Embedding. Data fed to such an input
    #: straight from the Input layer is refused by
    #: ``Network.provide_external_data`` where the cast to the handler's
    #: dtype would change an id (float16 holds every whole number only up
    #: to 2048: the float 2049.0 would become 2048, another row).
    id_inputs: tuple = ()
    #: Outputs that do not depend on some of the inputs, output name ->
    #: those inputs. ``net.predict`` (and everything that asks which inputs
    #: an output needs) then does not ask for data that reaches the output
    #: only through them. The default says that an output layer's
    #: ``predictions`` do not depend on its ``targets``; a layer whose
    #: outputs are named otherwise declares its own, e.g.
    #: ``{'probabilities': ('labels',)}``. The layer tests of
    #: :mod:`brainstorm.testing` check the claim.
    independent_outputs: dict = {'predictions': ('targets',)}
    #: True if ``backward_pass`` writes every element of the gradients of
    #: all its parameters (except those in ``computes_no_gradients_for``)
    #: without reading them first, i.e. overwrites instead of adding. The
    #: network then does not zero them before the pass. The layer tests of
    #: :mod:`brainstorm.testing` check the claim by filling the gradients
    #: with garbage first.
    overwrites_gradients: bool = False
    #: Buffers a layer wants adjacent in memory, to work on them as one
    #: array: ``{category: {group: (member, ...)}}`` for the categories
    #: 'parameters', 'gradients' and 'internals'. Members must share the
    #: buffer type, context size and backward flag; the network lays them
    #: out side by side in the given order and
    #: ``buffers.<category>.get_group(group)`` is one array over all of
    #: them, concatenated along the feature axis (time- and batch-sized
    #: buffers) or along the first axis (constant buffers, e.g. four
    #: ``(size, in)`` weight matrices give a ``(4 * size, in)`` matrix).
    #: Parameter and gradient groups must list consecutive parameters in
    #: their declaration order.
    grouped_buffers: dict = {}
    #: Inputs whose deltas nobody reads in the running backward pass. The
    #: network sets it (inputs fed only by the Input layer, during
    #: ``backward_pass(input_deltas=False)``, which steppers use); layers
    #: may then skip computing those deltas. Empty unless the network says
    #: otherwise, so a layer run on its own computes every delta.
    skip_input_deltas: frozenset = frozenset()
    #: True if ``backward_pass`` honours :attr:`overwrite_input_deltas`.
    #: The network then leaves the deltas of an input unzeroed where this
    #: layer is the only one writing them, and tells the layer so.
    can_overwrite_input_deltas: bool = False
    #: Inputs whose deltas the running backward pass must WRITE, every
    #: element, instead of adding to them: the network did not zero them,
    #: so they hold garbage, and no other layer writes them. The network
    #: sets it during its backward pass, only for layers with
    #: ``can_overwrite_input_deltas`` and never for inputs in
    #: ``skip_input_deltas`` or ``computes_no_input_deltas_for``. Empty
    #: otherwise, so a layer run on its own adds its deltas. The layer tests
    #: of :mod:`brainstorm.testing` check a layer's claim with garbage.
    overwrite_input_deltas: frozenset = frozenset()
    #: True if ``backward_pass`` writes every element of its backward-only
    #: internals (internal deltas) before reading it, except their context
    #: slots and the deltas in ``passes_back_internal_deltas``. The network
    #: then zeroes only those. The layer tests of :mod:`brainstorm.testing`
    #: check this of every layer (stale backward internals).
    overwrites_backward_internals: bool = False
    #: True for layers whose ``loss`` output the network adds to its total
    #: loss (``Loss``); the network lists them in ``net.loss_layers``.
    is_loss: bool = False
    #: True for layers whose parameters are the four gate blocks of an LSTM
    #: (names ending in z, i, f, o): ``LstmOptInit`` picks its gate's
    #: initializer for them.
    has_lstm_gates: bool = False

    def __init_subclass__(cls, **kwargs):
        """Register the class by name; derive ``expected_kwargs``.

        A declared argument without a default of its own takes the default
        of the layer's constructor function (the function named like the
        type, defined above the class in its module): each default is
        written once, in the function's signature.
        """
        super().__init_subclass__(**kwargs)
        _check_independent_outputs(cls)
        _check_input_templates(cls)
        _check_name_tuples(cls)
        if 'declared_kwargs' in cls.__dict__:
            _check_declared_kwargs(cls)
            if 'expected_kwargs' not in cls.__dict__:
                cls.expected_kwargs = set(cls.declared_kwargs)
            factory = _defining_namespace(cls).get(cls.get_type_name())
            if inspect.isfunction(factory):
                cls.declared_kwargs = resolve_defaults(cls.declared_kwargs, factory)
        register_layer_class(cls)

    def __init__(
        self,
        name: str,
        in_shapes: dict,
        incoming_connections,
        outgoing_connections,
        **kwargs,
    ):
        self.name = name
        self.kwargs = kwargs
        self.in_shapes = OrderedDict(sorted(in_shapes.items()))
        self.incoming = incoming_connections
        self.outgoing = outgoing_connections
        self.handler: Any = None  # the network sets it (set_handler)
        # setup gets its own copy of the values: changing a list argument
        # in place must not change the architecture (and so the saved
        # file), self.kwargs, or a declared default shared by all layers
        resolved = copy.deepcopy(self.check_kwargs(name, kwargs))
        self._validate_in_shapes()
        outputs, parameters, internals = self._run_setup(resolved)
        self.out_shapes = outputs
        self.parameter_shapes = parameters
        self.internal_shapes = internals
        # what setup asked for; workspaces for a handler come on top
        self._setup_internals = internals
        self._validate_name_tuples()
        self._validate_out_shapes()
        self._validate_connections()

    # ------------------------------------------------------------ naming ---

    @classmethod
    def get_type_name(cls) -> str:
        """The type name used in architectures (class name minus LayerImpl)."""
        name = cls.__name__
        return name[: -len('LayerImpl')] if name.endswith('LayerImpl') else name

    @property
    def layer_type(self) -> str:
        """The type name of this layer (see :meth:`get_type_name`)."""
        return self.get_type_name()

    def _desc(self) -> str:
        return f"{self.layer_type} '{self.name}'"

    # -------------------------------------------------------- validation ---

    @classmethod
    def check_kwargs(cls, name: str, kwargs: dict) -> dict:
        """Validate ``kwargs`` against the declarations.

        Returns:
            The arguments with defaults filled in and values normalised.

        Raises:
            LayerValidationError: for unknown or invalid arguments.
        """
        desc = f"{cls.get_type_name()} '{name}'"
        unexpected = set(kwargs) - set(cls.expected_kwargs)
        if unexpected:
            raise LayerValidationError(
                f'{desc}: unexpected argument(s) {sorted(unexpected)}. '
                f'Expected only: {sorted(cls.expected_kwargs)}'
            )
        resolved = dict(kwargs)
        for kw_name, declaration in cls.declared_kwargs.items():
            if isinstance(declaration, Arg):
                resolved[kw_name] = resolve_kwarg(declaration, desc, kw_name, kwargs)
        return resolved

    def _run_setup(self, kwargs: dict) -> tuple:
        """``self.setup(kwargs, in_shapes)``, its errors and result named.

        An error raised in ``setup`` whose message does not name the layer
        is raised again, of the same type and chained to it, with the
        layer's type and name in front.

        Raises:
            LayerValidationError: ``setup`` did not return three items.
        """
        try:
            result = self.setup(kwargs, self.in_shapes)
        except Exception as err:
            named = _naming_layer(err, self._desc())
            if named is err:
                raise
            raise named from err
        if not isinstance(result, (tuple, list)) or len(result) != 3:
            received = (
                f'{len(result)} items' if isinstance(result, (tuple, list)) else 'one'
            )
            raise LayerValidationError(
                f'{self._desc()}: setup() must return (outputs, parameters, '
                'internals), three OrderedDicts of names to BufferStructures '
                f'(empty ones where there are none). Received {received}: '
                f'{result!r}'
            )
        return tuple(result)

    def _validate_in_shapes(self) -> None:
        accepted = {**self.expected_inputs, **self.optional_inputs}
        for attribute in ('expected_inputs', 'optional_inputs'):
            problem = _template_problem(getattr(self, attribute))
            if problem:
                raise TypeError(
                    f'{self._desc()} ({type(self).__name__}): {attribute} {problem}'
                )
        for in_name in self.in_shapes:
            if in_name not in accepted:
                raise LayerValidationError(
                    f'{self._desc()}: has no input {in_name!r}. Its inputs '
                    f'are: {sorted(accepted)}'
                )
        for in_name, template in accepted.items():
            if in_name not in self.in_shapes and in_name in self.optional_inputs:
                continue
            if in_name not in self.in_shapes:
                raise LayerValidationError(
                    f'{self._desc()}: input {in_name!r} is not connected. '
                    f'Expected a buffer matching {template}.'
                )
            if not template.matches(self.in_shapes[in_name]):
                raise LayerValidationError(
                    f'{self._desc()}: input {in_name!r} must match '
                    f'{template}. Received shape '
                    f'{self.in_shapes[in_name].shape}'
                )

    def _validate_name_tuples(self) -> None:
        """Refuse name attributes that setup or __init__ set to no tuple."""
        _check_name_tuples(self, f'{self._desc()} ({type(self).__name__}): ')

    def _validate_out_shapes(self) -> None:
        for category in ('out_shapes', 'parameter_shapes', 'internal_shapes'):
            shapes = getattr(self, category)
            if not isinstance(shapes, dict) or not all(
                isinstance(s, BufferStructure) for s in shapes.values()
            ):
                raise LayerValidationError(
                    f'{self._desc()}: setup() must return three OrderedDicts '
                    f'of names to BufferStructures; {category} is {shapes!r}'
                )
            for name in shapes:
                if not _is_buffer_name(name):
                    kind = _CATEGORY_NAMES[category]
                    raise LayerValidationError(
                        f'{self._desc()}: setup() returned {kind} named '
                        f'{name!r} ({type(name).__name__}). The names of '
                        'outputs, parameters and internals must be '
                        "non-empty strs not starting with '@' (the layout's "
                        "own keys) or '..' (connections to internals and "
                        "parameters), e.g. 'default' or 'W'."
                    )
        for name, structure in self.out_shapes.items():
            if structure.is_backward_only:
                raise LayerValidationError(
                    f'{self._desc()}: output {name!r} must not be '
                    'is_backward_only: the next layers read it in the forward '
                    'pass, and the network zeroes backward-only memory when '
                    'the backward pass starts. Only internals may be '
                    f'backward-only. Received {structure!r}, is_backward_only=True'
                )
        for name, structure in self.parameter_shapes.items():
            if structure.buffer_type or structure.is_backward_only:
                kind = (
                    'backward-only'
                    if structure.is_backward_only
                    else BUFFER_TYPE_NAMES[structure.buffer_type]
                )
                raise LayerValidationError(
                    f'{self._desc()}: parameter {name!r} must be constant-size '
                    "(feature dimensions only, no leading 'T'/'B') and not "
                    'is_backward_only, e.g. BufferStructure'
                    f'{structure.feature_shape!r}. Received {structure!r} ({kind})'
                )

    def _validate_connections(self) -> None:
        for conn in self.outgoing:
            out_name = conn.output_name
            if out_name.startswith('..'):
                continue
            if out_name not in self.out_shapes:
                raise LayerValidationError(
                    f'{self._desc()}: has no output {out_name!r} (connected '
                    f'to {conn.end_layer}.{conn.input_name}). Its outputs are:'
                    f' {list(self.out_shapes)}'
                )

    # ------------------------------------------------------------- API -----

    def setup(self, kwargs: dict, in_shapes: dict):
        """Compute the shapes of the layer's outputs, parameters and internals.

        Args:
            kwargs: the checked arguments, defaults filled in: the layer's
                own copy, so changing a value in place changes neither the
                architecture nor ``self.kwargs``.
            in_shapes: input name -> :class:`BufferStructure`.

        Returns:
            ``(outputs, parameters, internals)``: three OrderedDicts mapping
            names (non-empty strs not starting with ``'@'`` or ``'..'``)
            to :class:`BufferStructure`. Parameters are constant-size
            (feature dimensions only); only internals may be
            ``is_backward_only``. An error raised here gets the layer's
            type and name in front of its message (same type, chained).
        """
        raise NotImplementedError(f'{type(self).__name__} must implement setup()')

    def set_handler(self, new_handler) -> None:
        """Use ``new_handler`` for all further computations."""
        self.handler = new_handler

    def workspace_shapes(self, handler) -> dict:
        """The workspaces this layer wants when it runs on ``handler``.

        A workspace is an internal buffer that lets some handlers run the
        layer faster (Convolution2D keeps its receptive fields in
        ``columns``); the layer computes the same without it. The network
        asks whenever it lays out memory for a handler (at creation and in
        ``set_handler``), so a handler that does not use a workspace does
        not pay for its memory. Ask the handler through a method it
        declares for the purpose (``Handler.keeps_conv_columns``), never
        by what kind of handler it is.

        Args:
            handler: the handler the layer is going to run on.

        Returns:
            Workspace name -> :class:`BufferStructure`, added to the
            internals from ``setup``. The base class asks for none.
        """
        return OrderedDict()

    def check_handler(self, handler) -> None:
        """Refuse ``handler`` if this layer's arguments cannot work on it.

        Called with each handler the layer is going to run on, before the
        network moves anything to it (by ``Network.set_handler``, also when
        the network is built), not in the passes.
        The base class accepts every handler; a layer with an argument its
        dtype may not hold (LayerNorm's ``epsilon``, 0 in float16 below
        3e-8) overrides it.

        Args:
            handler: the handler the layer is going to run on.

        Raises:
            LayerValidationError: naming the layer, the argument, its value,
                the handler's dtype and a value that works.
        """

    def use_workspaces_of(self, handler) -> bool:
        """Make the internals those of ``setup`` plus ``handler``'s workspaces.

        Args:
            handler: the handler the layer is going to run on.

        Returns:
            True if ``internal_shapes`` changed, i.e. the network's layout
            must be made anew.
        """
        internals = OrderedDict(self._setup_internals)
        internals.update(self.workspace_shapes(handler))
        if list(internals.items()) == list(self.internal_shapes.items()):
            return False
        self.internal_shapes = internals
        return True

    def check_parameter_values(self, name: str, values) -> None:
        """Refuse values that parameter ``name`` cannot have.

        Called with the NumPy values of each parameter when
        ``Network.initialize`` sets them and when a network is loaded, not
        in the passes (no per-step cost). The base class accepts any
        finite values; a layer with a parameter of restricted values (a
        clock's periods) overrides it.

        Args:
            name: the parameter's name.
            values: its values, a NumPy array of its shape.

        Raises:
            ValueError: naming the parameter, what its values must be and
                the first value that is not (the network adds the layer).
        """

    def forward_pass(self, buffers, training_pass: bool = True) -> None:
        """Compute the outputs (and internals) from the inputs."""

    def backward_pass(self, buffers) -> None:
        """Add input deltas and compute gradients from the output deltas."""

    def _zero_gradients(self, buffers) -> None:
        """Set every gradient to zero (those the layer computes).

        For the backward pass of a layer that ``overwrites_gradients`` over
        data without time steps: nothing was seen, and the network did not
        zero them.
        """
        for name, gradient in BufferView.items(buffers.gradients):
            if name not in self.computes_no_gradients_for:
                self.handler.fill(gradient, 0.0)

    def get_shape(self, path: str) -> tuple:
        """The shape template of a buffer, e.g. ``'outputs.default'``."""
        category, _, name = path.partition('.')
        shapes = {
            'parameters': self.parameter_shapes,
            'inputs': self.in_shapes,
            'outputs': self.out_shapes,
            'internals': self.internal_shapes,
        }
        if category not in shapes:
            raise KeyError(
                f'{self._desc()}: unknown category {category!r}; '
                f'use one of {sorted(shapes)}'
            )
        if name not in shapes[category]:
            raise KeyError(
                f'{self._desc()}: no {category} buffer {name!r}; '
                f'available: {list(shapes[category])}'
            )
        return shapes[category][name].shape

    def __repr__(self):
        return f'<{type(self).__name__} {self.name!r}>'


def _check_independent_outputs(cls: type[Layer]) -> None:
    """Refuse an ``independent_outputs`` that is no dict of names to names.

    A single name given where a tuple belongs (``{'p': 'labels'}``) would
    otherwise be taken letter by letter.
    """
    declared = cls.independent_outputs
    if isinstance(declared, dict) and all(
        isinstance(output, str)
        and isinstance(inputs, (tuple, list, set, frozenset))
        and all(isinstance(name, str) for name in inputs)
        for output, inputs in declared.items()
    ):
        return
    raise TypeError(
        f'{cls.__name__}.independent_outputs must be a dict of output names '
        "to tuples of input names, e.g. {'predictions': ('targets',)}. "
        f'Received: {declared!r}'
    )


def check_epsilon_for_handler(
    layer: Layer, epsilon: float, handler, constant: str
) -> None:
    """Refuse an ``epsilon`` of ``layer`` that ``handler``'s dtype makes 0 or inf.

    LayerNorm and BatchNorm add ``epsilon`` to the variance in the
    handler's dtype. Where it is 0 there (1e-12 in float16, 1e-50 in
    float32) a ``constant`` (a position or channel whose values are all
    equal, e.g. padding) divides 0 by 0: NaN. Where it is inf every
    output is ``beta``. A subnormal epsilon (the default 1e-5 in float16)
    works: the square root of the smallest float16 is a normal number.

    Args:
        layer: the layer (LayerNorm or BatchNorm) that adds it.
        epsilon: its ``epsilon``.
        handler: the handler it is going to run on.
        constant: what a constant group of values is for the layer.

    Raises:
        LayerValidationError: naming the layer, the epsilon, what the dtype
            makes of it and the smallest epsilon that works there.
    """
    dtype = np.dtype(handler.dtype)
    with np.errstate(over='ignore'):
        rounded = dtype.type(epsilon)
    if rounded != 0 and np.isfinite(rounded):
        return
    name, finfo = dtype.name, np.finfo(dtype)
    effect = 'gives NaN' if rounded == 0 else 'gives only beta'
    raise LayerValidationError(
        f'{layer._desc()}: epsilon must be a finite {name} number of at least '
        f'{float(finfo.smallest_subnormal):.4g}, the smallest one, on a '
        f'handler of dtype {name}: the layer adds epsilon to the variance in '
        f'{name}, where {epsilon:g} is {float(rounded):g}, and a {constant} '
        f'then {effect}. Received: epsilon={epsilon!r}. Use e.g. the default '
        'epsilon=1e-5.'
    )


#: the class attributes that list names, with the kind of name and an example
_NAME_TUPLES = {
    'computes_no_input_deltas_for': ('input', 'targets'),
    'computes_no_gradients_for': ('parameter', 'mu'),
    'takes_no_output_deltas_from': ('output', 'predictions'),
    'passes_back_internal_deltas': ('internal', 'H'),
    'id_inputs': ('input', 'default'),
}

#: the names of the categories of setup's result in messages
_CATEGORY_NAMES = {
    'out_shapes': 'an output',
    'parameter_shapes': 'a parameter',
    'internal_shapes': 'an internal',
}


def _check_name_tuples(owner, prefix: str | None = None) -> None:
    """Refuse name attributes (``computes_no_gradients_for``...) of no tuple.

    ``owner`` is a layer class (checked when it is defined) or a layer
    (whose ``setup`` may set them); ``prefix`` starts the message (default:
    ``'ClassName.'``). A single name given without its comma (``('b_avg')``
    is the str ``'b_avg'``) would be matched as a substring: ``'b' in
    'b_avg'``.
    """
    for attribute in _NAME_TUPLES:
        problem = _names_problem(attribute, getattr(owner, attribute))
        if problem:
            start = f'{owner.__name__}.' if prefix is None else prefix
            raise TypeError(f'{start}{attribute} {problem}')


def _names_problem(attribute: str, declared) -> str | None:
    """What is wrong with ``declared`` as the collection of names ``attribute``."""
    if isinstance(declared, (tuple, list, set, frozenset)) and all(
        isinstance(name, str) for name in declared
    ):
        return None
    kind, example = _NAME_TUPLES[attribute]
    hint = (
        f' (a single name needs a comma: ({declared!r},))'
        if isinstance(declared, str)
        else ''
    )
    return (
        f'must be a tuple (or list or set) of {kind} names, e.g. '
        f'({example!r},) or (){hint}. Received: {declared!r} '
        f'({type(declared).__name__})'
    )


def _is_buffer_name(name) -> bool:
    """True for a name the layout can hold a buffer under."""
    return isinstance(name, str) and name != '' and not name.startswith(('@', '..'))


def _check_input_templates(cls: type[Layer]) -> None:
    """Refuse ``expected_inputs``/``optional_inputs`` not of StructureTemplates."""
    for attribute in ('expected_inputs', 'optional_inputs'):
        problem = _template_problem(getattr(cls, attribute))
        if problem:
            raise TypeError(f'{cls.__name__}.{attribute} {problem}')


def _template_problem(declared) -> str | None:
    """What is wrong with ``declared`` as a dict of input names to templates."""
    example = "{'default': StructureTemplate('T', 'B', 'F')}"
    if not isinstance(declared, dict):
        return (
            'must be a dict of input names to StructureTemplates, e.g. '
            f'{example}. Received: {declared!r}'
        )
    for name, template in declared.items():
        if isinstance(template, StructureTemplate):
            continue
        hint = (
            f' (wrap it: StructureTemplate{tuple(template)!r})'
            if isinstance(template, (tuple, list))
            else ''
        )
        return (
            f'[{name!r}] must be a StructureTemplate, e.g. {example}{hint}. '
            f'Received: {template!r}'
        )
    return None


def _check_declared_kwargs(cls: type[Layer]) -> None:
    """Refuse ``declared_kwargs`` entries that are no declarations.

    A check given instead of its declaration (``{'size': PositiveInt()}``)
    would leave the argument unchecked.
    """
    declared = cls.declared_kwargs
    if not isinstance(declared, dict):
        raise TypeError(
            f'{cls.__name__}.declared_kwargs must be a dict of argument names '
            "to declarations, e.g. {'size': Kwarg(PositiveInt())} (a set of "
            'names alone, as in Brainstorm 0.5, goes in expected_kwargs). '
            f'Received: {declared!r}'
        )
    for name, declaration in declared.items():
        if not isinstance(declaration, Arg):
            kind = type(declaration).__name__
            raise TypeError(
                f'{cls.__name__}.declared_kwargs[{name!r}] must be a '
                'declaration (Kwarg or Arg): wrap it in Kwarg(...), e.g. '
                f"{{{name!r}: Kwarg({kind}(...), default=..., description='...')}}"
                f'. Received: {declaration!r} (a {kind})'
            )


def _naming_layer(err: Exception, desc: str) -> Exception:
    """``err`` with ``desc`` (a layer's type and name) in front of its message.

    Only an error made of its message alone (the type takes the message as
    its one argument and prints it, as the ValidationErrors, ValueError or
    AssertionError do) is made again, of the same type, with the name in
    front; without a message (a bare ``assert`` of a layer written for
    0.5) it says that setup failed. Any other error (a KeyError, an
    OSError, a type of its own with more state) is ``err`` itself, with a
    note naming the layer where Python keeps notes (3.11 and later). So is
    an error whose message names the layer already.
    """
    message = str(err)
    if desc in message:
        return err
    kind = type(err)
    plain = (
        len(err.args) <= 1
        and kind.__init__ in _PLAIN_INITS
        and kind.__str__ is BaseException.__str__
        and not isinstance(err, (OSError, KeyError))
        and not vars(err)
    )
    if plain:
        try:
            return kind(f'{desc}: {message or "setup() failed"}')
        except Exception:  # noqa: BLE001 - a type that cannot be made so
            pass
    add_note = getattr(err, 'add_note', None)
    if add_note is not None:
        add_note(f'(raised in the setup of {desc})')
    return err


#: the constructors of errors made of their message alone
_PLAIN_INITS = (BaseException.__init__, Exception.__init__, ValueError.__init__,
                TypeError.__init__, AssertionError.__init__)  # fmt: skip


def _defining_namespace(cls: type) -> dict:
    """The globals of the code defining ``cls``: its module's, or a snippet's.

    The globals of a function defined in the class body (unwrapped from
    its decorators; they are those of the code that ran it, also ``exec``
    with a dict of globals without ``__name__``, as Sphinx's doctest runs
    snippets); else the nearest
    calling frame whose globals are named like the class's module (a
    module being imported, or code run with ``exec``), else the module's
    namespace.
    """
    for value in vars(cls).values():
        function = getattr(value, '__func__', value)  # classmethods too
        if not callable(function):
            continue
        function = inspect.unwrap(function)  # a decorator's wrapper: its own
        if inspect.isfunction(function) and function.__qualname__.startswith(
            cls.__qualname__ + '.'
        ):  # defined in this class body, not taken from elsewhere
            return function.__globals__
    frame: Any = sys._getframe(1)
    while frame is not None:
        if frame.f_globals.get('__name__') == cls.__module__:
            return frame.f_globals
        frame = frame.f_back
    module = sys.modules.get(cls.__module__)
    return vars(module) if module is not None else {}


def get_layer_class_from_typename(typename: str) -> type:
    """The Layer subclass with class name ``typename``.

    Looked up in ``brainstorm.registry`` (kept here for Brainstorm 0.5's
    import path).

    Args:
        typename: the class name, e.g. ``'FullyConnectedLayerImpl'``.

    Raises:
        TypeError: if no imported Layer subclass has that name.
    """
    return get_layer_class(typename)


def default_size(size, in_shape: BufferStructure):
    """``size`` as a tuple, or the input's feature shape if size is None."""
    if size is None:
        return in_shape.feature_shape
    return (size,) if isinstance(size, int) else tuple(size)


def time_template(*features, **kwargs) -> StructureTemplate:
    """``StructureTemplate('T', 'B', *features)`` (default ``'...'``)."""
    return StructureTemplate('T', 'B', *(features or ('...',)), **kwargs)


def _example_structures(layer_class) -> list:
    """Candidate example inputs for instantiating a layer class."""
    names = list(layer_class.expected_inputs)
    candidates: list = []
    for features in ((3,), (6, 6, 3)):
        candidates.append({n: features for n in names})
        if len(names) > 1:
            candidates.append(
                {
                    n: features
                    if n == names[0] or n == 'default'
                    else features[:-1] + (1,)
                    for n in names
                }
            )
    result = []
    for candidate in candidates:
        structures = {}
        for name, features in candidate.items():
            template = layer_class.expected_inputs[name]
            lead = template.shape[: template.first_feature_dim]
            structures[name] = BufferStructure(*(lead + features))
        result.append(structures)
    return result


def describe_layers() -> list:
    """Describe every registered layer class, built-in or user-defined.

    Returns:
        A list (sorted by type name) of dicts with ``type``, ``class``,
        ``module``, ``summary`` (first docstring line of the constructor or
        class), ``inputs`` (name -> shape template), ``optional_inputs``
        (the same, for inputs connected only where needed), ``kwargs`` (name ->
        ``{'expected', 'default', 'description'}``), and ``outputs``,
        ``parameters`` and ``internals`` (name -> shape) of an example
        instance built with the default arguments (None if no example input
        fits the layer).
    """
    # (importing this module imported brainstorm.layers first, so every
    # built-in layer is registered)
    result = []
    for cls in layer_classes():
        if not cls.__name__.endswith('LayerImpl'):
            continue
        type_name = cls.get_type_name()
        # a user's layer may come from a module that is gone by now
        module = sys.modules.get(cls.__module__)
        constructor = getattr(module, type_name, None)
        doc = inspect.getdoc(constructor) if callable(constructor) else None
        doc = doc or inspect.getdoc(cls) or ''
        kwargs = {}
        example_kwargs = {}
        for name, kwarg in cls.declared_kwargs.items():
            kwargs[name] = {
                'expected': kwarg.check.expected,
                'default': None if kwarg.default is REQUIRED else kwarg.default,
                'required': kwarg.default is REQUIRED,
                'description': kwarg.doc,
            }
            if kwarg.default is REQUIRED:
                example_kwargs[name] = kwarg.check.example
        for name in set(cls.expected_kwargs) - set(cls.declared_kwargs):
            kwargs[name] = {
                'expected': None,
                'default': None,
                'required': False,
                'description': '',
            }
        entry = {
            'type': type_name,
            'class': cls.__name__,
            'module': cls.__module__,
            'summary': doc.splitlines()[0] if doc else '',
            'inputs': {n: t.shape for n, t in sorted(cls.expected_inputs.items())},
            'optional_inputs': {
                n: t.shape for n, t in sorted(cls.optional_inputs.items())
            },
            'kwargs': kwargs,
            'outputs': None,
            'parameters': None,
            'internals': None,
        }
        for structures in _example_structures(cls):
            try:
                layer = cls(type_name, structures, [], [], **example_kwargs)
            except Exception:  # noqa: BLE001 - try the next example input
                continue
            entry['example_inputs'] = {n: s.shape for n, s in structures.items()}
            entry['outputs'] = {n: s.shape for n, s in layer.out_shapes.items()}
            entry['parameters'] = {
                n: s.shape for n, s in layer.parameter_shapes.items()
            }
            entry['internals'] = {n: s.shape for n, s in layer.internal_shapes.items()}
            break
        result.append(entry)
    return result
