"""Hooks that stop training.

They stop after an epoch, at a threshold, without improvement, on NaN or
on SIGQUIT. A hook stops training by raising ``StopIteration``.
"""

from __future__ import annotations

import math
import signal
import threading

import numpy as np

from brainstorm.arguments import Arg, Bool, Choice, Int, Real, Str
from brainstorm.hooks.base import (
    _NAMES,
    Hook,
    _describe_entry,
    _is_better,
    _log,
    _names_list,
)

__all__ = [
    'EarlyStopper',
    'StopAfterEpoch',
    'StopAfterThresholdReached',
    'StopOnNan',
    'StopOnSigQuit',
]


class EarlyStopper(Hook):
    """Stop when a log has not improved for ``patience`` entries.

    That is, once ``len(log) > index_of_best + patience``. The best entry
    is the first minimum (or maximum) among the finite entries: NaN and
    infinite entries are never the best, they count as entries without
    improvement (index 0 is the best while no entry is finite). The log
    must hold numbers (else TrainingValidationError naming the hook).

    Args:
        log_name: dotted path of the log to watch.
        patience: number of entries without improvement allowed (>= 1;
            0 would stop at every call).
        criterion: ``'min'`` or ``'max'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.EarlyStopper('validation.total_loss', patience=3))
        >>> list(trainer.hooks)
        ['EarlyStopper']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'patience': Arg(Int(1)),
        'criterion': Arg(Choice('min', 'max')),
    }

    def __init__(
        self,
        log_name: str,
        patience: int = 1,
        criterion: str = 'min',
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        # log_name, patience and criterion are checked as declared above
        super().__init__(name, timescale, interval, verbose)
        self.log_name = log_name
        self.patience = patience
        self.criterion = criterion

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Stop if the best entry is more than ``patience`` entries back."""
        log, start, (best, best_value) = self._number_log_since(
            logs, self.log_name, epoch_nr, (0, None)
        )
        if not log:
            return None
        # only the entries appended since the last call are read
        for i in range(start, len(log)):
            value = float(log[i])
            if math.isfinite(value) and (
                best_value is None or _is_better(value, best_value, self.criterion)
            ):
                best, best_value = i, value
        self._keep_scan(log, len(log), (best, best_value))
        if len(log) > best + self.patience:
            self.message(
                f"Stopping because '{self.log_name}' did not "
                f'improve for {self.patience} checks.'
            )
            raise StopIteration
        return None


class StopAfterEpoch(Hook):
    """Stop once ``epoch_nr >= max_epochs``.

    At the (default) epoch timescale that is after ``max_epochs`` whole
    epochs. At the update timescale ``epoch_nr`` is the epoch in progress,
    so the hook stops after the first update of epoch ``max_epochs`` (as
    in Brainstorm 0.5): ``max_epochs - 1`` whole epochs and one batch.

    Args:
        max_epochs: the number of epochs to train (int >= 0).
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(10))
        >>> list(trainer.hooks)
        ['StopAfterEpoch']
    """

    __arguments__ = {'max_epochs': Arg(Int(0))}

    def __init__(
        self,
        max_epochs: int,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        super().__init__(name, timescale, interval, verbose)
        self.max_epochs = max_epochs

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Stop once ``max_epochs`` epochs are done."""
        if epoch_nr >= self.max_epochs:
            self.message(
                f'Stopping because the maximum number of epochs '
                f'({self.max_epochs}) was reached.'
            )
            raise StopIteration
        return None


class StopAfterThresholdReached(Hook):
    """Stop once a log reaches a threshold.

    The threshold is reached when ``min(log) <= threshold`` for ``'min'``,
    ``max(log) >= threshold`` for ``'max'``, over the finite entries (NaN
    and infinite entries never reach it). A log missing at epoch 0 is
    fine.

    Args:
        log_name: dotted path of the log to watch.
        threshold: the value to reach.
        criterion: ``'min'`` or ``'max'``.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        Stop once the validation accuracy reaches 95 % (a score to
        maximise: ``criterion='max'``; the default ``'min'`` suits losses):

        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterThresholdReached(
        ...     'validation.Accuracy', threshold=0.95, criterion='max'))
        >>> list(trainer.hooks)
        ['StopAfterThresholdReached']
    """

    __arguments__ = {
        'log_name': Arg(Str(nonempty=True)),
        'threshold': Arg(Real()),
        'criterion': Arg(Choice('min', 'max')),
    }

    def __init__(
        self,
        log_name: str,
        threshold: float,
        criterion: str = 'min',
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        # log_name, threshold and criterion are checked as declared above
        super().__init__(name, timescale, interval, verbose)
        self.log_name = log_name
        self.threshold = threshold
        self.criterion = criterion

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Stop if the log has reached the threshold (non-finite entries aside)."""
        log, start, best = self._number_log_since(logs, self.log_name, epoch_nr, None)
        if not log:
            return None
        # only the entries appended since the last call are read
        for value in log[start:]:
            value = float(value)
            if math.isfinite(value) and (
                best is None or _is_better(value, best, self.criterion)
            ):
                best = value
        self._keep_scan(log, len(log), best)
        if best is None:
            return None
        if self.criterion == 'min':
            reached = best <= self.threshold
        else:
            reached = best >= self.threshold
        if reached:
            self.message(
                f"Stopping because '{self.log_name}' reached the "
                f'threshold {self.threshold}.'
            )
            raise StopIteration
        return None


