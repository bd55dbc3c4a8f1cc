"""Tests for brainstorm.value_modifiers."""

import copy
import json
import pickle

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.handlers.debug_handler import DebugHandler
from brainstorm.handlers.numpy_handler import NumpyHandler
from brainstorm.utils import ValidationError
from brainstorm.value_modifiers import (
    ClipValues,
    ConstrainL2Norm,
    FreezeValues,
    GradientModifier,
    L1Decay,
    L2Decay,
    MaskValues,
    ValueModifier,
)
from tests.training.nets import CountingHandler


def make_handlers():
    return [NumpyHandler(np.float64), DebugHandler(NumpyHandler(np.float64))]


@pytest.fixture(params=make_handlers(), ids=lambda h: type(h).__name__)
def handler(request):
    return request.param


def apply(handler, modifier, values):
    view = handler.create_from_numpy(np.array(values, dtype=np.float64))
    modifier(handler, view)
    return handler.get_numpy_copy(view)


def apply_gradient(handler, modifier, parameters, gradients):
    params = handler.create_from_numpy(np.array(parameters, dtype=np.float64))
    grads = handler.create_from_numpy(np.array(gradients, dtype=np.float64))
    modifier(handler, params, grads)
    return handler.get_numpy_copy(params), handler.get_numpy_copy(grads)


def all_modifiers():
    return [
        ClipValues(-0.5, 2.0),
        ConstrainL2Norm(1.5),
        MaskValues(np.array([[1.0, 0.0], [0.0, 1.0]])),
        FreezeValues(),
        FreezeValues(np.ones((2, 2))),
        L1Decay(0.1),
        L2Decay(0.01),
    ]


# ---------------------------------------------------------------- basics ---


def test_names_and_repr():
    mod = ClipValues()
    assert (mod.layer_name, mod.view_name) == ('', '')
    mod.layer_name, mod.view_name = 'Hid', 'W'
    assert repr(mod) == '<Hid.W.ClipValues>'
    assert repr(L2Decay(0.1)) == '<..L2Decay>'
    assert isinstance(L1Decay(1.0), GradientModifier)
    assert not isinstance(L1Decay(1.0), ValueModifier)
    assert isinstance(MaskValues([1]), ValueModifier)


@pytest.mark.parametrize('modifier', all_modifiers(), ids=lambda m: type(m).__name__)
def test_description_round_trip(modifier):
    modifier.layer_name, modifier.view_name = 'L', 'W'
    description = json.loads(json.dumps(get_description(modifier)))
    assert 'layer_name' not in description and 'rnd' not in description
    recreated = create_from_description(description)
    assert type(recreated) is type(modifier)
    assert recreated.layer_name == '' and recreated.view_name == ''
    assert get_description(recreated) == get_description(modifier)
    values = np.array([[3.0, -1.0], [0.2, -0.7]])
    grads = np.array([[0.5, 0.5], [0.5, 0.5]])
    h = NumpyHandler(np.float64)
    if isinstance(modifier, GradientModifier):
        np.testing.assert_array_equal(
            apply_gradient(h, recreated, values, grads)[1],
            apply_gradient(h, copy.deepcopy(modifier), values, grads)[1],
        )
    else:
        np.testing.assert_array_equal(
            apply(h, recreated, values), apply(h, copy.deepcopy(modifier), values)
        )


def test_base_classes_are_abstract():
    h = NumpyHandler(np.float64)
    with pytest.raises(NotImplementedError):
        ValueModifier()(h, h.zeros((1,)))
    with pytest.raises(NotImplementedError):
        GradientModifier()(h, h.zeros((1,)), h.zeros((1,)))


@pytest.mark.parametrize(
    'factory, pattern',
    [
        (lambda: ClipValues(1.0, -1.0), r'ClipValues: low must not be greater'),
        (lambda: ClipValues('a'), r'ClipValues: low'),
        (lambda: ConstrainL2Norm(0), r'ConstrainL2Norm: limit must be .* > 0'),
        (lambda: ConstrainL2Norm(float('inf')), r'ConstrainL2Norm: limit'),
        (lambda: L1Decay(-1.0), r'L1Decay: factor .*>= 0.*factor=-1.0'),
        (lambda: L2Decay(None), r'L2Decay: factor'),
        (lambda: MaskValues(['a', 'b']), r'MaskValues: mask must be a numeric array'),
    ],
)
def test_bad_arguments(factory, pattern):
    with pytest.raises(ValidationError, match=pattern):
        factory()


# ---------------------------------------------------------------- values ---


def test_clip_values(handler):
    result = apply(handler, ClipValues(-0.5, 2.0), [[-3.0, 0.1], [2.5, 1.9]])
    np.testing.assert_array_equal(result, [[-0.5, 0.1], [2.0, 1.9]])
    result = apply(handler, ClipValues(), [5.0, -5.0, 0.5])
    np.testing.assert_array_equal(result, [1.0, -1.0, 0.5])


