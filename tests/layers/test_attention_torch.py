"""MultiHeadAttention against torch.nn.MultiheadAttention (skipped without torch).

The same weights (brainstorm's ``W_qkv``, ``bias_qkv``, ``W_out`` and
``bias_out`` are torch's ``in_proj_weight``, ``in_proj_bias``,
``out_proj.weight`` and ``out_proj.bias``), the same time-major inputs
``(T, B, F)``, float32 on both sides: outputs, input deltas and all four
gradients agree within float32 tolerance. Padding is torch's
``key_padding_mask``, causality its boolean ``attn_mask``. Torch lets
padding queries attend to the real keys, brainstorm gives them no attention
(output ``bias_out``): the comparison weights the outputs of real
positions only.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.layers.multi_head_attention_layer import MultiHeadAttentionLayerImpl
from brainstorm.testing import instantiate_layer, set_up_layer

torch = pytest.importorskip('torch')

TOLERANCE = {'rtol': 2e-4, 'atol': 2e-5}


def _brainstorm(x, mask, params, out_weights, heads, causal):
    T, B, F = x.shape
    size = params['W_out'].shape[0]
    in_shapes = {'default': (F,)}
    spec = {'time_steps': T, 'batch_size': B, 'default': x}
    if mask is not None:
        in_shapes['mask'] = (1,)
        spec['mask'] = mask
    layer = instantiate_layer(
        MultiHeadAttentionLayerImpl,
        in_shapes,
        size=size,
        heads=heads,
        causal=causal,
        max_len=T + 2,
    )
    spec['inits'] = params
    h = NumpyHandler(np.float32)
    buffers, _ = set_up_layer(layer, spec, h)
    layer.forward_pass(buffers, training_pass=True)
    h.set_from_numpy(buffers.output_deltas.default, out_weights)
    h.fill(buffers.input_deltas.default, 0.0)
    layer.backward_pass(buffers)
    get = h.get_numpy_copy
    return {
        'y': get(buffers.outputs.default),
        'dx': get(buffers.input_deltas.default),
        **{f'd{name}': get(buffers.gradients[name]) for name in params},
    }


def _torch(x, mask, params, out_weights, heads, causal):
    T, B, F = x.shape
    size = params['W_out'].shape[0]
    mha = torch.nn.MultiheadAttention(size, heads, dropout=0.0, bias=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(torch.tensor(params['W_qkv']))
        mha.in_proj_bias.copy_(torch.tensor(params['bias_qkv']))
        mha.out_proj.weight.copy_(torch.tensor(params['W_out']))
        mha.out_proj.bias.copy_(torch.tensor(params['bias_out']))
    xt = torch.tensor(x, dtype=torch.float32, requires_grad=True)
    kwargs = {'need_weights': False}
    if mask is not None:
        kwargs['key_padding_mask'] = torch.tensor(mask[:, :, 0].T == 0)
    if causal:
        kwargs['attn_mask'] = torch.ones(T, T, dtype=torch.bool).triu(1)
    y, _ = mha(xt, xt, xt, **kwargs)
    (y * torch.tensor(out_weights)).sum().backward()
    return {
        'y': y.detach().numpy(),
        'dx': xt.grad.numpy(),
        'dW_qkv': mha.in_proj_weight.grad.numpy(),
        'dbias_qkv': mha.in_proj_bias.grad.numpy(),
        'dW_out': mha.out_proj.weight.grad.numpy(),
        'dbias_out': mha.out_proj.bias.grad.numpy(),
    }


@pytest.mark.parametrize('causal', [False, True], ids=['full', 'causal'])
@pytest.mark.parametrize('masked', [False, True], ids=['no-mask', 'padded'])
@pytest.mark.parametrize('T, B', [(5, 3), (1, 1), (4, 1)])
def test_outputs_and_gradients_match_torch(T, B, masked, causal):
    rng = np.random.RandomState(T * 10 + B)
    size, heads = 8, 2
    x = rng.randn(T, B, size).astype(np.float32)
    params = {
        'W_qkv': rng.randn(3 * size, size) * 0.4,
        'bias_qkv': rng.randn(3 * size) * 0.1,
        'W_out': rng.randn(size, size) * 0.4,
        'bias_out': rng.randn(size) * 0.1,
    }
    params = {k: v.astype(np.float32) for k, v in params.items()}
    mask = None
    real = np.ones((T, B), dtype=bool)
    if masked:
        lengths = rng.randint(1, T + 1, B)
        lengths[0] = T
        real = np.arange(T)[:, None] < lengths[None, :]
        mask = real[:, :, None].astype(np.float32)
    out_weights = (rng.randn(T, B, size) * real[:, :, None]).astype(np.float32)

    ours = _brainstorm(x, mask, params, out_weights, heads, causal)
    theirs = _torch(x, mask, params, out_weights, heads, causal)
    np.testing.assert_allclose(ours['y'][real], theirs['y'][real], **TOLERANCE)
    for key in ('dx', 'dW_qkv', 'dbias_qkv', 'dW_out', 'dbias_out'):
        np.testing.assert_allclose(ours[key], theirs[key], err_msg=key, **TOLERANCE)
