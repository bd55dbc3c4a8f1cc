"""Checkpoints of a training run: writing them, reading them, resuming.

:func:`save_checkpoint` gathers what a running
:class:`~brainstorm.training.trainer.Trainer` needs to continue exactly
(parameters, stepper and hook states, counters, logs, the position in the
epoch and every random state, of every rank in a data-parallel run) and
writes it; :func:`load_checkpoint` reads it back into a new trainer and
network; :func:`check_resume` and :func:`apply_resume` put the remaining
state back when training continues. The HDF5 file format itself is in
``brainstorm.training.checkpoint_file``, whose names are also
importable from here.
"""

from __future__ import annotations

import importlib.machinery
import json
import os
import re
from collections import OrderedDict

import numpy as np

from brainstorm.describable import (
    _find_describable_class,
    create_from_description,
    get_description,
)
from brainstorm.errors import (
    DescriptionError,
    TrainingValidationError,
)
from brainstorm.handlers.base_handler import first_use_owner, peek_random_state
from brainstorm.randomness import global_rnd
from brainstorm.structure.network import _build_from_file, check_stored_sizes
from brainstorm.training.checkpoint_file import (
    _MT_KEYS,
    CHECKPOINT_FORMAT,
    check_random_state,
    get_random_state,
    iterator_chain,
    read_checkpoint,
    set_random_state,
    write_checkpoint,
)
from brainstorm.training.progress import INITIAL_ROUNDS, TrainingProgress
from brainstorm.training.utils import LogEntries, log_counters

__all__ = [
    'CHECKPOINT_FORMAT',
    'write_checkpoint',
    'read_checkpoint',
    'get_random_state',
    'set_random_state',
    'check_random_state',
    'iterator_chain',
    'iterator_states',
    'save_checkpoint',
    'load_checkpoint',
    'check_resume',
    'apply_resume',
    'restore_hook_states',
    'set_chain_states',
    'check_restored_path',
]


# ----------------------------------------------------------- paths ----

# file names Python (or site) would import or run from a folder on sys.path
_IMPORTABLE_SUFFIXES = frozenset(
    suffix.lower() for suffix in importlib.machinery.all_suffixes()
) | {
    '.py',
    '.pyc',
    '.pyo',
    '.pyw',
    '.pyd',
    '.so',
    '.pth',
    '.pyz',
    '.zip',
    '.egg',
    '.whl',
}
_IMPORTABLE_NAMES = frozenset(
    {'sitecustomize', 'usercustomize', '__init__', '__main__', '__pycache__'}
)


def check_restored_path(owner: str, filename, folders=()) -> None:
    """Check a file name that a hook restored from a file will write to.

    The path (relative paths taken from the working folder, symbolic links
    resolved) must lead inside the current working folder or one of
    ``folders``, have no hidden (``.``) part below the innermost of these
    folders that holds it (the folders themselves may be hidden), and not
    name a file Python would import (``*.py``, ``*.pyc``, ``*.so``,
    ``*.pth``, ``sitecustomize``...).

    Args:
        owner: names the hook, for messages.
        filename: the restored path.
        folders: further folders writes may go to (the checkpoint's).

    Raises:
        TrainingValidationError: naming ``owner``, the path and the rule.
    """

    def refuse(rule: str):
        raise TrainingValidationError(
            f'{owner}: refusing to write to {filename!r}: {rule}. If you '
            'wrote this file yourself, load it with trusted=True, or replace '
            'the hook.'
        )

    if not isinstance(filename, str) or not filename or '\0' in filename:
        refuse('a file name must be a non-empty str')
    name = re.split(r'[\\/]', filename)[-1].lower()
    if (
        any(name.endswith(suffix) for suffix in _IMPORTABLE_SUFFIXES)
        or name.split('.')[0] in _IMPORTABLE_NAMES
    ):
        refuse('it names a file Python could import')
    target = os.path.realpath(filename)
    roots = [os.path.realpath(folder) for folder in (os.getcwd(), *folders)]
    # the innermost folder holding the target decides: a hidden folder
    # above it (a checkpoint kept in '.runs/') does not count
    for root in sorted(roots, key=len, reverse=True):
        if os.path.commonpath([root, target]) == root and target != root:
            below = os.path.relpath(target, root).split(os.sep)
            if any(part.startswith('.') for part in below):
                refuse('it names a hidden file or folder')
            return
    refuse(f"it leads outside the working folder and the checkpoint's folder {roots}")


