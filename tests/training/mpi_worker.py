"""Runs under ``mpiexec -n 2`` for tests/training/test_data_parallel.py.

Usage: ``python -m tests.training.mpi_worker SCENARIO OUTDIR``. Each rank
writes its results to ``OUTDIR/rank<r>.npz`` (and ``.json`` for logs).
The same functions run in the test process without MPI for the
single-process reference.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np

import brainstorm as bs
from brainstorm.data_iterators import AddGaussianNoise, Minibatches, Shard
from brainstorm.hooks import (
    Hook,
    ModifyStepperAttribute,
    MonitorLoss,
    MonitorScores,
    SaveCheckpoint,
    StopAfterEpoch,
)
from brainstorm.scorers import Accuracy
from brainstorm.training import DataParallel, Trainer
from brainstorm.training.schedules import Exponential
from brainstorm.training.steppers import (
    AdamStepper,
    MomentumStepper,
    MultiStepper,
    SgdStepper,
)
from brainstorm.value_modifiers import ClipValues, ConstrainL2Norm
from tests.training.nets import (
    StopAtUpdate,
    batchnorm_net,
    blob_data,
    dropout_net,
)

# 21 training samples in batches of 6: the last global batch has 3
# samples, split 1 / 2 over two ranks (unequal local batch sizes)
TRAIN_SIZE, BATCH_SIZE = 21, 6
VALID_SIZE, VALID_BATCH_SIZE = 13, 5


def blob_net(seed):
    """Input(4) -> FC 'Hid' (6, tanh) -> FC 'Output' (3) -> softmax CE."""
    from brainstorm.handlers import NumpyHandler
    from brainstorm.initializers import Gaussian
    from brainstorm.layers import FullyConnected
    from brainstorm.structure.network import Network
    from brainstorm.tools import get_in_out_layers

    inp, proj = get_in_out_layers('classification', 4, 3)
    net = Network.from_layer(
        inp >> FullyConnected(6, activation='tanh', name='Hid') >> proj
    )
    net.set_handler(NumpyHandler(np.float64, seed=seed))
    net.initialize(Gaussian(0.5), seed=seed)
    net.output_name = 'Output.outputs.predictions'
    return net


def blob_split():
    """Training and validation data from the same three clusters."""
    data = blob_data(TRAIN_SIZE + VALID_SIZE, seed=1)
    return (
        {name: d[:, :TRAIN_SIZE] for name, d in data.items()},
        {name: d[:, TRAIN_SIZE:] for name, d in data.items()},
    )


def equivalence_run(parallel: bool, rank: int = 0, epochs: int = 3):
    """Momentum + Adam per layer with a learning-rate schedule, training
    and validation figures; returns ``(parameters, logs)``."""
    bs.global_rnd.set_seed(42)
    train, valid = blob_split()
    train_iter = Minibatches(BATCH_SIZE, shuffle=True, **train)
    valid_iter = Minibatches(VALID_BATCH_SIZE, shuffle=False, **valid)
    # rank 1 starts from other parameters: DataParallel broadcasts rank 0's
    net = blob_net(seed=3 + rank)
    stepper = MultiStepper(
        {'Hid': AdamStepper(0.02), 'default': MomentumStepper(0.3, 0.5)}
    )
    if parallel:
        train_iter, valid_iter = Shard(train_iter), Shard(valid_iter)
        stepper = DataParallel(stepper)
    trainer = Trainer(stepper, verbose=False)
    trainer.train_scorers = [Accuracy()]
    trainer.add_hook(MonitorScores('valid', [Accuracy()], name='validation'))
    trainer.add_hook(
        ModifyStepperAttribute(Exponential(0.3, 0.8), 'steppers.default.learning_rate')
    )
    trainer.add_hook(StopAfterEpoch(epochs))
    trainer.train(net, train_iter, valid=valid_iter)
    return net.get('parameters'), trainer.logs


def batchnorm_run(parallel: bool, learning_rate: float = 0.1):
    """A network with running statistics (BatchNorm's mu and sigma).

    With ``learning_rate=0`` the parameters stay fixed, so the running mean
    depends only on the global batches' means (not on which rank
    normalised what) and two ranks must reproduce one process exactly."""
    bs.global_rnd.set_seed(5)
    rnd = np.random.RandomState(0)
    data = {
        'default': rnd.randn(1, TRAIN_SIZE, 3) * 2 + 1,
        'targets': rnd.randint(0, 2, (1, TRAIN_SIZE, 1)),
    }
    train_iter = Minibatches(BATCH_SIZE, shuffle=True, **data)
    stepper = MomentumStepper(learning_rate, 0.5)
    if parallel:
        train_iter, stepper = Shard(train_iter), DataParallel(stepper)
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    net = batchnorm_net(seed=2)
    trainer.train(net, train_iter)
    return net.get('parameters'), net.get('BN.parameters.mu')


def modifier_run(parallel: bool):
    """Plain SGD with nonlinear gradient modifiers (clipping, a norm bound),
    which must act on the global batch's gradient."""
    bs.global_rnd.set_seed(11)
    train, _ = blob_split()
    train_iter = Minibatches(BATCH_SIZE, shuffle=True, **train)
    stepper = SgdStepper(0.5)
    if parallel:
        train_iter, stepper = Shard(train_iter), DataParallel(stepper)
    net = blob_net(seed=4)
    net.set_gradient_modifiers(
        Hid=ClipValues(-0.02, 0.02), Output=ConstrainL2Norm(0.05)
    )
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(net, train_iter)
    return net.get('parameters')


