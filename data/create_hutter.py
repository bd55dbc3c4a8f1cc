"""Create HutterPrize.hdf5 from enwik8, the Hutter Prize Wikipedia text.

Source: ``enwik8.zip`` of http://mattmahoney.net/dc/textdata.html (a zip
archive holding ``enwik8``, the first 100,000,000 bytes of an English
Wikipedia dump), given with ``--source`` (the zip, the extracted file
``enwik8``, or a folder holding either) or downloaded into the output
folder.

Output ``HutterPrize.hdf5``::

    split/training/    from the first 90,000,000 bytes
    split/validation/  from the next 5,000,000 bytes
    split/test/        from the last 5,000,000 bytes

Each group holds ``default`` and ``targets``, both (100, N, 1) uint8
(time, sequence, feature). Every byte is replaced by its class id, the index
of that byte value in the file attribute ``unique`` (the sorted byte values
that occur in the whole text, 205 for enwik8), so ``unique[default]`` gives
back the bytes. ``targets`` holds the id of the next byte: within a sequence
``targets[t] == default[t + 1]``. The file also has the attribute
``description``.

Layout, for a split of ``n`` bytes, ``T = 100`` time steps and ``S = 100``
streams (``sequence_length`` and ``streams`` of :func:`convert`): the inputs
are the split's bytes but the last (the last byte has no successor inside
the split), cut to ``C * S * T`` bytes with ``C = (n - 1) // (S * T)``
(at most ``S * T - 1`` bytes are dropped: 9,999 of each split for enwik8).
These bytes are cut into ``S`` contiguous streams of ``L = C * T`` bytes and
each stream into ``C`` sequences of ``T`` bytes. Sequence ``j = c * S + s``
(column ``j`` of the second axis) is piece ``c`` of stream ``s``::

    default[t, c * S + s, 0] == id(split[s * L + c * T + t])
    targets[t, c * S + s, 0] == id(split[s * L + c * T + t + 1])

So ``Minibatches(100, shuffle=False)`` yields in batch ``c`` piece ``c`` of
every stream, and column ``s`` of batch ``c + 1`` continues column ``s`` of
batch ``c`` (its first input is the last target before it). For enwik8 this
gives N = 899,900 training and 49,900 validation and test sequences.

Usage::

    python data/create_hutter.py [--source PATH] [--output-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import zipfile
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

from brainstorm.errors import ValidationError

FILE_NAME = 'HutterPrize.hdf5'
ARCHIVE_NAME = 'enwik8.zip'
TEXT_NAME = 'enwik8'
URL = 'http://mattmahoney.net/dc/enwik8.zip'


def read_text(source: str | Path) -> tuple[np.ndarray, Path]:
    """The raw bytes of enwik8 as a uint8 array, and the file they came from.

    Args:
        source: ``enwik8.zip`` (any zip archive holding a file ``enwik8``),
            the extracted file ``enwik8``, or a folder holding either.

    Raises:
        DataFormatError: missing, not a zip archive, corrupt, or without
            ``enwik8``.
    """
    path = find_source(
        source, [ARCHIVE_NAME, TEXT_NAME], f"'{ARCHIVE_NAME}' or '{TEXT_NAME}'"
    )
    if path.name == TEXT_NAME and not zipfile.is_zipfile(path):
        return np.fromfile(path, dtype=np.uint8), path
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.rsplit('/', 1)[-1] == TEXT_NAME]
            if not names:
                raise DataFormatError(
                    f"Zip archive '{path}': expected a file '{TEXT_NAME}' in "
                    f'it. Received: {archive.namelist()[:10]}'
                )
            data = archive.read(names[0])
    except (zipfile.BadZipFile, OSError, EOFError, zlib.error) as err:
        raise DataFormatError(
            f"Source '{path}': expected a zip archive "
            f"holding '{TEXT_NAME}'. Received: a file that "
            f'cannot be read as one ({err})'
        ) from err
    return np.frombuffer(data, dtype=np.uint8), path


def to_class_ids(text: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique byte values and the class id (index into them) of each.

    Returns:
        ``unique`` (K,) uint8 and ``ids`` uint8 of the shape of ``text``.
    """
    unique = np.flatnonzero(np.bincount(text, minlength=256)).astype(np.uint8)
    lookup = np.zeros(256, dtype=np.uint8)
    lookup[unique] = np.arange(len(unique))
    return unique, lookup[text]


