"""Sphinx directives generating parts of the brainstorm documentation from
the code itself.

``.. layer-reference::``
    One section per built-in layer, from
    :func:`brainstorm.layers.base_layer.describe_layers`: the constructor's
    signature and docstring, the declared arguments (constraint, default,
    description), the input templates and the buffers of an example
    instance.

``.. layout-example::``
    The layout (``net.layout``) of the design documents' "Full Layout
    Example" network, compiled by the real layout compiler, and the sizes of
    its three buffers.
"""

from __future__ import annotations

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

BUILT_IN_PREFIX = 'brainstorm.layers.'


# ---- layer reference ------------------------------------------------------


def _literal(value) -> str:
    return f'``{value!r}``'


def _shape(shape) -> str:
    return f'``{tuple(shape)!r}``'


def _shapes_line(title: str, shapes: dict | None) -> list:
    if not shapes:
        return [f'* {title}: none']
    return [
        f'* {title}: '
        + ', '.join(f'``{name}`` {_shape(shape)}' for name, shape in shapes.items())
    ]


def built_in_layers() -> list:
    """:func:`describe_layers` entries of the layers shipped with
    brainstorm (custom layers imported elsewhere are left out)."""
    from brainstorm.layers.base_layer import describe_layers

    return [
        entry
        for entry in describe_layers()
        if entry['module'].startswith(BUILT_IN_PREFIX)
    ]


def layer_reference_lines(entries: list) -> list:
    """reStructuredText of the layer reference."""
    lines = []
    for entry in entries:
        title = entry['type']
        lines += [title, '-' * len(title), '']
        lines += [f'.. autofunction:: {entry["module"]}.{entry["type"]}', '']
        lines += [f'Implementation: ``{entry["module"]}.{entry["class"]}``', '']
        kwargs = entry['kwargs']
        if kwargs:
            lines += [
                '.. list-table:: Arguments (checked when the layer is created)',
                '   :header-rows: 1',
                '   :widths: 15 35 15 35',
                '',
                '   * - name',
                '     - must be',
                '     - default',
                '     - meaning',
            ]
            for name, kwarg in kwargs.items():
                default = (
                    'required' if kwarg['required'] else _literal(kwarg['default'])
                )
                expected = kwarg['expected'] or 'any value'
                lines += [
                    f'   * - ``{name}``',
                    f'     - {expected}',
                    f'     - {default}',
                    f'     - {kwarg["description"] or "-"}',
                ]
            lines += ['']
        lines += ['Buffers:', '']
        lines += [
            '* inputs (templates): '
            + ', '.join(
                f'``{name}`` {_shape(template)}'
                for name, template in entry['inputs'].items()
            )
            if entry['inputs']
            else '* inputs: none'
        ]
        if entry.get('optional_inputs'):
            optional = ', '.join(
                f'``{name}`` {_shape(template)}'
                for name, template in entry['optional_inputs'].items()
            )
            lines += [f'* optional inputs (templates): {optional}']
        if entry.get('example_inputs'):
            example = ', '.join(
                f'``{name}`` {_shape(shape)}'
                for name, shape in entry['example_inputs'].items()
            )
            lines += [f'* for example inputs {example}:', '']
            for title in ('outputs', 'parameters', 'internals'):
                lines += ['  ' + _shapes_line(title, entry[title])[0]]
        lines += ['']
    return lines


class LayerReference(SphinxDirective):
    """``.. layer-reference::``: document every built-in layer."""

    has_content = False

    def run(self):
        entries = built_in_layers()
        for entry in entries:
            self.env.note_dependency(entry['module'].replace('.', '/') + '.py')
        container = nodes.section()
        container.document = self.state.document
        content = StringList(layer_reference_lines(entries), source='<layer-reference>')
        nested_parse_with_titles(self.state, content, container)
        return container.children


# ---- layout example -------------------------------------------------------

SEED_NETWORK_SOURCE = """\
inputs = Input(out_shapes={'input_data': ('T', 'B', 4),
                           'targets': ('T', 'B', 10)})
mse = SquaredError(name='Mse')
(inputs - 'input_data' >> Recurrent(5, name='Rnn')
 >> FullyConnected(10, name='OutLayer') >> mse)
inputs - 'targets' >> 'targets' - mse
mse - 'loss' >> Loss()
net = Network.from_layer(mse)"""


def seed_network():
    """The network of the design documents' "Full Layout Example", built by
    running :data:`SEED_NETWORK_SOURCE` (the code the docs show)."""
    from brainstorm.layers import (
        FullyConnected,
        Input,
        Loss,
        Recurrent,
        SquaredError,
    )
    from brainstorm.structure.network import Network

    namespace = {
        'Input': Input,
        'SquaredError': SquaredError,
        'Recurrent': Recurrent,
        'FullyConnected': FullyConnected,
        'Loss': Loss,
        'Network': Network,
    }
    exec(SEED_NETWORK_SOURCE, namespace)
    return namespace['net']


def format_layout(node: dict, indent: int = 0) -> str:
    """A layout dict as Python source: one array node per line."""
    pad = ' ' * indent
    if node.get('@type') == 'array':
        return (
            '{' + ', '.join(f'{key!r}: {value!r}' for key, value in node.items()) + '}'
        )
    items = []
    for key, value in node.items():
        if isinstance(value, dict):
            items.append(f'{pad}    {key!r}: {format_layout(value, indent + 4)}')
        else:
            items.append(f'{pad}    {key!r}: {value!r}')
    if len(items) <= 2 and all(not isinstance(v, dict) for v in node.values()):
        return '{' + ', '.join(item.strip() for item in items) + '}'
    return '{\n' + ',\n'.join(items) + f'\n{pad}}}'


class LayoutExample(SphinxDirective):
    """``.. layout-example::``: the seed network's layout and sizes."""

    has_content = False

    def run(self):
        net = seed_network()
        source = (
            '# the network\n'
            + SEED_NETWORK_SOURCE
            + '\n\n# net.layout\n'
            + format_layout(net.layout)
            + '\n\n# net.buffer_manager.sizes (feature size of the '
            'constant, batch-sized and time-sized buffer)\n'
            + repr(list(net.buffer_manager.sizes))
        )
        block = nodes.literal_block(source, source)
        block['language'] = 'python'
        return [block]


def setup(app):
    app.add_directive('layer-reference', LayerReference)
    app.add_directive('layout-example', LayoutExample)
    return {'version': '1.0', 'parallel_read_safe': True, 'parallel_write_safe': True}
