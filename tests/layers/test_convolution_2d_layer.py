"""Convolution2D: forward pass against explicit loops, defaults, validation."""

import numpy as np
import pytest

from brainstorm.errors import FeatureJoinWarning
from brainstorm.handlers import DebugHandler, NumpyHandler, _numpy_conv
from brainstorm.handlers.base_handler import Handler
from brainstorm.initializers import Gaussian
from brainstorm.layers import Convolution2D, Input, Loss, Pooling2D
from brainstorm.layers.convolution_2d_layer import Convolution2DLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import (
    instantiate_layer,
    run_layer_tests,
    set_up_layer,
)
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_conv import LAYER_SPECS as CONV_SPECS

ACTIVATIONS = {
    'linear': lambda a: a,
    'rel': lambda a: np.maximum(a, 0),
    'tanh': np.tanh,
}


def conv_reference(x, W, bias, padding, stride):
    """Slow cross-correlation of (N, H, W, C) images with explicit loops."""
    n, height, width, channels = x.shape
    nf, kh, kw, _ = W.shape
    sy, sx = stride
    oh = (height + 2 * padding - kh) // sy + 1
    ow = (width + 2 * padding - kw) // sx + 1
    y = np.zeros((n, oh, ow, nf))
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for f in range(nf):
                    total = bias[f]
                    for u in range(kh):
                        for v in range(kw):
                            row = i * sy + u - padding
                            col = j * sx + v - padding
                            if 0 <= row < height and 0 <= col < width:
                                total += np.dot(W[f, u, v], x[b, row, col])
                    y[b, i, j, f] = total
    return y


@pytest.mark.parametrize(
    'image, kwargs',
    [
        ((4, 5, 2), {'num_filters': 3, 'kernel_size': (2, 3)}),
        (
            (5, 4, 2),
            {'num_filters': 2, 'kernel_size': (2, 3), 'padding': 1, 'stride': (2, 1)},
        ),
        (
            (6, 7, 3),
            {'num_filters': 4, 'kernel_size': (3, 3), 'padding': 2, 'stride': (2, 3)},
        ),
        ((3, 3, 1), {'num_filters': 1, 'kernel_size': (1, 1)}),
    ],
)
@pytest.mark.parametrize('activation', ['linear', 'rel', 'tanh'])
def test_forward_matches_explicit_loops(image, kwargs, activation):
    layer = instantiate_layer(
        Convolution2DLayerImpl, {'default': image}, activation=activation, **kwargs
    )
    T, B = 2, 3
    buffers, _ = set_up_layer(layer, {'time_steps': T, 'batch_size': B, 'seed': 5})
    h = layer.handler
    layer.forward_pass(buffers, training_pass=False)

    x = h.get_numpy_copy(buffers.inputs.default)
    W = h.get_numpy_copy(buffers.parameters.W)
    bias = h.get_numpy_copy(buffers.parameters.bias)
    expected = conv_reference(
        x.reshape((T * B,) + image),
        W,
        bias,
        kwargs.get('padding', 0),
        kwargs.get('stride', (1, 1)),
    )
    expected = ACTIVATIONS[activation](expected)
    y = h.get_numpy_copy(buffers.outputs.default)
    assert y.shape == (T, B) + expected.shape[1:]
    np.testing.assert_allclose(
        y.reshape(expected.shape), expected, rtol=1e-10, atol=1e-12
    )


def test_shapes_follow_the_spec():
    layer = instantiate_layer(
        Convolution2DLayerImpl,
        {'default': (7, 9, 3)},
        num_filters=5,
        kernel_size=(3, 2),
        padding=1,
        stride=(2, 3),
    )
    # OH = (7 + 2 - 3)//2 + 1 = 4, OW = (9 + 2 - 2)//3 + 1 = 4
    assert layer.get_shape('outputs.default') == ('T', 'B', 4, 4, 5)
    assert list(layer.parameter_shapes) == ['W', 'bias']
    assert layer.get_shape('parameters.W') == (5, 3, 2, 3)
    assert layer.get_shape('parameters.bias') == (5,)
    assert layer.internal_shapes == {}


