"""Export a network's inference graph to ONNX: :func:`export_onnx`.

The exported model keeps brainstorm's data layout: every input and output
is ``(T, B, *features)`` (time, batch, features; images
``(T, B, height, width, channels)``), or ``(B, *features)`` where the
network declares it so, with ``T`` and ``B`` free (dynamic axes named
``'T'`` and ``'B'``, zero included), in float32. It computes what
``net.forward_pass(training_pass=False)`` computes from a zero context: the
running statistics of BatchNorm, Dropout as the identity.

Needs the ``onnx`` extra: ``pip install 'brainstorm-nn[onnx]'``.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

import brainstorm.optional as optional
from brainstorm.errors import NetworkValidationError
from brainstorm.files import as_file_name, write_atomically
from brainstorm.handlers.numpy_handler import LEAKY_SLOPE
from brainstorm.handlers.representable import find_unrepresentable
from brainstorm.layers.batch_norm_layer import BatchNormLayerImpl
from brainstorm.layers.convolution_2d_layer import Convolution2DLayerImpl
from brainstorm.layers.dropout_layer import DropoutLayerImpl
from brainstorm.layers.elementwise_layer import ElementwiseLayerImpl
from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.layers.input_layer import InputLayerImpl
from brainstorm.layers.lstm_layer import LstmLayerImpl
from brainstorm.layers.merge_layer import MergeLayerImpl
from brainstorm.layers.noop_layer import NoOpLayerImpl
from brainstorm.layers.pooling_2d_layer import Pooling2DLayerImpl
from brainstorm.layers.recurrent_layer import RecurrentLayerImpl
from brainstorm.layers.sigmoid_ce_layer import SigmoidCELayerImpl
from brainstorm.layers.softmax_ce_layer import SoftmaxCELayerImpl
from brainstorm.layers.squared_error_layer import SquaredErrorLayerImpl
from brainstorm.registry import qualified_name
from brainstorm.shapes import padding_sides
from brainstorm.structure.prediction import check_parameters_set

__all__ = ['export_onnx', 'ONNX_OPSET', 'EXPORTABLE_LAYERS']

#: The ONNX opset of the exported models (ONNX 1.12, onnxruntime 1.12 on).
ONNX_OPSET = 17

#: brainstorm activation -> (ONNX operator, its attributes); None: identity.
_ACTIVATION_OPS: dict[str, tuple[str, dict] | None] = {
    'sigmoid': ('Sigmoid', {}),
    'tanh': ('Tanh', {}),
    'rel': ('Relu', {}),
    'el': ('Elu', {'alpha': 1.0}),
    'softplus': ('Softplus', {}),
    'leaky_rel': ('LeakyRelu', {'alpha': LEAKY_SLOPE}),
    'linear': None,
}

#: brainstorm activation -> (activation of ONNX RNN/LSTM, alpha, beta).
_RNN_ACTIVATIONS = {
    'sigmoid': ('Sigmoid', None, None),
    'tanh': ('Tanh', None, None),
    'rel': ('Relu', None, None),
    'el': ('Elu', 1.0, None),
    'leaky_rel': ('LeakyRelu', LEAKY_SLOPE, None),
    'linear': ('Affine', 1.0, 0.0),
}

#: Why an activation has no ONNX RNN/LSTM equivalent (activation -> why).
_NO_RNN_ACTIVATION = {
    'softplus': (
        "onnxruntime computes an RNN's or LSTM's Softplus as log(1 + exp(x)), "
        'which overflows to inf from x = 89 on, where brainstorm gives x'
    ),
}

#: The largest serialised protobuf message, so the largest ONNX model file
#: (2 GB less a byte): protobuf cannot write a larger one.
_PROTOBUF_LIMIT = 2**31 - 1

#: The constants of brainstorm's GELU, the tanh approximation
#: ``x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``.
_SQRT_2_OVER_PI = 0.7978845608028654
_GELU_CUBIC = 0.044715


class _Graph:
    """The nodes, weights and names of the ONNX graph being built."""

    def __init__(self, helper, numpy_helper, float_type: int) -> None:
        self.helper = helper
        self.numpy_helper = numpy_helper
        #: onnx.TensorProto.FLOAT
        self.float_type = float_type
        self.nodes: list = []
        self.initializers: list = []
        self._count = 0
        #: (T, B) of the data, an int64 tensor of shape (2,)
        self.time_batch = ''
        #: the bytes of the constants (the parameters) by layer name
        self.nbytes: dict[str, int] = {}

    def name(self, hint: str) -> str:
        """A fresh tensor name starting with ``hint``."""
        self._count += 1
        return f'{hint}/{self._count}'

    def const(self, hint: str, value, dtype=np.float32) -> str:
        """Add a constant (an initializer) and return its name."""
        name = self.name(hint)
        array = np.ascontiguousarray(np.asarray(value, dtype=dtype))
        self.nbytes[hint] = self.nbytes.get(hint, 0) + array.nbytes
        self.initializers.append(self.numpy_helper.from_array(array, name))
        return name

    def op(self, op_type: str, inputs: list, hint: str, n_out: int = 1, **attrs):
        """Add a node and return its output name (a list for ``n_out > 1``)."""
        outputs = [self.name(f'{hint}/{op_type}') for _ in range(n_out)]
        self.nodes.append(
            self.helper.make_node(
                op_type, inputs, outputs, name=self.name(hint), **attrs
            )
        )
        return outputs[0] if n_out == 1 else outputs

    def subgraph(self, hint: str, build) -> Any:
        """The graph (a branch of ``If``) of the nodes ``build()`` adds.

        Its output is the tensor ``build()`` returns, a float32 of any
        shape; its nodes read this graph's tensors by name.
        """
        nodes, self.nodes = self.nodes, []
        try:
            out = build()
            body = self.nodes
        finally:
            self.nodes = nodes
        result = self.name(f'{hint}/result')
        body.append(self.helper.make_node('Identity', [out], [result]))
        return self.helper.make_graph(
            body,
            self.name(hint),
            [],
            [self.helper.make_tensor_value_info(result, self.float_type, None)],
        )

    def activation(self, x: str, activation: str, hint: str) -> str:
        """``activation(x)`` element by element."""
        if activation == 'gelu':
            return self.gelu(x, hint)
        spec = _ACTIVATION_OPS[activation]
        if spec is None:
            return x
        op_type, attrs = spec
        return self.op(op_type, [x], hint, **attrs)

    def gelu(self, x: str, hint: str) -> str:
        """The GELU of ``x`` as brainstorm computes it (the tanh approximation)."""
        cube = self.op('Mul', [self.op('Mul', [x, x], hint), x], hint)
        inner = self.op(
            'Add',
            [x, self.op('Mul', [cube, self.const(hint, _GELU_CUBIC)], hint)],
            hint,
        )
        t = self.op(
            'Tanh',
            [self.op('Mul', [inner, self.const(hint, _SQRT_2_OVER_PI)], hint)],
            hint,
        )
        half = self.op('Mul', [x, self.const(hint, 0.5)], hint)
        return self.op(
            'Mul', [half, self.op('Add', [t, self.const(hint, 1.0)], hint)], hint
        )

    def rows(self, x: str, n_features: int, hint: str) -> str:
        """``x`` as ``(T * B, n_features)``."""
        return self.op(
            'Reshape', [x, self.const(hint, [-1, n_features], np.int64)], hint
        )

    def time_major(self, x: str, feature_shape, hint: str) -> str:
        """Rows ``(T * B, ...)`` back to ``(T, B, *feature_shape)``."""
        features = self.const(hint, list(feature_shape), np.int64)
        shape = self.op('Concat', [self.time_batch, features], hint, axis=0)
        # allowzero: T = 0 or B = 0 is that size, not "copy the input's"
        return self.op('Reshape', [x, shape], hint, allowzero=1)


def _param(net, layer_name: str, name: str) -> np.ndarray:
    """A parameter in float32, the dtype of the model's parameters.

    Raises:
        NetworkValidationError: naming the parameter, if a value of it is
            not finite in float32 (NaN, inf, or a float64 value beyond the
            float32 range, which the cast would make inf).
    """
    path = f'{layer_name}.parameters.{name}'
    value = np.asarray(net.get(path))
    found = find_unrepresentable(value, np.float32)
    if found is not None:
        index, bad, what = found
        raise NetworkValidationError(
            f"export_onnx: parameter '{path}' holds {what} at index {index}: "
            f'{bad!r}. The ONNX model holds its parameters in float32, where '
            'this value is not finite, so the model would compute inf or NaN. '
            'Expected: values finite in float32; set the parameter within '
            'the float32 range first (no file was written).'
        )
    return value.astype(np.float32)


# ---------------------------------------------------------- the layers ---
# Each converter gets the graph, the network, the layer and its inputs
# (input name -> tensor name) and returns output name -> tensor name.


def _fully_connected(g: _Graph, net, layer, x: dict) -> dict:
    hint = layer.name
    W, bias = _param(net, hint, 'W'), _param(net, hint, 'bias')
    rows = g.rows(x['default'], W.shape[1], hint)
    y = g.op('Gemm', [rows, g.const(hint, W), g.const(hint, bias)], hint, transB=1)
    y = g.activation(y, layer.activation, hint)
    return {'default': g.time_major(y, layer.out_shapes['default'].feature_shape, hint)}


def _elementwise(g: _Graph, net, layer, x: dict) -> dict:
    return {'default': g.activation(x['default'], layer.activation, layer.name)}


def _identity(g: _Graph, net, layer, x: dict) -> dict:
    return {'default': g.op('Identity', [x['default']], layer.name)}


def _images(g: _Graph, x: str, layer, hint: str) -> str:
    """``(T, B, H, W, C)`` -> ``(T * B, C, H, W)`` for the ONNX image ops."""
    h, w, c = layer.in_shapes['default'].feature_shape
    rows = g.op('Reshape', [x, g.const(hint, [-1, h, w, c], np.int64)], hint)
    return g.op('Transpose', [rows], hint, perm=[0, 3, 1, 2])


def _from_images(g: _Graph, y: str, layer, hint: str) -> str:
    """``(T * B, C, H, W)`` -> the layer's output ``(T, B, H, W, C)``."""
    nhwc = g.op('Transpose', [y], hint, perm=[0, 2, 3, 1])
    return g.time_major(nhwc, layer.out_shapes['default'].feature_shape, hint)


