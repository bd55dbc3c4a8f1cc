"""Cost of the trainer's non-finite check (``Trainer(check_finite=True)``,
the default) relative to one training step.

Builds the ``bench_step.py`` workloads (MLP by default), then alternates
steps (provide the batch, ``MomentumStepper.run()``) with the two parts
of the check, timing each separately: the loss check the trainer runs
after every update, and the parameter check (one dot product over the
flat parameters, compared with ``max_abs_parameter ** 2``) it runs before
hooks are called. It prints the medians and their share of a step. A
healthy network never reaches the slow path (searching the layers).

Usage::

    python benchmarks/bench_finite_check.py [--workloads mlp lstm cnn]
        [--repeats 200] [--rounds 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_step import build_brainstorm, cpu_pressure  # noqa: E402


def cpu_model() -> str:
    try:
        with open('/proc/cpuinfo') as file:
            for line in file:
                if line.startswith('model name'):
                    return line.split(':', 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or 'unknown'


def measure(workload: str, repeats: int) -> tuple[float, float, float]:
    """Median seconds of a step, the loss check and the parameter check."""
    from brainstorm.training.trainer import Trainer, _FiniteCheck

    net, data, stepper = build_brainstorm(workload)
    check = _FiniteCheck(net, 1e7)
    trainer = Trainer(stepper, verbose=False)
    steps, losses, parameters = [], [], []
    for i in range(repeats + 3):
        t0 = time.perf_counter()
        net.provide_external_data(data)
        stepper.run()
        t1 = time.perf_counter()
        check.check_loss(trainer, i)
        t2 = time.perf_counter()
        check.check_parameters(trainer, i)
        t3 = time.perf_counter()
        if i >= 3:  # warm-up
            steps.append(t1 - t0)
            losses.append(t2 - t1)
            parameters.append(t3 - t2)
    return (
        statistics.median(steps),
        statistics.median(losses),
        statistics.median(parameters),
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        '--workloads', nargs='+', default=['mlp'], choices=['mlp', 'lstm', 'cnn']
    )
    parser.add_argument('--repeats', type=int, default=200)
    parser.add_argument('--rounds', type=int, default=5)
    args = parser.parse_args(argv)
    print(
        f'CPU: {cpu_model()} ({os.cpu_count()} logical cores); Python '
        f'{platform.python_version()}'
    )
    for workload in args.workloads:
        loss_ratios, parameter_ratios = [], []
        for _ in range(args.rounds):
            step, loss, parameters = measure(workload, args.repeats)
            loss_ratios.append(loss / step)
            parameter_ratios.append(parameters / step)
            print(
                f'{workload}: step {step * 1e3:.3f} ms, loss check '
                f'{loss * 1e6:.1f} us ({100 * loss / step:.2f}%), '
                f'parameter check {parameters * 1e6:.1f} us '
                f'({100 * parameters / step:.2f}%)'
            )
        for what, ratios in (
            ('loss check (every update)', loss_ratios),
            ('parameter check (when hooks are due)', parameter_ratios),
        ):
            print(
                f'{workload}: {what}: median over {args.rounds} rounds '
                f'{100 * statistics.median(ratios):.2f}% of a step (range '
                f'{100 * min(ratios):.2f}-{100 * max(ratios):.2f}%)'
            )
    pressure = cpu_pressure()
    if pressure is not None:
        print(f'CPU pressure after the run: {pressure:.0f}%')
    return 0


if __name__ == '__main__':
    sys.exit(main())
