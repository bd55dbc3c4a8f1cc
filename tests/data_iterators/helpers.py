"""Data on demand for the tests of tests/data_iterators/."""

import h5py
import numpy as np


class CountingReads:
    """An array read on demand that records every read of it.

    It wraps an ``h5py.Dataset`` (or an array) and keeps, per read, the
    number of samples (axis 1) read.
    """

    def __init__(self, source):
        self.source = source
        self.shape, self.dtype, self.ndim = source.shape, source.dtype, source.ndim
        self.reads = []

    def __getitem__(self, index):
        block = self.source[index]
        self.reads.append(block.shape[1])
        return block

    @property
    def samples_read(self):
        return sum(self.reads)


def samples(t=2, b=10, f=3, seed=0):
    """(T, B, F) floats whose feature 0 at time 0 is the sample's index."""
    x = np.random.RandomState(seed).rand(t, b, f)
    x[0, :, 0] = np.arange(b)
    return x


def in_file(tmp_path, **arrays):
    """The arrays as datasets of an HDF5 file opened for reading."""
    path = tmp_path / 'data.h5'
    with h5py.File(path, 'w') as f:
        for name, values in arrays.items():
            f[name] = values
    f = h5py.File(path, 'r')
    return {name: f[name] for name in arrays}


def in_memmap(tmp_path, **arrays):
    """The arrays as read-only ``np.memmap`` arrays of .npy files."""
    result = {}
    for name, values in arrays.items():
        np.save(tmp_path / f'{name}.npy', values)
        result[name] = np.load(tmp_path / f'{name}.npy', mmap_mode='r')
    return result


def batch_ids(batches, name='x'):
    """The sample indices of each batch (feature 0 at time 0)."""
    return [batch[name][0, :, 0].astype(int).tolist() for batch in batches]
