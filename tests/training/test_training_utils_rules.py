"""training.utils: the rules of the logs, batches and checks, at their edges.

What a run logs (each entry with its epoch and update, also where a log
is a plain list or out of step), the batches that reach the network, the
checks of the iterators before training and the test of whether a
stepper's memory is still the network's.
"""

from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.training.utils import (
    LogEntries,
    add_log,
    check_data_iterators,
    log_counters,
    memory_of,
    run_network,
    same_memory,
)
from brainstorm.utils import IteratorValidationError
from tests.training.nets import xor_data, xor_net


def _batches(count):
    """``count`` XOR batches of one sample each, as a list of dicts."""
    data = xor_data()
    return [
        {name: array[:, i : i + 1] for name, array in data.items()}
        for i in range(count)
    ]


# ------------------------------------------------------------- batches ---


def test_run_network_gives_each_batch_of_a_list_of_dicts_in_order():
    net = xor_net()
    batches = _batches(4)
    seen = []
    for i in run_network(net, batches):
        seen.append((i, net.get_input('default').copy()))
    assert [i for i, _ in seen] == [0, 1, 2, 3]
    for (_, given), batch in zip(seen, batches):
        np.testing.assert_array_equal(given, batch['default'])


@pytest.mark.parametrize('data', [5, None, object(), 2.5])
def test_run_network_refuses_data_that_is_not_iterable(data):
    # refused with the library's error, not a TypeError or NameError from
    # inside the generator
    net = xor_net()
    with pytest.raises(IteratorValidationError, match='iterable of batches'):
        list(run_network(net, data))


@pytest.mark.parametrize(
    'data', [xor_data(), np.zeros((1, 4, 2)), 'default', b'default']
)
def test_run_network_refuses_a_dict_an_array_or_a_string(data):
    # each is iterable, but would reach the network one key, one time step
    # or one character at a time
    net = xor_net()
    with pytest.raises(IteratorValidationError, match='iterable of batches'):
        next(run_network(net, data))


def test_run_network_refuses_a_batch_that_is_no_dict_by_its_index():
    net = xor_net()
    batches = _batches(2) + [np.zeros((1, 1, 2))]
    seen = []
    with pytest.raises(
        IteratorValidationError, match='Batch 2 of the data is an array'
    ):
        for i in run_network(net, batches):
            seen.append(i)
    assert seen == [0, 1]


def test_evaluate_refuses_a_batch_that_is_no_dict():
    net = xor_net()
    with pytest.raises(IteratorValidationError, match='Batch 0 of the data'):
        bs.tools.evaluate(net, [[np.zeros((1, 1, 2))]], scorers=())


# ---------------------------------------------------------------- logs ---


def test_log_entries_count_their_entries_as_epochs_without_counters():
    log = LogEntries([1.0, 2.0, 3.0])
    assert log == [1.0, 2.0, 3.0]
    assert log.epochs == [0, 1, 2]
    assert log.updates == [None, None, None]


def test_log_entries_keep_given_counters():
    log = LogEntries([1.0, 2.0], epochs=[3, 4], updates=[30, 40])
    assert log.epochs == [3, 4]
    assert log.updates == [30, 40]
    log.append_at(5.0, 5, 50)
    assert log == [1.0, 2.0, 5.0]
    assert (log.epochs, log.updates) == ([3, 4, 5], [30, 40, 50])


def test_log_counters_of_log_entries_from_start():
    log = LogEntries([1.0, 2.0, 3.0], epochs=[1, 2, 3], updates=[4, 8, 12])
    assert log_counters(log) == ([1, 2, 3], [4, 8, 12])
    assert log_counters(log, 2) == ([3], [12])


def test_log_counters_of_a_plain_list_count_positions_from_start():
    assert log_counters([5.0, 6.0, 7.0]) == ([0, 1, 2], [None, None, None])
    assert log_counters([5.0, 6.0, 7.0], 1) == ([1, 2], [None, None])
    # a start past the end reads nothing (not one entry, not a negative count)
    assert log_counters([5.0, 6.0, 7.0], 3) == ([], [])
    assert log_counters([5.0, 6.0], 5) == ([], [])


def test_log_counters_of_log_entries_out_of_step_count_positions():
    # a value appended with list.append has no counters: the stored ones no
    # longer say which entry is which, so the positions are used
    log = LogEntries([1.0], epochs=[4], updates=[9])
    log.append(2.0)
    assert log_counters(log) == ([0, 1], [None, None])


