"""One seed reproduces a run: fresh processes on the default handler give
bit-identical parameters, and a run continued from a checkpoint at any
position equals the uninterrupted run (see docs/reproducibility.rst)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

WORKER = os.path.join(os.path.dirname(__file__), 'seeded_run.py')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
sys.path.insert(0, os.path.dirname(__file__))
from seeded_run import CONFIGS, EPOCHS  # noqa: E402

UPDATES = 3 * EPOCHS  # 24 samples in batches of 8


def _worker(*args):
    result = subprocess.run(
        [sys.executable, WORKER, *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
        # this checkout's brainstorm, not an installed one
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_one_seed_gives_identical_runs_in_fresh_processes(tmp_path):
    """Dropout, BatchNorm, shuffling and noise on the default handler:
    only ``bs.global_rnd.set_seed`` is called, nothing else is seeded."""
    dirs = [tmp_path / name for name in ('a', 'b', 'c')]
    for directory, seed in zip(dirs, (5, 5, 6)):
        directory.mkdir()
        _worker('run', directory, 'multi', seed)
    a, b, c = (np.load(d / 'final.npy') for d in dirs)
    assert a.dtype == np.float32  # the default handler computed it
    np.testing.assert_array_equal(a, b)
    assert (dirs[0] / 'logs.json').read_text() == (dirs[1] / 'logs.json').read_text()
    assert not np.array_equal(a, c)  # the seed matters


@pytest.mark.parametrize('config', CONFIGS)
def test_resume_from_every_position_equals_the_full_run(tmp_path, config):
    """Checkpoints at every update (0, the last one of each epoch included)
    and every epoch, each continued in a fresh process."""
    _worker('run', tmp_path, config)
    lines = [
        json.loads(line) for line in _worker('resume', tmp_path, config).splitlines()
    ]
    expected = {f'u{k}.ckpt' for k in range(UPDATES + 1)} | {
        f'e{k}.ckpt' for k in range(EPOCHS + 1)
    }
    assert {line['checkpoint'] for line in lines} == expected
    for line in lines:
        assert (
            line['params_equal'] and line['logs_equal'] and line['updates'] == UPDATES
        ), line


@pytest.mark.slow
def test_mnist_pi_example_with_a_seed_is_reproducible(tmp_path):
    """``examples/mnist_pi.py --seed 1`` (offline digits, short run) twice:
    the same printed figures and bit-identical saved parameters."""
    import h5py

    outputs, parameters = [], []
    for i in range(2):
        saved = tmp_path / f'best{i}.hdf5'
        done = subprocess.run(
            [
                sys.executable,
                os.path.join(ROOT, 'examples', 'mnist_pi.py'),
                '--seed',
                '1',
                '--epochs',
                '2',
                '--limit',
                '150',
                '--data-dir',
                str(tmp_path),
                '--save',
                str(saved),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
        assert done.returncode == 0, done.stderr
        outputs.append(
            [
                line.replace(str(saved), 'FILE')
                for line in done.stdout.splitlines()
                if not line.startswith('Trained ')
            ]
        )
        with h5py.File(saved, 'r') as f:
            parameters.append(f['parameters'][()])
    assert outputs[0] == outputs[1]
    assert any('validation.Accuracy' in line for line in outputs[0])
    np.testing.assert_array_equal(*parameters)
