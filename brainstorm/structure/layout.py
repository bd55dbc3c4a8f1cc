"""The layout compiler: from instantiated layers to a nested memory layout.

The layout is a tree of nested dicts in the format of the design documents.
View nodes ``{'@type': 'BufferView', '@index': i, <children>}`` become
:class:`~brainstorm.structure.buffer_views.BufferView` objects; array nodes
``{'@type': 'array', '@index': i, '@shape': template, '@slice': (start,
stop)[, '@context_size': c][, '@is_backward_only': True]}`` become arrays.

There are exactly three flat buffers, one per buffer type, told apart by the
leading entries of ``@shape``:

0. constant (``(4, 5)``): a 1-D array; ``@slice`` is a range of it.
1. batch-sized (``('B', 10)``): shape ``(B, F1)``; ``@slice`` is a range of
   the feature axis.
2. time-sized (``('T', 'B', 10)``): shape ``(T + C, B, F2)`` where ``C`` is the
   largest context size; ``@slice`` is a range of the feature axis, and an
   array with context size ``c`` spans time steps ``[0, T + c)`` so that index
   ``-1`` addresses its context slot.

Within each buffer, the forward arrays come first and the backward-only ones
(deltas, gradients, backward internals) after them, so that clearing all
backward memory is one operation. Arrays feeding the same input are placed
side by side in the order of their connections, so the input is a plain view
of their concatenation; deltas mirror this, so a layer's ``input_deltas`` are
the very memory of its sources' ``output_deltas``.

Parameters exposed to another layer (``'..parameters.W'``) are the
exception on the backward side: the consumer's deltas get memory of their
own, listed in the root's ``@exposed_gradients`` as ``[layer, parameter,
start, stop]`` (constant buffer), and the network adds them to the
gradients after all backward passes, since layers may overwrite their
gradients.
"""

from __future__ import annotations

import itertools  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from collections import OrderedDict  # noqa: F401 - in Brainstorm 0.5's namespace of this module

import numpy as np  # noqa: F401 - in Brainstorm 0.5's namespace of this module

from brainstorm.describable import get_description
from brainstorm.errors import NetworkValidationError  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.naming import (  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    get_by_path,
    get_normalized_path,
)
from brainstorm.structure.architecture import (
    Connection,
    instantiate_layers_from_architecture,
    validate_architecture,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    joins_flat_on_last_axis,
)

__all__ = [
    'create_layout',
    'CATEGORIES',
    'get_buffer_type',
    'plan_network',
    'constant_size',
    'RESERVED_LAYER_NAMES',
]

#: names of the root buffers of a network, which no layer may take
RESERVED_LAYER_NAMES = {'parameters', 'gradients'}

CATEGORIES = (
    'inputs',
    'outputs',
    'parameters',
    'internals',
    'input_deltas',
    'output_deltas',
    'gradients',
)


def get_buffer_type(shape) -> int:
    """0, 1 or 2 for a constant, batch-sized or time-sized shape template."""
    shape = tuple(shape)
    if shape[:2] == ('T', 'B'):
        return 2
    if shape[:1] == ('B',):
        return 1
    return 0


def _backward_version(structure: BufferStructure) -> BufferStructure:
    return BufferStructure(
        *structure.shape, context_size=structure.context_size, is_backward_only=True
    )


def _collect_sources(layers) -> dict:
    """Every buffer that owns memory: (layer, category, name) -> structure."""
    sources = {}
    for lname, layer in layers.items():
        for name, s in layer.out_shapes.items():
            sources[lname, 'outputs', name] = s
            sources[lname, 'output_deltas', name] = _backward_version(s)
        for name, s in layer.parameter_shapes.items():
            sources[lname, 'parameters', name] = s
            sources[lname, 'gradients', name] = _backward_version(s)
        for name, s in layer.internal_shapes.items():
            sources[lname, 'internals', name] = s
    return sources


def _source_keys(connection: Connection) -> tuple:
    """The (forward, delta) source keys feeding a connection."""
    layer, out_name = connection.start_layer, connection.output_name
    if out_name.startswith('..'):
        category, _, name = out_name[2:].partition('.')
        if category == 'parameters':
            # the owner may overwrite its gradients in its backward pass, so
            # the consumer's deltas get their own memory; the network adds
            # them to the gradients afterwards
            return (layer, 'parameters', name), (
                layer,
                'exposed_gradients',
                name,
                connection.end_layer,
                connection.input_name,
            )
        return (layer, 'internals', name), (layer, 'internals', 'd' + name)
    return (layer, 'outputs', out_name), (layer, 'output_deltas', out_name)


