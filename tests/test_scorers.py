"""Tests for brainstorm.scorers."""

import json
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.scorers import (
    Accuracy,
    Hamming,
    MeanSquaredError,
    Scorer,
    ScorerInputError,
    aggregate_losses_and_scores,
    gather_losses_and_scores,
)
from brainstorm.structure.buffer_views import BufferView
from brainstorm.utils import ValidationError


class FakeNet:
    """Just what the scorer helpers use of a Network."""

    def __init__(self, inputs, outputs, losses, output_name=None):
        self.inputs = inputs
        self.outputs = outputs
        self.losses = losses
        self.output_name = output_name
        names = list(inputs)
        input_view = BufferView(
            ['outputs'], [BufferView(names, [inputs[n] for n in names])]
        )
        self.buffer = BufferView(['Input'], [input_view])

    def get(self, path):
        return self.outputs[path].copy()

    def get_input(self, name):
        return self.inputs[name].copy()

    def get_loss_values(self):
        return OrderedDict(self.losses)


# ---------------------------------------------------------------- basics ---


def test_scorer_names_and_defaults():
    sc = Accuracy()
    assert sc.__name__ == 'Accuracy'
    assert (sc.out_name, sc.targets_name, sc.mask_name) == ('', 'targets', '')
    named = Hamming(0.3, out_name='Out.outputs.default', name='bits')
    assert named.__name__ == 'bits' and named.threshold == 0.3
    assert named.out_name == 'Out.outputs.default'


@pytest.mark.parametrize(
    'scorer',
    [
        Accuracy(),
        Accuracy(out_name='A.outputs.default', name='acc'),
        Hamming(threshold=0.7, mask_name='mask'),
        MeanSquaredError(name='mse'),
    ],
    ids=lambda s: s.__name__,
)
def test_description_round_trip(scorer):
    description = json.loads(json.dumps(get_description(scorer)))
    recreated = create_from_description(description)
    assert type(recreated) is type(scorer)
    assert recreated.__dict__ == scorer.__dict__
    labels = np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    predicted = np.array([[0.8, 0.1], [0.6, 0.9], [0.2, 0.75]])
    assert recreated(labels, predicted) == scorer(labels, predicted)


def test_base_scorer_is_abstract():
    with pytest.raises(NotImplementedError):
        Scorer()(np.zeros((1, 1)), np.zeros((1, 1)))


def test_aggregate_is_weighted_sum_ratio():
    assert Scorer.aggregate([(4, 3.0), (2, 1.0)]) == pytest.approx(4 / 6)
    assert Accuracy.aggregate([(10, 10.0)]) == 1.0
    assert Scorer.aggregate([]) == 0.0


# --------------------------------------------------------------- values ---


def test_accuracy_argmax_and_mask():
    labels = np.array([[0], [1], [2], [1]])
    predicted = np.array(
        [[0.9, 0.1, 0], [0.2, 0.7, 0.1], [0.5, 0.4, 0.1], [0.1, 0.1, 0.8]]
    )
    sc = Accuracy()
    assert sc(labels, predicted) == 2.0
    mask = np.array([[1], [0], [1], [1]])
    assert sc(labels, predicted, mask) == 1.0
    one_hot = np.eye(3)[labels.ravel()]
    assert sc(one_hot, predicted) == 2.0


def test_accuracy_single_column_uses_equality():
    labels = np.array([[1.0], [0.0], [1.0]])
    predicted = np.array([[1.0], [1.0], [1.0]])
    assert Accuracy()(labels, predicted) == 2.0


def test_hamming_fraction_of_bits_per_row():
    labels = np.array([[1, 0, 1, 0], [1, 1, 1, 1]], dtype=float)
    predicted = np.array([[0.9, 0.6, 0.5, 0.1], [0.2, 0.8, 0.9, 0.7]])
    sc = Hamming()
    # row 0: bits (1,1,1,0) vs (1,0,1,0) -> 3/4; row 1: 3/4
    assert sc(labels, predicted) == pytest.approx(1.5)
    assert sc(labels, predicted, np.array([[1], [0]])) == pytest.approx(0.75)
    assert Hamming(threshold=0.95)(labels, predicted) == pytest.approx(0.5 + 0.0)
    with pytest.raises(ValidationError, match='Hamming'):
        sc(labels[:, :2], predicted)


