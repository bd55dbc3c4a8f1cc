"""Create CIFAR-10.hdf5 from the original CIFAR-10 python archive.

Source: ``cifar-10-python.tar.gz`` of https://www.cs.toronto.edu/~kriz/cifar.html
(pickled batches ``data_batch_1`` ... ``data_batch_5`` and ``test_batch``,
each a dict with ``b'data'``, uint8 (N, 3072) rows holding the red, green
and blue 32x32 planes one after another, and ``b'labels'``), given with
``--source`` (the archive, a folder holding it, or the folder it was
extracted to) or downloaded into the output folder.

Output ``CIFAR-10.hdf5``::

    normalized_split/training/   first 40000 training images
    normalized_split/validation/ last 10000 training images
    normalized_split/test/       the 10000 test images
    normalized_full/training/    all 50000 training images
    normalized_full/test/        the 10000 test images

Each group holds ``default`` (1, N, 32, 32, 3) float32 (time, sample,
height, width, channel) and ``targets`` (1, N, 1) uint8, the class id.
Images are standardised per pixel and channel: ``(x - mean) / std`` with
``x`` the raw 0-255 value and ``mean``, ``std`` (32, 32, 3) float32 taken
over the first 40000 training images (the ``normalized_split/training``
set, so no validation or test image leaks into them) and stored as the file
attributes ``mean`` and ``std``; ``x = default * std + mean`` recovers the
pixels. A pixel with zero spread gets ``std`` 1. The file also has the
attribute ``description``.

Usage::

    python data/create_cifar10.py [--source PATH] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import tarfile
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _common import (
    DataFormatError,
    check_sizes,
    download,
    find_source,
    load_cifar_pickle,
    make_parser,
    run_script,
    write_hdf5_atomically,
    write_split,
)

FILE_NAME = 'CIFAR-10.hdf5'
ARCHIVE_NAME = 'cifar-10-python.tar.gz'
ARCHIVE_MD5 = 'c58f30108f718f92721af3b95e74349a'
URL = 'https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz'
TRAINING_BATCHES = [f'data_batch_{i}' for i in range(1, 6)]
TEST_BATCHES = ['test_batch']
IMAGE_SHAPE = (32, 32, 3)
CHUNK = 5000  # images standardised at a time, to bound float64 temporaries


def read_members(
    source: str | Path, archive_name: str, members: Sequence[str]
) -> dict[str, bytes]:
    """The raw bytes of the named batch files.

    Args:
        source: the tar archive, a folder holding ``archive_name``, or a
            folder with the extracted files (directly or one level down).
        archive_name: the archive file name looked for in a folder.
        members: the batch file names (without folders).

    Raises:
        DataFormatError: not a readable tar archive, or a batch is missing.
    """
    path = Path(source)
    if path.is_dir():
        if not (path / archive_name).is_file():
            return {
                name: find_source(
                    path, [name], f"'{archive_name}' or the CIFAR batch '{name}'"
                ).read_bytes()
                for name in members
            }
        path = path / archive_name
    elif not path.exists():
        raise DataFormatError(
            f"Source '{path}': expected '{archive_name}' "
            'or a folder. Received: a path that does not '
            'exist'
        )
    try:
        with tarfile.open(path) as tar:
            files = {Path(m.name).name: m for m in tar.getmembers() if m.isfile()}
            missing = [name for name in members if name not in files]
            if missing:
                raise DataFormatError(
                    f"CIFAR archive '{path}': expected the batches "
                    f'{list(members)}. Received: an archive without {missing}'
                )
            return {name: tar.extractfile(files[name]).read() for name in members}
    except (tarfile.TarError, OSError, EOFError, zlib.error) as err:
        raise DataFormatError(
            f"CIFAR archive '{path}': expected a readable tar archive. Received: {err}"
        ) from err


def read_batches(
    raw: dict[str, bytes], label_key: str, nr_classes: int
) -> tuple[np.ndarray, np.ndarray]:
    """Parse and concatenate CIFAR batches in the given order.

    Args:
        raw: batch name -> pickle bytes.
        label_key: ``'labels'`` (CIFAR-10) or ``'fine_labels'`` (CIFAR-100).
        nr_classes: labels must lie in ``[0, nr_classes)``.

    Returns:
        images (N, 32, 32, 3) uint8 and labels (N,) uint8.

    Raises:
        DataFormatError: a batch with other keys, shapes or labels.
    """
    images, labels = [], []
    for name, data in raw.items():
        batch = load_cifar_pickle(data, name, ('data', label_key))
        pixels = np.asarray(batch['data'])
        targets = np.asarray(batch[label_key])
        if (
            pixels.ndim != 2
            or pixels.shape[1] != np.prod(IMAGE_SHAPE)
            or pixels.dtype != np.uint8
        ):
            raise DataFormatError(
                f"CIFAR batch '{name}': expected 'data' as uint8 rows of "
                f'{np.prod(IMAGE_SHAPE)} values. Received: {pixels.dtype} '
                f'shape {pixels.shape}'
            )
        if (
            targets.shape != (len(pixels),)
            or targets.dtype.kind not in 'iu'
            or targets.min(initial=0) < 0
            or targets.max(initial=0) >= nr_classes
        ):
            raise DataFormatError(
                f"CIFAR batch '{name}': expected {len(pixels)} integer "
                f"'{label_key}' in 0-{nr_classes - 1}. Received: "
                f'{targets.dtype} shape {targets.shape}'
            )
        # rows are channel-major (3, 32, 32) planes; we store channels last
        images.append(pixels.reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(targets.astype(np.uint8))
    return np.concatenate(images), np.concatenate(labels)


def standardization_stats(images: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel and channel mean and standard deviation of uint8 images.

    Computed in float64 (two passes, chunked) and returned as float32
    (32, 32, 3) arrays; a zero standard deviation is replaced by 1.
    """
    total = np.zeros(images.shape[1:])
    for start in range(0, len(images), CHUNK):
        total += images[start : start + CHUNK].sum(axis=0, dtype=np.float64)
    mean = total / len(images)
    squares = np.zeros(images.shape[1:])
    for start in range(0, len(images), CHUNK):
        squares += ((images[start : start + CHUNK] - mean) ** 2).sum(axis=0)
    std = np.sqrt(squares / len(images))
    std[std == 0] = 1.0
    return mean.astype(np.float32), std.astype(np.float32)


