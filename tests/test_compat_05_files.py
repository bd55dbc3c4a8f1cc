"""Files and descriptions written by Brainstorm 0.5 load and mean what they
meant there.

The inputs are built here as 0.5 wrote them (network files: the
description as a variable-length ASCII string dataset, string attributes,
no checksums, gzip parameters; descriptions: every attribute its objects
had); the expected results follow 0.5's formulas, computed in NumPy.
"""

import json
import math

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.arguments import Arg, Int
from brainstorm.data_iterators import (
    AddGaussianNoise,
    AddSaltNPepper,
    Pad,
    Undivided,
)
from brainstorm.describable import create_from_description, get_description
from brainstorm.errors import (
    DescriptionError,
    InitializationError,
    NetworkValidationError,
    TrainingValidationError,
)
from brainstorm.hooks import (
    MonitorLoss,
    MonitorScores,
    ProgressBar,
    SaveBestNetwork,
    StopAfterEpoch,
)
from brainstorm.initializers import (
    Gaussian,
    Initializer,
    LstmOptInit,
    evaluate_initializer,
)
from brainstorm.structure.network import Network
from brainstorm.training import MultiStep, Trainer

# ------------------------------------------------------------ helpers ---


def _write_05_network_file(path, description: dict, parameters) -> None:
    """A network file laid out as Brainstorm 0.5's ``save_as_hdf5`` wrote it."""
    text = h5py.string_dtype('ascii')
    with h5py.File(path, 'w') as f:
        f.attrs.create('info', 'Created with brainstorm 0.5', dtype=text)
        f.attrs.create('format', 'Network file v1.0', dtype=text)
        f.create_dataset(
            'description', data=json.dumps(description).encode(), dtype=text
        )
        f.create_dataset(
            'parameters',
            data=np.asarray(parameters, dtype=np.float32),
            compression='gzip',
        )


def _bn_description(initializers=None) -> dict:
    """0.5's description of Input(2) >> F(3) >> BatchNorm >> SoftmaxCE(2)."""
    return {
        'architecture': {
            'Output': {
                '@type': 'SoftmaxCE',
                '@outgoing_connections': {'loss': ['Loss.default']},
            },
            'Output_projection': {
                '@type': 'FullyConnected',
                '@outgoing_connections': {'default': ['Output.default']},
                'size': [2],
                'activation': 'linear',
            },
            'BN': {
                '@type': 'BatchNorm',
                '@outgoing_connections': {'default': ['Output_projection.default']},
                'decay': 0.9,
                'epsilon': 1e-05,
            },
            'Loss': {
                '@type': 'Loss',
                '@outgoing_connections': {},
                'importance': 1.0,
            },
            'Input': {
                '@type': 'Input',
                '@outgoing_connections': {
                    'targets': ['Output.targets'],
                    'default': ['F.default'],
                },
                'out_shapes': {'default': ['T', 'B', 2], 'targets': ['T', 'B', 1]},
            },
            'F': {
                '@type': 'FullyConnected',
                '@outgoing_connections': {'default': ['BN.default']},
                'size': 3,
                'activation': 'linear',
            },
        },
        'handler': {'@type': 'NumpyHandler', 'dtype': 'float32'},
        'initializers': initializers
        or {
            'default': {'std': 0.5, '@type': 'Gaussian'},
            'BN': {'gamma': 1, 'beta': 0, 'mu': 0, 'sigma': 1},
        },
        'weight_modifiers': {},
        'gradient_modifiers': {},
        'output_name': None,
        '@type': 'Network',
    }


# the values 0.5 stored; its parameter order: BN, F, Output_projection
GAMMA = np.array([1.5, 0.5, 2.0])
BETA = np.array([0.1, -0.2, 0.3])
MU_05 = np.array([-1.0, 2.0, -0.5])  # 0.5 kept the running mean negated
SIGMA = np.array([2.0, 0.5, 1.25])
W_F = np.array([[0.5, -1.0], [1.0, 0.25], [-0.75, 0.5]])
B_F = np.array([0.2, -0.1, 0.0])
W_O = np.array([[1.0, -0.5, 0.25], [-0.25, 0.75, 0.5]])
B_O = np.array([0.05, -0.05])
PARAMETERS_05 = np.concatenate(
    [GAMMA, BETA, MU_05, SIGMA, W_F.ravel(), B_F, W_O.ravel(), B_O]
)
X = np.array(
    [[[1.0, 2.0], [-0.5, 0.25], [3.0, -1.0]], [[0.0, 0.0], [2.5, 1.5], [-2.0, 0.5]]]
)


