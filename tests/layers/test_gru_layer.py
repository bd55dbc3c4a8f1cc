"""GRU: the equations, PyTorch's torch.nn.GRU (where installed), networks."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.layers.gru_layer import GRULayerImpl
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.utils import LayerValidationError

PARAMETERS = ['Wr', 'Wz', 'Wn', 'Rr', 'Rz', 'Rn', 'br', 'bz', 'bn', 'bhn']


def sigmoid(a):
    return 1 / (1 + np.exp(-a))


def gru_reference(x, p, y0, act=np.tanh):
    """The documented equations, step by step in NumPy."""
    y_prev, ys = y0, []
    for xt in x:
        r = sigmoid(xt @ p['Wr'].T + y_prev @ p['Rr'].T + p['br'])
        z = sigmoid(xt @ p['Wz'].T + y_prev @ p['Rz'].T + p['bz'])
        n = act(xt @ p['Wn'].T + p['bn'] + r * (y_prev @ p['Rn'].T + p['bhn']))
        y_prev = (1 - z) * n + z * y_prev
        ys.append(y_prev)
    return np.stack(ys)


def test_setup_shapes_and_groups():
    layer = instantiate_layer(GRULayerImpl, {'default': (3,)}, size=4)
    assert list(layer.parameter_shapes) == PARAMETERS
    for name in ('Wr', 'Wz', 'Wn'):
        assert layer.get_shape('parameters.' + name) == (4, 3)
    for name in ('Rr', 'Rz', 'Rn'):
        assert layer.get_shape('parameters.' + name) == (4, 4)
    assert layer.get_shape('outputs.default') == ('T', 'B', 4)
    assert layer.out_shapes['default'].context_size == 1


@pytest.mark.parametrize('activation', ['tanh', 'rel', 'sigmoid'])
def test_forward_matches_the_equations_with_a_context(activation):
    layer = instantiate_layer(
        GRULayerImpl, {'default': (3,)}, size=4, activation=activation
    )
    buffers, _ = set_up_layer(layer, {'time_steps': 5, 'batch_size': 2, 'seed': 3})
    h = layer.handler
    y = buffers.outputs.default
    context = np.random.RandomState(1).randn(2, 4)
    h.set_from_numpy(y[-1], context)  # the context slot
    layer.forward_pass(buffers)
    p = {n: h.get_numpy_copy(buffers.parameters[n]) for n in PARAMETERS}
    x = h.get_numpy_copy(buffers.inputs.default)
    act = {'tanh': np.tanh, 'rel': lambda a: np.maximum(a, 0), 'sigmoid': sigmoid}
    expected = gru_reference(x, p, context, act[activation])
    np.testing.assert_allclose(
        h.get_numpy_copy(y[:5]), expected, rtol=1e-10, atol=1e-12
    )


@pytest.mark.parametrize(
    'kwargs, match',
    [
        ({'size': 0}, 'size'),
        ({'size': 2.5}, 'size'),
        ({'activation': 'relu6'}, 'activation'),
    ],
)
def test_bad_arguments_name_the_layer_and_argument(kwargs, match):
    with pytest.raises(LayerValidationError, match=match) as info:
        bs.layers.GRU(**{'size': 3, **kwargs}, name='G')
    assert "'G'" in str(info.value)


def test_description_and_hdf5_round_trip(tmp_path):
    inp = bs.layers.Input({'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(inp >> bs.layers.GRU(3, activation='tanh', name='G'))
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=2)
    architecture = json.loads(json.dumps(net.architecture))
    assert architecture['G']['@type'] == 'GRU'
    assert architecture['G']['size'] == 3
    x = np.random.RandomState(0).randn(4, 2, 2)
    net.provide_external_data({'default': x})
    net.forward_pass()
    expected = net.get('G.outputs.default')
    path = str(tmp_path / 'gru.hdf5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    loaded.set_handler(NumpyHandler(np.float64))
    loaded.provide_external_data({'default': x})
    loaded.forward_pass()
    np.testing.assert_array_equal(loaded.get('G.outputs.default'), expected)
    rebuilt = bs.Network.from_architecture(architecture)
    assert rebuilt.layers['G'].size == 3


def test_context_continues_a_truncated_sequence():
    """Two halves with the context of the first equal one whole run."""
    inp = bs.layers.Input({'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(inp >> bs.layers.GRU(3, name='G'))
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=2)
    x = np.random.RandomState(0).randn(6, 2, 2)
    net.provide_external_data({'default': x})
    net.forward_pass()
    whole = net.get('G.outputs.default')[:6].copy()
    net.provide_external_data({'default': x[:3]})
    net.forward_pass()
    first = net.get('G.outputs.default')[:3].copy()
    context = net.get_context()
    net.provide_external_data({'default': x[3:]})
    net.forward_pass(context=context)
    second = net.get('G.outputs.default')[:3]
    np.testing.assert_allclose(np.concatenate([first, second]), whole, rtol=1e-12)


# ------------------------------------------------------------ PyTorch ---


def test_matches_torch_gru_outputs_and_gradients():
    """torch.nn.GRU with the same weights: outputs, input deltas and every
    gradient within float32 tolerance (both run in float32)."""
    torch = pytest.importorskip('torch')
    T, B, n_in, size = 6, 3, 4, 5
    torch.manual_seed(0)
    gru = torch.nn.GRU(n_in, size)  # time-major like brainstorm
    rnd = np.random.RandomState(4)
    x = rnd.randn(T, B, n_in).astype(np.float32)
    h0 = rnd.randn(1, B, size).astype(np.float32)
    weights = rnd.randn(T, B, size).astype(np.float32)  # objective sum(w * y)

    xt = torch.tensor(x, requires_grad=True)
    out, _ = gru(xt, torch.tensor(h0))
    (out * torch.tensor(weights)).sum().backward()

    w_ih = gru.weight_ih_l0.detach().numpy()
    w_hh = gru.weight_hh_l0.detach().numpy()
    b_ih = gru.bias_ih_l0.detach().numpy()
    b_hh = gru.bias_hh_l0.detach().numpy()
    S = size
    values = {
        'Wr': w_ih[:S],
        'Wz': w_ih[S : 2 * S],
        'Wn': w_ih[2 * S :],
        'Rr': w_hh[:S],
        'Rz': w_hh[S : 2 * S],
        'Rn': w_hh[2 * S :],
        'br': b_ih[:S] + b_hh[:S],
        'bz': b_ih[S : 2 * S] + b_hh[S : 2 * S],
        'bn': b_ih[2 * S :],
        'bhn': b_hh[2 * S :],
    }
    layer = instantiate_layer(GRULayerImpl, {'default': (n_in,)}, size=size)
    h = NumpyHandler(np.float32)
    buffers, _ = set_up_layer(
        layer, {'time_steps': T, 'batch_size': B, 'default': x, 'inits': values}, h
    )
    h.set_from_numpy(buffers.outputs.default[-1], h0[0])  # the initial state
    layer.forward_pass(buffers)
    tol = {'rtol': 1e-4, 'atol': 1e-5}
    y = h.get_numpy_copy(buffers.outputs.default[:T])
    np.testing.assert_allclose(y, out.detach().numpy(), **tol)

    h.set_from_numpy(buffers.output_deltas.default[:T], weights)
    layer.backward_pass(buffers)
    grads = {n: h.get_numpy_copy(buffers.gradients[n]) for n in values}
    gw_ih, gw_hh = gru.weight_ih_l0.grad.numpy(), gru.weight_hh_l0.grad.numpy()
    gb_ih, gb_hh = gru.bias_ih_l0.grad.numpy(), gru.bias_hh_l0.grad.numpy()
    np.testing.assert_allclose(
        np.concatenate([grads['Wr'], grads['Wz'], grads['Wn']]), gw_ih, **tol
    )
    np.testing.assert_allclose(
        np.concatenate([grads['Rr'], grads['Rz'], grads['Rn']]), gw_hh, **tol
    )
    # the merged reset and update biases get the gradient of either torch bias
    np.testing.assert_allclose(grads['br'], gb_ih[:S], **tol)
    np.testing.assert_allclose(grads['br'], gb_hh[:S], **tol)
    np.testing.assert_allclose(grads['bz'], gb_ih[S : 2 * S], **tol)
    np.testing.assert_allclose(grads['bn'], gb_ih[2 * S :], **tol)
    np.testing.assert_allclose(grads['bhn'], gb_hh[2 * S :], **tol)
    dx = h.get_numpy_copy(buffers.input_deltas.default)
    np.testing.assert_allclose(dx, xt.grad.numpy(), **tol)


def gru_values(gru, suffix=''):
    """Brainstorm's GRU parameters from a torch.nn.GRU's (one direction)."""
    w_ih = getattr(gru, 'weight_ih_l0' + suffix).detach().numpy()
    w_hh = getattr(gru, 'weight_hh_l0' + suffix).detach().numpy()
    b_ih = getattr(gru, 'bias_ih_l0' + suffix).detach().numpy()
    b_hh = getattr(gru, 'bias_hh_l0' + suffix).detach().numpy()
    S = w_hh.shape[1]
    W, R = np.split(w_ih, 3), np.split(w_hh, 3)
    bi, bh = np.split(b_ih, 3), np.split(b_hh, 3)
    return {
        'Wr': W[0],
        'Wz': W[1],
        'Wn': W[2],
        'Rr': R[0],
        'Rz': R[1],
        'Rn': R[2],
        'br': bi[0] + bh[0],
        'bz': bi[1] + bh[1],
        'bn': bi[2],
        'bhn': bh[2][:S],
    }


def test_bidirectional_with_a_mask_matches_torch_packed_sequences():
    """A forward and a reverse GRU into a Merge, with a mask, against a
    bidirectional torch.nn.GRU on packed sequences of the same lengths:
    outputs at every valid step, and the gradients of a masked objective."""
    torch = pytest.importorskip('torch')
    from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

    T, B, n_in, size = 6, 3, 4, 5
    lengths = [6, 2, 4]
    torch.manual_seed(1)
    gru = torch.nn.GRU(n_in, size, bidirectional=True)
    rnd = np.random.RandomState(5)
    x = rnd.randn(T, B, n_in).astype(np.float32)
    mask = (np.arange(T)[:, None] < np.array(lengths))[:, :, None].astype(np.float32)
    weights = rnd.randn(T, B, 2 * size).astype(np.float32) * mask

    packed = pack_padded_sequence(torch.tensor(x), lengths, enforce_sorted=False)
    out, _ = gru(packed)
    out, _ = pad_packed_sequence(out, total_length=T)  # zero at padding
    (out * torch.tensor(weights)).sum().backward()

    inp = bs.layers.Input({'default': ('T', 'B', n_in), 'mask': ('T', 'B', 1)})
    forward = bs.layers.GRU(size, name='Fwd')
    backward = bs.layers.GRU(size, reverse=True, name='Bwd')
    inp - 'default' >> forward
    inp - 'default' >> backward
    inp - 'mask' >> 'mask' - backward
    both = bs.layers.Merge(name='Both')
    forward >> 'inputs_1' - both
    backward >> 'inputs_2' - both
    net = bs.Network.from_layer(both)
    net.set_handler(NumpyHandler(np.float32))
    net.initialize(
        {
            'Fwd': gru_values(gru),
            'Bwd': gru_values(gru, '_reverse'),
        }
    )
    net.provide_external_data({'default': x, 'mask': mask})
    net.forward_pass(training_pass=True)
    tol = {'rtol': 1e-4, 'atol': 1e-5}
    y = net.get('Both.outputs.default')
    np.testing.assert_allclose(y * mask, out.detach().numpy(), **tol)

    # the gradients, layer by layer (a network clears the output deltas)
    h = NumpyHandler(np.float32)
    for i, (suffix, reverse) in enumerate((('', False), ('_reverse', True))):
        in_shapes = (
            {'default': (n_in,), 'mask': (1,)} if reverse else {'default': (n_in,)}
        )
        layer = instantiate_layer(GRULayerImpl, in_shapes, size=size, reverse=reverse)
        spec = {'time_steps': T, 'batch_size': B, 'default': x, 'mask': mask}
        buffers, _ = set_up_layer(layer, {**spec, 'inits': gru_values(gru, suffix)}, h)
        layer.forward_pass(buffers)
        deltas = weights[:, :, i * size : (i + 1) * size]
        h.set_from_numpy(buffers.output_deltas.default[:T], deltas)
        layer.backward_pass(buffers)
        grads = {n: h.get_numpy_copy(buffers.gradients[n]) for n in PARAMETERS}
        np.testing.assert_allclose(
            np.concatenate([grads['Wr'], grads['Wz'], grads['Wn']]),
            getattr(gru, 'weight_ih_l0' + suffix).grad.numpy(),
            **tol,
        )
        np.testing.assert_allclose(
            np.concatenate([grads['Rr'], grads['Rz'], grads['Rn']]),
            getattr(gru, 'weight_hh_l0' + suffix).grad.numpy(),
            **tol,
        )
        b_hh = getattr(gru, 'bias_hh_l0' + suffix).grad.numpy()
        np.testing.assert_allclose(grads['bhn'], b_hh[2 * size :], **tol)
