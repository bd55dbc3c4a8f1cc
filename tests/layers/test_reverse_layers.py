"""reverse=True for Recurrent, Lstm and GRU: backwards in time, within each
sequence's length, and the bidirectional pattern of two layers and a Merge."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.layers.gru_layer import GRULayerImpl
from brainstorm.layers.lstm_layer import LstmLayerImpl
from brainstorm.layers.recurrent_layer import RecurrentLayerImpl
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.utils import LayerValidationError, NetworkValidationError

CLASSES = [RecurrentLayerImpl, LstmLayerImpl, GRULayerImpl]
FACTORIES = ['Recurrent', 'Lstm', 'GRU']


def run(layer_class, x, params, mask=None, reverse=False, context=None, flip=False):
    """Forward and backward pass of one layer; returns outputs, input
    deltas and gradients (fixed random output deltas, reversed in time if
    ``flip``)."""
    T, B = x.shape[:2]
    in_shapes = {'default': x.shape[2:]}
    if mask is not None:
        in_shapes['mask'] = (1,)
    layer = instantiate_layer(layer_class, in_shapes, size=3, reverse=reverse)
    h = NumpyHandler(np.float64)
    spec = {'time_steps': T, 'batch_size': B, 'default': x, 'inits': params}
    if mask is not None:
        spec['mask'] = mask
    buffers, _ = set_up_layer(layer, spec, h)
    if context is not None:
        slot = buffers.internals.rev_y if reverse else buffers.outputs.default
        h.set_from_numpy(slot[-1], context)
    layer.forward_pass(buffers)
    w = np.random.RandomState(9).randn(T, B, 3)
    w = w[::-1] if flip else w
    h.set_from_numpy(buffers.output_deltas.default[:T], w)
    layer.backward_pass(buffers)
    grads = {n: h.get_numpy_copy(buffers.gradients[n]) for n in params}
    return (
        h.get_numpy_copy(buffers.outputs.default[:T]),
        h.get_numpy_copy(buffers.input_deltas.default),
        grads,
    )


def parameters_of(layer_class, n_in, seed=0):
    layer = instantiate_layer(layer_class, {'default': (n_in,)}, size=3)
    rnd = np.random.RandomState(seed)
    return {
        name: 0.5 * rnd.randn(*shape.shape)
        for name, shape in layer.parameter_shapes.items()
    }


@pytest.mark.parametrize('layer_class', CLASSES)
def test_reverse_without_mask_is_the_forward_layer_on_reversed_time(layer_class):
    x = np.random.RandomState(1).randn(5, 2, 4)
    params = parameters_of(layer_class, 4)
    y, dx, grads = run(layer_class, x, params, reverse=True)
    # the forward layer on the reversed sequence, output deltas reversed too
    y_f, dx_f, grads_f = run(layer_class, x[::-1], params, flip=True)
    np.testing.assert_allclose(y, y_f[::-1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dx, dx_f[::-1], rtol=1e-10, atol=1e-12)
    for name in params:
        np.testing.assert_allclose(grads[name], grads_f[name], rtol=1e-10, atol=1e-12)
    assert not np.allclose(y, run(layer_class, x, params)[0])


@pytest.mark.parametrize('layer_class', CLASSES)
def test_each_sequence_runs_backwards_from_its_own_end(layer_class):
    """With a mask, output t of a sequence of length L is the forward
    layer's run over that sequence's x[L-1], ..., x[t] alone; the padding
    changes no valid output."""
    T, B = 6, 3
    rnd = np.random.RandomState(2)
    x = rnd.randn(T, B, 4)
    lengths = [6, 2, 4]
    mask = (np.arange(T)[:, None] < np.array(lengths))[:, :, None].astype(float)
    params = parameters_of(layer_class, 4)
    y, dx, grads = run(layer_class, x, params, mask=mask, reverse=True)
    for b, n in enumerate(lengths):
        alone, _, _ = run(layer_class, x[:n, b : b + 1][::-1], params)
        np.testing.assert_allclose(y[:n, b], alone[::-1, 0], rtol=1e-12, atol=1e-12)

    # other values in the padding: the same valid outputs
    x2 = x.copy()
    x2[mask[:, :, 0] == 0] = 100.0
    y2, _, _ = run(layer_class, x2, params, mask=mask, reverse=True)
    valid = mask[:, :, 0] == 1
    np.testing.assert_allclose(y2[valid], y[valid], rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize('layer_class', CLASSES)
def test_the_context_is_the_state_after_the_end(layer_class):
    x = np.random.RandomState(3).randn(4, 2, 4)
    params = parameters_of(layer_class, 4)
    context = np.random.RandomState(4).randn(2, 3)
    y, _, _ = run(layer_class, x, params, reverse=True, context=context)
    y_f, _, _ = run(layer_class, x[::-1], params, context=context)
    np.testing.assert_allclose(y, y_f[::-1], rtol=1e-12, atol=1e-12)


def test_gradients_match_finite_differences_in_a_network_with_a_mask():
    """A whole network: a reverse GRU with a mask under a masked loss."""
    inp = bs.layers.Input(
        {'default': ('T', 'B', 2), 'mask': ('T', 'B', 1), 'targets': ('T', 'B', 3)}
    )
    gru = bs.layers.GRU(3, reverse=True, name='G')
    inp - 'default' >> gru
    inp - 'mask' >> 'mask' - gru
    err = bs.layers.SquaredDifference(name='Err')
    gru >> 'inputs_1' - err
    inp - 'targets' >> 'inputs_2' - err
    masked = bs.layers.Mask(name='M')
    err >> masked
    inp - 'mask' >> 'mask' - masked
    net = bs.Network.from_layer(masked >> bs.layers.Loss(name='Loss'))
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    rnd = np.random.RandomState(0)
    mask = (np.arange(5)[:, None] < np.array([5, 3]))[:, :, None].astype(float)
    data = {
        'default': rnd.randn(5, 2, 2),
        'mask': mask,
        'targets': rnd.randn(5, 2, 3),
    }

    def loss(flat):
        net.buffer.parameters[:] = flat
        net.provide_external_data(data)
        net.forward_pass()
        return net.get_loss_values()['total_loss']

    theta = net.buffer.parameters.copy()
    net.provide_external_data(data)
    net.forward_pass(training_pass=True)
    net.backward_pass()
    analytic = net.buffer.gradients.copy()
    numeric = np.zeros_like(theta)
    for i in range(theta.size):
        step = np.zeros_like(theta)
        step[i] = 1e-6
        numeric[i] = (loss(theta + step) - loss(theta - step)) / 2e-6
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-8)


@pytest.mark.parametrize('factory', FACTORIES)
def test_bidirectional_pattern_round_trips(factory, tmp_path):
    """The documented pattern: a forward and a reverse layer into a Merge;
    description, architecture and HDF5 round trips keep ``reverse``."""
    make = getattr(bs.layers, factory)
    inp = bs.layers.Input({'default': ('T', 'B', 4), 'mask': ('T', 'B', 1)})
    forward = make(3, name='Forward')
    backward = make(3, reverse=True, name='Backward')
    inp - 'default' >> forward
    inp - 'default' >> backward
    inp - 'mask' >> 'mask' - backward
    merged = bs.layers.Merge(name='Both')
    forward >> 'inputs_1' - merged
    backward >> 'inputs_2' - merged
    net = bs.Network.from_layer(merged)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=3)
    architecture = json.loads(json.dumps(net.architecture))
    assert architecture['Backward']['reverse'] is True
    assert architecture['Forward'].get('reverse', False) is False
    mask = (np.arange(5)[:, None] < np.array([5, 2, 4]))[:, :, None].astype(float)
    x = np.random.RandomState(0).randn(5, 3, 4)
    net.provide_external_data({'default': x, 'mask': mask})
    net.forward_pass()
    both = net.get('Both.outputs.default')
    assert both.shape == (5, 3, 6)
    np.testing.assert_array_equal(
        both[:, :, 3:], net.get('Backward.outputs.default')[:5]
    )

    path = str(tmp_path / 'bi.hdf5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    loaded.set_handler(NumpyHandler(np.float64))
    loaded.provide_external_data({'default': x, 'mask': mask})
    loaded.forward_pass()
    np.testing.assert_array_equal(loaded.get('Both.outputs.default'), both)
    assert loaded.layers['Backward'].reverse is True


@pytest.mark.parametrize('handler', ['numpy', 'debug'])
def test_a_mask_with_a_hole_is_refused_naming_layer_and_input(handler):
    inp = bs.layers.Input({'default': ('T', 'B', 2), 'mask': ('T', 'B', 1)})
    lstm = bs.layers.Lstm(3, reverse=True, name='Back')
    inp - 'default' >> lstm
    inp - 'mask' >> 'mask' - lstm
    net = bs.Network.from_layer(lstm)
    h = NumpyHandler(np.float64)
    net.set_handler(DebugHandler(h) if handler == 'debug' else h)
    net.initialize(bs.initializers.Gaussian(0.5), seed=3)
    mask = np.ones((4, 2, 1))
    mask[1, 1] = 0.0  # a 0, then 1 again
    net.provide_external_data({'default': np.zeros((4, 2, 2)), 'mask': mask})
    with pytest.raises(NetworkValidationError) as info:
        net.forward_pass()
    message = str(info.value)
    assert "Lstm 'Back'" in message and "input 'mask'" in message
    assert 'time step 2 of sequence 1' in message


@pytest.mark.parametrize('factory', FACTORIES)
def test_a_mask_without_reverse_is_refused(factory):
    inp = bs.layers.Input({'default': ('T', 'B', 2), 'mask': ('T', 'B', 1)})
    layer = getattr(bs.layers, factory)(3, name='Fwd')
    inp - 'default' >> layer
    inp - 'mask' >> 'mask' - layer
    with pytest.raises(LayerValidationError, match="'Fwd'.*input 'mask'.*reverse=True"):
        bs.Network.from_layer(layer)


@pytest.mark.parametrize('factory', FACTORIES)
def test_bad_reverse_and_mask_shape_name_the_layer(factory):
    with pytest.raises(LayerValidationError, match="'R'.*reverse") as info:
        getattr(bs.layers, factory)(3, reverse='yes', name='R')
    assert 'bool' in str(info.value)
    inp = bs.layers.Input({'default': ('T', 'B', 2), 'mask': ('T', 'B', 2)})
    layer = getattr(bs.layers, factory)(3, reverse=True, name='R')
    inp - 'default' >> layer
    inp - 'mask' >> 'mask' - layer
    with pytest.raises(LayerValidationError, match="'R'.*'mask'"):
        bs.Network.from_layer(layer)


@pytest.mark.parametrize('type_name', ['Clockwork', 'ClockworkLstm'])
def test_clockwork_layers_take_no_reverse(type_name):
    architecture = {
        'Input': {
            '@type': 'Input',
            'out_shapes': {'default': ['T', 'B', 2]},
            '@outgoing_connections': {'default': ['C']},
        },
        'C': {
            '@type': type_name,
            'size': 3,
            'reverse': True,
            '@outgoing_connections': {},
        },
    }
    with pytest.raises(LayerValidationError, match='reverse'):
        bs.Network.from_architecture(architecture)


def test_the_layer_listing_shows_reverse_and_the_optional_mask():
    described = {d['type']: d for d in bs.layers.describe_layers()}
    for type_name in FACTORIES:
        entry = described[type_name]
        assert entry['kwargs']['reverse']['default'] is False
        assert entry['optional_inputs'] == {'mask': ('T', 'B', 1)}
    for type_name in ('Clockwork', 'ClockworkLstm', 'FullyConnected'):
        assert 'reverse' not in described[type_name]['kwargs']
        assert described[type_name]['optional_inputs'] == {}


@pytest.mark.parametrize('factory', FACTORIES)
def test_a_context_continues_the_backward_run_into_the_earlier_chunk(factory):
    """As documented: the later chunk first, then the earlier one with the
    context of the first run, equals one reverse run over both."""
    inp = bs.layers.Input({'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(
        inp >> getattr(bs.layers, factory)(3, reverse=True, name='R')
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=2)
    x = np.random.RandomState(0).randn(6, 2, 2)
    net.provide_external_data({'default': x})
    net.forward_pass()
    whole = net.get('R.outputs.default')[:6].copy()
    net.provide_external_data({'default': x[3:]})
    net.forward_pass()
    later = net.get('R.outputs.default')[:3].copy()
    context = net.get_context()
    net.provide_external_data({'default': x[:3]})
    net.forward_pass(context=context)
    earlier = net.get('R.outputs.default')[:3]
    np.testing.assert_allclose(np.concatenate([earlier, later]), whole, rtol=1e-12)


@pytest.mark.parametrize('factory', FACTORIES)
def test_a_context_from_a_padded_chunk_is_the_state_at_each_sequences_start(
    factory,
):
    """With a mask, the later chunk of a sequence may be padded (or all
    padding). Its context must be the state where the backward run over
    the sequence's own steps ended, not the state after the padding (the
    padding leaked into the earlier chunk: errors up to 0.7), and an
    empty sequence passes the context it was given on."""
    inp = bs.layers.Input({'default': ('T', 'B', 2), 'mask': ('T', 'B', 1)})
    layer = getattr(bs.layers, factory)(3, reverse=True, name='R')
    inp - 'default' >> layer
    inp - 'mask' >> 'mask' - layer
    net = bs.Network.from_layer(layer)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    rnd = np.random.RandomState(0)
    x = rnd.randn(5, 2, 2)
    lengths = [5, 3]  # the second sequence has no step in the later chunk
    whole = []
    for seq, n in enumerate(lengths):
        net.provide_external_data(
            {'default': x[:n, seq : seq + 1], 'mask': np.ones((n, 1, 1))}
        )
        net.forward_pass()
        whole.append(net.get('R.outputs.default')[:n, 0].copy())
    later = np.full((3, 2, 2), 7.0)  # padding of an odd value
    later[:2, 0] = x[3:5, 0]
    mask = np.zeros((3, 2, 1))
    mask[:2, 0] = 1
    net.provide_external_data({'default': later, 'mask': mask})
    net.forward_pass()
    np.testing.assert_allclose(
        net.get('R.outputs.default')[:2, 0], whole[0][3:5], rtol=1e-12
    )
    context = net.get_context()
    net.provide_external_data({'default': x[:3], 'mask': np.ones((3, 2, 1))})
    net.forward_pass(context=context)
    earlier = net.get('R.outputs.default')[:3]
    np.testing.assert_allclose(earlier[:, 0], whole[0][:3], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(earlier[:, 1], whole[1][:3], rtol=1e-12, atol=1e-14)
