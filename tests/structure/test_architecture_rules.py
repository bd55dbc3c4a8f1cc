"""The rules of building, checking and ordering architectures, at their edges.

``brainstorm/structure/construction.py`` turns layers joined with ``>>`` and
``-`` into layer details: the selected output and input of each connection,
the names made unique within each connected scope, the arguments kept.
``brainstorm/structure/architecture.py`` turns those into an architecture
dict, checks a dict given by hand (names, entries, destinations, the one
Input layer, acyclic and connected), orders the layers so that each runs
after the layers it reads, and makes the layer objects with each input
joined from the outputs connected to it. A gap there builds another network
than written, accepts one that cannot run, or reports it late and unclearly.
"""

import warnings
from collections import OrderedDict
from fractions import Fraction

import pytest

from brainstorm.errors import FeatureJoinWarning
from brainstorm.layers import (
    Clockwork,
    Dropout,
    FullyConnected,
    Input,
    Loss,
    Recurrent,
    SquaredError,
)
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.architecture import (
    generate_architecture,
    get_canonical_layer_order,
    get_kwargs,
    validate_architecture,
)
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.network import Network
from brainstorm.utils import LayerValidationError, NetworkValidationError


def entry(type_name, outgoing=None, **kwargs):
    """An architecture entry of type ``type_name``."""
    result = {'@type': type_name, '@outgoing_connections': outgoing or {}}
    result.update(kwargs)
    return result


def chain():
    """The architecture of Input -> Hid (FullyConnected 2) -> Loss."""
    return {
        'Input': entry(
            'Input', {'default': ['Hid']}, out_shapes={'default': ['T', 'B', 3]}
        ),
        'Hid': entry('FullyConnected', {'default': ['Loss']}, size=2),
        'Loss': entry('Loss'),
    }


# ------------------------------------------------------------- entries ---


@pytest.mark.parametrize('layer_type', [None, 3, ['FullyConnected']], ids=repr)
def test_an_entry_whose_type_is_no_string_says_so(layer_type):
    arch = chain()
    arch['Hid']['@type'] = layer_type
    with pytest.raises(NetworkValidationError) as info:
        validate_architecture(arch)
    message = str(info.value)
    assert "'Hid'" in message
    assert "'@type' must be a string" in message


def test_an_entry_without_a_type_says_the_type_must_be_a_string():
    arch = chain()
    del arch['Hid']['@type']
    with pytest.raises(NetworkValidationError, match="'Hid'.*'@type' must be a string"):
        validate_architecture(arch)


# -------------------------------------------------------- destinations ---


@pytest.mark.parametrize(
    'destinations', [{'Loss'}, 'Loss', None, frozenset()], ids=repr
)
def test_destinations_that_are_no_list_are_refused_as_such(destinations):
    """Only a list or tuple of destinations: a set, a str, None are refused."""
    arch = chain()
    arch['Hid']['@outgoing_connections']['default'] = destinations
    with pytest.raises(NetworkValidationError) as info:
        validate_architecture(arch)
    message = str(info.value)
    assert "'Hid'" in message
    assert "'default'" in message
    assert 'must be a list' in message


def test_a_tuple_of_destinations_is_a_list_of_them():
    arch = chain()
    arch['Hid']['@outgoing_connections']['default'] = ('Loss',)
    assert validate_architecture(arch) is True


# ----------------------------------------------------- canonical order ---


def test_the_canonical_order_of_a_cycle_is_refused_not_cut_short():
    """No order runs every layer after its inputs: an error, not a part."""
    arch = chain()
    arch['Loss']['@outgoing_connections'] = {'default': ['Hid']}
    with pytest.raises(NetworkValidationError, match='cycle'):
        get_canonical_layer_order(arch)
    arch['Loss']['@outgoing_connections'] = {}
    assert get_canonical_layer_order(arch) == ['Input', 'Hid', 'Loss']


# ------------------------------------------------------------ get_kwargs ---


