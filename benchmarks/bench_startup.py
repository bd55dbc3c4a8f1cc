"""Time from ``import brainstorm`` to the end of the first training step.

Each measurement is a fresh Python process that imports brainstorm, builds
one of ``bench_step.py``'s workloads (network, data, started
``MomentumStepper``) and runs its first step (which makes oneDNN's
primitives and the handler's scratch memory). Two configurations,
alternating, ``--rounds`` times each:

* ``default``: brainstorm's default handler (``OneDnnHandler`` where oneDNN
  loads);
* ``numpy``: ``BRAINSTORM_NO_ONEDNN=1``, so oneDNN is never loaded and the
  default handler is ``NumpyHandler`` (brainstorm before the oneDNN
  handler).

It prints the median seconds of the import alone and of import to the end
of the first step, and the difference between the two configurations.

Usage::

    python benchmarks/bench_startup.py [--rounds 5] [--workloads mlp lstm cnn]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

CHILD = """
import json, sys, time
start = time.perf_counter()
import brainstorm
imported = time.perf_counter()
sys.path.insert(0, {here!r})
from bench_step import build_brainstorm
net, data, stepper = build_brainstorm({workload!r})
net.provide_external_data(data)
stepper.run()
done = time.perf_counter()
print(json.dumps({{'import': imported - start, 'first_step': done - start,
                   'handler': repr(net.handler)}}))
"""


def measure(workload: str, numpy_only: bool) -> dict:
    """One fresh process: seconds of the import and to the first step's end."""
    env = dict(os.environ)
    env.pop('BRAINSTORM_NO_ONEDNN', None)
    if numpy_only:
        env['BRAINSTORM_NO_ONEDNN'] = '1'
    code = CHILD.format(here=HERE, workload=workload)
    out = subprocess.run(
        [sys.executable, '-c', code],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--rounds', type=int, default=5)
    parser.add_argument(
        '--workloads', nargs='+', default=['mlp', 'lstm', 'cnn'],
        choices=['mlp', 'lstm', 'cnn'],
    )  # fmt: skip
    args = parser.parse_args(argv)
    print(f'median of {args.rounds} fresh processes per configuration')
    print(
        f'{"workload":<9}{"handler":<42}{"import s":>9}{"to 1st step s":>15}'
        f'{"more than numpy s":>19}'
    )
    for workload in args.workloads:
        runs: dict = {'default': [], 'numpy': []}
        for _ in range(args.rounds):
            for name in runs:
                runs[name].append(measure(workload, name == 'numpy'))
        medians = {}
        for name, results in runs.items():
            medians[name] = (
                statistics.median(r['import'] for r in results),
                statistics.median(r['first_step'] for r in results),
            )
        for name, results in runs.items():
            imported, first = medians[name]
            extra = first - medians['numpy'][1]
            print(
                f'{workload:<9}{results[0]["handler"]:<42}{imported:9.2f}'
                f'{first:15.2f}{extra:19.2f}'
            )
    return 0


if __name__ == '__main__':
    sys.exit(main())
