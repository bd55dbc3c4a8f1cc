"""brainstorm.datasets: the data scripts' files, the fallbacks, bad input.

The data files are made at test time by the data scripts themselves
(``data/create_*.py``, their ``convert`` functions) from tiny fake sources,
so the loaders are checked against the format the scripts really write.
"""

import argparse
import ast
import gzip
import importlib
import pathlib
import pickle
import struct
import sys

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import brainstorm as bs
from brainstorm import datasets
from brainstorm.utils import DatasetValidationError, ValidationError

ROOT = pathlib.Path(__file__).resolve().parents[1]
if str(ROOT / 'data') not in sys.path:
    sys.path.insert(0, str(ROOT / 'data'))
create_mnist = importlib.import_module('create_mnist')
create_cifar10 = importlib.import_module('create_cifar10')
create_hutter = importlib.import_module('create_hutter')

not_positive_ints = st.one_of(
    st.integers(max_value=0),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
    st.just([1]),
)


@pytest.fixture(autouse=True)
def no_data_dir(monkeypatch):
    """Every test starts without $BRAINSTORM_DATA_DIR."""
    monkeypatch.delenv(datasets.DATA_DIR_VARIABLE, raising=False)


# ------------------------------------------------ files made by the scripts ---


def make_mnist(folder: pathlib.Path) -> pathlib.Path:
    """MNIST.hdf5 of 20 training, 10 validation and 10 test images."""
    rng = np.random.default_rng(1)
    source = folder / 'mnist_source'
    source.mkdir(parents=True)
    for prefix, n in [('train', 30), ('t10k', 10)]:
        for kind, magic, shape in [
            ('images-idx3', 2051, (n, 28, 28)),
            ('labels-idx1', 2049, (n,)),
        ]:
            array = rng.integers(0, 10 if magic == 2049 else 256, shape)
            raw = struct.pack(f'>I{len(shape)}I', magic, *shape)
            raw += array.astype(np.uint8).tobytes()
            (source / f'{prefix}-{kind}-ubyte.gz').write_bytes(gzip.compress(raw))
    return create_mnist.convert(source, folder / 'MNIST.hdf5', 20, 10, 10)


def make_cifar10(folder: pathlib.Path) -> pathlib.Path:
    """CIFAR-10.hdf5 of 20 training, 10 validation and 10 test images."""
    rng = np.random.default_rng(2)
    source = folder / 'cifar_source'
    source.mkdir(parents=True)
    names = [f'data_batch_{i}' for i in range(1, 6)] + ['test_batch']
    for name, n in zip(names, [6, 6, 6, 6, 6, 10]):
        batch = {
            b'data': rng.integers(0, 256, (n, 3072)).astype(np.uint8),
            b'labels': [int(i) for i in rng.integers(0, 10, n)],
        }
        (source / name).write_bytes(pickle.dumps(batch, protocol=2))
    return create_cifar10.convert(source, folder / 'CIFAR-10.hdf5', 20, 10, 10)


def make_hutter(folder: pathlib.Path) -> tuple[pathlib.Path, bytes]:
    """HutterPrize.hdf5 of 4 streams of sequences of 7 bytes."""
    rng = np.random.default_rng(3)
    alphabet = np.frombuffer(b'abcdefghij <>\n', dtype=np.uint8)
    text = alphabet[rng.integers(0, len(alphabet), 1600)].tobytes()
    folder.mkdir(parents=True, exist_ok=True)
    (folder / 'enwik8').write_bytes(text)
    path = create_hutter.convert(
        folder / 'enwik8',
        folder / 'HutterPrize.hdf5',
        1000,
        300,
        300,
        sequence_length=7,
        streams=4,
    )
    return path, text


def read(path, group):
    with h5py.File(path, 'r') as f:
        return f[group]['default'][()], f[group]['targets'][()]


