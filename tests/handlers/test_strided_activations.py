"""Activation ops on the strided views layers hand them.

A layer's ``(B, S)`` block is often a column slice of a wider buffer
(Lstm's and ClockworkLstm's gates are ``(B, S)`` blocks of ``(B, 4 * S)``
rows). Some NumPy releases compute a few ufuncs wrongly on such views:
NumPy 2.4.6 writes ``np.negative(x, out=y)`` wrongly for float32 ``x`` with
rows of 16 bytes and a strided ``y``, which made ``sigmoid`` and so a
``ClockworkLstm(1)`` wrong by up to 0.1 in float32. Every activation and
its derivative must give on a view what it gives on contiguous copies, bit
for bit.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import ACTIVATIONS, NumpyHandler
from tests.onednn_support import onednn_handler

HANDLERS = {
    'numpy32': lambda: NumpyHandler(np.float32),
    'numpy64': lambda: NumpyHandler(np.float64),
    'numpy16': lambda: NumpyHandler(np.float16),
    'onednn32': lambda: onednn_handler(np.float32),
}

# (row length, first column, last column): blocks of width 1 and more
BLOCKS = [(w, w - 1, w) for w in range(1, 10)] + [(8, 2, 4), (9, 3, 6), (12, 0, 3)]
ROWS = (2, 3, 17, 40)


def _views(handler, rows, width, start, stop, seed):
    """Random rows and their ``[:, start:stop]`` blocks, for x, y, dy, dx."""
    rng = np.random.default_rng(seed)
    full = [rng.uniform(-4, 4, (rows, width)).astype(handler.dtype) for _ in range(4)]
    return full, [a[:, start:stop] for a in full]


@pytest.mark.parametrize('handler_name', sorted(HANDLERS))
@pytest.mark.parametrize('name', ACTIVATIONS)
def test_activation_on_a_block_equals_on_a_copy(handler_name, name):
    handler = HANDLERS[handler_name]()
    op = getattr(handler, name)
    for seed, (width, start, stop) in enumerate(BLOCKS):
        for rows in ROWS:
            full, (x, y, _, _) = _views(handler, rows, width, start, stop, seed)
            expected = np.zeros(x.shape, handler.dtype)
            op(x.copy(), expected)
            op(x, y)
            np.testing.assert_array_equal(
                y, expected, err_msg=f'{name} on {rows}x{width}[:, {start}:{stop}]'
            )


@pytest.mark.parametrize('handler_name', sorted(HANDLERS))
@pytest.mark.parametrize('name', ACTIVATIONS)
def test_derivative_on_a_block_equals_on_a_copy(handler_name, name):
    handler = HANDLERS[handler_name]()
    op = getattr(handler, f'{name}_deriv')
    for seed, (width, start, stop) in enumerate(BLOCKS):
        for rows in ROWS:
            full, (x, y, dy, dx) = _views(handler, rows, width, start, stop, seed)
            getattr(handler, name)(x, y)  # y consistent with x
            expected = np.zeros(x.shape, handler.dtype)
            op(x.copy(), y.copy(), dy.copy(), expected)
            op(x, y, dy, dx)
            np.testing.assert_array_equal(
                dx,
                expected,
                err_msg=f'{name}_deriv on {rows}x{width}[:, {start}:{stop}]',
            )


def test_clockwork_lstm_of_one_unit_in_float32_agrees_with_float64():
    # its gates are (B, 1) columns of (B, 4) rows: the view NumPy 2.4.6
    # negates wrongly
    net = bs.Network.from_layer(
        bs.layers.Input({'default': ('T', 'B', 2)})
        >> bs.layers.ClockworkLstm(1, name='Cw')
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(1.0), seed=3)
    x = np.random.default_rng(0).normal(size=(6, 5, 2))
    net.provide_external_data({'default': x})
    net.forward_pass()
    expected = net.get('Cw.outputs.default')[:6]
    net.set_handler(NumpyHandler(np.float32))
    net.provide_external_data({'default': x.astype(np.float32)})
    net.forward_pass()
    np.testing.assert_allclose(
        net.get('Cw.outputs.default')[:6], expected, rtol=0, atol=2e-6
    )
