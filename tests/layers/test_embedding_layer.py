"""Embedding: learned vectors looked up by class id."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.layers import Embedding, FullyConnected, Input
from brainstorm.layers.embedding_layer import EmbeddingLayerImpl
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_modern import network_round_trips


def _run(ids, W, dy=None, handler=None):
    layer = instantiate_layer(
        EmbeddingLayerImpl, {'default': (1,)}, vocab_size=W.shape[0], size=W.shape[1]
    )
    spec = {
        'time_steps': ids.shape[0],
        'batch_size': ids.shape[1],
        'default': ids,
        'inits': {'W': W},
    }
    buffers, manager = set_up_layer(layer, spec, handler)
    h = manager.handler
    layer.forward_pass(buffers)
    y = h.get_numpy_copy(buffers.outputs.default)
    if dy is None:
        return y, None
    manager.clear_backward_buffers()
    h.fill(buffers.gradients.W, 123.0)  # overwritten, not added to
    h.set_from_numpy(buffers.output_deltas.default, dy)
    layer.backward_pass(buffers)
    return y, h.get_numpy_copy(buffers.gradients.W)


def test_public_name():
    assert bs.layers.Embedding is Embedding
    assert Embedding(5, 2, name='Emb').layer.layer_type == 'Embedding'


def test_lookup_and_gradient_accumulate_over_repeated_ids():
    rng = np.random.RandomState(0)
    W = rng.randn(5, 3)
    ids = np.array([[[1], [4]], [[1], [1]], [[0], [4]]], dtype=float)
    dy = rng.randn(3, 2, 3)
    y, dW = _run(ids, W, dy)
    np.testing.assert_array_equal(y, W[ids[..., 0].astype(int)])
    expected = np.zeros_like(W)
    for t in range(3):
        for b in range(2):
            expected[int(ids[t, b, 0])] += dy[t, b]
    np.testing.assert_allclose(dW, expected, rtol=1e-12)
    np.testing.assert_allclose(dW[1], dy[0, 0] + dy[1, 0] + dy[1, 1], rtol=1e-12)
    assert not dW[2].any() and not dW[3].any()


@pytest.mark.parametrize(
    'bad, where, shown',
    [
        (5.0, (2, 1), '5'),
        (-1.0, (0, 0), '-1'),
        (1.5, (1, 1), '1.5'),
        (np.nan, (2, 0), 'nan'),
    ],
)
def test_bad_id_names_layer_id_and_place(bad, where, shown):
    ids = np.zeros((3, 2, 1))
    ids[where] = bad
    with pytest.raises(NetworkValidationError) as info:
        _run(ids, np.ones((5, 2)))
    message = str(info.value)
    assert "Embedding 'Embedding'" in message, message
    assert f'Received {shown} at time step {where[0]}, sequence {where[1]}' in message
    assert '[0, 5)' in message


def test_several_bad_ids_name_the_first_and_count_the_rest():
    ids = np.array([[[0], [7]], [[9], [8]]], dtype=float)
    with pytest.raises(
        NetworkValidationError,
        match=r'7 at time step 0, sequence 1 '
        r'\(2 more bad id\(s\)\)',
    ):
        _run(ids, np.ones((5, 2)))


def test_bad_ids_are_caught_in_a_network_with_the_plain_numpy_handler():
    inp = Input({'default': ('T', 'B', 1)})
    net = bs.Network.from_layer(inp >> Embedding(3, 2, name='Chars'))
    net.initialize(bs.initializers.Gaussian(0.1))
    net.provide_external_data({'default': np.array([[[0.0]], [[3.0]]])})
    with pytest.raises(
        NetworkValidationError, match="Embedding 'Chars'.*3 at time step 1"
    ):
        net.forward_pass()


def test_in_a_network_with_description_and_hdf5_round_trips(tmp_path):
    inp = Input({'default': ('T', 'B', 1)})
    inp >> Embedding(6, 4, name='Emb') >> FullyConnected(3, name='Out')
    net = bs.Network.from_layer(inp)
    ids = np.random.RandomState(1).randint(0, 6, (5, 2, 1)).astype(float)
    outputs = network_round_trips(net, {'default': ids}, tmp_path)
    W = net.get('Emb.parameters.W')
    np.testing.assert_array_equal(outputs['Emb'], W[ids[..., 0].astype(int)])


@pytest.mark.parametrize(
    'kwargs, argument',
    [
        ({'vocab_size': 0, 'size': 2}, 'vocab_size'),
        ({'vocab_size': 2.5, 'size': 2}, 'vocab_size'),
        ({'vocab_size': 3, 'size': -1}, 'size'),
    ],
)
def test_bad_arguments_name_layer_and_argument(kwargs, argument):
    with pytest.raises(LayerValidationError, match=rf"Embedding 'E'.*{argument}"):
        Embedding(name='E', **kwargs)


def test_input_must_be_one_id_per_position():
    with pytest.raises(LayerValidationError, match=r"Embedding 'Embedding'.*input"):
        instantiate_layer(EmbeddingLayerImpl, {'default': (2,)}, vocab_size=3, size=2)


def test_masked_positions_give_no_gradient():
    """Under a Mask, padding positions (holding id 0 or any valid id)
    contribute nothing to dW."""
    from brainstorm.layers import Loss, Mask

    inp = Input({'default': ('T', 'B', 1), 'mask': ('T', 'B', 1)})
    mask = Mask(name='M')
    inp - 'default' >> Embedding(5, 2, name='Emb') >> mask
    inp - 'mask' >> 'mask' - mask
    mask >> Loss(name='L')
    net = bs.Network.from_layer(inp)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=3)
    ids = np.array([[[1], [2]], [[4], [2]], [[0], [0]]], dtype=float)
    m = np.array([[[1], [1]], [[0], [1]], [[0], [0]]], dtype=float)
    net.provide_external_data({'default': ids, 'mask': m})
    net.forward_pass(training_pass=True)
    net.backward_pass()
    dW = net.get('Emb.gradients.W')
    # Loss adds 1 / batch size to every delta; the mask zeroes padding
    np.testing.assert_allclose(dW[1], [0.5, 0.5])
    np.testing.assert_allclose(dW[2], [1.0, 1.0])
    assert not dW[0].any() and not dW[4].any() and not dW[3].any()


def test_an_id_wrong_beyond_six_digits_is_shown_as_it_is():
    # ':g' printed 2.0000001 as '2': a message refusing a valid-looking id
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    emb = bs.layers.Embedding(5, 3, name='Emb')
    net = bs.Network.from_layer(inp >> emb)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.1))
    # refused as the data comes in (test_id_inputs.py); written into the
    # buffer, by the layer's own check
    with pytest.raises(NetworkValidationError, match=r'2\.0000001 at index'):
        net.provide_external_data({'default': np.array([[[0.0], [2.0000001]]])})
    net.provide_external_data({'default': np.zeros((1, 2, 1))})
    net.buffer.Input.outputs.default[0, 1, 0] = 2.0000001
    with pytest.raises(NetworkValidationError, match=r'Received 2\.0000001 at'):
        net.forward_pass()