@pytest.mark.parametrize(
    'load, make, group, name',
    [
        (datasets.load_mnist, make_mnist, 'normalized_split', 'mnist'),
        (datasets.load_cifar10, make_cifar10, 'normalized_split', 'cifar10'),
    ],
)
def test_image_files_are_read_as_written(tmp_path, load, make, group, name):
    path = make(tmp_path)
    data = load(tmp_path)
    assert data.name == name and data.nr_classes == 10
    assert data.origin.endswith(f'from {path}')
    for part, arrays in [('training', data.training), ('validation', data.validation)]:
        expected = read(path, f'{group}/{part}')
        assert len(arrays) == 2
        for got, want in zip(arrays, expected):
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    assert data.training[0].shape[:2] == (1, 20)
    assert data.validation[1].shape == (1, 10, 1)


def test_the_data_dir_comes_from_the_environment(tmp_path, monkeypatch):
    make_mnist(tmp_path)
    monkeypatch.setenv(datasets.DATA_DIR_VARIABLE, str(tmp_path))
    assert datasets.get_data_dir() == str(tmp_path)
    assert datasets.load_mnist().name == 'mnist'
    # an explicit folder wins over the variable
    assert datasets.load_mnist(tmp_path / 'elsewhere').name == 'digits'


def test_hutter_file_is_read_as_written_and_batches_continue(tmp_path):
    path, text = make_hutter(tmp_path)
    data = datasets.load_hutter(str(tmp_path), streams=99)  # file keeps its 4
    assert data.name == 'hutter'
    assert data.nr_classes == len(set(text)) == 14
    for part, arrays in [('training', data.training), ('validation', data.validation)]:
        for got, want in zip(arrays, read(path, f'split/{part}')):
            np.testing.assert_array_equal(got, want)
    inputs, targets = data.training
    assert inputs.shape == (7, 35 * 4, 1)
    # column s of batch k + 1 starts where column s of batch k ended
    np.testing.assert_array_equal(inputs[0, 4:8], targets[-1, 0:4])


def test_read_split_reads_other_parts(tmp_path):
    path = make_mnist(tmp_path)
    inputs, targets = datasets.read_split(path, 'normalized_split/test')
    assert inputs.shape == (1, 10, 28, 28, 1) and targets.shape == (1, 10, 1)


# ------------------------------------------------------------- fallbacks ---


@pytest.mark.parametrize(
    'load, name, words',
    [
        (
            datasets.load_mnist,
            'digits',
            [
                'MNIST.hdf5 not found',
                '8x8 handwritten digits bundled with scikit-learn',
                'data/create_mnist.py',
            ],
        ),
        (
            datasets.load_cifar10,
            'digits',
            [
                'CIFAR-10.hdf5 not found',
                'upscaled from 8x8 to 32x32 pixels',
                'data/create_cifar10.py',
            ],
        ),
        (
            datasets.load_hutter,
            'python_text',
            [
                'HutterPrize.hdf5 not found',
                'pydoc_data.topics',
                'data/create_hutter.py',
            ],
        ),
    ],
)
def test_missing_files_fall_back_and_say_so(tmp_path, load, name, words):
    data = load(tmp_path)
    assert data.name == name
    for text in words + [f'in {tmp_path}']:
        assert text in data.origin
    unset = load()
    assert f'(${datasets.DATA_DIR_VARIABLE} not set)' in unset.origin
    with pytest.raises(DatasetValidationError) as error:
        load(tmp_path, fallback=False)
    message = str(error.value)
    assert words[0].split()[0] in message and str(tmp_path) in message
    assert words[-1] in message


def test_an_empty_data_dir_variable_counts_as_unset(monkeypatch):
    monkeypatch.setenv(datasets.DATA_DIR_VARIABLE, '')
    assert datasets.get_data_dir() is None
    assert 'not set' in datasets.load_mnist().origin


