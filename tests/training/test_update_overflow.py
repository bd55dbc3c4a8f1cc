"""Gradients whose squares overflow the handler's dtype.

* Clipping: the squared norm overflowed float16 from |g| near 256; the
  retry with the gradients scaled by 2**-80 (made for float32) underflowed
  them to 0 in float16, so the norm was 0 and nothing was clipped. The
  scale is now found from the gradients, for every float dtype.
* Adam and RMSProp squared the gradient before multiplying by
  ``1 - beta2`` (``1 - decay``): a float32 gradient of 1e20 (float16: 300)
  made the second moment inf for good, and the parameter never moved
  again (m / inf = 0). torch.optim computes ``(1 - beta2) * g * g`` left
  to right, as the updates do now.
"""

import math

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.base_handler import Handler
from brainstorm.training.steppers import (
    AdamStepper,
    AdamWStepper,
    MultiStepper,
    RMSPropStepper,
    SgdStepper,
)

DTYPES = [np.float16, np.float32, np.float64]
# the relative precision of a norm summed in the dtype
NORM_RTOL = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-12}


# ------------------------------------------------------------- clipping ---


def linear_net(dtype, inputs):
    """``y = W x + b``, ``inputs + 1`` parameters, all zero."""
    inp, out = bs.tools.get_in_out_layers('regression', inputs, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(dtype))
    net.initialize(0.0)
    return net


def given_gradients(monkeypatch, net, gradients):
    """The passes of ``net`` leave ``gradients`` as its gradients."""

    def backward_pass(**kwargs):
        net.buffer.gradients[:] = gradients

    monkeypatch.setattr(net, 'forward_pass', lambda **kwargs: None)
    monkeypatch.setattr(net, 'backward_pass', backward_pass)


def recorded_sums(monkeypatch, stepper):
    """The list that records ``(scale, sum of squares)`` of each pass of
    ``stepper``'s gradient norm."""
    calls = []
    squared_norm = stepper._squared_gradient_norm

    def spy(scale=1.0):
        calls.append((scale, squared_norm(scale)))
        return calls[-1][1]

    monkeypatch.setattr(stepper, '_squared_gradient_norm', spy)
    return calls


def exact_norm(values) -> float:
    """The L2 norm of ``values`` in float64, with no overflow."""
    values = np.asarray(values, dtype=np.float64)
    largest = float(np.max(np.abs(values)))
    return largest * float(np.linalg.norm(values / largest))


def gradient_cases(dtype):
    """name -> gradients whose squares (summed in ``dtype``) overflow."""
    info = np.finfo(dtype)
    # float64: norms of its largest numbers are beyond a Python float
    big = float(info.max) * (0.25 if dtype is np.float64 else 1.0)
    root = float(np.sqrt(info.max))
    rnd = np.random.RandomState(0)
    mixed = rnd.randn(1000) * 10.0 ** rnd.uniform(-3, 0, 1000) * root / 4
    mixed[::7] = 0.0
    return {
        # each square fits, their sum does not: 2**17 squares of max / 2**16
        'many': np.full(2**17, root / 256),
        # the largest numbers of the dtype; 7 of them (3 bits) overflow at
        # the scale 2**-((maxexp + 3) // 2) (float16: 2**-9), so the search
        # must start from a smaller one
        'largest': np.array([big, -big, big, -big, big, -big, big * 0.75]),
        # one square overflows, the rest are far below it
        'one large': np.concatenate(([big / 2], np.full(999, root / 1e3))),
        'mixed': np.concatenate((mixed, [root * 2, -root * 3])),
        # a sum just above the largest number: the scale 1/2 does
        'just above': np.full(4, root / 2 * 1.01),
    }


CASES = ['many', 'largest', 'one large', 'mixed', 'just above']


