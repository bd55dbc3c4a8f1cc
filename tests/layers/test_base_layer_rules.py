"""The rules of the base class of every layer, at their edges.

``brainstorm/layers/base_layer.py`` checks a layer's declarations when its
class is defined (and takes the defaults of its arguments from its
constructor function), checks the shapes it is given and the shapes its
``setup`` returns when it is built, checks its connections, and gives
custom layers their helpers (``get_shape``, ``default_size``,
``time_template``, the epsilon check, workspaces, zeroed gradients). A gap
lets a layer take an input of a shape it cannot compute with, declare a
buffer of the wrong kind or lose an argument's default, and the network
computes wrong numbers or fails deep in a handler op.
"""

from __future__ import annotations

import sys
import textwrap
import types
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.arguments import Arg, Real
from brainstorm.errors import LayerValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.layers.base_layer import (
    Layer,
    check_epsilon_for_handler,
    default_size,
    get_layer_class_from_typename,
    time_template,
)
from brainstorm.structure.architecture import Connection
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper

TBF = StructureTemplate('T', 'B', 'F')


def _time_sized(n):
    return BufferStructure('T', 'B', n)


class RulesCopyLayerImpl(Layer):
    """Copies its input; a base for the classes the tests make."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        n = in_shapes['default'].feature_size
        return OrderedDict(default=_time_sized(n)), OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        deltas = buffers.input_deltas.default
        self.handler.add_tt(buffers.output_deltas.default, deltas, deltas)


def _network(layer):
    """``Input >> layer >> FullyConnected >> Loss`` with 4 input features."""
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    return bs.Network.from_layer(inp >> layer >> out)


# ------------------------------------------------ class definition ---


class _Recording:
    """A mixin whose ``__init_subclass__`` records the classes it sees."""

    seen: list = []

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _Recording.seen.append(cls.__name__)


def test_the_other_bases_init_subclass_runs_for_a_layer_class():
    """Layer.__init_subclass__ is cooperative: a mixin's runs too."""
    _Recording.seen.clear()
    type('RulesMixedLayerImpl', (RulesCopyLayerImpl, _Recording), {})
    assert _Recording.seen == ['RulesMixedLayerImpl']


def test_a_class_keyword_nobody_takes_is_refused():
    with pytest.raises(TypeError):

        class RulesKeywordLayerImpl(RulesCopyLayerImpl, flavour='sweet'):
            pass


class _TupledOutputs:
    """A mixin that takes a single input name in independent_outputs."""

    def __init_subclass__(cls, **kwargs):
        declared = cls.__dict__.get('independent_outputs', {})
        for output, inputs in declared.items():
            if isinstance(inputs, str):
                declared[output] = (inputs,)
        super().__init_subclass__(**kwargs)


def test_the_checks_see_the_class_as_the_other_bases_leave_it():
    """The declarations are checked after the whole chain of
    ``__init_subclass__`` ran: a mixin may complete them."""
    layer_class = type(
        'RulesShorthandLayerImpl',
        (RulesCopyLayerImpl, _TupledOutputs),
        {'independent_outputs': {'probabilities': 'labels'}},
    )
    assert layer_class.independent_outputs == {'probabilities': ('labels',)}


def test_a_layer_class_is_found_by_its_class_name():
    layer_class = type('RulesFoundLayerImpl', (RulesCopyLayerImpl,), {})
    assert get_layer_class_from_typename('RulesFoundLayerImpl') is layer_class
    assert layer_class.get_type_name() == 'RulesFound'


def test_the_declared_arguments_are_the_expected_ones_unless_named_otherwise():
    declared = {'rate': Arg(Real(0, 1), default=0.5)}
    plain = type('RulesDeclaredLayerImpl', (RulesCopyLayerImpl,), {
        'declared_kwargs': declared})  # fmt: skip
    assert plain.expected_kwargs == {'rate'}
    both = type('RulesBothLayerImpl', (RulesCopyLayerImpl,), {
        'declared_kwargs': declared, 'expected_kwargs': {'rate', 'extra'}})  # fmt: skip
    assert both.expected_kwargs == {'rate', 'extra'}
    assert both.check_kwargs('B', {'extra': 3}) == {'rate': 0.5, 'extra': 3}


