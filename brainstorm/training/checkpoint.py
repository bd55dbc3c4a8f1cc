"""Checkpoint files: everything needed to continue a training run exactly.

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

Files are written under a temporary name and moved into place, so an
interrupted write never damages the previous checkpoint.
"""

from __future__ import annotations

import json

import numpy as np

from brainstorm.describable import get_description
from brainstorm.utils import (
    TrainingValidationError,
    get_brainstorm_info,
    open_hdf5,
    write_atomically,
)

__all__ = ['CHECKPOINT_FORMAT', 'write_checkpoint', 'read_checkpoint',
           'get_random_state', 'set_random_state', 'iterator_chain']

CHECKPOINT_FORMAT = b'Checkpoint file v1.0'


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
    return {'name': str(name), 'keys': np.asarray(keys, dtype=np.uint32),
            'pos': int(pos), 'has_gauss': int(has_gauss),
            'cached_gaussian': float(cached), 'seed': int(seed)}


def set_random_state(rnd, state: dict) -> None:
    """Restore a state made by :func:`get_random_state`."""
    rnd.set_state((state['name'], np.asarray(state['keys'], dtype=np.uint32),
                   int(state['pos']), int(state['has_gauss']),
                   float(state['cached_gaussian'])))
    if hasattr(rnd, '_seed'):
        rnd._seed = int(state['seed'])


def _json_bytes(obj, what: str, filename: str) -> np.ndarray:
    try:
        text = json.dumps(get_description(obj))
    except (TypeError, ValueError) as err:
        raise TrainingValidationError(
            f"Checkpoint '{filename}': the {what} cannot be stored: {err}") \
            from None
    return np.frombuffer(text.encode('utf-8'), dtype=np.uint8)


def _write_arrays(group, arrays: dict) -> None:
    for key, value in arrays.items():
        group.create_dataset(key, data=np.asarray(value))


def _write_random(group, state: dict) -> None:
    group.create_dataset('keys', data=state['keys'])
    for key in ('name', 'pos', 'has_gauss', 'cached_gaussian', 'seed'):
        group.attrs[key] = state[key]


def _write_random_states(f, random_states: dict, name: str = 'random'
                         ) -> None:
    random = f.create_group(name)
    for key in ('global', 'network', 'handler'):
        if random_states.get(key) is not None:
            _write_random(random.create_group(key), random_states[key])
    iterators = random.create_group('iterators')
    for name, chain in random_states['iterators'].items():
        group = iterators.create_group(name)
        group.attrs['length'] = len(chain)
        for i, state in enumerate(chain):
            if state is not None:
                _write_random(group.create_group(str(i)), state)
    if random_states.get('ranks') is not None:
        ranks = random.create_group('ranks')
        ranks.attrs['length'] = len(random_states['ranks'])
        for rank, states in enumerate(random_states['ranks']):
            _write_random_states(ranks, states, str(rank))


# --------------------------------------------------------------- write ----

def write_checkpoint(filename: str, network_description: dict,
                     parameters: np.ndarray, trainer_description: dict,
                     progress: dict, stepper_state: dict, hook_states: dict,
                     random_states: dict) -> None:
    """Write a checkpoint file atomically.

    Args:
        filename: the file to (over)write.
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
        TrainingValidationError: if something cannot be stored. The previous
            file (if any) is untouched whenever writing fails.
    """
    import h5py

    def write(tmp):
        with h5py.File(tmp, 'w') as f:
            f.attrs['info'] = np.bytes_(get_brainstorm_info())
            f.attrs['format'] = np.bytes_(CHECKPOINT_FORMAT)
            f.create_dataset('network', data=_json_bytes(
                network_description, 'network description', filename))
            f.create_dataset('parameters', data=np.asarray(parameters))
            f.create_dataset('trainer', data=_json_bytes(
                trainer_description, 'trainer description', filename))
            f.create_dataset('progress', data=_json_bytes(
                progress, 'logs', filename))
            _write_arrays(f.create_group('stepper'), stepper_state)
            hooks = f.create_group('hooks')
            for i, (name, state) in enumerate(hook_states.items()):
                if state:
                    group = hooks.create_group(str(i))
                    group.attrs['name'] = name
                    _write_arrays(group, state)
            _write_random_states(f, random_states)

    write_atomically(filename, write)


# ---------------------------------------------------------------- read ----

def _read_json(f, key: str):
    raw = f[key][()]
    return json.loads(np.asarray(raw, dtype=np.uint8).tobytes().decode('utf-8'))


def _read_arrays(group) -> dict:
    return {key: np.asarray(group[key][()]) for key in group}


def _attr_str(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _read_random(group) -> dict:
    state: dict = {'keys': np.asarray(group['keys'][()], dtype=np.uint32)}
    for key in ('name', 'pos', 'has_gauss', 'cached_gaussian', 'seed'):
        value = group.attrs[key]
        state[key] = value.decode() if isinstance(value, bytes) else value
    return state


def _read_random_states(random) -> dict:
    random_states: dict = {key: (_read_random(random[key])
                                 if key in random else None)
                           for key in ('global', 'network', 'handler')}
    iterators = {}
    for name, group in random['iterators'].items():
        length = int(group.attrs['length'])
        iterators[name] = [_read_random(group[str(i)])
                           if str(i) in group else None
                           for i in range(length)]
    random_states['iterators'] = iterators
    if 'ranks' in random:
        ranks = random['ranks']
        random_states['ranks'] = [_read_random_states(ranks[str(rank)])
                                  for rank in range(int(ranks.attrs['length']))]
    return random_states


def read_checkpoint(filename: str) -> dict:
    """Read a checkpoint file.

    Returns:
        dict with the keys ``network``, ``parameters``, ``trainer``,
        ``progress``, ``stepper_state``, ``hook_states`` and
        ``random_states`` (see :func:`write_checkpoint`).

    Raises:
        TrainingValidationError: if the file is missing, not a checkpoint,
            or corrupt.
    """
    f, fmt = open_hdf5(filename, TrainingValidationError, 'checkpoint')
    with f:
        required = ('network', 'parameters', 'trainer', 'progress', 'stepper',
                    'hooks', 'random')
        missing = [key for key in required if key not in f]
        if not isinstance(fmt, bytes) or fmt != CHECKPOINT_FORMAT or missing:
            raise TrainingValidationError(
                f"'{filename}' is not a brainstorm checkpoint: expected format "
                f'{CHECKPOINT_FORMAT!r} and entries {list(required)}. Received '
                f'format {fmt!r}, missing {missing}.')
        try:
            random_states = _read_random_states(f['random'])
            return {
                'network': _read_json(f, 'network'),
                'parameters': np.asarray(f['parameters'][()]),
                'trainer': _read_json(f, 'trainer'),
                'progress': _read_json(f, 'progress'),
                'stepper_state': _read_arrays(f['stepper']),
                'hook_states': {_attr_str(group.attrs['name']):
                                _read_arrays(group)
                                for group in f['hooks'].values()},
                'random_states': random_states,
            }
        except (OSError, ValueError, KeyError, UnicodeDecodeError) as err:
            raise TrainingValidationError(
                f"Checkpoint '{filename}' is corrupt: {err}") from None
