"""Rules of NumpyHandler's value ops that the op table does not state.

NumpyHandler is the reference every other handler is compared with, and a
wrong forward value is invisible to the gradient checks (they compare the
backward pass with the forward one): each rule here is one that a mutant of
``brainstorm/handlers/numpy_handler.py`` broke without a test noticing.
"""

import re
import warnings

import numpy as np
import pytest

from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler


def _ones_kept(h):
    """Whether the handler keeps the column of ones of the column sums."""
    return 'ones' in h._constants


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('shape', [(64, 7), (100, 3), (64, 64), (70, 70)])
@pytest.mark.parametrize('keepdims', [False, True])
def test_row_sums_of_tall_matrices(dtype, shape, keepdims):
    """Sums over axis 1 are row sums however many rows there are: the
    product with ones serves only the column sums (axis 0) of tall
    matrices, and a square one would give column sums in the rows' place."""
    rnd = np.random.RandomState(shape[0])
    h = NumpyHandler(dtype)
    a = rnd.randn(*shape).astype(dtype)
    out = np.zeros((shape[0], 1) if keepdims else (shape[0],), dtype)
    h.sum_t(a, 1, out)
    expected = a.astype(np.float64).sum(axis=1)
    np.testing.assert_allclose(out.reshape(-1), expected, rtol=1e-5, atol=1e-5)
    assert not _ones_kept(h)


@pytest.mark.parametrize(
    'shape, axis, product',
    [
        ((63, 5), 0, False),
        ((64, 5), 0, True),
        ((65, 5), 0, True),
        ((1, 5), 0, False),
        ((200,), 0, False),
        ((200, 5), 1, False),
        ((200, 5), None, False),
    ],
)
def test_only_column_sums_of_64_rows_or_more_run_as_a_product(shape, axis, product):
    """From 64 rows a matrix's column sums run as a product with a kept
    column of ones (BLAS, about 5x faster there); fewer rows, a vector,
    row sums and the sum of everything are NumPy reductions, which keep no
    constant. Either way the sums are the same."""
    rnd = np.random.RandomState(len(shape) + shape[0])
    h = NumpyHandler(np.float64)
    a = rnd.randn(*shape)
    if axis is None:
        out, expected = np.zeros(1), np.array([a.sum()])
    else:
        expected = a.sum(axis=axis)
        out = np.zeros(expected.shape or (1,))
    h.sum_t(a, axis, out)
    np.testing.assert_allclose(out, expected.reshape(out.shape), rtol=1e-12)
    assert _ones_kept(h) == product
    if product:
        assert len(h._constants['ones']) == shape[0]


@pytest.mark.parametrize(
    'ids, shown',
    [
        ([[0.0], [4.0]], '[0, 4)'),  # the number of rows: one past the last
        ([[5.0], [1.0]], '[0, 4)'),  # below the row width (6), beyond the rows
        ([[-1.0], [2.0]], '[0, 4)'),  # would wrap around to the last row
        ([[1.5], [2.0]], 'whole numbers'),  # would be cut to row 1
        ([[np.nan], [2.0]], 'whole numbers'),  # would be cast to a huge index
    ],
)
def test_gather_refuses_ids_outside_the_table_before_it_writes(ids, shown):
    """gather_m_by_v looks rows up with NumPy's clipping ``take``, which
    would answer any id with some row: the ids are checked against the
    table's rows first, and a refused call writes nothing and warns of
    nothing (a NaN id cast to an index would)."""
    h = NumpyHandler(np.float64)
    table = np.arange(24.0).reshape(4, 6)
    out = np.full((2, 6), -7.0)
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        with pytest.raises(NetworkValidationError, match=re.escape(shown)):
            h.gather_m_by_v(table, np.array(ids), out)
    assert (out == -7.0).all()
    h.gather_m_by_v(table, np.array([[3.0], [0.0]]), out)  # the last row is valid
    np.testing.assert_array_equal(out, table[[3, 0]])


def _masked_softmax(x, mask, causal):
    """The softmax of each query's real keys by explicit loops (float64)."""
    out = np.zeros(x.shape)
    for t in range(x.shape[0]):
        for b in range(x.shape[1]):
            if mask is not None and mask[t, b, 0] == 0:
                continue
            keys = [
                s
                for s in range(x.shape[-1])
                if (mask is None or mask[s, b, 0] != 0) and (not causal or s <= t)
            ]
            for index in np.ndindex(*x.shape[2:-1]):
                if keys:
                    scores = x[(t, b, *index, keys)]
                    e = np.exp(scores - scores.max())
                    out[(t, b, *index, keys)] = e / e.sum()
    return out


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('causal', [False, True])
@pytest.mark.parametrize('queries, keys', [(2, 5), (5, 2), (1, 4)])
@pytest.mark.parametrize('heads', [(), (2,)])
def test_masked_softmax_of_fewer_or_more_queries_than_keys(
    dtype, causal, queries, keys, heads
):
    """x is (T, B, ..., S) with T queries and S keys, which may differ (a
    decoder's new positions against all earlier ones): the key mask is the
    mask's first S entries, the query mask its first T, and causal lets
    query t see the keys s <= t."""
    rnd = np.random.RandomState(queries * 10 + keys)
    h = NumpyHandler(dtype)
    batch = 3
    x = rnd.uniform(-4, 4, (queries, batch, *heads, keys)).astype(dtype)
    mask = np.ones((max(queries, keys) + 1, batch, 1), dtype)
    mask[0, 1] = 0.0  # a padding query and key in the second sequence
    mask[keys - 1, 2] = 0.0  # the last key of the third one
    for m in (None, mask):
        out = np.full(x.shape, np.nan, dtype)
        h.masked_softmax_t(x, m, out, causal=causal)
        expected = _masked_softmax(x.astype(np.float64), m, causal)
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('causal', [False, True])
def test_masked_softmax_of_large_scores_is_finite(dtype, causal):
    """Each row is shifted by its largest real score before exp: scores far
    beyond exp's range (float32 overflows from 89, float64 from 710) give
    the softmax, not inf / inf = NaN."""
    h = NumpyHandler(dtype)
    scores = [[1000.0, 999.0, -1000.0], [5000.0, 4999.0, 4998.0], [-3e3, 3e3, 2999.0]]
    x = np.array(scores, dtype).reshape(3, 1, 3)  # (T, B, S)
    out = np.empty_like(x)
    h.masked_softmax_t(x, None, out, causal=causal)
    expected = _masked_softmax(x.astype(np.float64), None, causal)
    assert np.isfinite(out).all(), out
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize('rows', [2, 17, 63, 64, 100])
def test_float16_column_sums_are_rounded_once_at_any_number_of_rows(rows):
    """Bias gradients of small float16 batches: below 64 rows the column
    sums were added row by row in float16 (2048 + 62 ones gave 2048, not
    2110), from 64 rows in float32 through the product with ones."""
    handler = NumpyHandler(np.float16)
    a = np.ones((rows, 3), np.float16)
    a[0] = 2048
    for out in (np.empty(3, np.float16), np.empty((1, 3), np.float16)):
        handler.sum_t(a, 0, out)
        np.testing.assert_array_equal(out.ravel(), np.float16(2048 + rows - 1))
