"""Helpers shared by the trainer, the steppers, the schedules and the hooks."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping

import numpy as np

from brainstorm.data_iterators import DataIterator
from brainstorm.errors import (
    IteratorValidationError,
    TrainingValidationError,
)

__all__ = [
    'run_network',
    'LogEntries',
    'log_counters',
    'add_log',
    'format_result',
    'check_data_iterators',
    'check_lengths_agree',
]


def run_network(
    net, iterator, all_inputs: bool = True, check_finite: bool = True
) -> Iterator[int]:
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
        check_finite: check each batch for NaN, inf and values beyond the
            handler's dtype (see
            :meth:`~brainstorm.structure.network.Network.provide_external_data`).

    Example:
        >>> for i in run_network(net, data):  # doctest: +SKIP
        ...     net.forward_pass()
    """
    for i, data in enumerate(checked_batches(net, iterator)):
        net.provide_external_data(
            data, all_inputs=all_inputs, check_finite=check_finite
        )
        yield i


#: how to give arrays where a data iterator is expected
_WRAP_HINT = (
    'Wrap arrays in a data iterator, e.g. '
    'bs.data_iterators.Minibatches(100, default=x, targets=y).'
)


def described_data(value) -> str:
    """``value`` in a few words for an error message (arrays by shape)."""
    if isinstance(value, np.ndarray):
        return f'an array of shape {value.shape} and dtype {value.dtype}'
    if isinstance(value, Mapping):
        return f'a {type(value).__name__} with the keys {list(value)[:8]}'
    if isinstance(value, (tuple, list)):
        return f'a {type(value).__name__} of {len(value)} items'
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + '...'


def checked_batches(net, iterator) -> Iterator:
    """The batches of ``iterator``, each checked to be a dict.

    ``iterator`` is a DataIterator (called with the network's handler) or
    an iterable of batch dicts.

    Raises:
        IteratorValidationError: for data that is no such iterable (a dict
            of arrays, an array), and for a batch that is no dict: either
            would reach the network one key or one time step at a time.
    """
    batches: Iterable
    refused = isinstance(iterator, (Mapping, np.ndarray, str, bytes))
    if isinstance(iterator, DataIterator):
        batches = iterator(handler=net.handler)
    else:
        try:  # any iterable, also one with __getitem__ only
            batches = iter(iterator)
        except TypeError:
            refused = True
    if refused:
        raise IteratorValidationError(
            'The data must be a data iterator or an iterable of batches (dicts '
            f'of input names to arrays). Received {described_data(iterator)}. '
            f'{_WRAP_HINT}'
        )
    for i, data in enumerate(batches):
        if not hasattr(data, 'items'):  # as provide_external_data reads it
            raise IteratorValidationError(
                f'Batch {i} of the data is {described_data(data)}, not a dict '
                f'of input names to arrays. {_WRAP_HINT}'
            )
        yield data


class LogEntries(list):
    """One log of the trainer: a list of values with their counters.

    A list of values (as in Brainstorm 0.5) in which each entry also
    carries the epoch and update it belongs to.

    Monitors log from epoch 0, ``rolling_training`` from epoch 1, update
    hooks per update: plots and CSV files align the logs by these counters,
    not by position.

    Attributes:
        epochs: the epoch number of each entry.
        updates: the update number of each entry.
    """

    def __init__(self, values=(), epochs=None, updates=None):
        super().__init__(values)
        self.epochs = list(epochs) if epochs is not None else list(range(len(self)))
        self.updates = list(updates) if updates is not None else [None] * len(self)

    def append_at(self, value, epoch: int | None, update: int | None) -> None:
        """Append ``value`` logged at ``epoch`` and ``update``."""
        self.append(value)
        self.epochs.append(epoch)
        self.updates.append(update)


def log_counters(log, start: int = 0) -> tuple[list, list]:
    """Return ``(epochs, updates)`` of a log's entries from ``start`` on.

    A plain list (e.g. logs made by hand) counts its entries as epochs 0,
    1, .... Only the entries from ``start`` are read (a hook that writes
    the new entries of a long log at every update does not go over the
    old ones again).
    """
    if isinstance(log, LogEntries) and len(log.epochs) == len(log):
        return list(log.epochs[start:]), list(log.updates[start:])
    count = max(0, len(log) - start)
    return list(range(start, start + count)), [None] * count


