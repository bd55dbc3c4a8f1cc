"""OneDnnHandler's max pooling keeps each forward pass's workspace for the
backward pass, and takes it only while ``argmax`` holds what that forward
pass wrote; otherwise it translates ``argmax`` into a workspace
(brainstorm/handlers/onednn/_pool.py). Both ways give NumpyHandler's
results.

The deltas are integers here, so every sum is exact and the backward
results of both handlers are compared bit for bit.
"""

import threading

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.onednn import _pool
from brainstorm.shapes import padding_sides
from tests.onednn_support import onednn_handler


@pytest.fixture
def handler():
    return onednn_handler(np.float32, seed=1)


def images(shape, seed):
    return np.random.RandomState(seed).randn(*shape).astype(np.float32)


def deltas(shape, seed):
    return np.random.RandomState(seed).randint(-4, 5, shape).astype(np.float32)


class Geometry:
    """A pooling geometry and the shape of its outputs."""

    def __init__(self, x_shape, window, padding=0, stride=(2, 2)):
        self.x_shape, self.window, self.stride = x_shape, window, stride
        self.padding = padding
        top, bottom, left, right = padding_sides(padding)
        n, h, w, c = x_shape
        oh = (h + top + bottom - window[0]) // stride[0] + 1
        ow = (w + left + right - window[1]) // stride[1] + 1
        self.y_shape = (n, oh, ow, c)

    def __repr__(self):
        return f'{self.x_shape} {self.window} {self.padding} {self.stride}'

    def forward(self, h, x):
        y = np.zeros(self.y_shape, np.float32)
        argmax = np.zeros(self.y_shape, np.float32)
        h.maxpool2d_forward_batch(x, self.window, y, self.padding, self.stride, argmax)
        return y, argmax

    def backward(self, h, x, argmax, dy):
        dx = deltas(x.shape, 99)  # backward ADDS into the input deltas
        y = np.zeros(dy.shape, np.float32)
        h.maxpool2d_backward_batch(
            x, self.window, y, self.padding, self.stride, argmax, dx, dy
        )
        return dx

    def expected_backward(self, x, argmax, dy):
        return self.backward(NumpyHandler(np.float32), x, argmax, dy)


GEOMETRIES = [
    Geometry((3, 12, 12, 8), (2, 2)),
    Geometry((2, 9, 7, 3), (3, 3), 1),
    Geometry((2, 10, 11, 5), (2, 3), (0, 1, 1, 0), (1, 2)),
    # 289 cells: an int32 workspace
    Geometry((1, 40, 40, 2), (17, 17), 0, (8, 8)),
    # windows wider than the image: cells (u, v) and (u + 1, v - W) have
    # the same u * W + v
    Geometry((1, 4, 2, 1), (2, 3), (0, 0, 1, 1), (1, 1)),
    Geometry((2, 6, 3, 4), (3, 4), (1, 1, 2, 2), (1, 1)),
]
PLAIN = GEOMETRIES[0]


def count_translations(monkeypatch):
    """Count the backward passes that translate argmax into a workspace."""
    calls = []
    original = _pool.workspace_from_argmax

    def counted(*args):
        calls.append(threading.get_ident())
        return original(*args)

    monkeypatch.setattr(_pool, 'workspace_from_argmax', counted)
    return calls


@pytest.mark.parametrize('geometry', GEOMETRIES, ids=repr)
def test_argmax_is_numpy_handlers_bit_for_bit(handler, geometry):
    x = images(geometry.x_shape, 7)
    expected = geometry.forward(NumpyHandler(np.float32), x)
    got = geometry.forward(handler, x)
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    (plan,) = [p for key, p in handler._plans.items() if key[0] == 'max']
    assert plan is not None, 'oneDNN did not run'
    cells = geometry.window[0] * geometry.window[1]
    assert plan.workspace_dtype == (np.uint8 if cells < 256 else np.int32)


@pytest.mark.parametrize('geometry', GEOMETRIES, ids=repr)
def test_a_backward_pass_after_its_forward_pass_takes_the_kept_workspace(
    handler, monkeypatch, geometry
):
    x, dy = images(geometry.x_shape, 1), deltas(geometry.y_shape, 2)
    translations = count_translations(monkeypatch)
    _, argmax = geometry.forward(handler, x)
    got = geometry.backward(handler, x, argmax, dy)
    assert translations == []
    np.testing.assert_array_equal(got, geometry.expected_backward(x, argmax, dy))


