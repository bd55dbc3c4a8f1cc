"""Helpers shared by the trainer, the steppers, the schedules and the hooks."""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from brainstorm.utils import TrainingValidationError

__all__ = ['run_network', 'LogEntries']


def run_network(net, iterator, all_inputs: bool = True) -> Iterator[int]:
    """Provide each batch of ``iterator`` to ``net``, one at a time.

    A generator: after each batch has been given to the network (with
    :meth:`~brainstorm.structure.network.Network.provide_external_data`)
    it yields the batch index; the caller then runs the passes it needs.

    Args:
        net: the network.
        iterator: a data iterator (called with the network's handler), or
            any iterable of data dicts, e.g. ``data(handler=net.handler)``
            or a list of batches (as Brainstorm 0.5 accepted).
        all_inputs: if False, inputs missing from the data are skipped.

    Example:
        >>> for i in run_network(net, data):  # doctest: +SKIP
        ...     net.forward_pass()
    """
    from brainstorm.data_iterators import DataIterator
    batches = iterator(handler=net.handler) \
        if isinstance(iterator, DataIterator) else iterator
    for i, data in enumerate(batches):
        net.provide_external_data(data, all_inputs=all_inputs)
        yield i


class LogEntries(list):
    """One log of the trainer: a list of values (as in Brainstorm 0.5), in
    which each entry also carries the epoch and update it belongs to.

    Monitors log from epoch 0, ``rolling_training`` from epoch 1, update
    hooks per update: plots and CSV files align the logs by these counters,
    not by position.

    Attributes:
        epochs: the epoch number of each entry.
        updates: the update number of each entry.
    """

    def __init__(self, values=(), epochs=None, updates=None):
        super().__init__(values)
        self.epochs = list(epochs) if epochs is not None else \
            list(range(len(self)))
        self.updates = list(updates) if updates is not None else \
            [None] * len(self)

    def append_at(self, value, epoch: int | None,
                  update: int | None) -> None:
        """Append ``value`` logged at ``epoch`` and ``update``."""
        self.append(value)
        self.epochs.append(epoch)
        self.updates.append(update)


def log_counters(log) -> tuple[list, list]:
    """``(epochs, updates)`` of a log's entries; a plain list (e.g. logs
    made by hand) counts its entries as epochs 0, 1, ...."""
    if isinstance(log, LogEntries) and len(log.epochs) == len(log):
        return list(log.epochs), list(log.updates)
    return list(range(len(log))), [None] * len(log)


# ----------------------------------------------------- argument checking ---

def is_number(value) -> bool:
    """True for finite real numbers (ints, floats, NumPy scalars), not bools."""
    numbers = (int, float, np.integer, np.floating)
    return (isinstance(value, numbers) and not isinstance(value, bool)
            and math.isfinite(value))


def check_number(owner: str, name: str, value, low: float | None = None,
                 high: float | None = None, include_low: bool = True,
                 include_high: bool = True) -> None:
    """Raise TrainingValidationError unless ``value`` is a finite number
    within the given bounds.

    Args:
        owner: who checks (used in the message, e.g. ``"AdamStepper"``).
        name: the argument name.
        value: the value to check.
        low, high: bounds (None: unbounded).
        include_low, include_high: whether the bounds themselves are allowed.
    """
    ok = is_number(value)
    if ok and low is not None:
        ok = value >= low if include_low else value > low
    if ok and high is not None:
        ok = value <= high if include_high else value < high
    if not ok:
        if low is None and high is None:
            expected = 'a finite number'
        else:
            left = ('[' if include_low else '(') + \
                (str(low) if low is not None else '-inf')
            right = (str(high) if high is not None else 'inf') + \
                (']' if include_high else ')')
            expected = f'a number in {left}, {right}'
        raise TrainingValidationError(
            f'{owner}: {name} must be {expected}. Received: {name}={value!r}')


def check_int(owner: str, name: str, value, low: int = 0) -> None:
    """Raise TrainingValidationError unless ``value`` is an int >= ``low``."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) \
            or value < low:
        raise TrainingValidationError(
            f'{owner}: {name} must be an int >= {low}. Received: '
            f'{name}={value!r}')
