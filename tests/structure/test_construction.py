"""Tests for brainstorm.structure.construction: >>, -, names, create()."""

import pytest

from brainstorm.layers import FullyConnected, Input, Loss, Recurrent, SoftmaxCE
from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.structure.architecture import generate_architecture
from brainstorm.structure.construction import (
    ConstructionWrapper,
    LayerDetails,
    UniquelyNamed,
)
from brainstorm.utils import LayerValidationError, NetworkValidationError


def Dummy(name=None, **kwargs):
    """A layer of type 'Dummy' that needs no class for construction."""
    return ConstructionWrapper.create('DummyLayerImpl', name=name, **kwargs)


def names(*wrappers):
    return [w.layer.name for w in wrappers]


# ---------------------------------------------------------------- wrappers ---


def test_constructor_returns_wrapper_with_default_selection():
    fc = FullyConnected(5, name='Hid')
    assert isinstance(fc, ConstructionWrapper)
    assert isinstance(fc.layer, LayerDetails)
    assert fc.input_name == 'default'
    assert fc.output_name == 'default'
    assert fc.layer.layer_type == 'FullyConnected'
    assert fc.layer.name == 'Hid'
    assert fc.layer.layer_kwargs == {'size': 5, 'activation': 'rel'}
    assert fc.layer.incoming == [] and fc.layer.outgoing == []


def test_input_is_always_named_input():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    assert inp.layer.name == 'Input'
    assert inp.layer.layer_type == 'Input'


def test_rshift_connects_and_returns_right_hand_side():
    a, b = Dummy('A'), Dummy('B')
    result = a >> b
    assert result is b
    assert a.layer.outgoing == [('default', 'default', b.layer)]
    assert b.layer.incoming == [(a.layer, 'default', 'default')]


def test_rshift_chains():
    a, b, c = Dummy('A'), Dummy('B'), Dummy('C')
    result = a >> b >> c
    assert result is c
    assert b.layer.outgoing == [('default', 'default', c.layer)]
    assert a.layer.collect_connected_layers() == {a.layer, b.layer, c.layer}


def test_rshift_assign():
    a, b = Dummy('A'), Dummy('B')
    x = a
    x >>= b
    assert x is b
    assert a.layer.outgoing == [('default', 'default', b.layer)]


def test_minus_selects_output_and_input():
    a, b = Dummy('A'), Dummy('B')
    a_out = a - 'loss'
    b_in = 'targets' - b
    assert a_out.layer is a.layer and b_in.layer is b.layer
    assert (a_out.input_name, a_out.output_name) == ('default', 'loss')
    assert (b_in.input_name, b_in.output_name) == ('targets', 'default')
    # the original wrappers are unchanged
    assert a.output_name == 'default' and b.input_name == 'default'
    a_out >> b_in
    assert a.layer.outgoing == [('loss', 'targets', b.layer)]


def test_minus_on_both_sides():
    a, b, c = Dummy('A'), Dummy('B'), Dummy('C')
    a >> 'x' - b - 'y' >> c
    assert a.layer.outgoing == [('default', 'x', b.layer)]
    assert b.layer.outgoing == [('y', 'default', c.layer)]


def test_minus_binds_tighter_than_rshift():
    inp = Input(out_shapes={'default': ('T', 'B', 3), 'targets': ('T', 'B', 1)})
    out = SoftmaxCE(name='Out')
    loss = Loss()
    inp - 'targets' >> 'targets' - out - 'loss' >> loss
    assert inp.layer.outgoing == [('targets', 'targets', out.layer)]
    assert out.layer.outgoing == [('loss', 'default', loss.layer)]
    assert loss.layer.incoming == [(out.layer, 'loss', 'default')]