def test_a_class_given_another_home_module_takes_its_defaults_from_there(
    monkeypatch,
):
    """A class whose ``__module__`` names another module (re-homed in a
    public module) without a method of its own takes the default from the
    constructor function in that module."""
    home = types.ModuleType('brainstorm_rules_home')

    def Homed(rate=0.75, name=None):  # noqa: N802 - a constructor function
        pass

    home.Homed = Homed
    monkeypatch.setitem(sys.modules, 'brainstorm_rules_home', home)
    layer_class = type('HomedLayerImpl', (RulesCopyLayerImpl,), {
        '__module__': 'brainstorm_rules_home',
        'declared_kwargs': {'rate': Arg(Real(0, 1))}})  # fmt: skip
    assert layer_class.declared_kwargs['rate'].default == 0.75
    assert layer_class.check_kwargs('H', {}) == {'rate': 0.75}


def test_a_function_taken_from_elsewhere_does_not_hide_the_constructor():
    """Only a function defined in the class body says where the class is
    defined: one assigned from another module (here ``textwrap.dedent``,
    put before ``setup``) is passed over."""
    namespace = {'__name__': 'brainstorm_rules_snippet', 'Base': RulesCopyLayerImpl}
    code = (
        'import textwrap\n'
        'from brainstorm.arguments import Arg, Real\n'
        'def Borrowing(rate=0.25, name=None):\n'
        '    pass\n'
        'class BorrowingLayerImpl(Base):\n'
        '    dedent = textwrap.dedent\n'
        "    declared_kwargs = {'rate': Arg(Real(0, 1))}\n"
        '    def setup(self, kwargs, in_shapes):\n'
        '        return super().setup(kwargs, in_shapes)\n'
    )
    exec(compile(code, 'snippet', 'exec'), namespace)
    layer_class = namespace['BorrowingLayerImpl']
    assert layer_class.dedent is textwrap.dedent
    assert layer_class.check_kwargs('B', {}) == {'rate': 0.25}


# ------------------------------------------------------- in_shapes ---


class RulesMaskedLayerImpl(RulesCopyLayerImpl):
    """Takes an optional one-feature mask."""

    optional_inputs = {'mask': time_template(1)}


def test_an_input_that_does_not_match_its_template_is_refused():
    class RulesPairLayerImpl(RulesCopyLayerImpl):
        expected_inputs = {'default': TBF, 'other': time_template(3)}

    RulesPairLayerImpl(
        'P', {'default': _time_sized(4), 'other': _time_sized(3)}, [], []
    )
    with pytest.raises(LayerValidationError) as info:
        RulesPairLayerImpl(
            'P', {'default': _time_sized(4), 'other': _time_sized(2)}, [], []
        )
    message = str(info.value)
    assert "RulesPair 'P': input 'other' must match" in message
    assert 'Received shape' in message


def test_an_optional_input_may_be_left_unconnected():
    layer = RulesMaskedLayerImpl('M', {'default': _time_sized(4)}, [], [])
    assert list(layer.in_shapes) == ['default']


def test_a_connected_optional_input_must_match_its_template():
    shapes = {'default': _time_sized(4), 'mask': _time_sized(1)}
    layer = RulesMaskedLayerImpl('M', shapes, [], [])
    assert list(layer.in_shapes) == ['default', 'mask']
    with pytest.raises(LayerValidationError, match="input 'mask' must match"):
        RulesMaskedLayerImpl(
            'M', {'default': _time_sized(4), 'mask': _time_sized(2)}, [], []
        )


