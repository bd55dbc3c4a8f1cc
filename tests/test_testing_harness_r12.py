"""brainstorm.testing runs the backward pass as training steps run it
(``skip_input_deltas`` set) and names the layer, configuration and pass of
an error the layer's own pass raises.

Before these fixes a layer that skipped its gradients along with the input
deltas the network does not need passed every configuration (and never
trained in a network), and a layer's own error (NumPy used on a buffer, an
op given a wrong shape) came out bare, naming no layer or pass.
"""

from collections import OrderedDict

import numpy as np
import pytest

from brainstorm.handlers.debug_array import DebugHandlerError
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.testing import (
    LayerTestError,
    get_test_configurations,
    instantiate_layer,
    run_gradients_test,
    run_layer_tests,
    run_skip_input_deltas_test,
)
from brainstorm.utils import flatten_time

SPEC = {'time_steps': 3, 'batch_size': 2}
CONF = "with {'time_steps': 3, 'batch_size': 2}"
TBF = StructureTemplate('T', 'B', 'F')


def _row(vector):
    return vector.reshape((1, vector.shape[0]))


def _passes(layer_class, in_shapes):
    for spec in get_test_configurations():
        spec.pop('activation')
        run_layer_tests(instantiate_layer(layer_class, in_shapes), spec)


def _fails_with(layer_class, in_shapes, message, check=run_layer_tests):
    layer = instantiate_layer(layer_class, in_shapes)
    with pytest.raises(LayerTestError, match=message) as info:
        check(layer, dict(SPEC))
    text = str(info.value)
    assert f"{layer_class.__name__} '{layer.name}' {CONF}" in text
    # the network resets it after every backward pass; so does the harness
    assert layer.skip_input_deltas == frozenset()
    return info.value


# ------------------------------------------------------ skip_input_deltas ---


