"""The hooks package: the names of the former module brainstorm/hooks.py
stay importable, every hook is exported and lives in the module of its
concern, the descriptions of the hooks that module had stay as it wrote
them, and the attribute the trainer recognises checkpoint hooks by.

Adding a built-in hook needs no edit here except its place in
``CONCERNS``; its description round trip is covered in tests/test_hooks.py
(``ALL_HOOKS``)."""

import importlib
import types

import pytest

import brainstorm.hooks as hooks
from brainstorm.describable import create_from_description, get_description
from brainstorm.scorers import Accuracy
from brainstorm.training.schedules import Linear

# every public name that brainstorm/hooks.py defined before it became a
# package (its __all__, check_restored_path and LOGS_FILE_FORMAT): each
# stays importable from brainstorm.hooks. A fixed record of that module,
# not a list of today's hooks.
NAMES_KEPT_FROM_HOOKS_PY = [
    'BokehVisualizer',
    'EarlyStopper',
    'Hook',
    'InfoUpdater',
    'LOGS_FILE_FORMAT',
    'ModifyStepperAttribute',
    'MonitorLayerDeltas',
    'MonitorLayerGradients',
    'MonitorLayerInOuts',
    'MonitorLayerParameters',
    'MonitorLoss',
    'MonitorScores',
    'ProgressBar',
    'ReduceOnPlateau',
    'SaveBestNetwork',
    'SaveCheckpoint',
    'SaveLogs',
    'SaveLogsCSV',
    'SaveNetwork',
    'SavePlot',
    'StopAfterEpoch',
    'StopAfterThresholdReached',
    'StopOnNan',
    'StopOnSigQuit',
    'check_restored_path',
]


# the arguments of the hooks of brainstorm/hooks.py for
# DESCRIPTIONS_OF_HOOKS_PY
CASES = {
    'Hook': dict(name='h', timescale='update', interval=3, verbose=True),
    'SaveBestNetwork': dict(
        log_name='validation.Accuracy',
        filename='best.hdf5',
        criterion='min',
        interval=2,
    ),
    'SaveLogs': dict(filename='logs.hdf5', timescale='update'),
    'SaveNetwork': dict(filename='net.hdf5', interval=5),
    'SaveCheckpoint': dict(filename='run.ckpt', name='ckpt'),
    'SaveLogsCSV': dict(filename='logs.csv', log_names='validation.total_loss'),
    'SavePlot': dict(filename='p.png', log_names=['a.b', 'c']),
    'BokehVisualizer': dict(log_names='a.b', filename='b.html', verbose=False),
    'InfoUpdater': dict(run=types.SimpleNamespace(info={}), name='info'),
    'MonitorLoss': dict(iter_name='valid', name='validation'),
    'MonitorScores': dict(iter_name='valid', scorers=[Accuracy()], name='validation'),
    'MonitorLayerParameters': dict(layer_name='Hid1'),
    'MonitorLayerGradients': dict(layer_name='Hid1', timescale='update'),
    'MonitorLayerInOuts': dict(layer_name='Hid1', name='io'),
    'MonitorLayerDeltas': dict(layer_name='Out', interval=4),
    'EarlyStopper': dict(log_name='validation.total_loss', patience=3, criterion='max'),
    'StopAfterEpoch': dict(max_epochs=7),
    'StopAfterThresholdReached': dict(
        log_name='validation.Accuracy', threshold=0.9, criterion='max'
    ),
    'StopOnNan': dict(logs_to_check=['a', 'b'], check_parameters=False),
    'StopOnSigQuit': dict(verbose=True),
    'ProgressBar': dict(force=True),
    'ModifyStepperAttribute': dict(
        schedule=Linear(1.0, 0.0, 10), attr_name='momentum', timescale='update'
    ),
    'ReduceOnPlateau': dict(
        log_name='validation.total_loss', factor=0.5, patience=2, minimum=1e-4
    ),
}