def unseeded_run(parallel: bool, shuffle, rank: int = 0):
    """Each rank seeds ``global_rnd`` differently, as processes that never
    call ``set_seed`` are seeded (from the operating system): the ranks
    must still walk through rank 0's global batches."""
    bs.global_rnd.set_seed(100 + rank)
    train, _ = blob_split()
    train_iter = Minibatches(BATCH_SIZE, shuffle=shuffle, **train)
    stepper = SgdStepper(0.3)
    if parallel:
        train_iter, stepper = Shard(train_iter), DataParallel(stepper)
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    net = blob_net(seed=5)
    trainer.train(net, train_iter)
    return net.get('parameters')


def unseeded_evaluation(parallel: bool, rank: int = 0):
    """Trainer.evaluate and tools.evaluate over sample-shuffled batches of
    samples of distinct scales, each rank seeded differently: the figures
    must be one process's (seeded as rank 0)."""
    from brainstorm.hooks import MonitorLoss
    from brainstorm.tools import evaluate

    bs.global_rnd.set_seed(100 + rank)
    rnd = np.random.RandomState(0)
    n = 12
    data = {
        'default': rnd.randn(1, n, 4) * np.arange(n)[None, :, None],
        'targets': rnd.randint(0, 3, (1, n, 1)),
    }
    valid = Minibatches(4, shuffle='samples', **data)
    other = Minibatches(4, shuffle='samples', **data)
    stepper = SgdStepper(0.1)
    comm = None
    if parallel:
        from mpi4py import MPI

        valid, other, stepper = Shard(valid), Shard(other), DataParallel(stepper)
        comm = MPI.COMM_WORLD
    net = blob_net(seed=4)
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    results = trainer.evaluate(net, valid=valid)
    figures = evaluate(net, other, comm=comm)
    return np.array([results['validation']['total_loss'][-1], figures['total_loss']])


def checkpoint_iterators():
    """Shuffled batches, split over the ranks, with noise on each rank's
    part."""
    bs.global_rnd.set_seed(7)
    train, valid = blob_split()
    base = Minibatches(BATCH_SIZE, shuffle=True, **train)
    valid = Minibatches(VALID_BATCH_SIZE, shuffle=True, **valid)
    return (AddGaussianNoise(Shard(base), {'default': 0.3}), {'valid': Shard(valid)})


def checkpoint_run(epochs, filename=None, stop_at=None):
    """Dropout, shuffling, noise and stateful steppers on every rank."""
    bs.global_rnd.set_seed(123)
    net = dropout_net(seed=7, dtype=np.float64)
    stepper = DataParallel(
        MultiStepper({'Hid1': AdamStepper(0.01), 'default': MomentumStepper(0.1, 0.9)})
    )
    trainer = Trainer(stepper, verbose=False)
    trainer.train_scorers = [Accuracy()]
    trainer.add_hook(MonitorScores('valid', [Accuracy()], name='validation'))
    if filename is not None:
        trainer.add_hook(SaveCheckpoint(filename, timescale='update', interval=stop_at))
        trainer.add_hook(StopAtUpdate(stop_at))
    trainer.add_hook(StopAfterEpoch(epochs))
    train_iter, named = checkpoint_iterators()
    trainer.train(net, train_iter, **named)
    return trainer, net