def test_default_activation_is_rel_from_constructor_and_architecture():
    """Fixes the 0.5 bug where an architecture without 'activation' gave
    'tanh' although the constructor default is 'rel'."""
    inp = Input({'default': ('T', 'B', 4, 4, 1)})
    net = Network.from_layer(inp >> Convolution2D(2, (3, 3), name='Conv'))
    assert net.layers['Conv'].activation == 'rel'

    architecture = {
        'Input': {
            '@type': 'Input',
            'out_shapes': {'default': ['T', 'B', 4, 4, 1]},
            '@outgoing_connections': {'default': ['Conv']},
        },
        'Conv': {
            '@type': 'Convolution2D',
            'num_filters': 2,
            'kernel_size': [3, 3],
            '@outgoing_connections': {},
        },
    }
    net = Network.from_architecture(architecture)
    assert net.layers['Conv'].activation == 'rel'
    # and it computes with rel: a large negative bias gives zeros
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(1.0)
    net.buffer.Conv.parameters.bias[:] = -50.0
    net.provide_external_data({'default': np.ones((1, 2, 4, 4, 1))})
    net.forward_pass()
    assert np.all(net.get('Conv.outputs.default') == 0.0)


def test_kernel_larger_than_padded_input_is_rejected():
    with pytest.raises(
        LayerValidationError,
        match=r"Convolution2D 'Conv1': kernel_size \(7, 7\) is "
        r'larger than the padded input \(5, 5\)',
    ):
        instantiate_layer(
            Convolution2DLayerImpl,
            {'default': (5, 5, 1)},
            name='Conv1',
            num_filters=2,
            kernel_size=(7, 7),
        )
    # the same kernel fits with enough padding
    layer = instantiate_layer(
        Convolution2DLayerImpl,
        {'default': (5, 5, 1)},
        num_filters=2,
        kernel_size=(7, 7),
        padding=1,
    )
    assert layer.get_shape('outputs.default') == ('T', 'B', 1, 1, 2)


@pytest.mark.parametrize('features', [(5,), (5, 5), (2, 5, 5, 1)])
def test_input_must_have_three_feature_dims(features):
    with pytest.raises(
        LayerValidationError,
        match=r"Convolution2D 'Convolution2D': input default "
        r'must be images .*3 feature dimensions',
    ):
        instantiate_layer(
            Convolution2DLayerImpl,
            {'default': features},
            num_filters=2,
            kernel_size=(1, 1),
        )


@pytest.mark.parametrize(
    'kwargs, message',
    [
        (
            {'num_filters': 0, 'kernel_size': (2, 2)},
            'num_filters must be a positive int',
        ),
        ({'num_filters': 2.0, 'kernel_size': (2, 2)}, 'num_filters must be'),
        ({'num_filters': 2, 'kernel_size': (2, 0)}, 'kernel_size must be a pair'),
        ({'num_filters': 2, 'kernel_size': 2}, 'kernel_size must be a pair'),
        (
            {'num_filters': 2, 'kernel_size': (2, 2), 'stride': (1,)},
            'stride must be a pair',
        ),
        (
            {'num_filters': 2, 'kernel_size': (2, 2), 'padding': -1},
            'padding must be an int >= 0',
        ),
        (
            {'num_filters': 2, 'kernel_size': (2, 2), 'activation': 'swish'},
            'activation must be one of',
        ),
        ({'num_filters': 2, 'kernel_size': (2, 2), 'size': 3}, 'unexpected argument'),
        ({'kernel_size': (2, 2)}, 'num_filters is required'),
    ],
)
def test_bad_arguments_raise_layer_validation_errors(kwargs, message):
    with pytest.raises(LayerValidationError, match=message):
        instantiate_layer(Convolution2DLayerImpl, {'default': (4, 4, 1)}, **kwargs)


def test_bad_arguments_are_rejected_by_the_constructor():
    with pytest.raises(LayerValidationError, match='padding'):
        Convolution2D(2, (3, 3), padding=-2)


