"""One declaration language, each bound and default written once (issue 23).

* the rules: a declared constructor argument takes its default from the
  signature (:func:`brainstorm.arguments.resolve_defaults`),
  ``Arg(omit_default=True)`` leaves the default out of descriptions,
  :func:`brainstorm.arguments.check_attributes` re-checks the declared
  attributes' current values, and a layer may declare with a plain ``Arg``;
* the meta-tests walk every class of the library: no declaration repeats
  its signature's default, no ``__default_values__`` repeats a declared
  argument, no stepper re-states its bounds in a check of its own, and no
  module calls the hand-written number checks the declarations replaced;
* the descriptions are those the library wrote before (pinned below).
"""

from __future__ import annotations

import ast
import inspect
import json
import pathlib

import numpy as np
import pytest

import brainstorm as bs

# import every module that defines Describables
import brainstorm.data_iterators  # noqa: F401, I001
import brainstorm.handlers  # noqa: F401
import brainstorm.hooks  # noqa: F401
import brainstorm.initializers  # noqa: F401
import brainstorm.scorers  # noqa: F401
import brainstorm.training  # noqa: F401
import brainstorm.value_modifiers  # noqa: F401
from brainstorm.arguments import (
    REQUIRED,
    Arg,
    Int,
    Optional,
    Real,
    check_attributes,
    declare,
    declared_arguments,
    resolve_defaults,
)
from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.layers import attributes
from brainstorm.training.steppers import TrainingStepper
from brainstorm.utils import (
    DescriptionError,
    LayerValidationError,
    TrainingValidationError,
    ValidationError,
    get_inheritors,
)

ROOT = pathlib.Path(bs.__file__).resolve().parent

# ----------------------------------------------------------------- rules ---


class Rate(Describable):
    __arguments__ = {
        'rate': Arg(Real(0), omit_default=True),
        'steps': Arg(Int(1)),
        'label': Arg(Optional(Real())),
        'count': Arg(Int(0), default=0, state=True),
    }

    def __init__(self, steps, rate=0.5, label=None):
        self.steps, self.rate, self.label = steps, rate, label
        self.count = 0


def test_a_constructor_argument_takes_its_default_from_the_signature():
    declared = declared_arguments(Rate)
    assert declared['rate'].default == 0.5
    assert declared['rate'].default_from_signature
    assert declared['label'].default is None
    assert declared['steps'].default is REQUIRED  # no default in the signature
    assert declared['count'].default == 0  # state: declared, not a parameter
    assert not declared['count'].default_from_signature


def test_resolving_copies_the_declarations():
    arg = Arg(Real())
    resolved = resolve_defaults({'x': arg}, lambda x=2.0: x)
    assert resolved['x'].default == 2.0 and resolved['x'] is not arg
    assert arg.default is REQUIRED


def test_a_default_declared_anyway_is_kept():
    # the attribute's value where the constructor stores another one
    resolved = resolve_defaults({'x': Arg(Real(), default=[])}, lambda x=(): x)
    assert resolved['x'].default == []


def test_none_passes_where_the_signature_default_is_none():
    Rate(2, label=None)
    with pytest.raises(TrainingValidationError, match=r'Rate: rate must be'):
        Rate(2, rate=None)


def test_a_declared_function_takes_its_defaults_from_its_signature():
    @declare(ValidationError, rate=Arg(Real(0)), label=Arg(Real()))
    def step(rate=0.1, label=None):
        return rate, label

    assert step.__arguments__['rate'].default == 0.1
    assert step(label=None) == (0.1, None)
    with pytest.raises(ValidationError, match=r'step: rate must be'):
        step(rate=-1)


def test_omit_default_leaves_the_default_out_and_restores_it():
    assert get_description(Rate(3)) == {
        '@type': 'Rate',
        'steps': 3,
        'label': None,  # no omit_default: described as before
        'count': 0,
    }
    assert get_description(Rate(3, rate=0.25))['rate'] == 0.25
    restored = create_from_description({'@type': 'Rate', 'steps': 3})
    assert restored.rate == 0.5


