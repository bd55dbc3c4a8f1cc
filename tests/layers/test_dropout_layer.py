"""Dropout: scaled mask in training, identity in inference, exact backward
pass (with the 1/(1-p) factor 0.5 forgot), validation."""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.layers import Dropout, Input
from brainstorm.layers.dropout_layer import DropoutLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import instantiate_layer, run_layer_tests, set_up_layer
from brainstorm.utils import LayerValidationError


def run(drop_prob, features=(50, 4), T=3, B=5, training_pass=True, seed=2):
    layer = instantiate_layer(
        DropoutLayerImpl, {'default': features}, drop_prob=drop_prob
    )
    buffers, manager = set_up_layer(
        layer, {'time_steps': T, 'batch_size': B, 'seed': seed}
    )
    h = layer.handler
    h.rnd.set_seed(seed)
    layer.forward_pass(buffers, training_pass=training_pass)
    manager.clear_backward_buffers()
    dy = np.random.RandomState(seed + 1).randn(T, B, *features)
    h.set_from_numpy(buffers.output_deltas.default, dy)
    layer.backward_pass(buffers)
    return {
        'x': h.get_numpy_copy(buffers.inputs.default),
        'y': h.get_numpy_copy(buffers.outputs.default),
        'mask': h.get_numpy_copy(buffers.internals.mask),
        'dy': dy,
        'dx': h.get_numpy_copy(buffers.input_deltas.default),
    }


@pytest.mark.parametrize('drop_prob', [0.2, 0.5, 0.9])
def test_training_pass_drops_and_rescales(drop_prob):
    r = run(drop_prob)
    kept = r['mask'] != 0
    # the mask holds 0 or 1/(1-p), about a fraction 1-p of it non-zero
    np.testing.assert_allclose(r['mask'][kept], 1.0 / (1.0 - drop_prob), rtol=1e-12)
    assert abs(kept.mean() - (1.0 - drop_prob)) < 0.05
    expected = np.where(kept, r['x'] / (1.0 - drop_prob), 0.0)
    np.testing.assert_allclose(r['y'], expected, rtol=1e-12, atol=0)


@pytest.mark.parametrize('drop_prob', [0.2, 0.5])
def test_backward_pass_includes_the_rescaling(drop_prob):
    """0.5 computed dx = dy * mask, missing the factor 1/(1-p)."""
    r = run(drop_prob)
    kept = r['mask'] != 0
    expected = np.where(kept, r['dy'] / (1.0 - drop_prob), 0.0)
    np.testing.assert_allclose(r['dx'], expected, rtol=1e-12, atol=0)


def test_finite_differences_catch_a_missing_rescaling():
    class UnscaledDropoutLayerImpl(DropoutLayerImpl):
        """The 0.5 backward pass: dx += dy * (mask != 0)."""

        def backward_pass(self, buffers):
            h = self.handler
            mask, dy = buffers.internals.mask, buffers.output_deltas.default
            h.mult_st(1.0 - self.drop_prob, mask, mask)
            h.mult_add_tt(dy, mask, buffers.input_deltas.default)
            h.mult_st(1.0 / (1.0 - self.drop_prob), mask, mask)

    spec = {'time_steps': 2, 'batch_size': 3}
    good = instantiate_layer(DropoutLayerImpl, {'default': (4,)}, drop_prob=0.3)
    run_layer_tests(good, spec)
    bad = instantiate_layer(UnscaledDropoutLayerImpl, {'default': (4,)}, drop_prob=0.3)
    with pytest.raises(AssertionError, match='does not match finite'):
        run_layer_tests(bad, spec)


def test_inference_pass_is_the_identity():
    r = run(0.5, training_pass=False)
    np.testing.assert_array_equal(r['y'], r['x'])
    np.testing.assert_array_equal(r['dx'], r['dy'])


def test_drop_prob_zero_keeps_everything():
    r = run(0.0)
    np.testing.assert_array_equal(r['mask'], 1.0)
    np.testing.assert_array_equal(r['y'], r['x'])
    np.testing.assert_array_equal(r['dx'], r['dy'])


def test_mask_is_redrawn_each_training_pass_from_the_handler_rnd():
    inp = Input({'default': ('T', 'B', 20)})
    net = Network.from_layer(inp >> Dropout(name='Drop'))
    net.set_handler(NumpyHandler(np.float64, seed=4))
    net.provide_external_data({'default': np.ones((2, 3, 20))})
    net.forward_pass(training_pass=True)
    first = net.get('Drop.outputs.default')
    net.forward_pass(training_pass=True)
    second = net.get('Drop.outputs.default')
    assert set(np.unique(first)) == {0.0, 2.0}
    assert not np.array_equal(first, second)


def test_shapes_and_defaults():
    layer = instantiate_layer(DropoutLayerImpl, {'default': (2, 3)})
    assert layer.drop_prob == 0.5
    assert layer.get_shape('outputs.default') == ('T', 'B', 2, 3)
    assert layer.get_shape('internals.mask') == ('T', 'B', 2, 3)
    assert layer.parameter_shapes == {}


@pytest.mark.parametrize('drop_prob', [1.0, -0.1, 1.5, '0.5', None])
def test_bad_drop_prob_raises_layer_validation_error(drop_prob):
    with pytest.raises(
        LayerValidationError,
        match=r"Dropout 'Dropout': drop_prob must be a float "
        r'in \[0, 1\)',
    ):
        instantiate_layer(DropoutLayerImpl, {'default': (3,)}, drop_prob=drop_prob)


def test_constructor_rejects_bad_drop_prob():
    with pytest.raises(LayerValidationError, match='drop_prob'):
        Dropout(1.0)
