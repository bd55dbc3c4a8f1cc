"""MultiHeadAttention scales Q before Q K^T, so float16 scores do not overflow.

The layer formed ``Q K^T`` and only then multiplied by ``1/sqrt(d)``. With
``d = 64`` and ``|x| <= 35`` the unscaled scores reach ``64 * 35**2 =
78400``, beyond float16's largest value (65504): they became inf, the
softmax gave NaN (inf - inf) and so did the outputs, deltas and gradients,
although the scaled scores (at most 9800) fit float16 well (torch scales
``q`` first). Now ``Q`` is scaled before the product and the backward pass
follows; float64 results are unchanged but for rounding.
"""

import math

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.layers.multi_head_attention_layer import MultiHeadAttentionLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import instantiate_layer, set_up_layer

T, B, D = 3, 2, 64  # D: the size of one head


def _large_inputs(size):
    """Rows of 35, 31.5 and 28: scaled scores <= 9800, unscaled ones 78400."""
    scale = np.array([1.0, 0.9, 0.8])[:, None, None] * 35.0
    return np.ones((T, B, size)) * scale


def _identity_params(size):
    """q = k = v = x and y = context: the attention alone decides y."""
    eye = np.eye(size)
    return {
        'W_qkv': np.concatenate([eye, eye, eye]),
        'bias_qkv': np.zeros(3 * size),
        'W_out': eye,
        'bias_out': np.zeros(size),
    }


def _predict(dtype, x, heads):
    size = x.shape[2]
    inp = bs.layers.Input({'default': ('T', 'B', size)})
    attention = bs.layers.MultiHeadAttention(size, heads, max_len=T, name='Att')
    net = Network.from_layer(inp >> attention)
    net.set_handler(NumpyHandler(dtype))
    net.initialize({'Att': _identity_params(size)})
    net.provide_external_data({'default': x.astype(dtype)})
    net.forward_pass()
    return net.get('Att.outputs.default').astype(np.float64)


@pytest.mark.parametrize('heads', [1, 2])
def test_float16_scores_that_fit_after_scaling_give_finite_outputs(heads):
    x = _large_inputs(heads * D)
    expected = _predict(np.float64, x, heads)
    y = _predict(np.float16, x, heads)
    bad = np.argwhere(~np.isfinite(y))
    assert not len(bad), (
        f'float16 MultiHeadAttention(heads={heads}, d={D}) gave non-finite '
        f'outputs at {len(bad)} entries, first {bad[0].tolist() if len(bad) else None}'
        f'; expected finite ones (max |Q K^T / sqrt(d)| = 9800 fits float16)'
    )
    diff = np.max(np.abs(y - expected))
    assert np.allclose(y, expected, rtol=1e-3, atol=0.0), (
        f'float16 against float64 outputs: max |diff| = {diff} (rtol=1e-3)'
    )
    # every query attends to the largest key: the first row, 35 everywhere
    assert np.allclose(expected, 35.0)


def _deltas_and_gradients(dtype, x, heads, out_deltas):
    size = x.shape[2]
    layer = instantiate_layer(
        MultiHeadAttentionLayerImpl,
        {'default': (size,)},
        size=size,
        heads=heads,
        max_len=T,
    )
    h = NumpyHandler(dtype)
    spec = {'time_steps': T, 'batch_size': B, 'default': x}
    spec['inits'] = _identity_params(size)
    buffers, _ = set_up_layer(layer, spec, h)
    layer.forward_pass(buffers, training_pass=True)
    h.set_from_numpy(buffers.output_deltas.default, out_deltas.astype(dtype))
    h.fill(buffers.input_deltas.default, 0.0)
    layer.backward_pass(buffers)
    results = {'dx': h.get_numpy_copy(buffers.input_deltas.default)}
    for name in ('W_qkv', 'bias_qkv', 'W_out', 'bias_out'):
        results[f'd{name}'] = h.get_numpy_copy(buffers.gradients[name])
    return {name: value.astype(np.float64) for name, value in results.items()}


@pytest.mark.parametrize('heads', [1, 2])
def test_float16_backward_pass_is_finite_and_matches_float64(heads):
    x = _large_inputs(heads * D)
    out_deltas = np.random.RandomState(0).uniform(-1, 1, x.shape)
    expected = _deltas_and_gradients(np.float64, x, heads, out_deltas)
    got = _deltas_and_gradients(np.float16, x, heads, out_deltas)
    for name, value in got.items():
        assert np.all(np.isfinite(value)), (
            f'float16 MultiHeadAttention(heads={heads}): {name} has '
            f'{np.sum(~np.isfinite(value))} non-finite entries; expected none'
        )
        scale = max(np.max(np.abs(expected[name])), 1.0)
        diff = np.max(np.abs(value - expected[name]))
        assert diff <= 2e-3 * scale, (
            f'{name}: float16 against float64 max |diff| = {diff}, '
            f'allowed {2e-3 * scale} (2e-3 * max |float64|)'
        )


def test_float64_outputs_still_follow_the_formula():
    """softmax(Q_h K_h^T / sqrt(d)) V_h per head, causal, as documented."""
    rng = np.random.RandomState(3)
    size, heads, n_in = 6, 2, 4
    d = size // heads
    x = rng.randn(T, B, n_in)
    params = {
        'W_qkv': rng.randn(3 * size, n_in),
        'bias_qkv': rng.randn(3 * size),
        'W_out': rng.randn(size, size),
        'bias_out': rng.randn(size),
    }
    layer = instantiate_layer(
        MultiHeadAttentionLayerImpl,
        {'default': (n_in,)},
        size=size,
        heads=heads,
        causal=True,
        max_len=T,
    )
    h = NumpyHandler(np.float64)
    spec = {'time_steps': T, 'batch_size': B, 'default': x, 'inits': params}
    buffers, _ = set_up_layer(layer, spec, h)
    layer.forward_pass(buffers, training_pass=False)
    y = h.get_numpy_copy(buffers.outputs.default)

    expected = np.empty_like(y)
    future = np.triu(np.ones((T, T), dtype=bool), 1)
    for b in range(B):
        q, k, v = np.split(x[:, b] @ params['W_qkv'].T + params['bias_qkv'], 3, 1)
        context = np.empty((T, size))
        for i in range(heads):
            cols = slice(i * d, (i + 1) * d)
            scores = q[:, cols] @ k[:, cols].T / math.sqrt(d)
            scores[future] = -np.inf
            weights = np.exp(scores - scores.max(1, keepdims=True))
            weights /= weights.sum(1, keepdims=True)
            context[:, cols] = weights @ v[:, cols]
        expected[:, b] = context @ params['W_out'].T + params['bias_out']
    diff = np.max(np.abs(y - expected))
    assert np.allclose(y, expected, rtol=1e-12, atol=1e-12), (
        f'float64 outputs against the formula: max |diff| = {diff}'
    )
