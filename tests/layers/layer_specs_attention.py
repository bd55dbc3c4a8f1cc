"""Registry entries for MultiHeadAttention and PositionEmbedding."""

import numpy as np

from brainstorm.layers.multi_head_attention_layer import MultiHeadAttentionLayerImpl
from brainstorm.layers.position_embedding_layer import PositionEmbeddingLayerImpl


def padding_mask(time_steps, batch_size, rnd):
    """Sequences of random lengths >= 1 (ones, then zeros)."""
    lengths = rnd.randint(1, time_steps + 1, batch_size)
    lengths[-1] = max(1, time_steps - 1)  # at least one padded sequence if T > 1
    return (np.arange(time_steps)[:, None] < lengths[None, :])[:, :, None] * 1.0


def scattered_mask(time_steps, batch_size, rnd):
    """Padding anywhere, whole padding sequences included."""
    return (rnd.uniform(size=(time_steps, batch_size, 1)) < 0.6) * 1.0


def _attention(id_, masked=None, **kwargs):
    kwargs = {'size': 4, 'heads': 2, 'max_len': 5, **kwargs}
    entry = dict(
        id=id_,
        layer_class=MultiHeadAttentionLayerImpl,
        in_shapes={'default': (3,)},
        kwargs=kwargs,
    )
    if masked is not None:
        entry['in_shapes'] = {'default': (3,), 'mask': (1,)}
        entry['spec'] = {'mask': masked}
    return entry


LAYER_SPECS = [
    _attention('MultiHeadAttention'),
    _attention('MultiHeadAttention-causal', causal=True),
    _attention('MultiHeadAttention-masked', masked=padding_mask),
    _attention('MultiHeadAttention-masked-causal', masked=padding_mask, causal=True),
    _attention('MultiHeadAttention-scattered-mask', masked=scattered_mask),
    _attention('MultiHeadAttention-one-head', size=3, heads=1, max_len=4),
    _attention('MultiHeadAttention-dropout', masked=padding_mask, dropout=0.4),
    _attention('MultiHeadAttention-dropout-causal', causal=True, dropout=0.3, heads=4),
    dict(
        id='PositionEmbedding',
        layer_class=PositionEmbeddingLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'max_len': 6},
    ),
    dict(
        id='PositionEmbedding-exact-max-len-multidim',
        layer_class=PositionEmbeddingLayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'max_len': 4},
    ),
]