def test_check_attributes_checks_the_values_held_now():
    rate = Rate(2)
    check_attributes(rate)
    rate.count = -5  # declared state: not an argument, not checked here
    check_attributes(rate)
    rate.rate = -1.0
    with pytest.raises(
        TrainingValidationError,
        match=r'^Rate: rate must be a finite number >= 0\. Received: rate=-1\.0$',
    ):
        check_attributes(rate)
    del rate.rate  # an attribute the object does not hold is skipped
    check_attributes(rate)


# ----------------------------------------------------- layer declarations ---


def test_the_layer_declarations_are_arguments_declarations():
    assert attributes.REQUIRED is REQUIRED
    kwarg = attributes.Kwarg(attributes.FloatIn(0, 1), 0.5, 'a share')
    assert isinstance(kwarg, Arg)
    assert (kwarg.constraint, kwarg.description) == (kwarg.check, kwarg.doc)
    assert isinstance(attributes.FloatIn(0, 1), Real)
    assert isinstance(attributes.PositiveInt(), Int)
    assert isinstance(attributes.NonNegativeInt(), Int)
    assert attributes.Constraint is bs.arguments.Check
    # the layers' wording stays
    assert attributes.FloatIn(0, 1, include_high=False).expected == (
        'a float in [0, 1)'
    )
    assert attributes.Number().expected == 'a finite float'
    # an infinite bound is never accepted: no closed bracket for it
    # (Loss(importance=inf) was refused as not 'a float in [0, inf]')
    assert attributes.FloatIn(0).expected == 'a float in [0, inf)'
    assert attributes.FloatIn(high=1).expected == 'a float in (-inf, 1]'
    assert attributes.PositiveInt().expected == 'a positive int'


def _leaky_layer_class(declaration):
    from collections import OrderedDict

    from brainstorm.layers.base_layer import Layer
    from brainstorm.structure.buffer_structure import (
        BufferStructure,
        StructureTemplate,
    )

    class DeclaredLeakyLayerImpl(Layer):
        expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
        declared_kwargs = {'slope': declaration}

        def setup(self, kwargs, in_shapes):
            self.slope = kwargs['slope']
            shape = in_shapes['default'].feature_shape
            return (
                OrderedDict(default=BufferStructure('T', 'B', *shape)),
                OrderedDict(),
                OrderedDict(),
            )

    return DeclaredLeakyLayerImpl


@pytest.mark.parametrize(
    'declaration',
    [
        Arg(Real(0, 1), default=0.01, doc='gradient for negative inputs'),
        attributes.Kwarg(attributes.FloatIn(0, 1), 0.01, 'gradient'),
    ],
    ids=['Arg', 'Kwarg'],
)
def test_a_layer_argument_declared_with_arg_is_checked(declaration):
    impl = _leaky_layer_class(declaration)
    assert impl.check_kwargs('Leaky', {}) == {'slope': 0.01}
    assert impl.check_kwargs('Leaky', {'slope': 1}) == {'slope': 1.0}
    with pytest.raises(LayerValidationError) as info:
        impl.check_kwargs('Leaky', {'slope': 2.0})
    message = str(info.value)
    assert message.startswith("DeclaredLeaky 'Leaky': slope must be a ")
    assert message.endswith('in [0, 1]. Received: slope=2.0')
    from brainstorm.layers.base_layer import describe_layers

    (entry,) = [e for e in describe_layers() if e['type'] == 'DeclaredLeaky']
    listing = entry['kwargs']['slope']
    assert listing['default'] == 0.01 and listing['required'] is False


# ------------------------------------------------------------ meta-tests ---


def _library_classes():
    classes = [
        cls
        for cls in get_inheritors(Describable)
        if cls.__module__.startswith('brainstorm.')
    ]
    return sorted(classes, key=lambda c: (c.__module__, c.__name__))


def _repeated_defaults(cls) -> list:
    """The declared defaults of ``cls`` written a second time."""
    repeated = []
    own = cls.__dict__.get('__arguments__', {})
    parameters = inspect.signature(cls.__init__).parameters
    for name, arg in own.items():
        parameter = parameters.get(name)
        if (
            parameter is not None
            and not arg.state
            and parameter.default is not parameter.empty
            and not arg.default_from_signature
        ):
            repeated.append(f'{name}: Arg(default=) and the signature')
    declared_attrs = {arg.attr or name for name, arg in declared_arguments(cls).items()}
    for name in cls.__dict__.get('__default_values__', {}):
        if name in declared_attrs:
            repeated.append(f'{name}: __default_values__ and the declaration')
    return repeated


