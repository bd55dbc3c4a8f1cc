"""The Trainer: hook timing, logs, scorers, evaluate, descriptions."""

import copy
import json
import pickle
import sys
import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches
from brainstorm.hooks import (
    ModifyStepperAttribute,
    MonitorLoss,
    StopAfterEpoch,
)
from brainstorm.scorers import Accuracy
from brainstorm.training import Trainer
from brainstorm.training.schedules import Exponential
from brainstorm.training.steppers import ForwardStepper, SgdStepper
from brainstorm.training.utils import TrainingValidationError, run_network
from brainstorm.utils import IteratorValidationError
from tests.training.nets import (
    Recorder,
    StopAtUpdate,
    blob_data,
    roundtrip,
    undivided,
    xor_data,
    xor_net,
)


def blob_iter(batch_size=10, shuffle=False):
    return Minibatches(batch_size, shuffle=shuffle, **blob_data(30))


def blob_net():
    from brainstorm.initializers import Gaussian
    from brainstorm.layers import FullyConnected
    from brainstorm.structure.network import Network
    from brainstorm.tools import get_in_out_layers

    inp, proj = get_in_out_layers('classification', 4, 3)
    net = Network.from_layer(inp >> FullyConnected(5, name='Hid') >> proj)
    net.initialize(Gaussian(0.3), seed=2)
    net.output_name = 'Output.outputs.predictions'
    return net


def test_hooks_run_at_count_zero_then_per_update_and_epoch():
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Recorder('upd', 'update', calls=calls))
    trainer.add_hook(Recorder('ep', 'epoch', calls=calls))
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(blob_net(), blob_iter())
    assert calls == [
        ('update', 0, 0),
        ('epoch', 0, 0),
        ('update', 1, 1),
        ('update', 1, 2),
        ('update', 1, 3),
        ('epoch', 1, 3),
        ('update', 2, 4),
        ('update', 2, 5),
        ('update', 2, 6),
        ('epoch', 2, 6),
    ]
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (2, 6)


def test_intervals():
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Recorder('upd', 'update', interval=4, calls=calls))
    trainer.add_hook(Recorder('ep', 'epoch', interval=2, calls=calls))
    trainer.add_hook(StopAfterEpoch(3))
    trainer.train(blob_net(), blob_iter())
    assert calls == [
        ('update', 0, 0),
        ('epoch', 0, 0),
        ('update', 2, 4),
        ('epoch', 2, 6),
        ('update', 3, 8),
    ]


def test_stop_at_count_zero_trains_nothing():
    net = blob_net()
    before = net.get('parameters')
    trainer = Trainer(SgdStepper(1.0), verbose=False)
    trainer.add_hook(StopAfterEpoch(0))
    trainer.train(net, blob_iter())
    assert trainer.current_update_nr == 0
    np.testing.assert_array_equal(net.get('parameters'), before)


def test_stop_in_update_hook_ends_the_epoch_after_epoch_hooks():
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(StopAtUpdate(2))
    trainer.add_hook(Recorder('ep', 'epoch', calls=calls))
    trainer.train(blob_net(), blob_iter())
    assert trainer.current_update_nr == 2
    assert calls == [('epoch', 0, 0), ('epoch', 1, 2)]
    assert len(trainer.logs['rolling_training']['total_loss']) == 1


def test_logs_structure():
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.train_scorers = [Accuracy()]
    trainer.add_hook(Recorder('scalar', value=1.5))
    trainer.add_hook(Recorder('nested', value={'a': 1, 'b': {'c': 2}}))
    trainer.add_hook(Recorder('never', value=None))
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(blob_net(), blob_iter())
    logs = trainer.logs
    assert logs['scalar'] == [1.5, 1.5, 1.5]
    assert logs['nested'] == {'a': [1, 1, 1], 'b': {'c': [2, 2, 2]}}
    assert 'never' not in logs
    assert set(logs['rolling_training']) == {'total_loss', 'Accuracy'}
    assert len(logs['rolling_training']['total_loss']) == 2
    assert all(0 <= a <= 1 for a in logs['rolling_training']['Accuracy'])


