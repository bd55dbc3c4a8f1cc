"""Minibatches and Undivided over data read on demand: h5py datasets and
np.memmap arrays are never read whole; each batch is read when taken."""

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Shard, Undivided
from brainstorm.utils import IteratorValidationError
from tests.data_iterators.helpers import (
    CountingReads,
    batch_ids,
    in_file,
    in_memmap,
    samples,
)

SHUFFLES = [False, True, 'samples']
STORES = {'h5py': in_file, 'memmap': in_memmap}


def passes(make, data, count=2, seed=4):
    """``count`` passes of ``make(**data)`` built under global seed ``seed``."""
    bs.global_rnd.set_seed(seed)
    iterator = make(**data)
    return [[dict(batch) for batch in iterator()] for _ in range(count)]


def assert_same_passes(passes_a, passes_b):
    assert len(passes_a) == len(passes_b)
    for pass_a, pass_b in zip(passes_a, passes_b):
        assert len(pass_a) == len(pass_b)
        for batch_a, batch_b in zip(pass_a, pass_b):
            assert set(batch_a) == set(batch_b)
            for name in batch_a:
                assert type(batch_a[name]) is np.ndarray
                np.testing.assert_array_equal(batch_a[name], batch_b[name])


def test_an_h5py_dataset_is_kept_unread(tmp_path):
    data = in_file(tmp_path, x=samples(), y=samples(f=1))
    it = Minibatches(3, **data)
    assert it.data['x'] is data['x']
    assert it.data_shapes == {'x': (2, 10, 3), 'y': (2, 10, 1)}
    assert Undivided(**data).data['y'] is data['y']


@pytest.mark.parametrize('klass', [Minibatches, Undivided])
def test_nothing_is_read_when_the_iterator_is_built(klass):
    x = CountingReads(samples())
    klass(x=x)
    assert x.reads == []


@pytest.mark.parametrize('store', sorted(STORES))
@pytest.mark.parametrize('shuffle', SHUFFLES)
def test_batches_equal_those_of_the_arrays_in_memory(tmp_path, store, shuffle):
    """Also the order of the samples in a sample-shuffled batch (an h5py
    file is read in increasing order, then reordered)."""
    arrays = {'x': samples(), 'y': samples(f=1, seed=1)}
    data = STORES[store](tmp_path, **arrays)

    def make(**d):
        return Minibatches(3, shuffle=shuffle, **d)

    on_demand = passes(make, data)
    assert_same_passes(on_demand, passes(make, arrays))
    if shuffle == 'samples':
        ids = batch_ids(on_demand[0])
        assert any(batch != sorted(batch) for batch in ids), ids


@pytest.mark.parametrize('shuffle', SHUFFLES)
def test_a_pass_reads_every_sample_once_batch_by_batch(shuffle):
    x = CountingReads(samples(b=11))
    it = Minibatches(4, shuffle=shuffle, x=x)
    for number, batch in enumerate(it()):
        # one read per batch, when the batch is taken, of its samples only
        assert len(x.reads) == number + 1
        assert x.reads[-1] == batch['x'].shape[1]
    assert sorted(x.reads) == [3, 4, 4]


@pytest.mark.parametrize('shuffle', SHUFFLES)
def test_a_shard_reads_only_its_part_of_each_batch(shuffle):
    """Two ranks together read each sample once and get the parts a
    Shard of the arrays in memory gives."""
    arrays = {'x': samples(b=11)}
    for rank in (0, 1):
        counted = CountingReads(arrays['x'])

        def make(x, rank=rank):
            return Shard(Minibatches(4, shuffle=shuffle, x=x), rank=rank, size=2)

        from_file = passes(make, {'x': counted}, count=1)
        assert_same_passes(from_file, passes(make, arrays, count=1))
        # global batches of 4, 4, 3: rank 0 reads 2, 2, 1 and rank 1 2, 2, 2
        assert sorted(counted.reads) == ([1, 2, 2] if rank == 0 else [2, 2, 2])


def test_undivided_reads_the_data_when_its_pass_runs(tmp_path):
    arrays = {'x': samples(), 'y': samples(f=1)}
    data = in_file(tmp_path, **arrays)
    (batch,) = Undivided(**data)()
    for name, values in arrays.items():
        np.testing.assert_array_equal(batch[name], values)
        assert not batch[name].flags.writeable
    part = next(Shard(Undivided(**data), rank=1, size=2)())
    np.testing.assert_array_equal(part['x'], arrays['x'][:, 5:])


def test_a_mask_in_a_file_cuts_the_batches_like_one_in_memory(tmp_path):
    mask = np.zeros((5, 6, 1))
    for sample, length in enumerate([1, 5, 2, 0, 3, 3]):
        mask[:length, sample] = 1
    arrays = {'x': samples(t=5, b=6), 'mask': mask}
    data = in_file(tmp_path, **arrays)
    it = Minibatches(2, shuffle=False, **data)
    assert it.seq_lens.tolist() == [1, 5, 2, 0, 3, 3]
    assert [b['x'].shape[0] for b in it()] == [5, 2, 3]

    def make(**d):
        return Minibatches(2, shuffle='samples', **d)

    assert_same_passes(passes(make, data), passes(make, arrays))


# --------------------------------------------------------- finite check ---