def _input_sources(layer) -> dict:
    """Input name -> (forward keys, delta keys), in concatenation order."""
    result = {}
    for in_name in layer.in_shapes:
        conns = sorted(c for c in layer.incoming if c.input_name == in_name)
        keys = [_source_keys(c) for c in conns]
        result[in_name] = ([k[0] for k in keys], [k[1] for k in keys])
    return result


def _group_of(structure: BufferStructure) -> tuple:
    return structure.buffer_type, structure.is_backward_only


def _place(sources: dict, chains: list, priority: list) -> dict:
    """Assign feature offsets so that every chain is contiguous and ordered.

    Returns key -> (start, stop). Forward arrays of each buffer type come
    before backward ones; within a group, ``priority`` keys come first, then
    creation order.
    """
    successor: dict = {}
    predecessor: dict = {}
    for chain in chains:
        groups = {_group_of(sources[k]) for k in chain}
        if len(groups) > 1:
            raise NetworkValidationError(
                f'Failed to lay out buffers: {chain} are concatenated into one '
                'input but are not all of the same buffer type.'
            )
        for a, b in zip(chain, chain[1:]):
            if successor.get(a, b) != b or predecessor.get(b, a) != a:
                raise NetworkValidationError(
                    'Failed to lay out buffers: the inputs fed by '
                    f'{".".join(a)} require incompatible neighbours in memory '
                    '(an output cannot be concatenated with different '
                    'outputs in different inputs).'
                )
            successor[a], predecessor[b] = b, a
    order = {k: i for i, k in enumerate(priority)}
    keys = sorted(sources, key=lambda k: (order.get(k, len(order)),))
    slices = {}
    offsets: dict = {}
    for backward in (False, True):
        for key in keys:
            s = sources[key]
            if s.is_backward_only != backward or key in slices or key in predecessor:
                continue
            current, seen = key, set()
            while current is not None:
                if current in seen:
                    raise NetworkValidationError(
                        'Failed to lay out buffers: concatenation order of '
                        'inputs forms a cycle.'
                    )
                seen.add(current)
                t = sources[current].buffer_type
                start = offsets.get(t, 0)
                stop = start + sources[current].feature_size
                slices[current] = (start, stop)
                offsets[t] = stop
                current = successor.get(current)
    missing = set(sources) - set(slices)
    if missing:
        raise NetworkValidationError(
            'Failed to lay out buffers: concatenation order of inputs forms '
            f'a cycle involving {sorted(missing)}.'
        )
    return slices


def _group_chains(layers, sources) -> list:
    """Chains of internals that layers want adjacent (``grouped_buffers``).

    Every group is checked to be able to be one array first.
    """
    chains = []
    for lname, layer in layers.items():
        for category, groups in layer.grouped_buffers.items():
            names = {
                'parameters': layer.parameter_shapes,
                'gradients': layer.parameter_shapes,
                'internals': layer.internal_shapes,
            }.get(category)
            if names is None:
                raise NetworkValidationError(
                    f"{layer.layer_type} '{lname}': grouped_buffers may "
                    "group 'parameters', 'gradients' or 'internals'. "
                    f'Received category {category!r}.'
                )
            for group, members in groups.items():
                missing = [m for m in members if m not in names]
                if missing or not members:
                    raise NetworkValidationError(
                        f"{layer.layer_type} '{lname}': group {group!r} of "
                        f'{category} names unknown buffers {missing}. '
                        f'Available: {list(names)}'
                    )
                if category != 'internals':
                    order = list(names)
                    at = order.index(members[0])
                    if order[at : at + len(members)] != list(members):
                        raise NetworkValidationError(
                            f"{layer.layer_type} '{lname}': group {group!r} "
                            f'must list consecutive {category} in '
                            f'declaration order. Received {list(members)}, '
                            f'declared {order}.'
                        )
                keys = [(lname, category, m) for m in members]
                shapes = [sources[k] for k in keys]
                first = shapes[0]
                kind = {
                    (s.buffer_type, s.context_size, s.is_backward_only) for s in shapes
                }
                fixed = {
                    s.feature_shape[1:]
                    if first.buffer_type == 0
                    else s.feature_shape[:-1]
                    for s in shapes
                }
                if len(kind) > 1 or len(fixed) > 1:
                    raise NetworkValidationError(
                        f"{layer.layer_type} '{lname}': the {category} of "
                        f'group {group!r} ({list(members)}) cannot form one '
                        'array: they differ in buffer type, context size, '
                        'backward flag or the feature axes that are not '
                        'concatenated.'
                    )
                if first.buffer_type != 0 and not joins_flat_on_last_axis(shapes):
                    # constant buffers join on the first axis, which their
                    # flat blocks always are; the others on the last one
                    raise NetworkValidationError(
                        f"{layer.layer_type} '{lname}': the {category} of "
                        f'group {group!r} cannot form one array: '
                        + ', '.join(f'{m!r} {s.shape}' for m, s in zip(members, shapes))
                        + '. Grouped batch- and time-sized buffers lie side by '
                        'side in memory as flat blocks, which is their '
                        'concatenation along the last axis only when every '
                        'feature dimension but the last is 1 (or the group '
                        'has one member); give them shapes like '
                        "('T', 'B', n)."
                    )
                if category == 'internals':
                    chains.append(keys)
    return chains