def test_an_expected_input_may_not_be_left_unconnected():
    with pytest.raises(LayerValidationError, match="input 'default' is not connected"):
        RulesMaskedLayerImpl('M', {'mask': _time_sized(1)}, [], [])


def test_an_input_the_layer_does_not_take_is_refused():
    with pytest.raises(LayerValidationError, match="has no input 'labels'"):
        RulesMaskedLayerImpl(
            'M', {'default': _time_sized(4), 'labels': _time_sized(1)}, [], []
        )


# ----------------------------------------------------- setup result ---


def test_a_layer_without_setup_says_so():
    class RulesNoSetupLayerImpl(Layer):
        expected_inputs = {'default': TBF}

    with pytest.raises(NotImplementedError, match='must implement setup'):
        RulesNoSetupLayerImpl('N', {'default': _time_sized(4)}, [], [])


def test_a_setup_returning_nothing_is_refused_naming_the_layer():
    class RulesForgetfulLayerImpl(RulesCopyLayerImpl):
        def setup(self, kwargs, in_shapes):
            super().setup(kwargs, in_shapes)  # forgot the return

    with pytest.raises(LayerValidationError) as info:
        RulesForgetfulLayerImpl('F', {'default': _time_sized(4)}, [], [])
    assert "RulesForgetful 'F': setup() must return" in str(info.value)
    assert 'Received one' in str(info.value)


@pytest.mark.parametrize(
    'result',
    [
        (OrderedDict(default=('T', 'B', 4)), OrderedDict(), OrderedDict()),
        (OrderedDict(default=_time_sized(4)), [BufferStructure(4)], OrderedDict()),
        (OrderedDict(default=_time_sized(4)), OrderedDict(), None),
    ],
    ids=['shape-for-structure', 'list-for-dict', 'none-for-dict'],
)
def test_setup_must_return_dicts_of_buffer_structures(result):
    class RulesLooseLayerImpl(RulesCopyLayerImpl):
        def setup(self, kwargs, in_shapes):
            return result

    with pytest.raises(LayerValidationError) as info:
        RulesLooseLayerImpl('L', {'default': _time_sized(4)}, [], [])
    assert "RulesLoose 'L': setup() must return three OrderedDicts" in str(info.value)


def test_a_connected_layer_whose_setup_returns_no_outputs_dict_is_refused():
    """The result of setup is checked before the connections are looked up
    in it."""

    class RulesNoOutputsLayerImpl(RulesCopyLayerImpl):
        def setup(self, kwargs, in_shapes):
            return None, OrderedDict(), OrderedDict()

    layer = ConstructionWrapper.create(RulesNoOutputsLayerImpl, name='N')
    with pytest.raises(LayerValidationError) as info:
        _network(layer)
    assert "RulesNoOutputs 'N': setup() must return three OrderedDicts" in str(
        info.value
    )


# ------------------------------------------------------ connections ---


def test_a_layer_refuses_a_connection_from_an_output_it_lacks():
    connection = Connection('Hid', 'nothere', 'L', 'default')
    layer_class = bs.layers.fully_connected_layer.FullyConnectedLayerImpl
    in_shapes = {'default': _time_sized(4)}
    with pytest.raises(LayerValidationError) as info:
        layer_class('Hid', in_shapes, [], [connection], size=5)
    message = str(info.value)
    assert "FullyConnected 'Hid': has no output 'nothere'" in message
    assert '(connected to L.default)' in message
    fine = Connection('Hid', 'default', 'L', 'default')
    layer = layer_class('Hid', in_shapes, [], [fine], size=5)
    assert layer.outgoing == [fine]


def test_a_network_refuses_a_connection_from_an_output_a_layer_lacks():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    hidden = bs.layers.FullyConnected(5, name='Hid')
    inp >> hidden >> out
    hidden - 'nothere' >> bs.layers.Loss(name='L')
    with pytest.raises(LayerValidationError) as info:
        bs.Network.from_layer(out)
    assert "FullyConnected 'Hid': has no output 'nothere'" in str(info.value)


