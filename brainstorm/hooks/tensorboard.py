"""A hook that writes the logs in TensorBoard's event format.

The events are made and framed by tensorboardX, an optional extra:
``pip install 'brainstorm-nn[tensorboard]'``. Only rank 0 of a
data-parallel run writes.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import socket
import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

import brainstorm.optional as optional
from brainstorm.__about__ import install_hint
from brainstorm.arguments import Arg, Bool, FileName, Optional
from brainstorm.errors import FileWriteError
from brainstorm.hooks.base import _NAMES, Hook, _is_number, _leaf_paths, _names_list
from brainstorm.training.utils import log_counters

__all__ = ['SaveLogsTensorBoard']

#: numbers the event files this process opens (see SaveLogsTensorBoard._open)
_WRITER_NUMBERS = itertools.count(1)


def _tag(log_name: str) -> str:
    """TensorBoard groups tags by the part before ``/``: a log's path."""
    return log_name.replace('.', '/')


class _TensorBoardX(NamedTuple):
    """The parts of tensorboardX the hook writes with."""

    RecordWriter: Any
    Event: Any
    SessionLog: Any
    scalar: Callable
    histogram: Callable


def _tensorboardx(owner: str) -> _TensorBoardX:
    """Import the parts of tensorboardX the hook writes with.

    Raises:
        ImportError: if tensorboardX is missing, or lacks one of the parts,
            naming it and the command that installs a version that has it.
    """
    module = optional.import_optional('tensorboardX', owner)
    try:
        from tensorboardX import RecordWriter
        from tensorboardX.proto.event_pb2 import Event, SessionLog
        from tensorboardX.summary import histogram, scalar
    except ImportError as err:
        version = getattr(module, '__version__', '(unknown version)')
        raise ImportError(
            f"{owner}: writes with tensorboardX's RecordWriter, "
            'summary.scalar, summary.histogram and proto.event_pb2 (Event, '
            f'SessionLog), but tensorboardX {version} lacks one of them '
            f'({err}). Install a version that has them: '
            f'{install_hint("tensorboard")}'
        ) from err
    return _TensorBoardX(RecordWriter, Event, SessionLog, scalar, histogram)


@functools.cache
def _default_bins() -> list[float]:
    """The histogram bins of tensorboardX's SummaryWriter ('tensorflow').

    0, and +-1e-12 growing by 10 % up to 1e20.
    """
    buckets = []
    value = 1e-12
    while value < 1e20:
        buckets.append(value)
        value *= 1.1
    return [-v for v in reversed(buckets)] + [0.0] + buckets


class _EventFile:
    """One event file, written in the calling thread.

    tensorboardX's SummaryWriter writes from a worker thread: when a write
    fails there (a full disk), the thread dies and the next ``add_*`` call
    waits for ever on its full queue (and so does closing it at exit).
    Here each event is written by the caller, so a failure is raised where
    it happens, as :class:`~brainstorm.errors.FileWriteError`; the file is
    then closed (``closed`` is True) and writes nothing more.
    """

    def __init__(
        self,
        owner: str,
        log_dir: str,
        suffix: str,
        purge_step: int | None,
        parts: _TensorBoardX,
    ):
        self._owner = owner
        self._parts = parts
        self.log_dir = log_dir
        # the name tensorboardX gives its files ('tfevents' marks them)
        name = (
            f'events.out.tfevents.{str(time.time())[:10]}.'
            f'{socket.gethostname()}{suffix}'
        )
        self.path = os.path.join(log_dir, name)
        self._records = None
        self.closed = False
        self._guarded(lambda: os.makedirs(log_dir, exist_ok=True), log_dir)
        self._records = self._guarded(lambda: parts.RecordWriter(self.path))
        self._write(parts.Event(wall_time=time.time(), file_version='brain.Event:2'))
        if purge_step is not None:
            # as SummaryWriter(purge_step=...): TensorBoard drops the events
            # at this step and later that an earlier file of the folder holds
            self._write(parts.Event(step=purge_step, file_version='brain.Event:2'))
            self._write(
                parts.Event(
                    step=purge_step,
                    session_log=parts.SessionLog(status=parts.SessionLog.START),
                )
            )

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        self._add(self._parts.scalar(tag, value), step)

    def add_histogram(self, tag: str, values: np.ndarray, step: int) -> None:
        self._add(self._parts.histogram(tag, values, _default_bins()), step)

    def flush(self) -> None:
        """Write the buffered events to the disk (``fsync``)."""
        self._guarded(lambda: self._open_records().flush())

    def close(self) -> None:
        """Flush and close the file (nothing happens if it was closed)."""
        if self.closed:
            return
        try:
            self.flush()
        finally:
            self._abandon()

    def _add(self, summary, step: int) -> None:
        event = self._parts.Event(wall_time=time.time(), step=int(step))
        event.summary.CopyFrom(summary)
        self._write(event)

    def _write(self, event) -> None:
        data = event.SerializeToString()
        self._guarded(lambda: self._open_records().write(data))

    def _open_records(self):
        if self.closed or self._records is None:
            raise ValueError(
                f"{self._owner}: the event file '{self.path}' is closed "
                '(after a failed write, or at the end of training).'
            )
        return self._records

    def _guarded(self, step: Callable, filename: str | None = None):
        """Run ``step``; on an OSError close the file and raise FileWriteError."""
        try:
            return step()
        except OSError as err:
            self._abandon()
            raise self._write_error(err, filename or self.path) from err

    def _abandon(self) -> None:
        """Close the file, ignoring errors (its buffer may not fit either)."""
        records, self._records = self._records, None
        self.closed = True
        if records is not None:
            try:
                records.close()
            except OSError:
                pass

    def _write_error(self, err: OSError, filename: str) -> FileWriteError:
        reason = err.strerror or str(err)
        what = (
            f"create the log folder '{filename}'"
            if filename == self.log_dir
            else f"write the event file '{filename}' in the log folder '{self.log_dir}'"
        )
        error = FileWriteError(
            err.errno,
            f'{self._owner}: cannot {what}: {reason} ({type(err).__name__}, '
            f'errno {err.errno}). The events written before stay in the '
            'folder; this file is closed, and the next call of the hook '
            'starts a new one.',
        )
        error.filename = filename
        return error