# ---------------------------------------------------------- values ----


def _jsonable(value):
    return json.loads(json.dumps(get_description(value)))


def _ordered(value):
    if isinstance(value, dict):
        return OrderedDict((k, _ordered(v)) for k, v in value.items())
    return value


def _log_counter_tree(logs):
    """Return the logs' tree with ``[epochs, updates]`` in place of each log."""
    if isinstance(logs, dict):
        return {key: _log_counter_tree(value) for key, value in logs.items()}
    return [list(part) for part in log_counters(logs)]


def _with_counters(logs, counters):
    """Return logs read from a checkpoint as LogEntries with their counters."""
    if isinstance(logs, dict):
        return OrderedDict(
            (
                key,
                _with_counters(
                    value,
                    (counters or {}).get(key) if isinstance(counters, dict) else None,
                ),
            )
            for key, value in logs.items()
        )
    if (
        isinstance(counters, list)
        and len(counters) == 2
        and all(len(c) == len(logs) for c in counters)
    ):
        return LogEntries(logs, *counters)
    return LogEntries(logs)


def iterator_states(named_data_iters) -> dict:
    """Return the random states of every iterator and those it wraps.

    Args:
        named_data_iters: name -> data iterator.

    Returns:
        name -> list with the state of each iterator of the chain (None for
        one without a random state).
    """
    return {
        name: [
            get_random_state(it.rnd) if getattr(it, 'rnd', None) is not None else None
            for it in iterator_chain(it0)
        ]
        for name, it0 in named_data_iters.items()
    }


# ----------------------------------------------------------- write ----


def _random_states(run) -> dict:
    states = iterator_states(run.named_data_iters)
    if not run.progress.epoch_complete:
        states.update(run.progress.epoch_start_iterator_states)
    # the handler's state only if it was drawn already: reading
    # handler.rnd would draw its seed from global_rnd now, and the run
    # with checkpoints would differ from the one without
    handler_rnd = peek_random_state(run.net.handler)
    return {
        'global': get_random_state(global_rnd),
        'network': get_random_state(run.net.rnd),
        'handler': get_random_state(handler_rnd) if handler_rnd is not None else None,
        'iterators': states,
    }


def _state_to_json(state):
    if state is None:
        return None
    return dict(state, keys=[int(key) for key in state['keys']])


def _state_from_json(value, where: str):
    """Return a random state stored as JSON, checked as one read from HDF5."""
    if value is None:
        return None
    keys = value.get('keys') if isinstance(value, dict) else None
    if not (
        isinstance(keys, list)
        and len(keys) == _MT_KEYS
        and all(_is_count(key) and key < 2**32 for key in keys)
    ):
        raise TrainingValidationError(
            f"{where}: a random state must be a dict whose 'keys' are "
            f'{_MT_KEYS} ints in [0, 2**32 - 1]. Received: {value!r:.200}'
        )
    state = dict(value, keys=np.asarray(keys, dtype=np.uint32))
    check_random_state(state, where)
    return state


def _training_states_now(run):
    """Mid-epoch: the current states of the training iterator's chain.

    The file's ``iterators`` entry holds, for the training iterator, the
    states at the start of the epoch (to replay its order of batches);
    monitors that pass over the training iterator (per update, or under
    a second name) draw from the same states, so the states to go on
    with after the replay are stored as well.
    """
    if run.progress.epoch_complete:
        return None
    training = run.named_data_iters['training_data_iter']
    states = iterator_states({'training_data_iter': training})
    return [_state_to_json(state) for state in states['training_data_iter']]


def _progress(trainer, run, logs, epoch_scores) -> dict:
    progress = run.progress
    return {
        'current_epoch_nr': progress.epoch_nr,
        'current_update_nr': progress.update_nr,
        'started': progress.initial_rounds_begun,
        'initial_done': list(progress.initial_done),
        'logs': logs,
        'log_counters': _log_counter_tree(trainer.logs),
        'epoch_complete': progress.epoch_complete,
        'batches_done': progress.batches_done,
        'epoch_scores': epoch_scores,
    }