def test_digits_split_scale_and_the_previous_shuffle():
    data = datasets.load_digits()
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    assert x_tr.shape == (1, 1437, 8, 8, 1) and x_va.shape == (1, 360, 8, 8, 1)
    assert y_tr.shape == (1, 1437, 1) and y_va.dtype == np.uint8
    assert x_tr.dtype == np.float32
    assert x_tr.min() == 0.0 and x_tr.max() == 1.0
    assert set(np.unique(y_va)) == set(range(10))
    # the same split as the examples made with bs.tools before
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32).reshape((1, -1, 8, 8, 1))
    y = digits.target.astype(np.uint8).reshape((1, -1, 1))
    x, y = bs.tools.shuffle_data(x, y, seed=0)
    (x_tr0, y_tr0), (x_va0, y_va0) = bs.tools.split(x, y, ratios=(1437, 360))
    for got, want in zip([x_tr, y_tr, x_va, y_va], [x_tr0, y_tr0, x_va0, y_va0]):
        np.testing.assert_array_equal(got, want)


def test_upscaled_digits_are_blocks_standardised_on_training_only():
    data = datasets.load_digits(scale=4, standardize=True)
    x_tr, x_va = data.training[0], data.validation[0]
    assert x_tr.shape == (1, 1437, 32, 32, 1) and x_va.shape[1] == 360
    image = x_tr[0, 5, :, :, 0]
    np.testing.assert_array_equal(
        image, np.repeat(np.repeat(image[::4, ::4], 4, axis=0), 4, axis=1)
    )
    assert abs(float(x_tr.mean(dtype=np.float64))) < 1e-5
    assert float(x_tr.std(dtype=np.float64)) == pytest.approx(1.0, rel=1e-5)
    # validation images use the training statistics, not their own
    assert abs(float(x_va.mean(dtype=np.float64))) > 1e-4
    plain = datasets.load_digits()
    np.testing.assert_array_equal(plain.validation[1], data.validation[1])


def test_missing_scikit_learn_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, 'sklearn', None)
    monkeypatch.setitem(sys.modules, 'sklearn.datasets', None)
    with pytest.raises(ImportError, match='scikit-learn') as error:
        datasets.load_mnist()
    assert datasets.INSTALL_HINT in str(error.value)


def test_python_text_is_english_laid_out_in_streams():
    data = datasets.load_python_text(streams=10, sequence_length=20)
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    assert x_tr.shape[0] == 20 and x_tr.shape == y_tr.shape
    assert x_tr.shape[1] % 10 == 0 and x_va.shape[1] > 0
    assert max(x_tr.max(), x_va.max(), y_va.max()) < data.nr_classes
    assert 60 < data.nr_classes < 256  # letters, digits, punctuation
    np.testing.assert_array_equal(y_tr[:-1], x_tr[1:])
    np.testing.assert_array_equal(x_tr[0, 10:20], y_tr[-1, 0:10])
    assert x_tr.shape[1] > 8 * x_va.shape[1]  # 90% for training
    assert 'pydoc_data.topics' in data.origin


# ------------------------------------------------------------ to_streams ---


def test_to_streams_lets_each_batch_continue_the_previous_one():
    ids = np.arange(3 * 2 * 100 + 7)
    inputs, targets = datasets.to_streams(ids, streams=2)
    assert inputs.shape == targets.shape == (100, 6, 1)
    np.testing.assert_array_equal(targets, inputs + 1)
    batches = [inputs[:, k * 2 : (k + 1) * 2, 0] for k in range(3)]
    for b in range(2):
        stream = np.concatenate([batch[:, b] for batch in batches])
        # stream b is one contiguous piece of the text
        np.testing.assert_array_equal(stream, np.arange(300) + stream[0])
    assert batches[0][0, 1] - batches[0][0, 0] == 300


