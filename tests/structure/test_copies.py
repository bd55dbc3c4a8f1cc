"""Copies of networks (deepcopy, pickle, multiprocessing) train like the
original and independently of it (issue 22, point 2)."""

import copy
import multiprocessing
import pickle

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.utils import TrainingValidationError
from tests.training.nets import (
    StopAtUpdate,
    blob_data,
    dropout_net,
    minibatches,
    xor_data,
    xor_net,
)


def _train(net, epochs=15, stepper=None):
    """Train ``net`` on the blob data; return its parameters afterwards."""
    trainer = bs.Trainer(
        stepper or bs.training.MomentumStepper(0.1, 0.9), verbose=False
    )
    trainer.add_hook(bs.hooks.StopAfterEpoch(epochs))
    trainer.train(net, minibatches(blob_data(), shuffle=False))
    return net.get('parameters')


def _copies():
    return {
        'deepcopy': copy.deepcopy,
        'pickle': lambda net: pickle.loads(pickle.dumps(net)),
    }


@pytest.mark.parametrize('how', sorted(_copies()))
def test_a_copy_trains_exactly_like_the_original(how):
    # dropout: the copy must also carry the handler's random state along
    original = dropout_net(seed=3)
    before = original.get('parameters')
    twin = _copies()[how](original)
    np.testing.assert_array_equal(twin.get('parameters'), before)

    trained_copy = _train(twin)
    # the copy trained ...
    assert np.abs(trained_copy - before).max() > 1e-3
    # ... without touching the original
    np.testing.assert_array_equal(original.get('parameters'), before)

    trained_original = _train(original)
    np.testing.assert_array_equal(trained_copy, trained_original)
    # and the original's training left the copy alone
    np.testing.assert_array_equal(twin.get('parameters'), trained_copy)


@pytest.mark.parametrize('how', sorted(_copies()))
def test_a_copy_views_alias_its_own_buffers(how):
    net = xor_net()
    twin = _copies()[how](net)
    flat = twin.buffer_manager.buffers[0]
    for path in ('parameters', 'gradients', 'Hid.parameters.W', 'Hid.gradients.bias'):
        assert np.shares_memory(twin.buffer[path], flat), path
        assert not np.shares_memory(twin.buffer[path], net.buffer_manager.buffers[0])
    twin.buffer.parameters[:] = 7.0
    np.testing.assert_array_equal(twin.get('Hid.parameters.W'), 7.0)
    assert not np.any(net.get('Hid.parameters.W') == 7.0)


def test_a_copy_keeps_the_outputs_of_the_last_pass():
    net = xor_net()
    net.provide_external_data(xor_data())
    net.forward_pass()
    twin = copy.deepcopy(net)
    np.testing.assert_array_equal(
        twin.get('Output.outputs.predictions'), net.get('Output.outputs.predictions')
    )
    assert twin.get_loss_values() == net.get_loss_values()
    twin.forward_pass()
    assert twin.get_loss_values() == net.get_loss_values()


