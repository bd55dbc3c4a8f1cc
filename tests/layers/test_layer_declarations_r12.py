"""Mistakes in a layer's declarations or ``setup`` are refused naming the layer.

* an output or parameter declared ``is_backward_only`` (an output lay in
  memory the network zeroes when the backward pass starts: the next
  layer's gradients came out zero, silently), a time- or batch-sized
  parameter (refused only at layout, blaming a concatenation);
* a check given in ``declared_kwargs`` instead of its ``Kwarg(...)``
  declaration (the argument went unchecked; ``describe_layers`` crashed);
* a tuple in ``expected_inputs`` instead of a ``StructureTemplate``
  (AttributeError naming no layer);
* an error raised in ``setup``, or ``setup`` returning other than three
  dicts (errors naming no layer).

Layers written for Brainstorm 0.5 (``expected_kwargs`` as a set of names)
keep working.
"""

from __future__ import annotations

from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import LayerValidationError, StructureValidationError
from brainstorm.layers.attributes import FloatIn, Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer, describe_layers
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper

TBF = StructureTemplate('T', 'B', 'F')


def _copy_class(output=None, parameters=None):
    """A layer copying its input; ``output``/``parameters`` override setup's."""

    class R12CopyLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def setup(self, kwargs, in_shapes):
            n = in_shapes['default'].feature_size
            out = output(n) if output else BufferStructure('T', 'B', n)
            params = OrderedDict(parameters(n)) if parameters else OrderedDict()
            return OrderedDict(default=out), params, OrderedDict()

        def forward_pass(self, buffers, training_pass=True):
            self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

        def backward_pass(self, buffers):
            deltas = buffers.input_deltas.default
            self.handler.add_tt(buffers.output_deltas.default, deltas, deltas)

    return R12CopyLayerImpl


def _build(layer_class, name='Mine'):
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    layer = ConstructionWrapper.create(layer_class, name=name)
    return bs.Network.from_layer(inp >> layer >> out)


# ---- outputs and parameters of the wrong kind --------------------------------


def test_backward_only_output_is_refused():
    layer_class = _copy_class(
        output=lambda n: BufferStructure('T', 'B', n, is_backward_only=True)
    )
    with pytest.raises(LayerValidationError) as info:
        _build(layer_class)
    message = str(info.value)
    assert "R12Copy 'Mine'" in message
    assert "output 'default'" in message
    assert 'is_backward_only' in message
    assert "BufferStructure('T', 'B', 4)" in message


def test_a_plain_output_still_gives_gradients():
    net = _build(_copy_class())
    net.initialize(bs.initializers.Gaussian(0.5))
    x = np.random.RandomState(0).randn(3, 2, 4).astype(np.float32)
    t = np.zeros((3, 2, 1), np.float32)
    net.provide_external_data({'default': x, 'targets': t})
    net.forward_pass(training_pass=True)
    net.backward_pass()
    assert np.abs(net.get('Output_projection.gradients.W')).sum() > 0


@pytest.mark.parametrize(
    'shape, kind',
    [(('T', 'B'), 'time-sized'), (('B',), 'batch-sized')],
)
def test_a_parameter_that_is_not_constant_size_is_refused(shape, kind):
    layer_class = _copy_class(parameters=lambda n: {'W': BufferStructure(*shape, n)})
    with pytest.raises(LayerValidationError) as info:
        _build(layer_class)
    message = str(info.value)
    assert "R12Copy 'Mine'" in message
    assert "parameter 'W'" in message
    assert 'constant-size' in message
    assert kind in message
    assert 'concatenated' not in message


def test_a_backward_only_parameter_is_refused():
    layer_class = _copy_class(
        parameters=lambda n: {'W': BufferStructure(n, is_backward_only=True)}
    )
    with pytest.raises(LayerValidationError) as info:
        _build(layer_class)
    message = str(info.value)
    assert "R12Copy 'Mine'" in message
    assert "parameter 'W'" in message
    assert 'backward-only' in message