@given(streams=st.integers(1, 6), length=st.integers(1, 9), extra=st.integers(0, 60))
@settings(max_examples=60, deadline=None)
def test_to_streams_keeps_the_text_in_order(streams, length, extra):
    ids = np.arange(streams * length + 1 + extra)
    inputs, targets = datasets.to_streams(ids, streams, length)
    pieces = (len(ids) - 1) // (streams * length)
    assert inputs.shape == (length, pieces * streams, 1)
    np.testing.assert_array_equal(targets, inputs + 1)
    for s in range(streams):
        text = inputs[:, s::streams, 0].T.reshape(-1)
        np.testing.assert_array_equal(text, np.arange(len(text)) + text[0])


def test_to_streams_rejects_a_text_too_short_or_not_ids():
    with pytest.raises(DatasetValidationError, match='at least') as error:
        datasets.to_streams(np.arange(200), streams=2)
    assert '201' in str(error.value) and '200' in str(error.value)
    with pytest.raises(DatasetValidationError, match='1-d integer'):
        datasets.to_streams(np.zeros((30, 2), dtype=int), 2, 3)
    with pytest.raises(DatasetValidationError, match='1-d integer'):
        datasets.to_streams(np.linspace(0, 1, 30), 2, 3)


# ------------------------------------------------------------- bad input ---


@given(value=not_positive_ints)
@settings(max_examples=40, deadline=None)
def test_bad_counts_are_named(value):
    calls = [
        ('load_digits', 'scale', lambda: datasets.load_digits(scale=value)),
        (
            'load_python_text',
            'streams',
            lambda: datasets.load_python_text(streams=value),
        ),
        (
            'load_python_text',
            'sequence_length',
            lambda: datasets.load_python_text(sequence_length=value),
        ),
        ('load_hutter', 'streams', lambda: datasets.load_hutter(streams=value)),
        ('to_streams', 'streams', lambda: datasets.to_streams(np.arange(9), value, 2)),
        ('Dataset.limit', 'size', lambda: datasets.load_digits().limit(value)),
    ]
    for owner, name, call in calls:
        with pytest.raises(ValidationError) as error:
            call()
        assert str(error.value) == (
            f'{owner}: {name} must be a positive int. Received: {name}={value!r}'
        )


@given(value=st.one_of(st.integers(), st.floats(), st.lists(st.text())))
@settings(max_examples=20, deadline=None)
def test_a_data_dir_that_is_no_path_is_named(value):
    with pytest.raises(
        DatasetValidationError, match='data_dir must be a folder'
    ) as error:
        datasets.load_mnist(value)
    assert repr(value) in str(error.value)


def test_standardize_must_be_a_bool():
    with pytest.raises(
        DatasetValidationError,
        match="standardize must be a bool. Received: standardize='yes'",
    ):
        datasets.load_digits(standardize='yes')


def test_a_corrupt_file_is_an_error_not_a_silent_fallback(tmp_path):
    (tmp_path / 'MNIST.hdf5').write_bytes(b'not an HDF5 file')
    with pytest.raises(DatasetValidationError, match='MNIST.hdf5'):
        datasets.load_mnist(tmp_path)


@pytest.mark.parametrize(
    'damage, message',
    [
        (
            lambda f: f.__delitem__('normalized_split/validation'),
            "group 'normalized_split/validation'.*Received: no such group",
        ),
        (
            lambda f: f.__delitem__('normalized_split/training/targets'),
            r"expected the datasets 'default' and 'targets'. Received: members "
            r"\['default'\]",
        ),
    ],
)
def test_missing_parts_are_named(tmp_path, damage, message):
    path = make_mnist(tmp_path)
    with h5py.File(path, 'a') as f:
        damage(f)
    with pytest.raises(DatasetValidationError, match=message) as error:
        datasets.load_mnist(tmp_path)
    assert str(path) in str(error.value)


