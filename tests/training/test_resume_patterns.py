"""Resume is exact when monitors draw passes from the training iterator's
random states: per-update monitors of the training iterator, and one
iterator object given to ``train`` under two names; and sample shuffling
(``shuffle='samples'``) over data read batch by batch from an HDF5 file.
Every checkpoint
(each update and each epoch end) is continued in a fresh process and
compared with the uninterrupted run: final parameters, and the logs,
which hold a digest of the parameters after every update and epoch."""

import json
import os
import subprocess
import sys

import pytest

WORKER = os.path.join(os.path.dirname(__file__), 'resume_patterns.py')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
EPOCHS = 3
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


@pytest.mark.parametrize('pattern', ['monitor_training', 'alias', 'samples_file'])
def test_resume_from_every_position_with_monitors_on_the_training_iterator(
    tmp_path, pattern
):
    _worker('run', tmp_path, pattern)
    lines = [
        json.loads(line) for line in _worker('resume', tmp_path, pattern).splitlines()
    ]
    expected = {f'u{k}.ckpt' for k in range(UPDATES + 1)} | {
        f'e{k}.ckpt' for k in range(EPOCHS + 1)
    }
    assert {line['checkpoint'] for line in lines} == expected
    failed = [
        line
        for line in lines
        if not (
            line['params_equal'] and line['logs_equal'] and line['updates'] == UPDATES
        )
    ]
    assert not failed, failed
