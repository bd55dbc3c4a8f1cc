"""HDF5 data that changes under an iterator or predict: a file closed under
the iterator (bare h5py RuntimeError/ValueError before), a resizable
dataset resized during a pass (empty batches, inputs of different T or a
bare IndexError before: the shape was checked at the start of a pass
only), and a damaged file read by predict (a bare OSError before)."""

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Shard, Undivided
from brainstorm.errors import NetworkValidationError
from brainstorm.utils import IteratorValidationError
from tests.data_iterators.helpers import samples

CLOSED = 'is an h5py dataset whose file was closed (h5py: '
#: what h5py raises for a closed file, depending on what is asked
H5PY_ERRORS = (OSError, RuntimeError, ValueError)


def _write(path, **arrays):
    with h5py.File(path, 'w') as f:
        for name, values in arrays.items():
            f.create_dataset(
                name,
                data=values,
                maxshape=(None, None) + values.shape[2:],
                chunks=True,
            )


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 3)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


# ------------------------------------------------------------ closed file ---


@pytest.mark.parametrize(
    'make, owner',
    [
        (lambda x: Minibatches(5, default=x), 'Minibatches'),
        (lambda x: Undivided(default=x), 'Undivided'),
        (lambda x: Shard(Minibatches(5, default=x), 0, 2), 'Minibatches'),
    ],
    ids=['Minibatches', 'Undivided', 'Shard'],
)
def test_a_file_closed_before_a_pass_is_named(tmp_path, make, owner):
    path = tmp_path / 'data.h5'
    with h5py.File(path, 'w') as f:
        f['x'] = samples(1, 20, 3)
    with h5py.File(path, 'r') as f:
        it = make(f['x'])
        assert len(list(it())) == it.length  # while the file is open
    with pytest.raises(IteratorValidationError) as info:
        list(it())
    message = str(info.value)
    assert message.startswith(f"{owner}: data 'default' cannot be read: it {CLOSED}")
    assert isinstance(info.value.__cause__, H5PY_ERRORS)
    assert f'(h5py: {info.value.__cause__})' in message


def test_a_file_closed_during_a_pass_is_named(tmp_path):
    path = tmp_path / 'data.h5'
    _write(path, x=samples(1, 20, 3), y=np.zeros((1, 20, 1)))
    f = h5py.File(path, 'r')
    batches = Minibatches(5, shuffle=False, x=f['x'], y=f['y'])()
    assert next(batches)['x'].shape == (1, 5, 3)
    f.close()
    with pytest.raises(IteratorValidationError) as info:
        next(batches)
    assert str(info.value).startswith(
        f"Minibatches: data 'x' cannot be read: it {CLOSED}"
    )
    assert isinstance(info.value.__cause__, H5PY_ERRORS)


def test_predict_on_a_closed_dataset_names_the_input(tmp_path):
    path = tmp_path / 'data.h5'
    with h5py.File(path, 'w') as f:
        f['x'] = samples(1, 20, 3)
    with h5py.File(path, 'r') as f:
        x = f['x']
        net = _net()
        expected = net.predict(x, out_name='Output.outputs.predictions')
        assert expected.shape == (1, 20, 3)
    with pytest.raises(NetworkValidationError) as info:
        net.predict(x, out_name='Output.outputs.predictions')
    assert str(info.value).startswith(
        f"predict: the data for input 'default' cannot be read: it {CLOSED}"
    )
    assert isinstance(info.value.__cause__, H5PY_ERRORS)


# ------------------------------------------------------ resized in a pass ---


@pytest.mark.parametrize('shuffle', [False, True, 'samples'])
@pytest.mark.parametrize('new_shape', [(1, 40, 4), (1, 140, 4), (3, 100, 4)])
def test_a_dataset_resized_during_a_pass_is_refused_at_the_next_batch(
    tmp_path, shuffle, new_shape
):
    path = tmp_path / 'data.h5'
    _write(path, x=samples(1, 100, 4), y=np.zeros((1, 100, 1), int))
    with h5py.File(path, 'a') as f:
        it = Minibatches(30, shuffle=shuffle, default=f['x'], targets=f['y'])
        batches = it()
        first = next(batches)
        assert first['default'].shape[:2] == first['targets'].shape[:2]
        f['x'].resize(new_shape)
        with pytest.raises(IteratorValidationError) as info:
            next(batches)
        assert str(info.value).startswith(
            "Minibatches: data 'default' had shape (1, 100, 4) when the "
            f'iterator was built and now has shape {new_shape}'
        )
        f['x'].resize((1, 100, 4))
        assert [b['default'].shape[1] for b in it()] != []  # as built: fine


def test_a_shard_of_a_resized_dataset_is_refused_too(tmp_path):
    path = tmp_path / 'data.h5'
    _write(path, x=samples(1, 100, 4))
    with h5py.File(path, 'a') as f:
        batches = Shard(Minibatches(30, shuffle=False, x=f['x']), 1, 2)()
        assert next(batches)['x'].shape == (1, 15, 4)
        f['x'].resize((1, 50, 4))
        with pytest.raises(IteratorValidationError, match='now has shape'):
            next(batches)


# --------------------------------------------------- predict: damaged file ---


def test_predict_names_the_dataset_and_file_it_cannot_read(tmp_path):
    path = tmp_path / 'damaged.h5'
    with h5py.File(path, 'w') as f:
        f.create_dataset(
            'z',
            data=samples(1, 40, 3).astype(np.float32),
            chunks=(1, 10, 3),
            compression='gzip',
        )
        offset = f['z'].id.get_chunk_info(2).byte_offset
    blob = bytearray(path.read_bytes())
    for i in range(offset + 10, offset + 60):
        blob[i] ^= 0xFF
    path.write_bytes(bytes(blob))
    net = _net()
    with h5py.File(path, 'r') as f:
        with pytest.raises(NetworkValidationError) as info:
            net.predict(f['z'], batch_size=10, out_name='Output.outputs.predictions')
        # the part before the damaged chunk is read
        ok = net.predict(f['z'][:, :20], out_name='Output.outputs.predictions')
    assert ok.shape == (1, 20, 3)
    assert str(info.value).startswith(
        "predict: the data for input 'default' could not be read from the "
        f"dataset '/z' of the file '{path}': "
    )
    assert isinstance(info.value.__cause__, OSError)
    assert str(info.value.__cause__) in str(info.value)
