"""The data sets of the examples, read from the data scripts' files or offline.

``data/create_mnist.py``, ``data/create_cifar10.py`` and
``data/create_hutter.py`` write ``MNIST.hdf5``, ``CIFAR-10.hdf5`` and
``HutterPrize.hdf5`` into ``$BRAINSTORM_DATA_DIR`` (layout:
:doc:`data_format`). :func:`load_mnist`, :func:`load_cifar10` and
:func:`load_hutter` read the training and validation parts of these files.
Where a file is missing they fall back to data that needs no download, so
that every example runs anywhere: the 1797 handwritten digits of 8x8 pixels
that come with scikit-learn (:func:`load_digits`, install it with
``pip install -e ".[examples]"``) or the English text of CPython's own help
topics (:func:`load_python_text`).

Every loader returns a :class:`Dataset`, whose arrays have the layout
brainstorm uses everywhere, time-major ``(T, B, ...)``: images
``(1, N, height, width, channels)``, text ``(sequence length, N, 1)`` and
targets ``(T, N, 1)`` class ids. The data is the same whether it comes from
a file or a fallback, only smaller in the latter case.

Example:
    >>> import brainstorm as bs
    >>> data = bs.datasets.load_digits()
    >>> inputs, targets = data.training
    >>> inputs.shape, targets.shape, data.nr_classes
    ((1, 1437, 8, 8, 1), (1, 1437, 1), 10)
"""

import argparse
import os
from typing import NamedTuple

import h5py
import numpy as np

from brainstorm.utils import DatasetValidationError, open_hdf5

__all__ = [
    'DATA_DIR_VARIABLE',
    'INSTALL_HINT',
    'Dataset',
    'get_data_dir',
    'read_split',
    'load_mnist',
    'load_cifar10',
    'load_hutter',
    'load_digits',
    'load_python_text',
    'to_streams',
    'add_data_arguments',
]

DATA_DIR_VARIABLE = 'BRAINSTORM_DATA_DIR'
"""The environment variable naming the folder of the data files."""

INSTALL_HINT = 'pip install -e ".[examples]"'
"""How to install what the offline fallbacks need (scikit-learn)."""

DIGITS_SIZES = (1437, 360)
"""Training and validation images of :func:`load_digits` (1797 in all)."""

DIGITS_SEED = 0
"""Seed of the fixed shuffle before the digits are split."""

TEXT_VALIDATION_FRACTION = 0.1
"""The part of :func:`load_python_text`'s text kept for validation."""


class Dataset(NamedTuple):
    """Training and validation data of one data set (a named tuple)."""

    #: Which data it is (``'mnist'``, ``'cifar10'``, ``'hutter'``, or a
    #: fallback, ``'digits'`` or ``'python_text'``). Scripts choose their
    #: settings by it.
    name: str
    #: ``(inputs, targets)``: arrays of shape ``(T, N, ...)`` and
    #: ``(T, N, 1)``.
    training: tuple[np.ndarray, np.ndarray]
    #: ``(inputs, targets)``, as ``training``.
    validation: tuple[np.ndarray, np.ndarray]
    #: The number of classes (10 for images, the vocabulary size for text);
    #: targets lie in ``[0, nr_classes)``.
    nr_classes: int
    #: One sentence saying where the data came from, for printing.
    origin: str

    def limit(self, size: int | None) -> 'Dataset':
        """The first ``size`` samples of each part (for quick runs).

        Args:
            size: samples (axis 1) to keep of the training and of the
                validation data; None keeps everything.

        Returns:
            a Dataset of views into these arrays.

        Raises:
            DatasetValidationError: ``size`` is not a positive int.
        """
        if size is None:
            return self
        _check_positive_int('Dataset.limit', 'size', size)
        (x, y), (vx, vy) = self.training, self.validation
        return self._replace(
            training=(x[:, :size], y[:, :size]), validation=(vx[:, :size], vy[:, :size])
        )


