"""Exponential schedules beyond the float range (found by a bug hunt)."""

import math

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import TrainingValidationError
from brainstorm.hooks import ModifyStepperAttribute, StopAfterEpoch
from brainstorm.training.schedules import Exponential


def value(schedule, count, interval=1):
    return schedule(0, count, 'update', interval, None, None, {})


def test_exponential_stays_at_its_maximum_where_the_power_overflows():
    """2.0 ** 1024 raised OverflowError although maximum was set."""
    schedule = Exponential(1e-6, 2.0, maximum=0.1)
    assert value(schedule, 1023) == 0.1
    assert value(schedule, 1024) == 0.1
    assert value(schedule, 10**6) == 0.1


def test_exponential_stays_at_its_minimum_where_the_power_overflows():
    assert value(Exponential(-1.0, 3.0, minimum=-5.0), 700) == -5.0
    # a negative factor: the sign of the exact power, then clipped
    schedule = Exponential(1.0, -2.0, minimum=-1.0, maximum=1.0)
    assert value(schedule, 2000) == 1.0
    assert value(schedule, 2001) == -1.0


def test_exponential_without_bounds_gives_infinity_and_zero_stays_zero():
    assert value(Exponential(1e-6, 2.0), 1024) == math.inf
    assert value(Exponential(-1e-6, 2.0), 1024) == -math.inf
    assert value(Exponential(0.0, 2.0), 1024) == 0.0
    assert value(Exponential(1.0, 0.5), 5000) == 0.0
    # below the overflow, the values are those of the formula
    assert value(Exponential(1e-6, 2.0), 1000) == 1e-6 * 2.0**1000


def _trainer_data():
    x = np.random.RandomState(0).rand(1, 40, 4)
    y = x.argmax(axis=2)[:, :, None] % 3
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(8) >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net, bs.data_iterators.Minibatches(10, default=x, targets=y)


def test_a_bounded_exponential_learning_rate_trains_past_update_1024():
    """The LR range test of the bug report stopped at update 1024."""
    net, data = _trainer_data()
    trainer = bs.Trainer(bs.training.SgdStepper(1e-6), verbose=False)
    trainer.add_hook(
        ModifyStepperAttribute(Exponential(1e-6, 2.0, maximum=0.1), timescale='update')
    )
    trainer.add_hook(StopAfterEpoch(300))
    trainer.train(net, data)
    assert trainer.current_update_nr == 1200
    assert trainer.stepper.learning_rate == 0.1


def test_an_unbounded_exponential_is_refused_by_the_stepper_not_overflowerror():
    """1e-300 * (1e300) ** 2 is beyond the float range: the stepper refuses
    learning_rate=inf with its own message, not a bare OverflowError."""
    net, data = _trainer_data()
    trainer = bs.Trainer(bs.training.SgdStepper(1e-6), verbose=False)
    trainer.add_hook(
        ModifyStepperAttribute(Exponential(1e-300, 1e300), timescale='update')
    )
    trainer.add_hook(StopAfterEpoch(3))
    with pytest.raises(TrainingValidationError, match='learning_rate.*inf'):
        trainer.train(net, data)
