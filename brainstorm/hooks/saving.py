"""Hooks that save the network, the logs and checkpoints during training.

In a data-parallel run only rank 0 writes files.
"""

from __future__ import annotations

import csv
import io
import math
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from brainstorm.arguments import Arg, Choice, FileName, Optional, Str
from brainstorm.errors import TrainingValidationError
from brainstorm.files import (
    get_brainstorm_info,
    hold_back_interrupts,
    write_atomically,
    write_hdf5,
)
from brainstorm.hooks.base import (
    _NAMES,
    Hook,
    _describe_entry,
    _is_better,
    _leaf_paths,
    _names_list,
)
from brainstorm.structure.network import Network
from brainstorm.training.utils import LogEntries, log_counters

__all__ = [
    'SaveBestNetwork',
    'SaveLogs',
    'SaveNetwork',
    'SaveCheckpoint',
    'SaveLogsCSV',
    'LOGS_FILE_FORMAT',
]

#: The ``format`` attribute of the files :class:`SaveLogs` writes.
LOGS_FILE_FORMAT = b'Logs file v1.0'

#: The dtype kinds SaveLogs stores as they are: bool, int, uint, float,
#: complex and bytes (str is stored as UTF-8 strings)
_HDF5_KINDS = 'biufcS'

#: What SaveLogs can store, for its errors.
_STORABLE_LOGS = (
    'SaveLogs stores a log whose entries are all numbers (or arrays of one '
    'shape), or all str.'
)


class SaveBestNetwork(Hook):
    """Save the network whenever a log reaches a new best value.

    The last entry of the log must be strictly better than all earlier
    finite ones; NaN and infinite entries are never the best (nor saved).
    The log must hold numbers (else TrainingValidationError naming the
    hook). Without ``filename`` the parameters are kept in memory
    (``self.parameters``).

    Each entry is judged once, in the call at the count (epoch and update)
    it was logged at: only then does the network still hold the
    parameters that reached it. So a log written less often than the hook
    runs (a monitor with ``interval=2``) is judged at the counts it was
    written at. An entry first seen at a later count (the hook runs before
    the monitor that writes the log, or on another timescale) raises a
    TrainingValidationError: the network that reached it is gone.

    Args:
        log_name: dotted path of the log to watch.
        filename: HDF5 file to save to (None: keep in memory).
        criterion: ``'max'`` or ``'min'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveBestNetwork('validation.Accuracy'))
        >>> list(trainer.hooks)
        ['SaveBestNetwork']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'filename': Arg(Optional(FileName())),
        'criterion': Arg(Choice('max', 'min')),
    }

    __undescribed__ = {'parameters': None, '_judged': 0}
    #: Brainstorm 0.5's running best (the log holds it here), and the
    #: parameters its last development version kept under another name
    __dropped_05__ = {'best_so_far', 'best_t', 'best_parameters'}
    #: entries of the log judged so far; None (unknown) on a hook pickled
    #: before the count was kept, or restored from such a checkpoint
    _judged: int | None = None

    def __init__(
        self,
        log_name: str,
        filename: str | None = None,
        criterion: str = 'max',
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        # log_name, filename and criterion are checked as declared above
        super().__init__(name, timescale, interval, verbose)
        self.log_name = log_name
        self.filename = filename
        self.criterion = criterion
        self.parameters: np.ndarray | None = None
        self._judged = 0

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Save or keep the network if the last log entry is a new best."""
        # a Ctrl-C waits until the entry is judged and a new best kept:
        # stopped between the two, the record said kept and the file did not
        with hold_back_interrupts():
            log, start, best = self._number_log_since(
                logs, self.log_name, epoch_nr, None
            )
            if not log:
                return None
            # the best finite entry before the last one; only the entries
            # appended since the last call are read
            for value in log[start:-1]:
                if math.isfinite(value) and (
                    best is None or _is_better(value, best, self.criterion)
                ):
                    best = value
            self._keep_scan(log, len(log) - 1, best)
            judged, self._judged = self._judged, len(log)
            if judged is not None and len(log) < judged:
                judged = 0  # a new run's log (the hook reused by another trainer)
            now = self._logged_now(log, epoch_nr, update_nr)
            if judged is not None and len(log) <= judged:
                return None  # judged already (a log written less often)
            if not now:
                if judged is None:
                    return None
                epochs, updates = log_counters(log)
                raise TrainingValidationError(
                    f"SaveBestNetwork '{self.__name__}': the last entry of the log "
                    f"'{self.log_name}' was logged at epoch {epochs[-1]}, update "
                    f'{updates[-1]}, but this call is at epoch {epoch_nr}, update '
                    f'{update_nr}: the network that reached that value is gone, '
                    'and the one here was never evaluated. Run this hook at the '
                    'counts its log is written at, after the hook that writes it '
                    '(the same timescale, and added after the monitor).'
                )
            value = log[-1]
            if not math.isfinite(value):
                return None
            if best is not None and not _is_better(value, best, self.criterion):
                return None
            if self.filename is not None:
                self.message(
                    f'{self.log_name} improved to {value:.6g}; saving '
                    f"network to '{self.filename}'."
                )
                if self.is_root:
                    net.save_as_hdf5(self.filename)
            else:
                self.message(
                    f'{self.log_name} improved to {value:.6g}; keeping the parameters.'
                )
                self.parameters = net.get('parameters')
            return None

    @staticmethod
    def _logged_now(log, epoch_nr, update_nr) -> bool:
        """Was the log's last entry logged at this count?

        Logs made by hand (plain lists, or LogEntries without the update
        numbers the trainer records) carry no counts: their last entry
        counts as logged now.
        """
        if not isinstance(log, LogEntries) or len(log.updates) != len(log):
            return True
        # the update number tells every count apart (an epoch's end has
        # the number of its last update, and no epoch is empty)
        update = log.updates[-1]
        return update is None or update_nr is None or update == update_nr

    def load_best_network(self):
        """Return the best network seen.

        Returns:
            a Network loaded from ``filename``, or (without ``filename``)
            the parameter array kept in memory.
        """
        if self.filename is not None:
            return Network.from_hdf5(self.filename)
        return self.parameters

    def get_state(self) -> dict:
        """The parameters kept in memory, if any, and the entries judged."""
        state: dict = {}
        if self.parameters is not None:
            state['parameters'] = self.parameters
        if self._judged is not None:
            state['judged'] = np.int64(self._judged)
        return state

    def set_state(self, state: dict) -> None:
        """Restore the parameters kept in memory and the entries judged."""
        if 'parameters' in state:
            self.parameters = np.array(state['parameters'])
        # a checkpoint of an earlier version: the count is unknown
        self._judged = int(state['judged']) if 'judged' in state else None


