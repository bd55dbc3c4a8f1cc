"""Calling a trainer's hooks: starting them, calling those due, ending them.

The :class:`~brainstorm.training.trainer.Trainer` decides when hooks run;
these functions run them at the counters of its
:class:`~brainstorm.training.progress.TrainingProgress`: they log what a
hook returns, turn ``StopIteration`` into a stop request, note on an error
which hook raised it and when, and end every started hook however a run
ends. A hook whose ``timescale`` or ``interval`` was changed, after it was
added, to a value it cannot run with is refused with an error naming it.
"""

from __future__ import annotations

import numbers

from brainstorm._logging import get_logger
from brainstorm.errors import TrainingValidationError
from brainstorm.training.progress import TrainingProgress
from brainstorm.training.utils import add_log, format_result

__all__ = [
    'start_hooks',
    'end_hooks',
    'due_hooks',
    'call_hook',
    'note_hook_error',
    'check_hook_timing',
]

_log = get_logger('training')

#: the timescales a hook can run at
TIMESCALES = ('epoch', 'update')


def note_hook_error(
    err: BaseException, name: str, hook, when: str, progress: TrainingProgress
) -> None:
    """Note on ``err`` (and log) which hook raised it, when and at which count.

    Args:
        err: the exception.
        name: the hook's name in the trainer.
        hook: the hook.
        when: e.g. ``'start'`` or ``'its update call'``.
        progress: the trainer's progress, for the counters.
    """
    note = (
        f"Raised in hook '{name}' ({type(hook).__name__}) during "
        f'{when} (epoch {progress.epoch_nr}, update '
        f'{progress.update_nr}).'
    )
    if hasattr(err, 'add_note'):
        err.add_note(note)
    _log.error(f'{note} {type(err).__name__}: {err}')


def start_hooks(
    hooks: dict,
    net,
    stepper,
    verbose: bool,
    named_data_iters: dict,
    started: list,
    progress: TrainingProgress,
) -> None:
    """Call ``start(net, stepper, verbose, named_data_iters)`` of each hook.

    Args:
        hooks: name -> hook, in the order they start.
        net: the network.
        stepper: the trainer's stepper.
        verbose: passed on to each hook.
        named_data_iters: the data iterators by name.
        started: receives ``(name, hook)`` of each hook before its start
            is called, so that one whose start fails is ended too.
        progress: the trainer's progress, for error notes.
    """
    for name, hook in list(hooks.items()):
        started.append((name, hook))
        try:
            hook.start(net, stepper, verbose, named_data_iters)
        except Exception as err:
            note_hook_error(err, name, hook, 'start', progress)
            raise


def end_hooks(
    started: list, error: BaseException | None, progress: TrainingProgress
) -> None:
    """Call ``end`` of the started hooks, last started first.

    Every hook is ended even if another's ``end`` fails. With ``error``
    (the exception ending the run) a failing ``end`` is noted on it;
    otherwise the first failure is raised after all were ended.

    Args:
        started: ``(name, hook)`` of the started hooks, in starting order.
        error: the exception ending the run, or None.
        progress: the trainer's progress, for error notes.
    """
    first = None
    for name, hook in reversed(started):
        end = getattr(hook, 'end', None)
        if not callable(end):
            continue
        try:
            end()
        except Exception as err:
            note_hook_error(err, name, hook, 'its end', progress)
            if error is not None and hasattr(error, 'add_note'):
                error.add_note(
                    f"Hook '{name}' also failed to end: {type(err).__name__}: {err}"
                )
            elif first is None:
                first = err
    if first is not None and error is None:
        raise first


def check_hook_timing(name: str, hook) -> None:
    """Check that ``hook`` can be called: its ``timescale`` and ``interval``.

    ``add_hook`` checks them, but a plain assignment afterwards
    (``hook.interval = 0``) is not seen there; an interval of 0 would fail
    with a bare ZeroDivisionError, a timescale such as ``'Epoch'`` would
    never be due (and a stopping hook never stop the run).

    Args:
        name: the hook's name in the trainer.
        hook: the hook.

    Raises:
        TrainingValidationError: naming the hook and the attribute, if
            ``timescale`` is not ``'epoch'`` or ``'update'``, or
            ``interval`` is not an int >= 1.
    """
    timescale = getattr(hook, 'timescale', None)
    if not (isinstance(timescale, str) and timescale in TIMESCALES):
        raise TrainingValidationError(
            f"Trainer: hook '{name}' ({type(hook).__name__}) has timescale="
            f"{timescale!r}; expected 'epoch' or 'update' (lower case). "
            'Set it when creating the hook (timescale=...).'
        )
    interval = getattr(hook, 'interval', None)
    if not (
        isinstance(interval, numbers.Integral) and not isinstance(interval, bool)
    ) or (interval < 1):
        raise TrainingValidationError(
            f"Trainer: hook '{name}' ({type(hook).__name__}) has interval="
            f'{interval!r}; expected an int >= 1 (the hook is called when '
            f'the {timescale} count is a multiple of it). Set it when '
            'creating the hook (interval=...).'
        )


def due_hooks(hooks: dict, timescale: str, progress: TrainingProgress) -> list:
    """Return ``(name, hook)`` of the hooks due now, in order.

    A hook is due when its ``timescale`` is ``timescale`` and the count of
    that timescale is a multiple of its ``interval``.

    Raises:
        TrainingValidationError: for a hook whose ``timescale`` or
            ``interval`` cannot be run (see :func:`check_hook_timing`).
    """
    count = progress.epoch_nr if timescale == 'epoch' else progress.update_nr
    due = []
    for name, hook in hooks.items():
        check_hook_timing(name, hook)
        if hook.timescale == timescale and count % hook.interval == 0:
            due.append((name, hook))
    return due


def call_hook(
    name: str,
    hook,
    timescale: str,
    net,
    stepper,
    logs: dict,
    progress: TrainingProgress,
    verbose: bool,
    is_root: bool,
    results: dict | None = None,
) -> bool:
    """Call one hook and log its result.

    Args:
        name: the hook's name; its non-None result is logged under it.
        hook: the hook.
        timescale: for error notes.
        net: the network.
        stepper: the trainer's stepper.
        logs: the trainer's logs, which the hook reads.
        progress: the trainer's progress, for the counters.
        verbose: whether to print the result, unless the hook sets its
            own ``run_verbosity``.
        is_root: whether this process prints (rank 0).
        results: where to log the result (default: ``logs``);
            :meth:`Trainer.evaluate` gives its ``results`` here, so that
            the hooks still read the training logs.

    Returns:
        True if the hook asked to stop (raised ``StopIteration``, whose
        value, if any, is logged).
    """
    counters = (progress.epoch_nr, progress.update_nr)
    results = logs if results is None else results
    try:
        result = hook(
            epoch_nr=progress.epoch_nr,
            update_nr=progress.update_nr,
            net=net,
            stepper=stepper,
            logs=logs,
        )
    except StopIteration as request:
        if request.value is not None:
            add_log(results, name, request.value, *counters)
        return True
    except Exception as err:
        note_hook_error(err, name, hook, f'its {timescale} call', progress)
        raise
    if result is not None:
        add_log(results, name, result, *counters)
        if getattr(hook, 'run_verbosity', verbose) and is_root:
            for line in format_result(result):
                _log.info(f'{name} >> {line}')
    return False
