"""Mistakes in how a custom layer is declared and built are refused or harmless.

* ``computes_no_gradients_for = ('b_avg')`` (a missing comma makes it a
  str) was taken as a collection of names: ``'b' in 'b_avg'`` is True, so
  a layer that never computes the gradient of ``b`` passed
  ``run_layer_tests`` and ``b`` never trained. The name attributes must
  be tuples (lists, sets) of strs, checked when the class is defined.
* ``setup`` changing a list argument in place (``sizes.insert(0, n)``)
  rewrote ``net.architecture``: the saved file described another network
  and failed to load as "corrupt". ``setup`` now gets its own copy.
* ``setup`` returning buffers named by ints (or ``'@...'``, the layout's
  own keys) was accepted, then failed with a bare AttributeError naming no
  layer (or the buffer vanished).
"""

from __future__ import annotations

from collections import OrderedDict

import pytest

import brainstorm as bs
from brainstorm.arguments import Int, ListOf
from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import Kwarg
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper

TBF = StructureTemplate('T', 'B', 'F')

NAME_ATTRIBUTES = {
    'computes_no_input_deltas_for': 'input',
    'computes_no_gradients_for': 'parameter',
    'takes_no_output_deltas_from': 'output',
    'passes_back_internal_deltas': 'internal',
    'id_inputs': 'input',
}


def _in_out(n_in=4):
    return bs.tools.get_in_out_layers('classification', n_in, 3)


# ---- name attributes: tuples of names, never a bare str ----------------------


@pytest.mark.parametrize('attribute', sorted(NAME_ATTRIBUTES))
def test_a_str_for_a_tuple_of_names_is_refused_at_class_definition(attribute):
    with pytest.raises(TypeError) as info:
        type(
            'DeclStrLayerImpl',
            (Layer,),
            {'expected_inputs': {'default': TBF}, attribute: ('b_avg')},  # no comma
        )
    message = str(info.value)
    assert f'DeclStrLayerImpl.{attribute}' in message
    kind = NAME_ATTRIBUTES[attribute]
    assert f'must be a tuple (or list or set) of {kind} names' in message
    assert "Received: 'b_avg' (str)" in message
    assert "a single name needs a comma: ('b_avg',)" in message


@pytest.mark.parametrize('value', [None, 3, ('W', 3), {'W': 1}])
def test_other_non_tuples_of_names_are_refused(value):
    with pytest.raises(TypeError) as info:
        type('DeclOtherLayerImpl', (Layer,), {'computes_no_gradients_for': value})
    message = str(info.value)
    assert 'DeclOtherLayerImpl.computes_no_gradients_for' in message
    assert 'tuple (or list or set) of parameter names' in message
    assert f'Received: {value!r} ({type(value).__name__})' in message


@pytest.mark.parametrize('value', [(), ('W',), ['W', 'b'], {'W'}, frozenset({'b'})])
def test_tuples_lists_and_sets_of_names_are_accepted(value):
    layer_class = type(
        'DeclFineLayerImpl', (Layer,), {'computes_no_gradients_for': value}
    )
    assert layer_class.computes_no_gradients_for == value