def test_lists_are_accepted_for_pairs():
    layer = instantiate_layer(
        Convolution2DLayerImpl,
        {'default': (4, 4, 1)},
        num_filters=1,
        kernel_size=[2, 2],
        stride=[2, 2],
    )
    assert layer.kernel_size == (2, 2) and layer.stride == (2, 2)
    assert layer.get_shape('outputs.default') == ('T', 'B', 2, 2, 1)


def test_works_on_non_contiguous_feature_slices_in_a_network():
    """In a network, an image that a second layer's input concatenates with
    another output is a feature slice of their shared block; results must
    still match the reference."""
    inp = Input({'default': ('T', 'B', 3, 4, 2), 'extra': ('T', 'B', 3, 4, 1)})
    inp >> Convolution2D(
        2, (2, 2), padding=1, stride=(1, 2), activation='linear', name='Conv'
    )
    side = Pooling2D((2, 2), name='Side')
    inp >> side
    inp - 'extra' >> side
    with pytest.warns(FeatureJoinWarning):  # Side's input, not tested here
        net = Network.from_layer(inp)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(1.0), seed=3)
    rnd = np.random.RandomState(0)
    x = rnd.randn(2, 3, 3, 4, 2)
    net.provide_external_data({'default': x, 'extra': rnd.randn(2, 3, 3, 4, 1)})
    assert not net.buffer.Conv.inputs.default.flags.c_contiguous
    net.forward_pass()
    expected = conv_reference(
        x.reshape(6, 3, 4, 2),
        net.get('Conv.parameters.W'),
        net.get('Conv.parameters.bias'),
        1,
        (1, 2),
    )
    np.testing.assert_allclose(
        net.get('Conv.outputs.default'),
        expected.reshape(2, 3, *expected.shape[1:]),
        rtol=1e-10,
        atol=1e-12,
    )


@pytest.mark.parametrize('channels', [3, 9])  # both input-delta code paths
@pytest.mark.parametrize('handler', ['numpy', 'debug', 'old-signature'])
def test_backward_without_input_deltas_keeps_gradients(channels, handler):
    """Steppers skip the deltas of the data: Convolution2D then computes no
    input deltas (also when the handler predates the skip_in_deltas
    keyword, which then just computes them)."""
    inp = Input({'default': ('T', 'B', 6, 5, channels)})
    net = Network.from_layer(
        inp
        >> Convolution2D(4, (3, 3), padding=1, activation='tanh', name='Conv')
        >> Convolution2D(3, (2, 2), name='Top')
        >> Loss(name='Loss')
    )
    net.set_handler(HANDLERS[handler]())
    net.initialize(Gaussian(0.5), seed=1)
    x = np.random.RandomState(2).randn(2, 3, 6, 5, channels)
    net.provide_external_data({'default': x})
    net.forward_pass(training_pass=True)
    net.backward_pass()
    gradients = net.get('gradients')
    data_deltas = net.get('Input.output_deltas.default')
    assert np.abs(data_deltas).max() > 1e-6
    net.backward_pass(input_deltas=False)
    np.testing.assert_allclose(net.get('gradients'), gradients, rtol=1e-12, atol=1e-14)
    if handler == 'old-signature':
        np.testing.assert_allclose(
            net.get('Input.output_deltas.default'), data_deltas, rtol=1e-12, atol=1e-14
        )
    else:
        np.testing.assert_array_equal(net.get('Input.output_deltas.default'), 0)
    net.backward_pass()
    np.testing.assert_allclose(
        net.get('Input.output_deltas.default'), data_deltas, rtol=1e-12, atol=1e-14
    )


class OldSignatureHandler(NumpyHandler):
    """A custom handler written against the SPEC signatures of the
    convolution ops (no keyword-only options)."""

    def conv2d_backward_batch(
        self,
        inputs,
        weights,
        padding,
        stride,
        in_deltas,
        out_deltas,
        weight_deltas,
        bias_deltas,
    ):
        super().conv2d_backward_batch(
            inputs,
            weights,
            padding,
            stride,
            in_deltas,
            out_deltas,
            weight_deltas,
            bias_deltas,
        )


