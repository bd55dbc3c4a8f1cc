"""brainstorm.parallel: the processes of a run, in one process or over MPI.

Without MPI: SingleProcess, processes_of for every kind of argument, and
MpiProcesses over a stand-in communicator that records its calls.
"""

import os
import subprocess
import sys
import threading
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
    single = processes_of(None)
    assert isinstance(single, SingleProcess)
    assert (single.rank, single.size, single.is_root, single.comm) == (
        0,
        1,
        True,
        None,
    )


def test_single_process_collectives_are_identities():
    single = processes_of(None)
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


# ---------------------------------------------------------------- watchdog ----


class FakeMPI:
    """The parts of ``mpi4py.MPI`` the watchdog uses."""

    ANY_SOURCE = -1

    class Status:
        def __init__(self):
            self.source = None

        def Get_source(self):
            return self.source

    class Request:
        delivered = True

        @classmethod
        def Testall(cls, requests):
            return cls.delivered


class MessageComm(RecordingComm):
    """A stand-in with point-to-point messages and Abort: ``inbox`` holds
    ``(source, tag, message)``; sent messages and Abort codes are
    recorded."""

    def __init__(self, rank=1, size=3, inbox=()):
        super().__init__(rank=rank, size=size)
        self.inbox = list(inbox)
        self.sent = []
        self.aborted = []

    def Iprobe(self, source, tag, status):
        assert source == FakeMPI.ANY_SOURCE
        for message in self.inbox:
            if message[1] == tag:
                status.source = message[0]
                return True
        return False

    def recv(self, source, tag):
        for i, message in enumerate(self.inbox):
            if message[:2] == (source, tag):
                return self.inbox.pop(i)[2]
        raise AssertionError(f'no message from {source} with tag {tag}')

    def isend(self, obj, dest, tag):
        self.sent.append((obj, dest, tag))
        return ('request', dest)

    def Abort(self, code):
        self.aborted.append(code)


WATCHDOG = parallel._Watchdog


def unstarted(comm, timeout=8.0):
    """A watchdog whose thread is not started (driven by hand)."""
    watchdog = WATCHDOG(comm, timeout, start=False)
    assert not watchdog._thread.is_alive()
    # a finished thread in its place (_at_exit joins it)
    watchdog._thread = threading.Thread(target=lambda: None)
    watchdog._thread.start()
    return watchdog


@pytest.fixture
def own_watchdogs(monkeypatch):
    """A fresh watchdog registry, and no sleeping before Abort."""
    monkeypatch.setattr(parallel, '_watchdogs', {})
    monkeypatch.setattr(parallel.time, 'sleep', lambda seconds: None)
    return parallel._watchdogs


def test_guard_marks_a_collective_while_it_runs_and_clears_it():
    watchdog = unstarted(MessageComm())
    assert watchdog.collective is None
    before = parallel.time.monotonic()
    with watchdog.guard('the first call'):
        what, start = watchdog.collective
        assert what == 'the first call'
        assert before <= start <= parallel.time.monotonic()
    assert watchdog.collective is None
    with pytest.raises(KeyError), watchdog.guard('a failing call'):
        raise KeyError('k')
    assert watchdog.collective is None


def test_a_nested_guard_keeps_the_outer_call():
    watchdog = unstarted(MessageComm())
    with watchdog.guard('the outer call'):
        outer = watchdog.collective
        with watchdog.guard('an inner call'):
            assert watchdog.collective is outer
        assert watchdog.collective is outer
    assert watchdog.collective is None


def test_verdict_time_limit_is_exclusive_and_none_means_no_limit():
    watchdog = unstarted(MessageComm(rank=0, size=2), timeout=8)
    assert watchdog.verdict(1e12) is None  # nothing guarded
    watchdog.collective = ('the stop decision', 100.0)
    assert watchdog.verdict(108.0) is None
    message = watchdog.verdict(108.001)
    assert message.startswith(
        'rank 0 of 2 waited more than 8 s in the stop decision: another rank'
    )
    assert 'DataParallel(timeout=...)' in message
    watchdog.timeout = 0.25
    assert 'more than 0.25 s in' in watchdog.verdict(100.3)
    watchdog.timeout = None
    assert watchdog.verdict(1e12) is None