class DeclLateStrLayerImpl(Layer):
    """Sets a name attribute in setup, as a str."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        self.computes_no_gradients_for = 'b_avg'
        n = in_shapes['default'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(b=BufferStructure(n), b_avg=BufferStructure(n)),
            OrderedDict(),
        )


def test_a_str_set_in_setup_is_refused_naming_the_layer():
    inp, out = _in_out()
    layer = ConstructionWrapper.create(DeclLateStrLayerImpl, name='Late')
    with pytest.raises(TypeError) as info:
        bs.Network.from_layer(inp >> layer >> out)
    message = str(info.value)
    assert "DeclLateStr 'Late' (DeclLateStrLayerImpl): computes_no_gradients_for" in (
        message
    )
    assert 'tuple (or list or set) of parameter names' in message
    assert "Received: 'b_avg' (str)" in message


# ---- setup changing its arguments in place -----------------------------------


class DeclStackLayerImpl(Layer):
    """Linear maps of the given sizes; setup extends its list argument."""

    expected_inputs = {'default': TBF}
    expected_kwargs = {'sizes'}  # Brainstorm 0.5 style

    def setup(self, kwargs, in_shapes):
        sizes = kwargs['sizes']
        sizes.insert(0, in_shapes['default'].feature_size)  # in place
        params = OrderedDict(
            (f'W{i}', BufferStructure(b, a))
            for i, (a, b) in enumerate(zip(sizes, sizes[1:]))
        )
        out = BufferStructure('T', 'B', sizes[-1])
        return OrderedDict(default=out), params, OrderedDict()


def test_setup_changing_a_list_argument_leaves_the_architecture(tmp_path):
    inp, out = _in_out(4)
    stack = ConstructionWrapper.create(DeclStackLayerImpl, name='S', sizes=[5])
    net = bs.Network.from_layer(inp >> stack >> out)
    assert net.architecture['S']['sizes'] == [5]
    assert net.layers['S'].kwargs == {'sizes': [5]}
    assert {k: v.shape for k, v in net.layers['S'].parameter_shapes.items()} == {
        'W0': (5, 4)
    }
    net.initialize(bs.initializers.Gaussian(0.1))
    path = str(tmp_path / 'stack.h5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    assert loaded.architecture['S']['sizes'] == [5]
    assert {k: v.shape for k, v in loaded.layers['S'].parameter_shapes.items()} == {
        'W0': (5, 4)
    }


def test_setup_changing_a_list_leaves_the_callers_list_and_the_default():
    class DeclDefaultStackLayerImpl(DeclStackLayerImpl):
        declared_kwargs = {'sizes': Kwarg(ListOf(Int()), default=[5])}

    given = [6]
    structure = {'default': BufferStructure('T', 'B', 4)}
    layer = DeclStackLayerImpl('S', structure, [], [], sizes=given)
    assert given == [6]
    assert dict(layer.kwargs) == {'sizes': [6]}
    for _ in range(2):  # the declared default stays [5]
        layer = DeclDefaultStackLayerImpl('D', structure, [], [])
        assert list(layer.parameter_shapes) == ['W0']
        assert layer.parameter_shapes['W0'].shape == (5, 4)


# ---- buffer names ------------------------------------------------------------


def _named_buffers_class(category, buffer_name):
    """A layer whose setup puts ``buffer_name`` into ``category``."""

    class DeclNamesLayerImpl(Layer):
        expected_inputs = {'default': TBF}

        def setup(self, kwargs, in_shapes):
            n = in_shapes['default'].feature_size
            result = {
                'outputs': OrderedDict(default=BufferStructure('T', 'B', n)),
                'parameters': OrderedDict(),
                'internals': OrderedDict(),
            }
            result[category][buffer_name] = (
                BufferStructure(n)
                if category == 'parameters'
                else BufferStructure('T', 'B', n)
            )
            return result['outputs'], result['parameters'], result['internals']

    return DeclNamesLayerImpl


@pytest.mark.parametrize(
    ('category', 'kind'),
    [
        ('outputs', 'an output'),
        ('parameters', 'a parameter'),
        ('internals', 'an internal'),
    ],
)
@pytest.mark.parametrize('buffer_name', [0, '', '@type', '@shape', '..x', None])
def test_buffer_names_that_are_no_plain_str_are_refused(category, kind, buffer_name):
    layer_class = _named_buffers_class(category, buffer_name)
    inp, out = _in_out()
    layer = ConstructionWrapper.create(layer_class, name='M')
    with pytest.raises(LayerValidationError) as info:
        bs.Network.from_layer(inp >> layer >> out)
    message = str(info.value)
    assert f"DeclNames 'M': setup() returned {kind} named {buffer_name!r}" in message
    assert f'({type(buffer_name).__name__})' in message
    assert 'must be non-empty strs' in message
    assert "not starting with '@'" in message


@pytest.mark.parametrize('buffer_name', ['W', 'a-b', 'a.b', 'items'])
def test_other_str_buffer_names_still_work(buffer_name):
    layer_class = _named_buffers_class('parameters', buffer_name)
    inp, out = _in_out()
    layer = ConstructionWrapper.create(layer_class, name='M')
    net = bs.Network.from_layer(inp >> layer >> out)
    assert net.buffer.M.parameters.keys() == [buffer_name]