def _pads(layer) -> list:
    """ONNX's ``pads`` (begins, then ends) of the layer's ``padding``."""
    top, bottom, left, right = padding_sides(layer.padding)
    return [top, left, bottom, right]


def _convolution_2d(g: _Graph, net, layer, x: dict) -> dict:
    hint = layer.name
    # brainstorm keeps W as (filters, kh, kw, channels); ONNX wants OIHW
    W = _param(net, hint, 'W').transpose(0, 3, 1, 2)
    bias = _param(net, hint, 'bias')
    y = g.op(
        'Conv',
        [_images(g, x['default'], layer, hint), g.const(hint, W), g.const(hint, bias)],
        hint,
        kernel_shape=list(layer.kernel_size),
        strides=list(layer.stride),
        pads=_pads(layer),
    )
    y = g.activation(y, layer.activation, hint)
    return {'default': _from_images(g, y, layer, hint)}


def _pooling_2d(g: _Graph, net, layer, x: dict) -> dict:
    hint = layer.name
    attrs: dict[str, Any] = {
        'kernel_shape': list(layer.kernel_size),
        'strides': list(layer.stride),
        'pads': _pads(layer),
    }
    if layer.type == 'max':
        op_type = 'MaxPool'
    else:
        # brainstorm averages over the cells inside the image only
        op_type = 'AveragePool'
        attrs['count_include_pad'] = 0
    y = g.op(op_type, [_images(g, x['default'], layer, hint)], hint, **attrs)
    return {'default': _from_images(g, y, layer, hint)}


