"""The base class of all hooks and the helpers the hook modules share.

A hook has a ``timescale`` (``'epoch'`` or ``'update'``) and an
``interval``; the trainer calls it whenever the matching count is a
multiple of the interval. See :mod:`brainstorm.hooks` for the whole set.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from brainstorm._logging import get_logger
from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    Choice,
    Int,
    ListOf,
    Optional,
    Str,
)
from brainstorm.describable import Describable
from brainstorm.errors import (
    TrainingValidationError,
    UnknownNameError,
)
from brainstorm.naming import get_by_path
from brainstorm.parallel import processes_of
from brainstorm.scorers import _LogKey

__all__ = ['Hook']

# every hook module logs to 'brainstorm.hooks'
_log = get_logger('hooks')

#: Log names: one dotted name or a list of them.
_NAMES = AnyOf(ListOf(Str(nonempty=True)), Str(nonempty=True))

#: At least one log name: one dotted name or a non-empty list of them.
_SOME_NAMES = AnyOf(Str(nonempty=True), ListOf(Str(nonempty=True), nonempty=True))


def _leaf_paths(logs: Mapping, prefix: str = '') -> list:
    """Dotted paths of all leaves of nested logs, in insertion order."""
    paths = []
    for key, value in logs.items():
        if isinstance(value, Mapping):
            paths.extend(_leaf_paths(value, f'{prefix}{key}.'))
        else:
            paths.append(prefix + key)
    return paths


def _names_list(names) -> list:
    """One log name or several as a list of names."""
    return [names] if isinstance(names, str) else list(names)


def _is_number(value) -> bool:
    """Whether a log entry is a real number (NumPy scalars too, not bools)."""
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value[()]
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _describe_entry(value) -> str:
    """A short description of a log entry for error messages."""
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + '...'
    return f'{text} ({type(value).__name__})'


def _is_better(value, best, criterion: str) -> bool:
    """Whether ``value`` is strictly better than ``best``."""
    return value < best if criterion == 'min' else value > best


class Hook(Describable):
    """Base class of all hooks.

    Args:
        name: the hook's name (key in ``trainer.hooks`` and ``logs``);
            default: the class name. No ``'.'`` in it: log names are
            dotted paths.
        timescale: ``'epoch'`` or ``'update'``.
        interval: call every ``interval`` epochs/updates (int >= 1).
        verbose: whether to print; None follows the trainer.

    Attributes:
        priority: set by ``Trainer.add_hook`` (order of the hooks).
        run_verbosity: the verbosity in effect, set by :meth:`start`.
        comm: set by :meth:`start`: the MPI communicator of a data-parallel
            run, else None.
        writes_checkpoint: whether the trainer writes a checkpoint after
            the hooks of a call that included this one (True only for
            :class:`~brainstorm.hooks.SaveCheckpoint`).
    """

    __arguments__ = {
        'name': Arg(Optional(_LogKey()), attr='__name__'),
        'timescale': Arg(Choice('epoch', 'update'), omit_default=True),
        'interval': Arg(Int(1), omit_default=True),
        'verbose': Arg(Optional(Bool()), omit_default=True),
        'priority': Arg(Int(0), default=0, state=True),
    }

    __undescribed__ = {
        'run_verbosity': None,
        'comm': None,
        'processes': None,
        '_scan': None,
    }

    #: where the last read of a log ended: ``(log, count, kept,
    #: criterion)``, the log object, how many of its entries were read, what
    #: the hook kept of them and its criterion then (see
    #: :meth:`_number_log_since`); None before the first read
    _scan: tuple | None = None

    # the trainer writes a checkpoint after a call including such a hook
    writes_checkpoint = False

    def __init__(
        self,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        # the declarations above have checked every argument
        self.timescale = timescale
        self.interval = interval
        self.__name__ = name or type(self).__name__
        self.priority = 0
        self.verbose = verbose
        self.run_verbosity: bool | None = None
        self.comm = None
        self.processes = processes_of(None)

    def __init_from_description__(self, description: dict) -> None:
        super().__init_from_description__(description)
        if self.__name__ is None:  # as the constructor gives it: the class name
            self.__name__ = type(self).__name__
        self.processes = processes_of(None)  # as the constructor sets it

    def start(self, net, stepper, verbose: bool, named_data_iters: dict) -> None:
        """Prepare for a run; the trainer calls it before training.

        Sets ``processes`` (see ``brainstorm.parallel.processes_of``),
        its communicator ``comm`` and ``run_verbosity`` (False on the ranks other than
        0). Subclasses check their arguments against the network, stepper
        and data iterators here, and call this method first.
        """
        self.processes = processes_of(stepper)
        self.comm = self.processes.comm
        self.run_verbosity = (
            verbose if self.verbose is None else self.verbose
        ) and self.is_root

    def end(self) -> None:
        """Undo what :meth:`start` changed in the process; the trainer calls it.

        :meth:`~brainstorm.training.trainer.Trainer.train` and
        :meth:`~brainstorm.training.trainer.Trainer.evaluate` call it on
        every hook they started (in reverse order) when they end, normally
        or by an exception (``KeyboardInterrupt`` included). Hooks that
        install something process-wide in ``start`` (a signal handler, an
        open progress bar) restore it here. Does nothing by default.
        """

    @property
    def is_root(self) -> bool:
        """Whether this process prints and writes files.

        True, except on the ranks other than 0 of a data-parallel run.
        """
        return processes_of(getattr(self, 'comm', None)).is_root

    def message(self, msg: str) -> None:
        """Print ``"<name> >> msg"`` if the hook is verbose."""
        if self.run_verbosity:
            _log.info(f'{self.__name__} >> {msg}')

    def __call__(self, epoch_nr: int, update_nr: int, net, stepper, logs: dict):
        """Run the hook.

        Returns:
            a value to log under the hook's name, or None.

        Raises:
            StopIteration: to stop training.
        """
        raise NotImplementedError

    def get_state(self) -> dict:
        """State to keep in checkpoints: name -> NumPy array (or number)."""
        return {}

    def set_state(self, state: dict) -> None:
        """Restore a state from :meth:`get_state`."""

    def _get_log(self, logs: dict, log_name: str, epoch_nr: int):
        """The log at ``log_name``, or None while it may not exist yet.

        A log may be missing at epoch 0, and during the first epoch for
        update hooks.

        Raises:
            UnknownNameError: if it still does not exist, listing the logs.
        """
        try:
            return get_by_path(logs, log_name)
        except KeyError:
            if epoch_nr == 0 or (self.timescale == 'update' and epoch_nr <= 1):
                return None
            raise UnknownNameError(
                f"{type(self).__name__} '{self.__name__}': there is no log "
                f"'{log_name}' (epoch {epoch_nr}). Available logs: "
                f'{_leaf_paths(logs)}'
            ) from None

    def _log_error(self, log_name: str, problem: str) -> TrainingValidationError:
        """The error for a log that this hook cannot watch."""
        return TrainingValidationError(
            f"{type(self).__name__} '{self.__name__}': the log '{log_name}' {problem}"
        )

    def _get_log_list(self, logs: dict, log_name: str, epoch_nr: int):
        """The log at ``log_name`` (see :meth:`_get_log`), checked to be a list.

        Raises:
            TrainingValidationError: naming the hook and the log, if it is
                a group of logs (a dict) or anything else but a list.
        """
        log = self._get_log(logs, log_name, epoch_nr)
        if log is None or isinstance(log, list):
            return log
        if isinstance(log, Mapping):
            keys = list(log)
            example = f", e.g. '{log_name}.{keys[0]}'" if keys else ''
            raise self._log_error(
                log_name,
                f'is a group of logs with the entries {keys}, not a list '
                f'of values: name one of them{example}.',
            )
        raise self._log_error(
            log_name, f'is {_describe_entry(log)}, not a list of values.'
        )

    def _get_number_log(self, logs: dict, log_name: str, epoch_nr: int, start: int = 0):
        """The log at ``log_name`` (see :meth:`_get_log`), a list of numbers.

        Only the entries from ``start`` on are checked (those before were
        checked by an earlier call).

        Raises:
            TrainingValidationError: naming the hook, the log and what it
                holds, for a group of logs or an entry that is no real
                number (NaN and inf are numbers).
        """
        log = self._get_log_list(logs, log_name, epoch_nr)
        self._check_number_entries(log_name, log, start)
        return log

    def _check_number_entries(self, log_name: str, log, start: int) -> None:
        """Raise if an entry of ``log`` from ``start`` on is no real number."""
        for i, value in enumerate((log or [])[start:], start):
            if not _is_number(value):
                raise self._log_error(
                    log_name,
                    f'holds {_describe_entry(value)} at entry {i}, but '
                    f'{type(self).__name__} watches a log of numbers.',
                )

    def _number_log_since(self, logs: dict, log_name: str, epoch_nr: int, initial):
        """The log of numbers at ``log_name``, and where the last read ended.

        A hook that summarises a log (its best entry so far, say) reads
        only what was appended since its last call: a long run's calls
        would otherwise cost time in proportion to the log's length. The
        read starts again from the first entry for another log object (a
        new run, a restored checkpoint, an unpickled hook), a shorter one,
        or a hook whose ``criterion`` changed since. Logs grow by appending
        (as the trainer writes them); an entry changed in place is not read
        again.

        Returns:
            ``(log, start, kept)``: the log (None while it may not exist
            yet, see :meth:`_get_log`), its entries from ``start`` on
            checked to be numbers, and what :meth:`_keep_scan` kept for
            its first ``start`` entries (``initial`` where ``start`` is 0).
        """
        log = self._get_log_list(logs, log_name, epoch_nr)
        scan = self._scan
        if log is None:
            return None, 0, initial
        if (
            scan is not None
            and scan[0] is log
            and scan[1] <= len(log)
            and scan[3] == getattr(self, 'criterion', None)
        ):
            start, kept = scan[1], scan[2]
        else:
            start, kept = 0, initial
        self._check_number_entries(log_name, log, start)
        return log, start, kept

    def _keep_scan(self, log, count: int, kept) -> None:
        """Remember ``kept``, the summary of the first ``count`` entries of ``log``."""
        self._scan = (log, count, kept, getattr(self, 'criterion', None))

    def __repr__(self):
        return f"<{type(self).__name__} '{self.__name__}'>"
