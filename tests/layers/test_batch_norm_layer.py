"""BatchNorm: training and inference passes against NumPy, the true running
mean, untrained running statistics, validation."""

import numpy as np
import pytest

from brainstorm.errors import FeatureJoinWarning
from brainstorm.handlers import NumpyHandler
from brainstorm.initializers import Gaussian
from brainstorm.layers import BatchNorm, FullyConnected, Input
from brainstorm.layers.batch_norm_layer import BatchNormLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import instantiate_layer, set_up_layer
from brainstorm.utils import LayerValidationError
from brainstorm.value_modifiers import ClipValues, L2Decay


def numpy_batch_norm(x, gamma, beta, epsilon):
    """Training-mode batch norm over all axes but the last."""
    axes = tuple(range(x.ndim - 1))
    mean = x.mean(axis=axes)
    sigma_b = np.sqrt(x.var(axis=axes) + epsilon)
    x_hat = (x - mean) / sigma_b
    return gamma * x_hat + beta, mean, sigma_b, x_hat


def make_layer(features, T, B, seed=3, **kwargs):
    layer = instantiate_layer(BatchNormLayerImpl, {'default': features}, **kwargs)
    rnd = np.random.RandomState(seed)
    channels = features[-1]
    spec = {
        'time_steps': T,
        'batch_size': B,
        'default': rnd.randn(T, B, *features) * 2.0 + 1.5,
        'inits': {
            'gamma': rnd.randn(channels),
            'beta': rnd.randn(channels),
            'mu': rnd.randn(channels),
            'sigma': rnd.rand(channels) + 0.5,
        },
    }
    buffers, manager = set_up_layer(layer, spec)
    return layer, buffers, manager, spec


def get(layer, array):
    return layer.handler.get_numpy_copy(array)


