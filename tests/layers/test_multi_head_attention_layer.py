"""MultiHeadAttention and PositionEmbedding in networks: masks, causality,
max_len, argument errors, dropout, description and HDF5 round trips.

The gradient checks of every configuration are in the layer registry
(``layer_specs_attention.py``)."""

import subprocess
import sys

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.errors import LayerValidationError, NetworkValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.structure.network import Network

F, SIZE = 3, 4


def _net(masked=True, positions=6, **kwargs):
    shapes = {'default': ('T', 'B', F)}
    if masked:
        shapes['mask'] = ('T', 'B', 1)
    inp = bs.layers.Input(shapes)
    kwargs = {'size': SIZE, 'heads': 2, 'max_len': 6, **kwargs}
    attention = bs.layers.MultiHeadAttention(name='Att', **kwargs)
    if masked:
        inp - 'mask' >> 'mask' - attention
    net = Network.from_layer(
        inp >> bs.layers.PositionEmbedding(positions, name='Pos') >> attention
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.7), seed=2)
    return net


def _outputs(net, x, mask=None, training_pass=False):
    data = {'default': x}
    if mask is not None:
        data['mask'] = mask
    net.provide_external_data(data)
    net.forward_pass(training_pass=training_pass)
    return net.get('Att.outputs.default').copy()


def _data(T=5, B=3, seed=0):
    rng = np.random.RandomState(seed)
    lengths = np.array([T, 2, 1])[:B]
    mask = (np.arange(T)[:, None] < lengths[None, :])[:, :, None] * 1.0
    return rng.randn(T, B, F), mask


def test_padding_positions_give_and_receive_no_attention():
    net = _net()
    x, mask = _data()
    y = _outputs(net, x, mask)
    changed = x.copy()
    changed[mask[:, :, 0] == 0] = 100.0  # garbage in the padding
    y_changed = _outputs(net, changed, mask)
    real = mask[:, :, 0] != 0
    np.testing.assert_allclose(y_changed[real], y[real], rtol=1e-12)
    # padding queries attend to nothing: their output is the output bias
    bias_out = net.get('Att.parameters.bias_out')
    np.testing.assert_allclose(y[~real], np.broadcast_to(bias_out, y[~real].shape))
    weights = net.get('Att.internals.weights')[:, :, :, :5]
    assert np.all(weights[~real] == 0)
    assert np.all(weights.transpose(3, 1, 2, 0)[~real] == 0)  # as keys
    np.testing.assert_allclose(weights[real].sum(axis=-1), 1.0)


def test_the_same_sequence_alone_or_padded_gives_the_same_outputs():
    net = _net()
    x, mask = _data()
    y = _outputs(net, x, mask)
    alone = _outputs(net, x[:2, 1:2], np.ones((2, 1, 1)))
    np.testing.assert_allclose(alone[:, 0], y[:2, 1], rtol=1e-10)


def test_causal_attention_does_not_look_ahead():
    net = _net(masked=False, causal=True)
    x, _ = _data()
    y = _outputs(net, x)
    later = x.copy()
    later[3:] = np.random.RandomState(9).randn(2, 3, F)
    y_later = _outputs(net, later)
    np.testing.assert_allclose(y_later[:3], y[:3], rtol=1e-12)
    assert not np.allclose(y_later[3:], y[3:])
    non_causal = _net(masked=False)
    assert not np.allclose(_outputs(non_causal, later)[:3], _outputs(non_causal, x)[:3])


def test_without_mask_every_position_is_real():
    x, _ = _data()
    ones = np.ones(x.shape[:2] + (1,))
    masked, unmasked = _net(), _net(masked=False)
    np.testing.assert_allclose(_outputs(masked, x, ones), _outputs(unmasked, x))


@pytest.mark.parametrize('layer', ['Att', 'Pos'])
def test_sequences_longer_than_max_len_raise_saying_so(layer):
    # the other layer accepts 7 steps, so the error comes from ``layer``
    net = _net(masked=False, max_len=7) if layer == 'Pos' else _net(masked=False)
    if layer == 'Att':  # a PositionEmbedding table of 8 rows in front
        net = _net(masked=False, positions=8)
    x = np.zeros((7, 2, F))
    with pytest.raises(
        NetworkValidationError, match=rf"'{layer}'.* 7 time steps.*max_len=6"
    ):
        _outputs(net, x)


