"""Integer data the handler's dtype does not hold exactly is refused.

``provide_external_data`` casts the data to the handler's dtype. float16
holds every integer only up to 2048, float32 up to 2**24: an Embedding id
2049 became 2048 in float16 and looked up the wrong row, silently (and a
SoftmaxCE target named the wrong class).
"""

import re
import tracemalloc

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler


def embedding_net(dtype, vocab=5000):
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    net = bs.Network.from_layer(inp >> bs.layers.Embedding(vocab, 2, name='emb'))
    net.set_handler(NumpyHandler(dtype))
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    return net


def looked_up(net, ids):
    """The rows the Embedding gives for ``ids`` (a (T, B, 1) array)."""
    net.provide_external_data({'default': ids})
    net.forward_pass()
    return net.get('emb.outputs.default')


@pytest.mark.parametrize('check_finite', [True, False])
def test_a_float16_embedding_id_above_2048_that_would_be_rounded_is_refused(
    check_finite,
):
    """Id 2049 (int64) in float16: refused, naming the input, the value,
    its index, the dtype and wider dtypes, with or without check_finite
    (a rounded id is a wrong value, not a bad one); it looked up row 2048."""
    net = embedding_net(np.float16)
    ids = np.array([[[5], [2048]], [[4096], [2049]]])
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data({'default': ids}, check_finite=check_finite)
    message = str(error.value)
    assert "Input 'default'" in message
    assert 'integer 2049 at index (1, 1, 0)' in message
    assert 'float16' in message and 'become 2048 ' in message
    assert 'up to 2048;' in message
    assert 'float32 (exact up to 16777216)' in message
    assert 'float64' in message


@pytest.mark.parametrize(
    'dtype, exact',
    [(np.float16, 2**11), (np.float32, 2**24), (np.float64, 2**53)],
    ids=['float16', 'float32', 'float64'],
)
@pytest.mark.parametrize('sign', [1, -1], ids=['positive', 'negative'])
def test_the_first_integer_the_dtype_rounds_is_refused(dtype, exact, sign):
    """Up to ``2**(nmant + 1)`` every integer passes, and above it those
    the dtype holds (``exact + 2``, ``2 * exact``); ``exact + 1`` is
    refused, in int64 and uint64, of either sign."""
    inp = bs.layers.Input({'default': ('T', 'B', 3)})
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(1, name='fc'))
    net.set_handler(NumpyHandler(dtype))
    net.initialize(0.0)
    fine = sign * np.array([[[exact, exact - 1, exact + 2]], [[2 * exact, 0, 1]]])
    net.provide_external_data({'default': fine})
    assert (net.get('Input.outputs.default') == fine).all()
    bad = fine.copy()
    bad[1, 0, 2] = sign * (exact + 1)
    for array in (bad, bad.astype(np.uint64)) if sign > 0 else (bad,):
        with pytest.raises(NetworkValidationError) as error:
            net.provide_external_data({'default': array})
        assert f'integer {sign * (exact + 1)} at index (1, 0, 2)' in str(error.value)
        assert f'become {sign * exact} ' in str(error.value)


def test_ids_above_2048_that_float16_holds_look_up_their_rows():
    """Even ids up to 4096 and multiples of 4 up to 8192 are exact in
    float16: accepted, and the Embedding gives their rows."""
    net = embedding_net(np.float16, vocab=8200)
    W = net.get('emb.parameters.W')
    ids = np.array([[[2050], [4094]], [[4096], [8188]]], dtype=np.int32)
    y = looked_up(net, ids)
    np.testing.assert_array_equal(y, W[ids[..., 0]])