def save_checkpoint(trainer, run, filename: str) -> None:
    """Write a checkpoint of a running training.

    In a data-parallel run every rank calls it: rank 0 gathers the random
    states and partial epoch figures of all ranks and writes the file, the
    others wait until it is written.

    Args:
        trainer: the trainer whose :meth:`train` runs.
        run: the running ``train``'s ``TrainingRun`` (network,
            iterators, processes, and the progress with the position in
            the epoch).
        filename: the file to (over)write.

    Raises:
        TrainingValidationError: if the logs or anything else cannot be
            stored (the previous file is then untouched).
    """
    random_states = _random_states(run)
    states_now = _training_states_now(run)
    try:
        logs = _jsonable(trainer.logs)
        epoch_scores = _jsonable(run.progress.epoch_scores)
    except (TypeError, ValueError) as err:
        raise TrainingValidationError(
            f"Checkpoint '{filename}': the logs cannot be stored: {err}"
        ) from None
    processes = run.processes
    # each rank has its own random states and partial epoch figures; rank
    # 0 stores them all (and its own as the defaults)
    gathered = processes.gather((random_states, epoch_scores, states_now), root=0)
    if not processes.is_root:
        processes.barrier()  # returns once rank 0 has written the file
        return
    progress = _progress(trainer, run, logs, epoch_scores)
    if states_now is not None:
        progress['training_iterator_states'] = states_now
    if processes.size > 1:
        # the per-rank entries exist only in files of data-parallel runs
        random_states = dict(random_states, ranks=[g[0] for g in gathered])
        progress['rank_epoch_scores'] = [g[1] for g in gathered]
        if states_now is not None:
            progress['rank_training_iterator_states'] = [g[2] for g in gathered]
    hook_states = OrderedDict()
    for name, hook in trainer.hooks.items():
        get_state = getattr(hook, 'get_state', None)
        if get_state is not None:
            hook_states[name] = get_state()
    net = run.net
    write_checkpoint(
        filename,
        get_description(net),
        net.get('parameters'),
        get_description(trainer),
        progress,
        trainer.stepper.get_state(),
        hook_states,
        random_states,
    )
    processes.barrier()


# ------------------------------------------------------------ read ----


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _bad_entry(progress: dict, where: str, key: str, expected: str):
    raise TrainingValidationError(
        f"{where} is corrupt: progress entry '{key}' must be {expected}. "
        f'Received: {progress.get(key)!r:.200}'
    )


def _check_progress(progress: dict, where: str) -> None:
    """Check the types of a checkpoint's progress entries."""

    def bad(key, expected):
        _bad_entry(progress, where, key, expected)

    for key in ('current_epoch_nr', 'current_update_nr', 'batches_done'):
        if not _is_count(progress.get(key)):
            bad(key, 'an int >= 0')
    for key in ('started', 'epoch_complete'):
        if not isinstance(progress.get(key), bool):
            bad(key, 'a bool')
    for key in ('logs', 'epoch_scores'):
        if not isinstance(progress.get(key), dict):
            bad(key, 'a dict')
    rounds = [list(INITIAL_ROUNDS[:n]) for n in range(len(INITIAL_ROUNDS) + 1)]
    if 'initial_done' in progress and progress['initial_done'] not in rounds:
        bad('initial_done', f'one of {rounds}')
    if 'rank_epoch_scores' in progress and not (
        isinstance(progress['rank_epoch_scores'], list)
        and all(isinstance(s, dict) for s in progress['rank_epoch_scores'])
    ):
        bad('rank_epoch_scores', 'a list of dicts')
    _read_iterator_states(progress, where)


def _read_iterator_states(progress: dict, where: str) -> None:
    """Check the training iterator's states now, and make them arrays."""
    if 'training_iterator_states' in progress:
        progress['training_iterator_states'] = _chain_from_json(
            progress['training_iterator_states'], f'{where}, progress'
        )
    if 'rank_training_iterator_states' in progress:
        ranks = progress['rank_training_iterator_states']
        if not isinstance(ranks, list):
            _bad_entry(progress, where, 'rank_training_iterator_states', 'a list')
        progress['rank_training_iterator_states'] = [
            _chain_from_json(chain, f'{where}, progress, rank {rank}')
            for rank, chain in enumerate(ranks)
        ]


