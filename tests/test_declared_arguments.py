"""Bad input for every declared constructor and entry point, generated from
the declarations (:mod:`brainstorm.arguments`), not listed by hand.

For every public class of the library with declared arguments, every
declared layer argument and every entry point declared with
``arguments.declare``:

* the declared example values build a valid object (the base case);
* each invalid example of each argument's check, given alone, raises the
  library's error family (a ``ValidationError``) naming the argument;
* an unknown keyword raises Python's own TypeError naming it;
* the object round-trips through ``get_description`` /
  ``create_from_description`` (through JSON), and a description with an
  unknown, private or dunder key, an invalid value for a declared
  attribute, or an ``@type`` of the wrong kind at any position is refused.

No case may end in another exception class, be silently accepted, hang or
crash (every case runs in-process within pytest's normal time).
"""

from __future__ import annotations

import copy
import inspect
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest

import brainstorm as bs

# import every module that defines Describables or declared entry points
import brainstorm.data_iterators  # noqa: F401, I001
import brainstorm.handlers  # noqa: F401
import brainstorm.handlers.debug_handler  # noqa: F401
import brainstorm.hooks  # noqa: F401
import brainstorm.initializers  # noqa: F401
import brainstorm.scorers  # noqa: F401
import brainstorm.tools  # noqa: F401
import brainstorm.training  # noqa: F401
import brainstorm.value_modifiers  # noqa: F401
from brainstorm import arguments, layers
from brainstorm.arguments import REQUIRED, declared_arguments
from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.handlers.onednn import (
    OneDnnHandler,
    OneDnnUnavailable,
    onednn_available,
)
from brainstorm.utils import DescriptionError, ValidationError, get_inheritors

# ------------------------------------------------------ valid base calls ---

# Arguments that must agree with each other (or with the data) where the
# declared examples alone would not; everything else comes from the
# declarations.
_INT_DATA = {'a': np.zeros((1, 2, 1))}
OVERRIDES = {
    'MultiHot': lambda: {
        'iter': bs.data_iterators.Undivided(**_INT_DATA),
        'vocab_size_dict': {'a': 3},
    },
    'OneHot': lambda: {
        'iter': bs.data_iterators.Undivided(**_INT_DATA),
        'vocab_size_dict': {'a': 3},
    },
    'Pad': lambda: {
        'iter': bs.data_iterators.Undivided(a=np.zeros((1, 2, 3, 3, 1))),
        'size_dict': {'a': 1},
    },
    'Shard': lambda: {
        'iter': bs.data_iterators.Undivided(a=np.zeros((1, 2, 1))),
        'rank': 0,
        'size': 1,
    },
    'Minibatches': lambda: {'a': np.zeros((1, 2, 1))},
    'Flip': lambda: {
        'iter': bs.data_iterators.Undivided(a=np.zeros((1, 2, 3, 3, 1))),
        'prob_dict': {'a': 0.5},
    },
    'Undivided': lambda: {'a': np.zeros((1, 2, 1))},
    'FromGenerator': lambda: {'batches': lambda: iter([{'a': np.zeros((1, 2, 1))}])},
    'ClipValues': lambda: {},
    'Uniform': lambda: {},
    'CosineWithWarmup': lambda: {'initial_value': 1.0, 'num_changes': 2},
    'MultiStep': lambda: {'initial_value': 1.0, 'steps': [1], 'values': [0.5]},
}

# Classes that cannot be built here (no GPU) or are abstract bases.
NOT_BUILT = {
    'PyCudaHandler',
    'Hook',
    'Scorer',
    'Schedule',
    'Initializer',
    'DataIterator',
    'TrainingStepper',
    'ValueModifier',
    'GradientModifier',
    'Handler',
    'Seedable',
    'Network',
}


def library_classes():
    """Public Describable classes of the library with declared arguments."""
    result = []
    for cls in get_inheritors(Describable):
        if not cls.__module__.startswith('brainstorm.'):
            continue
        if cls.__name__.startswith('_') or cls.__name__ in NOT_BUILT:
            continue
        if not declared_arguments(cls) and cls.__init__ is object.__init__:
            continue
        result.append(cls)
    return sorted(result, key=lambda c: c.__name__)