def standardize(images: np.ndarray, mean: np.ndarray, std: np.ndarray) -> np.ndarray:
    """``(images - mean) / std`` as float32 with a leading time axis.

    Returns:
        (1, N, 32, 32, 3) float32, computed in float64 chunk by chunk.
    """
    result = np.empty((1, *images.shape), dtype=np.float32)
    mean, std = mean.astype(np.float64), std.astype(np.float64)
    for start in range(0, len(images), CHUNK):
        result[0, start : start + CHUNK] = (images[start : start + CHUNK] - mean) / std
    return result


def convert_cifar(
    raw_training: dict[str, bytes],
    raw_test: dict[str, bytes],
    output_file: str | Path,
    label_key: str,
    nr_classes: int,
    description: str,
    training_size: int,
    validation_size: int,
    test_size: int,
) -> Path:
    """Write a CIFAR HDF5 file from the raw training and test batches.

    Shared by CIFAR-10 and CIFAR-100; see the module docstring for the
    layout. The training batches must hold exactly ``training_size +
    validation_size`` images and the test batches ``test_size``.

    Raises:
        DataFormatError: the batches are malformed or have other sizes.
    """
    full_size = training_size + validation_size
    train_images, train_labels = read_batches(raw_training, label_key, nr_classes)
    test_images, test_labels = read_batches(raw_test, label_key, nr_classes)
    for what, raw, images, size in [
        ('training', raw_training, train_images, full_size),
        ('test', raw_test, test_images, test_size),
    ]:
        if len(images) != size:
            raise DataFormatError(
                f'CIFAR {what} batches {list(raw)}: expected {size} images '
                f'in all. Received: {len(images)}'
            )
    mean, std = standardization_stats(train_images[:training_size])
    train_inputs = standardize(train_images, mean, std)
    train_targets = train_labels.reshape(1, -1, 1)
    test_inputs = standardize(test_images, mean, std)
    test_targets = test_labels.reshape(1, -1, 1)

    def write(f):
        f.attrs['description'] = description
        f.attrs['mean'] = mean
        f.attrs['std'] = std
        for name, part in [
            ('normalized_split/training', slice(0, training_size)),
            ('normalized_split/validation', slice(training_size, full_size)),
            ('normalized_full/training', slice(0, full_size)),
        ]:
            write_split(
                f.create_group(name), train_inputs[:, part], train_targets[:, part]
            )
        for name in ('normalized_split/test', 'normalized_full/test'):
            write_split(f.create_group(name), test_inputs, test_targets)

    return write_hdf5_atomically(output_file, write)


