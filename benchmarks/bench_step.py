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
On the CPU the CNN runs in PyTorch twice in every round, with NCHW tensors
(PyTorch's default) and with model and images in ``channels_last`` memory
format; the table shows both and the ratio uses the faster one.
``--rounds R`` repeats all measurements R times, alternating the two
frameworks, and reports the median of the per-round medians (the spread is
printed too, so the noise of a shared machine is visible).

Usage::

    python benchmarks/bench_step.py [--compare-torch] [--repeats 20]
        [--rounds 1] [--workloads mlp lstm cnn] [--layers] [--device gpu]
        [--handler default|numpy|onednn] [--no-limits] [--shapes]

``--handler`` picks brainstorm's CPU handler: ``default`` (brainstorm's
default handler: OneDnnHandler where oneDNN loads, else NumpyHandler),
``numpy`` (NumpyHandler) or ``onednn`` (OneDnnHandler); always float32.
The handler used is printed with oneDNN's version and thread count.

On the CPU the script also prints each workload's physical limit (unless
``--no-limits``): the FLOPs of one step's matrix products and convolutions
(2 per multiply-add, for the forward, backward-data and backward-weights
passes; no backward-data pass for layers fed by the data; a recurrent
product in every time step) divided, shape by shape, by the best rate
measured in the same run for that shape: GEMMs with ``numpy.matmul`` and
with the handler's ``dot_mm`` on contiguous float32 operands, convolutions
with the handler's conv2d ops and, where PyTorch is installed, with
PyTorch's convolution in ``channels_last``; the fastest call of any source
counts. The limit is an estimate, not a bound: the layers multiply views
of network buffers, some transposed, not contiguous operands. Next to it:
GFLOP per step, brainstorm ms / limit and PyTorch ms / limit (the faster
layout). ``--shapes`` prints every shape's rate per source. This adds a
few seconds.

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
from dataclasses import dataclass

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

TORCH_CHANNELS_LAST = 'torch-channels_last'
TORCH_NO_CUDNN = 'torch-nocudnn'


def torch_variants(workload: str, device: str) -> list[str]:
    """The PyTorch measurements of a workload, in the order they run.

    On the GPU: ``torch`` (cuDNN, PyTorch's default) and ``torch-nocudnn``.
    On the CPU the CNN runs in both of PyTorch's image layouts, ``torch``
    (NCHW, the default) and ``torch-channels_last`` (model and input in
    ``torch.channels_last``); the MLP and LSTM have no layout to choose.
    """
    if device == 'gpu':
        return ['torch', TORCH_NO_CUDNN]
    if workload == 'cnn':
        return ['torch', TORCH_CHANNELS_LAST]
    return ['torch']


def faster_variant(medians: dict[str, float]) -> str:
    """The PyTorch variant with the smallest median step (on a tie the one
    listed first, i.e. PyTorch's default)."""
    if not medians:
        raise ValueError('faster_variant: no PyTorch measurements given')
    return min(medians, key=lambda name: medians[name])


def layout_name(variant: str, workload: str) -> str:
    """The image layout a CPU PyTorch variant ran in ('-' where none)."""
    if variant == TORCH_CHANNELS_LAST:
        return 'channels_last'
    return 'NCHW' if workload == 'cnn' else '-'


def build_torch(workload: str, channels_last: bool = False):
    """The PyTorch network of a workload and its data, on the CPU (the
    CNN's model and images in ``torch.channels_last`` memory format if
    ``channels_last``; the other workloads have no image layout).

    Returns:
        ``(net, x, y)``.
    """
    import torch
    from torch import nn

    torch.manual_seed(1)

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
        return net, torch.rand(100, 784), torch.randint(0, 10, (100,))
    if workload == 'lstm':
        x = torch.zeros(50, 32, 205)
        x.scatter_(2, torch.randint(0, 205, (50, 32, 1)), 1.0)
        return LstmNet(), x, torch.randint(0, 205, (50, 32))
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
    if channels_last:
        net = net.to(memory_format=torch.channels_last)
        x = x.contiguous(memory_format=torch.channels_last)
    return net, x, y


def time_torch(
    workload: str,
    repeats: int,
    device: str = 'cpu',
    cudnn: bool = True,
    channels_last: bool = False,
) -> dict:
    """Median step time of the same workload in PyTorch eager mode (on CUDA
    for ``device='gpu'``, with or without cuDNN; the CNN's model and images
    in ``torch.channels_last`` memory format if ``channels_last``)."""
    import torch
    from torch import nn

    torch.backends.cudnn.enabled = cudnn
    net, x, y = build_torch(workload, channels_last)
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