def test_constrain_l2_norm(handler):
    # Note fix: 0.5 used raw array operations; this runs on DebugHandler too.
    values = np.array(
        [
            [3.0, 4.0, 0.0],  # norm 5 -> rescaled to 2
            [1.0, 1.0, 1.0],  # norm sqrt 3 -> unchanged
            [0.0, 0.0, 0.0],  # norm 0 -> unchanged
            [0.0, -2.0, 0.0],
        ]
    )  # norm 2 == limit -> unchanged
    result = apply(handler, ConstrainL2Norm(2.0), values)
    expected = values.copy()
    expected[0] = [1.2, 1.6, 0.0]
    np.testing.assert_allclose(result, expected, rtol=1e-12)
    np.testing.assert_array_equal(result[1:], values[1:])


def test_constrain_l2_norm_on_tensors_and_vectors(handler):
    values = np.arange(24.0).reshape(2, 3, 4)
    result = apply(handler, ConstrainL2Norm(10.0), values)
    norms = np.sqrt((result.reshape(2, -1) ** 2).sum(1))
    np.testing.assert_allclose(norms, [10.0, 10.0])
    np.testing.assert_allclose(
        result.reshape(2, -1),
        values.reshape(2, -1)
        * 10
        / np.sqrt((values.reshape(2, -1) ** 2).sum(1, keepdims=True)),
    )
    bias = np.array([30.0, 40.0])
    np.testing.assert_array_equal(apply(handler, ConstrainL2Norm(1.0), bias), bias)


def test_mask_values(handler):
    mask = np.array([[1.0, 0.0], [0.5, 1.0]])
    result = apply(handler, MaskValues(mask), [[2.0, 3.0], [4.0, 5.0]])
    np.testing.assert_array_equal(result, [[2.0, 0.0], [2.0, 5.0]])
    row_mask = MaskValues(np.array([0.0, 1.0]))
    result = apply(handler, row_mask, [[2.0, 3.0], [4.0, 5.0]])
    np.testing.assert_array_equal(result, [[0.0, 3.0], [0.0, 5.0]])
    with pytest.raises(ValidationError, match='does not fit'):
        apply(handler, MaskValues(np.ones(3)), np.ones((2, 2)))


def test_freeze_values_keeps_first_seen_values(handler):
    mod = FreezeValues()
    view = handler.create_from_numpy(np.array([1.0, 2.0, 3.0]))
    mod(handler, view)
    handler.fill(view, 7.0)
    mod(handler, view)
    np.testing.assert_array_equal(handler.get_numpy_copy(view), [1, 2, 3])
    np.testing.assert_array_equal(mod.weights, [1, 2, 3])
    assert get_description(mod)['weights'] == [1.0, 2.0, 3.0]


def test_freeze_values_with_given_weights(handler):
    result = apply(handler, FreezeValues([[1.0, 2.0]]), [[5.0, 6.0]])
    np.testing.assert_array_equal(result, [[1.0, 2.0]])
    with pytest.raises(ValidationError, match='do not fit'):
        apply(handler, FreezeValues([1.0, 2.0]), [1.0, 2.0, 3.0])


def test_l1_decay(handler):
    params, grads = apply_gradient(
        handler, L1Decay(0.1), [[2.0, -3.0, 0.0]], [[1.0, 1.0, 1.0]]
    )
    np.testing.assert_allclose(grads, [[1.1, 0.9, 1.0]])
    np.testing.assert_array_equal(params, [[2.0, -3.0, 0.0]])


def test_l2_decay(handler):
    params, grads = apply_gradient(
        handler, L2Decay(0.5), [[2.0, -3.0, 0.0]], [[1.0, 1.0, 1.0]]
    )
    np.testing.assert_allclose(grads, [[2.0, -0.5, 1.0]])
    np.testing.assert_array_equal(params, [[2.0, -3.0, 0.0]])


# -------------------------------------------------------- scratch memory ---


@pytest.mark.parametrize(
    'modifier, created',
    [
        (ConstrainL2Norm(1.0), 3),
        (MaskValues(np.ones((3, 4))), 1),
        (FreezeValues(), 1),
        (ClipValues(), 0),
    ],
)
def test_value_modifiers_allocate_once(modifier, created):
    h = CountingHandler()
    view = h.create_from_numpy(np.ones((3, 4)))
    h.allocations = 0
    for _ in range(5):
        modifier(h, view)
    assert h.allocations == created


def test_gradient_modifiers_allocate_once():
    h = CountingHandler()
    params = h.create_from_numpy(np.ones((3, 4)))
    grads = h.create_from_numpy(np.ones((3, 4)))
    h.allocations = 0
    mod = L1Decay(0.1)
    for _ in range(5):
        mod(h, params, grads)
    assert h.allocations == 1
    L2Decay(0.1)(h, params, grads)
    assert h.allocations == 1