def _batch_norm(g: _Graph, net, layer, x: dict) -> dict:
    # the inference pass: (x - mu) / sigma * gamma + beta per channel (the
    # last axis), sigma being the running sqrt(variance + epsilon)
    hint = layer.name
    centered = g.op('Sub', [x['default'], g.const(hint, _param(net, hint, 'mu'))], hint)
    x_hat = g.op('Div', [centered, g.const(hint, _param(net, hint, 'sigma'))], hint)
    y = g.op('Mul', [x_hat, g.const(hint, _param(net, hint, 'gamma'))], hint)
    return {'default': g.op('Add', [y, g.const(hint, _param(net, hint, 'beta'))], hint)}


def _merge(g: _Graph, net, layer, x: dict) -> dict:
    return {
        'default': g.op('Concat', [x['inputs_1'], x['inputs_2']], layer.name, axis=-1)
    }


def _recurrent_activation(layer) -> tuple[list, dict]:
    """The ONNX activation names and attributes of the cell activation."""
    act, alpha, beta = _RNN_ACTIVATIONS[layer.activation]
    attrs = {}
    if alpha is not None:
        attrs['activation_alpha'] = [alpha]
    if beta is not None:
        attrs['activation_beta'] = [beta]
    return [act], attrs


def _sequence(g: _Graph, x: str, layer, hint: str) -> str:
    """``(T, B, ...)`` as ``(T, B, features)``, the layout of ONNX RNN/LSTM."""
    # the feature count written out (no -1, which an empty batch or
    # sequence leaves undetermined) and allowzero for T = 0 or B = 0
    n_features = int(np.prod(layer.in_shapes['default'].feature_shape))
    time_batch = g.op('Shape', [x], hint, start=0, end=2)
    shape = g.op(
        'Concat',
        [time_batch, g.const(hint, [n_features], np.int64)],
        hint,
        axis=0,
    )
    return g.op('Reshape', [x, shape], hint, allowzero=1)


