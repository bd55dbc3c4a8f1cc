"""Tools for building, inspecting and evaluating networks."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import warnings
from collections import OrderedDict

import numpy as np

from brainstorm.arguments import (
    SEED,
    AnyOf,
    Arg,
    Bool,
    Choice,
    Instance,
    Int,
    ListOf,
    NumericArray,
    Optional,
    Real,
    Str,
    declare,
)
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.utils import NetworkValidationError, ValidationError

__all__ = ['get_in_out_layers', 'create_net_from_spec', 'evaluate', 'extract',
           'extract_and_save', 'get_network_info', 'print_network_info',
           'draw_network', 'shuffle_data', 'split']

BUFFERS_FILE_FORMAT = b'Buffers file v1.0'


def _as_shape(shape, what: str) -> tuple:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if not isinstance(shape, (tuple, list)) or not shape or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0
            for s in shape):
        raise NetworkValidationError(
            f'{what} must be a positive int or a tuple of positive ints. '
            f'Received: {shape!r}')
    return tuple(shape)


_SHAPE = AnyOf(Int(1), ListOf(Int(1), nonempty=True, as_tuple=True))
_TASK = Choice('classification', 'multi-label', 'regression')
_TASK_ARGUMENTS = {
    'task_type': Arg(_TASK),
    'in_shape': Arg(_SHAPE),
    'out_shape': Arg(_SHAPE),
    'data_name': Arg(Str(identifier=True), default='default'),
    'targets_name': Arg(Str(identifier=True), default='targets'),
    'mask_name': Arg(Optional(Str(identifier=True)), default=None),
    'use_conv': Arg(Optional(Bool()), default=None),
}


def _check_distinct_names(owner: str, **names) -> None:
    """Input output names must differ (else one array feeds two roles)."""
    given = {k: v for k, v in names.items() if v is not None}
    seen: dict = {}
    for argument, value in given.items():
        if value in seen:
            raise NetworkValidationError(
                f'{owner}: {seen[value]} and {argument} must differ. '
                f'Received: {seen[value]}={value!r}, {argument}={value!r}')
        seen[value] = argument


@declare(NetworkValidationError, **_TASK_ARGUMENTS,
         projection_name=Arg(Optional(Str(identifier=True)), default=None),
         outlayer_name=Arg(Optional(Str(identifier=True)), default=None))
def get_in_out_layers(task_type: str, in_shape, out_shape,
                      data_name: str = 'default', targets_name: str = 'targets',
                      projection_name: str | None = None,
                      outlayer_name: str | None = None,
                      mask_name: str | None = None,
                      use_conv: bool | None = None) -> tuple[
                          ConstructionWrapper, ConstructionWrapper]:
    """Create an Input layer and an output stack for a standard task.

    Args:
        task_type: ``'classification'`` (SoftmaxCE), ``'multi-label'``
            (SigmoidCE) or ``'regression'`` (SquaredError).
        in_shape: feature shape of the data (int or tuple).
        out_shape: feature shape of the output (int or tuple); for
            classification the last entry is the number of classes.
        data_name, targets_name: names of the Input outputs.
        projection_name: name of the output projection (default
            ``outlayer_name + '_projection'``).
        outlayer_name: name of the output layer (default ``'Output'``).
        mask_name: if given, an Input output ``('T', 'B', 1)`` masking the
            loss.
        use_conv: force a 1x1 Convolution2D (True) or FullyConnected (False)
            projection; by default chosen from ``len(out_shape)``.

    Returns:
        ``(input_layer, projection)``: connect your hidden layers between
        them, e.g. ``inp >> FullyConnected(100) >> proj``.

    Example:
        >>> import brainstorm as bs
        >>> inp, out = bs.tools.get_in_out_layers('classification', 784, 10)
        >>> net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(50)
        ...                             >> out)
        >>> list(net.layers)
        ['Input', 'FullyConnected', 'Output_projection', 'Output', 'Loss']
    """
    from brainstorm import layers
    _check_distinct_names('get_in_out_layers', data_name=data_name,
                          targets_name=targets_name, mask_name=mask_name)
    in_shape = _as_shape(in_shape, 'in_shape')
    out_shape = _as_shape(out_shape, 'out_shape')
    output_layers = {'classification': 'SoftmaxCE',
                     'multi-label': 'SigmoidCE', 'regression': 'SquaredError'}
    if task_type not in output_layers:
        raise NetworkValidationError(
            f'get_in_out_layers: unknown task_type {task_type!r}: use one '
            f'of {sorted(output_layers)}.')
    if task_type == 'classification':
        target_shape = out_shape[:-1] + (1,)
    else:
        target_shape = out_shape
    out_shapes = {data_name: ('T', 'B') + in_shape,
                  targets_name: ('T', 'B') + target_shape}
    if mask_name:
        out_shapes[mask_name] = ('T', 'B', 1)
    outlayer_name = outlayer_name or 'Output'
    projection_name = projection_name or outlayer_name + '_projection'

    if use_conv is False or (use_conv is None and len(out_shape) == 1):
        projection = layers.FullyConnected(out_shape, activation='linear',
                                    name=projection_name)
    elif use_conv is True or (use_conv is None and len(out_shape) == 3):
        projection = layers.Convolution2D(out_shape[-1], kernel_size=(1, 1),
                                   activation='linear', name=projection_name)
    else:
        raise NetworkValidationError(
            f'get_in_out_layers: cannot choose a projection for out_shape '
            f'{out_shape}: give 1 (FullyConnected) or 3 (Convolution2D) '
            'dimensions, or set use_conv.')
    inp = layers.Input(out_shapes)
    output = getattr(layers, output_layers[task_type])(name=outlayer_name)
    projection >> output
    inp - targets_name >> 'targets' - output
    if mask_name:
        mask = layers.Mask()
        output - 'loss' >> mask
        inp - mask_name >> 'mask' - mask
        mask >> layers.Loss()
    else:
        output - 'loss' >> layers.Loss()
    return inp - data_name, projection


# ------------------------------------------------------ network from spec ---

_ACTIVATIONS = {'s': 'sigmoid', 't': 'tanh', 'r': 'rel', 'l': 'linear'}
_TOKEN = re.compile(r'([A-Z])((?:[a-z]|\d*\.\d+|\d+|[:/|])*)')
_ARGUMENT = re.compile(r'[a-z]|\d*\.\d+|\d+')


def _parse_spec(spec: str) -> list:
    """``'F100 D.2'`` -> ``[('F', [100]), ('D', [0.2])]``."""
    if not isinstance(spec, str):
        raise NetworkValidationError(
            f'create_net_from_spec: spec must be a str. Received: {spec!r}')
    text = re.sub(r'\s+', '', spec)
    tokens = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise NetworkValidationError(
                f'create_net_from_spec: cannot parse spec {spec!r} at '
                f'{text[position:]!r}: each layer starts with an uppercase '
                'letter followed by lowercase letters and numbers.')
        arguments = []
        for arg in _ARGUMENT.findall(match.group(2)):
            if arg.isalpha():
                arguments.append(arg)
            elif '.' in arg:
                arguments.append(float(arg))
            else:
                arguments.append(int(arg))
        tokens.append((match.group(1), arguments))
        position = match.end()
    return tokens


def _spec_error(token, arguments, expected):
    return NetworkValidationError(
        f'create_net_from_spec: layer token {token}{arguments} is invalid: '
        f'expected {expected}.')


def _pop_activation(arguments, default):
    if arguments and isinstance(arguments[0], str) and \
            arguments[0] in _ACTIVATIONS:
        return _ACTIVATIONS[arguments.pop(0)]
    return default


def _pop_options(token, arguments, allowed) -> dict:
    options = {}
    while arguments:
        key = arguments.pop(0)
        if key not in allowed or not arguments or \
                not isinstance(arguments[0], int):
            raise _spec_error(token, arguments, f'options {sorted(allowed)} '
                                                'each followed by an int')
        options[key] = arguments.pop(0)
    return options


def _layer_from_token(token: str, arguments: list):
    from brainstorm.layers import (
        BatchNorm,
        Convolution2D,
        Dropout,
        FullyConnected,
        Lstm,
        Pooling2D,
        Recurrent,
    )
    args = list(arguments)
    if token in 'FRL':
        layer, default = {'F': (FullyConnected, 'rel'),
                          'R': (Recurrent, 'tanh'),
                          'L': (Lstm, 'tanh')}[token]
        activation = _pop_activation(args, default)
        if len(args) != 1 or not isinstance(args[0], int):
            raise _spec_error(token, arguments, 'an optional activation '
                              '(s, t, r, l) and an int size')
        return layer(args[0], activation=activation)
    if token == 'B':
        if args:
            raise _spec_error(token, arguments, 'no arguments')
        return BatchNorm()
    if token == 'D':
        if len(args) > 1 or (args and isinstance(args[0], str)):
            raise _spec_error(token, arguments, 'an optional drop '
                              'probability such as .2')
        return Dropout(float(args[0]) if args else 0.5)
    if token == 'C':
        activation = _pop_activation(args, 'rel')
        if len(args) < 2 or not all(isinstance(a, int) for a in args[:2]):
            raise _spec_error(token, arguments, 'filters:kernel ints, then '
                              'optional p<pad> s<stride>')
        filters, kernel = args[:2]
        options = _pop_options(token, args[2:], {'p', 's'})
        stride = options.get('s', 1)
        return Convolution2D(filters, (kernel, kernel), stride=(stride, stride),
                             padding=options.get('p', 0),
                             activation=activation)
    if token == 'P':
        pool_type = 'max'
        if args and args[0] in ('m', 'a'):
            pool_type = 'max' if args.pop(0) == 'm' else 'avg'
        if not args or not isinstance(args[0], int):
            raise _spec_error(token, arguments, 'an optional type (m, a), an '
                              'int kernel, then optional p<pad> s<stride>')
        kernel = args.pop(0)
        options = _pop_options(token, args, {'p', 's'})
        stride = options.get('s', 1)
        return Pooling2D((kernel, kernel), type=pool_type,
                         stride=(stride, stride), padding=options.get('p', 0))
    raise _spec_error(token, arguments, 'one of the layer letters F R L B D '
                      'C P')


@declare(NetworkValidationError, **_TASK_ARGUMENTS,
         spec=Arg(Str()))
def create_net_from_spec(task_type: str, in_shape, out_shape, spec: str,
                         data_name: str = 'default',
                         targets_name: str = 'targets',
                         mask_name: str | None = None,
                         use_conv: bool | None = None):
    """Create an initialised network from a compact text description.

    The spec is a sequence of layer tokens: an uppercase letter followed by
    arguments (lowercase letters or numbers; integers stay ints, others are
    floats); ``:``, ``/``, ``|`` may separate arguments, whitespace is
    ignored. An optional first argument sets the activation: ``s`` sigmoid,
    ``t`` tanh, ``r`` rel, ``l`` linear.

    * ``F[a]size``: FullyConnected (rel); ``R[a]size``: Recurrent (tanh);
      ``L[a]size``: Lstm (tanh);
    * ``B``: BatchNorm; ``D[p]``: Dropout (``D.2``; default 0.5);
    * ``C[a]filters:kernel[p pad][s stride]``: Convolution2D (rel, square
      kernel);
    * ``P[m|a]kernel[p pad][s stride]``: Pooling2D, max (default) or avg.

    The layers are put between the Input and the output stack of
    :func:`get_in_out_layers`. Weights of layers with an activation get
    ``DenseSqrtFanInOut(activation)``, BatchNorm ``gamma = 1`` and
    ``beta = 0``, everything else (and every fallback) ``Gaussian()``.

    Args:
        task_type, in_shape, out_shape: see :func:`get_in_out_layers`.
        spec: the layer description, e.g. ``'D.2 F1200 D F1200 D'``.
        data_name, targets_name, mask_name, use_conv: see
            :func:`get_in_out_layers`.

    Returns:
        the Network, with ``output_name = 'Output.outputs.predictions'``.

    Example:
        >>> net = create_net_from_spec('classification', 4, 3, 'F5 Ft5')
        >>> list(net.layers)[:3]
        ['Input', 'FullyConnected_1', 'FullyConnected_2']
    """
    from brainstorm.initializers import DenseSqrtFanInOut, Gaussian
    from brainstorm.structure.network import Network
    tokens = _parse_spec(spec)
    inp, projection = get_in_out_layers(
        task_type, in_shape, out_shape, data_name=data_name,
        targets_name=targets_name, mask_name=mask_name, use_conv=use_conv)
    layer = inp
    for token, arguments in tokens:
        layer = layer >> _layer_from_token(token, arguments)
    layer >> projection
    net = Network.from_layer(projection)
    init: dict = {'default': Gaussian(), 'fallback': Gaussian()}
    for name, impl in net.layers.items():
        if type(impl).__name__ == 'BatchNormLayerImpl':
            init[name] = {'gamma': 1.0, 'beta': 0.0}
        elif impl.parameter_shapes and hasattr(impl, 'activation'):
            init[name] = DenseSqrtFanInOut(impl.activation)
    net.initialize(init)
    net.output_name = 'Output.outputs.predictions'
    return net


# ----------------------------------------------------------- evaluation ---

_NETWORK = Instance('brainstorm.structure.network:Network')
_BUFFER_NAMES = AnyOf(Str(nonempty=True), ListOf(Str(nonempty=True),
                                                 nonempty=True))


@declare(NetworkValidationError, network=Arg(_NETWORK),
         scorers=Arg(ListOf(Instance('brainstorm.scorers:Scorer')),
                     default=()),
         out_name=Arg(Str(), default=''),
         targets_name=Arg(Str(nonempty=True), default='targets'),
         mask_name=Arg(Optional(Str()), default=None))
def evaluate(network, iter, scorers=(), out_name: str = '',
             targets_name: str = 'targets',
             mask_name: str | None = None, *, comm=None) -> OrderedDict:
    """Losses and scores of ``network`` over one pass of ``iter``
    (``training_pass=False``).

    Args:
        network: the network.
        iter: the data iterator.
        scorers: scorers to evaluate (see :mod:`brainstorm.scorers`).
        out_name: output path for scorers without their own.
        targets_name: targets name for scorers without their own.
        mask_name: mask name for scorers without their own.
        comm: an MPI communicator: the figures are joined over all its
            ranks (each evaluating its own part of the data).

    Returns:
        OrderedDict: the losses (batch-size weighted means), then the
        scores.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)  # all outputs equal: every class gets 1/2
        >>> data = bs.data_iterators.Minibatches(
        ...     5, default=np.ones((1, 10, 2)), targets=np.zeros((1, 10, 1)))
        >>> scores = bs.tools.evaluate(net, data, scorers=[bs.scorers.Accuracy()],
        ...                            out_name='Output.outputs.predictions')
        >>> round(scores['total_loss'], 4)  # ln 2 per sample, averaged
        0.6931
    """
    from brainstorm.scorers import aggregate_losses_and_scores, gather_losses_and_scores
    from brainstorm.training.utils import run_network
    scorers = list(scorers)
    scores: OrderedDict = OrderedDict()
    for _ in run_network(network, iter):
        network.forward_pass(training_pass=False)
        gather_losses_and_scores(network, scorers, scores, out_name=out_name,
                                 targets_name=targets_name,
                                 mask_name=mask_name or '')
    return aggregate_losses_and_scores(scores, network, scorers, comm=comm)


def _buffer_type(network, path: str) -> int:
    from brainstorm.structure.layout import get_buffer_type
    from brainstorm.utils import get_by_path
    try:
        node = get_by_path(network.layout, path)
    except KeyError:
        raise NetworkValidationError(
            f"Unknown buffer '{path}'. Layers: {list(network.layers)}") \
            from None
    if '@shape' not in node:
        raise NetworkValidationError(
            f"'{path}' is a view, not a buffer. Its entries: "
            f"{[k for k in node if not k.startswith('@')]}")
    return get_buffer_type(node['@shape'])


def _as_names(buffer_names) -> list:
    if isinstance(buffer_names, str):
        return [buffer_names]
    return list(buffer_names)


def _extract_batches(network, iter, names):
    """Yield ``{path: array}`` per batch after a forward pass."""
    from brainstorm.training.utils import run_network
    time_sized = {name for name in names if _buffer_type(network, name) == 2}
    for _ in run_network(network, iter, all_inputs=False):
        network.forward_pass(training_pass=False)
        # Layers with a context keep an extra time slot after the data's
        # last step; only the data's time steps are results.
        time_size = network.buffer_manager.time_size
        yield {name: network.get(name)[:time_size] if name in time_sized
               else network.get(name) for name in names}


def _pad_time(array: np.ndarray, time_steps: int) -> np.ndarray:
    if array.shape[0] == time_steps:
        return array
    padded = np.zeros((time_steps,) + array.shape[1:], dtype=array.dtype)
    padded[:array.shape[0]] = array
    return padded


@declare(NetworkValidationError, network=Arg(_NETWORK),
         buffer_names=Arg(_BUFFER_NAMES))
def extract(network, iter, buffer_names) -> dict:
    """Run the network over ``iter`` and collect buffers.

    Time-sized buffers are returned as ``(T, N_total, ...)`` (batches with
    fewer time steps are zero-padded to the longest), batch-sized ones as
    ``(N_total, ...)``, constant ones as they are.

    Args:
        network: the network.
        iter: a data iterator (missing inputs are allowed).
        buffer_names: a dotted buffer path or a list of them, e.g.
            ``'Output.outputs.predictions'``.

    Returns:
        dict path -> NumPy array.
    """
    names = _as_names(buffer_names)
    types = {name: _buffer_type(network, name) for name in names}
    collected: dict = {name: [] for name in names}
    for batch in _extract_batches(network, iter, names):
        for name, array in batch.items():
            collected[name].append(array)
    result: dict = {}
    for name, arrays in collected.items():
        if not arrays:
            result[name] = None
        elif types[name] == 2:
            time_steps = max(a.shape[0] for a in arrays)
            result[name] = np.concatenate(
                [_pad_time(a, time_steps) for a in arrays], axis=1)
        elif types[name] == 1:
            result[name] = np.concatenate(arrays, axis=0)
        else:
            result[name] = arrays[-1]
    return result


@declare(NetworkValidationError, network=Arg(_NETWORK),
         buffer_names=Arg(_BUFFER_NAMES), file_name=Arg(Str(nonempty=True)))
def extract_and_save(network, iter, buffer_names, file_name: str) -> None:
    """Like :func:`extract`, but write each buffer into an HDF5 dataset as
    the batches come (attributes ``info`` and
    ``format = b'Buffers file v1.0'``).

    Datasets grow along the batch axis, and along the time axis when a
    later batch is longer (shorter batches are zero-padded).

    Args:
        network: the network.
        iter: a data iterator.
        buffer_names: a dotted buffer path or a list of them.
        file_name: the HDF5 file to write.
    """
    import h5py

    from brainstorm.utils import get_brainstorm_info
    names = _as_names(buffer_names)
    types = {name: _buffer_type(network, name) for name in names}
    with h5py.File(file_name, 'w') as f:
        f.attrs['info'] = np.bytes_(get_brainstorm_info())
        f.attrs['format'] = np.bytes_(BUFFERS_FILE_FORMAT)
        for batch in _extract_batches(network, iter, names):
            for name, array in batch.items():
                kind = types[name]
                if kind == 0:
                    if name in f:
                        del f[name]
                    f.create_dataset(name, data=array)
                    continue
                axis = 1 if kind == 2 else 0
                if name not in f:
                    maxshape = list(array.shape)
                    maxshape[axis] = None
                    if kind == 2:
                        maxshape[0] = None
                    f.create_dataset(name, data=array, maxshape=maxshape,
                                     chunks=True, fillvalue=0)
                    continue
                dataset = f[name]
                shape = list(dataset.shape)
                start = shape[axis]
                shape[axis] += array.shape[axis]
                if kind == 2:
                    shape[0] = max(shape[0], array.shape[0])
                dataset.resize(shape)
                if kind == 2:
                    dataset[:array.shape[0], start:] = array
                else:
                    dataset[start:] = array


# ------------------------------------------------------------ inspection ---

@declare(NetworkValidationError, network=Arg(_NETWORK))
def get_network_info(network) -> str:
    """A text summary: the total number of parameters, then per layer its
    name and type, parameter shapes and count, and input and output feature
    shapes, separated by lines of 80 dashes."""
    separator = '-' * 80
    total = int(network.buffer.parameters.size)
    lines = [f'Total number of parameters: {total}', separator]
    for name, layer in network.layers.items():
        type_name = type(layer).__name__
        if type_name.endswith('LayerImpl'):
            type_name = type_name[:-len('LayerImpl')]
        lines.append(f'{name} ({type_name})')
        count = 0
        params = []
        for pname, structure in layer.parameter_shapes.items():
            shape = tuple(structure.feature_shape)
            count += int(np.prod(shape))
            params.append(f'{pname} {shape}')
        if params:
            lines.append(f"  parameters: {', '.join(params)} = {count}")
        for what, shapes in (('inputs', layer.in_shapes),
                             ('outputs', layer.out_shapes)):
            if shapes:
                entries = ', '.join(f'{key} {tuple(s.feature_shape)}'
                                    for key, s in shapes.items())
                lines.append(f'  {what}: {entries}')
        lines.append(separator)
    return '\n'.join(lines)


@declare(NetworkValidationError, network=Arg(_NETWORK))
def print_network_info(network) -> None:
    """Print :func:`get_network_info` under a banner."""
    banner = '=' * 80
    print(banner)
    print(f'{"Network information":^80}')
    print(banner)
    print(get_network_info(network))


def _dot_text(network) -> str:
    lines = ['digraph network {', '  rankdir=LR;',
             '  node [shape=box, style=rounded];']
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
                lines.append(f'  "{name}" -> "{dest}" '
                             f'[label="{out_name} -> {in_name}"];')
    lines.append('}')
    return '\n'.join(lines) + '\n'


@declare(NetworkValidationError, network=Arg(_NETWORK),
         file_name=Arg(Str(nonempty=True), default='network.png'))
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
    """
    stem, extension = os.path.splitext(file_name)
    dot_file = stem + '.dot'
    with open(dot_file, 'w') as f:
        f.write(_dot_text(network))
    dot = shutil.which('dot')
    if dot is None:
        warnings.warn(f"draw_network: Graphviz's 'dot' program was not "
                      f"found, so only the DOT text was written to "
                      f"'{dot_file}'. Install Graphviz (e.g. 'apt-get install "
                      f"graphviz' or 'brew install graphviz') to render "
                      f"'{file_name}'.", stacklevel=2)
        return dot_file
    fmt = extension.lstrip('.') or 'png'
    subprocess.run([dot, f'-T{fmt}', dot_file, '-o', file_name], check=True)
    try:
        from IPython import get_ipython
        from IPython.display import Image
    except ImportError:
        return file_name
    if get_ipython() is not None and fmt in ('png', 'jpg', 'jpeg', 'gif'):
        return Image(filename=file_name)
    return file_name


