"""Convolution ops refuse operand sizes that break their contract.

The CPU handlers read the receptive fields through strided views. A
negative stride, a negative padding or outputs of another size than the
geometry gives made NumpyHandler read memory outside the inputs (garbage
such as 4e36, or a segmentation fault for a stride of -1000), and
OneDnnHandler compute with a padding of its own choice (it derives the
bottom and right padding from the outputs) or a stride of 1.5 cut to 1.
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

# (padding, stride, output size) for 6x6 images and a 3x3 kernel
GOOD = [(1, (1, 1), (6, 6)), (1, (2, 2), (3, 3)), ((2, 0, 0, 1), (1, 1), (6, 5))]
BAD = [
    (1, (-1, 1), (6, 6)),
    (1, (0, 1), (6, 6)),
    (1, (1.5, 1), (6, 6)),
    ((0, -1, 0, 0), (1, 1), (3, 4)),
    (1, (2, 2), (6, 6)),  # the outputs of stride 1
    ((2, 0, 0, 0), (1, 1), (6, 6)),  # columns as if padded left and right
    (1, (1, 1), (7, 7)),
]


def _operands(dtype, out_hw):
    rnd = np.random.RandomState(0)
    x = rnd.randn(2, 6, 6, 3).astype(dtype)
    w = rnd.randn(4, 3, 3, 3).astype(dtype)
    return x, w, np.zeros(4, dtype), np.zeros((2, *out_hw, 4), dtype)


@pytest.mark.parametrize('make', HANDLERS.values(), ids=HANDLERS)
@pytest.mark.parametrize('padding, stride, out_hw', GOOD)
def test_sizes_that_follow_from_the_geometry_are_taken(make, padding, stride, out_hw):
    handler = make()
    x, w, b, y = _operands(handler.dtype, out_hw)
    handler.conv2d_forward_batch(x, w, b, y, padding, stride)
    reference = NumpyHandler(np.float64)
    expected = np.zeros(y.shape)
    reference.conv2d_forward_batch(
        x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
        expected, padding, stride,
    )  # fmt: skip
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize('make', HANDLERS.values(), ids=HANDLERS)
@pytest.mark.parametrize('padding, stride, out_hw', BAD)
def test_sizes_breaking_the_contract_are_refused(make, padding, stride, out_hw):
    handler = make()
    x, w, b, y = _operands(handler.dtype, out_hw)
    sizes = (
        rf'outputs of size \({out_hw[0]}, {out_hw[1]}\) do not follow from '
        r'images of size \(6, 6\), window \(3, 3\)'
    )
    with pytest.raises(ValueError, match=sizes):
        handler.conv2d_forward_batch(x, w, b, y, padding, stride)
    assert not y.any()
    dw, db = np.zeros_like(w), np.zeros_like(b)
    with pytest.raises(ValueError, match=sizes):
        handler.conv2d_backward_batch(
            x, w, padding, stride, np.zeros_like(x), np.ones_like(y), dw, db
        )
    assert not dw.any() and not db.any()