def _direction(g: _Graph, layer, x: dict, hint: str) -> tuple[str, dict]:
    """The ``sequence_lens`` input and the ``direction`` of an ONNX RNN/LSTM.

    A reverse layer runs each sequence backwards within its length, which
    its ``mask`` gives (1 up to the length, then 0); ONNX's ``reverse``
    direction does the same within ``sequence_lens``, the mask's sums over
    time. Without a mask every sequence is the whole time axis (no
    ``sequence_lens``). A forward layer takes no mask.
    """
    if not getattr(layer, 'reverse', False):
        return '', {}
    if 'mask' not in x:
        return '', {'direction': 'reverse'}
    lengths = g.op(
        'ReduceSum', [x['mask'], g.const(hint, [0, 2], np.int64)], hint, keepdims=0
    )
    return g.op('Cast', [lengths], hint, to=6), {'direction': 'reverse'}  # int32


def _one_direction(g: _Graph, y: str, hint: str) -> str:
    """Drop the direction axis of ``Y (T, 1, B, size)``."""
    return g.op('Squeeze', [y, g.const(hint, [1], np.int64)], hint)


def _recurrent(g: _Graph, net, layer, x: dict) -> dict:
    hint = layer.name
    W, R = _param(net, hint, 'W'), _param(net, hint, 'R')
    bias = _param(net, hint, 'bias')
    size = layer.size
    # ONNX adds an input and a recurrent bias: the second is zero
    B = np.concatenate([bias, np.zeros(size, np.float32)])[None]
    activations, alpha_beta = _recurrent_activation(layer)
    lengths, direction = _direction(g, layer, x, hint)
    y = g.op(
        'RNN',
        [
            _sequence(g, x['default'], layer, hint),
            g.const(hint, W[None]),
            g.const(hint, R[None]),
            g.const(hint, B),
            lengths,
        ],
        hint,
        hidden_size=size,
        activations=activations,
        **alpha_beta,
        **direction,
    )
    return {'default': _one_direction(g, y, hint)}


def _lstm(g: _Graph, net, layer, x: dict) -> dict:
    # brainstorm's gates z (cell input), i, f, o against ONNX's order
    # i, o, f, c (c = z) for W, R and B, and i, o, f for the peepholes P.
    # The equations agree: ONNX's f, g, h are sigmoid and brainstorm's
    # activation twice, the output gate's peephole sees the new cell state.
    hint = layer.name
    size = layer.size

    def gates(kind: str, order: str) -> np.ndarray:
        return np.concatenate([_param(net, hint, kind + gate) for gate in order])

    W = gates('W', 'iofz')
    R = gates('R', 'iofz')
    B = np.concatenate([gates('b', 'iofz'), np.zeros(4 * size, np.float32)])
    P = np.concatenate([_param(net, hint, 'p' + gate)[0] for gate in 'iof'])
    act, alpha, beta = _RNN_ACTIVATIONS[layer.activation]
    attrs: dict[str, Any] = {'activations': ['Sigmoid', act, act]}
    # one value for each of the three functions: runtimes differ in
    # whether the Sigmoid, which takes none, consumes one of the list
    if alpha is not None:
        attrs['activation_alpha'] = [alpha, alpha, alpha]
    if beta is not None:
        attrs['activation_beta'] = [beta, beta, beta]
    lengths, direction = _direction(g, layer, x, hint)
    # inputs: X, W, R, B, sequence_lens (none: all steps), initial_h,
    # initial_c (none: zero, as brainstorm's context), P
    sequence = _sequence(g, x['default'], layer, hint)
    inputs = [
        sequence,
        g.const(hint, W[None]),
        g.const(hint, R[None]),
        g.const(hint, B[None]),
        lengths,
        '',
        '',
        g.const(hint, P[None]),
    ]
    # onnxruntime's LSTM aborts the process on an empty batch (B = 0):
    # then the model gives the empty output without running it
    shape = g.op('Shape', [sequence], hint)
    batch = g.op('Gather', [shape, g.const(hint, 1, np.int64)], hint, axis=0)
    empty = g.op('Equal', [batch, g.const(hint, 0, np.int64)], hint)
    zeros_shape = g.op(
        'Concat',
        [
            g.op(
                'Slice',
                [shape, g.const(hint, [0], np.int64), g.const(hint, [1], np.int64)],
                hint,
            ),
            g.const(hint, [1, 0, size], np.int64),
        ],
        hint,
        axis=0,
    )
    y_empty = g.subgraph(
        hint,
        lambda: g.op('ConstantOfShape', [zeros_shape], hint),
    )
    y_run = g.subgraph(
        hint,
        lambda: g.op('LSTM', inputs, hint, hidden_size=size, **attrs, **direction),
    )
    y = g.op('If', [empty], hint, then_branch=y_empty, else_branch=y_run)
    return {'default': _one_direction(g, y, hint)}