@pytest.mark.parametrize('features', [(3,), (2, 3, 4), (5, 2)])
def test_training_pass_matches_numpy_and_updates_running_statistics(features):
    layer, buffers, _, spec = make_layer(features, 3, 4, decay=0.8, epsilon=1e-3)
    inits = spec['inits']
    layer.forward_pass(buffers, training_pass=True)

    expected, mean, sigma_b, x_hat = numpy_batch_norm(
        spec['default'], inits['gamma'], inits['beta'], 1e-3
    )
    np.testing.assert_allclose(
        get(layer, buffers.outputs.default), expected, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(
        get(layer, buffers.internals.sigma_b), sigma_b, rtol=1e-12
    )
    np.testing.assert_allclose(
        get(layer, buffers.internals.x_hat), x_hat, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(
        get(layer, buffers.internals.centered),
        spec['default'] - mean,
        rtol=1e-10,
        atol=1e-12,
    )
    # the TRUE running mean (0.5 stored its negation)
    np.testing.assert_allclose(
        get(layer, buffers.parameters.mu), 0.8 * inits['mu'] + 0.2 * mean, rtol=1e-12
    )
    np.testing.assert_allclose(
        get(layer, buffers.parameters.sigma),
        0.8 * inits['sigma'] + 0.2 * sigma_b,
        rtol=1e-12,
    )


@pytest.mark.parametrize('features', [(3,), (2, 3, 4)])
def test_inference_pass_uses_running_statistics(features):
    layer, buffers, _, spec = make_layer(features, 2, 3)
    inits = spec['inits']
    layer.forward_pass(buffers, training_pass=False)

    x_hat = (spec['default'] - inits['mu']) / inits['sigma']
    np.testing.assert_allclose(
        get(layer, buffers.outputs.default),
        inits['gamma'] * x_hat + inits['beta'],
        rtol=1e-10,
        atol=1e-12,
    )
    # inference leaves the running statistics alone
    np.testing.assert_array_equal(get(layer, buffers.parameters.mu), inits['mu'])
    np.testing.assert_array_equal(get(layer, buffers.parameters.sigma), inits['sigma'])


def test_backward_pass_matches_the_formula():
    layer, buffers, manager, spec = make_layer((2, 3), 2, 3)
    gamma = spec['inits']['gamma']
    layer.forward_pass(buffers, training_pass=True)
    manager.clear_backward_buffers()
    dy = np.random.RandomState(9).randn(*spec['default'].shape)
    layer.handler.set_from_numpy(buffers.output_deltas.default, dy)
    layer.backward_pass(buffers)

    _, _, sigma_b, x_hat = numpy_batch_norm(spec['default'], gamma, 0.0, 1e-5)
    m = 2 * 3 * 2
    axes = (0, 1, 2)
    dgamma = (dy * x_hat).sum(axis=axes)
    dbeta = dy.sum(axis=axes)
    dx = gamma / sigma_b * (dy - x_hat * dgamma / m - dbeta / m)
    np.testing.assert_allclose(get(layer, buffers.gradients.gamma), dgamma, rtol=1e-10)
    np.testing.assert_allclose(get(layer, buffers.gradients.beta), dbeta, rtol=1e-10)
    np.testing.assert_allclose(
        get(layer, buffers.input_deltas.default), dx, rtol=1e-9, atol=1e-12
    )
    assert np.all(get(layer, buffers.gradients.mu) == 0)
    assert np.all(get(layer, buffers.gradients.sigma) == 0)


def bn_net():
    inp = Input({'default': ('T', 'B', 3)})
    net = Network.from_layer(
        inp >> FullyConnected(4, name='Hid') >> BatchNorm(name='Bn')
    )
    net.set_handler(NumpyHandler(np.float64))
    return net


def test_running_mean_converges_to_the_data_mean():
    inp = Input({'default': ('T', 'B', 2)})
    net = Network.from_layer(inp >> BatchNorm(name='Bn', decay=0.5))
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian())
    data = np.random.RandomState(0).randn(2, 50, 2) * [1.0, 3.0] + [4.0, -2.0]
    net.provide_external_data({'default': data})
    for _ in range(40):
        net.forward_pass(training_pass=True)
    np.testing.assert_allclose(
        net.get('Bn.parameters.mu'), data.reshape(-1, 2).mean(axis=0), rtol=1e-8
    )
    np.testing.assert_allclose(
        net.get('Bn.parameters.sigma'), data.reshape(-1, 2).std(axis=0), rtol=1e-5
    )
    # so inference normalises the data as training did
    training_output = net.get('Bn.outputs.default')
    net.forward_pass(training_pass=False)
    np.testing.assert_allclose(
        net.get('Bn.outputs.default'), training_output, rtol=1e-5, atol=1e-6
    )


def test_initialize_leaves_running_statistics_at_zero_and_one():
    net = bn_net()
    net.initialize(Gaussian(), seed=1)
    assert np.all(net.get('Bn.parameters.mu') == 0.0)
    assert np.all(net.get('Bn.parameters.sigma') == 1.0)
    assert not np.all(net.get('Bn.parameters.gamma') == 1.0)
    # naming them explicitly still works
    net.initialize({'default': Gaussian(), 'Bn': {'sigma': 2.0}}, seed=1)
    assert np.all(net.get('Bn.parameters.sigma') == 2.0)
    assert np.all(net.get('Bn.parameters.mu') == 0.0)


def test_running_statistics_are_not_trained_nor_modified():
    net = bn_net()
    net.set_gradient_modifiers(L2Decay(0.1))
    assert set(net.gradient_modifiers['Bn']) == {'gamma', 'beta'}
    net.set_weight_modifiers(ClipValues(-1, 1))
    assert set(net.weight_modifiers['Bn']) == {'gamma', 'beta'}
    mask = net.handler.get_numpy_copy(net.trainable_mask)
    layout = net.layout['Bn']['parameters']
    offset = net.layout['parameters']['@slice'][0]
    for name, trainable in [('gamma', 1), ('beta', 1), ('mu', 0), ('sigma', 0)]:
        start, stop = layout[name]['@slice']
        assert np.all(mask[start - offset : stop - offset] == trainable), name


def test_layer_declares_its_untrained_parameters():
    assert BatchNormLayerImpl.untrained_parameters == {'mu': 0.0, 'sigma': 1.0}
    assert set(BatchNormLayerImpl.computes_no_gradients_for) == {'mu', 'sigma'}


def test_shapes_follow_the_spec():
    layer = instantiate_layer(BatchNormLayerImpl, {'default': (4, 5, 3)})
    assert layer.get_shape('outputs.default') == ('T', 'B', 4, 5, 3)
    assert list(layer.parameter_shapes) == ['gamma', 'beta', 'mu', 'sigma']
    for name in layer.parameter_shapes:
        assert layer.get_shape(f'parameters.{name}') == (3,)
    assert layer.get_shape('internals.sigma_b') == (3,)
    assert layer.get_shape('internals.centered') == ('T', 'B', 4, 5, 3)
    assert layer.get_shape('internals.x_hat') == ('T', 'B', 4, 5, 3)
    assert (layer.decay, layer.epsilon) == (0.9, 1e-5)


@pytest.mark.parametrize(
    'kwargs, message',
    [
        ({'decay': 1.5}, r'decay must be a float in \[0, 1\]'),
        ({'decay': -0.1}, 'decay must be'),
        ({'epsilon': 0.0}, r'epsilon must be a float in \(0, inf\)'),
        ({'epsilon': -1e-5}, 'epsilon must be'),
        ({'epsilon': 'small'}, 'epsilon must be'),
        ({'momentum': 0.9}, 'unexpected argument'),
    ],
)
def test_bad_arguments_raise_layer_validation_errors(kwargs, message):
    with pytest.raises(LayerValidationError, match=message):
        instantiate_layer(BatchNormLayerImpl, {'default': (3,)}, **kwargs)


def test_constructor_keyword_defaults():
    inp = Input({'default': ('T', 'B', 3)})
    net = Network.from_layer(inp >> BatchNorm(name='Bn'))
    assert net.architecture['Bn']['decay'] == 0.9
    assert net.architecture['Bn']['epsilon'] == 1e-5


def test_works_on_non_contiguous_image_slices_in_a_network():
    # a second layer concatenates the image with another output, so it is a
    # feature slice of their shared block
    inp = Input({'default': ('T', 'B', 3, 4, 2), 'extra': ('T', 'B', 3, 4, 1)})
    inp >> BatchNorm(name='Bn')
    side = BatchNorm(name='Side')
    inp >> side
    inp - 'extra' >> side
    with pytest.warns(FeatureJoinWarning):  # Side's input, not tested here
        net = Network.from_layer(inp)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(), seed=2)
    rnd = np.random.RandomState(1)
    x = rnd.randn(2, 3, 3, 4, 2) + 1.0
    net.provide_external_data({'default': x, 'extra': rnd.randn(2, 3, 3, 4, 1)})
    assert not net.buffer.Bn.inputs.default.flags.c_contiguous
    net.forward_pass(training_pass=True)
    expected, mean, _, _ = numpy_batch_norm(
        x, net.get('Bn.parameters.gamma'), net.get('Bn.parameters.beta'), 1e-5
    )
    np.testing.assert_allclose(
        net.get('Bn.outputs.default'), expected, rtol=1e-10, atol=1e-12
    )
    np.testing.assert_allclose(net.get('Bn.parameters.mu'), 0.1 * mean, rtol=1e-12)


