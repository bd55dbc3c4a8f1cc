"""Time one training step of brainstorm, optionally next to PyTorch, on the
CPU (the default handler, or the one ``--handler`` names) or on an NVIDIA
GPU (PyCudaHandler, ``--device gpu``).

A step is what ``MomentumStepper.run()`` does after
``net.provide_external_data``: forward pass, backward pass and momentum
update, in float32. Three workloads:

* ``mlp``: 784-1200-1200-10 rectifier MLP, softmax cross-entropy, B=100;
* ``lstm``: one-hot 205 -> Lstm(512) -> softmax 205, T=50, B=32;
* ``cnn``: the cifar10_cnn example network (3 x (conv 5x5 + max-pool 3x3/2),
  FullyConnected(64), softmax 10) on 32x32x3 images, B=100.

Every (framework, workload) pair runs in its own subprocess, which times
``--repeats`` steps after 3 warm-up steps and reports the median and the
peak resident memory of the whole process (``ru_maxrss``: interpreter,
libraries, network and data). With ``--compare-torch`` the same steps run
in PyTorch eager mode (``torch.nn`` equivalents, SGD with momentum) and the
ratio brainstorm / PyTorch is printed; PyTorch is only needed for that.
``--rounds R`` repeats all measurements R times, alternating the two
frameworks, and reports the median of the per-round medians (the spread is
printed too, so the noise of a shared machine is visible).

Usage::

    python benchmarks/bench_step.py [--compare-torch] [--repeats 20]
        [--rounds 1] [--workloads mlp lstm cnn] [--layers] [--device gpu]
        [--handler default|numpy|onednn]

``--handler`` picks brainstorm's CPU handler: ``default`` (brainstorm's
default handler: OneDnnHandler where oneDNN loads, else NumpyHandler),
``numpy`` (NumpyHandler) or ``onednn`` (OneDnnHandler); always float32.
The handler used is printed with oneDNN's version and thread count.

``--layers`` adds brainstorm's median forward and backward time per layer
(and the stepper update) for each workload.

``--device gpu`` runs brainstorm on ``PyCudaHandler`` and PyTorch on CUDA,
twice: with cuDNN (``torch``, PyTorch's default) and with cuDNN switched off
(``torch-nocudnn``: its own CUDA kernels, as plain eager code). Every timed
step and every timed layer ends with a device synchronisation, so the
figures are completed GPU work, not queued launches. The data is copied
from host memory in every brainstorm step (``provide_external_data``), as in
a user's loop; PyTorch's stays on the device.

OpenBLAS picks its kernels from ``OPENBLAS_CORETYPE`` and its blocking from
``OPENBLAS_L2_SIZE`` if they are set; the script reports them and the
kernel in use but never changes them: unset them on the command line for
comparable figures (``env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

WORKLOADS = ('mlp', 'lstm', 'cnn')
WARMUP_STEPS = 3
BLAS_VARIABLES = (
    'OPENBLAS_CORETYPE',
    'OPENBLAS_L2_SIZE',
    'OPENBLAS_NUM_THREADS',
    'OMP_NUM_THREADS',
)


# ------------------------------------------------------------ brainstorm ---


HANDLERS = ('default', 'numpy', 'onednn')


def make_handler(device: str, handler: str = 'default'):
    """The handler of a run: PyCUDA on the GPU; on the CPU the float32
    ``handler`` (one of :data:`HANDLERS`)."""
    if device == 'gpu':
        from brainstorm.handlers.pycuda_handler import PyCudaHandler

        return PyCudaHandler()
    import numpy as np

    import brainstorm.handlers as handlers

    if handler == 'numpy':
        return handlers.NumpyHandler(np.float32)
    if handler == 'onednn':
        return handlers.OneDnnHandler(np.float32)
    return handlers.default_handler


def synchronizer(device: str):
    """A function that waits until the device has finished its queued work."""
    if device == 'gpu':
        import pycuda.driver as drv

        return drv.Context.synchronize
    return lambda: None


def build_brainstorm(workload: str, device: str = 'cpu', handler: str = 'default'):
    """The brainstorm network, its data and a started MomentumStepper.

    Returns:
        ``(net, data, stepper)``.
    """
    import numpy as np

    import brainstorm.layers as layers
    from brainstorm.initializers import Gaussian
    from brainstorm.structure.network import Network
    from brainstorm.tools import get_in_out_layers
    from brainstorm.training.steppers import MomentumStepper

    rnd = np.random.RandomState(1)
    if workload == 'mlp':
        inp, out = get_in_out_layers('classification', 784, 10)
        net = Network.from_layer(
            inp
            >> layers.FullyConnected(1200, activation='rel')
            >> layers.FullyConnected(1200, activation='rel')
            >> out
        )
        data = {
            'default': rnd.rand(1, 100, 784).astype(np.float32),
            'targets': rnd.randint(0, 10, (1, 100, 1)).astype(np.float32),
        }
    elif workload == 'lstm':
        inp, out = get_in_out_layers('classification', 205, 205)
        net = Network.from_layer(inp >> layers.Lstm(512) >> out)
        x = np.zeros((50, 32, 205), np.float32)
        ids = rnd.randint(0, 205, (50, 32))
        x[np.arange(50)[:, None], np.arange(32)[None, :], ids] = 1
        data = {
            'default': x,
            'targets': rnd.randint(0, 205, (50, 32, 1)).astype(np.float32),
        }
    else:
        inp, out = get_in_out_layers('classification', (32, 32, 3), 10)
        stack = inp
        for filters in (32, 32, 64):
            stack = (
                stack
                >> layers.Convolution2D(filters, kernel_size=(5, 5), padding=2)
                >> layers.Pooling2D(type='max', kernel_size=(3, 3), stride=(2, 2))
            )
        net = Network.from_layer(stack >> layers.FullyConnected(64) >> out)
        data = {
            'default': rnd.rand(1, 100, 32, 32, 3).astype(np.float32),
            'targets': rnd.randint(0, 10, (1, 100, 1)).astype(np.float32),
        }
    net.set_handler(make_handler(device, handler))
    net.initialize(Gaussian(0.01))
    stepper = MomentumStepper(learning_rate=0.01, momentum=0.9)
    stepper.start(net)
    return net, data, stepper


def time_brainstorm(
    workload: str,
    repeats: int,
    per_layer: bool,
    device: str = 'cpu',
    handler: str = 'default',
) -> dict:
    """Median step time of brainstorm (and per-layer times if asked)."""
    net, data, stepper = build_brainstorm(workload, device, handler)
    sync = synchronizer(device)
    net.provide_external_data(data)
    for _ in range(WARMUP_STEPS):
        stepper.run()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        net.provide_external_data(data)
        stepper.run()
        sync()
        times.append(time.perf_counter() - start)
    result = {'times': times, 'handler': str(net.handler)}
    if per_layer:
        result['layers'] = time_layers(net, stepper, repeats, sync)
    return result


def time_layers(net, stepper, repeats: int, sync=lambda: None) -> dict:
    """Median seconds of each layer's forward and backward pass and of the
    stepper's update, running the steps of ``stepper.run`` one by one
    (``sync`` waits for the device before each clock is read)."""
    names = [name for name in net.layers if name != 'Input']
    parts = {
        f'{name}.{phase}': [] for phase in ('forward', 'backward') for name in names
    }
    parts['stepper update'] = []
    for _ in range(repeats):
        net.buffer_manager.apply_context(None)
        sync()
        for name in names:
            start = time.perf_counter()
            net.layers[name].forward_pass(net.buffer[name], True)
            sync()
            parts[f'{name}.forward'].append(time.perf_counter() - start)
        net.buffer_manager.clear_backward_buffers()
        for name in reversed(names):
            layer = net.layers[name]
            # as in the steppers' backward pass: no deltas for the data
            layer.skip_input_deltas = net._data_fed_inputs[name]
            sync()
            start = time.perf_counter()
            layer.backward_pass(net.buffer[name])
            sync()
            parts[f'{name}.backward'].append(time.perf_counter() - start)
            layer.skip_input_deltas = frozenset()
        net.apply_gradient_modifiers()
        sync()
        start = time.perf_counter()
        stepper._update()
        sync()
        parts['stepper update'].append(time.perf_counter() - start)
    return {key: statistics.median(values) for key, values in parts.items()}


# --------------------------------------------------------------- PyTorch ---


def time_torch(
    workload: str, repeats: int, device: str = 'cpu', cudnn: bool = True
) -> dict:
    """Median step time of the same workload in PyTorch eager mode (on CUDA
    for ``device='gpu'``, with or without cuDNN)."""
    import torch
    from torch import nn

    torch.manual_seed(1)
    torch.backends.cudnn.enabled = cudnn

    class LstmNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = nn.LSTM(205, 512)
            self.projection = nn.Linear(512, 205)

        def forward(self, x):
            return self.projection(self.lstm(x)[0])

    if workload == 'mlp':
        net = nn.Sequential(
            nn.Linear(784, 1200),
            nn.ReLU(),
            nn.Linear(1200, 1200),
            nn.ReLU(),
            nn.Linear(1200, 10),
        )
        x, y = torch.rand(100, 784), torch.randint(0, 10, (100,))
    elif workload == 'lstm':
        net = LstmNet()
        x = torch.zeros(50, 32, 205)
        x.scatter_(2, torch.randint(0, 205, (50, 32, 1)), 1.0)
        y = torch.randint(0, 205, (50, 32))
    else:
        modules = []
        for in_channels, filters in ((3, 32), (32, 32), (32, 64)):
            modules += [
                nn.Conv2d(in_channels, filters, 5, padding=2),
                nn.ReLU(),
                nn.MaxPool2d(3, 2),
            ]
        net = nn.Sequential(
            *modules,
            nn.Flatten(),
            nn.Linear(64 * 3 * 3, 64),
            nn.ReLU(),
            nn.Linear(64, 10),
        )
        x, y = torch.rand(100, 3, 32, 32), torch.randint(0, 10, (100,))
    if device == 'gpu':
        net, x, y = net.cuda(), x.cuda(), y.cuda()
        sync = torch.cuda.synchronize
    else:
        sync = lambda: None  # noqa: E731
    optimizer = torch.optim.SGD(net.parameters(), lr=0.001, momentum=0.9)
    loss_function = nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad()
        out = net(x)
        loss = loss_function(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        loss.backward()
        optimizer.step()

    for _ in range(WARMUP_STEPS):
        step()
    sync()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        sync()
        times.append(time.perf_counter() - start)
    return {'times': times}


# ---------------------------------------------------------------- driver ---


def blas_kernel() -> str:
    """The OpenBLAS kernel NumPy uses (needs threadpoolctl), else '?'."""
    try:
        import numpy  # noqa: F401  (load the BLAS before asking)
        from threadpoolctl import threadpool_info
    except ImportError:
        return '?'
    for info in threadpool_info():
        if info.get('user_api') == 'blas':
            return (
                f'{info.get("internal_api")} {info.get("version")} '
                f'{info.get("architecture")}, '
                f'{info.get("num_threads")} threads'
            )
    return '?'


def run_worker(
    framework: str,
    workload: str,
    repeats: int,
    per_layer: bool,
    device: str,
    handler: str = 'default',
) -> None:
    """Measure one pair in this process and print the result as JSON."""
    if framework == 'brainstorm':
        result = time_brainstorm(workload, repeats, per_layer, device, handler)
    else:
        result = time_torch(workload, repeats, device, framework != 'torch-nocudnn')
    # ru_maxrss is in KiB on Linux (bytes on macOS)
    scale = 1 if sys.platform == 'darwin' else 1024
    result['peak_rss'] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale
    result['median'] = statistics.median(result['times'])
    print(json.dumps(result))


def cpu_pressure() -> float | None:
    """Share of the last 10 s in which some runnable task waited for a CPU
    (Linux PSI ``/proc/pressure/cpu``, percent), or None if unavailable."""
    try:
        with open('/proc/pressure/cpu') as file:
            first = file.readline().split()
    except OSError:
        return None
    return float(first[1].split('=')[1])


def measure(
    framework: str,
    workload: str,
    repeats: int,
    per_layer: bool,
    device: str = 'cpu',
    handler: str = 'default',
) -> dict:
    """Run one worker subprocess and return its JSON result (with the CPU
    pressure seen when it ended: other programs competing for the cores)."""
    command = [
        sys.executable,
        os.path.abspath(__file__),
        '--worker',
        framework,
        workload,
        '--repeats',
        str(repeats),
        '--device',
        device,
        '--handler',
        handler,
    ]
    if per_layer:
        command.append('--layers')
    completed = subprocess.run(command, capture_output=True, text=True)
    if completed.returncode != 0:
        raise RuntimeError(f'{framework} {workload} failed:\n{completed.stderr}')
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    result['cpu_pressure'] = cpu_pressure()
    return result


def torch_version() -> str | None:
    """PyTorch's version in a subprocess (None if not installed)."""
    completed = subprocess.run(
        [
            sys.executable,
            '-c',
            'import torch; print(torch.__version__, torch.get_num_threads())',
        ],
        capture_output=True,
        text=True,
    )
    if completed.returncode != 0:
        return None
    version, threads = completed.stdout.split()
    return f'{version}, {threads} threads'


