"""Embedding and LayerNorm against their PyTorch counterparts.

Skipped where PyTorch is not installed (it is never a dependency). Both
sides run in float32 with the same weights; outputs, input deltas and
gradients must agree within float32 tolerance.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.testing import instantiate_layer, set_up_layer

torch = pytest.importorskip('torch')


def _run_brainstorm(layer_class, in_shapes, kwargs, spec, dy):
    layer = instantiate_layer(layer_class, in_shapes, **kwargs)
    buffers, manager = set_up_layer(layer, spec, NumpyHandler(np.float32))
    h = manager.handler
    layer.forward_pass(buffers, training_pass=True)
    manager.clear_backward_buffers()
    h.set_from_numpy(buffers.output_deltas.default, dy)
    layer.backward_pass(buffers)
    get = h.get_numpy_copy
    return (
        get(buffers.outputs.default),
        {n: get(a) for n, a in buffers.input_deltas.items()},
        {n: get(a) for n, a in buffers.gradients.items()},
    )


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize('features', [(6,), (2, 3)])
def test_layer_norm_matches_torch(features):
    from brainstorm.layers.layer_norm_layer import LayerNormLayerImpl

    rng = np.random.RandomState(0)
    t, b = 3, 2
    x = (rng.randn(t, b, *features) * 2 + 0.5).astype(np.float32)
    gamma = rng.randn(*features).astype(np.float32)
    beta = rng.randn(*features).astype(np.float32)
    dy = rng.randn(t, b, *features).astype(np.float32)
    spec = {
        'time_steps': t,
        'batch_size': b,
        'default': x,
        'inits': {'gamma': gamma, 'beta': beta},
    }
    y, deltas, grads = _run_brainstorm(
        LayerNormLayerImpl, {'default': features}, {'epsilon': 1e-3}, spec, dy
    )

    norm = torch.nn.LayerNorm(features, eps=1e-3)
    with torch.no_grad():
        norm.weight.copy_(torch.from_numpy(gamma))
        norm.bias.copy_(torch.from_numpy(beta))
    tx = torch.from_numpy(x).requires_grad_(True)
    ty = norm(tx)
    ty.backward(torch.from_numpy(dy))
    _close(y, ty.detach().numpy())
    _close(deltas['default'], tx.grad.numpy())
    _close(grads['gamma'], norm.weight.grad.numpy())
    _close(grads['beta'], norm.bias.grad.numpy())


def test_embedding_matches_torch():
    from brainstorm.layers.embedding_layer import EmbeddingLayerImpl

    rng = np.random.RandomState(1)
    t, b, vocab, size = 4, 3, 6, 5
    ids = rng.randint(0, vocab, (t, b, 1)).astype(np.float32)
    W = rng.randn(vocab, size).astype(np.float32)
    dy = rng.randn(t, b, size).astype(np.float32)
    spec = {'time_steps': t, 'batch_size': b, 'default': ids, 'inits': {'W': W}}
    y, _, grads = _run_brainstorm(
        EmbeddingLayerImpl,
        {'default': (1,)},
        {'vocab_size': vocab, 'size': size},
        spec,
        dy,
    )

    embedding = torch.nn.Embedding(vocab, size)
    with torch.no_grad():
        embedding.weight.copy_(torch.from_numpy(W))
    ty = embedding(torch.from_numpy(ids[..., 0].astype(np.int64)))
    ty.backward(torch.from_numpy(dy))
    _close(y, ty.detach().numpy())
    _close(grads['W'], embedding.weight.grad.numpy())
