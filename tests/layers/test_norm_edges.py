"""LayerNorm and BatchNorm at the edges of their dtype.

A constant position (LayerNorm) or channel (BatchNorm) of large values is
normalised to 0, as in float64: the mean of equal values is corrected for
its rounding. An ``epsilon`` that the handler's dtype makes 0 (or inf) is
refused when the network gets the handler, not left to make NaN.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.layers import BatchNorm, Input, LayerNorm
from brainstorm.utils import LayerValidationError
from tests.onednn_support import onednn_handler


def _layer_norm_net(features, handler, epsilon=1e-5):
    inp = Input({'default': ('T', 'B', features)})
    net = bs.Network.from_layer(inp >> LayerNorm(epsilon=epsilon, name='LN'))
    net.set_handler(handler)
    net.initialize({'LN': {'gamma': 1.0, 'beta': 0.0}})
    return net


def _batch_norm_net(channels, handler, epsilon=1e-5):
    inp = Input({'default': ('T', 'B', channels)})
    net = bs.Network.from_layer(inp >> BatchNorm(epsilon=epsilon, name='BN'))
    net.set_handler(handler)
    net.initialize({'BN': {'gamma': 1.0, 'beta': 0.0, 'mu': 0.0, 'sigma': 1.0}})
    return net


def _reference(x, axes, epsilon=1e-5):
    mean = x.mean(axis=axes, keepdims=True)
    return (x - mean) / np.sqrt(x.var(axis=axes, keepdims=True) + epsilon)


def _float32_handlers():
    return [
        pytest.param(lambda: NumpyHandler(np.float32), id='numpy'),
        pytest.param(onednn_handler, id='onednn'),
    ]


@pytest.mark.parametrize('make_handler', _float32_handlers())
@pytest.mark.parametrize(
    ('features', 'value'), [(7, 30000.0), (512, 1000.1), (768, 1234.567)]
)
def test_layer_norm_float32_constant_position_gives_zero(make_handler, features, value):
    """The mean of 7 float32 30000s was 1 ulp off: every output -0.5255."""
    net = _layer_norm_net(features, make_handler())
    x = np.full((1, 3, features), value)
    x[0, 1] *= 1.37  # another constant, and a row with noise around it
    x[0, 2] += np.random.RandomState(0).randn(features)
    got = net.predict(x, out_name='LN.outputs.default')
    worst = np.abs(got[0, :2]).max()
    assert worst == 0.0, (
        f'LayerNorm of constant float32 rows of {value} over {features} '
        f'features: expected 0, got up to {worst:.4g}'
    )
    reference = _reference(x.astype(np.float32).astype(np.float64), -1)
    np.testing.assert_allclose(got[0, 2], reference[0, 2], rtol=0, atol=2e-6)


@pytest.mark.parametrize('make_handler', _float32_handlers())
def test_batch_norm_float32_constant_channel_gives_zero(make_handler):
    net = _batch_norm_net(3, make_handler())
    x = np.full((2, 7, 3), 30000.0)
    x[..., 1] = np.arange(14).reshape(2, 7)
    x[..., 2] = 1000.0 + 0.1 * np.random.RandomState(1).randn(2, 7)
    net.provide_external_data({'default': x})
    net.forward_pass(training_pass=True)
    got = net.get('BN.outputs.default')
    worst = np.abs(got[..., 0]).max()
    assert worst == 0.0, (
        f'BatchNorm of a constant float32 channel of 30000: expected 0, '
        f'got up to {worst:.4g}'
    )
    reference = _reference(x.astype(np.float32).astype(np.float64), (0, 1))
    np.testing.assert_allclose(got, reference, rtol=0, atol=2e-6)
    # the running mean moves towards the corrected batch mean
    np.testing.assert_allclose(net.get('BN.parameters.mu')[0], 3000.0, rtol=1e-7)


def test_float16_large_constant_position_still_gives_zero():
    """The correction keeps the float16 means' 2**-k weights: no overflow."""
    net = _layer_norm_net(512, NumpyHandler(np.float16))
    x = np.full((1, 2, 512), 1000.0)
    x[0, 1] = 60000.0
    got = net.predict(x, out_name='LN.outputs.default')
    assert np.all(got == 0.0), f'expected 0, got {got.min()} .. {got.max()}'