#: the handlers the network tests run on, by test id
HANDLERS = {
    'numpy': lambda: NumpyHandler(np.float64),
    'debug': lambda: DebugHandler(NumpyHandler(np.float64)),
    'old-signature': lambda: OldSignatureHandler(np.float64),
}


def test_big_images_keep_their_receptive_fields():
    """From 512 output cells per image the layer declares the internal
    ``columns`` (kh*kw*C values per output cell) for the backward pass."""
    layer = instantiate_layer(
        Convolution2DLayerImpl,
        {'default': (32, 16, 3)},
        num_filters=2,
        kernel_size=(3, 2),
        padding=1,
    )
    assert layer.get_shape('outputs.default') == ('T', 'B', 32, 17, 2)
    assert list(layer.internal_shapes) == ['columns']
    assert layer.get_shape('internals.columns') == ('T', 'B', 32, 17, 18)
    assert not layer.internal_shapes['columns'].is_backward_only
    small = instantiate_layer(
        Convolution2DLayerImpl,
        {'default': (20, 25, 3)},
        num_filters=2,
        kernel_size=(3, 3),
        padding=1,
    )
    assert small.get_shape('outputs.default') == ('T', 'B', 20, 25, 2)
    assert small.internal_shapes == {}


@pytest.mark.parametrize(
    'entry',
    [e for e in CONV_SPECS if e['layer_class'] is Convolution2DLayerImpl],
    ids=lambda e: e['id'],
)
@pytest.mark.parametrize(
    'time_steps, batch_size, activation', [(1, 1, 'tanh'), (2, 3, 'rel')]
)
def test_layer_invariants_with_kept_columns(
    monkeypatch, entry, time_steps, batch_size, activation
):
    """The registry geometries again, keeping the receptive fields of the
    forward pass: finite differences, accumulation and stale buffers."""
    monkeypatch.setattr(_numpy_conv, 'MIN_CELLS_TO_KEEP_COLUMNS', 1)
    layer = instantiate_layer(
        Convolution2DLayerImpl,
        entry['in_shapes'],
        activation=activation,
        **entry['kwargs'],
    )
    assert 'columns' in layer.internal_shapes
    run_layer_tests(layer, {'time_steps': time_steps, 'batch_size': batch_size})


@pytest.mark.parametrize('handler', ['numpy', 'debug', 'old-signature'])
def test_kept_columns_in_a_network_match_recomputed_ones(handler, monkeypatch):
    def build():
        inp = Input({'default': ('T', 'B', 12, 11, 2)})
        net = Network.from_layer(
            inp
            >> Convolution2D(3, (3, 3), padding=1, activation='tanh', name='Conv')
            >> Convolution2D(2, (2, 2), name='Top')
            >> Loss(name='Loss')
        )
        net.set_handler(HANDLERS[handler]())
        net.initialize(Gaussian(0.5), seed=1)
        net.provide_external_data(
            {'default': np.random.RandomState(2).randn(2, 3, 12, 11, 2)}
        )
        net.forward_pass(training_pass=True)
        net.backward_pass()
        return net

    monkeypatch.setattr(_numpy_conv, 'MIN_CELLS_TO_KEEP_COLUMNS', 100)
    kept = build()
    assert 'columns' in kept.layers['Conv'].internal_shapes
    # (the old-signature handler gets them in the forward pass only)
    assert np.abs(kept.get('Conv.internals.columns')).max() > 0.1
    monkeypatch.setattr(_numpy_conv, 'MIN_CELLS_TO_KEEP_COLUMNS', 10**9)
    recomputed = build()
    assert recomputed.layers['Conv'].internal_shapes == {}
    for path in ('gradients', 'Top.outputs.default', 'Input.output_deltas.default'):
        np.testing.assert_allclose(
            kept.get(path), recomputed.get(path), rtol=1e-12, atol=1e-14
        )


