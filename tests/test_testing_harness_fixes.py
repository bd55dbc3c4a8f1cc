"""brainstorm.testing names the real fault of a layer, and catches faults it
missed: state kept on the layer object, an inference pass that is never run,
an ignored context, a sum-keeping independence test and an input wrongly
declared to need no deltas.

Each buggy layer here fails (or passed) the harness before these fixes with
another message; each correct one passes.
"""

import warnings
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm.testing as testing
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.debug_array import DebugHandlerWriteError
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.testing import (
    LayerTestError,
    get_test_configurations,
    instantiate_layer,
    run_layer_tests,
)
from brainstorm.utils import flatten_time, flatten_time_and_features

SPEC = {'time_steps': 3, 'batch_size': 2}
TBF = StructureTemplate('T', 'B', 'F')


def _fails_with(layer_class, in_shapes, message, spec=SPEC, **kwargs):
    layer = instantiate_layer(layer_class, in_shapes, **kwargs)
    with pytest.raises(LayerTestError, match=message) as info:
        run_layer_tests(layer, dict(spec))
    assert layer_class.__name__ in str(info.value)
    return str(info.value)


def _passes(layer_class, in_shapes, **kwargs):
    for spec in get_test_configurations():
        spec.pop('activation')
        run_layer_tests(instantiate_layer(layer_class, in_shapes, **kwargs), spec)


# ------------------------------------------------------------------ tanh ---


