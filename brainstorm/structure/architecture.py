"""Architecture dicts: generation, validation, ordering and instantiation.

An architecture maps layer names to their properties::

    {'Input': {'@type': 'Input', 'out_shapes': {...},
               '@outgoing_connections': {'default': ['Hid1'],
                                         'targets': ['Out.targets']}},
     'Hid1': {'@type': 'FullyConnected', 'size': 100,
              '@outgoing_connections': {'default': ['Out']}},
     ...}

A destination without a dot means the input ``'default'``.
"""

from __future__ import annotations

import warnings
from collections import OrderedDict, namedtuple
from copy import copy

from brainstorm.describable import get_description
from brainstorm.errors import (
    FeatureJoinWarning,
    LayerValidationError,
    NetworkValidationError,
    StructureValidationError,
)
from brainstorm.naming import (
    LAYER_NAME_RULE,
    is_valid_layer_name,
)
from brainstorm.naming import get_normalized_path as get_normalized_path
from brainstorm.registry import get_layer_class
from brainstorm.structure.buffer_structure import (
    combine_buffer_structures,
    joins_flat_on_last_axis,
)
from brainstorm.structure.construction import ConstructionWrapper as ConstructionWrapper
from brainstorm.structure.construction import LayerDetails

# ConstructionWrapper, get_normalized_path, copy and this one: names
# Brainstorm 0.5's module imported, still importable from it (0.5 took this
# one from brainstorm.layers.base_layer)
get_layer_class_from_typename = get_layer_class

__all__ = [
    'Connection',
    'generate_architecture',
    'get_layer_description',
    'parse_connection',
    'collect_all_connections',
    'validate_architecture',
    'get_canonical_layer_order',
    'instantiate_layers_from_architecture',
]

Connection = namedtuple(
    'Connection', ['start_layer', 'output_name', 'end_layer', 'input_name']
)


def get_layer_description(layer_details) -> dict:
    """The architecture entry of one layer (from its LayerDetails)."""
    outgoing: dict = {}
    for out_name, in_name, dest in layer_details.outgoing:
        target = dest.name if in_name == 'default' else f'{dest.name}.{in_name}'
        outgoing.setdefault(out_name, []).append(target)
    description = {
        '@type': layer_details.layer_type,
        '@outgoing_connections': {k: sorted(v) for k, v in sorted(outgoing.items())},
    }
    for key, value in layer_details.layer_kwargs.items():
        try:
            description[key] = get_description(value)
        except TypeError as err:
            raise NetworkValidationError(
                f"{layer_details.layer_type} '{layer_details.name}': argument "
                f"'{key}' cannot be stored in an architecture ({err})."
            ) from None
    return description


def generate_architecture(layer) -> dict:
    """The architecture dict of all layers connected to ``layer``.

    Args:
        layer: a ConstructionWrapper or LayerDetails.
    """
    details = getattr(layer, 'layer', layer)
    if not isinstance(details, LayerDetails):
        raise TypeError(
            'generate_architecture needs a layer made by a layer constructor '
            f'function such as Input(...). Received: {layer!r}'
        )
    layers = sorted(details.collect_connected_layers(), key=lambda l: l.name)
    return {l.name: get_layer_description(l) for l in layers}


def parse_connection(connection: str) -> tuple[str, str]:
    """Split a destination: ``'Layer.input'`` -> ``('Layer', 'input')``.

    A destination without a dot (``'Layer'``) means the input ``'default'``.
    """
    layer, _, input_name = connection.partition('.')
    return layer, input_name or 'default'


def _outgoing(name: str, entry: dict) -> dict:
    outgoing = entry['@outgoing_connections']
    if isinstance(outgoing, (list, tuple)):
        return {'default': list(outgoing)}
    return outgoing


def collect_all_outgoing_connections(layer: dict, layer_name: str) -> list:
    """The connections leaving one architecture entry (Brainstorm 0.5's name).

    Args:
        layer: the entry (with ``'@outgoing_connections'``).
        layer_name: its name.

    Returns:
        a list of :data:`Connection`, in the entry's order.
    """
    connections = []
    for out_name, targets in _outgoing(layer_name, layer).items():
        for target in targets:
            end_layer, in_name = parse_connection(target)
            connections.append(Connection(layer_name, out_name, end_layer, in_name))
    return connections


def collect_all_connections(architecture: dict) -> list:
    """All connections of a (validated) architecture, sorted."""
    connections = []
    for name, entry in architecture.items():
        connections.extend(collect_all_outgoing_connections(entry, name))
    return sorted(connections)


