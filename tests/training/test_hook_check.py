"""training.hook_check: the trainer takes hooks by what they do."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.training import Trainer
from brainstorm.training.hook_check import HookCheck, HookLike, is_hook
from brainstorm.training.steppers import SgdStepper
from brainstorm.utils import TrainingValidationError, ValidationError


class CountCalls:
    """A hook that is no brainstorm.hooks.Hook but acts like one."""

    def __init__(self):
        self.__name__ = 'CountCalls'
        self.timescale = 'update'
        self.interval = 1
        self.calls = 0

    def start(self, net, stepper, verbose, named_data_iters):
        pass

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        self.calls += 1
        if update_nr >= 3:
            raise StopIteration


def test_every_hook_of_brainstorm_hooks_is_hook_like():
    for name in (
        'StopAfterEpoch',
        'SaveCheckpoint',
        'MonitorScores',
        'ModifyStepperAttribute',
        'ProgressBar',
    ):
        assert issubclass(getattr(bs.hooks, name), HookLike), name
    assert is_hook(bs.hooks.StopAfterEpoch(3))


@pytest.mark.parametrize(
    'kind', [SgdStepper, bs.scorers.Accuracy, Trainer, bs.initializers.Gaussian, dict]
)
def test_other_classes_are_not_hook_like(kind):
    assert not issubclass(kind, HookLike)


def test_values_that_are_no_hooks():
    hook = CountCalls()
    assert is_hook(hook)
    assert not is_hook(CountCalls)  # a class, not a hook
    for attribute, value in (
        ('timescale', 'day'),
        ('interval', 0),
        ('interval', True),
        ('interval', 1.0),
    ):
        bad = CountCalls()
        setattr(bad, attribute, value)
        assert not is_hook(bad), (attribute, value)
    for value in HookCheck.invalid_examples:
        assert not is_hook(value)


def test_add_hook_refuses_a_non_hook_naming_argument_expectation_and_value():
    trainer = Trainer(SgdStepper(), verbose=False)
    with pytest.raises(TrainingValidationError) as info:
        trainer.add_hook(bs.scorers.Accuracy())
    message = str(info.value)
    assert 'hook must be a hook' in message
    assert 'brainstorm.hooks.Hook such as StopAfterEpoch' in message
    assert 'Received: hook=<brainstorm.scorers.Accuracy object' in message


def test_a_hook_like_object_is_called_by_the_trainer():
    x = bs.data_iterators.Undivided(
        default=np.zeros((1, 4, 2)), targets=np.zeros((1, 4, 1))
    )
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.1)
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    hook = CountCalls()
    trainer.add_hook(hook)
    trainer.train(net, x)
    assert trainer.current_update_nr == 3
    assert hook.calls == 4  # update 0, then 1, 2 and 3


def test_restoring_hooks_refuses_other_kinds_of_describable():
    trainer = Trainer(SgdStepper(), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    description = json.loads(json.dumps(get_description(trainer)))
    restored = create_from_description(description)
    assert isinstance(restored.hooks['StopAfterEpoch'], bs.hooks.StopAfterEpoch)
    description['hooks']['StopAfterEpoch'] = get_description(bs.scorers.Accuracy())
    with pytest.raises(ValidationError, match='hooks'):
        create_from_description(description)
