"""Brainstorm 0.5 code runs unchanged: run_network, module paths,
exception classes, validate_architecture and the training namespace."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Undivided
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    combine_buffer_structures,
)
from brainstorm.training import schedules, steppers
from brainstorm.training.utils import run_network
from tests.training.nets import xor_data, xor_net


def _outputs_for(net, batches):
    outs = []
    for _ in run_network(net, batches):
        net.forward_pass()
        outs.append(np.array(net.get('Output.outputs.predictions')))
    return outs


@pytest.mark.parametrize('kind', ['iterator', 'called', 'list'])
def test_run_network_accepts_iterators_and_iterables(kind):
    """0.5's run_network(net, iterator) looped over any iterable of data
    dicts: a called iterator or a plain list of batches worked, not only
    a DataIterator (ours called it, so those raised TypeError)."""
    net = xor_net()
    data = xor_data()
    expected = _outputs_for(net, Undivided(**data))
    batches = {
        'iterator': Undivided(**data),
        'called': Undivided(**data)(handler=net.handler),
        'list': [data],
    }[kind]
    got = _outputs_for(net, batches)
    assert len(got) == 1
    np.testing.assert_array_equal(got[0], expected[0])


OLD_MODULES = {
    'brainstorm.layers.convolution_layer_2d': 'Convolution2DLayerImpl',
    'brainstorm.layers.batch_normalization_layer': 'BatchNormLayerImpl',
    'brainstorm.layers.pooling_layer_2d': 'Pooling2DLayerImpl',
    'brainstorm.layers.l1_decay': 'L1DecayLayerImpl',
    'brainstorm.layers.l2_decay': 'L2DecayLayerImpl',
}


def test_05_module_paths_import_in_a_fresh_process():
    """0.5 custom-layer files import built-in layers from these module
    paths and subclass them; the paths must import in a fresh interpreter
    and give the very same classes (so the subclass is a real layer)."""
    code = textwrap.dedent("""
        import importlib
        import brainstorm as bs
        import brainstorm.structure.view_references as vr
        assert vr.pattern_matches('Hid*', 'Hid2')
        mods = MODS_PLACEHOLDER
        for path, impl in mods.items():
            m = importlib.import_module(path)
            cls = getattr(m, impl)
            assert issubclass(cls, bs.layers.Layer), path
        from brainstorm.layers.convolution_layer_2d import (
            Convolution2DLayerImpl)
        from brainstorm.layers.convolution_2d_layer import (
            Convolution2DLayerImpl as New)
        assert Convolution2DLayerImpl is New

        class MyConvLayerImpl(Convolution2DLayerImpl):
            pass
        print('ok')
    """).replace('MODS_PLACEHOLDER', repr(OLD_MODULES))
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == 'ok'


def test_shape_mismatch_is_caught_by_except_value_error():
    """0.5 raised ValueError for combine_buffer_structures with mismatched
    shapes; `except ValueError` in 0.5 code must still catch ours."""
    a = BufferStructure('T', 'B', 3)
    b = BufferStructure('B', 3)
    with pytest.raises(ValueError):
        combine_buffer_structures([a, b])


def test_mismatched_inputs_are_caught_by_except_value_error():
    """0.5 raised ValueError when connecting layers with incompatible
    shapes (here a 3-d and a 5-d output into one input)."""
    inp = bs.layers.Input(out_shapes={'a': ('T', 'B', 3), 'b': ('T', 'B', 2, 2, 1)})
    fc = bs.layers.FullyConnected(2, name='Out')
    inp - 'a' >> fc
    inp - 'b' >> fc
    with pytest.raises(ValueError, match='Out'):
        bs.Network.from_layer(inp)
    try:
        bs.layers.FullyConnected(-3)
    except ValueError as err:
        assert '-3' in str(err)
    else:
        pytest.fail('a negative size was accepted')


def test_undescribable_value_raises_type_error():
    """0.5's get_description raised TypeError for undescribable values."""
    with pytest.raises(TypeError):
        bs.get_description(object())


def test_validate_architecture_returns_true():
    """0.5's validate_architecture returned True for a valid architecture."""
    from brainstorm.structure.architecture import validate_architecture

    arch = bs.generate_architecture(
        bs.layers.Input(out_shapes={'default': ('T', 'B', 2)})
        >> bs.layers.FullyConnected(2, name='Out')
    )
    assert validate_architecture(arch) is True


def test_every_stepper_and_schedule_is_exported_from_training():
    """Every public stepper and schedule class is in bs.training."""
    for module in (steppers, schedules):
        for name in module.__all__:
            assert getattr(bs.training, name) is getattr(module, name)
            assert name in bs.training.__all__