def test_add_log_appends_to_a_plain_list_as_it_is():
    # logs made by hand (or by Brainstorm 0.5) hold plain lists
    logs = OrderedDict(loss=[1.0])
    add_log(logs, 'loss', 2.0, 3, 30)
    assert logs['loss'] == [1.0, 2.0]
    assert type(logs['loss']) is list


def test_add_log_gives_nested_values_the_counters():
    logs = OrderedDict()
    add_log(logs, 'valid', {'acc': 0.5, 'err': {'top1': 0.25}}, 2, 20)
    add_log(logs, 'valid', {'acc': 0.75, 'err': {'top1': 0.125}}, 3, 30)
    assert logs['valid']['acc'] == [0.5, 0.75]
    assert logs['valid']['acc'].epochs == [2, 3]
    assert logs['valid']['err']['top1'].updates == [20, 30]


def test_trainer_logs_each_figure_at_its_epoch_and_update():
    net = xor_net()
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    data = bs.data_iterators.Minibatches(2, shuffle=False, **xor_data())
    trainer.train(net, data)
    loss = trainer.logs['rolling_training']['total_loss']
    assert len(loss) == 2
    assert loss.epochs == [1, 2]
    assert loss.updates == [2, 4]


# ---------------------------------------------------- iterator checks ---


class _ShapesOnly:
    """Has the data shapes of the XOR net, but cannot be called."""

    data_shapes = {'default': (1, 4, 2), 'targets': (1, 4, 1)}


def test_check_data_iterators_refuses_what_cannot_be_called():
    net = xor_net()
    with pytest.raises(IteratorValidationError, match="'train' must be a DataIterator"):
        check_data_iterators(net, {'train': _ShapesOnly()})


def test_check_data_iterators_refuses_a_callable_without_data_shapes():
    net = xor_net()

    def batches(handler=None):
        yield from _batches(4)

    with pytest.raises(IteratorValidationError, match="'train' must be a DataIterator"):
        check_data_iterators(net, {'train': batches})


def test_check_data_iterators_refuses_extra_and_missing_names():
    net = xor_net()
    data = xor_data()
    extra = bs.data_iterators.Undivided(extra=np.zeros((1, 4, 1)), **data)
    with pytest.raises(IteratorValidationError, match="'x' provides data"):
        check_data_iterators(net, {'x': extra})
    check_data_iterators(net, {'x': bs.data_iterators.Undivided(**data)})


def test_trainer_refuses_a_validation_iterator_with_other_names():
    net = xor_net()
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    good = bs.data_iterators.Undivided(**xor_data())
    wrong = bs.data_iterators.Undivided(default=xor_data()['default'])
    with pytest.raises(IteratorValidationError, match="'valid' provides data"):
        trainer.train(net, good, valid=wrong)
    assert trainer.current_epoch_nr == 0


# -------------------------------------------------------------- memory ---


def test_memory_stays_the_same_across_batch_sizes():
    # a new batch size makes new views of the batch-sized memory, but the
    # parameters stay where they are: a stepper keeps its state
    net = xor_net()
    before = memory_of(net)
    for batch in (1, 4, 2):
        data = {k: v[:, :batch] for k, v in xor_data().items()}
        net.provide_external_data(data)
        net.forward_pass()
        assert same_memory(memory_of(net), before)
    assert before[0] is net.handler


def test_memory_changes_with_the_handler():
    net = xor_net()
    before = memory_of(net)
    net.set_handler(NumpyHandler(np.float64))
    assert not same_memory(memory_of(net), before)
    assert not same_memory(before, memory_of(net))


def test_same_memory_needs_both_the_handler_and_the_array():
    handler, other_handler = object(), object()
    array, other_array = np.zeros(3), np.zeros(3)
    assert same_memory((handler, array), (handler, array))
    assert not same_memory((handler, array), (other_handler, array))
    assert not same_memory((handler, array), (handler, other_array))
    assert not same_memory((handler, array), (array, handler))
    assert not same_memory(None, (handler, array))
    assert not same_memory((handler, array), None)
    assert not same_memory(None, None)


def test_a_stepper_follows_memory_moved_onto_the_same_handler():
    # the buffer manager moving the memory onto the handler it already has
    # is still a move (the handler alone does not say where the parameters
    # are): else the stepper updates the old array and the network never
    # learns
    net = xor_net()
    stepper = bs.training.SgdStepper(0.5)
    stepper.start(net)
    before = memory_of(net)
    net.buffer_manager.set_handler(net.handler)
    assert not same_memory(memory_of(net), before)
    old = net.handler.get_numpy_copy(net.buffer.parameters)
    net.provide_external_data(xor_data())
    stepper.run()
    new = net.handler.get_numpy_copy(net.buffer.parameters)
    assert not np.allclose(new, old)
