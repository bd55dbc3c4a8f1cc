"""The rules of ``brainstorm.structure.external_data`` at their edges.

Arrays of the handler are copied in as they are (and still checked for
bad values); other array-likes are read with ``np.asarray`` and checked as
ndarrays; what is no array, has the wrong rank or is masked is refused with
its own message; data given for only some inputs sizes the memory from
what was given and zeroes the inputs left out when ``(T, B)`` changed.
"""

import tracemalloc

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.debug_handler import DebugArray
from brainstorm.structure import external_data
from brainstorm.structure.external_data import MissingInputError


def _net(handler=None):
    """Inputs: 'default' (T, B, 3), 'more' (T, B, 2), 'extra' (B, 2)."""
    inp = bs.layers.Input(
        out_shapes={
            'default': ('T', 'B', 3),
            'more': ('T', 'B', 2),
            'extra': ('B', 2),
        }
    )
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(2, name='Out'))
    if handler is not None:
        net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.5), seed=7)
    return net


def _debug_net():
    return _net(DebugHandler(NumpyHandler(np.float64)))


def _batch(T, B, offset=0.0):
    """Distinct non-zero values for every input of ``_net``."""
    return {
        'default': np.arange(T * B * 3, dtype=np.float64).reshape(T, B, 3)
        + 1.5
        + offset,
        'more': -np.arange(T * B * 2, dtype=np.float64).reshape(T, B, 2)
        - 0.25
        - offset,
        'extra': np.arange(B * 2, dtype=np.float64).reshape(B, 2) * 3.0 + 7.0 + offset,
    }


def _outputs_for(data):
    """The network's outputs for ``data`` given as ndarrays (the reference)."""
    net = _debug_net()
    net.provide_external_data(data)
    net.forward_pass()
    return net.get('Out.outputs.default')


# ----------------------------------------------- arrays of the handler ---


def test_an_array_of_the_handler_in_its_dtype_is_copied_in_as_it_is():
    """A DebugArray of a DebugHandler(float64) is copied into the Input
    layer (it cannot be read with np.asarray): the network computes what
    the same values as ndarrays give."""
    data = _batch(2, 3, offset=0.5)
    net = _debug_net()
    handler = net.handler
    given = {
        'default': handler.create_from_numpy(data['default']),
        'more': data['more'],
        'extra': handler.create_from_numpy(data['extra']),
    }
    assert isinstance(given['default'], handler.array_type)
    net.provide_external_data(given)
    np.testing.assert_array_equal(net.get_input('default'), data['default'])
    np.testing.assert_array_equal(net.get_input('more'), data['more'])
    np.testing.assert_array_equal(net.get_input('extra'), data['extra'])
    net.forward_pass()
    np.testing.assert_array_equal(net.get('Out.outputs.default'), _outputs_for(data))


def test_an_array_of_the_handler_holding_nan_is_refused():
    """The finite check applies to arrays of the handler too: a NaN at
    (1, 2, 0) is named with its index; nothing reaches the network."""
    data = _batch(2, 3)
    values = data['default'].copy()
    values[1, 2, 0] = np.nan
    net = _debug_net()
    data['default'] = net.handler.create_from_numpy(values)
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data(data)
    message = str(error.value)
    assert "Input 'default'" in message
    assert 'NaN at index (1, 2, 0)' in message
    assert 'check_finite=False' in message


def test_an_array_of_the_handler_in_another_dtype_is_refused_with_the_cause():
    """A DebugArray of float32 values given to a float64 DebugHandler is
    not the handler's array, and NumPy cannot read it: refused, naming
    the type and NumPy's error."""
    data = _batch(1, 2)
    net = _debug_net()
    wrong = DebugArray(data['default'].astype(np.float32))
    data['default'] = wrong
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data(data)
    message = str(error.value)
    assert "Input 'default'" in message
    assert 'an array of the handler or an array-like NumPy can read' in message
    assert 'Received: DebugArray (TypeError:' in message
    assert isinstance(error.value.__cause__, TypeError)


