"""Pooling ops refuse operand sizes that break their contract.

As for the convolution ops (tests/handlers/test_conv_geometry.py): a
stride of 1.5 was cut to 1 by OneDnnHandler and failed with a bare
TypeError in NumpyHandler; a negative padding, a window or stride of 0
or outputs of another size than the geometry gives were computed
silently (oneDNN derives the bottom and right padding from the outputs)
or failed with bare ZeroDivision or Overflow errors.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from tests.onednn_support import onednn_handler

HANDLERS = {
    'numpy': lambda: NumpyHandler(np.float32),
    'onednn32': lambda: onednn_handler(np.float32),
    'onednn64': lambda: onednn_handler(np.float64),
}

# (window, padding, stride, output size) for 6x6 images
GOOD = [((2, 2), 0, (2, 2), (3, 3)), ((3, 3), 1, (1, 1), (6, 6)),
        ((3, 2), (1, 1, 0, 1), (2, 1), (3, 6))]  # fmt: skip
BAD = [
    ((2, 2), 0, (1.5, 1.5), (5, 5)),
    ((2, 2), -1, (1, 1), (3, 3)),
    ((2, 2), 0, (1, 1), (6, 6)),
    ((2, 2), 0, (0, 1), (3, 5)),
    ((0, 0), 0, (1, 1), (7, 7)),
    ((2.5, 2), 0, (1, 1), (4, 5)),
]


def _run(handler, kind, window, padding, stride, out_hw):
    rnd = np.random.RandomState(0)
    dtype = handler.dtype
    x = rnd.randn(2, 6, 6, 3).astype(dtype)
    y = np.zeros((2, *out_hw, 3), dtype)
    dx, dy = np.zeros_like(x), np.ones_like(y)
    if kind == 'max':
        argmax = np.zeros(y.shape, dtype)
        handler.maxpool2d_forward_batch(x, window, y, padding, stride, argmax)
        handler.maxpool2d_backward_batch(x, window, y, padding, stride, argmax, dx, dy)
    else:
        handler.avgpool2d_forward_batch(x, window, y, padding, stride)
        handler.avgpool2d_backward_batch(x, window, y, padding, stride, dx, dy)
    return y, dx


@pytest.mark.parametrize('kind', ['max', 'avg'])
@pytest.mark.parametrize('make', HANDLERS.values(), ids=HANDLERS)
@pytest.mark.parametrize('window, padding, stride, out_hw', GOOD)
def test_sizes_that_follow_from_the_geometry_are_taken(
    make, kind, window, padding, stride, out_hw
):
    y, dx = _run(make(), kind, window, padding, stride, out_hw)
    reference = _run(NumpyHandler(np.float64), kind, window, padding, stride, out_hw)
    np.testing.assert_allclose(y, reference[0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dx, reference[1], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize('kind', ['max', 'avg'])
@pytest.mark.parametrize('make', HANDLERS.values(), ids=HANDLERS)
@pytest.mark.parametrize('window, padding, stride, out_hw', BAD)
def test_sizes_breaking_the_contract_are_refused(
    make, kind, window, padding, stride, out_hw
):
    handler = make()
    sizes = (
        rf'outputs of size \({out_hw[0]}, {out_hw[1]}\) do not follow from '
        r'images of size \(6, 6\), window'
    )
    with pytest.raises(ValueError, match=sizes):
        _run(handler, kind, window, padding, stride, out_hw)


@pytest.mark.parametrize('kind', ['max', 'avg'])
@pytest.mark.parametrize('make', HANDLERS.values(), ids=HANDLERS)
def test_the_backward_pass_alone_refuses_a_bad_geometry(make, kind):
    handler = make()
    dtype = handler.dtype
    x = np.ones((1, 6, 6, 2), dtype)
    dx, dy = np.zeros_like(x), np.ones((1, 6, 6, 2), dtype)  # stride 1 sizes
    with pytest.raises(ValueError, match='do not follow from images'):
        if kind == 'max':
            argmax = np.zeros(dy.shape, dtype)
            handler.maxpool2d_backward_batch(x, (2, 2), dy, 0, (2, 2), argmax, dx, dy)
        else:
            handler.avgpool2d_backward_batch(x, (2, 2), dy, 0, (2, 2), dx, dy)
    assert not dx.any()
