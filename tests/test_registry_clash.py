"""Layer classes sharing a name: the class defined last is found, with a
warning where it displaces a live class defined elsewhere."""

from __future__ import annotations

import gc
import importlib
import sys
import warnings
import weakref

import pytest

import brainstorm as bs
from brainstorm.layers.base_layer import Layer
from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.registry import get_layer_class, is_registered
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.network import Network

BUILTIN = 'brainstorm.layers.fully_connected_layer.FullyConnectedLayerImpl'

# a user's copy of FullyConnected without a bias, named like the built-in
SHADOW_CODE = """
from collections import OrderedDict
from brainstorm.layers.authoring import (
    BufferStructure, ConstructionWrapper, Layer, StructureTemplate)


def FullyConnected(size, activation='rel', name=None):
    return ConstructionWrapper.create(FullyConnectedLayerImpl, name=name,
                                      size=size, activation=activation)


class FullyConnectedLayerImpl(Layer):
    expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
    expected_kwargs = {'size', 'activation'}

    def setup(self, kwargs, in_shapes):
        n_in = in_shapes['default'].feature_size
        return (OrderedDict(default=BufferStructure('T', 'B', kwargs['size'])),
                OrderedDict(W=BufferStructure(kwargs['size'], n_in)),
                OrderedDict())
"""

CLASHY_CODE = """
from collections import OrderedDict
from brainstorm.layers.authoring import BufferStructure, Layer, StructureTemplate


class ClashyLayerImpl(Layer):
    expected_inputs = {'default': StructureTemplate('T', 'B', '...')}

    def setup(self, kwargs, in_shapes):
        shape = in_shapes['default'].shape
        return OrderedDict(default=BufferStructure(*shape)), {}, {}
"""


def _run_module(code: str, module: str) -> dict:
    """Run ``code`` as the module ``module`` would run (class statements
    included); its namespace."""
    namespace = {'__name__': module}
    exec(compile(code, f'{module}.py', 'exec'), namespace)
    return namespace


@pytest.fixture
def collect_after():
    """Every class of a test is gone after it: the built-ins are found."""
    yield
    gc.collect()
    assert get_layer_class('FullyConnectedLayerImpl') is FullyConnectedLayerImpl
    with pytest.raises(TypeError):
        get_layer_class('ClashyLayerImpl')


def _only(record) -> str:
    assert [w.category for w in record] == [UserWarning], [
        str(w.message) for w in record
    ]
    return str(record[0].message)


def test_a_user_class_named_like_a_builtin_warns_naming_both(collect_after):
    with pytest.warns(UserWarning) as record:
        namespace = _run_module(SHADOW_CODE, 'user_layers')
    message = _only(record)
    shadow = namespace['FullyConnectedLayerImpl']
    # what displaces what, and which one networks build from now
    assert "Layer class user_layers.FullyConnectedLayerImpl replaces brainstorm's" in (
        message
    )
    assert f'built-in {BUILTIN}' in message
    assert (
        "networks build every 'FullyConnected' layer from "
        'user_layers.FullyConnectedLayerImpl' in message
    )
    assert 'brainstorm.layers.FullyConnected(...)' in message
    assert "'MyFullyConnectedLayerImpl'" in message
    # it points at the user's class statement
    assert record[0].filename == 'user_layers.py'
    lines = SHADOW_CODE.splitlines()
    assert lines[record[0].lineno - 1] == 'class FullyConnectedLayerImpl(Layer):'
    # the class defined last is still the one found (as documented)
    assert get_layer_class('FullyConnectedLayerImpl') is shadow
    del namespace, shadow


