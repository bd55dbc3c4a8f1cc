"""Rank 1 leaves data-parallel training early, in one of several ways;
run under ``mpiexec -n 2`` by tests/training/test_mpi_faults.py.

    python -m tests.training.mpi_fault_worker SCENARIO OUTDIR

Just before leaving, rank 1 writes the time and its process id to
``OUTDIR/fault.txt``.
"""

from __future__ import annotations

import os
import signal
import sys
import time

import brainstorm as bs
from brainstorm.data_iterators import DataIterator, Minibatches, Shard
from brainstorm.hooks import Hook, StopAfterEpoch
from brainstorm.parallel import watchdog_of
from brainstorm.training import DataParallel, Trainer
from brainstorm.training.steppers import MomentumStepper
from tests.training.mpi_worker import blob_net
from tests.training.nets import blob_data

SCENARIOS = (
    'return',
    'exit',
    'caught',
    'uncaught',
    'short',
    'killed',
    'stuck',
    'before_train',
    'before_train_exit',
    'finished',
)
FAULT_UPDATE = 6  # in epoch 2 (4 updates per epoch)


def mark(outdir):
    with open(os.path.join(outdir, 'fault.txt'), 'w') as f:
        f.write(f'{time.time()!r} {os.getpid()}')


class Fault(Hook):
    """Rank 1 leaves at one update: sys.exit(0), an exception, SIGKILL,
    or it hangs."""

    def __init__(self, kind, outdir):
        super().__init__('Fault', 'update', 1)
        self.kind = kind
        self.outdir = outdir

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if stepper.rank != 1 or update_nr != FAULT_UPDATE:
            return
        mark(self.outdir)
        if self.kind == 'exit':
            sys.exit(0)
        if self.kind == 'killed':
            os.kill(os.getpid(), signal.SIGKILL)
        if self.kind == 'stuck':
            time.sleep(120)  # hangs without a word: the timeout must act
        raise RuntimeError('deliberate failure on rank 1')


class ShortOnRank1(DataIterator):
    """Declares the wrapped length but yields one batch less on rank 1 in
    epoch 2."""

    def __init__(self, iterator, rank, outdir):
        super().__init__(iterator.data_shapes, iterator.length)
        self.iter = iterator
        self.rank = rank
        self.outdir = outdir
        self.passes = 0

    def __call__(self, handler=None):
        self.passes += 1
        for i, batch in enumerate(self.iter(handler=handler)):
            if self.rank == 1 and self.passes == 2 and i == self.length - 1:
                mark(self.outdir)
                return
            yield batch


def finished(rank, data, outdir):
    from mpi4py import MPI

    # both ranks train one epoch and end normally; rank 1's process
    # ends first, while rank 0 works on without collective calls for
    # longer than a tiny time limit
    trainer = Trainer(DataParallel(MomentumStepper(0.1)), verbose=False)
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(blob_net(seed=1), Shard(Minibatches(8, shuffle=False, **data)))
    if rank == 0:
        watchdog = watchdog_of(MPI.COMM_WORLD, 0.2)
        deadline = time.monotonic() + 60
        while watchdog.gone is None and time.monotonic() < deadline:
            time.sleep(0.05)
        time.sleep(1.0)  # 20 watchdog rounds, 5 times the limit
        with open(os.path.join(outdir, 'finished.txt'), 'w') as f:
            f.write(repr(watchdog.gone))
    return


def before_train(scenario, rank, data, outdir):
    # the stepper exists (default timeout: 600 s), then rank 1's
    # iterator refuses its data; rank 0 goes on into the parameter
    # broadcast of DataParallel.start
    trainer = Trainer(DataParallel(MomentumStepper(0.1)), verbose=False)
    if rank == 1:
        data['default'][0, 3, 1] = float('nan')
        mark(outdir)
    try:
        train = Shard(Minibatches(8, shuffle=False, **data))
    except ValueError as err:
        if scenario == 'before_train_exit':
            # the script handles the error and ends its process
            print(f'rank {rank}: {err}', flush=True)
            sys.exit(3)
        raise
    trainer.train(blob_net(seed=1), train)
    return


def main(scenario: str, outdir: str) -> None:
    from mpi4py import MPI

    rank = MPI.COMM_WORLD.Get_rank()
    bs.global_rnd.set_seed(1)
    data = blob_data(32, seed=1)
    if scenario == 'finished':
        return finished(rank, data, outdir)
    if scenario.startswith('before_train'):
        return before_train(scenario, rank, data, outdir)
    trainer = Trainer(DataParallel(MomentumStepper(0.1), timeout=8), verbose=False)
    if scenario in ('exit', 'caught', 'uncaught', 'killed', 'stuck'):
        trainer.add_hook(Fault(scenario, outdir))
    trainer.add_hook(StopAfterEpoch(1 if scenario == 'return' else 1000))
    train = Shard(Minibatches(8, shuffle=False, **data))
    if scenario == 'short':
        train = ShortOnRank1(train, rank, outdir)
    net = blob_net(seed=1)
    if scenario == 'caught':
        try:
            trainer.train(net, train)
        except RuntimeError as err:
            print(f'rank {rank} caught {err!r} and goes on', flush=True)
            time.sleep(60)  # other work; the watchdog must end this job
        return
    trainer.train(net, train)
    if scenario == 'return':
        # both ranks trained one epoch; rank 1's script returns while
        # rank 0 trains on
        if rank == 1:
            mark(outdir)
            return
        trainer.hooks['StopAfterEpoch'].max_epochs = 1000
        trainer.train(net, train)


if __name__ == '__main__':
    main(*sys.argv[1:])