def test_verdict_after_a_finished_collective_ends_nothing():
    """A rank that ends normally after a collective call is over does not
    abort the others, however long after (the call is cleared)."""
    watchdog = unstarted(MessageComm(rank=0, size=2), timeout=0.01)
    with watchdog.guard('the gradient Allreduce'):
        pass
    watchdog.gone = (1, 'its process ended (rank 1)', False)
    assert watchdog.verdict(parallel.time.monotonic() + 1e6) is None


@pytest.mark.parametrize(
    'training, during, collective, ends',
    [
        (1, True, False, True),  # left training while this one trains
        (1, False, False, False),  # its process ended after training
        (0, True, False, False),  # this rank is not training
        (0, False, True, True),  # this rank waits for it in a collective
        (1, False, True, True),
        (2, True, False, True),  # nested train() calls
    ],
)
def test_verdict_on_a_rank_that_left(training, during, collective, ends):
    watchdog = unstarted(MessageComm(rank=2, size=3), timeout=None)
    watchdog.training = training
    watchdog.gone = (1, 'RuntimeError: boom (rank 1)', during)
    if collective:
        watchdog.collective = ('a barrier', 0.0)
    message = watchdog.verdict(1.0)
    if ends:
        assert message == 'rank 1 of 3 left training: RuntimeError: boom (rank 1)'
    else:
        assert message is None


def test_receive_keeps_the_first_rank_that_left():
    tag = parallel._LEAVE_TAG
    comm = MessageComm(
        rank=1,
        size=3,
        inbox=[
            (2, tag, (True, 'first')),
            (0, tag + 1, 'other'),
            (0, tag, (False, 'x')),
        ],
    )
    watchdog = unstarted(comm)
    assert watchdog._receive(FakeMPI, FakeMPI.Status())
    assert watchdog.gone == (2, 'first', True)
    assert comm.inbox == [(0, tag + 1, 'other')]  # both announcements read
    assert watchdog._receive(FakeMPI, FakeMPI.Status())
    assert watchdog.gone == (2, 'first', True)


def test_receive_reports_a_finalised_mpi():
    comm = MessageComm()

    def gone(**kwargs):
        raise RuntimeError('MPI finalised')

    comm.Iprobe = gone
    assert unstarted(comm)._receive(FakeMPI, FakeMPI.Status()) is False


def test_announce_tells_every_other_rank_once():
    comm = MessageComm(rank=1, size=4)
    watchdog = unstarted(comm)
    watchdog.announce('x' * 600, during_training=False)
    tag = parallel._LEAVE_TAG
    assert comm.sent == [
        ((False, 'x' * 500), 0, tag),
        ((False, 'x' * 500), 2, tag),
        ((False, 'x' * 500), 3, tag),
    ]
    assert watchdog._requests == [('request', 0), ('request', 2), ('request', 3)]
    watchdog.announce('again')
    assert len(comm.sent) == 3
    other = MessageComm(rank=0, size=2)
    unstarted(other).announce('why')
    assert other.sent == [((True, 'why'), 1, tag)]


def test_abort_prints_the_reason_and_aborts(capsys, own_watchdogs):
    comm = MessageComm(rank=1, size=3)
    unstarted(comm)._abort('a reason')
    assert capsys.readouterr().err == (
        '[rank 1] brainstorm: a reason; ending all 3 ranks.\n'
    )
    assert comm.aborted == [1]


def test_abort_aborts_also_when_printing_fails(monkeypatch, own_watchdogs):
    comm = MessageComm()

    class Broken:
        def write(self, text):
            raise OSError('closed')

    monkeypatch.setattr(sys, 'stderr', Broken())
    with pytest.raises(OSError):
        unstarted(comm)._abort('a reason')
    assert comm.aborted == [1]


