"""Steppers against plain-NumPy versions of their update formulas."""

import copy
import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.base_handler import Handler
from brainstorm.training.steppers import (
    AdamStepper,
    AdamWStepper,
    ForwardStepper,
    MomentumStepper,
    MultiStepper,
    NesterovStepper,
    RMSPropStepper,
    SgdStepper,
    TrainingStepper,
)
from brainstorm.training.steppers.multi import _merge_ranges
from brainstorm.utils import TrainingValidationError, ValidationError
from brainstorm.value_modifiers import FreezeValues
from tests.training.nets import (
    CountingHandler,
    batchnorm_net,
    roundtrip,
    xor_data,
    xor_net,
)

STEPS = 5


# ---------------------------------------------------- NumPy references ----


def clipped(g, clip_norm):
    if clip_norm is None:
        return g
    norm = np.sqrt(np.sum(g**2))
    return g * (clip_norm / norm) if norm > clip_norm else g


def sgd_ref(lr, clip_norm=None):
    def step(theta, grad, state):
        return theta - lr * clipped(grad(theta), clip_norm)

    return step


def momentum_ref(lr, mu, scale=True):
    lr_ = lr * (1 - mu) if scale else lr

    def step(theta, grad, state):
        v = state.get('v', np.zeros_like(theta))
        state['v'] = mu * v - lr_ * grad(theta)
        return theta + state['v']

    return step


def nesterov_ref(lr, mu, scale=True):
    lr_ = lr * (1 - mu) if scale else lr

    def step(theta, grad, state):
        v = mu * state.get('v', np.zeros_like(theta))
        theta = theta + v
        g = grad(theta)
        state['v'] = v - lr_ * g
        return theta - lr_ * g

    return step


def rmsprop_ref(lr, decay, eps):
    def step(theta, grad, state):
        g = grad(theta)
        s = decay * state.get('s', np.zeros_like(theta)) + (1 - decay) * g * g
        state['s'] = s
        return theta - lr * g / (np.sqrt(s) + eps)

    return step


def adam_ref(lr, b1, b2, eps, weight_decay=0.0, clip_norm=None):
    def step(theta, grad, state):
        g = clipped(grad(theta), clip_norm)
        t = state['t'] = state.get('t', 0) + 1
        m = state['m'] = b1 * state.get('m', 0 * theta) + (1 - b1) * g
        v = state['v'] = b2 * state.get('v', 0 * theta) + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        return theta - lr * weight_decay * theta - lr * m_hat / (np.sqrt(v_hat) + eps)

    return step


CASES = [
    ('sgd', lambda: SgdStepper(0.3), sgd_ref(0.3)),
    ('sgd-clip', lambda: SgdStepper(0.3, clip_norm=0.05), sgd_ref(0.3, clip_norm=0.05)),
    ('momentum', lambda: MomentumStepper(0.5, 0.9), momentum_ref(0.5, 0.9)),
    (
        'momentum-unscaled',
        lambda: MomentumStepper(0.1, 0.8, False),
        momentum_ref(0.1, 0.8, False),
    ),
    ('nesterov', lambda: NesterovStepper(0.5, 0.9), nesterov_ref(0.5, 0.9)),
    (
        'nesterov-unscaled',
        lambda: NesterovStepper(0.1, 0.7, False),
        nesterov_ref(0.1, 0.7, False),
    ),
    ('rmsprop', lambda: RMSPropStepper(0.01, 0.8, 1e-6), rmsprop_ref(0.01, 0.8, 1e-6)),
    ('adam', lambda: AdamStepper(0.01, 0.8, 0.9, 1e-6), adam_ref(0.01, 0.8, 0.9, 1e-6)),
    (
        'adam-clip',
        lambda: AdamStepper(0.01, clip_norm=0.01),
        adam_ref(0.01, 0.9, 0.999, 1e-8, clip_norm=0.01),
    ),
    (
        'adamw',
        lambda: AdamWStepper(0.01, weight_decay=0.5),
        adam_ref(0.01, 0.9, 0.999, 1e-8, weight_decay=0.5),
    ),
]


def gradient_oracle(data):
    """grad(theta): the gradient of an independent copy of the network."""
    oracle = xor_net()

    def grad(theta):
        oracle.handler.set_from_numpy(oracle.buffer.parameters, theta)
        oracle.provide_external_data(data)
        oracle.forward_pass(training_pass=True)
        oracle.backward_pass()
        return oracle.get('gradients').astype(np.float64)

    return grad


