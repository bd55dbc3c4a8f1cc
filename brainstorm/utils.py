"""Errors, names, paths and array-shape helpers used all over brainstorm."""

from __future__ import annotations

import math  # noqa: F401 - in Brainstorm 0.5's namespace of this module
import operator
import re
import threading
from datetime import datetime  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from functools import reduce

import numpy as np

from brainstorm.__about__ import __version__

__all__ = [
    'ValidationError',
    'NetworkValidationError',
    'LayerValidationError',
    'IteratorValidationError',
    'StructureValidationError',
    'TrainingValidationError',
    'UnknownNameError',
    'NonFiniteError',
    'DescriptionError',
    'DatasetValidationError',
    'InitializationError',
    'FileWriteError',
    'NAME_BLACKLIST',
    'PYTHON_IDENTIFIER',
    'product',
    'flatten',
    'convert_to_nested_indices',
    'sort_by_index_key',
    'silence',
    'is_valid_layer_name',
    'get_by_path',
    'get_normalized_path',
    'flatten_time',
    'flatten_time_and_features',
    'flatten_features',
    'flatten_all_but_last',
    'flatten_keys',
    'reshape_view',
    'get_inheritors',
    'progress_bar',
    'write_atomically',
    'write_hdf5',
    'CheckedWriter',
    'get_brainstorm_info',
]


# ----------------------------------------------------------------- errors ---


class ValidationError(ValueError):
    """Base class of every error raised for bad user input.

    A ValueError, so code written for Brainstorm 0.5 (which raised plain
    ValueErrors for shape mismatches and bad arguments) still catches it
    with ``except ValueError``.
    """


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


class NonFiniteError(ValidationError, FloatingPointError):
    """Training diverged: a NaN or infinite loss or parameter, or one too large.

    Too large means beyond the trainer's ``max_abs_parameter``. Raised by
    the :class:`~brainstorm.training.Trainer` (unless created with
    ``check_finite=False``); the message names the update, the first layer
    and buffer holding such a value and the last finite loss.
    """


class DescriptionError(ValidationError, TypeError):
    """A description (from a file or a dict) cannot be turned into an object.

    It is not a description, has an unknown or unexpected ``@type``, or a
    key the class does not declare.
    """


class DatasetValidationError(ValidationError):
    """A data set file is missing or not in the layout of the data scripts."""


class FileWriteError(OSError):
    """A file could not be written (full disk, file-size limit, no permission).

    Raised by every writer of brainstorm (network files, checkpoints, the
    files of hooks, :func:`~brainstorm.tools.extract_and_save`). Its
    message and ``filename`` name the file, ``errno`` is the operating
    system's error number where there is one, and the error it comes from
    is its ``__cause__``. The file keeps what it held before the write
    (nothing is written over it), and no temporary file is left behind.
    """

    def __str__(self) -> str:
        """The message (it names the file), without OSError's decorations."""
        return str(self.strerror) if self.strerror is not None else super().__str__()


class InitializationError(Exception):
    """An initializer cannot fill a parameter of the requested shape.

    Raising it makes :meth:`Network.initialize` use the fallback.
    """


# ------------------------------------------------------------------ names ---

NAME_BLACKLIST = {'default', 'fallback'}
_IDENTIFIER = re.compile(r'^[_a-zA-Z][_a-zA-Z0-9]*$')
#: Brainstorm 0.5's name for the pattern of a Python identifier.
PYTHON_IDENTIFIER = _IDENTIFIER

#: The rule for layer names and layer types, as error messages state it.
LAYER_NAME_RULE = (
    "an ASCII identifier (letters a-z and A-Z, digits and '_', not "
    "starting with a digit) other than 'default' and 'fallback'; "
    'non-ASCII letters are not allowed, as in Brainstorm 0.5, because '
    "the '*' of initializer and modifier patterns matches only these "
    'characters'
)


