"""Forward passes of the core layers against plain-NumPy formulas."""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.layers import (
    FullyConnected,
    Input,
    Loss,
    Recurrent,
    SoftmaxCE,
    SquaredError,
)
from brainstorm.structure.network import Network
from brainstorm.utils import LayerValidationError

ACT = {
    'sigmoid': lambda x: 1 / (1 + np.exp(-x)),
    'tanh': np.tanh,
    'rel': lambda x: np.maximum(x, 0),
    'linear': lambda x: x,
    'el': lambda x: np.where(x > 0, x, np.exp(np.minimum(x, 0)) - 1),
}


def run(last, data, seed=0):
    net = Network.from_layer(last)
    net.set_handler(NumpyHandler(np.float64))
    rnd = np.random.RandomState(seed)
    net.buffer.parameters[:] = rnd.randn(net.buffer.parameters.size)
    net.provide_external_data(data)
    net.forward_pass()
    return net


@pytest.mark.parametrize('activation', sorted(ACT))
def test_fully_connected(activation):
    x = np.random.RandomState(1).randn(3, 2, 2, 3)
    inp = Input(out_shapes={'default': ('T', 'B', 2, 3)})
    net = run(
        inp >> FullyConnected((2, 2), activation=activation, name='FC'), {'default': x}
    )
    W, b = net.get('FC.parameters.W'), net.get('FC.parameters.bias')
    expected = ACT[activation](x.reshape(6, 6) @ W.T + b).reshape(3, 2, 2, 2)
    np.testing.assert_allclose(net.get('FC.outputs.default'), expected, rtol=1e-12)


@pytest.mark.parametrize('activation', sorted(ACT))
def test_recurrent_with_context(activation):
    rnd = np.random.RandomState(2)
    x = rnd.randn(4, 3, 2)
    inp = Input(out_shapes={'default': ('T', 'B', 2)})
    net = run(inp >> Recurrent(5, activation=activation, name='R'), {'default': x})
    W, R, b = (net.get(f'R.parameters.{p}') for p in ('W', 'R', 'bias'))
    context = net.get_context()
    context[2][:] = rnd.randn(*context[2].shape)
    net.forward_pass(context=context)
    y_prev = net.get('R.outputs.default')[-1]
    ys = []
    for t in range(4):
        y_prev = ACT[activation](x[t] @ W.T + b + y_prev @ R.T)
        ys.append(y_prev)
    np.testing.assert_allclose(net.get('R.outputs.default')[:4], ys, rtol=1e-10)


def test_softmax_ce_and_loss():
    rnd = np.random.RandomState(3)
    x = rnd.randn(2, 3, 4) * 3
    t = rnd.randint(0, 4, (2, 3, 1))
    inp = Input(out_shapes={'default': ('T', 'B', 4), 'targets': ('T', 'B', 1)})
    out = SoftmaxCE(name='Out')
    inp >> out
    inp - 'targets' >> 'targets' - out
    out - 'loss' >> Loss(importance=0.5, name='L')
    net = run(out, {'default': x, 'targets': t})
    p = np.exp(x - x.max(2, keepdims=True))
    p /= p.sum(2, keepdims=True)
    loss = -np.log(np.clip(np.take_along_axis(p, t, 2), 1e-6, 1))
    np.testing.assert_allclose(net.get('Out.outputs.predictions'), p, rtol=1e-12)
    np.testing.assert_allclose(net.get('Out.outputs.loss'), loss, rtol=1e-12)
    np.testing.assert_allclose(
        net.get('L.outputs.loss'), [0.5 * loss.sum() / 3], rtol=1e-12
    )


def test_softmax_ce_rejects_bad_targets():
    inp = Input(out_shapes={'default': ('T', 'B', 4), 'targets': ('T', 'B', 2)})
    out = SoftmaxCE(name='Out')
    inp >> out
    inp - 'targets' >> 'targets' - out
    with pytest.raises(LayerValidationError, match="SoftmaxCE 'Out'.*targets"):
        Network.from_layer(out)


def test_squared_error():
    rnd = np.random.RandomState(4)
    x, t = rnd.randn(2, 3, 2, 2), rnd.randn(2, 3, 2, 2)
    inp = Input(out_shapes={'default': ('T', 'B', 2, 2), 'targets': ('T', 'B', 2, 2)})
    out = SquaredError(name='SE')
    inp >> out
    inp - 'targets' >> 'targets' - out
    out - 'loss' >> Loss()
    net = run(out, {'default': x, 'targets': t})
    np.testing.assert_array_equal(net.get('SE.outputs.predictions'), x)
    np.testing.assert_allclose(
        net.get('SE.outputs.loss'), 0.5 * (x - t) ** 2, rtol=1e-12
    )
    assert net.get_loss_values()['total_loss'] == pytest.approx(
        0.5 * ((x - t) ** 2).sum() / 3
    )


def test_input_holds_the_data_and_accepts_batch_sized_inputs():
    rnd = np.random.RandomState(5)
    x, s = rnd.randn(3, 2, 4), rnd.randn(2, 3)
    inp = Input(out_shapes={'default': ('T', 'B', 4), 'seq': ('B', 3)})
    net = run(inp >> FullyConnected(2, name='FC'), {'default': x, 'seq': s})
    np.testing.assert_array_equal(net.get_input('default'), x)
    np.testing.assert_array_equal(net.get_input('seq'), s)
    assert net.buffer.Input.outputs.seq.shape == (2, 3)


@pytest.mark.parametrize('bad_id', [-1, 4, 12])
def test_softmax_ce_names_out_of_range_targets(bad_id):
    from brainstorm.utils import NetworkValidationError

    inp = Input(out_shapes={'default': ('T', 'B', 4), 'targets': ('T', 'B', 1)})
    out = SoftmaxCE(name='Out')
    inp >> out
    inp - 'targets' >> 'targets' - out
    targets = np.zeros((2, 3, 1))
    targets[1, 2, 0] = bad_id
    with pytest.raises(
        NetworkValidationError, match=r"SoftmaxCE 'Out'.*4 classes.*\[0, 4\)"
    ):
        run(out, {'default': np.zeros((2, 3, 4)), 'targets': targets})