@pytest.fixture
def fake_mpi(monkeypatch):
    """``mpi_module()`` returns FakeMPI (MPI is never initialised here)."""
    monkeypatch.setattr(parallel, 'mpi_module', lambda: FakeMPI)
    monkeypatch.setattr(FakeMPI.Request, 'delivered', True)
    monkeypatch.setattr(parallel, 'EXIT_WAIT', 0.05)  # nobody answers here
    return FakeMPI


@pytest.mark.parametrize('training', [0, 1])
def test_at_exit_tells_the_others_that_the_process_ended(training, fake_mpi):
    comm = MessageComm(rank=2, size=3)
    watchdog = unstarted(comm)
    watchdog.training = training
    watchdog._at_exit()
    reason = (bool(training), 'its process ended (rank 2)')
    tag = parallel._LEAVE_TAG
    assert comm.sent == [(reason, 0, tag), (reason, 1, tag)]
    assert watchdog._stop.is_set()


def test_at_exit_after_mpi_is_finalised_is_silent(fake_mpi):
    comm = MessageComm()

    def finalised(*args, **kwargs):
        raise RuntimeError('MPI finalised')

    comm.isend = finalised
    watchdog = unstarted(comm)
    watchdog._at_exit()
    assert watchdog._stop.is_set()


def test_watchdog_of_and_announce_leaving(own_watchdogs):
    comm = MessageComm(rank=1, size=3)
    null = parallel.watchdog_of(comm, 5)
    assert isinstance(null, parallel._NullWatchdog)
    assert parallel.watchdog_of(comm) is null
    assert null.timeout == 5
    assert parallel.watchdog_of(comm).timeout == 5  # None keeps it
    own_watchdogs[id(comm)] = watchdog = unstarted(comm)
    assert parallel.watchdog_of(comm, 3) is watchdog
    assert watchdog.timeout == 3
    with parallel.guarded(comm, 'a call'):
        assert watchdog.collective[0] == 'a call'
    assert watchdog.collective is None
    parallel.announce_leaving(comm, 'ValueError: v')
    assert comm.sent[0][0] == (True, 'ValueError: v (rank 1)')
    parallel.announce_leaving(MessageComm(), 'nobody listens')  # no watchdog


@pytest.mark.parametrize(
    'method, args, what',
    [
        ('allgather', ('x',), 'an allgather'),
        ('gather', ('x',), 'a gather'),
        ('allreduce_sum', (1,), 'an allreduce'),
        ('bcast', ('x',), 'a broadcast'),
        ('barrier', (), 'a barrier'),
    ],
)
def test_collectives_of_mpi_processes_are_watched(own_watchdogs, method, args, what):
    comm = MessageComm(rank=0, size=2)
    own_watchdogs[id(comm)] = watchdog = unstarted(comm)
    seen = []
    for name in ('allgather', 'gather', 'allreduce', 'bcast', 'Barrier'):
        call = getattr(comm, name)

        def watched(*a, call=call, **k):
            seen.append(watchdog.collective[0])
            return call(*a, **k)

        setattr(comm, name, watched)
    processes = MpiProcesses(comm)
    getattr(processes, method)(*args)
    with processes.guarded('the stop decision'):
        getattr(processes, method)(*args)
    assert seen == [what, 'the stop decision']
    assert watchdog.collective is None


# ------------------------------------------------------ abort_on_exception ----


@pytest.fixture
def own_excepthook(monkeypatch):
    """A recording sys.excepthook, no installed abort hook, no sleeping."""
    previous = []
    monkeypatch.setattr(sys, 'excepthook', lambda *exc: previous.append(exc))
    monkeypatch.setattr(parallel, '_abort_installed', [])
    monkeypatch.setattr(parallel.time, 'sleep', lambda seconds: None)
    return previous


