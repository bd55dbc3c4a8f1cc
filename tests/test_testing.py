"""brainstorm.testing catches the layer bugs it is meant to catch."""

from collections import OrderedDict

import numpy as np
import pytest

from brainstorm.errors import ValidationError
from brainstorm.layers.base_layer import Layer
from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.testing import (
    LayerTestError,
    get_test_configurations,
    instantiate_layer,
    run_layer_tests,
    set_up_layer,
)
from brainstorm.utils import flatten_time

SPEC = {'time_steps': 2, 'batch_size': 2}


class CopyLayerImpl(Layer):
    """y = x, correct."""

    expected_inputs = {'default': StructureTemplate('T', 'B', '...')}

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        return (
            OrderedDict(default=s),
            OrderedDict(),
            OrderedDict(tmp=BufferStructure(*s.shape, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        _h = self.handler
        _h.copy_to(buffers.output_deltas.default, buffers.internals.tmp)
        _h.add_tt(
            buffers.input_deltas.default,
            buffers.internals.tmp,
            buffers.input_deltas.default,
        )


class StaleBackwardLayerImpl(CopyLayerImpl):
    """Reads its backward internal before writing it."""

    def backward_pass(self, buffers):
        _h = self.handler
        tmp = buffers.internals.tmp
        _h.add_tt(tmp, buffers.output_deltas.default, tmp)
        _h.add_tt(buffers.input_deltas.default, tmp, buffers.input_deltas.default)


class OverwritingLayerImpl(CopyLayerImpl):
    """Overwrites its input deltas instead of adding to them."""

    def backward_pass(self, buffers):
        self.handler.copy_to(
            buffers.output_deltas.default, buffers.input_deltas.default
        )


class ScratchOutputLayerImpl(CopyLayerImpl):
    """Uses its output as scratch memory in the backward pass: gradients
    right, the output (the user's result) changed."""

    def backward_pass(self, buffers):
        _h = self.handler
        y = buffers.outputs.default
        _h.copy_to(buffers.output_deltas.default, y)
        _h.add_tt(buffers.input_deltas.default, y, buffers.input_deltas.default)


class StaleForwardLayerImpl(CopyLayerImpl):
    """Accumulates into its output instead of writing it."""

    def forward_pass(self, buffers, training_pass=True):
        y = buffers.outputs.default
        self.handler.add_tt(y, buffers.inputs.default, y)


class ScaleLayerImpl(Layer):
    """y = x * w per feature; overwrites its gradient, correctly."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 'F')}
    overwrites_gradients = True

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        n = s.feature_size
        return (
            OrderedDict(default=s),
            OrderedDict(w=BufferStructure(n)),
            OrderedDict(tmp=BufferStructure('T', 'B', n, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        x, y = buffers.inputs.default, buffers.outputs.default
        n = x.shape[2]
        self.handler.mult_mv(
            flatten_time(x), buffers.parameters.w.reshape((1, n)), flatten_time(y)
        )

    def _gradient(self, buffers, tmp, dw):
        self.handler.sum_t(tmp, 0, dw)

    def backward_pass(self, buffers):
        _h = self.handler
        x, dx = buffers.inputs.default, buffers.input_deltas.default
        dy, w = buffers.output_deltas.default, buffers.parameters.w
        n = x.shape[2]
        tmp = flatten_time(buffers.internals.tmp)
        _h.mult_add_mv(flatten_time(dy), w.reshape((1, n)), flatten_time(dx))
        _h.mult_tt(flatten_time(dy), flatten_time(x), tmp)
        self._gradient(buffers, tmp, buffers.gradients.w)


class FalselyOverwritingLayerImpl(ScaleLayerImpl):
    """Declares overwrites_gradients but adds into its gradient."""

    def setup(self, kwargs, in_shapes):
        outputs, parameters, internals = super().setup(kwargs, in_shapes)
        n = in_shapes['default'].feature_size
        internals['total'] = BufferStructure('B', n, is_backward_only=True)
        return outputs, parameters, internals

    def _gradient(self, buffers, tmp, dw):
        total = buffers.internals.total[0]
        self.handler.sum_t(tmp, 0, total)
        self.handler.add_tt(dw, total, dw)


class ScaleInputLayerImpl(CopyLayerImpl):
    """y = 2x, computed by doubling its input in place: deltas right, the
    input (another layer's output) changed."""

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs.default
        self.handler.mult_st(2.0, x, x)
        self.handler.copy_to(x, buffers.outputs.default)

    def backward_pass(self, buffers):
        self.handler.mult_add_st(
            2.0, buffers.output_deltas.default, buffers.input_deltas.default
        )


class ScaleParameterLayerImpl(ScaleLayerImpl):
    """Writes its parameter in the forward pass (adds 0.5 to it)."""

    def forward_pass(self, buffers, training_pass=True):
        w = buffers.parameters.w
        self.handler.add_st(0.5, w, w)
        super().forward_pass(buffers, training_pass)


class CopyOrOverwriteLayerImpl(CopyLayerImpl):
    """Adds its input deltas, or overwrites them when asked to: correct."""

    can_overwrite_input_deltas = True

    def backward_pass(self, buffers):
        if 'default' in self.overwrite_input_deltas:
            self.handler.copy_to(
                buffers.output_deltas.default, buffers.input_deltas.default
            )
        else:
            super().backward_pass(buffers)


class FalselyOverwritingInputsLayerImpl(CopyLayerImpl):
    """Declares can_overwrite_input_deltas but always adds."""

    can_overwrite_input_deltas = True


class PartlyOverwritingInputsLayerImpl(CopyOrOverwriteLayerImpl):
    """Asked to overwrite, writes all but the last time step."""

    def backward_pass(self, buffers):
        if 'default' not in self.overwrite_input_deltas:
            super().backward_pass(buffers)
            return
        dy, dx = buffers.output_deltas.default, buffers.input_deltas.default
        self.handler.copy_to(dy[:-1], dx[:-1])
        self.handler.add_tt(dx[-1], dy[-1], dx[-1])


class FalselyOverwritingInternalsLayerImpl(StaleBackwardLayerImpl):
    """Declares overwrites_backward_internals but reads its internal first."""

    overwrites_backward_internals = True


class TwoInputsLayerImpl(Layer):
    """y = a + b; asked to overwrite any input's deltas, overwrites both."""

    expected_inputs = {
        'a': StructureTemplate('T', 'B', '...'),
        'b': StructureTemplate('T', 'B', '...'),
    }
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
            if self.overwrite_input_deltas:  # wrong: should test the name
                _h.copy_to(dy, dx)
            else:
                _h.add_tt(dx, dy, dx)


class FalselyIndependentLayerImpl(TwoInputsLayerImpl):
    """y = a + b, correct, but declares y independent of b."""

    can_overwrite_input_deltas = False
    independent_outputs = {'default': ('b',)}


def test_a_correct_layer_passes():
    run_layer_tests(instantiate_layer(CopyLayerImpl, {'default': (3,)}), SPEC)
    run_layer_tests(instantiate_layer(ScaleLayerImpl, {'default': (3,)}), SPEC)
    run_layer_tests(
        instantiate_layer(CopyOrOverwriteLayerImpl, {'default': (3,)}), SPEC
    )


@pytest.mark.parametrize(
    'layer_class, message',
    [
        (StaleBackwardLayerImpl, 'previous contents of backward internals'),
        (OverwritingLayerImpl, 'overwritten instead of added'),
        (StaleForwardLayerImpl, 'previous contents of internals or outputs'),
        (FalselyOverwritingLayerImpl, 'or of the gradients'),
        (FalselyOverwritingInputsLayerImpl, 'declares can_overwrite_input_deltas'),
        (PartlyOverwritingInputsLayerImpl, 'declares can_overwrite_input_deltas'),
        (FalselyOverwritingInternalsLayerImpl, 'overwrites_backward_internals is'),
        (TwoInputsLayerImpl, "'b' were not added to"),
        (ScratchOutputLayerImpl, "backward pass changed the output 'default'"),
        (ScaleInputLayerImpl, "forward pass changed the input 'default'"),
        (FalselyIndependentLayerImpl, "declares it independent of 'b'"),
        (ScaleParameterLayerImpl, "forward pass changed the parameter 'w'"),
    ],
)
def test_buggy_layers_fail_with_a_named_error(layer_class, message):
    two = (TwoInputsLayerImpl, FalselyIndependentLayerImpl)
    inputs = {'a': (3,), 'b': (3,)} if layer_class in two else None
    layer = instantiate_layer(layer_class, inputs or {'default': (3,)})
    with pytest.raises(LayerTestError, match=message) as info:
        run_layer_tests(layer, SPEC)
    assert layer_class.__name__ in str(info.value)


# ------------------------------------------------------------ activations ---


class ActivationLayerImpl(Layer):
    """y = f(x) for the layer's activation f (default 'tanh'), correct."""

    expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
    expected_kwargs = {'activation'}

    def setup(self, kwargs, in_shapes):
        self.activation = kwargs.get('activation', 'tanh')
        return OrderedDict(default=in_shapes['default']), OrderedDict(), OrderedDict()

    def _derivative(self):
        return self.activation

    def forward_pass(self, buffers, training_pass=True):
        self.handler.act_func[self.activation](
            buffers.inputs.default, buffers.outputs.default
        )

    def backward_pass(self, buffers):
        _h = self.handler
        x, y = buffers.inputs.default, buffers.outputs.default
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default
        _h.act_func_deriv[self._derivative()](x, y, dy, dy)
        _h.add_tt(dy, dx, dx)


class WrongElDerivativeLayerImpl(ActivationLayerImpl):
    """Uses the derivative of 'rel' for 'el'."""

    def _derivative(self):
        return 'rel' if self.activation == 'el' else self.activation


def test_the_guides_loop_finds_a_wrong_derivative_of_one_activation():
    with pytest.raises(LayerTestError, match="'activation': 'el'"):
        for spec in get_test_configurations():
            layer = instantiate_layer(
                WrongElDerivativeLayerImpl,
                {'default': (3,)},
                activation=spec['activation'],
            )
            run_layer_tests(layer, spec)


def test_a_layer_built_without_the_configurations_activation_is_refused():
    # the guide's loop before 0.6: every layer got its default activation,
    # so the configurations never tested 'el' and the wrong derivative passed
    with pytest.raises(
        ValidationError,
        match=r"spec\['activation'\]='sigmoid', but the layer was built with "
        r"activation='tanh'.*activation=spec\['activation'\]",
    ):
        for spec in get_test_configurations():
            layer = instantiate_layer(WrongElDerivativeLayerImpl, {'default': (3,)})
            run_layer_tests(layer, spec)


def test_a_builtin_layer_with_its_default_activation_is_refused_another():
    layer = instantiate_layer(FullyConnectedLayerImpl, {'default': (3,)}, size=2)
    with pytest.raises(ValidationError, match="built with activation='rel'"):
        run_layer_tests(layer, {**SPEC, 'activation': 'el'})


@pytest.mark.parametrize('built, tested', [('relu', 'rel'), ('rel', 'relu')])
def test_an_alias_of_the_layers_activation_is_its_activation(built, tested):
    layer = instantiate_layer(
        FullyConnectedLayerImpl, {'default': (3,)}, size=2, activation=built
    )
    run_layer_tests(layer, {**SPEC, 'activation': tested})


def test_messages_name_the_activation_the_layer_was_built_with():
    layer = instantiate_layer(
        WrongElDerivativeLayerImpl, {'default': (3,)}, activation='el'
    )
    with pytest.raises(LayerTestError, match="'activation': 'el'"):
        run_layer_tests(layer, SPEC)


def test_messages_claim_no_activation_for_a_layer_without_one():
    layer = instantiate_layer(OverwritingLayerImpl, {'default': (3,)})
    with pytest.raises(LayerTestError, match='overwritten') as info:
        run_layer_tests(layer, {**SPEC, 'activation': 'tanh'})
    assert 'activation' not in str(info.value)


# ------------------------------------------------------------ bad specs ---

BAD_SPECS = [
    (
        {'time_steps': 0, 'batch_size': 2},
        r"spec\['time_steps'\] must be a positive int. Received: "
        r"spec\['time_steps'\]=0",
    ),
    (
        {'time_steps': 2, 'batch_size': 0},
        r"spec\['batch_size'\] must be a positive int. Received: "
        r"spec\['batch_size'\]=0",
    ),
    (
        {'time_steps': 2, 'batch_size': '2'},
        r"spec\['batch_size'\] must be a positive int. Received: "
        r"spec\['batch_size'\]='2'",
    ),
    ({'time_steps': 2.0, 'batch_size': 2}, r"spec\['time_steps'\] must be"),
    ({'time_steps': True, 'batch_size': 2}, r"spec\['time_steps'\] must be"),
    (
        {'time_step': 3, 'batch_size': 2},
        r"unknown key 'time_step' \(did you mean 'time_steps'\?\)",
    ),
    (
        {**SPEC, 'inits': {'scal': 1.0}},
        r"spec\['inits'\] names 'scal', which is not a parameter of the "
        r"layer. Its parameters are: \['w'\]",
    ),
    ({**SPEC, 'inits': [1.0]}, r"spec\['inits'\] must be a dict"),
    ({**SPEC, 'activation': 'tanhh'}, r"spec\['activation'\] must be one of"),
    ({**SPEC, 'output_weights': 'one'}, r"spec\['output_weights'\] must be"),
    ({**SPEC, 'eps': 0}, r"spec\['eps'\] must be a positive finite number"),
    ({**SPEC, 'delta_rtol': -1e-3}, r"spec\['delta_rtol'\] must be a non-neg"),
    ({**SPEC, 'gradient_atol': 'small'}, r"spec\['gradient_atol'\] must be"),
    ({**SPEC, 'seed': -1}, r"spec\['seed'\] must be an int in"),
]


@pytest.mark.parametrize('spec, message', BAD_SPECS)
def test_a_bad_spec_is_refused_with_a_named_error(spec, message):
    layer = instantiate_layer(ScaleLayerImpl, {'default': (3,)})
    with pytest.raises(ValidationError, match=message) as info:
        run_layer_tests(layer, spec)
    assert "ScaleLayerImpl 'Scale'" in str(info.value)


@pytest.mark.parametrize(
    'spec', [{'time_steps': 0, 'batch_size': 3}, {'time_steps': 2, 'batch_size': 0}]
)
def test_empty_sizes_do_not_pass_a_broken_layer(spec):
    layer = instantiate_layer(OverwritingLayerImpl, {'default': (3,)})
    with pytest.raises(ValidationError, match='must be a positive int'):
        run_layer_tests(layer, spec)


def test_a_wrongly_typed_spec_value_is_also_a_type_error():
    layer = instantiate_layer(ScaleLayerImpl, {'default': (3,)})
    with pytest.raises(TypeError, match=r"spec\['batch_size'\]"):
        run_layer_tests(layer, {'time_steps': 1, 'batch_size': '2'})


def test_a_spec_that_is_not_a_dict_is_refused():
    layer = instantiate_layer(ScaleLayerImpl, {'default': (3,)})
    with pytest.raises(ValidationError, match=r'spec must be a dict'):
        run_layer_tests(layer, [('time_steps', 2)])


def test_every_documented_spec_entry_is_accepted():
    layer = instantiate_layer(ScaleLayerImpl, {'default': (3,)})
    run_layer_tests(
        layer,
        {
            'time_steps': np.int64(2),
            'batch_size': 3,
            'activation': 'el',
            'default': np.ones((2, 3, 3)),
            'inits': {'w': 0.5},
            'eps': 1e-6,
            'output_weights': 'ones',
            'delta_rtol': 1e-3,
            'delta_atol': 1e-4,
            'gradient_rtol': 1e-4,
            'gradient_atol': 1e-4,
            'seed': 3,
        },
    )


@pytest.mark.parametrize(
    'layer, received',
    [
        (ScaleLayerImpl, 'the class ScaleLayerImpl'),
        (None, 'layer=None'),
    ],
)
def test_a_layer_that_is_not_an_instance_is_refused(layer, received):
    with pytest.raises(ValidationError, match='instantiate_layer') as info:
        run_layer_tests(layer, SPEC)
    assert received in str(info.value)
    with pytest.raises(ValidationError, match='instantiate_layer'):
        set_up_layer(layer, SPEC)
