"""Initializers: NumPy scalars, Uniform's range, SparseOutputs' message."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm import initializers as I
from brainstorm.describable import get_description
from brainstorm.errors import NetworkValidationError


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    return bs.Network.from_layer(inp >> bs.layers.FullyConnected(5, name='H') >> out)


@pytest.mark.parametrize(
    'value, expected',
    [
        (np.float32(0.5), 0.5),
        (np.float64(0.25), 0.25),
        (np.int64(2), 2.0),
        (np.int8(-1), -1.0),
    ],
    ids=lambda v: type(v).__name__,
)
def test_numpy_scalars_are_numbers_for_initialize(value, expected, tmp_path):
    """np.float32(0.1) and np.int64(0) were refused as 'not a number'."""
    net = _net()
    net.initialize({'default': value, 'H': {'bias': value}})
    np.testing.assert_array_equal(net.get('H.parameters.W'), np.full((5, 4), expected))
    np.testing.assert_array_equal(net.get('H.parameters.bias'), np.full(5, expected))
    # described as a plain number: the network saves and loads
    assert get_description(net)['initializers']['default'] == expected
    net.save_as_hdf5(str(tmp_path / 'net.h5'))
    loaded = bs.Network.from_hdf5(str(tmp_path / 'net.h5'))
    np.testing.assert_array_equal(loaded.get('parameters'), net.get('parameters'))


@pytest.mark.parametrize('value', [True, np.True_, np.False_], ids=repr)
def test_bools_are_still_no_initializers(value):
    with pytest.raises(
        NetworkValidationError, match='must be an Initializer, a number'
    ):
        _net().initialize({'default': value})


@pytest.mark.parametrize(
    'make',
    [
        lambda: I.Uniform(-1e308, 1e308),
        lambda: I.Uniform(1e308),
        lambda: I.Uniform(-1.7e308, 1e307),
    ],
)
def test_uniform_refuses_a_range_beyond_the_float_range(make):
    """It was accepted, and initialize raised a raw OverflowError."""
    with pytest.raises(
        NetworkValidationError, match=r'Uniform: the range high - low.*Received: low='
    ):
        make()


def test_uniform_with_a_wide_finite_range_is_accepted():
    values = I.evaluate_initializer(I.Uniform(-1e307, 1e307), (1000,), seed=1)
    assert np.isfinite(values).all() and values.min() < -1e306 and values.max() > 1e306


def test_sparse_outputs_names_the_entries_per_row_it_needs():
    """It said 'shape[1] must be at least connections=30' for a (4, 3, 3, 3)
    weight, whose rows have prod(shape[1:]) = 27 entries."""
    with pytest.raises(I.InitializationError) as info:
        I.SparseOutputs(I.Gaussian(), 30)((4, 3, 3, 3))
    message = str(info.value)
    assert 'prod(shape[1:]) = 27' in message
    assert 'connections=30' in message and 'shape=(4, 3, 3, 3)' in message
    assert 'shape[1] must' not in message
