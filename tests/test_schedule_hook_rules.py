"""Rules of the hooks that change stepper hyperparameters during training
(brainstorm/hooks/schedules.py): which attribute a path reaches, when and
by how much it changes; each stated at its edge, so that mutation testing
(tools/mutation.py) finds no gap."""

import pytest

from brainstorm.errors import TrainingValidationError, UnknownNameError
from brainstorm.hooks import ModifyStepperAttribute, ReduceOnPlateau
from brainstorm.training import AdamStepper, MultiStepper, SgdStepper
from brainstorm.training.schedules import Linear
from tests.training.nets import xor_net


def start_and_call(hook, stepper, logs=None, epoch_nr=1, update_nr=1):
    net = xor_net()
    hook.start(net, stepper, False, {})
    return hook(epoch_nr, update_nr, net, stepper, {} if logs is None else logs)


@pytest.mark.parametrize('value', [5, None, ''])
@pytest.mark.parametrize('kind', ['modify', 'plateau'])
def test_an_attr_name_set_after_construction_must_be_a_nonempty_str(kind, value):
    """The declaration checks attr_name at construction; one set later is
    checked when the hook starts, with the same message (not an
    AttributeError of str methods, not a search for an empty name)."""
    hook = (
        ModifyStepperAttribute(Linear(1.0, 0.0, 4))
        if kind == 'modify'
        else ReduceOnPlateau('loss', patience=0)
    )
    hook.attr_name = value
    stepper = SgdStepper(0.5)
    with pytest.raises(TrainingValidationError, match='attr_name must be a non-empty'):
        start_and_call(hook, stepper, {'loss': [1.0, 2.0]})
    assert stepper.learning_rate == 0.5


def multi():
    return MultiStepper({'Hid': AdamStepper(0.1), 'default': SgdStepper(0.5)})


@pytest.mark.parametrize('kind', ['modify', 'plateau'])
@pytest.mark.parametrize(
    'attr_name, why',
    [
        # 'steppers' must be followed by a pattern and the hyperparameter
        ('steppers.learning_rate', "'steppers' not found"),
        # only 'steppers' leads into a MultiStepper, whatever follows
        ('other.Hid.learning_rate', "'other' not found"),
        ('stepper.Hid.learning_rate', "'stepper' not found"),
    ],
)
def test_a_multi_stepper_is_entered_only_by_steppers_and_a_pattern(
    kind, attr_name, why
):
    stepper = multi()
    hook = (
        ModifyStepperAttribute(Linear(1.0, 0.0, 4), attr_name)
        if kind == 'modify'
        else ReduceOnPlateau('loss', attr_name=attr_name, patience=0)
    )
    with pytest.raises(UnknownNameError, match=why):
        start_and_call(hook, stepper, {'loss': [1.0, 2.0]})
    assert stepper.steppers['Hid'].learning_rate == 0.1
    assert stepper.steppers['default'].learning_rate == 0.5


@pytest.mark.parametrize(
    'make',
    [
        lambda: ModifyStepperAttribute(Linear(1.0, 0.0, 4), ''),
        lambda: ReduceOnPlateau(''),
        lambda: ReduceOnPlateau('loss', attr_name=''),
    ],
    ids=['modify-attr_name', 'plateau-log_name', 'plateau-attr_name'],
)
def test_an_empty_name_is_refused_at_construction(make):
    with pytest.raises(TrainingValidationError, match='empty'):
        make()


@pytest.mark.parametrize('kind', ['modify', 'plateau'])
def test_start_refuses_an_unknown_attribute_before_any_call(kind):
    """A trainer starts its hooks before the first step: a path that
    reaches no hyperparameter stops the run there, not at the hook's first
    call (which may come many updates later)."""
    hook = (
        ModifyStepperAttribute(Linear(1.0, 0.0, 4), 'no_such_rate')
        if kind == 'modify'
        else ReduceOnPlateau('loss', attr_name='no_such_rate')
    )
    with pytest.raises(UnknownNameError, match='no_such_rate'):
        hook.start(xor_net(), SgdStepper(0.5), False, {})