def test_mean_squared_error_is_half_sum_of_squares():
    labels = np.array([[1.0, 2.0], [0.0, 0.0]])
    predicted = np.array([[0.0, 0.0], [3.0, 0.0]])
    sc = MeanSquaredError()
    assert sc(labels, predicted) == pytest.approx(0.5 * (1 + 4 + 9))
    assert sc(labels, predicted, np.array([[0], [1]])) == pytest.approx(4.5)
    assert sc.aggregate([(2, sc(labels, predicted))]) == pytest.approx(3.5)


# ------------------------------------------------- gather and aggregate ---


def make_net(predicted, targets, mask, losses):
    return FakeNet(
        inputs={
            'default': np.zeros(targets.shape[:2] + (3,)),
            'targets': targets,
            'mask': mask,
        },
        outputs={
            'Out.outputs.default': predicted,
            'Other.outputs.default': 1 - predicted,
        },
        losses=losses,
        output_name='Out.outputs.default',
    )


def test_gather_and_aggregate_over_batches():
    scores = {}
    accuracy = Accuracy()
    masked = Accuracy(mask_name='mask', name='masked_accuracy')
    other = Accuracy(out_name='Other.outputs.default', name='other')
    scorers = [accuracy, masked, other]
    # batch 1: T=2, B=2 -> 4 rows, 3 of them correct
    predicted = np.array([[[0.9, 0.1], [0.2, 0.8]], [[0.3, 0.7], [0.6, 0.4]]])
    targets = np.array([[[0], [1]], [[1], [1]]])
    mask = np.array([[[1], [1]], [[0], [1]]], dtype=float)
    net1 = make_net(predicted, targets, mask, [('Loss', 2.0), ('total_loss', 2.0)])
    gather_losses_and_scores(net1, scorers, scores)
    # batch 2: T=1, B=1 -> 1 row, correct
    net2 = make_net(
        np.array([[[0.1, 0.9]]]),
        np.array([[[1]]]),
        np.array([[[1.0]]]),
        [('Loss', 5.0), ('total_loss', 5.0)],
    )
    gather_losses_and_scores(net2, scorers, scores)
    assert scores['total_loss'] == [(2, 2.0), (1, 5.0)]
    assert scores['Accuracy'] == [(4, 3.0), (1, 1.0)]
    assert scores['masked_accuracy'] == [(3.0, 2.0), (1.0, 1.0)]
    assert scores['other'] == [(4, 1.0), (1, 0.0)]
    results = aggregate_losses_and_scores(scores, net2, scorers)
    assert list(results) == [
        'Loss',
        'total_loss',
        'Accuracy',
        'masked_accuracy',
        'other',
    ]
    assert results['total_loss'] == pytest.approx((2 * 2 + 5) / 3)
    assert results['Loss'] == results['total_loss']
    assert results['Accuracy'] == pytest.approx(4 / 5)
    assert results['masked_accuracy'] == pytest.approx(3 / 4)
    assert results['other'] == pytest.approx(1 / 5)
    # default names given to gather are used when a scorer has none
    more = {}
    gather_losses_and_scores(
        net1, [accuracy], more, out_name='Other.outputs.default', mask_name='mask'
    )
    hits = (1 - predicted).reshape(4, 2).argmax(axis=1) == targets.reshape(4)
    assert more['Accuracy'] == [(3.0, float((hits * mask.reshape(4)).sum()))]


def test_gather_without_any_output_name_fails_clearly():
    net = make_net(
        np.zeros((1, 1, 2)),
        np.zeros((1, 1, 1)),
        np.ones((1, 1, 1)),
        [('total_loss', 0.0)],
    )
    net.output_name = None
    with pytest.raises(ValidationError, match='Accuracy: no output to score'):
        gather_losses_and_scores(net, [Accuracy()], {})


# ------------------------------------------------------ with a real net ---