def test_a_connection_from_a_parameter_is_no_output_to_check():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    hidden = bs.layers.FullyConnected(5, name='Hid')
    inp >> hidden >> out
    hidden - '..parameters.W' >> bs.layers.Loss(name='L')
    net = bs.Network.from_layer(out)
    assert 'L' in net.layers
    assert 'L' in net.loss_layers


# ---------------------------------------------------------- helpers ---


def _fully_connected(size=5):
    layer_class = bs.layers.fully_connected_layer.FullyConnectedLayerImpl
    return layer_class('Hid', {'default': _time_sized(4)}, [], [], size=size)


def test_get_shape_gives_the_shape_of_each_category():
    layer = _fully_connected()
    assert layer.get_shape('inputs.default') == ('T', 'B', 4)
    assert layer.get_shape('outputs.default') == ('T', 'B', 5)
    assert layer.get_shape('parameters.W') == (5, 4)
    assert layer.get_shape('parameters.bias') == (5,)


@pytest.mark.parametrize(
    'path, words',
    [
        ('weights.W', ["FullyConnected 'Hid'", "unknown category 'weights'"]),
        ('parameters.V', ["FullyConnected 'Hid'", "no parameters buffer 'V'"]),
    ],
)
def test_get_shape_of_no_buffer_is_a_key_error_naming_the_layer(path, words):
    with pytest.raises(KeyError) as info:
        _fully_connected().get_shape(path)
    for word in words:
        assert word in str(info.value)


def test_default_size_is_the_given_size_or_the_inputs_features():
    structure = BufferStructure('T', 'B', 6, 6, 3)
    assert default_size(None, structure) == (6, 6, 3)
    assert default_size(5, structure) == (5,)
    assert default_size([2, 3], structure) == (2, 3)


def test_time_template_leads_with_time_and_batch():
    assert time_template(3).shape == ('T', 'B', 3)
    assert time_template(6, 2).shape == ('T', 'B', 6, 2)
    assert time_template('F', context_size=1).context_size == 1
    assert time_template().shape == ('T', 'B', '...')


@pytest.mark.parametrize(
    'dtype, epsilon, effect',
    [
        (np.float16, 1e-12, 'gives NaN'),
        (np.float32, 1e-50, 'gives NaN'),
        (np.float16, 1e5, 'gives only beta'),
        (np.float32, 1e39, 'gives only beta'),
    ],
)
def test_an_epsilon_the_dtype_makes_0_or_inf_is_refused(dtype, epsilon, effect):
    with pytest.raises(LayerValidationError) as info:
        check_epsilon_for_handler(
            _fully_connected(), epsilon, NumpyHandler(dtype), 'constant position'
        )
    message = str(info.value)
    assert "FullyConnected 'Hid': epsilon must be a finite" in message
    assert f'a constant position then {effect}' in message


@pytest.mark.parametrize(
    'dtype, epsilon',
    [(np.float16, 1.0), (np.float16, 1e-7), (np.float16, 6e4), (np.float32, 1.0)],
)
def test_an_epsilon_the_dtype_holds_is_accepted(dtype, epsilon):
    result = check_epsilon_for_handler(
        _fully_connected(), epsilon, NumpyHandler(dtype), 'constant position'
    )
    assert result is None


class RulesWorkspaceLayerImpl(RulesCopyLayerImpl):
    """Wants a workspace ``scratch`` on float64 handlers only."""

    def workspace_shapes(self, handler):
        if np.dtype(handler.dtype) == np.float64:
            n = self.in_shapes['default'].feature_size
            return OrderedDict(scratch=_time_sized(n))
        return OrderedDict()


