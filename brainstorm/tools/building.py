"""Building networks: input and output stacks for standard tasks, nets from specs."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import brainstorm.layers as layers
from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    Choice,
    Int,
    ListOf,
    Optional,
    Str,
    declare,
)
from brainstorm.errors import NetworkValidationError
from brainstorm.initializers import DenseSqrtFanInOut, Gaussian
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.network import Network


def _as_shape(shape, what: str) -> tuple:
    if isinstance(shape, int) and not isinstance(shape, bool):
        shape = (shape,)
    if (
        not isinstance(shape, (tuple, list))
        or not shape
        or not all(
            isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape
        )
    ):
        raise NetworkValidationError(
            f'{what} must be a positive int or a tuple of positive ints. '
            f'Received: {shape!r}'
        )
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
                f'Received: {seen[value]}={value!r}, {argument}={value!r}'
            )
        seen[value] = argument


@declare(
    NetworkValidationError,
    **_TASK_ARGUMENTS,
    projection_name=Arg(Optional(Str(identifier=True)), default=None),
    outlayer_name=Arg(Optional(Str(identifier=True)), default=None),
)
def get_in_out_layers(
    task_type: str,
    in_shape,
    out_shape,
    data_name: str = 'default',
    targets_name: str = 'targets',
    projection_name: str | None = None,
    outlayer_name: str | None = None,
    mask_name: str | None = None,
    use_conv: bool | None = None,
) -> tuple[ConstructionWrapper, ConstructionWrapper]:
    """Create an Input layer and an output stack for a standard task.

    Args:
        task_type: ``'classification'`` (SoftmaxCE), ``'multi-label'``
            (SigmoidCE) or ``'regression'`` (SquaredError).
        in_shape: feature shape of the data (int or tuple).
        out_shape: feature shape of the output (int or tuple); for
            classification the last entry is the number of classes.
        data_name: name of the Input output holding the data.
        targets_name: name of the Input output holding the targets.
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
    _check_distinct_names(
        'get_in_out_layers',
        data_name=data_name,
        targets_name=targets_name,
        mask_name=mask_name,
    )
    in_shape = _as_shape(in_shape, 'in_shape')
    out_shape = _as_shape(out_shape, 'out_shape')
    output_layers = {
        'classification': 'SoftmaxCE',
        'multi-label': 'SigmoidCE',
        'regression': 'SquaredError',
    }
    if task_type not in output_layers:
        raise NetworkValidationError(
            f'get_in_out_layers: unknown task_type {task_type!r}: use one '
            f'of {sorted(output_layers)}.'
        )
    if task_type == 'classification':
        target_shape = out_shape[:-1] + (1,)
    else:
        target_shape = out_shape
    out_shapes = {
        data_name: ('T', 'B') + in_shape,
        targets_name: ('T', 'B') + target_shape,
    }
    if mask_name:
        out_shapes[mask_name] = ('T', 'B', 1)
    outlayer_name = outlayer_name or 'Output'
    projection_name = projection_name or outlayer_name + '_projection'

    # one output dimension is FullyConnected whatever use_conv says (0.5)
    if use_conv is False or len(out_shape) == 1:
        projection = layers.FullyConnected(
            out_shape, activation='linear', name=projection_name
        )
    elif use_conv is True or (use_conv is None and len(out_shape) == 3):
        projection = layers.Convolution2D(
            out_shape[-1], kernel_size=(1, 1), activation='linear', name=projection_name
        )
    else:
        raise NetworkValidationError(
            f'get_in_out_layers: cannot choose a projection for out_shape '
            f'{out_shape}: give 1 (FullyConnected) or 3 (Convolution2D) '
            'dimensions, or set use_conv.'
        )
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
            f'create_net_from_spec: spec must be a str. Received: {spec!r}'
        )
    text = re.sub(r'\s+', '', spec)
    tokens = []
    position = 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise NetworkValidationError(
                f'create_net_from_spec: cannot parse spec {spec!r} at '
                f'{text[position:]!r}: each layer starts with an uppercase '
                'letter followed by lowercase letters and numbers.'
            )
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
        f'expected {expected}.'
    )


def _pop_activation(arguments, default):
    if arguments and isinstance(arguments[0], str) and arguments[0] in _ACTIVATIONS:
        return _ACTIVATIONS[arguments.pop(0)]
    return default


def _pop_options(token, arguments, allowed) -> dict:
    options = {}
    while arguments:
        key = arguments.pop(0)
        if key not in allowed or not arguments or not isinstance(arguments[0], int):
            raise _spec_error(
                token, arguments, f'options {sorted(allowed)} each followed by an int'
            )
        options[key] = arguments.pop(0)
    return options


