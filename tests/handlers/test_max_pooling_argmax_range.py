"""Max pooling refuses images whose cells ``argmax`` cannot name exactly.

``argmax`` holds flat in-image indices (up to ``H * W * C - 1``) in the
handler's float dtype, exact up to 2**24 cells per image in float32.
Beyond, NumpyHandler's backward pass sent deltas to neighbouring cells, and
OneDnnHandler's result depended on whether it still held the forward
pass's workspace. The ops now raise a ValueError saying so.
"""

import numpy as np
import pytest

from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers import _numpy_maxpool as _maxpool
from tests.onednn_support import onednn_handler

HANDLERS = {
    'numpy': lambda: NumpyHandler(np.float32),
    'onednn': lambda: onednn_handler(np.float32),
    'debug': lambda: DebugHandler(NumpyHandler(np.float32)),
}


def arrays(handler, shape):
    """Inputs of ``shape`` (a read-only view: no memory), 2x2 outputs."""
    n, h, w, c = shape
    inputs = np.broadcast_to(np.float32(1.0), shape)
    pooled = (n, h // 2, w // 2, c)
    outputs, argmax, out_deltas = (np.zeros(pooled, np.float32) for _ in range(3))
    if isinstance(handler, DebugHandler):  # it takes its own arrays
        inputs = handler.create_from_numpy(np.ascontiguousarray(inputs))
        outputs, argmax, out_deltas = (
            handler.create_from_numpy(a) for a in (outputs, argmax, out_deltas)
        )
    return inputs, outputs, argmax, out_deltas


@pytest.mark.parametrize('name', HANDLERS)
@pytest.mark.parametrize(
    ('shape', 'largest'),
    [
        ((1, 4098, 4096, 1), 4098 * 4096),  # more cells than 2**24
        # 2**24 cells, but argmax is computed as (index of the window's
        # first cell) + (window rank) * C, which reaches 2**24 + C - 1
        ((1, 4096, 2048, 2), 2**24 + 1),
    ],
)
def test_geometries_whose_indices_pass_2_to_the_24_are_refused(name, shape, largest):
    handler = HANDLERS[name]()
    inputs, outputs, argmax, out_deltas = arrays(handler, shape)
    with pytest.raises(ValueError, match=rf'argmax.*exact up to 16777216.*{largest}'):
        handler.maxpool2d_forward_batch(inputs, (2, 2), outputs, 0, (2, 2), argmax)
    if name != 'debug':  # backward too, before touching any memory
        in_deltas = np.broadcast_to(np.float32(0.0), shape)
        with pytest.raises(ValueError, match='maxpool2d_backward_batch.*argmax'):
            handler.maxpool2d_backward_batch(
                inputs, (2, 2), outputs, 0, (2, 2), argmax, in_deltas, out_deltas
            )


@pytest.mark.parametrize('name', ['numpy', 'onednn'])
def test_indices_up_to_2_to_the_24_are_exact(name):
    """4096 x 4096 x 1 images in 2 x 2 windows: the largest index computed
    is 2**24 itself; the last cell's, 2**24 - 1, comes out exact."""
    handler = HANDLERS[name]()
    inputs = np.zeros((1, 4096, 4096, 1), np.float32)
    inputs[0, -1, -1, -1] = 1.0  # the maximum of the last window, last cell
    outputs = np.zeros((1, 2048, 2048, 1), np.float32)
    argmax = np.zeros_like(outputs)
    handler.maxpool2d_forward_batch(inputs, (2, 2), outputs, 0, (2, 2), argmax)
    assert int(argmax[0, -1, -1, -1]) == 2**24 - 1
    assert int(argmax[0, -1, -2, 0]) == (4094 * 4096 + 4092)  # a 0 max: first cell


def geometries():
    """Small geometries: padding per side, strides, windows beyond the image."""
    rng = np.random.RandomState(5)
    for _ in range(300):
        h, w, c = rng.randint(1, 9, 3)
        kh, kw = rng.randint(1, 6, 2)
        sy, sx = rng.randint(1, 4, 2)
        sides = tuple(int(p) for p in rng.randint(0, 3, 4))
        top, bottom, left, right = sides
        if kh <= top or kw <= left:  # a first window of padding only
            continue
        oh = (h + top + bottom - kh) // sy + 1
        ow = (w + left + right - kw) // sx + 1
        if oh < 1 or ow < 1:
            continue
        yield (h, w, c), (kh, kw), (oh, ow), sides, (sy, sx)


def test_the_largest_number_is_the_largest_that_max_pooling_computes():
    """Against the very numbers NumpyHandler computes (float64, exact):
    every ``shifted`` of ``ranked_base`` and the largest ``rank * C``."""
    handler = NumpyHandler(np.float64)
    checked = 0
    for image, window, out_hw, sides, stride in geometries():
        top_left = (sides[0], sides[2])
        c = image[2]
        top, shifted = _maxpool.ranked_base(
            handler, window, top_left, stride, out_hw + (c,), image[1]
        )
        expected = max(int(shifted.max()), top * c)
        got = _maxpool.largest_argmax_number(image, window, out_hw, sides, stride)
        assert got == expected, (image, window, out_hw, sides, stride)
        checked += 1
    assert checked > 100


def test_a_handler_computing_indices_in_integers_is_held_to_the_image_size():
    """PyCudaHandler's kernels compute indices in integers: only the
    largest index stored, H * W * C - 1, must be exact. 'Same' max pooling
    of a 4096 x 4096 x 1 image passes there; on the CPU handlers, whose
    arithmetic reaches 2**24 + 4097, it is refused."""
    inputs = np.broadcast_to(np.float32(0.0), (1, 4096, 4096, 1))
    outputs = np.broadcast_to(np.float32(0.0), (1, 4096, 4096, 1))
    geometry = ((3, 3), outputs, 1, (1, 1), np.float32)
    _maxpool.check_argmax_range('op', inputs, *geometry, integers=True)
    with pytest.raises(ValueError, match='op: .*numbers up to 16781313'):
        _maxpool.check_argmax_range('op', inputs, *geometry)
    bigger = np.broadcast_to(np.float32(0.0), (1, 2049, 4096, 2))
    with pytest.raises(ValueError, match=f'numbers up to {2049 * 4096 * 2 - 1}'):
        _maxpool.check_argmax_range('op', bigger, *geometry, integers=True)