def constructor_arguments(cls) -> dict:
    """name -> Arg for the arguments ``cls(...)`` accepts."""
    parameters = inspect.signature(cls.__init__).parameters
    declared = declared_arguments(cls)
    result = {}
    for name, p in parameters.items():
        if p.kind is p.VAR_KEYWORD and '**' + name in declared:
            result['**'] = declared['**' + name]
        elif name in declared and not declared[name].state:
            result[name] = declared[name]
    return result


def base_kwargs(cls) -> dict:
    if cls.__name__ in OVERRIDES:
        return OVERRIDES[cls.__name__]()
    kwargs = {}
    for name, arg in constructor_arguments(cls).items():
        if name == '**':
            kwargs['a'] = arg.check.example
        elif arg.default is REQUIRED:
            kwargs[name] = arg.check.example
    return kwargs


# OneDnnHandler cannot be made where oneDNN does not load (other platforms,
# BRAINSTORM_NO_ONEDNN=1): it is left out there, see the test below
ONEDNN_LOADS = onednn_available()[0]
CLASSES = [
    c for c in library_classes() if ONEDNN_LOADS or c.__name__ != 'OneDnnHandler'
]

# Classes holding code (a function), which descriptions never hold: their
# description is refused (checked in tests/test_data_iterators.py).
NOT_DESCRIBED = {'FromGenerator'}
DESCRIBED = [c for c in CLASSES if c.__name__ not in NOT_DESCRIBED]


def _ids(value) -> str:
    # ids must be the same in every pytest-xdist worker: no addresses
    if isinstance(value, type) or inspect.isroutine(value):
        text = value.__name__
    elif type(value).__repr__ is object.__repr__:
        text = f'{type(value).__name__}()'
    else:
        text = repr(value)
    text = text.replace('\n', ' ')
    return text if len(text) < 30 else text[:27] + '...'


def assert_names(err, name):
    message = str(err)
    assert name in message, f'{name!r} not named in: {message}'


# ------------------------------------------------------- constructors -----


def constructor_cases():
    cases = []
    for cls in CLASSES:
        for name, arg in constructor_arguments(cls).items():
            for bad in arg.check.invalid_examples:
                if bad is None and arg.default is None:
                    continue  # None is the documented default
                cases.append(
                    pytest.param(
                        cls, name, bad, id=f'{cls.__name__}-{name}-{_ids(bad)}'
                    )
                )
    return cases


def test_the_suite_covers_every_public_declared_class():
    names = {c.__name__ for c in CLASSES}
    for expected in (
        'SaveBestNetwork',
        'MonitorScores',
        'ProgressBar',
        'Trainer',
        'Minibatches',
        'NumpyHandler',
        'AdamStepper',
        'Linear',
        'Gaussian',
        'ClipValues',
        'Accuracy',
        'DataParallel',
        'DebugHandler',
        'Shard',
        'MultiStepper',
    ):
        assert expected in names


@pytest.mark.skipif(ONEDNN_LOADS, reason='oneDNN loads: OneDnnHandler is checked')
def test_onednn_handler_is_left_out_only_where_it_cannot_be_made():
    assert OneDnnHandler not in CLASSES
    with pytest.raises(OneDnnUnavailable):
        OneDnnHandler()


@pytest.mark.parametrize('cls', CLASSES, ids=lambda c: c.__name__)
def test_declared_examples_build_a_valid_object(cls):
    obj = cls(**base_kwargs(cls))
    assert isinstance(obj, cls)


@pytest.mark.parametrize('cls, name, bad', constructor_cases())
def test_each_invalid_argument_is_refused_at_construction(cls, name, bad):
    kwargs = base_kwargs(cls)
    if name == '**':
        kwargs['a'] = bad
        shown = "'a'"
    else:
        kwargs[name] = bad
        shown = name
    with pytest.raises(ValidationError) as info:
        cls(**kwargs)
    assert_names(info.value, shown)
    assert cls.__name__ in str(info.value)


@pytest.mark.parametrize(
    'cls',
    [
        c
        for c in CLASSES
        if not any(
            p.kind is p.VAR_KEYWORD
            for p in inspect.signature(c.__init__).parameters.values()
        )
    ],
    ids=lambda c: c.__name__,
)
def test_unknown_keyword_is_pythons_type_error(cls):
    with pytest.raises(TypeError, match='no_such_argument'):
        cls(**base_kwargs(cls), no_such_argument=1)


