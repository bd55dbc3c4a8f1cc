"""The rules of the layout compiler (``brainstorm/structure/layout.py``).

Every buffer of a network gets a range of one of three flat arrays; these
tests state the rules that keep the ranges apart and inside their arrays:
the arrays that own memory tile each flat array without a gap or an
overlap, forward memory before backward memory; a view is one array only
over adjacent arrays of one kind; groups and concatenations that cannot be
laid out are refused with the reason; and ``constant_size`` is the end of
the constant array.
"""

import warnings
from collections import OrderedDict

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.layers import (
    Convolution2D,
    FullyConnected,
    Input,
    Loss,
    Lstm,
    Recurrent,
    SquaredError,
)
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.architecture import generate_architecture
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.layout import constant_size, get_buffer_type, plan_network
from brainstorm.structure.network import Network
from brainstorm.utils import NetworkValidationError

#: the categories whose arrays own memory (inputs and input deltas are
#: views of their sources' outputs and output deltas)
OWNING = ('outputs', 'parameters', 'internals', 'output_deltas', 'gradients')


class LayoutRulesLayerImpl(Layer):
    """A layer whose parameters, internals and groups each test sets."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {}
    parameters = {}
    internals = {}
    grouped_buffers = {}

    def setup(self, kwargs, in_shapes):
        return (
            OrderedDict(default=BufferStructure('T', 'B', 2)),
            OrderedDict(
                (n, BufferStructure(*s)) for n, s in type(self).parameters.items()
            ),
            OrderedDict(
                (n, BufferStructure(*s, **k))
                for n, (s, k) in type(self).internals.items()
            ),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.fill(buffers.outputs.default, 0.0)

    def backward_pass(self, buffers):
        pass


@pytest.fixture
def custom(monkeypatch):
    """``make(parameters, internals, groups)``: a layer 'X' fed by 'Input'.

    ``internals`` maps a name to ``(shape, kwargs of BufferStructure)``.
    """

    def make(parameters=None, internals=None, groups=None):
        for attribute, value in (
            ('parameters', parameters),
            ('internals', internals),
            ('grouped_buffers', groups),
        ):
            monkeypatch.setattr(LayoutRulesLayerImpl, attribute, value or {})
        inp = Input(out_shapes={'default': ('T', 'B', 3)})
        x = ConstructionWrapper.create(LayoutRulesLayerImpl, name='X')
        inp >> x
        return inp, x

    return make


def seed_network():
    inputs = Input(out_shapes={'input_data': ('T', 'B', 4), 'targets': ('T', 'B', 10)})
    mse = SquaredError(name='Mse')
    (
        inputs - 'input_data'
        >> Recurrent(5, name='Rnn')
        >> FullyConnected(10, name='OutLayer')
        >> mse
    )
    inputs - 'targets' >> 'targets' - mse
    mse - 'loss' >> Loss()
    return Network.from_layer(mse)


def lstm_network():
    inp = Input(out_shapes={'default': ('T', 'B', 3), 'targets': ('T', 'B', 4)})
    mse = SquaredError(name='Mse')
    inp >> Lstm(5, name='L') >> FullyConnected(4, name='Out') >> mse
    inp - 'targets' >> 'targets' - mse
    return Network.from_layer(mse)


def exposed_parameter_network():
    """A Loss fed with a layer's weights: its deltas get memory of their own."""
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    fc = FullyConnected(4, name='Fc')
    inp >> fc >> Loss(name='Out')
    fc - '..parameters.W' >> Loss(name='Decay')
    return Network.from_layer(inp)


def out_of_order_concatenation():
    """C's input is [A, Z] (by name) though Z comes before A in the network."""
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    z = FullyConnected(2, name='Z')
    a = FullyConnected(4, name='A')
    c = FullyConnected(5, name='C')
    inp >> z >> a
    a >> c
    z >> c
    return Network.from_layer(inp)


def parameterless_network():
    inp = Input(out_shapes={'default': ('T', 'B', 3), 'targets': ('B', 2)})
    return Network.from_layer(inp)


NETWORKS = {
    'seed': seed_network,
    'lstm': lstm_network,
    'exposed-parameter': exposed_parameter_network,
    'out-of-order-concatenation': out_of_order_concatenation,
    'parameterless': parameterless_network,
}