def test_constant_parameters_are_accepted():
    net = _build(_copy_class(parameters=lambda n: {'W': BufferStructure(n, 2)}))
    assert net.get('Mine.parameters.W').shape == (4, 2)


# ---- declared_kwargs -----------------------------------------------------------


def test_a_check_instead_of_a_declaration_is_refused_at_class_definition():
    with pytest.raises(TypeError) as info:

        class R12WidenLayerImpl(Layer):
            expected_inputs = {'default': TBF}
            declared_kwargs = {'size': PositiveInt()}

    message = str(info.value)
    assert 'R12WidenLayerImpl' in message
    assert "declared_kwargs['size']" in message
    assert 'Kwarg(' in message
    assert 'PositiveInt' in message
    # the refused class is not listed, so the listing still works
    assert 'R12Widen' not in {entry['type'] for entry in describe_layers()}


def test_a_set_of_names_in_declared_kwargs_is_refused():
    with pytest.raises(TypeError, match='R12SetLayerImpl.*expected_kwargs'):

        class R12SetLayerImpl(Layer):
            expected_inputs = {'default': TBF}
            declared_kwargs = {'size'}  # type: ignore[assignment]


def test_declarations_and_05_names_are_accepted():
    class R12DeclaredLayerImpl(Layer):
        expected_inputs = {'default': TBF}
        declared_kwargs = {'factor': Kwarg(FloatIn(0), default=1.0)}

        def setup(self, kwargs, in_shapes):
            return OrderedDict(default=in_shapes['default']), {}, {}

    class R12Old05LayerImpl(Layer):  # Brainstorm 0.5's spelling
        expected_inputs = {'default': TBF}
        expected_kwargs = {'size'}

        def setup(self, kwargs, in_shapes):
            size = kwargs.get('size', in_shapes['default'].feature_size)
            return OrderedDict(default=BufferStructure('T', 'B', size)), {}, {}

    shapes = {'default': BufferStructure('T', 'B', 3)}
    with pytest.raises(LayerValidationError, match="R12Declared 'd'.*factor"):
        R12DeclaredLayerImpl('d', shapes, [], [], factor=-1.0)
    assert R12Old05LayerImpl('o', shapes, [], [], size=5).out_shapes[
        'default'
    ].shape == ('T', 'B', 5)
    described = {entry['type']: entry for entry in describe_layers()}
    assert described['R12Declared']['kwargs']['factor']['default'] == 1.0
    assert 'size' in described['R12Old05']['kwargs']


# ---- expected_inputs -----------------------------------------------------------


def test_a_tuple_in_expected_inputs_is_refused_at_class_definition():
    with pytest.raises(TypeError) as info:

        class R12TupleLayerImpl(Layer):
            expected_inputs = {'default': ('T', 'B', 'F')}

    message = str(info.value)
    assert 'R12TupleLayerImpl.expected_inputs' in message
    assert "['default']" in message
    assert "StructureTemplate('T', 'B', 'F')" in message
    assert "Received: ('T', 'B', 'F')" in message


def test_a_tuple_in_optional_inputs_is_refused_at_class_definition():
    with pytest.raises(TypeError, match=r"R12OptLayerImpl\.optional_inputs \['mask'\]"):

        class R12OptLayerImpl(Layer):
            expected_inputs = {'default': TBF}
            optional_inputs = {'mask': ('T', 'B', 1)}


def test_a_tuple_set_on_the_instance_is_refused_at_construction():
    class R12LateLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def __init__(self, name, in_shapes, incoming, outgoing, **kwargs):
            self.expected_inputs = {'default': ('T', 'B', 'F')}
            super().__init__(name, in_shapes, incoming, outgoing, **kwargs)

    with pytest.raises(TypeError) as info:
        R12LateLayerImpl('late', {'default': BufferStructure('T', 'B', 3)}, [], [])
    message = str(info.value)
    assert "R12Late 'late'" in message
    assert "expected_inputs ['default']" in message