# ------------------------------------------------------- descriptions -----


def _description(cls) -> dict:
    return json.loads(json.dumps(get_description(cls(**base_kwargs(cls)))))


@pytest.mark.parametrize('cls', DESCRIBED, ids=lambda c: c.__name__)
def test_every_describable_round_trips(cls):
    description = _description(cls)
    if not isinstance(description, dict):
        # ArrayInitializer describes itself as its array (as in 0.5)
        assert create_from_description(description) == description
        return
    restored = create_from_description(copy.deepcopy(description), expected=cls)
    assert type(restored) is cls
    assert json.loads(json.dumps(get_description(restored))) == description


def _described_args(cls, description):
    """key -> (argument name, Arg) for the keys of ``description``."""
    result = {}
    for name, arg in declared_arguments(cls).items():
        key = arg.attr or name
        if key in description and not arg.init_only:
            result[key] = (name, arg)
    return result


# A description of each kind of object, for wrong-@type cases.
def _kind_samples():
    return {
        'Hook': get_description(bs.hooks.StopAfterEpoch(1)),
        'Initializer': get_description(bs.initializers.Gaussian()),
        'ValueModifier': get_description(bs.value_modifiers.ClipValues()),
        'TrainingStepper': get_description(bs.training.SgdStepper()),
        'Schedule': get_description(bs.training.schedules.Linear(1, 0, 2)),
        'Scorer': get_description(bs.scorers.Accuracy()),
        'Handler': get_description(bs.handlers.NumpyHandler()),
        'DataIterator': get_description(
            bs.data_iterators.Undivided(a=np.zeros((1, 1, 1)))
        ),
        'Trainer': get_description(bs.Trainer(bs.training.SgdStepper())),
    }


def _is_kind(sample_type: str, kind) -> bool:
    from brainstorm.describable import _find_describable_class

    kinds = kind if isinstance(kind, tuple) else (kind,)
    return issubclass(_find_describable_class(sample_type), kinds)


def description_cases():
    cases = []
    samples = _kind_samples()
    for cls in DESCRIBED:
        description = _description(cls)
        if not isinstance(description, dict):
            continue  # described as a plain value (ArrayInitializer)
        label = cls.__name__
        for key, value in (
            ('no_such_key', 1),
            ('_private', 1),
            ('__class__', 'Trainer'),
            ('__dict__', {}),
        ):
            bad = dict(description, **{key: value})
            cases.append(pytest.param(bad, cls, key, id=f'{label}+{key}'))
        for key, (_name, arg) in _described_args(cls, description).items():
            for value in arg.check.invalid_examples:
                if value is None and arg.default is None:
                    continue
                try:
                    described = json.loads(json.dumps(get_description(value)))
                except TypeError:
                    continue  # not expressible in a file
                if _accepts(arg, value, described):
                    continue  # e.g. JSON made the int key 3 a str
                bad = dict(description, **{key: described})
                cases.append(
                    pytest.param(bad, cls, key, id=f'{label}.{key}={_ids(value)}')
                )
            # an @type of the wrong kind where this attribute stands
            kind = arg.check.kind
            for sample_type, sample in samples.items():
                if kind is not None and _is_kind(sample['@type'], kind):
                    continue
                bad = dict(description, **{key: sample})
                cases.append(
                    pytest.param(bad, cls, key, id=f'{label}.{key}=@{sample_type}')
                )
    return cases


def _accepts(arg, value, described) -> bool:
    """Whether the check accepts what the file would hold (a tuple becomes a
    list: that difference is not the check's business)."""
    try:
        arg.check.normalize(arg.check.restore(described))
        return True
    except (ValueError, TypeError, ValidationError):
        return False


@pytest.mark.parametrize('description, cls, key', description_cases())
def test_each_bad_description_is_refused(description, cls, key):
    with pytest.raises(ValidationError) as info:
        create_from_description(description)
    assert_names(info.value, key)


def test_a_description_of_the_wrong_kind_at_the_top_is_refused():
    hook = get_description(bs.hooks.StopAfterEpoch(1))
    with pytest.raises(DescriptionError, match='StopAfterEpoch.*Trainer'):
        create_from_description(hook, expected=bs.Trainer)


