"""Helpers shared by the data preparation scripts in this folder.

Each ``create_*.py`` script keeps its format-specific conversion in a
``convert(...)`` function and uses this module for the rest: locating the
source files, downloading them, checking checksums, reading CIFAR pickles
safely, writing HDF5 files atomically and the common command line.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os
import pickle
import shutil
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

import h5py
import numpy as np

from brainstorm.errors import ValidationError
from brainstorm.files import write_atomically

__all__ = [
    'DataFormatError',
    'DownloadError',
    'get_data_dir',
    'find_source',
    'md5sum',
    'download',
    'load_cifar_pickle',
    'write_hdf5_atomically',
    'check_sizes',
    'write_split',
    'make_parser',
    'run_script',
]

DOWNLOAD_TIMEOUT_S = 60


class DataFormatError(ValidationError):
    """A source file is missing, corrupt or not in the expected format."""


class DownloadError(OSError):
    """The original data could not be downloaded (or failed its checksum)."""


# ---------------------------------------------------------------- sources ---


def get_data_dir(output_dir: str | None = None) -> Path:
    """The folder data files go to.

    Args:
        output_dir: explicit folder; if None, ``$BRAINSTORM_DATA_DIR`` is used,
            and the current folder if that is unset or empty.
    """
    if output_dir is None:
        output_dir = os.environ.get('BRAINSTORM_DATA_DIR') or '.'
    return Path(output_dir)


def find_source(source: str | os.PathLike, names: Sequence[str], what: str) -> Path:
    """Resolve ``source`` to one existing file.

    Args:
        source: a file (returned as is) or a folder searched for ``names``
            (first match wins, also one folder level down, where archives
            are often extracted).
        names: file names to look for in a folder, in order of preference.
        what: what is looked for, for the error message.

    Raises:
        DataFormatError: nothing suitable exists at ``source``.
    """
    path = Path(source)
    if path.is_file():
        return path
    if path.is_dir():
        for name in names:
            for candidate in [path / name, *sorted(path.glob(f'*/{name}'))]:
                if candidate.is_file():
                    return candidate
        raise DataFormatError(
            f"Source folder '{path}': expected {what} (one of {list(names)}) "
            f'in it. Received: a folder without any of them'
        )
    raise DataFormatError(
        f"Source '{path}': expected an existing file or "
        f'folder with {what}. Received: a path that does '
        f'not exist'
    )


# --------------------------------------------------------------- download ---


def md5sum(path: str | os.PathLike) -> str:
    """Hex MD5 digest of a file, read in blocks."""
    digest = hashlib.md5()
    with open(path, 'rb') as f:
        for block in iter(lambda: f.read(1 << 20), b''):
            digest.update(block)
    return digest.hexdigest()


def download(
    urls: Sequence[str], target: str | os.PathLike, md5: str | None = None
) -> Path:
    """Download a file, trying each URL in turn, unless it is already there.

    An existing ``target`` with the right checksum is reused. The download
    goes to ``<target>.part`` and is renamed only once complete and verified.

    Args:
        urls: equivalent locations of the file (original first, mirrors next).
        target: where to store the file.
        md5: expected hex MD5 digest, or None to skip the check.

    Raises:
        DownloadError: no URL worked; the message lists the URLs and says to
            pass ``--source`` with a local copy instead.
    """
    target = Path(target)
    if target.is_file() and (md5 is None or md5sum(target) == md5):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + '.part')
    problems = []
    for url in urls:
        try:
            with (
                urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as r,
                open(partial, 'wb') as f,
            ):
                shutil.copyfileobj(r, f, 1 << 20)
        except (urllib.error.URLError, OSError, ValueError) as err:
            problems.append(f'{url}: {err}')
            continue
        if md5 is not None and (got := md5sum(partial)) != md5:
            problems.append(f'{url}: MD5 {got}, expected {md5}')
            continue
        os.replace(partial, target)
        return target
    partial.unlink(missing_ok=True)
    raise DownloadError(
        f"Could not download '{target.name}' ("
        + '; '.join(problems)
        + '). Download it yourself and pass its path '
        'with --source PATH.'
    )


# ---------------------------------------------------------- CIFAR pickles ---

_ALLOWED_GLOBALS = {
    ('numpy._core.multiarray', '_reconstruct'),
    ('numpy.core.multiarray', '_reconstruct'),
    ('numpy', 'ndarray'),
    ('numpy', 'dtype'),
    ('_codecs', 'encode'),
}


class _ArrayOnlyUnpickler(pickle.Unpickler):
    """Loads plain containers and NumPy arrays, nothing that runs code."""

    def find_class(self, module, name):
        if (module, name) not in _ALLOWED_GLOBALS:
            raise pickle.UnpicklingError(f'refusing to load {module}.{name}')
        if module == 'numpy.core.multiarray':  # Python 2 era name
            module = 'numpy._core.multiarray' if hasattr(np, '_core') else module
        return super().find_class(module, name)


def load_cifar_pickle(data: bytes, name: str, keys: Sequence[str]) -> dict[str, object]:
    """Read one CIFAR batch pickle (written by Python 2, keys are bytes).

    Only containers and NumPy arrays are loaded: a pickle referring to any
    other object is refused rather than executed.

    Args:
        data: the raw pickle bytes.
        name: the file (or archive member) name, for error messages.
        keys: the entries to return, e.g. ``('data', 'labels')``.

    Returns:
        dict with ``keys`` as str.

    Raises:
        DataFormatError: not a pickled dict with these keys.
    """
    try:
        batch = _ArrayOnlyUnpickler(io.BytesIO(data), encoding='bytes').load()
    except Exception as err:  # a corrupt pickle can raise almost anything
        raise DataFormatError(
            f"CIFAR batch '{name}': expected a pickled "
            f'dict. Received: unreadable data ({err})'
        ) from err
    if not isinstance(batch, dict):
        raise DataFormatError(
            f"CIFAR batch '{name}': expected a pickled dict. "
            f'Received: {type(batch).__name__}'
        )
    result = {}
    for key in keys:
        if key.encode() in batch:
            result[key] = batch[key.encode()]
        elif key in batch:
            result[key] = batch[key]
        else:
            raise DataFormatError(
                f"CIFAR batch '{name}': expected the key {key!r}. Received: "
                f'keys {sorted(str(k) for k in batch)}'
            )
    return result


# ------------------------------------------------------------------- HDF5 ---


def write_hdf5_atomically(
    output_file: str | os.PathLike, write: Callable[[h5py.File], None]
) -> Path:
    """Create an HDF5 file via ``write(f)``; no half-written file on failure.

    The file is written under a temporary name, synced and renamed when
    complete (``brainstorm.files.write_atomically``): a full disk or a
    file-size limit raises ``FileWriteError`` naming the file and leaves
    no file. HDF5 writes through :class:`_RecordingFile`, which keeps a
    write error for after the file is closed.
    """
    output_file = Path(output_file)
    output_file.parent.mkdir(parents=True, exist_ok=True)

    def write_file(tmp):
        with open(tmp, 'r+b', buffering=0) as raw:
            handle = _RecordingFile(raw)
            f = h5py.File(handle, 'w')
            try:
                write(f)
            finally:
                f.close()
        if handle.error is not None:
            raise handle.error

    write_atomically(output_file, write_file)
    return output_file


class _RecordingFile(io.RawIOBase):
    """A file for h5py that records its first write error instead of raising it.

    HDF5 loses an error raised while it flushes its caches (printing
    "Exception ignored in ... __dealloc__") and the process may then crash
    at exit. So a failed write is recorded and reported as done; HDF5 goes
    on unaware, and the caller raises ``error`` once the file is closed.
    """

    def __init__(self, raw):
        super().__init__()
        self.raw = raw
        self.error: OSError | None = None

    def write(self, data):
        """Write ``data``; after a failure, record it and write nothing more."""
        if self.error is None:
            try:
                return self.raw.write(data)
            except OSError as err:
                self.error = err
        return len(data)

    def readinto(self, buffer):
        """Read into ``buffer``."""
        return self.raw.readinto(buffer)

    def seek(self, offset, whence=io.SEEK_SET):
        """Move the position."""
        return self.raw.seek(offset, whence)

    def tell(self):
        """The position."""
        return self.raw.tell()

    def truncate(self, size=None):
        """Resize the file (a failure is recorded like a write's)."""
        if self.error is None:
            try:
                return self.raw.truncate(size)
            except OSError as err:
                self.error = err
        return size

    def readable(self):
        """Yes."""
        return True

    def writable(self):
        """Yes."""
        return True

    def seekable(self):
        """Yes."""
        return True


def check_sizes(**sizes: int) -> None:
    """Check that every split size is a positive int.

    Raises:
        ValidationError: naming the first bad size.
    """
    for name, size in sizes.items():
        if (
            not isinstance(size, (int, np.integer))
            or isinstance(size, bool)
            or size <= 0
        ):
            raise ValidationError(
                f'{name} must be a positive int. Received: {name}={size!r}'
            )


def write_split(group: h5py.Group, inputs: np.ndarray, targets: np.ndarray) -> None:
    """Store one split as the datasets ``default`` and ``targets``."""
    group.create_dataset('default', data=inputs)
    group.create_dataset('targets', data=targets)


# ------------------------------------------------------------ command line ---


def make_parser(
    description: str, sizes: dict[str, int], size_help: str
) -> argparse.ArgumentParser:
    """Command line shared by the scripts.

    Args:
        description: the script's summary (its docstring).
        sizes: name -> default of each split size option, e.g.
            ``{'training': 50000, 'validation': 10000, 'test': 10000}``.
        size_help: what the sizes count (``'images'``, ``'characters'``).
    """
    parser = argparse.ArgumentParser(
        description=description, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        '--source',
        metavar='PATH',
        help='local copy of the original data (archive or folder); '
        'without it the data is downloaded into the output folder',
    )
    parser.add_argument(
        '--output-dir',
        metavar='DIR',
        help='where to write the HDF5 file '
        '(default: $BRAINSTORM_DATA_DIR, else the current folder)',
    )
    for name, default in sizes.items():
        parser.add_argument(
            f'--{name}-size',
            type=int,
            default=default,
            metavar='N',
            help=f'number of {name} {size_help} (default: {default}; '
            f'change it only for a non-standard source)',
        )
    return parser


def run_script(
    main: Callable[[argparse.Namespace, Path], Path],
    parser: argparse.ArgumentParser,
    argv: Sequence[str] | None = None,
) -> Path:
    """Parse ``argv``, run ``main(args, data_dir)`` and report the result.

    Expected failures (bad source, no network) end the program with exit
    status 1 and a one-line message instead of a traceback.
    """
    args = parser.parse_args(argv)
    data_dir = get_data_dir(args.output_dir)
    try:
        output_file = main(args, data_dir)
    except (ValidationError, DownloadError) as err:
        parser.exit(1, f'{parser.prog}: error: {err}\n')
    sys.stdout.write(f'Wrote {output_file}\n')
    return output_file
