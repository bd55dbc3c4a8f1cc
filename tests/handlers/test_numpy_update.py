"""NumpyHandler's update ops, run chunk by chunk, equal the base class's
composition of general ops bit for bit (brainstorm/handlers/_numpy_update.py).

The base composition is the sequence of ops the steppers ran before the
update ops existed; resumed runs and the reproducibility tests rely on
every handler giving exactly its results.
"""

import tracemalloc

import numpy as np
import pytest

from brainstorm.handlers import DebugHandler, NumpyHandler, _numpy_update
from brainstorm.handlers.base_handler import Handler
from brainstorm.handlers.debug_array import DebugHandlerError
from tests.onednn_support import onednn_handler

# op -> (array operands, those that must be >= 0, scalars); 'mask' is
# replaced by None or a 0/1 array. Learning rates near 1 make the step as
# large as the parameters, so that its rounding shows in their sum.
UPDATE_OPS = {
    'sgd_update': (('parameters', 'gradients'), (), {'learning_rate': 0.37}),
    'momentum_update': (
        ('parameters', 'gradients', 'velocity'),
        (),
        {'learning_rate': 0.37, 'momentum': 0.9},
    ),
    'nesterov_lookahead': (('parameters', 'velocity'), (), {'momentum': 0.93}),
    'nesterov_update': (
        ('parameters', 'gradients', 'velocity'),
        (),
        {'learning_rate': 0.37},
    ),
    'rmsprop_update': (
        ('parameters', 'gradients', 'mean_square', 'scratch'),
        ('mean_square',),
        {'learning_rate': 0.5, 'decay': 0.9, 'epsilon': 1e-8},
    ),
    'adam_update': (
        ('parameters', 'gradients', 'm', 'v', 'mask', 'scratch'),
        ('v',),
        {
            'learning_rate': 0.7,
            'beta1': 0.9,
            'beta2': 0.999,
            'epsilon': 1e-8,
            'step': 7,
            'weight_decay': 0.0,
        },
    ),
}
# Adam's variants: decoupled weight decay (AdamW), with and without a mask
VARIANTS = [(op, None, None) for op in UPDATE_OPS] + [
    ('adam_update', 'no mask', 0.3),
    ('adam_update', 'mask', 0.3),
    ('adam_update', 'mask', 0.0),
]
# smaller than, equal to, a multiple of and no multiple of the chunk
SIZES = (1, 99, 100, 101, 700, 2345)
CHUNK = 100


def make_operands(op, dtype, shape, mask=None, seed=0):
    """Random operands of ``op`` as NumPy arrays (``mask``: None or 0/1)."""
    names, nonnegative, _ = UPDATE_OPS[op]
    rng = np.random.RandomState(seed)
    arrays = {}
    for name in names:
        if name == 'mask':
            keep = rng.uniform(size=shape) < 0.6
            arrays[name] = None if mask is None else keep.astype(dtype)
        elif name in nonnegative:
            arrays[name] = rng.uniform(0.0, 3.0, shape).astype(dtype)
        else:
            arrays[name] = rng.uniform(-3.0, 3.0, shape).astype(dtype)
    return arrays


def scalars(op, weight_decay=None):
    values = dict(UPDATE_OPS[op][2])
    if weight_decay is not None:
        values['weight_decay'] = weight_decay
    return values


def copied(arrays):
    return {k: None if a is None else a.copy() for k, a in arrays.items()}


def assert_bit_identical(op, got, want):
    for name, expected in want.items():
        if name == 'scratch' or expected is None:
            continue  # the scratch content is arbitrary after the op
        assert np.array_equal(got[name], expected), (
            f'{op}: {name!r} differs from the composition in '
            f'{int(np.sum(got[name] != expected))} of {expected.size} elements '
            f'(max |diff| {np.max(np.abs(got[name] - expected)):.3g})'
        )


def run_both(op, dtype, shape, mask, weight_decay, seed=0, views=None):
    """The op on NumpyHandler and as the base composition (on the same
    NumpyHandler's general ops); returns (chunked, composed, handler)."""
    h = NumpyHandler(dtype)
    operands = make_operands(op, dtype, shape, mask, seed)
    if views is not None:
        operands = {k: None if a is None else views(a) for k, a in operands.items()}
    composed = {k: None if a is None else a.copy() for k, a in operands.items()}
    chunked = operands  # views stay views: the op sees their strides
    hyper = scalars(op, weight_decay)
    getattr(h, op)(*chunked.values(), *hyper.values())
    getattr(Handler, op)(h, *composed.values(), *hyper.values())
    return chunked, composed, h


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('op, mask, weight_decay', VARIANTS)
def test_chunked_update_equals_the_composition(
    monkeypatch, op, mask, weight_decay, dtype
):
    monkeypatch.setattr(_numpy_update, 'UPDATE_CHUNK', CHUNK)
    for size in SIZES:
        chunked, composed, h = run_both(
            op, dtype, (size,), mask, weight_decay, seed=size
        )
        assert_bit_identical(f'{op} (size {size})', chunked, composed)
        if op != 'nesterov_lookahead':  # the one update without temporaries
            # the chunked path ran: its scratch is one chunk long
            assert h._scratch[('update_0', dtype)].size == min(CHUNK, size)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('op', list(UPDATE_OPS))
