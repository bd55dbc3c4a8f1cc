"""Errors, names, paths and array-shape helpers used all over brainstorm."""

from __future__ import annotations

import re

import numpy as np

__all__ = [
    'ValidationError', 'NetworkValidationError', 'LayerValidationError',
    'IteratorValidationError', 'StructureValidationError',
    'TrainingValidationError', 'UnknownNameError', 'DatasetValidationError',
    'InitializationError', 'NAME_BLACKLIST', 'is_valid_layer_name',
    'get_by_path', 'get_normalized_path', 'flatten_time',
    'flatten_time_and_features', 'flatten_features', 'flatten_all_but_last',
    'flatten_keys', 'reshape_view', 'get_inheritors', 'progress_bar',
    'write_atomically',
    'get_brainstorm_info',
]


# ----------------------------------------------------------------- errors ---

class ValidationError(Exception):
    """Base class of every error raised for bad user input."""


class NetworkValidationError(ValidationError):
    """A network architecture, connection or data dict is malformed."""


class LayerValidationError(ValidationError):
    """A layer was given bad arguments, shapes or connections."""


class IteratorValidationError(ValidationError):
    """A data iterator was given inconsistent or malformed data."""


class StructureValidationError(ValidationError):
    """A shape template or buffer structure is malformed."""


class TrainingValidationError(ValidationError, ValueError):
    """A trainer, stepper, schedule, hook or checkpoint got bad input."""


class UnknownNameError(TrainingValidationError, KeyError):
    """A name (of a data iterator, log or layer) is not known."""

    def __str__(self):
        return str(self.args[0])


class DatasetValidationError(ValidationError):
    """A data set file is missing or not in the layout of the data scripts."""


class InitializationError(Exception):
    """An initializer cannot fill a parameter of the requested shape.

    Raising it makes :meth:`Network.initialize` use the fallback.
    """


# ------------------------------------------------------------------ names ---

NAME_BLACKLIST = {'default', 'fallback'}
_IDENTIFIER = re.compile(r'^[_a-zA-Z][_a-zA-Z0-9]*$')


def is_valid_layer_name(name) -> bool:
    """True if ``name`` is a Python identifier and not a reserved word."""
    return (isinstance(name, str) and bool(_IDENTIFIER.match(name))
            and name not in NAME_BLACKLIST)


def get_by_path(d, path: str):
    """Look up a dotted ``path`` in nested dict-likes.

    Raises:
        KeyError: naming the missing part and listing the available keys.
    """
    current = d
    for i, part in enumerate(path.split('.')):
        try:
            current = current[part]
        except (KeyError, TypeError, IndexError):
            prefix = '.'.join(path.split('.')[:i])
            keys = list(current.keys()) if hasattr(current, 'keys') else []
            where = f" in '{prefix}'" if prefix else ''
            raise KeyError(f"Unknown key '{part}'{where} of path '{path}'. "
                           f'Available keys: {keys}') from None
    return current


def get_normalized_path(*parts: str) -> str:
    """Join path parts with dots; ``..`` removes the preceding component.

    ``get_normalized_path('L', 'outputs', '..parameters.W')`` gives
    ``'L.parameters.W'``.
    """
    result = []
    # split each part on its own: joining first would turn a bare '..' part
    # into '....' (two pops)
    for part in parts:
        for component in re.split(r'(\.\.|\.)', part):
            if component in ('', '.'):
                continue
            if component == '..':
                if result:
                    result.pop()
            else:
                result.append(component)
    return '.'.join(result)


def flatten_keys(dictionary: dict) -> set:
    """All dotted leaf paths of a nested dict."""
    keys = set()
    for k, v in dictionary.items():
        if isinstance(v, dict):
            keys |= {f'{k}.{sub}' for sub in flatten_keys(v)}
        else:
            keys.add(k)
    return keys


# ----------------------------------------------------------------- shapes ---

def reshape_view(array, shape: tuple):
    """``array.reshape(shape)``, but never a silent copy of a NumPy array.

    Buffers are views into the network's flat memory; writing into a copy
    would lose the result. Raises ValueError if no view is possible.
    """
    shape = tuple(int(s) for s in shape)
    if isinstance(array, np.ndarray):
        view = array.view()
        try:
            view.shape = shape
        except AttributeError:
            raise ValueError(
                f'Cannot reshape an array of shape {array.shape} with strides '
                f'{array.strides} to {shape} without copying it.') from None
        return view
    return array.reshape(shape)


