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
from brainstorm.utils import LayerValidationError
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


@pytest.mark.parametrize('layer', ['Clockwork', 'ClockworkLstm'])
@pytest.mark.parametrize('bad', [0.0, 1.5, -2.0])
def test_a_timing_that_is_no_period_is_refused_naming_the_layer(layer, bad):
    """A timing of 0 made ``fmod(t, 0)`` NaN: the unit never updated after
    t = 0, with only NumPy's RuntimeWarning; 1.5 and -2 ran as periods."""
    inp = bs.layers.Input({'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(inp >> getattr(bs.layers, layer)(4, name='C'))
    net.initialize({'C': {'timing': [1, 2, bad, 4]}, 'default': 0.1}, seed=1)
    net.provide_external_data({'default': np.ones((5, 2, 2))})
    with pytest.raises(ValueError, match=r'timing\[2\] = ') as info:
        net.forward_pass()
    assert "layer 'C'" in ''.join(getattr(info.value, '__notes__', []))
    net.initialize({'C': {'timing': [1, 2, 3, 4]}, 'default': 0.1}, seed=1)
    net.forward_pass()