@pytest.mark.parametrize(
    'inputs, targets, message',
    [
        (np.zeros((1, 4, 2), np.float32), np.zeros((1, 5, 1), np.uint8), 'same T'),
        (np.zeros((1, 4, 2), np.float32), np.zeros((1, 4, 2), np.uint8), 'same T'),
        (np.zeros((1, 4, 2), np.float32), np.zeros((1, 4, 1)), 'integer'),
        (np.zeros((4, 2), np.float32), np.zeros((4, 1), np.uint8), 'T, N'),
        (np.zeros((1, 0, 2), np.float32), np.zeros((1, 0, 1), np.uint8), 'N > 0'),
        (
            np.zeros((1, 4, 2), np.float32),
            np.full((1, 4, 1), 10, np.uint8),
            r'targets in \[0, 10\). Received: values from 10 to 10',
        ),
    ],
)
def test_arrays_in_another_layout_are_named(tmp_path, inputs, targets, message):
    with h5py.File(tmp_path / 'CIFAR-10.hdf5', 'w') as f:
        for part in ('training', 'validation'):
            group = f.create_group(f'normalized_split/{part}')
            group['default'], group['targets'] = inputs, targets
    with pytest.raises(DatasetValidationError, match=message) as error:
        datasets.load_cifar10(tmp_path)
    assert 'CIFAR-10.hdf5' in str(error.value)
    assert str(inputs.shape) in str(error.value) or 'values' in str(error.value)


def test_hutter_file_needs_its_vocabulary(tmp_path):
    path, _ = make_hutter(tmp_path)
    with h5py.File(path, 'a') as f:
        unique = f.attrs['unique']
        f.attrs['unique'] = unique[:3]
    with pytest.raises(
        DatasetValidationError, match=r"split/training'.*targets in \[0, 3\)"
    ):
        datasets.load_hutter(tmp_path)
    with h5py.File(path, 'a') as f:
        del f.attrs['unique']
    with pytest.raises(DatasetValidationError, match="attribute 'unique'"):
        datasets.load_hutter(tmp_path)


# ------------------------------------------------------- Dataset, options ---


def test_limit_keeps_the_first_samples_as_views():
    data = datasets.load_digits()
    small = data.limit(50)
    assert small.name == data.name and small.origin == data.origin
    for got, full in zip(
        small.training + small.validation, data.training + data.validation
    ):
        assert got.shape[1] == 50 and np.shares_memory(got, full)
        np.testing.assert_array_equal(got, full[:, :50])
    assert data.limit(None) is data
    assert data.limit(10_000).validation[0].shape[1] == 360


def test_data_arguments(tmp_path):
    parser = datasets.add_data_arguments(argparse.ArgumentParser(), 'MNIST.hdf5')
    args = parser.parse_args([])
    assert args.data_dir is None and args.limit is None
    args = parser.parse_args(['--data-dir', str(tmp_path), '--limit', '7'])
    assert args.data_dir == str(tmp_path) and args.limit == 7
    assert 'MNIST.hdf5' in parser.format_help()


@pytest.mark.parametrize('limit', ['0', '-3', 'many', '2.5'])
def test_data_arguments_reject_a_limit_that_is_no_count(limit, capsys):
    parser = datasets.add_data_arguments(argparse.ArgumentParser(), 'x.hdf5')
    with pytest.raises(SystemExit):
        parser.parse_args(['--limit', limit])
    assert f"expected a positive int. Received: '{limit}'" in capsys.readouterr().err


SETTINGS = {
    'mnist': {'epochs': 500, 'learning_rate': 0.1, 'clip': None},
    'digits': {'epochs': 60, 'learning_rate': 1, 'clip': 5.0},
}
DESCRIPTIONS = {'epochs': 'epochs', 'learning_rate': 'step size', 'clip': 'clip at'}


def test_settings_arguments_list_the_defaults_per_data_set():
    parser = datasets.add_settings_arguments(
        argparse.ArgumentParser(), SETTINGS, DESCRIPTIONS
    )
    text = ' '.join(parser.format_help().split())
    assert '--epochs EPOCHS epochs (mnist: 500, digits: 60)' in text
    assert '--learning-rate LEARNING_RATE step size (mnist: 0.1, digits: 1)' in text
    assert "clip at (mnist: None, digits: 5.0; 'none' for None)" in text
    args = parser.parse_args([])
    assert (args.epochs, args.learning_rate, args.clip) == (None, None, None)
    args = parser.parse_args(['--epochs', '3', '--learning-rate', '2'])
    assert args.epochs == 3 and isinstance(args.epochs, int)
    assert args.learning_rate == 2.0 and isinstance(args.learning_rate, float)
    with pytest.raises(SystemExit):
        parser.parse_args(['--epochs', '2.5'])


