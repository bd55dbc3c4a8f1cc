"""Declared layer arguments: every constraint violated once, the listing."""

import pytest

from brainstorm.layers.base_layer import describe_layers
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.test_layer_registry import _collect


def _violations():
    seen, cases = set(), []
    for entry in _collect():
        cls = entry['layer_class']
        if cls in seen:
            continue
        seen.add(cls)
        for name, kwarg in cls.declared_kwargs.items():
            for bad in kwarg.constraint.invalid_examples:
                if bad is None and kwarg.default is None:
                    continue  # None means "decided by the layer" here
                cases.append(
                    pytest.param(
                        entry, name, bad, id=f'{cls.get_type_name()}-{name}-{bad!r}'
                    )
                )
    return cases


@pytest.mark.parametrize('entry, name, bad', _violations())
def test_each_declared_constraint_violated_once(entry, name, bad):
    cls = entry['layer_class']
    kwargs = dict(entry.get('kwargs', {}), **{name: bad})
    with pytest.raises(LayerValidationError) as info:
        instantiate_layer(cls, entry['in_shapes'], name='Culprit', **kwargs)
    message = str(info.value)
    assert f"{cls.get_type_name()} 'Culprit'" in message
    assert name in message
    assert 'Received' in message or 'required' in message


def test_constructor_functions_validate_at_construction():
    from brainstorm.layers import FullyConnected

    with pytest.raises(
        LayerValidationError,
        match=r"FullyConnected 'Hid1': size must be a positive "
        r'int or a tuple of positive ints\. Received: '
        r'size=-3',
    ):
        FullyConnected(-3, name='Hid1')


def test_unexpected_kwargs_are_named():
    from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl

    with pytest.raises(LayerValidationError, match="unexpected.*'sise'"):
        instantiate_layer(FullyConnectedLayerImpl, {'default': (3,)}, sise=3)


def test_describe_layers_lists_every_registered_layer():
    described = {d['type']: d for d in describe_layers()}
    registered = {e['layer_class'].get_type_name() for e in _collect()}
    assert registered <= set(described)
    fc = described['FullyConnected']
    assert fc['inputs'] == {'default': ('T', 'B', '...')}
    assert set(fc['kwargs']) == {'size', 'activation'}
    assert fc['kwargs']['activation']['default'] == 'rel'
    assert list(fc['parameters']) == ['W', 'bias']
    assert fc['summary']


def test_describe_layers_includes_user_defined_layers():
    from collections import OrderedDict

    from brainstorm.layers.attributes import FloatIn, Kwarg
    from brainstorm.layers.base_layer import Layer
    from brainstorm.structure.buffer_structure import StructureTemplate

    class ScaleByLayerImpl(Layer):
        """Multiply by a constant."""

        expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
        declared_kwargs = {
            'factor': Kwarg(FloatIn(), default=2.0, description='the constant')
        }

        def setup(self, kwargs, in_shapes):
            return (
                OrderedDict(default=in_shapes['default']),
                OrderedDict(),
                OrderedDict(),
            )

    described = {d['type']: d for d in describe_layers()}
    assert described['ScaleBy']['kwargs']['factor']['default'] == 2.0
    assert described['ScaleBy']['outputs'] == {'default': ('T', 'B', 3)}
