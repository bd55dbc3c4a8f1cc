"""Name-pattern resolution shared by initialize, the modifiers and
MultiStepper (Brainstorm 0.5's rules)."""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.initializers import Gaussian, Identity, LstmOptInit
from brainstorm.layers import BatchNorm, FullyConnected, Input
from brainstorm.structure.network import Network
from brainstorm.structure.view_references import (
    choose_initializer,
    merge_refs,
    resolve_patterns,
)
from brainstorm.training import MultiStepper, SgdStepper
from brainstorm.utils import NetworkValidationError, TrainingValidationError
from brainstorm.value_modifiers import ClipValues, L2Decay


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
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from brainstorm.structure.view_references import pattern_matches

    names = st.from_regex(IDENT, fullmatch=True)

    # no timing checks: a loaded machine (or coverage) must not fail it
    @settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(names, names, st.from_regex('[A-Za-z0-9_]{0,4}', fullmatch=True))
    def check(a, b, suffix):
        assert pattern_matches(a, b) == (a == b)
        assert pattern_matches(a, a + suffix) == (suffix == '')
        assert pattern_matches(a + '*', a + suffix)
        assert pattern_matches('*' + suffix, a + suffix)
        assert not pattern_matches(a + '*', 'x.' + a)

    check()


# ----------------------------------------------- each rule at its edges ---
# (issue 27: found by mutating brainstorm/structure/view_references.py)


def bn_net():
    """Input >> FullyConnected 'Hid1' >> BatchNorm 'BN' (mu and sigma are
    untrained: their layer gives their values)."""
    layer = Input(out_shapes={'default': ('T', 'B', 2)})
    layer = layer >> FullyConnected(2, name='Hid1') >> BatchNorm(name='BN')
    net = Network.from_layer(layer)
    net.set_handler(NumpyHandler(np.float64))
    return net


def test_untrained_parameters_keep_their_layers_values_unless_named():
    net = bn_net()
    net.initialize(0.5)
    np.testing.assert_array_equal(params(net, 'BN', 'gamma'), 0.5)
    np.testing.assert_array_equal(params(net, 'BN', 'mu'), 0.0)
    np.testing.assert_array_equal(params(net, 'BN', 'sigma'), 1.0)
    net.initialize({'BN': {'mu': 2.0, 'sigma': 3.0}, 'default': 0.5})
    np.testing.assert_array_equal(params(net, 'BN', 'mu'), 2.0)
    np.testing.assert_array_equal(params(net, 'BN', 'sigma'), 3.0)
    np.testing.assert_array_equal(params(net, 'BN', 'beta'), 0.5)


def test_untrained_parameters_get_only_modifiers_that_name_them():
    net = bn_net()
    net.initialize(0.0)
    net.set_weight_modifiers({'BN': ClipValues(-1, 1)})
    assert set(net.weight_modifiers['BN']) == {'gamma', 'beta'}
    net.set_weight_modifiers({'BN': {'mu': ClipValues(-1, 1)}, 'Hid1': ClipValues()})
    assert set(net.weight_modifiers['BN']) == {'mu'}
    assert set(net.weight_modifiers) == {'BN', 'Hid1'}


def test_parameters_nothing_selects_get_no_modifier_entry():
    net = net_with('Hid1', 'Hid2')
    net.initialize(0.0)
    net.set_gradient_modifiers({'Hid1': {'W': ClipValues()}})
    assert dict(net.gradient_modifiers) == {
        'Hid1': {'W': net.gradient_modifiers['Hid1']['W']}
    }
    mod = net.gradient_modifiers['Hid1']['W'][0]
    assert (mod.layer_name, mod.view_name) == ('Hid1', 'W')


def test_empty_pattern_dicts():
    net = net_with('Hid1')
    net.set_weight_modifiers({})
    assert dict(net.weight_modifiers) == {}
    net.set_weight_modifiers()
    assert dict(net.weight_modifiers) == {}
    with pytest.raises(NetworkValidationError, match='No initializer for Hid1.W'):
        net.initialize({})


def test_a_parameter_without_initializer_is_named():
    net = net_with('Hid1', 'Hid2')
    with pytest.raises(NetworkValidationError, match='No initializer for Hid2.W'):
        net.initialize({'Hid1': 1.0})


def test_the_same_initializer_object_named_twice_is_no_conflict():
    net = net_with('Hid1', 'Hid2')
    init = Gaussian(0.1)
    net.initialize({'Hid1': {'W': init}, 'Hid*': {'W': init}, 'default': 0}, seed=1)
    assert np.all(params(net, 'Hid1', 'W') != 0)


def test_equal_numbers_are_one_initializer():
    net = net_with('Hid1', 'Hid2')
    net.initialize({'Hid1': {'W': 1}, 'Hid*': {'W': 1.0}, 'default': 0})
    np.testing.assert_array_equal(params(net, 'Hid1', 'W'), 1)