class DecliningHandler(NumpyHandler):
    """A handler that, like the base Handler, does not keep columns."""

    def keeps_conv_columns(self, out_cells: int) -> bool:
        return Handler.keeps_conv_columns(self, out_cells)


def test_kept_columns_are_asked_of_the_handler_the_network_runs_on(monkeypatch):
    """The layout follows the network's handler: on a handler that
    declines kept columns the network has no ``columns`` buffer at all (and
    the same results), whatever the default handler says; set_handler to
    one that keeps them lays the memory out anew with them."""
    from brainstorm import handlers

    def build(handler):
        inp = Input({'default': ('T', 'B', 32, 32, 3)})
        net = Network.from_layer(
            inp >> Convolution2D(2, (3, 3), padding=1, name='Conv') >> Loss(name='Loss')
        )
        net.set_handler(handler)
        net.initialize(Gaussian(0.5), seed=1)
        net.provide_external_data(
            {'default': np.random.RandomState(2).randn(1, 2, 32, 32, 3)}
        )
        net.forward_pass(training_pass=True)
        net.backward_pass()
        return net

    assert NumpyHandler().keeps_conv_columns(32 * 32)
    assert not Handler.keeps_conv_columns(NumpyHandler(), 32 * 32)
    kept = build(NumpyHandler(np.float64))
    assert 'columns' in kept.layers['Conv'].internal_shapes
    declined = build(DecliningHandler(np.float64))
    assert declined.layers['Conv'].internal_shapes == {}
    assert 'columns' not in declined.buffer['Conv'].internals
    assert declined.buffer_manager.size < kept.buffer_manager.size
    np.testing.assert_allclose(
        declined.get('gradients'), kept.get('gradients'), rtol=1e-12
    )
    # a network created while the default handler declines gets the
    # columns once it moves to a handler that keeps them
    monkeypatch.setattr(handlers, 'default_handler', DecliningHandler(np.float32))
    moved = build(NumpyHandler(np.float64))
    assert 'columns' in moved.buffer['Conv'].internals
    np.testing.assert_allclose(
        moved.get('gradients'), kept.get('gradients'), rtol=1e-12
    )


class BareOldHandler(NumpyHandler):
    """Both convolution ops with Brainstorm 0.5's signatures."""

    def conv2d_forward_batch(self, inputs, weights, bias, outputs, padding, stride):
        super().conv2d_forward_batch(inputs, weights, bias, outputs, padding, stride)

    def conv2d_backward_batch(
        self,
        inputs,
        weights,
        padding,
        stride,
        in_deltas,
        out_deltas,
        weight_deltas,
        bias_deltas,
    ):
        super().conv2d_backward_batch(
            inputs,
            weights,
            padding,
            stride,
            in_deltas,
            out_deltas,
            weight_deltas,
            bias_deltas,
        )


def test_base_handler_accepts_the_optional_keywords_for_old_handlers():
    """The base Handler lets 0.5-style ops take (and ignore) ``columns``
    and ``skip_in_deltas``; their results equal NumpyHandler's."""
    import inspect

    for op in ('conv2d_forward_batch', 'conv2d_backward_batch'):
        assert 'columns' in inspect.signature(getattr(BareOldHandler, op)).parameters
    old, new = BareOldHandler(np.float64), NumpyHandler(np.float64)
    rnd = np.random.RandomState(3)
    x, w, b = rnd.randn(2, 5, 4, 3), rnd.randn(2, 3, 3, 3), rnd.randn(2)
    results = []
    for h in (old, new):
        y = np.zeros((2, 5, 4, 2))
        columns = np.zeros((2, 5, 4, 27))
        h.conv2d_forward_batch(x, w, b, y, 1, (1, 1), columns=columns)
        dx, dw, db = np.zeros_like(x), np.zeros_like(w), np.zeros_like(b)
        h.conv2d_backward_batch(
            x, w, 1, (1, 1), dx, y, dw, db, columns=columns, skip_in_deltas=True
        )
        results.append((y, dw, db))
    for a, c in zip(*results):
        np.testing.assert_allclose(a, c, rtol=1e-12)
