"""Gradient clipping where the numbers leave the dtype's normal range.

* The clip factor ``clip_norm / norm`` was handed to the handler as one
  number and rounded to float16: below 6e-8 it was 0 (the gradients all
  zeroed, no update at all), below 6.1e-5 subnormal and off by up to 50%
  (``clip_norm=4e-3`` clipped gradients of norm 8.9e4 to a norm of 0.0053).
  float32 had the same below 1.2e-38. A factor below the dtype's smallest
  normal number is now applied as its fraction and powers of two that the
  dtype holds exactly.
* The squares of the gradients were summed in the dtype, where those of
  small gradients underflow (float16: 0 below |g| near 2.4e-4): 9e6
  gradients of 5e-5 (norm 0.15) had the norm 0 and were not clipped to
  0.05. A sum that may have lost a part of itself in the underflow is taken
  again from gradients scaled up by a power of two (exact).
"""

import tracemalloc

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.training.steppers import SgdStepper
from tests.training.nets import CountingHandler

# the relative precision of a norm summed in the dtype
NORM_RTOL = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-12}


def linear_net(dtype, inputs, handler=None):
    """``y = W x + b``, ``inputs + 1`` parameters, all zero."""
    inp, out = bs.tools.get_in_out_layers('regression', inputs, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(handler or NumpyHandler(dtype))
    net.initialize(0.0)
    return net


def given_gradients(monkeypatch, net, gradients):
    """The passes of ``net`` leave ``gradients`` as its gradients."""

    def backward_pass(**kwargs):
        net.buffer.gradients[:] = gradients

    monkeypatch.setattr(net, 'forward_pass', lambda **kwargs: None)
    monkeypatch.setattr(net, 'backward_pass', backward_pass)


def exact_norm(values) -> float:
    """The L2 norm of ``values`` in float64, with no underflow."""
    values = np.asarray(values, dtype=np.float64)
    largest = float(np.max(np.abs(values)))
    return largest * float(np.linalg.norm(values / largest)) if largest else 0.0


def clipped(monkeypatch, dtype, values, clip_norm):
    """The stepper and the gradients after one step clipping ``values``."""
    values = np.asarray(values).astype(dtype)
    net = linear_net(dtype, values.size - 1)
    given_gradients(monkeypatch, net, values)
    stepper = SgdStepper(0.0, clip_norm=clip_norm)
    stepper.start(net)
    stepper.run()
    return stepper, net.get('gradients')


def assert_scaled_as_rounded(dtype, values, factor, gradients):
    """``gradients`` are ``values * factor`` rounded to ``dtype``, each within
    one unit in the last place (the fraction and the power of two round
    apart)."""
    exact = np.asarray(values).astype(dtype).astype(np.float64) * factor
    rounded = exact.astype(dtype)
    ulp = np.spacing(np.abs(rounded)).astype(np.float64)
    off = np.abs(gradients.astype(np.float64) - rounded.astype(np.float64))
    worst = int(np.argmax(off / ulp))
    assert (off <= ulp).all(), (
        f'{np.dtype(dtype).name} gradients scaled by {factor!r}: at index '
        f'{worst} got {gradients[worst]!r}, expected {rounded[worst]!r} '
        f'(exact {exact[worst]!r}, one ulp {ulp[worst]!r})'
    )


# ------------------------------------------------------ the clip factor ---


def hunters_net():
    """The numerics hunter's float16 network: gradients of norm 8.9e4."""
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('regression', 400, 400)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float16))
    net.initialize(bs.initializers.Gaussian(0.01))
    rnd = np.random.RandomState(0)
    net.provide_external_data(
        {'default': rnd.rand(1, 4, 400) * 4.0, 'targets': rnd.rand(1, 4, 400) * 200.0}
    )
    return net


@pytest.mark.parametrize('clip_norm', [4e-3, 1e-3])
def test_float16_gradients_are_clipped_to_a_clip_norm_far_below_their_norm(clip_norm):
    """The hunter's case: gradients of norm 8.9e4, clip_norm 1e-3 (factor
    1.1e-8, was 0: no update at all) or 4e-3 (factor 4.5e-8, was rounded
    to 6e-8: a norm of 0.0053)."""
    net = hunters_net()
    stepper = SgdStepper(learning_rate=0.0, clip_norm=clip_norm)
    stepper.start(net)
    with np.errstate(over='ignore'):  # the loss, 0.5 * 200**2 * 400, overflows
        stepper.run()
    assert 8.8e4 < stepper.last_gradient_norm < 9e4
    gradients = net.get('gradients')
    assert exact_norm(gradients) == pytest.approx(clip_norm, rel=1e-2, abs=0.0)


@pytest.mark.parametrize('clip_norm', [30.0, 0.1, 4e-3, 1e-3, 1e-6])
def test_float16_clip_factors_below_the_normal_range_are_applied_whole(
    monkeypatch, clip_norm
):
    """Gradients of norm near 6300 and factors from 4.8e-3 (one number, as
    before) down to 1.6e-10 (three powers of two after the fraction): each
    clipped gradient is the gradient times the factor, rounded to float16."""
    values = np.random.RandomState(1).randn(4000) * 100.0
    stepper, gradients = clipped(monkeypatch, np.float16, values, clip_norm)
    factor = clip_norm / stepper.last_gradient_norm
    assert_scaled_as_rounded(np.float16, values, factor, gradients)
    assert exact_norm(gradients) > 0.0


