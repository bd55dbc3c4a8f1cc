"""Scorers: per-element masks, Accuracy's row check, diverged networks.

Found by a bug hunter (round 12), fixed in ``brainstorm/scorers.py``.
"""

import re
from types import SimpleNamespace

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.scorers import (
    Accuracy,
    Hamming,
    MeanSquaredError,
    gather_losses_and_scores,
)
from brainstorm.utils import ValidationError

OUT = 'Out.outputs.default'


def regression_net(features=3, extra_inputs=()):
    """Input (default, targets, emask and extra_inputs, all ``(T, B, K)``)
    >> a linear FullyConnected 'Out' of ``features`` units."""
    shapes = {name: ('T', 'B', features) for name in ('default', 'targets', 'emask')}
    shapes.update({name: ('T', 'B', 1) for name in extra_inputs})
    inp = bs.layers.Input(out_shapes=shapes)
    out = bs.layers.FullyConnected(features, activation='linear', name='Out')
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    return net


def outputs_of(net, x):
    """The output ``OUT`` for all of ``x`` (one forward pass)."""
    shape = x.shape[:2] + (1,)
    net.provide_external_data(
        {'default': x, 'targets': x, 'emask': x, 'mask': np.ones(shape)},
        all_inputs=False,
    )
    net.forward_pass()
    return net.get(OUT)


# ------------------------------------------------- per-element masks ---


@pytest.mark.parametrize('time_size, batch_size', [(1, 1), (2, 2), (3, 5)])
def test_mse_with_a_per_element_mask_is_weighed_per_element(time_size, batch_size):
    """A ``(T, B, K)`` mask (0.5: ``errors *= mask``, weight ``mask.sum()``)
    gave 19.34 instead of 14.35 at T=B=1 (each row weighed by its first
    element) and a bare broadcasting ValueError otherwise."""
    rnd = np.random.RandomState(0)
    x = rnd.randn(time_size, batch_size, 3)
    y = rnd.randn(time_size, batch_size, 3)
    emask = np.array([1.0, 0.0, 0.5]) * np.ones((time_size, batch_size, 3))
    net = regression_net()
    predicted = outputs_of(net, x)
    expected = (0.5 * (y - predicted) ** 2 * emask).sum() / emask.sum()
    result = bs.tools.evaluate(
        net,
        bs.data_iterators.Undivided(default=x, targets=y, emask=emask),
        [MeanSquaredError(mask_name='emask')],
        out_name=OUT,
    )
    assert result['MeanSquaredError'] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize('batch_size', [2, 3, 4])
def test_per_element_masks_aggregate_over_uneven_batches(batch_size):
    """Minibatches of uneven sizes (7 samples) give the figure of the whole
    data: each batch is weighed by its own mask sum."""
    rnd = np.random.RandomState(1)
    x = rnd.randn(2, 7, 3)
    y = rnd.randn(2, 7, 3)
    bits = (rnd.rand(2, 7, 3) > 0.5).astype(float)
    emask = (rnd.rand(2, 7, 3) > 0.4) * rnd.uniform(0.5, 2.0, (2, 7, 3))
    net = regression_net()
    predicted = outputs_of(net, x)
    expected_mse = (0.5 * (y - predicted) ** 2 * emask).sum() / emask.sum()
    correct = (predicted >= 0.2) == (bits >= 0.5)
    expected_hamming = (correct * emask).sum() / emask.sum()
    scorers = [
        MeanSquaredError(mask_name='emask'),
        Hamming(0.2, mask_name='emask'),
    ]
    for targets, scorer, expected in [
        (y, scorers[0], expected_mse),
        (bits, scorers[1], expected_hamming),
    ]:
        result = bs.tools.evaluate(
            net,
            bs.data_iterators.Minibatches(
                batch_size, shuffle=False, default=x, targets=targets, emask=emask
            ),
            [scorer],
            out_name=OUT,
            targets_name='targets',
        )
        assert result[scorer.__name__] == pytest.approx(expected, rel=1e-12), (
            f'{scorer.__name__}, batch_size={batch_size}'
        )


def test_hamming_per_element_mask_counts_the_weighed_bits():
    labels = np.array([[1, 0, 1, 0], [1, 1, 1, 1]], dtype=float)
    predicted = np.array([[0.9, 0.6, 0.5, 0.1], [0.2, 0.8, 0.9, 0.7]])
    mask = np.array([[1, 1, 0, 0], [1, 0, 0, 0]], dtype=float)
    # scored bits: row 0 bits 0, 1 (right, wrong); row 1 bit 0 (wrong)
    assert Hamming()(labels, predicted, mask) == pytest.approx(1.0)
    # a mask of ones per element is the unmasked figure, in bits
    ones = np.ones_like(labels)
    assert Hamming()(labels, predicted, ones) / ones.sum() == pytest.approx(
        Hamming()(labels, predicted) / 2
    )


