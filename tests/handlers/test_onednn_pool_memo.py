"""OneDnnHandler's max pooling keeps each forward pass's workspace for the
backward pass, and takes it only while ``argmax`` holds what that forward
pass wrote; otherwise it translates ``argmax`` into a workspace
(brainstorm/handlers/onednn/_pool.py). Both ways give NumpyHandler's
results.

The deltas are integers here, so every sum is exact and the backward
results of both handlers are compared bit for bit.
"""

import gc
import threading

import numpy as np
import pytest

import brainstorm as bs
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
    # ranks beyond int16: the top rank (kh - 1) * W + kw is 2**15
    Geometry((1, 2, 32766, 1), (2, 2)),
    # a window much wider than the image, of 40000 cells: u * (kw - W)
    # goes beyond int16 on the way (and wraps), the scores do not
    Geometry((1, 150, 2, 1), (200, 200), (25, 25, 99, 99), (1, 1)),
    Geometry((1, 2, 40000, 1), (2, 2)),
    Geometry((1, 3, 20000, 2), (2, 3), (1, 0, 0, 1), (1, 3)),
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


def test_an_image_of_more_than_2_24_values_is_refused_as_numpy_handler_does(handler):
    """Beyond 2**24 the float32 indices would be rounded (deltas sent to
    the wrong cells): both handlers raise the same error."""
    g = Geometry((1, 1032, 1032, 16), (2, 2))
    assert np.prod(g.x_shape) > 2**24
    x = images(g.x_shape, 8)
    errors = []
    for h in (NumpyHandler(np.float32), handler):
        with pytest.raises(ValueError, match='argmax') as info:
            g.forward(h, x)
        errors.append(str(info.value))
    assert errors[0] == errors[1]


def test_repeated_forward_passes_reuse_one_memo(handler):
    """The kept arrays are made once per argmax array and plan (nothing is
    allocated in later training steps)."""
    g = PLAIN
    x = images(g.x_shape, 1)
    _, argmax = g.forward(handler, x)
    (memo,) = handler._per_thread.onednn_pool_memos.values()
    kept = (memo.argmax, memo.workspace)
    handler.maxpool2d_forward_batch(
        x, g.window, np.zeros(g.y_shape, np.float32), g.padding, g.stride, argmax
    )
    (again,) = handler._per_thread.onednn_pool_memos.values()
    assert again is memo
    assert (again.argmax, again.workspace) == kept


def test_an_argmax_array_pooled_by_another_plan_gets_a_new_memo(handler):
    """One argmax array, two geometries with 5 x 5 outputs: a uint8 and an
    int32 workspace. The second forward pass must not write into the first
    one's workspace (too small for int32)."""
    small = Geometry((1, 40, 40, 2), (2, 2), 0, (8, 8))
    large = Geometry((1, 49, 49, 2), (17, 17), 0, (8, 8))
    assert small.y_shape == large.y_shape
    argmax = np.zeros(small.y_shape, np.float32)
    memos = None
    for g, seed in ((small, 1), (large, 2)):
        x = images(g.x_shape, seed)
        handler.maxpool2d_forward_batch(
            x, g.window, np.zeros(g.y_shape, np.float32), g.padding, g.stride, argmax
        )
        np.testing.assert_array_equal(argmax, g.forward(NumpyHandler(np.float32), x)[1])
        memos = handler._per_thread.onednn_pool_memos
        (memo,) = memos.values()
        assert memo.workspace.dtype == (np.uint8 if g is small else np.int32)


def test_the_least_recently_pooled_arrays_go_first(handler, monkeypatch):
    g = PLAIN
    x, dy = images(g.x_shape, 1), deltas(g.y_shape, 2)
    first = g.forward(handler, x)[1]
    others = [g.forward(handler, x)[1] for _ in range(_pool.POOL_MEMOS - 1)]
    memos = handler._per_thread.onednn_pool_memos
    assert len(memos) == _pool.POOL_MEMOS
    # pooling into the first array again makes it the most recent ...
    handler.maxpool2d_forward_batch(
        x, g.window, np.zeros(g.y_shape, np.float32), g.padding, g.stride, first
    )
    # ... so a new array pushes out the second one, not the first
    newest = g.forward(handler, x)[1]
    translations = count_translations(monkeypatch)
    for argmax in (first, newest, *others[1:]):
        g.backward(handler, x, argmax, dy)
    assert translations == []
    g.backward(handler, x, others[0], dy)
    assert len(translations) == 1


