"""Reading the files of the data scripts: MNIST, CIFAR-10, the Hutter Prize."""

import os

import h5py
import numpy as np

from brainstorm.datasets.base import DATA_DIR_VARIABLE, Dataset, check_positive_int
from brainstorm.datasets.fallbacks import load_digits, load_python_text
from brainstorm.errors import DatasetValidationError
from brainstorm.files import open_hdf5

__all__ = ['get_data_dir', 'read_split', 'load_mnist', 'load_cifar10', 'load_hutter']


def get_data_dir(data_dir: str | os.PathLike | None = None) -> str | None:
    """The folder holding the data files.

    Args:
        data_dir: an explicit folder; if None, ``$BRAINSTORM_DATA_DIR``.

    Returns:
        the folder, or None if none is given and the variable is unset or
        empty.

    Raises:
        DatasetValidationError: ``data_dir`` is not a path.
    """
    if data_dir is None:
        return os.environ.get(DATA_DIR_VARIABLE) or None
    if not isinstance(data_dir, (str, os.PathLike)):
        raise DatasetValidationError(
            f'get_data_dir: data_dir must be a folder (str or path) or None. '
            f'Received: data_dir={data_dir!r}'
        )
    return os.fspath(data_dir)


def read_split(
    filename: str | os.PathLike, group: str
) -> tuple[np.ndarray, np.ndarray]:
    """Read one part of a data file written by the data scripts.

    Args:
        filename: the HDF5 file, e.g. ``MNIST.hdf5``.
        group: the part, e.g. ``'normalized_split/test'`` or
            ``'split/validation'``; it must hold the datasets ``default``
            and ``targets``.

    Returns:
        ``(inputs, targets)``: ``default`` of shape ``(T, N, ...)`` and
        ``targets`` of shape ``(T, N, 1)`` holding integer class ids.

    Raises:
        DatasetValidationError: the file cannot be read, lacks the group or
            its arrays do not have this layout.
    """
    filename = os.fspath(filename)
    f, _ = open_hdf5(filename, DatasetValidationError, 'data file')
    with f:
        where = f"Data file '{filename}', group '{group}'"
        node = f.get(group)
        if not isinstance(node, h5py.Group) or not all(
            isinstance(node.get(name), h5py.Dataset) for name in ('default', 'targets')
        ):
            found = (
                f'members {sorted(node)}'
                if isinstance(node, h5py.Group)
                else 'no such group'
            )
            raise DatasetValidationError(
                f"{where}: expected the datasets 'default' and 'targets'. "
                f'Received: {found}'
            )
        inputs = _read(filename, node['default'])
        targets = _read(filename, node['targets'])
    _check_split(where, inputs, targets)
    return inputs, targets


def _read(filename: str, dataset: h5py.Dataset) -> np.ndarray:
    """All of ``dataset``, or an error naming the file and the dataset.

    Raises:
        DatasetValidationError: h5py cannot read it (e.g. a damaged
            compressed chunk), chained from h5py's OSError.
    """
    try:
        return dataset[()]
    except OSError as error:
        raise DatasetValidationError(
            f"Data file '{filename}', dataset '{dataset.name.lstrip('/')}': "
            f'expected readable data {dataset.dtype} {dataset.shape}. '
            f'Received: h5py error {error} (the file is damaged or the '
            'disk could not be read; write the file again)'
        ) from error


def _check_split(where: str, inputs: np.ndarray, targets: np.ndarray) -> None:
    if (
        inputs.ndim < 3
        or targets.ndim != 3
        or targets.shape[2] != 1
        or inputs.shape[:2] != targets.shape[:2]
        or inputs.shape[1] == 0
        or targets.dtype.kind not in 'iu'
    ):
        raise DatasetValidationError(
            f"{where}: expected 'default' of shape (T, N, ...) and integer "
            f"'targets' of shape (T, N, 1) with the same T and N > 0. "
            f'Received: default {inputs.dtype} {inputs.shape}, targets '
            f'{targets.dtype} {targets.shape}'
        )


def _check_classes(where: str, targets: np.ndarray, nr_classes: int) -> None:
    if targets.min(initial=0) < 0 or targets.max(initial=0) >= nr_classes:
        raise DatasetValidationError(
            f'{where}: expected targets in [0, {nr_classes}). Received: '
            f'values from {targets.min()} to {targets.max()}'
        )


def _locate(data_dir, file_name: str) -> tuple[str | None, str]:
    """``(path of the file or None, where it was looked for)``."""
    data_dir = get_data_dir(data_dir)
    if data_dir is None:
        return None, f'(${DATA_DIR_VARIABLE} not set)'
    path = os.path.join(data_dir, file_name)
    return (path if os.path.exists(path) else None), f'in {data_dir}'


def _not_found(
    file_name: str, where: str, script: str, title: str, fallback: bool
) -> None:
    if not fallback:
        raise DatasetValidationError(
            f"{title}: expected the file '{file_name}' {where}, written by "
            f'data/{script}. Received: no such file (fallback=False)'
        )