@pytest.mark.parametrize('dtype', DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize('case', CASES)
def test_gradients_whose_squares_overflow_get_their_norm_and_are_clipped(
    monkeypatch, dtype, case
):
    """The norm of gradients whose squared norm overflows the dtype: within
    the dtype's precision of the float64 norm (float16 was 0), and the
    gradients scaled to the clipping norm (float16 was not clipped)."""
    values = gradient_cases(dtype)[case].astype(dtype)
    with np.errstate(over='ignore'):
        assert not np.isfinite(np.sum(values**2, dtype=dtype))
    net = linear_net(dtype, values.size - 1)
    given_gradients(monkeypatch, net, values)
    stepper = SgdStepper(1.0, clip_norm=0.5)
    stepper.start(net)
    with np.errstate(over='raise', invalid='raise'):  # all handled, or raised
        stepper.run()
    expected = exact_norm(values)
    assert stepper.last_gradient_norm == pytest.approx(expected, rel=NORM_RTOL[dtype])
    update = net.get('parameters').astype(np.float64)
    assert exact_norm(update) == pytest.approx(0.5, rel=NORM_RTOL[dtype])
    expected_update = -values.astype(np.float64) * (0.5 / expected)
    np.testing.assert_allclose(
        update, expected_update, rtol=4 * NORM_RTOL[dtype], atol=1e-6 * 0.5
    )


@pytest.mark.parametrize('dtype', DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize('case', CASES)
def test_the_norm_is_taken_at_the_largest_scale_whose_sum_is_finite(
    monkeypatch, dtype, case
):
    """The scales tried are powers of two (exact) below 1 (the sum of the
    gradients as they are overflowed); the norm is the one of the largest
    scale whose sum is finite (twice that scale overflows), so the scaled
    squares are as far above the underflow as they can be; a dozen passes
    at most."""
    values = gradient_cases(dtype)[case].astype(dtype)
    net = linear_net(dtype, values.size - 1)
    given_gradients(monkeypatch, net, values)
    stepper = SgdStepper(0.0, clip_norm=1.0)
    stepper.start(net)
    calls = recorded_sums(monkeypatch, stepper)
    stepper.run()
    assert calls[0] == (1.0, np.inf)
    assert all(scale < 1 for scale, _ in calls[1:])  # not the first sum again
    assert all(math.frexp(scale)[0] == 0.5 for scale, _ in calls), calls
    best, squared = max((s, r) for s, r in calls if math.isfinite(r))
    assert (2 * best, np.inf) in calls
    assert squared > float(np.finfo(dtype).max) / 8
    assert stepper.last_gradient_norm == math.sqrt(squared) / best
    assert len(calls) <= 12


@pytest.mark.parametrize('dtype', DTYPES, ids=lambda d: np.dtype(d).name)
def test_gradients_whose_squares_do_not_overflow_take_one_pass(monkeypatch, dtype):
    """The usual case: one sum of the squares, taken as it is (no scaled
    sums; float16's small gradients would lose bits in them)."""
    values = np.linspace(-3e-3, 2.0, 50).astype(dtype)
    net = linear_net(dtype, values.size - 1)
    given_gradients(monkeypatch, net, values)
    stepper = SgdStepper(0.0, clip_norm=1.0)
    stepper.start(net)
    calls = recorded_sums(monkeypatch, stepper)
    stepper.run()
    assert len(calls) == 1 and calls[0][0] == 1.0
    assert stepper.last_gradient_norm == math.sqrt(calls[0][1])
    assert stepper.last_gradient_norm == pytest.approx(
        exact_norm(values), rel=NORM_RTOL[dtype]
    )


def test_the_float16_gradients_of_a_network_are_clipped():
    """The bug hunter's case: gradients of norm 424 (targets 300 away from
    the predictions), clip_norm 1: last_gradient_norm was 0.0, and the
    update had the norm 424."""
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('regression', 3, 2)
    net = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(2, activation='linear', name='fc') >> out
    )
    net.set_handler(NumpyHandler(np.float16))
    net.initialize(0.0)
    stepper = SgdStepper(learning_rate=1.0, clip_norm=1.0)
    stepper.start(net)
    net.provide_external_data(
        {'default': np.ones((1, 1, 3)), 'targets': np.full((1, 1, 2), -300.0)}
    )
    with np.errstate(over='ignore'):  # the loss, 0.5 * 300**2, overflows
        stepper.run()
    gradients = net.get('gradients').astype(np.float64)
    assert stepper.last_gradient_norm == pytest.approx(600 * np.sqrt(0.5), rel=2e-3)
    assert np.linalg.norm(gradients) == pytest.approx(1.0, rel=2e-3)
    step = net.get('parameters').astype(np.float64)
    np.testing.assert_array_equal(step, -gradients)


def test_a_stepper_of_several_parts_clips_by_the_norm_of_all(monkeypatch):
    """A stepper shared by two layers (two parts; the squares of the second
    overflow float16): the norm over both parts, both clipped."""
    inp, out = bs.tools.get_in_out_layers('regression', 4, 4)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.FullyConnected(4, activation='linear', name='A')
        >> bs.layers.FullyConnected(4, activation='linear', name='B')
        >> out
    )
    net.set_handler(NumpyHandler(np.float16))
    net.initialize(0.0)
    clipped = SgdStepper(1.0, clip_norm=2.0)
    stepper = MultiStepper(
        {'A': clipped, 'Output_projection': clipped, 'default': SgdStepper(0.0)}
    )
    stepper.start(net)
    first, second = [slice(part.start, part.stop) for part in clipped._parts]
    assert first.stop < second.start  # two parts, B's parameters between them
    values = np.zeros(net.buffer.gradients.size)
    values[first] = 30.0
    values[second] = np.linspace(100.0, 300.0, second.stop - second.start)
    values[first.stop : second.start] = 1000.0  # B: neither counted nor clipped
    given_gradients(monkeypatch, net, values)
    with np.errstate(over='raise'):
        stepper.run()
    inside = np.concatenate([values[first], values[second]]).astype(np.float16)
    assert clipped.last_gradient_norm == pytest.approx(exact_norm(inside), rel=2e-3)
    gradients = net.get('gradients').astype(np.float64)
    assert exact_norm(
        np.concatenate([gradients[first], gradients[second]])
    ) == pytest.approx(2.0, rel=2e-3)
    assert (gradients[first.stop : second.start] == 1000.0).all()