def test_no_default_is_written_twice():
    checked = 0
    problems = {}
    for cls in _library_classes():
        checked += 1
        repeated = _repeated_defaults(cls)
        if repeated:
            problems[f'{cls.__module__}.{cls.__name__}'] = repeated
    assert not problems, problems
    assert checked > 60


def test_no_layer_argument_repeats_its_constructor_functions_default():
    import sys

    from brainstorm.registry import layer_classes

    checked = 0
    problems = []
    for cls in layer_classes():
        if not cls.__module__.startswith('brainstorm.'):
            continue
        factory = getattr(sys.modules[cls.__module__], cls.get_type_name())
        parameters = inspect.signature(factory).parameters
        for name, arg in cls.declared_kwargs.items():
            parameter = parameters.get(name)
            if parameter is None or parameter.default is parameter.empty:
                continue  # e.g. size: required by the function, None here
            checked += 1
            if not arg.default_from_signature:
                problems.append(f'{cls.__name__}.{name}')
            assert arg.default == parameter.default, (cls, name)
    assert not problems, problems
    assert checked >= 15


def test_a_layer_argument_takes_its_default_from_the_constructor_function():
    dropout = bs.layers.dropout_layer.DropoutLayerImpl
    assert dropout.declared_kwargs['drop_prob'].default == 0.5
    assert dropout.check_kwargs('D', {}) == {'drop_prob': 0.5}
    # where the function requires what the layer may decide, both stay
    size = bs.layers.fully_connected_layer.FullyConnectedLayerImpl
    assert size.declared_kwargs['size'].default is None
    lstm = bs.layers.lstm_layer.LstmLayerImpl.declared_kwargs['size']
    assert lstm.default is None and not lstm.default_from_signature


def test_a_layer_defined_in_a_snippet_finds_its_constructor_function():
    namespace = {'__name__': 'a_snippet'}
    code = (
        'from brainstorm.arguments import Arg, Real\n'
        'from brainstorm.layers.base_layer import Layer\n'
        'def Snippety(rate=0.25, name=None):\n'
        '    pass\n'
        'class SnippetyLayerImpl(Layer):\n'
        "    declared_kwargs = {'rate': Arg(Real(0, 1))}\n"
    )
    exec(compile(code, 'snippet', 'exec'), namespace)
    impl = namespace['SnippetyLayerImpl']
    assert impl.declared_kwargs['rate'].default == 0.25
    assert impl.check_kwargs('S', {}) == {'rate': 0.25}


def test_a_layer_run_in_globals_without_a_name_finds_its_constructor_function():
    """Sphinx's doctest runs snippets in a dict without ``__name__``: the
    class's module is then 'builtins', no frame's globals carried its
    name, and the default stayed REQUIRED (docs/custom_layer.rst's
    snippet failed there)."""
    namespace: dict = {}
    code = (
        'from brainstorm.arguments import Arg, Real\n'
        'from brainstorm.layers.base_layer import Layer\n'
        'def Nameless(rate=0.25, name=None):\n'
        '    pass\n'
        'class NamelessLayerImpl(Layer):\n'
        "    declared_kwargs = {'rate': Arg(Real(0, 1))}\n"
        '    def setup(self, kwargs, in_shapes):\n'
        '        pass\n'
    )
    exec(compile(code, 'snippet', 'exec'), namespace)
    impl = namespace['NamelessLayerImpl']
    assert impl.declared_kwargs['rate'].default == 0.25
    assert impl.check_kwargs('N', {}) == {'rate': 0.25}


def _traced(function):
    """A decorator of another module than the layer's (this test module)."""
    import functools

    @functools.wraps(function)
    def wrapper(*args, **kwargs):
        return function(*args, **kwargs)

    return wrapper