def raised(err):
    try:
        raise err
    except BaseException as caught:
        return type(caught), caught, caught.__traceback__


def test_abort_on_exception_names_the_rank_and_aborts(own_excepthook, capsys):
    comm = MessageComm(rank=2, size=3)
    parallel.abort_on_exception(comm)
    assert parallel._abort_installed == [comm]
    sys.excepthook(*raised(ValueError('bad data\non two lines')))
    err = capsys.readouterr().err
    assert err.startswith(
        '[rank 2] brainstorm: uncaught ValueError on rank 2 of 3; '
        'aborting all ranks.\n[rank 2] Traceback (most recent call last):\n'
    )
    assert err.endswith('[rank 2] ValueError: bad data\n[rank 2] on two lines\n')
    assert all(line.startswith('[rank 2] ') for line in err.splitlines())
    assert comm.aborted == [1]
    assert own_excepthook == []  # the previous hook does not print it again


def test_abort_on_exception_passes_keyboard_interrupts_on(own_excepthook):
    comm = MessageComm(rank=0, size=2)
    parallel.abort_on_exception(comm)
    exc = raised(KeyboardInterrupt())
    sys.excepthook(*exc)
    assert own_excepthook == [exc]
    assert comm.aborted == [1]


def test_abort_on_exception_installs_once(own_excepthook):
    first, second = MessageComm(rank=0, size=2), MessageComm(rank=1, size=2)
    parallel.abort_on_exception(first)
    hook = sys.excepthook
    parallel.abort_on_exception(second)
    assert sys.excepthook is hook
    assert parallel._abort_installed == [first]


def test_abort_on_exception_aborts_also_when_printing_fails(
    own_excepthook, monkeypatch
):
    comm = MessageComm(rank=1, size=2)
    parallel.abort_on_exception(comm)

    class Broken:
        def write(self, text):
            raise OSError('closed')

    monkeypatch.setattr(sys, 'stderr', Broken())
    with pytest.raises(OSError):
        sys.excepthook(*raised(ValueError('v')))
    assert comm.aborted == [1]


def mpi4py_like(size, rank=0):
    """A stand-in communicator whose class claims to be mpi4py's."""
    cls = type('Intracomm', (MessageComm,), {'__module__': 'mpi4py.MPI'})
    return cls(rank=rank, size=size)


def test_protect_job_on_an_mpi4py_communicator(monkeypatch, own_watchdogs):
    installed = []
    monkeypatch.setattr(parallel, 'abort_on_exception', installed.append)
    monkeypatch.setattr(
        parallel, '_Watchdog', lambda comm, timeout: unstarted(comm, timeout)
    )
    assert parallel.protect_job(mpi4py_like(size=1)) is False
    assert installed == [] and own_watchdogs == {}
    comm = mpi4py_like(size=2)
    assert parallel.protect_job(comm, 8) is True
    assert installed == [comm]
    watchdog = own_watchdogs[id(comm)]
    assert isinstance(watchdog, WATCHDOG) and watchdog.timeout == 8
    assert parallel.protect_job(comm) is True
    assert watchdog.timeout == 600.0  # the default replaces the limit
    assert parallel.watchdog_of(comm) is watchdog
    # a DataParallel stepper protects the job when it is made, also from a
    # description, and sets its time limit, None (no limit) included
    DataParallel(SgdStepper(), comm=comm, timeout=None)
    assert watchdog.timeout is None
    DataParallel(SgdStepper(), comm=comm, timeout=5)
    assert watchdog.timeout == 5
    assert installed == [comm] * 4


