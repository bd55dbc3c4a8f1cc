"""Time the CPU handlers' hot ops at the shapes of the benchmark workloads.

The operands are laid out like a network lays them out: time-sized arrays
are feature slices of a wider buffer (rows not contiguous), parameters are
contiguous. Each op runs ``--repeats`` times after one warm-up call; the
median is printed with the GEMM throughput where that means something, so a
regression in one op shows up here before it hides in a whole step.

Usage::

    python benchmarks/bench_ops.py [--repeats 50] [--filter conv]
        [--handler numpy|onednn|both]

``--handler`` picks the float32 handler(s): NumpyHandler, OneDnnHandler
(oneDNN's convolution and pooling; its other ops are NumpyHandler's) or
both, one after the other (the default where oneDNN loads).

The update rows time the steppers' updates of the MLP's parameters: the
update ops (``momentum_update``, ``adam_update``, ...; NumpyHandler runs
each in one pass over memory) next to the general ops they replaced,
``momentum update (3 ops)`` and ``adam update (10 ops)``.

Besides the single ops, ``lstm step`` times one time step of the Lstm layer
(forward and backward, from its median per-layer times divided by T). The
minimum is printed next to the median: on a busy machine it is the better
estimate of what the op costs.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import numpy as np

from brainstorm.handlers.base_handler import Handler
from brainstorm.handlers.numpy_handler import NumpyHandler
from brainstorm.handlers.onednn import OneDnnHandler, onednn_available

RND = np.random.RandomState(0)


def feature_slice(shape, extra: int = 64):
    """A float32 array of ``shape`` whose features (all axes but the first)
    are a slice of a wider row, like a layer's view of a network buffer."""
    features = int(np.prod(shape[1:]))
    wide = RND.rand(shape[0], features + extra).astype(np.float32)
    return wide[:, extra // 2 : extra // 2 + features].reshape(shape)


def dense(*shape):
    return RND.rand(*shape).astype(np.float32) - 0.5


def time_op(func, repeats: int) -> tuple[float, float]:
    """``(median, min)`` seconds of ``repeats`` calls after a warm-up."""
    func()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        func()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def gemm_cases(h):
    """``(name, shape text, flops, func)`` for the GEMMs of the workloads."""
    cases = []

    def add(name, m, k, n, out_view=False, accumulate=False, transa=False, transb=True):
        a = dense(k, m) if transa else dense(m, k)
        b = dense(n, k) if transb else dense(k, n)
        out = feature_slice((m, n)) if out_view else dense(m, n)
        op = h.dot_add_mm if accumulate else h.dot_mm
        cases.append(
            (
                name,
                f'{m}x{k} . {k}x{n}',
                2 * m * k * n,
                lambda: op(a, b, out, transa=transa, transb=transb),
            )
        )

    add('dot_mm mlp hidden', 100, 1200, 1200, out_view=True)
    add('dot_mm mlp first', 100, 784, 1200, out_view=True)
    add(
        'dot_add_mm mlp dx',
        100,
        1200,
        1200,
        out_view=True,
        accumulate=True,
        transb=False,
    )
    add(
        'dot_add_mm mlp dW', 1200, 100, 1200, accumulate=True, transa=True, transb=False
    )
    add('dot_mm lstm inputs (1 gate)', 1600, 205, 512, out_view=True)
    add('dot_mm lstm inputs (4 gates)', 1600, 205, 2048, out_view=True)
    add(
        'dot_add_mm lstm recurrent (1 gate)',
        32,
        512,
        512,
        out_view=True,
        accumulate=True,
    )
    add(
        'dot_add_mm lstm recurrent (4 gates)',
        32,
        512,
        2048,
        out_view=True,
        accumulate=True,
    )
    add(
        'dot_add_mm lstm dR (1 gate)',
        512,
        1600,
        512,
        accumulate=True,
        transa=True,
        transb=False,
    )
    return cases


# (name, N, H, W, C, filters) of the cifar10_cnn convolutions (5x5, pad 2)
CONVOLUTIONS = [
    ('conv1', 100, 32, 32, 3, 32),
    ('conv2', 100, 15, 15, 32, 32),
    ('conv3', 100, 7, 7, 32, 64),
]
# (name, N, H, W, C) of its max poolings (3x3, stride 2)
POOLINGS = [
    ('pool1', 100, 32, 32, 32),
    ('pool2', 100, 15, 15, 32),
    ('pool3', 100, 7, 7, 64),
]


def conv_pool_cases(h):
    cases = []
    for name, n, height, width, c, f in CONVOLUTIONS:
        x = feature_slice((n, height, width, c))
        y = feature_slice((n, height, width, f))
        weights, bias = dense(f, 5, 5, c), dense(f)
        dx, dy = feature_slice((n, height, width, c)), dense(n, height, width, f)
        dw, db = np.zeros_like(weights), np.zeros_like(bias)
        flops = 2 * n * height * width * f * 25 * c
        shape = f'{n}x{height}x{width}x{c} * {f}x5x5'
        cases.append(
            (
                f'conv2d_forward_batch {name}',
                shape,
                flops,
                lambda x=x, w=weights, b=bias, y=y: h.conv2d_forward_batch(
                    x, w, b, y, 2, (1, 1)
                ),
            )
        )
        cases.append(
            (
                f'conv2d_forward_batch {name} rel',
                shape,
                flops,
                lambda x=x, w=weights, b=bias, y=y: h.conv2d_forward_batch(
                    x, w, b, y, 2, (1, 1), activation='rel'
                ),
            )
        )
        cases.append(
            (
                f'conv2d_backward_batch {name}',
                shape,
                2 * flops,
                lambda x=x, w=weights, dx=dx, dy=dy, dw=dw, db=db: (
                    h.conv2d_backward_batch(x, w, 2, (1, 1), dx, dy, dw, db)
                ),
            )
        )
        if name == 'conv1':  # fed by the data: steppers skip its deltas
            cases.append(
                (
                    f'conv2d_backward_batch {name} no dx',
                    shape,
                    flops,
                    lambda x=x, w=weights, dx=dx, dy=dy, dw=dw, db=db: (
                        h.conv2d_backward_batch(
                            x, w, 2, (1, 1), dx, dy, dw, db, skip_in_deltas=True
                        )
                    ),
                )
            )
        if not h.keeps_conv_columns(height * width):
            continue
        # the receptive fields kept in a layer internal ('columns'), as
        # Convolution2D does for big images (conv1; it skips the deltas of
        # the data, too)
        cols = feature_slice((n, height, width, 25 * c))
        h.conv2d_forward_batch(x, weights, bias, y, 2, (1, 1), columns=cols)
        cases.append(
            (
                f'conv2d_forward_batch {name} kept',
                shape,
                flops,
                lambda x=x, w=weights, b=bias, y=y, cols=cols: h.conv2d_forward_batch(
                    x, w, b, y, 2, (1, 1), columns=cols
                ),
            )
        )
        cases.append(
            (
                f'conv2d_backward_batch {name} kept no dx',
                shape,
                flops,
                lambda x=x, w=weights, dx=dx, dy=dy, dw=dw, db=db, cols=cols: (
                    h.conv2d_backward_batch(
                        x,
                        w,
                        2,
                        (1, 1),
                        dx,
                        dy,
                        dw,
                        db,
                        columns=cols,
                        skip_in_deltas=True,
                    )
                ),
            )
        )
    for name, n, height, width, c in POOLINGS:
        oh, ow = (height - 3) // 2 + 1, (width - 3) // 2 + 1
        x, dx = (
            feature_slice((n, height, width, c)),
            feature_slice((n, height, width, c)),
        )
        y, argmax = feature_slice((n, oh, ow, c)), feature_slice((n, oh, ow, c))
        dy = feature_slice((n, oh, ow, c))
        shape = f'{n}x{height}x{width}x{c} -> {oh}x{ow}'
        h.maxpool2d_forward_batch(x, (3, 3), y, 0, (2, 2), argmax)
        cases.append(
            (
                f'maxpool2d_forward_batch {name}',
                shape,
                0,
                lambda x=x, y=y, a=argmax: h.maxpool2d_forward_batch(
                    x, (3, 3), y, 0, (2, 2), a
                ),
            )
        )
        cases.append(
            (
                f'maxpool2d_backward_batch {name}',
                shape,
                0,
                lambda x=x, y=y, a=argmax, dx=dx, dy=dy: h.maxpool2d_backward_batch(
                    x, (3, 3), y, 0, (2, 2), a, dx, dy
                ),
            )
        )
        cases.append(
            (
                f'avgpool2d_forward_batch {name}',
                shape,
                0,
                lambda x=x, y=y: h.avgpool2d_forward_batch(x, (3, 3), y, 0, (2, 2)),
            )
        )
        cases.append(
            (
                f'avgpool2d_backward_batch {name}',
                shape,
                0,
                lambda x=x, y=y, dx=dx, dy=dy: h.avgpool2d_backward_batch(
                    x, (3, 3), y, 0, (2, 2), dx, dy
                ),
            )
        )
    return cases


def elementwise_cases(h):
    cases = []
    y, dy = feature_slice((100, 1200)), feature_slice((100, 1200))
    cases.append(('rel', '100x1200', 0, lambda: h.rel(y, y)))
    cases.append(('rel_deriv', '100x1200', 0, lambda: h.rel_deriv(y, y, dy, dy)))
    g, dg = feature_slice((32, 512)), feature_slice((32, 512))
    cases.append(('sigmoid', '32x512', 0, lambda: h.sigmoid(g, g)))
    cases.append(('sigmoid_deriv', '32x512', 0, lambda: h.sigmoid_deriv(g, g, dg, dg)))
    cases.append(('tanh', '32x512', 0, lambda: h.tanh(g, g)))
    cases.append(('mult_add_tt', '32x512', 0, lambda: h.mult_add_tt(g, dg, dg)))
    cases += update_cases(h)
    return cases


#: The parameter count of the MLP workload (784-1200-1200-10).
MLP_PARAMETERS = 784 * 1200 + 1200 + 1200 * 1200 + 1200 + 1200 * 10 + 10


def update_cases(h):
    """The steppers' updates of the MLP's parameters: the update ops, and
    the general ops they replaced as the reference."""
    n = MLP_PARAMETERS
    params, grads, velocity = dense(n), dense(n), dense(n)
    m, scratch = dense(n), dense(n)
    v = np.abs(dense(n))  # a mean square: >= 0
    mask = (RND.rand(n) < 0.99).astype(np.float32)
    shape = f'{n / 1e6:.2f}M'

    def momentum():
        h.mult_st(0.9, velocity, velocity)
        h.mult_add_st(-0.001, grads, velocity)
        h.add_tt(params, velocity, params)

    def nesterov():
        h.nesterov_lookahead(params, velocity, 0.9)
        h.nesterov_update(params, grads, velocity, 0.001)

    adam = (params, grads, m, v, None, scratch, 1e-3, 0.9, 0.999, 1e-8, 10)
    adamw = (params, grads, m, v, mask, scratch, 1e-3, 0.9, 0.999, 1e-8, 10)
    return [
        ('momentum update (3 ops)', shape, 0, momentum),
        ('sgd_update', shape, 0, lambda: h.sgd_update(params, grads, 0.001)),
        (
            'momentum_update',
            shape,
            0,
            lambda: h.momentum_update(params, grads, velocity, 0.001, 0.9),
        ),
        ('nesterov_lookahead + nesterov_update', shape, 0, nesterov),
        (
            'rmsprop_update',
            shape,
            0,
            lambda: h.rmsprop_update(params, grads, v, scratch, 0.001, 0.9, 1e-8),
        ),
        (
            'adam update (10 ops)',
            shape,
            0,
            lambda: Handler.adam_update(h, *adam, 0.0),
        ),
        ('adam_update', shape, 0, lambda: h.adam_update(*adam, 0.0)),
        (
            'adam_update, AdamW masked decay',
            shape,
            0,
            lambda: h.adam_update(*adamw, 0.1),
        ),
    ]


def lstm_step_cases(repeats: int):
    """Per-time-step forward and backward time of the benchmark Lstm."""
    sys.path.insert(0, __file__.rsplit('/', 1)[0])
    from bench_step import build_brainstorm, time_layers

    net, data, stepper = build_brainstorm('lstm')
    net.provide_external_data(data)
    stepper.run()
    times = time_layers(net, stepper, max(3, repeats // 10))
    steps = data['default'].shape[0]
    return [
        (f'lstm step {phase}', '32x205 -> 512', times[f'Lstm.{phase}'] / steps)
        for phase in ('forward', 'backward')
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--repeats', type=int, default=50)
    parser.add_argument(
        '--filter', default='', help='only ops whose name contains this text'
    )
    parser.add_argument(
        '--handler',
        choices=('numpy', 'onednn', 'both'),
        default='both',
        help='the float32 handler(s) to time (default both; numpy alone '
        'where oneDNN cannot load)',
    )
    args = parser.parse_args(argv)
    available, why = onednn_available()
    if args.handler == 'onednn' and not available:
        parser.error(f'oneDNN is unavailable: {why}')
    makers = {'numpy': NumpyHandler, 'onednn': OneDnnHandler}
    names = ['numpy', 'onednn'] if args.handler == 'both' else [args.handler]
    if not available:
        print(f'oneDNN is unavailable ({why}): NumpyHandler only')
        names = ['numpy']
    rows = []
    for handler_name in names:
        h = makers[handler_name](np.float32)
        print(f'{handler_name}: {h}')
        for name, shape, flops, func in (
            gemm_cases(h) + conv_pool_cases(h) + elementwise_cases(h)
        ):
            if args.filter in name:
                rows.append(
                    (handler_name, name, shape, flops) + time_op(func, args.repeats)
                )
    if args.filter in 'lstm step forward backward':
        rows += [
            ('default', name, shape, 0, seconds, seconds)
            for name, shape, seconds in lstm_step_cases(args.repeats)
        ]
    print(
        f'{"handler":<8} {"op":<38} {"shape":<26} {"median ms":>9} {"min ms":>8} '
        f'{"GFLOP/s":>7}'
    )
    for handler_name, name, shape, flops, median, fastest in rows:
        rate = f'{flops / median / 1e9:7.1f}' if flops else ''
        print(
            f'{handler_name:<8} {name:<38} {shape:<26} {median * 1e3:9.3f} '
            f'{fastest * 1e3:8.3f} {rate:>7}'
        )
    return 0


if __name__ == '__main__':
    sys.exit(main())
