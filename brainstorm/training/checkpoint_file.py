"""The checkpoint file format: everything needed to continue a run exactly.

This module writes and reads the HDF5 file;
:mod:`brainstorm.training.checkpoint` gathers what goes into it from a
running trainer and puts it back.

A checkpoint is one HDF5 file (attributes ``info`` and
``format = b'Checkpoint file v1.0'``) holding

* ``network``: the network description (UTF-8 JSON) and ``parameters``,
* ``trainer``: the trainer description (stepper, hooks, scorers; JSON),
* ``progress``: counters, logs and the position inside the current epoch
  (JSON),
* ``stepper/``: the stepper state (velocities, moments, step counts),
* ``hooks/<i>/``: the state of hooks that keep one (attribute ``name``),
* ``random/``: the states of ``global_rnd``, the network's and the
  handler's random states, and of every data iterator (following the
  ``.iter`` chain of wrappers). A data-parallel run also stores every
  rank's states in ``random/ranks/<rank>/`` (same layout).

Every group and dataset carries a SHA-256 checksum attribute (``sha256``)
that is verified on load. Files are written under a temporary name and
moved into place, so an interrupted write never damages the previous
checkpoint.
"""

from __future__ import annotations

import json

import numpy as np

from brainstorm.describable import get_description
from brainstorm.errors import (
    TrainingValidationError,
    ValidationError,
)
from brainstorm.files import (
    CheckedReader,
    get_brainstorm_info,
    open_hdf5,
    write_hdf5,
)

__all__ = [
    'CHECKPOINT_FORMAT',
    'write_checkpoint',
    'read_checkpoint',
    'get_random_state',
    'set_random_state',
    'check_random_state',
    'iterator_chain',
]

CHECKPOINT_FORMAT = b'Checkpoint file v1.0'
_MT_KEYS = 624  # words in a Mersenne Twister state


# ------------------------------------------------------------- helpers ----


def iterator_chain(iterator) -> list:
    """The iterator followed by every iterator it wraps (via ``.iter``)."""
    chain: list = []
    while iterator is not None and all(iterator is not c for c in chain):
        chain.append(iterator)
        iterator = getattr(iterator, 'iter', None)
    return chain


def get_random_state(rnd) -> dict:
    """A RandomState's full state (and seed) as a dict of plain values."""
    name, keys, pos, has_gauss, cached = rnd.get_state()
    seed = rnd.get_seed() if hasattr(rnd, 'get_seed') else 0
    return {
        'name': str(name),
        'keys': np.asarray(keys, dtype=np.uint32),
        'pos': int(pos),
        'has_gauss': int(has_gauss),
        'cached_gaussian': float(cached),
        'seed': int(seed),
    }


def set_random_state(rnd, state: dict) -> None:
    """Restore a state made by :func:`get_random_state`.

    Raises:
        TrainingValidationError: for a malformed state (see
            :func:`check_random_state`).
    """
    check_random_state(state, 'set_random_state')
    rnd.set_state(
        (
            state['name'],
            np.asarray(state['keys'], dtype=np.uint32),
            int(state['pos']),
            int(state['has_gauss']),
            float(state['cached_gaussian']),
        )
    )
    if hasattr(rnd, '_seed'):
        rnd._seed = int(state['seed'])


def _json_bytes(obj, what: str, filename: str) -> np.ndarray:
    try:
        text = json.dumps(get_description(obj))
    except (TypeError, ValueError) as err:
        raise TrainingValidationError(
            f"Checkpoint '{filename}': the {what} cannot be stored: {err}"
        ) from None
    return np.frombuffer(text.encode('utf-8'), dtype=np.uint8)


def _write_arrays(writer, path: str, arrays: dict) -> None:
    for key, value in arrays.items():
        writer.dataset(f'{path}/{key}', np.asarray(value))


def _write_random(writer, path: str, state: dict) -> None:
    writer.group(path)
    writer.dataset(f'{path}/keys', state['keys'])
    for key in ('name', 'pos', 'has_gauss', 'cached_gaussian', 'seed'):
        writer.set_attribute(path, key, state[key])


def _write_random_states(writer, random_states: dict, path: str = 'random') -> None:
    writer.group(path)
    for key in ('global', 'network', 'handler'):
        if random_states.get(key) is not None:
            _write_random(writer, f'{path}/{key}', random_states[key])
    iterators = writer.group(f'{path}/iterators')
    for name, chain in random_states['iterators'].items():
        group = writer.group(f'{iterators}/{name}')
        writer.set_attribute(group, 'length', len(chain))
        for i, state in enumerate(chain):
            if state is not None:
                _write_random(writer, f'{group}/{i}', state)
    if random_states.get('ranks') is not None:
        ranks = writer.group(f'{path}/ranks')
        writer.set_attribute(ranks, 'length', len(random_states['ranks']))
        for rank, states in enumerate(random_states['ranks']):
            _write_random_states(writer, states, f'{ranks}/{rank}')


# --------------------------------------------------------------- write ----