def test_stop_iteration_value_is_logged():
    class StopWithReason(Recorder):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if epoch_nr == 1:
                raise StopIteration('enough')

    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(StopWithReason('stopper'))
    trainer.train(blob_net(), blob_iter())
    assert trainer.logs['stopper'] == ['enough']
    assert trainer.current_epoch_nr == 1


def test_rolling_training_is_the_weighted_mean_of_batch_losses():
    net = blob_net()
    trainer = Trainer(ForwardStepper(), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    iterator = Minibatches(12, shuffle=False, **blob_data(30))
    trainer.train(net, iterator)
    losses, sizes = [], []
    for _ in run_network(net, iterator):
        net.forward_pass()
        losses.append(net.get_loss_values()['total_loss'])
        sizes.append(net.buffer_manager.batch_size)
    expected = np.dot(losses, sizes) / np.sum(sizes)
    assert trainer.logs['rolling_training']['total_loss'] == [
        pytest.approx(expected, rel=1e-6)
    ]


def test_forward_stepper_in_trainer_leaves_parameters():
    net = blob_net()
    before = net.get('parameters')
    trainer = Trainer(ForwardStepper(), verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(net, blob_iter())
    np.testing.assert_array_equal(net.get('parameters'), before)
    assert trainer.logs['rolling_training']['total_loss'][0] > 0


def test_second_train_call_continues_counting():
    """0.5 Note: counters are never reset. Ours: a second call continues
    the run (no second emission at count 0) with the next epoch."""
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Recorder('ep', 'epoch', calls=calls))
    trainer.add_hook(StopAfterEpoch(1))
    net = blob_net()
    trainer.train(net, blob_iter())
    trainer.hooks['StopAfterEpoch'].max_epochs = 3
    trainer.train(net, blob_iter())
    assert calls == [('epoch', 0, 0), ('epoch', 1, 3), ('epoch', 2, 6), ('epoch', 3, 9)]
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (3, 9)
    # without raising the limit, another call trains one more epoch
    trainer.train(net, blob_iter())
    assert trainer.current_epoch_nr == 4


def test_weight_modifiers_are_applied_after_each_update():
    from brainstorm.value_modifiers import ClipValues

    net = blob_net()
    net.set_weight_modifiers(Hid={'W': ClipValues(-0.01, 0.01)})
    trainer = Trainer(SgdStepper(1.0), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(net, blob_iter())
    assert np.abs(net.get('Hid.parameters.W')).max() <= 0.01 + 1e-7


def test_schedule_applies_at_count_zero():
    stepper = SgdStepper(1.0)
    seen = []

    class Spy(Recorder):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            seen.append((epoch_nr, stepper.learning_rate))

    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(ModifyStepperAttribute(Exponential(0.1, 0.5)))
    trainer.add_hook(Spy('spy'))
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(blob_net(), blob_iter())
    assert seen == [(0, 0.1), (1, 0.05), (2, 0.025)]


def test_evaluate_logs_into_results():
    calls = []
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Recorder('upd', 'update', value=3, calls=calls))
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    net = blob_net()
    results = trainer.evaluate(net, valid=blob_iter())
    assert results is trainer.results
    assert calls == [('update', 0, 0)]
    assert results['upd'] == [3]
    assert results['validation']['total_loss'][0] > 0
    assert trainer.logs == {}


# ------------------------------------------------------------------ hooks ---


def test_add_hook_priorities_and_duplicates():
    trainer = Trainer(SgdStepper())
    a, b = Recorder('a'), Recorder('b')
    trainer.add_hook(a)
    trainer.add_hook(b)
    assert (a.priority, b.priority) == (1, 2)
    assert list(trainer.hooks) == ['a', 'b']
    with pytest.raises(ValueError, match="named 'a'"):
        trainer.add_hook(Recorder('a'))


def test_hook_errors_name_the_hook(capsys):
    class Broken(Recorder):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            raise RuntimeError('boom')

    trainer = Trainer(SgdStepper(), verbose=False)
    trainer.add_hook(Broken('broken_hook'))
    with pytest.raises(RuntimeError, match='boom') as info:
        trainer.train(blob_net(), blob_iter())
    assert "'broken_hook'" in capsys.readouterr().err
    if sys.version_info >= (3, 11):  # exceptions take notes from 3.11 on
        notes = info.value.__notes__
        assert any(
            "Raised in hook 'broken_hook' (Broken) during its epoch call" in note
            for note in notes
        ), notes


def test_hook_start_errors_name_the_hook(capsys):
    trainer = Trainer(SgdStepper(), verbose=False)
    trainer.add_hook(MonitorLoss('missing', name='val_monitor'))
    with pytest.raises(KeyError, match="'missing'"):
        trainer.train(blob_net(), blob_iter())
    assert "'val_monitor'" in capsys.readouterr().err


def test_verbose_hooks_print_results(capsys):
    trainer = Trainer(SgdStepper(), verbose=True)
    trainer.add_hook(Recorder('talker', value={'x': 0.5}))
    trainer.add_hook(StopAfterEpoch(1, verbose=False))
    trainer.train(blob_net(), blob_iter())
    out = capsys.readouterr().out
    assert 'talker >> x: 0.5' in out
    assert 'Epoch 1' in out
    quiet = Trainer(SgdStepper(), verbose=False)
    quiet.add_hook(Recorder('talker', value={'x': 0.5}))
    quiet.add_hook(StopAfterEpoch(1))
    quiet.train(blob_net(), blob_iter())
    assert capsys.readouterr().out == ''


# -------------------------------------------------------------- iterators ---


def test_iterator_names_must_match_the_inputs():
    trainer = Trainer(SgdStepper(), verbose=False)
    data = blob_data(10)
    bad = Minibatches(5, inputs=data['default'], targets=data['targets'])
    with pytest.raises(
        IteratorValidationError, match=r"'training_data_iter' provides data \['inputs'"
    ):
        trainer.train(blob_net(), bad)
    with pytest.raises(IteratorValidationError, match="'valid'"):
        trainer.train(blob_net(), blob_iter(), valid=bad)
    with pytest.raises(IteratorValidationError, match='DataIterator'):
        trainer.train(blob_net(), [1, 2])


def test_run_network_provides_each_batch():
    net = blob_net()
    data = blob_data(30)
    seen = []
    for i in run_network(net, Minibatches(10, shuffle=False, **data)):
        seen.append((i, net.get_input('default').copy()))
    assert [i for i, _ in seen] == [0, 1, 2]
    np.testing.assert_allclose(seen[1][1], data['default'][:, 10:20])


def test_bad_stepper():
    with pytest.raises(TrainingValidationError, match='stepper'):
        Trainer('sgd')


# ------------------------------------------------------------ description ---


def test_description_round_trip():
    trainer = Trainer(SgdStepper(0.2), verbose=False)
    trainer.add_hook(StopAfterEpoch(3, name='stop'))
    trainer.add_hook(MonitorLoss('valid', name='validation', interval=2))
    trainer.train_scorers = [Accuracy()]
    trainer.train(xor_net(), undivided(xor_data()), valid=undivided(xor_data()))
    description = bs.get_description(trainer)
    assert description['verbose'] is False
    assert [h['priority'] for h in description['hooks'].values()] == [1, 2]
    copy = roundtrip(trainer)
    assert bs.get_description(copy) == description
    assert (copy.current_epoch_nr, copy.current_update_nr) == (0, 0)
    assert copy.logs == {} and copy.results == {}
    assert list(copy.hooks) == ['stop', 'validation']
    # the recreated trainer trains
    copy.train(xor_net(), undivided(xor_data()), valid=undivided(xor_data()))
    assert copy.current_epoch_nr == 3


def test_description_omits_default_verbose_and_reorders_hooks():
    trainer = Trainer(SgdStepper())
    trainer.add_hook(StopAfterEpoch(3, name='first'))
    trainer.add_hook(StopAfterEpoch(4, name='second'))
    description = bs.get_description(trainer)
    assert 'verbose' not in description
    text = json.dumps(description)
    loaded = json.loads(text)
    loaded['hooks'] = {
        'renamed': loaded['hooks']['second'],
        'first': loaded['hooks']['first'],
    }
    copy = bs.create_from_description(loaded)
    assert list(copy.hooks) == ['first', 'renamed']
    assert copy.hooks['renamed'].__name__ == 'renamed'
    assert copy.verbose is True


def test_monitor_hooks_do_not_embed_data_in_description():
    """0.5 Note: MonitorLoss kept its iterator, so the trainer description
    held the whole data set. Ours keeps only the iterator's name."""
    big = np.random.RandomState(0).randn(1, 500, 4)
    trainer = Trainer(SgdStepper(), verbose=False)
    trainer.add_hook(MonitorLoss('valid'))
    trainer.add_hook(StopAfterEpoch(0))
    valid = Minibatches(50, default=big, targets=np.zeros((1, 500, 1)))
    trainer.train(blob_net(), blob_iter(), valid=valid)
    assert trainer.hooks['MonitorLoss'].iter is valid
    description = bs.get_description(trainer)
    assert description['hooks']['MonitorLoss']['iter_name'] == 'valid'
    assert len(json.dumps(description)) < 1000


def test_rolling_training_restarts_each_epoch():
    """Entry k of rolling_training is the batch-size-weighted mean of epoch
    k's batch losses, over three epochs of changing parameters. (Guards
    against: not resetting the epoch's running scores, which logs a
    cumulative mean that EarlyStopper, SaveBestNetwork and ReduceOnPlateau
    would then act on.)"""
    from brainstorm.hooks import Hook

    class BatchLosses(Hook):
        def __init__(self):
            super().__init__('batch_losses', 'update', 1)
            self.seen = []

        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if update_nr > 0:
                self.seen.append(
                    (
                        epoch_nr,
                        net.get_loss_values()['total_loss'],
                        net.buffer_manager.batch_size,
                    )
                )

    recorder = BatchLosses()
    trainer = Trainer(SgdStepper(0.5), verbose=False)
    trainer.add_hook(recorder)
    trainer.add_hook(StopAfterEpoch(3))
    trainer.train(blob_net(), Minibatches(12, shuffle=False, **blob_data(30)))
    expected = []
    for epoch in (1, 2, 3):
        rows = [(loss, size) for e, loss, size in recorder.seen if e == epoch]
        assert [size for _, size in rows] == [12, 12, 6]
        losses, sizes = zip(*rows)
        expected.append(np.dot(losses, sizes) / np.sum(sizes))
    assert len(set(np.round(expected, 6))) == 3, 'losses must change'
    np.testing.assert_allclose(
        trainer.logs['rolling_training']['total_loss'], expected, rtol=1e-6
    )


def test_second_train_call_starts_the_stepper_again_as_in_05():
    """Documented on Trainer: counters and logs go on, the stepper state
    (here the momentum velocity) begins from zero, its attributes stay."""
    from brainstorm.training.steppers import MomentumStepper

    seen = []

    class SeesStepper(bs.hooks.Hook):
        def start(self, net, stepper, verbose, named_data_iters):
            super().start(net, stepper, verbose, named_data_iters)
            seen.append(np.array(stepper.get_state()['part0.velocity']))

        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            return None

    stepper = MomentumStepper(0.1, momentum=0.9)
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(SeesStepper('sees'))
    trainer.add_hook(StopAfterEpoch(1))
    net = blob_net()
    trainer.train(net, blob_iter())
    assert np.abs(stepper.get_state()['part0.velocity']).max() > 0
    stepper.learning_rate = 0.05
    trainer.hooks['StopAfterEpoch'].max_epochs = 2
    trainer.train(net, blob_iter())
    assert len(seen) == 2
    assert not seen[1].any()  # started again: zero velocity
    assert stepper.learning_rate == 0.05
    assert trainer.current_epoch_nr == 2
    assert len(trainer.logs['rolling_training']['total_loss']) == 2


@pytest.mark.parametrize('when', ['update', 'epoch', 'start', 'evaluate'])
def test_add_hook_while_training_is_refused_at_once(when):
    """Adding a hook from inside a hook raises a clear error at the
    add_hook call (it used to add an unstarted hook that failed later with
    a TypeError); training ends with that error, and afterwards hooks can
    be added again."""
    attempts = []

    class Adds(bs.hooks.Hook):
        def _add(self):
            late = MonitorLoss('training_data_iter', name='late', timescale='update')
            try:
                trainer.add_hook(late)
            except TrainingValidationError as err:
                attempts.append(str(err))
                raise

        def start(self, net, stepper, verbose, named_data_iters):
            super().start(net, stepper, verbose, named_data_iters)
            if when == 'start':
                self._add()

        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if when == 'evaluate' or (when == 'update' and update_nr == 1):
                self._add()
            if when == 'epoch' and epoch_nr == 1:
                self._add()

    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Adds('adds', 'epoch' if when == 'epoch' else 'update'))
    trainer.add_hook(StopAfterEpoch(2))
    net = blob_net()
    with pytest.raises(TrainingValidationError, match="cannot add hook 'late'"):
        if when == 'evaluate':
            trainer.evaluate(net, training_data_iter=blob_iter())
        else:
            trainer.train(net, blob_iter())
    assert len(attempts) == 1 and 'while train() or evaluate() runs' in attempts[0]
    assert 'late' not in trainer.hooks
    trainer.add_hook(MonitorLoss('training_data_iter', name='late'))
    assert 'late' in trainer.hooks


