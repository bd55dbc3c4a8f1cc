"""Layer names: the rule the code applies is the rule the messages state."""

import pytest

import brainstorm as bs
from brainstorm.utils import NetworkValidationError, is_valid_layer_name


@pytest.mark.parametrize('name', ['名前', 'café', 'Ω1'])
def test_non_ascii_identifier_is_refused_with_the_real_rule(name):
    # a valid Python identifier, but not a layer name
    assert name.isidentifier()
    assert not is_valid_layer_name(name)
    with pytest.raises(NetworkValidationError) as info:
        bs.layers.FullyConnected(3, name=name)
    message = str(info.value)
    assert repr(name) in message
    assert 'ASCII identifier' in message
    assert 'Python identifier' not in message


def test_non_ascii_name_in_an_architecture_states_the_real_rule():
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    arch = dict(bs.Network.from_layer(inp >> out).architecture)
    arch['名前'] = {'@type': 'NoOp', '@outgoing_connections': {}}
    with pytest.raises(NetworkValidationError, match='ASCII identifier') as info:
        bs.Network.from_architecture(arch)
    assert 'Python identifier' not in str(info.value)


def test_non_ascii_layer_type_states_the_real_rule():
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    arch = dict(bs.Network.from_layer(inp >> out).architecture)
    arch['Extra'] = {'@type': 'Tÿpe', '@outgoing_connections': {}}
    with pytest.raises(NetworkValidationError, match='ASCII identifier'):
        bs.Network.from_architecture(arch)


@pytest.mark.parametrize('name', ['abc', '_x', 'Layer_2', 'A1b2'])
def test_ascii_identifiers_are_layer_names(name):
    assert is_valid_layer_name(name)
    assert bs.layers.FullyConnected(3, name=name)


@pytest.mark.parametrize('bad_key', [1, 5.0, None, ('a',)])
def test_architecture_with_a_non_str_layer_name_is_refused_clearly(bad_key):
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    arch = dict(bs.Network.from_layer(inp >> out).architecture)
    # the new key sorts after the others, so other layers are checked first
    arch = {(bad_key if k == 'Output' else k): v for k, v in arch.items()}
    with pytest.raises(NetworkValidationError) as info:
        bs.Network.from_architecture(arch)
    assert 'Layer names must be strings' in str(info.value)
    assert repr(bad_key) in str(info.value)
