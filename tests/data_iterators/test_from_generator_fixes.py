"""FromGenerator: a batch with samples but no time steps is refused (it
counted as a loss of 0.0: evaluate reported 0.0 for no data, and such a
batch halved the loss of the others), and a list of batches keeps its
dtypes through a description (float32 came back as float64, uint8 as
int64)."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import FromGenerator
from brainstorm.describable import create_from_description, get_description
from brainstorm.utils import IteratorValidationError


def _batch(t, b):
    return {'default': np.ones((t, b, 4)), 'targets': np.zeros((t, b, 1), int)}


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


def test_a_batch_without_time_steps_is_refused_naming_it():
    it = FromGenerator([_batch(1, 3), _batch(0, 3)])
    batches = it()
    assert next(batches)['default'].shape == (1, 3, 4)
    with pytest.raises(IteratorValidationError) as info:
        next(batches)
    assert str(info.value).startswith(
        "FromGenerator: data 'default' of batch 1 of the pass has no time "
        'steps: expected a shape (T, B, ...) with T >= 1 for its 3 samples. '
        'Received: shape=(0, 3, 4).'
    )


def test_evaluate_and_train_refuse_it():
    net = _net()
    loss = bs.tools.evaluate(net, FromGenerator([_batch(1, 3)]))['total_loss']
    assert loss > 0
    for batches in ([_batch(0, 3)], [_batch(1, 3), _batch(0, 3)]):
        with pytest.raises(IteratorValidationError, match='has no time steps'):
            bs.tools.evaluate(net, FromGenerator(batches))
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    before = net.get('parameters').copy()
    with pytest.raises(IteratorValidationError, match='of batch 0 of the pass'):
        trainer.train(net, FromGenerator([_batch(0, 3)]))
    np.testing.assert_array_equal(net.get('parameters'), before)


def test_batches_without_samples_are_still_accepted():
    it = FromGenerator([_batch(1, 2), _batch(1, 0), _batch(0, 0)])
    assert [b['default'].shape for b in it()] == [(1, 2, 4), (1, 0, 4), (0, 0, 4)]


def _round_trip(iterator):
    return create_from_description(json.loads(json.dumps(get_description(iterator))))


def test_a_list_of_batches_keeps_its_dtypes_through_a_description():
    x = np.linspace(0, 1, 6, dtype=np.float32).reshape(1, 2, 3)
    y = np.array([[[1], [200]]], np.uint8)
    original = FromGenerator([{'default': x, 'targets': y}] * 2, length=2)
    description = get_description(original)
    assert description['data_dtypes'] == {'default': 'float32', 'targets': 'uint8'}
    restored = _round_trip(original)
    assert 'data_dtypes' not in vars(restored)
    batches = list(restored())
    assert len(batches) == 2
    for batch in batches:
        assert batch['default'].dtype == np.float32
        assert batch['targets'].dtype == np.uint8
        np.testing.assert_array_equal(batch['default'], x)
        np.testing.assert_array_equal(batch['targets'], y)
    assert get_description(restored) == description


def test_a_dtype_that_differs_between_batches_is_left_out():
    batches = [
        {'default': np.ones((1, 2, 3), np.float32), 'targets': np.zeros((1, 2, 1))},
        {'default': np.ones((1, 2, 3)), 'targets': np.zeros((1, 2, 1))},
    ]
    description = get_description(FromGenerator(batches))
    assert description['data_dtypes'] == {'targets': 'float64'}
    restored = create_from_description(description)
    assert [b['default'].dtype for b in restored()] == [np.float64, np.float64]


def test_a_description_without_dtypes_loads_as_before():
    x = np.ones((1, 2, 3), np.float32)
    description = json.loads(json.dumps(get_description(FromGenerator([{'a': x}]))))
    description.pop('data_dtypes')  # as written by earlier versions
    assert next(create_from_description(description)())['a'].dtype == np.float64


@pytest.mark.parametrize(
    'dtypes, message',
    [
        (
            {'a': 'int8'},
            "FromGenerator (from a description): data 'a' of batch 1 holds 300 at "
            "index (0, 0, 0), which its dtype 'int8'",
        ),
        (
            {'b': 'int8'},
            "FromGenerator (from a description): data_dtypes names unknown data 'b'",
        ),
    ],
    ids=['out-of-range', 'unknown-name'],
)
def test_a_description_whose_dtypes_do_not_fit_is_refused(dtypes, message):
    ones = np.ones((1, 1, 1), int)
    description = get_description(FromGenerator([{'a': ones}, {'a': ones * 300}]))
    description['data_dtypes'] = dtypes
    with pytest.raises(IteratorValidationError) as info:
        create_from_description(description)
    assert str(info.value).startswith(message)


def test_a_description_whose_length_contradicts_its_batches_is_refused():
    description = get_description(FromGenerator([_batch(1, 2)] * 3, length=3))
    description['length'] = 4
    with pytest.raises(IteratorValidationError) as info:
        create_from_description(description)
    assert str(info.value).startswith(
        'FromGenerator (from a description): length must be None or the number '
        'of batches given: 3. Received: length=4'
    )
    description['length'] = None
    assert len(list(create_from_description(description)())) == 3


@pytest.mark.parametrize('length', [2, 4, 0])
def test_a_list_that_contradicts_length_is_refused_when_made(length):
    """It failed only after a whole pass had been yielded (a trainer had
    made 3 updates by then)."""
    batch = {'default': np.zeros((1, 2, 3))}
    with pytest.raises(IteratorValidationError) as info:
        bs.data_iterators.FromGenerator([batch, batch, batch], length=length)
    message = str(info.value)
    assert 'FromGenerator: length must be None or the number of batches' in message
    assert f'given: 3. Received: length={length}' in message
    assert bs.data_iterators.FromGenerator([batch, batch, batch], length=3).length == 3