# the descriptions brainstorm/hooks.py gave the hooks of CASES; they are
# stored in checkpoints and network files, so they stay as they were
DESCRIPTIONS_OF_HOOKS_PY = {
    'Hook': {
        'timescale': 'update',
        'interval': 3,
        '__name__': 'h',
        'priority': 0,
        'verbose': True,
        '@type': 'Hook',
    },
    'SaveBestNetwork': {
        'interval': 2,
        '__name__': 'SaveBestNetwork',
        'priority': 0,
        'log_name': 'validation.Accuracy',
        'filename': 'best.hdf5',
        'criterion': 'min',
        '@type': 'SaveBestNetwork',
    },
    'SaveLogs': {
        'timescale': 'update',
        '__name__': 'SaveLogs',
        'priority': 0,
        'filename': 'logs.hdf5',
        '@type': 'SaveLogs',
    },
    'SaveNetwork': {
        'interval': 5,
        '__name__': 'SaveNetwork',
        'priority': 0,
        'filename': 'net.hdf5',
        '@type': 'SaveNetwork',
    },
    'SaveCheckpoint': {
        '__name__': 'ckpt',
        'priority': 0,
        'filename': 'run.ckpt',
        '@type': 'SaveCheckpoint',
    },
    'SaveLogsCSV': {
        '__name__': 'SaveLogsCSV',
        'priority': 0,
        'filename': 'logs.csv',
        'log_names': ['validation.total_loss'],
        '@type': 'SaveLogsCSV',
    },
    'SavePlot': {
        '__name__': 'SavePlot',
        'priority': 0,
        'filename': 'p.png',
        'log_names': ['a.b', 'c'],
        '@type': 'SavePlot',
    },
    'BokehVisualizer': {
        '__name__': 'BokehVisualizer',
        'priority': 0,
        'verbose': False,
        'log_names': ['a.b'],
        'filename': 'b.html',
        '@type': 'BokehVisualizer',
    },
    'InfoUpdater': {'__name__': 'info', 'priority': 0, '@type': 'InfoUpdater'},
    'MonitorLoss': {
        '__name__': 'validation',
        'priority': 0,
        'iter_name': 'valid',
        '@type': 'MonitorLoss',
    },
    'MonitorScores': {
        '__name__': 'validation',
        'priority': 0,
        'iter_name': 'valid',
        'scorers': [
            {
                'out_name': '',
                'targets_name': 'targets',
                'mask_name': '',
                '__name__': 'Accuracy',
                '@type': 'Accuracy',
            }
        ],
        '@type': 'MonitorScores',
    },
    'MonitorLayerParameters': {
        '__name__': 'MonitorParameters_Hid1',
        'priority': 0,
        'layer_name': 'Hid1',
        '@type': 'MonitorLayerParameters',
    },
    'MonitorLayerGradients': {
        'timescale': 'update',
        '__name__': 'MonitorGradients_Hid1',
        'priority': 0,
        'layer_name': 'Hid1',
        '@type': 'MonitorLayerGradients',
    },
    'MonitorLayerInOuts': {
        '__name__': 'io',
        'priority': 0,
        'layer_name': 'Hid1',
        '@type': 'MonitorLayerInOuts',
    },
    'MonitorLayerDeltas': {
        'interval': 4,
        '__name__': 'MonitorDeltas_Out',
        'priority': 0,
        'layer_name': 'Out',
        '@type': 'MonitorLayerDeltas',
    },
    'EarlyStopper': {
        '__name__': 'EarlyStopper',
        'priority': 0,
        'log_name': 'validation.total_loss',
        'patience': 3,
        'criterion': 'max',
        '@type': 'EarlyStopper',
    },
    'StopAfterEpoch': {
        '__name__': 'StopAfterEpoch',
        'priority': 0,
        'max_epochs': 7,
        '@type': 'StopAfterEpoch',
    },
    'StopAfterThresholdReached': {
        '__name__': 'StopAfterThresholdReached',
        'priority': 0,
        'log_name': 'validation.Accuracy',
        'threshold': 0.9,
        'criterion': 'max',
        '@type': 'StopAfterThresholdReached',
    },
    'StopOnNan': {
        '__name__': 'StopOnNan',
        'priority': 0,
        'logs_to_check': ['a', 'b'],
        'check_parameters': False,
        'check_training_loss': True,
        '@type': 'StopOnNan',
    },
    'StopOnSigQuit': {
        '__name__': 'StopOnSigQuit',
        'priority': 0,
        'verbose': True,
        '@type': 'StopOnSigQuit',
    },
    'ProgressBar': {
        'timescale': 'update',
        '__name__': 'ProgressBar',
        'priority': 0,
        'force': True,
        '@type': 'ProgressBar',
    },
    'ModifyStepperAttribute': {
        'timescale': 'update',
        '__name__': 'ModifyStepperAttribute',
        'priority': 0,
        'schedule': {
            'initial_value': 1.0,
            'final_value': 0.0,
            'num_changes': 10,
            '@type': 'Linear',
        },
        'attr_name': 'momentum',
        '@type': 'ModifyStepperAttribute',
    },
    'ReduceOnPlateau': {
        '__name__': 'ReduceOnPlateau',
        'priority': 0,
        'log_name': 'validation.total_loss',
        'attr_name': 'learning_rate',
        'factor': 0.5,
        'patience': 2,
        'minimum': 0.0001,
        'criterion': 'min',
        '@type': 'ReduceOnPlateau',
    },
}