@pytest.mark.parametrize(
    'make, reference', [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_update_matches_numpy_formula(make, reference):
    data = xor_data()
    net = xor_net()
    stepper = make()
    stepper.start(net)
    grad = gradient_oracle(data)
    theta = net.get('parameters')
    state = {}
    for i in range(STEPS):
        net.provide_external_data(data)
        stepper.run()
        theta = reference(theta, grad, state)
        np.testing.assert_allclose(
            net.get('parameters'),
            theta,
            rtol=1e-10,
            atol=1e-13,
            err_msg=f'parameters after step {i + 1}',
        )


@pytest.mark.parametrize('make', [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_runs_under_debug_handler(make):
    net = xor_net(handler=DebugHandler(NumpyHandler(np.float64, seed=1)))
    stepper = make()
    stepper.start(net)
    before = net.get('parameters')
    for _ in range(2):
        net.provide_external_data(xor_data())
        stepper.run()
    assert not np.allclose(net.get('parameters'), before)


@pytest.mark.parametrize('make', [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_steps_allocate_nothing(make):
    handler = CountingHandler(np.float64, seed=1)
    net = xor_net(handler=handler)
    stepper = make()
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    state_arrays = [id(a) for p in stepper._parts for a in p.state.values()]
    handler.allocations = 0
    for _ in range(3):
        stepper.run()
    assert handler.allocations == 0
    assert state_arrays == [id(a) for p in stepper._parts for a in p.state.values()]


def test_attributes_are_read_at_every_run():
    data = xor_data()
    net = xor_net()
    stepper = SgdStepper(0.1)
    stepper.start(net)
    grad = gradient_oracle(data)
    theta = net.get('parameters')
    stepper.learning_rate = 0.7
    net.provide_external_data(data)
    stepper.run()
    np.testing.assert_allclose(
        net.get('parameters'), theta - 0.7 * grad(theta), rtol=1e-12
    )


def test_start_resets_state():
    net = xor_net()
    stepper = AdamStepper()
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    assert stepper.step_count == 1
    stepper.start(net)
    assert stepper.step_count == 0
    assert all(not v.any() for v in stepper.get_state().values())


def test_gradient_norm_is_recorded_only_with_clipping():
    net = xor_net()
    grad = gradient_oracle(xor_data())
    theta = net.get('parameters')
    stepper = SgdStepper(0.1, clip_norm=1e6)
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    assert stepper.last_gradient_norm == pytest.approx(
        np.linalg.norm(grad(theta)), rel=1e-12
    )
    plain = SgdStepper(0.1)
    plain.start(net)
    plain.run()
    assert plain.last_gradient_norm is None


# -------------------------------------------------------- trainable mask ---


@pytest.mark.parametrize(
    'make',
    [
        lambda: SgdStepper(0.5),
        lambda: MomentumStepper(0.5, 0.9),
        lambda: NesterovStepper(0.5, 0.9),
        lambda: RMSPropStepper(0.1),
        lambda: AdamStepper(0.1),
        lambda: AdamWStepper(0.1, weight_decay=0.5),
        lambda: MultiStepper(
            {'Hid': AdamStepper(0.1), 'default': MomentumStepper(0.5, 0.9)}
        ),
    ],
    ids=['sgd', 'momentum', 'nesterov', 'rmsprop', 'adam', 'adamw', 'multi'],
)
def test_untrained_parameters_are_not_changed(make):
    """BatchNorm's mu and sigma change only in the layer's forward pass,
    even when their gradients are (artificially) non-zero."""
    rnd = np.random.RandomState(3)
    data = {'default': rnd.randn(1, 6, 3), 'targets': rnd.randint(0, 2, (1, 6, 1))}
    net = batchnorm_net()
    net.set_gradient_modifiers(
        BN={'mu': FreezeValues(np.ones(4)), 'sigma': FreezeValues(np.ones(4))}
    )
    assert set(net.gradient_modifiers['BN']) == {'mu', 'sigma'}
    after_forward = {}
    forward = net.forward_pass

    def forward_and_snapshot(training_pass=False, context=None):
        forward(training_pass, context)
        for name in ('mu', 'sigma', 'gamma'):
            after_forward[name] = net.get(f'BN.parameters.{name}')

    net.forward_pass = forward_and_snapshot
    stepper = make()
    stepper.start(net)
    for _ in range(3):
        net.provide_external_data(data)
        stepper.run()
        # the stepper zeroed the gradients the modifier set to one
        assert net.get('BN.gradients.mu').tolist() == [0.0] * 4
        for name in ('mu', 'sigma'):
            np.testing.assert_array_equal(
                net.get(f'BN.parameters.{name}'), after_forward[name]
            )
    assert not np.array_equal(net.get('BN.parameters.gamma'), after_forward['gamma'])


UPDATE_OPS = (
    'sgd_update',
    'momentum_update',
    'nesterov_lookahead',
    'nesterov_update',
    'rmsprop_update',
    'adam_update',
)


class ComposedUpdates(NumpyHandler):
    """Runs the update ops as the base class composes them (the sequence of
    general ops the steppers ran before the ops existed); counts them."""

    def __init__(self, dtype=np.float32, seed=None):
        super().__init__(dtype, seed)
        self.update_calls = []


def _composed(name):
    base = getattr(Handler, name)

    def op(self, *args):
        self.update_calls.append(name)
        base(self, *args)

    return op


for _name in UPDATE_OPS:
    setattr(ComposedUpdates, _name, _composed(_name))


def _stepper_cases():
    cases = [(name, make) for name, make, _ in CASES]
    cases.append(
        (
            'multi',
            lambda: MultiStepper(
                {
                    'Hid': AdamWStepper(0.1, weight_decay=0.3),
                    'BN': NesterovStepper(0.5, 0.9),
                    'default': RMSPropStepper(0.1, clip_norm=0.5),
                },
                clip_norm=1.0,
            ),
        )
    )
    return cases


@pytest.mark.parametrize(
    'make', [c[1] for c in _stepper_cases()], ids=[c[0] for c in _stepper_cases()]
)
def test_steppers_give_the_results_of_the_composed_updates(monkeypatch, make):
    """On NumpyHandler (its update ops run in chunks, made small here) every
    stepper gives bit for bit the parameters and state that the base
    composition gives, in float32, with masked parameters (BatchNorm's
    statistics) and clipping; one update op call per part and step."""
    from brainstorm.handlers import _numpy_update

    monkeypatch.setattr(_numpy_update, 'UPDATE_CHUNK', 5)
    rnd = np.random.RandomState(3)
    data = {'default': rnd.randn(1, 6, 3), 'targets': rnd.randint(0, 2, (1, 6, 1))}
    results = []
    for handler in (NumpyHandler(np.float32, seed=1), ComposedUpdates(np.float32, 1)):
        net = batchnorm_net()
        net.set_handler(handler)
        stepper = make()
        stepper.start(net)
        for _ in range(4):
            net.provide_external_data(data)
            stepper.run()
        results.append((net.get('parameters'), stepper.get_state()))
    (params, state), (composed_params, composed_state) = results
    assert params.dtype == np.float32
    assert np.array_equal(params, composed_params), (
        f'parameters differ in {int(np.sum(params != composed_params))} elements'
    )
    assert state.keys() == composed_state.keys()
    for key in state:
        assert np.array_equal(state[key], composed_state[key]), key
    steppers = getattr(stepper, 'steppers', {None: stepper}).values()
    calls = sum(
        len(s._parts) * (2 if isinstance(s, NesterovStepper) else 1) for s in steppers
    )
    assert len(handler.update_calls) == 4 * calls, handler.update_calls


# -------------------------------------------------------- ForwardStepper ---


def test_forward_stepper_runs_forward_only():
    """0.5 called the nonexistent net.get_loss_value(); ours works."""
    net = xor_net()
    stepper = ForwardStepper()
    stepper.start(net)
    before = net.get('parameters')
    net.provide_external_data(xor_data())
    stepper.run()
    np.testing.assert_array_equal(net.get('parameters'), before)
    assert net.get_loss_values()['total_loss'] > 0
    assert not net.get('Output.outputs.predictions').sum() == 0


def test_forward_stepper_training_pass_flag():
    passes = []
    net = xor_net()
    net.forward_pass = lambda training_pass=False, context=None: passes.append(
        training_pass
    )
    for flag in (False, True):
        stepper = ForwardStepper(use_training_pass=flag)
        stepper.start(net)
        stepper.run()
    assert passes == [False, True]


# ----------------------------------------------------------- MultiStepper ---


def test_multi_stepper_updates_each_part_with_its_stepper():
    data = xor_data()
    net = xor_net()
    stepper = MultiStepper(
        {'Hid': AdamStepper(0.01), 'default': MomentumStepper(0.5, 0.9)}
    )
    stepper.start(net)
    assert stepper.assignment == {'Hid': 'Hid', 'Output_projection': 'default'}
    passes = []
    forward = net.forward_pass

    def counting_forward(training_pass=False, context=None):
        passes.append(training_pass)
        forward(training_pass, context)

    net.forward_pass = counting_forward
    grad = gradient_oracle(data)
    hid = slice(*net.layout['Hid']['parameters']['@slice'])
    rest = slice(hid.stop, None)
    adam, momentum = adam_ref(0.01, 0.9, 0.999, 1e-8), momentum_ref(0.5, 0.9)
    theta = net.get('parameters')
    adam_state, momentum_state = {}, {}
    for _ in range(STEPS):
        net.provide_external_data(data)
        stepper.run()
        g = grad(theta)
        new = theta.copy()
        new[hid] = adam(theta[hid], lambda _, g=g: g[hid], adam_state)
        new[rest] = momentum(theta[rest], lambda _, g=g: g[rest], momentum_state)
        theta = new
        np.testing.assert_allclose(net.get('parameters'), theta, rtol=1e-10, atol=1e-13)
    assert passes == [True] * STEPS


def test_multi_stepper_patterns_and_shared_steppers():
    net = xor_net()
    shared = SgdStepper(0.1)
    stepper = MultiStepper({'H*': shared, 'Out*': shared})
    stepper.start(net)
    assert len(shared._parts) == 1  # adjacent ranges are merged
    assert set(stepper.get_state()) == set()


@pytest.mark.parametrize(
    'steppers, message',
    [
        ({'Conv*': SgdStepper(), 'default': SgdStepper()}, "'Conv*' matches no"),
        ({'Hid': SgdStepper(), '*': MomentumStepper()}, "'Hid' is matched by"),
        ({'Hid': SgdStepper()}, "no stepper for layer 'Output_projection'"),
    ],
)
def test_multi_stepper_bad_patterns(steppers, message):
    with pytest.raises(TrainingValidationError, match=message.replace('*', r'\*')):
        MultiStepper(steppers).start(xor_net())


def test_multi_stepper_rejects_non_steppers():
    with pytest.raises(TrainingValidationError, match=r"steppers\['Hid'\]"):
        MultiStepper({'Hid': 0.1})
    with pytest.raises(TrainingValidationError, match='non-empty dict'):
        MultiStepper({})


def test_multi_stepper_global_clipping():
    data = xor_data()
    net = xor_net()
    stepper = MultiStepper(
        {'Hid': SgdStepper(0.1), 'default': SgdStepper(0.2)}, clip_norm=0.01
    )
    stepper.start(net)
    theta = net.get('parameters')
    g = clipped(gradient_oracle(data)(theta), 0.01)
    hid = slice(*net.layout['Hid']['parameters']['@slice'])
    net.provide_external_data(data)
    stepper.run()
    expected = theta - 0.2 * g
    expected[hid] = theta[hid] - 0.1 * g[hid]
    np.testing.assert_allclose(net.get('parameters'), expected, rtol=1e-10)


# ------------------------------------------------------------------ state ---


@pytest.mark.parametrize(
    'make',
    [
        lambda: MomentumStepper(0.5, 0.9),
        lambda: NesterovStepper(0.5, 0.9),
        lambda: RMSPropStepper(0.01),
        lambda: AdamWStepper(0.01),
        lambda: MultiStepper(
            {'Hid': AdamStepper(0.01), 'default': NesterovStepper(0.5, 0.9)}
        ),
    ],
    ids=['momentum', 'nesterov', 'rmsprop', 'adamw', 'multi'],
)
def test_state_round_trip_continues_identically(make):
    data = xor_data()
    net_a, net_b = xor_net(), xor_net()
    stepper_a, stepper_b = make(), make()
    stepper_a.start(net_a)
    for _ in range(3):
        net_a.provide_external_data(data)
        stepper_a.run()
    net_b.handler.set_from_numpy(net_b.buffer.parameters, net_a.get('parameters'))
    stepper_b.start(net_b)
    stepper_b.set_state(stepper_a.get_state())
    for _ in range(2):
        for net, stepper in ((net_a, stepper_a), (net_b, stepper_b)):
            net.provide_external_data(data)
            stepper.run()
    np.testing.assert_array_equal(net_a.get('parameters'), net_b.get('parameters'))


def test_set_state_rejects_foreign_state():
    net = xor_net()
    momentum, adam = MomentumStepper(), AdamStepper()
    momentum.start(net)
    adam.start(net)
    with pytest.raises(TrainingValidationError, match='cannot restore'):
        momentum.set_state(adam.get_state())
    state = momentum.get_state()
    state['part0.velocity'] = np.zeros(3)
    with pytest.raises(TrainingValidationError, match='shape'):
        momentum.set_state(state)


@pytest.mark.parametrize(
    'make',
    [ForwardStepper, SgdStepper, MomentumStepper, NesterovStepper, RMSPropStepper,
     AdamStepper, AdamWStepper, lambda: MultiStepper({'default': SgdStepper()})],
)  # fmt: skip
def test_run_before_start_is_an_error(make):
    with pytest.raises(TrainingValidationError, match='start'):
        make().run()


def test_forward_stepper_runs_a_test_pass_by_default():
    passes = []
    net = xor_net()
    net.forward_pass = lambda training_pass=False, context=None: passes.append(
        training_pass
    )
    stepper = ForwardStepper()
    stepper.start(net)
    stepper.run()
    assert passes == [False]


# ------------------------------------------------------------ validation ---


@pytest.mark.parametrize(
    'make, message',
    [
        (lambda: SgdStepper(-0.1), 'learning_rate'),
        (lambda: SgdStepper(float('nan')), 'learning_rate'),
        (lambda: SgdStepper('0.1'), 'learning_rate'),
        (lambda: MomentumStepper(0.1, 1.0), 'momentum'),
        (lambda: MomentumStepper(0.1, -0.1), 'momentum'),
        (
            lambda: MomentumStepper(0.1, 0.5, scale_learning_rate=1),
            'scale_learning_rate',
        ),
        (lambda: NesterovStepper(0.1, 1.5), 'momentum'),
        (lambda: RMSPropStepper(decay=1.0), 'decay'),
        (lambda: RMSPropStepper(epsilon=0), 'epsilon'),
        (lambda: AdamStepper(beta1=1.0), 'beta1'),
        (lambda: AdamStepper(beta2=-0.5), 'beta2'),
        (lambda: AdamStepper(beta2=1.0), 'beta2'),
        (lambda: AdamStepper(epsilon=0.0), 'epsilon'),
        (lambda: AdamWStepper(weight_decay=-1), 'weight_decay'),
        (lambda: SgdStepper(clip_norm=0), 'clip_norm'),
    ],
)
def test_bad_hyperparameters(make, message):
    with pytest.raises(ValidationError, match=message) as info:
        make()
    assert 'Received' in str(info.value)


def test_bad_hyperparameter_set_later_fails_at_run():
    net = xor_net()
    stepper = MomentumStepper(0.1, 0.5)
    stepper.start(net)
    stepper.momentum = 1.2
    net.provide_external_data(xor_data())
    with pytest.raises(
        TrainingValidationError, match=r'MomentumStepper: momentum .*1\.2'
    ):
        stepper.run()


# ----------------------------------------------------------- description ---


@pytest.mark.parametrize(
    'stepper',
    [
        ForwardStepper(True),
        SgdStepper(0.2),
        MomentumStepper(0.1, 0.9, False),
        NesterovStepper(0.3, 0.5),
        RMSPropStepper(0.002, 0.95, 1e-7, 2.0),
        AdamStepper(0.003, 0.8, 0.99, 1e-6),
        AdamWStepper(weight_decay=0.1),
        MultiStepper(
            {'Conv*': AdamStepper(), 'default': SgdStepper(0.01)}, clip_norm=5.0
        ),
    ],
    ids=lambda s: type(s).__name__,
)
def test_description_round_trip(stepper):
    description = bs.get_description(stepper)
    json.dumps(description)
    assert 'net' not in description and 'step_count' not in description
    copy = roundtrip(stepper)
    assert type(copy) is type(stepper)
    assert bs.get_description(copy) == description


def test_description_matches_0_5():
    assert bs.get_description(MomentumStepper(0.1, 0.9)) == {
        '@type': 'MomentumStepper',
        'learning_rate': 0.1,
        'momentum': 0.9,
        'scale_learning_rate': True,
    }
    assert bs.get_description(SgdStepper()) == {
        '@type': 'SgdStepper',
        'learning_rate': 0.1,
    }


def test_recreated_stepper_trains():
    copy = roundtrip(AdamStepper(0.01))
    net = xor_net()
    copy.start(net)
    net.provide_external_data(xor_data())
    copy.run()
    assert copy.step_count == 1


def test_base_class_is_abstract():
    net = xor_net()
    stepper = TrainingStepper()
    stepper.start(net)
    net.provide_external_data(xor_data())
    with pytest.raises(NotImplementedError):
        stepper.run()


@pytest.mark.parametrize(
    'make, reference',
    [
        (lambda: SgdStepper(0.3, clip_norm=50.0), sgd_ref(0.3)),
        (lambda: AdamStepper(0.01, clip_norm=50.0), adam_ref(0.01, 0.9, 0.999, 1e-8)),
        (
            lambda: MultiStepper({'default': SgdStepper(0.3)}, clip_norm=50.0),
            sgd_ref(0.3),
        ),
    ],
    ids=['sgd', 'adam', 'multi'],
)
def test_clip_norm_leaves_gradients_below_the_limit_alone(make, reference):
    """An update whose gradient norm is below clip_norm equals the unclipped
    formula. (Guards against: rescaling whenever norm > 0 instead of
    norm > clip_norm, which set every update to the clip norm.)"""
    data = xor_data()
    net = xor_net()
    stepper = make()
    stepper.start(net)
    grad = gradient_oracle(data)
    theta = net.get('parameters')
    state = {}
    for i in range(3):
        norm = np.linalg.norm(grad(theta))
        assert 0 < norm < 50.0, 'the test needs a norm below the limit'
        net.provide_external_data(data)
        stepper.run()
        theta = reference(theta, grad, state)
        np.testing.assert_allclose(
            net.get('parameters'),
            theta,
            rtol=1e-10,
            atol=1e-13,
            err_msg=f'parameters after step {i + 1}',
        )


def _large_gradient_step(handler):
    """One clipped SGD step (lr 1, clip_norm 1) on gradients near 3e21."""
    inp, out = bs.tools.get_in_out_layers('regression', 4, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    stepper = SgdStepper(1.0, clip_norm=1.0)
    stepper.start(net)
    net.provide_external_data(
        {'default': np.full((1, 4, 4), 1e11), 'targets': np.zeros((1, 4, 1))}
    )
    before = net.get('parameters').astype(np.float64)
    stepper.run()
    return stepper, np.linalg.norm(net.get('parameters') - before)


def _cpu_handlers():
    from brainstorm.handlers.onednn import OneDnnHandler, onednn_available

    handlers = [NumpyHandler(np.float32), NumpyHandler(np.float64)]
    return handlers + ([OneDnnHandler(np.float32)] if onednn_available()[0] else [])


@pytest.mark.parametrize('handler', _cpu_handlers(), ids=repr)
def test_clipping_large_finite_gradients_clips_them_in_float32_too(handler):
    """The squares summed in float32 overflowed from |g| near 1.8e19: the
    norm was inf, and clipping scaled every gradient to 0 (no step)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter('error')  # no overflow warning either
        stepper, step = _large_gradient_step(handler)
    assert step == pytest.approx(1.0, rel=1e-5)
    assert 1e21 < stepper.last_gradient_norm < 1e23  # finite, about 6e21


def test_a_shared_stepper_stays_shared_through_a_description():
    """A description wrote a stepper shared by two patterns out twice: the
    recreated MultiStepper had two steppers, and a checkpoint of it could
    not be resumed (its state had the entries of one)."""
    adam = AdamStepper(0.01)
    multi = MultiStepper({'H1': adam, 'H2': adam, 'default': SgdStepper(0.1)})
    description = bs.get_description(multi)
    assert description['shared_steppers'] == {'H2': 'H1'}
    assert description['steppers']['H2'] == description['steppers']['H1']
    restored = bs.create_from_description(description)
    assert restored.steppers['H1'] is restored.steppers['H2']
    assert restored.steppers['default'] is not restored.steppers['H1']
    assert not hasattr(restored, 'shared_steppers')
    unshared = bs.get_description(MultiStepper({'default': SgdStepper(0.1)}))
    assert 'shared_steppers' not in unshared


@pytest.mark.parametrize(
    'shared', [{'H1': 'H2', 'H2': 'H1'}, {'H2': 'nope'}, {'H3': 'H1'}, {'H2': 'H2'}]
)
def test_a_bad_shared_steppers_entry_is_refused(shared):
    description = bs.get_description(
        MultiStepper({'H1': SgdStepper(0.1), 'H2': SgdStepper(0.2)})
    )
    description['shared_steppers'] = shared
    with pytest.raises(TrainingValidationError, match='shared_steppers maps'):
        bs.create_from_description(description)


def test_shared_steppers_may_name_a_later_pattern():
    """The order of a hand-edited description's patterns does not matter."""
    description = bs.get_description(
        MultiStepper({'H1': SgdStepper(0.1), 'H2': SgdStepper(0.2)})
    )
    description['shared_steppers'] = {'H1': 'H2'}
    restored = bs.create_from_description(description)
    assert restored.steppers['H1'] is restored.steppers['H2']


def test_a_run_with_a_shared_stepper_resumes_exactly(tmp_path):
    def setup(checkpoint):
        bs.global_rnd.set_seed(7)
        inp, out = bs.tools.get_in_out_layers('classification', 4, 2)
        net = bs.Network.from_layer(
            inp
            >> bs.layers.FullyConnected(6, name='H1')
            >> bs.layers.FullyConnected(6, name='H2')
            >> out
        )
        net.initialize(bs.initializers.Gaussian(0.1))
        adam = AdamStepper(0.01)
        trainer = bs.Trainer(
            MultiStepper({'H1': adam, 'H2': adam, 'default': SgdStepper(0.1)}),
            verbose=False,
        )
        trainer.add_hook(bs.hooks.SaveCheckpoint(str(checkpoint)))
        trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        return net, trainer

    rng = np.random.RandomState(0)
    x, y = rng.randn(1, 40, 4), rng.randint(0, 2, (1, 40, 1))

    def data():
        return bs.data_iterators.Minibatches(8, default=x, targets=y)

    net, trainer = setup(tmp_path / 'full.ckpt')
    trainer.train(net, data())
    net2, trainer2 = setup(tmp_path / 'half.ckpt')
    trainer2.hooks['StopAfterEpoch'].max_epochs = 1
    trainer2.train(net2, data())
    resumed, net3 = bs.Trainer.from_checkpoint(str(tmp_path / 'half.ckpt'))
    resumed.hooks['StopAfterEpoch'].max_epochs = 2
    resumed.train(net3, data())
    np.testing.assert_array_equal(net3.get('parameters'), net.get('parameters'))


# ------------------------------------------ rules found by mutation ---


@pytest.mark.parametrize(
    'make',
    [
        lambda: MomentumStepper(0.1, 0.9),
        lambda: MultiStepper({'default': SgdStepper()}),
    ],
    ids=['momentum', 'multi'],
)
@pytest.mark.parametrize('method', ['get_state', 'set_state'])
def test_state_before_start_is_an_error(method, make):
    stepper = make()
    call = getattr(stepper, method)
    # named by the stepper called (not one of a MultiStepper's steppers)
    with pytest.raises(
        TrainingValidationError, match=f'{type(stepper).__name__}: call start'
    ):
        call() if method == 'get_state' else call({})


@pytest.mark.parametrize(
    'make',
    [SgdStepper, lambda: MultiStepper({'default': SgdStepper()})],
    ids=['sgd', 'multi'],
)
def test_a_step_runs_a_training_pass_without_input_deltas(make):
    net = xor_net()
    calls = []
    forward, backward = net.forward_pass, net.backward_pass

    def spy_forward(training_pass=False, context=None):
        calls.append(('forward', training_pass))
        forward(training_pass, context)

    def spy_backward(input_deltas=True):
        calls.append(('backward', input_deltas))
        backward(input_deltas=input_deltas)

    net.forward_pass, net.backward_pass = spy_forward, spy_backward
    stepper = make()
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    assert calls == [('forward', True), ('backward', False)]


def test_a_bad_hyperparameter_is_refused_before_the_look_ahead():
    """Nesterov's look-ahead moves the parameters before the passes; a
    momentum a schedule made invalid must be refused before it."""
    net = xor_net()
    stepper = NesterovStepper(0.1, 0.9)
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    before = net.get('parameters')
    stepper.momentum = 1.5
    net.provide_external_data(xor_data())
    with pytest.raises(TrainingValidationError, match='momentum'):
        stepper.run()
    np.testing.assert_array_equal(net.get('parameters'), before)


def test_the_clipping_norm_leaves_out_untrained_parameters():
    """The gradients of untrained parameters (BatchNorm's statistics) are
    zeroed before the norm is taken: they do not count towards it."""
    net = batchnorm_net()
    net.set_gradient_modifiers(
        BN={'mu': FreezeValues(np.full(4, 1e3)), 'sigma': FreezeValues(np.full(4, 1e3))}
    )
    stepper = SgdStepper(0.0, clip_norm=1e9)
    stepper.start(net)
    rnd = np.random.RandomState(3)
    net.provide_external_data(
        {'default': rnd.randn(1, 6, 3), 'targets': rnd.randint(0, 2, (1, 6, 1))}
    )
    stepper.run()
    gradients = net.get('gradients')
    assert np.linalg.norm(gradients) < 100
    assert stepper.last_gradient_norm == pytest.approx(
        np.linalg.norm(gradients), rel=1e-12
    )


def test_the_clipping_norm_of_float32_gradients_is_their_norm():
    """Small float32 gradients: their squares are summed as they are (the
    squares of the gradients scaled for an overflow would underflow)."""
    handler = NumpyHandler(np.float32, seed=1)
    net = xor_net(handler=handler)
    stepper = SgdStepper(0.0, clip_norm=1e9)
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    expected = np.linalg.norm(net.get('gradients').astype(np.float64))
    assert 0 < expected < 1e3
    assert stepper.last_gradient_norm == pytest.approx(expected, rel=1e-5)


def test_a_copy_made_after_a_move_to_another_dtype_trains_as_the_original():
    """Copied after set_handler moved the network to float32 (before the
    next step), the stepper copies the state it follows the network to."""
    net = xor_net()
    stepper = MomentumStepper(0.1, 0.9)
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    net.set_handler(NumpyHandler(np.float32, seed=2))
    copied_stepper, copied_net = copy.deepcopy((stepper, net))
    for s, n in ((stepper, net), (copied_stepper, copied_net)):
        for _ in range(2):
            n.provide_external_data(xor_data())
            s.run()
    np.testing.assert_array_equal(copied_net.get('parameters'), net.get('parameters'))
    assert copied_net.get('parameters').dtype == np.float32


def test_an_adam_stepper_counts_no_step_before_its_first():
    """``step_count`` (public) is 0 when made, when recreated from its
    description and after start, until the first step."""
    fresh = AdamStepper(0.1)
    restored = bs.describable.create_from_description(
        bs.describable.get_description(fresh)
    )
    assert fresh.step_count == restored.step_count == 0
    net = xor_net()
    restored.start(net)
    assert restored.step_count == 0
    net.provide_external_data(xor_data())
    restored.run()
    assert restored.step_count == 1


def test_a_multi_stepper_among_the_steppers_is_refused():
    inner = MultiStepper({'default': SgdStepper()})
    with pytest.raises(
        TrainingValidationError, match=r"steppers\['Hid'\] must be a stepper"
    ):
        MultiStepper({'Hid': inner, 'default': SgdStepper()})


@pytest.mark.parametrize(
    'spoil',
    [
        lambda multi: setattr(multi, 'clip_norm', -1.0),
        lambda multi: setattr(multi.steppers['Hid'], 'learning_rate', -0.1),
        lambda multi: setattr(multi.steppers['default'], 'clip_norm', 0.0),
    ],
    ids=['own clip_norm', 'a stepper learning_rate', 'a stepper clip_norm'],
)
def test_a_multi_stepper_checks_its_and_its_steppers_hyperparameters(spoil):
    net = xor_net()
    multi = MultiStepper({'Hid': MomentumStepper(0.1, 0.5), 'default': SgdStepper(0.1)})
    multi.start(net)
    before = net.get('parameters')
    spoil(multi)
    net.provide_external_data(xor_data())
    with pytest.raises(TrainingValidationError):
        multi.run()
    np.testing.assert_array_equal(net.get('parameters'), before)


@pytest.mark.parametrize('clip_norm', [0.05, 1e6])
def test_a_stepper_in_a_multi_stepper_clips_its_part_before_its_update(clip_norm):
    """As the stepper alone does: its clip_norm applies to the gradients
    it updates with."""
    alone, within = xor_net(), xor_net()
    single = MomentumStepper(0.3, 0.9, clip_norm=clip_norm)
    multi = MultiStepper({'default': MomentumStepper(0.3, 0.9, clip_norm=clip_norm)})
    single.start(alone)
    multi.start(within)
    for _ in range(3):
        for stepper, net in ((single, alone), (multi, within)):
            net.provide_external_data(xor_data())
            stepper.run()
    np.testing.assert_array_equal(within.get('parameters'), alone.get('parameters'))
    norm = multi.steppers['default'].last_gradient_norm
    assert norm == single.last_gradient_norm and norm > 0.05


def test_a_multi_stepper_refuses_a_state_of_other_entries():
    net = xor_net()
    multi = MultiStepper({'Hid': MomentumStepper(0.1, 0.5), 'default': SgdStepper(0.1)})
    multi.start(net)
    state = multi.get_state()
    foreign = {'steppers.default.part0.velocity': next(iter(state.values()))}
    with pytest.raises(
        TrainingValidationError, match='MultiStepper: cannot restore a state'
    ):
        multi.set_state(foreign)


def test_an_unshared_multi_stepper_is_described_as_in_brainstorm_05():
    """No ``shared_steppers`` entry unless a stepper is shared."""
    plain = MultiStepper({'Hid': SgdStepper(0.1), 'default': SgdStepper(0.2)})
    assert 'shared_steppers' not in bs.describable.get_description(plain)


def test_merged_ranges_join_adjacent_ranges_after_a_gap():
    """A stepper's ranges are merged where one ends at the next's start
    (fewer parts); a range joins the last merged one, not the first."""
    assert _merge_ranges([(7, 9), (0, 2), (5, 7), (2, 3)]) == [(0, 3), (5, 9)]
    assert _merge_ranges([(0, 2), (4, 6), (6, 8), (8, 9)]) == [(0, 2), (4, 9)]


class _CountingSgd(SgdStepper):
    """A custom stepper with a scalar state whose name begins with 'part'."""

    __undescribed__ = {'partial_steps': 0}

    def __init__(self, learning_rate=0.1, clip_norm=None):
        super().__init__(learning_rate, clip_norm)
        self.partial_steps = 0

    def _reset_scalar_state(self):
        self.partial_steps = 0

    def _get_scalar_state(self):
        return {'partial_steps': np.int64(self.partial_steps)}

    def _set_scalar_state(self, state):
        self.partial_steps = int(state['partial_steps'])

    def _update(self):
        self.partial_steps += 1
        super()._update()


def test_scalar_state_names_beginning_with_part_are_restored():
    # set_state took every name beginning with 'part' for an array state
    # ('part0.velocity') and dropped it: a KeyError, and checkpoints of
    # such a stepper could not be resumed
    net = xor_net()
    stepper = _CountingSgd()
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    stepper.run()
    state = stepper.get_state()
    other = _CountingSgd()
    other.start(xor_net())
    other.set_state(state)
    assert other.partial_steps == 2


@pytest.mark.parametrize(
    'make',
    [AdamStepper, lambda: MultiStepper({'*': SgdStepper()})],
    ids=['adam', 'multi'],
)
@pytest.mark.parametrize('method', ['get_state', 'set_state'])
def test_state_before_start_names_the_method_called(make, method):
    stepper = make()
    args = ({},) if method == 'set_state' else ()
    with pytest.raises(TrainingValidationError, match=rf'before {method}\(\)'):
        getattr(stepper, method)(*args)
