"""Tests for brainstorm.structure.architecture."""

import json

import numpy as np
import pytest

from brainstorm.layers import (
    FullyConnected,
    Input,
    Loss,
    Recurrent,
    SoftmaxCE,
    SquaredError,
)
from brainstorm.structure.architecture import (
    Connection,
    collect_all_connections,
    generate_architecture,
    get_canonical_layer_order,
    get_layer_description,
    instantiate_layers_from_architecture,
    parse_connection,
    validate_architecture,
)
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.network import Network
from brainstorm.utils import NetworkValidationError


def classifier():
    """Input -> Hid (FC) -> Rnn -> Out (FC) -> SoftmaxCE -> Loss."""
    inp = Input(out_shapes={'default': ('T', 'B', 3), 'targets': ('T', 'B', 1)})
    out = SoftmaxCE(name='Out')
    (
        inp
        >> FullyConnected(5, name='Hid')
        >> Recurrent(4, name='Rnn')
        >> FullyConnected(2, activation='linear', name='Proj')
        >> out
    )
    inp - 'targets' >> 'targets' - out - 'loss' >> Loss()
    return inp


def arch_entry(type_name, outgoing=None, **kwargs):
    entry = {'@type': type_name, '@outgoing_connections': outgoing or {}}
    entry.update(kwargs)
    return entry


def shapes(**kw):
    return {k: list(v) for k, v in kw.items()}


# -------------------------------------------------------------- generation ---


def test_generate_architecture_format():
    arch = generate_architecture(classifier())
    assert arch == {
        'Input': {
            '@type': 'Input',
            'out_shapes': {'default': ['T', 'B', 3], 'targets': ['T', 'B', 1]},
            '@outgoing_connections': {'default': ['Hid'], 'targets': ['Out.targets']},
        },
        'Hid': {
            '@type': 'FullyConnected',
            'size': 5,
            'activation': 'rel',
            '@outgoing_connections': {'default': ['Rnn']},
        },
        'Rnn': {
            '@type': 'Recurrent',
            'size': 4,
            'activation': 'tanh',
            '@outgoing_connections': {'default': ['Proj']},
        },
        'Proj': {
            '@type': 'FullyConnected',
            'size': 2,
            'activation': 'linear',
            '@outgoing_connections': {'default': ['Out']},
        },
        'Out': {'@type': 'SoftmaxCE', '@outgoing_connections': {'loss': ['Loss']}},
        'Loss': {'@type': 'Loss', 'importance': 1.0, '@outgoing_connections': {}},
    }


def test_generate_architecture_from_any_connected_layer():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    hid = FullyConnected(4)
    last = inp >> hid >> Loss()
    expected = generate_architecture(inp)
    assert generate_architecture(hid) == expected
    assert generate_architecture(last) == expected
    assert generate_architecture(last.layer) == expected  # LayerDetails too


def test_generated_architecture_is_plain_json():
    arch = generate_architecture(classifier())
    text = json.dumps(arch)
    assert json.loads(text) == arch
    assert type(arch) is dict
    for entry in arch.values():
        assert type(entry) is dict


def test_tuple_kwargs_become_lists():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    inp >> FullyConnected((2, 3), name='F')
    arch = generate_architecture(inp)
    assert arch['F']['size'] == [2, 3]
    net = Network.from_architecture(arch)
    assert net.layers['F'].out_shapes['default'] == BufferStructure('T', 'B', 2, 3)


def test_layer_description_omits_empty_kwargs():
    details = SoftmaxCE(name='S').layer
    assert get_layer_description(details) == {
        '@type': 'SoftmaxCE',
        '@outgoing_connections': {},
    }


def test_layer_description_lists_several_destinations_per_output():
    a = ConstructionWrapper.create('ALayerImpl', name='A')
    b = ConstructionWrapper.create('BLayerImpl', name='B')
    c = ConstructionWrapper.create('CLayerImpl', name='C')
    a >> c
    a - 'x' >> 'y' - b
    a >> b
    assert get_layer_description(a.layer)['@outgoing_connections'] == {
        'default': ['B', 'C'],
        'x': ['B.y'],
    }


def test_undescribable_kwarg_names_layer_and_argument():
    a = ConstructionWrapper.create('ALayerImpl', name='Odd', thing=object())
    with pytest.raises(NetworkValidationError, match="'Odd'.*'thing'"):
        generate_architecture(a)


