"""Name-pattern resolution shared by initialize, the modifiers and
MultiStepper (Brainstorm 0.5's rules)."""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.layers import FullyConnected, Input
from brainstorm.structure.network import Network
from brainstorm.training import MultiStepper, SgdStepper
from brainstorm.utils import NetworkValidationError, TrainingValidationError
from brainstorm.value_modifiers import ClipValues


def net_with(*names):
    layer = Input(out_shapes={'default': ('T', 'B', 2)})
    for name in names:
        layer = layer >> FullyConnected(2, name=name)
    net = Network.from_layer(layer)
    net.set_handler(NumpyHandler(np.float64))
    return net


def params(net, lname, pname):
    return net.buffer[lname].parameters[pname]


def test_inherited_default_only_fills_unnamed_parameters():
    """0.5 gave Hid1.W=1, Hid1.bias=0, Hid2.W=0.5, Hid2.bias=0 here: the
    top-level default fills only parameters no matching sub-dict names.
    (Guards against: the default competing with a parameter another
    pattern names, which raised 'Multiple initializers'.)"""
    net = net_with('Hid1', 'Hid2')
    net.initialize({'Hid1': {'W': 1}, 'Hid*': {'bias': 0}, 'default': 0.5})
    np.testing.assert_array_equal(params(net, 'Hid1', 'W'), 1)
    np.testing.assert_array_equal(params(net, 'Hid1', 'bias'), 0)
    np.testing.assert_array_equal(params(net, 'Hid2', 'W'), 0.5)
    np.testing.assert_array_equal(params(net, 'Hid2', 'bias'), 0)


def test_inner_default_yields_to_named_parameter():
    """A sub-dict's own default also fills only what no sub-dict names."""
    net = net_with('Hid1', 'Hid2')
    net.initialize({'Hid1': {'W': 1}, 'Hid*': {'default': 2}})
    np.testing.assert_array_equal(params(net, 'Hid1', 'W'), 1)
    np.testing.assert_array_equal(params(net, 'Hid1', 'bias'), 2)
    np.testing.assert_array_equal(params(net, 'Hid2', 'W'), 2)


def test_two_named_initializers_still_conflict():
    """Two different values named for one parameter stay an error."""
    net = net_with('Hid1', 'Hid2')
    with pytest.raises(NetworkValidationError, match='Hid1.W'):
        net.initialize({'Hid1': {'W': 1}, 'Hid*': {'W': 2}, 'default': 0})


def test_several_weight_modifiers_are_all_applied_in_order():
    """0.5 installed both modifiers of {'Hid*': Clip(-1, 1), 'Hid1': {'W':
    Clip(-2, 2)}} on Hid1.W and applied them in the dict's order. (Guards
    against: raising 'multiple modifiers'.)"""
    net = net_with('Hid1', 'Hid2')
    net.initialize(5.0)
    net.set_weight_modifiers(
        {'Hid*': ClipValues(-1, 1), 'Hid1': {'W': ClipValues(-2, 0.5)}}
    )
    mods = net.weight_modifiers['Hid1']['W']
    assert [(m.low, m.high) for m in mods] == [(-1, 1), (-2, 0.5)]
    assert [(m.low, m.high) for m in net.weight_modifiers['Hid2']['W']] == [(-1, 1)]
    net.apply_weight_modifiers()
    np.testing.assert_array_equal(params(net, 'Hid1', 'W'), 0.5)
    np.testing.assert_array_equal(params(net, 'Hid1', 'bias'), 1)
    np.testing.assert_array_equal(params(net, 'Hid2', 'W'), 1)


def test_several_gradient_modifiers_are_all_installed():
    """Same rule for set_gradient_modifiers."""
    net = net_with('Hid1', 'Hid2')
    net.initialize(0.0)
    net.set_gradient_modifiers(
        {'Hid*': ClipValues(-1, 1), 'Hid1': {'W': [ClipValues(-2, 2)]}}
    )
    assert len(net.gradient_modifiers['Hid1']['W']) == 2
    assert len(net.gradient_modifiers['Hid2']['W']) == 1


PREFIX_NAMES = ('Hid', 'Hid2', 'FullyConnected_1', 'FullyConnected_10')


@pytest.mark.parametrize(
    'pattern, selected',
    [
        ('Hid', {'Hid'}),
        ('FullyConnected_1', {'FullyConnected_1'}),
        ('Hid*', {'Hid', 'Hid2'}),
        ('*_1', {'FullyConnected_1'}),
    ],
)
def test_initialize_pattern_must_cover_the_whole_name(pattern, selected):
    """A pattern that is a prefix of other layer names selects only its
    own layer. (Guards against: dropping the end anchor of the matcher, so
    'Hid' would also initialize Hid2.)"""
    net = net_with(*PREFIX_NAMES)
    net.initialize({pattern: 1.0, 'default': 0.0})
    for name in PREFIX_NAMES:
        expected = 1.0 if name in selected else 0.0
        np.testing.assert_array_equal(params(net, name, 'W'), expected, err_msg=name)


@pytest.mark.parametrize('method', ['set_weight_modifiers', 'set_gradient_modifiers'])
def test_modifier_pattern_must_cover_the_whole_name(method):
    """(Guards against: dropping the end anchor; the modifiers share the
    matcher.)"""
    net = net_with(*PREFIX_NAMES)
    net.initialize(0.0)
    getattr(net, method)(
        {'Hid': ClipValues(-1, 1), 'FullyConnected_1': ClipValues(-1, 1)}
    )
    installed = (
        net.weight_modifiers
        if method == 'set_weight_modifiers'
        else net.gradient_modifiers
    )
    assert set(installed) == {'Hid', 'FullyConnected_1'}


def test_multistepper_pattern_must_cover_the_whole_name():
    """MultiStepper assigns 'Hid' only to layer Hid, not to Hid2.
    (Guards against: dropping the end anchor in MultiStepper's matching.)"""
    net = net_with(*PREFIX_NAMES)
    net.initialize(0.0)
    a, b = SgdStepper(0.1), SgdStepper(0.2)
    stepper = MultiStepper({'Hid': a, 'FullyConnected_1': a, 'default': b})
    stepper.start(net)
    assert dict(stepper.assignment) == {
        'Hid': 'Hid',
        'Hid2': 'default',
        'FullyConnected_1': 'Hid',
        'FullyConnected_10': 'default',
    }


def test_multistepper_pattern_matching_nothing_is_an_error():
    """A prefix of a name is no match, so the pattern is reported."""
    net = net_with('Hid2')
    with pytest.raises(TrainingValidationError, match="'Hid'"):
        MultiStepper({'Hid': SgdStepper(0.1)}).start(net)


IDENT = '[A-Za-z_][A-Za-z0-9_]{0,8}'


def test_pattern_without_star_matches_only_the_same_name():
    """Generated names: a literal pattern selects exactly its own name,
    never a longer or shorter one; 'p*' selects every name starting with p.
    (Guards against: a missing start or end anchor.)"""
    from hypothesis import given
    from hypothesis import strategies as st

    from brainstorm.structure.view_references import pattern_matches

    names = st.from_regex(IDENT, fullmatch=True)

    @given(names, names, st.from_regex('[A-Za-z0-9_]{0,4}', fullmatch=True))
    def check(a, b, suffix):
        assert pattern_matches(a, b) == (a == b)
        assert pattern_matches(a, a + suffix) == (suffix == '')
        assert pattern_matches(a + '*', a + suffix)
        assert pattern_matches('*' + suffix, a + suffix)
        assert not pattern_matches(a + '*', 'x.' + a)

    check()