def make_real_net():
    from brainstorm.layers import FullyConnected, Input, Loss, SoftmaxCE
    from brainstorm.structure.network import Network

    inp = Input(out_shapes={'default': ('T', 'B', 3), 'targets': ('T', 'B', 1)})
    out = SoftmaxCE(name='Out')
    (
        inp - 'default'
        >> FullyConnected(4, name='Hid', activation='linear')
        >> 'default' - out
    )
    inp - 'targets' >> 'targets' - out
    out - 'loss' >> Loss()
    net = Network.from_layer(out)
    net.initialize(1.0, Hid={'W': [[1.0, 0, 0], [0, 1, 0], [0, 0, 1], [-1, -1, -1]]})
    net.output_name = 'Out.outputs.predictions'
    return net


def evaluate(net, iterator, scorers):
    scores = {}
    for batch in iterator():
        net.provide_external_data(batch)
        net.forward_pass()
        gather_losses_and_scores(net, scorers, scores)
    return aggregate_losses_and_scores(scores, net, scorers)


def test_scores_of_a_real_network_do_not_depend_on_batching():
    from brainstorm.data_iterators import Minibatches, Undivided

    net = make_real_net()
    rnd = np.random.RandomState(1)
    x = rnd.randn(2, 7, 3)
    t = rnd.randint(0, 4, size=(2, 7, 1))
    scorers = [Accuracy()]
    whole = evaluate(net, Undivided(default=x, targets=t), scorers)
    predictions = net.get('Out.outputs.predictions')
    expected_accuracy = np.mean(predictions.argmax(axis=2) == t[:, :, 0])
    assert whole['Accuracy'] == pytest.approx(expected_accuracy)
    assert 0 < expected_accuracy < 1
    batched = evaluate(net, Minibatches(3, default=x, targets=t), scorers)
    assert list(batched) == ['total_loss', 'Accuracy']
    assert batched['Accuracy'] == pytest.approx(whole['Accuracy'])
    assert batched['total_loss'] == pytest.approx(whole['total_loss'], rel=1e-5)


# ------------------------------------------------------------ processes ---


class TwoRanks:
    """Rank 0 of 2; rank 1 gathered ``other``."""

    def __init__(self, other):
        self.other = other

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 2

    def allgather(self, obj):
        return [obj, self.other]


def test_aggregate_over_processes_joins_the_ranks_lists():
    from brainstorm.parallel import MpiProcesses, SingleProcess
    from brainstorm.scorers import batch_size_of, gather_from_all_ranks

    net = make_net(
        np.array([[[0.9, 0.1]]]),
        np.array([[[0]]]),
        np.array([[[1.0]]]),
        [('total_loss', 1.0)],
    )
    mine = {'total_loss': [(1, 1.0)], 'Accuracy': [(1, 1.0)]}
    other = {'total_loss': [(3, 5.0)], 'Accuracy': [(3, 0.0)]}
    for comm in (TwoRanks(other), MpiProcesses(TwoRanks(other))):
        results = aggregate_losses_and_scores(mine, net, [Accuracy()], comm=comm)
        assert results['total_loss'] == pytest.approx((1 + 15) / 4)
        assert results['Accuracy'] == pytest.approx(1 / 4)
    for single in (None, SingleProcess()):
        results = aggregate_losses_and_scores(mine, net, [Accuracy()], comm=single)
        assert results == OrderedDict([('total_loss', 1.0), ('Accuracy', 1.0)])
    assert gather_from_all_ranks(mine, None) == mine
    assert batch_size_of(net) == 1


@pytest.mark.parametrize('batch_size', [1, 2, 6])
def test_a_sample_mask_weighs_every_pixel_of_per_pixel_outputs(batch_size):
    """A ``(T, B, 1)`` mask (as get_in_out_layers makes for image outputs)
    weighed each sample's pixels as one row: Accuracy 2.5 at batch size 1,
    a broadcasting ValueError at 2. Each pixel of a masked-in sample now
    counts once."""
    import brainstorm as bs

    rnd = np.random.RandomState(0)
    x = rnd.randn(1, 6, 3, 3, 2)
    y = rnd.randint(0, 4, (1, 6, 3, 3, 1)).astype(float)
    mask = np.ones((1, 6, 1))
    mask[0, :2] = 0
    inp, out = bs.tools.get_in_out_layers(
        'classification', (3, 3, 2), (3, 3, 4), mask_name='mask'
    )
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    net.provide_external_data({'default': x, 'targets': y, 'mask': mask})
    net.forward_pass()
    classes = net.get('Output.outputs.predictions').argmax(-1)[..., None]
    kept = np.broadcast_to(mask[:, :, None, None, :], y.shape)
    expected = ((classes == y) * kept).sum() / kept.sum()
    result = bs.tools.evaluate(
        net,
        bs.data_iterators.Minibatches(
            batch_size, shuffle=False, default=x, targets=y, mask=mask
        ),
        [bs.scorers.Accuracy(mask_name='mask')],
        out_name='Output.outputs.predictions',
    )
    assert result['Accuracy'] == pytest.approx(expected, abs=1e-12)


