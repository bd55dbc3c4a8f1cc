"""FromGenerator: batches from a function (one call per pass), a list, or
a generator (one pass only)."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import FromGenerator
from brainstorm.describable import get_description
from brainstorm.utils import IteratorValidationError

X = np.arange(24, dtype=float).reshape(1, 8, 3)
Y = np.arange(8).reshape(1, 8, 1) % 2


def make_batches(size=3):
    for start in range(0, 8, size):
        yield {
            'default': X[:, start : start + size],
            'targets': Y[:, start : start + size],
        }


def starts(iterator):
    return [int(batch['default'][0, 0, 0]) for batch in iterator()]


def test_a_function_is_called_once_per_pass():
    calls = []

    def batches():
        calls.append(1)
        return make_batches()

    it = FromGenerator(
        batches, data_shapes={'default': (1, 8, 3), 'targets': (1, 8, 1)}
    )
    assert calls == []
    assert starts(it) == starts(it) == [0, 9, 18]
    assert len(calls) == 2
    assert it.length is None


def test_without_data_shapes_the_first_batch_gives_them():
    it = FromGenerator(make_batches, length=3)
    assert it.data_shapes == {'default': (1, 3, 3), 'targets': (1, 3, 1)}
    assert starts(it) == [0, 9, 18]


def test_a_generator_gives_one_pass_and_a_clear_error_on_the_second():
    it = FromGenerator(make_batches())
    assert starts(it) == [0, 9, 18]  # the batch read for data_shapes included
    with pytest.raises(IteratorValidationError) as info:
        starts(it)
    message = str(info.value)
    assert 'generator given was used up by the first pass' in message
    assert 'FromGenerator(make_batches), not FromGenerator(make_batches())' in message


def test_a_list_of_batches_gives_every_pass():
    it = FromGenerator(list(make_batches(4)))
    assert starts(it) == starts(it) == [0, 12]


def test_the_batches_are_read_only_and_the_users_arrays_stay_writeable():
    batch = next(FromGenerator(make_batches)())
    assert not batch['default'].flags.writeable
    assert X.flags.writeable


def test_it_trains_a_network_for_several_epochs():
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    trainer.train(net, FromGenerator(make_batches, length=3))
    assert trainer.current_update_nr == 9


def test_a_pass_of_another_length_than_declared_is_refused():
    it = FromGenerator(make_batches, length=2)
    with pytest.raises(
        IteratorValidationError, match='yielded 3 batches, but length is 2'
    ):
        list(it())


@pytest.mark.parametrize(
    'batch, expected',
    [
        ([X], 'batch 0 of the pass must be a dict'),
        ({'default': X}, r"has data \['default'\], but data_shapes names"),
        (
            {'default': X[..., :2], 'targets': Y},
            r"'default' of batch 0 must have shape \(T, B, 3\)",
        ),
        ({'default': X, 'targets': Y[:, :2]}, r'the same \(T, B\)'),
        (
            {'default': X.astype(str), 'targets': Y},
            "data 'default' of batch 0 must be a numeric array",
        ),
        (
            {'default': np.full_like(X, np.nan), 'targets': Y},
            r"'default' holds NaN or infinite values \(the first at index \(0, 0, 0\)",
        ),
    ],
)
def test_a_bad_batch_is_refused_naming_what_is_wrong(batch, expected):
    it = FromGenerator(
        lambda: iter([batch]), data_shapes={'default': (1, 8, 3), 'targets': (1, 8, 1)}
    )
    with pytest.raises(IteratorValidationError, match=expected):
        list(it())


def test_check_finite_false_lets_nan_through():
    batch = {'default': np.full_like(X, np.nan), 'targets': Y}
    it = FromGenerator([batch], check_finite=False)
    assert np.isnan(next(it())['default']).all()


def test_a_function_returning_no_iterable_is_refused():
    with pytest.raises(
        IteratorValidationError,
        match='batches\\(\\) must return an iterable of batches',
    ):
        FromGenerator(lambda: None)


def test_batches_without_any_batch_give_no_data_shapes():
    with pytest.raises(IteratorValidationError, match='yield no batch'):
        FromGenerator(lambda: iter([]))


@pytest.mark.parametrize('bad', [5, None, 'x', {'default': X}])
def test_batches_must_be_callable_or_iterable(bad):
    with pytest.raises(IteratorValidationError, match='FromGenerator: batches must be'):
        FromGenerator(bad)


def test_it_holds_code_so_it_has_no_description():
    with pytest.raises(TypeError, match='not describable.*FromGenerator.batches'):
        get_description(FromGenerator(make_batches))
