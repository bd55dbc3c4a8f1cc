"""Moving to a narrower dtype refuses values it would make inf.

``initialize`` on a float16 handler refuses a bias of 70000, but a network
initialised on float64 and moved with ``set_handler(NumpyHandler(
np.float16))`` took it with only NumPy's RuntimeWarning: the parameters
and the predictions became inf. A started stepper's state (Adam's moments)
followed the network the same way, and ``set_state`` cast a float64
checkpoint the same way. Now each refuses before it moves anything, naming
the parameter or state entry, the value and the dtype; a move to an equal
or wider dtype only compares the dtypes.
"""

import warnings

import numpy as np
import pytest

import brainstorm as bs
import brainstorm.handlers.representable as representable
import brainstorm.structure.buffers as buffers
from brainstorm.errors import NetworkValidationError, TrainingValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.training import steppers as S

X = np.linspace(-1.0, 1.0, 6).reshape(1, 3, 2)
DATA = {'default': X, 'targets': np.zeros((1, 3, 1))}


def _net(bias=70000.0):
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize({'default': 0.5, 'Output_projection': {'bias': bias}})
    return net


def _gradients(net):
    net.provide_external_data(DATA)
    net.forward_pass(training_pass=True)
    net.backward_pass()
    return net.get('gradients').copy()


def _set_handler_silently(net, handler):
    """``net.set_handler(handler)``, failing on any warning (a cast's)."""
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        net.set_handler(handler)


def test_set_handler_refuses_a_parameter_beyond_the_new_range():
    net = _net()
    old_handler = net.handler
    parameters = net.get('parameters').copy()
    prediction = net.predict(X, out_name='Output.outputs.predictions')
    gradients = _gradients(net)
    with pytest.raises(NetworkValidationError) as info:
        _set_handler_silently(net, NumpyHandler(np.float16))
    message = str(info.value)
    assert 'Output_projection.bias' in message  # the parameter
    assert '70000.0' in message  # the value received
    assert 'float16' in message  # the dtype it does not fit
    assert 'largest 65504' in message  # what was expected
    assert 'float64' in message  # where the memory stays
    # the network is as it was, on its old handler
    assert net.handler is old_handler
    assert net.buffer_manager.handler is old_handler
    assert all(layer.handler is old_handler for layer in net.layers.values())
    assert net.get('parameters').dtype == np.float64
    np.testing.assert_array_equal(net.get('parameters'), parameters)
    np.testing.assert_array_equal(
        net.predict(X, out_name='Output.outputs.predictions'), prediction
    )
    assert np.isfinite(prediction).all()
    np.testing.assert_array_equal(_gradients(net), gradients)


def test_the_first_parameter_beyond_the_range_is_named_with_its_index():
    net = _net(bias=1.0)
    net.buffer.Output_projection.parameters.W[0, 1] = -1e5
    with pytest.raises(NetworkValidationError) as info:
        _set_handler_silently(net, NumpyHandler(np.float16))
    message = str(info.value)
    assert 'Output_projection.W' in message
    assert 'index (0, 1)' in message
    assert '-100000.0' in message


def test_float32_range_is_checked_too():
    net = _net(bias=1e39)
    with pytest.raises(
        NetworkValidationError, match=r'Output_projection\.bias.*float32'
    ):
        _set_handler_silently(net, NumpyHandler(np.float32))
    assert net.handler.dtype == np.float64
    assert net.get('parameters')[-1] == 1e39


def test_representable_parameters_still_move_to_a_narrower_dtype():
    net = _net(bias=60000.0)
    _set_handler_silently(net, NumpyHandler(np.float16))
    assert net.handler.dtype == np.float16
    np.testing.assert_array_equal(net.get('parameters'), [0.5, 0.5, 60000.0])
    net.buffer.Output_projection.parameters.bias[0] = 100.0
    assert np.isfinite(net.predict(X, out_name='Output.outputs.predictions')).all()


