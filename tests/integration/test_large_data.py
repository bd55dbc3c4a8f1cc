"""Data larger than memory trains: a fresh process whose memory is limited
to what it uses after warming up plus HEADROOM trains an epoch over a file
ten times HEADROOM, and the same process cannot read that file whole.

The interpreter, NumPy, h5py, brainstorm and a small network take about
170 MB of address space (measured on Linux x86-64, CPython 3.12); the
limit is set above what the process uses when training starts, so it
bounds the memory left for the data, whatever the baseline of the machine.
An HDF5 file is limited with ``RLIMIT_AS`` (all of the address space); a
``np.memmap`` maps the whole file into the address space, so it is limited
with ``RLIMIT_DATA`` (the memory the process allocates), which its pages
do not count against.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith('linux'), reason='reads /proc/self/status (Linux)'
)

ROOT = Path(__file__).resolve().parents[2]
HEADROOM = 4 * 2**20
SAMPLES, FEATURES = 40_960, 256  # float32: 40 MiB, ten times HEADROOM
BATCH_SIZE = 512

CHILD = r"""
import json, resource, sys
import numpy as np
import brainstorm as bs
from brainstorm.data_iterators import Minibatches

store, path, headroom = sys.argv[1], sys.argv[2], int(sys.argv[3])


def status(key):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024


if store == 'h5py':
    import h5py
    f = h5py.File(path, 'r')
    x, t = f['x'], f['t']
    limit, measure = resource.RLIMIT_AS, 'VmSize:'
else:
    x = np.load(path + '.x.npy', mmap_mode='r')
    t = np.load(path + '.t.npy', mmap_mode='r')
    limit, measure = resource.RLIMIT_DATA, 'VmData:'
bs.global_rnd.set_seed(1)
inp, out = bs.tools.get_in_out_layers('classification', x.shape[2], 10)
net = bs.Network.from_layer(inp >> out)
net.initialize(bs.initializers.Gaussian(0.01))


def train(**data):
    trainer = bs.Trainer(bs.training.SgdStepper(0.01), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(net, Minibatches(BATCH, **data))
    return trainer.current_update_nr


# warm up: what any training run allocates once, on 2 batches in memory
train(default=np.asarray(x[:, :2 * BATCH]), targets=np.asarray(t[:, :2 * BATCH]))
before = net.get('parameters').copy()
baseline = status(measure)
resource.setrlimit(limit, (baseline + headroom, resource.RLIM_INFINITY))
result = {'baseline': baseline}
try:
    np.array(x)
    result['whole'] = 'read'
except MemoryError:
    result['whole'] = 'MemoryError'
result['updates'] = [
    train(shuffle=shuffle, default=x, targets=t) for shuffle in (True, 'samples')
]
after = net.get('parameters')
result['changed'] = bool(np.isfinite(after).all() and (after != before).any())
print(json.dumps(result))
""".replace('BATCH', str(BATCH_SIZE))


def write_data(path: Path, store: str) -> None:
    rnd = np.random.default_rng(0)
    targets = rnd.integers(0, 10, (1, SAMPLES, 1)).astype(np.float32)
    if store == 'h5py':
        with h5py.File(path, 'w') as f:
            x = f.create_dataset('x', (1, SAMPLES, FEATURES), dtype=np.float32)
            for start in range(0, SAMPLES, 4096):
                x[:, start : start + 4096] = rnd.standard_normal(
                    (1, 4096, FEATURES), dtype=np.float32
                )
            f['t'] = targets
        return
    x = np.lib.format.open_memmap(
        f'{path}.x.npy', mode='w+', dtype=np.float32, shape=(1, SAMPLES, FEATURES)
    )
    for start in range(0, SAMPLES, 4096):
        x[:, start : start + 4096] = rnd.standard_normal(
            (1, 4096, FEATURES), dtype=np.float32
        )
    x.flush()
    del x
    np.save(f'{path}.t.npy', targets)


@pytest.mark.parametrize('store', ['h5py', 'memmap'])
def test_a_file_ten_times_the_memory_left_trains_an_epoch(tmp_path, store):
    path = tmp_path / 'train.h5'
    write_data(path, store)
    assert SAMPLES * FEATURES * 4 >= 10 * HEADROOM
    env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1')
    env.pop('PYTHONPATH', None)
    done = subprocess.run(
        [sys.executable, '-c', CHILD, store, str(path), str(HEADROOM)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    # the limit bites: the data does not fit into the memory left
    assert result['whole'] == 'MemoryError', result
    # and yet an epoch trains, with batch and with sample shuffling
    assert result['updates'] == [SAMPLES // BATCH_SIZE] * 2, result
    assert result['changed'], result
