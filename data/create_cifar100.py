"""Create CIFAR-100.hdf5 from the original CIFAR-100 python archive.

Source: ``cifar-100-python.tar.gz`` of https://www.cs.toronto.edu/~kriz/cifar.html
(pickled files ``train`` and ``test``, each a dict with ``b'data'``, uint8
(N, 3072) rows holding the red, green and blue 32x32 planes one after
another, ``b'fine_labels'`` and ``b'coarse_labels'``), given with
``--source`` (the archive, a folder holding it, or the folder it was
extracted to) or downloaded into the output folder.

Output ``CIFAR-100.hdf5``: the layout of ``CIFAR-10.hdf5`` (see
``create_cifar10.py``) with the fine labels 0-99 as ``targets``::

    normalized_split/{training 40000, validation 10000, test 10000}
    normalized_full/{training 50000, test 10000}

``default`` (1, N, 32, 32, 3) float32 standardised per pixel and channel
with the mean and std (attributes ``mean``, ``std``) of the first 40000
training images; ``targets`` (1, N, 1) uint8; attribute ``description``.

Usage::

    python data/create_cifar100.py [--source PATH] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from _common import check_sizes, download, make_parser, run_script
from create_cifar10 import convert_cifar, describe, read_members

FILE_NAME = 'CIFAR-100.hdf5'
ARCHIVE_NAME = 'cifar-100-python.tar.gz'
ARCHIVE_MD5 = 'eb9058c3a382ffc7106e4002c42a8d85'
URL = 'https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz'


def convert(
    source: str | Path,
    output_file: str | Path,
    training_size: int = 40_000,
    validation_size: int = 10_000,
    test_size: int = 10_000,
) -> Path:
    """Convert the CIFAR-100 python archive ``source`` into ``output_file``.

    Args:
        source: ``cifar-100-python.tar.gz``, a folder holding it, or the
            folder it was extracted to.
        output_file: the HDF5 file to write (replaced if it exists).
        training_size: images in ``normalized_split/training`` (the first
            ones) and the images the mean and std are computed on.
        validation_size: images in ``normalized_split/validation``; the
            ``train`` file must hold ``training_size + validation_size``.
        test_size: images the ``test`` file must hold.

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
    raw = read_members(source, ARCHIVE_NAME, ['train', 'test'])
    return convert_cifar(
        {'train': raw['train']},
        {'test': raw['test']},
        output_file,
        'fine_labels',
        100,
        describe(
            'CIFAR-100', 'fine class id 0-99', training_size, validation_size, test_size
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