class HfxTanhLayerImpl(Layer):
    """y = tanh(x), correct."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        n = in_shapes['default'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(),
            OrderedDict(tmp=BufferStructure('T', 'B', n, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.tanh(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        x, y, dy = b.inputs.default, b.outputs.default, b.output_deltas.default
        _h.tanh_deriv(x, y, dy, b.internals.tmp)
        _h.add_tt(b.input_deltas.default, b.internals.tmp, b.input_deltas.default)


class HfxTanhScratchOutputLayerImpl(HfxTanhLayerImpl):
    """Uses its output as scratch memory in the backward pass, which reads
    it (reported as 'overwritten instead of added to' before)."""

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        x, y, dy = b.inputs.default, b.outputs.default, b.output_deltas.default
        _h.tanh_deriv(x, y, dy, y)
        _h.add_tt(b.input_deltas.default, y, b.input_deltas.default)


class HfxTanhCacheLayerImpl(HfxTanhLayerImpl):
    """Keeps its output on the layer object between the passes (passed)."""

    def forward_pass(self, buffers, training_pass=True):
        super().forward_pass(buffers, training_pass)
        self.cache = self.handler.get_numpy_copy(buffers.outputs.default)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        _h.set_from_numpy(b.internals.tmp, 1.0 - self.cache**2)
        _h.mult_add_tt(b.output_deltas.default, b.internals.tmp, b.input_deltas.default)


def test_correct_tanh_passes():
    _passes(HfxTanhLayerImpl, {'default': (3,)})


def test_backward_scratch_in_output_is_named():
    message = _fails_with(
        HfxTanhScratchOutputLayerImpl,
        {'default': (3,)},
        "the backward pass changed the output 'default': DebugHandler.* wrote",
    )
    assert 'overwritten instead of added' not in message
    assert 'is_backward_only=True' in message


def test_state_on_the_layer_object_is_caught():
    _fails_with(
        HfxTanhCacheLayerImpl,
        {'default': (3,)},
        'fresh-object check: .*keeps state between passes on the layer object',
    )


# ----------------------------------------------------------------- scale ---


class HfxScaleLayerImpl(Layer):
    """y = x * w per feature, correct."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        self.n = n = in_shapes['default'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(w=BufferStructure(n)),
            OrderedDict(tmp=BufferStructure('T', 'B', n, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        x, y = buffers.inputs.default, buffers.outputs.default
        w = buffers.parameters.w.reshape((1, self.n))
        self.handler.mult_mv(flatten_time(x), w, flatten_time(y))

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        dy, x = flatten_time(b.output_deltas.default), flatten_time(b.inputs.default)
        w = b.parameters.w.reshape((1, self.n))
        tmp = flatten_time(b.internals.tmp)
        _h.mult_add_mv(dy, w, flatten_time(b.input_deltas.default))
        _h.mult_tt(dy, x, tmp)
        _h.sum_t(tmp, 0, b.gradients.w.reshape((1, self.n)))


class HfxWeightDecayInBackwardLayerImpl(HfxScaleLayerImpl):
    """Decays its parameter in the backward pass (reported as a
    finite-difference mismatch before)."""

    def backward_pass(self, buffers):
        super().backward_pass(buffers)
        self.handler.mult_st(0.999, buffers.parameters.w, buffers.parameters.w)


def test_correct_scale_passes():
    _passes(HfxScaleLayerImpl, {'default': (3,)})


def test_backward_changing_a_parameter_is_named():
    message = _fails_with(
        HfxWeightDecayInBackwardLayerImpl,
        {'default': (3,)},
        "the backward pass changed the parameter 'w'",
    )
    assert 'finite differences' not in message


# -------------------------------------------------- forward internal z ---


class HfxSquareScaleLayerImpl(Layer):
    """z = s * x (a forward internal), y = z ** 2, correct."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        self.n = n = in_shapes['default'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(s=BufferStructure(n)),
            OrderedDict(
                z=BufferStructure('T', 'B', n),
                dz=BufferStructure('T', 'B', n, is_backward_only=True),
            ),
        )

    def forward_pass(self, buffers, training_pass=True):
        _h, b = self.handler, buffers
        x = flatten_time_and_features(b.inputs.default)
        z = flatten_time_and_features(b.internals.z)
        _h.mult_mv(x, b.parameters.s.reshape((1, self.n)), z)
        _h.mult_tt(z, z, flatten_time_and_features(b.outputs.default))

    def _dz(self, buffers):
        _h, b = self.handler, buffers
        z = flatten_time_and_features(b.internals.z)
        dz = flatten_time_and_features(b.internals.dz)
        _h.mult_tt(flatten_time_and_features(b.output_deltas.default), z, dz)
        _h.mult_st(2.0, dz, dz)
        return dz

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        dz = self._dz(buffers)
        s = b.parameters.s.reshape((1, self.n))
        _h.mult_add_mv(dz, s, flatten_time_and_features(b.input_deltas.default))
        _h.mult_tt(dz, flatten_time_and_features(b.inputs.default), dz)
        _h.sum_t(dz, 0, b.gradients.s.reshape((1, self.n)))


class HfxScratchInForwardInternalLayerImpl(HfxSquareScaleLayerImpl):
    """Computes dz into the forward internal z (reported as 'overwritten
    instead of added to' before)."""

    def _dz(self, buffers):
        _h, b = self.handler, buffers
        z = flatten_time_and_features(b.internals.z)
        dz = flatten_time_and_features(b.internals.dz)
        _h.mult_tt(flatten_time_and_features(b.output_deltas.default), z, z)
        _h.mult_st(2.0, z, dz)
        return dz


def test_correct_square_scale_passes():
    _passes(HfxSquareScaleLayerImpl, {'default': (3,)})


def test_backward_scratch_in_forward_internal_is_named():
    message = _fails_with(
        HfxScratchInForwardInternalLayerImpl,
        {'default': (3,)},
        "backward-repeatability check: .* changed the forward internal 'z'",
    )
    assert 'overwritten instead of added' not in message


# --------------------------------------------------------------- dropout ---


class HfxDropoutLayerImpl(Layer):
    """Dropout with the handler's random numbers; none at inference."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        n = in_shapes['default'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(),
            OrderedDict(mask=BufferStructure('T', 'B', n)),
        )

    def _mask(self, mask, training_pass):
        if training_pass:
            self.handler.generate_probability_mask(mask, 0.5)
            self.handler.mult_st(2.0, mask, mask)
        else:
            self.handler.fill(mask, 1.0)

    def forward_pass(self, buffers, training_pass=True):
        mask = buffers.internals.mask
        self._mask(mask, training_pass)
        self.handler.mult_tt(buffers.inputs.default, mask, buffers.outputs.default)

    def backward_pass(self, buffers):
        self.handler.mult_add_tt(
            buffers.output_deltas.default,
            buffers.internals.mask,
            buffers.input_deltas.default,
        )


class HfxNumpyRandomDropoutLayerImpl(HfxDropoutLayerImpl):
    """Draws its mask with np.random (a finite-difference mismatch before)."""

    def _mask(self, mask, training_pass):
        keep = (np.random.rand(*mask.shape) < 0.5) * 2.0
        self.handler.set_from_numpy(mask, keep)


class HfxDropoutAtInferenceLayerImpl(HfxDropoutLayerImpl):
    """Drops out at inference too (passed)."""

    def _mask(self, mask, training_pass):
        super()._mask(mask, True)


class HfxNumpyInferenceLayerImpl(HfxDropoutLayerImpl):
    """Its inference branch uses NumPy on the buffers (passed)."""

    def forward_pass(self, buffers, training_pass=True):
        if training_pass:
            super().forward_pass(buffers, training_pass)
        else:
            np.copyto(buffers.outputs.default, buffers.inputs.default)


def test_correct_dropout_passes():
    _passes(HfxDropoutLayerImpl, {'default': (3,)})


def test_random_numbers_outside_the_handler_are_named():
    message = _fails_with(
        HfxNumpyRandomDropoutLayerImpl,
        {'default': (3,)},
        'repeatability check: .*draws random numbers other than from its handler',
    )
    assert 'finite differences' not in message


def test_randomness_at_inference_is_caught():
    _fails_with(
        HfxDropoutAtInferenceLayerImpl,
        {'default': (3,)},
        r'inference check \(forward_pass\(buffers, training_pass=False\)\): '
        "output 'default' differs between two handler seeds",
    )


def test_a_failing_inference_branch_is_caught():
    _fails_with(
        HfxNumpyInferenceLayerImpl,
        {'default': (3,)},
        r'inference check .*raised TypeError',
    )


# ------------------------------------------------------------- recurrent ---


class HfxRnnLayerImpl(Layer):
    """h[t] = tanh(W x[t] + R h[t-1]), h[-1] the context, correct."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        n_in = in_shapes['default'].feature_size
        n = 2
        return (
            OrderedDict(default=BufferStructure('T', 'B', n, context_size=1)),
            OrderedDict(W=BufferStructure(n, n_in), R=BufferStructure(n, n)),
            OrderedDict(
                Ha=BufferStructure('T', 'B', n, context_size=1),
                dHa=BufferStructure('T', 'B', n, context_size=1, is_backward_only=True),
            ),
        )

    def _previous(self, y, t):
        return y[t - 1]  # y[-1]: the context

    def forward_pass(self, buffers, training_pass=True):
        _h, b = self.handler, buffers
        x, y, Ha = b.inputs.default, b.outputs.default, b.internals.Ha
        W, R = b.parameters.W, b.parameters.R
        T = x.shape[0]
        _h.dot_mm(flatten_time(x), W, flatten_time(Ha[:T]), transb=True)
        for t in range(T):
            _h.dot_add_mm(self._previous(y, t), R, Ha[t], transb=True)
            _h.tanh(Ha[t], y[t])

    def _context_gradient(self, dHa0, y, dR):
        self.handler.dot_add_mm(dHa0, y[-1], dR, transa=True)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        x, y, Ha, dHa = (
            b.inputs.default,
            b.outputs.default,
            b.internals.Ha,
            b.internals.dHa,
        )
        dy, W, R = b.output_deltas.default, b.parameters.W, b.parameters.R
        dW, dR = b.gradients.W, b.gradients.R
        T = x.shape[0]
        for t in range(T - 1, -1, -1):
            if t + 1 < T:
                _h.dot_add_mm(dHa[t + 1], R, dy[t])
            _h.tanh_deriv(Ha[t], y[t], dy[t], dHa[t])
        dHa_all = flatten_time(dHa[:T])
        _h.dot_add_mm(dHa_all, W, flatten_time(b.input_deltas.default))
        _h.dot_add_mm(dHa_all, flatten_time(x), dW, transa=True)
        self._context_gradient(dHa[0], y, dR)
        if T > 1:
            _h.dot_add_mm(
                flatten_time(dHa[1:T]), flatten_time(y[: T - 1]), dR, transa=True
            )


class HfxRnnOwnSlotLayerImpl(HfxRnnLayerImpl):
    """Reads y[0] (not yet written) at t = 0 instead of the context (a
    finite-difference mismatch before)."""

    def _previous(self, y, t):
        return y[max(t - 1, 0)]


class HfxRnnNoContextLayerImpl(HfxRnnLayerImpl):
    """Ignores its context, forward and backward alike (passed)."""

    def forward_pass(self, buffers, training_pass=True):
        y = buffers.outputs.default
        self.handler.fill(y[-1:], 0.0)  # its own context slot: ignored
        super().forward_pass(buffers, training_pass)

    def _context_gradient(self, dHa0, y, dR):
        pass


def test_correct_rnn_passes():
    _passes(HfxRnnLayerImpl, {'default': (3,)})


def test_reading_the_own_slot_at_t0_is_named():
    message = _fails_with(
        HfxRnnOwnSlotLayerImpl,
        {'default': (3,)},
        "output 'default' depends on the previous contents of internals or outputs",
    )
    assert 'finite differences' not in message


def test_an_ignored_context_is_caught():
    _fails_with(
        HfxRnnNoContextLayerImpl,
        {'default': (3,)},
        "context check: output 'default' has a context slot",
    )


# ------------------------------------------------------ independent outputs ---


class HfxPredictLayerImpl(Layer):
    """predictions = x; declares them independent of targets, truly."""

    expected_inputs = {'default': TBF, 'targets': TBF}
    independent_outputs = {'predictions': ('targets',)}
    computes_no_input_deltas_for = ('targets',)

    def setup(self, kwargs, in_shapes):
        self.n = n = in_shapes['default'].feature_size
        return (
            OrderedDict(predictions=BufferStructure('T', 'B', n)),
            OrderedDict(),
            OrderedDict(
                tsum=BufferStructure(1, 1),
                col=BufferStructure(n, 1),
                ones=BufferStructure('T', 'B', 1),
                tb=BufferStructure('T', 'B', 1),
            ),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.predictions)

    def backward_pass(self, buffers):
        self.handler.add_tt(
            buffers.output_deltas.predictions,
            buffers.input_deltas.default,
            buffers.input_deltas.default,
        )


class HfxCenteredLayerImpl(HfxPredictLayerImpl):
    """predictions = x - sum(targets), declared independent of targets
    (a shift of the targets keeps their sum, so this passed)."""

    def forward_pass(self, buffers, training_pass=True):
        _h, b = self.handler, buffers
        t = flatten_time_and_features(b.inputs.targets)
        col, tsum = b.internals.col, b.internals.tsum
        _h.sum_t(t, 0, col.reshape((1, self.n)))
        _h.sum_t(col, 0, tsum)
        ones = flatten_time_and_features(b.internals.ones)
        tb = flatten_time_and_features(b.internals.tb)
        _h.fill(ones, 1.0)
        _h.dot_mm(ones, tsum, tb)
        _h.subtract_mv(
            flatten_time_and_features(b.inputs.default),
            tb,
            flatten_time_and_features(b.outputs.predictions),
        )


TWO = {'default': (3,), 'targets': (3,)}


def test_truly_independent_outputs_pass():
    _passes(HfxPredictLayerImpl, TWO)


def test_a_false_independence_that_keeps_sums_is_caught():
    _fails_with(HfxCenteredLayerImpl, TWO, "declares it independent of 'targets'")


# ---------------------------------------------- computes_no_input_deltas_for ---


class HfxWeightedSumLayerImpl(Layer):
    """y = a + 2 b, with deltas for both, correct."""

    expected_inputs = {'a': TBF, 'b': TBF}

    def setup(self, kwargs, in_shapes):
        n = in_shapes['a'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(),
            OrderedDict(),
        )

    def forward_pass(self, buffers, training_pass=True):
        _h, b = self.handler, buffers
        y = b.outputs.default
        _h.mult_st(2.0, b.inputs.b, y)
        _h.add_tt(b.inputs.a, y, y)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        dy = b.output_deltas.default
        _h.add_tt(dy, b.input_deltas.a, b.input_deltas.a)
        _h.mult_add_st(2.0, dy, b.input_deltas.b)


class HfxNoDeltaForBLayerImpl(HfxWeightedSumLayerImpl):
    """Declares b needs no deltas, and gives it none (passed silently)."""

    computes_no_input_deltas_for = ('b',)

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        _h.add_tt(b.output_deltas.default, b.input_deltas.a, b.input_deltas.a)


AB = {'a': (3,), 'b': (3,)}


def _no_deltas_warnings(layer_class, spec):
    warning = getattr(testing, 'LayerTestWarning', None)
    if warning is None:
        pytest.fail('brainstorm.testing has no LayerTestWarning')
    getattr(testing, '_WARNED_NO_DELTAS', set()).clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter('always')
        run_layer_tests(instantiate_layer(layer_class, AB), spec)
    return [w for w in caught if issubclass(w.category, warning)]


def test_a_correct_layer_gives_no_warning():
    assert _no_deltas_warnings(HfxWeightedSumLayerImpl, dict(SPEC)) == []


def test_an_input_wrongly_without_deltas_is_warned_about():
    found = _no_deltas_warnings(HfxNoDeltaForBLayerImpl, dict(SPEC))
    assert len(found) == 1
    message = str(found[0].message)
    assert 'HfxNoDeltaForBLayerImpl' in message
    assert "input 'b' is in computes_no_input_deltas_for" in message


def test_a_mask_of_whole_numbers_gives_no_warning():
    rnd = np.random.RandomState(3)
    spec = dict(SPEC, b=(rnd.rand(3, 2, 3) > 0.5).astype(float))
    assert _no_deltas_warnings(HfxNoDeltaForBLayerImpl, spec) == []


# ------------------------------------- writes that leave the values as they were


class HfxClipInPlaceLayerImpl(HfxTanhLayerImpl):
    """Clips its input in place before tanh: with the bounds far outside the
    test values, the input keeps its values, so no value check sees it; a
    network's other readers of that input would see clipped values."""

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs.default
        self.handler.clip_t(x, -1e3, 1e3, x)
        super().forward_pass(buffers, training_pass)


class HfxRewriteWeightLayerImpl(HfxScaleLayerImpl):
    """Copies its parameter onto itself in the backward pass (a no-op write)."""

    def backward_pass(self, buffers):
        w = buffers.parameters.w
        self.handler.copy_to(w, w)
        super().backward_pass(buffers)


def test_an_in_place_write_that_keeps_the_values_is_named():
    """The harness compared values only: this layer passed every check."""
    message = _fails_with(
        HfxClipInPlaceLayerImpl,
        {'default': (3,)},
        "the forward pass changed the input 'default': DebugHandler.clip_t "
        "wrote into it through its argument 'out'",
    )
    assert 'may write only outputs and internals' in message


def test_a_backward_write_into_a_parameter_is_named_whatever_the_values():
    _fails_with(
        HfxRewriteWeightLayerImpl,
        {'default': (3,)},
        "the backward pass changed the parameter 'w': DebugHandler.copy_to",
    )


def test_the_debug_handler_refuses_writes_only_inside_read_only():
    h = DebugHandler(NumpyHandler(np.float64))
    a, b = h.zeros((2, 3)), h.zeros((2, 3))
    with h.read_only({'a block': a}, 'a test'):
        h.fill(b, 1.0)  # other memory: allowed
        h.add_tt(a, b, b)  # reading it: allowed
        with pytest.raises(DebugHandlerWriteError, match="'out' writes into a block"):
            h.add_tt(b, b, a[1:])  # a view of it
        with pytest.raises(DebugHandlerWriteError, match="'mem' writes into a block"):
            h.fill(a[:, 1:], 2.0)
    h.fill(a, 3.0)  # after the block: writable again
    assert h.get_numpy_copy(a).tolist() == [[3.0] * 3] * 2