def get_kwargs(layer: dict) -> dict:
    """The arguments of an architecture entry, copied (Brainstorm 0.5's name).

    All keys but ``@type`` and ``@outgoing_connections``.
    """
    ignored = {'@type', '@outgoing_connections'}
    return {key: copy(value) for key, value in layer.items() if key not in ignored}


def validate_architecture(architecture) -> bool:
    """Check an architecture dict for every kind of malformation.

    Returns:
        True (as in Brainstorm 0.5) if the architecture is valid.

    Raises:
        NetworkValidationError: naming the offending layer or connection.
    """
    if not isinstance(architecture, dict):
        raise NetworkValidationError(
            f'An architecture must be a dict of layer names to layer '
            f'descriptions. Received: {type(architecture).__name__}'
        )
    for name in architecture:
        # every name first: later checks sort and print the layer names
        _check_name(name)
    for name, entry in architecture.items():
        _check_entry(name, entry)
        for out_name, targets in _checked_outgoing(name, entry).items():
            _check_targets(architecture, name, out_name, targets)
    _check_input_layer(architecture)
    _check_acyclic_and_connected(architecture)
    return True


def _check_name(name) -> None:
    """Check that a layer name is a str following ``LAYER_NAME_RULE``."""
    if not isinstance(name, str):
        raise NetworkValidationError(
            f'Layer names must be strings. Received: {name!r} ({type(name).__name__})'
        )
    if not is_valid_layer_name(name):
        raise NetworkValidationError(
            f'Invalid layer name {name!r}: a layer name must be {LAYER_NAME_RULE}.'
        )


def _check_entry(name, entry) -> None:
    """Check that a layer's entry is a dict, and its ``@type``."""
    if not isinstance(entry, dict):
        raise NetworkValidationError(
            f"Layer '{name}': description must be a dict. Received: "
            f'{type(entry).__name__}'
        )
    layer_type = entry.get('@type')
    if not isinstance(layer_type, str):
        raise NetworkValidationError(
            f"Layer '{name}': '@type' must be a string naming the layer "
            f'type. Received: {layer_type!r}'
        )
    if not is_valid_layer_name(layer_type):
        raise NetworkValidationError(
            f"Layer '{name}': invalid '@type' {layer_type!r}: a layer type "
            f'must be {LAYER_NAME_RULE}.'
        )


def _checked_outgoing(name: str, entry: dict) -> dict:
    """A layer's ``@outgoing_connections`` as a dict, checked to be one."""
    if '@outgoing_connections' not in entry:
        raise NetworkValidationError(
            f"Layer '{name}': '@outgoing_connections' is missing (use {{}} "
            'for a layer without outgoing connections).'
        )
    outgoing = entry['@outgoing_connections']
    if isinstance(outgoing, (list, tuple)):
        outgoing = {'default': outgoing}
    if not isinstance(outgoing, dict):
        raise NetworkValidationError(
            f"Layer '{name}': '@outgoing_connections' must be a dict of "
            'output names to lists of destinations (or a list). '
            f'Received: {type(outgoing).__name__}'
        )
    return outgoing


def _check_targets(architecture: dict, name: str, out_name, targets) -> None:
    """Check the destinations of one output of layer ``name``."""
    if not isinstance(out_name, str):
        raise NetworkValidationError(
            f"Layer '{name}': output names must be strings. Received: {out_name!r}"
        )
    if not isinstance(targets, (list, tuple)):
        raise NetworkValidationError(
            f"Layer '{name}': the destinations of output "
            f"'{out_name}' must be a list of 'Layer' or "
            f"'Layer.input' strings. Received: {targets!r}"
        )
    for i, target in enumerate(targets):
        where = f"Layer '{name}', output '{out_name}'"
        if not isinstance(target, str):
            raise NetworkValidationError(
                f'{where}: destinations must be strings. Received: {target!r}'
            )
        if target in targets[:i] or parse_connection(target) in [
            parse_connection(t) for t in targets[:i] if isinstance(t, str)
        ]:
            raise NetworkValidationError(
                f"{where}: connects to '{target}' more than once."
            )
        _check_destination(architecture, where, target)


def _check_destination(architecture: dict, where: str, target: str) -> None:
    """Check that ``target`` names an existing layer's valid input."""
    dest, in_name = parse_connection(target)
    if dest not in architecture:
        raise NetworkValidationError(
            f"{where}: connects to unknown layer '{dest}'. Known layers: "
            f'{sorted(architecture)}'
        )
    if not in_name.isidentifier() or target.endswith('.'):
        raise NetworkValidationError(
            f"{where}: invalid destination '{target}'. Expected 'Layer' or "
            "'Layer.input_name' with an identifier as input name."
        )
    if dest == 'Input':
        raise NetworkValidationError(
            f'{where}: the Input layer cannot have incoming connections.'
        )