def test_a_decorated_method_does_not_hide_the_constructor_function():
    """The wrapper's globals are its own module's: the function defined in
    the class body (unwrapped) says where the layer is defined."""
    namespace: dict = {'traced': _traced}
    code = (
        'from brainstorm.arguments import Arg, Real\n'
        'from brainstorm.layers.base_layer import Layer\n'
        'def Traced(rate=0.75, name=None):\n'
        '    pass\n'
        'class TracedLayerImpl(Layer):\n'
        "    declared_kwargs = {'rate': Arg(Real(0, 1))}\n"
        '    @traced\n'
        '    def setup(self, kwargs, in_shapes):\n'
        '        pass\n'
    )
    exec(compile(code, 'snippet', 'exec'), namespace)
    assert namespace['TracedLayerImpl'].declared_kwargs['rate'].default == 0.75


def test_no_stepper_states_its_bounds_a_second_time():
    # the declared checks run again before each step (check_attributes);
    # a stepper of the library adds no check of its own
    steppers = [
        cls
        for cls in get_inheritors(TrainingStepper)
        if cls.__module__.startswith('brainstorm.')
    ]
    assert len(steppers) >= 8
    for cls in steppers:
        assert '_check_hyperparameters' not in cls.__dict__ or (
            cls is TrainingStepper
        ), cls


# The number checks that each family wrote by hand before it declared its
# arguments; a call to one of them re-checks what a declaration checks.
HAND_WRITTEN = {
    'check_number',
    'check_int',
    '_check_number',
    '_check_numbers',
    '_check_criterion',
    '_check_iterator',
    '_check_positive_int',
    '_check_sub_initializer',
    '_check_learning_rate',
    '_check_momentum',
    '_check_vocabulary_sizes',
}


def test_no_module_calls_a_hand_written_argument_check():
    calls = []
    for path in sorted(ROOT.rglob('*.py')):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                func = node.func
                name = func.id if isinstance(func, ast.Name) else None
                if isinstance(func, ast.Attribute):
                    name = func.attr
                if name in HAND_WRITTEN:
                    calls.append(f'{path.relative_to(ROOT)}:{node.lineno} {name}')
    assert not calls, calls


# -------------------------------------------- checks at each stepper step ---


def _runnable_steppers():
    return [
        bs.training.SgdStepper,
        bs.training.MomentumStepper,
        bs.training.NesterovStepper,
        bs.training.RMSPropStepper,
        bs.training.AdamStepper,
        bs.training.AdamWStepper,
    ]


def _stepper_cases():
    cases = []
    for cls in _runnable_steppers():
        for name, arg in declared_arguments(cls).items():
            for bad in arg.check.invalid_examples:
                if bad is None and arg.default is None:
                    continue
                cases.append(
                    pytest.param(cls, name, bad, id=f'{cls.__name__}-{name}-{bad!r}')
                )
    return cases


@pytest.mark.parametrize('cls, name, bad', _stepper_cases())
def test_a_hyperparameter_made_invalid_later_is_refused_at_the_next_step(
    cls, name, bad
):
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.1)
    stepper = cls()
    stepper.start(net)
    net.provide_external_data(
        {'default': np.ones((1, 2, 2)), 'targets': np.ones((1, 2, 1))}
    )
    before = net.get('parameters')
    setattr(stepper, name, bad)
    with pytest.raises(TrainingValidationError) as info:
        stepper.run()
    message = str(info.value)
    assert message.startswith(f'{cls.__name__}: {name} must be '), message
    assert 'Received' in message
    np.testing.assert_array_equal(net.get('parameters'), before)


# ------------------------------------ what the hand checks caught, declared ---


def test_data_parallel_with_a_timeout_round_trips():
    # timeout was described but not declared: its description was refused
    stepper = bs.training.DataParallel(bs.training.SgdStepper(), timeout=30)
    description = json.loads(json.dumps(get_description(stepper)))
    assert description['timeout'] == 30.0
    assert create_from_description(description).timeout == 30.0
    with pytest.raises(DescriptionError, match='unknown key'):
        create_from_description({**description, 'timeot': 1})
    with pytest.raises(
        TrainingValidationError,
        match=r'DataParallel \(from a description\): timeout must be None or a',
    ):
        create_from_description({**description, 'timeout': -1})
    assert 'timeout' not in get_description(
        bs.training.DataParallel(bs.training.SgdStepper())
    )