@pytest.mark.parametrize('images', [False, True])
def test_an_empty_batch_changes_nothing(images):
    """A rank of a data-parallel run may get no sample of the last, smaller
    batch of an epoch (docs/data_parallel.rst): BatchNorm divided by the
    batch's zero size (ZeroDivisionError, the run aborted). An empty batch
    leaves the running statistics as they were and gives zero gradients."""
    import brainstorm as bs

    shape = (4, 4, 2) if images else (4,)
    inp, out = bs.tools.get_in_out_layers('classification', shape, 3)
    net = bs.Network.from_layer(
        inp >> bs.layers.BatchNorm(name='BN') >> bs.layers.FullyConnected(5) >> out
    )
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    rnd = np.random.RandomState(2)
    full = {
        'default': rnd.randn(1, 6, *shape),
        'targets': rnd.randint(0, 3, (1, 6, 1)).astype(float),
    }
    net.provide_external_data(full)
    net.forward_pass(training_pass=True)  # running statistics away from 0, 1
    mu, sigma = net.get('BN.parameters.mu'), net.get('BN.parameters.sigma')
    net.provide_external_data({k: v[:, :0] for k, v in full.items()})
    net.forward_pass(training_pass=True)
    net.backward_pass()
    np.testing.assert_array_equal(net.get('BN.parameters.mu'), mu)
    np.testing.assert_array_equal(net.get('BN.parameters.sigma'), sigma)
    assert not net.get('gradients').any()
    net.forward_pass(training_pass=False)  # inference on nothing, too


def test_a_backward_pass_after_an_inference_pass_is_its_gradient():
    """After forward_pass() (an inference pass, the default) the input
    deltas were those of the training formula, with its batch-mean terms:
    wrong gradients for saliency maps or adversarial inputs. They are now
    the gradient of what the inference pass computed, as Dropout's are;
    the parameter gradients were right already."""
    import brainstorm as bs

    inp = bs.layers.Input({'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(
        inp >> BatchNorm(name='BN') >> bs.layers.Loss(name='Loss')
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(0.5), seed=0)
    parameters = net.buffer['BN'].parameters
    parameters['gamma'][:] = [2.0, 3.0]
    parameters['mu'][:] = [0.5, -1.0]
    parameters['sigma'][:] = [2.0, 4.0]
    x = np.array([[[1.0, 2.0], [3.0, -1.0], [0.0, 5.0]]])

    def loss(values):
        net.provide_external_data({'default': values})
        net.forward_pass()
        return net.get_loss_values()['total_loss']

    eps = 1e-6
    expected = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        up, down = x.copy(), x.copy()
        up[i] += eps
        down[i] -= eps
        expected[i] = (loss(up) - loss(down)) / (2 * eps)
    loss(x)
    net.backward_pass()
    np.testing.assert_allclose(
        net.get('Input.output_deltas.default'), expected, rtol=1e-7, atol=1e-9
    )
    # training passes keep the training formula (the registry checks it)
    net.forward_pass(training_pass=True)
    net.backward_pass()
    assert not np.allclose(net.get('Input.output_deltas.default'), expected)