def describe(
    title: str, classes: str, training_size: int, validation_size: int, test_size: int
) -> str:
    """The ``description`` attribute of a CIFAR file."""
    full = training_size + validation_size
    return f"""\
The {title} dataset (A. Krizhevsky, Learning Multiple Layers of Features
from Tiny Images, 2009), https://www.cs.toronto.edu/~kriz/cifar.html.

Inputs 'default' have shape (1, N, 32, 32, 3) (time, sample, height, width,
channel), float32, standardised per pixel and channel as (x - mean) / std,
x being the raw 0-255 value; the attributes 'mean' and 'std' (32, 32, 3)
were computed over the {training_size} images of normalized_split/training.
Targets 'targets' have shape (1, N, 1), uint8, the {classes}.

normalized_split/training: the first {training_size} training images
normalized_split/validation: the last {validation_size} training images
normalized_split/test: the {test_size} test images
normalized_full/training: all {full} training images
normalized_full/test: the {test_size} test images
"""


def convert(
    source: str | Path,
    output_file: str | Path,
    training_size: int = 40_000,
    validation_size: int = 10_000,
    test_size: int = 10_000,
) -> Path:
    """Convert the CIFAR-10 python archive ``source`` into ``output_file``.

    Args:
        source: ``cifar-10-python.tar.gz``, a folder holding it, or the
            folder it was extracted to.
        output_file: the HDF5 file to write (replaced if it exists).
        training_size: images in ``normalized_split/training`` (the first
            ones) and the images the mean and std are computed on.
        validation_size: images in ``normalized_split/validation``; the five
            training batches must hold ``training_size + validation_size``.
        test_size: images the test batch must hold.

    Returns:
        the path of the written file.

    Raises:
        DataFormatError: the archive is missing, corrupt or has other sizes.
    """
    check_sizes(
        training_size=training_size,
        validation_size=validation_size,
        test_size=test_size,
    )
    raw = read_members(source, ARCHIVE_NAME, TRAINING_BATCHES + TEST_BATCHES)
    return convert_cifar(
        {name: raw[name] for name in TRAINING_BATCHES},
        {name: raw[name] for name in TEST_BATCHES},
        output_file,
        'labels',
        10,
        describe(
            'CIFAR-10',
            'class id 0-9 (airplane, automobile, bird, cat, '
            'deer, dog, frog, horse, ship, truck)',
            training_size,
            validation_size,
            test_size,
        ),
        training_size,
        validation_size,
        test_size,
    )


def _main(args: argparse.Namespace, data_dir: Path) -> Path:
    source = args.source
    if source is None:
        source = download([URL], data_dir / ARCHIVE_NAME, ARCHIVE_MD5)
    return convert(
        source,
        data_dir / FILE_NAME,
        args.training_size,
        args.validation_size,
        args.test_size,
    )


def main(argv: Sequence[str] | None = None) -> Path:
    """Command line entry point; returns the path of the written file."""
    parser = make_parser(
        __doc__, {'training': 40_000, 'validation': 10_000, 'test': 10_000}, 'images'
    )
    return run_script(_main, parser, argv)


if __name__ == '__main__':
    main(sys.argv[1:])
