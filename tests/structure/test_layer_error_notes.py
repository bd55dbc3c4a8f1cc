"""An error raised inside a layer's pass says which layer it came from.

A handler op's error names the op (``maxpool2d_forward_batch: ...``), not
the layer that called it; the network adds a note naming the layer, its
class and the pass (Python 3.11 on, where exceptions take notes).
"""

import sys

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 11), reason='exception notes came with Python 3.11'
)


def network():
    inp, out = bs.tools.get_in_out_layers('classification', (4, 4, 2), 3)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Pooling2D((2, 2), type='max', stride=(2, 2), name='pool')
        >> bs.layers.FullyConnected(5, name='hidden')
        >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.1), seed=2)
    x = np.random.RandomState(1).rand(1, 3, 4, 4, 2)
    net.provide_external_data({'default': x, 'targets': np.zeros((1, 3, 1))})
    return net


class Broken(Exception):
    pass


def failing(*args, **kwargs):
    raise Broken('the op failed')


def test_an_error_in_a_forward_pass_names_the_layer(monkeypatch):
    net = network()
    monkeypatch.setattr(net.handler, 'maxpool2d_forward_batch', failing)
    with pytest.raises(Broken, match='the op failed') as info:
        net.forward_pass()
    assert info.value.__notes__ == [
        "raised in the forward_pass of layer 'pool' (Pooling2DLayerImpl)"
    ]


def test_an_error_in_a_backward_pass_names_the_layer(monkeypatch):
    net = network()
    net.forward_pass(training_pass=True)
    monkeypatch.setattr(net.handler, 'dot_mm', failing)
    with pytest.raises(Broken) as info:
        net.backward_pass()
    notes = info.value.__notes__
    assert len(notes) == 1
    assert notes[0].startswith('raised in the backward_pass of layer ')
    # the network is usable again afterwards
    monkeypatch.undo()
    net.forward_pass(training_pass=True)
    net.backward_pass()
    assert np.isfinite(net.get('gradients')).all()