def test_get_kwargs_gives_every_argument_but_type_and_connections_copied():
    arch = generate_architecture(
        Input(out_shapes={'default': ('T', 'B', 3)})
        >> FullyConnected(2, activation='tanh', name='Hid')
    )
    kwargs = get_kwargs(arch['Hid'])
    assert kwargs == {'size': 2, 'activation': 'tanh'}
    shapes = get_kwargs(arch['Input'])
    assert shapes == {'out_shapes': {'default': ['T', 'B', 3]}}
    # each value a copy: changing it does not change the architecture
    assert shapes['out_shapes'] is not arch['Input']['out_shapes']
    shapes['out_shapes']['targets'] = ['T', 'B', 1]
    assert arch['Input']['out_shapes'] == {'default': ['T', 'B', 3]}


# ------------------------------------------------------ joined inputs ---


def _exposing(constructor, exposed):
    """Input -> rnn, with ``exposed`` of rnn feeding the Loss 'sink'."""
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    rnn = constructor(2, name='rnn')
    inp >> rnn
    rnn - exposed >> Loss(name='sink')
    return inp


def _joining(in_name):
    """Outputs with (2, 3) and (2, 4) features joined into ``in_name`` of
    the SquaredError 'se', its other input fed (2, 7) features."""
    other = 'targets' if in_name == 'default' else 'default'
    inp = Input(
        out_shapes={
            'default': ('T', 'B', 2, 3),
            'x': ('T', 'B', 2, 4),
            'y': ('T', 'B', 2, 7),
        }
    )
    se = SquaredError(name='se')
    inp >> in_name - se
    inp - 'x' >> in_name - se
    inp - 'y' >> other - se
    return inp


def test_an_exposed_internal_whose_deltas_are_dropped_warns():
    """Clockwork does not pass the deltas of Ha back: a gradient is lost."""
    with pytest.warns(RuntimeWarning) as record:
        Network.from_layer(_exposing(Clockwork, '..internals.Ha'))
    messages = [str(w.message) for w in record if w.category is RuntimeWarning]
    assert len(messages) == 1
    assert "Clockwork 'rnn'" in messages[0]
    assert "internal 'Ha'" in messages[0]
    assert "'sink.default'" in messages[0]


@pytest.mark.parametrize(
    'constructor, exposed',
    [(Recurrent, '..internals.Ha'), (Clockwork, '..parameters.W')],
    ids=['internal-passed-back', 'parameter'],
)
def test_exposed_buffers_whose_deltas_count_do_not_warn(constructor, exposed):
    """An internal passed back (Recurrent's Ha) or a parameter: no warning."""
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        net = Network.from_layer(_exposing(constructor, exposed))
    assert 'rnn' in net.layers


def test_the_warnings_of_joined_inputs_come_from_the_architecture_module():
    """A filter for brainstorm.structure.architecture selects both warnings."""
    for inp, category in [
        (_exposing(Clockwork, '..internals.Ha'), RuntimeWarning),
        (_joining('default'), FeatureJoinWarning),
    ]:
        with warnings.catch_warnings():
            warnings.simplefilter('ignore')
            warnings.filterwarnings(
                'error', module=r'brainstorm\.structure\.architecture$'
            )
            with pytest.raises(category):
                Network.from_layer(inp)


@pytest.mark.parametrize(
    'in_name, suggestion',
    [('default', 'merge >> se;'), ('targets', "merge >> 'targets' - se;")],
)
def test_a_join_of_multi_dimensional_outputs_suggests_a_merge_into_that_input(
    in_name, suggestion
):
    with pytest.warns(FeatureJoinWarning) as record:
        net = Network.from_layer(_joining(in_name))
    assert net.layers['se'].in_shapes[in_name] == BufferStructure('T', 'B', 2, 7)
    message = str(record[0].message)
    assert f"SquaredError 'se': input '{in_name}' joins several outputs" in message
    assert "'Input.default' ('T', 'B', 2, 3), 'Input.x' ('T', 'B', 2, 4)" in message
    assert suggestion in message


