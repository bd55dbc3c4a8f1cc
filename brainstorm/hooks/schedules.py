"""Hooks that change stepper hyperparameters during training.

:class:`ModifyStepperAttribute` sets one from a schedule,
:class:`ReduceOnPlateau` lowers one when a log stops improving. Both
reach only declared hyperparameters of the stepper: arguments of its
``__init__`` that it keeps as attributes, through a
:class:`~brainstorm.training.data_parallel.DataParallel` wrapper and into
the steppers of a
:class:`~brainstorm.training.steppers.MultiStepper`.
"""

from __future__ import annotations

import inspect
import math

import numpy as np

from brainstorm.arguments import AnyOf, Arg, Callable, Choice, Instance, Int, Real, Str
from brainstorm.errors import TrainingValidationError, UnknownNameError
from brainstorm.hooks.base import Hook, _is_better
from brainstorm.training.data_parallel import DataParallel
from brainstorm.training.schedules import Linear, Schedule
from brainstorm.training.steppers import MultiStepper

__all__ = ['ModifyStepperAttribute', 'ReduceOnPlateau']


def _hyperparameters(stepper) -> list:
    """The declared hyperparameters of a stepper.

    These are the arguments of its class's ``__init__`` that it keeps as
    attributes of the same name.
    """
    try:
        names = list(inspect.signature(type(stepper).__init__).parameters)
    except (TypeError, ValueError):
        return []
    return [
        name
        for name in names[1:]
        if not name.startswith('_') and name != 'steppers' and name in vars(stepper)
    ]


def _resolve_attribute(owner: str, stepper, attr_name: str):
    """(stepper, hyperparameter) for a dotted ``attr_name``.

    The path reaches only declared stepper hyperparameters: a
    :class:`~brainstorm.training.data_parallel.DataParallel` wrapper is
    looked through (``stepper.`` may be named), a MultiStepper's steppers
    are reached by pattern (``'steppers.Conv*.learning_rate'``), and the
    last part must be an argument of the stepper's ``__init__``. Nothing
    else (no private or dunder names, no other objects) can be reached.
    """
    if not isinstance(attr_name, str) or not attr_name:
        raise TrainingValidationError(
            f'{owner}: attr_name must be a non-empty str. Received: {attr_name!r}'
        )
    *path, attr = attr_name.split('.')
    target = stepper
    i = 0
    while i < len(path):
        part = path[i]
        if isinstance(target, DataParallel):
            # attribute access falls through a DataParallel wrapper
            target = target.stepper
            i += part == 'stepper'
        elif (
            isinstance(target, MultiStepper)
            and part == 'steppers'
            and i + 1 < len(path)
        ):
            key = path[i + 1]
            if key not in target.steppers:
                raise UnknownNameError(
                    f'{owner}: the stepper {stepper!r} has no '
                    f"'{attr_name}' ('{key}' not found among the patterns "
                    f'{list(target.steppers)}).'
                )
            target = target.steppers[key]
            i += 2
        else:
            raise UnknownNameError(
                f"{owner}: the stepper {stepper!r} has no '{attr_name}' "
                f"('{part}' not found; paths reach only 'steppers.<pattern>' "
                'of a MultiStepper).'
            )
    if isinstance(target, DataParallel):
        target = target.stepper
    declared = _hyperparameters(target)
    if attr not in declared:
        raise UnknownNameError(
            f'{owner}: the stepper {stepper!r} has no attribute '
            f"'{attr_name}': the last part must be a hyperparameter of "
            f'{type(target).__name__}: {declared}.'
        )
    return target, attr


class ModifyStepperAttribute(Hook):
    """Set a stepper attribute from a schedule.

    The attribute is set every time the hook is called (also at count 0).

    Args:
        schedule: a schedule (see :mod:`brainstorm.training.schedules`) or
            any callable with the same arguments.
        attr_name: the attribute; dotted paths reach into a MultiStepper,
            e.g. ``'steppers.Conv*.learning_rate'``.
        timescale, interval, name, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.ModifyStepperAttribute(
        ...     bs.training.schedules.Exponential(0.1, factor=0.9)))
        >>> list(trainer.hooks)
        ['ModifyStepperAttribute']
    """

    __arguments__ = {
        'schedule': Arg(
            AnyOf(Instance(Schedule, example=lambda: Linear(1, 0, 2)), Callable())
        ),
        'attr_name': Arg(Str(nonempty=True)),
    }

    def __init__(
        self,
        schedule,
        attr_name: str = 'learning_rate',
        timescale: str = 'epoch',
        interval: int = 1,
        name: str | None = None,
        verbose: bool | None = None,
    ):
        super().__init__(name, timescale, interval, verbose)
        self.schedule = schedule
        self.attr_name = attr_name

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that the stepper has the attribute."""
        super().start(net, stepper, verbose, named_data_iters)
        _resolve_attribute(
            f"ModifyStepperAttribute '{self.__name__}'", stepper, self.attr_name
        )

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Set the attribute to the schedule's value for this call."""
        target, attr = _resolve_attribute(
            f"ModifyStepperAttribute '{self.__name__}'", stepper, self.attr_name
        )
        value = self.schedule(
            epoch_nr, update_nr, self.timescale, self.interval, net, stepper, logs
        )
        setattr(target, attr, value)
        return None


