"""Create MNIST.hdf5 from the original MNIST files.

Source: the four gzipped IDX files of http://yann.lecun.com/exdb/mnist/
(``train-images-idx3-ubyte.gz``, ``train-labels-idx1-ubyte.gz``,
``t10k-images-idx3-ubyte.gz``, ``t10k-labels-idx1-ubyte.gz``), given as a
folder with ``--source`` or downloaded (original site, then mirrors) into
the output folder. Uncompressed IDX files are accepted as well.

Output ``MNIST.hdf5``::

    normalized_split/training/   first 50000 training images
    normalized_split/validation/ last 10000 training images
    normalized_split/test/       the 10000 test images
    normalized_full/training/    all 60000 training images
    normalized_full/test/        the 10000 test images

Each group holds ``default`` (1, N, 28, 28, 1) float32, the pixel values
divided by 255 (so in [0, 1]), and ``targets`` (1, N, 1) uint8, the digit
0-9. The file has the attribute ``description``.

Usage::

    python data/create_mnist.py [--source FOLDER] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import gzip
import struct
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from _common import (
    DataFormatError,
    check_sizes,
    download,
    find_source,
    make_parser,
    run_script,
    write_hdf5_atomically,
    write_split,
)

FILE_NAME = 'MNIST.hdf5'
URLS = [
    'http://yann.lecun.com/exdb/mnist/',
    'https://ossci-datasets.s3.amazonaws.com/mnist/',
    'https://storage.googleapis.com/cvdf-datasets/mnist/',
]
SOURCE_FILES = {  # name -> MD5 of the gzipped original
    'train-images-idx3-ubyte.gz': 'f68b3c2dcbeaaa9fbdd348bbdeb94873',
    'train-labels-idx1-ubyte.gz': 'd53e105ee54ea40749a09fcbcd1e9432',
    't10k-images-idx3-ubyte.gz': '9fb629c4189551a2d022fa330f9573f3',
    't10k-labels-idx1-ubyte.gz': 'ec29112dd5afa0611ce80d1b7f02629c',
}
IMAGES_MAGIC = 2051  # 0x00000803: unsigned bytes, 3 dimensions
LABELS_MAGIC = 2049  # 0x00000801: unsigned bytes, 1 dimension
IMAGE_SHAPE = (28, 28)


def read_idx(path: str | Path, magic: int) -> np.ndarray:
    """Read an IDX file of unsigned bytes, gzipped or not.

    Args:
        path: the file.
        magic: the expected big-endian magic number (2051 images, 2049
            labels); its last byte is the number of dimensions.

    Returns:
        uint8 array of the shape given in the file header.

    Raises:
        DataFormatError: wrong magic number, truncated or corrupt file.
    """
    path = Path(path)
    with open(path, 'rb') as f:
        raw = f.read()
    if raw[:2] == b'\x1f\x8b':
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as err:
            raise DataFormatError(
                f"IDX file '{path}': expected valid gzip data. Received: {err}"
            ) from err
    ndim = magic & 0xFF
    header_size = 4 + 4 * ndim
    if len(raw) < header_size:
        raise DataFormatError(
            f"IDX file '{path}': expected a header of "
            f'{header_size} bytes. Received: {len(raw)} '
            'bytes in all'
        )
    (found,) = struct.unpack('>I', raw[:4])
    if found != magic:
        raise DataFormatError(
            f"IDX file '{path}': expected magic number {magic}. Received: {found}"
        )
    shape = struct.unpack(f'>{ndim}I', raw[4:header_size])
    size = int(np.prod(shape))
    if len(raw) - header_size != size:
        raise DataFormatError(
            f"IDX file '{path}': expected {size} data "
            f'bytes for shape {shape}. Received: '
            f'{len(raw) - header_size}'
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header_size).reshape(shape)


def _read_pair(folder: Path, prefix: str, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Images (N, 28, 28) and labels (N,) of ``train`` or ``t10k``."""
    names = {}
    for kind in ('images-idx3', 'labels-idx1'):
        base = f'{prefix}-{kind}-ubyte'
        names[kind] = find_source(folder, [f'{base}.gz', base], f"'{base}.gz'")
    images = read_idx(names['images-idx3'], IMAGES_MAGIC)
    labels = read_idx(names['labels-idx1'], LABELS_MAGIC)
    if images.shape != (size, *IMAGE_SHAPE):
        raise DataFormatError(
            f"IDX file '{names['images-idx3']}': expected {size} images of "
            f'{IMAGE_SHAPE[0]}x{IMAGE_SHAPE[1]} pixels. Received: shape '
            f'{images.shape}'
        )
    if labels.shape != (size,) or labels.max(initial=0) > 9:
        raise DataFormatError(
            f"IDX file '{names['labels-idx1']}': expected {size} labels in "
            f'0-9. Received: {labels.shape[0]} labels, largest '
            f'{labels.max(initial=0)}'
        )
    return images, labels


