"""The rules of the hook base class at their edges.

``brainstorm/hooks/base.py`` says which log names a hook accepts (one
non-empty dotted name or a list of them), when a missing log is still
waited for (at epoch 0, and through epoch 1 for an update hook) and when
it is refused, that a log must be a list whose entries are numbers (a
0-d array and NumPy scalars count), where a watching hook goes on reading
a log, and how a hook's priority and description behave in a user's
subclass. A gap there runs a hook at the wrong update or epoch, reads
another log than the one named or takes an entry that is no number, and a
run stops, saves or schedules at the wrong time without a word.
"""

import numpy as np
import pytest

from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.errors import TrainingValidationError, UnknownNameError
from brainstorm.hooks import EarlyStopper, Hook, SaveLogsCSV, SavePlot, StopOnNan
from brainstorm.training.steppers import SgdStepper


def _early_stopper_run(log, **kwargs):
    """Call an EarlyStopper on the growing ``log``; the epoch it stops at.

    None if it never stops.
    """
    hook = EarlyStopper('val.loss', verbose=False, **kwargs)
    hook.start(None, SgdStepper(), False, {})
    for epoch in range(1, len(log) + 1):
        try:
            hook(epoch, epoch, None, None, {'val': {'loss': list(log[:epoch])}})
        except StopIteration:
            return epoch
    return None


# -------------------------------------------------------------- log names ---


@pytest.mark.parametrize('log_names', ['', ['a.b', '']])
def test_a_hook_taking_log_names_refuses_an_empty_name(log_names, tmp_path):
    with pytest.raises(TrainingValidationError, match='log_names'):
        SaveLogsCSV(str(tmp_path / 'logs.csv'), log_names=log_names)
    with pytest.raises(TrainingValidationError, match='logs_to_check'):
        StopOnNan(logs_to_check=log_names)


@pytest.mark.parametrize('log_names', ['', ['a.b', ''], []])
def test_a_hook_needing_some_log_names_refuses_none_and_empty_ones(log_names, tmp_path):
    with pytest.raises(TrainingValidationError, match='log_names'):
        SavePlot(str(tmp_path / 'plot.png'), log_names)


def test_a_hook_taking_log_names_keeps_one_name_or_a_list_as_a_list(tmp_path):
    assert StopOnNan(logs_to_check='a.b').logs_to_check == ['a.b']
    assert StopOnNan(logs_to_check=('a.b', 'c')).logs_to_check == ['a.b', 'c']
    assert SavePlot(str(tmp_path / 'p.png'), 'x').log_names == ['x']


# ---------------------------------------------------------- log entries ---


@pytest.mark.parametrize(
    'value',
    [np.array(0.5), np.array(2, dtype=np.int64), np.float32(0.5), np.int16(2), 3],
)
def test_a_zero_dimensional_array_or_numpy_scalar_is_a_number(value):
    # the entry is taken as the number it holds: it is the best entry, and
    # the stopper waits its patience of 2 after it
    assert _early_stopper_run([5.0, value, 9.0, 9.0], patience=2) == 4


# ------------------------------------------------- priority, descriptions ---


def test_priority_is_no_constructor_argument_of_a_hook():
    # the trainer sets a hook's priority; a user's hook may take an argument
    # of that name for something else, unchecked by the hook's declaration
    class Urgent(Hook):
        def __init__(self, priority='high'):
            super().__init__()
            self.urgency = priority

    hook = Urgent(priority='high')
    assert hook.urgency == 'high' and hook.priority == 0
    assert Urgent().urgency == 'high'


class _Counting(Describable):
    """A mixin that finishes its own part of a restored object."""

    def __init_from_description__(self, description):
        super().__init_from_description__(description)
        self.restored_parts = ['counting']


class _CountingHook(Hook, _Counting):
    """A user's hook whose other base restores something too."""


def test_restoring_a_hook_lets_its_other_bases_finish_their_part():
    restored = create_from_description(get_description(_CountingHook(name='c')))
    assert restored.restored_parts == ['counting']
    assert restored.__name__ == 'c'


# ------------------------------------------------------------ missing logs ---


def _call_on(hook, logs, epoch_nr):
    hook.start(None, SgdStepper(), False, {})
    return hook(epoch_nr, epoch_nr, None, None, logs)


def test_a_log_missing_at_epoch_0_is_waited_for():
    # monitors run at epoch 0 before any training log exists
    hook = EarlyStopper('val.loss', verbose=False)
    assert _call_on(hook, {'rolling_training': {'total_loss': []}}, 0) is None


def test_an_epoch_hook_refuses_a_log_still_missing_at_epoch_1():
    hook = EarlyStopper('val.loss', verbose=False)
    logs = {'rolling_training': {'total_loss': [0.5]}, 'val': {'acc': [1.0]}}
    with pytest.raises(UnknownNameError) as info:
        _call_on(hook, logs, 1)
    message = str(info.value)
    assert "'val.loss'" in message and 'epoch 1' in message
    assert "['rolling_training.total_loss', 'val.acc']" in message


def test_an_update_hook_waits_for_a_log_through_epoch_1_only():
    # an update hook is called during the first epoch, before the epoch's
    # logs are written; from epoch 2 on a missing log is refused
    hook = EarlyStopper('val.loss', timescale='update', verbose=False)
    assert _call_on(hook, {}, 1) is None
    with pytest.raises(UnknownNameError, match="'val.loss'"):
        _call_on(hook, {}, 2)


def test_a_log_that_is_no_list_is_refused_naming_what_it_is():
    hook = EarlyStopper('val.loss', verbose=False)
    with pytest.raises(TrainingValidationError, match='not a list of values'):
        _call_on(hook, {'val': {'loss': 0.5}}, 1)


def test_a_plotted_log_is_checked_from_its_first_entry(tmp_path):
    pytest.importorskip('matplotlib')
    hook = SavePlot(str(tmp_path / 'plot.png'), 'val.loss')
    with pytest.raises(TrainingValidationError, match='at entry 0'):
        _call_on(hook, {'val': {'loss': ['high', 0.5]}}, 1)
    assert not (tmp_path / 'plot.png').exists()


# ------------------------------------------------------ reading a log again ---


class _ReadLog(list):
    """A log that records which entries were read (by index or iteration)."""

    def __init__(self, values):
        super().__init__(values)
        self.read = set()

    def __getitem__(self, item):
        indices = range(len(self))[item]
        self.read.update(indices if isinstance(item, slice) else [indices])
        return super().__getitem__(item)

    def __iter__(self):
        self.read.update(range(len(self)))
        return super().__iter__()


def test_a_call_on_a_log_without_new_entries_reads_none_of_it():
    # a watching hook reads only what was appended since its last call,
    # also where nothing was: it goes on where it stood, not from entry 0
    hook = EarlyStopper('val.loss', patience=10, verbose=False)
    log = _ReadLog([0.5, 0.4, 0.3])
    assert _call_on(hook, {'val': {'loss': log}}, 3) is None
    assert log.read == {0, 1, 2}
    log.read.clear()
    assert _call_on(hook, {'val': {'loss': log}}, 4) is None
    assert log.read == set()
    log.append(0.2)
    assert _call_on(hook, {'val': {'loss': log}}, 5) is None
    assert log.read == {3}