_COPIES: list = []


class CopiesTheTrainer(bs.hooks.Hook):
    """Copies and pickles ``self.trainer`` into ``_COPIES`` when called."""

    trainer = None

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        _COPIES.append(copy.deepcopy(self.trainer))
        _COPIES.append(pickle.loads(pickle.dumps(self.trainer)))


def test_a_copy_made_while_evaluate_runs_accepts_hooks():
    """A trainer copied (or pickled) from a hook during evaluate() is not
    running: the copy accepts hooks. The running flag used to be copied
    with the trainer, and the copy refused every hook for good."""
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    hook = CopiesTheTrainer('copies')
    hook.trainer = trainer
    trainer.add_hook(hook)
    _COPIES.clear()
    trainer.evaluate(blob_net())
    assert len(_COPIES) == 2
    for other in _COPIES:
        other.add_hook(StopAfterEpoch(1))
        assert list(other.hooks) == ['copies', 'StopAfterEpoch']
    _COPIES.clear()


def test_evaluate_in_a_thread_ending_after_train_leaves_the_trainer_free():
    """train() in one thread and evaluate() in another, overlapping, with
    evaluate ending last: afterwards hooks can be added again. Each call
    used to save the running flag on entry and put it back on exit, so
    evaluate put back the True it had seen while train ran."""
    wait = 30  # seconds; only reached if a thread dies
    train_paused, go_on_training = threading.Event(), threading.Event()
    evaluate_paused, go_on_evaluating = threading.Event(), threading.Event()
    trainer_thread = []

    class Pauses(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if threading.current_thread() is trainer_thread[0]:
                if update_nr == 2:
                    train_paused.set()
                    assert go_on_training.wait(wait)
            elif not evaluate_paused.is_set():
                evaluate_paused.set()
                assert go_on_evaluating.wait(wait)

    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(Pauses('pauses', 'update'))
    trainer.add_hook(StopAfterEpoch(1))
    errors = []

    def guarded(call):
        def run():
            try:
                call()
            except BaseException as err:  # reported below
                errors.append(err)

        return threading.Thread(target=run, daemon=True)

    training = guarded(lambda: trainer.train(blob_net(), blob_iter()))
    evaluating = guarded(lambda: trainer.evaluate(blob_net()))
    trainer_thread.append(training)
    training.start()
    try:
        assert train_paused.wait(wait)
        evaluating.start()
        assert evaluate_paused.wait(wait)
    finally:
        go_on_training.set()
        training.join(wait)
        go_on_evaluating.set()
        evaluating.join(wait)
    assert not errors
    assert trainer.current_epoch_nr == 1
    trainer.add_hook(MonitorLoss('training_data_iter', name='late'))
    assert 'late' in trainer.hooks