def test_a_restored_echo_state_needs_a_positive_radius():
    # the constructor refused 0 by hand; the declaration allowed it
    with pytest.raises(ValidationError, match=r'spectral_radius must be .*> 0'):
        create_from_description({'@type': 'EchoState', 'spectral_radius': 0})


@pytest.mark.parametrize('hook', ['SavePlot', 'BokehVisualizer'])
def test_a_restored_plot_hook_needs_a_log_name(hook):
    description = {'@type': hook, 'filename': 'a.png', 'log_names': []}
    with pytest.raises(TrainingValidationError, match=r'log_names must be'):
        create_from_description(description)
    with pytest.raises(TrainingValidationError, match=r'log_names must be'):
        getattr(bs.hooks, hook)(log_names=[], filename='a.png')


# ------------------------------------------ descriptions stay as they were ---

# get_description() of these objects as the library wrote them before the
# declarations changed (commit a4b864c, run there), seeds left out.
MADE = {
    'EarlyStopper': lambda: bs.hooks.EarlyStopper('validation.total_loss'),
    'EarlyStopper_update': lambda: bs.hooks.EarlyStopper(
        'a', timescale='update', interval=3, verbose=True
    ),
    'ProgressBar': lambda: bs.hooks.ProgressBar(),
    'ProgressBar_force': lambda: bs.hooks.ProgressBar(force=True),
    'StopAfterEpoch': lambda: bs.hooks.StopAfterEpoch(3),
    'ReduceOnPlateau': lambda: bs.hooks.ReduceOnPlateau('a'),
    'StopOnNan': lambda: bs.hooks.StopOnNan(),
    'SaveBestNetwork': lambda: bs.hooks.SaveBestNetwork('a'),
    'Sgd': lambda: bs.training.SgdStepper(),
    'Sgd_clip': lambda: bs.training.SgdStepper(clip_norm=2.0),
    'Adam': lambda: bs.training.AdamStepper(),
    'Momentum': lambda: bs.training.MomentumStepper(),
    'DataParallel': lambda: bs.training.DataParallel(bs.training.SgdStepper()),
    'DataParallel_nf': lambda: bs.training.DataParallel(
        bs.training.SgdStepper(), check_finite=False
    ),
    'Exponential': lambda: bs.training.schedules.Exponential(1.0, 0.5),
    'Exponential_b': lambda: bs.training.schedules.Exponential(
        1.0, 0.5, minimum=0.1, maximum=2
    ),
    'Cosine': lambda: bs.training.schedules.CosineWithWarmup(1.0, 10),
    'Cosine_w': lambda: bs.training.schedules.CosineWithWarmup(1.0, 10, 0.1, 2, 0.5),
    'Linear': lambda: bs.training.schedules.Linear(1, 0, 3),
    'MultiStep': lambda: bs.training.schedules.MultiStep(1.0, [1, 2], [0.5, 0.25]),
    'Gaussian': lambda: bs.initializers.Gaussian(),
    'Uniform': lambda: bs.initializers.Uniform(0.3),
    'DenseSqrtFanIn': lambda: bs.initializers.DenseSqrtFanIn(),
    'LstmOptInit': lambda: bs.initializers.LstmOptInit(),
    'ModifyStepperAttribute': lambda: bs.hooks.ModifyStepperAttribute(
        bs.training.schedules.Linear(1, 0, 3)
    ),
}