class _FileHook(Hook):
    """A hook that writes to ``filename``."""

    __arguments__ = {'filename': Arg(FileName())}

    def __init__(
        self,
        filename: str,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
    ):
        super().__init__(name, timescale, interval)
        self.filename = filename


class SaveLogs(_FileHook):
    """Write all logs to an HDF5 file (rewritten each time).

    The file has the attributes ``info`` and ``format = b'Logs file v1.0'``;
    nested dicts become groups, lists become datasets. A log of numbers
    (or of arrays of one shape, or of bytes) becomes a dataset of that
    NumPy dtype; a log of str (such as the reason
    :class:`~brainstorm.hooks.StopOnNan` logs) becomes a dataset of
    variable-length UTF-8 strings (h5py reads it as bytes,
    ``f[name].asstr()[()]`` as str).

    A log that cannot be stored (str mixed with other entries, None, arrays
    of different shapes, other objects) raises a TrainingValidationError
    naming the hook, the log and the entry; the file then keeps its
    previous content.

    Args:
        filename: the HDF5 file.
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveLogs('logs.hdf5'))
        >>> list(trainer.hooks)
        ['SaveLogs']
    """

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Rewrite the HDF5 file with all logs (on rank 0 only)."""
        if not self.is_root:
            return None

        def write_group(group, entries, prefix):
            for key, value in entries.items():
                if isinstance(value, Mapping):
                    write_group(group.create_group(key), value, f'{prefix}{key}.')
                    continue
                log_name = prefix + key
                data = self._log_array(log_name, value)
                try:
                    group.create_dataset(key, data=data)
                except (TypeError, ValueError) as err:
                    raise self._log_error(
                        log_name,
                        f'holds entries of dtype {data.dtype}, which HDF5 '
                        f'cannot store ({err}). {_STORABLE_LOGS}',
                    ) from None

        def build(writer):
            f = writer.file
            f.attrs['info'] = np.bytes_(get_brainstorm_info())
            f.attrs['format'] = np.bytes_(LOGS_FILE_FORMAT)
            write_group(f, logs, '')

        write_hdf5(self.filename, build, checksums=False)
        return None

    def _log_array(self, log_name: str, log) -> np.ndarray:
        """The array written for the log ``log_name``.

        Raises:
            TrainingValidationError: naming the hook, the log and an entry,
                for a log that no HDF5 dataset can hold.
        """
        if not isinstance(log, (list, tuple)):
            entries = None  # not a list of entries: stored as it is
        else:
            entries = list(log)
            texts = [i for i, value in enumerate(entries) if isinstance(value, str)]
            if texts and len(texts) == len(entries):
                import h5py

                return np.array(entries, dtype=h5py.string_dtype())
            if texts:
                other = next(
                    i for i, value in enumerate(entries) if not isinstance(value, str)
                )
                first, second = sorted((texts[0], other))
                raise self._log_error(
                    log_name,
                    f'mixes str with other entries: it holds '
                    f'{_describe_entry(entries[first])} at entry {first} and '
                    f'{_describe_entry(entries[second])} at entry {second}. '
                    f'{_STORABLE_LOGS}',
                )
        data = _array_or_none(log)
        if data is not None and data.dtype.kind in _HDF5_KINDS:
            return data
        for i, value in enumerate(entries or ()):
            entry = _array_or_none(value)
            if entry is None or entry.dtype.kind not in _HDF5_KINDS:
                raise self._log_error(
                    log_name,
                    f'holds {_describe_entry(value)} at entry {i}. {_STORABLE_LOGS}',
                )
        shapes = [np.shape(value) for value in entries or ()]
        differs = next(
            (i for i, shape in enumerate(shapes) if shape != shapes[0]), None
        )
        if differs is not None:
            raise self._log_error(
                log_name,
                f'holds entries of different shapes: {shapes[0]} at entry 0 '
                f'and {shapes[differs]} at entry {differs}. {_STORABLE_LOGS}',
            )
        raise self._log_error(log_name, f'is {_describe_entry(log)}. {_STORABLE_LOGS}')


class SaveNetwork(_FileHook):
    """Save the network to an HDF5 file (overwritten each time).

    Args:
        filename: the HDF5 file.
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveNetwork('net.hdf5', interval=5))
        >>> list(trainer.hooks)
        ['SaveNetwork']
    """

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Save the network (on rank 0 only)."""
        if self.is_root:
            net.save_as_hdf5(self.filename)
        return None

    def load_network(self):
        """Load the last saved network."""
        return Network.from_hdf5(self.filename)