def test_nan_already_in_the_parameters_is_moved_not_refused():
    # a cast keeps NaN: only values the cast makes inf are refused
    net = _net(bias=1.0)
    net.buffer.Output_projection.parameters.W[0, 0] = np.nan
    net.set_handler(NumpyHandler(np.float16))
    parameters = net.get('parameters')
    assert np.isnan(parameters[0])
    np.testing.assert_array_equal(parameters[1:], [0.5, 1.0])


def test_a_finite_overflow_is_found_behind_a_nan():
    net = _net()
    net.buffer.Output_projection.parameters.W[0, 0] = np.nan
    with pytest.raises(NetworkValidationError, match=r'bias holds .* \(70000\.0\)'):
        net.set_handler(NumpyHandler(np.float16))
    assert net.handler.dtype == np.float64


def test_an_equal_or_wider_dtype_only_compares_the_dtypes(monkeypatch):
    def never(*args):
        raise AssertionError('values looked at for a move that cannot overflow')

    net = _net(bias=1.0)
    net.set_handler(NumpyHandler(np.float16))
    monkeypatch.setattr(buffers, 'find_overflow', never)
    monkeypatch.setattr(representable, 'find_unrepresentable', never)
    net.set_handler(NumpyHandler(np.float16))
    net.set_handler(NumpyHandler(np.float32))
    net.set_handler(NumpyHandler(np.float64))
    assert net.handler.dtype == np.float64
    np.testing.assert_array_equal(net.get('parameters'), [0.5, 0.5, 1.0])


def test_a_stale_gradient_is_not_refused():
    # scratch: the next backward pass writes the gradients anew
    net = _net(bias=1.0)
    net.buffer.Output_projection.gradients.bias[0] = 1e6
    _set_handler_silently(net, NumpyHandler(np.float16))
    assert net.handler.dtype == np.float16
    np.testing.assert_array_equal(net.get('parameters'), [0.5, 0.5, 1.0])


# ------------------------------------------------------------- steppers ---


def _started_adam(net, v):
    stepper = S.AdamStepper(0.01, epsilon=1e-4)
    stepper.start(net)
    state = stepper.get_state()
    state['part0.v'][:] = v
    stepper.set_state(state)
    return stepper, stepper.get_state()


def test_a_stepper_refuses_to_move_a_state_beyond_the_new_range():
    net = _net(bias=1.0)
    stepper, state = _started_adam(net, [1.0, 2.0, 1e5])
    old_parts = stepper._parts
    net.set_handler(NumpyHandler(np.float16))
    net.provide_external_data(DATA)
    with pytest.raises(TrainingValidationError) as info:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            stepper.run()
    message = str(info.value)
    assert 'AdamStepper' in message
    assert "'part0.v'" in message  # the state entry
    assert '100000.0' in message  # the value received
    assert 'index (2,)' in message
    assert 'float16' in message and 'largest 65504' in message
    assert stepper._parts is old_parts  # nothing moved
    # back on float64 the stepper goes on with its state unchanged
    net.set_handler(NumpyHandler(np.float64))
    restored = stepper.get_state()
    for key in state:
        np.testing.assert_array_equal(restored[key], state[key])
    assert restored['part0.v'].dtype == np.float64
    net.provide_external_data(DATA)
    stepper.run()
    assert np.isfinite(net.get('parameters')).all()


def test_a_stepper_state_in_range_follows_to_a_narrower_dtype():
    net = _net(bias=1.0)
    stepper, _ = _started_adam(net, [1.0, 2.0, 3.0])
    net.set_handler(NumpyHandler(np.float16))
    net.provide_external_data(DATA)
    stepper.run()
    assert stepper.get_state()['part0.v'].dtype == np.float16
    assert np.isfinite(net.get('parameters')).all()