def test_exposing_parameters_and_internals_by_name():
    fc = FullyConnected(3, name='fc')
    rnn = Recurrent(2, name='rnn')
    a, b = Dummy('A'), Dummy('B')
    fc - '..parameters.W' >> a
    rnn - '..internals.Ha' >> b
    assert fc.layer.outgoing == [('..parameters.W', 'default', a.layer)]
    assert rnn.layer.outgoing == [('..internals.Ha', 'default', b.layer)]


@pytest.mark.parametrize(
    'other', [3, 'Hid', None, FullyConnectedLayerImpl, [Dummy('X')]]
)
def test_rshift_with_a_non_wrapper_is_a_type_error(other):
    a = Dummy('A')
    with pytest.raises(TypeError):
        a >> other
    assert a.layer.outgoing == []


def test_rshift_from_a_non_wrapper_is_a_type_error():
    with pytest.raises(TypeError):
        3 >> Dummy('A')


@pytest.mark.parametrize('selector', [3, None, 1.5, ('a',), b'out'])
def test_minus_with_a_non_string_is_a_type_error(selector):
    a = Dummy('A')
    with pytest.raises(TypeError, match='string'):
        a - selector
    with pytest.raises(TypeError, match='string'):
        selector - a


def test_wrappers_do_not_support_other_operators():
    with pytest.raises(TypeError):
        Dummy('A') + Dummy('B')


# ------------------------------------------------------------------- names ---


def test_default_name_is_type_name():
    assert Dummy().layer.name == 'Dummy'
    assert FullyConnected(3).layer.name == 'FullyConnected'


def test_unique_basename_is_kept():
    a, b = Dummy('A'), Dummy('B')
    a >> b
    assert names(a, b) == ['A', 'B']


def test_shared_basenames_are_numbered_in_creation_order():
    first, second, third = Dummy(), Dummy(), Dummy()
    third >> first >> second
    assert names(first, second, third) == ['Dummy_1', 'Dummy_2', 'Dummy_3']


def test_explicit_names_are_numbered_too_without_error():
    a1, a2 = Dummy('A'), Dummy('A')
    a2 >> a1
    assert names(a1, a2) == ['A_1', 'A_2']


def test_numbering_skips_suffixes_held_by_unique_names():
    # SPEC 2.2: an explicit 'A_2' plus three 'A's -> A_1, A_3, A_4
    explicit = Dummy('A_2')
    a, b, c = Dummy('A'), Dummy('A'), Dummy('A')
    explicit >> a >> b >> c
    assert names(explicit, a, b, c) == ['A_2', 'A_1', 'A_3', 'A_4']


def test_names_resolve_lazily_when_scopes_merge():
    a, b = Dummy('A'), Dummy('A')
    assert names(a, b) == ['A', 'A']
    a >> b
    assert names(a, b) == ['A_1', 'A_2']


def test_unconnected_scopes_number_independently():
    a1, a2 = Dummy('A'), Dummy('A')
    a3, a4, a5 = Dummy('A'), Dummy('A'), Dummy('A')
    lonely = Dummy('A')
    a1 >> a2
    a3 >> a4 >> a5
    assert names(a1, a2) == ['A_1', 'A_2']
    assert names(a3, a4, a5) == ['A_1', 'A_2', 'A_3']
    assert lonely.layer.name == 'A'


def test_scopes_merge_transitively():
    a, b, c, d = Dummy('X'), Dummy('Y'), Dummy('X'), Dummy('Y')
    a >> b
    c >> d
    assert names(a, b, c, d) == ['X', 'Y', 'X', 'Y']
    b >> c
    assert names(a, b, c, d) == ['X_1', 'Y_1', 'X_2', 'Y_2']


def test_selected_wrappers_share_the_layer_name():
    a, b = FullyConnected(3), FullyConnected(3)
    a >> 'default' - b
    assert (a - 'x').layer.name == 'FullyConnected_1'
    assert ('y' - b).layer.name == 'FullyConnected_2'


