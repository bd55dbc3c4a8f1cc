"""The one import line of a custom layer (brainstorm.layers.authoring)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

import brainstorm.layers.authoring as authoring
from brainstorm import errors, shapes
from brainstorm.layers import attributes, base_layer
from brainstorm.structure import buffer_structure, construction

#: what must stay unloaded when a layer's file is imported
HEAVY = ['h5py', 'brainstorm.datasets']


def modules_loaded_by(statement: str) -> dict:
    """Which of HEAVY are in sys.modules after ``statement``, in a fresh process."""
    code = textwrap.dedent(f"""
        import sys
        {statement}
        print(' '.join(name for name in {HEAVY!r} if name in sys.modules))
    """)
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return {name: name in result.stdout.split() for name in HEAVY}


@pytest.mark.parametrize(
    'statement',
    [
        'import brainstorm.layers.base_layer',
        'from brainstorm.layers.authoring import Layer, flatten_time',
        'import brainstorm',
    ],
)
def test_importing_a_layers_dependencies_loads_neither_h5py_nor_datasets(statement):
    assert modules_loaded_by(statement) == {name: False for name in HEAVY}


def test_the_check_sees_h5py_where_it_is_loaded():
    # the same check reports the modules once something does load them
    assert modules_loaded_by('import brainstorm as bs; bs.datasets') == {
        name: True for name in HEAVY
    }


def test_every_name_is_the_object_of_its_home():
    homes = {
        'Layer': base_layer,
        'StructureTemplate': buffer_structure,
        'BufferStructure': buffer_structure,
        'ConstructionWrapper': construction,
        'Kwarg': attributes,
        'REQUIRED': attributes,
        'LayerValidationError': errors,
        'flatten_time': shapes,
        'flatten_time_and_features': shapes,
        'flatten_features': shapes,
        'flatten_all_but_last': shapes,
        'reshape_view': shapes,
    }
    assert set(homes) <= set(authoring.__all__)
    for name, home in homes.items():
        assert getattr(authoring, name) is getattr(home, name), name
    for name in authoring.__all__:
        assert hasattr(authoring, name), name


def test_a_layer_written_with_the_one_import_passes_the_layer_tests():
    from brainstorm.testing import (
        get_test_configurations,
        instantiate_layer,
        run_layer_tests,
    )

    namespace: dict = {}
    exec(
        textwrap.dedent("""
        from collections import OrderedDict

        from brainstorm.layers.authoring import (
            BufferStructure, Kwarg, Layer, LayerValidationError, OneOf,
            StructureTemplate, flatten_time_and_features)


        class TwiceLayerImpl(Layer):
            expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
            declared_kwargs = {
                'factor': Kwarg(OneOf(2.0, 3.0), default=2.0,
                                description='the factor'),
            }

            def setup(self, kwargs, in_shapes):
                if in_shapes['default'].feature_size > 100:
                    raise LayerValidationError('too many features')
                self.factor = kwargs['factor']
                shape = in_shapes['default'].feature_shape
                return (OrderedDict(default=BufferStructure('T', 'B', *shape)),
                        OrderedDict(), OrderedDict())

            def forward_pass(self, buffers, training_pass=True):
                x = flatten_time_and_features(buffers.inputs.default)
                y = flatten_time_and_features(buffers.outputs.default)
                self.handler.mult_st(self.factor, x, y)

            def backward_pass(self, buffers):
                dx = flatten_time_and_features(buffers.input_deltas.default)
                dy = flatten_time_and_features(buffers.output_deltas.default)
                self.handler.mult_add_st(self.factor, dy, dx)
        """),
        namespace,
    )
    layer_class = namespace['TwiceLayerImpl']
    for spec in get_test_configurations():
        layer = instantiate_layer(layer_class, {'default': (2, 3)}, factor=3.0)
        run_layer_tests(layer, spec)
    with pytest.raises(errors.LayerValidationError, match='too many features'):
        instantiate_layer(layer_class, {'default': (101,)})
