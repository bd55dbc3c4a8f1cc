"""The layout compiler and the three-buffer memory it describes."""

import json

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.layers import FullyConnected, Input, Loss, Recurrent, SquaredError
from brainstorm.structure.layout import CATEGORIES, get_buffer_type
from brainstorm.structure.network import Network
from brainstorm.utils import NetworkValidationError


def seed_network():
    """The network of the design documents' "Full Layout Example"."""
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


def iter_nodes(node, path=()):
    for name, child in node.items():
        if not name.startswith('@'):
            yield path + (name,), child
            if child['@type'] == 'BufferView':
                yield from iter_nodes(child, path + (name,))


def test_seed_layout_has_the_seed_format():
    layout = seed_network().layout
    assert layout['@type'] == 'BufferView'
    assert list(k for k in layout if not k.startswith('@')) == [
        'parameters',
        'gradients',
        'Input',
        'Rnn',
        'OutLayer',
        'Mse',
        'Loss',
    ]
    indices = [layout[k]['@index'] for k in layout if not k.startswith('@')]
    assert indices == list(range(7))
    for path, node in iter_nodes(layout):
        assert node['@type'] in ('BufferView', 'array'), path
        assert isinstance(node['@index'], int), path
        if node['@type'] == 'array':
            start, stop = node['@slice']
            assert 0 <= start <= stop, path
            shape = tuple(node['@shape'])
            features = shape[get_buffer_type(shape) :]
            assert stop - start == int(np.prod(features)), path
            if '@context_size' in node:
                assert get_buffer_type(shape) == 2, path
        else:
            children = [k for k in node if not k.startswith('@')]
            assert sorted(node[c]['@index'] for c in children) == list(
                range(len(children))
            ), path
    for layer in ('Input', 'Rnn', 'OutLayer', 'Mse', 'Loss'):
        assert [k for k in layout[layer] if not k.startswith('@')] == list(CATEGORIES)
    rnn = layout['Rnn']
    assert list(k for k in rnn['parameters'] if not k.startswith('@')) == [
        'W',
        'R',
        'bias',
    ]
    assert rnn['parameters']['W']['@shape'] == (5, 4)
    assert rnn['parameters']['R']['@shape'] == (5, 5)
    assert rnn['outputs']['default']['@shape'] == ('T', 'B', 5)
    assert rnn['outputs']['default']['@context_size'] == 1
    assert rnn['internals']['Ha']['@context_size'] == 1
    assert rnn['internals']['dHa']['@is_backward_only'] is True
    # the Rnn input is the very range of the Input's input_data output
    assert (
        rnn['inputs']['default']['@slice']
        == layout['Input']['outputs']['input_data']['@slice']
    )
    assert (
        layout['OutLayer']['inputs']['default']['@slice']
        == rnn['outputs']['default']['@slice']
    )
    assert (
        layout['Mse']['inputs']['targets']['@slice']
        == layout['Input']['outputs']['targets']['@slice']
    )
    # a view over contiguous children of one buffer carries a @slice
    params = rnn['parameters']
    assert params['@slice'] == (params['W']['@slice'][0], params['bias']['@slice'][1])
    json.loads(json.dumps(layout))


def test_every_array_is_a_view_of_one_of_three_buffers():
    net = seed_network()
    manager = net.buffer_manager
    net.provide_external_data(
        {'input_data': np.zeros((3, 2, 4)), 'targets': np.zeros((3, 2, 10))}
    )
    assert len(manager.buffers) == len(manager.full_buffer) == 3
    assert manager.buffers[0].ndim == 1
    rows = {1: 2, 2: (3 + 1) * 2}
    for t in (1, 2):
        # the blocks tile the feature axis in order ...
        edges = [e for block in manager.blocks[t] for e in block]
        assert edges[0] == 0 and edges[-1] == manager.sizes[t]
        assert all(b == c for b, c in zip(edges[1::2], edges[2::2]))
        # backward-only memory starts at a block edge: one range to clear
        assert manager.forward_sizes[t] in edges
        # ... and each is stored contiguously at its place in the flat buffer
        for (a, b), block in zip(manager.blocks[t], manager.buffers[t]):
            assert block.flags.c_contiguous
            assert block.shape == ((2,) if t == 1 else (4, 2)) + (b - a,)
            assert (
                block.__array_interface__['data'][0]
                == manager.full_buffer[t][rows[t] * a :].__array_interface__['data'][0]
            )
    for path, node in iter_nodes(net.layout):
        if node['@type'] != 'array':
            continue
        array = net.buffer['.'.join(path)]
        btype = get_buffer_type(node['@shape'])
        owners = [
            i for i, b in enumerate(manager.full_buffer) if np.shares_memory(array, b)
        ]
        assert owners == [btype], path
        start, stop = node['@slice']
        if btype == 0:
            expected = manager.buffers[0][start:stop]
        else:
            [(a, block)] = [
                (a, block)
                for (a, b), block in zip(manager.blocks[btype], manager.buffers[btype])
                if a <= start and stop <= b
            ]
            if btype == 1:
                expected = block[:, start - a : stop - a]
            else:
                time = 3 + node.get('@context_size', 0)
                expected = block[:time, :, start - a : stop - a]
        assert (
            array.shape[: array.ndim - len(node['@shape'][btype:])]
            == (expected.shape[:btype])
        ), path
        assert array.size == expected.size, path
        assert array.strides[:btype] == expected.strides[:btype], path
        assert (
            array.__array_interface__['data'][0]
            == expected.__array_interface__['data'][0]
        ), path