class R12ScaleLayerImpl(Layer):
    """y = x * w per feature; skips dx when the network allows it (correct)."""

    expected_inputs = {'default': TBF}

    def setup(self, kwargs, in_shapes):
        n = in_shapes['default'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(w=BufferStructure(n)),
            OrderedDict(tmp=BufferStructure('T', 'B', n, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        x, y = buffers.inputs.default, buffers.outputs.default
        w = _row(buffers.parameters.w)
        self.handler.mult_mv(flatten_time(x), w, flatten_time(y))

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        dy, x = flatten_time(b.output_deltas.default), flatten_time(b.inputs.default)
        w = _row(b.parameters.w)
        tmp = flatten_time(b.internals.tmp)
        if 'default' not in self.skip_input_deltas:
            _h.mult_add_mv(dy, w, flatten_time(b.input_deltas.default))
        _h.mult_tt(dy, x, tmp)
        _h.sum_t(tmp, 0, _row(b.gradients.w))


class R12EarlySkipLayerImpl(R12ScaleLayerImpl):
    """Returns before its gradient when dx is not needed (passed before,
    and never trained in a network: every training step skips dx)."""

    def backward_pass(self, buffers):
        if 'default' in self.skip_input_deltas:
            return
        super().backward_pass(buffers)


class R12ProductLayerImpl(Layer):
    """y = a * b * w per feature; skips each input's delta on its own
    (correct)."""

    expected_inputs = {'a': TBF, 'b': TBF}

    def setup(self, kwargs, in_shapes):
        n = in_shapes['a'].feature_size
        return (
            OrderedDict(default=BufferStructure('T', 'B', n)),
            OrderedDict(w=BufferStructure(n)),
            OrderedDict(
                ab=BufferStructure('T', 'B', n),
                dab=BufferStructure('T', 'B', n, is_backward_only=True),
                tmp=BufferStructure('T', 'B', n, is_backward_only=True),
            ),
        )

    def forward_pass(self, buffers, training_pass=True):
        _h, b = self.handler, buffers
        ab = flatten_time(b.internals.ab)
        _h.mult_tt(flatten_time(b.inputs.a), flatten_time(b.inputs.b), ab)
        w = _row(b.parameters.w)
        _h.mult_mv(ab, w, flatten_time(b.outputs.default))

    def backward_pass(self, buffers):
        _h, b = self.handler, buffers
        dy = flatten_time(b.output_deltas.default)
        dab, tmp = flatten_time(b.internals.dab), flatten_time(b.internals.tmp)
        _h.mult_mv(dy, _row(b.parameters.w), dab)
        self._input_deltas(buffers, dab, tmp)
        _h.mult_tt(dy, flatten_time(b.internals.ab), tmp)
        _h.sum_t(tmp, 0, _row(b.gradients.w))

    def _input_deltas(self, buffers, dab, tmp):
        _h, b = self.handler, buffers
        if 'a' not in self.skip_input_deltas:
            _h.mult_tt(dab, flatten_time(b.inputs.b), tmp)
            _h.add_tt(
                tmp, flatten_time(b.input_deltas.a), flatten_time(b.input_deltas.a)
            )
        if 'b' not in self.skip_input_deltas:
            _h.mult_tt(dab, flatten_time(b.inputs.a), tmp)
            _h.add_tt(
                tmp, flatten_time(b.input_deltas.b), flatten_time(b.input_deltas.b)
            )


class R12ProductSkipsBothLayerImpl(R12ProductLayerImpl):
    """Skips the delta of b with that of a: in a network where only a is
    fed by the Input layer, the layers before b get no gradient."""

    def _input_deltas(self, buffers, dab, tmp):
        _h, b = self.handler, buffers
        if 'a' in self.skip_input_deltas:
            return
        for name, other in (('a', 'b'), ('b', 'a')):
            _h.mult_tt(dab, flatten_time(b.inputs[other]), tmp)
            delta = flatten_time(b.input_deltas[name])
            _h.add_tt(tmp, delta, delta)


def test_a_layer_skipping_only_its_input_deltas_passes():
    _passes(R12ScaleLayerImpl, {'default': (3,)})
    _passes(R12ProductLayerImpl, {'a': (3,), 'b': (3,)})


def test_the_check_sets_skip_input_deltas_as_the_network_does():
    seen = []

    class R12RecordingLayerImpl(R12ScaleLayerImpl):
        def backward_pass(self, buffers):
            seen.append(self.skip_input_deltas)
            super().backward_pass(buffers)

    layer = instantiate_layer(R12RecordingLayerImpl, {'default': (3,)})
    run_skip_input_deltas_test(layer, dict(SPEC))
    assert frozenset({'default'}) in seen
    assert all(isinstance(skip, frozenset) for skip in seen)
    assert layer.skip_input_deltas == frozenset()


def test_a_layer_skipping_its_gradients_with_the_input_deltas_fails():
    error = _fails_with(
        R12EarlySkipLayerImpl,
        {'default': (3,)},
        r"skip_input_deltas check: with skip_input_deltas=\['default'\]",
    )
    message = str(error)
    assert "gradient 'w' differs" in message
    assert 'input_deltas=False' in message
    assert 'largest |difference|' in message
    # the check on its own finds it too
    _fails_with(
        R12EarlySkipLayerImpl,
        {'default': (3,)},
        "gradient 'w' differs",
        check=run_skip_input_deltas_test,
    )


def test_skipping_one_input_must_leave_the_others_deltas():
    # all inputs skipped: its gradient is right; a alone: b's delta is lost
    message = str(
        _fails_with(
            R12ProductSkipsBothLayerImpl,
            {'a': (3,), 'b': (3,)},
            r"skip_input_deltas=\['a'\] .*input deltas 'b' differs",
        )
    )
    assert 'skip_input_deltas check' in message


# --------------------------------------------- the layer's own errors ---


class R12NumpyLayerImpl(R12ScaleLayerImpl):
    """Uses NumPy on a buffer in its forward pass."""

    def forward_pass(self, buffers, training_pass=True):
        np.tanh(buffers.inputs.default)


class R12WrongShapeBackwardLayerImpl(R12ScaleLayerImpl):
    """Gives an op operands of different shapes in its backward pass."""

    def backward_pass(self, buffers):
        b = buffers
        dx = b.input_deltas.default
        self.handler.add_tt(b.output_deltas.default[:, :, :1], dx, dx)


class R12FailsWhenSkippingLayerImpl(R12ScaleLayerImpl):
    """Raises only in the backward pass of a training step."""

    def backward_pass(self, buffers):
        if self.skip_input_deltas:
            raise KeyError('no delta buffer for a skipped input')
        super().backward_pass(buffers)


class R12Stop(BaseException):
    pass


class R12InterruptedLayerImpl(R12ScaleLayerImpl):
    def forward_pass(self, buffers, training_pass=True):
        raise R12Stop


class R12RaisesLayerTestErrorLayerImpl(R12ScaleLayerImpl):
    def forward_pass(self, buffers, training_pass=True):
        raise LayerTestError('raised by the layer itself')


def test_a_numpy_error_in_the_forward_pass_names_layer_and_pass():
    error = _fails_with(
        R12NumpyLayerImpl,
        {'default': (3,)},
        r'the forward pass \(R12NumpyLayerImpl.forward_pass with '
        r'training_pass=True\) raised TypeError',
    )
    assert 'DebugArray supports no arithmetic' in str(error)
    assert isinstance(error.__cause__, TypeError)


def test_an_op_error_in_the_backward_pass_names_layer_and_pass():
    error = _fails_with(
        R12WrongShapeBackwardLayerImpl,
        {'default': (3,)},
        r'the backward pass \(R12WrongShapeBackwardLayerImpl.backward_pass with '
        r'skip_input_deltas=\[\], overwrite_input_deltas=\[\]\) raised '
        r'DebugHandlerError.*DebugHandler.add_tt',
    )
    assert isinstance(error.__cause__, DebugHandlerError)


def test_an_error_of_a_training_steps_backward_pass_names_skip_input_deltas():
    error = _fails_with(
        R12FailsWhenSkippingLayerImpl,
        {'default': (3,)},
        r"backward_pass with skip_input_deltas=\['default'\].* raised KeyError",
    )
    assert isinstance(error.__cause__, KeyError)


def test_each_check_on_its_own_wraps_the_layers_error():
    error = _fails_with(
        R12NumpyLayerImpl,
        {'default': (3,)},
        'the forward pass .* raised TypeError',
        check=run_gradients_test,
    )
    assert isinstance(error.__cause__, TypeError)


def test_base_exceptions_and_layer_test_errors_are_not_wrapped():
    layer = instantiate_layer(R12InterruptedLayerImpl, {'default': (3,)})
    with pytest.raises(R12Stop):
        run_layer_tests(layer, dict(SPEC))
    layer = instantiate_layer(R12RaisesLayerTestErrorLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestError) as info:
        run_layer_tests(layer, dict(SPEC))
    assert str(info.value) == 'raised by the layer itself'


class R12KeepsStateLayerImpl(R12ScaleLayerImpl):
    """Reads in its backward pass what its forward pass put on self."""

    def forward_pass(self, buffers, training_pass=True):
        super().forward_pass(buffers, training_pass)
        self.ran_forward = True

    def backward_pass(self, buffers):
        assert self.ran_forward
        super().backward_pass(buffers)


class R12NoInferenceLayerImpl(R12ScaleLayerImpl):
    def forward_pass(self, buffers, training_pass=True):
        if not training_pass:
            raise NotImplementedError('no inference branch')
        super().forward_pass(buffers, training_pass)


def test_checks_that_explain_an_error_report_the_layers_own():
    message = str(
        _fails_with(
            R12KeepsStateLayerImpl,
            {'default': (3,)},
            'fresh-object check: .* raised AttributeError: .*ran_forward',
        )
    )
    assert 'LayerTestError' not in message
    error = _fails_with(
        R12NoInferenceLayerImpl,
        {'default': (3,)},
        r'inference check .* raised NotImplementedError: no inference branch\. ',
    )
    assert 'LayerTestError' not in str(error)
    assert isinstance(error.__cause__, NotImplementedError)