def _bn_05_inference(x):
    """0.5's inference pass: ``gamma * (h + mu) / sigma + beta``."""
    h = x @ W_F.T + B_F
    return GAMMA * (h + MU_05) / SIGMA + BETA


# ----------------------------------------------------------- BatchNorm ---


def test_05_batch_norm_file_predicts_as_in_05(tmp_path):
    """0.5 stored BatchNorm's running mean negated in 'mu' and computed
    (x + mu) / sigma; loaded unchanged here (x - mu), a 0.5 network gave
    other predictions silently (hunter: loss 2.146 here, 1.298 in 0.5)."""
    path = tmp_path / 'bn05.hdf5'
    _write_05_network_file(path, _bn_description(), PARAMETERS_05)
    net = Network.from_hdf5(str(path))
    np.testing.assert_allclose(net.get('BN.parameters.mu'), -MU_05)
    np.testing.assert_allclose(net.get('BN.parameters.sigma'), SIGMA)
    np.testing.assert_allclose(net.get('F.parameters.W'), W_F)
    net.provide_external_data({'default': X, 'targets': np.zeros((2, 3, 1))})
    net.forward_pass(training_pass=False)
    expected = _bn_05_inference(X)
    np.testing.assert_allclose(net.get('BN.outputs.default'), expected, rtol=1e-5)
    logits = expected @ W_O.T + B_O
    softmax = np.exp(logits) / np.exp(logits).sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(
        net.get('Output.outputs.predictions'), softmax, rtol=1e-5
    )


def test_batch_norm_file_written_here_loads_unchanged(tmp_path):
    """Files of this package keep the true mean: no conversion, also
    after a 0.5 file was loaded and saved again."""
    path05 = tmp_path / 'bn05.hdf5'
    _write_05_network_file(path05, _bn_description(), PARAMETERS_05)
    net = Network.from_hdf5(str(path05))
    net.save_as_hdf5(str(tmp_path / 'ours.hdf5'))
    again = Network.from_hdf5(str(tmp_path / 'ours.hdf5'))
    np.testing.assert_array_equal(again.get('parameters'), net.get('parameters'))
    np.testing.assert_allclose(again.get('BN.parameters.mu'), -MU_05)

    fresh = Network.from_architecture(net.architecture)
    fresh.initialize(
        {'default': Gaussian(0.5), 'BN': {'mu': 0.75, 'sigma': 2.0}}, seed=3
    )
    fresh.save_as_hdf5(str(tmp_path / 'fresh.hdf5'))
    loaded = Network.from_hdf5(str(tmp_path / 'fresh.hdf5'))
    np.testing.assert_array_equal(loaded.get('parameters'), fresh.get('parameters'))
    np.testing.assert_allclose(loaded.get('BN.parameters.mu'), 0.75)


def _fc_description(size: int, initializers: dict) -> dict:
    """0.5's description of Input(2) >> F(size) >> SoftmaxCE(2)."""
    description = _bn_description(initializers)
    arch = description['architecture']
    del arch['BN']
    arch['F']['size'] = size
    arch['F']['@outgoing_connections'] = {'default': ['Output_projection.default']}
    return description


def test_05_file_without_batch_norm_loads_its_parameters_as_stored(tmp_path):
    description = _fc_description(3, {'default': {'std': 0.5, '@type': 'Gaussian'}})
    stored = np.concatenate([W_F.ravel(), B_F, W_O.ravel(), B_O])
    _write_05_network_file(tmp_path / 'fc05.hdf5', description, stored)
    net = Network.from_hdf5(str(tmp_path / 'fc05.hdf5'))
    np.testing.assert_array_equal(net.get('parameters'), stored.astype(np.float32))


