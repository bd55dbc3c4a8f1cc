"""Values that a narrower dtype turns into 0 or inf, silently.

* Adam, AdamW and RMSProp add ``epsilon`` in the handler's dtype: the
  default 1e-8 is 0 in float16, so a zero gradient gave 0 / 0 = NaN at the
  first update. An epsilon below the dtype's smallest normal number is now
  refused when the stepper starts, and before each step.
* MeanSquaredError squared and summed a float16 network's errors in
  float16: errors of 6 over 4000 rows scored inf. It computes in float64,
  and so does the weight (mask sum) of every scorer.
* export_onnx cast a float64 network's parameters to float32: a value
  beyond the float32 range became inf in the model. It is refused, naming
  the parameter.
"""

import importlib.util

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError, TrainingValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.scorers import MeanSquaredError
from brainstorm.training.steppers import (
    AdamStepper,
    AdamWStepper,
    MultiStepper,
    RMSPropStepper,
)

ADAPTIVE = [AdamStepper, AdamWStepper, RMSPropStepper]

needs_onnx = pytest.mark.skipif(
    importlib.util.find_spec('onnx') is None, reason='onnx is not installed'
)


def classification_net(dtype):
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(dtype))
    net.initialize(bs.initializers.Gaussian(0.1))
    return net


def zero_feature_data():
    """Data whose third feature is always 0: its weights get 0 gradients."""
    x = np.random.RandomState(0).randn(1, 8, 3)
    x[..., 2] = 0
    return {'default': x, 'targets': (x[..., :1] > 0).astype(int)}


def assert_epsilon_refused(message, stepper_class, epsilon, dtype_name):
    assert stepper_class.__name__ in message
    assert f'epsilon={epsilon!r}' in message  # what was received
    assert dtype_name in message
    assert 'at least' in message  # what is expected


# ---------------------------------------------- epsilon in the dtype ---


@pytest.mark.parametrize('stepper_class', ADAPTIVE)
def test_default_epsilon_is_refused_on_float16_at_start(stepper_class):
    net = classification_net(np.float16)
    stepper = stepper_class(0.01)
    with pytest.raises(TrainingValidationError) as info:
        stepper.start(net)
    message = str(info.value)
    assert_epsilon_refused(message, stepper_class, 1e-08, 'float16')
    assert '6.104e-05' in message  # the smallest normal float16
    assert 'epsilon=0.0001' in message  # a value that works
    assert np.isfinite(net.get('parameters')).all()


def test_a_refused_start_leaves_the_stepper_unstarted():
    # the check runs before anything is bound: the stepper is not half
    # started on the network it refused
    net = classification_net(np.float16)
    stepper = AdamStepper(0.01)
    with pytest.raises(TrainingValidationError, match='epsilon'):
        stepper.start(net)
    with pytest.raises(TrainingValidationError, match='start'):
        stepper.get_state()


@pytest.mark.parametrize('stepper_class', ADAPTIVE)
def test_trainer_refuses_default_epsilon_on_float16_not_non_finite(stepper_class):
    net = classification_net(np.float16)
    data = zero_feature_data()
    trainer = bs.Trainer(stepper_class(0.01), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with pytest.raises(TrainingValidationError) as info:
        trainer.train(net, bs.data_iterators.Minibatches(8, **data))
    assert not isinstance(info.value, bs.errors.NonFiniteError)
    assert_epsilon_refused(str(info.value), stepper_class, 1e-08, 'float16')


def test_subnormal_epsilon_is_refused():
    # 1e-6 is no 0 in float16 but subnormal: a gradient of 0.01 over it
    # is 1e4 times the learning rate, and devices may flush it to 0
    net = classification_net(np.float16)
    with pytest.raises(TrainingValidationError) as info:
        AdamStepper(0.01, epsilon=1e-6).start(net)
    assert_epsilon_refused(str(info.value), AdamStepper, 1e-06, 'float16')


@pytest.mark.parametrize('stepper_class', ADAPTIVE)
def test_float16_epsilon_that_fits_keeps_zero_gradients_finite(stepper_class):
    net = classification_net(np.float16)
    before = net.get('Output_projection.parameters.W').copy()
    stepper = stepper_class(0.01, epsilon=1e-4)
    stepper.start(net)
    net.provide_external_data(zero_feature_data())
    stepper.run()
    W = net.get('Output_projection.parameters.W')
    assert np.isfinite(net.get('parameters')).all()
    # the weights of the feature that is always 0 did not move
    # (AdamW decays them a little)
    np.testing.assert_allclose(W[:, 2], before[:, 2], rtol=2e-3)


@pytest.mark.parametrize('stepper_class', ADAPTIVE)
def test_the_smallest_normal_float16_is_a_valid_epsilon(stepper_class):
    # the bound itself is allowed ("at least")
    net = classification_net(np.float16)
    stepper = stepper_class(0.01, epsilon=float(np.finfo(np.float16).tiny))
    stepper.start(net)
    net.provide_external_data(zero_feature_data())
    stepper.run()
    assert np.isfinite(net.get('parameters')).all()


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('stepper_class', ADAPTIVE)
def test_default_epsilon_still_trains_float32_and_float64(stepper_class, dtype):
    net = classification_net(dtype)
    stepper = stepper_class(0.01)
    stepper.start(net)
    net.provide_external_data(zero_feature_data())
    stepper.run()
    assert np.isfinite(net.get('parameters')).all()


def test_epsilon_made_too_small_after_start_is_refused_before_the_step():
    net = classification_net(np.float16)
    stepper = AdamStepper(0.01, epsilon=1e-4)
    stepper.start(net)
    net.provide_external_data(zero_feature_data())
    stepper.epsilon = 1e-8  # as a schedule might set it
    before = net.get('parameters').copy()
    with pytest.raises(TrainingValidationError) as info:
        stepper.run()
    assert_epsilon_refused(str(info.value), AdamStepper, 1e-08, 'float16')
    np.testing.assert_array_equal(net.get('parameters'), before)


def test_moving_the_network_to_float16_after_start_is_refused_before_the_step():
    net = classification_net(np.float32)
    stepper = RMSPropStepper(0.01)
    stepper.start(net)
    net.set_handler(NumpyHandler(np.float16))
    net.provide_external_data(zero_feature_data())
    with pytest.raises(TrainingValidationError) as info:
        stepper.run()
    assert_epsilon_refused(str(info.value), RMSPropStepper, 1e-08, 'float16')
    assert np.isfinite(net.get('parameters')).all()


def test_multistepper_refuses_default_epsilon_of_its_adam_on_float16():
    net = classification_net(np.float16)
    stepper = MultiStepper({'default': AdamStepper(0.01)})
    with pytest.raises(TrainingValidationError) as info:
        stepper.start(net)
    assert_epsilon_refused(str(info.value), AdamStepper, 1e-08, 'float16')


# ------------------------------------------------ MSE of float16 nets ---


def regression_net(dtype, mask_name=None):
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1, mask_name=mask_name)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(dtype))
    net.initialize(0.0001, seed=1)
    return net