# ------------------------------------------- found by a tester, fixed ---


def _two_heads(seed=2):
    """A network with two softmax heads, on 'targets' and on 't2'."""
    rng = np.random.RandomState(seed)
    bs.global_rnd.set_seed(1)
    layers = bs.layers
    inp = layers.Input(
        {'default': ('T', 'B', 4), 'targets': ('T', 'B', 1), 't2': ('T', 'B', 1)}
    )
    for k, t in (('1', 'targets'), ('2', 't2')):
        out = layers.SoftmaxCE(name='O' + k)
        (
            inp - 'default'
            >> layers.FullyConnected(3, activation='linear', name='P' + k)
            >> out
        )
        inp - t >> 'targets' - out
        out - 'loss' >> layers.Loss(name='L' + k)
    net = bs.Network.from_layer(inp)
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    data = bs.data_iterators.Minibatches(
        4,
        shuffle=False,
        default=rng.randn(1, 8, 4),
        targets=rng.randint(0, 3, (1, 8, 1)),
        t2=rng.randint(0, 3, (1, 8, 1)),
    )
    return net, data


def test_scorers_of_one_name_are_refused():
    """Their (weight, value) pairs went into one list and were averaged."""
    net, data = _two_heads()
    first = bs.scorers.Accuracy(out_name='O1.outputs.predictions')
    second = bs.scorers.Accuracy(out_name='O2.outputs.predictions', targets_name='t2')
    with pytest.raises(ValidationError, match="two scorers are named 'Accuracy'"):
        bs.tools.evaluate(net, data, [first, second])
    second.__name__ = 'Accuracy2'
    both = bs.tools.evaluate(net, data, [first, second])
    assert both['Accuracy'] == bs.tools.evaluate(net, data, [first])['Accuracy']


@pytest.mark.parametrize('name', ['L1', 'total_loss'])
def test_a_scorer_named_like_a_loss_is_refused(name):
    """Its pairs mixed into the loss's: L1 read 0.42 instead of 1.85."""
    net, data = _two_heads()
    scorer = bs.scorers.Accuracy(out_name='O1.outputs.predictions', name=name)
    with pytest.raises(ValidationError, match='named like a loss'):
        bs.tools.evaluate(net, data, [scorer])


@pytest.mark.parametrize('name', ['Accuracy', 'L2'])
def test_train_scorers_of_one_name_are_refused_before_the_first_update(name):
    """They were refused when the first batch's scores were gathered,
    after the stepper had already updated the parameters."""
    net, data = _two_heads()
    before = net.get('parameters')
    trainer = bs.Trainer(bs.training.SgdStepper(0.5), verbose=False)
    trainer.train_scorers = [
        bs.scorers.Accuracy(out_name='O1.outputs.predictions'),
        bs.scorers.Accuracy(out_name='O2.outputs.predictions', name=name),
    ]
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with pytest.raises(ValidationError, match='two scorers|named like a loss'):
        trainer.train(net, data)
    np.testing.assert_array_equal(net.get('parameters'), before)
    assert trainer.current_update_nr == 0


