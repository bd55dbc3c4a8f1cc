"""BatchNorm refuses a running ``sigma`` that is not > 0.

``sigma`` is the running standard deviation the inference pass divides
by: set to 0 or a negative value (by ``initialize`` with the full name, or
in the parameters of a saved network), it gave inf or flipped the sign of
a channel's outputs without a word. It is refused where it is given.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.utils import NetworkValidationError


def bn_net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    layer = inp >> bs.layers.BatchNorm(name='bn') >> bs.layers.FullyConnected(5)
    net = bs.Network.from_layer(layer >> out)
    net.set_handler(NumpyHandler(np.float64))
    return net


@pytest.mark.parametrize('bad', [0.0, -0.5, -1e-300])
def test_initialize_refuses_a_sigma_not_above_zero(bad):
    net = bn_net()
    net.initialize(0.5)
    before = net.get('parameters').copy()
    sigma = [1.0, 2.0, bad, 1.0]
    with pytest.raises(NetworkValidationError) as info:
        net.initialize({'bn': {'sigma': sigma}, 'default': 0.1})
    message = str(info.value)
    assert 'bn.sigma' in message and '> 0' in message, message
    assert f'sigma[2] = {bad!r}' in message, message
    # nothing was set
    np.testing.assert_array_equal(net.get('parameters'), before)


def test_a_saved_network_with_a_negative_sigma_is_refused_when_loaded(tmp_path):
    net = bn_net()
    net.initialize(0.5)
    net.buffer.bn.parameters.sigma[1] = -2.0  # as a user's own code might
    path = str(tmp_path / 'net.h5')
    net.save_as_hdf5(path)
    with pytest.raises(NetworkValidationError) as info:
        bs.Network.from_hdf5(path)
    message = str(info.value)
    assert 'bn.sigma' in message and 'sigma[1] = -2.0' in message, message


def test_a_trained_network_keeps_a_positive_sigma_and_loads(tmp_path):
    net = bn_net()
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    rnd = np.random.RandomState(0)
    for _ in range(3):
        net.provide_external_data(
            {'default': rnd.randn(1, 8, 4), 'targets': rnd.randint(0, 3, (1, 8, 1))}
        )
        net.forward_pass(training_pass=True)
    sigma = net.get('bn.parameters.sigma')
    assert (sigma > 0).all() and not np.allclose(sigma, 1.0)
    path = str(tmp_path / 'net.h5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    np.testing.assert_array_equal(loaded.get('bn.parameters.sigma'), sigma)