class ReduceOnPlateau(Hook):
    """Multiply a stepper attribute by ``factor`` when a log stops improving.

    Each new log entry that is not strictly better than the best so far
    counts as a bad check (NaN and infinite entries always do: they never
    become the best); after more than ``patience`` bad checks in a row
    the attribute becomes ``max(value * factor, minimum)`` and the count
    starts again.

    The hook keeps the best value and the count across calls of ``train``
    of one trainer, and in checkpoints (a resumed run goes on with them).
    Reused by another trainer, whose log starts anew (shorter than the
    log seen so far), it starts afresh: no best value, no bad checks.

    Args:
        log_name: dotted path of the log to watch.
        attr_name: the stepper attribute (dotted paths as in
            :class:`ModifyStepperAttribute`).
        factor: multiplier in (0, 1).
        patience: bad checks tolerated (int >= 0).
        minimum: the attribute never goes below this (>= 0).
        criterion: ``'min'`` or ``'max'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.ReduceOnPlateau('validation.total_loss'))
        >>> list(trainer.hooks)
        ['ReduceOnPlateau']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'attr_name': Arg(Str(nonempty=True)),
        'factor': Arg(Real(0, 1, include_low=False, include_high=False)),
        'patience': Arg(Int(0)),
        'minimum': Arg(Real(0)),
        'criterion': Arg(Choice('min', 'max')),
    }

    __undescribed__ = {'_best': None, '_bad_checks': 0, '_seen': 0}

    def __init__(
        self,
        log_name: str,
        attr_name: str = 'learning_rate',
        factor: float = 0.1,
        patience: int = 5,
        minimum: float = 0.0,
        criterion: str = 'min',
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        # every argument is checked as declared above
        super().__init__(name, timescale, interval, verbose)
        self.log_name = log_name
        self.attr_name = attr_name
        self.factor = factor
        self.patience = patience
        self.minimum = minimum
        self.criterion = criterion
        self._best: float | None = None
        self._bad_checks = 0
        self._seen = 0

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that the stepper has the attribute."""
        super().start(net, stepper, verbose, named_data_iters)
        _resolve_attribute(
            f"ReduceOnPlateau '{self.__name__}'", stepper, self.attr_name
        )

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Count the bad checks among new entries; reduce after too many."""
        log = self._get_log_list(logs, self.log_name, epoch_nr)
        if log is not None and len(log) < self._seen:
            # a new run's log (the hook reused by another trainer)
            self._best, self._bad_checks, self._seen = None, 0, 0
        # the entries before were checked by an earlier call
        self._check_number_entries(self.log_name, log, self._seen)
        if not log:
            return None
        # each entry counts, whether this call sees one or several (a
        # log written more often than the hook runs, an interval > 1)
        reductions = 0
        for value in log[self._seen :]:
            if math.isfinite(value) and (
                self._best is None or _is_better(value, self._best, self.criterion)
            ):
                self._best = value
                self._bad_checks = 0
            else:
                self._bad_checks += 1
                if self._bad_checks > self.patience:
                    self._bad_checks = 0
                    reductions += 1
        self._seen = len(log)
        if reductions:
            target, attr = _resolve_attribute(
                f"ReduceOnPlateau '{self.__name__}'", stepper, self.attr_name
            )
            old = new = getattr(target, attr)
            for _ in range(reductions):
                new = max(new * self.factor, self.minimum)
            if new < old:
                setattr(target, attr, new)
                self.message(f'{self.attr_name} reduced from {old:.6g} to {new:.6g}.')
        return None

    def get_state(self) -> dict:
        """The best value so far and the counts of checks."""
        state = {'bad_checks': np.int64(self._bad_checks), 'seen': np.int64(self._seen)}
        if self._best is not None:
            state['best'] = np.float64(self._best)
        return state

    def set_state(self, state: dict) -> None:
        """Restore the state from :meth:`get_state`."""
        self._bad_checks = int(np.asarray(state['bad_checks']))
        self._seen = int(np.asarray(state['seen']))
        self._best = float(np.asarray(state['best'])) if 'best' in state else None
