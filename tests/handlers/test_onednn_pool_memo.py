"""OneDnnHandler's max pooling keeps each forward pass's workspace for the
backward pass, and takes it only while ``argmax`` holds what that forward
pass wrote (brainstorm/handlers/onednn/_pool.py).

The deltas are integers here, so every sum is exact and the backward
results of both handlers are compared bit for bit.
"""

import threading

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.onednn import _pool
from tests.onednn_support import onednn_handler


@pytest.fixture
def handler():
    return onednn_handler(np.float32, seed=1)


def images(shape, seed):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def deltas(shape, seed):
    return np.random.RandomState(seed).randint(-4, 5, shape).astype(np.float32)


def forward(h, x, window, out_shape, padding=0, stride=(2, 2)):
    y = np.zeros(out_shape, np.float32)
    argmax = np.zeros(out_shape, np.float32)
    h.maxpool2d_forward_batch(x, window, y, padding, stride, argmax)
    return y, argmax


def backward(h, x, window, argmax, dy, padding=0, stride=(2, 2)):
    dx = deltas(x.shape, 99)  # backward ADDS into the input deltas
    y = np.zeros(dy.shape, np.float32)
    h.maxpool2d_backward_batch(x, window, y, padding, stride, argmax, dx, dy)
    return dx


X_SHAPE, Y_SHAPE, WINDOW = (3, 12, 12, 8), (3, 6, 6, 8), (2, 2)


def count_translations(h, monkeypatch):
    """Count the backward passes that translate argmax into a workspace."""
    calls = []
    original = h._image_to_window

    def counted(*args):
        calls.append(args)
        return original(*args)

    monkeypatch.setattr(h, '_image_to_window', counted)
    return calls


def test_a_backward_pass_after_its_forward_pass_takes_the_kept_workspace(
    handler, monkeypatch
):
    x, dy = images(X_SHAPE, 1), deltas(Y_SHAPE, 2)
    translations = count_translations(handler, monkeypatch)
    _, argmax = forward(handler, x, WINDOW, Y_SHAPE)
    got = backward(handler, x, WINDOW, argmax, dy)
    assert translations == []
    np.testing.assert_array_equal(
        got, backward(NumpyHandler(np.float32), x, WINDOW, argmax, dy)
    )


@pytest.mark.parametrize('change', ['one cell', 'all cells', 'another forward'])
def test_a_changed_argmax_is_translated(handler, monkeypatch, change):
    """The backward pass follows the argmax it is given, not the one the
    forward pass wrote into the same array."""
    x, dy = images(X_SHAPE, 1), deltas(Y_SHAPE, 2)
    _, argmax = forward(handler, x, WINDOW, Y_SHAPE)
    _, other = forward(NumpyHandler(np.float32), images(X_SHAPE, 3), WINDOW, Y_SHAPE)
    assert (other != argmax).any()
    if change == 'one cell':
        cell = np.argwhere(other != argmax)[0]
        argmax[tuple(cell)] = other[tuple(cell)]
    elif change == 'all cells':
        argmax[...] = other
    else:  # NaN inputs take NumpyHandler's forward pass into the array
        x = images(X_SHAPE, 3)
        x[0, 0, 0, 0] = np.nan
        forward_nan = forward(NumpyHandler(np.float32), x, WINDOW, Y_SHAPE)[1]
        handler.maxpool2d_forward_batch(
            x, WINDOW, np.zeros(Y_SHAPE, np.float32), 0, (2, 2), argmax
        )
        np.testing.assert_array_equal(argmax, forward_nan)
    translations = count_translations(handler, monkeypatch)
    got = backward(handler, x, WINDOW, argmax, dy)
    assert len(translations) == 1
    np.testing.assert_array_equal(
        got, backward(NumpyHandler(np.float32), x, WINDOW, argmax, dy)
    )


def test_an_argmax_of_another_geometry_is_translated(handler):
    """Same output shape and argmax values, another window: the kept
    workspace (cells of a 2x2 window) does not fit the 3x3 window's plan."""
    x, dy = images((2, 8, 8, 4), 5), deltas((2, 4, 4, 4), 6)
    _, argmax = forward(handler, x, (2, 2), (2, 4, 4, 4))
    padding = (0, 1, 0, 1)  # 3x3 windows, stride 2: also 4 x 4 outputs
    got = backward(handler, x, (3, 3), argmax, dy, padding)
    expected = backward(NumpyHandler(np.float32), x, (3, 3), argmax, dy, padding)
    np.testing.assert_array_equal(got, expected)


def test_a_backward_pass_in_another_thread_translates(handler):
    x, dy = images(X_SHAPE, 1), deltas(Y_SHAPE, 2)
    _, argmax = forward(handler, x, WINDOW, Y_SHAPE)
    results = []
    worker = threading.Thread(
        target=lambda: results.append(backward(handler, x, WINDOW, argmax, dy))
    )
    worker.start()
    worker.join()
    np.testing.assert_array_equal(
        results[0], backward(NumpyHandler(np.float32), x, WINDOW, argmax, dy)
    )


def test_more_arrays_than_kept_stay_correct_and_bounded(handler):
    x, dy = images(X_SHAPE, 1), deltas(Y_SHAPE, 2)
    expected = backward(
        NumpyHandler(np.float32), x, WINDOW, forward(handler, x, WINDOW, Y_SHAPE)[1], dy
    )
    argmaxes = [
        forward(handler, x, WINDOW, Y_SHAPE)[1] for _ in range(_pool.POOL_MEMOS + 3)
    ]
    for argmax in argmaxes:
        np.testing.assert_array_equal(
            backward(handler, x, WINDOW, argmax, dy), expected
        )
    assert len(handler._per_thread.onednn_pool_memos) == _pool.POOL_MEMOS


@pytest.mark.parametrize(
    'geometry',
    [  # x shape, window, padding, stride
        ((2, 9, 7, 3), (3, 3), 1, (2, 2)),
        ((2, 10, 11, 5), (2, 3), (0, 1, 1, 0), (1, 2)),
        ((1, 40, 40, 2), (17, 17), 0, (8, 8)),  # 289 cells: an int32 workspace
    ],
)
def test_argmax_is_numpy_handlers_bit_for_bit(handler, geometry):
    shape, window, padding, stride = geometry
    top, bottom, left, right = (padding,) * 4 if isinstance(padding, int) else padding
    oh = (shape[1] + top + bottom - window[0]) // stride[0] + 1
    ow = (shape[2] + left + right - window[1]) // stride[1] + 1
    y_shape = (shape[0], oh, ow, shape[3])
    x = images(shape, 7)
    expected = forward(NumpyHandler(np.float32), x, window, y_shape, padding, stride)
    got = forward(handler, x, window, y_shape, padding, stride)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    (plan,) = [p for key, p in handler._plans.items() if key[0] == 'max']
    assert plan is not None, 'oneDNN did not run'
    cells = window[0] * window[1]
    assert plan.workspace_dtype == (np.uint8 if cells < 256 else np.int32)
