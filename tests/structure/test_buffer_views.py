"""Tests for brainstorm.structure.buffer_views.BufferView."""

import copy
import pickle

import numpy as np
import pytest

from brainstorm.layers import FullyConnected, Input, Loss, Recurrent
from brainstorm.structure.buffer_views import BufferView
from brainstorm.structure.network import Network


def params_view():
    W, R, bias = np.zeros((3, 2)), np.ones((3, 3)), np.full(3, 2.0)
    return BufferView(['W', 'R', 'bias'], [W, R, bias]), (W, R, bias)


def nested_view():
    params, _ = params_view()
    layer = BufferView(
        ['parameters', 'outputs'],
        [params, BufferView(['default'], [np.zeros((2, 1, 3))])],
    )
    return BufferView(['L'], [layer])


def test_is_a_list_in_order():
    view, arrays = params_view()
    assert isinstance(view, list)
    assert len(view) == 3
    assert all(a is b for a, b in zip(view, arrays))
    W, R, bias = view
    assert W is arrays[0] and R is arrays[1] and bias is arrays[2]


def test_access_by_attribute_name_and_index():
    view, (W, R, bias) = params_view()
    assert view.W is W
    assert view['R'] is R
    assert view[2] is bias
    assert view[-1] is bias
    assert view[np.int64(1)] is R
    tail = view[1:]
    assert len(tail) == 2 and tail[0] is R and tail[1] is bias


def test_dotted_access():
    root = nested_view()
    assert root['L.parameters.bias'] is root.L.parameters.bias
    assert root['L.outputs.default'].shape == (2, 1, 3)
    assert root['L.parameters'] is root.L.parameters


@pytest.mark.parametrize(
    'key', ['nope', 'L.nope', 'L.parameters.nope', 'L.parameters.W.deeper']
)
def test_unknown_name_raises_key_error_listing_keys(key):
    root = nested_view()
    with pytest.raises(KeyError) as info:
        root[key]
    assert 'nope' in str(info.value) or 'deeper' in str(info.value)
    assert 'Available keys' in str(info.value)


def test_unknown_attribute_raises_attribute_error():
    view, _ = params_view()
    with pytest.raises(AttributeError, match="'gamma'.*'W', 'R', 'bias'"):
        _ = view.gamma


def test_bad_index_type():
    view, _ = params_view()
    with pytest.raises(TypeError):
        view[1.5]


def test_contains_keys_values_items_asdict():
    view, (W, R, bias) = params_view()
    assert 'W' in view and 'bias' in view and 'gamma' not in view
    assert W in view
    assert np.zeros(1) not in view  # identity, not equality
    assert view.keys() == ['W', 'R', 'bias']
    assert all(a is b for a, b in zip(view.values(), [W, R, bias]))
    assert [k for k, _ in view.items()] == ['W', 'R', 'bias']
    assert view.items()[2][1] is bias
    d = view._asdict()
    assert list(d) == ['W', 'R', 'bias'] and d['R'] is R


def test_length_mismatch_is_value_error():
    with pytest.raises(ValueError, match='2 names and 1'):
        BufferView(['a', 'b'], [np.zeros(1)])


def test_adjust_replaces_buffers_in_place():
    view, _ = params_view()
    new = [np.full((3, 2), 5.0), np.zeros((3, 3)), np.zeros(3)]
    full = np.zeros(18)
    assert view.adjust(['W', 'R', 'bias'], new, full) is view
    assert view.W is new[0] and view['R'] is new[1] and view[2] is new[2]
    assert view._full_buffer is full
    view.adjust(buffers=new)
    assert view.W is new[0] and view._full_buffer is None
    with pytest.raises(ValueError):
        view.adjust(['W', 'R', 'gamma'], new)
    with pytest.raises(ValueError):
        view.adjust(['W', 'R', 'bias'], new[:2])


def test_full_buffer_defaults_to_none():
    view, _ = params_view()
    assert view._full_buffer is None


@pytest.mark.parametrize('name', ['_keys', '_buffer_names', '_full_buffer'])
def test_children_cannot_clobber_internal_state(name):
    # layer/buffer names are any identifiers, including these
    view = BufferView([name, 'x'], [1, 2])
    assert view[name] == 1
    assert 'x' in view and name in view and 'y' not in view
    assert view.keys() == [name, 'x']
    assert view['x'] == 2


def test_copy_and_pickle():
    root = nested_view()
    for clone in (copy.deepcopy(root), pickle.loads(pickle.dumps(root))):
        assert clone.keys() == ['L']
        assert clone.L.parameters.keys() == ['W', 'R', 'bias']
        np.testing.assert_array_equal(clone['L.parameters.bias'], np.full(3, 2.0))
        assert clone.L.parameters.W is not root.L.parameters.W


def test_views_compare_by_identity():
    a, _ = params_view()
    b = BufferView(a.keys(), list(a))
    assert a == a
    assert a != b
    assert len({a, b}) == 2  # hashable


def test_repr_lists_names():
    view, _ = params_view()
    assert repr(view) == "BufferView(['W', 'R', 'bias'])"


# ------------------------------------------------------- network views ----


def small_network():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    inp >> Recurrent(2, name='Rnn') >> FullyConnected(4, name='Fc') >> Loss()
    return Network.from_layer(inp)


def test_network_layer_views_have_the_seven_categories_in_order():
    net = small_network()
    assert net.buffer.keys()[:2] == ['parameters', 'gradients']
    assert net.buffer.keys()[2:] == list(net.layers)
    categories = [
        'inputs',
        'outputs',
        'parameters',
        'internals',
        'input_deltas',
        'output_deltas',
        'gradients',
    ]
    for name in net.layers:
        assert net.buffer[name].keys() == categories
    rnn = net.buffer.Rnn
    assert rnn.parameters.keys() == ['W', 'R', 'bias']
    assert rnn.gradients.keys() == ['W', 'R', 'bias']
    assert rnn.internals.keys() == ['Ha', 'dHa', 'dHb']
    W, R, bias = rnn.parameters
    assert W.shape == (2, 3) and R.shape == (2, 2) and bias.shape == (2,)


def test_network_views_are_updated_in_place_by_resize():
    net = small_network()
    fc_view = net.buffer.Fc
    net.provide_external_data({'default': np.zeros((4, 2, 3))})
    assert fc_view is net.buffer.Fc
    assert fc_view.outputs.default.shape == (4, 2, 4)
    net.provide_external_data({'default': np.zeros((5, 3, 3))})
    assert fc_view.outputs.default.shape == (5, 3, 4)
    # context slot: recurrent outputs span T + 1 steps
    assert net.buffer.Rnn.outputs.default.shape == (6, 3, 2)


def test_network_parameter_views_are_views_of_the_flat_array():
    net = small_network()
    flat = net.buffer.parameters
    assert flat.ndim == 1
    for name in ('Rnn', 'Fc'):
        for p in net.buffer[name].parameters:
            assert np.shares_memory(p, flat)
    net.buffer.Fc.parameters.bias[:] = 7.0
    assert np.sum(net.get('parameters') == 7.0) == 4