def test_per_row_masks_keep_their_per_row_normalisation():
    labels = np.array([[1.0, 2.0], [0.0, 0.0]])
    predicted = np.array([[0.0, 0.0], [3.0, 0.0]])
    sc = MeanSquaredError()
    assert sc(labels, predicted, np.array([[0.0], [1.0]])) == pytest.approx(4.5)
    assert sc(labels, predicted, np.array([0.0, 1.0])) == pytest.approx(4.5)


def test_a_per_sample_per_element_mask_over_pixels_is_repeated():
    """A ``(T, B, K)`` mask over a per-pixel output ``(T, B, H, W, K)``
    weighs every pixel of a sample by the sample's element weights."""
    rnd = np.random.RandomState(2)
    x = rnd.randn(1, 3, 2, 2, 2)
    y = rnd.randn(1, 3, 2, 2, 2)
    emask = (rnd.rand(1, 3, 2) > 0.3).astype(float)
    inp = bs.layers.Input(
        out_shapes={
            'default': ('T', 'B', 2, 2, 2),
            'targets': ('T', 'B', 2, 2, 2),
            'emask': ('T', 'B', 2),
        }
    )
    net = bs.Network.from_layer(inp >> bs.layers.Convolution2D(2, (1, 1), name='Out'))
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    net.provide_external_data({'default': x, 'targets': y, 'emask': emask})
    net.forward_pass()
    predicted = net.get(OUT)
    full = np.broadcast_to(emask[:, :, None, None, :], y.shape)
    expected = (0.5 * (y - predicted) ** 2 * full).sum() / full.sum()
    result = bs.tools.evaluate(
        net,
        bs.data_iterators.Minibatches(
            2, shuffle=False, default=x, targets=y, emask=emask
        ),
        [MeanSquaredError(mask_name='emask')],
        out_name=OUT,
    )
    assert result['MeanSquaredError'] == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    'scorer, columns, message',
    [
        (MeanSquaredError(mask_name='emask'), 2, r'1\) or per element'),
        (Hamming(mask_name='emask'), 2, r'1\) or per element'),
        (Accuracy(mask_name='emask'), 3, 'Accuracy takes no weight per element'),
        (Accuracy(mask_name='emask'), 2, 'Accuracy takes no weight per element'),
    ],
    ids=['mse-2', 'hamming-2', 'accuracy-3', 'accuracy-2'],
)
def test_masks_of_other_columns_are_refused_naming_scorer_mask_and_shapes(
    scorer, columns, message
):
    rnd = np.random.RandomState(3)
    x = rnd.randn(2, 2, 3)
    inp = bs.layers.Input(
        out_shapes={
            'default': ('T', 'B', 3),
            'targets': ('T', 'B', 3),
            'emask': ('T', 'B', columns),
        }
    )
    net = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(3, activation='linear', name='Out')
    )
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    data = bs.data_iterators.Undivided(
        default=x, targets=x, emask=np.ones((2, 2, columns))
    )
    with pytest.raises(ValidationError) as info:
        bs.tools.evaluate(net, data, [scorer], out_name=OUT)
    text = str(info.value)
    assert text.startswith(f"{scorer.__name__}: mask 'emask'"), text
    assert f'mask of shape (2, 2, {columns})' in text, text
    assert 'output of shape (2, 2, 3)' in text, text
    assert OUT in text, text
    assert re.search(message, text), text


def test_direct_calls_refuse_masks_that_do_not_fit():
    labels = np.zeros((4, 3))
    predicted = np.eye(4, 3)
    for scorer, mask in [
        (MeanSquaredError(), np.ones((4, 2))),
        (Hamming(), np.ones((3, 1))),
        (Accuracy(mask_name='m'), np.ones((4, 3))),
        (Accuracy(), np.ones((2, 1))),
    ]:
        with pytest.raises(ValidationError) as info:
            scorer(labels, predicted, mask)
        text = str(info.value)
        assert text.startswith(scorer.__name__), text
        assert f'of shape {mask.shape}' in text and '(4, 3)' in text, text
    with pytest.raises(ValidationError, match="Accuracy: mask 'm'"):
        Accuracy(mask_name='m')(labels, predicted, np.ones((4, 3)))


# ------------------------------------------------ Accuracy row check ---


