"""training.utils: logs, iterator checks and argument checks of training."""

from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.parallel import MpiProcesses, SingleProcess
from brainstorm.training.finite_check import FiniteCheck
from brainstorm.training.trainer import _FiniteCheck
from brainstorm.training.utils import (
    LogEntries,
    add_log,
    check_data_iterators,
    check_lengths_agree,
    format_result,
)
from brainstorm.utils import IteratorValidationError, TrainingValidationError


class LengthsComm:
    def __init__(self, lengths):
        self.lengths = lengths

    def Get_rank(self):
        return 0

    def Get_size(self):
        return len(self.lengths)

    def allgather(self, obj):
        return [obj] + list(self.lengths[1:])


class Sized:
    def __init__(self, length):
        self.length = length


def test_add_log_nests_dicts_and_keeps_counters():
    logs = OrderedDict()
    add_log(logs, 'loss', 1.5, 1, 10)
    add_log(logs, 'monitor', {'a': 1, 'b': {'c': 2}}, 1, 10)
    add_log(logs, 'loss', 1.0, 2, 20)
    assert isinstance(logs['loss'], LogEntries)
    assert logs['loss'] == [1.5, 1.0]
    assert logs['loss'].epochs == [1, 2]
    assert logs['loss'].updates == [10, 20]
    assert logs['monitor']['b']['c'] == [2]


def test_add_log_refuses_to_mix_lists_and_dicts():
    logs = OrderedDict()
    add_log(logs, 'x', 1.0)
    with pytest.raises(TrainingValidationError, match="dict under 'x'"):
        add_log(logs, 'x', {'a': 1})
    add_log(logs, 'y', {'a': 1})
    with pytest.raises(TrainingValidationError, match="value under 'y'"):
        add_log(logs, 'y', 2.0)


def test_format_result():
    assert format_result({'a': 0.123456789, 'b': {'c': 3}}) == [
        'a: 0.123457',
        'b.c: 3',
    ]


def test_check_lengths_agree():
    check_lengths_agree(SingleProcess(), Sized(5))
    check_lengths_agree(MpiProcesses(LengthsComm([5, 5])), Sized(5))
    with pytest.raises(IteratorValidationError, match=r'lengths \[5, 4\]'):
        check_lengths_agree(MpiProcesses(LengthsComm([5, 4])), Sized(5))
    # no length on several ranks: a rank yielding fewer batches would leave
    # the others waiting in a collective (FromGenerator without length)
    check_lengths_agree(SingleProcess(), Sized(None))
    with pytest.raises(IteratorValidationError, match='need a length'):
        check_lengths_agree(MpiProcesses(LengthsComm([None, None])), Sized(None))


def test_check_data_iterators_names_the_iterator():
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> out)
    good = bs.data_iterators.Undivided(
        default=np.zeros((1, 2, 2)), targets=np.zeros((1, 2, 1))
    )
    check_data_iterators(net, {'train': good})
    wrong = bs.data_iterators.Undivided(default=np.zeros((1, 2, 2)))
    with pytest.raises(IteratorValidationError, match="'valid' provides"):
        check_data_iterators(net, {'train': good, 'valid': wrong})
    with pytest.raises(IteratorValidationError, match='must be a DataIterator'):
        check_data_iterators(net, {'x': [1, 2]})


def test_finite_check_keeps_its_old_name_in_the_trainer():
    assert _FiniteCheck is FiniteCheck


def test_a_trainer_given_arrays_says_so_in_one_line():
    # the message held the repr of the whole data: 212 lines for 200 samples
    inp, out = bs.tools.get_in_out_layers('classification', 784, 10)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.0)
    trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
    data = {'default': np.zeros((1, 200, 784)), 'targets': np.zeros((1, 200, 1))}
    with pytest.raises(IteratorValidationError) as info:
        trainer.train(net, data)
    message = str(info.value)
    assert '\n' not in message and len(message) < 300, message
    assert "a dict with the keys ['default', 'targets']" in message
    assert 'Minibatches' in message