def flatten_time(array):
    """``(T, B, ...)`` -> ``(T*B, ...)`` as a view."""
    shape = array.shape
    return reshape_view(array, (shape[0] * shape[1],) + tuple(shape[2:]))


def flatten_time_and_features(array):
    """``(T, B, f1, f2, ...)`` -> ``(T*B, f1*f2*...)`` as a view."""
    shape = array.shape
    return reshape_view(array, (shape[0] * shape[1], int(np.prod(shape[2:]))))


def flatten_features(array, start_idx: int = 2):
    """Merge all axes from ``start_idx`` on into one."""
    shape = array.shape
    return reshape_view(array, tuple(shape[:start_idx]) +
                        (int(np.prod(shape[start_idx:])),))


def flatten_all_but_last(array):
    """``(..., F)`` -> ``(prod(...), F)`` as a view.

    Raises ValueError for feature-slice views with several feature axes,
    which cannot be flattened this way without a copy; use
    :func:`flatten_time` and handle the remaining axes instead.
    """
    shape = array.shape
    return reshape_view(array, (int(np.prod(shape[:-1])), shape[-1]))


# ------------------------------------------------------------------- misc ---

def get_inheritors(cls) -> set:
    """All transitive subclasses of ``cls``."""
    result = set()
    todo = [cls]
    while todo:
        parent = todo.pop()
        for child in parent.__subclasses__():
            if child not in result:
                result.add(child)
                todo.append(child)
    return result


def progress_bar(maximum: int, prefix: str = '[', bar: str = '====1====2====3'
                 '====4====5====6====7====8====9====0', suffix: str = '] Took: {0}\n'):
    """A generator drawing a plain-text progress bar.

    Send it the current progress (0..maximum); it yields the characters to
    print. Kept for compatibility; :class:`brainstorm.hooks.ProgressBar` uses
    tqdm.
    """
    import time
    start = time.time()
    i = 0
    progress = yield prefix
    while progress < maximum:
        new_i = int(len(bar) * progress / maximum) if maximum else len(bar)
        progress = yield bar[i:new_i]
        i = new_i
    elapsed = time.time() - start
    yield bar[i:] + suffix.format(f'{elapsed:0.1f}s')


def write_atomically(filename: str, write) -> None:
    """Write a file so that a crash never leaves it half-written.

    Calls ``write(tmp_name)`` for a temporary file in the same folder, flushes
    it to disk and then moves it over ``filename`` in one step. If anything
    fails, the temporary file is removed and an existing ``filename`` is left
    untouched.
    """
    import os
    import tempfile
    directory = os.path.dirname(os.path.abspath(filename))
    fd, tmp = tempfile.mkstemp(prefix='.brainstorm-', suffix='.tmp',
                               dir=directory)
    os.close(fd)
    try:
        write(tmp)
        with open(tmp, 'rb+') as handle:
            os.fsync(handle.fileno())
        os.replace(tmp, filename)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def open_hdf5(filename: str, error: type, what: str):
    """Open an HDF5 file for reading.

    Args:
        filename: the file.
        error: the ValidationError subclass to raise.
        what: what the file should be, for the message ('network file').

    Returns:
        ``(file, format)``: the open ``h5py.File`` and its ``format``
        attribute as bytes (None if it has none).

    Raises:
        error: if the file is missing or not an HDF5 file.
    """
    import h5py
    try:
        f = h5py.File(filename, 'r')
    except (OSError, ValueError) as err:
        raise error(f"Cannot read {what} '{filename}': it is missing or not "
                    f'an HDF5 file ({err}).') from None
    fmt = f.attrs.get('format')
    if isinstance(fmt, str):
        fmt = fmt.encode()
    elif isinstance(fmt, np.bytes_):
        fmt = bytes(fmt)
    return f, fmt


def get_brainstorm_info() -> bytes:
    """The ``info`` attribute written into every HDF5 file brainstorm makes."""
    from brainstorm.__about__ import __version__
    return f'Created with brainstorm {__version__}'.encode()
