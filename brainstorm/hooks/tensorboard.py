"""A hook that writes the logs in TensorBoard's event format.

The event files are written by tensorboardX, an optional extra:
``pip install 'brainstorm-nn[tensorboard]'``. Only rank 0 of a
data-parallel run writes.
"""

from __future__ import annotations

import itertools
import json
import os

import numpy as np

import brainstorm.optional as optional
from brainstorm.arguments import Arg, Bool, FileName, Optional
from brainstorm.hooks.base import _NAMES, Hook, _is_number, _leaf_paths, _names_list
from brainstorm.training.utils import log_counters

__all__ = ['SaveLogsTensorBoard']

#: numbers the event files this process opens (see SaveLogsTensorBoard._open)
_WRITER_NUMBERS = itertools.count(1)


def _tag(log_name: str) -> str:
    """TensorBoard groups tags by the part before ``/``: a log's path."""
    return log_name.replace('.', '/')


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

    Raises:
        ImportError: at the start of training if tensorboardX is missing,
            with the command that installs it.

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

    __undescribed__ = {'_writer': None, '_written': None, '_last_step': -1}

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
        self._writer = None
        self._written: dict = {}  # log name -> entries written
        self._last_step = -1

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that tensorboardX can be imported.

        The count of entries written is kept: a second ``train`` of the
        same trainer goes on where the first ended.

        Raises:
            ImportError: with the command that installs it.
        """
        super().start(net, stepper, verbose, named_data_iters)
        optional.import_optional(
            'tensorboardX', f"SaveLogsTensorBoard '{self.__name__}'"
        )
        self._close()

    def end(self) -> None:
        """Flush and close the event file."""
        self._close()

    def _close(self) -> None:
        if self._writer is not None:
            writer, self._writer = self._writer, None
            writer.close()

    def _open(self):
        if self._writer is None:
            tensorboardX = optional.import_optional(
                'tensorboardX', f"SaveLogsTensorBoard '{self.__name__}'"
            )
            # after a resume, TensorBoard drops the events of the earlier
            # run from this step on (written after the checkpoint)
            purge = self._last_step + 1 if self._last_step >= 0 else None
            # tensorboardX names a file by the second it was opened in: a
            # second writer in the same second would overwrite the first
            # file, unless the names differ by their suffix
            suffix = f'.{os.getpid()}.{next(_WRITER_NUMBERS):06d}'
            self._writer = tensorboardX.SummaryWriter(
                logdir=self.log_dir, purge_step=purge, filename_suffix=suffix
            )
        return self._writer

    def _step(self, epoch, update) -> int:
        if self.timescale == 'update' and update is not None:
            return int(update)
        return int(epoch)

    def _write_log(self, writer, logs, log_name: str, epoch_nr: int) -> None:
        """Write the entries of one log that are new since the last call."""
        if self.log_names is None:
            log = self._get_log(logs, log_name, epoch_nr)
            if not isinstance(log, list) or not all(_is_number(v) for v in log):
                return
        else:
            log = self._get_number_log(logs, log_name, epoch_nr)
        if not log:
            return
        done = self._written.get(log_name, 0)
        epochs, updates = log_counters(log)
        for value, epoch, update in list(zip(log, epochs, updates))[done:]:
            step = self._step(epoch, update)
            writer.add_scalar(_tag(log_name), float(value), step)
            self._last_step = max(self._last_step, step)
        self._written[log_name] = len(log)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Append the new log entries (and histograms) on rank 0, then flush."""
        if not self.is_root:
            return None
        writer = self._open()
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
        return None

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
