"""OneDnnHandler's convolution and pooling ops on operands of the wrong kind.

oneDNN takes each operand by its address, with the shape its plan was made
for. An operand of another dtype, of another shape than the op's other
operands imply, or read-only where the op writes it, was handed over all
the same: oneDNN read and wrote past its end (heap corruption, a crash),
read float64 bytes as float32, or wrote into read-only memory (a
segmentation fault for a read-only memory map). Such calls now run
NumpyHandler's op, which computes what the op's contract says or raises:
the outcome must be NumpyHandler's, exactly, and nothing outside the
operands may change.

The bad operands are generated from each op's declaration of what it reads
and writes: every array operand in turn gets another dtype and a smaller
shape, every written one is also made read-only.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from tests.onednn_support import onednn_handler

SENTINEL = 7.0
PAD = 64  # elements after each operand, which must stay SENTINEL


def conv_forward():
    return 'conv2d_forward_batch', {
        'inputs': (2, 6, 6, 3), 'weights': (4, 3, 3, 3), 'bias': (4,),
        'outputs': (2, 6, 6, 4),
    }, ['outputs'], dict(padding=1, stride=(1, 1))  # fmt: skip


def conv_backward():
    return 'conv2d_backward_batch', {
        'inputs': (2, 6, 6, 3), 'weights': (4, 3, 3, 3),
        'in_deltas': (2, 6, 6, 3), 'out_deltas': (2, 6, 6, 4),
        'weight_deltas': (4, 3, 3, 3), 'bias_deltas': (4,),
    }, ['in_deltas', 'weight_deltas', 'bias_deltas'], dict(
        padding=1, stride=(1, 1), overwrite_in_deltas=True
    )  # fmt: skip


def max_forward():
    return 'maxpool2d_forward_batch', {
        'inputs': (2, 6, 6, 3), 'outputs': (2, 3, 3, 3), 'argmax': (2, 3, 3, 3),
    }, ['outputs', 'argmax'], dict(window=(2, 2), padding=0, stride=(2, 2))  # fmt: skip


def max_backward():
    return 'maxpool2d_backward_batch', {
        'inputs': (2, 6, 6, 3), 'outputs': (2, 3, 3, 3), 'argmax': (2, 3, 3, 3),
        'in_deltas': (2, 6, 6, 3), 'out_deltas': (2, 3, 3, 3),
    }, ['in_deltas'], dict(window=(2, 2), padding=0, stride=(2, 2))  # fmt: skip


def avg_forward():
    return 'avgpool2d_forward_batch', {
        'inputs': (2, 6, 6, 3), 'outputs': (2, 3, 3, 3),
    }, ['outputs'], dict(window=(2, 2), padding=0, stride=(2, 2))  # fmt: skip


def avg_backward():
    return 'avgpool2d_backward_batch', {
        'inputs': (2, 6, 6, 3), 'outputs': (2, 3, 3, 3),
        'in_deltas': (2, 6, 6, 3), 'out_deltas': (2, 3, 3, 3),
    }, ['in_deltas'], dict(window=(2, 2), padding=0, stride=(2, 2))  # fmt: skip


OPS = [
    conv_forward, conv_backward, max_forward, max_backward, avg_forward,
    avg_backward,
]  # fmt: skip


def good_values(name, shapes):
    """float32 values of each operand (a valid argmax from a forward pass)."""
    rng = np.random.RandomState(4)
    values = {k: rng.randn(*shape).astype(np.float32) for k, shape in shapes.items()}
    if 'argmax' in values and name == 'maxpool2d_backward_batch':
        NumpyHandler(np.float32).maxpool2d_forward_batch(
            values['inputs'], (2, 2), values['outputs'], 0, (2, 2), values['argmax']
        )
    return values


def variants(shapes, written):
    """``(operand, kind)`` of every bad operand the declarations give."""
    for operand, shape in shapes.items():
        yield operand, 'float64'
        yield operand, 'float16'
        if shape[0] > 1 or len(shape) == 1:
            yield operand, 'smaller'
        if operand in written:
            yield operand, 'read-only'


def bad(value, kind):
    if kind in ('float64', 'float16'):
        return value.astype(kind)
    if kind == 'smaller':
        return value[:1].copy()
    locked = value.copy()
    locked.flags.writeable = False
    return locked


def padded(value):
    """``value`` as the C-contiguous head of a buffer ending in SENTINELs."""
    if not value.flags.writeable:
        return value, None
    buffer = np.full(value.size + PAD, SENTINEL, value.dtype)
    head = buffer[: value.size].reshape(value.shape)
    head[...] = value
    return head, buffer


def outcome(handler, name, operands, written, keywords):
    try:
        getattr(handler, name)(**operands, **keywords)
    except Exception as error:  # noqa: BLE001 - the kind of error is compared
        return type(error).__name__
    return {k: operands[k].copy() for k in written}


CASES = [
    (op, operand, kind) for op in OPS for operand, kind in variants(op()[1], op()[2])
]


@pytest.mark.parametrize(
    ('op', 'operand', 'kind'),
    CASES,
    ids=[f'{op.__name__}-{operand}-{kind}' for op, operand, kind in CASES],
)
def test_a_bad_operand_gets_numpy_handlers_outcome(op, operand, kind):
    handler = onednn_handler()
    name, shapes, written, keywords = op()
    values = good_values(name, shapes)
    values[operand] = bad(values[operand], kind)

    reference = {k: v.copy() for k, v in values.items()}
    if not values[operand].flags.writeable:
        reference[operand].flags.writeable = False
    expected = outcome(NumpyHandler(np.float32), name, reference, written, keywords)

    operands, buffers = {}, {}
    for k, v in values.items():
        operands[k], buffers[k] = padded(v)
    got = outcome(handler, name, operands, written, keywords)

    for k, buffer in buffers.items():
        if buffer is not None:
            tail = buffer[-PAD:]
            assert np.all(tail == SENTINEL), f'{name} wrote past {k}'
    if isinstance(expected, str):
        assert got == expected
    else:
        assert not isinstance(got, str), f'{name} raised {got}'
        for k in written:
            np.testing.assert_array_equal(got[k], expected[k], err_msg=k)


@pytest.mark.parametrize('op', OPS, ids=[op.__name__ for op in OPS])
def test_good_operands_still_run_on_onednn(op):
    """The checks turn away bad operands only: good ones get a plan."""
    handler = onednn_handler()
    name, shapes, written, keywords = op()
    values = good_values(name, shapes)
    getattr(handler, name)(**values, **keywords)
    assert handler._plans, f'{name} did not run on oneDNN'
    assert None not in handler._plans.values()


@pytest.mark.parametrize('bad', ['weight_deltas', 'bias_deltas', 'in_deltas'])
def test_a_backward_fallback_does_not_read_columns_the_forward_left_empty(bad):
    # The forward pass on oneDNN leaves ``columns`` untouched (the contract
    # allows it); a backward pass that falls back to NumpyHandler's op (an
    # operand oneDNN cannot take) read them as the receptive fields: weight
    # gradients of zeros, without a word.
    rnd = np.random.RandomState(0)
    x = rnd.randn(2, 6, 6, 3).astype(np.float32)
    w = rnd.randn(4, 3, 3, 3).astype(np.float32)
    b = rnd.randn(4).astype(np.float32)
    dy = rnd.randn(2, 4, 4, 4).astype(np.float32)

    def run(handler):
        y = np.zeros((2, 4, 4, 4), np.float32)
        columns = np.zeros((2, 4, 4, 27), np.float32)
        handler.conv2d_forward_batch(x, w, b, y, 0, (1, 1), columns=columns)
        grads = {
            'in_deltas': np.zeros(x.shape, np.float32),
            'weight_deltas': np.zeros(w.shape, np.float32),
            'bias_deltas': np.zeros(4, np.float32),
        }
        grads[bad] = grads[bad].astype(np.float64)  # oneDNN cannot take it
        handler.conv2d_backward_batch(
            x, w, 0, (1, 1), grads['in_deltas'], dy, grads['weight_deltas'],
            grads['bias_deltas'], columns=columns,
        )  # fmt: skip
        return grads

    expected = run(NumpyHandler(np.float32))
    got = run(onednn_handler(np.float32))
    assert np.abs(expected['weight_deltas']).max() > 1.0
    for name in expected:
        np.testing.assert_allclose(got[name], expected[name], rtol=1e-5, atol=1e-4)
