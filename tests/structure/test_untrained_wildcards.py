"""A ``*`` in a parameter pattern does not select untrained parameters.

BatchNorm's running ``mu`` and ``sigma`` and a clock's ``timing`` are
parameters the layer maintains or fixes itself; ``initialize`` and the
modifiers leave them alone unless a pattern names them. ``{'bn': {'*':
Gaussian(0.5)}}`` named them: it set the running ``sigma`` (a standard
deviation) to values around 0, half of them negative, and the network
then normalised with them at inference without a word. Their full names
still select them.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.initializers import Gaussian
from brainstorm.layers import BatchNorm, Clockwork, FullyConnected, Input
from brainstorm.structure.network import Network
from brainstorm.utils import NetworkValidationError
from brainstorm.value_modifiers import ClipValues


def bn_net():
    layer = Input(out_shapes={'default': ('T', 'B', 3)})
    layer = layer >> FullyConnected(3, name='fc') >> BatchNorm(name='bn')
    net = Network.from_layer(layer)
    net.set_handler(NumpyHandler(np.float64))
    return net


def values(net, lname, pname):
    return np.asarray(net.buffer[lname].parameters[pname]).copy()


@pytest.mark.parametrize('pattern', ['*', '*ma', 'm*', 's*a'])
def test_a_wildcard_under_batchnorm_leaves_its_running_statistics(pattern):
    net = bn_net()
    refs = {'bn': {pattern: Gaussian(0.5)}, 'default': 0.25}
    if pattern in ('m*', 's*a'):  # they would select only mu or sigma
        with pytest.raises(NetworkValidationError) as info:
            net.initialize(refs)
        message = str(info.value)
        assert f"'{pattern}'" in message and "'bn'" in message, message
        assert 'untrained' in message and 'full names' in message, message
        assert ('bn.mu' in message) == (pattern == 'm*'), message
        assert ('bn.sigma' in message) == (pattern == 's*a'), message
        return
    net.initialize(refs, seed=3)
    np.testing.assert_array_equal(values(net, 'bn', 'mu'), 0.0)
    np.testing.assert_array_equal(values(net, 'bn', 'sigma'), 1.0)
    # the trained parameters the pattern selects get the Gaussian
    assert len(set(values(net, 'bn', 'gamma').tolist())) == 3
    if pattern == '*':
        assert len(set(values(net, 'bn', 'beta').tolist())) == 3
    else:  # '*ma' selects gamma (and would select sigma), not beta
        np.testing.assert_array_equal(values(net, 'bn', 'beta'), 0.25)


def test_full_names_still_select_the_running_statistics():
    net = bn_net()
    net.initialize({'bn': {'*': 0.5, 'sigma': 2.0, 'mu': -1.0}, 'default': 0.0})
    np.testing.assert_array_equal(values(net, 'bn', 'sigma'), 2.0)
    np.testing.assert_array_equal(values(net, 'bn', 'mu'), -1.0)
    np.testing.assert_array_equal(values(net, 'bn', 'gamma'), 0.5)


def test_a_wildcard_modifier_leaves_the_running_statistics():
    net = bn_net()
    net.initialize(0.0)
    net.set_weight_modifiers({'bn': {'*': ClipValues(-0.1, 0.1)}})
    assert set(net.weight_modifiers['bn']) == {'gamma', 'beta'}
    net.set_weight_modifiers(
        {'bn': {'*': ClipValues(-0.1, 0.1), 'sigma': ClipValues(0.5, 2)}}
    )
    assert set(net.weight_modifiers['bn']) == {'gamma', 'beta', 'sigma'}


def test_a_wildcard_under_a_clockwork_layer_gives_its_periods_the_layers_value():
    layer = Input(out_shapes={'default': ('T', 'B', 2)}) >> Clockwork(4, name='cw')
    net = Network.from_layer(layer)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize({'cw': {'timing': [1, 2, 4, 8], '*': 0.125}})
    np.testing.assert_array_equal(values(net, 'cw', 'timing'), [1, 2, 4, 8])
    np.testing.assert_array_equal(values(net, 'cw', 'W'), 0.125)
    # initialize sets every parameter anew: the periods the pattern does
    # not name get the layer's value, not a value drawn for '*'
    net.initialize({'cw': {'*': 0.5}})
    np.testing.assert_array_equal(values(net, 'cw', 'timing'), 1.0)
    np.testing.assert_array_equal(values(net, 'cw', 'W'), 0.5)