def test_float32_clip_factors_below_its_normal_range_are_applied_whole(monkeypatch):
    """float32 gradients near 1e30 clipped to 1e-10: the factor, near
    3e-42, was a float32 subnormal with 14 bits; the clipped gradients are
    normal numbers and now rounded from the whole factor."""
    values = np.random.RandomState(2).randn(1000) * 1e30
    stepper, gradients = clipped(monkeypatch, np.float32, values, 1e-10)
    factor = 1e-10 / stepper.last_gradient_norm
    assert factor < float(np.finfo(np.float32).tiny)
    assert_scaled_as_rounded(np.float32, values, factor, gradients)
    assert exact_norm(gradients) == pytest.approx(1e-10, rel=1e-6, abs=0.0)


@pytest.mark.parametrize('dtype', [np.float16, np.float32])
def test_a_clip_factor_too_small_for_any_gradient_zeroes_them(monkeypatch, dtype):
    """A factor at which the largest number of the dtype becomes 0 (here
    1e-300 / 2e3): every gradient is 0, in a few passes (not one per power
    of two the dtype holds)."""
    values = np.linspace(-1000.0, 1000.0, 6)
    stepper, gradients = clipped(monkeypatch, dtype, values, 1e-300)
    assert stepper.last_gradient_norm == pytest.approx(exact_norm(values), rel=1e-3)
    np.testing.assert_array_equal(gradients, np.zeros(6))


# ---------------------------------------------------------- the norm ---


def norm_cases():
    """name -> (dtype, gradients whose squares underflow ``dtype``)."""
    few_large = np.full(100_000, 5e-5)
    few_large[:4] = 5e-3
    smallest = np.zeros(20)
    smallest[7] = np.finfo(np.float16).smallest_subnormal
    return {
        # the hunter's case, smaller: every square 0 in float16
        'float16 all lost': (np.float16, np.full(200_000, 5e-5)),
        # the sum 1e-4 is a normal number, but 3/4 of it was lost
        'float16 mostly lost': (np.float16, few_large),
        # subnormal gradients: three passes
        'float16 subnormal': (np.float16, np.full(1000, 1e-7)),
        'float16 smallest': (np.float16, smallest),
        'float16 mixed': (
            np.float16,
            np.random.RandomState(3).randn(30_000)
            * 10.0 ** np.random.RandomState(4).uniform(-7, -2, 30_000),
        ),
        'float32 all lost': (np.float32, np.full(100, 1e-25)),
        'float64 all lost': (np.float64, np.linspace(1e-170, 3e-170, 100)),
    }


@pytest.mark.parametrize('case', list(norm_cases()))
def test_gradients_whose_squares_underflow_get_their_norm(monkeypatch, case):
    """last_gradient_norm within the dtype's precision of the float64 norm
    (was 0, or for 'mostly lost' half of it)."""
    dtype, values = norm_cases()[case]
    values = values.astype(dtype)
    stepper, gradients = clipped(monkeypatch, dtype, values, 1e300)
    assert stepper.last_gradient_norm == pytest.approx(
        exact_norm(values), rel=NORM_RTOL[dtype], abs=0.0
    )
    np.testing.assert_array_equal(gradients, values)  # not clipped


@pytest.mark.parametrize(
    'case', ['float16 all lost', 'float16 mostly lost', 'float32 all lost']
)
def test_gradients_whose_squares_underflow_are_clipped(monkeypatch, case):
    """Clipped to half their norm (were not clipped at all: their norm was
    measured 0, or below clip_norm)."""
    dtype, values = norm_cases()[case]
    values = values.astype(dtype)
    clip_norm = exact_norm(values) / 2
    stepper, gradients = clipped(monkeypatch, dtype, values, clip_norm)
    assert exact_norm(gradients) == pytest.approx(clip_norm, rel=3e-3, abs=0.0)
    assert_scaled_as_rounded(
        dtype, values, clip_norm / stepper.last_gradient_norm, gradients
    )


@pytest.mark.parametrize('dtype', [np.float16, np.float32, np.float64])
def test_zero_gradients_have_the_norm_zero(monkeypatch, dtype):
    """All zero: no scale makes the sum larger; the search ends, the norm is
    0 and nothing is clipped."""
    stepper, gradients = clipped(monkeypatch, dtype, np.zeros(50), 1.0)
    assert stepper.last_gradient_norm == 0.0
    np.testing.assert_array_equal(gradients, np.zeros(50))


def test_the_float16_scaled_passes_allocate_nothing(monkeypatch):
    """A float16 step through both new paths (the norm scaled up, a factor
    of 4.5e-8 applied in parts) after a warm-up step: no allocating
    handler op, and no temporary of the gradients' size."""
    values = np.full(200_000, 5e-5).astype(np.float16)
    handler = CountingHandler(np.float16)
    net = linear_net(np.float16, values.size - 1, handler)
    given_gradients(monkeypatch, net, values)
    stepper = SgdStepper(0.0, clip_norm=1e-9)
    stepper.start(net)
    stepper.run()
    handler.calls.clear()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        stepper.run()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert 1e-9 / stepper.last_gradient_norm < 6e-8  # both paths ran
    assert not handler.calls, f'allocating ops called: {dict(handler.calls)}'
    assert peak < values.nbytes / 4, (
        f'a step allocated up to {peak} bytes at once; the gradients take '
        f'{values.nbytes}'
    )
