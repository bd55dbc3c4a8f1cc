"""brainstorm.parallel: the processes of a run, in one process or over MPI.

Without MPI: SingleProcess, processes_of for every kind of argument, and
MpiProcesses over a stand-in communicator that records its calls.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brainstorm import parallel
from brainstorm.parallel import (
    MpiProcesses,
    SingleProcess,
    communicator_of,
    is_root_process,
    processes_of,
)
from brainstorm.training import DataParallel
from brainstorm.training import data_parallel as data_parallel_module
from brainstorm.training.steppers import MomentumStepper, SgdStepper

ROOT = Path(__file__).resolve().parents[1]


class RecordingComm:
    """A communicator stand-in: rank ``rank`` of ``size``, in which every
    other rank holds ``other`` and every call is recorded."""

    def __init__(self, rank=1, size=3, other=10):
        self.rank, self.size, self.other = rank, size, other
        self.calls = []

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.size

    def allgather(self, obj):
        self.calls.append(('allgather', obj))
        return [obj if r == self.rank else self.other for r in range(self.size)]

    def gather(self, obj, root=0):
        self.calls.append(('gather', obj, root))
        if self.rank != root:
            return None
        return [obj if r == self.rank else self.other for r in range(self.size)]

    def allreduce(self, x):
        self.calls.append(('allreduce', x))
        return x + self.other * (self.size - 1)

    def bcast(self, obj, root=0):
        self.calls.append(('bcast', obj, root))
        return obj if self.rank == root else self.other

    def Barrier(self):
        self.calls.append(('Barrier',))


class SizeOneComm(RecordingComm):
    def __init__(self):
        super().__init__(rank=0, size=1)


# ---------------------------------------------------------- SingleProcess ----


def test_single_process_is_rank_0_of_1_without_communicator():
    single = SingleProcess()
    assert (single.rank, single.size, single.is_root, single.comm) == (
        0,
        1,
        True,
        None,
    )


def test_single_process_collectives_are_identities():
    single = SingleProcess()
    obj = {'a': [1, 2]}
    assert single.allgather(obj) == [obj]
    assert single.allgather(obj)[0] is obj
    assert single.gather(obj, root=0) == [obj]
    assert single.allreduce_sum(7) == 7
    assert single.allreduce_sum(2.5) == 2.5
    assert single.bcast(obj, root=0) is obj
    assert single.barrier() is None
    with single.guarded('a collective'):
        pass


def test_single_process_training_lets_errors_through_unchanged():
    single = SingleProcess()
    with pytest.raises(ValueError, match='boom'), single.training():
        raise ValueError('boom')


# ------------------------------------------------------------ processes_of ----


def test_processes_of_none_and_plain_steppers_is_a_single_process():
    assert isinstance(processes_of(None), SingleProcess)
    assert isinstance(processes_of(SgdStepper()), SingleProcess)
    assert processes_of(MomentumStepper()).comm is None


def test_processes_of_a_processes_object_is_that_object():
    single = SingleProcess()
    assert processes_of(single) is single
    mpi = MpiProcesses(RecordingComm())
    assert processes_of(mpi) is mpi


def test_processes_of_a_communicator():
    comm = RecordingComm(rank=2, size=3)
    processes = processes_of(comm)
    assert isinstance(processes, MpiProcesses)
    assert processes.comm is comm
    assert (processes.rank, processes.size, processes.is_root) == (2, 3, False)


def test_processes_of_a_size_one_communicator_is_a_single_process():
    processes = processes_of(SizeOneComm())
    assert isinstance(processes, SingleProcess)
    assert processes.comm is None


def test_processes_of_objects_with_comm_or_processes():
    comm = RecordingComm(rank=0, size=2)
    stepper = DataParallel(SgdStepper(), comm=comm)
    assert processes_of(stepper).comm is comm
    assert stepper.processes.comm is comm

    class WithComm:
        def __init__(self, comm):
            self.comm = comm

    assert processes_of(WithComm(comm)).comm is comm
    assert isinstance(processes_of(WithComm(None)), SingleProcess)

    class WithProcesses:
        processes = MpiProcesses(comm)

    assert processes_of(WithProcesses()) is WithProcesses.processes


def test_data_parallel_on_one_process_is_a_single_process():
    stepper = DataParallel(SgdStepper(), comm=SizeOneComm())
    assert isinstance(processes_of(stepper), SingleProcess)
    assert communicator_of(stepper) is None


def test_communicator_of_and_is_root_process():
    comm = RecordingComm(rank=1, size=2)
    assert communicator_of(DataParallel(SgdStepper(), comm=comm)) is comm
    assert communicator_of(SgdStepper()) is None
    assert is_root_process(None)
    assert not is_root_process(comm)
    assert is_root_process(RecordingComm(rank=0, size=2))


def test_old_names_stay_importable_from_data_parallel():
    for name in (
        'communicator_of',
        'is_root_process',
        'abort_on_exception',
        'announce_leaving',
        'guarded',
        'watchdog_of',
        'mpi_world_size',
        'mpi_world_rank',
    ):
        assert getattr(data_parallel_module, name) is getattr(parallel, name)


# ------------------------------------------------------------ MpiProcesses ----


def test_mpi_processes_pass_collectives_to_the_communicator():
    comm = RecordingComm(rank=1, size=3, other=10)
    processes = MpiProcesses(comm)
    assert processes.allgather('x') == [10, 'x', 10]
    assert processes.gather('x', root=0) is None
    assert processes.allreduce_sum(1) == 21
    assert processes.bcast('mine', root=0) == 10
    processes.barrier()
    assert comm.calls == [
        ('allgather', 'x'),
        ('gather', 'x', 0),
        ('allreduce', 1),
        ('bcast', 'mine', 0),
        ('Barrier',),
    ]


def test_mpi_processes_on_root_gather_everything():
    processes = MpiProcesses(RecordingComm(rank=0, size=2, other='b'))
    assert processes.is_root
    assert processes.gather('a') == ['a', 'b']


def test_mpi_processes_training_announces_leaving(monkeypatch):
    comm = RecordingComm(rank=1, size=2)
    told = []
    monkeypatch.setattr(
        parallel, 'announce_leaving', lambda c, reason: told.append((c, reason))
    )
    processes = MpiProcesses(comm)
    watchdog = parallel.watchdog_of(comm)
    with pytest.raises(KeyError), processes.training(lambda e: f'left: {e!r}'):
        assert watchdog.training == 1
        raise KeyError('k')
    assert watchdog.training == 0
    assert told == [(comm, "left: KeyError('k')")]
    with processes.training():
        pass
    assert len(told) == 1  # a run that ends normally tells nobody


def test_guarded_without_a_watchdog_does_nothing():
    with parallel.guarded(None, 'nothing'), parallel.guarded(object(), 'x'):
        pass


def test_world_communicator_keeps_a_given_communicator():
    comm = RecordingComm()
    assert parallel.world_communicator(comm) is comm


# ------------------------------------------------------------- protect_job ----


def test_protect_job_leaves_single_processes_and_stand_ins_alone(monkeypatch):
    for name in parallel._SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    hook = sys.excepthook
    assert parallel.protect_job() is False
    assert parallel.protect_job(RecordingComm(rank=1, size=2)) is False
    assert parallel.protect_job(SizeOneComm()) is False
    DataParallel(SgdStepper(), comm=RecordingComm(rank=0, size=2))
    assert sys.excepthook is hook


def test_a_data_parallel_stepper_without_launcher_does_not_touch_mpi():
    """Made in a fresh process without ``mpiexec``: MPI is not initialised
    and no exception hook is installed."""
    code = (
        'import sys\n'
        'from brainstorm.training import DataParallel, SgdStepper\n'
        'hook = sys.excepthook\n'
        'DataParallel(SgdStepper())\n'
        "print('mpi4py.MPI' in sys.modules, sys.excepthook is hook)\n"
    )
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(('PMI_', 'PMIX_', 'OMPI_', 'MV2_'))
    }
    env['PYTHONPATH'] = str(ROOT)
    done = subprocess.run(
        [sys.executable, '-c', code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ['False', 'True']
