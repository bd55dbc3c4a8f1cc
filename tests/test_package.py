"""The package's namespaces (SPEC section 1)."""

import numpy as np
import pytest

import brainstorm as bs


def test_top_level_namespace_is_exactly_the_spec():
    assert set(bs.__all__) == {
        'get_description',
        'create_from_description',
        'global_rnd',
        'Network',
        'generate_architecture',
        'Trainer',
        'initializers',
        'data_iterators',
        'value_modifiers',
        'tools',
        'hooks',
        'layers',
        'handlers',
        'training',
        'scorers',
        'datasets',
        '__version__',
    }
    assert bs.__version__ == '1.0.0'
    for name in bs.__all__:
        assert hasattr(bs, name), name


def test_names_imported_on_first_use_are_listed_and_found():
    import h5py

    import brainstorm.structure.network as network

    assert {'datasets', 'Network', 'utils'} <= set(dir(bs))
    assert bs.datasets.load_digits is not None
    with pytest.raises(AttributeError, match="'brainstorm' has no attribute 'x'"):
        _ = bs.x
    # Brainstorm 0.5's modules held h5py: still there, imported when asked for
    for module in [bs.hooks, bs.tools, network]:
        assert module.h5py is h5py
        with pytest.raises(AttributeError, match=f"'{module.__name__}' has no attr"):
            _ = module.x


def test_all_module_ends_with_value_modifiers():
    import brainstorm.all as everything
    from brainstorm import value_modifiers

    assert everything.L1Decay is value_modifiers.L1Decay
    assert everything.L2Decay is value_modifiers.L2Decay
    assert everything.FullyConnected is bs.layers.FullyConnected
    assert everything.Trainer is bs.Trainer


def test_handlers_namespace():
    from brainstorm.handlers import DebugHandler, NumpyHandler, default_handler

    assert 'DebugHandler' not in bs.handlers.__all__
    assert isinstance(default_handler, NumpyHandler)
    assert np.dtype(default_handler.dtype) == np.float32
    assert DebugHandler


def test_training_exports():
    expected = {
        'Trainer',
        'SgdStepper',
        'MomentumStepper',
        'NesterovStepper',
        'Linear',
        'Exponential',
        'MultiStep',
    }
    assert expected <= set(bs.training.__all__)
    from brainstorm.training.schedules import DecreaseAfterEpoch
    from brainstorm.training.steppers import ForwardStepper, TrainingStepper

    assert DecreaseAfterEpoch and ForwardStepper and TrainingStepper


def test_optional_mock_reraises_the_import_error():
    import pytest

    from brainstorm.optional import MissingDependencyMock

    mock = MissingDependencyMock(ImportError('install me'))
    with pytest.raises(ImportError, match='install me'):
        _ = mock.anything
    with pytest.raises(ImportError, match='install me'):
        mock()


def test_optional_mock_survives_introspection():
    import inspect

    from brainstorm.optional import MissingDependencyMock

    mock = MissingDependencyMock(ImportError('install me'))
    assert not hasattr(mock, '__wrapped__')
    assert inspect.unwrap(mock) is mock