def test_a_class_displacing_another_users_class_warns(collect_after):
    first = _run_module(CLASHY_CODE, 'first_layers')
    with pytest.warns(UserWarning) as record:
        second = _run_module(CLASHY_CODE, 'second_layers')
    message = _only(record)
    assert 'Layer class second_layers.ClashyLayerImpl displaces ' in message
    assert 'first_layers.ClashyLayerImpl, a live layer class of the same name' in (
        message
    )
    assert (
        "networks build every 'Clashy' layer from second_layers.ClashyLayerImpl"
        in message
    )
    assert 'built-in' not in message
    arch = {
        'Input': {
            '@type': 'Input',
            '@outgoing_connections': ['C'],
            'out_shapes': {'default': ('T', 'B', 2)},
        },
        'C': {'@type': 'Clashy', '@outgoing_connections': {}},
    }
    assert (
        type(Network.from_architecture(arch).layers['C']) is (second['ClashyLayerImpl'])
    )
    del first, second


def test_defining_a_class_again_in_the_same_place_is_silent(collect_after):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        old = _run_module(CLASHY_CODE, 'notebook_cell')
        new = _run_module(CLASHY_CODE, 'notebook_cell')  # the cell, re-run
    assert get_layer_class('ClashyLayerImpl') is new['ClashyLayerImpl']
    del old, new


def test_reloading_a_module_is_silent(tmp_path, monkeypatch, collect_after):
    (tmp_path / 'reloaded_layers.py').write_text(CLASHY_CODE)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        module = importlib.import_module('reloaded_layers')
        old = module.ClashyLayerImpl
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            importlib.reload(module)
        assert get_layer_class('ClashyLayerImpl') is module.ClashyLayerImpl
        assert module.ClashyLayerImpl is not old
    finally:
        sys.modules.pop('reloaded_layers', None)
    del module, old


def _define_first():
    class ClashyLayerImpl(Layer):
        pass

    return weakref.ref(ClashyLayerImpl)


def _define_second():
    class ClashyLayerImpl(Layer):
        pass

    return ClashyLayerImpl


def test_a_dead_class_not_yet_collected_is_not_warned_about(collect_after):
    """A class defined in a function lives on (in reference cycles) after
    the function returned, until the cycle collector runs."""
    gc.disable()
    try:
        first = _define_first()
        assert first() is not None  # dead, but not collected yet
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            second = _define_second()
    finally:
        gc.enable()
    assert get_layer_class('ClashyLayerImpl') is second
    del second


def test_create_with_a_displaced_builtin_warns(collect_after):
    with pytest.warns(UserWarning):
        namespace = _run_module(SHADOW_CODE, 'user_layers')
    shadow = namespace['FullyConnectedLayerImpl']
    with pytest.warns(UserWarning) as record:
        layer = bs.layers.FullyConnected(5, name='Hid')
    message = _only(record)
    # what it was given, and the class networks build from instead
    assert f'ConstructionWrapper.create got layer class {BUILTIN}' in message
    assert (
        "networks build every 'FullyConnected' layer from "
        'user_layers.FullyConnectedLayerImpl, the class of that name defined '
        'last' in message
    )
    # it points at the user's call, not at brainstorm's constructor
    assert record[0].filename == __file__
    inp = ConstructionWrapper.create(
        get_layer_class('InputLayerImpl'), out_shapes={'default': ('T', 'B', 3)}
    )
    assert type(Network.from_layer(inp >> layer).layers['Hid']) is shadow
    # the class networks build from: no warning
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        namespace['FullyConnected'](5, name='Mine')
    del namespace, shadow


def test_create_with_an_older_definition_of_the_same_class_warns(collect_after):
    old = _run_module(CLASHY_CODE, 'notebook_cell')['ClashyLayerImpl']
    new = _run_module(CLASHY_CODE, 'notebook_cell')['ClashyLayerImpl']
    assert is_registered(old) and is_registered(new)
    with pytest.warns(UserWarning) as record:
        ConstructionWrapper.create(old, name='C')
    message = _only(record)
    assert (
        'ConstructionWrapper.create got an older definition of '
        'notebook_cell.ClashyLayerImpl' in message
    )
    assert (
        "networks build every 'Clashy' layer from notebook_cell.ClashyLayerImpl, "
        'its newest definition' in message
    )
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        ConstructionWrapper.create(new, name='C')
    del old, new