@pytest.mark.parametrize(
    'first, second',
    [
        (1, 2),
        (1, True),
        (True, 1),
        (Gaussian(0.1), Gaussian(0.1)),  # equal, but two objects
        ([[1, 2], [3, 4]], [[1, 2], [3, 4]]),
    ],
    ids=['1-2', '1-True', 'True-1', 'two-Gaussians', 'two-lists'],
)
def test_two_initializers_for_one_parameter_conflict(first, second):
    """Only the same object or equal numbers (not bools) are one value."""
    net = net_with('Hid1', 'Hid2')
    with pytest.raises(
        NetworkValidationError, match='Multiple initializers for Hid1.W'
    ):
        net.initialize({'Hid1': {'W': first}, 'Hid*': {'W': second}, 'default': 0})


def test_a_pattern_matching_no_layer_is_named():
    net = net_with('Hid1')
    for method, value in [
        ('initialize', 1.0),
        ('set_weight_modifiers', ClipValues()),
        ('set_gradient_modifiers', ClipValues()),
    ]:
        with pytest.raises(NetworkValidationError, match="pattern 'Nope' matches no"):
            getattr(net, method)({'Nope': value, 'Hid1': value})


def test_a_parameter_pattern_matching_nothing_is_named():
    net = net_with('Hid1', 'Hid2')
    with pytest.raises(
        NetworkValidationError,
        match="parameter pattern 'X' \\(under layer pattern 'Hid\\*'\\) matches no",
    ):
        net.initialize({'Hid*': {'W': 1, 'X': 2}, 'default': 0})
    with pytest.raises(NetworkValidationError, match="parameter pattern 'X'"):
        net.set_weight_modifiers({'Hid1': {'X': ClipValues()}})


def test_parameter_patterns_take_wildcards():
    net = net_with('Hid1')
    net.initialize({'Hid1': {'*': 2.0}})
    np.testing.assert_array_equal(params(net, 'Hid1', 'W'), 2.0)
    np.testing.assert_array_equal(params(net, 'Hid1', 'bias'), 2.0)
    net.initialize({'*': {'b*': 3.0, 'default': 4.0}})
    np.testing.assert_array_equal(params(net, 'Hid1', 'bias'), 3.0)
    np.testing.assert_array_equal(params(net, 'Hid1', 'W'), 4.0)


def test_keys_that_are_no_str_are_refused():
    net = net_with('Hid1')
    with pytest.raises(NetworkValidationError, match='Received: 1'):
        net.initialize({1: 0.5, 'default': 0.0})


def test_fallbacks_top_level_and_per_layer():
    """A sub-dict's fallback wins over the top-level one for its layers;
    the top-level one covers the others. (Identity cannot fill a vector.)"""
    net = net_with('Hid1', 'Hid2')
    net.initialize({'default': Identity(std=0.0), 'fallback': 0.25})
    np.testing.assert_array_equal(params(net, 'Hid2', 'bias'), 0.25)
    np.testing.assert_array_equal(params(net, 'Hid2', 'W'), np.eye(2))
    net.initialize(
        {'default': Identity(std=0.0), 'Hid1': {'fallback': 0.5}, 'fallback': 0.25}
    )
    np.testing.assert_array_equal(params(net, 'Hid1', 'bias'), 0.5)
    np.testing.assert_array_equal(params(net, 'Hid2', 'bias'), 0.25)
    with pytest.raises(NetworkValidationError, match='Hid1.bias'):
        net.initialize({'default': Identity(std=0.0)})


def test_two_fallbacks_for_one_parameter_conflict():
    net = net_with('Hid1', 'Hid2')
    with pytest.raises(NetworkValidationError, match='Multiple fallbacks for Hid1'):
        net.initialize(
            {'Hid1': {'fallback': 0.1}, 'Hid*': {'fallback': 0.2}, 'default': 0}
        )


@pytest.mark.parametrize('method', ['set_weight_modifiers', 'set_gradient_modifiers'])
@pytest.mark.parametrize(
    'refs',
    [
        {'Hid1': ClipValues(), 'fallback': ClipValues()},
        {'Hid1': {'fallback': ClipValues()}},
    ],
    ids=['top', 'sub'],
)
def test_modifiers_take_no_fallback(method, refs):
    net = net_with('Hid1')
    with pytest.raises(NetworkValidationError, match="'fallback' is not allowed"):
        getattr(net, method)(refs)


def test_a_value_that_is_no_modifier_is_named():
    net = net_with('Hid1')
    with pytest.raises(NetworkValidationError, match='Hid1.W got 3'):
        net.set_weight_modifiers({'Hid1': {'W': 3}})


@pytest.mark.parametrize('bad', [True, 'Gaussian', None, {1, 2}])
def test_a_value_that_is_no_initializer_is_named(bad):
    net = net_with('Hid1')
    with pytest.raises(
        NetworkValidationError,
        match=f'Initializer for Hid1.W must be an Initializer.*Received: {bad!r}',
    ):
        net.initialize({'Hid1': {'W': bad}, 'default': 0})