class FailOnRank(Hook):
    """Raises on one rank at one update (the other ranks go on into the
    next Allreduce and would wait there forever)."""

    def __init__(self, rank, update):
        super().__init__('FailOnRank', 'update', 1)
        self.rank = rank
        self.update = update

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if stepper.rank == self.rank and update_nr == self.update:
            raise RuntimeError(f'deliberate failure on rank {self.rank}')


class StopOnRank(Hook):
    """Asks to stop on one rank only, at one update."""

    def __init__(self, rank, update):
        super().__init__('StopOnRank', 'update', 1, verbose=True)
        self.rank = rank
        self.update = update

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if stepper.rank == self.rank and update_nr == self.update:
            self.message(f'rank {self.rank} asks to stop')
            raise StopIteration


def stop_run(rank: int):
    """A verbose run in which only rank 1 asks to stop (at update 5, in
    the second epoch); returns the trainer."""
    bs.global_rnd.set_seed(1)
    train, valid = blob_split()
    trainer = Trainer(DataParallel(MomentumStepper(0.1)), verbose=True)
    trainer.add_hook(StopOnRank(1, 5))
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    trainer.add_hook(StopAfterEpoch(1000))
    trainer.train(
        blob_net(seed=1),
        Shard(Minibatches(BATCH_SIZE, shuffle=False, **train)),
        valid=Shard(Minibatches(VALID_BATCH_SIZE, **valid)),
    )
    return trainer


def failing_run(kind: str, rank: int):
    bs.global_rnd.set_seed(1)
    data = blob_data(TRAIN_SIZE, seed=1)
    if kind == 'nan' and rank == 1:
        data['default'] = data['default'].copy()
        data['default'][0, 10:14] = np.nan
    # check_finite=False: the NaN data must reach DataParallel's own check
    # of the gradients (the trainer would refuse the batch first)
    trainer = Trainer(
        DataParallel(MomentumStepper(0.1)), verbose=False, check_finite=kind != 'nan'
    )
    if kind == 'exception':
        trainer.add_hook(FailOnRank(1, 2))
    trainer.add_hook(StopAfterEpoch(1000))
    trainer.train(
        blob_net(seed=1),
        Shard(Minibatches(BATCH_SIZE, shuffle=False, check_finite=False, **data)),
    )


def random_run(epochs=2):
    """Dropout on every rank, noise on each rank's part of the shuffled
    batches; returns the results compared over ranks and runs."""
    bs.global_rnd.set_seed(11)
    data = blob_data(18, seed=2)
    noisy = AddGaussianNoise(
        Shard(Minibatches(6, shuffle=True, **data)), {'default': 0.3}
    )
    net = dropout_net(seed=7, dtype=np.float64)
    stepper = DataParallel(MomentumStepper(0.1, 0.5))
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(epochs))
    trainer.train(net, noisy)
    return {
        'parameters': net.get('parameters'),
        'handler_seed': np.array([net.handler.rnd.get_seed()]),
        # what this rank's handler (dropout masks) and noise draw next
        'handler_draws': net.handler.rnd.random_sample(8),
        'noise_draws': noisy.rnd.random_sample(8),
    }


class CountingReads:
    """An h5py dataset that counts the samples read from it (its axis 1)."""

    def __init__(self, dataset):
        self.dataset = dataset
        self.shape, self.dtype, self.ndim = dataset.shape, dataset.dtype, dataset.ndim
        self.samples_read = 0

    def __getitem__(self, index):
        block = self.dataset[index]
        self.samples_read += block.shape[1]
        return block


def file_run(path: str | None, parallel: bool, epochs: int = 3):
    """Sample-shuffled batches read from the HDF5 file ``path`` (or, for
    ``path=None``, from the same arrays in memory); returns the parameters
    and the number of samples read from the file."""
    import h5py

    bs.global_rnd.set_seed(13)
    if path is None:
        train, read = blob_split()[0], None
    else:
        f = h5py.File(path, 'r')
        read = {name: CountingReads(f[name]) for name in ('default', 'targets')}
        train = read
    train_iter = Minibatches(BATCH_SIZE, shuffle='samples', **train)
    net = blob_net(seed=3)
    stepper = MomentumStepper(0.3, 0.5)
    if parallel:
        train_iter, stepper = Shard(train_iter), DataParallel(stepper)
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(epochs))
    trainer.train(net, train_iter)
    samples_read = 0 if read is None else read['default'].samples_read
    return net.get('parameters'), samples_read