def write_checkpoint(
    filename,
    network_description: dict,
    parameters: np.ndarray,
    trainer_description: dict,
    progress: dict,
    stepper_state: dict,
    hook_states: dict,
    random_states: dict,
) -> None:
    """Write a checkpoint file atomically.

    Args:
        filename: the file to (over)write (a str or ``os.PathLike``).
        network_description: ``get_description(net)``.
        parameters: the flat parameter array (NumPy).
        trainer_description: ``get_description(trainer)``.
        progress: JSON-able dict of counters, logs and epoch position.
        stepper_state: name -> array (``stepper.get_state()``).
        hook_states: hook name -> (name -> array); stored in groups
            ``hooks/<index>`` with the hook name as attribute ``name``.
        random_states: ``{'global': s, 'network': s, 'handler': s or None,
            'iterators': {name: [s or None, ...]}}`` with states from
            :func:`get_random_state`; data-parallel runs add ``'ranks'``: a
            list with one such dict per rank.

    Raises:
        TrainingValidationError: if something cannot be stored.
        FileWriteError: if the file cannot be written (disk full, file-size
            limit, ...), naming it.

    The previous file (if any) is untouched whenever writing fails.
    """
    # everything that can fail to be stored fails before anything is written
    network = _json_bytes(network_description, 'network description', filename)
    trainer = _json_bytes(trainer_description, 'trainer description', filename)
    logs = _json_bytes(progress, 'logs', filename)

    def build(writer):
        writer.set_attribute('', 'info', np.bytes_(get_brainstorm_info()))
        writer.set_attribute('', 'format', np.bytes_(CHECKPOINT_FORMAT))
        writer.dataset('network', network)
        writer.dataset('parameters', np.asarray(parameters))
        writer.dataset('trainer', trainer)
        writer.dataset('progress', logs)
        _write_arrays(writer, writer.group('stepper'), stepper_state)
        hooks = writer.group('hooks')
        for i, (name, state) in enumerate(hook_states.items()):
            if state:
                group = writer.group(f'{hooks}/{i}')
                writer.set_attribute(group, 'name', name)
                _write_arrays(writer, group, state)
        _write_random_states(writer, random_states)

    write_hdf5(filename, build)


# ---------------------------------------------------------------- read ----


def _attribute(group, key: str, reader):
    try:
        value = group.attrs[key]
    except KeyError:
        reader.fail(group.name, f'attribute {key!r} is missing.')
    return value.decode() if isinstance(value, bytes) else value


def _read_json(reader, key: str):
    raw = reader.array(key)
    if not isinstance(raw, np.ndarray) or raw.dtype != np.uint8 or raw.ndim != 1:
        reader.fail(
            key,
            'expected UTF-8 JSON as a 1-d uint8 dataset. '
            f'Received: {type(raw).__name__} '
            f'{getattr(raw, "dtype", "")}',
        )
    try:
        return json.loads(raw.tobytes().decode('utf-8'))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        reader.fail(key, f'it is not UTF-8 JSON ({err}).')


def _read_arrays(reader, path: str) -> dict:
    group = reader.group(path)
    result = {}
    for key in group:
        value = reader.array(f'{path}/{key}')
        if isinstance(value, np.generic):
            value = np.asarray(value)
        if not isinstance(value, np.ndarray) or value.dtype.kind not in 'biuf':
            reader.fail(
                f'{path}/{key}',
                f'expected a numeric array. Received: {type(value).__name__}',
            )
        result[key] = value
    return result


def check_random_state(state: dict, where: str) -> None:
    """Check a state for :func:`set_random_state` before NumPy sees it.

    NumPy trusts it: a bad position crashes the interpreter.

    Raises:
        TrainingValidationError: naming ``where`` and the bad entry.
    """

    def bad(entry, expected):
        raise TrainingValidationError(
            f'{where}: random state entry {entry!r} must be {expected}. '
            f'Received: {state.get(entry)!r}'
        )

    if state.get('name') != 'MT19937':
        bad('name', "'MT19937'")
    keys = state.get('keys')
    if (
        not isinstance(keys, np.ndarray)
        or keys.dtype != np.uint32
        or keys.shape != (_MT_KEYS,)
    ):
        raise TrainingValidationError(
            f"{where}: random state entry 'keys' must be a uint32 array of "
            f'shape ({_MT_KEYS},). Received: '
            f'{getattr(keys, "dtype", type(keys).__name__)} '
            f'{getattr(keys, "shape", "")}'
        )
    for entry, low, high in (
        ('pos', 0, _MT_KEYS),
        ('has_gauss', 0, 1),
        ('seed', 0, 2**32 - 1),
    ):
        value = state.get(entry)
        if (
            isinstance(value, (bool, np.bool_))
            or not isinstance(value, (int, np.integer))
            or not low <= value <= high
        ):
            bad(entry, f'an int in [{low}, {high}]')
    cached = state.get('cached_gaussian')
    if (
        isinstance(cached, (bool, np.bool_))
        or not isinstance(cached, (int, float, np.integer, np.floating))
        or not np.isfinite(cached)
    ):
        bad('cached_gaussian', 'a finite float')


