"""Samples per second of data-parallel training over MPI processes.

The workload is bench_step.py's ``mlp`` (784-1200-1200-10 rectifier MLP,
softmax cross-entropy, float32, momentum step, built by its
``build_brainstorm``) with a global batch of 100 samples, run as

* 1 process x 1 thread (reference),
* 1 process x 2 threads (BLAS threads),
* 2 processes x 1 thread (``mpiexec -n 2``, ``DataParallel``, 50 samples
  per rank).

A step is ``provide_external_data`` + ``stepper.run()`` (forward, backward,
gradient Allreduce for 2 processes, update); each configuration runs in
its own process(es), times ``--repeats`` steps after 3 warm-up steps on
rank 0 (the Allreduce keeps the ranks in step) and reports the median.
``--rounds R`` repeats all configurations R times, interleaved, and
reports the median of the round medians with their range. For 2 processes
the script also times the in-place Allreduce of the gradients alone and
the finiteness check of ``DataParallel(check_finite=True)``.

Finally it prints what each step sends: the gradient array once per
Allreduce; a ring Allreduce over N machines sends about
``2 (N - 1) / N`` times the gradient bytes per rank and step, and the
time this takes at a few network speeds.

Usage::

    python benchmarks/bench_mpi.py [--repeats 30] [--rounds 3]

It needs mpi4py and an ``mpiexec`` (``pip install 'brainstorm-nn[mpi]'``). The
thread counts are set with ``OPENBLAS_NUM_THREADS`` / ``OMP_NUM_THREADS``
per launch; ``OPENBLAS_CORETYPE`` and ``OPENBLAS_L2_SIZE`` are passed on
as they are (unset them on the command line for comparable figures:
``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
GLOBAL_BATCH = 100
WARMUP_STEPS = 3
CONFIGURATIONS = (
    ('1 process x 1 thread', 1, 1),
    ('1 process x 2 threads', 1, 2),
    ('2 processes x 1 thread', 2, 1),
)


# ---------------------------------------------------------------- worker ---


def _median_seconds(function, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_worker(repeats: int) -> None:
    """Time the steps in this process (one rank) and, on rank 0, print the
    result as JSON."""
    sys.path.insert(0, str(HERE))
    from bench_step import build_brainstorm

    from brainstorm.training import DataParallel
    from brainstorm.training.data_parallel import mpi_world_size

    net, data, stepper = build_brainstorm('mlp')
    rank, size, comm = 0, 1, None
    if mpi_world_size() > 1:
        stepper = DataParallel(stepper)
        stepper.start(net)
        comm, rank, size = stepper.comm, stepper.rank, stepper.size
        start = rank * GLOBAL_BATCH // size
        stop = (rank + 1) * GLOBAL_BATCH // size
        data = {name: values[:, start:stop] for name, values in data.items()}

    def step():
        net.provide_external_data(data)
        stepper.run()

    for _ in range(WARMUP_STEPS):
        step()
    if comm is not None:
        comm.Barrier()
    result = {
        'step': _median_seconds(step, repeats),
        'processes': size,
        'gradient_bytes': int(net.buffer.gradients.nbytes),
        'gradient_dtype': str(net.buffer.gradients.dtype),
    }
    if comm is not None:
        from mpi4py import MPI

        gradients = net.buffer.gradients
        comm.Barrier()
        result['allreduce'] = _median_seconds(
            lambda: comm.Allreduce(MPI.IN_PLACE, gradients), repeats
        )
        result['finite_check'] = _median_seconds(
            lambda: net.handler.is_fully_finite(gradients), repeats
        )
    if rank == 0:
        print(json.dumps(result))


# ---------------------------------------------------------------- driver ---


def find_mpiexec() -> str | None:
    """The mpiexec next to this Python (the mpich wheel), else on PATH."""
    local = Path(sys.executable).parent / 'mpiexec'
    return str(local) if local.exists() else shutil.which('mpiexec')


def measure(processes: int, threads: int, repeats: int) -> dict:
    env = dict(
        os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads)
    )
    command = [
        sys.executable,
        str(Path(__file__).resolve()),
        '--worker',
        '--repeats',
        str(repeats),
    ]
    if processes > 1:
        command = [find_mpiexec(), '-n', str(processes)] + command
    else:
        # a launcher's variables would make the worker try to use MPI
        for name in ('PMI_SIZE', 'OMPI_COMM_WORLD_SIZE', 'PMIX_SIZE'):
            env.pop(name, None)
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def cpu_pressure() -> str:
    """Linux PSI CPU pressure (share of time tasks waited for a core)."""
    try:
        with open('/proc/pressure/cpu') as file:
            fields = dict(item.split('=') for item in file.readline().split()[1:])
        return f'{float(fields["avg10"]):.0f}%'
    except (OSError, KeyError, ValueError):
        return 'unknown'


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--repeats',
        type=int,
        default=30,
        help='timed steps per configuration and round',
    )
    parser.add_argument(
        '--rounds',
        type=int,
        default=3,
        help='interleaved repetitions of all configurations',
    )
    parser.add_argument('--worker', action='store_true', help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        run_worker(args.repeats)
        return 0
    if find_mpiexec() is None:
        print("bench_mpi.py needs mpiexec: pip install 'brainstorm-nn[mpi]'")
        return 1
    print(
        f'MLP 784-1200-1200-10, float32, momentum step, global batch '
        f'{GLOBAL_BATCH}; {os.cpu_count()} cores; OPENBLAS_CORETYPE='
        f'{os.environ.get("OPENBLAS_CORETYPE", "(unset)")} '
        f'OPENBLAS_L2_SIZE={os.environ.get("OPENBLAS_L2_SIZE", "(unset)")}'
    )
    runs = {name: [] for name, _, _ in CONFIGURATIONS}
    for _ in range(args.rounds):
        for name, processes, threads in CONFIGURATIONS:
            runs[name].append(measure(processes, threads, args.repeats))
    print(f'\n{"configuration":<24} {"ms/step":>8} {"range":>13} {"samples/s":>10}')
    for name, results in runs.items():
        steps = [r['step'] * 1e3 for r in results]
        median = statistics.median(steps)
        print(
            f'{name:<24} {median:8.1f} {min(steps):6.1f}-{max(steps):<6.1f}'
            f' {GLOBAL_BATCH / median * 1e3:10.0f}'
        )
    parallel = runs['2 processes x 1 thread']
    allreduce = statistics.median(r['allreduce'] for r in parallel) * 1e3
    finite = statistics.median(r['finite_check'] for r in parallel) * 1e3
    n_bytes = parallel[0]['gradient_bytes']
    print(
        f'\n2 processes: in-place Allreduce of the gradients {allreduce:.2f}'
        f' ms, finiteness check {finite:.2f} ms per step (both included '
        'above).'
    )
    print(
        f'Gradients: {n_bytes / 1e6:.2f} MB '
        f'({parallel[0]["gradient_dtype"]}), one Allreduce per step (plus '
        'one of 8 bytes for the batch sizes).'
    )
    print(
        '\nSent per rank and step by a ring Allreduce over N machines, '
        'and its time at a given link speed (latency not included):'
    )
    print(
        f'{"N":>4} {"MB sent":>8} {"10 Gbit/s":>10} {"25 Gbit/s":>10} '
        f'{"100 Gbit/s":>11}'
    )
    for n in (2, 4, 8, 16, 64):
        sent = 2 * (n - 1) / n * n_bytes
        times = [sent * 8 / (gbit * 1e9) * 1e3 for gbit in (10, 25, 100)]
        print(
            f'{n:>4} {sent / 1e6:8.2f} {times[0]:8.1f}ms {times[1]:8.1f}ms '
            f'{times[2]:9.2f}ms'
        )
    print(
        f'\nCPU pressure (10 s average) after the runs: {cpu_pressure()}; '
        'above a few percent other programs competed for the cores.'
    )
    return 0


if __name__ == '__main__':
    sys.exit(main())