# ------------------------------------------------------- physical limits ---

# The FLOPs of a step are those of its matrix products and convolutions,
# 2 per multiply-add: 2*m*k*n for an m x k . k x n product, 2*N*OH*OW*F*KH*KW*C
# for a convolution of N images (C channels, F filters KH x KW, OH x OW
# outputs), counted once for each of the three passes a layer runs:
# forward, backward data (input deltas) and backward weights. Layers fed by
# the data compute no backward data pass (neither brainstorm's steppers nor
# PyTorch, whose data needs no gradient), so none is counted; a recurrent
# product counts in every time step, the first (whose previous output is
# zero) included. Biases, activations, pooling, softmax and the update are
# not counted.
RATES = 'rates'  # the worker's pseudo-workload that measures rates
MIN_RATE_CALLS = 5
MIN_RATE_SECONDS = 0.05
GEMM_RATE_SOURCE = 'numpy.matmul'
TORCH_CONV_SOURCE = 'torch channels_last'


@dataclass(frozen=True)
class Operation:
    """A measured kernel call.

    ``kind`` ``'gemm'``: ``shape`` is ``(m, k, n)``, an ``m x k . k x n``
    product of contiguous float32 operands. ``kind`` ``'conv'``: ``shape``
    is ``(n, h, w, c, f, kernel, pad)``, n images of h x w x c, f filters of
    kernel x kernel, stride 1, zero padding ``pad``; ``group`` is the call:
    ``'forward'``, ``'backward'`` (data and weights in one call, with the
    bias) or ``'backward weights'`` (weights and bias only).
    """

    kind: str
    shape: tuple[int, ...]
    group: str = ''

    @property
    def key(self) -> str:
        if self.kind == 'gemm':
            m, k, n = self.shape
            return f'gemm {m}x{k} . {k}x{n}'
        n, h, w, c, f, kernel, pad = self.shape
        return f'conv {self.group} {n}x{h}x{w}x{c} * {f}x{kernel}x{kernel} pad {pad}'

    @property
    def flops(self) -> int:
        """The FLOPs of one call."""
        passes = 2 if self.group == 'backward' else 1
        return passes * shape_flops(self.kind, self.shape)


@dataclass(frozen=True)
class Product:
    """One pass of a layer's matrix product or convolution in a step:
    ``count`` calls of ``operation``'s shape (the operation measured for
    it)."""

    layer: str
    phase: str  # 'forward', 'backward data' or 'backward weights'
    operation: Operation
    count: int = 1

    @property
    def flops(self) -> int:
        return self.count * shape_flops(self.operation.kind, self.operation.shape)


def conv_output_size(size: int, kernel: int, pad: int) -> int:
    """Output cells along one axis of a stride-1 convolution."""
    return size + 2 * pad - kernel + 1


def shape_flops(kind: str, shape: tuple[int, ...]) -> int:
    """The FLOPs of one pass of a product (``'gemm'``) or convolution."""
    if kind == 'gemm':
        m, k, n = shape
        return 2 * m * k * n
    n, h, w, c, f, kernel, pad = shape
    out_cells = conv_output_size(h, kernel, pad) * conv_output_size(w, kernel, pad)
    return 2 * n * out_cells * f * kernel * kernel * c


def dense_products(
    layer: str, batch: int, n_in: int, n_out: int, data_fed: bool = False
) -> list[Product]:
    """A fully connected layer's products: forward ``batch x n_in .
    n_in x n_out``, backward data ``batch x n_out . n_out x n_in`` (unless
    fed by the data), backward weights ``n_out x batch . batch x n_in``."""
    products = [Product(layer, 'forward', Operation('gemm', (batch, n_in, n_out)))]
    if not data_fed:
        products.append(
            Product(layer, 'backward data', Operation('gemm', (batch, n_out, n_in)))
        )
    products.append(
        Product(layer, 'backward weights', Operation('gemm', (n_out, batch, n_in)))
    )
    return products


def conv_products(
    layer: str, shape: tuple[int, ...], data_fed: bool = False
) -> list[Product]:
    """A convolution layer's passes (``shape`` as in :class:`Operation`);
    both backward passes are measured as one call, as the handler runs
    them."""
    backward = Operation('conv', shape, 'backward weights' if data_fed else 'backward')
    products = [Product(layer, 'forward', Operation('conv', shape, 'forward'))]
    if not data_fed:
        products.append(Product(layer, 'backward data', backward))
    products.append(Product(layer, 'backward weights', backward))
    return products


