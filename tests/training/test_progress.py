"""The training progress record: what it holds, how the trainer keeps it,
and that only the trainer touches a trainer's private attributes."""

import pathlib
import pickle
import re

import pytest

import brainstorm as bs
from brainstorm.training import Trainer
from brainstorm.training.progress import INITIAL_ROUNDS, TrainingProgress
from brainstorm.training.steppers import SgdStepper
from tests.training.nets import Recorder, blob_data, minibatches

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / 'brainstorm'


def test_a_new_record_is_before_any_training():
    progress = TrainingProgress()
    assert (progress.epoch_nr, progress.update_nr) == (0, 0)
    assert (progress.started, progress.initial_done) == (False, ())
    assert progress.initial_rounds_begun is False
    assert progress.epoch_complete is True
    assert progress.batches_done == 0 and progress.epoch_scores == {}
    assert progress.epoch_start_iterator_states is None
    assert progress.training_states_now is None and progress.resume is None


def test_the_rounds_at_count_0_are_recorded_in_their_order():
    progress = TrainingProgress()
    assert progress.begin_initial_round('update') is True
    assert progress.initial_done == ('update',)
    assert progress.begin_initial_round('update') is False
    assert progress.initial_rounds_begun is False
    assert progress.begin_initial_round('epoch') is True
    assert progress.initial_done == INITIAL_ROUNDS == ('update', 'epoch')
    # a checkpoint written in the last round goes on after it
    assert progress.initial_rounds_begun is True
    assert progress.begin_initial_round('epoch') is False
    assert progress.initial_done == ('update', 'epoch')


def test_an_epoch_begins_at_its_first_batch_and_a_run_forgets_the_position():
    progress = TrainingProgress()
    progress.batches_done, progress.epoch_scores = 4, {'a': 1}
    states = {'training_data_iter': [None]}
    progress.begin_epoch(states)
    assert progress.epoch_nr == 1 and progress.epoch_complete is False
    assert progress.batches_done == 0 and progress.epoch_scores == {}
    assert progress.epoch_start_iterator_states is states
    progress.batches_done = 3
    progress.training_states_now = [None]
    progress.begin_run()
    assert progress.epoch_complete is True and progress.batches_done == 0
    assert progress.epoch_start_iterator_states is None
    assert progress.training_states_now is None
    assert progress.epoch_nr == 1  # counters are kept


def test_the_trainer_counts_in_its_record():
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    calls = []
    trainer.add_hook(Recorder('rec', timescale='update', calls=calls))
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    net = bs.tools.create_net_from_spec('classification', 4, 3, 'F5')
    trainer.train(net, minibatches(blob_data(24), shuffle=False))
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (2, 6)
    assert calls[-1] == ('update', 2, 6)
    # the public counters stay settable, as in Brainstorm 0.5
    trainer.current_epoch_nr, trainer.current_update_nr = 7, 70
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (7, 70)
    # not part of the description
    description = bs.get_description(trainer)
    assert not {'current_epoch_nr', 'current_update_nr', '_progress'} & set(description)
    restored = bs.create_from_description(description)
    assert (restored.current_epoch_nr, restored.current_update_nr) == (0, 0)


@pytest.mark.parametrize('started', [False, True])
def test_a_trainer_pickled_before_the_record_still_loads(started):
    """Trainers pickled by earlier versions kept the counters and flags on
    themselves; unpickled now, they go on counting where they were."""
    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    state = dict(trainer.__dict__)
    del state['_progress']
    state.update(
        current_epoch_nr=2 if started else 0,
        current_update_nr=6 if started else 0,
        _started=started,
        _initial_done=('update', 'epoch') if started else (),
        _resume=None,
        _running=False,
    )
    old = Trainer.__new__(Trainer)
    old.__setstate__(state)
    old = pickle.loads(pickle.dumps(old))
    assert '_running' not in vars(old)
    net = bs.tools.create_net_from_spec('classification', 4, 3, 'F5')
    calls = []
    old.add_hook(Recorder('rec', timescale='epoch', calls=calls))
    old.train(net, minibatches(blob_data(24), shuffle=False))
    expected = [3] if started else [0, 1, 2, 3]
    assert [epoch for _, epoch, _ in calls] == expected
    assert old.current_update_nr == 9


def test_no_module_but_the_trainer_touches_a_trainers_private_attributes():
    """The checkpoint and every other module go through the progress
    record (issue 23, point 4): ``trainer._x`` or ``tr._x`` appears only
    in trainer.py."""
    pattern = re.compile(r'\b(?:trainer|tr)\._')
    found = [
        f'{path.relative_to(PACKAGE.parent)}:{nr}: {line.strip()}'
        for path in sorted(PACKAGE.rglob('*.py'))
        if path.name != 'trainer.py' or path.parent.name != 'training'
        for nr, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert found == []


def test_entries_an_old_trainer_state_lacks_are_those_of_a_new_trainer():
    progress = TrainingProgress.from_old_trainer_state({})
    fresh = TrainingProgress()
    assert (progress.epoch_nr, progress.update_nr) == (0, 0)
    assert (progress.started, progress.initial_done) == (False, ())
    assert progress.resume is None
    assert progress.initial_rounds_begun is fresh.initial_rounds_begun is False


@pytest.mark.parametrize('how', ['deepcopy', 'pickle'])
def test_a_copied_trainer_keeps_its_record_and_counts_on(how):
    import copy

    trainer = Trainer(SgdStepper(0.01), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    net = bs.tools.create_net_from_spec('classification', 4, 3, 'F5')
    trainer.train(net, minibatches(blob_data(24), shuffle=False))
    if how == 'deepcopy':
        copied = copy.deepcopy(trainer)
    else:
        copied = pickle.loads(pickle.dumps(trainer))
    assert (copied.current_epoch_nr, copied.current_update_nr) == (2, 6)
    assert copied._progress.started is True
    assert copied._progress.initial_done == INITIAL_ROUNDS
    calls = []
    copied.add_hook(Recorder('rec', timescale='epoch', calls=calls))
    copied.hooks['StopAfterEpoch'].max_epochs = 3
    copied.train(net, minibatches(blob_data(24), shuffle=False))
    assert [epoch for _, epoch, _ in calls] == [3]  # no second round at 0
    assert copied.current_update_nr == 9