# ----------------------------------------------- 0.5 keys and forms ---

LSTM_OPT_INIT_05 = {
    'block_input': {'std': 0.1, '@type': 'Gaussian'},
    'input_gate': 0,
    'forget_gate': 1,
    'output_gate': 0,
    '@type': 'LstmOptInit',
}


def test_05_lstm_opt_init_description_loads():
    """0.5 kept input_block as self.block_input, so its descriptions hold
    'block_input' (refused as an unknown key)."""
    init = create_from_description(LSTM_OPT_INIT_05)
    assert isinstance(init, LstmOptInit)
    assert isinstance(init.input_block, Gaussian) and init.input_block.std == 0.1
    assert init.block_input is init.input_block  # 0.5's attribute name
    assert (init.input_gate, init.forget_gate, init.output_gate) == (0, 1, 0)
    description = get_description(init)
    assert 'input_block' in description and 'block_input' not in description


def test_05_network_file_with_lstm_opt_init_loads(tmp_path):
    """The hunter's 0.5 Lstm network file failed ('unknown key block_input')."""
    initializers = {
        'default': {'std': 0.5, '@type': 'Gaussian'},
        'F': {'W': LSTM_OPT_INIT_05, 'bias': 0},
    }
    stored = np.linspace(-1, 1, 4 * 2 + 4 + 2 * 4 + 2)
    path = tmp_path / 'init05.hdf5'
    _write_05_network_file(path, _fc_description(4, initializers), stored)
    net = Network.from_hdf5(str(path))
    np.testing.assert_array_equal(net.get('parameters'), stored.astype(np.float32))
    assert net.initializers['F']['W']['input_block']['std'] == 0.1


def test_renamed_05_key_keeps_the_checks():
    """The renamed value passes the new key's check; both keys at once, a
    misspelt key and a bad value are refused."""
    with pytest.raises(DescriptionError, match="'block_input'.*'input_block'"):
        create_from_description(dict(LSTM_OPT_INIT_05, input_block=0.0))
    with pytest.raises(DescriptionError, match="unknown key 'block_inputs'"):
        create_from_description({'block_inputs': 0.0, '@type': 'LstmOptInit'})
    with pytest.raises(NetworkValidationError, match='input_block must be'):
        create_from_description({'block_input': 'x', '@type': 'LstmOptInit'})


@pytest.mark.parametrize('cls', [MonitorLoss, MonitorScores])
def test_05_monitor_descriptions_load(cls):
    """0.5's MonitorLoss and MonitorScores described self.iter (None, or
    the whole iterator they were last started with); it is ignored, not
    recreated."""
    description = {
        'priority': 0,
        'iter_name': 'valid_getter',
        'iter': None,
        '@type': cls.__name__,
    }
    if cls is MonitorScores:
        description['scorers'] = [
            {
                'out_name': '',
                'targets_name': 'targets',
                'mask_name': '',
                '__name__': 'Accuracy',
                '@type': 'Accuracy',
            }
        ]
    hook = create_from_description(description)
    assert type(hook) is cls and hook.iter is None
    assert hook.iter_name == 'valid_getter'
    trained = dict(description, iter={'@type': 'NoSuchIterator', 'data': [1]})
    assert create_from_description(trained).iter is None
    assert 'iter' not in get_description(hook)


def test_dropped_05_keys_belong_to_their_class_only():
    """Other classes still refuse the keys another class drops."""
    with pytest.raises(DescriptionError, match="unknown key 'iter'"):
        create_from_description(
            {'max_epochs': 2, 'iter': None, '@type': 'StopAfterEpoch'}
        )
    with pytest.raises(DescriptionError, match="unknown key 'best_so_far'"):
        create_from_description(
            {'max_epochs': 2, 'best_so_far': 1.0, '@type': 'StopAfterEpoch'}
        )
    assert isinstance(
        create_from_description({'max_epochs': 2, '@type': 'StopAfterEpoch'}),
        StopAfterEpoch,
    )