def test_outputs_that_are_not_concatenated_are_contiguous():
    """Each such output is a block of its own: a conv's images need no copy."""
    from brainstorm.layers import Convolution2D, Pooling2D

    inp = Input(out_shapes={'default': ('T', 'B', 8, 8, 3)})
    conv = Convolution2D(4, kernel_size=(3, 3), padding=1, name='Conv')
    pool = Pooling2D(kernel_size=(2, 2), stride=(2, 2), name='Pool')
    inp >> conv >> pool
    net = Network.from_layer(inp)
    net.provide_external_data({'default': np.zeros((1, 5, 8, 8, 3))})
    manager = net.buffer_manager
    for t in (1, 2):
        assert manager.forward_sizes[t] in [e for b in manager.blocks[t] for e in b]
    for path in (
        'Conv.inputs.default',
        'Conv.outputs.default',
        'Conv.output_deltas.default',
        'Pool.outputs.default',
        'Pool.input_deltas.default',
    ):
        array = net.buffer[path]
        assert array.flags.c_contiguous, path
    assert net.buffer.Conv.outputs.default.base is not None  # a view, not a copy


def test_parameters_and_gradients_are_single_contiguous_arrays():
    net = seed_network()
    params, grads = net.buffer.parameters, net.buffer.gradients
    assert params.ndim == 1 and params.flags.c_contiguous
    assert grads.ndim == 1 and grads.flags.c_contiguous
    assert params.size == 5 * 4 + 5 * 5 + 5 + 10 * 5 + 10
    # order: layers sorted by name, parameters in setup order
    params[:] = np.arange(params.size)
    out, rnn = net.buffer.OutLayer.parameters, net.buffer.Rnn.parameters
    assert out.W.flat[0] == 0 and out.bias[-1] == 59
    assert rnn.W.flat[0] == 60 and rnn.bias[-1] == params.size - 1
    for lname in ('Rnn', 'OutLayer'):
        for p, g in zip(net.buffer[lname].parameters, net.buffer[lname].gradients):
            assert np.shares_memory(p, params)
            assert np.shares_memory(g, grads)


def test_input_fed_by_several_outputs_sees_their_concatenation():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    a = FullyConnected(2, name='A')
    b = FullyConnected(4, name='B')
    c = FullyConnected(5, name='C')
    inp >> a >> c
    inp >> b >> c
    net = Network.from_layer(c)
    net.set_handler(NumpyHandler(np.float64))
    net.provide_external_data({'default': np.zeros((2, 3, 3))})
    assert net.layers['C'].in_shapes['default'].shape == ('T', 'B', 6)
    view = net.buffer.C.inputs.default
    assert np.shares_memory(view, net.buffer.A.outputs.default)
    assert np.shares_memory(view, net.buffer.B.outputs.default)
    net.buffer.A.outputs.default[:] = 1.0
    net.buffer.B.outputs.default[:] = 2.0
    np.testing.assert_array_equal(view[..., :2], 1.0)
    np.testing.assert_array_equal(view[..., 2:], 2.0)
    # and the input deltas are the sources' output deltas
    deltas = net.buffer.C.input_deltas.default
    deltas[:] = np.arange(6)
    np.testing.assert_array_equal(
        net.buffer.A.output_deltas.default, np.broadcast_to(np.arange(2), (2, 3, 2))
    )
    np.testing.assert_array_equal(
        net.buffer.B.output_deltas.default, np.broadcast_to(np.arange(2, 6), (2, 3, 4))
    )
    # they share one contiguous block, so each source is a strided view
    assert view.flags.c_contiguous and deltas.flags.c_contiguous
    assert not net.buffer.A.outputs.default.flags.c_contiguous