def test_a_snapshot_taken_by_a_hook_trains_on_its_own():
    """A hyper-parameter search branches a network off in mid training."""
    snapshots = []

    class Snapshot(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if epoch_nr == 3:
                snapshots.append((copy.deepcopy(net), net.get('parameters')))

    net = dropout_net(seed=5)
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(Snapshot(timescale='epoch'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(6))
    trainer.train(net, minibatches(blob_data(), shuffle=False))
    ((branch, at_snapshot),) = snapshots
    np.testing.assert_array_equal(branch.get('parameters'), at_snapshot)
    trained = _train(branch, epochs=3, stepper=bs.training.SgdStepper(0.1))
    assert np.abs(trained - at_snapshot).max() > 1e-3
    # plain SGD has no state: the branch took the original's last 3 epochs,
    # dropout masks included (the handler's random state was copied)
    np.testing.assert_array_equal(trained, net.get('parameters'))
    np.testing.assert_array_equal(
        branch.get('Hid1.parameters.W'), net.get('Hid1.parameters.W')
    )


def test_a_started_stepper_copied_with_its_network_steps_the_copy():
    net = xor_net()
    stepper = bs.training.MomentumStepper(0.2, 0.9)
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()  # builds up velocity
    twin_stepper, twin = copy.deepcopy((stepper, net))
    assert twin_stepper.net is twin
    assert np.shares_memory(twin_stepper._parts[0].parameters, twin.buffer.parameters)
    np.testing.assert_array_equal(
        twin_stepper.get_state()['part0.velocity'],
        stepper.get_state()['part0.velocity'],
    )
    before = net.get('parameters')
    for _ in range(3):
        twin_stepper.run()
    np.testing.assert_array_equal(net.get('parameters'), before)
    for _ in range(3):
        stepper.run()
    np.testing.assert_array_equal(twin.get('parameters'), net.get('parameters'))
    assert np.abs(twin.get('parameters') - before).max() > 1e-4


@pytest.mark.parametrize('how', sorted(_copies()))
def test_a_stepper_copied_before_start_is_not_started(how):
    twin = _copies()[how](bs.training.AdamStepper(0.01))
    with pytest.raises(TrainingValidationError, match=r'call start\(net\)'):
        twin.run()
    net = xor_net()
    twin.start(net)
    net.provide_external_data(xor_data())
    before = net.get('parameters')
    twin.run()
    assert np.abs(net.get('parameters') - before).max() > 1e-4


def test_a_trainer_and_network_copied_after_training_continue_alike():
    net = xor_net()
    trainer = bs.Trainer(bs.training.AdamStepper(0.05), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    data = minibatches(xor_data(), batch_size=2, shuffle=False)
    trainer.train(net, data)
    twin_trainer, twin = pickle.loads(pickle.dumps((trainer, net)))
    for t, n in ((twin_trainer, twin), (trainer, net)):
        t.hooks['StopAfterEpoch'].max_epochs = 6
        t.train(n, minibatches(xor_data(), batch_size=2, shuffle=False))
    np.testing.assert_array_equal(twin.get('parameters'), net.get('parameters'))
    assert twin_trainer.current_update_nr == trainer.current_update_nr == 12


def test_a_trainer_cannot_be_copied_while_it_trains():
    errors = []

    class CopyTrainer(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            for how in (copy.deepcopy, pickle.dumps):
                try:
                    how(trainer)
                except TrainingValidationError as err:
                    errors.append(str(err))

    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(CopyTrainer(timescale='update'))
    trainer.add_hook(StopAtUpdate(2))
    trainer.train(xor_net(), minibatches(xor_data(), batch_size=2))
    assert len(errors) == 6  # update 0, 1 and 2, deepcopy and pickle
    assert 'while train() runs' in errors[-1]
    assert 'update 2' in errors[-1]
    assert 'copy.deepcopy(net)' in errors[-1]
    copy.deepcopy(trainer)  # after train() it copies


def _train_in_worker(payload):
    """Run in a worker process: unpickle a network, train it, return it."""
    net = pickle.loads(payload)
    _train(net)
    return pickle.dumps(net)


@pytest.mark.parametrize('method', ['spawn', 'fork'])
def test_a_network_trained_in_a_worker_process_trains(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f'no {method} start method on this platform')
    net = dropout_net(seed=7)
    before = net.get('parameters')
    context = multiprocessing.get_context(method)
    with context.Pool(1) as pool:
        # Pool.apply pickles the argument and the result once more
        trained = pickle.loads(pool.apply(_train_in_worker, (pickle.dumps(net),)))
    assert np.abs(trained.get('parameters') - before).max() > 1e-3
    np.testing.assert_array_equal(net.get('parameters'), before)
    np.testing.assert_array_equal(trained.get('parameters'), _train(net))


@pytest.fixture
def restore_global_rnd():
    state, seed = bs.global_rnd.get_state(), bs.global_rnd.get_seed()
    yield
    bs.global_rnd.set_seed(seed)
    bs.global_rnd.set_state(state)


def default_handler_dropout_net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> bs.layers.Dropout(0.3) >> bs.layers.FullyConnected(6) >> out
    )
    assert net.handler is bs.handlers.default_handler
    net.initialize(bs.initializers.Gaussian(0.3), seed=2)
    return net


@pytest.mark.parametrize('method', ['deepcopy', 'spawn'])
def test_a_copy_on_the_unseeded_default_handler_draws_the_same_masks(
    method, restore_global_rnd
):
    """The default handler draws its stream from global_rnd at first use;
    a copy made before that first use must still draw the same masks."""
    bs.global_rnd.set_seed(17)
    net = default_handler_dropout_net()
    if method == 'deepcopy':
        trained = _train(copy.deepcopy(net))
    else:
        with multiprocessing.get_context('spawn').Pool(1) as pool:
            result = pool.apply(_train_in_worker, (pickle.dumps(net),))
        trained = pickle.loads(result).get('parameters')
    np.testing.assert_array_equal(trained, _train(net))