def test_generated_architecture_uses_unique_names():
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    inp >> FullyConnected(4) >> FullyConnected(4) >> Dummy('FullyConnected_2')
    arch = generate_architecture(inp)
    assert sorted(arch) == [
        'FullyConnected_1',
        'FullyConnected_2',
        'FullyConnected_3',
        'Input',
    ]
    assert arch['FullyConnected_2']['@type'] == 'Dummy'
    assert arch['FullyConnected_1']['@outgoing_connections'] == {
        'default': ['FullyConnected_3']
    }


def test_uniquely_named_directly():
    a, b, c = UniquelyNamed('n'), UniquelyNamed('n'), UniquelyNamed('m')
    assert (a.name, b.name, c.name) == ('n', 'n', 'm')
    b.merge_scopes(a)
    c.merge_scopes(b)
    assert a.scope is b.scope is c.scope
    assert (a.name, b.name, c.name) == ('n_1', 'n_2', 'm')
    a.merge_scopes(c)  # already joined: no change
    assert (a.name, b.name, c.name) == ('n_1', 'n_2', 'm')


@pytest.mark.parametrize(
    'name', ['default', 'fallback', '1a', 'a b', 'a.b', '', 'x-y', 7]
)
def test_invalid_name_raises_at_creation(name):
    with pytest.raises(NetworkValidationError) as info:
        Dummy(name=name)
    assert repr(name) in str(info.value)


@pytest.mark.parametrize('constructor', [FullyConnected, Recurrent])
def test_invalid_name_of_builtin_layer(constructor):
    with pytest.raises(NetworkValidationError, match="'my layer'"):
        constructor(3, name='my layer')


# ------------------------------------------------------------------ create ---


def test_create_with_class():
    w = ConstructionWrapper.create(FullyConnectedLayerImpl, name='F', size=3)
    assert w.layer.layer_type == 'FullyConnected'
    assert w.layer.name == 'F'
    assert w.layer.layer_kwargs == {'size': 3}


def test_create_with_class_name_string():
    w = ConstructionWrapper.create('FooBarLayerImpl', alpha=[1, 2])
    assert w.layer.layer_type == 'FooBar'
    assert w.layer.name == 'FooBar'
    assert w.layer.layer_kwargs == {'alpha': [1, 2]}


def test_create_keeps_its_own_copy_of_kwargs():
    kwargs = {'size': 3}
    w = ConstructionWrapper.create(FullyConnectedLayerImpl, **kwargs)
    kwargs['size'] = 4
    assert w.layer.layer_kwargs == {'size': 3}


class NotALayer:
    pass


@pytest.mark.parametrize(
    'layer_type',
    [
        'FullyConnected',
        'Foo',
        'LayerImpl',
        NotALayer,
        3,
        None,
        'defaultLayerImpl',
        '1xLayerImpl',
    ],
)
def test_create_with_bad_type_raises(layer_type):
    with pytest.raises(NetworkValidationError):
        ConstructionWrapper.create(layer_type)


def test_create_bad_type_message_names_the_type():
    with pytest.raises(NetworkValidationError, match="'FullyConnected'"):
        ConstructionWrapper.create('FullyConnected')
    with pytest.raises(NetworkValidationError, match='LayerImpl'):
        ConstructionWrapper.create('FullyConnected')


def test_create_checks_declared_kwargs_of_a_class():
    with pytest.raises(LayerValidationError, match="FullyConnected 'Hid'"):
        ConstructionWrapper.create(FullyConnectedLayerImpl, name='Hid', size=0)
    with pytest.raises(LayerValidationError, match='colour'):
        ConstructionWrapper.create(FullyConnectedLayerImpl, colour='red')


def test_layer_details_repr_and_connected_layers():
    a, b, c = Dummy('A'), Dummy('B'), Dummy('C')
    a >> c
    b >> c
    assert a.layer.collect_connected_layers() == {a.layer, b.layer, c.layer}
    assert 'A' in repr(a.layer) and 'Dummy' in repr(a.layer)
    assert "'A'" in repr(a)