def _layer_from_token(token: str, arguments: list):
    args = list(arguments)
    if token in 'FRL':
        choices: dict[str, tuple[Callable[..., Any], str]] = {
            'F': (layers.FullyConnected, 'rel'),
            'R': (layers.Recurrent, 'tanh'),
            'L': (layers.Lstm, 'tanh'),
        }
        layer, default = choices[token]
        activation = _pop_activation(args, default)
        if len(args) != 1 or not isinstance(args[0], int):
            raise _spec_error(
                token, arguments, 'an optional activation (s, t, r, l) and an int size'
            )
        return layer(args[0], activation=activation)
    if token == 'B':
        if args:
            raise _spec_error(token, arguments, 'no arguments')
        return layers.BatchNorm()
    if token == 'D':
        if len(args) > 1 or (args and isinstance(args[0], str)):
            raise _spec_error(
                token, arguments, 'an optional drop probability such as .2'
            )
        return layers.Dropout(float(args[0]) if args else 0.5)
    if token == 'C':
        activation = _pop_activation(args, 'rel')
        if len(args) < 2 or not all(isinstance(a, int) for a in args[:2]):
            raise _spec_error(
                token, arguments, 'filters:kernel ints, then optional p<pad> s<stride>'
            )
        filters, kernel = args[:2]
        options = _pop_options(token, args[2:], {'p', 's'})
        stride = options.get('s', 1)
        return layers.Convolution2D(
            filters,
            (kernel, kernel),
            stride=(stride, stride),
            padding=options.get('p', 0),
            activation=activation,
        )
    if token == 'P':
        pool_type = 'max'
        if args and args[0] in ('m', 'a'):
            pool_type = 'max' if args.pop(0) == 'm' else 'avg'
        if not args or not isinstance(args[0], int):
            raise _spec_error(
                token,
                arguments,
                'an optional type (m, a), an '
                'int kernel, then optional p<pad> s<stride>',
            )
        kernel = args.pop(0)
        options = _pop_options(token, args, {'p', 's'})
        stride = options.get('s', 1)
        return layers.Pooling2D(
            (kernel, kernel),
            type=pool_type,
            stride=(stride, stride),
            padding=options.get('p', 0),
        )
    raise _spec_error(token, arguments, 'one of the layer letters F R L B D C P')


# Brainstorm 0.5's names for the pieces of create_net_from_spec, kept
# importable from brainstorm.tools

#: The activation letters of a spec, as in ``{'s': 'sigmoid', ...}``.
act_funcs = dict(_ACTIVATIONS)


def create_layer(layer_type: str, args: list):
    """Return the layer of one spec token, e.g. ``create_layer('F', [100])``.

    Args:
        layer_type: the token's letter (F R L B D C P).
        args: its arguments, e.g. ``['t', 50]`` for ``Ft50``.

    Raises:
        NetworkValidationError: for an unknown letter or bad arguments.
    """
    return _layer_from_token(layer_type, list(args))


def F(args):  # 0.5's name (create_net_from_spec's letters)
    """The layer of a spec token ``F`` (FullyConnected) with ``args``."""
    return create_layer('F', args)


def B(args):  # 0.5's name (create_net_from_spec's letters)
    """The layer of a spec token ``B`` (BatchNorm) with ``args``."""
    return create_layer('B', args)


def D(args):  # 0.5's name (create_net_from_spec's letters)
    """The layer of a spec token ``D`` (Dropout) with ``args``."""
    return create_layer('D', args)


def R(args):  # 0.5's name (create_net_from_spec's letters)
    """The layer of a spec token ``R`` (Recurrent) with ``args``."""
    return create_layer('R', args)


def L(args):  # 0.5's name (create_net_from_spec's letters)
    """The layer of a spec token ``L`` (Lstm) with ``args``."""
    return create_layer('L', args)


def C(args):  # 0.5's name (create_net_from_spec's letters)
    """The layer of a spec token ``C`` (Convolution2D) with ``args``."""
    return create_layer('C', args)


def P(args):  # 0.5's name (create_net_from_spec's letters)
    """The layer of a spec token ``P`` (Pooling2D) with ``args``."""
    return create_layer('P', args)


def trynumber(a: str):
    """Return ``a`` as an int, else as a float, else unchanged."""
    try:
        return int(a)
    except ValueError:
        try:
            return float(a)
        except ValueError:
            return a


@declare(NetworkValidationError, **_TASK_ARGUMENTS, spec=Arg(Str()))
def create_net_from_spec(
    task_type: str,
    in_shape,
    out_shape,
    spec: str,
    data_name: str = 'default',
    targets_name: str = 'targets',
    mask_name: str | None = None,
    use_conv: bool | None = None,
):
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
        task_type: the task, see :func:`get_in_out_layers`.
        in_shape: feature shape of the data (int or tuple).
        out_shape: feature shape of the output (int or tuple).
        spec: the layer description, e.g. ``'D.2 F1200 D F1200 D'``.
        data_name: name of the Input output holding the data.
        targets_name: name of the Input output holding the targets.
        mask_name: if given, the name of an Input output masking the loss.
        use_conv: the projection's kind, see :func:`get_in_out_layers`.

    Returns:
        the Network, with ``output_name = 'Output.outputs.predictions'``.

    Example:
        >>> net = create_net_from_spec('classification', 4, 3, 'F5 Ft5')
        >>> list(net.layers)[:3]
        ['Input', 'FullyConnected_1', 'FullyConnected_2']
    """
    tokens = _parse_spec(spec)
    inp, projection = get_in_out_layers(
        task_type,
        in_shape,
        out_shape,
        data_name=data_name,
        targets_name=targets_name,
        mask_name=mask_name,
        use_conv=use_conv,
    )
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
