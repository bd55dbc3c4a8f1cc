"""The data preparation scripts in ``data/``, run offline on tiny archives.

Every test builds a small archive in the real format (gzipped IDX files,
CIFAR pickle batches in a tar.gz, a zip of text), converts it and checks the
HDF5 file against SPEC section 15: groups, shapes, dtypes, value ranges and
that the values round-trip to the generated source data.
"""

from __future__ import annotations

import gzip
import importlib
import struct
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from brainstorm.utils import ValidationError

REPO = Path(__file__).resolve().parents[2]
DATA_DIR = REPO / 'data'
if str(DATA_DIR) not in sys.path:
    sys.path.insert(0, str(DATA_DIR))

_common = importlib.import_module('_common')
create_mnist = importlib.import_module('create_mnist')


def _datasets(f: h5py.File) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Path -> (shape, dtype) of every dataset in an HDF5 file."""
    found = {}
    f.visititems(lambda name, obj: found.__setitem__(
        name, (obj.shape, obj.dtype)) if isinstance(obj, h5py.Dataset)
        else None)
    return found


# ------------------------------------------------------------------ MNIST ---

def _idx_bytes(array: np.ndarray, magic: int) -> bytes:
    header = struct.pack(f'>I{array.ndim}I', magic, *array.shape)
    return header + array.astype(np.uint8).tobytes()


def _write_mnist(folder: Path, n_train: int = 30, n_test: int = 10,
                 seed: int = 1) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = {
        'train-images-idx3-ubyte': rng.integers(0, 256, (n_train, 28, 28)),
        'train-labels-idx1-ubyte': rng.integers(0, 10, n_train),
        't10k-images-idx3-ubyte': rng.integers(0, 256, (n_test, 28, 28)),
        't10k-labels-idx1-ubyte': rng.integers(0, 10, n_test),
    }
    data['train-images-idx3-ubyte'][0, 0, 0] = 255  # the range ends are hit
    data['train-images-idx3-ubyte'][0, 0, 1] = 0
    folder.mkdir(parents=True, exist_ok=True)
    for name, array in data.items():
        magic = 2051 if 'images' in name else 2049
        (folder / f'{name}.gz').write_bytes(
            gzip.compress(_idx_bytes(array, magic)))
    return data


MNIST_SIZES = {'training_size': 20, 'validation_size': 10, 'test_size': 10}


def test_mnist_groups_shapes_and_dtypes(tmp_path):
    _write_mnist(tmp_path / 'raw')
    out = create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5',
                               **MNIST_SIZES)
    with h5py.File(out, 'r') as f:
        found = _datasets(f)
        assert set(f.keys()) == {'normalized_split', 'normalized_full'}
        description = f.attrs['description']
    expected = {}
    for group, n in [('normalized_split/training', 20),
                     ('normalized_split/validation', 10),
                     ('normalized_split/test', 10),
                     ('normalized_full/training', 30),
                     ('normalized_full/test', 10)]:
        expected[f'{group}/default'] = ((1, n, 28, 28, 1), np.float32)
        expected[f'{group}/targets'] = ((1, n, 1), np.uint8)
    assert found == expected
    assert 'first 20 training' in description
    assert 'all 30 training' in description


def test_mnist_values_round_trip(tmp_path):
    data = _write_mnist(tmp_path / 'raw')
    out = create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5',
                               **MNIST_SIZES)
    train_x = data['train-images-idx3-ubyte']
    train_y = data['train-labels-idx1-ubyte']
    with h5py.File(out, 'r') as f:
        full = f['normalized_full/training/default'][()]
        assert full.min() == 0.0 and full.max() == 1.0
        np.testing.assert_allclose(full[0, ..., 0], train_x / 255, atol=1e-7)
        np.testing.assert_array_equal(
            f['normalized_full/training/targets'][0, :, 0], train_y)
        np.testing.assert_array_equal(
            f['normalized_split/training/default'][()], full[:, :20])
        np.testing.assert_array_equal(
            f['normalized_split/validation/default'][()], full[:, 20:])
        np.testing.assert_array_equal(
            f['normalized_split/validation/targets'][0, :, 0], train_y[20:])
        for group in ('normalized_split/test', 'normalized_full/test'):
            np.testing.assert_allclose(
                f[f'{group}/default'][0, ..., 0],
                data['t10k-images-idx3-ubyte'] / 255, atol=1e-7)
            np.testing.assert_array_equal(
                f[f'{group}/targets'][0, :, 0], data['t10k-labels-idx1-ubyte'])


def test_mnist_accepts_uncompressed_idx_files(tmp_path):
    data = _write_mnist(tmp_path / 'raw')
    for path in (tmp_path / 'raw').iterdir():
        path.with_suffix('').write_bytes(gzip.decompress(path.read_bytes()))
        path.unlink()
    out = create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5',
                               **MNIST_SIZES)
    with h5py.File(out, 'r') as f:
        np.testing.assert_array_equal(f['normalized_full/test/targets'][0, :, 0],
                                      data['t10k-labels-idx1-ubyte'])


@pytest.mark.parametrize('damage, message', [
    ('swap_magic', 'expected magic number 2051. Received: 2049'),
    ('truncate', 'expected 23520 data bytes'),
    ('not_gzip', 'expected valid gzip data'),
])
def test_mnist_corrupt_file_names_the_file(tmp_path, damage, message):
    _write_mnist(tmp_path / 'raw')
    images = tmp_path / 'raw' / 'train-images-idx3-ubyte.gz'
    labels = tmp_path / 'raw' / 'train-labels-idx1-ubyte.gz'
    if damage == 'swap_magic':
        images.write_bytes(labels.read_bytes())
    elif damage == 'truncate':
        raw = gzip.decompress(images.read_bytes())
        images.write_bytes(gzip.compress(raw[:-5]))
    else:
        images.write_bytes(b'\x1f\x8b' + b'no gzip here' * 10)
    with pytest.raises(_common.DataFormatError) as info:
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5',
                             **MNIST_SIZES)
    assert 'train-images-idx3-ubyte.gz' in str(info.value)
    assert message in str(info.value)
    assert not (tmp_path / 'MNIST.hdf5').exists()
    assert not (tmp_path / 'MNIST.hdf5.part').exists()


def test_mnist_wrong_sizes_and_missing_files_are_reported(tmp_path):
    _write_mnist(tmp_path / 'raw')
    with pytest.raises(_common.DataFormatError, match='expected 60000 images'):
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5')
    (tmp_path / 'raw' / 't10k-labels-idx1-ubyte.gz').unlink()
    with pytest.raises(_common.DataFormatError,
                       match="t10k-labels-idx1-ubyte.gz"):
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5',
                             **MNIST_SIZES)
    with pytest.raises(ValidationError, match='training_size=0'):
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5',
                             training_size=0)