def is_valid_layer_name(name) -> bool:
    """True if ``name`` is a valid layer name (see ``LAYER_NAME_RULE``).

    That is an ASCII identifier (``[_a-zA-Z][_a-zA-Z0-9]*``, as in
    Brainstorm 0.5) other than ``'default'`` and ``'fallback'``. Python
    identifiers with other letters (``'名前'``) are not layer names: the
    ``*`` of initializer and modifier patterns matches only ASCII letters,
    digits and ``_``.
    """
    return (
        isinstance(name, str)
        and bool(_IDENTIFIER.match(name))
        and name not in NAME_BLACKLIST
    )


def product(numbers):
    """The product of an iterable of numbers (1 for an empty one).

    Args:
        numbers: an iterable of numbers, e.g. a shape.

    Returns:
        The product, with Python's arithmetic (ints stay exact).
    """
    return reduce(operator.mul, numbers, 1)


def flatten(container):
    """Iterate the leaves of nested lists and tuples in order.

    Args:
        container: a list or tuple, possibly nesting lists and tuples.

    Yields:
        Every element that is not a list or tuple, depth first.
    """
    for item in container:
        if isinstance(item, (list, tuple)):
            yield from flatten(item)
        else:
            yield item


def convert_to_nested_indices(container, start_idx=None):
    """Number the leaves of nested lists, keeping the nesting.

    ``list(convert_to_nested_indices(['a', ['b', 'c']]))`` is
    ``[0, [1, 2]]``.

    Args:
        container: a list or tuple, possibly nesting lists and tuples.
        start_idx: a one-element list holding the first index; it is
            advanced past the last index used. Defaults to ``[0]``.

    Yields:
        For each element, its index or (for a nested list or tuple) a list
        of the indices within it.
    """
    if start_idx is None:
        start_idx = [0]
    for item in container:
        if isinstance(item, (list, tuple)):
            yield list(convert_to_nested_indices(item, start_idx))
        else:
            yield start_idx[0]
            start_idx[0] += 1


def sort_by_index_key(item) -> int:
    """Sort key for ``dict.items()`` by the ``'@index'`` of each value.

    Args:
        item: a ``(key, value)`` pair.

    Returns:
        ``value['@index']`` if the value is a dict that has one, else -1.
    """
    value = item[1]
    if isinstance(value, dict) and '@index' in value:
        return value['@index']
    return -1


def silence():
    """An endless iterator of empty strings.

    Yields:
        ``''``, forever.
    """
    while True:
        yield ''


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
            raise KeyError(
                f"Unknown key '{part}'{where} of path '{path}'. Available keys: {keys}"
            ) from None
    return current


def get_normalized_path(*parts: str) -> str:
    """Join path parts with dots; ``..`` removes the preceding component.

    ``get_normalized_path('L', 'outputs', '..parameters.W')`` gives
    ``'L.parameters.W'``.
    """
    result: list = []
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
        try:
            return _reshape_without_copy(array, shape)
        except (AttributeError, ValueError):
            raise ValueError(
                f'Cannot reshape an array of shape {array.shape} with strides '
                f'{array.strides} to {shape} without copying it.'
            ) from None
    return array.reshape(shape)


def _reshape_without_copy(array: np.ndarray, shape: tuple) -> np.ndarray:
    """A reshaped view, or an error where only a copy could reshape.

    NumPy 2.1 and later say so with ``reshape(copy=False)``; NumPy 2.5
    deprecates the older way, setting ``shape`` on a view.
    """
    if _RESHAPE_TAKES_COPY:
        return np.reshape(array, shape, copy=False)
    view = array.view()
    view.shape = shape
    return view


_RESHAPE_TAKES_COPY = np.lib.NumpyVersion(np.__version__) >= '2.1.0'


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
    return reshape_view(
        array, tuple(shape[:start_idx]) + (int(np.prod(shape[start_idx:])),)
    )


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


def progress_bar(
    maximum: int,
    prefix: str = '[',
    bar: str = '====1====2====3====4====5====6====7====8====9====0',
    suffix: str = '] Took: {0}\n',
):
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


def _current_umask() -> int:
    import os

    # os.umask can only be read by setting it; set it straight back
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