def _array_node(structure: BufferStructure, index: int, span: tuple) -> dict:
    node = structure.to_json(index)
    node['@slice'] = tuple(span)
    return node


def _view_node(index: int, children: dict) -> dict:
    node = {'@type': 'BufferView', '@index': index}
    node.update(children)
    arrays = list(children.values())
    if arrays and all(a['@type'] == 'array' for a in arrays):
        same = {
            (
                get_buffer_type(a['@shape']),
                a.get('@context_size', 0),
                a.get('@is_backward_only', False),
            )
            for a in arrays
        }
        contiguous = all(
            a['@slice'][1] == b['@slice'][0] for a, b in zip(arrays, arrays[1:])
        )
        if len(same) == 1 and contiguous:
            node['@slice'] = (arrays[0]['@slice'][0], arrays[-1]['@slice'][1])
    return node


def _sink_span(keys: list, slices: dict) -> tuple:
    return slices[keys[0]][0], slices[keys[-1]][1]


def create_layout(layers) -> dict:
    """Compile instantiated layers (canonical order) into a layout dict.

    Raises:
        NetworkValidationError: if the outputs concatenated into inputs
            cannot all be placed side by side.
    """
    sources = _collect_sources(layers)
    exposed = [
        key
        for layer in layers.values()
        for c in layer.incoming
        for key in [_source_keys(c)[1]]
        if key[1] == 'exposed_gradients'
    ]
    for key in exposed:
        sources[key] = _backward_version(sources[key[0], 'parameters', key[2]])
    param_keys = sorted(
        (
            (l, 'parameters', p)
            for l, layer in layers.items()
            for p in layer.parameter_shapes
        ),
        key=lambda k: (
            f'{k[0]}.parameters.{next(iter(layers[k[0]].parameter_shapes))}',
            list(layers[k[0]].parameter_shapes).index(k[2]),
        ),
    )
    grad_keys = [(l, 'gradients', p) for l, _, p in param_keys]
    chains = [param_keys, grad_keys]
    inputs = {}
    for lname, layer in layers.items():
        inputs[lname] = _input_sources(layer)
        for fwd, bwd in inputs[lname].values():
            if len(fwd) > 1:
                chains += [fwd, bwd]
    chains += _group_chains(layers, sources)
    slices = _place(
        sources, [c for c in chains if len(c) > 1], priority=param_keys + grad_keys
    )

    def arrays_of(lname, category, shapes):
        return {
            name: _array_node(
                sources[lname, category, name], i, slices[lname, category, name]
            )
            for i, name in enumerate(shapes)
        }

    n_params = sum(sources[k].feature_size for k in param_keys)
    p_start = slices[param_keys[0]][0] if param_keys else 0
    g_start = slices[grad_keys[0]][0] if grad_keys else 0
    layout = {
        '@type': 'BufferView',
        '@exposed_gradients': [[k[0], k[2], *slices[k]] for k in exposed],
        'parameters': {
            '@type': 'array',
            '@index': 0,
            '@shape': (n_params,),
            '@slice': (p_start, p_start + n_params),
        },
        'gradients': {
            '@type': 'array',
            '@index': 1,
            '@shape': (n_params,),
            '@slice': (g_start, g_start + n_params),
            '@is_backward_only': True,
        },
    }
    for index, (lname, layer) in enumerate(layers.items(), start=2):
        in_nodes, in_delta_nodes = {}, {}
        for i, (in_name, (fwd, bwd)) in enumerate(inputs[lname].items()):
            # inputs see the real time steps only, not their sources'
            # context slots
            shape = layer.in_shapes[in_name].shape
            in_nodes[in_name] = _array_node(
                BufferStructure(*shape), i, _sink_span(fwd, slices)
            )
            in_delta_nodes[in_name] = _array_node(
                BufferStructure(*shape, is_backward_only=True),
                i,
                _sink_span(bwd, slices),
            )
        children = {
            'inputs': in_nodes,
            'outputs': arrays_of(lname, 'outputs', layer.out_shapes),
            'parameters': arrays_of(lname, 'parameters', layer.parameter_shapes),
            'internals': arrays_of(lname, 'internals', layer.internal_shapes),
            'input_deltas': in_delta_nodes,
            'output_deltas': arrays_of(lname, 'output_deltas', layer.out_shapes),
            'gradients': arrays_of(lname, 'gradients', layer.parameter_shapes),
        }
        views = {
            category: _view_node(i, children[category])
            for i, category in enumerate(CATEGORIES)
        }
        for category, groups in layer.grouped_buffers.items():
            views[category]['@groups'] = {
                group: list(members) for group, members in groups.items()
            }
        layout[lname] = _view_node(index, views)
    return layout