# ------------------------------------------------------------------ data ---

@declare(NetworkValidationError,
         seed=Arg(Optional(SEED), default=None),
         **{'*arrays': Arg(Optional(NumericArray(min_ndim=2, finite=False)),
                           default=None)})
def shuffle_data(*arrays, seed: int | None = None) -> list:
    """Permute all arrays identically along axis 1 (the batch axis).

    Args:
        *arrays: arrays of shape ``(T, B, ...)`` with the same B; None
            entries pass through.
        seed: seed for the permutation (drawn from ``global_rnd`` if None).

    Returns:
        list of the shuffled arrays (new arrays), in order.
    """
    from brainstorm.randomness import global_rnd
    present = [a for a in arrays if a is not None]
    if not present:
        return list(arrays)
    sizes = {np.shape(a)[1] for a in present}
    if len(sizes) != 1:
        raise ValidationError(
            'shuffle_data: all arrays need the same size along axis 1. '
            f'Received shapes {[np.shape(a) for a in present]}')
    rnd = global_rnd.create_random_state(seed)
    order = rnd.permutation(sizes.pop())
    return [None if a is None else np.asarray(a)[:, order] for a in arrays]


@declare(NetworkValidationError,
         ratios=Arg(ListOf(Real(0, include_low=False), nonempty=True),
                    default=(9, 1)),
         **{'*arrays': Arg(Optional(NumericArray(min_ndim=2, finite=False)),
                           default=None)})