def test_a_verbose_run_reports_each_reduction(capsys):
    """A verbose run prints each reduction (start takes the verbosity from
    the trainer), with the old and the new value; a quiet one does not."""
    stepper = SgdStepper(1.0)
    hook = ReduceOnPlateau('loss', factor=0.5, patience=0)
    net = xor_net()
    hook.start(net, stepper, True, {})
    hook(1, 1, net, stepper, {'loss': [1.0, 2.0]})
    assert stepper.learning_rate == 0.5
    assert capsys.readouterr().out == (
        'ReduceOnPlateau >> learning_rate reduced from 1 to 0.5.\n'
    )
    hook.start(net, stepper, False, {})
    hook(1, 2, net, stepper, {'loss': [1.0, 2.0, 3.0]})
    assert stepper.learning_rate == 0.25
    assert capsys.readouterr().out == ''


def test_no_reduction_is_reported_at_the_minimum(capsys):
    """At its minimum the attribute cannot go lower: a further plateau
    leaves it as it is and says nothing."""
    stepper = SgdStepper(1.0)
    hook = ReduceOnPlateau('loss', factor=0.5, patience=0, minimum=0.5)
    net = xor_net()
    hook.start(net, stepper, True, {})
    hook(1, 1, net, stepper, {'loss': [1.0, 2.0]})
    assert stepper.learning_rate == 0.5
    assert 'reduced from 1 to 0.5' in capsys.readouterr().out
    hook(1, 2, net, stepper, {'loss': [1.0, 2.0, 3.0]})
    assert stepper.learning_rate == 0.5
    assert capsys.readouterr().out == ''


def test_a_hook_reused_by_a_new_run_has_no_bad_checks():
    """Reused by another trainer (a log shorter than the one seen), the
    hook starts afresh: with patience 1, one NaN in the new log is one bad
    check, tolerated, whatever the first run counted."""
    stepper = SgdStepper(1.0)
    hook = ReduceOnPlateau('loss', factor=0.5, patience=1)
    start_and_call(hook, stepper, {'loss': [1.0, 0.5, 0.25]})
    assert hook.get_state()['bad_checks'] == 0
    start_and_call(hook, stepper, {'loss': [float('nan')]})
    assert stepper.learning_rate == 1.0
    assert (hook.get_state()['bad_checks'], hook.get_state()['seen']) == (1, 1)
    start_and_call(hook, stepper, {'loss': [float('nan'), float('nan')]})
    assert stepper.learning_rate == 0.5


def test_a_hook_from_a_description_starts_afresh():
    """A description holds no best value and no counts: the recreated
    hook judges a log as a new hook does (patience 1: the first NaN is
    tolerated, the second reduces; every entry counts)."""
    import brainstorm as bs

    fresh = ReduceOnPlateau('loss', factor=0.5, patience=1)
    hook = bs.create_from_description(bs.get_description(fresh))
    assert hook.get_state() == fresh.get_state() == {'bad_checks': 0, 'seen': 0}
    stepper = SgdStepper(1.0)
    start_and_call(hook, stepper, {'loss': [float('nan')]})
    assert stepper.learning_rate == 1.0
    stepper = SgdStepper(1.0)
    hook = bs.create_from_description(bs.get_description(fresh))
    start_and_call(hook, stepper, {'loss': [1.0, 2.0, 3.0]})
    assert stepper.learning_rate == 0.5
    assert hook.get_state() == {'bad_checks': 0, 'seen': 3, 'best': 1.0}


def test_the_default_patience_is_five_bad_checks():
    """By default five bad checks in a row are tolerated and the sixth
    multiplies the learning rate by 0.1."""
    stepper = SgdStepper(1.0)
    hook = ReduceOnPlateau('loss')
    log = [1.0] + [2.0] * 5
    start_and_call(hook, stepper, {'loss': log})
    assert stepper.learning_rate == 1.0
    start_and_call(hook, stepper, {'loss': log + [2.0]})
    assert stepper.learning_rate == pytest.approx(0.1)