def _as_inputs(images: np.ndarray) -> np.ndarray:
    """(N, 28, 28) uint8 -> (1, N, 28, 28, 1) float32 in [0, 1]."""
    scaled = images.astype(np.float32) / np.float32(255)
    return scaled.reshape(1, *images.shape, 1)


def _as_targets(labels: np.ndarray) -> np.ndarray:
    """(N,) uint8 -> (1, N, 1) uint8."""
    return labels.reshape(1, -1, 1).copy()


def convert(
    source: str | Path,
    output_file: str | Path,
    training_size: int = 50_000,
    validation_size: int = 10_000,
    test_size: int = 10_000,
) -> Path:
    """Convert the four MNIST IDX files in ``source`` into ``output_file``.

    Args:
        source: folder with the IDX files (gzipped or not).
        output_file: the HDF5 file to write (replaced if it exists).
        training_size: images in ``normalized_split/training``, the first
            ones of the training file.
        validation_size: images in ``normalized_split/validation``, the
            rest of the training file, which must hold exactly
            ``training_size + validation_size`` images.
        test_size: images the test file must hold.

    Returns:
        the path of the written file.

    Raises:
        DataFormatError: a source file is missing, corrupt or has other sizes.
    """
    check_sizes(
        training_size=training_size,
        validation_size=validation_size,
        test_size=test_size,
    )
    source = Path(source)
    full_size = training_size + validation_size
    train_images, train_labels = _read_pair(source, 'train', full_size)
    test_images, test_labels = _read_pair(source, 't10k', test_size)
    splits = {
        'normalized_split/training': slice(0, training_size),
        'normalized_split/validation': slice(training_size, full_size),
        'normalized_full/training': slice(0, full_size),
    }

    def write(f):
        f.attrs['description'] = _description(training_size, validation_size, test_size)
        for name, part in splits.items():
            write_split(
                f.create_group(name),
                _as_inputs(train_images[part]),
                _as_targets(train_labels[part]),
            )
        test_inputs = _as_inputs(test_images)
        test_targets = _as_targets(test_labels)
        for name in ('normalized_split/test', 'normalized_full/test'):
            write_split(f.create_group(name), test_inputs, test_targets)

    return write_hdf5_atomically(output_file, write)


def _description(training_size: int, validation_size: int, test_size: int) -> str:
    full = training_size + validation_size
    return f"""\
The MNIST database of handwritten digits (Y. LeCun, C. Cortes and
C. J. C. Burges), http://yann.lecun.com/exdb/mnist/.

Inputs 'default' have shape (1, N, 28, 28, 1) (time, sample, height, width,
channel), float32, the pixel values divided by 255 so that they lie in
[0, 1]. Targets 'targets' have shape (1, N, 1), uint8, the digit 0-9.

normalized_split/training: the first {training_size} training images
normalized_split/validation: the last {validation_size} training images
normalized_split/test: the {test_size} test images
normalized_full/training: all {full} training images
normalized_full/test: the {test_size} test images
"""


def _main(args: argparse.Namespace, data_dir: Path) -> Path:
    if args.source is not None:
        source = Path(args.source)
    else:
        source = data_dir
        for name, md5 in SOURCE_FILES.items():
            download([url + name for url in URLS], data_dir / name, md5)
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
        __doc__, {'training': 50_000, 'validation': 10_000, 'test': 10_000}, 'images'
    )
    return run_script(_main, parser, argv)


if __name__ == '__main__':
    main(sys.argv[1:])