def test_replacing_a_memo_keeps_the_others(handler):
    """A full memo table: pooling one of its arrays with another plan
    replaces that array's memo (now the most recent) and pushes out no
    other."""
    g = PLAIN
    x = images(g.x_shape, 1)
    arrays = [g.forward(handler, x)[1] for _ in range(_pool.POOL_MEMOS)]
    memos = handler._per_thread.onednn_pool_memos
    keys = list(memos)
    other = Geometry((3, 13, 13, 8), (3, 3))  # also 6 x 6 outputs
    assert other.y_shape == g.y_shape
    handler.maxpool2d_forward_batch(
        images(other.x_shape, 2), other.window, np.zeros(g.y_shape, np.float32),
        other.padding, other.stride, arrays[5],
    )  # fmt: skip
    assert list(memos) == keys[:5] + keys[6:] + keys[5:6]


@pytest.mark.parametrize('bad', [-7.0, 1e6, 3.5e4])
def test_a_translated_argmax_naming_no_window_cell_stays_in_the_window(handler, bad):
    """An argmax no forward pass wrote may name any cell, or none: the
    workspace still names a cell of the window, so oneDNN reads no memory
    outside the deltas."""
    g = Geometry((2, 9, 7, 3), (3, 3), 1)
    x = images(g.x_shape, 1)
    _, argmax = g.forward(NumpyHandler(np.float32), x)
    argmax[0, 1, 1, 1] = bad
    argmax[1, -1, -1, -1] = bad
    workspace = np.zeros(g.y_shape, np.uint8)
    _pool.workspace_from_argmax(
        handler, argmax, g.window, (1, 1), g.stride, g.x_shape[1:], workspace
    )
    assert workspace.max() <= 8
    # the deltas stay within the input deltas' memory
    dx = g.backward(handler, x, argmax, deltas(g.y_shape, 2))
    assert np.isfinite(dx).all()


def test_changing_batch_sizes_keep_one_memo_per_array(handler, monkeypatch):
    """A smaller last batch pools into a view of the same argmax memory: it
    replaces the memo there instead of adding one, and each backward pass
    still takes the workspace of its own forward pass."""
    memory = np.zeros((8, 6, 6, 8), np.float32)
    translations = count_translations(monkeypatch)
    for n in (8, 3, 8, 5):
        g = Geometry((n, 12, 12, 8), (2, 2))
        x, dy = images(g.x_shape, n), deltas(g.y_shape, n)
        argmax = memory[:n]
        handler.maxpool2d_forward_batch(
            x, g.window, np.zeros(g.y_shape, np.float32), g.padding, g.stride, argmax
        )
        got = g.backward(handler, x, argmax, dy)
        np.testing.assert_array_equal(got, g.expected_backward(x, argmax, dy))
    assert len(handler._per_thread.onednn_pool_memos) == 1
    assert translations == []


def _pooling_net(handler, seed=0):
    inp, out = bs.tools.get_in_out_layers('classification', (8, 8, 3), 4)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(4, kernel_size=(3, 3), padding=1, name='C')
        >> bs.layers.Pooling2D(type='max', kernel_size=(2, 2), stride=(2, 2), name='P')
        >> bs.layers.Pooling2D(type='max', kernel_size=(2, 2), stride=(2, 2), name='Q')
        >> out
    )
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=seed)
    return net


def _step(net, batch_size, seed=0):
    rng = np.random.RandomState(seed)
    net.provide_external_data(
        {
            'default': rng.rand(1, batch_size, 8, 8, 3).astype(np.float32),
            'targets': rng.randint(0, 4, (1, batch_size, 1)),
        }
    )
    net.forward_pass(training_pass=True)
    net.backward_pass()


def test_other_batch_sizes_of_one_network_keep_one_memo_per_pooling_layer(handler):
    # another batch size puts the network's argmax at other addresses of
    # the same buffer: the memos of the old layout were kept, one set per
    # batch size (the docs said a smaller last batch replaced them)
    net = _pooling_net(handler)
    for batch_size in (20, 12, 20, 7, 3):
        _step(net, batch_size)
        assert len(handler._per_thread.onednn_pool_memos) == 2


def test_the_memos_of_a_dropped_network_go_with_the_next_memo(handler):
    # a hyperparameter search: networks made, trained and dropped on one
    # (the shared default) handler kept up to POOL_MEMOS memos of networks
    # that were gone, 132 MB after 16 small CNNs
    for trial in range(5):
        net = _pooling_net(handler, seed=trial)
        _step(net, 10 + trial)
        del net
        gc.collect()
    _step(_pooling_net(handler), 4)
    assert len(handler._per_thread.onednn_pool_memos) == 2
