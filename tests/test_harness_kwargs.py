"""instantiate_layer gives a layer its arguments as a network does.

A network hands a layer the arguments stored in its architecture: tuples
as lists, NumPy scalars as Python numbers, a declared argument that cannot
be stored as the value its check gives. The harness must do the same, or a
layer passes ``run_layer_tests`` with arguments no network can give it
(``shape + (n,)`` with ``shape=(2,)``) and fails in every network.
"""

from collections import OrderedDict
from fractions import Fraction

import numpy as np
import pytest

from brainstorm.errors import LayerValidationError, NetworkValidationError
from brainstorm.layers import Dropout, Input
from brainstorm.layers.base_layer import Layer
from brainstorm.layers.dropout_layer import DropoutLayerImpl
from brainstorm.structure.architecture import ConstructionWrapper
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.network import Network
from brainstorm.testing import (
    get_test_configurations,
    instantiate_layer,
    run_layer_tests,
)


class HarnessKwargsProbeLayerImpl(Layer):
    """Copies its input; keeps whatever arguments it is given."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 'F')}
    expected_kwargs = {'shape', 'count', 'nested'}

    def setup(self, kwargs, in_shapes):
        outputs = OrderedDict(default=in_shapes['default'])
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        self.handler.add_tt(
            buffers.output_deltas.default,
            buffers.input_deltas.default,
            buffers.input_deltas.default,
        )


class HarnessKwargsPadLayerImpl(HarnessKwargsProbeLayerImpl):
    """Works with a tuple ``shape`` only: fails in every network."""

    expected_kwargs = {'shape'}

    def setup(self, kwargs, in_shapes):
        outputs, _, internals = super().setup(kwargs, in_shapes)
        n = in_shapes['default'].feature_size
        parameters = OrderedDict(W=BufferStructure(*(kwargs['shape'] + (n,))))
        return outputs, parameters, internals


class HarnessKwargsListPadLayerImpl(HarnessKwargsPadLayerImpl):
    """Takes ``shape`` as any sequence, as a layer in a network must."""

    def setup(self, kwargs, in_shapes):
        return super().setup({'shape': tuple(kwargs['shape'])}, in_shapes)


def network_layer(layer_class, name, **kwargs):
    """The layer object a network makes of ``layer_class(**kwargs)``."""
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    inp >> ConstructionWrapper.create(layer_class, name=name, **kwargs)
    return Network.from_layer(inp).layers[name]


def test_layer_gets_stored_values_as_in_a_network():
    kwargs = {
        'shape': (2, np.int64(3)),
        'count': np.int64(4),
        'nested': {'a': (1, np.float32(0.5))},
    }
    layer = instantiate_layer(
        HarnessKwargsProbeLayerImpl, {'default': (3,)}, name='Probe', **kwargs
    )
    in_network = network_layer(HarnessKwargsProbeLayerImpl, 'Probe', **kwargs)
    assert layer.kwargs == {'shape': [2, 3], 'count': 4, 'nested': {'a': [1, 0.5]}}
    assert layer.kwargs == in_network.kwargs
    assert type(layer.kwargs['shape']) is list
    assert type(layer.kwargs['shape'][1]) is int
    assert type(layer.kwargs['count']) is int
    assert type(layer.kwargs['nested']['a'][1]) is float


def test_declared_argument_gets_the_value_its_check_gives():
    layer = instantiate_layer(
        DropoutLayerImpl, {'default': (3,)}, name='D', drop_prob=Fraction(1, 5)
    )
    in_network = network_layer(DropoutLayerImpl, 'D', drop_prob=Fraction(1, 5))
    assert layer.kwargs == in_network.kwargs == {'drop_prob': 0.2}
    assert type(layer.kwargs['drop_prob']) is float
    # a describable value stays as given, as the architecture keeps it
    layer = instantiate_layer(DropoutLayerImpl, {'default': (3,)}, drop_prob=0)
    assert layer.kwargs == {'drop_prob': 0}
    assert type(layer.kwargs['drop_prob']) is int


def test_layer_that_needs_a_tuple_fails_as_in_a_network():
    with pytest.raises(TypeError) as in_network:
        network_layer(HarnessKwargsPadLayerImpl, 'Pad', shape=(2,))
    with pytest.raises(TypeError) as in_harness:
        instantiate_layer(
            HarnessKwargsPadLayerImpl, {'default': (3,)}, name='Pad', shape=(2,)
        )
    message = str(in_harness.value)
    assert message == str(in_network.value)
    assert message.startswith("HarnessKwargsPad 'Pad':")
    assert 'list' in message and 'tuple' in message


def test_layer_that_takes_any_sequence_passes():
    layer = instantiate_layer(
        HarnessKwargsListPadLayerImpl, {'default': (3,)}, shape=(2,)
    )
    assert layer.kwargs == {'shape': [2]}
    assert layer.parameter_shapes['W'].feature_shape == (2, 3)
    for spec in get_test_configurations():
        run_layer_tests(layer, spec)


def test_argument_no_architecture_can_store_is_refused():
    with pytest.raises(NetworkValidationError) as info:
        instantiate_layer(
            HarnessKwargsProbeLayerImpl,
            {'default': (3,)},
            name='Probe',
            count=object(),
        )
    message = str(info.value)
    assert "HarnessKwargsProbe 'Probe'" in message
    assert "argument 'count' cannot be stored in an architecture" in message
    assert 'Type object is not describable' in message


def test_invalid_declared_argument_is_refused_naming_it():
    with pytest.raises(LayerValidationError) as info:
        instantiate_layer(DropoutLayerImpl, {'default': (3,)}, name='D', drop_prob=2)
    message = str(info.value)
    assert "Dropout 'D'" in message
    assert 'drop_prob' in message
    assert 'drop_prob=2' in message


def test_unexpected_argument_is_refused_naming_it():
    with pytest.raises(LayerValidationError) as info:
        instantiate_layer(
            HarnessKwargsProbeLayerImpl, {'default': (3,)}, name='Probe', size=3
        )
    message = str(info.value)
    assert "HarnessKwargsProbe 'Probe'" in message
    assert "unexpected argument(s) ['size']" in message
    assert "Expected only: ['count', 'nested', 'shape']" in message


def test_dropout_network_and_harness_agree_on_numpy_scalars():
    layer = instantiate_layer(
        DropoutLayerImpl, {'default': (3,)}, name='D', drop_prob=np.float32(0.25)
    )
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    net = Network.from_layer(inp >> Dropout(drop_prob=np.float32(0.25), name='D'))
    assert layer.kwargs == net.layers['D'].kwargs == {'drop_prob': 0.25}
    assert type(layer.kwargs['drop_prob']) is float