#: The temporary files this process is writing now (full paths). A thread's
#: cleanup of stale temporaries keeps these, so two threads writing to one
#: path never delete each other's files.
_LIVE_TEMPORARIES: set = set()
_LIVE_LOCK = threading.Lock()


def _process_alive(pid: int) -> bool:
    """Whether process ``pid`` may still exist (False only if it surely does not)."""
    import os

    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError):
        # PermissionError: it exists, owned by another user; a number
        # beyond any pid cannot be checked, so its file is left alone
        return True
    return True


def _remove_stale_temporaries(directory: str, prefix: str) -> None:
    """Remove temporary files of ``prefix`` whose writing process is gone.

    A process killed while writing leaves its temporary file behind; the
    next write to the same path cleans up after it. Temporaries of another
    live process (of any user), and those this process is writing now (in
    any thread), are kept; this process's other temporaries are left over
    from a failed cleanup and are removed.
    """
    import os

    try:
        names = os.listdir(directory)
    except OSError:
        return
    for name in names:
        if not name.startswith(prefix) or not name.endswith('.tmp'):
            continue
        pid_text = name[len(prefix) :].split('-', 1)[0]
        if not (pid_text.isascii() and pid_text.isdigit()):
            continue
        path = os.path.join(directory, name)
        pid = int(pid_text)
        if pid == os.getpid():
            with _LIVE_LOCK:
                alive = path in _LIVE_TEMPORARIES
        else:
            alive = _process_alive(pid)
        if not alive:
            _remove_quietly(path)


def _remove_quietly(path: str) -> None:
    import os

    try:
        os.remove(path)
    except OSError:
        pass


def as_file_name(filename, owner: str = 'write', error: type = TypeError) -> str:
    """``filename`` (a str or ``os.PathLike``) as a non-empty str.

    Args:
        filename: the name given by the user.
        owner: names the function, for messages.
        error: the error to raise for anything else.

    Raises:
        error: for bytes, an empty name, a name with a NUL character or
            anything that is not a path.
    """
    import os

    try:
        name = os.fspath(filename)
    except TypeError:
        name = None
    if not isinstance(name, str) or not name or '\0' in name:
        raise error(
            f'{owner}: a file name must be a non-empty str or os.PathLike '
            f'(without NUL characters). Received: {filename!r}'
        )
    return name


def _write_error(filename: str, err: BaseException) -> FileWriteError:
    """The library's error for a failed write of ``filename``."""
    number = err.errno if isinstance(err, OSError) else None
    reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
    error = FileWriteError(
        number,
        f"Cannot write '{filename}': {reason} ({type(err).__name__}). "
        'The file keeps its previous content.',
    )
    error.filename = filename
    return error


def write_atomically(filename, write) -> None:
    """Write a file so that a crash or a failed write never damages it.

    Calls ``write(tmp_name)`` for a temporary file in the same folder, flushes
    it to disk, moves it over ``filename`` in one step and flushes the folder.
    If anything fails, the temporary file is removed and an existing
    ``filename`` is left untouched; a temporary file left by a killed
    process is removed by the next write to the same path. Threads may
    write to the same path at once: the last move wins, and each file is
    whole.

    A new file gets the permissions of the umask (``0o666 & ~umask``, like
    ``open``); a replaced file keeps its permissions. If ``filename`` is a
    symbolic link, the link is kept and the file it points to is replaced.

    Args:
        filename: the file, a str or ``os.PathLike``.
        write: called with the temporary file's name; it writes and closes
            the file (errors must be raised, not swallowed).

    Raises:
        FileWriteError: if the operating system refuses a step (a full
            disk, a file-size limit, no permission, ...), naming the file.
            Errors of ``write`` other than ``OSError`` and ``RuntimeError``
            (HDF5's) are raised as they are.
    """
    import os
    import secrets

    filename = as_file_name(filename, 'write_atomically')
    # follow a symlink: replacing the link itself would turn it into a
    # regular file and leave its target stale
    target = os.path.realpath(filename)
    directory, base = os.path.split(target)
    prefix = f'.{base[:180]}.brainstorm-'
    _remove_stale_temporaries(directory, prefix)
    tmp = os.path.join(directory, f'{prefix}{os.getpid()}-{secrets.token_hex(8)}.tmp')
    with _LIVE_LOCK:
        _LIVE_TEMPORARIES.add(tmp)
    created = False
    try:
        try:
            mode = os.stat(target).st_mode & 0o7777
        except FileNotFoundError:
            mode = 0o666 & ~_current_umask()
        # O_EXCL: never write into a file (or through a link) someone else made
        os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        created = True
        write(tmp)
        _fsync_file(tmp)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException as err:
        if created:
            _remove_quietly(tmp)
        if isinstance(err, (OSError, RuntimeError)) and not isinstance(
            err, FileWriteError
        ):
            raise _write_error(filename, err) from err
        raise
    finally:
        with _LIVE_LOCK:
            _LIVE_TEMPORARIES.discard(tmp)
    _fsync_directory(directory)