def _all_finite(value) -> bool:
    """Whether a number or array is finite; True for what is no number."""
    try:
        return bool(np.all(np.isfinite(np.asarray(value, dtype=float))))
    except (TypeError, ValueError):
        return True


class StopOnNan(Hook):
    """Stop when something becomes NaN or infinite.

    Checks the last entry of each log in ``logs_to_check``, the parameters,
    and the training loss: at the ``'epoch'`` timescale the last
    ``rolling_training`` total loss, at the ``'update'`` timescale the loss
    of the last batch. When it stops, it says why on stderr (also when not
    verbose) and logs the reason under its name. (The trainer itself
    raises :class:`~brainstorm.errors.NonFiniteError` first unless it was
    created with ``check_finite=False``.)

    Args:
        logs_to_check: dotted log names (or one name).
        check_parameters: check the network's parameters.
        check_training_loss: check the training loss.
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopOnNan())
        >>> list(trainer.hooks)
        ['StopOnNan']
    """

    __arguments__ = {
        'logs_to_check': Arg(_NAMES),
        'check_parameters': Arg(Bool()),
        'check_training_loss': Arg(Bool()),
    }

    def __init__(
        self,
        logs_to_check=(),
        check_parameters: bool = True,
        check_training_loss: bool = True,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        super().__init__(name, timescale, interval, verbose)
        self.logs_to_check = _names_list(logs_to_check)
        self.check_parameters = check_parameters
        self.check_training_loss = check_training_loss

    def _finite_entry(self, log_name: str, value) -> bool:
        """Whether a number or numeric array is finite.

        Raises:
            TrainingValidationError: naming the hook and the log, for an
                entry that is neither (a str, a dict, None...).
        """
        if not isinstance(value, (str, bytes, dict)) and value is not None:
            try:
                values = np.asarray(value, dtype=float)
            except (TypeError, ValueError):
                pass
            else:
                return bool(np.all(np.isfinite(values)))
        raise self._log_error(
            log_name,
            f'ends with {_describe_entry(value)}, but StopOnNan checks '
            'numbers and numeric arrays.',
        )

    def _stop(self, what: str):
        """Warn that ``what`` is not finite and stop."""
        # never quiet: a run ending early for this reason must be seen
        # even with verbose=False (a WARNING goes to stderr by default)
        reason = f'Stopping because {what} is not finite.'
        _log.warning(f'{self.__name__} >> {reason}')
        raise StopIteration(reason)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Stop if a checked log, a parameter or the loss is not finite."""
        for log_name in self.logs_to_check:
            log = self._get_log_list(logs, log_name, epoch_nr)
            if log and not self._finite_entry(log_name, log[-1]):
                self._stop(f"log '{log_name}'")
        if self.check_parameters and not net.handler.is_fully_finite(
            net.buffer.parameters
        ):
            self._stop('a parameter')
        if self.check_training_loss:
            if self.timescale == 'update':
                if update_nr > 0 and not _all_finite(
                    net.get_loss_values()['total_loss']
                ):
                    self._stop('the training loss')
            else:
                rolling = logs.get('rolling_training', {})
                loss = rolling.get('total_loss', rolling.get('Loss'))
                if loss and not _all_finite(loss[-1]):
                    self._stop('the training loss')
        return None


class StopOnSigQuit(Hook):
    r"""Stop at the next call after the process received SIGQUIT.

    A terminal sends SIGQUIT on ``Ctrl+\``. Where there is no SIGQUIT
    (Windows) or the trainer does not run in the main thread, the hook does
    nothing.

    Args:
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopOnSigQuit())
        >>> list(trainer.hooks)
        ['StopOnSigQuit']
    """

    __undescribed__ = {'quit': False, '_previous': None, '_installed': False}

    def __init__(
        self,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        super().__init__(name, timescale, interval, verbose)
        self.quit = False
        self._previous = None
        self._installed = False

    def start(self, net, stepper, verbose, named_data_iters):
        """Install the SIGQUIT handler (:meth:`end` puts the previous back)."""
        super().start(net, stepper, verbose, named_data_iters)
        self.quit = False
        if (
            hasattr(signal, 'SIGQUIT')
            and threading.current_thread() is threading.main_thread()
        ):
            previous = signal.signal(signal.SIGQUIT, self._receive)
            if not self._installed:
                self._previous = previous
                self._installed = True
        else:
            self.message('SIGQUIT cannot be caught here; this hook is off.')

    def end(self):
        """Put back the SIGQUIT handler that was there before :meth:`start`."""
        if self._installed:
            signal.signal(signal.SIGQUIT, self._previous)
            self._previous = None
            self._installed = False

    def _receive(self, signum, frame):
        """The signal handler: note that SIGQUIT arrived."""
        self.quit = True

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Stop if SIGQUIT arrived since the last call."""
        if self.quit:
            self.quit = False
            self.message('Stopping because SIGQUIT was received.')
            raise StopIteration
        return None