def test_parse_connection():
    assert parse_connection('Hid') == ('Hid', 'default')
    assert parse_connection('Out.targets') == ('Out', 'targets')
    assert parse_connection('Out.default') == ('Out', 'default')


def test_collect_all_connections_sorted_and_parsed():
    arch = generate_architecture(classifier())
    connections = collect_all_connections(arch)
    assert connections == sorted(connections)
    assert Connection('Input', 'targets', 'Out', 'targets') in connections
    assert Connection('Input', 'default', 'Hid', 'default') in connections
    assert Connection('Out', 'loss', 'Loss', 'default') in connections
    assert len(connections) == 6


def test_list_form_outgoing_connections_means_default_output():
    arch = {
        'Input': arch_entry('Input', ['Hid'], out_shapes=shapes(default=('T', 'B', 3))),
        'Hid': arch_entry('FullyConnected', ['Loss'], size=2),
        'Loss': arch_entry('Loss', []),
    }
    validate_architecture(arch)
    assert collect_all_connections(arch) == [
        Connection('Hid', 'default', 'Loss', 'default'),
        Connection('Input', 'default', 'Hid', 'default'),
    ]
    net = Network.from_architecture(arch)
    assert list(net.layers) == ['Input', 'Hid', 'Loss']


# -------------------------------------------------------------- validation ---


def test_valid_architectures_pass():
    """validate_architecture returns True for a valid one, as in 0.5."""
    assert validate_architecture(generate_architecture(classifier())) is True
    assert (
        validate_architecture(
            {'Input': arch_entry('Input', out_shapes=shapes(default=('T', 'B', 1)))}
        )
        is True
    )


def test_missing_outgoing_connections_is_rejected():
    # Note fix: 0.5 accepted a missing '@outgoing_connections' and failed
    # later with a KeyError.
    arch = generate_architecture(classifier())
    del arch['Rnn']['@outgoing_connections']
    with pytest.raises(NetworkValidationError, match="'Rnn'.*@outgoing"):
        validate_architecture(arch)


def test_cycle_is_rejected():
    # Note fix: 0.5 did not check for cycles.
    arch = generate_architecture(classifier())
    arch['Proj']['@outgoing_connections']['default'].append('Hid')
    with pytest.raises(NetworkValidationError, match='cycle.*Hid'):
        validate_architecture(arch)


def test_disconnected_layer_is_rejected():
    # Note fix: 0.5 did not check that every layer is reachable from Input.
    arch = generate_architecture(classifier())
    arch['Lonely'] = arch_entry('FullyConnected', size=3)
    with pytest.raises(NetworkValidationError, match='Lonely'):
        validate_architecture(arch)


# ---------------------------------------------------------- canonical order ---


def test_canonical_order_groups_by_distance_to_sink():
    # 'Z' is a sink, so it comes after 'a' although 'Z' < 'a' as strings
    arch = {
        'Input': arch_entry('Input', {'default': ['Z', 'a']}),
        'Z': arch_entry('X'),
        'a': arch_entry('X', {'default': ['b']}),
        'b': arch_entry('X'),
    }
    assert get_canonical_layer_order(arch) == ['Input', 'a', 'Z', 'b']


def test_canonical_order_names_ascending_within_a_group():
    arch = {
        'Input': arch_entry('Input', {'default': ['B', 'A', 'D']}),
        'A': arch_entry('X', {'default': ['C']}),
        'B': arch_entry('X', {'default': ['C']}),
        'C': arch_entry('X', {'default': ['Loss']}),
        'D': arch_entry('X'),
        'Loss': arch_entry('X'),
    }
    assert get_canonical_layer_order(arch) == ['Input', 'A', 'B', 'C', 'D', 'Loss']


def test_canonical_order_is_topological_and_uppercase_first():
    arch = {
        'Input': arch_entry('Input', {'default': ['b', 'B']}),
        'b': arch_entry('X', {'default': ['out']}),
        'B': arch_entry('X', {'default': ['out']}),
        'out': arch_entry('X'),
    }
    assert get_canonical_layer_order(arch) == ['Input', 'B', 'b', 'out']


def test_network_layers_follow_canonical_order():
    net = Network.from_layer(classifier())
    assert list(net.layers) == ['Input', 'Hid', 'Rnn', 'Proj', 'Out', 'Loss']
    assert net.loss_layers == ['Loss']