def _output(op_type: str | None, **attrs):
    """A converter for an output layer: its ``predictions`` only."""

    def convert(g: _Graph, net, layer, x: dict) -> dict:
        if op_type is None:
            return {'predictions': g.op('Identity', [x['default']], layer.name)}
        return {'predictions': g.op(op_type, [x['default']], layer.name, **attrs)}

    return convert


#: Layer type -> converter. Output layers give their ``predictions`` (not
#: ``loss``, which needs the targets).
_CONVERTERS = {
    'FullyConnected': _fully_connected,
    'Elementwise': _elementwise,
    'Convolution2D': _convolution_2d,
    'Pooling2D': _pooling_2d,
    'BatchNorm': _batch_norm,
    'Dropout': _identity,
    'NoOp': _identity,
    'Merge': _merge,
    'Recurrent': _recurrent,
    'Lstm': _lstm,
    'SoftmaxCE': _output('Softmax', axis=-1),
    'SigmoidCE': _output('Sigmoid'),
    'SquaredError': _output(None),
}

#: Layer type -> the inputs its converter reads (default: all of them).
_USED_INPUTS = {
    'SoftmaxCE': ('default',),
    'SigmoidCE': ('default',),
    'SquaredError': ('default',),
}

#: The layer types :func:`export_onnx` can export.
EXPORTABLE_LAYERS = tuple(sorted(_CONVERTERS))


def _default_outputs(net) -> list:
    """The ``predictions`` of every output layer, or ``net.output_name``."""
    paths = [
        f'{name}.outputs.predictions'
        for name, layer in net.layers.items()
        if 'predictions' in layer.out_shapes
    ]
    if not paths and net.output_name:
        paths = [net.output_name]
    if not paths:
        raise NetworkValidationError(
            'export_onnx: the network has no output layer with predictions '
            '(SoftmaxCE, SigmoidCE, SquaredError); name the outputs to '
            "export, e.g. outputs=['Hidden.outputs.default']."
        )
    return paths


def _all_output_paths(net) -> list:
    return [
        f'{name}.outputs.{out}'
        for name, layer in net.layers.items()
        if name != 'Input'
        for out in layer.out_shapes
    ]


def _parse_output(net, path) -> tuple[str, str]:
    """``'Layer.outputs.name'`` -> ``(layer, name)``, checked."""
    parts = path.split('.') if isinstance(path, str) else []
    if (
        len(parts) != 3
        or parts[1] != 'outputs'
        or parts[0] not in net.layers
        or parts[2] not in net.layers[parts[0]].out_shapes
    ):
        raise NetworkValidationError(
            f'export_onnx: outputs must be buffer paths of layer outputs. '
            f'Received: {path!r}. The network has: {_all_output_paths(net)}'
        )
    return parts[0], parts[2]


def _builtin_classes() -> dict:
    """Layer type -> brainstorm's own implementation class of that type.

    The converters reproduce these classes' computations; a class of the
    same type name defined elsewhere (the registry keeps the last one
    defined) computes something else, as may a subclass.
    """
    classes = (
        BatchNormLayerImpl,
        Convolution2DLayerImpl,
        DropoutLayerImpl,
        ElementwiseLayerImpl,
        FullyConnectedLayerImpl,
        InputLayerImpl,
        LstmLayerImpl,
        MergeLayerImpl,
        NoOpLayerImpl,
        Pooling2DLayerImpl,
        RecurrentLayerImpl,
        SigmoidCELayerImpl,
        SoftmaxCELayerImpl,
        SquaredErrorLayerImpl,
    )
    return {cls.get_type_name(): cls for cls in classes}