def _load_images(
    data_dir,
    fallback: bool,
    file_name: str,
    name: str,
    title: str,
    script: str,
    substitute,
) -> Dataset:
    """A classification data set of 10 classes in ``normalized_split``."""
    path, where = _locate(data_dir, file_name)
    if path is None:
        _not_found(file_name, where, script, title, fallback)
        data = substitute()
        return data._replace(
            origin=f'{file_name} not found {where}; using '
            f'{data.origin} instead (see '
            f'data/{script} for {title}).'
        )
    parts = []
    for part in ('training', 'validation'):
        inputs, targets = read_split(path, f'normalized_split/{part}')
        _check_classes(f"Data file '{path}', group '{part}'", targets, 10)
        parts.append((inputs, targets))
    return Dataset(
        name, parts[0], parts[1], nr_classes=10, origin=f'{title} from {path}'
    )


def load_mnist(
    data_dir: str | os.PathLike | None = None, fallback: bool = True
) -> Dataset:
    """MNIST from ``MNIST.hdf5``, else scikit-learn's digits.

    Args:
        data_dir: folder of ``MNIST.hdf5`` (see ``data/create_mnist.py``);
            if None, ``$BRAINSTORM_DATA_DIR``.
        fallback: if the file is missing, return :func:`load_digits`
            (``name='digits'``) instead of raising.

    Returns:
        ``name='mnist'``: the 50000 training and 10000 validation images
        ``(1, N, 28, 28, 1)`` in [0, 1] of ``normalized_split``.

    Raises:
        DatasetValidationError: the file is unreadable or malformed, or it
            is missing and ``fallback`` is False.
    """
    return _load_images(
        data_dir,
        fallback,
        'MNIST.hdf5',
        'mnist',
        'MNIST',
        'create_mnist.py',
        load_digits,
    )


def load_cifar10(
    data_dir: str | os.PathLike | None = None, fallback: bool = True
) -> Dataset:
    """CIFAR-10 from ``CIFAR-10.hdf5``, else upscaled digits.

    Args:
        data_dir: folder of ``CIFAR-10.hdf5`` (see
            ``data/create_cifar10.py``); if None, ``$BRAINSTORM_DATA_DIR``.
        fallback: if the file is missing, return
            ``load_digits(scale=4, standardize=True)`` (``name='digits'``,
            32x32 images with one channel, so that a network for CIFAR-10
            fits unchanged) instead of raising.

    Returns:
        ``name='cifar10'``: the 40000 training and 10000 validation images
        ``(1, N, 32, 32, 3)``, standardised, of ``normalized_split``.

    Raises:
        DatasetValidationError: the file is unreadable or malformed, or it
            is missing and ``fallback`` is False.
    """
    return _load_images(
        data_dir,
        fallback,
        'CIFAR-10.hdf5',
        'cifar10',
        'CIFAR-10',
        'create_cifar10.py',
        lambda: load_digits(scale=4, standardize=True),
    )


def load_hutter(
    data_dir: str | os.PathLike | None = None, fallback: bool = True, streams: int = 100
) -> Dataset:
    """The Hutter Prize text from ``HutterPrize.hdf5``, else CPython's text.

    Args:
        data_dir: folder of ``HutterPrize.hdf5`` (see
            ``data/create_hutter.py``); if None, ``$BRAINSTORM_DATA_DIR``.
        fallback: if the file is missing, return
            ``load_python_text(streams)`` (``name='python_text'``) instead
            of raising.
        streams: parallel text streams of the fallback (the batch size it
            is meant for; see :func:`to_streams`). The file has its own
            (100).

    Returns:
        ``name='hutter'``: sequences of 100 byte classes ``(100, N, 1)``
        and the next byte as targets, of ``split/training`` and
        ``split/validation``; ``nr_classes`` is the number of distinct
        bytes (205).

    Raises:
        DatasetValidationError: the file is unreadable or malformed, or it
            is missing and ``fallback`` is False.
    """
    check_positive_int('load_hutter', 'streams', streams)
    file_name, script, title = (
        'HutterPrize.hdf5',
        'create_hutter.py',
        'the Hutter Prize data',
    )
    path, where = _locate(data_dir, file_name)
    if path is None:
        _not_found(file_name, where, script, title, fallback)
        data = load_python_text(streams)
        return data._replace(
            origin=f'{file_name} not found {where}; using '
            f'{data.origin} instead (see '
            f'data/{script} for {title}).'
        )
    f, _ = open_hdf5(path, DatasetValidationError, 'data file')
    with f:
        unique = f.attrs.get('unique')
    if unique is None or np.ndim(unique) != 1 or len(unique) == 0:
        raise DatasetValidationError(
            f"Data file '{path}': expected the attribute 'unique' listing "
            f'the byte values. Received: {unique!r}'
        )
    parts = []
    for part in ('training', 'validation'):
        inputs, targets = read_split(path, f'split/{part}')
        for array in (inputs, targets):
            _check_classes(
                f"Data file '{path}', group 'split/{part}'", array, len(unique)
            )
        parts.append((inputs, targets))
    return Dataset(
        'hutter',
        parts[0],
        parts[1],
        nr_classes=len(unique),
        origin=f'Hutter Prize from {path}',
    )