CONCERNS = {
    'base': ['Hook'],
    'monitoring': [
        'MonitorLoss',
        'MonitorScores',
        'MonitorLayerParameters',
        'MonitorLayerGradients',
        'MonitorLayerInOuts',
        'MonitorLayerDeltas',
        'InfoUpdater',
    ],
    'saving': [
        'SaveBestNetwork',
        'SaveLogs',
        'SaveNetwork',
        'SaveCheckpoint',
        'SaveLogsCSV',
    ],
    'stopping': [
        'EarlyStopper',
        'StopAfterEpoch',
        'StopAfterThresholdReached',
        'StopOnNan',
        'StopOnSigQuit',
    ],
    'schedules': ['ModifyStepperAttribute', 'ReduceOnPlateau'],
    'display': ['ProgressBar', 'SavePlot', 'BokehVisualizer'],
    'tensorboard': ['SaveLogsTensorBoard'],
}


@pytest.mark.parametrize('name', NAMES_KEPT_FROM_HOOKS_PY)
def test_every_name_of_hooks_py_is_imported_from_brainstorm_hooks(name):
    namespace = {}
    exec(f'from brainstorm.hooks import {name}', namespace)
    assert namespace[name] is getattr(hooks, name)


def test_the_star_import_still_gives_the_all_of_hooks_py():
    namespace = {}
    exec('from brainstorm.hooks import *', namespace)
    former_all = set(NAMES_KEPT_FROM_HOOKS_PY) - {
        'check_restored_path',
        'LOGS_FILE_FORMAT',
    }
    assert former_all <= set(hooks.__all__)
    assert set(hooks.__all__) <= set(namespace)
    assert hooks.LOGS_FILE_FORMAT == b'Logs file v1.0'


def public_hook_classes() -> dict:
    """Name -> class of each public Hook subclass defined in the modules
    of the package, found by looking (no list to keep up to date)."""
    found = {}
    for module_name in CONCERNS:
        module = importlib.import_module(f'brainstorm.hooks.{module_name}')
        for name, value in vars(module).items():
            if (
                isinstance(value, type)
                and issubclass(value, hooks.Hook)
                and value.__module__ == module.__name__
                and not name.startswith('_')
            ):
                found[name] = value
    return found


def test_all_is_every_public_hook_and_nothing_else():
    """A new hook defined in one of the modules is exported, and no
    helper is."""
    defined = public_hook_classes()
    assert sorted(hooks.__all__) == sorted(defined)
    for name, klass in defined.items():
        assert getattr(hooks, name) is klass


def test_each_hook_lives_in_the_module_of_its_concern():
    placed = [name for names in CONCERNS.values() for name in names]
    assert sorted(placed) == sorted(hooks.__all__)
    for module_name, names in CONCERNS.items():
        module = importlib.import_module(f'brainstorm.hooks.{module_name}')
        for name in names:
            assert getattr(hooks, name).__module__ == module.__name__
            assert getattr(module, name) is getattr(hooks, name)


def test_the_cases_are_the_hooks_of_hooks_py():
    assert set(CASES) == set(DESCRIPTIONS_OF_HOOKS_PY)
    kept = set(NAMES_KEPT_FROM_HOOKS_PY) - {'check_restored_path', 'LOGS_FILE_FORMAT'}
    assert set(CASES) == kept


@pytest.mark.parametrize('name', sorted(CASES))
def test_descriptions_stay_as_the_module_wrote_them(name):
    hook = getattr(hooks, name)(**CASES[name])
    assert get_description(hook) == DESCRIPTIONS_OF_HOOKS_PY[name]


@pytest.mark.parametrize('name', sorted(CASES))
def test_descriptions_round_trip(name):
    hook = getattr(hooks, name)(**CASES[name])
    recreated = create_from_description(get_description(hook))
    assert type(recreated) is type(hook)
    assert get_description(recreated) == DESCRIPTIONS_OF_HOOKS_PY[name]


def test_only_save_checkpoint_writes_checkpoints():
    assert hooks.Hook.writes_checkpoint is False
    assert hooks.SaveCheckpoint.writes_checkpoint is True
    for name, klass in public_hook_classes().items():
        assert klass.writes_checkpoint is (name == 'SaveCheckpoint'), name
    for name, kwargs in CASES.items():
        hook = getattr(hooks, name)(**kwargs)
        assert hook.writes_checkpoint is (name == 'SaveCheckpoint'), name
        # a class attribute: not part of the description
        assert 'writes_checkpoint' not in get_description(hook)


def test_states_round_trip_through_the_new_modules():
    hook = hooks.ReduceOnPlateau('validation.total_loss', patience=0)
    hook._best, hook._bad_checks, hook._seen = 0.5, 1, 3
    other = create_from_description(get_description(hook))
    other.set_state(hook.get_state())
    assert (other._best, other._bad_checks, other._seen) == (0.5, 1, 3)