# --------------------------------------------------------- entry points ---


def _entry_points():
    from brainstorm.structure.network import Network
    from brainstorm.training.trainer import Trainer

    points = [
        bs.tools.get_in_out_layers,
        bs.tools.create_net_from_spec,
        bs.tools.shuffle_data,
        bs.tools.split,
        Network.initialize,
        Network.set_handler,
        Network.save_as_hdf5,
        Trainer.add_hook,
        Trainer.train,
        Trainer.evaluate,
        bs.tools.evaluate,
        bs.tools.extract,
        bs.tools.extract_and_save,
        bs.tools.get_network_info,
        bs.tools.print_network_info,
        bs.tools.draw_network,
    ]
    for point in points:
        assert hasattr(point, '__arguments__'), point
    return points


def _small_net():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    return bs.Network.from_layer(inp >> out)


# valid keyword arguments of the entry points that need no objects built
_PLAIN_ENTRIES = {
    'get_in_out_layers': {'task_type': 'classification', 'in_shape': 3, 'out_shape': 2},
    'create_net_from_spec': {
        'task_type': 'classification',
        'in_shape': 3,
        'out_shape': 2,
        'spec': 'F4',
    },
    'shuffle_data': {'seed': 1},
    'split': {'ratios': (1, 1)},
}


def _entry_base(point):
    """(callable, kwargs) of a valid call of ``point``."""
    name = point.__qualname__
    if name in _PLAIN_ENTRIES:
        return point, dict(_PLAIN_ENTRIES[name])
    if name == 'Network.initialize':
        net = _small_net()
        return net.initialize, {'default_or_init_dict': 0.1, 'seed': 1}
    if name == 'Network.set_handler':
        return _small_net().set_handler, {
            'new_handler': bs.handlers.NumpyHandler(np.float64)
        }
    if name == 'Network.save_as_hdf5':
        return _small_net().save_as_hdf5, {'filename': 'net.h5'}
    data = bs.data_iterators.Undivided(
        default=np.zeros((1, 2, 3)), targets=np.zeros((1, 2, 1))
    )
    if name in (
        'evaluate',
        'extract',
        'extract_and_save',
        'get_network_info',
        'print_network_info',
        'draw_network',
    ):
        net = _small_net()
        net.initialize(0.1)
        kwargs = {'network': net}
        if name in ('evaluate', 'extract', 'extract_and_save'):
            kwargs['iter'] = data
        if name.startswith('extract'):
            kwargs['buffer_names'] = 'Output.outputs.predictions'
        if name == 'extract_and_save':
            kwargs['file_name'] = 'out.h5'
        if name == 'evaluate':
            kwargs['scorers'] = [
                bs.scorers.Accuracy(out_name='Output.outputs.predictions')
            ]
        return point, kwargs
    trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
    if name == 'Trainer.add_hook':
        return trainer.add_hook, {'hook': bs.hooks.StopAfterEpoch(0)}
    net = _small_net()
    net.initialize(0.1)
    data = bs.data_iterators.Undivided(
        default=np.zeros((1, 2, 3)), targets=np.zeros((1, 2, 1))
    )
    trainer.add_hook(bs.hooks.StopAfterEpoch(0))
    if name == 'Trainer.train':
        return trainer.train, {'net': net, 'training_data_iter': data}
    return trainer.evaluate, {'net': net}


def entry_cases():
    cases = []
    for point in _entry_points():
        for name, arg in point.__arguments__.items():
            for bad in arg.check.invalid_examples:
                if bad is None and arg.default is None:
                    continue
                cases.append(
                    pytest.param(
                        point, name, bad, id=f'{point.__qualname__}-{name}-{_ids(bad)}'
                    )
                )
    return cases


