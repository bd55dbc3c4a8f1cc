"""The offline fallbacks: scikit-learn's digits and CPython's own text."""

import numpy as np

from brainstorm.datasets.base import INSTALL_HINT, Dataset, check_positive_int
from brainstorm.errors import DatasetValidationError

__all__ = ['load_digits', 'load_python_text', 'to_streams']

DIGITS_SIZES = (1437, 360)
"""Training and validation images of :func:`load_digits` (1797 in all)."""

DIGITS_SEED = 0
"""Seed of the fixed shuffle before the digits are split."""

TEXT_VALIDATION_FRACTION = 0.1
"""The part of :func:`load_python_text`'s text kept for validation."""


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
    check_positive_int('load_digits', 'scale', scale)
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
    check_positive_int('load_python_text', 'streams', streams)
    check_positive_int('load_python_text', 'sequence_length', sequence_length)
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
    check_positive_int('to_streams', 'streams', streams)
    check_positive_int('to_streams', 'sequence_length', sequence_length)
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