def test_05_save_best_network_description_loads():
    """0.5's SaveBestNetwork described its running best_so_far and best_t.
    Needs SaveBestNetwork.__dropped_05__ (hooks/saving.py)."""
    hook = create_from_description(
        {
            'priority': 0,
            'log_name': 'validation.Accuracy',
            'filename': 'x.hdf5',
            'best_so_far': -math.inf,
            'best_t': None,
            'criterion': 'max',
            '@type': 'SaveBestNetwork',
        }
    )
    assert isinstance(hook, SaveBestNetwork)
    assert (hook.log_name, hook.filename, hook.criterion) == (
        'validation.Accuracy',
        'x.hdf5',
        'max',
    )
    assert not hasattr(hook, 'best_so_far')


def test_05_progress_bar_description_loads():
    """0.5's ProgressBar described length and bar (None until started).
    Needs ProgressBar.__dropped_05__ (hooks/display.py)."""
    hook = create_from_description(
        {
            'timescale': 'update',
            'priority': 0,
            'length': None,
            'bar': None,
            '@type': 'ProgressBar',
        }
    )
    assert isinstance(hook, ProgressBar)
    assert 'length' not in hook.__dict__ and 'bar' not in hook.__dict__


def _multistep_05(initial_value, steps, values):
    """0.5's MultiStep: its stored steps and values, and its __call__."""
    steps = [0] + steps + [math.inf]
    values = [initial_value] + values

    def call(current):
        step_number = 0
        for i in range(1, len(steps)):
            if steps[i - 1] <= current < steps[i]:
                step_number = i - 1
                break
        return values[step_number]

    return steps, values, call


def test_05_multistep_description_gives_0_5s_values():
    """0.5 stored steps=[0, ..., inf] and values=[initial_value, ...];
    its description was refused ('steps[3] must be an int >= 0')."""
    steps05, values05, call05 = _multistep_05(1.0, [5, 10], [0.5, 0.1])
    description = {
        'initial_value': 1.0,
        'steps': steps05,
        'values': values05,
        '@type': 'MultiStep',
    }
    # as read back from 0.5's JSON (Infinity)
    schedule = create_from_description(json.loads(json.dumps(description)))
    assert isinstance(schedule, MultiStep)
    assert (schedule.initial_value, schedule.steps, schedule.values) == (
        1.0,
        [5, 10],
        [0.5, 0.1],
    )
    for count in range(14):
        assert schedule(0, count, 'update', 1, None, None, {}) == call05(count)
    assert get_description(schedule) == get_description(
        MultiStep(1.0, [5, 10], [0.5, 0.1])
    )


def test_multistep_forms_other_than_0_5s_keep_their_checks():
    ours = create_from_description(
        {
            'initial_value': 1.0,
            'steps': [0, 5],
            'values': [0.5, 0.1],
            '@type': 'MultiStep',
        }
    )
    assert ours.steps == [0, 5] and ours.initial_value == 1.0
    with pytest.raises(TrainingValidationError, match=r'steps\[1\] must be'):
        create_from_description(
            {
                'initial_value': 1.0,
                'steps': [0, math.inf],
                'values': [1.0, 0.5],
                '@type': 'MultiStep',
            }
        )


MULTISTEP_TRAINER_05 = {
    'stepper': {'learning_rate': 0.1, 'momentum': 0.9, '@type': 'NesterovStepper'},
    'verbose': False,
    'hooks': {
        'ModifyStepperAttribute': {
            'priority': 1,
            'schedule': {
                'initial_value': 0.1,
                'steps': [0, 2, 4, math.inf],
                'values': [0.1, 0.05, 0.01],
                '@type': 'MultiStep',
            },
            'attr_name': 'learning_rate',
            '@type': 'ModifyStepperAttribute',
        },
        'val': {
            'priority': 2,
            'iter_name': 'valid',
            'iter': None,
            '@type': 'MonitorLoss',
        },
    },
    'train_scorers': [],
    '@type': 'Trainer',
}


def test_05_trainer_description_with_multistep_and_monitor_loads():
    trainer = create_from_description(MULTISTEP_TRAINER_05)
    assert isinstance(trainer, Trainer)
    schedule = trainer.hooks['ModifyStepperAttribute'].schedule
    assert (schedule.steps, schedule.values) == ([2, 4], [0.05, 0.01])
    assert trainer.hooks['val'].iter is None