BEFORE = {
    'Adam': {
        '@type': 'AdamStepper',
        'beta1': 0.9,
        'beta2': 0.999,
        'epsilon': 1e-08,
        'learning_rate': 0.001,
    },
    'Cosine': {'@type': 'CosineWithWarmup', 'initial_value': 1.0, 'num_changes': 10},
    'Cosine_w': {
        '@type': 'CosineWithWarmup',
        'final_value': 0.1,
        'initial_value': 1.0,
        'num_changes': 10,
        'warmup_changes': 2,
        'warmup_start': 0.5,
    },
    'DataParallel': {
        '@type': 'DataParallel',
        'stepper': {'@type': 'SgdStepper', 'learning_rate': 0.1},
    },
    'DataParallel_nf': {
        '@type': 'DataParallel',
        'check_finite': False,
        'stepper': {'@type': 'SgdStepper', 'learning_rate': 0.1},
    },
    'DenseSqrtFanIn': {'@type': 'DenseSqrtFanIn', 'scale': 'rel'},
    'EarlyStopper': {
        '@type': 'EarlyStopper',
        '__name__': 'EarlyStopper',
        'criterion': 'min',
        'log_name': 'validation.total_loss',
        'patience': 1,
        'priority': 0,
    },
    'EarlyStopper_update': {
        '@type': 'EarlyStopper',
        '__name__': 'EarlyStopper',
        'criterion': 'min',
        'interval': 3,
        'log_name': 'a',
        'patience': 1,
        'priority': 0,
        'timescale': 'update',
        'verbose': True,
    },
    'Exponential': {'@type': 'Exponential', 'factor': 0.5, 'initial_value': 1.0},
    'Exponential_b': {
        '@type': 'Exponential',
        'factor': 0.5,
        'initial_value': 1.0,
        'maximum': 2.0,
        'minimum': 0.1,
    },
    'Gaussian': {'@type': 'Gaussian', 'mean': 0.0, 'std': 0.1},
    'Linear': {
        '@type': 'Linear',
        'final_value': 0.0,
        'initial_value': 1.0,
        'num_changes': 3,
    },
    'LstmOptInit': {
        '@type': 'LstmOptInit',
        'forget_gate': 0.0,
        'input_block': 0.0,
        'input_gate': 0.0,
        'output_gate': 0.0,
    },
    'ModifyStepperAttribute': {
        '@type': 'ModifyStepperAttribute',
        '__name__': 'ModifyStepperAttribute',
        'attr_name': 'learning_rate',
        'priority': 0,
        'schedule': {
            '@type': 'Linear',
            'final_value': 0.0,
            'initial_value': 1.0,
            'num_changes': 3,
        },
    },
    'Momentum': {
        '@type': 'MomentumStepper',
        'learning_rate': 0.1,
        'momentum': 0.0,
        'scale_learning_rate': True,
    },
    'MultiStep': {
        '@type': 'MultiStep',
        'initial_value': 1.0,
        'steps': [1, 2],
        'values': [0.5, 0.25],
    },
    'ProgressBar': {
        '@type': 'ProgressBar',
        '__name__': 'ProgressBar',
        'priority': 0,
        'timescale': 'update',
    },
    'ProgressBar_force': {
        '@type': 'ProgressBar',
        '__name__': 'ProgressBar',
        'force': True,
        'priority': 0,
        'timescale': 'update',
    },
    'ReduceOnPlateau': {
        '@type': 'ReduceOnPlateau',
        '__name__': 'ReduceOnPlateau',
        'attr_name': 'learning_rate',
        'criterion': 'min',
        'factor': 0.1,
        'log_name': 'a',
        'minimum': 0.0,
        'patience': 5,
        'priority': 0,
    },
    'SaveBestNetwork': {
        '@type': 'SaveBestNetwork',
        '__name__': 'SaveBestNetwork',
        'criterion': 'max',
        'filename': None,
        'log_name': 'a',
        'priority': 0,
    },
    'Sgd': {'@type': 'SgdStepper', 'learning_rate': 0.1},
    'Sgd_clip': {'@type': 'SgdStepper', 'clip_norm': 2.0, 'learning_rate': 0.1},
    'StopAfterEpoch': {
        '@type': 'StopAfterEpoch',
        '__name__': 'StopAfterEpoch',
        'max_epochs': 3,
        'priority': 0,
    },
    'StopOnNan': {
        '@type': 'StopOnNan',
        '__name__': 'StopOnNan',
        'check_parameters': True,
        'check_training_loss': True,
        'logs_to_check': [],
        'priority': 0,
    },
    'Uniform': {'@type': 'Uniform', 'high': 0.3, 'low': -0.3},
}


@pytest.mark.parametrize('name', sorted(MADE))
def test_descriptions_are_those_written_before(name):
    description = get_description(MADE[name]())
    description.pop('seed', None)
    assert json.loads(json.dumps(description)) == BEFORE[name]
    restored = create_from_description(description)
    again = get_description(restored)
    again.pop('seed', None)
    assert again == description