def add_log(
    logs: dict, name: str, value, epoch: int | None = None, update: int | None = None
) -> None:
    """Log ``value`` under ``name`` in ``logs``.

    Dicts nest; other values are appended to a list (a :class:`LogEntries`,
    which keeps the epoch and update of each entry).

    Raises:
        TrainingValidationError: if ``name`` holds a list where a dict is
            logged, or the other way round.
    """
    if isinstance(value, dict):
        sub = logs.setdefault(name, OrderedDict())
        if not isinstance(sub, dict):
            raise TrainingValidationError(
                f"Cannot log a dict under '{name}': it already holds a list of values."
            )
        for key, inner in value.items():
            add_log(sub, key, inner, epoch, update)
    else:
        entries = logs.setdefault(name, LogEntries())
        if not isinstance(entries, list):
            raise TrainingValidationError(
                f"Cannot log a value under '{name}': it already holds a dict "
                f'with keys {list(entries)}.'
            )
        if isinstance(entries, LogEntries):
            entries.append_at(value, epoch, update)
        else:
            entries.append(value)


def format_result(result, prefix: str = '') -> list:
    """Return the lines ``'name.sub: value'`` that print a hook's result."""
    if isinstance(result, dict):
        lines = []
        for key, value in result.items():
            lines.extend(format_result(value, f'{prefix}{key}.'))
        return lines
    if isinstance(result, float):
        return [f'{prefix[:-1]}: {result:.6g}']
    return [f'{prefix[:-1]}: {result}']


def check_lengths_agree(processes, training_data_iter) -> None:
    """Check that all ranks make the same number of steps per epoch.

    Args:
        processes: the processes of the run (see
            ``brainstorm.parallel.processes_of``).
        training_data_iter: this rank's training iterator.

    Raises:
        IteratorValidationError: if the ranks' iterators differ in length,
            or (with several ranks) have no length: ranks yielding different
            numbers of batches would wait for each other forever.
    """
    with processes.guarded('the check of the iterator lengths'):
        lengths = processes.allgather(getattr(training_data_iter, 'length', None))
    if len(lengths) > 1 and None in lengths:
        raise IteratorValidationError(
            'Trainer: in data-parallel training every rank must make the '
            'same number of updates per epoch, so the training iterators '
            f'need a length; the ranks have lengths {lengths}. Give '
            'FromGenerator its length=..., or use an iterator over arrays '
            '(Minibatches) split with brainstorm.data_iterators.Shard.'
        )
    if len(set(lengths)) > 1:
        raise IteratorValidationError(
            'Trainer: in data-parallel training every rank must make the '
            'same number of updates per epoch, but the training '
            f'iterators of the ranks have lengths {lengths}. Build them '
            'the same way on every rank and split the data with '
            'brainstorm.data_iterators.Shard.'
        )


def check_data_iterators(net, named_data_iters) -> None:
    """Check that each iterator provides exactly the network's input names.

    Raises:
        IteratorValidationError: naming the iterator and both sets of names.
    """
    expected = set(net.layers['Input'].out_shapes)
    for name, iterator in named_data_iters.items():
        shapes = getattr(iterator, 'data_shapes', None)
        if shapes is None or not callable(iterator):
            raise IteratorValidationError(
                f"Data iterator '{name}' must be a DataIterator. Received "
                f'{described_data(iterator)}. {_WRAP_HINT}'
            )
        if set(shapes) != expected:
            raise IteratorValidationError(
                f"Data iterator '{name}' provides data "
                f"{sorted(shapes)}, but the network's Input layer has "
                f'outputs {sorted(expected)}: the names must be the same.'
            )


def memory_of(net) -> tuple:
    """The network's handler and its constant memory (the array itself).

    The parameters and gradients lie in the buffer manager's constant
    flat array, which a new batch size or sequence length keeps (it makes
    new views of it) and which ``set_handler`` (of the network, of a copy
    sharing its memory, or of the buffer manager) replaces. Views of the
    parameters (a stepper's, the finite check's) stay valid while both
    stay. The array is held, not its ``id``: a view of a wrapper array (a
    DebugHandler's, a GPU array) may not keep the wrapper alive, and a new
    one could get its ``id``.
    """
    return net.handler, net.buffer_manager.full_buffer[0]


def same_memory(a: tuple | None, b: tuple | None) -> bool:
    """Whether two results of :func:`memory_of` are the same memory."""
    return a is not None and b is not None and a[0] is b[0] and a[1] is b[1]