def test_protect_job_under_a_launcher_uses_the_world(monkeypatch, own_watchdogs):
    world = mpi4py_like(size=3, rank=1)
    installed = []
    monkeypatch.setattr(parallel, 'abort_on_exception', installed.append)
    monkeypatch.setattr(
        parallel, '_Watchdog', lambda comm, timeout: unstarted(comm, timeout)
    )
    monkeypatch.setattr(parallel, 'world_communicator', lambda: world)
    monkeypatch.setattr(parallel, 'has_mpi4py', True)
    for name in parallel._SIZE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv('PMI_SIZE', '1')
    assert parallel.protect_job() is False
    monkeypatch.setenv('PMI_SIZE', '2')
    monkeypatch.setattr(parallel, 'has_mpi4py', False)
    assert parallel.protect_job() is False
    assert installed == []
    monkeypatch.setattr(parallel, 'has_mpi4py', True)
    assert parallel.protect_job() is True
    assert installed == [world]
    assert own_watchdogs[id(world)].timeout == 600.0


# ---------------------------------------------------- launcher environment ----


@pytest.fixture
def no_launcher(monkeypatch):
    for name in parallel._SIZE_VARIABLES + parallel._RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    'size_variable, rank_variable',
    list(zip(parallel._SIZE_VARIABLES, parallel._RANK_VARIABLES)),
)
def test_every_launcher_is_read(no_launcher, size_variable, rank_variable):
    assert (parallel.mpi_world_size(), parallel.mpi_world_rank()) == (1, 0)
    no_launcher.setenv(size_variable, '5')
    no_launcher.setenv(rank_variable, '3')
    assert (parallel.mpi_world_size(), parallel.mpi_world_rank()) == (5, 3)


def test_launcher_variables_that_are_not_numbers_are_skipped(no_launcher):
    no_launcher.setenv('PMI_SIZE', 'x')
    no_launcher.setenv('OMPI_COMM_WORLD_SIZE', '4')
    no_launcher.setenv('PMI_RANK', '')
    no_launcher.setenv('PMIX_RANK', '2')
    assert (parallel.mpi_world_size(), parallel.mpi_world_rank()) == (4, 2)
    no_launcher.setenv('PMI_SIZE', '6')  # the first one found wins
    assert parallel.mpi_world_size() == 6


def test_world_rank_and_size(no_launcher):
    world = RecordingComm(rank=2, size=4)

    class FakeModule:
        COMM_WORLD = world

    no_launcher.setattr(parallel, 'mpi_module', lambda: FakeModule)
    no_launcher.setattr(parallel, 'has_mpi4py', True)
    assert parallel.world_rank_and_size() == (0, 1)  # no launcher
    no_launcher.setenv('PMI_SIZE', '4')
    assert parallel.world_rank_and_size() == (2, 4)
    assert parallel.world_communicator() is world
    assert parallel.world_communicator(None) is world
    no_launcher.setattr(parallel, 'has_mpi4py', False)
    assert parallel.world_rank_and_size() == (0, 1)


def test_data_parallel_start_sets_its_time_limit_none_included(
    monkeypatch, own_watchdogs
):
    from tests.training.nets import xor_net

    monkeypatch.setattr(parallel, 'abort_on_exception', lambda comm: None)
    monkeypatch.setattr(
        parallel, '_Watchdog', lambda comm, timeout: unstarted(comm, timeout)
    )
    comm = mpi4py_like(size=2)
    comm.Bcast = lambda values, root: None
    comm.allgather = lambda value: [value, value]
    stepper = DataParallel(SgdStepper(), comm=comm, timeout=None)
    watchdog = parallel.watchdog_of(comm, 7)  # e.g. another stepper's limit
    assert watchdog.timeout == 7
    stepper.start(xor_net())
    assert watchdog.timeout is None