@pytest.mark.parametrize('dtype', DTYPES, ids=lambda d: np.dtype(d).name)
def test_the_norm_of_gradients_just_above_the_overflow(monkeypatch, dtype):
    """Squares that sum to just above the dtype's largest number (the scale
    2**-1 does): their norm, not 0 or inf; and just below it the sum is
    taken as it is (the same norm)."""
    info = np.finfo(dtype)
    below = np.full(4, float(np.sqrt(info.max)) / 2 * 0.999, dtype=dtype)
    above = np.full(4, float(np.sqrt(info.max)) / 2 * 1.01, dtype=dtype)
    norms = []
    for values in (below, above):
        net = linear_net(dtype, values.size - 1)
        given_gradients(monkeypatch, net, values)
        stepper = SgdStepper(0.0, clip_norm=1.0)
        stepper.start(net)
        stepper.run()
        assert stepper.last_gradient_norm == pytest.approx(
            exact_norm(values), rel=NORM_RTOL[dtype]
        )
        norms.append(stepper.last_gradient_norm)
    assert norms[0] < norms[1]


def test_non_finite_gradients_still_give_a_non_finite_norm(monkeypatch):
    """An inf among the gradients: the norm is inf (no scale helps), and
    NaN gives NaN; the clipping does not hide them."""
    for bad, check in ((np.inf, np.isinf), (np.nan, np.isnan)):
        net = linear_net(np.float16, 3)
        given_gradients(monkeypatch, net, np.array([300.0, bad, 1.0, 2.0]))
        stepper = SgdStepper(0.0, clip_norm=1.0)
        stepper.start(net)
        with np.errstate(all='ignore'):
            stepper.run()
        assert check(stepper.last_gradient_norm)


# ------------------------------------------------------ Adam and RMSProp ---