def write_blob_file(path: str) -> None:
    """The training data of :func:`blob_split` as an HDF5 file."""
    import h5py

    with h5py.File(path, 'w') as f:
        for name, values in blob_split()[0].items():
            f[name] = values


# ------------------------------------------ the second round of MPI fixes ---


def _wrapped(iterator, stepper, parallel):
    return (Shard(iterator), DataParallel(stepper)) if parallel else (iterator, stepper)


def forward_statistics_run(parallel: bool):
    """BatchNorm's running statistics re-estimated by a ForwardStepper."""
    from brainstorm.handlers import NumpyHandler
    from brainstorm.layers import BatchNorm
    from brainstorm.training.steppers import ForwardStepper

    bs.global_rnd.set_seed(1)
    rnd = np.random.RandomState(0)
    data = {
        'default': rnd.randn(1, 12, 2) + np.arange(12)[None, :, None],
        'targets': rnd.randint(0, 2, (1, 12, 1)),
    }
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> BatchNorm(name='BN') >> out)
    net.set_handler(NumpyHandler(np.float64, seed=1))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    iterator, stepper = _wrapped(
        Minibatches(6, shuffle=False, **data),
        ForwardStepper(use_training_pass=True),
        parallel,
    )
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(net, iterator)
    return net.get('BN.parameters.mu')


def clockwork_data():
    """10 sequences of 3 time steps for ``clockwork_net``."""
    rnd = np.random.RandomState(0)
    return {'default': rnd.randn(10, 3, 2), 'targets': rnd.randn(10, 3, 1)}


def clockwork_net():
    """A Clockwork layer of periods [1, 2, 4, 7] (a constant 'timing')."""
    from brainstorm.handlers import NumpyHandler
    from brainstorm.layers import Clockwork

    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> Clockwork(4, name='Clockwork') >> out)
    net.set_handler(NumpyHandler(np.float64, seed=1))
    net.initialize(
        {
            'Clockwork': {'timing': [1, 2, 4, 7]},
            'default': bs.initializers.Gaussian(0.5),
        },
        seed=1,
    )
    return net


def clockwork_timing_run(parallel: bool):
    """A Clockwork layer's timing (a constant) after a step of 3 samples."""
    bs.global_rnd.set_seed(1)
    data = clockwork_data()
    net = clockwork_net()
    iterator, stepper = _wrapped(
        Minibatches(3, shuffle=False, **data), SgdStepper(0.01), parallel
    )
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(net, iterator)
    return net.get('Clockwork.parameters.timing')


def empty_batch_run(parallel: bool):
    """An epoch of 3 global batches, the middle one without samples."""
    from brainstorm.data_iterators import FromGenerator
    from brainstorm.handlers import NumpyHandler

    bs.global_rnd.set_seed(1)
    rnd = np.random.RandomState(0)
    x, y = rnd.randn(1, 8, 2), rnd.randn(1, 8, 1)

    def batches():
        yield {'default': x[:, :4], 'targets': y[:, :4]}
        yield {'default': x[:, :0], 'targets': y[:, :0]}
        yield {'default': x[:, 4:], 'targets': y[:, 4:]}

    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float64, seed=1))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    iterator, stepper = _wrapped(
        FromGenerator(batches, length=3), MomentumStepper(0.1), parallel
    )
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(net, iterator)
    return net.get('parameters')