def test_at_exit_waits_for_the_others_farewells(fake_mpi, monkeypatch):
    """Ranks ending together each read the others' last messages (and see
    their own delivered) before MPI is finalised, but wait no longer than
    EXIT_WAIT for a rank that goes on."""
    tag = parallel._LEAVE_TAG
    clock = [0.0]
    monkeypatch.setattr(parallel.time, 'monotonic', lambda: clock[0])
    monkeypatch.setattr(
        parallel.time, 'sleep', lambda s: clock.__setitem__(0, clock[0] + s)
    )
    monkeypatch.setattr(parallel, 'EXIT_WAIT', 1.0)
    arrivals = {0.3: (0, tag, (False, 'a')), 0.5: (2, tag, (False, 'b'))}
    comm = MessageComm(rank=1, size=3)
    probe = comm.Iprobe

    def arriving(**kwargs):
        for when, message in list(arrivals.items()):
            if clock[0] >= when:
                comm.inbox.append(message)
                del arrivals[when]
        return probe(**kwargs)

    comm.Iprobe = arriving
    watchdog = unstarted(comm)
    watchdog._at_exit()
    assert watchdog._heard == {0, 2}
    assert 0.5 <= clock[0] < 0.53  # returned once both were heard
    assert [dest for _, dest, _ in comm.sent] == [0, 2]
    # nobody answers: it gives up after EXIT_WAIT seconds
    clock[0] = 0.0
    silent = unstarted(MessageComm(rank=1, size=3))
    silent._at_exit()
    assert 1.0 <= clock[0] < 1.02
    # all heard but its own messages not delivered yet: it waits for them
    clock[0] = 0.0
    FakeMPI.Request.delivered = False
    late = MessageComm(rank=0, size=2, inbox=[(1, tag, (False, 'x'))])
    unstarted(late)._at_exit()
    assert 1.0 <= clock[0] < 1.02


# --------------------------------------------------------- further edges ----


def test_mpi_module_without_mpi4py_names_the_extra(monkeypatch):
    from brainstorm import optional

    monkeypatch.setattr(parallel, 'has_mpi4py', False)
    monkeypatch.setitem(sys.modules, 'mpi4py', None)
    monkeypatch.setattr(
        parallel,
        'mpi4py_mock',
        optional.MissingDependencyMock(
            optional._missing('mpi4py', 'mpi', ImportError('no mpi4py'))
        ),
    )
    with pytest.raises(ImportError, match=r"pip install 'brainstorm-nn\[mpi\]'"):
        parallel.mpi_module()
    with pytest.raises(ImportError, match=r'brainstorm-nn\[mpi\]'):
        parallel.world_communicator()


def test_mpi_processes_broadcast_from_rank_0_by_default():
    comm = RecordingComm(rank=1, size=2, other='root')
    assert MpiProcesses(comm).bcast('mine') == 'root'
    assert comm.calls == [('bcast', 'mine', 0)]


def test_mpi_processes_training_reason_defaults_to_type_and_message(monkeypatch):
    told = []
    monkeypatch.setattr(
        parallel, 'announce_leaving', lambda c, reason: told.append(reason)
    )
    with pytest.raises(KeyError), MpiProcesses(RecordingComm()).training():
        raise KeyError('k')
    assert told == ["KeyError: 'k'"]


def test_a_communicator_has_both_get_rank_and_get_size():
    comm = RecordingComm(rank=1, size=2)

    class HalfComm:
        """Only Get_rank, and the real communicator as ``comm``."""

        def __init__(self):
            self.comm = comm

        def Get_rank(self):
            return 0

    assert processes_of(HalfComm()).comm is comm

    class NotCallable:
        Get_rank = Get_size = 3
        comm = None

    assert isinstance(processes_of(NotCallable()), SingleProcess)


def test_a_new_watchdog_is_idle_and_its_thread_a_daemon():
    comm = MessageComm(rank=1, size=3)
    watchdog = WATCHDOG(comm, 4.0, start=False)
    assert (watchdog.rank, watchdog.size, watchdog.timeout) == (1, 3, 4.0)
    assert watchdog.training == 0
    assert watchdog.collective is None and watchdog.gone is None
    assert watchdog._heard == set() and watchdog._requests == []
    # a thread that would keep the process from ending must not be
    assert watchdog._thread.daemon
    assert watchdog._thread.name == 'brainstorm-mpi-watchdog'
    assert not watchdog._thread.is_alive()
    watchdog.gone = (0, 'RuntimeError: r (rank 0)', True)
    assert watchdog.verdict(1e9) is None  # not training, no collective