def test_an_internal_without_a_delta_buffer_cannot_be_exposed():
    """Clockwork's mask 'inactive' has no 'dinactive' to take deltas back."""
    with pytest.raises(LayerValidationError) as info:
        Network.from_layer(_exposing(Clockwork, '..internals.inactive'))
    message = str(info.value)
    assert "Clockwork 'rnn'" in message
    assert "no delta buffer 'dinactive'" in message


@pytest.mark.parametrize(
    'exposed', ['..outputs.default', '..parameters.Q', '..internals', '..x.W']
)
def test_only_existing_parameters_and_internals_can_be_exposed(exposed):
    with pytest.raises(LayerValidationError) as info:
        Network.from_layer(_exposing(Clockwork, exposed))
    message = str(info.value)
    assert "Clockwork 'rnn'" in message
    assert f"cannot expose '{exposed}'" in message


# -------------------------------------------------------- construction ---


@pytest.mark.parametrize('name, named', [(None, 'FullyConnected'), ('Hid', 'Hid')])
def test_an_invalid_argument_names_the_layer_by_its_name_or_type(name, named):
    """An unnamed layer is named by its type, as its default name is."""
    with pytest.raises(LayerValidationError) as info:
        FullyConnected(-1, name=name)
    assert f"FullyConnected '{named}': size must be" in str(info.value)


def test_layers_are_equal_only_to_themselves():
    """Two layers alike are two layers: both are kept, each numbered."""
    a, b = FullyConnected(2).layer, FullyConnected(2).layer
    assert a == a
    assert not a == b
    assert a != b
    assert [a, b].count(b) == 1
    a.connect_to(b, 'default', 'default')
    assert a.collect_connected_layers() == {a, b}
    assert (a.name, b.name) == ('FullyConnected_1', 'FullyConnected_2')


# ------------------------------------------------------- instantiation ---


@pytest.mark.parametrize(
    'key', ['name', 'in_shapes', 'incoming_connections', 'outgoing_connections']
)
def test_an_entry_cannot_pass_the_arguments_a_layer_is_made_with(key):
    """The name is the entry's key; the shapes and connections are derived."""
    arch = chain()
    arch['Hid'][key] = 'X'
    with pytest.raises(LayerValidationError) as info:
        Network.from_architecture(arch)
    message = str(info.value)
    assert "FullyConnected 'Hid'" in message
    assert f"unexpected argument(s) ['{key}']" in message


class ArchRulesUncheckedLayerImpl(Layer):
    """A layer with one output that does not check its own connections."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {}

    def setup(self, kwargs, in_shapes):
        return OrderedDict(default=in_shapes['default']), OrderedDict(), OrderedDict()

    def _validate_connections(self):
        pass


def test_a_connection_from_an_output_the_source_lacks_is_refused_by_its_reader():
    """Also where the source layer itself does not check its connections."""
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    source = ConstructionWrapper.create(ArchRulesUncheckedLayerImpl, name='Src')
    inp >> source - 'nope' >> Loss()
    with pytest.raises(LayerValidationError) as info:
        Network.from_layer(inp)
    message = str(info.value)
    assert "ArchRulesUnchecked 'Src': has no output 'nope'" in message
    assert "['default']" in message


def test_an_argument_is_kept_as_given_where_an_architecture_can_store_it():
    """Dropout(0) keeps the int 0, as Brainstorm 0.5's architecture did."""
    kept = Dropout(0).layer.layer_kwargs
    assert kept == {'drop_prob': 0}
    assert type(kept['drop_prob']) is int


def test_an_accepted_argument_an_architecture_cannot_store_is_kept_as_checked():
    """A Fraction passes the check as the float it is; that float is kept."""
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    dropout = Dropout(Fraction(1, 4), name='D')
    kept = dropout.layer.layer_kwargs
    assert kept == {'drop_prob': 0.25}
    assert type(kept['drop_prob']) is float
    inp >> dropout >> Loss()
    arch = generate_architecture(inp)
    assert arch['D']['drop_prob'] == 0.25
    assert Network.from_architecture(arch).layers['D'].kwargs == {'drop_prob': 0.25}