def mse_of(net, rows, **extra):
    x = np.random.RandomState(0).randn(1, rows, 2)
    data = dict(default=x, targets=np.full((1, rows, 1), 6.0), **extra)
    iterator = bs.data_iterators.Minibatches(rows, **data)
    return bs.tools.evaluate(
        net,
        iterator,
        scorers=[MeanSquaredError()],
        out_name='Output.outputs.predictions',
        **({'mask_name': 'mask'} if extra else {}),
    )


def test_mean_squared_error_of_float16_network_is_finite():
    # errors of about 6: squares 36, their sum over 4000 rows 144000 > 65504
    result16 = mse_of(regression_net(np.float16), 4000)
    result64 = mse_of(regression_net(np.float64), 4000)
    assert np.isfinite(result16['MeanSquaredError']), result16
    np.testing.assert_allclose(
        result16['MeanSquaredError'], result64['MeanSquaredError'], rtol=1e-3
    )


def test_mean_squared_error_of_float16_arrays_squares_in_float64():
    # an error of 300: its square (90000) is beyond float16's 65504
    targets = np.full((3, 2), 300.0, dtype=np.float16)
    predicted = np.zeros((3, 2), dtype=np.float16)
    expected = 0.5 * 6 * 300.0**2
    assert MeanSquaredError()(targets, predicted) == expected
    mask = np.ones((3, 2), dtype=np.float16)  # one weight per element
    assert MeanSquaredError()(targets, predicted, mask) == expected


def test_float16_mask_weights_are_summed_in_float64():
    # 70000 rows of weight 1: their sum is beyond float16's 65504, so the
    # weight was inf and the aggregated score 0
    rows = 70000
    mask = np.ones((1, rows, 1))
    result16 = mse_of(regression_net(np.float16, 'mask'), rows, mask=mask)
    result64 = mse_of(regression_net(np.float64, 'mask'), rows, mask=mask)
    assert result16['MeanSquaredError'] > 17, result16
    np.testing.assert_allclose(
        result16['MeanSquaredError'], result64['MeanSquaredError'], rtol=1e-3
    )


# ---------------------------------------------- export_onnx of float64 ---


def float64_net(output_weight):
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    hidden = bs.layers.FullyConnected(2, name='H', activation='linear')
    net = bs.Network.from_layer(inp >> hidden >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(
        {
            'default': bs.initializers.Gaussian(0.1),
            'H': {'W': 1e-39, 'bias': 0.0},
            'Output_projection': {'W': output_weight, 'bias': 0.5},
        }
    )
    return net


@needs_onnx
def test_export_refuses_float64_parameter_beyond_float32(tmp_path):
    net = float64_net(1e39)  # finite in brainstorm: predictions 4.5
    path = tmp_path / 'm.onnx'
    with pytest.raises(NetworkValidationError) as info:
        bs.tools.export_onnx(net, str(path))
    message = str(info.value)
    assert "'Output_projection.parameters.W'" in message
    assert 'beyond the float32 range' in message  # expected
    assert '1e+39' in message  # received
    assert not path.exists()


@needs_onnx
def test_export_refuses_nan_parameter(tmp_path):
    net = float64_net(0.5)
    bias = net.buffer['Output_projection']['parameters']['bias']
    net.handler.set_from_numpy(bias, np.array([np.nan]))
    path = tmp_path / 'm.onnx'
    with pytest.raises(NetworkValidationError) as info:
        bs.tools.export_onnx(net, str(path))
    message = str(info.value)
    assert "'Output_projection.parameters.bias'" in message
    assert 'NaN' in message and 'float32' in message
    assert not path.exists()


@needs_onnx
def test_export_of_float64_network_within_float32_still_works(tmp_path):
    net = float64_net(0.5)
    path = tmp_path / 'm.onnx'
    bs.tools.export_onnx(net, str(path))
    assert path.stat().st_size > 0
