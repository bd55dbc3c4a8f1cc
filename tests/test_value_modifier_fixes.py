"""Value modifiers: frozen values taken anew, dtype range, L2 norm overflow."""

import json
import os

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.value_modifiers import (
    ClipValues,
    ConstrainL2Norm,
    FreezeValues,
    MaskValues,
)

# ------------------------------------------------- FreezeValues retaking ---


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    return bs.Network.from_layer(inp >> bs.layers.FullyConnected(8, name='H') >> out)


def _data():
    x = np.random.RandomState(0).rand(1, 40, 4)
    return bs.data_iterators.Minibatches(
        10, default=x, targets=x.argmax(axis=2)[:, :, None] % 3
    )


def _train(net, epochs=1, checkpoint=None):
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    if checkpoint is not None:
        trainer.add_hook(bs.hooks.SaveCheckpoint(checkpoint))
    trainer.add_hook(bs.hooks.StopAfterEpoch(epochs))
    trainer.train(net, _data())
    return trainer


def test_freeze_values_takes_the_values_again_after_reinitialising():
    """A second train after net.initialize(seed=2) put back the values of
    the first run (taken only while weights was None)."""
    net = _net()
    net.set_weight_modifiers({'H': {'bias': FreezeValues()}})
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    first = net.get('H.parameters.bias')
    _train(net)
    np.testing.assert_array_equal(net.get('H.parameters.bias'), first)
    net.initialize(bs.initializers.Gaussian(0.1), seed=2)
    second = net.get('H.parameters.bias')
    weights = net.get('H.parameters.W')
    assert not np.array_equal(first, second)
    _train(net)
    np.testing.assert_array_equal(net.get('H.parameters.bias'), second)
    assert not np.array_equal(net.get('H.parameters.W'), weights)  # it trained


def test_freeze_values_keeps_given_weights_at_each_training():
    net = _net()
    given = np.arange(8.0) / 10
    net.set_weight_modifiers({'H': {'bias': FreezeValues(given)}})
    for seed in (1, 2):
        net.initialize(bs.initializers.Gaussian(0.1), seed=seed)
        _train(net)
        np.testing.assert_allclose(net.get('H.parameters.bias'), given, rtol=1e-7)
    mod = net.weight_modifiers['H']['bias'][0]
    assert mod.weights_taken is False
    assert 'weights_taken' not in get_description(mod)


