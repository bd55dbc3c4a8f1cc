"""End-to-end learning: XOR with every stepper, an LSTM delayed copy, and a
CNN telling horizontal from vertical bars (seeded, each a few seconds)."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.handlers import NumpyHandler
from brainstorm.hooks import MonitorScores, StopAfterEpoch
from brainstorm.initializers import Gaussian
from brainstorm.layers import Convolution2D, FullyConnected, Lstm, Pooling2D
from brainstorm.scorers import Accuracy
from brainstorm.structure.network import Network
from brainstorm.tools import evaluate, get_in_out_layers
from brainstorm.training import Trainer
from brainstorm.training.steppers import (
    AdamStepper,
    AdamWStepper,
    MomentumStepper,
    MultiStepper,
    NesterovStepper,
    RMSPropStepper,
    SgdStepper,
)
from tests.training.nets import xor_data, xor_net


def train(net, stepper, train_iter, epochs, **named):
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(epochs))
    trainer.train(net, train_iter, **named)
    return trainer


@pytest.mark.parametrize(
    'make, epochs',
    [
        (lambda: SgdStepper(0.5), 400),
        (lambda: MomentumStepper(0.5, 0.9), 300),
        (lambda: NesterovStepper(0.5, 0.9), 300),
        (lambda: RMSPropStepper(0.02), 300),
        (lambda: AdamStepper(0.05), 300),
        (lambda: AdamWStepper(0.05, weight_decay=0.01), 300),
        (
            lambda: MultiStepper(
                {'Hid': AdamStepper(0.05), 'default': MomentumStepper(0.5, 0.9)}
            ),
            300,
        ),
    ],
    ids=['sgd', 'momentum', 'nesterov', 'rmsprop', 'adam', 'adamw', 'multi'],
)
def test_xor_reaches_full_accuracy(make, epochs):
    bs.global_rnd.set_seed(42)
    net = xor_net(hidden=6, dtype=np.float32, seed=3)
    data = Undivided(**xor_data())
    trainer = Trainer(make(), verbose=False)
    trainer.add_hook(MonitorScores('xor', [Accuracy()], name='score', interval=epochs))
    trainer.add_hook(StopAfterEpoch(epochs))
    trainer.train(net, data, xor=data)
    assert trainer.logs['score']['Accuracy'][-1] == 1.0
    assert trainer.logs['score']['total_loss'][-1] < 0.2


def delayed_copy_data(n, time_steps=8, delay=2, seed=0):
    """Random bits; the target at time t is the bit at t - delay (0 before)."""
    rnd = np.random.RandomState(seed)
    bits = rnd.randint(0, 2, (time_steps, n, 1))
    targets = np.zeros_like(bits)
    targets[delay:] = bits[:-delay]
    return {'default': bits.astype(float), 'targets': targets}


def test_lstm_learns_delayed_copy():
    bs.global_rnd.set_seed(1)
    inp, proj = get_in_out_layers('classification', 1, 2)
    net = Network.from_layer(inp >> Lstm(12, name='Lstm') >> proj)
    net.set_handler(NumpyHandler(np.float32, seed=1))
    net.initialize({'default': Gaussian(0.3), 'Lstm': {'bf': 1.0}}, seed=2)
    net.output_name = 'Output.outputs.predictions'
    train_iter = Minibatches(16, **delayed_copy_data(64, seed=0))
    test_iter = Undivided(**delayed_copy_data(64, seed=1))
    before = evaluate(net, test_iter, [Accuracy()])['Accuracy']
    train(net, AdamStepper(0.03), train_iter, 60)
    after = evaluate(net, test_iter, [Accuracy()])['Accuracy']
    assert before < 0.7
    assert after > 0.97


def bars_data(n, size=6, seed=0):
    """Images with one horizontal (class 0) or vertical (class 1) bar."""
    rnd = np.random.RandomState(seed)
    images = rnd.rand(1, n, size, size, 1) * 0.2
    labels = rnd.randint(0, 2, n)
    positions = rnd.randint(0, size, n)
    for i, (label, pos) in enumerate(zip(labels, positions)):
        if label == 0:
            images[0, i, pos, :, 0] += 1.0
        else:
            images[0, i, :, pos, 0] += 1.0
    return {'default': images, 'targets': labels.reshape(1, n, 1)}


def test_cnn_tells_horizontal_from_vertical_bars():
    bs.global_rnd.set_seed(3)
    inp, proj = get_in_out_layers('classification', (6, 6, 1), 2)
    net = Network.from_layer(
        inp
        >> Convolution2D(4, (3, 3), padding=1, name='Conv')
        >> Pooling2D((2, 2), stride=(2, 2), name='Pool')
        >> FullyConnected(8, name='FC')
        >> proj
    )
    net.set_handler(NumpyHandler(np.float32, seed=3))
    net.initialize(Gaussian(0.3), seed=4)
    net.output_name = 'Output.outputs.predictions'
    train_iter = Minibatches(20, **bars_data(80, seed=0))
    test_iter = Undivided(**bars_data(100, seed=1))
    train(
        net,
        MultiStepper({'Conv': AdamStepper(0.02), 'default': MomentumStepper(0.2, 0.9)}),
        train_iter,
        25,
    )
    assert evaluate(net, test_iter, [Accuracy()])['Accuracy'] >= 0.95