def split(*arrays, ratios=(9, 1)) -> list:
    """Cut arrays along axis 1 in the given ratios.

    The cut points are the rounded cumulative fractions of the size.

    Args:
        *arrays: arrays of shape ``(T, B, ...)`` with the same B; None
            entries pass through.
        ratios: relative sizes of the parts (positive numbers).

    Returns:
        one list per part, holding the part of each array (views).

    Example:
        >>> train, valid = split(np.zeros((1, 10, 2)), ratios=(8, 2))
        >>> train[0].shape, valid[0].shape
        ((1, 8, 2), (1, 2, 2))
    """
    ratios = list(ratios)
    if not ratios or any(not isinstance(r, (int, float)) or r <= 0
                         for r in ratios):
        raise ValidationError(f'split: ratios must be positive numbers. '
                              f'Received: {ratios!r}')
    present = [a for a in arrays if a is not None]
    if not present:
        return [list(arrays) for _ in ratios]
    sizes = {np.shape(a)[1] for a in present}
    if len(sizes) != 1:
        raise ValidationError(
            'split: all arrays need the same size along axis 1. Received '
            f'shapes {[np.shape(a) for a in present]}')
    size = sizes.pop()
    bounds = np.round(np.cumsum(ratios) / np.sum(ratios) * size).astype(int)
    starts = [0] + list(bounds[:-1])
    return [[None if a is None else a[:, start:stop] for a in arrays]
            for start, stop in zip(starts, bounds)]