# ------------------------------------------------------------ the files ---


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
        inputs, targets = node['default'][()], node['targets'][()]
    _check_split(where, inputs, targets)
    return inputs, targets


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
    _check_positive_int('load_hutter', 'streams', streams)
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


# -------------------------------------------------------- the fallbacks ---


def load_digits(scale: int = 1, standardize: bool = False) -> Dataset:
    """scikit-learn's 1797 handwritten digits, split 1437/360.

    The digits are shuffled with a fixed seed (``DIGITS_SEED``), so the
    split is the same in every run. Needs scikit-learn.

    Args:
        scale: repeat every pixel ``scale`` x ``scale`` times (``4`` gives
            32x32 images, the size of CIFAR-10).
        standardize: subtract the mean and divide by the standard deviation
            of all training pixels (one value each, as a stand-in for the
            per-pixel standardisation of CIFAR-10); otherwise the pixels
            are scaled to [0, 1].

    Returns:
        ``name='digits'``: images ``(1, N, 8 * scale, 8 * scale, 1)``
        float32 and labels ``(1, N, 1)`` uint8, 10 classes.

    Raises:
        DatasetValidationError: ``scale`` is not a positive int or
            ``standardize`` not a bool.
        ImportError: scikit-learn is not installed.
    """
    _check_positive_int('load_digits', 'scale', scale)
    if not isinstance(standardize, (bool, np.bool_)):
        raise DatasetValidationError(
            f'load_digits: standardize must be a bool. Received: '
            f'standardize={standardize!r}'
        )
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as err:
        raise ImportError(
            f'load_digits needs scikit-learn ({err}); install it with {INSTALL_HINT}'
        ) from err
    digits = sklearn_digits()
    images = digits.images  # float64 values 0 to 16
    if scale > 1:
        images = np.kron(images, np.ones((1, scale, scale)))
    size = 8 * scale
    x = images.reshape((1, -1, size, size, 1))
    y = digits.target.astype(np.uint8).reshape((1, -1, 1))
    order = np.random.RandomState(DIGITS_SEED).permutation(x.shape[1])
    x, y = x[:, order], y[:, order]
    cut = DIGITS_SIZES[0]
    # statistics of the training part only, so no validation image leaks in
    mean, std = (x[:, :cut].mean(), x[:, :cut].std()) if standardize else (0.0, 16.0)
    x = ((x - mean) / std).astype(np.float32)
    origin = 'the 8x8 handwritten digits bundled with scikit-learn'
    if scale > 1:
        origin = (
            f'the handwritten digits bundled with scikit-learn, '
            f'upscaled from 8x8 to {size}x{size} pixels'
        )
    return Dataset(
        'digits',
        (x[:, :cut], y[:, :cut]),
        (x[:, cut:], y[:, cut:]),
        nr_classes=10,
        origin=origin,
    )


def load_python_text(streams: int = 100, sequence_length: int = 100) -> Dataset:
    """English text of CPython's help topics, as ``HutterPrize.hdf5`` is.

    The text of ``pydoc_data.topics`` (about 460000 characters, part of
    every CPython installation) with its distinct characters as classes;
    the first 90% for training, the rest for validation, each laid out by
    :func:`to_streams`.

    Args:
        streams: parallel text streams (the batch size to read them with).
        sequence_length: characters per sequence.

    Returns:
        ``name='python_text'``: inputs and next-character targets
        ``(sequence_length, N, 1)`` uint8.

    Raises:
        DatasetValidationError: an argument is not a positive int, or the
            text is too short for one batch of this size.
    """
    _check_positive_int('load_python_text', 'streams', streams)
    _check_positive_int('load_python_text', 'sequence_length', sequence_length)
    from pydoc_data.topics import topics

    text = ''.join(topics[key] for key in sorted(topics))
    vocabulary = sorted(set(text))
    lookup = {char: i for i, char in enumerate(vocabulary)}
    dtype = np.uint8 if len(vocabulary) <= 256 else np.uint16
    ids = np.array([lookup[char] for char in text], dtype=dtype)
    cut = int((1 - TEXT_VALIDATION_FRACTION) * len(ids))
    origin = (
        f"the English text of CPython's help topics "
        f'(pydoc_data.topics; {len(text)} characters, '
        f'{len(vocabulary)} distinct, {cut} for training, '
        f'{len(text) - cut} for validation)'
    )
    return Dataset(
        'python_text',
        to_streams(ids[:cut], streams, sequence_length),
        to_streams(ids[cut:], streams, sequence_length),
        nr_classes=len(vocabulary),
        origin=origin,
    )