def test_keyword_patterns_join_the_dict_and_may_not_repeat_it():
    net = net_with('Hid1', 'Hid2')
    net.initialize({'Hid1': 1.0}, Hid2=2.0)
    np.testing.assert_array_equal(params(net, 'Hid2', 'W'), 2.0)
    net.initialize(3.0, Hid1=1.0)
    np.testing.assert_array_equal(params(net, 'Hid1', 'W'), 1.0)
    np.testing.assert_array_equal(params(net, 'Hid2', 'W'), 3.0)
    with pytest.raises(TypeError, match="Conflicting values for 'Hid1'"):
        net.initialize({'Hid1': 1.0}, Hid1=2.0)
    with pytest.raises(TypeError, match="Conflicting values for 'default'"):
        net.initialize(3.0, default=2.0)
    assert merge_refs(None, {}) == {}
    assert merge_refs(None, {'a': 1}) == {'a': 1}
    given = {'a': 1}
    assert merge_refs(given, {'b': 2}) == {'a': 1, 'b': 2} and given == {'a': 1}
    assert merge_refs(0.5, {}) == {'default': 0.5}


class FakeLayer:
    def __init__(self, name, parameters, lstm=False):
        self.name = name
        self.parameter_shapes = dict.fromkeys(parameters, (2,))
        self.untrained_parameters = {}
        self.has_lstm_gates = lstm


def test_resolved_values_fallbacks_and_explicitness():
    layers = {'A': FakeLayer('A', ['W', 'b']), 'B': FakeLayer('B', ['W'])}
    g = Gaussian()
    resolved = resolve_patterns(
        layers, {'A': {'W': g, 'fallback': 1}, 'default': 2, 'fallback': 3}, 'f', True
    )
    assert resolved == {
        ('A', 'W'): ([g], [1], True),
        ('A', 'b'): ([2], [1], False),
        ('B', 'W'): ([2], [3], False),
    }
    assert resolve_patterns(layers, {}, 'f', False) == {
        ('A', 'W'): ([], [], False),
        ('A', 'b'): ([], [], False),
        ('B', 'W'): ([], [], False),
    }
    # an explicit 'fallback': None is no fallback
    assert resolve_patterns(layers, {'fallback': None}, 'f', True)['B', 'W'] == (
        [],
        [],
        False,
    )


def test_lstm_opt_init_chooses_per_parameter_and_names_a_stranger():
    init = LstmOptInit(0.0, 0.0, 1.0, 0.0)
    layer = FakeLayer('L', ['bf', 'W'], lstm=True)
    chosen, fallback = choose_initializer(layer, 'bf', ([init], [], False), 'L.bf')
    assert chosen == 1.0 and fallback is None
    with pytest.raises(NetworkValidationError, match='Initializing L.W: LstmOptInit'):
        choose_initializer(layer, 'W', ([init], [], False), 'L.W')
    other = FakeLayer('M', ['W'])
    assert choose_initializer(other, 'W', ([init], [0.5], False), 'M.W') == (init, 0.5)


def test_gradient_modifiers_are_gradient_modifiers_only():
    """An L2Decay (a GradientModifier: it reads the parameters too) is a
    gradient modifier, not a weight modifier; value modifiers are both."""
    net = net_with('H')
    net.set_gradient_modifiers({'H': {'W': L2Decay(0.1)}})
    assert [type(m) for m in net.gradient_modifiers['H']['W']] == [L2Decay]
    with pytest.raises(
        NetworkValidationError, match='not a modifier: give a ValueModifier'
    ):
        net.set_weight_modifiers({'H': {'W': L2Decay(0.1)}})
    net.set_weight_modifiers({'H': {'W': ClipValues(-1, 1)}})
    net.set_gradient_modifiers({'H': {'W': ClipValues(-1, 1)}})


def test_an_array_named_for_a_parameter_gets_no_fallback():
    # a transposed array named for F.W was replaced by the fallback's
    # zeros without a word; without a fallback it was refused
    net = Network.from_layer(
        Input(out_shapes={'default': ('T', 'B', 2)}) >> FullyConnected(3, name='F')
    )
    net.set_handler(NumpyHandler(np.float64))
    w = net.get('F.parameters.W')
    wrong = np.ones(w.shape[::-1])
    with pytest.raises(NetworkValidationError, match=r'F\.W.*has shape'):
        net.initialize({'default': Gaussian(), 'fallback': 0.0, 'F': {'W': wrong}})
    # an array a layer pattern or 'default' gives keeps 0.5's fallback
    net.initialize({'default': wrong, 'fallback': 0.5, 'F': {'W': np.ones(w.shape)}})
    assert (params(net, 'F', 'W') == 1.0).all() and (
        params(net, 'F', 'bias') == 0.5
    ).all()


@pytest.mark.parametrize(
    'refs',
    [
        lambda m: {'H*': m, 'H1': m},
        lambda m: {'H*': m, 'H1': [m]},
        lambda m: {'H*': [m], 'H1': [m]},
        lambda m: {'H1': [m, m]},
    ],
    ids=['bare', 'bare-list', 'lists', 'one-list'],
)
def test_one_modifier_object_selected_twice_is_installed_once(refs):
    # whether it was installed once or twice depended on the brackets
    # (a bare repeated object once, inside lists twice: twice the decay)
    net = net_with('H1')
    decay = L2Decay(0.5)
    net.set_gradient_modifiers(refs(decay))
    assert len(net.gradient_modifiers['H1']['W']) == 1