class SaveLogsTensorBoard(Hook):
    """Write the logs as TensorBoard scalars, and optionally histograms.

    Needs tensorboardX: ``pip install 'brainstorm-nn[tensorboard]'``. Then
    ``tensorboard --logdir <log_dir>`` shows the curves.

    Each call appends the log entries that are new since the last call, one
    scalar each, under the log's dotted name with ``/`` for ``.`` (e.g.
    ``validation/Accuracy``, ``rolling_training/total_loss``), at its step:
    the epoch it was logged at, or, for ``timescale='update'``, its update.
    With ``histograms=True`` every call also writes a histogram of each
    parameter (``parameters/<layer>/<name>``) at the current epoch (or
    update). The file is flushed after each call and closed when training
    ends.

    Resuming from a checkpoint continues where the checkpoint was written:
    the hook's state (in the checkpoint) tells which entries it wrote, and
    TensorBoard is told to drop what a run wrote after the checkpoint
    (tensorboardX's ``purge_step``), so the curves have no duplicates.

    Args:
        log_dir: the folder of the event files (created if needed); one
            folder per run, as TensorBoard expects.
        log_names: dotted names of the logs to write (None: every log of
            numbers; logs holding other values are skipped).
        histograms: also write parameter histograms.
        name, timescale, interval, verbose: see :class:`Hook`.

    The events are written in the training thread, not by tensorboardX's
    background writer: a failed write (a full disk, a file-size limit)
    raises at once, instead of stopping a thread that the next write would
    wait on for ever.

    Raises:
        ImportError: at the start of training if tensorboardX is missing,
            with the command that installs it.
        FileWriteError: (an ``OSError``) if an event file cannot be
            written, naming the file, the log folder and the system's error
            (``errno``); inside ``train`` it ends the run with a note naming
            the hook. The events written before stay in the folder; the
            failed file is closed and the next call starts a new one.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.SaveLogsTensorBoard('runs/first'))
        >>> list(trainer.hooks)
        ['SaveLogsTensorBoard']
    """

    __arguments__ = {
        'log_dir': Arg(FileName(), doc='the folder of the event files'),
        'log_names': Arg(Optional(_NAMES), doc='the logs to write (None: all)'),
        'histograms': Arg(Bool(), doc='also write parameter histograms'),
    }

    __undescribed__ = {'_writer': None, '_written': {}, '_last_step': -1}

    def __init__(
        self,
        log_dir: str = 'tensorboard_logs',
        log_names=None,
        histograms: bool = False,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        super().__init__(name, timescale, interval, verbose)
        self.log_dir = log_dir
        self.log_names = None if log_names is None else _names_list(log_names)
        self.histograms = histograms
        self._writer: _EventFile | None = None
        self._written: dict = {}  # log name -> entries written
        self._last_step = -1

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that tensorboardX can be imported.

        The count of entries written is kept: a second ``train`` of the
        same trainer goes on where the first ended.

        Raises:
            ImportError: with the command that installs it (also if the
                installed tensorboardX lacks a part the hook writes with).
        """
        super().start(net, stepper, verbose, named_data_iters)
        _tensorboardx(f"SaveLogsTensorBoard '{self.__name__}'")
        self._close()

    def end(self) -> None:
        """Flush and close the event file.

        Raises:
            FileWriteError: if the last events cannot be written.
        """
        self._close()

    def _close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def _open(self) -> _EventFile:
        if self._writer is None or self._writer.closed:
            owner = f"SaveLogsTensorBoard '{self.__name__}'"
            # after a resume, TensorBoard drops the events of the earlier
            # run from this step on (written after the checkpoint)
            purge = self._last_step + 1 if self._last_step >= 0 else None
            # files are named by the second they were opened in: a second
            # file in the same second would overwrite the first, unless the
            # names differ by their suffix
            suffix = f'.{os.getpid()}.{next(_WRITER_NUMBERS):06d}'
            self._writer = None
            self._writer = _EventFile(
                owner, os.fspath(self.log_dir), suffix, purge, _tensorboardx(owner)
            )
        return self._writer

    def _step(self, epoch, update) -> int:
        if self.timescale == 'update' and update is not None:
            return int(update)
        return int(epoch)

    def _write_log(self, writer, logs, log_name: str, epoch_nr: int) -> None:
        """Write the entries of one log that are new since the last call.

        Only the new entries are read and checked: a log written at every
        update costs each call its new entries, not the whole log.
        """
        done = self._written.get(log_name, 0)
        if self.log_names is None:
            log = self._get_log(logs, log_name, epoch_nr)
            if not isinstance(log, list) or not all(_is_number(v) for v in log[done:]):
                return
        else:
            log = self._get_number_log(logs, log_name, epoch_nr, start=done)
        if not log:
            return
        epochs, updates = log_counters(log, done)
        for value, epoch, update in zip(log[done:], epochs, updates):
            step = self._step(epoch, update)
            writer.add_scalar(_tag(log_name), float(value), step)
            self._last_step = max(self._last_step, step)
        self._written[log_name] = len(log)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Append the new log entries (and histograms) on rank 0, then flush."""
        if not self.is_root:
            return None
        # a failed write loses this call's buffered events: they count as
        # unwritten again, and the next file (its purge step after the
        # last step written before) writes them anew
        written, last_step = dict(self._written), self._last_step
        try:
            self._write_all(self._open(), epoch_nr, update_nr, net, logs)
        except BaseException:
            self._written, self._last_step = written, last_step
            raise
        return None

    def _write_all(self, writer, epoch_nr, update_nr, net, logs) -> None:
        names = self.log_names if self.log_names is not None else _leaf_paths(logs)
        for log_name in names:
            self._write_log(writer, logs, log_name, epoch_nr)
        if self.histograms:
            step = update_nr if self.timescale == 'update' else epoch_nr
            for layer_name, layer in net.layers.items():
                for param in layer.parameter_shapes:
                    values = net.get(f'{layer_name}.parameters.{param}')
                    writer.add_histogram(
                        f'parameters/{layer_name}/{param}',
                        np.asarray(values, dtype=np.float64).ravel(),
                        step,
                    )
            self._last_step = max(self._last_step, int(step))
        writer.flush()

    def get_state(self) -> dict:
        """The entries written per log and the last step, for checkpoints.

        Checkpoints keep numeric arrays: the log names are the UTF-8 bytes
        of their JSON list.
        """
        names = list(self._written)
        return {
            'log_names': np.frombuffer(json.dumps(names).encode('utf-8'), np.uint8),
            'written': np.array([self._written[n] for n in names], dtype=np.int64),
            'last_step': np.int64(self._last_step),
        }

    def set_state(self, state: dict) -> None:
        """Restore the state from :meth:`get_state` (when resuming)."""
        text = np.asarray(state['log_names'], dtype=np.uint8).tobytes()
        names = json.loads(text.decode('utf-8'))
        counts = np.asarray(state['written']).ravel()
        if not isinstance(names, list) or len(names) != len(counts):
            raise ValueError('log_names and written do not match')
        self._written = {str(n): int(c) for n, c in zip(names, counts)}
        self._last_step = int(np.asarray(state['last_step']))
