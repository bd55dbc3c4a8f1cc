"""The rules of NumpyHandler's one-pass updates at their edges
(brainstorm/handlers/_numpy_update.py).

tests/handlers/test_numpy_update.py checks that the chunked updates give
the composition's results bit for bit; here: which operands take the
chunked path at all.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler, _numpy_update
from brainstorm.handlers.base_handler import Handler
from tests.handlers.test_numpy_update import (
    UPDATE_OPS,
    assert_bit_identical,
    make_operands,
    scalars,
)

LAYOUTS = {  # layout: (view of a flat array of 48 elements, one flat array)
    '1-D': (lambda a: a, True),
    '1-D strided': (lambda a: a[::2], True),
    '2-D contiguous': (lambda a: a.reshape(4, -1), True),
    '3-D contiguous': (lambda a: a.reshape(2, 3, -1), True),
    '2-D column slice': (lambda a: a.reshape(6, -1)[:, 1:-1], False),
    '2-D transposed': (lambda a: a.reshape(6, -1).T, False),
}


@pytest.mark.parametrize('layout', list(LAYOUTS))
@pytest.mark.parametrize('op', list(UPDATE_OPS))
def test_operands_viewed_as_one_flat_array_take_the_chunked_path(
    monkeypatch, op, layout
):
    """A 1-D view (strided or not) and a C-contiguous view of any number of
    dimensions are updated chunk by chunk, without the composition; a view
    that is no flat array without a copy (a column slice, a transposed
    matrix) takes the composition, which updates it in place."""
    monkeypatch.setattr(_numpy_update, 'UPDATE_CHUNK', 7)
    view, flat = LAYOUTS[layout]
    composed_calls = []
    composition = getattr(Handler, op)
    monkeypatch.setattr(
        Handler,
        op,
        lambda *args: composed_calls.append(op) or composition(*args),
    )
    h = NumpyHandler(np.float32)
    mask = 'mask' if op == 'adam_update' else None
    operands = make_operands(op, np.float32, (48,), mask)
    operands = {k: None if a is None else view(a) for k, a in operands.items()}
    expected = {k: None if a is None else a.copy() for k, a in operands.items()}
    hyper = scalars(op, 0.1 if op == 'adam_update' else None)
    composition(h, *expected.values(), *hyper.values())
    composed_calls.clear()
    getattr(h, op)(*operands.values(), *hyper.values())
    assert composed_calls == ([] if flat else [op])
    assert_bit_identical(f'{op} ({layout})', operands, expected)
