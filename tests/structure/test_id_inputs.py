"""Float ids that the cast to the handler's dtype would change are refused.

Embedding ids and SoftmaxCE targets come as floats holding whole numbers.
float16 holds every whole number only up to 2048: the float64 2049.0 became
2048 and 2.0001 became 2, so the network read another row or class without
a word (the layers' own checks see the cast values). Layers name such
inputs in ``id_inputs``; the network refuses data for them that the cast
would change, and leaves other data (where rounding is what a narrower
dtype means) alone.
"""

import copy
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper


def _net(dtype=np.float16, vocab=3000):
    """'ids' -> Embedding 'emb' -> FC -> SoftmaxCE 'out' <- 'targets'; 'x' -> FC."""
    inp = bs.layers.Input(
        {'ids': ('T', 'B', 1), 'targets': ('T', 'B', 1), 'x': ('T', 'B', 2)}
    )
    out = bs.layers.SoftmaxCE(name='out')
    inp - 'ids' >> bs.layers.Embedding(vocab, 3, name='emb') >> 'default' - out
    inp - 'targets' >> 'targets' - out
    inp - 'x' >> bs.layers.FullyConnected(1, name='side')
    net = bs.Network.from_layer(out)
    net.set_handler(NumpyHandler(dtype))
    net.initialize(bs.initializers.Gaussian(0.1), seed=3)
    return net


def _data(ids=0.0, targets=0.0, x=0.5):
    return {
        'ids': np.full((1, 2, 1), ids),
        'targets': np.full((1, 2, 1), targets),
        'x': np.full((1, 2, 2), x),
    }


def test_float16_refuses_a_float_id_beyond_2048():
    net = _net(vocab=3000)
    data = _data()
    data['ids'][0, 1, 0] = 2049.0
    with pytest.raises(NetworkValidationError) as info:
        net.provide_external_data(data)
    message = str(info.value)
    for part in (
        "Input 'ids'",
        "Embedding 'emb'",
        '2049.0',
        '(0, 1, 0)',
        '2048.0',
        'float16',
        'float32',
    ):
        assert part in message, (part, message)


def test_float16_refuses_class_targets_beyond_2048():
    net = _net()
    bad = _data()
    bad['targets'][0, 0, 0] = 2051.0
    with pytest.raises(NetworkValidationError, match="SoftmaxCE 'out'") as info:
        net.provide_external_data(bad)
    assert "Input 'targets'" in str(info.value)
    assert '2052.0' in str(info.value)  # 2051 rounds to even in float16


def test_a_fraction_the_cast_hides_is_refused():
    net = _net()
    with pytest.raises(NetworkValidationError, match='whole numbers') as info:
        net.provide_external_data(_data(ids=2.0001))
    assert '2.0001' in str(info.value) and "Embedding 'emb'" in str(info.value)


def test_float32_data_to_float16_is_checked_too():
    net = _net()
    data = _data()
    data['ids'] = data['ids'].astype(np.float32)
    data['ids'][0, 0, 0] = 2049.0
    with pytest.raises(NetworkValidationError, match="Input 'ids'"):
        net.provide_external_data(data)


def test_float32_refuses_ids_beyond_its_exact_range():
    net = _net(np.float32, vocab=4)
    with pytest.raises(NetworkValidationError, match='16777216') as info:
        net.provide_external_data(_data(ids=16777217.0))
    assert 'float64' in str(info.value)


def test_exact_ids_are_taken_and_pick_their_rows():
    net = _net(vocab=3000)
    data = _data()
    data['ids'][0, 0, 0] = 2048.0
    data['ids'][0, 1, 0] = 2046.0
    data['targets'][0, 1, 0] = 2.0
    net.provide_external_data(data)
    net.forward_pass()
    W = net.get('emb.parameters.W')
    np.testing.assert_array_equal(net.get('emb.outputs.default')[0, 0], W[2048])
    np.testing.assert_array_equal(net.get('emb.outputs.default')[0, 1], W[2046])


def test_other_inputs_are_rounded_as_before():
    net = _net()
    net.provide_external_data(_data(x=2049.0))
    assert net.get_input('x')[0, 0, 0] == 2048.0


def test_float32_handler_takes_id_2049():
    net = _net(np.float32, vocab=3000)
    net.provide_external_data(_data(ids=2049.0))
    net.forward_pass()
    np.testing.assert_array_equal(
        net.get('emb.outputs.default')[0, 0], net.get('emb.parameters.W')[2049]
    )


def test_nan_ids_are_left_to_the_finite_check_and_the_layer():
    net = _net()
    with pytest.raises(NetworkValidationError, match='NaN'):
        net.provide_external_data(_data(ids=np.nan))
    net.provide_external_data(_data(ids=np.nan), check_finite=False)
    with pytest.raises(NetworkValidationError, match="Embedding 'emb'"):
        net.forward_pass()


def test_predict_refuses_them():
    net = _net()
    ids = np.full((1, 2, 1), 2049.0)
    with pytest.raises(NetworkValidationError, match="Input 'ids'"):
        net.predict({'ids': ids}, out_name='out.outputs.predictions')


@pytest.mark.parametrize(
    'make_copy', [copy.deepcopy, lambda n: pickle.loads(pickle.dumps(n))]
)
def test_copies_keep_the_check(make_copy):
    net = make_copy(_net())
    with pytest.raises(NetworkValidationError, match="Input 'ids'"):
        net.provide_external_data(_data(ids=2049.0))


class IdSquareLayerImpl(Layer):
    """A custom layer reading its 'default' input as ids: y = id**2."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 1)}
    computes_no_input_deltas_for = ('default',)
    id_inputs = ('default',)

    def setup(self, kwargs, in_shapes):
        outputs = OrderedDict(default=BufferStructure('T', 'B', 1))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs.default
        self.handler.mult_tt(x, x, buffers.outputs.default)

    def backward_pass(self, buffers):
        pass


def test_a_custom_layer_declaring_id_inputs_gets_the_check():
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    net = bs.Network.from_layer(
        inp >> ConstructionWrapper.create(IdSquareLayerImpl, name='sq')
    )
    net.set_handler(NumpyHandler(np.float16))
    with pytest.raises(NetworkValidationError, match="IdSquare 'sq'"):
        net.provide_external_data({'default': np.full((1, 1, 1), 4097.0)})
    net.provide_external_data({'default': np.full((1, 1, 1), 4096.0)})


@pytest.mark.parametrize('dtype', [np.float64, np.float32])
def test_a_fraction_is_refused_as_the_data_comes_in(dtype):
    """1.5 is no id in any dtype: refused by provide_external_data, naming
    the reader, as a fraction the cast hides is."""
    net = _net(dtype)
    data = _data()
    data['targets'][0, 1, 0] = 1.5
    with pytest.raises(NetworkValidationError, match='not a whole number') as info:
        net.provide_external_data(data)
    assert "SoftmaxCE 'out'" in str(info.value) and '1.5' in str(info.value)
    data['targets'] = data['targets'].astype(np.float32)
    with pytest.raises(NetworkValidationError, match="Input 'targets'"):
        net.provide_external_data(data)
