"""More rules of the Trainer's loop that its mutation run left unstated.

The data-parallel ones run the whole ``Trainer.train`` in this process as
one rank of two, over a stand-in communicator whose other rank holds the
same values (see ``PartnerComm``).
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import AddGaussianNoise, Minibatches, Shard
from brainstorm.hooks import Hook, StopAfterEpoch
from brainstorm.structure.prediction import UninitializedNetworkError
from brainstorm.training import DataParallel, Trainer
from brainstorm.training.steppers import SgdStepper
from brainstorm.utils import IteratorValidationError
from tests.training.nets import Recorder, xor_data, xor_net
from tests.training.test_resume_other_iterator import X, Y, _net, _StopAtUpdate


class PartnerComm:
    """Rank ``rank`` of 2, where the other rank holds the same values.

    ``root_parameters``: what the first ``Bcast`` (the parameters rank 0
    gives every rank in ``DataParallel.start``) delivers on rank 1.
    ``other_length``: the length the other rank's training iterator
    declares, where this rank's is ``length`` (any gathered value equal to
    ``length`` is taken for it: give a length no parameter count equals).
    """

    def __init__(self, rank, root_parameters=None, length=None, other_length=None):
        self.rank = rank
        self.root_parameters = root_parameters
        self.length = length
        self.other_length = other_length

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 2

    def Bcast(self, values, root=0):
        assert root == 0
        if self.rank and self.root_parameters is not None:
            values[...] = self.root_parameters
            self.root_parameters = None

    def bcast(self, obj, root=0):
        return obj

    def Allreduce(self, in_place, values):
        np.multiply(values, 2, out=values)

    def allreduce(self, value):
        return 2 * value

    def allgather(self, value):
        other = value
        if self.other_length is not None and value == self.length:
            other = self.other_length
        return [value, other] if self.rank == 0 else [other, value]

    def gather(self, value, root=0):
        return self.allgather(value) if self.rank == root else None

    def Barrier(self):
        pass


@pytest.fixture
def stand_in_mpi(monkeypatch):
    from brainstorm.training import data_parallel

    monkeypatch.setattr(data_parallel, 'abort_on_exception', lambda comm: None)
    monkeypatch.setattr(DataParallel, '_mpi_in_place', staticmethod(lambda: 'IN_PLACE'))


class Inputs(Hook):
    """Keeps a copy of the network's input at every update."""

    __undescribed__ = {'seen': None}

    def __init__(self, seen):
        super().__init__('inputs', 'update', 1)
        self.seen = seen

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if update_nr:
            self.seen.append(np.array(net.buffer.Input.outputs.default))


def test_each_rank_draws_its_own_augmentation_noise_in_train(stand_in_mpi):
    # the same script on both ranks: same seeds, each its half of the
    # global batch; the noise above the Shard must differ between ranks
    data = xor_data()
    noise = []
    for rank in (0, 1):
        bs.global_rnd.set_seed(7)
        iterator = AddGaussianNoise(
            Shard(Minibatches(4, shuffle=False, **data), rank=rank, size=2),
            {'default': 1.0},
        )
        seen: list = []
        stepper = DataParallel(SgdStepper(0.1), comm=PartnerComm(rank))
        trainer = Trainer(stepper, verbose=False)
        trainer.add_hook(Inputs(seen))
        trainer.add_hook(StopAfterEpoch(1))
        trainer.train(xor_net(seed=2), iterator)
        assert len(seen) == 1
        noise.append(seen[0] - data['default'][:, 2 * rank : 2 * rank + 2])
    assert noise[0].shape == noise[1].shape == (1, 2, 2)
    assert np.all(noise[0] != noise[1])


def test_ranks_declaring_other_epoch_lengths_are_refused_before_training(
    stand_in_mpi,
):
    # this rank's iterator declares 2 batches, the other rank's 3: the one
    # with fewer would leave the other waiting in a collective
    iterator = Minibatches(2, shuffle=False, **xor_data())
    assert iterator.length == 2
    calls: list = []
    comm = PartnerComm(0, length=2, other_length=3)
    trainer = Trainer(DataParallel(SgdStepper(0.1), comm=comm), verbose=False)
    trainer.add_hook(Recorder('rec', 'update', calls=calls))
    trainer.add_hook(StopAfterEpoch(1))
    with pytest.raises(IteratorValidationError, match=r'lengths \[2, 3\]'):
        trainer.train(xor_net(seed=2), iterator)
    assert calls == []
    assert trainer.current_update_nr == 0


