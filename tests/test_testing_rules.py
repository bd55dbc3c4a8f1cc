"""The rules of brainstorm.testing at their edges (found by mutation testing).

Each test states one rule of the layer-test harness: a spec it must refuse
or accept, a deliberately wrong layer it must catch, or a correct one it
must pass. A gap in any of them lets a layer with wrong gradients pass.

Most go through the public checks. The harness's runner (``_Runner``, as
the oneDNN registry test uses it) serves two kinds: the checks of values
after each pass, run on a NumpyHandler, where no read-only block refuses a
write and those checks are what remains; and what a check leaves in the
buffers that the checks after it start from.
"""

import re
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm.testing as testing
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.buffer_views import BufferView
from brainstorm.testing import (
    LayerTestError,
    LayerTestSpecError,
    LayerTestWarning,
    check_spec,
    get_approx_deltas,
    get_approx_gradients,
    get_test_configurations,
    instantiate_layer,
    run_backward_repeatable_test,
    run_context_test,
    run_deltas_accumulate_test,
    run_deltas_test,
    run_forward_results_kept_test,
    run_fresh_layer_test,
    run_gradients_test,
    run_ignored_input_deltas_test,
    run_inference_test,
    run_layer_tests,
    run_repeatable_test,
    run_skip_input_deltas_test,
    run_stale_internals_test,
    set_up_layer,
)
from brainstorm.utils import flatten_time, flatten_time_and_features
from tests.test_testing import (
    CopyLayerImpl,
    OverwritingLayerImpl,
    ScaleInputLayerImpl,
    ScaleLayerImpl,
    ScaleParameterLayerImpl,
    ScratchOutputLayerImpl,
    StaleBackwardLayerImpl,
    TwoInputsLayerImpl,
)
from tests.test_testing_harness_fixes import (
    HfxRnnLayerImpl,
    HfxScratchInForwardInternalLayerImpl,
    HfxSquareScaleLayerImpl,
    HfxWeightDecayInBackwardLayerImpl,
)
from tests.test_testing_harness_r12 import R12EarlySkipLayerImpl

SPEC = {'time_steps': 2, 'batch_size': 2}
TBF = StructureTemplate('T', 'B', 'F')
AB = {'a': (3,), 'b': (3,)}


def _message(layer, spec):
    with pytest.raises(LayerTestError) as info:
        run_layer_tests(layer, spec)
    return str(info.value)


# ------------------------------------------------------------- the spec ---


@pytest.mark.parametrize('missing', ['time_steps', 'batch_size'])
def test_a_size_left_out_is_one_not_zero(missing):
    """An empty buffer would pass any layer: a size left out is 1."""
    spec = dict(SPEC)
    del spec[missing]
    buffers, _ = set_up_layer(instantiate_layer(CopyLayerImpl, {'default': (3,)}), spec)
    expected = {'time_steps': (1, 2, 3), 'batch_size': (2, 1, 3)}[missing]
    assert buffers.inputs.default.shape == expected
    layer = instantiate_layer(OverwritingLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestError, match='overwritten instead of added'):
        run_layer_tests(layer, spec)
    # the steps before the context slots are the size's too
    run_layer_tests(instantiate_layer(HfxRnnLayerImpl, {'default': (3,)}), spec)


def test_a_spec_without_a_seed_is_tested_as_with_seed_1234():
    """The default seed is one seed in every step (the buffers' values, the
    contexts, the output weights): adding seed=1234 to a spec reproduces
    a failure to the digit."""
    wrong = instantiate_layer(RulTanhWithoutDerivativeLayerImpl, {'default': (3,)})
    without = _message(wrong, dict(SPEC))
    assert 'does not match finite differences' in without
    assert _message(wrong, {**SPEC, 'seed': 1234}) == without
    assert _message(wrong, {**SPEC, 'seed': 1235}) != without


@pytest.mark.parametrize(
    'value',
    [np.ones(3), np.ones((1, 2, 3)), np.ones((2, 2, 3, 1)), np.ones((2, 2, 4))],
)
def test_an_input_value_of_another_shape_is_refused(value):
    """Only a scalar is broadcast: a value NumPy would broadcast into the
    buffer (one sample for every step and sample) is not what it names."""
    layer = instantiate_layer(CopyLayerImpl, {'default': (3,)})
    with pytest.raises(ValueError, match=r"input 'default' of shape"):
        set_up_layer(layer, {**SPEC, 'default': value})


@pytest.mark.parametrize('value', [np.ones((1, 3)), np.ones(4)])
def test_a_parameter_value_of_another_shape_is_refused(value):
    layer = instantiate_layer(ScaleLayerImpl, {'default': (3,)})
    with pytest.raises(ValueError, match=r"parameter 'w' of shape"):
        set_up_layer(layer, {**SPEC, 'inits': {'w': value}})


def test_a_scalar_value_fills_the_buffer():
    layer = instantiate_layer(ScaleLayerImpl, {'default': (3,)})
    buffers, manager = set_up_layer(layer, {**SPEC, 'default': 2, 'inits': {'w': 3}})
    h = manager.handler
    assert (h.get_numpy_copy(buffers.inputs.default) == 2).all()
    assert (h.get_numpy_copy(buffers.parameters.w) == 3).all()


@pytest.mark.parametrize(
    'key', ['delta_rtol', 'delta_atol', 'gradient_rtol', 'gradient_atol']
)
def test_a_tolerance_of_zero_is_accepted(key):
    check_spec(instantiate_layer(ScaleLayerImpl, {'default': (3,)}), {key: 0.0})


