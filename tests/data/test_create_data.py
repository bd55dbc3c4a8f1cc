"""The data preparation scripts in ``data/``, run offline on tiny archives.

Every test builds a small archive in the real format (gzipped IDX files,
CIFAR pickle batches in a tar.gz, a zip of text), converts it and checks the
HDF5 file against SPEC section 15: groups, shapes, dtypes, value ranges and
that the values round-trip to the generated source data.
"""

from __future__ import annotations

import gzip
import importlib
import io
import pickle
import struct
import subprocess
import sys
import tarfile
import zipfile
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
create_cifar10 = importlib.import_module('create_cifar10')
create_cifar100 = importlib.import_module('create_cifar100')
create_hutter = importlib.import_module('create_hutter')


def _datasets(f: h5py.File) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Path -> (shape, dtype) of every dataset in an HDF5 file."""
    found = {}
    f.visititems(
        lambda name, obj: (
            found.__setitem__(name, (obj.shape, obj.dtype))
            if isinstance(obj, h5py.Dataset)
            else None
        )
    )
    return found


# ------------------------------------------------------------------ MNIST ---


def _idx_bytes(array: np.ndarray, magic: int) -> bytes:
    header = struct.pack(f'>I{array.ndim}I', magic, *array.shape)
    return header + array.astype(np.uint8).tobytes()


def _write_mnist(
    folder: Path, n_train: int = 30, n_test: int = 10, seed: int = 1
) -> dict[str, np.ndarray]:
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
        (folder / f'{name}.gz').write_bytes(gzip.compress(_idx_bytes(array, magic)))
    return data


MNIST_SIZES = {'training_size': 20, 'validation_size': 10, 'test_size': 10}


def test_mnist_groups_shapes_and_dtypes(tmp_path):
    _write_mnist(tmp_path / 'raw')
    out = create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5', **MNIST_SIZES)
    with h5py.File(out, 'r') as f:
        found = _datasets(f)
        assert set(f.keys()) == {'normalized_split', 'normalized_full'}
        description = f.attrs['description']
    expected = {}
    for group, n in [
        ('normalized_split/training', 20),
        ('normalized_split/validation', 10),
        ('normalized_split/test', 10),
        ('normalized_full/training', 30),
        ('normalized_full/test', 10),
    ]:
        expected[f'{group}/default'] = ((1, n, 28, 28, 1), np.float32)
        expected[f'{group}/targets'] = ((1, n, 1), np.uint8)
    assert found == expected
    assert 'first 20 training' in description
    assert 'all 30 training' in description


def test_mnist_values_round_trip(tmp_path):
    data = _write_mnist(tmp_path / 'raw')
    out = create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5', **MNIST_SIZES)
    train_x = data['train-images-idx3-ubyte']
    train_y = data['train-labels-idx1-ubyte']
    with h5py.File(out, 'r') as f:
        full = f['normalized_full/training/default'][()]
        assert full.min() == 0.0 and full.max() == 1.0
        np.testing.assert_allclose(full[0, ..., 0], train_x / 255, atol=1e-7)
        np.testing.assert_array_equal(
            f['normalized_full/training/targets'][0, :, 0], train_y
        )
        np.testing.assert_array_equal(
            f['normalized_split/training/default'][()], full[:, :20]
        )
        np.testing.assert_array_equal(
            f['normalized_split/validation/default'][()], full[:, 20:]
        )
        np.testing.assert_array_equal(
            f['normalized_split/validation/targets'][0, :, 0], train_y[20:]
        )
        for group in ('normalized_split/test', 'normalized_full/test'):
            np.testing.assert_allclose(
                f[f'{group}/default'][0, ..., 0],
                data['t10k-images-idx3-ubyte'] / 255,
                atol=1e-7,
            )
            np.testing.assert_array_equal(
                f[f'{group}/targets'][0, :, 0], data['t10k-labels-idx1-ubyte']
            )


def test_mnist_accepts_uncompressed_idx_files(tmp_path):
    data = _write_mnist(tmp_path / 'raw')
    for path in (tmp_path / 'raw').iterdir():
        path.with_suffix('').write_bytes(gzip.decompress(path.read_bytes()))
        path.unlink()
    out = create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5', **MNIST_SIZES)
    with h5py.File(out, 'r') as f:
        np.testing.assert_array_equal(
            f['normalized_full/test/targets'][0, :, 0], data['t10k-labels-idx1-ubyte']
        )


@pytest.mark.parametrize(
    'damage, message',
    [
        ('swap_magic', 'expected magic number 2051. Received: 2049'),
        ('truncate', 'expected 23520 data bytes'),
        ('not_gzip', 'expected valid gzip data'),
    ],
)
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
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5', **MNIST_SIZES)
    assert 'train-images-idx3-ubyte.gz' in str(info.value)
    assert message in str(info.value)
    assert not (tmp_path / 'MNIST.hdf5').exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ['raw']  # no temporary


def test_mnist_wrong_sizes_and_missing_files_are_reported(tmp_path):
    _write_mnist(tmp_path / 'raw')
    with pytest.raises(_common.DataFormatError, match='expected 60000 images'):
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5')
    (tmp_path / 'raw' / 't10k-labels-idx1-ubyte.gz').unlink()
    with pytest.raises(_common.DataFormatError, match='t10k-labels-idx1-ubyte.gz'):
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5', **MNIST_SIZES)
    with pytest.raises(ValidationError, match='training_size=0'):
        create_mnist.convert(tmp_path / 'raw', tmp_path / 'MNIST.hdf5', training_size=0)


# ------------------------------------------------------------------ CIFAR ---


def _cifar_batch(
    images: np.ndarray, labels: np.ndarray, label_key: bytes, name: str
) -> bytes:
    """A pickled batch as in the original archives (bytes keys, protocol 2)."""
    rows = images.transpose(0, 3, 1, 2).reshape(len(images), 3072)
    batch = {
        b'batch_label': name.encode(),
        b'data': rows,
        label_key: [int(label) for label in labels],
        b'filenames': [f'{name}_{i}.png'.encode() for i in range(len(images))],
    }
    return pickle.dumps(batch, protocol=2)


def _write_tar(path: Path, members: dict[str, bytes]) -> None:
    with tarfile.open(path, 'w:gz') as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def _cifar_data(
    nr_classes: int, seed: int, n_train: int = 30, n_test: int = 10
) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    data = {
        'train_x': rng.integers(0, 256, (n_train, 32, 32, 3), np.uint8),
        'train_y': rng.integers(0, nr_classes, n_train),
        'test_x': rng.integers(0, 256, (n_test, 32, 32, 3), np.uint8),
        'test_y': rng.integers(0, nr_classes, n_test),
    }
    data['train_x'][:, 0, 0, 0] = 7  # a constant pixel: std 0 is replaced by 1
    data['train_y'][0] = nr_classes - 1
    return data


def _write_cifar10(path: Path) -> dict[str, np.ndarray]:
    """cifar-10-python.tar.gz with five training batches and a test batch."""
    data = _cifar_data(10, seed=2)
    n_train = len(data['train_x'])
    members = {'cifar-10-batches-py/batches.meta': pickle.dumps({}, 2)}
    parts = np.array_split(np.arange(n_train), 5)
    for i, part in enumerate(parts, start=1):
        members[f'cifar-10-batches-py/data_batch_{i}'] = _cifar_batch(
            data['train_x'][part], data['train_y'][part], b'labels', f'data_batch_{i}'
        )
    members['cifar-10-batches-py/test_batch'] = _cifar_batch(
        data['test_x'], data['test_y'], b'labels', 'test_batch'
    )
    _write_tar(path, members)
    return data


CIFAR_SIZES = {'training_size': 20, 'validation_size': 10, 'test_size': 10}


def _check_cifar_file(path: Path, data: dict[str, np.ndarray]) -> None:
    """Exact SPEC 15 layout, standardisation and round trip of a CIFAR file."""
    with h5py.File(path, 'r') as f:
        found = _datasets(f)
        expected = {}
        for group, n in [
            ('normalized_split/training', 20),
            ('normalized_split/validation', 10),
            ('normalized_split/test', 10),
            ('normalized_full/training', 30),
            ('normalized_full/test', 10),
        ]:
            expected[f'{group}/default'] = ((1, n, 32, 32, 3), np.float32)
            expected[f'{group}/targets'] = ((1, n, 1), np.uint8)
        assert found == expected
        assert set(f.attrs) == {'description', 'mean', 'std'}
        mean, std = f.attrs['mean'], f.attrs['std']
        assert mean.shape == std.shape == (32, 32, 3)
        first = data['train_x'][:20].astype(np.float64)
        np.testing.assert_allclose(mean, first.mean(axis=0), rtol=1e-6)
        expected_std = first.std(axis=0)
        expected_std[0, 0, 0] = 1.0
        np.testing.assert_allclose(std, expected_std, rtol=1e-6)
        training = f['normalized_split/training/default'][0]
        np.testing.assert_allclose(training.mean(axis=0), 0, atol=1e-5)
        np.testing.assert_allclose(training.std(axis=0)[1:], 1, rtol=1e-5)
        for group, x, y in [
            ('normalized_full/training', data['train_x'], data['train_y']),
            ('normalized_split/validation', data['train_x'][20:], data['train_y'][20:]),
            ('normalized_split/test', data['test_x'], data['test_y']),
            ('normalized_full/test', data['test_x'], data['test_y']),
        ]:
            pixels = f[f'{group}/default'][0] * std + mean
            np.testing.assert_allclose(pixels, x, atol=1e-3)
            np.testing.assert_array_equal(f[f'{group}/targets'][0, :, 0], y)


def test_cifar10_layout_standardisation_and_round_trip(tmp_path):
    data = _write_cifar10(tmp_path / 'cifar-10-python.tar.gz')
    out = create_cifar10.convert(
        tmp_path / 'cifar-10-python.tar.gz', tmp_path / 'CIFAR-10.hdf5', **CIFAR_SIZES
    )
    _check_cifar_file(out, data)
    with h5py.File(out, 'r') as f:
        assert 'first 20 training' in f.attrs['description']


def test_cifar10_reads_folder_with_archive_or_extracted_batches(tmp_path):
    data = _write_cifar10(tmp_path / 'cifar-10-python.tar.gz')
    create_cifar10.convert(tmp_path, tmp_path / 'a.hdf5', **CIFAR_SIZES)
    _check_cifar_file(tmp_path / 'a.hdf5', data)
    with tarfile.open(tmp_path / 'cifar-10-python.tar.gz') as tar:
        tar.extractall(tmp_path / 'extracted', filter='data')
    create_cifar10.convert(tmp_path / 'extracted', tmp_path / 'b.hdf5', **CIFAR_SIZES)
    _check_cifar_file(tmp_path / 'b.hdf5', data)


def test_cifar10_foreign_or_corrupt_archive_names_the_file(tmp_path):
    zipped = tmp_path / 'cifar-10-python.tar.gz'
    with zipfile.ZipFile(zipped, 'w') as z:
        z.writestr('data_batch_1', b'not a tar')
    with pytest.raises(
        _common.DataFormatError, match=r'cifar-10-python\.tar\.gz.*tar archive'
    ):
        create_cifar10.convert(zipped, tmp_path / 'out.hdf5', **CIFAR_SIZES)
    _write_cifar10(zipped)
    zipped.write_bytes(zipped.read_bytes()[:400])
    with pytest.raises(_common.DataFormatError, match=r'cifar-10-python\.tar\.gz'):
        create_cifar10.convert(zipped, tmp_path / 'out.hdf5', **CIFAR_SIZES)
    assert not (tmp_path / 'out.hdf5').exists()


def test_cifar10_batch_problems_name_the_batch(tmp_path):
    archive = tmp_path / 'cifar-10-python.tar.gz'
    good = _cifar_batch(np.zeros((6, 32, 32, 3), np.uint8), np.zeros(6), b'labels', 'x')
    members = {f'data_batch_{i}': good for i in range(1, 6)}
    members['test_batch'] = good
    del members['data_batch_3']
    _write_tar(archive, members)
    with pytest.raises(_common.DataFormatError, match='without.*data_batch_3'):
        create_cifar10.convert(archive, tmp_path / 'out.hdf5', **CIFAR_SIZES)
    members['data_batch_3'] = pickle.dumps({b'data': 1}, 2)
    _write_tar(archive, members)
    with pytest.raises(
        _common.DataFormatError, match="'data_batch_3': expected the key 'labels'"
    ):
        create_cifar10.convert(archive, tmp_path / 'out.hdf5', **CIFAR_SIZES)
    members['data_batch_3'] = pickle.dumps({b'data': Path('x'), b'labels': []}, 2)
    _write_tar(archive, members)
    with pytest.raises(
        _common.DataFormatError, match="'data_batch_3'.*refusing to load pathlib"
    ):
        create_cifar10.convert(archive, tmp_path / 'out.hdf5', **CIFAR_SIZES)
    members['data_batch_3'] = good
    _write_tar(archive, members)
    with pytest.raises(
        _common.DataFormatError,
        match=r"test batches \['test_batch'\]: expected 10 "
        'images in all. Received: 6',
    ):
        create_cifar10.convert(archive, tmp_path / 'out.hdf5', **CIFAR_SIZES)
    with pytest.raises(
        _common.DataFormatError,
        match='training batches .*data_batch_5.*: expected 25 '
        'images in all. Received: 30',
    ):
        create_cifar10.convert(
            archive,
            tmp_path / 'out.hdf5',
            training_size=20,
            validation_size=5,
            test_size=6,
        )


def test_cifar_pickle_with_python2_numpy_names_loads(recwarn):
    rows = np.arange(2 * 3072).reshape(2, 3072).astype(np.uint8)
    data = pickle.dumps({b'data': rows, b'labels': [3, 4]}, protocol=2)
    old = b'cnumpy.core.multiarray\n_reconstruct\n'
    if old not in data:  # NumPy 2 writes numpy._core; the archives predate it
        data = data.replace(b'cnumpy._core.multiarray\n_reconstruct\n', old)
    assert old in data
    batch = _common.load_cifar_pickle(data, 'data_batch_1', ('data', 'labels'))
    np.testing.assert_array_equal(batch['data'], rows)
    assert batch['labels'] == [3, 4]
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]


def _write_cifar100(path: Path) -> dict[str, np.ndarray]:
    """cifar-100-python.tar.gz with its train and test files."""
    data = _cifar_data(100, seed=3)
    members = {'cifar-100-python/meta': pickle.dumps({}, 2)}
    for name in ('train', 'test'):
        x, y = data[f'{name}_x'], data[f'{name}_y']
        batch = pickle.loads(_cifar_batch(x, y, b'fine_labels', name))
        batch[b'coarse_labels'] = [int(label) // 5 for label in y]
        members[f'cifar-100-python/{name}'] = pickle.dumps(batch, 2)
    _write_tar(path, members)
    return data


def test_cifar100_layout_standardisation_and_fine_labels(tmp_path):
    data = _write_cifar100(tmp_path / 'cifar-100-python.tar.gz')
    out = create_cifar100.convert(
        tmp_path / 'cifar-100-python.tar.gz', tmp_path / 'CIFAR-100.hdf5', **CIFAR_SIZES
    )
    _check_cifar_file(out, data)
    with h5py.File(out, 'r') as f:
        assert f['normalized_full/training/targets'][()].max() == 99
        assert 'CIFAR-100' in f.attrs['description']
    with tarfile.open(tmp_path / 'cifar-100-python.tar.gz') as tar:
        tar.extractall(tmp_path / 'extracted', filter='data')
    create_cifar100.convert(tmp_path / 'extracted', tmp_path / 'b.hdf5', **CIFAR_SIZES)
    _check_cifar_file(tmp_path / 'b.hdf5', data)


def test_cifar100_rejects_a_cifar10_archive(tmp_path):
    _write_cifar10(tmp_path / 'cifar-10-python.tar.gz')
    with pytest.raises(
        _common.DataFormatError,
        match=r"cifar-10-python\.tar\.gz': expected the "
        r"batches \['train', 'test'\]",
    ):
        create_cifar100.convert(
            tmp_path / 'cifar-10-python.tar.gz', tmp_path / 'out.hdf5', **CIFAR_SIZES
        )


# ----------------------------------------------------------------- Hutter ---

HUTTER_SIZES = {
    'training_size': 1000,
    'validation_size': 300,
    'test_size': 300,
    'sequence_length': 7,
    'streams': 4,
}


def _write_enwik8_zip(path: Path, seed: int = 4) -> bytes:
    """A zip holding 1600 bytes 'enwik8' over 30 byte values (some non-ASCII)."""
    rng = np.random.default_rng(seed)
    alphabet = np.array(
        list(b'abcdefghijklmnopqrstuvwxyz <>\n') + [0xC3], dtype=np.uint8
    )
    text = alphabet[rng.integers(0, len(alphabet), 1600)].tobytes()
    with zipfile.ZipFile(path, 'w', zipfile.ZIP_DEFLATED) as archive:
        archive.writestr('enwik8', text)
    return text


def _stream_bytes(
    inputs: np.ndarray, unique: np.ndarray, stream: int, streams: int
) -> bytes:
    """Concatenate the sequences of one stream back into text."""
    columns = inputs[:, stream::streams, 0]  # (T, pieces)
    return unique[columns.T.reshape(-1)].tobytes()


def test_hutter_layout_dtypes_and_description(tmp_path):
    text = _write_enwik8_zip(tmp_path / 'enwik8.zip')
    out = create_hutter.convert(
        tmp_path / 'enwik8.zip', tmp_path / 'HutterPrize.hdf5', **HUTTER_SIZES
    )
    # inputs per split: (n - 1) // 28 pieces of 4 streams x 7 steps
    pieces = {'training': 999 // 28, 'validation': 299 // 28, 'test': 299 // 28}
    with h5py.File(out, 'r') as f:
        expected = {}
        for name, c in pieces.items():
            expected[f'split/{name}/default'] = ((7, c * 4, 1), np.uint8)
            expected[f'split/{name}/targets'] = ((7, c * 4, 1), np.uint8)
        assert _datasets(f) == expected
        assert set(f.attrs) == {'description', 'unique'}
        unique = f.attrs['unique']
        description = f.attrs['description']
    np.testing.assert_array_equal(unique, np.unique(np.frombuffer(text, np.uint8)))
    assert unique.dtype == np.uint8 and len(unique) == 31
    assert '1,600 bytes' in description
    assert '980 input bytes of the 1,000 bytes of the training' in description
    assert '280 input bytes of the 300 bytes of the test' in description
    assert '10M' not in description


def test_hutter_round_trip_next_char_targets_and_continuity(tmp_path):
    text = _write_enwik8_zip(tmp_path / 'enwik8.zip')
    out = create_hutter.convert(tmp_path, tmp_path / 'HutterPrize.hdf5', **HUTTER_SIZES)
    streams, steps = 4, 7
    with h5py.File(out, 'r') as f:
        unique = f.attrs['unique']
        for name, start, size in [
            ('training', 0, 1000),
            ('validation', 1000, 300),
            ('test', 1300, 300),
        ]:
            x = f[f'split/{name}/default'][()]
            y = f[f'split/{name}/targets'][()]
            assert x.max() < len(unique)
            part = text[start : start + size]
            length = (size - 1) // (streams * steps) * steps
            for s in range(streams):
                piece = part[s * length : (s + 1) * length + 1]
                assert _stream_bytes(x, unique, s, streams) == piece[:-1]
                assert _stream_bytes(y, unique, s, streams) == piece[1:]
            # within a sequence the target is the next input
            np.testing.assert_array_equal(y[:-1], x[1:])
            # batch c + 1 (columns of Minibatches(streams)) continues batch c
            np.testing.assert_array_equal(x[0, streams:], y[-1, :-streams])
            np.testing.assert_array_equal(x[1:, streams:], y[:-1, streams:])


def test_hutter_accepts_the_extracted_file(tmp_path):
    text = _write_enwik8_zip(tmp_path / 'enwik8.zip')
    (tmp_path / 'raw').mkdir()
    (tmp_path / 'raw' / 'enwik8').write_bytes(text)
    out = create_hutter.convert(tmp_path / 'raw', tmp_path / 'a.hdf5', **HUTTER_SIZES)
    create_hutter.convert(tmp_path / 'enwik8.zip', tmp_path / 'b.hdf5', **HUTTER_SIZES)
    with h5py.File(out, 'r') as a, h5py.File(tmp_path / 'b.hdf5', 'r') as b:
        for name in ('training', 'validation', 'test'):
            np.testing.assert_array_equal(
                a[f'split/{name}/default'][()], b[f'split/{name}/default'][()]
            )


def test_hutter_foreign_corrupt_or_short_sources_name_the_file(tmp_path):
    foreign = tmp_path / 'enwik8.tar.gz'
    _write_tar(foreign, {'enwik8': b'x' * 1600})
    with pytest.raises(
        _common.DataFormatError, match=r"'.*enwik8\.tar\.gz': expected a zip archive"
    ):
        create_hutter.convert(foreign, tmp_path / 'out.hdf5', **HUTTER_SIZES)
    archive = tmp_path / 'enwik8.zip'
    _write_enwik8_zip(archive)
    damaged = bytearray(archive.read_bytes())
    damaged[60:90] = bytes(30)  # inside the deflated data
    archive.write_bytes(bytes(damaged))
    with pytest.raises(_common.DataFormatError, match=r'enwik8\.zip'):
        create_hutter.convert(archive, tmp_path / 'out.hdf5', **HUTTER_SIZES)
    with zipfile.ZipFile(archive, 'w') as z:
        z.writestr('readme.txt', b'hello')
    with pytest.raises(
        _common.DataFormatError, match=r"enwik8\.zip': expected a file 'enwik8'"
    ):
        create_hutter.convert(archive, tmp_path / 'out.hdf5', **HUTTER_SIZES)
    _write_enwik8_zip(archive)
    with pytest.raises(
        _common.DataFormatError, match=r'expected 100000000 bytes .*Received: 1600'
    ):
        create_hutter.convert(archive, tmp_path / 'out.hdf5')
    with pytest.raises(ValidationError, match='too short'):
        create_hutter.convert(
            archive,
            tmp_path / 'out.hdf5',
            training_size=1000,
            validation_size=300,
            test_size=300,
            sequence_length=100,
            streams=4,
        )
    assert not (tmp_path / 'out.hdf5').exists()


# ----------------------------------------------------- command line, download ---


def test_main_writes_to_brainstorm_data_dir_or_output_dir(tmp_path, monkeypatch):
    _write_mnist(tmp_path / 'raw')
    monkeypatch.setenv('BRAINSTORM_DATA_DIR', str(tmp_path / 'env'))
    sizes = ['--training-size', '20', '--validation-size', '10', '--test-size', '10']
    out = create_mnist.main(['--source', str(tmp_path / 'raw'), *sizes])
    assert out == tmp_path / 'env' / 'MNIST.hdf5' and out.is_file()
    out = create_mnist.main(
        [
            '--source',
            str(tmp_path / 'raw'),
            '--output-dir',
            str(tmp_path / 'explicit'),
            *sizes,
        ]
    )
    assert out == tmp_path / 'explicit' / 'MNIST.hdf5' and out.is_file()
    monkeypatch.delenv('BRAINSTORM_DATA_DIR')
    monkeypatch.chdir(tmp_path)
    out = create_mnist.main(['--source', str(tmp_path / 'raw'), *sizes])
    assert out == Path('MNIST.hdf5') and (tmp_path / 'MNIST.hdf5').is_file()


def test_main_downloads_when_no_source_is_given(tmp_path, monkeypatch):
    data = _write_mnist(tmp_path / 'mirror')
    md5s = {path.name: _common.md5sum(path) for path in (tmp_path / 'mirror').iterdir()}
    monkeypatch.setattr(create_mnist, 'SOURCE_FILES', md5s)
    monkeypatch.setattr(
        create_mnist,
        'URLS',
        [(tmp_path / 'nowhere').as_uri() + '/', (tmp_path / 'mirror').as_uri() + '/'],
    )
    out = create_mnist.main(
        [
            '--output-dir',
            str(tmp_path / 'out'),
            '--training-size',
            '20',
            '--validation-size',
            '10',
            '--test-size',
            '10',
        ]
    )
    assert sorted(p.name for p in (tmp_path / 'out').iterdir()) == sorted(
        [*md5s, 'MNIST.hdf5']
    )
    with h5py.File(out, 'r') as f:
        np.testing.assert_array_equal(
            f['normalized_full/test/targets'][0, :, 0], data['t10k-labels-idx1-ubyte']
        )


def test_unreachable_download_says_to_pass_source(tmp_path, monkeypatch, capsys):
    def offline(url, timeout):
        raise _common.urllib.error.URLError('no network')

    monkeypatch.setattr(_common.urllib.request, 'urlopen', offline)
    with pytest.raises(SystemExit) as info:
        create_cifar10.main(['--output-dir', str(tmp_path)])
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "Could not download 'cifar-10-python.tar.gz'" in err
    assert 'www.cs.toronto.edu' in err and 'no network' in err
    assert '--source PATH' in err
    assert list(tmp_path.iterdir()) == []


def test_download_checks_md5_and_reuses_a_verified_file(tmp_path):
    original = tmp_path / 'original.bin'
    original.write_bytes(b'brainstorm' * 100)
    md5 = _common.md5sum(original)
    target = tmp_path / 'got' / 'file.bin'
    with pytest.raises(
        _common.DownloadError, match=f'MD5 {md5}, expected 0123.*--source'
    ):
        _common.download([original.as_uri()], target, '0123')
    assert not target.exists() and not target.with_suffix('.bin.part').exists()
    assert _common.download([original.as_uri()], target, md5) == target
    assert target.read_bytes() == original.read_bytes()
    original.unlink()  # a verified existing file is not downloaded again
    assert _common.download([original.as_uri()], target, md5) == target


def test_bad_source_path_ends_with_a_message_not_a_traceback(tmp_path, capsys):
    with pytest.raises(SystemExit) as info:
        create_hutter.main(
            ['--source', str(tmp_path / 'missing.zip'), '--output-dir', str(tmp_path)]
        )
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert 'missing.zip' in err and 'does not exist' in err
    assert 'Traceback' not in err


@pytest.mark.parametrize(
    'script, default',
    [
        ('create_mnist.py', '50000'),
        ('create_cifar10.py', '40000'),
        ('create_cifar100.py', '40000'),
        ('create_hutter.py', '90000000'),
    ],
)
def test_scripts_run_from_the_repository_root(script, default):
    result = subprocess.run(
        [sys.executable, f'data/{script}', '--help'],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    text = ' '.join(result.stdout.split())
    assert '--source PATH' in text
    assert '--training-size N number of training' in text
    assert f'(default: {default};' in text


def test_script_converts_when_run_as_a_program(tmp_path):
    _write_cifar100(tmp_path / 'cifar-100-python.tar.gz')
    result = subprocess.run(
        [
            sys.executable,
            'data/create_cifar100.py',
            '--source',
            str(tmp_path / 'cifar-100-python.tar.gz'),
            '--output-dir',
            str(tmp_path / 'out'),
            '--training-size',
            '20',
            '--validation-size',
            '10',
            '--test-size',
            '10',
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert 'CIFAR-100.hdf5' in result.stdout
    with h5py.File(tmp_path / 'out' / 'CIFAR-100.hdf5', 'r') as f:
        assert f['normalized_full/training/default'].shape == (1, 30, 32, 32, 3)