def print_header(torch_info: str | None) -> None:
    import numpy

    print(
        f'machine: {platform.machine()} {platform.processor() or ""} '
        f'{os.cpu_count()} cpus; Python {platform.python_version()}; '
        f'NumPy {numpy.__version__}'
    )
    print(f'NumPy BLAS: {blas_kernel()}')
    if torch_info:
        print(f'PyTorch: {torch_info}')
    for name in BLAS_VARIABLES:
        if name in os.environ:
            print(f'{name}={os.environ[name]}')
    for name in BLAS_VARIABLES[:2]:
        if name in os.environ:
            print(
                f'warning: {name} is set; it changes OpenBLAS kernels or '
                'blocking (unset it for comparable figures)'
            )


def print_gpu_header() -> None:
    """The GPU, its driver and the CUDA and PyCUDA versions (in a subprocess,
    so that this process never creates a CUDA context)."""
    code = (
        'import pycuda, pycuda.driver as d; d.init(); g = d.Device(0); '
        'print(f"GPU: {g.name()}, {g.total_memory() // 2**20} MiB, compute '
        '{g.compute_capability()}; CUDA driver API {d.get_driver_version()}, '
        'PyCUDA built for CUDA {d.get_version()}, PyCUDA {pycuda.VERSION_TEXT}")'
    )
    completed = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True
    )
    print(completed.stdout.strip() or f'GPU: unknown ({completed.stderr.strip()})')