def test_choose_settings_takes_the_data_sets_defaults_and_the_options():
    parser = datasets.add_settings_arguments(
        argparse.ArgumentParser(), SETTINGS, DESCRIPTIONS
    )
    args = parser.parse_args(['--epochs', '3'])
    assert datasets.choose_settings(args, SETTINGS, 'digits') == {
        'epochs': 3,
        'learning_rate': 1,
        'clip': 5.0,
    }
    assert datasets.choose_settings(args, SETTINGS, 'mnist') == {
        'epochs': 3,
        'learning_rate': 0.1,
        'clip': None,
    }
    # 'none' is given, not missing: it replaces digits' 5.0
    args = parser.parse_args(['--clip', 'none'])
    assert datasets.choose_settings(args, SETTINGS, 'digits')['clip'] is None
    args = parser.parse_args(['--clip', '0.5'])
    assert datasets.choose_settings(args, SETTINGS, 'mnist')['clip'] == 0.5
    with pytest.raises(
        DatasetValidationError,
        match=r"expected a data set of \['digits', 'mnist'\]. "
        r"Received: 'cifar10'",
    ):
        datasets.choose_settings(args, SETTINGS, 'cifar10')


@pytest.mark.parametrize(
    'argv, message',
    [
        (
            ['--epochs', '0'],
            "argument --epochs: expected a positive int. Received: '0'",
        ),
        (['--epochs', '-2'], 'expected a positive int'),
        (['--clip', '0'], "argument --clip: expected a positive float. Received: '0'"),
        (['--epochs', 'none'], "argument --epochs: invalid int value: 'none'"),
        (['--learning-rate', 'None'], 'invalid float value'),
    ],
)
def test_settings_arguments_refuse_values_the_defaults_rule_out(argv, message, capsys):
    # '--batch-size 0' of an example ran with 100 (its 'or 100'), and a
    # setting whose default may be None could not be given as None
    parser = datasets.add_settings_arguments(
        argparse.ArgumentParser(), SETTINGS, DESCRIPTIONS, positive=SETTINGS['mnist']
    )
    with pytest.raises(SystemExit):
        parser.parse_args(argv)
    assert message in capsys.readouterr().err


def test_settings_are_positive_only_where_asked_and_none_reads_as_none():
    # positivity was inferred from the defaults: a user's dropout of
    # 0.5/0.2 refused --dropout 0, and a setting of defaults all None
    # refused everything but positive values
    defaults = {
        'a': {'dropout': 0.5, 'offset': None, 'epochs': 3},
        'b': {'dropout': 0.2, 'offset': None, 'epochs': 4},
    }
    descriptions = {'dropout': 'p', 'offset': 'o', 'epochs': 'e'}
    parser = datasets.add_settings_arguments(
        argparse.ArgumentParser(), defaults, descriptions, positive=['epochs']
    )
    args = parser.parse_args(['--dropout', '0', '--offset', '-3'])
    assert (args.dropout, args.offset) == (0.0, -3.0)
    # a setting given as none is None in args too (no marker object)
    args = parser.parse_args(['--offset', 'none'])
    assert args.offset is None
    assert datasets.choose_settings(args, defaults, 'a')['offset'] is None
    with pytest.raises(DatasetValidationError, match=r"Received: \['size'\]"):
        datasets.add_settings_arguments(
            argparse.ArgumentParser(), defaults, descriptions, positive=['size']
        )


