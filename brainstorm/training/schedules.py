"""Schedules: values of a stepper attribute as a function of training time.

A schedule is called as ``schedule(epoch_nr, update_nr, timescale, interval,
net, stepper, logs)`` and returns a value. ``c`` is ``epoch_nr`` or
``update_nr`` depending on ``timescale``, and ``k = c // interval`` counts
the changes so far. Schedules are applied by the hook
:class:`~brainstorm.hooks.ModifyStepperAttribute`, e.g.
``ModifyStepperAttribute(Exponential(0.1, 0.9))``; steppers never evaluate
them themselves.
"""

from __future__ import annotations

import math

import numpy as np

from brainstorm.arguments import Arg, Int, ListOf, Real
from brainstorm.describable import Describable
from brainstorm.errors import TrainingValidationError

__all__ = [
    'Linear',
    'Exponential',
    'MultiStep',
    'DecreaseAfterEpoch',
    'CosineWithWarmup',
]


def _count(epoch_nr: int, update_nr: int, timescale: str) -> int:
    if timescale == 'epoch':
        return epoch_nr
    if timescale == 'update':
        return update_nr
    raise TrainingValidationError(
        f"Schedules need timescale 'epoch' or 'update'. Received: {timescale!r}"
    )


class Schedule(Describable):
    """Base class of all schedules."""

    def __call__(
        self,
        epoch_nr: int,
        update_nr: int,
        timescale: str,
        interval: int,
        net,
        stepper,
        logs: dict,
    ) -> float:
        """Return the value for the current point of training."""
        raise NotImplementedError


class Linear(Schedule):
    """Change linearly from ``initial_value`` to ``final_value``.

    The value changes in ``num_changes`` changes, then stays at
    ``final_value``.

    Value: ``final_value`` if ``k >= num_changes``, else
    ``initial_value + (final_value - initial_value) * k / num_changes``.

    Args:
        initial_value: value at ``k = 0``.
        final_value: value from ``k = num_changes`` on.
        num_changes: number of changes (int >= 1).
    """

    __arguments__ = {
        'initial_value': Arg(Real()),
        'final_value': Arg(Real()),
        'num_changes': Arg(Int(1)),
    }

    def __init__(self, initial_value: float, final_value: float, num_changes: int):
        self.initial_value = initial_value
        self.final_value = final_value
        self.num_changes = num_changes

    def __call__(self, epoch_nr, update_nr, timescale, interval, net, stepper, logs):
        """Return the value at this point of training (see the class)."""
        k = _count(epoch_nr, update_nr, timescale) // interval
        if k >= self.num_changes:  # exactly final_value (the formula may
            return self.final_value  # miss it by a rounding)
        return (
            self.initial_value
            + (self.final_value - self.initial_value) * k / self.num_changes
        )


class Exponential(Schedule):
    """Multiply by ``factor`` at each change, clipped to ``[minimum, maximum]``.

    Value: ``clip(initial_value * factor ** k, minimum, maximum)``. Where
    ``initial_value * factor ** k`` is beyond the float range it counts as
    +-inf: a bound then gives the bound, and without one the stepper
    refuses the infinite value with a TrainingValidationError.

    Args:
        initial_value: value at ``k = 0``.
        factor: multiplier per change.
        minimum: lower bound of the value.
        maximum: upper bound of the value.
    """

    __arguments__ = {
        'initial_value': Arg(Real()),
        'factor': Arg(Real()),
        'minimum': Arg(Real(finite=False), omit_default=True),
        'maximum': Arg(Real(finite=False), omit_default=True),
    }

    def __init__(
        self,
        initial_value: float,
        factor: float,
        minimum: float = -math.inf,
        maximum: float = math.inf,
    ):
        self.initial_value = initial_value
        self.factor = factor
        self.minimum = minimum
        self.maximum = maximum

    def __validate__(self) -> None:
        if self.minimum > self.maximum:
            raise TrainingValidationError(
                'Exponential: minimum must not be greater than maximum. '
                f'Received: minimum={self.minimum!r}, '
                f'maximum={self.maximum!r}'
            )

    def __call__(self, epoch_nr, update_nr, timescale, interval, net, stepper, logs):
        """Return the value at this point of training (see the class)."""
        k = _count(epoch_nr, update_nr, timescale) // interval
        value = self.initial_value * _power(self.factor, k)
        if math.isnan(value):  # 0 * inf: the value is 0 at every k
            value = 0.0
        return min(max(value, self.minimum), self.maximum)


def _power(base: float, exponent: int) -> float:
    """``base ** exponent``, +-inf where it is beyond the float range.

    Python's float power raises OverflowError there, and also for any base
    where the exponent is too large for a float (2**1024 and up). Then a
    base between -1 and 1 gives 0, a base of +-1 gives +-1, and any other
    the infinity with the sign of the exact power, which the schedule's
    bounds clip or, unbounded, the stepper refuses as a hyperparameter that
    is not finite.
    """
    try:
        return float(base) ** exponent
    except OverflowError:
        if abs(base) < 1:
            return 0.0
        negative = base < 0 and exponent % 2 == 1
        if abs(base) == 1:
            return -1.0 if negative else 1.0
        return -math.inf if negative else math.inf