def megabytes(n_bytes: float) -> str:
    return f'{n_bytes / 2**20:.0f}'


def summarize(runs: list[dict]) -> tuple[float, str, float]:
    """Median over rounds, the range of the round medians, peak RSS."""
    medians = [run['median'] for run in runs]
    spread = (
        f'{min(medians) * 1e3:.1f}-{max(medians) * 1e3:.1f}' if len(medians) > 1 else ''
    )
    return (statistics.median(medians), spread, max(run['peak_rss'] for run in runs))


def parse_arguments(argv):
    """The command line: what to time, how often, and what to print."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--compare-torch', action='store_true', help='also time the PyTorch equivalents'
    )
    parser.add_argument(
        '--repeats',
        type=int,
        default=20,
        help='timed steps per measurement (default 20)',
    )
    parser.add_argument(
        '--rounds',
        type=int,
        default=1,
        help='measurements per pair, alternating frameworks (default 1)',
    )
    parser.add_argument(
        '--workloads', nargs='+', choices=WORKLOADS, default=list(WORKLOADS)
    )
    parser.add_argument(
        '--layers', action='store_true', help="print brainstorm's per-layer times"
    )
    parser.add_argument(
        '--device',
        choices=('cpu', 'gpu'),
        default='cpu',
        help='cpu (brainstorm on --handler, PyTorch CPU) or gpu (PyCudaHandler, '
        'PyTorch CUDA with and without cuDNN); default cpu',
    )
    parser.add_argument(
        '--handler',
        choices=HANDLERS,
        default='default',
        help="brainstorm's float32 CPU handler: default (OneDnnHandler where "
        'oneDNN loads, else NumpyHandler), numpy or onednn; default default',
    )
    parser.add_argument(
        '--worker', nargs=2, metavar=('FRAMEWORK', 'WORKLOAD'), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.rounds < 1:
        parser.error('--repeats and --rounds must be positive')
    return parser, args


def print_table(results, workloads, others) -> None:
    """One row per workload: medians, ranges, peak memory and, for each
    framework in ``others``, its figures and the ratios brainstorm / it."""
    columns = ['workload', 'brainstorm ms', 'range', 'peak MiB']
    for name in others:
        columns += [f'{name} ms', 'range', 'peak MiB', 'ratio', 'memory ratio']
    rows = [columns]
    for workload in workloads:
        bs_time, bs_spread, bs_rss = summarize(results['brainstorm', workload])
        row = [workload, f'{bs_time * 1e3:.1f}', bs_spread, megabytes(bs_rss)]
        for name in others:
            th_time, th_spread, th_rss = summarize(results[name, workload])
            row += [
                f'{th_time * 1e3:.1f}',
                th_spread,
                megabytes(th_rss),
                f'{bs_time / th_time:.2f}',
                f'{bs_rss / th_rss:.2f}',
            ]
        rows.append(row)
    widths = [max(len(row[i]) for row in rows) for i in range(len(columns))]
    for row in rows:
        print('  '.join(cell.rjust(width) for cell, width in zip(row, widths)))


def print_pressure(results) -> None:
    """Warn when other tasks competed for the cores during the runs."""
    pressures = [
        run['cpu_pressure']
        for runs in results.values()
        for run in runs
        if run['cpu_pressure'] is not None
    ]
    if pressures:
        print(
            f'\nCPU pressure (share of time other tasks waited for a core, '
            f'10 s average) after the measurements: {min(pressures):.0f}-'
            f'{max(pressures):.0f}%; above a few percent the machine is '
            'shared and the figures are not comparable.'
        )


def print_layer_times(results, workloads) -> None:
    """brainstorm's per-layer medians of the last round."""
    for workload in workloads:
        runs = results['brainstorm', workload]
        print(f'\n{workload}: brainstorm per-layer median ms (last round)')
        layer_times = runs[-1]['layers']
        total = sum(layer_times.values())
        for key, seconds in layer_times.items():
            print(f'  {key:<40} {seconds * 1e3:8.2f}  {100 * seconds / total:5.1f}%')
        print(f'  {"sum":<40} {total * 1e3:8.2f}')


