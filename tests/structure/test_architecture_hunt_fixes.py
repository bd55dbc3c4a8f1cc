"""Fixes of a bug hunt in building networks (architecture, naming, layout).

* several outputs with multi-dimensional features fed into one input
  were laid out as flat blocks one after another, which is no last-axis
  concatenation, without a word: a FeatureJoinWarning now (networks built
  so, and saved, keep loading); such groups of internals are refused;
* the cycle check recursed once per layer (a long chain: RecursionError);
* naming the layers of a scope was quadratic in its size;
* ``from_architecture`` kept NumPy scalars, so saving failed later;
* ``'default\\n'`` passed the layer-name rule;
* ``forward_pass(context=...)`` gave a bare AttributeError for a list and
  ignored arrays in entries that take no context.
"""

from collections import OrderedDict

import numpy as np
import pytest

import brainstorm.structure.construction as construction
from brainstorm.describable import get_description
from brainstorm.errors import FeatureJoinWarning
from brainstorm.handlers import NumpyHandler
from brainstorm.initializers import Gaussian
from brainstorm.layers import (
    Convolution2D,
    FullyConnected,
    Input,
    Loss,
    Merge,
    NoOp,
    Recurrent,
)
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.naming import PYTHON_IDENTIFIER, is_valid_layer_name
from brainstorm.structure.architecture import generate_architecture
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper, LayerDetails
from brainstorm.structure.network import Network
from brainstorm.utils import NetworkValidationError

# ------------------------------------------- implicit concatenation ---


def _two_convolutions(join):
    """Two Convolution2D branches on one image, joined by ``join``."""
    inp = Input(out_shapes={'default': ('T', 'B', 4, 4, 1)})
    c1 = Convolution2D(2, (1, 1), name='C1', activation='linear')
    c2 = Convolution2D(3, (1, 1), name='C2', activation='linear')
    inp >> c1
    inp >> c2
    top = NoOp(name='P')
    join(c1, c2, top)
    top >> Loss()
    return inp


def _implicit(c1, c2, top):
    c1 >> top
    c2 >> top


def _merged(c1, c2, top):
    merge = Merge(name='M')
    c1 >> 'inputs_1' - merge
    c2 >> 'inputs_2' - merge
    merge >> top


def test_implicit_concatenation_of_images_is_named():
    """Two conv branches into one layer: its input was their flat blocks
    one after another, read as (4, 4, 5) images with scrambled pixels."""
    with pytest.warns(FeatureJoinWarning) as info:
        Network.from_layer(_two_convolutions(_implicit))
    message = str(info[0].message)
    for part in (
        "NoOp 'P'",
        "input 'default'",
        "'C1.default' ('T', 'B', 4, 4, 2)",
        "'C2.default' ('T', 'B', 4, 4, 3)",
        'Merge',
    ):
        assert part in message


def test_merge_concatenates_images_along_the_last_axis():
    """What the error suggests instead gives the channel concatenation."""
    net = Network.from_layer(_two_convolutions(_merged))
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(1.0), seed=7)
    x = np.random.default_rng(0).normal(size=(1, 2, 4, 4, 1))
    net.provide_external_data({'default': x})
    net.forward_pass()
    expected = np.concatenate(
        [net.get('C1.outputs.default'), net.get('C2.outputs.default')], axis=-1
    )
    np.testing.assert_array_equal(net.get('P.inputs.default'), expected)


@pytest.mark.parametrize(
    'shapes',
    [
        {'a': ('T', 'B', 2, 3, 1), 'b': ('T', 'B', 2, 3, 2)},  # Input outputs
        {'a': ('T', 'B', 3, 1), 'b': ('T', 'B', 3, 2)},
    ],
)
def test_multi_dimensional_input_outputs_into_one_input_are_named(shapes):
    inp = Input(out_shapes=shapes)
    n = NoOp(name='N')
    inp - 'a' >> n
    inp - 'b' >> n
    with pytest.warns(FeatureJoinWarning, match="'Input.b'.*Merge"):
        Network.from_layer(inp)


def test_fully_connected_with_tuple_sizes_into_one_input_is_named():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    a, b = FullyConnected((2, 3), name='A'), FullyConnected((2, 1), name='B')
    inp >> a
    inp >> b
    n = NoOp(name='N')
    a >> n
    b >> n
    with pytest.warns(FeatureJoinWarning) as info:
        Network.from_layer(inp)
    assert "NoOp 'N': input 'default'" in str(info[0].message)
    assert "'A.default' ('T', 'B', 2, 3)" in str(info[0].message)


