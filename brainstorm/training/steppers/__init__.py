"""Steppers: one training step (forward, backward, parameter update) each.

A stepper is given the network in :meth:`TrainingStepper.start` and then
performs one training step per :meth:`TrainingStepper.run`: it runs the
forward pass (``training_pass=True``) and the backward pass itself and then
updates ``net.buffer.parameters`` (one flat array) from
``net.buffer.gradients`` with one handler op per update rule
(``momentum_update``, ``adam_update``, ...; see
:class:`~brainstorm.handlers.base_handler.Handler`), which NumPy handlers
run in about one pass over memory.
All state (velocities, moments) and scratch memory is allocated in
``start``, so a step allocates nothing.

Hyper-parameters are plain attributes read in every ``run``; schedules
change them through the hook
:class:`~brainstorm.hooks.ModifyStepperAttribute`.

Shared behaviour:

* Parameters where ``net.trainable_mask`` is 0 (running statistics kept by
  layers themselves) never change: their gradients are zeroed before the
  update, so they also leave no trace in velocities or moments.
* ``clip_norm`` (None: off) rescales the gradients so that their global L2
  norm (over everything the stepper updates) is at most ``clip_norm``.
* :class:`MultiStepper` gives different parts of the network different
  steppers, chosen by layer-name patterns.
"""

from brainstorm.describable import Describable
from brainstorm.training.steppers.adaptive import (
    AdamStepper,
    AdamWStepper,
    RMSPropStepper,
)
from brainstorm.training.steppers.base import TrainingStepper
from brainstorm.training.steppers.multi import MultiStepper
from brainstorm.training.steppers.sgd import (
    ForwardStepper,
    MomentumStepper,
    NesterovStepper,
    SgdStepper,
)

# Describable: Brainstorm 0.5's module brainstorm/training/steppers.py
# imported it, so it stays importable from here (tests/test_compat_05.py)
__all__ = [
    'TrainingStepper',
    'ForwardStepper',
    'SgdStepper',
    'MomentumStepper',
    'NesterovStepper',
    'RMSPropStepper',
    'AdamStepper',
    'AdamWStepper',
    'MultiStepper',
]