class MultiStep(Schedule):
    """Piecewise constant values at given counts.

    ``values[i]`` once the count reaches ``steps[i]``, ``initial_value``
    before the first step.

    Args:
        initial_value: value before ``steps[0]``.
        steps: increasing counts (epochs or updates) at which the value
            changes.
        values: the new values, one per step.

    Raises:
        TrainingValidationError: if ``steps`` and ``values`` differ in
            length, ``steps`` is not increasing, or (when called) the hook's
            interval is not 1.

    Brainstorm 0.5 kept ``steps`` as ``[0] + steps + [inf]`` and ``values``
    as ``[initial_value] + values``; its descriptions, which hold that
    form, load as the schedule they described.
    """

    __arguments__ = {
        'initial_value': Arg(Real()),
        'steps': Arg(ListOf(Int(0))),
        'values': Arg(ListOf(Real())),
    }

    @classmethod
    def __upgrade_05__(cls, description: dict) -> dict:
        """Turn 0.5's ``steps`` and ``values`` (see the class) into ours.

        Only that form is converted: ``steps`` starting with 0 and ending
        with infinity, one longer than ``values`` (ours holds no
        infinity). 0.5 used ``values[0]`` before the first step, which is
        the initial value unless changed after construction.
        """
        steps, values = description.get('steps'), description.get('values')
        if (
            isinstance(steps, list)
            and isinstance(values, list)
            and len(steps) >= 2
            and len(steps) == len(values) + 1
            and steps[0] == 0
            and isinstance(steps[-1], float)
            and steps[-1] == math.inf
        ):
            description = dict(description)
            description['initial_value'] = values[0]
            description['steps'] = steps[1:-1]
            description['values'] = values[1:]
        return description

    def __init__(self, initial_value: float, steps, values):
        self.initial_value = initial_value
        self.steps = steps
        self.values = values

    def __validate__(self) -> None:
        steps, values = self.steps, self.values
        if len(steps) != len(values):
            raise TrainingValidationError(
                'MultiStep: steps and values must have the same length. '
                f'Received {len(steps)} steps {steps} and {len(values)} '
                f'values {values}'
            )
        if any(b <= a for a, b in zip(steps, steps[1:])):
            raise TrainingValidationError(
                f'MultiStep: steps must be increasing. Received: {steps}'
            )

    def __call__(self, epoch_nr, update_nr, timescale, interval, net, stepper, logs):
        """Return the value at this point of training (see the class)."""
        if interval != 1:
            raise TrainingValidationError(
                'MultiStep: the hook using it must have interval=1 (the '
                f'steps are counts). Received: interval={interval!r}'
            )
        c = _count(epoch_nr, update_nr, timescale)
        index = int(np.searchsorted(self.steps, c, side='right'))
        if index == 0:
            return self.initial_value
        return self.values[index - 1]


class DecreaseAfterEpoch(Schedule):
    """Constant for ``T`` epochs, then decreasing as ``1/epoch``.

    Value: ``initial_value * T / max(epoch_nr + 1, T)``.

    Args:
        initial_value: value for the first ``T`` epochs.
        T: number of epochs before the decrease starts (int >= 1).
    """

    __arguments__ = {
        'initial_value': Arg(Real()),
        'T': Arg(Int(1)),
    }

    def __init__(self, initial_value: float, T: int):
        self.initial_value = initial_value
        self.T = T

    def __call__(self, epoch_nr, update_nr, timescale, interval, net, stepper, logs):
        """Return the value at this point of training (see the class)."""
        return self.initial_value * self.T / max(epoch_nr + 1, self.T)


class CosineWithWarmup(Schedule):
    """Linear warm-up, then a half cosine down to ``final_value``.

    For ``k < warmup_changes`` the value rises linearly from
    ``warmup_start`` to ``initial_value``; then, with
    ``p = min((k - warmup_changes) / (num_changes - warmup_changes), 1)``,
    it is ``final_value + (initial_value - final_value) * (1 + cos(pi p)) / 2``.

    Args:
        initial_value: the peak value (reached after the warm-up).
        num_changes: total number of changes, warm-up included; the value
            is ``final_value`` from there on.
        final_value: the value at the end.
        warmup_changes: number of warm-up changes (0: none).
        warmup_start: the value at ``k = 0`` if there is a warm-up.
    """

    __arguments__ = {
        'initial_value': Arg(Real()),
        'num_changes': Arg(Int(1)),
        'final_value': Arg(Real(), omit_default=True),
        'warmup_changes': Arg(Int(0), omit_default=True),
        'warmup_start': Arg(Real(), omit_default=True),
    }

    def __init__(
        self,
        initial_value: float,
        num_changes: int,
        final_value: float = 0.0,
        warmup_changes: int = 0,
        warmup_start: float = 0.0,
    ):
        self.initial_value = initial_value
        self.num_changes = num_changes
        self.final_value = final_value
        self.warmup_changes = warmup_changes
        self.warmup_start = warmup_start

    def __validate__(self) -> None:
        if self.num_changes <= self.warmup_changes:
            raise TrainingValidationError(
                'CosineWithWarmup: num_changes must be greater than '
                f'warmup_changes. Received: num_changes={self.num_changes}, '
                f'warmup_changes={self.warmup_changes}'
            )

    def __call__(self, epoch_nr, update_nr, timescale, interval, net, stepper, logs):
        """Return the value at this point of training (see the class)."""
        k = _count(epoch_nr, update_nr, timescale) // interval
        if k < self.warmup_changes:
            return (
                self.warmup_start
                + (self.initial_value - self.warmup_start) * k / self.warmup_changes
            )
        p = min(
            (k - self.warmup_changes) / (self.num_changes - self.warmup_changes), 1.0
        )
        return (
            self.final_value
            + (self.initial_value - self.final_value)
            * (1.0 + math.cos(math.pi * p))
            / 2.0
        )