def test_new_handler_gets_new_scratch_and_copies_drop_it():
    mod = MaskValues(np.array([0.0, 1.0]))
    first, second = CountingHandler(), CountingHandler()
    np.testing.assert_array_equal(apply(first, mod, [1.0, 2.0]), [0.0, 2.0])
    np.testing.assert_array_equal(apply(second, mod, [3.0, 4.0]), [0.0, 4.0])
    assert second.allocations == 2  # the view and the mask
    for clone in (copy.deepcopy(mod), pickle.loads(pickle.dumps(mod))):
        assert clone._buffers is None and clone._handler is None
        np.testing.assert_array_equal(apply(first, clone, [5.0, 6.0]), [0.0, 6.0])


# ------------------------------------------------------ with a real net ---


def test_modifiers_in_a_network_under_the_debug_handler():
    from brainstorm.layers import FullyConnected, Input
    from brainstorm.structure.network import Network

    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    net = Network.from_layer(inp >> FullyConnected(2, name='Hid'))
    net.set_handler(DebugHandler(NumpyHandler(np.float64)))
    weights = np.array([[3.0, 4.0, 0.0], [0.1, 0.2, 0.2]])
    net.initialize({'Hid': {'W': weights, 'bias': [5.0, -5.0]}})
    net.set_weight_modifiers(
        Hid={'W': ConstrainL2Norm(1.0), 'bias': ClipValues(-2.0, 2.0)}
    )
    net.apply_weight_modifiers()
    np.testing.assert_allclose(
        net.get('Hid.parameters.W'), [[0.6, 0.8, 0.0], [0.1, 0.2, 0.2]]
    )
    np.testing.assert_array_equal(net.get('Hid.parameters.bias'), [2, -2])
    installed = net.weight_modifiers['Hid']['W'][0]
    assert repr(installed) == '<Hid.W.ConstrainL2Norm>'


def _frozen_run(tmp_path, name, epochs, resume_from=None):
    """Train with H.W frozen by FreezeValues() (no weights given)."""
    checkpoint = str(tmp_path / f'{name}.ckpt')
    bs.global_rnd.set_seed(7)  # the iterator's seed: the same in each run
    rng = np.random.RandomState(0)
    x, y = rng.randn(1, 16, 4), rng.randint(0, 2, (1, 16, 1))
    data = bs.data_iterators.Minibatches(4, default=x, targets=y)
    if resume_from is not None:
        trainer, net = bs.Trainer.from_checkpoint(resume_from)
        trainer.hooks['StopAfterEpoch'].max_epochs = epochs
        trainer.train(net, data)
        return net, None
    inp, out = bs.tools.get_in_out_layers('classification', 4, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(6, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    net.set_weight_modifiers({'H': {'W': FreezeValues()}})
    initial = net.get('H.parameters.W')
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.SaveCheckpoint(checkpoint))
    trainer.add_hook(bs.hooks.StopAfterEpoch(epochs))
    trainer.train(net, data)
    return net, (initial, checkpoint)


def test_freeze_values_without_weights_keeps_the_values_training_started_with(
    tmp_path,
):
    """They were taken after the first update (which changed them), and
    taken again after the first update of a resumed run: it went on with
    other frozen values than the uninterrupted run."""
    full, (initial, _) = _frozen_run(tmp_path, 'full', 2)
    np.testing.assert_array_equal(full.get('H.parameters.W'), initial)
    _, (_, half) = _frozen_run(tmp_path, 'half', 1)
    resumed, _ = _frozen_run(tmp_path, 'resumed', 2, resume_from=half)
    np.testing.assert_array_equal(resumed.get('parameters'), full.get('parameters'))


def test_a_modifier_with_data_named_start_still_trains():
    """A modifier of 0.5's kind keeping a number under ``start`` (or
    ``before_training``) is left alone: the trainer's new call before
    training tried to call it (TypeError: 'int' object is not callable)."""
    from brainstorm.value_modifiers import ValueModifier

    class FromEpoch(ValueModifier):
        def __init__(self):
            super().__init__()
            self.start = 2
            self.before_training = 3

        def __call__(self, handler, view):
            handler.mult_st(1.0, view, view)

    inp, out = bs.tools.get_in_out_layers('classification', 4, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(3, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    net.set_weight_modifiers({'H': {'W': FromEpoch()}})
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    data = bs.data_iterators.Undivided(
        default=np.ones((1, 4, 4)), targets=np.zeros((1, 4, 1))
    )
    trainer.train(net, data)
    assert trainer.current_epoch_nr == 1


def test_a_static_before_training_is_called_as_defined():
    from brainstorm.value_modifiers import ValueModifier

    seen = []

    class Static(ValueModifier):
        @staticmethod
        def before_training(handler, view):
            seen.append(view.shape)

        def __call__(self, handler, view):
            pass

    inp, out = bs.tools.get_in_out_layers('classification', 4, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(3, name='H') >> out)
    net.initialize(0.1)
    net.set_weight_modifiers({'H': {'W': Static()}})
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(
        net,
        bs.data_iterators.Undivided(
            default=np.ones((1, 4, 4)), targets=np.zeros((1, 4, 1))
        ),
    )
    assert seen == [(3, 4)]
