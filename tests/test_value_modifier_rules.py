"""Rules of the value modifiers at their edges (found by mutation testing).

Each test states one rule of ``brainstorm/value_modifiers.py`` that the
other suites left open: bounds that may be equal, refusals that come before
the first update, limits that round to 0, the norms of rows holding inf or
NaN, sums that stay finite under ``DebugHandler``, ordinary rows that stay
bit for bit the plain computation, views without columns, the one-step
factor at the smallest normal number, the end of the search for large
norms, and masks that a loaded network still applies.
"""

import os

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.utils import ValidationError
from brainstorm.value_modifiers import (
    ClipValues,
    ConstrainL2Norm,
    FreezeValues,
    MaskValues,
)
from tests.handlers.test_debug_overlaps import plain_constrain


def _constrain(handler, values, limit):
    view = handler.create_from_numpy(np.asarray(values, dtype=handler.dtype))
    ConstrainL2Norm(limit)(handler, view)
    return handler.get_numpy_copy(view)


def _plain_constrain(h, values, limit):
    """The computation without any overflow handling, in handler ops."""
    return plain_constrain(h, np.asarray(values, dtype=h.dtype), limit)


# ------------------------------------------------------------ ClipValues ---


def test_clip_values_takes_equal_bounds_and_clips_every_value_to_them():
    """low == high is allowed (only low > high is refused), also from a
    description: every value becomes that bound."""
    mod = ClipValues(0.5, 0.5)
    recreated = create_from_description(get_description(mod))
    for modifier in (mod, recreated):
        h = NumpyHandler(np.float64)
        view = h.create_from_numpy(np.array([[-3.0, 0.5], [0.25, 7.0]]))
        modifier(h, view)
        np.testing.assert_array_equal(h.get_numpy_copy(view), np.full((2, 2), 0.5))
    with pytest.raises(NetworkValidationError, match='low must not be greater'):
        ClipValues(0.5, np.nextafter(0.5, 0.0))


# ------------------------------------- refusals before the first update ---


def _f32_net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(8, name='H') >> out)
    net.set_handler(NumpyHandler(np.float32))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


def _data():
    x = np.random.RandomState(0).rand(1, 40, 4)
    return bs.data_iterators.Minibatches(
        10, default=x, targets=x.argmax(axis=2)[:, :, None] % 3
    )


@pytest.mark.parametrize(
    'view, mod, error, message',
    [
        ('bias', ClipValues(1e39, 1e40), NetworkValidationError, r'low=1e\+39'),
        ('bias', ClipValues(-1e40, -1e39), NetworkValidationError, r'high=-1e\+39'),
        ('bias', MaskValues([1.0] * 7 + [1e39]), NetworkValidationError, r'mask\[7\]'),
        ('bias', MaskValues(np.ones(3)), ValidationError, 'does not fit'),
        ('bias', FreezeValues(np.ones(3)), ValidationError, 'do not fit'),
        (
            'bias',
            FreezeValues([1e39] + [0.0] * 7),
            NetworkValidationError,
            r'weights\[0\]',
        ),
        ('W', ConstrainL2Norm(1e39), NetworkValidationError, r'limit=1e\+39'),
        ('W', ConstrainL2Norm(1e-50), NetworkValidationError, 'rounds to 0'),
    ],
    ids=[
        'clip low',
        'clip high',
        'mask value',
        'mask shape',
        'freeze shape',
        'freeze value',
        'limit too large',
        'limit rounds to 0',
    ],
)
def test_a_modifier_that_cannot_hold_is_refused_before_the_first_update(
    view, mod, error, message
):
    """Trainer.train calls before_training before its first update, and
    each modifier checks there what its first application would refuse:
    the run stops with the parameters it started with (not after an update
    that the modifier then failed to constrain)."""
    net = _f32_net()
    net.set_weight_modifiers({'H': {view: mod}})
    before = net.get('parameters')
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with pytest.raises(error, match=message):
        trainer.train(net, _data())
    np.testing.assert_array_equal(net.get('parameters'), before)