def _refusal(layer, make_net, dtype, epsilon, becomes):
    with pytest.raises(LayerValidationError) as info:
        make_net(4, NumpyHandler(dtype), epsilon=epsilon)
    message = str(info.value)
    name = np.dtype(dtype).name
    for part in (
        layer,  # the layer
        f'epsilon must be a finite {name} number of at least',  # expected
        f'handler of dtype {name}',  # the dtype
        f'Received: epsilon={epsilon!r}',  # what was received
        f'{epsilon:g} is {becomes}',  # what the dtype makes of it
        'Use e.g. the default epsilon=1e-5',  # a value that works
    ):
        assert part in message, f'{part!r} not in {message!r}'


@pytest.mark.parametrize(
    ('dtype', 'epsilon', 'becomes'),
    [(np.float16, 1e-12, '0'), (np.float32, 1e-50, '0'), (np.float16, 1e5, 'inf')],
)
@pytest.mark.parametrize(
    ('layer', 'make_net'),
    [("LayerNorm 'LN'", _layer_norm_net), ("BatchNorm 'BN'", _batch_norm_net)],
)
def test_epsilon_the_dtype_cannot_hold_is_refused(
    layer, make_net, dtype, epsilon, becomes
):
    """BERT's 1e-12 is 0 in float16: a constant row was NaN without a word."""
    _refusal(layer, make_net, dtype, epsilon, becomes)


def test_refused_set_handler_leaves_the_network_on_its_handler():
    net = _layer_norm_net(4, NumpyHandler(np.float32), epsilon=1e-12)
    old = net.handler
    with pytest.raises(LayerValidationError, match=r"LayerNorm 'LN'.*float16"):
        net.set_handler(NumpyHandler(np.float16))
    assert net.handler is old
    assert net.layers['LN'].handler is old
    x = np.zeros((1, 2, 4))
    x[0, 1] = [1.0, 2.0, 3.0, 4.0]
    got = net.predict(x, out_name='LN.outputs.default')
    np.testing.assert_allclose(got, _reference(x, -1, 1e-12), atol=1e-6)


def test_epsilon_refused_when_the_network_is_built_on_the_default_handler(
    monkeypatch,
):
    monkeypatch.setattr(bs.handlers, 'default_handler', NumpyHandler(np.float32))
    inp = Input({'default': ('T', 'B', 4)})
    with pytest.raises(
        LayerValidationError, match=r"LayerNorm 'LN'.*float32.*epsilon=1e-50"
    ):
        bs.Network.from_layer(inp >> LayerNorm(epsilon=1e-50, name='LN'))


@pytest.mark.parametrize(
    ('dtype', 'epsilon'),
    [(np.float16, 1e-5), (np.float16, 1e-7), (np.float32, 1e-12)],
)
def test_epsilon_the_dtype_holds_is_accepted(dtype, epsilon):
    """The default 1e-5 is subnormal in float16 and still works."""
    net = _layer_norm_net(4, NumpyHandler(dtype), epsilon=epsilon)
    bn = _batch_norm_net(4, NumpyHandler(dtype), epsilon=epsilon)
    x = np.zeros((1, 2, 4))
    x[0, 1] = [1.0, 2.0, 3.0, 4.0]
    got = net.predict(x, out_name='LN.outputs.default')
    assert np.isfinite(got).all() and np.all(got[0, 0] == 0.0), got
    bn.provide_external_data({'default': x})
    bn.forward_pass(training_pass=True)
    assert np.isfinite(bn.get('BN.outputs.default')).all()