def test_a_rank_above_0_may_train_a_network_it_never_initialised(stand_in_mpi):
    # DataParallel.start gives every rank rank 0's parameters: only after
    # that may the trainer refuse a network whose parameters were never set
    reference = xor_net(seed=2)

    def blank_net():
        inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
        net = bs.Network.from_layer(
            inp >> bs.layers.FullyConnected(8, activation='tanh', name='Hid') >> out
        )
        net.set_handler(bs.handlers.NumpyHandler(np.float64))
        return net

    with pytest.raises(UninitializedNetworkError):
        bs.Trainer(SgdStepper(0.1), verbose=False).train(
            blank_net(), Minibatches(4, **xor_data())
        )
    blank = blank_net()
    assert blank.buffer.parameters.size == reference.buffer.parameters.size
    assert not blank.get('parameters').any()
    comm = PartnerComm(1, root_parameters=reference.get('parameters'))
    trainer = Trainer(DataParallel(SgdStepper(0.1), comm=comm), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(blank, Minibatches(4, shuffle=False, **xor_data()))
    assert trainer.current_update_nr == 1
    assert blank.get('parameters').any()


def test_rank_0_must_have_initialised_the_network_it_gives_the_others(
    stand_in_mpi,
):
    # rank 0's parameters are what every rank trains from: all zeros there
    # are refused on rank 0 before they are broadcast, as in one process
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    blank = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(8, activation='tanh', name='Hid') >> out
    )
    blank.set_handler(bs.handlers.NumpyHandler(np.float64))
    broadcasts: list = []

    class Watched(PartnerComm):
        def Bcast(self, values, root=0):
            broadcasts.append(values.size)

    trainer = Trainer(DataParallel(SgdStepper(0.1), comm=Watched(0)), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    with pytest.raises(UninitializedNetworkError, match=r'net\.initialize\('):
        trainer.train(blank, Minibatches(4, shuffle=False, **xor_data()))
    assert broadcasts == []
    assert trainer.current_update_nr == 0
    assert not blank.get('parameters').any()


def _empty_batches():
    """Two batches, both without samples (e.g. a filter that kept none)."""
    batch = {'default': np.ones((1, 0, 2)), 'targets': np.zeros((1, 0, 1))}
    return bs.data_iterators.FromGenerator(lambda: iter([batch, batch]), length=2)


def test_an_epoch_without_samples_names_the_ranks_only_when_there_are_several(
    stand_in_mpi,
):
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    with pytest.raises(IteratorValidationError) as info:
        trainer.train(xor_net(seed=2), _empty_batches())
    message = str(info.value)
    assert 'yielded 2 batches in epoch 1, all without samples: there is' in message
    assert 'ranks' not in message

    comm = PartnerComm(0)
    trainer = Trainer(DataParallel(SgdStepper(0.1), comm=comm), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    with pytest.raises(IteratorValidationError) as info:
        trainer.train(xor_net(seed=2), _empty_batches())
    assert 'all without samples (on all 2 ranks): there is' in str(info.value)


def _noisy_shuffled():
    return AddGaussianNoise(
        Minibatches(5, shuffle=True, default=X, targets=Y), {'default': 0.5}
    )


def _monitored_trainer():
    trainer = bs.Trainer(SgdStepper(0.1), verbose=False)
    # a pass over the training iterator every 3 updates, in mid-epoch: it
    # draws a shuffle and noise from the training iterator's random states
    trainer.add_hook(
        bs.hooks.MonitorLoss(
            'training_data_iter', name='mon', timescale='update', interval=3
        )
    )
    return trainer


def test_a_resume_mid_epoch_continues_with_the_states_a_monitor_left(tmp_path):
    # 8 batches an epoch; the checkpoint is written at update 12 (epoch 2,
    # 4 batches done), after the monitor's pass at update 12
    path = str(tmp_path / 'run.ckpt')
    trainer = _monitored_trainer()
    trainer.add_hook(bs.hooks.SaveCheckpoint(path, timescale='update', interval=12))
    trainer.add_hook(StopAfterEpoch(3))
    trainer.add_hook(_StopAtUpdate(12))
    trainer.train(_net(), _noisy_shuffled())
    resumed, net = bs.Trainer.from_checkpoint(path)
    del resumed.hooks['StopAtUpdate']
    resumed.train(net, _noisy_shuffled())

    whole = _monitored_trainer()
    whole.add_hook(StopAfterEpoch(3))
    reference = _net()
    whole.train(reference, _noisy_shuffled())
    assert resumed.current_update_nr == whole.current_update_nr == 24
    assert resumed.logs['mon'] == whole.logs['mon']
    np.testing.assert_array_equal(net.get('parameters'), reference.get('parameters'))


def test_evaluate_calls_the_epoch_hooks_before_the_update_hooks():
    calls: list = []
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(Recorder('upd', 'update', calls=calls, value=1))
    trainer.add_hook(Recorder('ep', 'epoch', calls=calls, value=2))
    results = trainer.evaluate(xor_net(seed=2))
    assert calls == [('epoch', 0, 0), ('update', 0, 0)]
    assert dict(results) == {'upd': [1], 'ep': [2]}


def test_evaluate_refuses_iterators_for_other_inputs_before_any_hook_starts():
    calls: list = []

    class Starts(Recorder):
        def start(self, net, stepper, verbose, named_data_iters):
            super().start(net, stepper, verbose, named_data_iters)
            calls.append('start')

    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(Starts('rec', 'epoch', calls=calls))
    other = Minibatches(2, inputs=xor_data()['default'], targets=xor_data()['targets'])
    with pytest.raises(IteratorValidationError, match="'valid'") as info:
        trainer.evaluate(xor_net(seed=2), valid=other)
    assert "'inputs'" in str(info.value) and "'default'" in str(info.value)
    assert calls == []


class WritesItsOwnFile:
    """A hook that is no ``Hook`` subclass (the trainer takes any object
    that acts like one) and names its own output ``filename``."""

    __name__ = 'notes'
    timescale = 'epoch'
    interval = 1

    def __init__(self, filename):
        self.filename = filename

    def start(self, net, stepper, verbose, named_data_iters):
        pass

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        with open(self.filename, 'a') as f:
            f.write(f'epoch {epoch_nr}\n')


def test_a_hook_like_object_with_a_filename_gets_no_checkpoint_written_there(
    tmp_path,
):
    notes = tmp_path / 'notes.txt'
    trainer = Trainer(SgdStepper(0.1), verbose=False)
    trainer.add_hook(WritesItsOwnFile(str(notes)))
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(xor_net(seed=2), Minibatches(2, shuffle=False, **xor_data()))
    assert notes.read_text() == 'epoch 0\nepoch 1\nepoch 2\n'
    assert [p.name for p in tmp_path.iterdir()] == ['notes.txt']