def test_taken_weights_are_described_as_taken_and_loaded_networks_retake_them(
    tmp_path,
):
    net = _net()
    net.set_weight_modifiers({'H': {'bias': FreezeValues()}})
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    _train(net)
    description = get_description(net.weight_modifiers['H']['bias'][0])
    assert description['weights_taken'] is True
    assert len(description['weights']) == 8
    path = os.path.join(tmp_path, 'net.h5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    loaded.initialize(bs.initializers.Gaussian(0.1), seed=3)
    third = loaded.get('H.parameters.bias')
    _train(loaded)
    np.testing.assert_array_equal(loaded.get('H.parameters.bias'), third)


def test_descriptions_written_before_load_with_their_weights_kept():
    """Earlier descriptions have no weights_taken: their weights count as
    given (as they did), and a null weights is taken at training start."""
    old = json.loads('{"@type": "FreezeValues", "weights": [1.0, 2.0]}')
    mod = create_from_description(old)
    assert mod.weights_taken is False
    np.testing.assert_array_equal(mod.weights, [1.0, 2.0])
    empty = create_from_description({'@type': 'FreezeValues', 'weights': None})
    assert empty.weights is None and empty.weights_taken is False


def test_a_resumed_run_with_retaken_frozen_values_is_bit_exact(tmp_path):
    def run(epochs, checkpoint=None):
        bs.global_rnd.set_seed(7)
        net = _net()
        net.initialize(bs.initializers.Gaussian(0.5), seed=1)
        net.set_weight_modifiers(
            {
                'H': {'bias': FreezeValues()},
                'Output_projection': {'W': ClipValues(-0.3, 0.3)},
            }
        )
        _train(net, epochs, checkpoint)
        return net

    full = run(3)
    half = os.path.join(tmp_path, 'half.ckpt')
    run(1, half)
    bs.global_rnd.set_seed(7)
    trainer, resumed = bs.Trainer.from_checkpoint(half)
    trainer.hooks['StopAfterEpoch'].max_epochs = 3
    trainer.train(resumed, _data())
    np.testing.assert_array_equal(resumed.get('parameters'), full.get('parameters'))


# ------------------------------------------------------- dtype range -------


def _f32_net(mods):
    net = _net()
    net.set_handler(NumpyHandler(np.float32))
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    net.set_weight_modifiers({'H': mods})
    return net


@pytest.mark.parametrize(
    'mod, message',
    [
        (
            FreezeValues([1e39] + [0.0] * 7),
            r'FreezeValues of H\.bias: weights\[0\]=1e\+39',
        ),
        (MaskValues([1.0] * 7 + [-1e39]), r'MaskValues of H\.bias: mask\[7\]=-1e\+39'),
        (ClipValues(1e39, 1e40), r'ClipValues of H\.bias: low=1e\+39 .*\+inf'),
        (ClipValues(-1e40, -1e39), r'ClipValues of H\.bias: high=-1e\+39 .*-inf'),
    ],
)
def test_values_beyond_the_float32_range_are_refused_not_written_as_inf(mod, message):
    net = _f32_net({'bias': mod})
    before = net.get('H.parameters.bias')
    with pytest.raises(NetworkValidationError, match=message + '.*float32'):
        net.apply_weight_modifiers()
    np.testing.assert_array_equal(net.get('H.parameters.bias'), before)
    # refused before the first update too
    with pytest.raises(NetworkValidationError, match=message):
        _train(net)


def test_constrain_l2_norm_refuses_a_limit_beyond_the_dtype():
    """ConstrainL2Norm(1e39) on float32 made every value NaN."""
    net = _f32_net({'W': ConstrainL2Norm(1e39)})
    with pytest.raises(
        NetworkValidationError, match=r'ConstrainL2Norm of H\.W: limit=1e\+39'
    ):
        net.apply_weight_modifiers()
    assert np.isfinite(net.get('H.parameters.W')).all()


def test_bounds_beyond_the_range_on_their_own_side_still_clip():
    net = _f32_net({'bias': ClipValues(-1e40, 0.05)})
    net.apply_weight_modifiers()
    bias = net.get('H.parameters.bias')
    # float32 bias against the float32 bound (NumPy 1.x compares a float32
    # with a Python float in float64, where 0.05 rounded up exceeds 0.05)
    assert np.isfinite(bias).all() and bias.max() <= np.float32(0.05)
    assert bias.min() < 0
    # the same values fit a float64 handler
    mod = FreezeValues([1e39] + [0.0] * 7)
    net = _net()
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(0.0)
    net.set_weight_modifiers({'H': {'bias': mod}})
    net.apply_weight_modifiers()
    assert net.get('H.parameters.bias')[0] == 1e39


@pytest.mark.parametrize(
    'dtype, low, high',
    [(np.float32, -1e40, 1.0), (np.float32, -1.0, 1e40), (np.float16, -1e5, 1e5)],
)
def test_bounds_beyond_the_range_clip_under_the_debug_handler(dtype, low, high):
    """The bound was passed to clip_t cast to the dtype, as +-inf, which
    DebugHandler refuses ("holds NaN or Inf after the op") on every call;
    before the dtype check it worked."""
    values = np.array([[-3.0, 0.5, 2.0]])
    expected = np.clip(values, low, high)
    for handler in (NumpyHandler(dtype), DebugHandler(NumpyHandler(dtype))):
        view = handler.create_from_numpy(values.astype(dtype))
        ClipValues(low, high)(handler, view)
        np.testing.assert_array_equal(handler.get_numpy_copy(view), expected)


# ---------------------------------------------- ConstrainL2Norm overflow ---


def _constrain(handler, values, limit=1.0):
    view = handler.create_from_numpy(np.array(values, dtype=np.float64))
    ConstrainL2Norm(limit)(handler, view)
    return handler.get_numpy_copy(view).astype(np.float64)


def _norms(rows):
    return np.sqrt((rows**2).sum(axis=1))


@pytest.mark.parametrize(
    'handler',
    [bs.handlers.default_handler, NumpyHandler(np.float32)],
    ids=lambda h: type(h).__name__,
)
def test_a_float32_row_whose_squared_norm_overflows_is_scaled_not_zeroed(handler):
    result = _constrain(handler, [[2e19, 1.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0]])
    np.testing.assert_allclose(result[0, :2], [1.0, 5e-20], rtol=1e-6)
    np.testing.assert_allclose(_norms(result), [1.0, 1.0], rtol=1e-6)
    # a norm beyond float32 itself: [3e38, 3e38] has norm 4.2e38
    result = _constrain(handler, [[3e38, -3e38], [0.5, 0.0]])
    np.testing.assert_allclose(result[0], [2**-0.5, -(2**-0.5)], rtol=1e-6)
    np.testing.assert_array_equal(result[1], [0.5, 0.0])


def test_a_float16_row_whose_squared_norm_overflows_is_scaled_not_zeroed():
    """1000 weights of 9.0: norm 285, sum of squares 81000 > 65504."""
    result = _constrain(NumpyHandler(np.float16), np.full((2, 1000), 9.0))
    np.testing.assert_allclose(_norms(result), [1.0, 1.0], rtol=1e-3)
    result = _constrain(NumpyHandler(np.float16), np.full((1, 1000), 60000.0), 2.0)
    np.testing.assert_allclose(_norms(result), [2.0], rtol=1e-3)


def test_rows_that_do_not_overflow_are_bit_identical_next_to_one_that_does():
    handler = NumpyHandler(np.float32)
    rng = np.random.RandomState(0)
    rows = rng.randn(6, 5) * 3
    alone = _constrain(handler, rows, 2.0)
    mixed = rows.copy()
    mixed[2] = 2e19
    together = _constrain(handler, mixed, 2.0)
    others = [0, 1, 3, 4, 5]
    np.testing.assert_array_equal(together[others], alone[others])
    np.testing.assert_allclose(_norms(together[2:3]), [2.0], rtol=1e-6)