def test_the_seeds_are_those_the_runner_can_add_to():
    """From 0 to the largest the runner can add 3 to (its last RandomState)."""
    layer = instantiate_layer(CopyLayerImpl, {'default': (3,)})
    largest = 2**32 - 4
    run_layer_tests(layer, {**SPEC, 'seed': largest})
    run_layer_tests(layer, {**SPEC, 'seed': 0})
    for seed in (largest + 1, 2**32):
        with pytest.raises(LayerTestSpecError, match=r"spec\['seed'\] must be"):
            run_layer_tests(layer, {**SPEC, 'seed': seed})


# ------------------------------------------------------------ handlers ---


class _NoColumnsHandler(NumpyHandler):
    """Declines the convolution columns that NumpyHandler keeps."""

    def keeps_conv_columns(self, out_cells: int) -> bool:
        return False


class RulColumnsLayerImpl(CopyLayerImpl):
    """y = x; wants a workspace where its handler keeps columns."""

    def workspace_shapes(self, handler):
        if handler.keeps_conv_columns(1024):
            return OrderedDict(columns=BufferStructure('T', 'B', 3))
        return OrderedDict()


def test_the_layer_gets_the_workspaces_of_the_handler_it_is_set_up_on():
    layer = instantiate_layer(RulColumnsLayerImpl, {'default': (3,)})
    assert 'columns' in layer.internal_shapes  # the test handler's
    handler = DebugHandler(_NoColumnsHandler(np.float64))
    buffers, _ = set_up_layer(layer, SPEC, handler)
    assert 'columns' not in layer.internal_shapes
    assert 'columns' not in BufferView.keys(buffers.internals)
    buffers, _ = set_up_layer(layer, SPEC)
    assert 'columns' in BufferView.keys(buffers.internals)


# ----------------------------------------------------------- activation ---