def test_impossible_concatenation_is_a_clear_error():
    # P concatenates [A, B] and Q concatenates [A, C]: A cannot have both B
    # and C as its neighbour in memory
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    a, b, c = (FullyConnected(2, name=n) for n in 'ABC')
    p, q = FullyConnected(2, name='P'), FullyConnected(2, name='Q')
    for layer in (a, b, c):
        inp >> layer
    a >> p
    b >> p
    a >> q
    c >> q
    with pytest.raises(NetworkValidationError, match='Failed to lay out'):
        Network.from_layer(p)


def test_context_slots_are_addressable_at_negative_time_indices():
    net = seed_network()
    net.initialize(0.0)
    net.provide_external_data(
        {'input_data': np.zeros((3, 2, 4)), 'targets': np.zeros((3, 2, 10))}
    )
    y = net.buffer.Rnn.outputs.default
    assert y.shape == (4, 2, 5)
    y[-1] = 7.0
    # the context slot lies beyond the real time steps
    assert net.get('Rnn.outputs.default')[3].max() == 7.0
    assert net.buffer.OutLayer.inputs.default.shape == (3, 2, 5)
    net.forward_pass()
    # forward passes without a context start from zeros
    assert net.get('Rnn.outputs.default')[3].max() == 0.0


def test_buffers_grow_only_when_needed():
    net = seed_network()
    manager = net.buffer_manager
    net.provide_external_data(
        {'input_data': np.zeros((5, 4, 4)), 'targets': np.zeros((5, 4, 10))}
    )
    big = manager._flat[2]
    net.provide_external_data(
        {'input_data': np.zeros((2, 3, 4)), 'targets': np.zeros((2, 3, 10))}
    )
    assert manager._flat[2] is big
    assert net.buffer.Rnn.outputs.default.shape == (3, 3, 5)
    net.provide_external_data(
        {'input_data': np.zeros((9, 4, 4)), 'targets': np.zeros((9, 4, 10))}
    )
    assert manager._flat[2] is not big
    assert net.buffer.Rnn.outputs.default.shape == (10, 4, 5)