def test_evaluate_targets_name_reaches_scorers_without_their_own():
    """``targets_name=''`` (no targets of its own) was refused, so the
    ``targets_name`` of evaluate could reach no scorer; a scorer's own
    (default ``'targets'``) still wins, as in Brainstorm 0.5."""
    rng = np.random.RandomState(0)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3, targets_name='labels')
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    x, y = rng.randn(1, 8, 4), rng.randint(0, 3, (1, 8, 1))
    data = bs.data_iterators.Undivided(default=x, labels=y)
    got = bs.tools.evaluate(
        net, data, [bs.scorers.Accuracy(targets_name='')],
        out_name='Output.outputs.predictions', targets_name='labels',
    )  # fmt: skip
    own = bs.tools.evaluate(
        net, data, [bs.scorers.Accuracy(targets_name='labels')],
        out_name='Output.outputs.predictions',
    )  # fmt: skip
    assert got['Accuracy'] == own['Accuracy']
    with pytest.raises(ScorerInputError, match="targets_name 'targets' is no input"):
        bs.tools.evaluate(
            net, data, [bs.scorers.Accuracy()],
            out_name='Output.outputs.predictions', targets_name='labels',
        )  # fmt: skip


def test_a_layer_name_stands_for_its_single_output_in_scorers():
    """predict accepted it; the scorers raised a bare KeyError."""
    rng = np.random.RandomState(0)
    inp, out = bs.tools.get_in_out_layers('regression', 4, 3)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(1.0), seed=1)
    data = bs.data_iterators.Minibatches(
        5, shuffle=False, default=rng.randn(1, 10, 4), targets=rng.randn(1, 10, 3)
    )
    by_layer = bs.tools.evaluate(
        net, data, [bs.scorers.MeanSquaredError(out_name='Output_projection')]
    )
    by_path = bs.tools.evaluate(
        net,
        data,
        [bs.scorers.MeanSquaredError(out_name='Output_projection.outputs.default')],
    )
    assert by_layer['MeanSquaredError'] == by_path['MeanSquaredError']


def test_mean_squared_error_refuses_shapes_that_differ():
    """(rows, 3) predictions against (rows, 1) targets were broadcast."""
    with pytest.raises(ValidationError, match='must have the same shape'):
        bs.scorers.MeanSquaredError()(np.zeros((5, 1)), np.zeros((5, 3)))


def test_scores_of_a_recurrent_output_leave_its_context_rows_out():
    """net.get of a layer with context holds T + 1 rows: the scorers read
    them all (shapes differed, or a context row was scored)."""
    rng = np.random.RandomState(0)
    inp, out = bs.tools.get_in_out_layers('regression', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.Lstm(3, name='Lstm') >> out)
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    x, y = rng.randn(5, 2, 4), rng.randn(5, 2, 3)
    data = bs.data_iterators.Undivided(default=x, targets=y)
    got = bs.tools.evaluate(net, data, [bs.scorers.MeanSquaredError(out_name='Lstm')])
    lstm = net.predict(x, out_name='Lstm')
    expected = 0.5 * ((y - lstm) ** 2).sum() / 10
    assert got['MeanSquaredError'] == pytest.approx(expected)


def test_a_batch_sized_output_of_several_axes_is_scored_whole():
    """Only time-sized buffers with context rows are cut to T."""
    rng = np.random.RandomState(0)
    inp = bs.layers.Input({'default': ('B', 2, 3), 'targets': ('B', 2, 3)})
    add = bs.layers.Add(name='Add')
    inp - 'default' >> 'inputs_1' - add
    inp - 'default' >> 'inputs_2' - add
    net = bs.Network.from_layer(add)
    x, y = rng.randn(5, 2, 3), rng.randn(5, 2, 3)
    got = bs.tools.evaluate(
        net,
        bs.data_iterators.Undivided(default=x, targets=y),
        [bs.scorers.MeanSquaredError(out_name='Add.outputs.default')],
    )
    expected = 0.5 * ((y - 2 * x) ** 2).sum() / 10
    assert got['MeanSquaredError'] == pytest.approx(expected)


def test_a_mask_input_the_network_lacks_is_named():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.1)
    data = bs.data_iterators.Undivided(
        default=np.ones((1, 4, 4)), targets=np.zeros((1, 4, 1))
    )
    with pytest.raises(KeyError, match="mask_name 'mask' is no input"):
        bs.tools.evaluate(
            net, data, [bs.scorers.Accuracy(mask_name='mask')],
            out_name='Output.outputs.predictions',
        )  # fmt: skip