class RulFixedTanhLayerImpl(CopyLayerImpl):
    """y = tanh(x): its activation is fixed, an attribute and no argument."""

    activation = 'tanh'

    def forward_pass(self, buffers, training_pass=True):
        self.handler.tanh(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        _h.tanh_deriv(
            b.inputs.default,
            b.outputs.default,
            b.output_deltas.default,
            b.internals.tmp,
        )
        _h.add_tt(b.input_deltas.default, b.internals.tmp, b.input_deltas.default)


class RulTanhWithoutDerivativeLayerImpl(RulFixedTanhLayerImpl):
    """y = tanh(x), but its input deltas leave out tanh's derivative."""

    def backward_pass(self, buffers):
        b = buffers
        self.handler.add_tt(
            b.input_deltas.default, b.output_deltas.default, b.input_deltas.default
        )


class RulUnstoredActivationLayerImpl(CopyLayerImpl):
    """Takes an activation argument but keeps no activation attribute."""

    expected_kwargs = {'activation'}


def test_a_fixed_activation_attribute_is_the_layers_activation():
    layer = instantiate_layer(RulFixedTanhLayerImpl, {'default': (3,)})
    run_layer_tests(layer, {**SPEC, 'activation': 'tanh'})
    with pytest.raises(LayerTestSpecError, match="built with activation='tanh'"):
        run_layer_tests(layer, {**SPEC, 'activation': 'sigmoid'})


def test_an_activation_argument_without_an_attribute_is_still_checked():
    layer = instantiate_layer(
        RulUnstoredActivationLayerImpl, {'default': (3,)}, activation='sigmoid'
    )
    with pytest.raises(LayerTestSpecError, match="built with activation='sigmoid'"):
        run_layer_tests(layer, {**SPEC, 'activation': 'tanh'})


class RulHalfDeltasLayerImpl(CopyLayerImpl):
    """y = x, but its input deltas are half what they should be."""

    def backward_pass(self, buffers):
        _h = self.handler
        _h.mult_st(0.5, buffers.output_deltas.default, buffers.internals.tmp)
        _h.add_tt(
            buffers.input_deltas.default,
            buffers.internals.tmp,
            buffers.input_deltas.default,
        )


def test_an_activation_that_cannot_be_told_is_refused():
    """Built without the argument and keeping no attribute: the layer may
    compute any activation, so no configuration's can be said to be tested."""
    layer = instantiate_layer(RulUnstoredActivationLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestSpecError, match='cannot be told'):
        run_layer_tests(layer, {**SPEC, 'activation': 'tanh'})
    run_layer_tests(layer, dict(SPEC))  # no activation asked for


# ------------------------------------------------ each check on its own ---


class RulDamagingLayerImpl(HfxScratchInForwardInternalLayerImpl):
    """Computes dz into its forward internal z, which it reads: wrong only
    for a second backward pass after the same forward pass (the business of
    run_backward_repeatable_test). Skips and overwrites its input deltas
    when asked, correctly."""

    can_overwrite_input_deltas = True

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        dz = self._dz(buffers)
        s = b.parameters.s.reshape((1, self.n))
        dx = flatten_time_and_features(b.input_deltas.default)
        if 'default' in self.overwrite_input_deltas:
            _h.mult_mv(dz, s, dx)
        elif 'default' not in self.skip_input_deltas:
            _h.mult_add_mv(dz, s, dx)
        _h.mult_tt(dz, flatten_time_and_features(b.inputs.default), dz)
        _h.sum_t(dz, 0, b.gradients.s.reshape((1, self.n)))


class RulHalfGradientLayerImpl(ScaleLayerImpl):
    """y = x * w, but its gradient is half what it should be."""

    def _gradient(self, buffers, tmp, dw):
        self.handler.sum_t(tmp, 0, dw)
        self.handler.mult_st(0.5, dw, dw)


class RulPartOutputLayerImpl(CopyLayerImpl):
    """y = x but for the last time step, which it never writes: the value
    left there before is taken as its output."""

    def forward_pass(self, buffers, training_pass=True):
        x, y = buffers.inputs.default, buffers.outputs.default
        self.handler.copy_to(x[:-1], y[:-1])


class RulPartInternalLayerImpl(CopyLayerImpl):
    """y = x + z, z = x but for the last time step, which it never writes."""

    def setup(self, kwargs, in_shapes):
        outputs, parameters, internals = super().setup(kwargs, in_shapes)
        internals['z'] = in_shapes['default']
        return outputs, parameters, internals

    def forward_pass(self, buffers, training_pass=True):
        x, z = buffers.inputs.default, buffers.internals.z
        self.handler.copy_to(x[:-1], z[:-1])
        self.handler.add_tt(x, z, buffers.outputs.default)


class RulPartOutputAtInferenceLayerImpl(RulPartOutputLayerImpl):
    """y = x, but at inference it leaves the last time step unwritten."""

    def forward_pass(self, buffers, training_pass=True):
        if training_pass:
            CopyLayerImpl.forward_pass(self, buffers, training_pass)
        else:
            super().forward_pass(buffers, training_pass)


class RulPartInternalAtInferenceLayerImpl(RulPartInternalLayerImpl):
    """y = 2 x, but at inference z's last time step is left unwritten."""

    def forward_pass(self, buffers, training_pass=True):
        if training_pass:
            self.handler.copy_to(buffers.inputs.default, buffers.internals.z)
        super().forward_pass(buffers, training_pass)


class RulFactorOnSelfLayerImpl(CopyLayerImpl):
    """y = 2 x; the factor for the backward pass is kept on self."""

    def setup(self, kwargs, in_shapes):
        self.factor = 1.0
        return super().setup(kwargs, in_shapes)

    def forward_pass(self, buffers, training_pass=True):
        self.factor = 2.0
        self.handler.mult_st(2.0, buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        self.handler.mult_add_st(
            self.factor, buffers.output_deltas.default, buffers.input_deltas.default
        )


class RulCountingForwardLayerImpl(CopyLayerImpl):
    """y = x + the number of forward passes so far (kept on self)."""

    def setup(self, kwargs, in_shapes):
        self.calls = 0
        return super().setup(kwargs, in_shapes)

    def forward_pass(self, buffers, training_pass=True):
        self.calls += 1
        self.handler.add_st(
            float(self.calls), buffers.inputs.default, buffers.outputs.default
        )


class RulRnnIgnoringContextLayerImpl(HfxRnnLayerImpl):
    """Reads zeros instead of its context at t = 0 (forward and backward
    alike), leaving its context slot as the runner set it."""

    def setup(self, kwargs, in_shapes):
        outputs, parameters, internals = super().setup(kwargs, in_shapes)
        internals['zero'] = BufferStructure('B', 2)
        return outputs, parameters, internals

    def forward_pass(self, buffers, training_pass=True):
        self.handler.fill(buffers.internals.zero, 0.0)
        self._zero = buffers.internals.zero
        super().forward_pass(buffers, training_pass)

    def _previous(self, y, t):
        return y[t - 1] if t else self._zero

    def _context_gradient(self, dHa0, y, dR):
        pass


class RulRnnReadingDeltaContextLayerImpl(HfxRnnLayerImpl):
    """Reads dHa[T], the context slot of a backward internal, which the
    network zeroes: correct."""

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        x, y, Ha, dHa = (
            b.inputs.default,
            b.outputs.default,
            b.internals.Ha,
            b.internals.dHa,
        )
        dy, W, R = b.output_deltas.default, b.parameters.W, b.parameters.R
        T = x.shape[0]
        for t in range(T - 1, -1, -1):
            _h.dot_add_mm(dHa[t + 1], R, dy[t])  # dHa[T] is the context slot
            _h.tanh_deriv(Ha[t], y[t], dy[t], dHa[t])
        dHa_all = flatten_time(dHa[:T])
        _h.dot_add_mm(dHa_all, W, flatten_time(b.input_deltas.default))
        _h.dot_add_mm(dHa_all, flatten_time(x), b.gradients.W, transa=True)
        self._context_gradient(dHa[0], y, b.gradients.R)
        if T > 1:
            _h.dot_add_mm(
                flatten_time(dHa[1:T]),
                flatten_time(y[: T - 1]),
                b.gradients.R,
                transa=True,
            )


CHECKS = [
    run_deltas_test,
    run_gradients_test,
    run_deltas_accumulate_test,
    run_stale_internals_test,
    run_forward_results_kept_test,
    run_repeatable_test,
    run_backward_repeatable_test,
    run_fresh_layer_test,
    run_skip_input_deltas_test,
    run_inference_test,
    run_context_test,
    run_ignored_input_deltas_test,
]


@pytest.mark.parametrize('check', CHECKS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    'layer_class', [HfxSquareScaleLayerImpl, HfxRnnLayerImpl], ids=['scale', 'rnn']
)
def test_each_check_on_its_own_passes_a_correct_layer(check, layer_class):
    """Each check runs the passes it needs: on its own (fresh buffers, no
    pass run before it) it passes a correct layer whose backward pass reads
    what the forward pass left."""
    check(instantiate_layer(layer_class, {'default': (3,)}), dict(SPEC))


@pytest.mark.parametrize(
    'check',
    [c for c in CHECKS if c is not run_backward_repeatable_test],
    ids=lambda c: c.__name__,
)
def test_a_backward_pass_damaging_what_it_reads_is_one_checks_business(check):
    """Each check runs the forward pass again before a backward pass it
    compares, so a layer whose backward pass damages a forward internal it
    reads is named by the backward-repeatability check only."""
    check(instantiate_layer(RulDamagingLayerImpl, {'default': (3,)}), dict(SPEC))
    with pytest.raises(LayerTestError, match='backward-repeatability check'):
        run_backward_repeatable_test(
            instantiate_layer(RulDamagingLayerImpl, {'default': (3,)}), dict(SPEC)
        )


BROKEN = [
    (run_deltas_test, 'TanhWithoutDerivative', "input delta 'default'"),
    (run_gradients_test, 'HalfGradient', "gradient 'w' does not match finite"),
    (run_deltas_accumulate_test, 'Overwriting', 'overwritten instead of added'),
    (run_backward_repeatable_test, 'ScratchInForwardInternal', 'backward-repeat'),
    (run_stale_internals_test, 'StaleBackward', 'backward internals'),
    (run_stale_internals_test, 'PartOutput', 'previous contents of internals'),
    (run_stale_internals_test, 'PartInternal', 'previous contents of internals'),
    (run_inference_test, 'PartOutputAtInference', 'previous contents of internals'),
    (run_inference_test, 'PartInternalAtInference', 'previous contents of internals'),
    (run_fresh_layer_test, 'FactorOnSelf', 'differ when a freshly made'),
    (run_skip_input_deltas_test, 'EarlySkip', 'skip_input_deltas check'),
    (run_repeatable_test, 'CountingForward', r'largest \|difference\| 1\)'),
    (run_context_test, 'RnnIgnoringContext', "context check: output 'default'"),
    (run_layer_tests, 'HalfGradient', "gradient 'w' does not match finite"),
    (run_layer_tests, 'RnnIgnoringContext', "context check: output 'default'"),
]
BROKEN_CLASSES = {
    'TanhWithoutDerivative': RulTanhWithoutDerivativeLayerImpl,
    'HalfGradient': RulHalfGradientLayerImpl,
    'Overwriting': OverwritingLayerImpl,
    'ScratchInForwardInternal': HfxScratchInForwardInternalLayerImpl,
    'StaleBackward': StaleBackwardLayerImpl,
    'PartOutput': RulPartOutputLayerImpl,
    'PartInternal': RulPartInternalLayerImpl,
    'FactorOnSelf': RulFactorOnSelfLayerImpl,
    'PartOutputAtInference': RulPartOutputAtInferenceLayerImpl,
    'PartInternalAtInference': RulPartInternalAtInferenceLayerImpl,
    'EarlySkip': R12EarlySkipLayerImpl,
    'CountingForward': RulCountingForwardLayerImpl,
    'RnnIgnoringContext': RulRnnIgnoringContextLayerImpl,
}


@pytest.mark.parametrize(
    'check, broken, message',
    BROKEN,
    ids=[f'{c.__name__}-{b}' for c, b, _ in BROKEN],
)
def test_each_check_on_its_own_fails_the_layer_it_is_for(check, broken, message):
    layer = instantiate_layer(BROKEN_CLASSES[broken], {'default': (3,)})
    with pytest.raises(LayerTestError, match=message):
        check(layer, dict(SPEC))


def test_a_backward_internals_context_slot_holds_zeros_as_in_a_network():
    """The network zeroes the context slots of backward internals before
    every backward pass (even where it leaves the rest to the layer), so
    the stale-internals check fills only their time steps."""
    for spec in get_test_configurations():
        spec.pop('activation')
        run_layer_tests(
            instantiate_layer(RulRnnReadingDeltaContextLayerImpl, {'default': (3,)}),
            spec,
        )


# ----------------------------------- value checks without read-only blocks ---
# Under another handler than a DebugHandler no op is refused a write: the
# checks of the values after each pass are what remains (the oneDNN
# registry test runs the harness's runner so).


class RulStatisticLayerImpl(CopyLayerImpl):
    """y = x; counts its training passes in a parameter without gradient,
    as BatchNorm keeps its running statistics: correct."""

    computes_no_gradients_for = ('seen',)

    def setup(self, kwargs, in_shapes):
        outputs, _, internals = super().setup(kwargs, in_shapes)
        return outputs, OrderedDict(seen=BufferStructure(1)), internals

    def forward_pass(self, buffers, training_pass=True):
        if training_pass:
            seen = buffers.parameters.seen
            self.handler.add_st(1.0, seen, seen)
        super().forward_pass(buffers, training_pass)


class RulDoublingFirstLayerImpl(Layer):
    """p = 2 a, computed by doubling a in place; declares p independent of b."""

    expected_inputs = {'a': TBF, 'b': TBF}
    independent_outputs = {'p': ('b',)}

    def setup(self, kwargs, in_shapes):
        return OrderedDict(p=in_shapes['a']), OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        a = buffers.inputs.a
        self.handler.mult_st(2.0, a, a)
        self.handler.copy_to(a, buffers.outputs.p)

    def backward_pass(self, buffers):
        self.handler.mult_add_st(2.0, buffers.output_deltas.p, buffers.input_deltas.a)


def _numpy_runner(layer, spec=SPEC):
    return testing._Runner(layer, dict(spec), NumpyHandler(np.float64))


@pytest.mark.parametrize(
    'check, broken, message',
    [
        (
            run_stale_internals_test,
            ScaleInputLayerImpl,
            "forward pass changed the input 'default'",
        ),
        (
            run_stale_internals_test,
            ScaleParameterLayerImpl,
            "forward pass changed the parameter 'w'",
        ),
        (
            run_forward_results_kept_test,
            ScratchOutputLayerImpl,
            "backward pass changed the output 'default'",
        ),
        (
            run_forward_results_kept_test,
            HfxWeightDecayInBackwardLayerImpl,
            "backward pass changed the parameter 'w'",
        ),
        (
            run_inference_test,
            ScaleInputLayerImpl,
            "inference pass changed the input 'default'",
        ),
    ],
    ids=[
        'forward-input',
        'forward-parameter',
        'backward-output',
        'backward-parameter',
        'inference-input',
    ],
)
def test_without_read_only_blocks_the_values_show_a_write(check, broken, message):
    layer = instantiate_layer(broken, {'default': (3,)})
    with pytest.raises(LayerTestError, match=message):
        check(layer, SPEC, _numpy_runner(layer))


def test_without_read_only_blocks_a_forward_write_is_named_before_independence():
    layer = instantiate_layer(RulDoublingFirstLayerImpl, AB)
    with pytest.raises(LayerTestError, match="forward pass changed the input 'a'"):
        run_stale_internals_test(layer, SPEC, _numpy_runner(layer))


def test_a_training_pass_may_update_a_parameter_without_gradient():
    layer = instantiate_layer(RulStatisticLayerImpl, {'default': (3,)})
    run_layer_tests(layer, dict(SPEC))
    run_stale_internals_test(layer, SPEC, _numpy_runner(layer))


def test_run_repeatable_test_leaves_the_buffers_as_it_found_them():
    """The checks after it start from the buffers before it (a statistic a
    training pass updates included)."""
    layer = instantiate_layer(RulStatisticLayerImpl, {'default': (3,)})
    runner = testing._Runner(layer, dict(SPEC))
    before = runner.get(('parameters', 'seen'))
    run_repeatable_test(layer, SPEC, runner)
    assert runner.get(('parameters', 'seen')) == pytest.approx(before)


def test_the_finite_differences_leave_the_values_as_they_were():
    layer = instantiate_layer(ScaleLayerImpl, {'default': (3,)})
    runner = testing._Runner(layer, dict(SPEC))
    weights = runner.random_output_weights(['default'])
    x, w = runner.get(('inputs', 'default')), runner.get(('parameters', 'w'))
    get_approx_deltas(runner, 'default', weights)
    get_approx_gradients(runner, 'w', weights)
    assert np.array_equal(runner.get(('inputs', 'default')), x)
    assert np.array_equal(runner.get(('parameters', 'w')), w)


# ------------------------------------------------------------ NaN values ---


class RulCountingBackwardLayerImpl(CopyLayerImpl):
    """y = x; its input deltas grow with each backward pass (a count kept on
    self)."""

    def setup(self, kwargs, in_shapes):
        self.calls = 0
        return super().setup(kwargs, in_shapes)

    def backward_pass(self, buffers):
        self.calls += 1
        b = buffers
        self.handler.mult_st(
            float(self.calls), b.output_deltas.default, b.internals.tmp
        )
        self.handler.add_tt(
            b.input_deltas.default, b.internals.tmp, b.input_deltas.default
        )


def _with_nan(shape=(2, 2, 3)):
    value = np.random.RandomState(5).randn(*shape)
    value[0, 0, 0] = np.nan
    return value


def test_a_nan_left_as_it_was_is_no_change():
    """Compared bit for bit, NaN equals NaN: an input holding a NaN that the
    layer copies is neither changed nor different between passes (a
    DebugHandler refuses NaN in its ops; another handler lets it through)."""
    layer = instantiate_layer(CopyLayerImpl, {'default': (3,)})
    spec = {**SPEC, 'default': _with_nan()}
    run_repeatable_test(layer, spec, _numpy_runner(layer, spec))
    run_forward_results_kept_test(layer, spec, _numpy_runner(layer, spec))
    run_inference_test(layer, spec, _numpy_runner(layer, spec))


def test_the_backward_repeatability_cause_names_only_what_changed():
    """A layer keeping state on self is told so; an output holding a NaN it
    did not change, and its backward-only internal, are not named."""
    layer = instantiate_layer(RulCountingBackwardLayerImpl, {'default': (3,)})
    spec = {**SPEC, 'default': _with_nan()}
    with pytest.raises(LayerTestError, match='backward-repeatability') as info:
        run_backward_repeatable_test(layer, spec, _numpy_runner(layer, spec))
    message = str(info.value)
    assert 'keeps state between passes on the layer object' in message
    assert 'changed the' not in message


# ------------------------------------------------- several inputs/outputs ---


class RulSplitLayerImpl(Layer):
    """p = a, q = b; p independent of b and q of a, truly."""

    expected_inputs = {'a': TBF, 'b': TBF}
    independent_outputs = {'p': ('b',), 'q': ('a',)}

    def setup(self, kwargs, in_shapes):
        return (
            OrderedDict(p=in_shapes['a'], q=in_shapes['b']),
            OrderedDict(),
            OrderedDict(),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.a, buffers.outputs.p)
        self.handler.copy_to(buffers.inputs.b, buffers.outputs.q)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        _h.add_tt(b.output_deltas.p, b.input_deltas.a, b.input_deltas.a)
        _h.add_tt(b.output_deltas.q, b.input_deltas.b, b.input_deltas.b)


class RulSumOrOverwriteLayerImpl(Layer):
    """y = a + b; overwrites the deltas of exactly the inputs it is asked
    to, and adds to the others: correct."""

    expected_inputs = {'a': TBF, 'b': TBF}
    can_overwrite_input_deltas = True

    def setup(self, kwargs, in_shapes):
        return OrderedDict(default=in_shapes['a']), OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs
        self.handler.add_tt(x.a, x.b, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h, dy = self.handler, buffers.output_deltas.default
        for name in ('a', 'b'):
            dx = buffers.input_deltas[name]
            if name in self.overwrite_input_deltas:
                _h.copy_to(dy, dx)
            else:
                _h.add_tt(dx, dy, dx)


class RulScalesOldDeltasLayerImpl(CopyLayerImpl):
    """Asked to overwrite its input deltas, multiplies them by dy instead
    (right only where they held 1)."""

    can_overwrite_input_deltas = True

    def backward_pass(self, buffers):
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default
        if 'default' in self.overwrite_input_deltas:
            self.handler.mult_tt(dy, dx, dx)
        else:
            super().backward_pass(buffers)


class RulScratchMaskDeltasLayerImpl(Layer):
    """y = x; the mask gets no deltas, and its delta buffer (which nobody
    reads) holds an uncleared sum: correct."""

    expected_inputs = {'default': TBF, 'mask': TBF}
    computes_no_input_deltas_for = ('mask',)
    independent_outputs = {'default': ('mask',)}

    def setup(self, kwargs, in_shapes):
        n = in_shapes['default'].feature_size
        return (
            OrderedDict(default=in_shapes['default']),
            OrderedDict(),
            OrderedDict(acc=BufferStructure('T', 'B', n, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        dy = b.output_deltas.default
        _h.add_tt(b.input_deltas.default, dy, b.input_deltas.default)
        _h.add_tt(b.internals.acc, dy, b.internals.acc)
        _h.copy_to(b.internals.acc, b.input_deltas.mask)


def test_each_output_is_checked_against_a_forward_pass_of_its_own_values():
    """The outputs compared are those of a forward pass with the inputs as
    they are, not those that another input's other values left."""
    run_layer_tests(instantiate_layer(RulSplitLayerImpl, AB), dict(SPEC))


def test_the_inputs_not_asked_to_be_overwritten_must_be_added_to():
    run_layer_tests(instantiate_layer(RulSumOrOverwriteLayerImpl, AB), dict(SPEC))
    layer = instantiate_layer(TwoInputsLayerImpl, AB)
    with pytest.raises(LayerTestError, match="'b' were not added to"):
        run_layer_tests(layer, dict(SPEC))


def test_overwritten_deltas_start_from_garbage_not_from_ones():
    layer = instantiate_layer(RulScalesOldDeltasLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestError, match='declares can_overwrite_input_deltas'):
        run_layer_tests(layer, dict(SPEC))


def test_deltas_the_layer_declares_it_does_not_compute_are_not_compared():
    spec = {**SPEC, 'mask': np.ones((2, 2, 3))}
    layer = instantiate_layer(
        RulScratchMaskDeltasLayerImpl, {'default': (3,), 'mask': (3,)}
    )
    run_layer_tests(layer, spec)


# --------------------------------------------------- values of one-hot rows ---


def _one_hot_rows(time_steps, batch_size):
    """Rows [0, 0, 1] and [1, 0, 0] alternately: a shift by one element
    makes rows with two ones."""
    rows = np.zeros((time_steps * batch_size, 3))
    rows[0::2, 2] = 1.0
    rows[1::2, 0] = 1.0
    return rows.reshape((time_steps, batch_size, 3))


class RulOneHotTargetsLayerImpl(Layer):
    """predictions = x; refuses targets whose rows are not one-hot; the
    predictions are independent of the targets, truly."""

    expected_inputs = {'default': TBF, 'targets': TBF}
    computes_no_input_deltas_for = ('targets',)
    independent_outputs = {'predictions': ('targets',)}

    def setup(self, kwargs, in_shapes):
        return (
            OrderedDict(predictions=in_shapes['default']),
            OrderedDict(),
            OrderedDict(),
        )

    def _predict(self, buffers):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.predictions)

    def forward_pass(self, buffers, training_pass=True):
        targets = self.handler.get_numpy_copy(buffers.inputs.targets)
        if not (np.isin(targets, (0.0, 1.0)).all() and (targets.sum(2) == 1).all()):
            raise ValueError('the targets must be one-hot rows')
        self._predict(buffers)

    def backward_pass(self, buffers):
        b = buffers
        self.handler.add_tt(
            b.output_deltas.predictions, b.input_deltas.default, b.input_deltas.default
        )


class RulOneHotLeakLayerImpl(RulOneHotTargetsLayerImpl):
    """predictions = x + targets, declared independent of the targets."""

    def _predict(self, buffers):
        b = buffers
        self.handler.add_tt(b.inputs.default, b.inputs.targets, b.outputs.predictions)


ONE_HOT_IN = {'default': (3,), 'targets': (3,)}


@pytest.mark.parametrize('time_steps, batch_size', [(2, 2), (6, 1), (1, 6), (1, 1)])
def test_values_that_keep_each_rows_kind_find_a_false_independence(
    time_steps, batch_size
):
    """Drawn by whole time step and sample, the other values are one-hot
    rows as the targets are (element draws and the shift are not, and the
    layer refuses them); with one row, the shift is the one left."""
    spec = {
        'time_steps': time_steps,
        'batch_size': batch_size,
        'targets': _one_hot_rows(time_steps, batch_size),
    }
    run_layer_tests(instantiate_layer(RulOneHotTargetsLayerImpl, ONE_HOT_IN), spec)
    layer = instantiate_layer(RulOneHotLeakLayerImpl, ONE_HOT_IN)
    with pytest.raises(LayerTestError, match="declares it independent of 'targets'"):
        run_layer_tests(layer, spec)


# -------------------------------------------------------------- messages ---


class RulHalvesOldDeltasLayerImpl(CopyLayerImpl):
    """Halves the input deltas it is given before adding its own."""

    def backward_pass(self, buffers):
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default
        self.handler.mult_st(0.5, dx, dx)
        self.handler.add_tt(dx, dy, dx)


class RulColumnsFactorLayerImpl(RulFactorOnSelfLayerImpl):
    """RulFactorOnSelfLayerImpl with a workspace of its handler."""

    workspace_shapes = RulColumnsLayerImpl.workspace_shapes


def test_a_mismatch_names_the_largest_difference_and_its_values():
    layer = instantiate_layer(RulHalfDeltasLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestError, match='does not match finite') as info:
        run_deltas_test(layer, dict(SPEC))
    found = re.search(
        r'largest \|difference\| (\S+) at index .* '
        r'\(analytic (\S+), numeric (\S+)\)\.$',
        str(info.value),
    )
    difference, analytic, numeric = (float(v) for v in found.groups())
    assert analytic == pytest.approx(numeric / 2, rel=1e-4)
    assert difference == pytest.approx(abs(analytic - numeric), rel=1e-2)


def test_deltas_not_added_to_name_how_far_they_are_from_1_higher():
    """Pre-filled with 1, deltas halved before adding end 0.5 higher."""
    layer = instantiate_layer(RulHalvesOldDeltasLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestError, match=r'largest \|difference\| 0.5\)'):
        run_deltas_accumulate_test(layer, dict(SPEC))


def test_the_05_checks_use_05s_sizes_and_run_the_forward_pass():
    layer = instantiate_layer(HfxSquareScaleLayerImpl, {'default': (3,)})
    assert run_deltas_test(layer, {}, 'default', 'default') is True
    assert run_gradients_test(layer, {}, 's', 'default') is True


def test_a_failed_05_check_names_05s_sizes(capsys):
    layer = instantiate_layer(RulHalfDeltasLayerImpl, {'default': (3,)})
    assert run_deltas_test(layer, {}, 'default', 'default') is False
    out = capsys.readouterr().out
    assert "with {'time_steps': 3, 'batch_size': 2}" in out
    assert run_deltas_test(layer, {'batch_size': 1}, 'default', 'default') is False
    assert "with {'time_steps': 3, 'batch_size': 1}" in capsys.readouterr().out


def test_a_layer_with_workspaces_gets_the_fresh_object_check():
    layer = instantiate_layer(RulColumnsFactorLayerImpl, {'default': (3,)})
    assert 'columns' in layer.internal_shapes
    with pytest.raises(LayerTestError, match='differ when a freshly made'):
        run_fresh_layer_test(layer, dict(SPEC))


def test_run_context_test_leaves_the_contexts_as_it_found_them():
    """The checks after it see the contexts the checks before it saw."""
    layer = instantiate_layer(HfxRnnLayerImpl, {'default': (3,)})
    runner = testing._Runner(layer, dict(SPEC))
    before = {key: value.copy() for key, value in runner.contexts.items()}
    assert before
    run_context_test(layer, SPEC, runner)
    assert runner.contexts.keys() == before.keys()
    for key, value in before.items():
        assert np.array_equal(runner.contexts[key], value)


# ---------------------------------------------------- inputs without deltas ---


class RulDifferenceLayerImpl(Layer):
    """y = x - targets; targets get no deltas, by intent."""

    expected_inputs = {'default': TBF, 'targets': TBF}
    computes_no_input_deltas_for = ('targets',)

    def setup(self, kwargs, in_shapes):
        return OrderedDict(default=in_shapes['default']), OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs
        self.handler.subtract_tt(x.default, x.targets, buffers.outputs.default)

    def backward_pass(self, buffers):
        b = buffers
        self.handler.add_tt(
            b.output_deltas.default, b.input_deltas.default, b.input_deltas.default
        )


class RulNoDeltaForBLayerImpl(Layer):
    """y = a + b; declares b needs no deltas and gives it none."""

    expected_inputs = {'a': TBF, 'b': TBF}
    computes_no_input_deltas_for = ('b',)

    def setup(self, kwargs, in_shapes):
        return OrderedDict(default=in_shapes['a']), OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs
        self.handler.add_tt(x.a, x.b, buffers.outputs.default)

    def backward_pass(self, buffers):
        b = buffers
        self.handler.add_tt(b.output_deltas.default, b.input_deltas.a, b.input_deltas.a)


def _no_delta_warnings(check, layer, spec):
    testing._WARNED_NO_DELTAS.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        check(layer, spec)
    return [w for w in caught if issubclass(w.category, LayerTestWarning)]


def test_targets_without_deltas_are_intended():
    layer = instantiate_layer(
        RulDifferenceLayerImpl, {'default': (3,), 'targets': (3,)}
    )
    assert _no_delta_warnings(run_layer_tests, layer, dict(SPEC)) == []


def test_the_warning_about_an_input_without_deltas_comes_from_the_check_alone():
    layer = instantiate_layer(RulNoDeltaForBLayerImpl, AB)
    found = _no_delta_warnings(run_ignored_input_deltas_test, layer, dict(SPEC))
    assert len(found) == 1
    assert "input 'b' is in computes_no_input_deltas_for" in str(found[0].message)


def test_the_warning_comes_once_per_layer_class_and_input():
    testing._WARNED_NO_DELTAS.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        for _ in range(2):
            run_layer_tests(instantiate_layer(RulNoDeltaForBLayerImpl, AB), dict(SPEC))
    assert len([w for w in caught if w.category is LayerTestWarning]) == 1


def test_the_warning_comes_once_even_where_warnings_are_errors():
    testing._WARNED_NO_DELTAS.clear()
    with warnings.catch_warnings():
        warnings.simplefilter('error', LayerTestWarning)
        with pytest.raises(LayerTestWarning):
            run_layer_tests(instantiate_layer(RulNoDeltaForBLayerImpl, AB), dict(SPEC))
        run_layer_tests(instantiate_layer(RulNoDeltaForBLayerImpl, AB), dict(SPEC))


def test_the_warning_points_at_the_caller_of_run_layer_tests():
    testing._WARNED_NO_DELTAS.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        run_layer_tests(instantiate_layer(RulNoDeltaForBLayerImpl, AB), dict(SPEC))
    found = [w for w in caught if w.category is LayerTestWarning]
    assert [w.filename for w in found] == [__file__]


class RulDoublesOutputInBackwardLayerImpl(CopyLayerImpl):
    """y = x; doubles its output in place in the backward pass (scratch)."""

    def backward_pass(self, buffers):
        y = buffers.outputs.default
        self.handler.mult_st(2.0, y, y)
        super().backward_pass(buffers)


def test_the_outputs_kept_are_those_of_a_forward_pass():
    """run_forward_results_kept_test runs the forward pass first: a write
    that keeps zeros as they are (fresh buffers) is found too."""
    layer = instantiate_layer(RulDoublesOutputInBackwardLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestError, match='backward pass changed the output'):
        run_forward_results_kept_test(layer, SPEC, _numpy_runner(layer))


def test_a_layer_keeping_state_between_backward_passes_is_told_so():
    """Named by the backward-repeatability check, before the stale-internals
    check, which would blame its backward internals."""
    layer = instantiate_layer(RulCountingBackwardLayerImpl, {'default': (3,)})
    message = _message(layer, dict(SPEC))
    assert 'backward-repeatability check' in message
    assert 'keeps state between passes on the layer object' in message


class RulOverwritingNoDeltaForBLayerImpl(RulNoDeltaForBLayerImpl):
    """RulNoDeltaForBLayerImpl, but overwrites the deltas of a."""

    def backward_pass(self, buffers):
        b = buffers
        self.handler.copy_to(b.output_deltas.default, b.input_deltas.a)


def test_the_warning_is_the_last_word_a_failing_layer_gets_none():
    layer = instantiate_layer(RulOverwritingNoDeltaForBLayerImpl, AB)
    testing._WARNED_NO_DELTAS.clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        with pytest.raises(LayerTestError, match='overwritten instead of added'):
            run_layer_tests(layer, dict(SPEC))
    assert [w for w in caught if w.category is LayerTestWarning] == []


class RulSortedTargetsLeakLayerImpl(RulOneHotTargetsLayerImpl):
    """predictions = x + the targets' last feature; refuses targets whose
    features are not in ascending order; declares the predictions
    independent of the targets."""

    def forward_pass(self, buffers, training_pass=True):
        targets = self.handler.get_numpy_copy(buffers.inputs.targets)
        if (np.diff(targets, axis=2) < 0).any():
            raise ValueError('the targets must be ascending')
        b = buffers
        self.handler.add_tt(
            b.inputs.default, b.inputs.targets[:, :, -1:], b.outputs.predictions
        )


def test_the_element_draws_can_give_every_element_every_value():
    """With one time step and one sample there is no row to draw, and the
    shift of ascending features is refused: the draws element by element,
    from all of the input's values, find the false independence."""
    layer = instantiate_layer(
        RulSortedTargetsLeakLayerImpl, {'default': (1,), 'targets': (2,)}
    )
    caught = 0
    for seed in range(12):
        spec = {
            'time_steps': 1,
            'batch_size': 1,
            'seed': seed,
            'targets': [[[0.0, 1.0]]],
        }
        try:
            run_stale_internals_test(layer, spec)
        except LayerTestError:
            caught += 1
    assert caught


class RulConsecutiveRowsLeakLayerImpl(RulOneHotTargetsLayerImpl):
    """predictions = x, plus the targets of the last sample there; refuses
    targets whose rows are not runs of consecutive numbers; declares the
    predictions independent of the targets."""

    def forward_pass(self, buffers, training_pass=True):
        targets = self.handler.get_numpy_copy(buffers.inputs.targets)
        if (np.diff(targets, axis=2) != 1).any():
            raise ValueError('each row of the targets must be consecutive numbers')
        x, t, y = (
            buffers.inputs.default,
            buffers.inputs.targets,
            buffers.outputs.predictions,
        )
        self.handler.copy_to(x, y)
        self.handler.add_tt(x[:, -1:], t[:, -1:], y[:, -1:])


def test_the_draws_of_rows_can_give_every_sample_every_row():
    """Rows [0, 1, 2] and [3, 4, 5]: the shift and the element draws make
    rows the layer refuses; the draws of whole rows, from all of the
    input's rows, give the last sample the first one's row."""
    layer = instantiate_layer(RulConsecutiveRowsLeakLayerImpl, ONE_HOT_IN)
    caught = 0
    for seed in range(12):
        spec = {
            'time_steps': 1,
            'batch_size': 2,
            'seed': seed,
            'targets': [[[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]],
        }
        try:
            run_stale_internals_test(layer, spec)
        except LayerTestError:
            caught += 1
    assert caught


class RulScratchStatisticGradientLayerImpl(RulStatisticLayerImpl):
    """RulStatisticLayerImpl; the gradient buffer of its statistic (which
    it declares it computes none for, and nobody reads) holds an uncleared
    count: correct."""

    def setup(self, kwargs, in_shapes):
        outputs, parameters, internals = super().setup(kwargs, in_shapes)
        internals['count'] = BufferStructure(1, is_backward_only=True)
        return outputs, parameters, internals

    def backward_pass(self, buffers):
        super().backward_pass(buffers)
        count = buffers.internals.count
        self.handler.add_st(1.0, count, count)
        self.handler.copy_to(count, buffers.gradients.seen)


class RulGradientAsForwardScratchLayerImpl(ScaleLayerImpl):
    """y = x * w; fills its gradient buffer in the forward pass (scratch
    memory that the backward pass overwrites): correct."""

    def forward_pass(self, buffers, training_pass=True):
        self.handler.fill(buffers.gradients.w, 7.0)
        super().forward_pass(buffers, training_pass)


def test_gradients_the_layer_declares_it_does_not_compute_are_not_compared():
    layer = instantiate_layer(RulScratchStatisticGradientLayerImpl, {'default': (3,)})
    run_layer_tests(layer, dict(SPEC))


def test_the_results_compared_are_those_the_backward_pass_left():
    """What a later forward pass writes into the gradient buffers is no
    result of the backward pass before it."""
    layer = instantiate_layer(RulGradientAsForwardScratchLayerImpl, {'default': (3,)})
    run_stale_internals_test(layer, dict(SPEC))