def lstm_network():
    from brainstorm.layers import Lstm
    from brainstorm.tools import get_in_out_layers

    inp, out = get_in_out_layers('classification', 3, 4)
    net = Network.from_layer(inp >> Lstm(5, name='L') >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(1.0)
    return net


def test_grouped_buffers_are_adjacent_and_one_array():
    net = lstm_network()
    node = net.layout['L']['internals']
    assert node['@groups']['GA'] == ['Za', 'Ia', 'Fa', 'Oa']
    spans = [node[n]['@slice'] for n in ('Za', 'Ia', 'Fa', 'Oa')]
    assert all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    net.provide_external_data(
        {'default': np.ones((2, 3, 3)), 'targets': np.zeros((2, 3, 1))}
    )
    view = net.buffer.L
    h = net.handler
    for category, group, members, axis in (
        ('internals', 'GA', ('Za', 'Ia', 'Fa', 'Oa'), -1),
        ('internals', 'dGA', ('dZa', 'dIa', 'dFa', 'dOa'), -1),
        ('parameters', 'W', ('Wz', 'Wi', 'Wf', 'Wo'), 0),
        ('gradients', 'b', ('bz', 'bi', 'bf', 'bo'), 0),
    ):
        whole = view[category].get_group(group)
        assert np.shares_memory(whole, view[category][members[0]])
        h.set_from_numpy(whole, np.arange(whole.size, dtype=float).reshape(whole.shape))
        parts = [h.get_numpy_copy(view[category][m]) for m in members]
        np.testing.assert_array_equal(
            np.concatenate(parts, axis=axis), np.arange(whole.size).reshape(whole.shape)
        )
    with pytest.raises(KeyError, match="'nope' is not a group"):
        view.internals.get_group('nope')


@pytest.mark.parametrize(
    'groups, message',
    [
        ({'internals': {'G': ('Ha', 'nope')}}, 'unknown buffers'),
        ({'outputs': {'G': ('default',)}}, "may group 'parameters'"),
        ({'parameters': {'G': ('bias', 'W')}}, 'consecutive parameters'),
        ({'internals': {'G': ('Ha', 'dHa')}}, 'cannot form one array'),
    ],
)
def test_bad_grouped_buffers_are_clear_errors(monkeypatch, groups, message):
    from brainstorm.layers.recurrent_layer import RecurrentLayerImpl

    monkeypatch.setattr(RecurrentLayerImpl, 'grouped_buffers', groups)
    with pytest.raises(NetworkValidationError, match=message):
        seed_network()


def test_skipped_inputs_are_zeros_after_the_batch_changes_shape():
    net = seed_network()
    rnd = np.random.RandomState(0)
    net.provide_external_data(
        {'input_data': rnd.randn(3, 4, 4), 'targets': rnd.randn(3, 4, 10) + 5}
    )
    # same (T, B): the targets given before stay
    net.provide_external_data({'input_data': rnd.randn(3, 4, 4)}, all_inputs=False)
    assert net.get('Input.outputs.targets').min() > 0
    # another (T, B): the memory is laid out anew, and the skipped targets
    # are zeros rather than parts of other arrays
    for shape in [(3, 2), (1, 5), (4, 1)]:
        net.provide_external_data(
            {'input_data': rnd.randn(*shape, 4)}, all_inputs=False
        )
        assert net.get('Input.outputs.targets').shape == shape + (10,)
        assert not net.get('Input.outputs.targets').any()


def test_blocks_are_the_finest_cut_no_span_crosses():
    from brainstorm.structure.buffers import _blocks

    assert _blocks([], 0) == [(0, 0)]
    assert _blocks([(0, 3), (3, 5)], 5) == [(0, 3), (3, 5)]
    # a span over two arrays joins them; nested and touching spans
    assert _blocks([(0, 3), (3, 5), (5, 9), (0, 5)], 9) == [(0, 5), (5, 9)]
    assert _blocks([(0, 2), (2, 4), (4, 6), (1, 5)], 6) == [(0, 6)]
    assert _blocks([(0, 2), (2, 2), (2, 4)], 4) == [(0, 2), (2, 4)]
    # features no span names are a block of their own
    assert _blocks([(2, 4)], 6) == [(0, 2), (2, 4), (4, 6)]


def test_covered_ranges_are_merged_where_they_touch_or_overlap():
    from brainstorm.structure.buffers import _covered

    covered = _covered([(6, 8), (0, 2), (4, 6), (9, 12), (10, 11), (12, 12)])
    assert covered(4, 8) and covered(0, 2) and covered(9, 12) and covered(5, 7)
    assert not covered(0, 4) and not covered(2, 4) and not covered(8, 9)
    assert not covered(7, 10) and not covered(11, 13)
    nested = _covered([(0, 2), (4, 10), (5, 8)])
    assert nested(4, 10) and not nested(3, 10)
    assert not _covered([])(0, 1)


@pytest.mark.parametrize('make', ['seed', 'lstm'])
def test_clearing_zeroes_all_backward_memory_and_no_forward_memory(make):
    """All backward memory but what its layers overwrite (see ``clearing``).

    Overwritten sized arrays keep their contents except the context slots.
    """
    from brainstorm.structure.clearing import overwritten_memory

    net = seed_network() if make == 'seed' else lstm_network()
    overwritten = overwritten_memory(net.layers, net.layout).sized
    net.provide_external_data(
        {'input_data': np.zeros((3, 2, 4)), 'targets': np.zeros((3, 2, 10))}
        if make == 'seed'
        else {'default': np.zeros((3, 2, 3)), 'targets': np.zeros((3, 2, 1))}
    )
    manager = net.buffer_manager
    for flat in manager.full_buffer:
        flat[:] = 7.0
    manager.clear_backward_buffers()
    skipped = 0
    for path, node in iter_nodes(net.layout):
        if node['@type'] != 'array':
            continue
        array = net.buffer['.'.join(path)]
        if path[0] in ('parameters', 'gradients') or path[1] == 'gradients':
            continue  # the constant buffer (see skip_clearing)
        t = 2 if node['@shape'][:2] == ('T', 'B') else 1
        start, stop = node['@slice']
        if any(a <= start and stop <= b for a, b in overwritten.get(t, ())):
            assert node.get('@is_backward_only', False), path
            T = 3 if t == 2 else array.shape[0]
            assert (array[:T] == 7.0).all(), path
            assert not array[T:].any(), path
            skipped += 1
        elif node.get('@is_backward_only', False):
            assert not array.any(), path
        else:
            assert (array == 7.0).all(), path
    # lstm: its internal deltas; seed: the deltas the FullyConnected writes
    assert skipped >= (10 if make == 'lstm' else 1)