def test_the_internals_are_setups_and_the_handlers_workspaces():
    layer = RulesWorkspaceLayerImpl('W', {'default': _time_sized(4)}, [], [])
    assert list(layer.internal_shapes) == []
    assert layer.use_workspaces_of(NumpyHandler(np.float64)) is True
    assert list(layer.internal_shapes) == ['scratch']
    assert layer.use_workspaces_of(NumpyHandler(np.float64)) is False
    assert list(layer.internal_shapes) == ['scratch']
    assert layer.use_workspaces_of(NumpyHandler(np.float32)) is True
    assert list(layer.internal_shapes) == []
    assert layer.use_workspaces_of(NumpyHandler(np.float32)) is False


def test_a_network_lays_out_the_workspaces_of_its_handler():
    net = _network(ConstructionWrapper.create(RulesWorkspaceLayerImpl, name='W'))
    net.set_handler(NumpyHandler(np.float32))
    assert list(net.buffer.W.internals.keys()) == []
    net.set_handler(NumpyHandler(np.float64))
    assert list(net.buffer.W.internals.keys()) == ['scratch']


class RulesAveragingLayerImpl(RulesCopyLayerImpl):
    """Has a trained ``W`` and a self-maintained ``W_avg``."""

    computes_no_gradients_for = ('W_avg',)

    def setup(self, kwargs, in_shapes):
        outputs, _, internals = super().setup(kwargs, in_shapes)
        n = in_shapes['default'].feature_size
        parameters = OrderedDict(W=BufferStructure(n), W_avg=BufferStructure(n))
        return outputs, parameters, internals


def test_zero_gradients_zeroes_those_the_layer_computes():
    net = _network(ConstructionWrapper.create(RulesAveragingLayerImpl, name='A'))
    gradients = net.buffer.A.gradients
    for gradient in (gradients.W, gradients.W_avg):
        gradient[:] = 7.0
    net.layers['A']._zero_gradients(net.buffer.A)
    np.testing.assert_array_equal(gradients.W, np.zeros(4))
    np.testing.assert_array_equal(gradients.W_avg, np.full(4, 7.0))


# ------------------------------------------------- what is zeroed ---


class RulesCountingLayerImpl(RulesCopyLayerImpl):
    """Adds 1 to its gradient ``w`` and to its backward-only internal
    ``acc`` in each backward pass, claiming to overwrite neither."""

    def setup(self, kwargs, in_shapes):
        outputs, _, _ = super().setup(kwargs, in_shapes)
        n = in_shapes['default'].feature_size
        acc = BufferStructure('T', 'B', n, is_backward_only=True)
        return outputs, OrderedDict(w=BufferStructure(n)), OrderedDict(acc=acc)

    def backward_pass(self, buffers):
        super().backward_pass(buffers)
        self.handler.add_st(1.0, buffers.gradients.w, buffers.gradients.w)
        self.handler.add_st(1.0, buffers.internals.acc, buffers.internals.acc)


def _counted_passes(passes):
    """The gradient and internal of a RulesCounting layer after ``passes``."""
    net = _network(ConstructionWrapper.create(RulesCountingLayerImpl, name='C'))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    data = np.random.default_rng(0).normal(size=(2, 3, 4))
    net.provide_external_data({'default': data, 'targets': np.zeros((2, 3, 1))})
    for _ in range(passes):
        net.forward_pass(training_pass=True)
        net.backward_pass()
    return net.buffer.C.gradients.w, net.buffer.C.internals.acc


def test_a_layer_claims_to_overwrite_neither_gradients_nor_backward_internals():
    assert Layer.overwrites_gradients is False
    assert Layer.overwrites_backward_internals is False
    assert RulesCountingLayerImpl.overwrites_gradients is False


def test_the_gradients_a_layer_adds_to_are_zeroed_before_each_backward_pass():
    gradient, _ = _counted_passes(3)
    np.testing.assert_array_equal(gradient, np.ones(4))


def test_the_backward_internals_a_layer_adds_to_are_zeroed_before_each_pass():
    _, internal = _counted_passes(3)
    np.testing.assert_array_equal(internal, np.ones((2, 3, 4)))