def layer_views(layout):
    for lname, view in layout.items():
        if not lname.startswith('@') and view['@type'] == 'BufferView':
            yield lname, view


def children(node):
    return [(k, v) for k, v in node.items() if not k.startswith('@')]


def owned_arrays(layout):
    """(buffer type, start, stop, backward, path) of each array owning memory."""
    found = []
    for lname, view in layer_views(layout):
        for category in OWNING:
            for name, node in children(view[category]):
                start, stop = node['@slice']
                found.append(
                    (
                        get_buffer_type(node['@shape']),
                        start,
                        stop,
                        node.get('@is_backward_only', False),
                        f'{lname}.{category}.{name}',
                    )
                )
    for lname, pname, start, stop in layout['@exposed_gradients']:
        found.append((0, start, stop, True, f'exposed {lname}.{pname}'))
    return found


def all_arrays(node, path=()):
    for name, child in children(node):
        if child['@type'] == 'array':
            yield path + (name,), child
        else:
            yield from all_arrays(child, path + (name,))


@pytest.mark.parametrize('make', NETWORKS.values(), ids=NETWORKS.keys())
def test_owned_arrays_tile_each_buffer_forward_memory_first(make):
    """No gap, no overlap, nothing past the end; backward memory last.

    The arrays that own memory tile ``[0, size)`` of their flat buffer,
    the forward ones ``[0, forward_size)``; every array of the layout
    (inputs and the root parameters and gradients too) lies inside its
    buffer and in the part its backward flag names.
    """
    net = make()
    layout, manager = net.layout, net.buffer_manager
    owned = owned_arrays(layout)
    forward_end = [0, 0, 0]
    for t in range(3):
        spans = sorted(
            (start, stop, backward, path)
            for bt, start, stop, backward, path in owned
            if bt == t
        )
        edge = 0
        for start, stop, _, path in spans:
            assert start == edge, (t, path, spans)
            edge = stop
        assert edge == manager.sizes[t], t
        flags = [backward for _, _, backward, _ in spans]
        assert flags == sorted(flags), (t, spans)  # forward first
        forward_end[t] = sum(b - a for a, b, backward, _ in spans if not backward)
        assert manager.forward_sizes[t] == forward_end[t], t
    for path, node in all_arrays(layout):
        t = get_buffer_type(node['@shape'])
        start, stop = node['@slice']
        assert 0 <= start <= stop <= manager.sizes[t], path
        if stop > start:
            backward = node.get('@is_backward_only', False)
            if backward:
                assert start >= forward_end[t], path
            else:
                assert stop <= forward_end[t], path
    assert constant_size(layout) == manager.sizes[0]


def test_root_parameters_and_gradients_span_the_layers_ones():
    for make in (seed_network, lstm_network, exposed_parameter_network):
        layout = make().layout
        for root in ('parameters', 'gradients'):
            spans = sorted(
                node['@slice']
                for _, view in layer_views(layout)
                for _, node in children(view[root])
            )
            assert layout[root]['@slice'] == (spans[0][0], spans[-1][1])
            assert layout[root]['@shape'] == (spans[-1][1] - spans[0][0],)
        assert layout['gradients']['@is_backward_only'] is True
        assert '@is_backward_only' not in layout['parameters']


def test_a_network_without_parameters_has_an_empty_constant_buffer():
    net = parameterless_network()
    assert net.layout['parameters']['@slice'] == (0, 0)
    assert net.layout['gradients']['@slice'] == (0, 0)
    assert constant_size(net.layout) == 0
    assert net.buffer_manager.sizes[0] == 0
    assert net.buffer.parameters.size == 0


@pytest.mark.parametrize(
    'make, expected',
    [
        # parameters and gradients, the Loss's output and its delta
        (seed_network, 2 * (5 * 4 + 5 * 5 + 5 + 10 * 5 + 10) + 2),
        (lstm_network, 2 * (4 * (5 * 3 + 5 * 5 + 5) + 3 * 5 + 4 * 5 + 4)),
        # and Decay's internal, and its deltas of W, which have memory of
        # their own at the end of the buffer (seen only in Decay's input
        # deltas, not in the root's gradients)
        (exposed_parameter_network, 2 * (4 * 3 + 4) + 2 * 2 + 4 * 3 + 4 * 3),
        (parameterless_network, 0),
    ],
)
def test_constant_size_is_the_end_of_the_constant_buffer(make, expected):
    """It counts constant arrays at every depth and no others.

    The parameterless network has a batch-sized output and the others
    larger time-sized ones: their ranges are not in the constant buffer.
    """
    net = make()
    assert constant_size(net.layout) == expected
    assert net.buffer_manager.sizes[0] == expected
    assert net.buffer.parameters.size + net.buffer.gradients.size <= expected