def _fsync_file(name: str) -> None:
    """Flush a written file's data to the disk (errors are raised)."""
    import os

    fd = os.open(name, os.O_RDWR)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (POSIX; a no-op elsewhere)."""
    import os

    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems cannot sync folders
    finally:
        os.close(fd)


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
    except Exception as err:  # h5py raises many kinds for damaged files
        raise error(
            f"Cannot read {what} '{filename}': it is missing or not "
            f'an HDF5 file ({err}).'
        ) from None
    try:
        fmt = f.attrs.get('format')
    except Exception as err:
        f.close()
        raise error(
            f"Cannot read {what} '{filename}': its attributes are "
            f'damaged ({type(err).__name__}: {err}).'
        ) from None
    if isinstance(fmt, str):
        fmt = fmt.encode()
    elif isinstance(fmt, np.bytes_):
        fmt = bytes(fmt)
    return f, fmt


# ------------------------------------------------------ checked files ---

CHECKSUM_ATTRIBUTE = 'sha256'


def _value_bytes(value) -> bytes:
    """Bytes that identify an attribute value or dataset content exactly."""
    if isinstance(value, str):
        return b'str:' + value.encode('utf-8', 'surrogatepass')
    if isinstance(value, bytes):
        return b'bytes:' + bytes(value)
    array = np.asarray(value)
    if array.dtype.kind == 'O':
        return b'object:' + repr(array.tolist()).encode()
    return (
        f'{array.dtype.str}{array.shape}:'.encode()
        + np.ascontiguousarray(array).tobytes()
    )


def _digest_of(attributes: dict, members=None, data=None) -> str:
    """SHA-256 of an HDF5 object from its parts.

    Args:
        attributes: name -> value (a ``sha256`` entry is left out).
        members: the member names of a group (None for a dataset).
        data: the content of a dataset.
    """
    import hashlib

    h = hashlib.sha256()
    for name in sorted(attributes):
        if name != CHECKSUM_ATTRIBUTE:
            h.update(b'attribute\0' + name.encode() + b'\0')
            h.update(_value_bytes(attributes[name]))
    if members is not None:
        for name in sorted(members):
            h.update(b'member\0' + name.encode() + b'\0')
    else:
        h.update(b'data\0' + _value_bytes(data))
    return h.hexdigest()


def _digest(obj, data=None) -> str:
    """SHA-256 of an HDF5 object as the file holds it.

    It covers the attributes (but the checksum), the names of the members
    (groups) or the content (datasets, given as ``data`` when already read).
    """
    import h5py

    attributes = {
        name: obj.attrs[name] for name in obj.attrs if name != CHECKSUM_ATTRIBUTE
    }
    if isinstance(obj, h5py.Group):
        return _digest_of(attributes, members=list(obj))
    return _digest_of(attributes, data=obj[()] if data is None else data)


def add_checksums(f) -> None:
    """Give every group and dataset of an open h5py file a checksum attribute.

    The checksums cover what the file holds now, as read back from it, so
    they cannot tell a damaged write from the intended one: brainstorm's
    writers use :class:`CheckedWriter`, whose checksums cover what was
    meant to be written. This function re-signs a file that was changed on
    purpose (tests, tools). The file must be writable.
    """
    import h5py

    objects = [f]
    f.visititems(lambda name, obj: objects.append(obj))
    for obj in objects:
        if isinstance(obj, (h5py.Group, h5py.Dataset)):
            obj.attrs[CHECKSUM_ATTRIBUTE] = np.bytes_(_digest(obj).encode())


class CheckedWriter:
    """Builds an HDF5 file in memory, with checksums of what was meant.

    The file is made by HDF5 in memory (its ``core`` driver, nothing on
    disk), so a full disk cannot hit HDF5 half-way: :func:`write_hdf5`
    writes the finished image with plain file writes, whose errors are
    raised. The checksum of each group and dataset (see
    ``CheckedReader``) is computed from the values given to this
    writer, never read back from the file, so a file damaged on its way to
    the disk is refused when it is read.

    Paths name groups and datasets from the root without a leading ``/``
    (``''`` is the root); a parent group must be created before its members.
    The arrays given must not change until :meth:`image` returns. Without
    checksums, ``file`` (the open h5py file) may also be filled directly.

    Args:
        checksums: give every group and dataset a checksum attribute.
    """

    def __init__(self, checksums: bool = True):
        import os
        import secrets

        import h5py

        self.checksums = checksums
        # a unique name: HDF5 refuses two open files of one name
        name = f'brainstorm-{os.getpid()}-{secrets.token_hex(8)}.h5'
        self.file = h5py.File(name, 'w', driver='core', backing_store=False)
        self._attributes: dict = {'': {}}
        self._members: dict = {'': []}
        self._data: dict = {}

    def _add(self, path: str) -> None:
        parent, _, name = path.rpartition('/')
        if parent not in self._members or not name or path in self._attributes:
            raise ValueError(f'CheckedWriter: cannot create {path!r}')
        self._members[parent].append(name)
        self._attributes[path] = {}

    def set_attribute(self, path: str, name: str, value) -> None:
        """Set attribute ``name`` of the group or dataset at ``path``."""
        if path not in self._attributes or name == CHECKSUM_ATTRIBUTE:
            raise ValueError(f'CheckedWriter: cannot set {name!r} of {path!r}')
        self.file[path or '/'].attrs[name] = value
        self._attributes[path][name] = value

    def group(self, path: str) -> str:
        """Create the group ``path`` and return its path."""
        self._add(path)
        self.file.create_group(path)
        self._members[path] = []
        return path

    def dataset(self, path: str, data, **options) -> str:
        """Create the dataset ``path`` holding ``data`` and return its path.

        ``options`` go to h5py's ``create_dataset`` (e.g. compression).
        """
        array = np.asarray(data)
        self._add(path)
        self.file.create_dataset(path, data=array, **options)
        self._data[path] = array
        return path

    def image(self) -> bytes:
        """Add the checksums, close the file and return its bytes."""
        if self.checksums:
            for path, attributes in self._attributes.items():
                if path in self._data:
                    digest = _digest_of(attributes, data=self._data[path])
                else:
                    digest = _digest_of(attributes, members=self._members[path])
                self.file[path or '/'].attrs[CHECKSUM_ATTRIBUTE] = np.bytes_(
                    digest.encode()
                )
        self.file.flush()
        image = self.file.id.get_file_image()
        self.close()
        return image

    def close(self) -> None:
        """Close the in-memory file (nothing is written anywhere)."""
        if self.file.id.valid:
            self.file.close()


def write_hdf5(filename, build, checksums: bool = True) -> None:
    """Write an HDF5 file atomically; a failed write never damages ``filename``.

    ``build(writer)`` fills a :class:`CheckedWriter`; the finished file is
    then written under a temporary name and moved into place
    (:func:`write_atomically`).

    Args:
        filename: the file, a str or ``os.PathLike``.
        build: called with the writer.
        checksums: give every group and dataset a checksum.

    Raises:
        FileWriteError: if the file cannot be written (disk full, file-size
            limit, ...), naming it; the file keeps its previous content.
    """
    writer = CheckedWriter(checksums)
    try:
        build(writer)
        image = writer.image()
    finally:
        writer.close()

    def write(tmp):
        with open(tmp, 'wb') as handle:
            handle.write(image)

    write_atomically(filename, write)


class CheckedReader:
    """Reads an h5py file so that a damaged or crafted one can only cause ``error``.

    It reads groups, datasets and attributes, checking:

    * Checksums: every object that carries a checksum attribute (written
      by :func:`add_checksums`) is verified when it is read; in a file
      whose root carries one, every object must carry one. Files without
      checksums (older files, Brainstorm 0.5 network files) load as before.
    * Sizes: a dataset may not claim more bytes than the file stores for it
      (so a tiny file cannot make the reader allocate much); compressed
      datasets are only read with a ``shape`` the caller checked.

    Args:
        f: the open ``h5py.File``.
        filename: the file's name, for messages.
        error: the ValidationError subclass to raise.
        what: what the file is, for messages ('Network file').
    """

    def __init__(self, f, filename: str, error: type, what: str):
        self.f = f
        self.filename = filename
        self.error = error
        self.what = what
        self.checked = CHECKSUM_ATTRIBUTE in f.attrs
        self._verify(f, '/')

    def fail(self, path: str, problem: str):
        """Raise ``error`` naming the file and the object."""
        raise self.error(
            f"{self.what} '{self.filename}' is corrupt: '{path}': {problem}"
        )

    def _verify(self, obj, path: str, data=None) -> None:
        stored = obj.attrs.get(CHECKSUM_ATTRIBUTE)
        if stored is None:
            if self.checked:
                self.fail(path, 'it has no checksum (the file has).')
            return
        if isinstance(stored, np.ndarray) or not isinstance(stored, (bytes, str)):
            self.fail(path, f'malformed checksum {stored!r}.')
        if isinstance(stored, bytes):
            stored = stored.decode('ascii', 'replace')
        if stored != _digest(obj, data):
            self.fail(
                path,
                'its checksum does not match its content (the '
                'file was changed or damaged).',
            )

    def _get(self, path: str):
        import h5py

        # soft and external links could point into other files
        link = self.f.get(path, getlink=True)
        if link is not None and not isinstance(link, h5py.HardLink):
            self.fail(path, f'expected stored data. Received: {type(link).__name__}')
        return self.f.get(path)

    def group(self, path: str):
        """The (verified) group at ``path``."""
        import h5py

        obj = self._get(path)
        if not isinstance(obj, h5py.Group):
            self.fail(path, f'expected a group. Received: {obj!r}')
        self._verify(obj, path)
        return obj

    def array(self, path: str, shape: tuple | None = None) -> np.ndarray:
        """The (verified) content of the dataset at ``path``.

        Args:
            path: the dataset.
            shape: the shape it must have, checked before reading.
        """
        import h5py

        ds = self._get(path)
        if not isinstance(ds, h5py.Dataset):
            self.fail(path, f'expected a dataset. Received: {ds!r}')
        if shape is not None and tuple(ds.shape) != tuple(shape):
            self.fail(path, f'expected shape {tuple(shape)}. Received: {ds.shape}')
        claimed = int(np.prod(ds.shape, dtype=object)) * ds.dtype.itemsize
        stored = ds.id.get_storage_size()
        filtered = ds.id.get_create_plist().get_nfilters() > 0
        if not filtered and claimed > stored:
            self.fail(
                path,
                f'it claims {claimed} bytes but the file stores only {stored} for it.',
            )
        if filtered and shape is None:
            self.fail(path, 'expected an uncompressed dataset.')
        data = ds[()]
        self._verify(ds, path, data)
        return data


def get_brainstorm_info() -> bytes:
    """The ``info`` attribute written into every HDF5 file brainstorm makes."""
    return f'Created with brainstorm {__version__}'.encode()
