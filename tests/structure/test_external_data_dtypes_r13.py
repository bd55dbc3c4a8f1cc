"""provide_external_data checks every kind of data as it checks ndarrays.

Data that is not an ndarray (an h5py dataset, a torch tensor) was copied in
unchecked: integer ids the handler's dtype does not hold became other ids,
values beyond its range became inf, and strings failed with a bare NumPy
TypeError.
"""

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import DebugHandler, NumpyHandler


def _net(dtype, in_size=4, embedding=False):
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers(
        'classification', 1 if embedding else in_size, 3
    )
    if embedding:
        inp = inp >> bs.layers.Embedding(3000, 4, name='Emb')
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(dtype))
    net.initialize(bs.initializers.Gaussian(0.1))
    return net


@pytest.fixture
def h5file(tmp_path):
    with h5py.File(tmp_path / 'data.h5', 'w') as f:
        f['ids'] = np.full((1, 2, 1), 2049, np.int64)
        f['big'] = np.full((1, 2, 4), 1e5)
        f['small'] = np.arange(8.0).reshape(1, 2, 4)
        f['text'] = np.array([[[b'a'] * 4] * 2])
    with h5py.File(tmp_path / 'data.h5', 'r') as f:
        yield f


TARGETS = np.zeros((1, 2, 1))


# ------------------------------------------ data that is not an ndarray ---


def test_h5py_integer_ids_beyond_float16_are_refused(h5file):
    net = _net(np.float16, embedding=True)
    with pytest.raises(NetworkValidationError) as info:
        net.provide_external_data({'default': h5file['ids'], 'targets': TARGETS})
    message = str(info.value)
    assert "Input 'default'" in message
    assert 'integer 2049' in message
    assert 'float16' in message
    assert 'would become 2048' in message


def test_torch_integer_ids_beyond_float16_are_refused():
    torch = pytest.importorskip('torch')
    net = _net(np.float16, embedding=True)
    ids = torch.full((1, 2, 1), 2049, dtype=torch.int64)
    with pytest.raises(NetworkValidationError) as info:
        net.provide_external_data({'default': ids, 'targets': TARGETS})
    message = str(info.value)
    assert "Input 'default'" in message
    assert 'integer 2049' in message
    assert 'would become 2048' in message


def test_h5py_values_beyond_the_float16_range_are_refused(h5file):
    net = _net(np.float16)
    with pytest.raises(NetworkValidationError) as info:
        net.provide_external_data({'default': h5file['big'], 'targets': TARGETS})
    message = str(info.value)
    assert "Input 'default'" in message
    assert 'beyond the float16 range' in message
    assert '100000.0' in message
    assert 'check_finite=False' in message


def test_h5py_string_data_is_refused_as_not_numeric(h5file):
    net = _net(np.float16)
    with pytest.raises(NetworkValidationError) as info:
        net.provide_external_data({'default': h5file['text'], 'targets': TARGETS})
    message = str(info.value)
    assert "Input 'default'" in message
    assert 'expected numeric data' in message
    assert 'S1' in message


def test_torch_complex_data_is_refused_as_not_numeric():
    torch = pytest.importorskip('torch')
    net = _net(np.float32)
    data = torch.zeros((1, 2, 4), dtype=torch.complex64)
    with pytest.raises(NetworkValidationError) as info:
        net.provide_external_data({'default': data, 'targets': TARGETS})
    message = str(info.value)
    assert "Input 'default'" in message
    assert 'expected numeric data' in message
    assert 'complex64' in message


def test_h5py_and_torch_data_in_range_are_copied(h5file):
    torch = pytest.importorskip('torch')
    net = _net(np.float16)
    expected = np.arange(8.0).reshape(1, 2, 4)
    net.provide_external_data({'default': h5file['small'], 'targets': TARGETS})
    np.testing.assert_array_equal(net.get('Input.outputs.default'), expected)
    net.provide_external_data(
        {'default': torch.ones((1, 2, 4)), 'targets': torch.zeros((1, 2, 1))}
    )
    np.testing.assert_array_equal(net.get('Input.outputs.default'), 1.0)


def test_arrays_of_a_debug_handler_are_taken_in_its_dtype():
    # DebugArrays had no dtype, so check_data refused them as no arrays,
    # although the handler's own arrays are copied in as they are
    handler = DebugHandler(NumpyHandler(np.float64))
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    x = np.arange(8.0).reshape(1, 2, 4)
    net.provide_external_data(
        {'default': handler.create_from_numpy(x), 'targets': TARGETS}
    )
    np.testing.assert_array_equal(net.get_input('default'), x)
    other = DebugHandler(NumpyHandler(np.float32)).create_from_numpy(x)
    with pytest.raises(NetworkValidationError, match="Input 'default'"):
        net.provide_external_data({'default': other, 'targets': TARGETS})