@pytest.mark.parametrize('make', NETWORKS.values(), ids=NETWORKS.keys())
def test_a_view_is_one_array_only_over_adjacent_arrays_of_one_kind(make):
    check_view_slices(make().layout)


def check_view_slices(layout):
    """A view of arrays gets a ``@slice`` iff they are one range of one kind.

    One kind: the same buffer type, context size and backward flag; one
    range: each starts where the one before it stops. The ``@slice`` is
    then that range (the network carves one array over it).
    """
    seen = {True: 0, False: 0}
    for lname, view in layer_views(layout):
        for category, node in children(view):
            arrays = [a for _, a in children(node)]
            if not arrays:
                continue
            kinds = {
                (
                    get_buffer_type(a['@shape']),
                    a.get('@context_size', 0),
                    a.get('@is_backward_only', False),
                )
                for a in arrays
            }
            adjacent = all(
                a['@slice'][1] == b['@slice'][0] for a, b in zip(arrays, arrays[1:])
            )
            one_array = len(kinds) == 1 and adjacent
            assert ('@slice' in node) == one_array, (lname, category)
            seen[one_array] += 1
            if one_array:
                assert node['@slice'] == (
                    arrays[0]['@slice'][0],
                    arrays[-1]['@slice'][1],
                ), (lname, category)
    return seen


def test_the_seed_networks_mse_inputs_are_not_one_array():
    """Its inputs (OutLayer's output, the Input's targets) are not adjacent."""
    layout = seed_network().layout
    inputs = layout['Mse']['inputs']
    assert inputs['default']['@slice'][1] != inputs['targets']['@slice'][0]
    assert '@slice' not in inputs


@pytest.mark.parametrize(
    'internals',
    [
        # adjacent, time-sized, but with and without a context slot
        {
            'A': (('T', 'B', 2), {'context_size': 1}),
            'B': (('T', 'B', 3), {}),
        },
        # adjacent, batch-sized, the last forward and the first backward array
        {'F': (('B', 2), {}), 'dF': (('B', 2), {'is_backward_only': True})},
    ],
    ids=['context', 'backward'],
)
def test_adjacent_arrays_of_different_kinds_are_no_one_array(custom, internals):
    inp, _ = custom(internals=internals)
    net = Network.from_layer(inp)
    node = net.layout['X']['internals']
    spans = [node[n]['@slice'] for n in internals]
    assert spans[0][1] == spans[1][0]  # adjacent ...
    assert '@slice' not in node  # ... but of two kinds
    check_view_slices(net.layout)


def test_a_group_of_one_member_is_that_member(custom):
    inp, _ = custom(
        internals={'A': (('T', 'B', 3), {}), 'B': (('T', 'B', 2), {})},
        groups={'internals': {'G': ('A',)}},
    )
    net = Network.from_layer(inp)
    net.set_handler(NumpyHandler(np.float64))
    net.provide_external_data({'default': np.zeros((2, 3, 3))})
    internals = net.buffer.X.internals
    group = internals.get_group('G')
    assert group.shape == internals.A.shape == (2, 3, 3)
    assert np.shares_memory(group, internals.A)
    assert not np.shares_memory(group, internals.B)


def test_grouped_parameters_join_on_their_first_axis(custom):
    """Constant buffers may differ in the first axis, which they join on."""
    inp, _ = custom(
        parameters={'P': (3, 4), 'Q': (2, 4), 'R': (7,)},
        groups={'parameters': {'PQ': ('P', 'Q')}},
    )
    net = Network.from_layer(inp)
    net.set_handler(NumpyHandler(np.float64))
    view = net.buffer.X.parameters
    group = view.get_group('PQ')
    assert group.shape == (5, 4)
    group[:] = np.arange(20.0).reshape(5, 4)
    np.testing.assert_array_equal(view.P, np.arange(12.0).reshape(3, 4))
    np.testing.assert_array_equal(view.Q, np.arange(12.0, 20.0).reshape(2, 4))