@pytest.mark.parametrize('geometry', GEOMETRIES, ids=repr)
def test_a_translated_argmax_gives_numpy_handlers_deltas(
    handler, monkeypatch, geometry
):
    """A handler that ran no forward pass translates argmax: the deltas
    are NumpyHandler's for every geometry."""
    x, dy = images(geometry.x_shape, 1), deltas(geometry.y_shape, 2)
    _, argmax = geometry.forward(NumpyHandler(np.float32), x)
    translations = count_translations(monkeypatch)
    got = geometry.backward(handler, x, argmax, dy)
    assert len(translations) == 1
    np.testing.assert_array_equal(got, geometry.expected_backward(x, argmax, dy))


@pytest.mark.parametrize('change', ['one cell', 'all cells', 'a NaN forward pass'])
def test_a_changed_argmax_is_translated(handler, monkeypatch, change):
    """The backward pass follows the argmax it is given, not the one the
    forward pass wrote into the same array."""
    g = PLAIN
    x, dy = images(g.x_shape, 1), deltas(g.y_shape, 2)
    _, argmax = g.forward(handler, x)
    _, other = g.forward(NumpyHandler(np.float32), images(g.x_shape, 3))
    assert (other != argmax).any()
    if change == 'one cell':
        cell = np.argwhere(other != argmax)[0]
        argmax[tuple(cell)] = other[tuple(cell)]
    elif change == 'all cells':
        argmax[...] = other
    else:  # NaN inputs take NumpyHandler's forward pass into the array
        x = images(g.x_shape, 3)
        x[0, 0, 0, 0] = np.nan
        expected = g.forward(NumpyHandler(np.float32), x)[1]
        handler.maxpool2d_forward_batch(
            x, g.window, np.zeros(g.y_shape, np.float32), 0, g.stride, argmax
        )
        np.testing.assert_array_equal(argmax, expected)
    translations = count_translations(monkeypatch)
    got = g.backward(handler, x, argmax, dy)
    assert len(translations) == 1
    np.testing.assert_array_equal(got, g.expected_backward(x, argmax, dy))


def test_an_argmax_of_another_geometry_is_translated(handler):
    """Same output shape and argmax values, another window: the kept
    workspace (cells of a 2x2 window) does not fit the 3x3 window's plan."""
    two = Geometry((2, 8, 8, 4), (2, 2))
    three = Geometry((2, 8, 8, 4), (3, 3), (0, 1, 0, 1))  # also 4 x 4 outputs
    assert two.y_shape == three.y_shape
    x, dy = images(two.x_shape, 5), deltas(two.y_shape, 6)
    _, argmax = two.forward(handler, x)
    got = three.backward(handler, x, argmax, dy)
    np.testing.assert_array_equal(got, three.expected_backward(x, argmax, dy))


def test_a_backward_pass_in_another_thread_translates(handler, monkeypatch):
    """Each thread keeps its own workspaces."""
    g = PLAIN
    x, dy = images(g.x_shape, 1), deltas(g.y_shape, 2)
    _, argmax = g.forward(handler, x)
    translations = count_translations(monkeypatch)
    results = []
    worker = threading.Thread(
        target=lambda: results.append(g.backward(handler, x, argmax, dy))
    )
    worker.start()
    worker.join()
    assert translations == [worker.ident]
    np.testing.assert_array_equal(results[0], g.expected_backward(x, argmax, dy))
    # this thread's own workspace is still taken
    g.backward(handler, x, argmax, dy)
    assert translations == [worker.ident]


def test_more_arrays_than_kept_stay_correct_and_bounded(handler, monkeypatch):
    g = PLAIN
    x, dy = images(g.x_shape, 1), deltas(g.y_shape, 2)
    expected = g.expected_backward(x, g.forward(handler, x)[1], dy)
    argmaxes = [g.forward(handler, x)[1] for _ in range(_pool.POOL_MEMOS + 3)]
    translations = count_translations(monkeypatch)
    for argmax in argmaxes:
        np.testing.assert_array_equal(g.backward(handler, x, argmax, dy), expected)
    # the oldest went (their backward passes translate), the newest stay
    assert len(translations) == len(argmaxes) - _pool.POOL_MEMOS
    assert len(handler._per_thread.onednn_pool_memos) == _pool.POOL_MEMOS


def test_argmax_of_an_image_of_more_than_2_24_values_is_numpy_handlers(handler):
    """Beyond 2**24 the float32 indices are rounded; the forward pass
    rounds them as NumpyHandler does."""
    g = Geometry((1, 1032, 1032, 16), (2, 2))
    assert np.prod(g.x_shape) > 2**24
    x = images(g.x_shape, 8)
    expected = g.forward(NumpyHandler(np.float32), x)[1]
    got = g.forward(handler, x)[1]
    assert (expected > 2**24).any()
    np.testing.assert_array_equal(got, expected)
