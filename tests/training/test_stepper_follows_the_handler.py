"""A started stepper goes on training after ``net.set_handler``.

The stepper's parts viewed the old parameter memory, which ``set_handler``
replaces: the parameters never changed again, silently (from a hook in
``Trainer.train`` too). Now the parts are bound anew with their state
carried over, so a run that moves to another handler midway equals one
that never moved.
"""

import copy

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.training import steppers as S

STEPPERS = {
    'sgd': lambda: S.SgdStepper(0.3),
    'momentum': lambda: S.MomentumStepper(0.1, momentum=0.9),
    'adam': lambda: S.AdamStepper(0.01),
    'multi': lambda: S.MultiStepper(
        {'H1': S.AdamStepper(0.01), 'default': S.MomentumStepper(0.1)}
    ),
}


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.FullyConnected(5, activation='tanh', name='H1')
        >> bs.layers.FullyConnected(5, activation='tanh', name='H2')
        >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=2)
    return net


def _data(step):
    rng = np.random.default_rng(step)
    return {
        'default': rng.normal(size=(1, 6, 4)),
        'targets': rng.integers(0, 3, size=(1, 6, 1)),
    }


def _train(stepper, net, steps, switch_at=None):
    stepper.start(net)
    for step in range(steps):
        if step == switch_at:
            net.set_handler(NumpyHandler(np.float64))  # another handler object
        net.provide_external_data(_data(step))
        stepper.run()
    return net.get('parameters')


@pytest.mark.parametrize('name', sorted(STEPPERS))
def test_a_stepper_goes_on_exactly_after_set_handler(name):
    expected = _train(STEPPERS[name](), _net(), 6)
    moved = _train(STEPPERS[name](), _net(), 6, switch_at=3)
    np.testing.assert_array_equal(moved, expected)


def test_training_goes_on_after_a_hook_moves_the_network():
    class Move(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if epoch_nr == 1:
                net.set_handler(NumpyHandler(np.float32))
                self.moved = net.get('parameters')

    data = _data(0)
    iterator = bs.data_iterators.Minibatches(3, **data)
    trainer = bs.Trainer(S.MomentumStepper(0.3), verbose=False)
    hook = Move()
    trainer.add_hook(hook)
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    net = _net()
    trainer.train(net, iterator)
    assert net.handler.dtype == np.float32
    assert not np.array_equal(net.get('parameters'), hook.moved)  # trained on
    losses = trainer.logs['rolling_training']['total_loss']
    assert losses[2] < losses[1]


def test_a_moved_stepper_reports_and_restores_its_state():
    stepper, net = S.MomentumStepper(0.1), _net()
    _train(stepper, net, 2)
    state = stepper.get_state()
    net.set_handler(NumpyHandler(np.float64))
    np.testing.assert_array_equal(
        stepper.get_state()['part0.velocity'], state['part0.velocity']
    )
    stepper.set_state(state)
    net.provide_external_data(_data(5))
    before = net.get('parameters')
    stepper.run()
    assert not np.array_equal(net.get('parameters'), before)


@pytest.mark.parametrize('name', sorted(STEPPERS))
def test_new_batch_sizes_keep_the_parts_and_allocate_nothing(name):
    """Only a move of the memory rebinds the parts: a new batch size or
    sequence length makes new views of the same memory, and rebinding
    then copied the whole state through NumPy in every such step."""
    from tests.training.nets import CountingHandler

    net = _net()
    handler = CountingHandler(np.float64, seed=1)
    net.set_handler(handler)
    stepper = STEPPERS[name]()
    stepper.start(net)
    sizes = [(1, 6), (1, 5), (2, 6), (1, 6), (2, 5)]
    for T, B in sizes:  # every shape met once: the network's buffers
        net.provide_external_data(
            {'default': np.ones((T, B, 4)), 'targets': np.zeros((T, B, 1))}
        )
        stepper.run()
    parts = [id(p) for p in stepper._parts]
    handler.allocations = 0
    for T, B in sizes:
        net.provide_external_data(
            {'default': np.ones((T, B, 4)), 'targets': np.zeros((T, B, 1))}
        )
        stepper.run()
    assert [id(p) for p in stepper._parts] == parts
    assert handler.allocations == 0


@pytest.mark.parametrize(
    'move',
    [
        lambda net: net.buffer_manager.set_handler(NumpyHandler(np.float64)),
        lambda net: copy.copy(net).set_handler(NumpyHandler(np.float64)),
    ],
    ids=['buffer manager', 'shallow copy'],
)
@pytest.mark.parametrize('name', sorted(STEPPERS))
def test_a_stepper_follows_every_move_of_the_memory(name, move):
    """Also a move that does not go through the network's own set_handler
    (its buffer manager's; a shallow copy's, which shares the memory)."""
    expected = _train(STEPPERS[name](), _net(), 4)
    stepper, net = STEPPERS[name](), _net()
    stepper.start(net)
    for step in range(4):
        if step == 2:
            move(net)
        net.provide_external_data(_data(step))
        stepper.run()
    np.testing.assert_array_equal(net.get('parameters'), expected)


def test_a_multi_stepper_moved_before_its_first_step_clips_the_new_gradients():
    """Its own part (for the global clip_norm) was never bound anew: the
    norm read the old, zero gradients and clipping never acted."""
    reference = S.MultiStepper({'default': S.SgdStepper(0.1)}, clip_norm=1e6)
    net = _net()
    reference.start(net)
    net.provide_external_data(_data(0))
    reference.run()
    moved = S.MultiStepper({'default': S.SgdStepper(0.1)}, clip_norm=1e6)
    net = _net()
    moved.start(net)
    net.set_handler(NumpyHandler(np.float64))
    net.provide_external_data(_data(0))
    moved.run()
    assert moved.last_gradient_norm == reference.last_gradient_norm > 0


@pytest.mark.parametrize('to_debug', [True, False])
def test_the_finite_check_follows_the_network_to_another_kind_of_array(to_debug):
    """The trainer's finite check kept views of the memory of the start:
    after a move to a DebugHandler (arrays that are no NumPy arrays) it
    failed with a TypeError, and after a move back it read stale memory."""
    from brainstorm.handlers import DebugHandler

    def make(debug):
        inner = NumpyHandler(np.float64)
        return DebugHandler(inner) if debug else inner

    class Move(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if epoch_nr == 1:
                net.set_handler(make(to_debug))

    net = _net()
    net.set_handler(make(not to_debug))
    trainer = bs.Trainer(S.SgdStepper(0.1), verbose=False)
    trainer.add_hook(Move())
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    trainer.train(net, bs.data_iterators.Minibatches(3, **_data(0)))
    assert trainer.current_epoch_nr == 3


def test_a_stepper_is_not_fooled_by_a_new_array_of_the_old_id():
    """Keyed on the id of the constant array, a wrapper array freed by a
    move (a DebugHandler's: its views keep only the inner array) could
    be followed by a new one of the same id after moves away and back;
    the stepper then kept updating the dead memory, silently."""
    from brainstorm.handlers import DebugHandler

    net = _net()
    debug = DebugHandler(NumpyHandler(np.float64))
    net.set_handler(debug)
    stepper = S.MomentumStepper(0.1, momentum=0.9)
    stepper.start(net)
    for step in range(300):
        net.provide_external_data(_data(step % 3))
        before = net.get('parameters')
        stepper.run()
        assert not np.array_equal(net.get('parameters'), before), step
        away = DebugHandler(NumpyHandler(np.float64)) if step % 2 else None
        net.set_handler(away or NumpyHandler(np.float64))
        net.set_handler(debug)  # back to the same handler object