@pytest.mark.parametrize('store', sorted(STORES))
@pytest.mark.parametrize('shuffle', SHUFFLES)
def test_nan_in_data_on_demand_is_found_in_the_batch_holding_it(
    tmp_path, store, shuffle
):
    """Not up front (that would read the whole file): the pass raises when
    it reads the batch with the NaN, naming the data's own index."""
    x = samples(b=12)
    x[1, 10, 2] = np.nan
    data = STORES[store](tmp_path, x=x)
    it = Minibatches(3, shuffle=shuffle, x=data['x'])
    batches = []
    with pytest.raises(IteratorValidationError) as info:
        for batch in it():
            batches.append(batch)
    assert (
        "Minibatches: data 'x' holds NaN or infinite values (the first at "
        'index (1, 10, 2): nan)' in str(info.value)
    )
    assert 'check_finite=False' in str(info.value)
    assert all(10 not in ids for ids in batch_ids(batches))
    # skipped on request
    unchecked = Minibatches(3, shuffle=shuffle, check_finite=False, x=data['x'])
    assert sum(np.isnan(b['x']).sum() for b in unchecked()) == 1


def test_nan_in_a_file_given_to_undivided_is_found_when_read(tmp_path):
    x = samples()
    x[0, 3, 1] = np.inf
    it = Undivided(**in_file(tmp_path, x=x))
    with pytest.raises(IteratorValidationError, match=r"'x'.*\(0, 3, 1\): inf"):
        next(it())


def test_nan_in_memory_is_still_refused_when_the_iterator_is_built():
    x = samples()
    x[1, 7, 0] = np.nan
    with pytest.raises(IteratorValidationError, match=r'index \(1, 7, 0\): nan'):
        Minibatches(3, x=x)


# ------------------------------------------------------------ bad input ---


def test_a_dataset_with_too_few_dimensions_is_refused_naming_it(tmp_path):
    data = in_file(tmp_path, x=np.zeros((4, 2)))
    with pytest.raises(
        IteratorValidationError,
        match=r"Minibatches: data 'x' must be a numeric array with at least 3 "
        r'dimensions \(it has shape \(4, 2\)\)',
    ):
        Minibatches(2, x=data['x'])


def test_a_dataset_of_strings_is_refused_naming_it(tmp_path):
    path = tmp_path / 'text.h5'
    with h5py.File(path, 'w') as f:
        f['x'] = np.array([[[b'a'], [b'b']]])
    with (
        h5py.File(path, 'r') as f,
        pytest.raises(
            IteratorValidationError, match="Undivided: data 'x' must be a numeric array"
        ),
    ):
        Undivided(x=f['x'])


def resizable_file(tmp_path, b=20):
    """Datasets 'x' and 'y' of b samples that may grow and shrink."""
    f = h5py.File(tmp_path / 'resizable.h5', 'w')
    f.create_dataset('x', data=samples(1, b, 4), maxshape=(1, None, 4))
    f.create_dataset('y', data=np.zeros((1, b, 1), np.int64), maxshape=(1, None, 1))
    return f


@pytest.mark.parametrize('shuffle', SHUFFLES)
@pytest.mark.parametrize('new_size', [14, 26])
def test_data_resized_under_minibatches_is_refused_at_the_next_pass(
    tmp_path, shuffle, new_size
):
    f = resizable_file(tmp_path)
    it = Minibatches(6, shuffle=shuffle, x=f['x'], y=f['y'])
    assert sum(batch['x'].shape[1] for batch in it()) == 20
    f['x'].resize((1, new_size, 4))
    with pytest.raises(IteratorValidationError) as error:
        list(it())
    message = str(error.value)
    assert "Minibatches: data 'x'" in message
    assert '(1, 20, 4)' in message and f'(1, {new_size}, 4)' in message
    f.close()


def test_data_resized_under_undivided_or_a_shard_is_refused(tmp_path):
    f = resizable_file(tmp_path)
    whole = Undivided(x=f['x'], y=f['y'])
    shard = Shard(Minibatches(6, shuffle=False, x=f['x'], y=f['y']), 0, 2)
    f['y'].resize((1, 14, 1))
    for it, owner in [(whole, 'Undivided'), (shard, 'Minibatches')]:
        with pytest.raises(IteratorValidationError, match=f"{owner}: data 'y'"):
            list(it())
    f.close()


def test_training_on_data_that_shrank_stops_with_the_error(tmp_path):
    f = resizable_file(tmp_path)
    it = Minibatches(6, shuffle=False, default=f['x'], targets=f['y'])
    f['x'].resize((1, 14, 4))
    f['y'].resize((1, 14, 1))
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with pytest.raises(IteratorValidationError, match='now has shape'):
        trainer.train(net, it)
    assert trainer.current_update_nr == 0
    f.close()


def test_a_damaged_chunk_names_the_file_and_the_dataset(tmp_path):
    path = tmp_path / 'damaged.h5'
    with h5py.File(path, 'w') as f:
        f.create_dataset(
            'x',
            data=samples(1, 40, 8).astype(np.float32),
            chunks=(1, 10, 8),
            compression='gzip',
        )
        offset = f['x'].id.get_chunk_info(2).byte_offset
    blob = bytearray(path.read_bytes())
    for i in range(offset + 10, offset + 60):
        blob[i] ^= 0xFF
    path.write_bytes(bytes(blob))
    with h5py.File(path, 'r') as f:
        it = Minibatches(10, shuffle=False, x=f['x'])
        with pytest.raises(IteratorValidationError) as error:
            list(it())
    message = str(error.value)
    assert "Minibatches: data 'x'" in message
    assert f"dataset '/x' of the file '{path}'" in message
    assert isinstance(error.value.__cause__, OSError)
