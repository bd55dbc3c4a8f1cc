"""A network file another process has open for writing is named as locked.

HDF5 locks a file while a process writes it. Loading it then said "it is
missing or not an HDF5 file", sending the user looking for a damaged file
that was fine; a missing file was told apart from a damaged one only by
the errno in parentheses.
"""

import os
import subprocess
import sys

import h5py
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError


@pytest.mark.skipif(
    os.environ.get('HDF5_USE_FILE_LOCKING', '').upper() == 'FALSE',
    reason='HDF5 file locking is switched off',
)
def test_a_file_open_for_writing_elsewhere_is_named_locked(tmp_path):
    path = tmp_path / 'net.h5'
    inp, out = bs.tools.get_in_out_layers('classification', 4, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    net.save_as_hdf5(str(path))
    holder = subprocess.Popen(
        [
            sys.executable,
            '-c',
            'import h5py, sys, time\n'
            f"f = h5py.File({str(path)!r}, 'r+')\n"
            "print('open', flush=True)\n"
            'sys.stdin.read()\n',
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == 'open'
        with pytest.raises(NetworkValidationError) as info:
            bs.Network.from_hdf5(str(path))
    finally:
        holder.communicate('', timeout=60)
    message = str(info.value)
    assert 'another process has it open for writing' in message, message
    assert 'not an HDF5 file' not in message
    loaded = bs.Network.from_hdf5(str(path))  # closed: it loads
    assert list(loaded.layers) == list(net.layers)


def test_a_missing_file_is_named_missing(tmp_path):
    with pytest.raises(NetworkValidationError, match=r'it is missing \(no such file\)'):
        bs.Network.from_hdf5(str(tmp_path / 'none.h5'))


@pytest.mark.parametrize(
    'error',
    [
        # older h5py: an OSError whose message names the lock
        OSError('Unable to open file (unable to lock file, errno = 11)'),
        # a lock refused by the system, whatever the message says
        BlockingIOError(11, 'Resource temporarily unavailable'),
    ],
)
def test_either_sign_of_a_lock_names_the_lock(tmp_path, monkeypatch, error):
    def locked(*args, **kwargs):
        raise error

    path = tmp_path / 'net.h5'
    path.write_bytes(b'')
    monkeypatch.setattr(h5py, 'File', locked)
    with pytest.raises(NetworkValidationError, match='another process has it open'):
        bs.Network.from_hdf5(str(path))