def test_set_state_refuses_a_checkpoint_beyond_the_range():
    source = _net(bias=1.0)
    _, checkpoint = _started_adam(source, [1.0, -7e4, 3.0])
    net = _net(bias=1.0)
    net.set_handler(NumpyHandler(np.float16))
    stepper = S.AdamStepper(0.01, epsilon=1e-4)
    stepper.start(net)
    before = stepper.get_state()
    with pytest.raises(TrainingValidationError) as info:
        with warnings.catch_warnings():
            warnings.simplefilter('error')
            stepper.set_state(checkpoint)
    message = str(info.value)
    assert "'part0.v'" in message
    assert '-70000.0' in message
    assert 'index (1,)' in message
    assert 'float16' in message
    assert 'Nothing was restored' in message
    after = stepper.get_state()
    for key in before:
        np.testing.assert_array_equal(after[key], before[key])


def test_set_state_of_a_float64_checkpoint_in_range_on_float16():
    source = _net(bias=1.0)
    _, checkpoint = _started_adam(source, [1.0, 2.0, 3.0])
    net = _net(bias=1.0)
    net.set_handler(NumpyHandler(np.float16))
    stepper = S.AdamStepper(0.01, epsilon=1e-4)
    stepper.start(net)
    stepper.set_state(checkpoint)
    np.testing.assert_array_equal(stepper.get_state()['part0.v'], [1.0, 2.0, 3.0])


class _NoColumns(NumpyHandler):
    """Keeps no convolution columns: moving to it lays the memory out anew."""

    def keeps_conv_columns(self, out_cells):
        return False


def test_a_refusal_does_not_mark_the_memory_moved():
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize({'default': 0.5, 'Output_projection': {'bias': 70000.0}})
    net.provide_external_data(DATA)
    net.forward_pass(training_pass=True)
    with pytest.raises(NetworkValidationError, match='Output_projection.bias'):
        net.set_handler(NumpyHandler(np.float16))
    net.backward_pass()  # the forward pass before the refusal still counts
    assert np.isfinite(net.get('gradients')).all()


def test_a_relayout_refuses_before_it_changes_the_layers():
    inp, out = bs.tools.get_in_out_layers('classification', (24, 24, 1), 2)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(4, kernel_size=(3, 3), padding=1, name='C')
        >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    assert 'columns' in net.layers['C'].internal_shapes
    net.initialize({'default': 0.1, 'C': {'bias': 1e5}})
    parameters = net.get('parameters').copy()
    manager = net.buffer_manager
    with pytest.raises(NetworkValidationError, match=r'C\.bias.*float16'):
        net.set_handler(_NoColumns(np.float16))
    assert net.buffer_manager is manager
    assert 'columns' in net.layers['C'].internal_shapes
    np.testing.assert_array_equal(net.get('parameters'), parameters)
    data = {'default': np.ones((1, 2, 24, 24, 1)), 'targets': np.zeros((1, 2, 1))}
    net.provide_external_data(data)
    net.forward_pass()
    # and a representable network is laid out anew on float16
    net.buffer.C.parameters.bias[:] = 1.0
    net.set_handler(_NoColumns(np.float16))
    assert 'columns' not in net.layers['C'].internal_shapes
    assert net.handler.dtype == np.float16


def test_a_float64_context_beyond_float16_is_refused_on_a_float16_network():
    # a NumPy context is not converted on NumpyHandler: it was cast by the
    # copy into the network, 1e5 to inf, and the outputs were NaN
    net = bs.Network.from_layer(
        bs.layers.Input({'default': ('T', 'B', 2)}) >> bs.layers.Lstm(3, name='R')
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    x = np.ones((2, 4, 2))
    net.provide_external_data({'default': x})
    net.forward_pass()
    context = net.get_context()
    context[2] = np.full(context[2].shape, 1e5)
    net.set_handler(NumpyHandler(np.float16))
    net.provide_external_data({'default': x.astype(np.float16)})
    with pytest.raises(NetworkValidationError) as error:
        net.forward_pass(context=context)
    for part in ('context', 'float16', '100000.0', 'index (0, 0, 0)'):
        assert part in str(error.value), str(error.value)
    context[2] = np.full(context[2].shape, 0.5)  # within the range: taken
    net.forward_pass(context=context)
    assert np.isfinite(net.get('R.outputs.default')).all()