@pytest.mark.parametrize(
    'point',
    [p for p in _entry_points() if p.__qualname__ != 'draw_network'],
    ids=lambda p: p.__qualname__,
)
def test_entry_point_base_call_works(point, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # save_as_hdf5, extract_and_save write here
    function, kwargs = _entry_base(point)
    function(**kwargs)


@pytest.mark.parametrize('point, name, bad', entry_cases())
def test_each_invalid_entry_point_argument_is_refused(
    point, name, bad, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    function, kwargs = _entry_base(point)
    if name.startswith('*'):
        with pytest.raises(ValidationError) as info:
            function(bad, **kwargs)
        assert_names(info.value, name.lstrip('*'))
        return
    kwargs[name] = bad
    with pytest.raises(ValidationError) as info:
        function(**kwargs)
    assert_names(info.value, name)
    assert point.__qualname__ in str(info.value)


# ---------------------------------------------------------------- layers ---


def layer_cases():
    from brainstorm.layers.base_layer import Layer

    cases = []
    for impl in sorted(get_inheritors(Layer), key=lambda c: c.__name__):
        if not impl.__module__.startswith('brainstorm.'):
            continue
        factory = getattr(layers, impl.get_type_name(), None)
        if factory is None:
            continue
        required = {
            p.name: impl.declared_kwargs[p.name].constraint.example
            for p in inspect.signature(factory).parameters.values()
            if p.default is p.empty and p.name in impl.declared_kwargs
        }
        for name, kwarg in impl.declared_kwargs.items():
            for bad in kwarg.constraint.invalid_examples:
                if bad is None and kwarg.default is None:
                    continue
                cases.append(
                    pytest.param(
                        factory,
                        dict(required, **{name: bad}),
                        name,
                        id=f'{impl.get_type_name()}-{name}-{_ids(bad)}',
                    )
                )
    return cases


@pytest.mark.parametrize('factory, kwargs, name', layer_cases())
def test_each_invalid_layer_argument_is_refused_by_the_factory(factory, kwargs, name):
    named = 'name' in inspect.signature(factory).parameters
    with pytest.raises(ValidationError) as info:
        if named:
            factory(**kwargs, name='Culprit')
        else:  # Input: always named 'Input'
            factory(**kwargs)
    assert_names(info.value, name)
    assert_names(info.value, "'Culprit'" if named else factory.__name__)


def test_the_generated_suite_has_at_least_1000_cases():
    total = (
        len(constructor_cases())
        + len(description_cases())
        + len(entry_cases())
        + len(layer_cases())
    )
    assert total >= 1000, total


# ---------------------------------------------- not a description at all ---


@pytest.mark.parametrize(
    'value',
    [os, (1, 2), {1, 2}, object(), b'x', np.zeros(2), 1j, {'a': (1,)}, [os]],
    ids=_ids,
)
def test_create_from_description_of_a_non_description_is_a_type_error(value):
    """Brainstorm 0.5 raised TypeError for values that are no description;
    the error is also in the library's family."""
    with pytest.raises(TypeError) as info:
        create_from_description(value)
    assert isinstance(info.value, ValidationError)


# ------------------------------------------- the examples of the reports ---


def _trainer():
    return bs.Trainer(bs.training.SgdStepper(), verbose=False)


REPORTED = [
    (
        'SaveBestNetwork-log_name',
        lambda: bs.hooks.SaveBestNetwork(log_name=5),
        'log_name',
    ),
    (
        'MonitorScores-scorers',
        lambda: bs.hooks.MonitorScores('v', scorers=5),
        'scorers',
    ),
    ('ProgressBar-file', lambda: bs.hooks.ProgressBar(file='x'), 'file'),
    ('Trainer-stepper-class', lambda: bs.Trainer(bs.training.SgdStepper), 'stepper'),
    ('add_hook-lambda', lambda: _trainer().add_hook(lambda *a: None), 'hook'),
    ('initialize-seed', lambda: _small_net().initialize(0.1, seed='x'), 'seed'),
    ('FullyConnected-huge', lambda: layers.FullyConnected(10**40), 'size'),
    (
        'in-out-same-names',
        lambda: bs.tools.get_in_out_layers(
            'classification', 3, 2, data_name='x', targets_name='x'
        ),
        'targets_name',
    ),
    ('in-out-bad-task', lambda: bs.tools.get_in_out_layers('nope', 3, 2), 'task_type'),
    (
        'Minibatches-shuffle',
        lambda: bs.data_iterators.Minibatches(shuffle='no', a=np.zeros((1, 2, 1))),
        'shuffle',
    ),
    ('Loss-importance', lambda: layers.Loss(importance=-1), 'importance'),
    ('ragged', lambda: bs.data_iterators.Undivided(a=[[[1.0]], [[1.0, 2.0]]]), "'a'"),
    (
        'masked',
        lambda: bs.data_iterators.Undivided(
            a=np.ma.masked_array(np.zeros((1, 2, 1)), mask=True)
        ),
        "'a'",
    ),
    ('handler-dtype-object', lambda: bs.handlers.NumpyHandler(object), 'dtype'),
    (
        'description-dtype-object',
        lambda: create_from_description({'@type': 'NumpyHandler', 'dtype': 'object'}),
        'dtype',
    ),
    (
        'description-timescale-day',
        lambda: create_from_description(
            {'@type': 'StopAfterEpoch', 'max_epochs': 3, 'timescale': 'day'}
        ),
        'timescale',
    ),
    (
        'description-interval-0',
        lambda: create_from_description(
            {'@type': 'StopAfterEpoch', 'max_epochs': 3, 'interval': 0}
        ),
        'interval',
    ),
    (
        'description-hook-as-modifier',
        lambda: create_from_description(
            {
                '@type': 'Network',
                'architecture': _small_net().architecture,
                'weight_modifiers': {
                    'default': get_description(bs.hooks.StopAfterEpoch(1))
                },
            }
        ),
        'StopAfterEpoch',
    ),
    (
        'description-trainer-as-handler',
        lambda: create_from_description(
            {
                '@type': 'Network',
                'architecture': _small_net().architecture,
                'handler': get_description(_trainer()),
            }
        ),
        'Trainer',
    ),
    (
        'description-trainer-as-hook',
        lambda: create_from_description(
            dict(
                get_description(_trainer()),
                hooks={'x': get_description(bs.training.SgdStepper())},
            )
        ),
        'SgdStepper',
    ),
]


@pytest.mark.parametrize(
    'action, culprit', [pytest.param(a, c, id=i) for i, a, c in REPORTED]
)
def test_reported_examples_are_refused_naming_the_argument(action, culprit):
    with pytest.raises(ValidationError) as info:
        action()
    assert_names(info.value, culprit)


def test_numpy_integers_are_accepted_as_sizes():
    inp, out = bs.tools.get_in_out_layers('classification', np.int64(3), np.int64(2))
    net = bs.Network.from_layer(inp >> out)
    assert net.layers['Input'].out_shapes['default'].feature_shape == (3,)


def test_architecture_entry_with_a_name_key_is_refused():
    arch = copy.deepcopy(_small_net().architecture)
    arch['Output']['name'] = 'other'
    with pytest.raises(ValidationError, match="'Output'.*name"):
        bs.Network.from_architecture(arch)


def test_declaration_listing_is_machine_readable():
    """The declarations say names, expected values and defaults."""
    declared = declared_arguments(bs.hooks.ReduceOnPlateau)
    assert declared['factor'].default == 0.1
    assert declared['factor'].check.expected == 'a finite number in (0, 1)'
    assert declared['name'].attr == '__name__'
    assert isinstance(declared['timescale'].check, arguments.Choice)
    assert declared['timescale'].check.choices == ('epoch', 'update')
    assert math.isclose(declared['factor'].check.example, 0.5)


def test_restoring_runs_in_a_fresh_process():
    """A checkpoint-style description with a bad hook is refused in a fresh
    process (no state from the test session)."""
    code = (
        'import brainstorm as bs\n'
        'from brainstorm.describable import create_from_description\n'
        'try:\n'
        "    create_from_description({'@type': 'Trainer', 'stepper': "
        "{'@type': 'SgdStepper'}, 'hooks': {'x': {'@type': 'Gaussian'}}})\n"
        'except bs.utils.ValidationError as err:\n'
        '    print(type(err).__name__, err)\n'
    )
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert 'DescriptionError' in result.stdout
    assert 'Gaussian' in result.stdout and 'hooks' in result.stdout


# ------------------------------------------ checks between the arguments ---

CROSS = [
    ({'@type': 'ClipValues', 'low': 2.0, 'high': 1.0}, 'low'),
    ({'@type': 'Uniform', 'low': 1.0, 'high': 0.5}, 'low'),
    ({'@type': 'Uniform', 'low': 1.0, 'high': None}, 'high'),
    (
        {
            '@type': 'Exponential',
            'initial_value': 1.0,
            'factor': 0.5,
            'minimum': 2.0,
            'maximum': 1.0,
        },
        'minimum',
    ),
    (
        {
            '@type': 'MultiStep',
            'initial_value': 1.0,
            'steps': [2, 1],
            'values': [0.5, 0.1],
        },
        'steps',
    ),
    (
        {
            '@type': 'MultiStep',
            'initial_value': 1.0,
            'steps': [1],
            'values': [0.5, 0.1],
        },
        'values',
    ),
    (
        {
            '@type': 'CosineWithWarmup',
            'initial_value': 1.0,
            'num_changes': 2,
            'warmup_changes': 2,
        },
        'warmup_changes',
    ),
    (
        {
            '@type': 'MultiStepper',
            'steppers': {
                'a': {
                    '@type': 'MultiStepper',
                    'steppers': {'b': {'@type': 'SgdStepper'}},
                }
            },
        },
        'MultiStepper',
    ),
]


@pytest.mark.parametrize(
    'description, culprit', CROSS, ids=[d['@type'] + '-' + c for d, c in CROSS]
)
def test_checks_between_arguments_also_run_when_restoring(description, culprit):
    with pytest.raises(ValidationError) as info:
        create_from_description(description)
    assert_names(info.value, culprit)


def test_shard_rank_beyond_size_is_refused_when_restoring():
    shard = bs.data_iterators.Shard(
        bs.data_iterators.Undivided(a=np.zeros((1, 2, 1))), rank=0, size=2
    )
    description = get_description(shard)
    description['rank'] = 2
    with pytest.raises(ValidationError, match='rank'):
        create_from_description(description)


# ------------------------------------------------------------- Network ---


def _network_description():
    net = _small_net()
    net.initialize({'default': bs.initializers.Gaussian(0.1)}, seed=1)
    net.set_weight_modifiers(
        {'Output_projection': bs.value_modifiers.ClipValues(-1, 1)}
    )
    net.set_gradient_modifiers(bs.value_modifiers.L2Decay(0.1))
    return json.loads(json.dumps(get_description(net)))


def test_network_description_round_trips():
    description = _network_description()
    net = create_from_description(copy.deepcopy(description), expected=bs.Network)
    assert json.loads(json.dumps(get_description(net))) == description


def network_cases():
    cases = []
    expected = {
        'handler': 'Handler',
        'initializers': 'Initializer',
        'weight_modifiers': 'ValueModifier',
        'gradient_modifiers': 'ValueModifier',
    }
    for key, kind in expected.items():
        for sample_type, sample in _kind_samples().items():
            if sample_type == kind:
                continue
            value = sample if key == 'handler' else {'default': sample}
            cases.append(
                pytest.param(key, value, sample['@type'], id=f'{key}=@{sample_type}')
            )
    cases.append(pytest.param('no_such_key', 1, 'no_such_key', id='unknown-key'))
    cases.append(pytest.param('__class__', 'x', '__class__', id='dunder'))
    cases.append(pytest.param('output_name', 5, 'output_name', id='output_name=5'))
    cases.append(pytest.param('handler', 'NumpyHandler', 'handler', id='handler=str'))
    return cases


@pytest.mark.parametrize('key, value, culprit', network_cases())
def test_bad_network_descriptions_are_refused(key, value, culprit):
    description = _network_description()
    description[key] = value
    with pytest.raises(ValidationError) as info:
        create_from_description(description)
    assert_names(info.value, culprit)


def test_one_dimensional_arrays_pass_where_lists_go():
    it = bs.data_iterators.Minibatches(
        cut_according_to=np.array([1, 1]), shuffle=False, a=np.zeros((1, 2, 1))
    )
    assert list(it.seq_lens) == [1, 1]
    schedule = bs.training.schedules.MultiStep(
        1.0, np.array([1, 2]), np.array([0.5, 0.1])
    )
    assert schedule.steps == [1, 2]


def test_a_masked_array_fed_to_a_network_is_refused():
    """Its mask would be dropped silently."""
    net = _small_net()
    net.initialize(0.1)
    data = {
        'default': np.ma.masked_array(np.zeros((1, 2, 3)), mask=True),
        'targets': np.zeros((1, 2, 1)),
    }
    with pytest.raises(ValidationError, match="'default'.*masked"):
        net.provide_external_data(data)