# ----------------------------------------------------------- instantiation ---


def test_instantiate_creates_layer_objects_with_shapes():
    arch = generate_architecture(classifier())
    layers = instantiate_layers_from_architecture(arch)
    assert list(layers) == ['Input', 'Hid', 'Rnn', 'Proj', 'Out', 'Loss']
    assert type(layers['Rnn']).__name__ == 'RecurrentLayerImpl'
    assert layers['Rnn'].name == 'Rnn'
    assert layers['Rnn'].in_shapes['default'] == BufferStructure('T', 'B', 5)
    assert layers['Out'].in_shapes == {
        'default': BufferStructure('T', 'B', 2),
        'targets': BufferStructure('T', 'B', 1),
    }
    assert list(layers['Out'].in_shapes) == ['default', 'targets']
    assert layers['Hid'].parameter_shapes['W'] == BufferStructure(5, 3)
    assert layers['Loss'].in_shapes['default'] == BufferStructure('T', 'B', 1)
    incoming = layers['Out'].incoming
    assert Connection('Input', 'targets', 'Out', 'targets') in incoming
    assert layers['Out'].outgoing == [Connection('Out', 'loss', 'Loss', 'default')]


def concatenating_network():
    inp = Input(out_shapes={'default': ('T', 'B', 3), 'extra': ('T', 'B', 2)})
    a = FullyConnected(4, activation='linear', name='A')
    b = FullyConnected(2, activation='linear', name='B')
    c = FullyConnected(3, activation='linear', name='C')
    inp >> a >> c
    inp >> b >> c
    inp - 'extra' >> b
    c >> Loss()
    return Network.from_layer(inp)


def test_instantiation_concatenates_all_outputs_into_an_input():
    net = concatenating_network()
    assert net.layers['C'].in_shapes['default'] == BufferStructure('T', 'B', 6)
    assert net.layers['C'].parameter_shapes['W'] == BufferStructure(3, 6)
    # 'default' and 'extra' of Input both feed B: 5 features
    assert net.layers['B'].in_shapes['default'] == BufferStructure('T', 'B', 5)


def test_concatenated_input_is_a_view_of_the_sources():
    net = concatenating_network()
    net.initialize(0.5, seed=1)
    rnd = np.random.RandomState(3)
    net.provide_external_data(
        {'default': rnd.randn(2, 3, 3), 'extra': rnd.randn(2, 3, 2)}
    )
    net.forward_pass()
    b = net.buffer
    expected = np.concatenate(
        [net.get('A.outputs.default'), net.get('B.outputs.default')], axis=2
    )
    np.testing.assert_array_equal(net.get('C.inputs.default'), expected)
    assert np.shares_memory(b.C.inputs.default, b.A.outputs.default)
    assert np.shares_memory(b.C.inputs.default, b.B.outputs.default)
    assert np.shares_memory(b.C.input_deltas.default, b.A.output_deltas.default)
    assert np.shares_memory(b.C.input_deltas.default, b.B.output_deltas.default)


# ---------------------------------------------------------------- networks ---


def test_from_layer_and_from_architecture_agree():
    arch = generate_architecture(classifier())
    net1 = Network.from_layer(classifier())
    net2 = Network.from_architecture(json.loads(json.dumps(arch)))
    assert net1.architecture == net2.architecture == arch
    assert list(net1.layers) == list(net2.layers)
    assert net1.buffer.parameters.shape == net2.buffer.parameters.shape


def test_from_architecture_keeps_its_own_copy():
    arch = generate_architecture(classifier())
    net = Network.from_architecture(arch)
    arch['Hid']['size'] = 99
    assert net.architecture['Hid']['size'] == 5


def test_json_round_trip_gives_equal_outputs():
    arch = generate_architecture(classifier())
    net1 = Network.from_architecture(arch)
    net2 = Network.from_architecture(json.loads(json.dumps(arch)))
    net1.initialize(0.3, seed=4)
    net2.initialize(0.3, seed=4)
    rnd = np.random.RandomState(0)
    data = {'default': rnd.randn(3, 2, 3), 'targets': rnd.randint(0, 2, size=(3, 2, 1))}
    for net in (net1, net2):
        net.provide_external_data(data)
        net.forward_pass()
    np.testing.assert_array_equal(
        net1.get('Out.outputs.predictions'), net2.get('Out.outputs.predictions')
    )
    assert net1.get_loss_values() == net2.get_loss_values()