def _check_input_layer(architecture: dict) -> None:
    """Check that the one layer of type Input is named ``'Input'``."""
    if architecture.get('Input', {}).get('@type') != 'Input':
        raise NetworkValidationError(
            "An architecture needs exactly one layer named 'Input' of type "
            f"'Input'. Received layers: {sorted(architecture)}"
        )
    for name, entry in architecture.items():
        if entry['@type'] == 'Input' and name != 'Input':
            raise NetworkValidationError(
                f"Layer '{name}' is of type 'Input', but the only Input layer "
                "must be named 'Input'."
            )


def _successors(architecture: dict) -> dict:
    succ: dict = {name: set() for name in architecture}
    for c in collect_all_connections(architecture):
        succ[c.start_layer].add(c.end_layer)
    return succ


def _check_acyclic_and_connected(architecture: dict) -> None:
    succ = _successors(architecture)
    reached = set()
    todo = ['Input']
    while todo:
        layer = todo.pop()
        if layer not in reached:
            reached.add(layer)
            todo.extend(succ[layer])
    unreached = sorted(set(architecture) - reached)
    if unreached:
        raise NetworkValidationError(
            f'Layers not connected to Input: {unreached}. Every layer must be '
            'reachable from the Input layer.'
        )
    _check_acyclic(succ)


def _check_acyclic(succ: dict) -> None:
    """Raise for the first cycle found by a depth-first search.

    The search starts at each layer in name order and follows successors
    in name order. It keeps its own stack (a deep chain of layers would
    exceed Python's recursion limit), and the path to the current layer,
    so the cycle can be named: ``A -> B -> A``.
    """
    state: dict = {}
    for start in sorted(succ):
        if start in state:
            continue
        state[start] = 'active'
        path = [start]
        position = {start: 0}
        stack = [iter(sorted(succ[start]))]
        while stack:
            node = path[-1]
            for nxt in stack[-1]:
                if state.get(nxt) == 'active':
                    cycle = path[position[nxt] :] + [nxt]
                    raise NetworkValidationError(
                        f'The architecture contains a cycle: {" -> ".join(cycle)}'
                    )
                if nxt not in state:
                    state[nxt] = 'active'
                    position[nxt] = len(path)
                    path.append(nxt)
                    stack.append(iter(sorted(succ[nxt])))
                    break
            else:
                state[node] = 'done'
                del position[node]
                path.pop()
                stack.pop()


def get_canonical_layer_order(architecture: dict) -> list:
    """Topological order grouped by distance to a sink, names ascending."""
    succ = _successors(architecture)
    pred: dict = {name: [] for name in succ}
    for name, successors in succ.items():
        for s in successors:
            pred[s].append(name)
    # a layer joins the group after the one that takes its last successor
    waiting = {name: len(successors) for name, successors in succ.items()}
    taken: list = []
    group = [name for name, count in waiting.items() if count == 0]
    while group:
        taken.extend(sorted(group, reverse=True))
        following = []
        for name in group:
            for p in pred[name]:
                waiting[p] -= 1
                if waiting[p] == 0:
                    following.append(p)
        group = following
    if len(taken) < len(succ):
        raise NetworkValidationError('The architecture contains a cycle.')
    return taken[::-1]


def _get_source_structure(layers, connection: Connection):
    source = layers[connection.start_layer]
    out_name = connection.output_name
    if out_name.startswith('..'):
        category, _, buffer_name = out_name[2:].partition('.')
        shapes = {
            'parameters': source.parameter_shapes,
            'internals': source.internal_shapes,
        }.get(category)
        if shapes is None or buffer_name not in shapes:
            raise LayerValidationError(
                f"{source.layer_type} '{source.name}': cannot expose "
                f"'{out_name}'. Only '..parameters.<name>' and "
                f"'..internals.<name>' of existing buffers can be connected."
            )
        if category == 'internals' and 'd' + buffer_name not in shapes:
            raise LayerValidationError(
                f"{source.layer_type} '{source.name}': cannot expose internal "
                f"'{buffer_name}' because it has no delta buffer "
                f"'d{buffer_name}'."
            )
        if (
            category == 'internals'
            and buffer_name not in source.passes_back_internal_deltas
        ):
            warnings.warn(
                f"{source.layer_type} '{source.name}' does not pass deltas "
                f"back through internal '{buffer_name}': the deltas that "
                f"'{connection.end_layer}.{connection.input_name}' computes "
                'for it are ignored, so gradients will not include them.',
                RuntimeWarning,
                stacklevel=4,
            )
        return shapes[buffer_name]
    if out_name not in source.out_shapes:
        raise LayerValidationError(
            f"{source.layer_type} '{source.name}': has no output "
            f"'{out_name}'. Its outputs are: {list(source.out_shapes)}"
        )
    return source.out_shapes[out_name]