def _chain_from_json(chain, where: str) -> list:
    if not isinstance(chain, list):
        raise TrainingValidationError(
            f"{where}: entry 'training_iterator_states' must be a list of "
            f'random states. Received: {chain!r:.200}'
        )
    return [_state_from_json(state, where) for state in chain]


def _unknown_classes(description, path: str = '') -> list:
    """``(path, class name)`` of each ``@type`` no Describable class has.

    Such a class is defined in a module that was not imported yet (a
    user's own hook, stepper or scorer).
    """
    found = []
    if isinstance(description, dict):
        name = description.get('@type')
        if isinstance(name, str):
            try:
                _find_describable_class(name)
            except DescriptionError:
                found.append((path or 'trainer', name))
        for key, value in description.items():
            found.extend(_unknown_classes(value, f'{path}.{key}' if path else str(key)))
    elif isinstance(description, list):
        for i, value in enumerate(description):
            found.extend(_unknown_classes(value, f'{path}[{i}]'))
    return found


def _create_trainer(description, trainer_class, where: str):
    unknown = _unknown_classes(description)
    if unknown:
        listed = ', '.join(f"'{name}' (at {path})" for path, name in unknown)
        raise TrainingValidationError(
            f'{where} names classes that are not known in this process: '
            f'{listed}. If they are your own classes (hooks, steppers, '
            'scorers...), import the modules that define them before '
            'calling Trainer.from_checkpoint.'
        )
    try:
        trainer = create_from_description(description, expected=trainer_class)
    except Exception as err:  # a crafted description may break anything
        raise TrainingValidationError(
            f'{where} is corrupt: cannot recreate the trainer '
            f'({type(err).__name__}: {err}).'
        ) from None
    if not isinstance(trainer, trainer_class):
        raise TrainingValidationError(f'{where} does not hold a Trainer.')
    return trainer


def _check_hook_paths(trainer, filename: str, where: str) -> None:
    folder = os.path.dirname(os.path.abspath(filename))
    for name, hook in trainer.hooks.items():
        # a file, or the folder of SaveLogsTensorBoard's event files
        for attribute in ('filename', 'log_dir'):
            path = getattr(hook, attribute, None)
            if path is not None:
                check_restored_path(
                    f"{where}: hook '{name}' ({type(hook).__name__})", path, [folder]
                )


def load_checkpoint(filename: str, trusted: bool, trainer_class) -> tuple:
    """Recreate a trainer and its network from a checkpoint file.

    The whole file is checked before anything is built (see
    :meth:`~brainstorm.training.trainer.Trainer.from_checkpoint`, which
    calls this and gives the trainer the progress returned). The rest of
    the state is put back by :func:`apply_resume` when training
    continues.

    Args:
        filename: the checkpoint file.
        trusted: keep the stored file names of hooks unchecked.
        trainer_class: the class the stored trainer must be an instance of.

    Returns:
        ``(trainer, net, progress)``: the trainer with its logs, the
        network, and the trainer's ``TrainingProgress`` (counters, rounds
        at count 0, and the checkpoint's data to continue as ``resume``).

    Raises:
        TrainingValidationError: if the file is missing, damaged,
            inconsistent or not a checkpoint, or (unless ``trusted``) a
            hook would write outside the working folder or to a file
            Python would import.
    """
    where = f"Checkpoint '{filename}'"
    data = read_checkpoint(filename)
    parameters = data['parameters']
    # sizes before memory: nothing is built before this passes
    check_stored_sizes(
        data['network'], int(parameters.shape[0]), where, TrainingValidationError
    )
    progress = data['progress']
    _check_progress(progress, where)
    trainer = _create_trainer(data['trainer'], trainer_class, where)
    if not trusted:
        _check_hook_paths(trainer, filename, where)
    net = _build_from_file(
        data['network'], parameters, filename, TrainingValidationError, 'Checkpoint'
    )
    trainer.logs = _with_counters(
        _ordered(progress['logs']), progress.get('log_counters')
    )
    data['filename'] = filename
    data['architecture'] = _jsonable(net.architecture)
    return trainer, net, _read_progress(progress, data)