@pytest.mark.parametrize('batch_size', [1, 2])
def test_accuracy_refuses_targets_of_other_rows(batch_size):
    """Per-sample targets against a per-pixel output were broadcast at
    B=1 (a wrong score) and a bare ValueError at B=2."""
    inp, out = bs.tools.get_in_out_layers('classification', (4, 4, 1), 3)
    conv = bs.layers.Convolution2D(3, kernel_size=(3, 3), padding=1, name='C')
    net = bs.Network.from_layer(inp >> conv >> out)
    net.initialize(bs.initializers.Gaussian(0.3), seed=1)
    rnd = np.random.RandomState(0)
    x = rnd.randn(1, batch_size, 4, 4, 1)
    y = rnd.randint(0, 3, (1, batch_size, 1))
    rows = 16 * batch_size
    with pytest.raises(ValidationError) as info:
        bs.tools.evaluate(
            net,
            bs.data_iterators.Undivided(default=x, targets=y),
            [Accuracy(out_name='C.outputs.default')],
        )
    text = str(info.value)
    assert text.startswith("Accuracy: targets 'targets'"), text
    assert "'C.outputs.default'" in text and 'same number of rows' in text, text
    assert f'({batch_size}, 1) and ({rows}, 3)' in text, text


def test_accuracy_direct_call_refuses_other_rows():
    with pytest.raises(ValidationError, match=r'Accuracy: .*\(1, 1\) and \(3, 2\)'):
        Accuracy()(np.zeros((1, 1)), np.zeros((3, 2)))


# ------------------------------------------------- diverged networks ---


@pytest.mark.parametrize('bad', [np.nan, np.inf, -np.inf])
def test_non_finite_predictions_score_nan(bad):
    labels = np.array([[0], [1], [0]])
    predicted = np.array([[0.9, 0.1], [0.2, 0.8], [0.7, 0.3]])
    predicted[1, 0] = bad
    assert np.isnan(Accuracy()(labels, predicted))
    assert np.isnan(Accuracy()(labels, predicted[:, :1]))
    bits = np.array([[1, 0], [0, 1], [1, 1]], dtype=float)
    assert np.isnan(Hamming()(bits, predicted))
    # masked-out rows or elements do not count, whatever they hold
    row_mask = np.array([[1], [0], [1]])
    assert Accuracy()(labels, predicted, row_mask) == 2.0
    assert Hamming()(bits, predicted, row_mask) == pytest.approx(1 + 0.5)
    element_mask = np.ones((3, 2))
    element_mask[1, 0] = 0
    correct = (predicted >= 0.5) == (bits >= 0.5)
    assert Hamming()(bits, predicted, element_mask) == pytest.approx(
        correct[element_mask > 0].sum()
    )
    assert MeanSquaredError()(bits, predicted, row_mask) == pytest.approx(
        0.5 * ((bits - predicted)[[0, 2]] ** 2).sum()
    )
    assert np.isfinite(MeanSquaredError()(bits, predicted, element_mask))


def test_aggregate_of_a_nan_batch_is_nan():
    assert np.isnan(Accuracy.aggregate([(4, 3.0), (2, float('nan'))]))


def diverged_classifier():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3, mask_name='mask')
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    weights = net.get('H.parameters.W')
    weights[:] = np.nan
    net.handler.set_from_numpy(net.buffer['H'].parameters['W'], weights)
    return net


def test_a_diverged_network_gets_a_nan_accuracy():
    """NaN outputs read as class 0: 90 % of the targets are class 0, so
    the diverged network scored 0.9."""
    net = diverged_classifier()
    rnd = np.random.RandomState(0)
    x = rnd.randn(1, 20, 4)
    y = np.zeros((1, 20, 1))
    y[0, :2] = 1
    mask = np.ones((1, 20, 1))
    for batch_size in (20, 6):
        result = bs.tools.evaluate(
            net,
            bs.data_iterators.Minibatches(
                batch_size, shuffle=False, default=x, targets=y, mask=mask
            ),
            [Accuracy()],
            out_name='Output.outputs.predictions',
        )
        assert np.isnan(result['Accuracy']), (batch_size, dict(result))