def _kept(kept: list, structure):
    """``structure``, appended to ``kept`` on the way."""
    kept.append(structure)
    return structure


def _check_flat_join(
    layer_type: str, name: str, in_name: str, sources: list, structures: list
) -> None:
    """Warn where several sources of one input are not joined on the last axis.

    The outputs connected to one input lie side by side in memory, each as
    one flat block, and the input is a view of them: that is their
    concatenation along the last axis only for outputs without other
    feature dimensions (but 1s). Otherwise the input reads each source's
    flattened features one after the other. Brainstorm 0.5 joined them so
    too, and networks saved so must keep loading, so this is a warning.

    Args:
        layer_type: the type of the layer, for the message.
        name: the name of the layer.
        in_name: the input's name.
        sources: the connections into that input.
        structures: the BufferStructure of each source.

    Warns:
        FeatureJoinWarning: naming the layer, the input and the sources
            with their shapes, and suggesting a Merge layer.
    """
    if joins_flat_on_last_axis(structures):
        return
    target = name if in_name == 'default' else f"'{in_name}' - {name}"
    listed = ', '.join(
        f"'{c.start_layer}.{c.output_name}' {s.shape}"
        for c, s in zip(sources, structures)
    )
    warnings.warn(
        f"{layer_type} '{name}': input '{in_name}' joins several outputs "
        f'with multi-dimensional features: {listed}. An input fed by several '
        'outputs is a view of their memory side by side: it reads each '
        "source's features flattened, one source after the other, not "
        'their concatenation along the last axis (channel by channel). A '
        'layer that flattens its input (FullyConnected) learns from either '
        'order; for a channel-wise join use a Merge layer (a >> '
        "'inputs_1' - merge; b >> 'inputs_2' - merge; merge >> "
        f'{target}; chain Merge layers for more than two).',
        FeatureJoinWarning,
        stacklevel=2,
    )


def instantiate_layers_from_architecture(architecture: dict) -> OrderedDict:
    """Create the layer objects of a validated architecture.

    The layers are made in canonical order; each input receives the
    concatenation of all outputs connected to it.
    """
    connections = collect_all_connections(architecture)
    incoming_of: dict = {name: [] for name in architecture}
    outgoing_of: dict = {name: [] for name in architecture}
    for c in connections:  # sorted, so each list is too
        incoming_of[c.end_layer].append(c)
        outgoing_of[c.start_layer].append(c)
    layers: OrderedDict = OrderedDict()
    for name in get_canonical_layer_order(architecture):
        entry = architecture[name]
        incoming = incoming_of[name]
        outgoing = outgoing_of[name]
        in_shapes = {}
        for in_name in sorted({c.input_name for c in incoming}):
            sources = [c for c in incoming if c.input_name == in_name]
            structures: list = []
            try:
                in_shapes[in_name] = combine_buffer_structures(
                    _kept(structures, _get_source_structure(layers, c)) for c in sources
                )
            except StructureValidationError as err:
                raise LayerValidationError(
                    f"{entry['@type']} '{name}': cannot combine the outputs "
                    f"connected to input '{in_name}' "
                    f'({[f"{c.start_layer}.{c.output_name}" for c in sources]})'
                    f': {err}'
                ) from None
            _check_flat_join(entry['@type'], name, in_name, sources, structures)
        try:
            layer_class = get_layer_class(entry['@type'] + 'LayerImpl')
        except TypeError as err:
            raise NetworkValidationError(f"Layer '{name}': {err}") from None
        kwargs = {k: v for k, v in entry.items() if not k.startswith('@')}
        # the layer's name is its key in the architecture; the constructor's
        # own positional arguments cannot come from the entry either
        clashing = sorted(
            {'name', 'in_shapes', 'incoming_connections', 'outgoing_connections'}
            & set(kwargs)
        )
        if clashing:
            raise LayerValidationError(
                f"{entry['@type']} '{name}': unexpected argument(s) "
                f'{clashing} in the architecture entry (the name of a layer '
                'is its key in the architecture). Received: '
                f'{ {k: kwargs[k] for k in clashing} }'
            )
        layers[name] = layer_class(name, in_shapes, incoming, outgoing, **kwargs)
    return layers