class EventLog:
    """A stderr stand-in and recorder of sleeps and Abort calls."""

    def __init__(self, monkeypatch, comm):
        self.events = []
        monkeypatch.setattr(sys, 'stderr', self)
        monkeypatch.setattr(
            parallel.time, 'sleep', lambda s: self.events.append(('sleep', s))
        )
        comm.Abort = lambda code: self.events.append(('Abort', code))

    def write(self, text):
        self.events.append(('write', text))

    def flush(self):
        self.events.append(('flush',))


def test_abort_writes_flushes_and_waits_before_aborting(monkeypatch):
    """The message must reach the launcher before Abort ends the process."""
    comm = MessageComm(rank=0, size=2)
    log = EventLog(monkeypatch, comm)
    unstarted(comm)._abort('why')
    assert log.events == [
        ('write', '[rank 0] brainstorm: why; ending all 2 ranks.\n'),
        ('flush',),
        ('sleep', 0.5),
        ('Abort', 1),
    ]


def test_abort_hook_writes_flushes_and_waits_before_aborting(
    own_excepthook, monkeypatch
):
    comm = MessageComm(rank=1, size=2)
    parallel.abort_on_exception(comm)
    log = EventLog(monkeypatch, comm)
    sys.excepthook(*raised(ValueError('v')))
    assert [event[0] for event in log.events] == ['write', 'flush', 'sleep', 'Abort']
    assert log.events[2:] == [('sleep', 0.5), ('Abort', 1)]
    assert log.events[0][1].startswith('[rank 1] brainstorm: uncaught ValueError')


def test_at_exit_stops_the_thread_and_waits_for_it(fake_mpi):
    """The watchdog thread has stopped using MPI before MPI is finalised."""
    watchdog = unstarted(MessageComm(rank=0, size=2))
    stopped = []

    def body():
        watchdog._stop.wait(5)
        threading.Event().wait(0.2)  # a last round of the loop
        stopped.append(True)

    watchdog._thread = threading.Thread(target=body)
    watchdog._thread.start()
    watchdog._at_exit()
    assert stopped == [True]


def test_watchdog_of_an_mpi4py_communicator_runs_a_thread(
    monkeypatch, own_watchdogs, fake_mpi
):
    """watchdog_of starts a daemon thread and registers the exit handler;
    the thread polls, aborts nothing while nothing is wrong, ends the job
    once a guarded call waits too long, and stops when asked."""
    registered = []
    monkeypatch.setattr(parallel.atexit, 'register', registered.append)
    comm = mpi4py_like(size=2)
    aborted = threading.Event()

    def abort(code):
        comm.aborted.append(code)
        aborted.set()

    comm.Abort = abort
    watchdog = parallel.watchdog_of(comm, 0.1)
    try:
        assert watchdog._thread.is_alive() and watchdog._thread.daemon
        assert registered == [watchdog._at_exit]
        assert not aborted.wait(0.4)  # 8 rounds, nothing guarded
        with watchdog.guard('a test call'):
            assert aborted.wait(10)
        assert set(comm.aborted) == {1}
    finally:
        watchdog._stop.set()
        watchdog._thread.join(5)
    assert not watchdog._thread.is_alive()


def test_the_watchdog_thread_ends_when_mpi_is_finalised(
    monkeypatch, own_watchdogs, fake_mpi
):
    monkeypatch.setattr(parallel.atexit, 'register', lambda f: None)
    comm = mpi4py_like(size=2)

    def finalised(**kwargs):
        raise RuntimeError('MPI finalised')

    comm.Iprobe = finalised
    watchdog = parallel.watchdog_of(comm)
    watchdog._thread.join(10)
    assert not watchdog._thread.is_alive()
    assert not watchdog._stop.is_set()  # it ended by itself