def spiked_run(dtype, stepper, spike):
    """``y = b`` (one input, fixed at 0) trained towards the targets
    ``[spike, -1, -1, -1]``; the bias after each step and the state."""
    net = linear_net(dtype, 1)
    stepper.start(net)
    biases = []
    for target in (spike, -1.0, -1.0, -1.0):
        net.provide_external_data(
            {'default': np.zeros((1, 1, 1)), 'targets': np.full((1, 1, 1), target)}
        )
        with np.errstate(over='ignore'):  # the loss of the spike overflows
            stepper.run()
        biases.append(float(net.get('Output_projection.parameters.bias')[0]))
    return biases, stepper.get_state()


SPIKES = [  # name, dtype, stepper, spike, the first step
    ('adam float32', np.float32, lambda: AdamStepper(0.01), -1e20, -0.01),
    (
        'adamw float32',
        np.float32,
        lambda: AdamWStepper(0.01, weight_decay=0.1),
        -1e20,
        -0.01,
    ),
    (
        'rmsprop float32',
        np.float32,
        lambda: RMSPropStepper(0.01, decay=0.9),
        -5e19,
        -0.01 / np.sqrt(0.1),
    ),
    (
        'adam float16',
        np.float16,
        lambda: AdamStepper(0.01, epsilon=1e-4),
        -300.0,
        -0.01,
    ),
    (
        'rmsprop float16',
        np.float16,
        lambda: RMSPropStepper(0.01, decay=0.9, epsilon=1e-4),
        -300.0,
        -0.01 / np.sqrt(0.1),
    ),
]


@pytest.mark.parametrize(
    'dtype, make, spike, first', [s[1:] for s in SPIKES], ids=[s[0] for s in SPIKES]
)
def test_a_gradient_whose_square_overflows_does_not_stop_the_parameter(
    dtype, make, spike, first
):
    """One gradient whose square overflows the dtype: the second moment
    stays finite, the parameter takes the step of the spike and Adam's
    goes on moving at every later step (it stood still from the spike on:
    m / inf = 0). RMSProp's next steps are too small to see after such a
    spike (torch.optim's too: the mean square is near 1e38)."""
    biases, state = spiked_run(dtype, make(), spike)
    for key, value in state.items():
        assert np.isfinite(value).all(), key
    assert biases[0] == pytest.approx(first, rel=2e-3)
    if isinstance(make(), AdamStepper):
        pairs = zip(biases, biases[1:])
        assert all(later < earlier for earlier, later in pairs), biases


def reference_adam(gradients, lr, b1, b2, eps, weight_decay=0.0):
    """Adam(W) of one float64 parameter, ``(1 - b2) * g * g``."""
    theta, m, v, out = 0.0, 0.0, 0.0, []
    for step, g in enumerate(gradients, 1):
        theta -= lr * weight_decay * theta
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat, v_hat = m / (1 - b1**step), v / (1 - b2**step)
        theta -= lr * m_hat / (np.sqrt(v_hat) + eps)
        out.append(theta)
    return out


@pytest.mark.parametrize('weight_decay', [0.0, 0.1], ids=['adam', 'adamw'])
def test_adam_after_a_spike_follows_the_float64_reference(weight_decay):
    """float32 Adam(W) after a gradient of 1e20: the parameters of the
    float64 reference (which squares nothing that overflows)."""
    stepper = (
        AdamWStepper(0.01, weight_decay=weight_decay)
        if weight_decay
        else AdamStepper(0.01)
    )
    biases, _ = spiked_run(np.float32, stepper, -1e20)
    # the bias's gradient is b - target (the loss 0.5 (b - t)**2)
    theta, gradients = 0.0, []
    expected = []
    for target in (-1e20, -1.0, -1.0, -1.0):
        gradients.append(theta - target)
        theta = reference_adam(gradients, 0.01, 0.9, 0.999, 1e-8, weight_decay)[-1]
        expected.append(theta)
    np.testing.assert_allclose(biases, expected, rtol=1e-5)


