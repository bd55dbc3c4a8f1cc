"""Contexts carried between batches: an empty batch, bad contexts, moves.

* A batch of no time steps (``T = 0``) between two others dropped the
  context it was given: ``get_context`` returned ``[None, None, None]`` and
  the next batch started from zero (outputs 0.23 off).
* A context of NaN was taken (the outputs became NaN), while
  ``provide_external_data`` refuses non-finite data.
* A NumPy copy of a context failed on ``DebugHandler`` naming an internal
  op's argument.
* ``get_context`` after ``set_handler`` returned zeros silently, where
  ``backward_pass`` raises.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import DebugHandler, NumpyHandler
from tests.onednn_support import onednn_handler

LAYERS = {
    'Lstm': lambda: bs.layers.Lstm(3, name='R'),
    'Recurrent': lambda: bs.layers.Recurrent(3, name='R'),
    'GRU': lambda: bs.layers.GRU(3, name='R'),
    'Clockwork': lambda: bs.layers.Clockwork(3, name='R'),
}
HANDLERS = {
    'numpy64': lambda: NumpyHandler(np.float64),
    'onednn32': lambda: onednn_handler(np.float32),
    'debug': lambda: DebugHandler(NumpyHandler(np.float64)),
}


def _net(layer, handler):
    inp = bs.layers.Input({'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(inp >> layer())
    net.set_handler(handler())
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def _outputs(net, x, context=None):
    net.provide_external_data({'default': x})
    net.forward_pass(context=context)
    return net.get('R.outputs.default')[: x.shape[0]]


@pytest.mark.parametrize('handler', HANDLERS.values(), ids=HANDLERS)
@pytest.mark.parametrize('layer', LAYERS.values(), ids=LAYERS)
def test_a_batch_without_time_steps_hands_its_context_on(layer, handler):
    net = _net(layer, handler)
    x = np.random.RandomState(0).randn(6, 2, 2)
    whole = _outputs(net, x)
    _outputs(net, x[:3])
    context = net.get_context()
    _outputs(net, x[3:3], context)
    carried = net.get_context()
    assert carried[2] is not None
    rest = _outputs(net, x[3:], carried)
    tolerance = 1e-5 if net.handler.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(rest, whole[3:], rtol=tolerance, atol=tolerance)


@pytest.mark.parametrize('value', [np.nan, np.inf])
def test_a_context_of_non_finite_values_is_refused(value):
    net = _net(LAYERS['Lstm'], HANDLERS['numpy64'])
    x = np.random.RandomState(0).randn(3, 2, 2)
    _outputs(net, x)
    context = net.get_context()
    context[2][0, 1, 0] = value
    net.provide_external_data({'default': x})
    with pytest.raises(NetworkValidationError, match='NaN or infinite'):
        net.forward_pass(context=context)


def test_a_numpy_copy_of_a_context_is_taken_by_a_debug_handler_network():
    numpy_net = _net(LAYERS['Lstm'], HANDLERS['numpy64'])
    debug_net = _net(LAYERS['Lstm'], HANDLERS['debug'])
    x = np.random.RandomState(0).randn(3, 2, 2)
    _outputs(numpy_net, x)
    context = numpy_net.get_context()
    assert isinstance(context[2], np.ndarray)
    expected = _outputs(numpy_net, x, context)
    np.testing.assert_array_equal(_outputs(debug_net, x, context), expected)


def test_get_context_after_set_handler_is_refused_until_the_next_pass():
    net = _net(LAYERS['Lstm'], HANDLERS['numpy64'])
    assert net.get_context() == [None, None, None]  # before any batch
    x = np.random.RandomState(0).randn(3, 2, 2)
    _outputs(net, x)
    before = net.get_context()[2].copy()
    assert np.abs(before).max() > 0
    net.set_handler(NumpyHandler(np.float64))
    with pytest.raises(
        NetworkValidationError, match='get_context before a forward_pass'
    ):
        net.get_context()
    _outputs(net, x)
    np.testing.assert_array_equal(net.get_context()[2], before)