def workload_products(workload: str) -> list[Product]:
    """The matrix products and convolutions of one training step."""
    if workload == 'mlp':
        return [
            *dense_products('FullyConnected_1', 100, 784, 1200, data_fed=True),
            *dense_products('FullyConnected_2', 100, 1200, 1200),
            *dense_products('Output_projection', 100, 1200, 10),
        ]
    if workload == 'lstm':
        steps, batch, size = 50, 32, 512
        rows = steps * batch
        recurrent = 'Lstm (recurrent)'
        return [
            *dense_products('Lstm (inputs)', rows, 205, 4 * size, data_fed=True),
            Product(
                recurrent, 'forward', Operation('gemm', (batch, size, 4 * size)), steps
            ),
            Product(
                recurrent,
                'backward data',
                Operation('gemm', (batch, 4 * size, size)),
                steps,
            ),
            Product(
                recurrent, 'backward weights', Operation('gemm', (4 * size, rows, size))
            ),
            *dense_products('Output_projection', rows, size, 205),
        ]
    if workload == 'cnn':
        return [
            *conv_products(
                'Convolution2D_1', (100, 32, 32, 3, 32, 5, 2), data_fed=True
            ),
            *conv_products('Convolution2D_2', (100, 15, 15, 32, 32, 5, 2)),
            *conv_products('Convolution2D_3', (100, 7, 7, 32, 64, 5, 2)),
            *dense_products('FullyConnected', 100, 3 * 3 * 64, 64),
            *dense_products('Output_projection', 100, 64, 10),
        ]
    raise ValueError(f'workload_products: unknown workload {workload!r}')


def step_operations(workloads) -> list[Operation]:
    """The distinct operations of the workloads' products, in order."""
    operations: dict[str, Operation] = {}
    for workload in workloads:
        for product in workload_products(workload):
            operations.setdefault(product.operation.key, product.operation)
    return list(operations.values())


def best_source(operation: Operation, seconds: dict[str, dict[str, float]]):
    """``(source, seconds)`` of the fastest measured call of ``operation``
    (``seconds`` maps operation keys to the seconds per call of each
    source)."""
    measured = seconds.get(operation.key)
    if not measured:
        raise KeyError(f'no rate measured for {operation.key}')
    source = min(measured, key=lambda name: measured[name])
    return source, measured[source]


def limit_seconds(products, seconds: dict[str, dict[str, float]]) -> float:
    """The physical limit of a step: for every operation, the FLOPs counted
    for it divided by its best measured rate (FLOPs of one call / seconds
    of its fastest call, over all sources), summed."""
    total = 0.0
    for product in products:
        operation = product.operation
        _, best = best_source(operation, seconds)
        total += product.flops * best / operation.flops
    return total


def time_calls(func) -> float:
    """Seconds of the fastest call, after one warm-up call, of at least
    :data:`MIN_RATE_CALLS` calls and :data:`MIN_RATE_SECONDS` seconds (the
    fastest, not the median: a limit estimates what the hardware can do,
    and other programs on the machine only ever slow a call down)."""
    func()
    times: list[float] = []
    begin = time.perf_counter()
    while len(times) < MIN_RATE_CALLS or time.perf_counter() - begin < MIN_RATE_SECONDS:
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return min(times)


def gemm_operands(operation: Operation):
    """Contiguous float32 ``a`` (m x k), ``b`` (k x n) and ``out`` (m x n)."""
    import numpy as np

    m, k, n = operation.shape
    rnd = np.random.RandomState(0)
    a = rnd.rand(m, k).astype(np.float32)
    b = rnd.rand(k, n).astype(np.float32)
    return a, b, np.empty((m, n), np.float32)


def gemm_call(operation: Operation):
    """A call of numpy.matmul on contiguous float32 operands of the shape."""
    import numpy as np

    a, b, out = gemm_operands(operation)
    return lambda: np.matmul(a, b, out=out)


def handler_gemm_seconds(handler, operation: Operation) -> float:
    """:func:`time_calls` of the handler's ``dot_mm`` on contiguous float32
    operands of the shape."""
    a, b, out = gemm_operands(operation)
    return time_calls(lambda: handler.dot_mm(a, b, out))