def test_the_chunked_and_the_composed_updates_agree_on_large_gradients():
    """NumpyHandler's one-pass Adam and RMSProp and the base class's
    composition: the same bits for gradients whose squares overflow
    float32 (both finite now)."""
    rnd = np.random.RandomState(5)
    # up to about 3e19: g * g overflowed, 0.1 * g * g does not
    g = (rnd.randn(1000) * 10.0 ** rnd.uniform(0, 19, 1000)).astype(np.float32)
    h = NumpyHandler(np.float32)
    for op, state_count, hyper in (
        ('adam_update', 2, (0.01, 0.9, 0.999, 1e-8, 3, 0.1)),
        ('rmsprop_update', 1, (0.01, 0.9, 1e-8)),
    ):
        results = []
        for run in (getattr(h, op), lambda *a, op=op: getattr(Handler, op)(h, *a)):
            params = np.ones(1000, np.float32)
            state = [np.zeros(1000, np.float32) for _ in range(state_count)]
            mask = [None] if op == 'adam_update' else []
            scratch = np.zeros(1000, np.float32)
            with np.errstate(over='raise'):
                run(params, g.copy(), *state, *mask, scratch, *hyper)
            results.append((params, *state))
        for chunked, composed in zip(*results):
            assert np.isfinite(chunked).all(), op
            np.testing.assert_array_equal(chunked, composed)


# ------------------------------------------------------------ torch.optim ---


def torch_steps(make_optimizer, gradients, dtype):
    """One torch parameter (starting at 0) after each of ``gradients``."""
    torch = pytest.importorskip('torch')
    parameter = torch.zeros(1, dtype=dtype, requires_grad=True)
    optimizer = make_optimizer([parameter])
    out = []
    for g in gradients:
        parameter.grad = torch.tensor([g], dtype=dtype)
        optimizer.step()
        out.append(parameter.item())
    return out


def brainstorm_steps(monkeypatch, dtype, stepper, gradients):
    """Both parameters of :func:`linear_net` (starting at 0) after each of
    ``gradients`` (given to both)."""
    net = linear_net(dtype, 1)
    stepper.start(net)
    out = []
    for g in gradients:
        given_gradients(monkeypatch, net, np.array([g, g]))
        stepper.run()
        weight, bias = net.get('parameters').astype(np.float64)
        assert weight == bias
        out.append(bias)
    return out


def _optimizers():
    torch = pytest.importorskip('torch')
    return {
        'adam': (
            lambda: AdamStepper(0.01),
            lambda p: torch.optim.Adam(p, lr=0.01),
        ),
        'adamw': (
            lambda: AdamWStepper(0.01, weight_decay=0.1),
            lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.1),
        ),
        'rmsprop': (
            lambda: RMSPropStepper(0.01, decay=0.9),
            lambda p: torch.optim.RMSprop(p, lr=0.01, alpha=0.9, eps=1e-8),
        ),
    }


@pytest.mark.parametrize('name', ['adam', 'adamw', 'rmsprop'])
def test_the_updates_follow_torch_optim(monkeypatch, name):
    """Adam, AdamW and RMSProp: torch.optim's parameters in float64 (to the
    tolerance of the steppers' NumPy references), and in float32 through
    a gradient of 1e20 that torch.optim's ``(1 - beta2) * g * g`` keeps
    finite (5e19 for RMSProp, whose 0.1 * g * g overflows from 5.8e19)."""
    torch = pytest.importorskip('torch')
    make_stepper, make_optimizer = _optimizers()[name]
    rnd = np.random.RandomState(2)
    gradients = list(rnd.randn(8) * 10.0 ** rnd.uniform(-3, 3, 8))
    ours = brainstorm_steps(monkeypatch, np.float64, make_stepper(), gradients)
    theirs = torch_steps(make_optimizer, gradients, torch.float64)
    np.testing.assert_allclose(ours, theirs, rtol=1e-10, atol=1e-13)
    spiked = [-5e19 if name == 'rmsprop' else -1e20, 1.0, 1.0, 1.0]
    ours = brainstorm_steps(monkeypatch, np.float32, make_stepper(), spiked)
    theirs = torch_steps(make_optimizer, spiked, torch.float32)
    assert np.isfinite(theirs).all()
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