@pytest.mark.parametrize(
    'defaults, descriptions, message',
    [
        ({}, DESCRIPTIONS, 'the same settings for every data set'),
        (
            {'a': {'epochs': 1}, 'b': {'size': 2}},
            {'epochs': '', 'size': ''},
            'the same settings for every data set',
        ),
        ({'a': {'epochs': 1}}, {}, "Received none for 'epochs'"),
    ],
)
def test_settings_arguments_reject_inconsistent_settings(
    defaults, descriptions, message
):
    with pytest.raises(DatasetValidationError, match=message):
        datasets.add_settings_arguments(
            argparse.ArgumentParser(), defaults, descriptions
        )


# ------------------------------------------------------------ dependencies ---


@pytest.mark.parametrize(
    'module',
    sorted((ROOT / 'brainstorm' / 'datasets').glob('*.py')),
    ids=lambda p: p.name,
)
def test_datasets_depends_only_on_low_level_modules(module):
    tree = ast.parse(module.read_text())
    top_level = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            top_level.add(node.module)
        elif isinstance(node, ast.Import):
            top_level.update(alias.name for alias in node.names)
    top_level = {
        name for name in top_level if not name.startswith('brainstorm.datasets.')
    }
    allowed = {
        'argparse',
        'collections.abc',
        'os',
        'typing',
        'h5py',
        'numpy',
        'brainstorm.errors',
        'brainstorm.files',
        'brainstorm.data_iterators',
        'brainstorm.randomness',
    }
    assert top_level <= allowed, top_level - allowed
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(function):
                if isinstance(node, ast.ImportFrom):
                    assert not node.module.startswith('brainstorm'), node.module
                if isinstance(node, ast.Import):
                    assert not any(a.name.startswith('brainstorm') for a in node.names)


def test_public_names_are_exported_and_documented():
    assert 'datasets' in bs.__all__ and bs.datasets is datasets
    for name in datasets.__all__:
        assert hasattr(datasets, name), name
        obj = getattr(datasets, name)
        if callable(obj):
            assert obj.__doc__ and 'Args:' in obj.__doc__ or name == 'Dataset'
    assert 'brainstorm.datasets' in (ROOT / 'docs' / 'api.rst').read_text()


def write_damaged_mnist(folder: pathlib.Path) -> pathlib.Path:
    """MNIST.hdf5 whose 'normalized_split/training/default' has a damaged chunk."""
    path = folder / 'MNIST.hdf5'
    rng = np.random.default_rng(3)
    with h5py.File(path, 'w') as f:
        for part in ('training', 'validation'):
            group = f.create_group(f'normalized_split/{part}')
            group.create_dataset(
                'default',
                data=rng.random((1, 40, 28, 28, 1), np.float32),
                chunks=(1, 10, 28, 28, 1),
                compression='gzip',
            )
            group['targets'] = rng.integers(0, 10, (1, 40, 1)).astype(np.uint8)
        chunk = f['normalized_split/training/default'].id.get_chunk_info(2)
    blob = bytearray(path.read_bytes())
    for i in range(chunk.byte_offset + 10, chunk.byte_offset + 60):
        blob[i] ^= 0xFF
    path.write_bytes(bytes(blob))
    return path


@pytest.mark.parametrize('read', ['read_split', 'load_mnist'])
def test_a_damaged_chunk_names_the_file_and_the_dataset(tmp_path, read):
    path = write_damaged_mnist(tmp_path)
    with pytest.raises(DatasetValidationError) as error:
        if read == 'read_split':
            datasets.read_split(path, 'normalized_split/training')
        else:
            datasets.load_mnist(tmp_path)
    message = str(error.value)
    assert f"Data file '{path}'" in message
    assert "dataset 'normalized_split/training/default'" in message
    cause = error.value.__cause__
    assert isinstance(cause, OSError) and str(cause)
    # what h5py said, in HDF5's words, which change with its version
    # ('filter returned failure', 'inflate() failed')
    assert f'Received: h5py error {cause} (the file is damaged' in message