# ------------------------------------------------------- ConstrainL2Norm ---


@pytest.mark.parametrize(
    'dtype, limit', [(np.float32, 1e-50), (np.float32, 1e-46), (np.float16, 1e-8)]
)
def test_a_limit_that_rounds_to_zero_in_the_dtype_is_refused(dtype, limit):
    """A limit of 0 in the handler's dtype would scale every row to 0 (and
    a row of zeros to NaN): it is refused, and the view is left as it is.
    The same limit is no 0 in float64, where it is applied."""
    values = np.array([[3.0, 4.0], [0.0, 0.0]])
    handler = NumpyHandler(dtype)
    view = handler.create_from_numpy(values.astype(dtype))
    with pytest.raises(NetworkValidationError, match='rounds to 0'):
        ConstrainL2Norm(limit)(handler, view)
    np.testing.assert_array_equal(handler.get_numpy_copy(view), values)
    result = _constrain(NumpyHandler(np.float64), values, limit)
    np.testing.assert_allclose(result, [[0.6 * limit, 0.8 * limit], [0.0, 0.0]])


@pytest.mark.parametrize(
    'values',
    [
        [[np.inf, 1.0, 0.5], [3.0, 4.0, 0.0]],
        [[np.nan, 1.0, 0.5], [3.0, 4.0, 0.0]],
        [[-np.inf, 2e19, 0.5], [3.0, 4.0, 0.0], [2e19, 1.0, 1.0]],
    ],
    ids=['inf', 'nan', 'inf and a large row'],
)
def test_a_matrix_holding_inf_or_nan_is_constrained_as_the_plain_computation(
    values,
):
    """With a value that is not finite, the norms are the plain ones (a row
    holding inf has norm inf, factor 0): the result is bit for bit that of
    the computation without overflow handling, and the row holding inf
    keeps no inf (inf * 0 is NaN), so the finite check sees it."""
    values = np.array(values, dtype=np.float32)
    handler = NumpyHandler(np.float32)
    with np.errstate(all='ignore'):
        result = _constrain(handler, values, 1.0)
        expected = _plain_constrain(handler, values, 1.0)
    np.testing.assert_array_equal(result, expected)
    assert not np.isinf(result).any()
    np.testing.assert_array_equal(result[1], np.float32([0.6, 0.8, 0.0]))


def test_the_clip_counts_of_float16_rows_with_many_columns_stay_finite():
    """300000 float16 columns: the bound is 0.25 (300000 * 0.25**2 fits
    float16), ones are clipped; the count of clipped values is summed as
    bound**2 each, which stays finite, so DebugHandler (which refuses an
    op that gives inf) lets the row be scaled to norm 1."""
    values = np.ones((1, 300000))
    result = _constrain(DebugHandler(NumpyHandler(np.float16)), values, 1.0)
    norm = np.sqrt((result.astype(np.float64) ** 2).sum())
    np.testing.assert_allclose(norm, 1.0, rtol=2e-3)


def test_the_bound_keeps_the_sum_of_every_clipped_row_finite():
    """4 float32 columns: the bound b is the largest power of two with
    4 * b**2 <= max (2**62, not 2**63, whose 4 squares sum to 2**128 =
    inf): a row of 3e38s is scaled under DebugHandler."""
    values = np.full((2, 4), 3e38)
    result = _constrain(DebugHandler(NumpyHandler(np.float32)), values, 1.0)
    np.testing.assert_allclose(result, np.full((2, 4), 0.5), rtol=1e-6)


@pytest.mark.parametrize('columns', [2, 3, 5, 8])
def test_ordinary_float16_rows_are_bit_for_bit_the_plain_computation(columns):
    """Values up to 60 in float16 lie below the bound (64 for 5 and 8
    columns, 128 for 2 and 3): the norms and factors are the plain ones,
    bit for bit, also where a smaller bound would send the rows through the
    search for large norms (whose factors are computed in float64)."""
    rng = np.random.default_rng(0)
    values = rng.uniform(-60, 60, (400, columns)).astype(np.float16)
    for limit in (0.1, 0.3, 1.0, 7.0):
        handler = NumpyHandler(np.float16)
        np.testing.assert_array_equal(
            _constrain(handler, values, limit),
            _plain_constrain(handler, values, limit),
        )