@pytest.mark.parametrize(
    'groups, parameters, internals',
    [
        # constant buffers join on the first axis: the others must agree
        ({'parameters': {'G': ('P', 'Q')}}, {'P': (3, 4), 'Q': (3, 5)}, {}),
        # sized buffers join on the last axis: the others (and the rank) agree
        (
            {'internals': {'G': ('A', 'B')}},
            {},
            {'A': (('T', 'B', 3), {}), 'B': (('T', 'B', 1, 5), {})},
        ),
        (
            {'internals': {'G': ('A', 'B')}},
            {},
            {'A': (('B', 1, 3), {}), 'B': (('B', 1, 1, 5), {})},
        ),
    ],
    ids=['constant-other-axes', 'time-rank', 'batch-rank'],
)
def test_a_group_that_cannot_be_one_array_is_refused(
    custom, groups, parameters, internals
):
    inp, _ = custom(parameters=parameters, internals=internals, groups=groups)
    with pytest.raises(NetworkValidationError, match="group 'G'.*cannot form one"):
        Network.from_layer(inp)


THREE = {n: (('T', 'B', 2), {}) for n in 'ABC'}


@pytest.mark.parametrize(
    'groups',
    [
        # A cannot be followed by both B and C
        {'G1': ('A', 'B'), 'G2': ('A', 'C')},
        # C cannot follow both A and B
        {'G1': ('A', 'C'), 'G2': ('B', 'C')},
    ],
    ids=['two-successors', 'two-predecessors'],
)
def test_incompatible_neighbours_are_refused(custom, groups):
    inp, _ = custom(internals=THREE, groups={'internals': groups})
    with pytest.raises(NetworkValidationError, match='incompatible neighbours'):
        Network.from_layer(inp)


def test_impossible_concatenation_of_outputs_names_the_neighbours():
    # P concatenates [A, B] and Q concatenates [A, C]
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    a, b, c = (FullyConnected(2, name=n) for n in 'ABC')
    p, q = FullyConnected(2, name='P'), FullyConnected(2, name='Q')
    for layer in (a, b, c):
        inp >> layer
    a >> p
    b >> p
    a >> q
    c >> q
    with pytest.raises(NetworkValidationError, match='incompatible neighbours'):
        Network.from_layer(p)


def test_an_order_of_neighbours_with_a_cycle_is_refused(custom):
    inp, _ = custom(
        internals=THREE, groups={'internals': {'G1': ('A', 'B'), 'G2': ('B', 'A')}}
    )
    with pytest.raises(NetworkValidationError, match='forms a cycle involving'):
        Network.from_layer(inp)


def test_backward_memory_concatenated_with_forward_memory_is_refused(custom):
    """An input cannot span backward-only and forward memory.

    The backward-only internal would be zeroed when the backward pass
    starts, and cannot lie next to the forward output in one range anyway.
    """
    inp, x = custom(
        internals={
            'S': (('T', 'B', 2), {'is_backward_only': True}),
            'dS': (('T', 'B', 2), {'is_backward_only': True}),
        }
    )
    fc = FullyConnected(2, name='Fc')
    x - '..internals.S' >> fc
    inp >> fc
    with warnings.catch_warnings():
        warnings.simplefilter('ignore')
        with pytest.raises(NetworkValidationError, match='not all of the same'):
            Network.from_layer(inp)


class _KeepsColumns(NumpyHandler):
    def keeps_conv_columns(self, out_cells):
        return True


class _DropsColumns(NumpyHandler):
    def keeps_conv_columns(self, out_cells):
        return False


def test_plan_network_lays_out_the_handlers_workspaces():
    inp = Input(out_shapes={'default': ('T', 'B', 6, 6, 2)})
    inp >> Convolution2D(3, kernel_size=(3, 3), name='Conv')
    architecture = generate_architecture(inp)
    _, layers, layout = plan_network(architecture, _KeepsColumns(np.float64))
    assert 'columns' in layers['Conv'].internal_shapes
    assert layout['Conv']['internals']['columns']['@shape'] == ('T', 'B', 4, 4, 18)
    _, layers, layout = plan_network(architecture, _DropsColumns(np.float64))
    assert 'columns' not in layers['Conv'].internal_shapes
    assert 'columns' not in layout['Conv']['internals']