def test_exposed_parameters_feed_another_layer():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    fc = FullyConnected(2, name='fc')
    inp >> fc
    fc - '..parameters.W' >> Loss(name='Decay')
    net = Network.from_layer(inp)
    assert net.layers['Decay'].in_shapes['default'] == BufferStructure(2, 3)
    net.initialize(0.25)
    net.provide_external_data({'default': np.ones((1, 1, 3))})
    net.forward_pass()
    assert net.get_loss_values()['total_loss'] == pytest.approx(1.5)
    assert np.shares_memory(net.buffer.Decay.inputs.default, net.buffer.fc.parameters.W)


def test_exposed_internal_feeds_another_layer():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    rnn = Recurrent(2, name='rnn')
    se = SquaredError(name='se')
    inp >> rnn
    rnn - '..internals.Ha' >> se
    inp >> FullyConnected(2, name='t') >> 'targets' - se
    arch = generate_architecture(inp)
    assert arch['rnn']['@outgoing_connections'] == {'..internals.Ha': ['se']}
    net = Network.from_architecture(arch)
    assert net.layers['se'].in_shapes['default'] == BufferStructure('T', 'B', 2)
    net.initialize(0.1)
    net.provide_external_data({'default': np.ones((2, 1, 3))})
    net.forward_pass()
    np.testing.assert_array_equal(
        net.get('se.inputs.default'), net.get('rnn.internals.Ha')[:2]
    )
    assert np.shares_memory(
        net.buffer.se.input_deltas.default, net.buffer.rnn.internals.dHa
    )


def test_duplicate_connection_is_rejected_with_a_clear_message():
    # the same output twice into one input cannot be laid out as a view;
    # the layout compiler used to report an obscure 'cycle' instead
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    hid = FullyConnected(2, name='Hid')
    inp >> hid
    inp >> hid
    hid >> Loss()
    with pytest.raises(NetworkValidationError, match="'Input'.*'Hid' more than once"):
        Network.from_layer(inp)


@pytest.mark.parametrize('destination', ['Hid.', 'Hid.a.b', 'Hid.1x'])
def test_malformed_destination_is_rejected(destination):
    arch = {
        'Input': arch_entry(
            'Input', [destination], out_shapes=shapes(default=('T', 'B', 3))
        ),
        'Hid': arch_entry('FullyConnected', size=2),
    }
    with pytest.raises(NetworkValidationError, match=repr(destination)):
        validate_architecture(arch)


def test_softmax_with_several_feature_axes_in_a_network():
    # Network buffers are feature slices of one time-sized array, so a
    # (T, B, 2, 3) input cannot be flattened to (T*B*2, 3) without a copy;
    # SoftmaxCE used to raise ValueError here.
    inp = Input(out_shapes={'default': ('T', 'B', 2, 3), 'targets': ('T', 'B', 2, 1)})
    out = SoftmaxCE(name='Out')
    inp >> out
    inp - 'targets' >> 'targets' - out - 'loss' >> Loss()
    net = Network.from_layer(inp)
    rnd = np.random.RandomState(5)
    x = rnd.randn(2, 3, 2, 3)
    t = rnd.randint(0, 3, (2, 3, 2, 1))
    net.provide_external_data({'default': x, 'targets': t})
    net.forward_pass()
    net.backward_pass()
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    picked = np.take_along_axis(p, t, axis=-1)
    np.testing.assert_allclose(net.get('Out.outputs.predictions'), p, rtol=1e-5)
    np.testing.assert_allclose(net.get('Out.outputs.loss'), -np.log(picked), rtol=1e-5)
    onehot = np.zeros_like(p)
    np.put_along_axis(onehot, t, 1.0, axis=-1)
    np.testing.assert_allclose(
        net.get('Input.output_deltas.default'), (p - onehot) / 3, rtol=1e-5, atol=1e-7
    )


@pytest.mark.parametrize('thing', ['Input', None, 3, {'Input': {}}])
def test_generate_architecture_of_a_non_layer_is_a_type_error(thing):
    with pytest.raises(TypeError, match='Received'):
        generate_architecture(thing)
    with pytest.raises(TypeError, match='Received'):
        Network.from_layer(thing)