def handler_conv_call(handler, operation: Operation):
    """A call of the handler's conv2d op of the shape, on contiguous NHWC
    float32 operands (no kept receptive fields)."""
    import numpy as np

    n, h, w, c, f, kernel, pad = operation.shape
    oh, ow = conv_output_size(h, kernel, pad), conv_output_size(w, kernel, pad)
    rnd = np.random.RandomState(0)
    x = rnd.rand(n, h, w, c).astype(np.float32)
    weights = (rnd.rand(f, kernel, kernel, c).astype(np.float32) - 0.5) * 0.1
    bias = rnd.rand(f).astype(np.float32)
    if operation.group == 'forward':
        y = np.empty((n, oh, ow, f), np.float32)
        return lambda: handler.conv2d_forward_batch(x, weights, bias, y, pad, (1, 1))
    dy = rnd.rand(n, oh, ow, f).astype(np.float32) - 0.5
    dx, dw, db = np.zeros_like(x), np.zeros_like(weights), np.zeros_like(bias)
    skip = operation.group == 'backward weights'
    return lambda: handler.conv2d_backward_batch(
        x, weights, pad, (1, 1), dx, dy, dw, db, skip_in_deltas=skip
    )


def torch_conv_call(operation: Operation):
    """A call of PyTorch's convolution (forward, or the backward passes as
    autograd runs them) of the shape, in channels_last memory format."""
    import torch

    n, h, w, c, f, kernel, pad = operation.shape
    oh, ow = conv_output_size(h, kernel, pad), conv_output_size(w, kernel, pad)
    layout = torch.channels_last
    x = torch.rand(n, c, h, w).contiguous(memory_format=layout)
    weights = (torch.rand(f, c, kernel, kernel) - 0.5).contiguous(memory_format=layout)
    bias = torch.rand(f)
    if operation.group == 'forward':

        def forward():
            with torch.no_grad():
                torch.nn.functional.conv2d(x, weights, bias, padding=pad)

        return forward
    dy = (torch.rand(n, f, oh, ow) - 0.5).contiguous(memory_format=layout)
    mask = [operation.group == 'backward', True, True]
    return lambda: torch.ops.aten.convolution_backward(
        dy, x, weights, [f], [1, 1], [pad, pad], [1, 1], False, [0, 0], 1, mask
    )


def measure_rates(framework: str, workloads, handler: str = 'default') -> dict:
    """Seconds per call of the workloads' operations in this process.

    brainstorm's side times each GEMM with numpy.matmul and with the
    handler's ``dot_mm``, each convolution with the handler's conv2d ops; PyTorch's
    side times the convolutions only. Returns ``{'seconds': {key: {source:
    seconds}}}``.
    """
    operations = step_operations(workloads)
    seconds: dict[str, dict[str, float]] = {}
    if framework == 'torch':
        import torch  # noqa: F401  (its start-up stays out of the first call)

        for operation in operations:
            if operation.kind == 'conv':
                call = torch_conv_call(operation)
                seconds[operation.key] = {TORCH_CONV_SOURCE: time_calls(call)}
        return {'seconds': seconds}
    h = make_handler('cpu', handler)
    name = type(h).__name__
    for operation in operations:
        if operation.kind == 'conv':
            call = handler_conv_call(h, operation)
            seconds[operation.key] = {f'{name} conv2d': time_calls(call)}
            continue
        seconds[operation.key] = {
            GEMM_RATE_SOURCE: time_calls(gemm_call(operation)),
            f'{name} dot_mm': handler_gemm_seconds(h, operation),
        }
    return {'seconds': seconds}


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
    workloads=WORKLOADS,
) -> None:
    """Measure one pair (or, for the workload ``rates``, the rates of the
    ``workloads``' operations) in this process and print the result as
    JSON."""
    if workload == RATES:
        print(json.dumps(measure_rates(framework, workloads, handler)))
        return
    if framework == 'brainstorm':
        result = time_brainstorm(workload, repeats, per_layer, device, handler)
    else:
        result = time_torch(
            workload,
            repeats,
            device,
            cudnn=framework != TORCH_NO_CUDNN,
            channels_last=framework == TORCH_CHANNELS_LAST,
        )
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
    workloads=WORKLOADS,
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
        '--workloads',
        *workloads,
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


