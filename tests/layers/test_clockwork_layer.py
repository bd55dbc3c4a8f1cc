"""Clockwork: SPEC parameters, forward pass against plain NumPy with a
context (every unit active at t = 0), timing as an untrained parameter,
exact gradients with a context, equality with Recurrent for timing 1."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.initializers import Gaussian
from brainstorm.layers import Clockwork
from brainstorm.layers.clockwork_layer import ClockworkLayerImpl
from brainstorm.layers.recurrent_layer import RecurrentLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError, NetworkValidationError
from tests.layers.layer_specs_recurrent import (
    gradient_error_with_context,
    recurrent_reference,
    regression_data,
    regression_net,
    run_with_context,
)

TIMING = [1, 2, 3, 4, 1]


def test_parameters_and_outputs_follow_the_spec():
    layer = instantiate_layer(ClockworkLayerImpl, {'default': (2, 3)}, size=5)
    assert [(n, s.shape) for n, s in layer.parameter_shapes.items()] == [
        ('W', (5, 6)),
        ('R', (5, 5)),
        ('bias', (5,)),
        ('timing', (5,)),
    ]
    assert list(layer.internal_shapes)[:3] == ['Ha', 'dHa', 'dHb']
    out = layer.out_shapes['default']
    assert out.shape == ('T', 'B', 5) and out.context_size == 1
    assert layer.computes_no_gradients_for == ('timing',)
    assert layer.untrained_parameters == {'timing': 1.0}


def test_size_defaults_to_the_flattened_input_size():
    layer = instantiate_layer(ClockworkLayerImpl, {'default': (2, 3)})
    assert layer.out_shapes['default'].shape == ('T', 'B', 6)


@pytest.mark.parametrize(
    'kwargs, match',
    [
        ({'size': 0}, 'size must be a positive int. Received: size=0'),
        ({'size': 4, 'activation': 'softmax'}, 'activation must be one of'),
    ],
)
def test_invalid_arguments_are_rejected(kwargs, match):
    with pytest.raises(LayerValidationError, match=match):
        instantiate_layer(ClockworkLayerImpl, {'default': (3,)}, **kwargs)


@pytest.mark.parametrize('activation', ['tanh', 'sigmoid', 'rel', 'linear', 'el'])
def test_forward_pass_matches_numpy_with_a_context(activation):
    r = run_with_context(ClockworkLayerImpl, TIMING, activation)
    expected = recurrent_reference(r['x'], r, r['y0'], activation, TIMING)
    np.testing.assert_allclose(r['y'], expected, rtol=1e-10, atol=1e-12)


def test_units_keep_their_output_between_ticks():
    r = run_with_context(ClockworkLayerImpl, TIMING, 'tanh')
    y, y0 = r['y'], r['y0']
    # every unit updates at t = 0, also with a context
    assert (y[0] != y0).all()
    for t in range(1, y.shape[0]):
        for i, period in enumerate(TIMING):
            if t % period:
                np.testing.assert_array_equal(y[t, :, i], y[t - 1, :, i])
            else:
                assert (y[t, :, i] != y[t - 1, :, i]).all()


def test_timing_one_is_a_recurrent_layer():
    r = run_with_context(ClockworkLayerImpl, [1] * 5, 'tanh')
    recurrent = run_with_context(
        RecurrentLayerImpl, None, 'tanh', params={n: r[n] for n in ('W', 'R', 'bias')}
    )
    np.testing.assert_allclose(r['y'], recurrent['y'], rtol=1e-12, atol=1e-14)


def test_timing_is_initialized_to_one_and_never_trained():
    net = regression_net(Clockwork(4, name='Clockwork'))
    net.initialize(Gaussian(0.5), seed=1)
    np.testing.assert_array_equal(net.get('Clockwork.parameters.timing'), np.ones(4))
    mask = net.handler.get_numpy_copy(net.trainable_mask)
    start, stop = net.layout['Clockwork']['parameters']['timing']['@slice']
    offset = net.layout['parameters']['@slice'][0]
    assert not mask[start - offset : stop - offset].any()
    assert mask.sum() == mask.size - 4

    net.initialize({'Clockwork': {'timing': [1, 2, 4, 8]}, 'default': Gaussian(0.5)})
    np.testing.assert_array_equal(net.get('Clockwork.parameters.timing'), [1, 2, 4, 8])
    net.provide_external_data(regression_data(9, 2))
    net.forward_pass()
    net.backward_pass()
    assert not net.get('Clockwork.gradients.timing').any()
    assert net.get('Clockwork.gradients.W').any()


def test_gradients_are_exact_with_a_context():
    net = regression_net(Clockwork(4, name='Clockwork'))
    net.initialize(
        {'Clockwork': {'timing': [1, 2, 3, 1]}, 'default': Gaussian(0.5)}, seed=2
    )
    assert gradient_error_with_context(net, skip=['Clockwork.timing']) < 1e-7


def _clock_net(layer):
    inp = bs.layers.Input({'default': ('T', 'B', 2)})
    return bs.Network.from_layer(inp >> getattr(bs.layers, layer)(4, name='C'))


@pytest.mark.parametrize('layer', ['Clockwork', 'ClockworkLstm'])
def test_a_timing_of_zero_is_refused_when_initialized_naming_the_parameter(layer):
    """A timing of 0 made ``fmod(t, 0)`` NaN: the unit never updated after
    t = 0, with only NumPy's RuntimeWarning."""
    net = _clock_net(layer)
    net.initialize({'C': {'timing': [1, 2, 3, 4]}, 'default': 0.1}, seed=1)
    before = net.get('parameters')
    with pytest.raises(NetworkValidationError, match=r'C\.timing.*timing\[2\] = 0\.0'):
        net.initialize({'C': {'timing': [1, 2, 0, 4]}, 'default': 0.2}, seed=1)
    np.testing.assert_array_equal(net.get('parameters'), before)


@pytest.mark.parametrize('layer', ['Clockwork', 'ClockworkLstm'])
def test_fractional_and_negative_timings_keep_their_05_meaning(layer):
    """fmod(t, 1.5) is 0 at t = 0, 3, 6: such a unit updates every 3 steps,
    as in Brainstorm 0.5 (and -2 as 2)."""
    odd, plain = _clock_net(layer), _clock_net(layer)
    odd.initialize({'C': {'timing': [1.5, -2, 1, 1]}, 'default': 0.3}, seed=1)
    plain.initialize({'C': {'timing': [3, 2, 1, 1]}, 'default': 0.3}, seed=1)
    x = np.random.RandomState(0).randn(7, 2, 2)
    for net in (odd, plain):
        net.provide_external_data({'default': x})
        net.forward_pass()
    np.testing.assert_array_equal(
        odd.get('C.outputs.default'), plain.get('C.outputs.default')
    )


def test_a_network_file_with_a_timing_of_zero_is_refused(tmp_path):
    net = _clock_net('Clockwork')
    net.initialize({'C': {'timing': [1, 2, 3, 4]}, 'default': 0.1}, seed=1)
    # written into the memory, past initialize's check
    net.handler.set_from_numpy(
        net.buffer.C.parameters.timing, np.array([1.0, 0.0, 3.0, 4.0])
    )
    path = str(tmp_path / 'clock.h5')
    net.save_as_hdf5(path)
    with pytest.raises(NetworkValidationError, match=r'C\.timing.*timing\[1\] = 0\.0'):
        bs.Network.from_hdf5(path)
