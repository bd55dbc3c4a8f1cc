"""ClockworkLstm: SPEC parameters, forward pass against plain NumPy with a
context, inactive cells keeping output and cell state, untrained timing,
exact gradients with a context, a backward pass that leaves the forward
internals alone, equality with Lstm for timing 1."""

import numpy as np
import pytest

from brainstorm.initializers import Gaussian
from brainstorm.layers import ClockworkLstm
from brainstorm.layers.clockwork_lstm_layer import ClockworkLstmLayerImpl
from brainstorm.layers.lstm_layer import LstmLayerImpl
from brainstorm.testing import instantiate_layer
from tests.layers.layer_specs_recurrent import (
    LSTM_INTERNALS,
    LSTM_PARAMETERS,
    gradient_error_with_context,
    lstm_reference,
    regression_data,
    regression_net,
    run_with_context,
)

TIMING = [1, 2, 3, 4, 1]


def test_parameters_and_internals_follow_the_spec():
    layer = instantiate_layer(ClockworkLstmLayerImpl, {'default': (2, 3)}, size=5)
    assert list(layer.parameter_shapes) == LSTM_PARAMETERS + ['timing']
    assert layer.parameter_shapes['timing'].shape == (5,)
    assert layer.parameter_shapes['Wz'].shape == (5, 6)
    names = list(layer.internal_shapes)
    assert names[:20] == LSTM_INTERNALS + ['d' + n for n in LSTM_INTERNALS]
    assert layer.out_shapes['default'].context_size == 1
    assert layer.computes_no_gradients_for == ('timing',)
    assert layer.untrained_parameters == {'timing': 1.0}


@pytest.mark.parametrize('activation', ['tanh', 'sigmoid', 'rel', 'linear', 'el'])
def test_forward_pass_matches_numpy_with_a_context(activation):
    r = run_with_context(ClockworkLstmLayerImpl, TIMING, activation)
    y_ref, c_ref = lstm_reference(r['x'], r, r['y0'], r['c0'], activation, TIMING)
    np.testing.assert_allclose(r['y'], y_ref, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(r['Ca'], c_ref, rtol=1e-10, atol=1e-12)


def test_inactive_cells_keep_output_and_cell_state():
    r = run_with_context(ClockworkLstmLayerImpl, TIMING, 'tanh')
    y, c = r['y'], r['Ca']
    assert (y[0] != r['y0']).all() and (c[0] != r['c0']).all()
    for t in range(1, y.shape[0]):
        for i, period in enumerate(TIMING):
            if t % period:
                np.testing.assert_array_equal(y[t, :, i], y[t - 1, :, i])
                np.testing.assert_array_equal(c[t, :, i], c[t - 1, :, i])
            else:
                assert (y[t, :, i] != y[t - 1, :, i]).all()


def test_timing_one_is_an_lstm():
    r = run_with_context(ClockworkLstmLayerImpl, [1] * 5, 'tanh')
    lstm = run_with_context(
        LstmLayerImpl, None, 'tanh', params={n: r[n] for n in LSTM_PARAMETERS}
    )
    np.testing.assert_allclose(r['y'], lstm['y'], rtol=1e-12, atol=1e-14)


def clockwork_lstm_net():
    net = regression_net(ClockworkLstm(4, name='Cwl'))
    net.initialize({'Cwl': {'timing': [1, 2, 3, 1]}, 'default': Gaussian(0.5)}, seed=2)
    return net


def test_gradients_are_exact_with_a_context():
    assert gradient_error_with_context(clockwork_lstm_net(), skip=['Cwl.timing']) < 1e-7


def test_backward_pass_leaves_forward_internals_alone():
    # Brainstorm 0.5's backward pass wrote into the forward internal Fb
    net = clockwork_lstm_net()
    net.provide_external_data(regression_data(7, 2))
    net.forward_pass()
    names = LSTM_INTERNALS + ['inactive', 'timing_rows']
    before = {n: net.get(f'Cwl.internals.{n}') for n in names}
    outputs = net.get('Cwl.outputs.default')
    net.backward_pass()
    for name in names:
        np.testing.assert_array_equal(
            net.get(f'Cwl.internals.{name}'), before[name], err_msg=name
        )
    np.testing.assert_array_equal(net.get('Cwl.outputs.default'), outputs)
    assert not net.get('Cwl.gradients.timing').any()


def test_timing_is_initialized_to_one():
    net = regression_net(ClockworkLstm(4, name='Cwl'))
    net.initialize(Gaussian(0.5), seed=1)
    np.testing.assert_array_equal(net.get('Cwl.parameters.timing'), np.ones(4))
    assert (
        net.handler.get_numpy_copy(net.trainable_mask).sum()
        == net.get('parameters').size - 4
    )