def test_a_float16_softmax_ce_target_above_2048_is_refused():
    """A class index 3001 of 4000 classes in float16: refused (it became
    3000, another class)."""
    inp, out = bs.tools.get_in_out_layers('classification', 2, 4000)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float16))
    net.initialize(0.0)
    data = {'default': np.zeros((1, 2, 2)), 'targets': np.array([[[7], [3001]]])}
    with pytest.raises(
        NetworkValidationError,
        match=re.escape("Input 'targets': the integer 3001 at index (0, 1, 0)"),
    ):
        net.provide_external_data(data)
    data['targets'] = np.array([[[7], [3000]]])
    net.provide_external_data(data)


def test_integers_beyond_the_float16_range_are_refused_without_check_finite():
    """70000 (int32) becomes inf in float16, and 65536 too (a power of two,
    but beyond the range): refused even with check_finite=False; with it,
    find_unrepresentable names them first."""
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(1, name='fc'))
    net.set_handler(NumpyHandler(np.float16))
    net.initialize(0.0)
    for value in (70000, 65536, -65536):
        data = {'default': np.array([[[1]], [[value]]], dtype=np.int32)}
        with pytest.raises(NetworkValidationError, match='would become -?inf'):
            net.provide_external_data(data, check_finite=False)
        with pytest.raises(NetworkValidationError, match='beyond the float16 range'):
            net.provide_external_data(data)
    net.provide_external_data({'default': np.array([[[65504]], [[-65504]]])})


def test_int64_extremes_in_float32():
    """-2**63 is a power of two (exact in float32); 2**63 - 1 is not."""
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(1, name='fc'))
    net.set_handler(NumpyHandler(np.float32))
    net.initialize(0.0)
    low, high = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    net.provide_external_data({'default': np.array([[[low]], [[0]]])})
    assert net.get('Input.outputs.default')[0, 0, 0] == -(2.0**63)
    with pytest.raises(NetworkValidationError, match=f'integer {high} at index'):
        net.provide_external_data({'default': np.array([[[low]], [[high]]])})
    uint = np.array([[[2**64 - 1]]], dtype=np.uint64)
    with pytest.raises(NetworkValidationError, match=f'integer {2**64 - 1} at'):
        net.provide_external_data({'default': uint})


def test_float64_has_no_wider_dtype_to_suggest():
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(1, name='fc'))
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(0.0)
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data({'default': np.array([[[2**53 + 1]]])})
    assert 'no float dtype of a handler holds it' in str(error.value)
    assert 'float32 (' not in str(error.value)


def test_float_and_small_integer_data_is_not_looked_at():
    """Float data for inputs that take no ids is rounded as always (float
    ids are checked in test_id_inputs.py); int16 below float32 and uint8
    below float16 cannot be rounded."""
    net = embedding_net(np.float16)
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    narrow = bs.Network.from_layer(inp >> bs.layers.FullyConnected(1, name='fc'))
    narrow.set_handler(NumpyHandler(np.float16))
    narrow.provide_external_data({'default': np.array([[[2049.0]]])})
    assert narrow.get('Input.outputs.default')[0, 0, 0] == 2048
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    wide = bs.Network.from_layer(inp >> bs.layers.FullyConnected(1, name='fc'))
    wide.set_handler(NumpyHandler(np.float32))
    wide.initialize(0.0)
    extremes = np.array([[[-32768]], [[32767]]], dtype=np.int16)
    wide.provide_external_data({'default': extremes})
    assert (wide.get('Input.outputs.default') == extremes).all()
    net.provide_external_data({'default': np.array([[[255]]], dtype=np.uint8)})
    assert net.get('Input.outputs.default')[0, 0, 0] == 255


def test_the_check_of_ordinary_ids_allocates_nothing():
    """A million int64 ids below 2048 into float16: the check costs a min
    and a max, no copy of the array (8 MB)."""
    net = embedding_net(np.float16)
    ids = np.random.RandomState(0).randint(0, 2049, (1000, 1000, 1))
    net.provide_external_data({'default': ids})  # sizes the buffers
    tracemalloc.start()
    try:
        net.provide_external_data({'default': ids}, check_finite=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < ids.nbytes / 16, peak
    assert (net.get('Input.outputs.default') == ids).all()