def _normalized(architecture: dict) -> dict:
    """A copy of a validated architecture in describable form.

    As :func:`~brainstorm.structure.architecture.generate_architecture`
    stores layer arguments: a NumPy integer (``np.int64(8)``) becomes an
    ``int``, a tuple a list, and so on, so that the network built from it
    can be saved (JSON) and compares equal to its saved architecture.

    Raises:
        NetworkValidationError: naming the layer whose entry holds a value
            that cannot be stored in an architecture.
    """
    result = {}
    for name, entry in architecture.items():
        try:
            result[name] = get_description(entry)
        except TypeError as err:
            raise NetworkValidationError(
                f"Layer '{name}': its entry cannot be stored in an "
                f'architecture ({err}). Layer arguments must be numbers, '
                'strings, booleans, None, lists, tuples or dicts of these.'
            ) from None
    return result


def plan_network(architecture: dict, handler) -> tuple:
    """Validate an architecture; make its layers and layout (no memory).

    Each layer gets the workspaces ``handler`` asks for (see
    :meth:`~brainstorm.layers.base_layer.Layer.workspace_shapes`) before the
    layout is made.

    Args:
        architecture: the architecture dict (it is copied, not changed).
        handler: the handler the network is going to run on.

    Returns:
        ``(architecture, layers, layout)``: a copy of the architecture in
        the form :func:`~brainstorm.structure.architecture.generate_architecture`
        gives (NumPy scalars and arrays made Python numbers and lists,
        tuples made lists; see :func:`~brainstorm.describable.get_description`),
        so the network can be saved; the layers in canonical order; and
        the layout dict.

    Raises:
        NetworkValidationError, LayerValidationError: for malformed
            architectures or layer arguments, or a value that cannot be
            stored in an architecture.
    """
    validate_architecture(architecture)
    reserved = RESERVED_LAYER_NAMES & set(architecture)
    if reserved:
        raise NetworkValidationError(
            f'Layer names {sorted(reserved)} are reserved for the root '
            'buffers of a network; choose other names.'
        )
    architecture = _normalized(architecture)
    layers = instantiate_layers_from_architecture(architecture)
    for layer in layers.values():
        layer.use_workspaces_of(handler)
    return architecture, layers, create_layout(layers)


def constant_size(layout: dict) -> int:
    """Elements of the constant buffer (parameters, gradients, ...)."""
    size = 0
    todo = [layout]
    while todo:
        node = todo.pop()
        for key, child in node.items():
            if key.startswith('@') or not isinstance(child, dict):
                continue
            if child.get('@type') == 'array':
                if get_buffer_type(child['@shape']) == 0:
                    size = max(size, int(child['@slice'][1]))
            else:
                todo.append(child)
    return size


# ---- Brainstorm 0.5's helpers of nested lists ------------------------------
# 0.5's layout numbered its buffers with these; the layout above no longer
# needs them, and they stay in this module's namespace (and in
# brainstorm.utils) for code written for 0.5.


def flatten(container):
    """Iterate the leaves of nested lists and tuples in order.

    Args:
        container: a list or tuple, possibly nesting lists and tuples.

    Yields:
        Every element that is not a list or tuple, depth first.
    """
    for item in container:
        if isinstance(item, (list, tuple)):
            yield from flatten(item)
        else:
            yield item


def convert_to_nested_indices(container, start_idx=None):
    """Number the leaves of nested lists, keeping the nesting.

    ``list(convert_to_nested_indices(['a', ['b', 'c']]))`` is
    ``[0, [1, 2]]``.

    Args:
        container: a list or tuple, possibly nesting lists and tuples.
        start_idx: a one-element list holding the first index; it is
            advanced past the last index used. Defaults to ``[0]``.

    Yields:
        For each element, its index or (for a nested list or tuple) a list
        of the indices within it.
    """
    if start_idx is None:
        start_idx = [0]
    for item in container:
        if isinstance(item, (list, tuple)):
            yield list(convert_to_nested_indices(item, start_idx))
        else:
            yield start_idx[0]
            start_idx[0] += 1


def sort_by_index_key(item) -> int:
    """Sort key for ``dict.items()`` by the ``'@index'`` of each value.

    Args:
        item: a ``(key, value)`` pair.

    Returns:
        ``value['@index']`` if the value is a dict that has one, else -1.
    """
    value = item[1]
    if isinstance(value, dict) and '@index' in value:
        return value['@index']
    return -1