class SaveCheckpoint(_FileHook):
    """Write a checkpoint for exact resumption of the training run.

    The checkpoint (one HDF5 file, written atomically) holds the network,
    the stepper state, the trainer's counters and logs, hook states and all
    random states involved (global, network, handler, data iterators). It
    is written after all hooks due at the same moment have run. Continue
    with ``trainer, net = Trainer.from_checkpoint(filename)`` and
    ``trainer.train(net, train_iter, **named_iters)`` with iterators built
    the same way.

    Args:
        filename: the checkpoint file.
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveCheckpoint('run.ckpt'))
        >>> list(trainer.hooks)
        ['SaveCheckpoint']
    """

    # the trainer writes the checkpoint after the hooks of the call
    writes_checkpoint = True

    def __init__(
        self,
        filename: str,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
    ):
        super().__init__(filename, name, timescale, interval)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Do nothing: the trainer writes the checkpoint (see above)."""
        # The trainer writes the file once every hook of this call ran.
        return None


class SaveLogsCSV(Hook):
    """Write logs to a CSV file (rewritten each time).

    The first two columns are ``epoch`` and ``update``; then one column per
    log (dotted name). Each row holds the entries logged at that epoch and
    update (logs are aligned by when they were logged, not by position:
    monitors start at epoch 0, ``rolling_training`` at epoch 1); a log
    without an entry there leaves the cell empty.

    Args:
        filename: the CSV file.
        log_names: dotted log names to write (None: all). Each must name a
            log (a list of values): a group of logs, such as the
            ``'validation'`` of a :class:`~brainstorm.hooks.MonitorLoss`,
            raises a TrainingValidationError naming its entries (name them,
            e.g. ``'validation.total_loss'``), as in the other hooks.
        name, timescale, interval: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveLogsCSV('logs.csv'))
        >>> list(trainer.hooks)
        ['SaveLogsCSV']
    """

    __arguments__ = {
        'filename': Arg(FileName()),
        'log_names': Arg(Optional(_NAMES)),
    }

    def __init__(
        self,
        filename: str,
        log_names=None,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
    ):
        super().__init__(name, timescale, interval)
        self.filename = filename
        self.log_names = None if log_names is None else _names_list(log_names)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Rewrite the CSV file with the logs (on rank 0 only)."""
        if not self.is_root:
            return None
        names = self.log_names if self.log_names is not None else _leaf_paths(logs)
        cells = OrderedDict()  # (epoch, update) -> {column: value}
        for column, log_name in enumerate(names):
            log = self._get_log_list(logs, log_name, epoch_nr)
            if log is None:
                continue
            epochs, updates = log_counters(log)
            for value, epoch, update in zip(log, epochs, updates):
                cells.setdefault((epoch, update), {})[column] = value

        def order(key):
            epoch, update = key
            return (epoch, -1 if update is None else update)

        text = io.StringIO()
        writer = csv.writer(text, lineterminator='\n')
        writer.writerow(['epoch', 'update'] + list(names))
        for key in sorted(cells, key=order):
            row = cells[key]
            writer.writerow(
                ['' if k is None else k for k in key]
                + [_csv_cell(row[c]) if c in row else '' for c in range(len(names))]
            )

        def write(tmp):
            with open(tmp, 'w', newline='') as f:
                f.write(text.getvalue())

        write_atomically(self.filename, write)
        return None


def _array_or_none(value) -> np.ndarray | None:
    """``np.asarray(value)``, or None for a ragged or malformed value."""
    try:
        return np.asarray(value)
    except (TypeError, ValueError):
        return None


def _csv_cell(value) -> str:
    """A CSV cell: numbers as exact floats, anything else as text."""
    if isinstance(value, (int, float, np.number)) and not isinstance(value, bool):
        return repr(float(value))
    return str(value)