def _check_class(layer) -> None:
    """Refuse a layer whose class is not brainstorm's own class of its type."""
    builtin = _builtin_classes().get(layer.layer_type)
    if type(layer) is not builtin:
        expected = (
            f"brainstorm's {qualified_name(builtin)}"
            if builtin is not None
            else "brainstorm's own layer classes"
        )
        raise NetworkValidationError(
            f"export_onnx: layer '{layer.name}' of type {layer.layer_type} is "
            f'an instance of {qualified_name(type(layer))}, not of '
            f"{expected}. export_onnx exports brainstorm's own layer "
            'classes only (exactly, no subclasses): it cannot know what '
            'another class computes. Export the outputs before it with '
            "outputs=['Layer.outputs.default'], or leave it out of the net."
        )


def _unsupported(layer, why: str = '') -> NetworkValidationError:
    return NetworkValidationError(
        f"export_onnx: layer '{layer.name}' of type {layer.layer_type} has no "
        f'ONNX equivalent{why}. Exportable layer types: '
        f'{", ".join(EXPORTABLE_LAYERS)}. Export the outputs before it '
        "with outputs=['Layer.outputs.default'], or leave it out of the net."
    )


def _incoming(layer) -> list:
    """The connections into ``layer`` that its export reads."""
    used = _USED_INPUTS.get(layer.layer_type)
    return [c for c in layer.incoming if used is None or c.input_name in used]


def _needed_layers(net, outputs: list) -> list:
    """The layers the outputs depend on, in the network's order."""
    needed: set = set()
    todo = [layer_name for layer_name, _ in outputs]
    while todo:
        name = todo.pop()
        if name in needed:
            continue
        needed.add(name)
        todo.extend(c.start_layer for c in _incoming(net.layers[name]))
    return [name for name in net.layers if name in needed]


def _check_exportable(net, order: list, outputs: list) -> None:
    for name in order:
        layer = net.layers[name]
        if name == 'Input':
            _check_class(layer)
            continue
        if layer.layer_type not in _CONVERTERS:
            raise _unsupported(layer)
        _check_class(layer)
        if layer.layer_type == 'Pooling2D':
            _check_pooling_padding(layer)
        _check_activation(layer)
        for c in _incoming(layer):
            start = net.layers[c.start_layer]
            if c.output_name not in start.out_shapes:
                raise _unsupported(
                    layer,
                    f' for its input {c.input_name!r} fed from '
                    f"'{c.start_layer}.{c.output_name}'",
                )
    for name, out in outputs:
        layer = net.layers[name]
        if layer.layer_type in ('SoftmaxCE', 'SigmoidCE', 'SquaredError') and (
            out != 'predictions'
        ):
            raise NetworkValidationError(
                f"export_onnx: the output '{name}.outputs.{out}' needs the "
                'targets; only the predictions of an output layer are '
                f"exported ('{name}.outputs.predictions')."
            )


def _check_activation(layer) -> None:
    """Refuse an activation the layer's ONNX equivalent cannot compute."""
    activation = getattr(layer, 'activation', None)
    if activation is None:
        return
    known: set[str]
    if layer.layer_type in ('Recurrent', 'Lstm'):
        known, why = set(_RNN_ACTIVATIONS), _NO_RNN_ACTIVATION.get(activation)
    else:
        known, why = {*_ACTIVATION_OPS, 'gelu'}, None
    if activation not in known:
        why = why or 'ONNX has no equivalent here'
        raise NetworkValidationError(
            f"export_onnx: layer '{layer.name}' ({layer.layer_type}) uses the "
            f"activation '{activation}': {why}. Exportable activations of "
            f'{layer.layer_type}: {sorted(known)}.'
        )


def _check_pooling_padding(layer) -> None:
    """ONNX's pooling takes padding smaller than the window on each side."""
    top, bottom, left, right = padding_sides(layer.padding)
    kh, kw = layer.kernel_size
    if max(top, bottom) >= kh or max(left, right) >= kw:
        raise NetworkValidationError(
            f"export_onnx: layer '{layer.name}' (Pooling2D) pads "
            f'(top, bottom, left, right) = {(top, bottom, left, right)} cells '
            f'around windows of {kh}x{kw}; ONNX pooling takes less padding '
            'than the window on every side (onnxruntime refuses the model). '
            'Export the outputs before it, or use less padding.'
        )