def to_streams(
    ids: np.ndarray, streams: int, sequence_length: int = 100
) -> tuple[np.ndarray, np.ndarray]:
    """Cut a text into parallel streams of sequences, as the Hutter file is.

    The text (but its last character, which has no successor) is cut into
    ``streams`` contiguous streams and each into sequences of
    ``sequence_length`` characters; sequence ``k * streams + s`` is piece
    ``k`` of stream ``s``. So ``Minibatches(streams, shuffle=False)`` yields
    batches where batch ``k + 1`` continues batch ``k``, and a network can
    carry its state (context) from one batch to the next. At most
    ``streams * sequence_length`` characters at the end are dropped.

    Args:
        ids: the text as class ids, a 1-d integer array.
        streams: parallel streams (the batch size).
        sequence_length: characters per sequence.

    Returns:
        ``(inputs, targets)`` of shape ``(sequence_length, N, 1)`` with
        ``targets`` the next characters: ``targets[t] == inputs[t + 1]``.

    Raises:
        DatasetValidationError: bad arguments, or fewer than
            ``streams * sequence_length + 1`` ids.
    """
    _check_positive_int('to_streams', 'streams', streams)
    _check_positive_int('to_streams', 'sequence_length', sequence_length)
    ids = np.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in 'iu':
        raise DatasetValidationError(
            f'to_streams: ids must be a 1-d integer array. Received: '
            f'{ids.dtype} array of shape {ids.shape}'
        )
    pieces = (len(ids) - 1) // (streams * sequence_length)
    if pieces < 1:
        raise DatasetValidationError(
            f'to_streams: ids must hold at least streams * sequence_length '
            f'+ 1 = {streams * sequence_length + 1} values. Received: '
            f'{len(ids)}'
        )
    length = pieces * sequence_length

    def arrange(values):
        values = values[: streams * length].reshape((streams, pieces, sequence_length))
        return values.transpose(2, 1, 0).reshape((sequence_length, pieces * streams, 1))

    return arrange(ids), arrange(ids[1:])


# --------------------------------------------------------- command line ---


def add_data_arguments(
    parser: argparse.ArgumentParser, file_name: str
) -> argparse.ArgumentParser:
    """Add the options ``--data-dir`` and ``--limit`` the examples share.

    ``--data-dir`` defaults to None, which the loaders read as
    ``$BRAINSTORM_DATA_DIR``; pass ``args.data_dir`` to a loader and
    ``args.limit`` to :meth:`Dataset.limit`.

    Args:
        parser: the script's parser.
        file_name: the data file the script looks for, for the help text.

    Returns:
        ``parser``.
    """
    parser.add_argument(
        '--data-dir', help=f'folder holding {file_name} (default: ${DATA_DIR_VARIABLE})'
    )
    parser.add_argument(
        '--limit',
        type=_positive_int_argument,
        help='use at most this many training and validation samples (for quick runs)',
    )
    return parser


def _positive_int_argument(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f'expected a positive int. Received: {text!r}')
    return value


def _check_positive_int(owner: str, name: str, value) -> None:
    if (
        not isinstance(value, (int, np.integer))
        or isinstance(value, bool)
        or value <= 0
    ):
        raise DatasetValidationError(
            f'{owner}: {name} must be a positive int. Received: {name}={value!r}'
        )