def _read_progress(progress: dict, data: dict) -> TrainingProgress:
    """The trainer's progress as the checkpoint stores it, to be continued."""
    record = TrainingProgress()
    record.epoch_nr = int(progress['current_epoch_nr'])
    record.update_nr = int(progress['current_update_nr'])
    record.started = bool(progress['started'])
    # files written before 'initial_done' was stored: both rounds ran
    # exactly when the run had started
    record.initial_done = tuple(
        progress.get('initial_done', INITIAL_ROUNDS if record.started else ())
    )
    record.resume = data  # put back by apply_resume when train() runs
    return record


# ---------------------------------------------------------- resume ----


def check_resume(resume: dict, net, named_data_iters) -> None:
    """Check that ``train`` got the network and iterators of the checkpoint.

    Args:
        resume: what :func:`load_checkpoint` read.
        net: the network passed to ``train``.
        named_data_iters: the iterators passed to ``train``, by name.

    Raises:
        TrainingValidationError: for another network (architecture or
            parameters) or other iterator names.
    """
    filename = resume['filename']
    if (
        _jsonable(net.architecture) != resume['architecture']
        or tuple(net.buffer.parameters.shape) != resume['parameters'].shape
    ):
        raise TrainingValidationError(
            f"Checkpoint '{filename}' belongs to another network: "
            'train() must get the network returned by '
            'Trainer.from_checkpoint (or one with the same architecture '
            'and parameters).'
        )
    saved_parameters = np.asarray(resume['parameters']).astype(net.handler.dtype)
    if not np.array_equal(net.get('parameters'), saved_parameters, equal_nan=True):
        raise TrainingValidationError(
            f"Checkpoint '{filename}': the network given to train() has other "
            'parameters than the checkpoint (the run would go on from them, '
            'not from where it stopped). Pass the network returned by '
            'Trainer.from_checkpoint, or set its parameters from it.'
        )
    saved = set(resume['random_states']['iterators'])
    if saved != set(named_data_iters):
        raise TrainingValidationError(
            f"Checkpoint '{filename}' was written with data iterators "
            f'{sorted(saved)}; train() received {sorted(named_data_iters)}'
            '. Pass the same names to continue exactly.'
        )


def _restore_stepper_and_hooks(trainer, resume: dict, filename: str) -> None:
    try:
        trainer.stepper.set_state(resume['stepper_state'])
    except Exception as err:  # a damaged state may break anything
        raise TrainingValidationError(
            f"Checkpoint '{filename}': cannot restore the stepper state "
            f'({type(err).__name__}: {err})'
        ) from None
    restore_hook_states(trainer, resume)


def restore_hook_states(trainer, resume: dict) -> None:
    """Give the trainer's hooks the states a checkpoint holds for them.

    ``train`` does it when it continues the checkpoint (see
    :func:`apply_resume`), and ``Trainer.evaluate`` before its hooks run,
    so that a loaded trainer's hooks judge the restored logs as the
    original's would (a ``ReduceOnPlateau`` without its state took every
    restored entry as new). Each hook's ``set_state`` runs after its
    ``start``.

    Raises:
        TrainingValidationError: if the trainer lacks a hook the checkpoint
            has a state for, or a state cannot be restored.
    """
    filename = resume['filename']
    for name, state in resume['hook_states'].items():
        hook = trainer.hooks.get(name)
        if hook is None or not hasattr(hook, 'set_state'):
            raise TrainingValidationError(
                f"Checkpoint '{filename}' holds a state for hook '{name}'"
                f', which the trainer does not have (hooks: '
                f'{list(trainer.hooks)}).'
            )
        try:
            hook.set_state(state)
        except Exception as err:
            raise TrainingValidationError(
                f"Checkpoint '{filename}': cannot restore the state of "
                f"hook '{name}' ({type(err).__name__}: {err})"
            ) from None


