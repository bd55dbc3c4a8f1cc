"""Profile brainstorm's training step on the GPU: where the host time goes.

Runs ``benchmarks/bench_step.py``'s network for one workload on
PyCudaHandler and prints cProfile's top functions by own time for a few
steps, with the number of kernel launches and cuBLAS calls per step. On a
GPU a step that is slow although its arithmetic is small is bound by the
host: Python and launch overhead per kernel.

Usage: ``python tools/gpu/profile_step.py WORKLOAD [STEPS]``.
"""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), '..', '..', 'benchmarks'))
import bench_step  # noqa: E402


def main(workload: str, steps: int = 5) -> None:
    """Profile ``steps`` steps of ``workload`` after three warm-up steps."""
    net, data, stepper = bench_step.build_brainstorm(workload, 'gpu')
    sync = bench_step.synchronizer('gpu')
    net.provide_external_data(data)
    for _ in range(3):
        stepper.run()
    sync()
    profile = cProfile.Profile()
    start = time.perf_counter()
    profile.enable()
    for _ in range(steps):
        net.provide_external_data(data)
        stepper.run()
    profile.disable()
    host = time.perf_counter() - start
    sync()
    total = time.perf_counter() - start
    print(
        f'{workload}: {steps} steps, host {host * 1e3 / steps:.1f} ms per step '
        f'(profiled), {total * 1e3 / steps:.1f} ms until the GPU finished'
    )
    stats = pstats.Stats(profile)
    counts = {
        name: calls
        for (_, _, name), (_, calls, _, _, _) in stats.stats.items()  # type: ignore[attr-defined]
        if name
        in ('prepared_call', '_gemm', 'memcpy_htod', 'memcpy_dtoh', 'synchronize')
    }
    print('calls per step:', {k: v / steps for k, v in sorted(counts.items())})
    stats.sort_stats('tottime').print_stats(22)


if __name__ == '__main__':
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 5)
