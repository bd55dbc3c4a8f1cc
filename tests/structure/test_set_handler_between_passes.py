"""set_handler keeps the parameters, not the batch or the activations.

Moving a network to another handler between its forward and its backward
pass left the backward pass with zeroed outputs and data: the gradients
came from zeros, silently. The backward pass now raises until a forward
pass has run on the new handler.
"""

import copy

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.structure.network import NetworkValidationError


def network():
    inp, out = bs.tools.get_in_out_layers('classification', (4, 4, 2), 3)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(3, kernel_size=(3, 3), padding=1)
        >> bs.layers.FullyConnected(5)
        >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.1), seed=2)
    return net


DATA = {
    'default': np.random.RandomState(1).rand(1, 3, 4, 4, 2),
    'targets': np.array([[[0], [2], [1]]]),
}


def gradients(net):
    net.provide_external_data(DATA)
    net.forward_pass(training_pass=True)
    net.backward_pass()
    return net.get('gradients').copy()


@pytest.mark.parametrize('copied', [False, True])
def test_a_backward_pass_after_moving_the_network_raises(copied):
    net = network()
    expected = gradients(net)
    net.forward_pass(training_pass=True)
    if copied:
        net = copy.deepcopy(net)
    net.set_handler(NumpyHandler(np.float64))
    with pytest.raises(NetworkValidationError, match='set_handler.*forward_pass'):
        net.backward_pass()
    np.testing.assert_array_equal(gradients(net), expected)


def test_setting_the_same_handler_keeps_the_activations():
    net = network()
    expected = gradients(net)
    net.forward_pass(training_pass=True)
    net.set_handler(net.handler)
    net.backward_pass()
    np.testing.assert_array_equal(net.get('gradients'), expected)