def _states_of_this_rank(resume: dict, processes, filename: str) -> tuple:
    """Return this process's random states, epoch figures and states now."""
    states = resume['random_states']
    progress = resume['progress']
    if 'ranks' not in states:
        return (
            states,
            progress['epoch_scores'],
            progress.get('training_iterator_states'),
        )
    size = processes.size
    if len(states['ranks']) != size:
        raise TrainingValidationError(
            f"Checkpoint '{filename}' was written by a data-parallel "
            f'run on {len(states["ranks"])} processes; it can only '
            f'continue on as many (this run has {size}).'
        )
    scores = progress.get('rank_epoch_scores')
    if not isinstance(scores, list) or len(scores) != size:
        raise TrainingValidationError(
            f"Checkpoint '{filename}' is corrupt: it holds random "
            f'states of {size} ranks but epoch figures of '
            f'{len(scores) if isinstance(scores, list) else 0}.'
        )
    now = progress.get('rank_training_iterator_states')
    if now is not None and len(now) != size:
        raise TrainingValidationError(
            f"Checkpoint '{filename}' is corrupt: it holds random "
            f'states of {size} ranks but training iterator states of '
            f'{len(now)}.'
        )
    return (
        states['ranks'][processes.rank],
        scores[processes.rank],
        None if now is None else now[processes.rank],
    )


def set_chain_states(name: str, iterator, chain_states, filename: str) -> None:
    """Restore the random states of an iterator and those it wraps.

    Args:
        name: the iterator's name in ``train``, for messages.
        iterator: the outermost iterator.
        chain_states: a state (or None) per iterator of its chain, as
            :func:`iterator_states` returns them.
        filename: the checkpoint, for messages.

    Raises:
        TrainingValidationError: if the chain has another length.
    """
    chain = iterator_chain(iterator)
    if len(chain) != len(chain_states):
        raise TrainingValidationError(
            f"Checkpoint '{filename}': data iterator '{name}' wraps "
            f'{len(chain) - 1} iterators, the saved one wrapped '
            f'{len(chain_states) - 1}. Build it the same way.'
        )
    for it, state in zip(chain, chain_states):
        if state is not None and getattr(it, 'rnd', None) is not None:
            set_random_state(it.rnd, state)


def _restore_iterators(states: dict, named_data_iters, filename: str) -> None:
    # the training iterator last: an iterator given under two names (or
    # wrapped by another named one) must start the epoch's replay from
    # the training iterator's stored state
    saved = states['iterators']
    names = sorted(saved, key=lambda name: name == 'training_data_iter')
    for name in names:
        set_chain_states(name, named_data_iters[name], saved[name], filename)


def _restore_network_random(states: dict, net) -> None:
    # the handler first: reading handler.rnd may draw a seed from
    # global_rnd, which is restored last
    if states['handler'] is not None:
        handler_rnd = getattr(net.handler, 'rnd', None)
        if handler_rnd is not None:
            set_random_state(handler_rnd, states['handler'])
    elif first_use_owner(net.handler) is not None:
        # not drawn yet when the checkpoint was written: draw it from
        # global_rnd when first needed, as the recorded run did
        first_use_owner(net.handler).rnd = None
    set_random_state(net.rnd, states['network'])
    set_random_state(global_rnd, states['global'])


def apply_resume(trainer, resume: dict, run) -> None:
    """Put the state of a checkpoint back when ``train`` continues it.

    Restores the stepper and hook states, the random states of this
    process (its rank's, in a data-parallel run) and the position in the
    epoch into ``run.progress``.

    Args:
        trainer: the trainer made by :func:`load_checkpoint`.
        resume: what :func:`load_checkpoint` read.
        run: the running ``train``'s ``TrainingRun``.

    Raises:
        TrainingValidationError: if a state cannot be restored or the run
            has another number of processes or other iterators.
    """
    filename = resume['filename']
    _restore_stepper_and_hooks(trainer, resume, filename)
    states, epoch_scores, states_now = _states_of_this_rank(
        resume, run.processes, filename
    )
    _restore_iterators(states, run.named_data_iters, filename)
    _restore_network_random(states, run.net)
    progress = resume['progress']
    record = run.progress
    record.epoch_complete = bool(progress['epoch_complete'])
    record.batches_done = int(progress['batches_done'])
    record.epoch_scores = _ordered(epoch_scores)
    if not record.epoch_complete:
        record.epoch_start_iterator_states = {
            'training_data_iter': states['iterators']['training_data_iter']
        }
        saved = states['iterators']['training_data_iter']
        if states_now is not None and len(states_now) != len(saved):
            raise TrainingValidationError(
                f"Checkpoint '{filename}' is corrupt: it holds "
                f'{len(saved)} epoch-start but {len(states_now)} current '
                'random states of the training iterator.'
            )
        # set by the trainer once the epoch's batches done are replayed
        record.training_states_now = states_now
