"""The new layers through the public API in a fresh process, with defaults."""

import subprocess
import sys

SCRIPT = r"""
import numpy as np
import brainstorm as bs
from brainstorm.layers import (Add, Elementwise, Embedding, FullyConnected,
    GlobalPooling, Input, LayerNorm, Softmax, SoftmaxCE, Convolution2D)

inp = Input({'default': ('T', 'B', 1), 'targets': ('T', 'B', 1)})
emb = inp - 'default' >> Embedding(7, 4, name='Emb')
add = Add(name='Residual')
emb >> 'inputs_1' - add
emb >> LayerNorm(name='Norm') >> FullyConnected(4, activation='linear') \
    >> Elementwise('gelu') >> 'inputs_2' - add
out = SoftmaxCE(name='Out')
add >> FullyConnected(7, activation='linear', name='Logits') >> out
inp - 'targets' >> 'targets' - out
add >> Softmax(name='Probs')
net = bs.Network.from_layer(inp)
net.initialize(bs.initializers.Gaussian(0.1), seed=1)
rng = np.random.RandomState(0)
ids = rng.randint(0, 7, (5, 3, 1))
net.provide_external_data({'default': ids, 'targets': ids})
net.forward_pass(training_pass=True)
net.backward_pass()
loss = net.get_loss_values()['total_loss']
assert np.isfinite(loss) and np.isfinite(net.get('gradients')).all()
assert np.allclose(net.get('Probs.outputs.default').sum(-1), 1, atol=1e-5)

img = Input({'default': ('T', 'B', 6, 5, 2)})
conv = Convolution2D(3, (3, 3), padding=1, activation='relu')
img >> conv >> GlobalPooling('max', name='Pool')
cnn = bs.Network.from_layer(img)
cnn.initialize(bs.initializers.Gaussian(0.1), seed=1)
cnn.provide_external_data({'default': rng.randn(1, 2, 6, 5, 2)})
cnn.forward_pass()
pooled = cnn.get('Pool.outputs.default')
print('ok', net.handler.dtype.__name__, pooled.shape, round(float(loss), 3))
"""


def test_new_layers_work_from_a_fresh_process():
    result = subprocess.run(
        [sys.executable, '-c', SCRIPT], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    words = result.stdout.split()
    assert words[:4] == ['ok', 'float32', '(1,', '2,'], result.stdout
    assert words[4] == '3)'
