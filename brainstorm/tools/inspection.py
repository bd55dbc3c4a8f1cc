"""Inspecting networks: a text summary of their layers, a drawing of their graph."""

from __future__ import annotations

import os
import shutil
import subprocess
import warnings

import numpy as np

from brainstorm.arguments import (
    Arg,
    FileName,
    Instance,
    declare,
)
from brainstorm.errors import NetworkValidationError
from brainstorm.files import write_atomically
from brainstorm.structure.network import Network

_NETWORK = Instance(Network)


@declare(NetworkValidationError, network=Arg(_NETWORK))
def get_network_info(network) -> str:
    """Return a text summary of ``network``.

    The total number of parameters, then per layer its name and type,
    parameter shapes and count, and input and output feature shapes,
    separated by lines of 80 dashes.
    """
    separator = '-' * 80
    total = int(network.buffer.parameters.size)
    lines = [f'Total number of parameters: {total}', separator]
    for name, layer in network.layers.items():
        type_name = type(layer).__name__
        if type_name.endswith('LayerImpl'):
            type_name = type_name[: -len('LayerImpl')]
        lines.append(f'{name} ({type_name})')
        count = 0
        params = []
        for pname, structure in layer.parameter_shapes.items():
            shape = tuple(structure.feature_shape)
            count += int(np.prod(shape))
            params.append(f'{pname} {shape}')
        if params:
            lines.append(f'  parameters: {", ".join(params)} = {count}')
        for what, shapes in (
            ('inputs', layer.in_shapes),
            ('outputs', layer.out_shapes),
        ):
            if shapes:
                entries = ', '.join(
                    f'{key} {tuple(s.feature_shape)}' for key, s in shapes.items()
                )
                lines.append(f'  {what}: {entries}')
        lines.append(separator)
    return '\n'.join(lines)


@declare(NetworkValidationError, network=Arg(_NETWORK))
def print_network_info(network) -> None:
    """Print the handler in use and :func:`get_network_info` under a banner.

    The handler is shown as its str: class and dtype, for a
    :class:`~brainstorm.handlers.onednn.handler.OneDnnHandler` also oneDNN's
    version and thread count.
    """
    banner = '=' * 80
    print(banner)
    print(f'{"Network information":^80}')
    print(banner)
    print(f'Handler: {network.handler}')
    print(get_network_info(network))


def _dot_text(network) -> str:
    lines = ['digraph network {', '  rankdir=LR;', '  node [shape=box, style=rounded];']
    for name in network.layers:
        type_name = network.architecture[name]['@type']
        lines.append(f'  "{name}" [label="{name}\\n{type_name}"];')
    for name, entry in network.architecture.items():
        connections = entry.get('@outgoing_connections', {})
        if isinstance(connections, list):
            connections = {'default': connections}
        for out_name, targets in connections.items():
            for target in targets:
                dest, _, in_name = target.partition('.')
                in_name = in_name or 'default'
                lines.append(
                    f'  "{name}" -> "{dest}" [label="{out_name} -> {in_name}"];'
                )
    lines.append('}')
    return '\n'.join(lines) + '\n'


@declare(
    NetworkValidationError,
    network=Arg(_NETWORK),
    file_name=Arg(FileName(), default='network.png'),
)
def draw_network(network, file_name: str = 'network.png'):
    """Draw the network graph with Graphviz.

    Always writes the graph as DOT text next to ``file_name`` (same name,
    extension ``.dot``). If the Graphviz program ``dot`` is installed, it
    renders ``file_name`` (format from its extension); otherwise a
    ``UserWarning`` says how to get it.

    Returns:
        an ``IPython.display.Image`` of the drawing inside IPython, else the
        name of the file written (the picture, or the DOT file if ``dot``
        is missing).

    Raises:
        FileWriteError: if a file cannot be written (or ``dot`` fails),
            naming it; files are written atomically.
    """
    stem, extension = os.path.splitext(file_name)
    dot_file = stem + '.dot'
    text = _dot_text(network)

    def write_dot(tmp):
        with open(tmp, 'w') as f:
            f.write(text)

    write_atomically(dot_file, write_dot)
    dot = shutil.which('dot')
    if dot is None:
        warnings.warn(
            f"draw_network: Graphviz's 'dot' program was not "
            f'found, so only the DOT text was written to '
            f"'{dot_file}'. Install Graphviz (e.g. 'apt-get install "
            f"graphviz' or 'brew install graphviz') to render "
            f"'{file_name}'.",
            stacklevel=2,
        )
        return dot_file
    fmt = extension.lstrip('.') or 'png'

    def render(tmp):
        done = subprocess.run(
            [dot, f'-T{fmt}', dot_file, '-o', tmp], capture_output=True, text=True
        )
        if done.returncode:
            raise OSError(f'dot failed: {done.stderr.strip()}')

    write_atomically(file_name, render)
    try:
        from IPython import get_ipython
        from IPython.display import Image
    except ImportError:
        return file_name
    if get_ipython() is not None and fmt in ('png', 'jpg', 'jpeg', 'gif'):
        return Image(filename=file_name)
    return file_name


# ------------------------------------------------------------------ data ---