def _value_info(helper, TensorProto, name: str, structure) -> Any:
    """A float32 graph input or output of the buffer's layout.

    Its shape is ``('T', 'B', *features)`` or ``('B', *features)``, with
    ``'T'`` and ``'B'`` free.
    """
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(structure.shape))


def _build_graph(onnx, net, outputs: list):
    """The ONNX graph of the network's layers that ``outputs`` need."""
    from onnx import TensorProto, helper, numpy_helper

    order = _needed_layers(net, outputs)
    _check_exportable(net, order, outputs)
    g = _Graph(helper, numpy_helper, TensorProto.FLOAT)
    tensors: dict = {}  # (layer, output) -> tensor name
    graph_inputs = []
    input_layer = net.layers['Input']
    used_inputs = OrderedDict()
    for name in order:
        for c in _incoming(net.layers[name]):
            if c.start_layer == 'Input':
                used_inputs[c.output_name] = True
    # an output of the Input layer itself (the data passed through)
    used_inputs.update((out, True) for name, out in outputs if name == 'Input')
    for in_name in used_inputs:
        structure = input_layer.out_shapes[in_name]
        graph_inputs.append(_value_info(helper, TensorProto, in_name, structure))
        tensors['Input', in_name] = in_name
    if not graph_inputs:
        raise NetworkValidationError(
            'export_onnx: the outputs do not depend on any input data.'
        )
    # (T, B) from an input of layout (T, B, ...): the layers that need it
    # take only such inputs (those of layout (B, ...) reach Merge only)
    timed = [
        name for name in used_inputs if input_layer.out_shapes[name].buffer_type == 2
    ]
    if timed:
        g.time_batch = g.op('Shape', [timed[0]], 'Input', start=0, end=2)
    for name in order:
        if name == 'Input':
            continue
        layer = net.layers[name]
        inputs = {
            c.input_name: tensors[c.start_layer, c.output_name]
            for c in _incoming(layer)
        }
        for out, tensor in _CONVERTERS[layer.layer_type](g, net, layer, inputs).items():
            tensors[name, out] = tensor
    graph_outputs = []
    for name, out in outputs:
        path = f'{name}.outputs.{out}'
        g.nodes.append(
            helper.make_node('Identity', [tensors[name, out]], [path], name=path)
        )
        structure = net.layers[name].out_shapes[out]
        graph_outputs.append(_value_info(helper, TensorProto, path, structure))
    _check_size(g)
    return helper.make_graph(
        g.nodes, 'brainstorm', graph_inputs, graph_outputs, g.initializers
    )


def _check_size(g: _Graph) -> None:
    """Refuse a model over protobuf's 2 GB (it cannot be written).

    Before protobuf fails on it with a bare ``EncodeError``: the
    parameters, which make up nearly all of the model, and the nodes.
    """
    size = sum(g.nbytes.values()) + sum(node.ByteSize() for node in g.nodes)
    if size > _PROTOBUF_LIMIT:
        largest = sorted(g.nbytes.items(), key=lambda item: -item[1])[:3]
        layers = ', '.join(f"'{name}' {n} bytes" for name, n in largest)
        raise NetworkValidationError(
            f'export_onnx: the model would take {size} bytes '
            f'({size / 2**30:.2f} GiB), over the 2 GB limit of protobuf, '
            f'the format of ONNX files ({_PROTOBUF_LIMIT} bytes at most): '
            f'it cannot be written. Largest layers: {layers}. Export '
            'fewer layers with outputs=[...], or make the network smaller.'
        )


