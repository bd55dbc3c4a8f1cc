"""Safe file writing and checked HDF5 files, for every writer and reader of brainstorm.

* :func:`write_atomically` writes a file under a temporary name and moves it
  into place, so a crash, a full disk or a file-size limit never damages
  the file (a failure raises :class:`~brainstorm.errors.FileWriteError`);
* :class:`CheckedWriter` and :func:`write_hdf5` build an HDF5 file in
  memory with a checksum of what was meant to be written on every group
  and dataset, and write it atomically;
* :func:`open_hdf5` and :class:`CheckedReader` read such a file so that a
  damaged or crafted one can only raise the caller's ValidationError.

The file code uses them: network files (``structure/network_io.py``),
checkpoints (``training/checkpoint_file.py``), the saving hooks, the
buffers written by ``tools.extract_and_save`` and the data sets. h5py is
imported where it is used, so that importing brainstorm (and writing a
layer) does not load HDF5.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from types import ModuleType

import numpy as np

from brainstorm.__about__ import __version__
from brainstorm.errors import FileWriteError

__all__ = [
    'h5py_on_first_use',
    'as_file_name',
    'write_atomically',
    'hold_back_interrupts',
    'open_hdf5',
    'CHECKSUM_ATTRIBUTE',
    'add_checksums',
    'CheckedWriter',
    'write_hdf5',
    'CheckedReader',
    'get_brainstorm_info',
]


_UMASK_LOCK = threading.Lock()


def _current_umask() -> int:
    """The process's umask, read without changing it where Linux tells it.

    ``os.umask`` can only be read by setting it, and another thread reading
    or creating a file meanwhile sees the value set; Linux (4.7 on) shows
    the umask in ``/proc/self/status``. Elsewhere it is set and set back,
    under a lock, so brainstorm's own threads at least never leave it
    changed.
    """
    import os

    try:
        with open('/proc/self/status', encoding='ascii') as status:
            for line in status:
                if line.startswith('Umask:'):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    with _UMASK_LOCK:
        mask = os.umask(0o022)
        os.umask(mask)
    return mask


@contextlib.contextmanager
def hold_back_interrupts():
    """Hold a Ctrl-C (SIGINT) back until the block ends, then raise it.

    For work that must be whole when a Ctrl-C stops it: a file written
    (h5py runs Python callbacks while a file is built, and CPython prints
    and ignores an exception raised inside such a callback: a Ctrl-C that
    arrived then was lost, and training went on), a training step (a
    parameter update stopped halfway mixed two steps), the best network
    saved with the record that it was. In the block the first SIGINT is
    only recorded, and raised as KeyboardInterrupt when the block has ended
    (or chained to the block's own error); a second SIGINT interrupts at
    once. Only in the main thread, and only where SIGINT has Python's
    default handler (a handler of the user's, or a nested block, is left
    alone). It costs two ``signal.signal`` calls.
    """
    import signal

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    received = []

    def record(number, frame):
        if received:  # the second: now
            signal.signal(signal.SIGINT, signal.default_int_handler)
            raise KeyboardInterrupt
        received.append(number)

    signal.signal(signal.SIGINT, record)
    try:
        yield
    except BaseException as error:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if received and not isinstance(error, KeyboardInterrupt):
            raise KeyboardInterrupt from error  # the Ctrl-C is not lost
        raise
    signal.signal(signal.SIGINT, signal.default_int_handler)
    if received:
        raise KeyboardInterrupt


def _check_regular(filename: str, target: str) -> None:
    """Refuse a ``target`` that exists and is no regular file.

    Files are replaced by renaming a finished temporary file over them,
    which would replace a FIFO, a socket or a device (``/dev/null``, as
    root) with a regular file; a folder gets the operating system's own
    error.
    """
    import os
    import stat

    try:
        mode = os.stat(target).st_mode
    except OSError:
        return  # no such file (yet): the write makes it, or reports why
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return
    kinds = (
        (stat.S_ISFIFO, 'a FIFO (named pipe)'),
        (stat.S_ISCHR, 'a character device'),
        (stat.S_ISBLK, 'a block device'),
        (stat.S_ISSOCK, 'a socket'),
    )
    kind = next((name for test, name in kinds if test(mode)), 'a special file')
    raise FileWriteError(
        None,
        f"Cannot write '{filename}': it is {kind}, not a regular file. "
        'brainstorm writes a file whole under a temporary name and renames '
        'it over the old one, which would replace the node itself; give '
        'the name of a regular file. Nothing was written.',
        filename,
    )


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


#: Seconds since its last change after which a temporary file of a process
#: on another machine or in another PID namespace counts as left behind
#: (its process cannot be looked up from here; a live writer changes its
#: file far more often).
FOREIGN_TEMPORARY_AGE = 24 * 3600


def _owner_token() -> str:
    """8 hex digits naming this machine and PID namespace.

    A process id means something only in its PID namespace: writers in
    two containers sharing a folder, or on two machines sharing it over
    the network, may have the same pid, or one that cannot be looked up
    from the other.
    """
    import hashlib
    import os
    import socket

    try:
        namespace = os.stat('/proc/self/ns/pid').st_ino
    except OSError:  # no /proc (macOS, Windows): the machine alone
        namespace = 0
    owner = f'{socket.gethostname()}:{namespace}'.encode()
    return hashlib.sha256(owner).hexdigest()[:8]


def _remove_stale_temporaries(directory: str, prefix: str) -> None:
    """Remove temporary files of ``prefix`` whose writing process is gone.

    A process killed while writing leaves its temporary file behind; the
    next write to the same path cleans up after it. Temporaries of another
    live process (of any user), and those this process is writing now (in
    any thread), are kept; this process's other temporaries are left over
    from a failed cleanup and are removed. A temporary of a process on
    another machine or in another PID namespace (the owner token in its
    name differs) is removed only when it has not changed for
    :data:`FOREIGN_TEMPORARY_AGE` seconds: its pid means nothing here.
    """
    import os
    import time

    try:
        names = os.listdir(directory)
    except OSError:
        return
    own = _owner_token()
    for name in names:
        if not name.startswith(prefix) or not name.endswith('.tmp'):
            continue
        parts = name[len(prefix) : -len('.tmp')].split('-')
        pid_text = parts[0]
        if not (pid_text.isascii() and pid_text.isdigit()):
            continue
        path = os.path.join(directory, name)
        pid = int(pid_text)
        if len(parts) == 3 and parts[1] != own:
            try:
                age = time.time() - os.stat(path).st_mtime
            except OSError:
                continue
            alive = age < FOREIGN_TEMPORARY_AGE
        elif pid == os.getpid():
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
        TypeError: (or the class given as ``error``) for bytes, an empty
            name, a name with a NUL character or anything that is not a
            path.
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
    A FIFO, socket or device is refused (renaming over it would replace
    it).

    Args:
        filename: the file, a str or ``os.PathLike``.
        write: called with the temporary file's name; it writes and closes
            the file (errors must be raised, not swallowed).

    Raises:
        FileWriteError: if the operating system refuses a step (a full
            disk, a file-size limit, no permission, ...), or ``filename``
            is no regular file, naming the file.
            Errors of ``write`` other than ``OSError`` and ``RuntimeError``
            (HDF5's) are raised as they are.
    """
    import os
    import secrets

    filename = as_file_name(filename, 'write_atomically')
    # follow a symlink: replacing the link itself would turn it into a
    # regular file and leave its target stale
    target = os.path.realpath(filename)
    _check_regular(filename, target)
    directory, base = os.path.split(target)
    prefix = f'.{base[:180]}.brainstorm-'
    _remove_stale_temporaries(directory, prefix)
    tmp = os.path.join(
        directory,
        f'{prefix}{os.getpid()}-{_owner_token()}-{secrets.token_hex(8)}.tmp',
    )
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
        ValidationError: the subclass given as ``error``, if the file is
            missing, locked by a process writing it, or not an HDF5 file.
    """
    import h5py

    try:
        f = h5py.File(filename, 'r')
    except Exception as err:  # h5py raises many kinds for damaged files
        raise error(
            f"Cannot read {what} '{filename}': {_why_unreadable(err)} ({err})."
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


def _why_unreadable(err: Exception) -> str:
    """Why ``h5py.File`` could not open a file, from its error."""
    if isinstance(err, FileNotFoundError):
        return 'it is missing (no such file)'
    if isinstance(err, BlockingIOError) or 'unable to lock file' in str(err):
        # HDF5 locks a file while a process has it open for writing
        return (
            'another process has it open for writing (HDF5 locks the file '
            'meanwhile; read it once that process has closed it)'
        )
    return 'it is not an HDF5 file, or is damaged'


# ------------------------------------------------------ checked files ---

CHECKSUM_ATTRIBUTE = 'sha256'


def dataset_closed(array) -> bool:
    """Whether ``array`` is an h5py dataset (or the like) whose file was closed.

    h5py tells it by the dataset's identifier, which stays readable after
    the file is closed (``id.valid`` is then 0); its shape and values do
    not. NumPy arrays (memory maps included) are never closed.
    """
    if isinstance(array, np.ndarray):
        return False
    try:
        return not getattr(getattr(array, 'id', None), 'valid', True)
    except Exception:  # an id of another library that fails to answer
        return False


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
        KeyboardInterrupt: after the file is written, for a Ctrl-C that
            arrived meanwhile (a second one interrupts at once).
    """

    def write(tmp):
        with open(tmp, 'wb') as handle:
            handle.write(image)

    with hold_back_interrupts():
        writer = CheckedWriter(checksums)
        try:
            build(writer)
            image = writer.image()
        finally:
            writer.close()
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


def h5py_on_first_use(module_name: str) -> Callable[[str], ModuleType]:
    """A module ``__getattr__`` (PEP 562) that imports h5py when it is asked for.

    Brainstorm 0.5's modules ``hooks``, ``tools`` and ``structure.network``
    had ``h5py`` in their namespace, and code written for 0.5 may import
    it from there; brainstorm itself does not use those names. With
    ``__getattr__ = h5py_on_first_use(__name__)`` the name is still there
    (``from brainstorm.hooks import h5py``), but importing the module does
    not load HDF5.

    Args:
        module_name: the module's ``__name__``, for the error message.

    Returns:
        The function to assign to the module's ``__getattr__``.
    """

    def __getattr__(name: str) -> ModuleType:
        if name == 'h5py':
            import h5py

            return h5py
        raise AttributeError(f'module {module_name!r} has no attribute {name!r}')

    return __getattr__