def test_a_view_with_rows_but_no_columns_is_checked_and_left_empty():
    """A (3, 0) weight matrix has rows: the limit is checked against the
    dtype (and refused beyond it), and the empty rows are left as they
    are (no division by the 0 columns)."""
    handler = NumpyHandler(np.float32)
    assert _constrain(handler, np.zeros((3, 0)), 1.0).shape == (3, 0)
    view = handler.create_from_numpy(np.zeros((3, 0), dtype=np.float32))
    with pytest.raises(NetworkValidationError, match=r'limit=1e\+39'):
        ConstrainL2Norm(1e39)(handler, view)


def test_a_factor_of_exactly_the_smallest_normal_number_is_applied_in_one_step():
    """float16 [32768, v, w] with limit 2: the row is found at 2**-8 (norm
    128 there), and the factor 2 / 32768 is 2**-14, float16's smallest
    normal number. It is applied in one step, so each value is rounded
    once: v * 2**-14 and w * 2**-14 as float16 rounds them (two steps,
    2**-8 and then 2**-6, would round the subnormal products twice)."""
    values = np.array([[32768.0, 0.0024433135986328125, 0.01416778564453125]])
    result = _constrain(NumpyHandler(np.float16), values, 2.0)
    expected = (values * 2.0**-14).astype(np.float16)
    np.testing.assert_array_equal(result, expected)
    assert result[0, 1] == np.float16(3 * 2.0**-24)


@pytest.mark.parametrize(
    'rows', [[[1.5 * 2.0**1023]], [[1.5 * 2.0**1023, 0.0], [3.0, 4.0]]]
)
def test_a_float64_row_whose_norm_is_the_limit_near_the_top_stays_as_it_is(rows):
    """A norm of 1.5 * 2**1023 equal to the limit, found at the power
    2**-1024: the row is within the limit and keeps its values (the factor
    is 1, not limit / 2**1024, which overflows float64)."""
    limit = 1.5 * 2.0**1023
    result = _constrain(NumpyHandler(np.float64), rows, limit)
    np.testing.assert_array_equal(result, np.array(rows))


class _ClipCounter(NumpyHandler):
    def __init__(self, dtype):
        super().__init__(dtype)
        self.clips = 0

    def clip_t(self, a, a_min, a_max, out):
        self.clips += 1
        super().clip_t(a, a_min, a_max, out)


def test_the_search_for_large_norms_ends_when_every_row_is_found():
    """float32 [2e19, 1] (2 columns, bound 2**63 = 9.2e18): the sums are
    clipped once, then the row is tried at 2**0, 2**-1 and 2**-2, where
    5e18 is below the bound; no further power of two is tried (each try
    reads the device)."""
    handler = _ClipCounter(np.float32)
    result = _constrain(handler, [[2e19, 1.0], [3.0, 4.0]], 1.0)
    # a rule of cost, not of the result: the search stops at the power
    # that finds the last row
    assert handler.clips <= 1 + 3
    np.testing.assert_allclose(
        np.sqrt((result.astype(np.float64) ** 2).sum(axis=1)), [1.0, 1.0], rtol=1e-6
    )


# ------------------------------------------------------------ MaskValues ---


def test_a_loaded_network_applies_its_mask_values(tmp_path):
    """A MaskValues recreated from the network file is a whole modifier
    (with its random state, which the network seeds before each
    application): the loaded network masks as the saved one does."""
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(2, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    mask = np.array([[1.0, 0.0, 1.0, 0.0], [0.0, 1.0, 0.0, 1.0]])
    net.set_weight_modifiers({'H': {'W': MaskValues(mask)}})
    path = os.path.join(tmp_path, 'net.h5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    weights = loaded.get('H.parameters.W')
    loaded.apply_weight_modifiers()
    np.testing.assert_array_equal(loaded.get('H.parameters.W'), weights * mask)