def test_chunked_update_with_the_default_chunk(op, dtype):
    """A few chunks of the default size, the last one partial."""
    size = 2 * _numpy_update.UPDATE_CHUNK + 123
    mask = 'mask' if op == 'adam_update' else None
    weight_decay = 0.1 if op == 'adam_update' else None
    chunked, composed, _ = run_both(op, dtype, (size,), mask, weight_decay)
    assert_bit_identical(op, chunked, composed)


@pytest.mark.parametrize(
    'layout, views',
    [
        ('2-D contiguous', lambda a: a.reshape(3, -1)),
        ('1-D strided', lambda a: a[::2]),
        ('2-D column slice', lambda a: a.reshape(6, -1)[:, 1:-1]),
    ],
)
@pytest.mark.parametrize('op', list(UPDATE_OPS))
def test_other_layouts_equal_the_composition(monkeypatch, op, layout, views):
    """Flat views are chunked; a view that is not (a feature slice of a
    matrix) takes the composition; both leave other elements alone."""
    monkeypatch.setattr(_numpy_update, 'UPDATE_CHUNK', CHUNK)
    mask = 'mask' if op == 'adam_update' else None
    weight_decay = 0.1 if op == 'adam_update' else None
    chunked, composed, _ = run_both(
        op, np.float32, (48,), mask, weight_decay, views=views
    )
    assert_bit_identical(f'{op} ({layout})', chunked, composed)
    for name, a in chunked.items():
        if a is not None and name not in ('scratch', 'mask'):
            assert a.base is not None, 'the operands must stay views'


def test_empty_operands_do_not_raise():
    h = NumpyHandler(np.float32)
    empty = [np.zeros(0, np.float32) for _ in range(3)]
    h.momentum_update(*empty, 0.1, 0.9)
    h.adam_update(*empty, empty[0].copy(), None, empty[0], 0.1, 0.9, 0.9, 1e-8, 1, 0.1)
    assert all(a.size == 0 for a in empty)


def test_chunked_updates_allocate_no_operand_sized_memory():
    """Once warm, an update allocates nothing of the operands' size (its
    temporaries are chunk-sized scratch buffers kept by the handler)."""
    h = NumpyHandler(np.float32)
    size = 8 * _numpy_update.UPDATE_CHUNK  # 1 MiB per operand
    operands = make_operands('adam_update', np.float32, (size,), 'mask')
    hyper = scalars('adam_update', 0.1)
    h.adam_update(*operands.values(), *hyper.values())  # warm-up
    tracemalloc.start()
    try:
        h.adam_update(*operands.values(), *hyper.values())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < size * 4 / 8, f'adam_update allocated {peak} bytes at once'


WRAPPING = {
    'debug-numpy': lambda: DebugHandler(NumpyHandler(np.float64)),
    'onednn': lambda: onednn_handler(np.float32),
}


@pytest.mark.parametrize('kind', list(WRAPPING))
@pytest.mark.parametrize('op', list(UPDATE_OPS))
def test_wrapping_handlers_run_the_chunked_update(monkeypatch, op, kind):
    """DebugHandler passes the op on; the oneDNN handler inherits it."""
    h = WRAPPING[kind]()
    calls = []
    original = getattr(_numpy_update, op)
    monkeypatch.setattr(
        _numpy_update, op, lambda *args: calls.append(op) or original(*args)
    )
    operands = make_operands(op, h.dtype, (11,), 'mask')
    args = [None if a is None else h.create_from_numpy(a) for a in operands.values()]
    getattr(h, op)(*args, *scalars(op).values())
    assert calls == [op]


def test_operands_of_other_shapes_or_dtypes_take_the_composition():
    """The chunks never silently read part of a larger or differently
    shaped operand: such calls do what the base composition does (here:
    raise), and other dtypes than the handler's give its results."""
    h = NumpyHandler(np.float32)
    p, g = np.zeros(10, np.float32), np.ones(20, np.float32)
    with pytest.raises(ValueError):
        h.sgd_update(p, g, 1.0)
    assert not p.any()
    with pytest.raises(ValueError):
        h.sgd_update(np.zeros((3, 4), np.float32), np.ones((4, 3), np.float32), 1.0)
    p64, g64 = np.zeros(5), np.full(5, 1.0 / 3)
    expected = p64.copy()
    Handler.sgd_update(h, expected, g64, 0.1)
    h.sgd_update(p64, g64, 0.1)
    np.testing.assert_array_equal(p64, expected)


def test_debug_handler_rejects_overlapping_update_operands():
    h = DebugHandler(NumpyHandler(np.float32))
    a = h.create_from_numpy(np.arange(10, dtype=np.float32))
    with pytest.raises(DebugHandlerError, match="'parameters' overlaps 'gradients'"):
        h.sgd_update(a[1:], a[:-1], 1.0)
