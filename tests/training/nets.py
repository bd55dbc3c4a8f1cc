"""Small networks, data sets and helpers shared by the training, hook,
tool and value-modifier tests."""

from collections import Counter

import numpy as np

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.handlers import NumpyHandler
from brainstorm.hooks import Hook
from brainstorm.initializers import Gaussian
from brainstorm.layers import BatchNorm, Dropout, FullyConnected
from brainstorm.structure.network import Network
from brainstorm.tools import get_in_out_layers

XOR_INPUTS = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=float)
XOR_TARGETS = np.array([0, 1, 1, 0])


def xor_data():
    """XOR as ``(1, 4, 2)`` inputs and ``(1, 4, 1)`` class ids."""
    return {
        'default': XOR_INPUTS.reshape(1, 4, 2),
        'targets': XOR_TARGETS.reshape(1, 4, 1),
    }


def xor_net(
    hidden=8, activation='tanh', dtype=np.float64, seed=1, handler=None, std=1.0
):
    """Input(2) -> FullyConnected 'Hid' -> Output_projection -> SoftmaxCE."""
    inp, proj = get_in_out_layers('classification', 2, 2)
    net = Network.from_layer(
        inp >> FullyConnected(hidden, activation=activation, name='Hid') >> proj
    )
    net.set_handler(handler or NumpyHandler(dtype, seed=seed))
    net.initialize(Gaussian(std), seed=seed)
    net.output_name = 'Output.outputs.predictions'
    return net


def batchnorm_net(seed=1):
    """Input(3) -> FC 'Hid' (4) -> BatchNorm 'BN' -> projection (2)."""
    inp, proj = get_in_out_layers('classification', 3, 2)
    net = Network.from_layer(
        inp >> FullyConnected(4, name='Hid') >> BatchNorm(name='BN') >> proj
    )
    net.set_handler(NumpyHandler(np.float64, seed=seed))
    net.initialize(Gaussian(0.5), seed=seed)
    net.output_name = 'Output.outputs.predictions'
    return net


def dropout_net(seed=1, dtype=np.float64):
    """Input(4) -> Dropout -> FC 'Hid1' -> Dropout -> FC 'Hid2' -> out(3)."""
    inp, proj = get_in_out_layers('classification', 4, 3)
    net = Network.from_layer(
        inp
        >> Dropout(0.2)
        >> FullyConnected(6, name='Hid1')
        >> Dropout(0.3)
        >> FullyConnected(5, activation='tanh', name='Hid2')
        >> proj
    )
    net.set_handler(NumpyHandler(dtype, seed=seed))
    net.initialize(Gaussian(0.3), seed=seed)
    net.output_name = 'Output.outputs.predictions'
    return net


def blob_data(n=40, seed=0):
    """Three noisy clusters in 4-D: ``(1, n, 4)`` inputs, ``(1, n, 1)`` ids."""
    rnd = np.random.RandomState(seed)
    ids = rnd.randint(0, 3, n)
    centers = rnd.randn(3, 4) * 2
    x = centers[ids] + rnd.randn(n, 4) * 0.5
    return {'default': x.reshape(1, n, 4), 'targets': ids.reshape(1, n, 1)}


def minibatches(data, batch_size=8, shuffle=True):
    return Minibatches(batch_size, shuffle=shuffle, **data)


def undivided(data):
    return Undivided(**data)


class Recorder(Hook):
    """Records every call as ``(timescale, epoch_nr, update_nr)``; returns
    ``value`` (if not None) to be logged."""

    def __init__(
        self, name=None, timescale='epoch', interval=1, value=None, calls=None
    ):
        super().__init__(name, timescale, interval)
        self.value = value
        self.calls = [] if calls is None else calls

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        self.calls.append((self.timescale, epoch_nr, update_nr))
        return self.value


class StopAtUpdate(Hook):
    """Raises StopIteration once ``update_nr >= update``."""

    def __init__(self, update, name=None):
        super().__init__(name, 'update', 1)
        self.update = update

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if update_nr >= self.update:
            raise StopIteration


def roundtrip(obj):
    """``obj`` described, sent through JSON and recreated."""
    import json

    return bs.create_from_description(json.loads(json.dumps(bs.get_description(obj))))


class CountingHandler(NumpyHandler):
    """A NumpyHandler that counts the arrays it creates: ``allocations`` in
    all, ``calls`` per allocating op."""

    def __init__(self, dtype=np.float64, seed=None):
        self.allocations = 0
        self.calls = Counter()
        super().__init__(dtype, seed=seed)

    def _count(self, op: str) -> None:
        self.allocations += 1
        self.calls[op] += 1

    def allocate(self, shape):
        self._count('allocate')
        return super().allocate(shape)

    def zeros(self, shape):
        self._count('zeros')
        return super().zeros(shape)

    def ones(self, shape):
        self._count('ones')
        return super().ones(shape)

    def create_from_numpy(self, arr):
        self._count('create_from_numpy')
        return super().create_from_numpy(arr)
