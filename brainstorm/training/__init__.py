"""Training: the Trainer, steppers (optimizers) and schedules.

``Trainer`` runs a stepper over the data and calls hooks; steppers perform
one forward/backward pass and parameter update each; schedules change
stepper attributes over time (through
:class:`~brainstorm.hooks.ModifyStepperAttribute`).
Every stepper and schedule is exported here (``ForwardStepper``,
``TrainingStepper``, ``DecreaseAfterEpoch`` and ``CosineWithWarmup``
included) and from its submodule.
:class:`DataParallel` wraps a stepper for data-parallel training over MPI
processes (see :mod:`brainstorm.training.data_parallel`).
"""

from brainstorm.training.data_parallel import DataParallel
from brainstorm.training.schedules import (
    CosineWithWarmup,
    DecreaseAfterEpoch,
    Exponential,
    Linear,
    MultiStep,
)
from brainstorm.training.steppers import (
    AdamStepper,
    AdamWStepper,
    ForwardStepper,
    MomentumStepper,
    MultiStepper,
    NesterovStepper,
    RMSPropStepper,
    SgdStepper,
    TrainingStepper,
)
from brainstorm.training.trainer import Trainer

__all__ = [
    'Trainer',
    'SgdStepper',
    'MomentumStepper',
    'NesterovStepper',
    'RMSPropStepper',
    'AdamStepper',
    'AdamWStepper',
    'MultiStepper',
    'ForwardStepper',
    'TrainingStepper',
    'Linear',
    'Exponential',
    'MultiStep',
    'DecreaseAfterEpoch',
    'CosineWithWarmup',
    'DataParallel',
]
