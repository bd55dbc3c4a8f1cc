"""Which backward-only memory the network need not zero before a backward pass.

The network zeroes deltas and gradients before each backward pass, because
layers add to them. Some memory is overwritten instead, so zeroing it is
wasted work (for a CNN, most of the backward memory):

* the gradients of layers with ``overwrites_gradients``;
* the backward internals of layers with ``overwrites_backward_internals``
  (except their context slots and the deltas they pass back);
* the deltas of an input that only one layer writes, when that layer has
  ``can_overwrite_input_deltas``: the network then puts the input into the
  layer's ``overwrite_input_deltas`` during the pass. Inputs fed by the
  Input layer are left out (their deltas may be skipped, and skipped
  deltas stay zero), as are the layer's ``computes_no_input_deltas_for``.
"""

from __future__ import annotations

from typing import NamedTuple

from brainstorm.structure.layout import get_buffer_type

__all__ = ['Overwritten', 'overwritten_memory']


class Overwritten(NamedTuple):
    """What :func:`overwritten_memory` found.

    Attributes:
        constant: ``(start, stop)`` ranges of the constant buffer.
        sized: ``{buffer_type: [(start, stop), ...]}`` feature ranges of the
            batch- and time-sized buffers.
        inputs: layer name -> the inputs whose deltas it must overwrite.
    """

    constant: list
    sized: dict
    inputs: dict


def overwritten_memory(layers, layout: dict) -> Overwritten:
    """The backward-only memory that the layers overwrite (see the module)."""
    constant: list = []
    sized: dict = {1: [], 2: []}

    def add(node) -> None:
        t = get_buffer_type(node['@shape'])
        start, stop = (int(x) for x in node['@slice'])
        (constant if t == 0 else sized[t]).append((start, stop))

    for name, layer in layers.items():
        if layer.overwrites_gradients:
            for pname in layer.parameter_shapes:
                if pname not in layer.computes_no_gradients_for:
                    add(layout[name]['gradients'][pname])
        if layer.overwrites_backward_internals:
            passed_back = {'d' + x for x in layer.passes_back_internal_deltas}
            for iname, structure in layer.internal_shapes.items():
                if structure.is_backward_only and iname not in passed_back:
                    add(layout[name]['internals'][iname])
    inputs = _sole_writers(layers, layout)
    for name, in_names in inputs.items():
        for in_name in in_names:
            add(layout[name]['input_deltas'][in_name])
    return Overwritten(constant, sized, inputs)


def _sole_writers(layers, layout: dict) -> dict:
    """Layer name -> its inputs whose deltas it overwrites, the only writer."""
    writers = []  # (buffer type, start, stop, layer name, input name)
    for name in layers:
        if name == 'Input':
            continue
        for in_name, node in layout[name].get('input_deltas', {}).items():
            if in_name.startswith('@'):
                continue
            start, stop = (int(x) for x in node['@slice'])
            writers.append(
                (get_buffer_type(node['@shape']), start, stop, name, in_name)
            )
    writers.sort()
    chosen: dict = {}
    reach: dict = {}  # buffer type -> the largest stop among the ranges so far
    for k, (t, start, stop, name, in_name) in enumerate(writers):
        following = writers[k + 1] if k + 1 < len(writers) else None
        alone = reach.get(t, -1) <= start and (
            following is None or following[0] != t or following[1] >= stop
        )
        reach[t] = max(reach.get(t, -1), stop)
        layer = layers[name]
        if (
            t
            and alone
            and layer.can_overwrite_input_deltas
            and in_name not in layer.computes_no_input_deltas_for
            and 'Input' not in _producers(layer, in_name)
        ):
            chosen.setdefault(name, set()).add(in_name)
    return {name: frozenset(ins) for name, ins in chosen.items()}


def _producers(layer, in_name: str) -> set:
    """The names of the layers feeding ``layer``'s input ``in_name``."""
    return {c.start_layer for c in layer.incoming if c.input_name == in_name}