def test_05_trainer_description_with_05_hooks_loads():
    """Needs the __dropped_05__ lines of SaveBestNetwork and ProgressBar."""
    description = json.loads(json.dumps(MULTISTEP_TRAINER_05))
    description['hooks']['best'] = {
        'priority': 3,
        'log_name': 'validation.Accuracy',
        'filename': 'x.hdf5',
        'best_so_far': -math.inf,
        'best_t': 4,
        'criterion': 'max',
        '@type': 'SaveBestNetwork',
    }
    description['hooks']['ProgressBar'] = {
        'timescale': 'update',
        'priority': 4,
        'length': 5,
        'bar': None,
        '@type': 'ProgressBar',
    }
    trainer = create_from_description(description)
    assert isinstance(trainer.hooks['best'], SaveBestNetwork)
    assert isinstance(trainer.hooks['ProgressBar'], ProgressBar)


# ------------------------------------------------------- iterators ---

IMAGES = np.arange(2 * 3 * 2 * 2 * 1, dtype=np.float64).reshape(2, 3, 2, 2, 1) / 10


def _undivided_05() -> dict:
    return {
        'data_shapes': {'default': list(IMAGES.shape)},
        'length': 1,
        'data': {'default': IMAGES.tolist()},
        'total_size': IMAGES.size,
        '@type': 'Undivided',
    }


def _wrapper_05(kind: str, **dicts) -> dict:
    return dict(
        {
            'data_shapes': {'default': list(IMAGES.shape)},
            'length': 1,
            'iter': _undivided_05(),
            '@type': kind,
        },
        **dicts,
    )


def test_05_gaussian_noise_description_iterates_with_mean_0():
    """0.5 described mean_dict=None as {} (KeyError('default') here)."""
    it = create_from_description(
        _wrapper_05('AddGaussianNoise', mean_dict={}, std_dict={'default': 0.0})
    )
    assert isinstance(it, AddGaussianNoise) and it.mean_dict == {'default': 0.0}
    (batch,) = list(it(bs.handlers.default_handler))
    np.testing.assert_allclose(batch['default'], IMAGES)


def test_05_salt_n_pepper_description_iterates_with_ratio_one_half():
    it = create_from_description(
        _wrapper_05('AddSaltNPepper', ratio_dict={}, prob_dict={'default': 0.1})
    )
    assert isinstance(it, AddSaltNPepper) and it.ratio_dict == {'default': 0.5}
    (batch,) = list(it(bs.handlers.default_handler))
    assert batch['default'].shape == IMAGES.shape


def test_05_pad_description_pads_with_0():
    it = create_from_description(
        _wrapper_05('Pad', value_dict={}, size_dict={'default': 1})
    )
    assert isinstance(it, Pad) and it.value_dict == {'default': 0.0}
    (batch,) = list(it(bs.handlers.default_handler))
    padded = batch['default']
    assert padded.shape == (2, 3, 4, 4, 1)
    np.testing.assert_array_equal(padded[:, :, 1:3, 1:3], IMAGES)
    padded[:, :, 1:3, 1:3] = 0
    assert not padded.any()


def test_augmentation_descriptions_of_ours_round_trip():
    base = Undivided(default=IMAGES)
    for it in (
        AddGaussianNoise(base, {'default': 0.1}, {'default': 0.5}),
        AddSaltNPepper(base, {'default': 0.1}, {'default': 0.25}),
        Pad(base, {'default': 1}, {'default': 2.0}),
    ):
        again = create_from_description(get_description(it))
        assert get_description(again) == get_description(it)


# ---------------------------------------------------- initializers ---


class RowConstant05(Initializer):
    """A 0.5-style initializer returning a row that broadcasts over rows."""

    def __init__(self, std=0.1):
        super().__init__()
        self.std = std

    def __call__(self, shape):
        return self.std * self.rnd.randn(*shape[1:])