def test_argument_errors_name_the_layer_and_the_argument():
    inp = bs.layers.Input({'default': ('T', 'B', F)})
    with pytest.raises(LayerValidationError, match=r"'A'.*'size'.*multiple.*heads"):
        Network.from_layer(inp >> bs.layers.MultiHeadAttention(5, 2, name='A'))
    for kwargs, name in (
        ({'size': 4, 'heads': 0}, 'heads'),
        ({'size': 4, 'heads': 2, 'max_len': 0}, 'max_len'),
        ({'size': 4, 'heads': 2, 'causal': 'yes'}, 'causal'),
        ({'size': 4, 'heads': 2, 'dropout': 1.0}, 'dropout'),
    ):
        inp = bs.layers.Input({'default': ('T', 'B', F)})
        with pytest.raises(LayerValidationError, match=rf"'A'.*{name}"):
            Network.from_layer(inp >> bs.layers.MultiHeadAttention(name='A', **kwargs))
    inp = bs.layers.Input({'default': ('T', 'B', F), 'mask': ('T', 'B', 2)})
    attention = bs.layers.MultiHeadAttention(4, 2, name='A')
    inp - 'mask' >> 'mask' - attention
    with pytest.raises(LayerValidationError, match=r"'A'.*'mask'"):
        Network.from_layer(inp >> attention)
    inp = bs.layers.Input({'default': ('T', 'B', F)})
    with pytest.raises(LayerValidationError, match=r"'P'.*max_len"):
        Network.from_layer(inp >> bs.layers.PositionEmbedding(-1, name='P'))


def test_dropout_on_the_weights_only_in_training():
    x, mask = _data()
    plain, dropping = _net(), _net(dropout=0.5)
    reference = _outputs(plain, x, mask)
    np.testing.assert_allclose(_outputs(dropping, x, mask), reference)
    trained = _outputs(dropping, x, mask, training_pass=True)
    assert not np.allclose(trained, reference)
    drop_mask = dropping.get('Att.internals.drop_mask')[:, :, :, :5]
    assert set(np.unique(drop_mask)) <= {0.0, 2.0}


def test_description_and_hdf5_round_trips(tmp_path):
    net = _net(causal=True, dropout=0.1)
    x, mask = _data()
    y = _outputs(net, x, mask)
    copy = create_from_description(get_description(net))
    copy.set_handler(NumpyHandler(np.float64))
    copy.buffer.parameters[:] = net.buffer.parameters
    np.testing.assert_allclose(_outputs(copy, x, mask), y)
    net.save_as_hdf5(str(tmp_path / 'att.h5'))
    loaded = Network.from_hdf5(str(tmp_path / 'att.h5'))
    loaded.set_handler(NumpyHandler(np.float64))
    np.testing.assert_allclose(_outputs(loaded, x, mask), y, rtol=1e-12)
    layer = loaded.layers['Att']
    assert (layer.causal, layer.dropout, layer.heads) == (True, 0.1, 2)


def test_fresh_process_builds_a_transformer_block_from_the_public_api():
    code = (
        'import numpy as np, brainstorm as bs\n'
        "inp = bs.layers.Input({'default': ('T', 'B', 4), 'mask': ('T', 'B', 1)})\n"
        'att = bs.layers.MultiHeadAttention(4, 2, causal=True, max_len=8)\n'
        "inp - 'mask' >> 'mask' - att\n"
        'net = bs.Network.from_layer(inp >> bs.layers.PositionEmbedding(8) >> att)\n'
        'net.initialize(bs.initializers.Gaussian(0.1), seed=1)\n'
        "net.provide_external_data({'default': np.ones((3, 2, 4)), "
        "'mask': np.ones((3, 2, 1))})\n"
        'net.forward_pass()\n'
        "print(net.get('MultiHeadAttention.outputs.default').shape)\n"
    )
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == '(3, 2, 4)'
