"""Highway: ``y = T * H + (1 - T) * x``."""

import numpy as np
import pytest

from brainstorm.layers import Highway
from brainstorm.layers.highway_layer import HighwayLayerImpl
from brainstorm.testing import instantiate_layer
from brainstorm.utils import LayerValidationError
from tests.layers.layer_specs_misc import random_data, run_layer


def test_constructor_builds_a_highway_layer():
    assert Highway(name='Hw').layer.layer_type == 'Highway'


@pytest.mark.parametrize('features', [(4,), (2, 3)])
def test_forward_and_backward_match_numpy(features):
    shape = (3, 2) + features
    H, x, dy = (random_data(i, *shape) for i in range(3))
    T = np.random.RandomState(3).uniform(0, 1, shape)
    result = run_layer(
        HighwayLayerImpl,
        {'H': H, 'T': T, 'x': x},
        output_deltas={'default': dy},
        prefill_deltas=1.0,
    )
    np.testing.assert_allclose(
        result.outputs['default'], T * H + (1 - T) * x, rtol=1e-12, atol=1e-14
    )
    deltas = result.input_deltas
    np.testing.assert_allclose(deltas['H'], 1 + T * dy, rtol=1e-12)
    np.testing.assert_allclose(deltas['T'], 1 + (H - x) * dy, rtol=1e-12)
    np.testing.assert_allclose(deltas['x'], 1 + (1 - T) * dy, rtol=1e-12)
    # the output deltas serve as scratch but are restored exactly
    np.testing.assert_array_equal(result.output_deltas['default'], dy)


def test_output_has_the_shape_of_x():
    layer = instantiate_layer(HighwayLayerImpl, {'H': (2, 5), 'T': (2, 5), 'x': (2, 5)})
    assert layer.out_shapes['default'].shape == ('T', 'B', 2, 5)


@pytest.mark.parametrize(
    'shapes',
    [
        {'H': (3,), 'T': (3,), 'x': (4,)},
        {'H': (3,), 'T': (1,), 'x': (3,)},
        {'H': (2, 3), 'T': (3, 2), 'x': (2, 3)},
    ],
)
def test_inputs_of_different_shapes_are_rejected(shapes):
    with pytest.raises(
        LayerValidationError,
        match=r"Highway 'Highway': inputs H, T and x must have"
        r' identical shapes',
    ):
        instantiate_layer(HighwayLayerImpl, shapes)


def test_missing_input_is_rejected():
    with pytest.raises(
        LayerValidationError,
        match=r"input 'T' is not "
        r'connected',
    ):
        instantiate_layer(HighwayLayerImpl, {'H': (3,), 'x': (3,)})


def _gated_net():
    from brainstorm.layers import (
        DeltasScaling,
        Elementwise,
        FullyConnected,
        Input,
        L2Decay,
        Loss,
        Mask,
        Merge,
        NoOp,
        SigmoidCE,
    )

    inp = Input(
        {'default': ('T', 'B', 3), 'mask': ('T', 'B', 1), 'targets': ('T', 'B', 4)}
    )
    highway = Highway(name='Hw')
    inp >> FullyConnected(4, activation='tanh', name='H') >> 'H' - highway
    inp >> FullyConnected(4, activation='sigmoid', name='G') >> 'T' - highway
    inp >> FullyConnected(4, activation='linear', name='C') >> 'x' - highway
    merge, mask, out = Merge(name='Mg'), Mask(name='Mk'), SigmoidCE()
    highway >> 'inputs_1' - merge
    inp >> 'inputs_2' - merge
    merge >> FullyConnected(4, activation='linear', name='F') >> mask
    inp - 'mask' >> 'mask' - mask
    mask >> Elementwise('tanh') >> NoOp() >> DeltasScaling(1.0) >> out
    inp - 'targets' >> 'targets' - out
    out - 'loss' >> Loss(name='L')
    highway >> L2Decay() - 'loss' >> Loss(importance=0.1, name='L2Loss')
    rnd = np.random.RandomState(0)
    data = {
        'default': rnd.randn(3, 2, 3),
        'mask': rnd.randint(0, 2, (3, 2, 1)).astype(float),
        'targets': rnd.uniform(0, 1, (3, 2, 4)),
    }
    return inp, data


def _difference_net():
    from brainstorm.layers import (
        BinomialCrossEntropy,
        FullyConnected,
        Input,
        L1Decay,
        Loss,
        SquaredDifference,
    )

    inp = Input({'default': ('T', 'B', 3), 'targets': ('T', 'B', 2)})
    diff = SquaredDifference()
    inp >> FullyConnected(2, activation='tanh', name='A') >> 'inputs_1' - diff
    inp >> FullyConnected(2, activation='linear', name='B') >> 'inputs_2' - diff
    diff >> Loss(name='DiffLoss')
    bce = BinomialCrossEntropy()
    diff >> FullyConnected(2, activation='sigmoid', name='P') >> bce
    inp - 'targets' >> 'targets' - bce
    bce >> Loss(name='BceLoss')
    diff >> L1Decay() - 'loss' >> Loss(importance=0.1, name='L1Loss')
    rnd = np.random.RandomState(1)
    data = {'default': rnd.randn(3, 2, 3), 'targets': rnd.uniform(0, 1, (3, 2, 2))}
    return inp, data


@pytest.mark.parametrize(
    'make', [_gated_net, _difference_net], ids=['gated', 'difference']
)
def test_network_gradients_through_the_misc_layers(make):
    from brainstorm.handlers import NumpyHandler
    from brainstorm.initializers import Gaussian
    from brainstorm.structure.network import Network

    inp, data = make()
    net = Network.from_layer(inp)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(0.5), seed=1)

    def loss(params):
        net.handler.set_from_numpy(net.buffer.parameters, params)
        net.provide_external_data(data)
        net.forward_pass(training_pass=True)
        return net.get_loss_values()['total_loss']

    params = net.get('parameters').copy()
    loss(params)
    net.backward_pass()
    analytic = net.get('gradients').copy()
    numeric = np.zeros_like(params)
    eps = 1e-6
    for i in range(params.size):
        step = np.zeros_like(params)
        step[i] = eps
        numeric[i] = (loss(params + step) - loss(params - step)) / (2 * eps)
    np.testing.assert_allclose(analytic, numeric, rtol=1e-5, atol=1e-7)