def test_an_h5py_dataset_of_the_handlers_dtype_is_read_as_an_ndarray(tmp_path):
    """A float64 h5py dataset given to a DebugHandler(float64) has the
    handler's dtype but is no array of the handler: it is read with
    np.asarray and copied in like the ndarray it holds."""
    data = _batch(3, 2, offset=1.0)
    with h5py.File(tmp_path / 'batch.h5', 'w') as f:
        f['default'] = data['default']
        f['extra'] = data['extra']
    net = _debug_net()
    with h5py.File(tmp_path / 'batch.h5', 'r') as f:
        net.provide_external_data(
            {'default': f['default'], 'more': data['more'], 'extra': f['extra']}
        )
    np.testing.assert_array_equal(net.get_input('default'), data['default'])
    np.testing.assert_array_equal(net.get_input('extra'), data['extra'])
    net.forward_pass()
    np.testing.assert_array_equal(net.get('Out.outputs.default'), _outputs_for(data))


# ------------------------------------------------- other array-likes ---


class _ArrayLike:
    """An array-like whose dtype is no NumPy dtype (as a torch tensor's)."""

    def __init__(self, values):
        self._values = values
        self.shape = values.shape
        self.dtype = f'mine.{values.dtype.name}'

    def __array__(self, dtype=None, copy=None):
        return self._values


def test_an_array_like_read_as_complex_numbers_is_refused():
    """Its dtype tells NumPy nothing, so the values NumPy reads are
    checked: complex numbers are refused as not numeric."""
    data = _batch(1, 2)
    data['more'] = _ArrayLike(np.full((1, 2, 2), 1 + 2j))
    net = _net(NumpyHandler(np.float64))
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data(data)
    message = str(error.value)
    assert "Input 'more'" in message
    assert 'expected numeric data. Received dtype complex128' in message


def test_an_array_like_read_as_real_numbers_is_copied_in():
    data = _batch(1, 2, offset=2.0)
    given = dict(data, more=_ArrayLike(data['more'].astype(np.float32)))
    net = _net(NumpyHandler(np.float64))
    net.provide_external_data(given)
    np.testing.assert_array_equal(net.get_input('more'), data['more'])


def test_a_dataset_whose_file_was_closed_is_refused(tmp_path):
    data = _batch(1, 2)
    with h5py.File(tmp_path / 'closed.h5', 'w') as f:
        f['default'] = data['default']
    with h5py.File(tmp_path / 'closed.h5', 'r') as f:
        dataset = f['default']
    data['default'] = dataset
    net = _net(NumpyHandler(np.float64))
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data(data)
    message = str(error.value)
    assert "Input 'default'" in message
    assert 'h5py dataset whose file was closed' in message


# ----------------------------------------------------- what check_data refuses


class _ShapeOnly:
    """Has a shape but no dtype (as a pandas DataFrame, whose is dtypes)."""

    shape = (1, 2, 3)


class _DtypeOnly:
    dtype = np.dtype(np.float64)


@pytest.mark.parametrize('thing', [_ShapeOnly(), _DtypeOnly()], ids=['shape', 'dtype'])
def test_something_without_both_a_shape_and_a_dtype_is_refused(thing):
    data = _batch(1, 2)
    data['default'] = thing
    net = _net(NumpyHandler(np.float64))
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data(data)
    message = str(error.value)
    assert "Input 'default': expected an array of shape" in message
    assert f'Received: {type(thing).__name__}' in message


def test_data_of_the_wrong_rank_is_refused_as_such():
    """(T, B) for a (T, B, 3) input: the number of dimensions is named,
    not the feature shape."""
    data = _batch(2, 2)
    data['default'] = np.ones((2, 2))
    net = _net(NumpyHandler(np.float64))
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data(data)
    message = str(error.value)
    assert "Input 'default': expected 3 dimensions" in message
    assert 'Received shape (2, 2)' in message


def test_a_masked_array_is_refused_even_without_masked_values():
    data = _batch(2, 2)
    data['more'] = np.ma.masked_array(data['more'], mask=False)
    net = _net(NumpyHandler(np.float64))
    with pytest.raises(NetworkValidationError) as error:
        net.provide_external_data(data)
    message = str(error.value)
    assert "Input 'more': masked arrays are not supported" in message
    assert 'array.filled(value)' in message