def test_05_initializer_returning_a_broadcastable_array_is_broadcast():
    """0.5 copied the values in with mem[:] = arr (broadcasting); a bare
    AssertionError(('RowConstant', (4,), (5, 4))) here."""
    net = bs.tools.create_net_from_spec('classification', 4, 3, 'F5')
    net.initialize({'FullyConnected': {'W': RowConstant05(), 'bias': 0}, 'default': 0})
    W = net.get('FullyConnected.parameters.W')
    assert W.shape == (5, 4) and W.any()
    np.testing.assert_array_equal(W, np.broadcast_to(W[0], W.shape))
    values = evaluate_initializer(RowConstant05(), (5, 4), seed=1)
    assert values.shape == (5, 4) and values.flags.writeable


class ReturnsShape05(Initializer):
    """An initializer returning values of a fixed shape."""

    def __init__(self, shape=(3,)):
        super().__init__()
        self.shape = shape

    def __call__(self, shape):
        return np.ones(self.shape)


def test_initializer_returning_a_wrong_shape_is_named():
    """Values that do not broadcast raise InitializationError naming the
    initializer and both shapes (the network's error names the parameter)."""
    with pytest.raises(InitializationError, match=r'ReturnsShape05.*\(2,\).*\(4, 3\)'):
        evaluate_initializer(ReturnsShape05((2,)), (4, 3))
    net = bs.tools.create_net_from_spec('classification', 4, 3, 'F5')
    with pytest.raises(
        NetworkValidationError,
        match=r'FullyConnected\.W.*ReturnsShape05.*\(3,\).*\(5, 4\)',
    ):
        net.initialize({'FullyConnected': {'W': ReturnsShape05((3,))}, 'default': 0})


class _Declares05Key(StopAfterEpoch):
    """A hook whose own argument has the name of a key 0.5 kept elsewhere."""

    __arguments__ = {'best_t': Arg(Int(0))}
    __dropped_05__ = {'best_t', 'bar'}
    __renamed_05__ = {'max_epochs': 'best_t'}

    def __init__(self, max_epochs, best_t=0, name=None):
        super().__init__(max_epochs, name=name)
        self.best_t = best_t


def test_a_declared_key_is_never_dropped_or_renamed():
    """Only keys the class does not declare are 0.5's: a declared one keeps
    its value, also where another key of the description is dropped."""
    hook = create_from_description(
        {'max_epochs': 2, 'best_t': 5, 'bar': None, '@type': '_Declares05Key'}
    )
    assert (hook.max_epochs, hook.best_t) == (2, 5)


@pytest.mark.parametrize('name', ['BN', 'Z_BN'])
def test_05_batch_norm_file_converts_wherever_its_parameters_lie(tmp_path, name):
    """0.5 ordered the parameters by layer name: a BatchNorm named Z_BN
    holds the file's last parameters."""
    description = _bn_description()
    arch = description['architecture']
    arch[name] = arch.pop('BN')
    arch['F']['@outgoing_connections'] = {'default': [f'{name}.default']}
    description['initializers'] = {
        name: description['initializers'].pop('BN'),
        **description['initializers'],
    }
    bn = [GAMMA, BETA, MU_05, SIGMA]
    others = [W_F.ravel(), B_F, W_O.ravel(), B_O]
    stored = np.concatenate(bn + others if name == 'BN' else others + bn)
    _write_05_network_file(tmp_path / 'bn05.hdf5', description, stored)
    net = Network.from_hdf5(str(tmp_path / 'bn05.hdf5'))
    np.testing.assert_allclose(net.get(f'{name}.parameters.mu'), -MU_05)
    np.testing.assert_allclose(net.get(f'{name}.parameters.sigma'), SIGMA)
    np.testing.assert_allclose(net.get('Output_projection.parameters.W'), W_O)


def test_save_best_network_description_of_05_s_last_master_loads():
    """After the 0.5 release its SaveBestNetwork kept best_parameters."""
    hook = create_from_description(
        {
            'log_name': 'validation.total_loss',
            'filename': None,
            'best_parameters': None,
            'criterion': 'min',
            '@type': 'SaveBestNetwork',
        }
    )
    assert isinstance(hook, SaveBestNetwork) and hook.parameters is None