def cpu_model(cpuinfo: str = '/proc/cpuinfo') -> str:
    """The CPU's model name: the first ``model name`` of ``cpuinfo`` (Linux),
    else ``platform.processor()``, else '?'."""
    try:
        with open(cpuinfo, encoding='utf-8', errors='replace') as file:
            for line in file:
                name, _, value = line.partition(':')
                if name.strip() == 'model name' and value.strip():
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or '?'


def print_header(torch_info: str | None) -> None:
    import numpy

    print(
        f'machine: {cpu_model()}, {platform.machine()}, '
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


LIMITS_HELP = (
    "print each workload's physical limit (CPU only; on by default): the FLOPs "
    'of the matrix products and convolutions of one step (2 per multiply-add; '
    'forward, backward data and backward weights, no backward data for layers '
    'fed by the data; recurrent products in every time step) divided, shape '
    'by shape, by the best rate measured in this run for the same shape: '
    "GEMMs with numpy.matmul and with the handler's dot_mm on contiguous "
    "float32 operands, convolutions with the handler's conv2d ops and, where "
    'PyTorch '
    "is installed, with PyTorch's convolution in channels_last (the fastest "
    'call of any source counts)'
)


def parse_arguments(argv):
    """The command line: what to time, how often, and what to print."""
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument(
        '--compare-torch',
        action='store_true',
        help='also time the PyTorch equivalents (on the CPU the CNN in NCHW and '
        'in channels_last; the ratio uses the faster)',
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
        '--limits',
        action=argparse.BooleanOptionalAction,
        default=True,
        help=LIMITS_HELP,
    )
    parser.add_argument(
        '--shapes',
        action='store_true',
        help='print the rate of every shape behind the limits, per source',
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


def print_rows(rows) -> None:
    """Right-aligned columns."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        print('  '.join(cell.rjust(width) for cell, width in zip(row, widths)))


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
    print_rows(rows)


def used_torch_variant(results, workload: str, device: str = 'cpu') -> str:
    """The CPU PyTorch variant a workload's ratio uses: the faster layout."""
    return faster_variant(
        {
            variant: summarize(results[variant, workload])[0]
            for variant in torch_variants(workload, device)
        }
    )


def print_cpu_torch_table(results, workloads) -> None:
    """brainstorm next to PyTorch on the CPU: one row per workload against
    PyTorch's faster layout (marked 'used'), one more per other layout (its
    ratios in parentheses, not used)."""
    rows = [
        ['workload', 'torch layout', 'brainstorm ms', 'range', 'peak MiB']
        + ['torch ms', 'range', 'peak MiB', 'ratio', 'memory ratio']
    ]
    notes = []
    for workload in workloads:
        bs_time, bs_spread, bs_rss = summarize(results['brainstorm', workload])
        variants = torch_variants(workload, 'cpu')
        used = used_torch_variant(results, workload)
        for variant in [used] + [v for v in variants if v != used]:
            th_time, th_spread, th_rss = summarize(results[variant, workload])
            ratio, memory = f'{bs_time / th_time:.2f}', f'{bs_rss / th_rss:.2f}'
            layout = layout_name(variant, workload)
            if variant == used:
                bs_cells = [f'{bs_time * 1e3:.1f}', bs_spread, megabytes(bs_rss)]
                if len(variants) > 1:
                    layout += ' (used)'
            else:
                bs_cells, ratio, memory = ['', '', ''], f'({ratio})', f'({memory})'
            rows.append(
                [workload, layout, *bs_cells]
                + [f'{th_time * 1e3:.1f}', th_spread, megabytes(th_rss), ratio, memory]
            )
        if len(variants) > 1:
            notes.append(
                f'{workload}: the ratio uses PyTorch {layout_name(used, workload)}, '
                'the faster layout (the other in parentheses)'
            )
    print_rows(rows)
    for note in notes:
        print(note)


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


def measure_limits(workloads, handler: str, with_torch: bool):
    """Seconds per call of every operation of the workloads, by source
    (brainstorm's side, then PyTorch's convolutions if ``with_torch`` and
    there are any), and the CPU pressure seen."""
    seconds: dict[str, dict[str, float]] = {}
    pressures = []
    has_conv = any(op.kind == 'conv' for op in step_operations(workloads))
    for framework in ['brainstorm'] + (['torch'] if with_torch and has_conv else []):
        run = measure(framework, RATES, 1, False, 'cpu', handler, workloads)
        pressures.append(run['cpu_pressure'])
        for key, by_source in run['seconds'].items():
            seconds.setdefault(key, {}).update(by_source)
    return seconds, pressures


def print_limits(results, workloads, seconds, with_torch: bool) -> None:
    """Per workload: GFLOP of a step, its limit and the steps over it."""
    print(
        '\nphysical limit of a step: FLOPs of its matrix products and '
        'convolutions / best rate measured for the same shapes (--help '
        'states the rule)'
    )
    columns = ['workload', 'GFLOP/step', 'limit ms', 'brainstorm / limit']
    rows = [columns + (['torch / limit'] if with_torch else [])]
    for workload in workloads:
        products = workload_products(workload)
        limit = limit_seconds(products, seconds)
        bs_time = summarize(results['brainstorm', workload])[0]
        row = [
            workload,
            f'{sum(p.flops for p in products) / 1e9:.2f}',
            f'{limit * 1e3:.1f}',
            f'{bs_time / limit:.2f}',
        ]
        if with_torch:
            used = used_torch_variant(results, workload)
            th_time = summarize(results[used, workload])[0]
            row.append(f'{th_time / limit:.2f}')
        rows.append(row)
    print_rows(rows)
    if with_torch:
        print('torch / limit: PyTorch in the layout the ratio uses')


def print_shapes(workloads, seconds) -> None:
    """Each operation's GFLOP/s per source, and what it adds to the limit."""
    for workload in workloads:
        print(f'\n{workload}: rate of each shape, GFLOP/s of its fastest call')
        added: dict[str, float] = {}
        passes: dict[str, list[str]] = {}
        for product in workload_products(workload):
            key = product.operation.key
            _, best = best_source(product.operation, seconds)
            added[key] = added.get(key, 0.0) + product.flops * best / (
                product.operation.flops
            )
            passes.setdefault(key, []).append(f'{product.layer} {product.phase}')
        for operation in step_operations([workload]):
            key = operation.key
            rates = ', '.join(
                f'{source} {operation.flops / spent / 1e9:.0f}'
                for source, spent in seconds[key].items()
            )
            print(f'  {key}: {rates}; {added[key] * 1e3:.2f} ms of the limit')
            print(f'    ({"; ".join(passes[key])})')


def run_rounds(args, with_torch: bool) -> dict:
    """All step measurements, alternating the frameworks within each round."""
    results: dict = {}
    for _ in range(args.rounds):
        for workload in args.workloads:
            frameworks = ['brainstorm']
            if with_torch:
                frameworks += torch_variants(workload, args.device)
            for framework in frameworks:
                results.setdefault((framework, workload), []).append(
                    measure(
                        framework,
                        workload,
                        args.repeats,
                        args.layers and framework == 'brainstorm',
                        args.device,
                        args.handler,
                    )
                )
    return results


def report_limits(args, results, with_torch: bool, torch_installed: bool) -> None:
    """Measure the rates, print the limits (and the shapes if asked)."""
    if args.device == 'gpu':
        print('\nphysical limits: measured on the CPU only (--device cpu)')
        return
    seconds, pressures = measure_limits(args.workloads, args.handler, torch_installed)
    results['rates', 'all'] = [{'cpu_pressure': p} for p in pressures]
    print_limits(results, args.workloads, seconds, with_torch)
    if args.shapes:
        print_shapes(args.workloads, seconds)


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
            args.workloads,
        )
        return 0

    limits = args.limits and args.device == 'cpu'
    torch_info = torch_version() if args.compare_torch or limits else None
    if args.compare_torch and torch_info is None:
        parser.error('--compare-torch needs PyTorch installed')
    print_header(torch_info)
    if args.device == 'gpu':
        print_gpu_header()
    print(
        f'median step time of {args.repeats} steps after {WARMUP_STEPS} '
        f'warm-up steps; {args.rounds} round(s); device {args.device}\n'
    )
    results = run_rounds(args, args.compare_torch)
    handlers = {
        run.get('handler') for w in args.workloads for run in results['brainstorm', w]
    }
    print(f'brainstorm handler: {", ".join(sorted(map(str, handlers)))}')
    if args.compare_torch and args.device == 'cpu':
        print_cpu_torch_table(results, args.workloads)
    else:
        others = torch_variants('', 'gpu') if args.compare_torch else []
        print_table(results, args.workloads, others)
    if args.limits:
        report_limits(args, results, args.compare_torch, torch_info is not None)
    print_pressure(results)
    if args.layers:
        print_layer_times(results, args.workloads)
    return 0


if __name__ == '__main__':
    sys.exit(main())
