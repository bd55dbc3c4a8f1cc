"""The layer registry: layer classes register themselves by name."""

from __future__ import annotations

import ast
import gc
import pathlib
import subprocess
import sys
from collections import OrderedDict

import pytest

from brainstorm import registry
from brainstorm.layers.base_layer import Layer, get_layer_class_from_typename
from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.layers.loss_layer import LossLayerImpl
from brainstorm.layers.lstm_layer import LstmLayerImpl
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.network import Network
from brainstorm.utils import NetworkValidationError

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_built_in_layers_are_registered_by_class_name():
    assert (
        registry.get_layer_class('FullyConnectedLayerImpl') is FullyConnectedLayerImpl
    )
    assert get_layer_class_from_typename('LossLayerImpl') is LossLayerImpl
    assert FullyConnectedLayerImpl in registry.layer_classes()


def test_unknown_type_raises_the_same_error_as_before():
    with pytest.raises(
        TypeError,
        match="Layer type 'NopeLayerImpl' is "
        'unknown. Built-in layers are in brainstorm.layers',
    ):
        registry.get_layer_class('NopeLayerImpl')
    arch = {
        'Input': {
            '@type': 'Input',
            '@outgoing_connections': ['X'],
            'out_shapes': {'default': ('T', 'B', 2)},
        },
        'X': {'@type': 'Nope', '@outgoing_connections': {}},
    }
    with pytest.raises(
        NetworkValidationError, match="Layer 'X': Layer type 'NopeLayerImpl' is unknown"
    ):
        Network.from_architecture(arch)


def test_loss_and_lstm_are_layer_attributes():
    assert LossLayerImpl.is_loss and not Layer.is_loss
    assert not FullyConnectedLayerImpl.is_loss
    assert LstmLayerImpl.has_lstm_gates and not Layer.has_lstm_gates


def _define_double_layer(marker):
    class DoubleLayerImpl(Layer):
        """A custom layer of a test: y = 2 x."""

        expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
        expected_kwargs: set = set()
        is_loss = marker

        def setup(self, kwargs, in_shapes):
            outputs = OrderedDict(
                default=BufferStructure('T', 'B', *in_shapes['default'].feature_shape)
            )
            return outputs, OrderedDict(), OrderedDict()

        def forward_pass(self, buffers, training_pass=True):
            self.handler.mult_st(2.0, buffers.inputs.default, buffers.outputs.default)

    return DoubleLayerImpl


def test_a_custom_layer_is_found_by_a_network_built_from_its_architecture():
    impl = _define_double_layer(False)
    assert registry.get_layer_class('DoubleLayerImpl') is impl
    arch = {
        'Input': {
            '@type': 'Input',
            '@outgoing_connections': ['D'],
            'out_shapes': {'default': ('T', 'B', 2)},
        },
        'D': {'@type': 'Double', '@outgoing_connections': {}},
    }
    net = Network.from_architecture(arch)
    assert isinstance(net.layers['D'], impl)
    # the class defined last wins; the registry does not keep dead classes
    newer = _define_double_layer(True)
    assert registry.get_layer_class('DoubleLayerImpl') is newer
    assert Network.from_architecture(arch).loss_layers == ['D']
    del impl, newer, net
    gc.collect()
    with pytest.raises(TypeError):
        registry.get_layer_class('DoubleLayerImpl')


def test_a_custom_layer_through_its_constructor():
    impl = _define_double_layer(False)
    inp = ConstructionWrapper.create(
        registry.get_layer_class('InputLayerImpl'),
        out_shapes={'default': ('T', 'B', 3)},
    )
    net = Network.from_layer(inp >> ConstructionWrapper.create(impl))
    assert type(net.layers['Double']) is impl


def test_structure_and_registry_never_import_layers():
    files = [
        ROOT / 'brainstorm' / 'registry.py',
        *sorted((ROOT / 'brainstorm' / 'structure').glob('*.py')),
    ]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f'{node.module}.{a.name}' for a in node.names]
            assert not any(
                n == 'brainstorm.layers' or n.startswith('brainstorm.layers.')
                for n in names
            ), (path, names)


def test_a_fresh_process_builds_from_an_architecture():
    """Importing only brainstorm.structure still registers the built-in
    layers (the package's __init__ imports them) before any lookup."""
    code = (
        'from brainstorm.structure.network import Network\n'
        "arch = {'Input': {'@type': 'Input', '@outgoing_connections': ['F'],"
        " 'out_shapes': {'default': ('T', 'B', 3)}},"
        " 'F': {'@type': 'FullyConnected', 'size': 2,"
        " '@outgoing_connections': {}}}\n"
        'print(list(Network.from_architecture(arch).layers))\n'
    )
    result = subprocess.run(
        [sys.executable, '-c', code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=True,
    )
    assert result.stdout.strip() == "['Input', 'F']"
