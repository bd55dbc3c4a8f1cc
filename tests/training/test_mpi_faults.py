"""No MPI fault hangs: however rank 1 leaves data-parallel training early,
or fails after its DataParallel stepper exists but before ``train()``,
both ranks of ``mpiexec -n 2`` end within seconds, with a message naming
the rank and the reason."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.training.test_data_parallel import find_mpiexec, needs_mpi

ROOT = Path(__file__).resolve().parents[2]
# from rank 1 leaving to both processes ended; the whole command gets much
# longer, so that starting Python on a loaded machine cannot fail the test
WITHIN = 20
COMMAND_TIMEOUT = 180

EXPECTED = {
    'return': 'rank 1 of 2 left training: its process ended (rank 1)',
    'exit': 'rank 1 of 2 left training: SystemExit: 0',
    'caught': 'rank 1 of 2 left training: RuntimeError: deliberate failure on rank 1',
    'uncaught': 'RuntimeError: deliberate failure on rank 1',
    'short': 'rank 1: the training iterator yielded 3 batches in epoch 2, '
    'but its length is 4',
    # nothing is left on rank 1 to speak and the launcher (MPICH's Hydra)
    # ends rank 0 at once, naming the killed process by its id
    'killed': None,
    # rank 1 hangs in a hook: rank 0's collective call times out (the
    # worker sets DataParallel(timeout=8), leaving 12 s for the rest)
    'stuck': 'rank 0 of 2 waited more than 8 s in the stop decision after the hooks',
    # rank 1 fails before train(), after its DataParallel exists (its
    # iterator refuses its data); rank 0 waits in the parameter broadcast
    # with the default timeout (600 s)
    'before_train': "IteratorValidationError: Minibatches: data 'default' holds NaN",
    # the same error, handled by the script, which then ends its process
    'before_train_exit': 'rank 1 of 2 left training: its process ended (rank 1)',
}


def run_scenario(scenario, outdir):
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [str(ROOT)] + [p for p in [env.get('PYTHONPATH')] if p]
    )
    env['OMP_NUM_THREADS'] = env['OPENBLAS_NUM_THREADS'] = '1'
    command = [
        find_mpiexec(),
        '-n',
        '2',
        sys.executable,
        '-m',
        'tests.training.mpi_fault_worker',
        scenario,
        str(outdir),
    ]
    try:
        done = subprocess.run(
            command,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=COMMAND_TIMEOUT,
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(f'mpiexec -n 2 ({scenario}) hangs: {err.stderr!r}')
    return done, time.time()


@needs_mpi
@pytest.mark.parametrize('scenario', sorted(EXPECTED))
def test_rank_1_leaving_ends_both_ranks_within_seconds(tmp_path, scenario):
    done, ended = run_scenario(scenario, tmp_path)
    output = done.stdout + done.stderr
    fault = tmp_path / 'fault.txt'
    assert fault.exists(), output  # rank 1 did leave
    fault_time, pid = fault.read_text().split()
    assert ended - float(fault_time) < WITHIN, output
    assert done.returncode != 0, output
    if EXPECTED[scenario] is not None:
        assert EXPECTED[scenario] in output
        # the rank that ends the job says so, naming the one that left
        assert (
            'ending all 2 ranks' in output
            or 'on rank 1 of 2; aborting all ranks' in output
        )
    else:
        assert f'PID {pid} ' in output and 'Killed (signal 9)' in output, output


@needs_mpi
def test_a_rank_ending_normally_after_training_aborts_nobody(tmp_path):
    """The watchdog forgets a finished collective call: rank 1's process
    ends after training while rank 0 works on for five times the time
    limit (0.2 s) without a collective call; rank 0 is neither aborted for
    the rank that left nor for the limit, and the job succeeds."""
    done, _ = run_scenario('finished', tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert (tmp_path / 'finished.txt').read_text() == (
        "(1, 'its process ended (rank 1)', False)"
    )
    assert 'ending all' not in output and 'aborting' not in output