def new_handler_run():
    """Dropout draws after a set_handler between two train calls, and a
    BatchNorm network moved to float32 during training."""
    from brainstorm.handlers import NumpyHandler

    bs.global_rnd.set_seed(1)
    rnd = np.random.RandomState(1)
    data = {'default': rnd.randn(1, 24, 4), 'targets': rnd.randint(0, 3, (1, 24, 1))}
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> bs.layers.Dropout(0.5) >> bs.layers.FullyConnected(6) >> out
    )
    net.set_handler(NumpyHandler(np.float64, seed=5))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    trainer = Trainer(DataParallel(MomentumStepper(0.1)), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    iterator = Shard(Minibatches(6, **data))
    trainer.train(net, iterator)
    net.set_handler(NumpyHandler(np.float32, seed=5))
    trainer.hooks['StopAfterEpoch'].max_epochs = 2
    trainer.train(net, iterator)
    draws = net.handler.rnd.random_sample(3)

    class ToFloat32(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if epoch_nr == 1:
                net.set_handler(NumpyHandler(np.float32, seed=5))

    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    bn = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(6) >> bs.layers.BatchNorm(name='BN') >> out
    )
    bn.set_handler(NumpyHandler(np.float64, seed=5))
    bn.initialize(bs.initializers.Gaussian(0.5), seed=1)
    trainer = Trainer(DataParallel(MomentumStepper(0.1)), verbose=False)
    trainer.add_hook(ToFloat32())
    trainer.add_hook(StopAfterEpoch(3))
    trainer.train(bn, Shard(Minibatches(6, **data)))
    return draws, bn.get('BN.parameters.mu')


def early_failure_run(rank: int):
    """Rank 1 gives a wrongly named iterator and catches the error."""
    import time

    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.1)
    names = ('default', 'targets') if rank == 0 else ('default', 'target')
    data = {names[0]: np.ones((1, 4, 2)), names[1]: np.zeros((1, 4, 1))}
    trainer = Trainer(DataParallel(SgdStepper(0.1), timeout=120.0), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    try:
        trainer.train(net, Shard(Minibatches(2, **data)))
    except Exception:
        time.sleep(60)  # caught: the process lives on; rank 0 must not wait
        raise


def blank_root_run(rank: int):
    """Rank 0 forgot net.initialize(); rank 1 initialised its network."""
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> out)
    if rank:
        net.initialize(0.1)
    data = {'default': np.ones((1, 4, 2)), 'targets': np.zeros((1, 4, 1))}
    trainer = Trainer(DataParallel(SgdStepper(0.1), timeout=120.0), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(net, Shard(Minibatches(2, **data)))


def main(scenario: str, outdir: str) -> None:
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    results = {}
    logs = {}
    if scenario == 'equivalence':
        results['parameters'], logs = equivalence_run(True, rank)
        results['batchnorm'], results['mu'] = batchnorm_run(True)
        _, results['mu_frozen'] = batchnorm_run(True, learning_rate=0.0)
        results['modifiers'] = modifier_run(True)
        for shuffle in (True, 'samples'):
            results[f'unseeded_{shuffle}'] = unseeded_run(True, shuffle, rank)
        results['unseeded_evaluation'] = unseeded_evaluation(True, rank)
    elif scenario == 'checkpoint':
        filename = os.path.join(outdir, 'run.ckpt')
        _, net = checkpoint_run(3)
        results['full'] = net.get('parameters')
        checkpoint_run(3, filename, stop_at=6)
        resumed, net = Trainer.from_checkpoint(filename)
        del resumed.hooks['StopAtUpdate']
        train_iter, named = checkpoint_iterators()
        resumed.train(net, train_iter, **named)
        results['resumed'] = net.get('parameters')
        logs = resumed.logs
    elif scenario == 'stop':
        trainer = stop_run(rank)
        results['counts'] = np.array(
            [trainer.current_epoch_nr, trainer.current_update_nr]
        )
        logs = trainer.logs
    elif scenario == 'random':
        results = random_run()
    elif scenario == 'file':
        parameters, samples_read = file_run(
            os.path.join(outdir, 'train.h5'), parallel=True
        )
        results = {'parameters': parameters, 'samples_read': np.array(samples_read)}
    elif scenario == 'second_round':
        results['forward_mu'] = forward_statistics_run(True)
        results['timing'] = clockwork_timing_run(True)
        results['empty'] = empty_batch_run(True)
        results['draws'], results['bn_mu'] = new_handler_run()
    elif scenario == 'early_failure':
        early_failure_run(rank)
    elif scenario == 'blank_root':
        blank_root_run(rank)
    elif scenario in ('exception', 'nan'):
        failing_run(scenario, rank)
    else:
        raise ValueError(f'unknown scenario {scenario!r}')
    np.savez(os.path.join(outdir, f'rank{rank}.npz'), **results)
    with open(os.path.join(outdir, f'rank{rank}.json'), 'w') as f:
        json.dump(bs.get_description(logs), f)


if __name__ == '__main__':
    main(*sys.argv[1:])