def export_onnx(net, path, outputs=None, check: bool = True) -> None:
    """Write the network's inference computation as an ONNX model.

    The model takes the network's data inputs by their names in the
    ``Input`` layer (e.g. ``'default'``) and returns the requested outputs
    under their buffer paths (e.g. ``'Output.outputs.predictions'``).
    Every input and output keeps brainstorm's layout ``(T, B, *features)``,
    images ``(T, B, height, width, channels)``, or ``(B, *features)`` where
    the network declares it so (e.g. ``Input({'a': ('B', 3)})``), in
    float32, with the time and batch sizes ``'T'`` and ``'B'`` free (0
    included): give it the arrays you would give
    :meth:`~brainstorm.structure.network.Network.provide_external_data`.
    It returns what :meth:`~brainstorm.structure.network.Network.get`
    gives after the forward pass, except that the outputs of recurrent
    layers (``Lstm``, ``Recurrent``) have ``T`` rows: ``get`` gives ``T +
    1``, the last being the context slot.
    It computes ``net.forward_pass(training_pass=False)`` from a zero
    context: BatchNorm with its running statistics, Dropout as the
    identity, output layers' ``predictions`` (softmax, sigmoid or the
    input), never their loss. Written with :data:`ONNX_OPSET` (17).

    A reverse ``Lstm`` or ``Recurrent`` becomes an ONNX layer of direction
    ``'reverse'``; with its ``mask`` connected, the model takes the mask as
    an input and passes its sums over time as ``sequence_lens``. The
    outputs agree with brainstorm's within each sequence's length; after
    it ONNX gives zeros, where brainstorm's outputs are padding anyway.

    Exportable layer types: :data:`EXPORTABLE_LAYERS` (FullyConnected,
    Elementwise, Convolution2D, Pooling2D, BatchNorm, Dropout, NoOp, Merge,
    Recurrent, Lstm, SoftmaxCE, SigmoidCE, SquaredError), of brainstorm's
    own classes only: a layer of another class, even one with a built-in
    type name (a user's ``NoOpLayerImpl``, a subclass), is refused, as its
    computation is unknown. Lstm becomes an
    ONNX ``LSTM`` with peepholes, Recurrent an ONNX ``RNN``. Only the layers
    the outputs depend on are exported (the loss layers and targets are
    left out).

    Needs the ``onnx`` extra: ``pip install 'brainstorm-nn[onnx]'``
    (running the model needs e.g. ``onnxruntime``).

    Args:
        net: the :class:`~brainstorm.structure.network.Network` to export
            (its current parameters, on any handler).
        path: the file to write (``str`` or path-like).
        outputs: buffer paths of the outputs to export, e.g.
            ``['Output.outputs.predictions']`` or
            ``['Hidden.outputs.default']``; default: the ``predictions`` of
            every output layer.
        check: run ``onnx.checker`` on the model before writing it.

    Raises:
        ImportError: if onnx is not installed, with the install command.
        NetworkValidationError: for a layer without an ONNX equivalent
            (naming it and its type) or of a class other than brainstorm's
            own of its type, an unknown output path or one named twice,
            the loss of an output layer, pooling padded by as much as its
            window, a parameter not finite in float32 (NaN, inf, or beyond
            the float32 range; naming it), or a model over protobuf's 2 GB
            limit (naming its size; the existing file is kept).
        UninitializedNetworkError: if the network's parameters were never
            set (:meth:`~brainstorm.structure.network.Network.initialize`).

    Example:
        >>> import brainstorm as bs
        >>> inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
        >>> net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
        >>> net.initialize(bs.initializers.Gaussian(0.1))
        >>> bs.tools.export_onnx(net, 'net.onnx')  # doctest: +SKIP
    """
    onnx = optional.import_optional('onnx', 'export_onnx')
    if outputs is None:
        outputs = _default_outputs(net)
    elif isinstance(outputs, str):
        outputs = [outputs]
    else:
        outputs = list(outputs)
    parsed = [_parse_output(net, p) for p in outputs]
    if not parsed:
        raise NetworkValidationError(
            'export_onnx: outputs must name at least one output. Received: []'
        )
    twice = sorted({p for p in outputs if outputs.count(p) > 1})
    if twice:
        raise NetworkValidationError(
            f'export_onnx: outputs names {twice} more than once; each '
            f'output of the model is named once. Received: {list(outputs)}'
        )
    path = as_file_name(path, 'export_onnx', NetworkValidationError)
    graph = _build_graph(onnx, net, parsed)
    # after the layer checks: a layer that cannot be exported is named
    # first, initialised or not
    check_parameters_set(net)
    model = onnx.helper.make_model(
        graph,
        producer_name='brainstorm',
        opset_imports=[onnx.helper.make_opsetid('', ONNX_OPSET)],
    )
    # readers as old as the opset: the IR version of ONNX 1.12
    model.ir_version = 8
    if check:
        onnx.checker.check_model(model)
    data = model.SerializeToString()

    def write(tmp):
        with open(tmp, 'wb') as f:
            f.write(data)

    # as every file brainstorm writes: a failed write leaves the old file
    write_atomically(path, write)