def lay_out(
    ids: np.ndarray, sequence_length: int, streams: int
) -> tuple[np.ndarray, np.ndarray]:
    """Inputs and next-byte targets of one split, in the module's layout.

    Args:
        ids: the class ids of the split, in text order.
        sequence_length: T, the time steps of a sequence.
        streams: S, the parallel streams (the batch size to read them with).

    Returns:
        ``default`` and ``targets``, each (T, C * S, 1) uint8.

    Raises:
        ValidationError: the split is shorter than one batch + 1 byte.
    """
    per_batch = sequence_length * streams
    pieces = (len(ids) - 1) // per_batch
    if pieces < 1:
        raise ValidationError(
            f'A split of {len(ids)} bytes is too short: expected at least '
            f'sequence_length * streams + 1 = {per_batch + 1} bytes'
        )
    usable = pieces * per_batch

    def arrange(values):
        by_stream = values[:usable].reshape(streams, pieces, sequence_length)
        # [s, c, t] -> [t, c, s] -> [t, c * S + s]
        return np.ascontiguousarray(by_stream.transpose(2, 1, 0)).reshape(
            sequence_length, pieces * streams, 1
        )

    return arrange(ids[:-1]), arrange(ids[1:])


def convert(
    source: str | Path,
    output_file: str | Path,
    training_size: int = 90_000_000,
    validation_size: int = 5_000_000,
    test_size: int = 5_000_000,
    sequence_length: int = 100,
    streams: int = 100,
) -> Path:
    """Convert enwik8 into ``output_file`` (layout: see the module docstring).

    Args:
        source: ``enwik8.zip``, the extracted ``enwik8``, or a folder with
            either.
        output_file: the HDF5 file to write (replaced if it exists).
        training_size: bytes of the training split, the first ones.
        validation_size: bytes of the validation split, the next ones.
        test_size: bytes of the test split, the last ones; the text must
            hold exactly ``training_size + validation_size + test_size``
            bytes.
        sequence_length: time steps per sequence (the first axis).
        streams: parallel streams per split, the batch size with which
            consecutive batches continue each other.

    Returns:
        the path of the written file.

    Raises:
        DataFormatError: the source is missing, corrupt or of another size.
        ValidationError: a size is not a positive int or a split is shorter
            than one batch.
    """
    check_sizes(
        training_size=training_size,
        validation_size=validation_size,
        test_size=test_size,
        sequence_length=sequence_length,
        streams=streams,
    )
    text, path = read_text(source)
    total = training_size + validation_size + test_size
    if len(text) != total:
        raise DataFormatError(
            f"Text '{path}': expected {total} bytes ({training_size} + "
            f'{validation_size} + {test_size}). Received: {len(text)} bytes'
        )
    unique, ids = to_class_ids(text)
    bounds = {
        'training': (0, training_size),
        'validation': (training_size, training_size + validation_size),
        'test': (training_size + validation_size, total),
    }
    splits = {
        name: lay_out(ids[start:stop], sequence_length, streams)
        for name, (start, stop) in bounds.items()
    }
    sizes = {
        name: (stop - start, splits[name][0].size)
        for name, (start, stop) in bounds.items()
    }

    def write(f):
        f.attrs['description'] = _description(
            sizes, len(unique), sequence_length, streams
        )
        f.attrs['unique'] = unique
        for name, (inputs, targets) in splits.items():
            write_split(f.create_group(f'split/{name}'), inputs, targets)

    return write_hdf5_atomically(output_file, write)


def _description(
    sizes: dict[str, tuple[int, int]],
    nr_symbols: int,
    sequence_length: int,
    streams: int,
) -> str:
    lines = '\n'.join(
        f'split/{name}: {used:,} input bytes of the {size:,} bytes of the '
        f'{name} part = {used // sequence_length:,} sequences'
        for name, (size, used) in sizes.items()
    )
    return f"""\
The Hutter Prize Wikipedia text enwik8 (M. Hutter,
http://prize.hutter1.net/), {sum(s for s, _ in sizes.values()):,} bytes,
split in order into training, validation and test parts.

'default' and 'targets' have shape ({sequence_length}, N, 1) (time, sequence,
feature), uint8 class ids: the index of each byte value in the attribute
'unique' ({nr_symbols} symbols). targets[t] is the byte after default[t].
Each part is cut into {streams} contiguous streams; sequence c * {streams} + s
is piece c of stream s, so with minibatches of {streams} sequences (not
shuffled) batch c + 1 continues batch c sequence by sequence.

{lines}
"""


def _main(args: argparse.Namespace, data_dir: Path) -> Path:
    source = args.source
    if source is None:
        source = download([URL], data_dir / ARCHIVE_NAME)
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
        __doc__,
        {'training': 90_000_000, 'validation': 5_000_000, 'test': 5_000_000},
        'bytes',
    )
    return run_script(_main, parser, argv)


if __name__ == '__main__':
    main(sys.argv[1:])