def test_save_best_network_keeps_no_diverged_network():
    """SaveBestNetwork(criterion='max') watching a diverged network's
    validation accuracy saw 0.9 and kept the network."""
    net = diverged_classifier()
    rnd = np.random.RandomState(0)
    x = rnd.randn(1, 20, 4)
    y = np.zeros((1, 20, 1))
    y[0, :2] = 1
    data = bs.data_iterators.Undivided(default=x, targets=y, mask=np.ones((1, 20, 1)))
    trainer = bs.Trainer(
        bs.training.SgdStepper(learning_rate=0.0), verbose=False, check_finite=False
    )
    trainer.add_hook(
        bs.hooks.MonitorScores(
            'valid',
            [Accuracy(out_name='Output.outputs.predictions')],
            name='validation',
        )
    )
    best = bs.hooks.SaveBestNetwork('validation.Accuracy', criterion='max')
    trainer.add_hook(best)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(net, data, valid=data)
    accuracies = trainer.logs['validation']['Accuracy']
    assert best.parameters is None, f'kept on validation.Accuracy {accuracies}'
    assert all(np.isnan(accuracies)), accuracies


@pytest.mark.parametrize('columns', [1, 3])
def test_a_batch_without_samples_keeps_weight_zero(columns):
    """A part of a batch without samples (a data-parallel rank's) is
    gathered with weight 0, with a mask of one weight per row or per
    element."""
    net = regression_net(extra_inputs=('mask',))
    empty = np.zeros((1, 0, 3))
    net.provide_external_data(
        {'default': empty, 'targets': empty, 'emask': empty, 'mask': empty[..., :1]}
    )
    net.forward_pass()
    scores = {}
    mask_name = 'emask' if columns == 3 else 'mask'
    gather_losses_and_scores(
        net,
        [MeanSquaredError(mask_name=mask_name), Hamming(mask_name=mask_name)],
        scores,
        out_name=OUT,
    )
    assert scores['MeanSquaredError'] == [(0.0, 0.0)]
    assert scores['Hamming'] == [(0.0, 0.0)]


class WeightedAbsError(bs.scorers.Scorer):
    """A scorer of one's own as 0.5 wrote them: ``errors * mask``."""

    def __call__(self, true_labels, predicted, mask=None):
        errors = np.abs(true_labels - predicted)
        if mask is not None:
            errors = errors * mask
        return float(errors.sum())


def test_a_scorer_of_ones_own_gets_a_per_element_mask_as_in_05():
    # 0.5 passed any mask through to the scorer; refusing masks of one
    # weight per element for scorers that do not declare them broke such
    # scorers
    rnd = np.random.RandomState(0)
    x, y = rnd.randn(1, 4, 3), rnd.randn(1, 4, 3)
    emask = np.array([1.0, 0.0, 0.5]) * np.ones((1, 4, 3))
    net = regression_net()
    predicted = outputs_of(net, x)
    scorer = WeightedAbsError(out_name=OUT, mask_name='emask')
    data = bs.data_iterators.Undivided(default=x, targets=y, emask=emask)
    scores = bs.tools.evaluate(net, data, scorers=[scorer])
    expected = (np.abs(y - predicted) * emask).sum() / emask.sum()
    np.testing.assert_allclose(scores['WeightedAbsError'], expected, rtol=1e-12)


# ---------------------------------------- masks over more rows, edges ---


def test_a_per_sample_mask_weighs_every_pixel_of_its_sample():
    rnd = np.random.RandomState(0)
    predicted = rnd.randn(6, 3)  # 2 samples of 3 pixels each
    mask = np.array([[1.0], [0.0]])  # the second sample is left out
    value = bs.scorers._mask_rows(
        mask, predicted, 'mask', MeanSquaredError(), OUT, (1, 2, 3, 3)
    )
    np.testing.assert_array_equal(value, [[1.0]] * 3 + [[0.0]] * 3)
    assert value.dtype == mask.dtype


@pytest.mark.parametrize('mask_rows', [0, 4])
def test_a_mask_of_rows_that_do_not_divide_the_outputs_rows_is_refused(mask_rows):
    predicted = np.zeros((6, 3))
    mask = np.ones((mask_rows, 1))
    with pytest.raises(ValidationError, match=r"mask 'm' must hold one weight per"):
        bs.scorers._mask_rows(mask, predicted, 'm', MeanSquaredError(), OUT, (6, 3))


def test_hamming_reads_a_target_of_one_half_as_a_one_bit():
    # the rule that turns targets into bits: >= 0.5 is 1
    scorer = Hamming()
    assert scorer(np.array([[0.5]]), np.array([[0.9]])) == 1.0
    assert scorer(np.array([[0.4999]]), np.array([[0.9]])) == 0.0


def test_batch_size_of_a_network_without_a_buffer_manager_reads_the_input():
    net = SimpleNamespace(buffer={'Input': {'outputs': [np.zeros((2, 5, 3))]}})
    assert bs.scorers.batch_size_of(net) == 5