def _read_random(reader, path: str) -> dict:
    group = reader.group(path)
    state = {'keys': reader.array(f'{path}/keys')}
    for key in ('name', 'pos', 'has_gauss', 'cached_gaussian', 'seed'):
        state[key] = _attribute(group, key, reader)
    check_random_state(state, f"Checkpoint '{reader.filename}', '{path}'")
    return state


def _read_length(group, reader) -> int:
    length = _attribute(group, 'length', reader)
    # a length beyond the members present is refused below anyway; bound it
    # so a crafted number cannot make a huge list
    if (
        isinstance(length, (bool, np.bool_))
        or not isinstance(length, (int, np.integer))
        or not 0 <= length <= len(group) + 64
    ):
        reader.fail(
            group.name, f'attribute length must be a small int. Received: {length!r}'
        )
    return int(length)


def _read_random_states(reader, path: str, depth: int = 0) -> dict:
    random = reader.group(path)
    random_states: dict = {
        key: (_read_random(reader, f'{path}/{key}') if key in random else None)
        for key in ('global', 'network', 'handler')
    }
    for key in ('global', 'network'):
        if random_states[key] is None:
            reader.fail(f'{path}/{key}', 'the random state is missing.')
    iterators = {}
    iterators_path = f'{path}/iterators'
    for name in reader.group(iterators_path):
        group = reader.group(f'{iterators_path}/{name}')
        length = _read_length(group, reader)
        iterators[name] = [
            _read_random(reader, f'{iterators_path}/{name}/{i}')
            if str(i) in group
            else None
            for i in range(length)
        ]
    random_states['iterators'] = iterators
    if 'ranks' in random:
        if depth:
            reader.fail(f'{path}/ranks', 'ranks do not nest.')
        ranks = reader.group(f'{path}/ranks')
        random_states['ranks'] = [
            _read_random_states(reader, f'{path}/ranks/{rank}', depth + 1)
            for rank in range(_read_length(ranks, reader))
        ]
    return random_states


def read_checkpoint(filename: str) -> dict:
    """Read a checkpoint file.

    Every entry is checked before it is used: checksums (files written
    since checksums exist), that no dataset claims more data than the file
    holds, and the random states (see :func:`check_random_state`). Sizes
    against the network are checked by :meth:`Trainer.from_checkpoint`.

    Returns:
        dict with the keys ``network``, ``parameters``, ``trainer``,
        ``progress``, ``stepper_state``, ``hook_states`` and
        ``random_states`` (see :func:`write_checkpoint`).

    Raises:
        TrainingValidationError: if the file is missing, not a checkpoint,
            damaged or inconsistent, naming the file and the entry.
    """
    f, fmt = open_hdf5(filename, TrainingValidationError, 'checkpoint')
    with f:
        try:
            return _read_checkpoint(f, fmt, filename)
        except ValidationError:
            raise
        except Exception as err:  # whatever h5py or NumPy raise
            raise TrainingValidationError(
                f"Checkpoint '{filename}' is corrupt: {type(err).__name__}: {err}"
            ) from None


def _read_checkpoint(f, fmt, filename: str) -> dict:
    required = (
        'network',
        'parameters',
        'trainer',
        'progress',
        'stepper',
        'hooks',
        'random',
    )
    missing = [key for key in required if key not in f]
    if not isinstance(fmt, bytes) or fmt != CHECKPOINT_FORMAT or missing:
        raise TrainingValidationError(
            f"'{filename}' is not a brainstorm checkpoint: expected format "
            f'{CHECKPOINT_FORMAT!r} and entries {list(required)}. Received '
            f'format {fmt!r}, missing {missing}.'
        )
    reader = CheckedReader(f, filename, TrainingValidationError, 'Checkpoint')
    hook_states = {}
    for key in reader.group('hooks'):
        group = reader.group(f'hooks/{key}')
        name = _attribute(group, 'name', reader)
        if not isinstance(name, str) or name in hook_states:
            reader.fail(
                f'hooks/{key}',
                f'attribute name must be a str naming one hook. Received: {name!r}',
            )
        hook_states[name] = _read_arrays(reader, f'hooks/{key}')
    parameters = reader.array('parameters')
    if (
        not isinstance(parameters, np.ndarray)
        or parameters.ndim != 1
        or parameters.dtype.kind != 'f'
    ):
        reader.fail(
            'parameters',
            'expected a 1-d float array. Received: '
            f'{getattr(parameters, "dtype", type(parameters))} '
            f'{getattr(parameters, "shape", "")}',
        )
    data = {
        'network': _read_json(reader, 'network'),
        'parameters': parameters,
        'trainer': _read_json(reader, 'trainer'),
        'progress': _read_json(reader, 'progress'),
        'stepper_state': _read_arrays(reader, 'stepper'),
        'hook_states': hook_states,
        'random_states': _read_random_states(reader, 'random'),
    }
    for key in ('network', 'trainer', 'progress'):
        if not isinstance(data[key], dict):
            reader.fail(
                key, f'expected a JSON object. Received: {type(data[key]).__name__}'
            )
    return data