def main(argv=None) -> int:
    parser, args = parse_arguments(argv)
    if args.worker:
        run_worker(
            args.worker[0],
            args.worker[1],
            args.repeats,
            args.layers,
            args.device,
            args.handler,
        )
        return 0

    torch_info = torch_version() if args.compare_torch else None
    if args.compare_torch and torch_info is None:
        parser.error('--compare-torch needs PyTorch installed')
    print_header(torch_info)
    if args.device == 'gpu':
        print_gpu_header()
    print(
        f'median step time of {args.repeats} steps after {WARMUP_STEPS} '
        f'warm-up steps; {args.rounds} round(s); device {args.device}\n'
    )
    others = []
    if torch_info:
        others = ['torch', 'torch-nocudnn'] if args.device == 'gpu' else ['torch']
    frameworks = ['brainstorm', *others]
    results = {(f, w): [] for f in frameworks for w in args.workloads}
    for _ in range(args.rounds):
        for workload in args.workloads:
            for framework in frameworks:
                results[framework, workload].append(
                    measure(
                        framework,
                        workload,
                        args.repeats,
                        args.layers and framework == 'brainstorm',
                        args.device,
                        args.handler,
                    )
                )
    handlers = {
        run.get('handler') for w in args.workloads for run in results['brainstorm', w]
    }
    print(f'brainstorm handler: {", ".join(sorted(map(str, handlers)))}')
    print_table(results, args.workloads, others)
    print_pressure(results)
    if args.layers:
        print_layer_times(results, args.workloads)
    return 0


if __name__ == '__main__':
    sys.exit(main())