def test_one_multi_dimensional_source_and_flat_joins_still_work():
    """A single image source is fine, and so are sources whose feature
    dimensions but the last are 1: their flat blocks are the join."""
    inp = Input(
        out_shapes={
            'img': ('T', 'B', 2, 3, 2),
            'a': ('T', 'B', 1, 1, 2),
            'b': ('T', 'B', 1, 1, 3),
        }
    )
    single, joined = NoOp(name='Single'), NoOp(name='Joined')
    inp - 'img' >> single
    inp - 'a' >> joined
    inp - 'b' >> joined
    net = Network.from_layer(inp)
    rnd = np.random.default_rng(1)
    data = {
        'img': rnd.normal(size=(2, 3, 2, 3, 2)),
        'a': rnd.normal(size=(2, 3, 1, 1, 2)),
        'b': rnd.normal(size=(2, 3, 1, 1, 3)),
    }
    net.set_handler(NumpyHandler(np.float64))
    net.provide_external_data(data)
    net.forward_pass()
    np.testing.assert_array_equal(net.get('Single.outputs.default'), data['img'])
    np.testing.assert_array_equal(
        net.get('Joined.inputs.default'),
        np.concatenate([data['a'], data['b']], axis=-1),
    )


class HuntGroupedInternalsLayerImpl(Layer):
    """Groups internals ``A`` and ``B`` of the shapes in ``shapes``."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {}
    grouped_buffers = {'internals': {'G': ('A', 'B')}}
    shapes = (('T', 'B', 2, 3), ('T', 'B', 2, 5))

    def setup(self, kwargs, in_shapes):
        a, b = self.shapes
        return (
            OrderedDict(default=BufferStructure('T', 'B', 1)),
            OrderedDict(),
            OrderedDict(A=BufferStructure(*a), B=BufferStructure(*b)),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.fill(buffers.internals.A, 1.0)
        self.handler.fill(buffers.internals.B, 2.0)
        self.handler.fill(buffers.outputs.default, 0.0)

    def backward_pass(self, buffers):
        pass


def _grouped_network():
    inp = Input(out_shapes={'default': ('T', 'B', 1)})
    inp >> ConstructionWrapper.create(HuntGroupedInternalsLayerImpl, name='G')
    return Network.from_layer(inp)


def test_grouping_multi_dimensional_internals_is_refused():
    with pytest.raises(NetworkValidationError) as info:
        _grouped_network()
    message = str(info.value)
    assert "group 'G'" in message
    assert "'A' ('T', 'B', 2, 3)" in message
    assert "'B' ('T', 'B', 2, 5)" in message


def test_grouping_internals_with_leading_ones_is_the_last_axis_join(monkeypatch):
    monkeypatch.setattr(
        HuntGroupedInternalsLayerImpl,
        'shapes',
        (('T', 'B', 1, 3), ('T', 'B', 1, 5)),
    )
    net = _grouped_network()
    net.provide_external_data({'default': np.zeros((2, 1, 1))})
    net.forward_pass()
    group = np.asarray(net.buffer.G.internals.get_group('G'))
    expected = np.concatenate([np.ones((2, 1, 1, 3)), 2 * np.ones((2, 1, 1, 5))], -1)
    np.testing.assert_array_equal(group, expected)


# ------------------------------------------------------ deep chains ---


def _chain_architecture(n):
    arch = {
        'Input': {
            '@type': 'Input',
            'out_shapes': {'default': ['T', 'B', 2]},
            '@outgoing_connections': {'default': ['N0']},
        }
    }
    for i in range(n):
        nxt = [f'N{i + 1}'] if i + 1 < n else []
        arch[f'N{i}'] = {'@type': 'NoOp', '@outgoing_connections': {'default': nxt}}
    return arch


def test_a_chain_of_1100_layers_builds():
    """The cycle check recursed once per layer: RecursionError."""
    inp = Input(out_shapes={'default': ('T', 'B', 2)})
    x = inp
    for i in range(1100):
        x = x >> NoOp(name=f'N{i}')
    net = Network.from_layer(inp)
    assert len(net.layers) == 1101
    assert list(net.layers)[:3] == ['Input', 'N0', 'N1']
    assert list(net.layers)[-1] == 'N1099'


def test_a_cycle_at_the_end_of_a_long_chain_is_named():
    arch = _chain_architecture(1100)
    arch['N1099']['@outgoing_connections'] = {'default': ['N1097']}
    with pytest.raises(NetworkValidationError) as info:
        Network.from_architecture(arch)
    assert str(info.value) == (
        'The architecture contains a cycle: N1097 -> N1098 -> N1099 -> N1097'
    )


@pytest.mark.parametrize(
    'edges, cycle',
    [
        ({'Input': ['A'], 'A': ['B'], 'B': ['A']}, 'A -> B -> A'),
        ({'Input': ['A'], 'A': ['A']}, 'A -> A'),
        (
            {'Input': ['A', 'C'], 'A': ['B'], 'B': [], 'C': ['D'], 'D': ['C']},
            'C -> D -> C',
        ),
    ],
)
def test_cycle_messages_name_the_cycle(edges, cycle):
    arch = {
        name: {
            '@type': 'Input' if name == 'Input' else 'NoOp',
            '@outgoing_connections': {'default': targets},
        }
        for name, targets in edges.items()
    }
    arch['Input']['out_shapes'] = {'default': ['T', 'B', 2]}
    with pytest.raises(NetworkValidationError) as info:
        Network.from_architecture(arch)
    assert str(info.value) == f'The architecture contains a cycle: {cycle}'


# ----------------------------------------------------------- naming ---


def _count_basename_reads(monkeypatch, n):
    """Reads of layers' basenames while generating the architecture of a
    chain of ``n`` layers sharing one basename."""
    reads = [0]

    class CountingDetails(LayerDetails):
        @property
        def _basename(self):
            reads[0] += 1
            return self.__dict__['_counted_basename']

        @_basename.setter
        def _basename(self, value):
            self.__dict__['_counted_basename'] = value

    monkeypatch.setattr(construction, 'LayerDetails', CountingDetails)
    inp = Input(out_shapes={'default': ('T', 'B', 2)})
    x = inp
    for _ in range(n):
        x = x >> NoOp()
    reads[0] = 0
    arch = generate_architecture(inp)
    assert len(arch) == n + 1
    assert f'NoOp_{n}' in arch
    return reads[0]


def test_naming_a_scope_takes_linear_time(monkeypatch):
    """Each name read scanned the whole scope: 17.7 s for 4000 layers."""
    small = _count_basename_reads(monkeypatch, 100)
    large = _count_basename_reads(monkeypatch, 400)
    # linear: about 4 times as many reads; quadratic: about 16 times
    assert large <= 6 * small
    assert large <= 10 * 400


def test_names_follow_merges_after_they_were_read():
    """Names are cached per scope; merging scopes must renumber both sides."""
    big = [NoOp(name='A') for _ in range(3)]
    big[0] >> big[1] >> big[2]
    explicit = NoOp(name='A_2')
    other = NoOp(name='A')
    explicit >> other
    assert [w.layer.name for w in big] == ['A_1', 'A_2', 'A_3']
    assert (explicit.layer.name, other.layer.name) == ('A_2', 'A')
    big[2] >> explicit  # the small scope joins the big one
    assert [w.layer.name for w in big] == ['A_1', 'A_3', 'A_4']
    assert (explicit.layer.name, other.layer.name) == ('A_2', 'A_5')
    assert big[0].layer.scope is other.layer.scope


# -------------------------------------------------- NumPy scalars ---


def _small_architecture():
    inp = Input(out_shapes={'default': ('T', 'B', 3), 'targets': ('T', 'B', 1)})
    inp >> FullyConnected(4, name='H') >> NoOp(name='Out') >> Loss()
    return generate_architecture(inp)


def test_from_architecture_with_numpy_scalars_can_be_saved(tmp_path):
    arch = _small_architecture()
    arch['H']['size'] = np.int64(8)
    arch['Input']['out_shapes']['default'] = ('T', 'B', np.int32(3))
    net = Network.from_architecture(arch)
    assert type(net.architecture['H']['size']) is int
    assert net.architecture == get_description(arch)
    assert arch['H']['size'].dtype == np.int64  # the given dict is unchanged
    net.initialize(Gaussian(0.1), seed=1)
    path = tmp_path / 'net.h5'
    net.save_as_hdf5(str(path))
    loaded = Network.from_hdf5(str(path))
    assert loaded.architecture == net.architecture
    np.testing.assert_array_equal(loaded.get('parameters'), net.get('parameters'))


def test_from_architecture_refuses_values_that_cannot_be_stored():
    arch = _small_architecture()
    arch['H']['size'] = object()
    with pytest.raises(NetworkValidationError, match="Layer 'H'.*object"):
        Network.from_architecture(arch)


# ------------------------------------------------ trailing newlines ---


def test_names_with_a_trailing_newline_are_invalid():
    assert not is_valid_layer_name('default\n')
    assert not is_valid_layer_name('Hid\n')
    assert PYTHON_IDENTIFIER.match('Hid\n') is None
    with pytest.raises(NetworkValidationError, match='invalid layer name'):
        FullyConnected(2, name='default\n')
    arch = _small_architecture()
    arch['H\n'] = arch.pop('H')
    arch['Input']['@outgoing_connections']['default'] = ['H\n']
    with pytest.raises(NetworkValidationError, match='Invalid layer name'):
        Network.from_architecture(arch)
    arch = _small_architecture()
    arch['H']['@type'] = 'FullyConnected\n'
    with pytest.raises(NetworkValidationError, match="invalid '@type'"):
        Network.from_architecture(arch)


# ---------------------------------------------------------- context ---


def _recurrent_network():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    inp >> Recurrent(2, name='R') >> Loss()
    net = Network.from_layer(inp)
    net.initialize(0.1)
    net.provide_external_data({'default': np.ones((3, 2, 3))})
    net.forward_pass()
    return net


def test_a_context_entry_that_is_no_array_is_a_clear_error():
    net = _recurrent_network()
    context = net.get_context()
    with pytest.raises(NetworkValidationError) as info:
        net.forward_pass(context=[None, None, context[2].tolist()])
    message = str(info.value)
    assert 'context[2]' in message and 'R.outputs.default' in message
    assert 'Received: list' in message
    # a NumPy copy is still taken
    net.forward_pass(context=[None, None, np.array(context[2])])


@pytest.mark.parametrize('slot', [0, 1])
def test_a_context_in_an_entry_without_context_slots_is_refused(slot):
    """It was silently ignored: the pass ran from a zero context."""
    net = _recurrent_network()
    context = [None, None, None]
    context[slot] = net.get_context()[2]
    with pytest.raises(NetworkValidationError) as info:
        net.forward_pass(context=context)
    assert f'context[{slot}] must be None' in str(info.value)
    assert 'ndarray of shape (1, 2, ' in str(info.value)


def test_a_context_for_a_network_without_one_is_refused():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    inp >> FullyConnected(2, name='H') >> Loss()
    net = Network.from_layer(inp)
    net.initialize(0.1)
    net.provide_external_data({'default': np.ones((3, 2, 3))})
    with pytest.raises(NetworkValidationError, match='takes no context'):
        net.forward_pass(context=[None, None, np.zeros((1, 2, 2))])
    net.forward_pass(context=net.get_context())  # [None, None, None]


def test_a_network_with_such_a_join_saved_before_still_loads(tmp_path):
    """Files of networks that join images into a FullyConnected (which
    learns from either order) were refused when the join was an error."""
    inp = Input(out_shapes={'default': ('T', 'B', 4, 4, 1), 'targets': ('T', 'B', 2)})
    c1 = Convolution2D(2, (1, 1), name='C1', activation='linear')
    c2 = Convolution2D(3, (1, 1), name='C2', activation='linear')
    inp >> c1
    inp >> c2
    fc = FullyConnected(2, name='F', activation='linear')
    c1 >> fc
    c2 >> fc
    with pytest.warns(FeatureJoinWarning):
        net = Network.from_layer(fc >> Loss())
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(1.0), seed=2)
    net.save_as_hdf5(str(tmp_path / 'join.h5'))
    with pytest.warns(FeatureJoinWarning):
        loaded = Network.from_hdf5(str(tmp_path / 'join.h5'))
    x = np.random.default_rng(1).normal(size=(1, 3, 4, 4, 1))
    for n in (net, loaded):
        n.provide_external_data({'default': x, 'targets': np.zeros((1, 3, 2))})
        n.forward_pass()
    np.testing.assert_array_equal(
        loaded.get('F.outputs.default'), net.get('F.outputs.default')
    )
