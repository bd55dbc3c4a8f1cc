"""Add: the elementwise sum of its inputs (residual connections)."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.layers import Add, FullyConnected, Input, NoOp
from brainstorm.layers.add_layer import AddLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer
from tests.layers.layer_specs_modern import network_round_trips


def test_public_name():
    assert bs.layers.Add is Add
    assert Add(name='Sum').layer.layer_type == 'Add'


@pytest.mark.parametrize('count', [2, 3, 5])
def test_forward_and_backward_match_numpy(count):
    xs = {f'inputs_{k}': random_data(k, 3, 2, 4) for k in range(1, count + 1)}
    dy = random_data(9, 3, 2, 4)
    result = run_layer(
        AddLayerImpl,
        xs,
        kwargs={'num_inputs': count},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    np.testing.assert_allclose(result.outputs['default'], sum(xs.values()), rtol=1e-12)
    for name in xs:
        np.testing.assert_allclose(result.input_deltas[name], 1 + dy, rtol=1e-12)


def test_residual_connection_with_named_inputs(tmp_path):
    inp = Input({'default': ('T', 'B', 3)})
    add = Add(name='Residual')
    inp >> 'inputs_1' - add
    inp >> FullyConnected(3, activation='tanh', name='Block') >> 'inputs_2' - add
    add >> NoOp(name='Out')
    net = bs.Network.from_layer(inp)
    x = np.random.RandomState(0).randn(4, 2, 3)
    outputs = network_round_trips(net, {'default': x}, tmp_path)
    np.testing.assert_allclose(outputs['Residual'], x + outputs['Block'], rtol=1e-12)


def test_same_output_into_both_inputs_doubles_it():
    inp = Input({'default': ('T', 'B', 2)})
    add = Add()
    inp >> 'inputs_1' - add
    inp >> 'inputs_2' - add
    net = bs.Network.from_layer(add)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    x = np.arange(6.0).reshape(3, 1, 2)
    net.provide_external_data({'default': x})
    net.forward_pass()
    np.testing.assert_array_equal(net.get('Add.outputs.default'), 2 * x)


def test_one_input_is_refused_naming_the_argument():
    with pytest.raises(
        LayerValidationError,
        match=r"Add 'A'.*num_inputs must be an int >= 2.*Received: num_inputs=1",
    ):
        instantiate_layer(AddLayerImpl, {'inputs_1': (3,)}, name='A', num_inputs=1)
    with pytest.raises(
        LayerValidationError, match=r"Add 'Add'.*num_inputs must be an int >= 2"
    ):
        Add(num_inputs=0)


def test_inputs_must_have_one_shape_and_type():
    with pytest.raises(LayerValidationError, match=r"Add 'Add'.*inputs_2 of shape"):
        instantiate_layer(AddLayerImpl, {'inputs_1': (3,), 'inputs_2': (4,)})
    with pytest.raises(LayerValidationError, match='batch-sized'):
        instantiate_layer(AddLayerImpl, {'inputs_1': (3,), 'inputs_2': ('B', 3)})


def test_missing_and_unknown_inputs_are_named():
    with pytest.raises(LayerValidationError, match="input 'inputs_3' is not connected"):
        instantiate_layer(
            AddLayerImpl, {'inputs_1': (3,), 'inputs_2': (3,)}, num_inputs=3
        )
    with pytest.raises(LayerValidationError, match="has no input 'inputs_3'"):
        instantiate_layer(
            AddLayerImpl, {'inputs_1': (3,), 'inputs_2': (3,), 'inputs_3': (3,)}
        )
