"""A MultiStepper refuses whole: before any of its steppers changes anything.

* An epsilon the network's dtype cannot hold (Adam's default 1e-8 on
  float16) was refused by Adam's update, after an SGD or Momentum stepper
  of the same MultiStepper had updated its layers: a refused step changed
  some of the parameters. It is refused before the passes now, and
  ``start`` refuses before binding any stepper.
* ``set_state`` restored stepper by stepper: with one stepper's state in
  the float16 range and another's beyond it, the first was restored and
  the message said "Nothing was restored", naming ``'part0.velocity'``
  rather than the name ``get_state`` gives it. Moving to a narrower dtype
  (``net.set_handler``) likewise moved the first stepper's state. Both are
  all or nothing now, and name the entries as ``get_state`` does.
* A move to an equal or wider dtype copies the state one array at a time
  again (not every array to the host up front).
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import TrainingValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.training.steppers import (
    AdamStepper,
    AdamWStepper,
    MomentumStepper,
    MultiStepper,
    RMSPropStepper,
    SgdStepper,
)

ADAPTIVE = [AdamStepper, AdamWStepper, RMSPropStepper]


def make_net(dtype=np.float32, handler=None):
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('regression', (3,), 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(4, name='A') >> out)
    net.set_handler(handler or NumpyHandler(dtype))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


def provide(net, seed=0):
    rng = np.random.RandomState(seed)
    dtype = net.handler.dtype
    net.provide_external_data(
        {
            'default': rng.randn(1, 5, 3).astype(dtype),
            'targets': rng.randn(1, 5, 2).astype(dtype),
        }
    )


def step(stepper, net, seed=0):
    provide(net, seed)
    stepper.run()


def assert_states_equal(a, b):
    assert list(a) == list(b)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)


# ------------------------------------- epsilon refused before the step ---


@pytest.mark.parametrize('adaptive', ADAPTIVE)
@pytest.mark.parametrize('adaptive_first', [False, True])
def test_a_refused_multistepper_step_changes_no_parameter_and_no_state(
    adaptive, adaptive_first
):
    net = make_net(np.float32)
    steppers = {'A': MomentumStepper(0.1, momentum=0.9), 'default': adaptive(0.01)}
    if adaptive_first:  # the adaptive stepper updates the first layer
        steppers = {'A': adaptive(0.01), 'default': MomentumStepper(0.1, 0.9)}
    stepper = MultiStepper(steppers)
    stepper.start(net)
    step(stepper, net)  # the states are not zero
    net.set_handler(NumpyHandler(np.float16))
    provide(net, seed=1)
    parameters = net.get('parameters').copy()
    state = stepper.get_state()
    with pytest.raises(TrainingValidationError) as info:
        stepper.run()
    message = str(info.value)
    assert adaptive.__name__ in message
    assert 'epsilon=1e-08' in message  # what was received
    assert 'at least 6.104e-05' in message  # what is expected
    assert 'float16' in message
    np.testing.assert_array_equal(net.get('parameters'), parameters)
    assert_states_equal(stepper.get_state(), state)
    assert net.get('parameters').dtype == np.float16


def test_an_sgd_stepper_beside_a_refused_adam_changes_no_parameter():
    net = make_net(np.float32)
    stepper = MultiStepper({'A': SgdStepper(0.1), 'default': AdamStepper(1e-3)})
    stepper.start(net)
    net.set_handler(NumpyHandler(np.float16))
    provide(net)
    parameters = net.get('parameters').copy()
    with pytest.raises(TrainingValidationError, match=r'AdamStepper: epsilon'):
        stepper.run()
    np.testing.assert_array_equal(net.get('parameters'), parameters)


def test_a_schedule_making_epsilon_too_small_is_refused_before_the_passes():
    net = make_net(np.float16)
    adam = AdamStepper(1e-3, epsilon=1e-4)
    stepper = MultiStepper({'A': MomentumStepper(0.1, 0.9), 'default': adam})
    stepper.start(net)
    step(stepper, net)
    adam.epsilon = 1e-6  # as a schedule might set it
    provide(net, seed=1)
    parameters = net.get('parameters').copy()
    state = stepper.get_state()
    with pytest.raises(TrainingValidationError, match=r'epsilon=1e-06'):
        stepper.run()
    np.testing.assert_array_equal(net.get('parameters'), parameters)
    assert_states_equal(stepper.get_state(), state)
    adam.epsilon = 1e-4
    step(stepper, net, seed=1)  # trains on
    assert not np.array_equal(net.get('parameters'), parameters)


def test_a_refused_multistepper_start_binds_no_stepper():
    net = make_net(np.float32)
    stepper = MultiStepper(
        {'A': MomentumStepper(0.1, momentum=0.9), 'default': AdamStepper(1e-3)}
    )
    stepper.start(net)
    step(stepper, net)
    state = stepper.get_state()
    with pytest.raises(TrainingValidationError) as info:
        stepper.start(make_net(np.float16))
    assert 'AdamStepper' in str(info.value)
    assert 'epsilon=1e-08' in str(info.value)
    # still bound to the first network, with its state
    assert stepper.net is net
    assert_states_equal(stepper.get_state(), state)
    parameters = net.get('parameters').copy()
    step(stepper, net, seed=1)
    assert not np.array_equal(net.get('parameters'), parameters)


# ----------------------------------------- set_state: all or nothing ---


def two_momentum():
    return MultiStepper(
        {
            'A': MomentumStepper(0.1, momentum=0.9),
            'default': MomentumStepper(0.1, momentum=0.9),
        }
    )


def float64_state(a_value, default_value):
    """A two_momentum() state made on float64, with the given velocities."""
    stepper = two_momentum()
    stepper.start(make_net(np.float64))
    state = stepper.get_state()
    assert list(state) == [
        'steppers.A.part0.velocity',
        'steppers.default.part0.velocity',
    ]
    for key in state:
        value = a_value if key.startswith('steppers.A.') else default_value
        state[key] = np.full(state[key].shape, value)
    return state


def test_a_refused_multistepper_set_state_restores_nothing():
    state = float64_state(0.5, 1e6)
    net = make_net(np.float16)
    stepper = two_momentum()
    stepper.start(net)
    step(stepper, net)
    before = stepper.get_state()
    with pytest.raises(TrainingValidationError) as info:
        stepper.set_state(state)
    message = str(info.value)
    # named as get_state names it, with what was received and the range
    assert "'steppers.default.part0.velocity'" in message
    assert '1000000.0' in message
    assert 'float16' in message
    assert '65504' in message
    assert 'Nothing was restored' in message
    assert_states_equal(stepper.get_state(), before)


def test_a_multistepper_shape_mismatch_names_the_entry_as_get_state_does():
    net = make_net(np.float32)
    stepper = two_momentum()
    stepper.start(net)
    state = stepper.get_state()
    before = {k: v.copy() for k, v in state.items()}
    state['steppers.A.part0.velocity'] = np.ones(3)
    state['steppers.default.part0.velocity'] = np.ones_like(
        state['steppers.default.part0.velocity']
    )
    with pytest.raises(TrainingValidationError) as info:
        stepper.set_state(state)
    message = str(info.value)
    assert "'steppers.A.part0.velocity'" in message
    assert '(3,)' in message  # received
    assert str(before['steppers.A.part0.velocity'].shape) in message  # expected
    assert_states_equal(stepper.get_state(), before)


# --------------------------------------------- moves: all or nothing ---


def test_a_refused_multistepper_move_moves_no_stepper_state():
    net = make_net(np.float64)
    stepper = two_momentum()
    stepper.start(net)
    state = float64_state(0.1, 1e6)  # 0.1 is not exact in float16
    stepper.set_state(state)
    net.set_handler(NumpyHandler(np.float16))
    provide(net)
    parameters = net.get('parameters').copy()
    with pytest.raises(TrainingValidationError) as info:
        stepper.run()
    message = str(info.value)
    assert 'cannot move' in message
    assert "'steppers.default.part0.velocity'" in message
    assert '1000000.0' in message
    assert 'float16' in message
    np.testing.assert_array_equal(net.get('parameters'), parameters)
    # nothing moved: back on float64, both states are as they were
    net.set_handler(NumpyHandler(np.float64))
    assert_states_equal(stepper.get_state(), state)


# -------------------------------------------- normal paths unchanged ---


@pytest.mark.parametrize(
    'make_stepper',
    [lambda: MomentumStepper(0.1, momentum=0.9), lambda: AdamStepper(0.01)],
    ids=['momentum', 'adam'],
)
def test_a_multistepper_moving_and_restoring_matches_one_stepper(make_stepper):
    nets = [make_net(np.float64), make_net(np.float64)]
    multi = MultiStepper({'A': make_stepper(), 'default': make_stepper()})
    single = make_stepper()
    multi.start(nets[0])
    single.start(nets[1])

    def steps(seed):
        for net, stepper in zip(nets, [multi, single]):
            step(stepper, net, seed)
        np.testing.assert_array_equal(*(net.get('parameters') for net in nets))

    steps(0)
    for dtype in (np.float32, np.float64):  # narrower, then wider
        for net in nets:
            net.set_handler(NumpyHandler(dtype))
        steps(1)
    # a restored state trains on as the one it was taken from
    restored = MultiStepper({'A': make_stepper(), 'default': make_stepper()})
    restored.start(nets[0])
    restored.set_state(multi.get_state())
    for net, stepper in zip(nets, [restored, single]):
        step(stepper, net, 2)
    np.testing.assert_array_equal(*(net.get('parameters') for net in nets))


class LoggingHandler(NumpyHandler):
    """Logs the arrays copied from it and made by it."""

    log: list = []

    def get_numpy_copy(self, mem):
        LoggingHandler.log.append(('copy', self, mem.shape))
        return super().get_numpy_copy(mem)

    def create_from_numpy(self, arr):
        LoggingHandler.log.append(('create', self, arr.shape))
        return super().create_from_numpy(arr)


@pytest.mark.parametrize('new_dtype', [np.float32, np.float64])
def test_a_move_that_cannot_overflow_copies_one_array_at_a_time(new_dtype):
    old, new = LoggingHandler(np.float32), LoggingHandler(new_dtype)
    net = make_net(handler=old)
    stepper = AdamStepper(0.01)  # two state arrays: m and v
    stepper.start(net)
    step(stepper, net)
    net.set_handler(new)
    LoggingHandler.log = []
    state = stepper.get_state()  # moves the state first
    size = net.get('parameters').size
    moves = [
        (kind, shape)
        for kind, handler, shape in LoggingHandler.log
        if (kind, handler) in (('copy', old), ('create', new))
    ]
    # each array is copied to the host and made on the new handler in turn
    assert moves == [('copy', (size,)), ('create', (size,))] * 2
    assert state['part0.m'].dtype == new_dtype