# ---- setup's errors and result -------------------------------------------------


def test_an_error_in_setup_names_the_layer_and_keeps_its_type():
    class R12HalfLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def setup(self, kwargs, in_shapes):
            n = in_shapes['default'].feature_size
            return OrderedDict(default=BufferStructure('T', 'B', n / 2)), {}, {}

    with pytest.raises(StructureValidationError) as info:
        _build(R12HalfLayerImpl)
    message = str(info.value)
    assert message.startswith("R12Half 'Mine': BufferStructure('T', 'B', 2.0)")
    assert isinstance(info.value.__cause__, StructureValidationError)
    assert "R12Half 'Mine'" not in str(info.value.__cause__)


def test_an_error_naming_the_layer_already_is_left_alone():
    class R12NamedLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def setup(self, kwargs, in_shapes):
            raise LayerValidationError(f'{self._desc()}: too many features')

    with pytest.raises(LayerValidationError) as info:
        _build(R12NamedLayerImpl)
    assert str(info.value) == "R12Named 'Mine': too many features"
    assert info.value.__cause__ is None


def test_an_error_of_a_type_needing_more_arguments_is_raised_as_it_is():
    class R12DecodeLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def setup(self, kwargs, in_shapes):
            b'\xff'.decode('utf-8')

    with pytest.raises(UnicodeDecodeError):
        _build(R12DecodeLayerImpl)


class _CodeError(Exception):
    """An error of one's own whose message is made from its state."""

    def __init__(self, code):
        super().__init__(code)
        self.code = code

    def __str__(self):
        return f'error code {self.code}: bad config'


@pytest.mark.parametrize(
    'error',
    [
        KeyError('size'),
        FileNotFoundError(2, 'No such file or directory', 'w.npy'),
        _CodeError(42),
        ValueError('a', 'b'),
    ],
    ids=['KeyError', 'OSError', 'own-type', 'two-args'],
)
def test_errors_that_are_more_than_a_message_are_raised_unchanged(error):
    # re-made with a prefixed message they lost errno/filename, their
    # args[0] (KeyError) or their state (a type of one's own)
    class R12RaisingLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def setup(self, kwargs, in_shapes):
            raise error

    with pytest.raises(type(error)) as info:
        _build(R12RaisingLayerImpl)
    assert info.value is error
    assert info.value.args == error.args
    if hasattr(error, 'add_note'):
        assert "(raised in the setup of R12Raising 'Mine')" in error.__notes__


@pytest.mark.parametrize(
    'result, received',
    [
        ((OrderedDict(), OrderedDict()), '2 items'),
        ((OrderedDict(), OrderedDict(), OrderedDict(), OrderedDict()), '4 items'),
        (OrderedDict(), 'one'),
    ],
)
def test_setup_returning_other_than_three_dicts_names_the_layer(result, received):
    class R12CountLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def setup(self, kwargs, in_shapes):
            return result

    with pytest.raises(LayerValidationError) as info:
        _build(R12CountLayerImpl)
    message = str(info.value)
    assert "R12Count 'Mine'" in message
    assert '(outputs, parameters, internals)' in message
    assert f'Received {received}' in message


def test_a_bare_assert_in_setup_names_the_layer():
    """Layers written for Brainstorm 0.5 checked their inputs with assert."""

    class R12AssertLayerImpl(Layer):
        expected_inputs = {'default': TBF}
        expected_kwargs = {'size'}

        def setup(self, kwargs, in_shapes):
            # a bare ``assert`` (without pytest's rewriting of this module)
            if in_shapes['default'].feature_size != kwargs['size']:
                raise AssertionError

    with pytest.raises(AssertionError) as info:
        R12AssertLayerImpl(
            'a', {'default': BufferStructure('T', 'B', 3)}, [], [], size=4
        )
    assert str(info.value) == "R12Assert 'a': setup() failed"
    assert isinstance(info.value.__cause__, AssertionError)