# ------------------------------------------ inputs left out, (T, B) ---


def test_only_a_batch_sized_input_on_a_fresh_network_gives_time_size_one():
    """No time-sized data and no earlier batch: T is 1, B is the batch
    size of the data (its first dimension, not its features)."""
    net = _net(NumpyHandler(np.float64))
    extra = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7.0, 8.0], [9.0, 10.0]])
    net.provide_external_data({'extra': extra}, all_inputs=False)
    np.testing.assert_array_equal(net.get_input('extra'), extra)
    assert net.get_input('default').shape == (1, 5, 3)
    assert net.get_input('more').shape == (1, 5, 2)
    assert not net.get_input('default').any()


def test_only_a_batch_sized_input_keeps_the_time_size_and_the_other_inputs():
    """After a batch of T=4, B=3, data for the batch-sized input alone
    keeps T=4, so the time-sized inputs keep their values."""
    net = _net(NumpyHandler(np.float64))
    first = _batch(4, 3)
    net.provide_external_data(first)
    extra = np.full((3, 2), -2.5)
    net.provide_external_data({'extra': extra}, all_inputs=False)
    np.testing.assert_array_equal(net.get_input('extra'), extra)
    np.testing.assert_array_equal(net.get_input('default'), first['default'])
    np.testing.assert_array_equal(net.get_input('more'), first['more'])


@pytest.mark.parametrize('T, B', [(1, 3), (2, 2), (5, 3), (3, 4)])
def test_inputs_left_out_are_zeros_after_a_change_of_time_or_batch_size(T, B):
    """After a batch of T=3, B=3, data of another (T, B) for 'default'
    alone: 'more' and 'extra' (left out) are zeros, not the old values
    seen through the new layout."""
    net = _net(NumpyHandler(np.float64))
    net.provide_external_data(_batch(3, 3, offset=4.0))
    default = np.full((T, B, 3), 0.75)
    net.provide_external_data({'default': default}, all_inputs=False)
    np.testing.assert_array_equal(net.get_input('default'), default)
    np.testing.assert_array_equal(net.get_input('more'), np.zeros((T, B, 2)))
    np.testing.assert_array_equal(net.get_input('extra'), np.zeros((B, 2)))


# ------------------------------ the module's function and its defaults ---


def test_the_function_needs_every_input_by_default():
    net = _net(NumpyHandler(np.float64))
    data = _batch(1, 2)
    del data['more']
    with pytest.raises(MissingInputError) as error:
        external_data.provide_external_data(
            net.layers['Input'], net.buffer_manager, data
        )
    assert "Data for input 'more' is missing" in str(error.value)


def test_the_function_checks_values_by_default():
    net = _net(NumpyHandler(np.float32))
    data = _batch(1, 2)
    data['extra'][1, 0] = 1e39  # beyond float32
    with pytest.raises(NetworkValidationError) as error:
        external_data.provide_external_data(
            net.layers['Input'], net.buffer_manager, data
        )
    message = str(error.value)
    assert "Input 'extra'" in message
    assert 'index (1, 0)' in message


# ---------------------------------------------- integers at the bound ---


def test_ids_down_to_minus_the_bound_cost_no_copy():
    """A million int64 values in [-2048, 2048] (float16 holds them all)
    with -2048 among them: a min and a max, no copy of the array."""
    net = _net(NumpyHandler(np.float16))
    values = np.random.RandomState(3).randint(-2048, 2049, (1000, 1000, 3))
    values[0, 5, 1] = -2048
    values[999, 0, 2] = 2048
    data = {
        'default': values,
        'more': np.zeros((1000, 1000, 2), np.float16),
        'extra': np.zeros((1000, 2), np.float16),
    }
    net.provide_external_data(data)  # sizes the buffers
    tracemalloc.start()
    try:
        net.provide_external_data(data, check_finite=False)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < values.nbytes / 16, peak
    assert net.get_input('default')[0, 5, 1] == -2048
