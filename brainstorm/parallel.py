"""Who takes part in a run: rank, size and the MPI communicator.

This is the one module that knows about processes. It reads the launcher's
environment without initialising MPI, and imports mpi4py (an optional
dependency, ``pip install 'brainstorm-nn[mpi]'``) only when a communicator
is first needed. Everything above it (data iterators, scorers, the trainer,
hooks) asks this module instead of testing for MPI itself:
:func:`processes_of` turns a stepper, a communicator or None into a
processes object (:class:`SingleProcess` or :class:`MpiProcesses`) with the
same rank, size and collective methods in both cases.

The MPI watchdog lives here too: a thread per process that ends the whole
job when one rank leaves training, so that the others do not wait forever
in a collective call.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
import time
import traceback

from brainstorm.optional import has_mpi4py, mpi4py_mock

__all__ = [
    'mpi_module',
    'mpi_world_size',
    'mpi_world_rank',
    'world_rank_and_size',
    'world_communicator',
    'SingleProcess',
    'MpiProcesses',
    'processes_of',
    'communicator_of',
    'is_root_process',
    'abort_on_exception',
    'protect_job',
    'announce_leaving',
    'guarded',
    'watchdog_of',
]

# environment variables in which launchers announce the number of
# processes and the rank of each (MPICH/Hydra, Open MPI, PMIx, MVAPICH)
_SIZE_VARIABLES = tuple(
    'PMI_SIZE OMPI_COMM_WORLD_SIZE PMIX_SIZE MV2_COMM_WORLD_SIZE'.split()
)
_RANK_VARIABLES = tuple(
    'PMI_RANK OMPI_COMM_WORLD_RANK PMIX_RANK MV2_COMM_WORLD_RANK'.split()
)


def mpi_module():
    """Return the ``mpi4py.MPI`` module (initialises MPI on first use).

    Raises:
        ImportError: naming the ``mpi`` extra when mpi4py is not installed.
    """
    if not has_mpi4py:
        mpi4py_mock()  # raises the ImportError explaining the install
    from mpi4py import MPI

    return MPI


def mpi_world_size() -> int:
    """Return the number of processes ``mpiexec`` started.

    Read from the environment (MPICH/Hydra, Open MPI, PMIx, MVAPICH); 1
    without a launcher. Does not import mpi4py or initialise MPI.

    Example:
        >>> use_mpi = mpi_world_size() > 1  # doctest: +SKIP
    """
    return _from_environment(_SIZE_VARIABLES, 1)


def mpi_world_rank() -> int:
    """Return this process's rank among those ``mpiexec`` started.

    Read from the environment like :func:`mpi_world_size`; 0 without a
    launcher.

    Example:
        >>> if mpi_world_rank() > 0:  # doctest: +SKIP
        ...     sys.stdout = open(os.devnull, 'w')  # only rank 0 prints
    """
    return _from_environment(_RANK_VARIABLES, 0)


def _from_environment(names, default: int) -> int:
    for name in names:
        value = os.environ.get(name, '')
        if value.isdigit():
            return int(value)
    return default


def world_rank_and_size() -> tuple[int, int]:
    """Return rank and size in ``MPI.COMM_WORLD``.

    (0, 1) without mpi4py or without an MPI launcher (so MPI is not
    initialised needlessly).
    """
    if not has_mpi4py or mpi_world_size() == 1:
        return 0, 1
    world = mpi_module().COMM_WORLD
    return world.Get_rank(), world.Get_size()


def world_communicator(comm=None):
    """Return ``comm``, or ``MPI.COMM_WORLD`` when ``comm`` is None.

    Raises:
        ImportError: when ``MPI.COMM_WORLD`` is needed and mpi4py is missing.
    """
    return mpi_module().COMM_WORLD if comm is None else comm


# ------------------------------------------------------- processes ----


class SingleProcess:
    """The processes of a run in one process: rank 0 of 1, no communicator.

    Every collective method returns what one process would receive from
    itself, so code written for several processes runs unchanged.
    """

    rank = 0
    size = 1
    is_root = True
    comm = None

    def allgather(self, obj) -> list:
        """Return ``[obj]``: the objects of all (one) processes."""
        return [obj]

    def gather(self, obj, root: int = 0) -> list:
        """Return ``[obj]`` (this process is the root)."""
        return [obj]

    def allreduce_sum(self, x):
        """Return ``x``: the sum over one process."""
        return x

    def bcast(self, obj, root: int = 0):
        """Return ``obj``: this process is the root."""
        return obj

    def barrier(self) -> None:
        """Return at once: there is nobody to wait for."""

    def guarded(self, what: str):
        """Return a context manager that does nothing (no watchdog)."""
        return contextlib.nullcontext()

    def training(self, describe=None):
        """Return a context manager that does nothing (nobody to tell)."""
        return contextlib.nullcontext()

    def __repr__(self):
        return 'SingleProcess()'


class MpiProcesses:
    """The processes of a run over an MPI communicator (two or more).

    Args:
        comm: an mpi4py communicator, or a stand-in with the same methods
            (``Get_rank``, ``Get_size``, ``allgather``, ``gather``,
            ``allreduce``, ``bcast``, ``Barrier``).
    """

    def __init__(self, comm):
        self.comm = comm

    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        """The number of processes in the communicator."""
        return int(self.comm.Get_size())

    @property
    def is_root(self) -> bool:
        """Whether this process (rank 0) prints and writes files."""
        return self.rank == 0

    # Each collective is watched by the watchdog (see :func:`guarded`);
    # inside a block its caller guards under a more telling name, that
    # name is kept.

    def allgather(self, obj) -> list:
        """Return every rank's ``obj``, in rank order, on every rank."""
        with guarded(self.comm, 'an allgather'):
            return self.comm.allgather(obj)

    def gather(self, obj, root: int = 0):
        """Return every rank's ``obj`` on ``root``; None on the others."""
        with guarded(self.comm, 'a gather'):
            return self.comm.gather(obj, root=root)

    def allreduce_sum(self, x):
        """Return the sum of ``x`` over all ranks, on every rank."""
        with guarded(self.comm, 'an allreduce'):
            return self.comm.allreduce(x)  # mpi4py's default operation is SUM

    def bcast(self, obj, root: int = 0):
        """Return ``root``'s ``obj`` on every rank."""
        with guarded(self.comm, 'a broadcast'):
            return self.comm.bcast(obj, root=root)

    def barrier(self) -> None:
        """Wait until every rank has called it."""
        with guarded(self.comm, 'a barrier'):
            self.comm.Barrier()

    def guarded(self, what: str):
        """Return a context manager marking the collective call ``what``.

        See :func:`guarded`.
        """
        return guarded(self.comm, what)

    @contextlib.contextmanager
    def training(self, describe=None):
        """Mark a training run: however it ends early, the others learn it.

        Args:
            describe: called with the exception that ends the run, returns
                the reason told to the other ranks (default: its type and
                message).
        """
        watchdog = watchdog_of(self.comm)
        watchdog.training += 1
        try:
            yield
        except BaseException as err:
            announce_leaving(self.comm, (describe or _reason)(err))
            raise
        finally:
            watchdog.training -= 1

    def __repr__(self):
        return f'MpiProcesses(rank {self.rank} of {self.size})'


_SINGLE = SingleProcess()


def _reason(err: BaseException) -> str:
    return f'{type(err).__name__}: {err}'


def _is_communicator(x) -> bool:
    return callable(getattr(x, 'Get_rank', None)) and callable(
        getattr(x, 'Get_size', None)
    )


def processes_of(x) -> SingleProcess | MpiProcesses:
    """Return the processes object of ``x``.

    Args:
        x: None (a single process), a processes object (returned as it
            is), an mpi4py communicator, or an object with a ``processes``
            or ``comm`` attribute (a
            :class:`~brainstorm.training.data_parallel.DataParallel`
            stepper, a hook). Anything else, such as a stepper that is not
            data-parallel, runs in a single process.

    Returns:
        :class:`MpiProcesses` for a communicator of two or more processes,
        else :class:`SingleProcess` (``comm`` None).
    """
    if isinstance(x, (SingleProcess, MpiProcesses)):
        return x
    if x is not None and not _is_communicator(x):
        inner = getattr(x, 'processes', None)
        if inner is None:
            inner = getattr(x, 'comm', None)
        x = inner
    if x is None or isinstance(x, (SingleProcess, MpiProcesses)):
        return x or _SINGLE
    if x.Get_size() > 1:
        return MpiProcesses(x)
    return _SINGLE


def communicator_of(x):
    """Return the communicator of a run on more than one process, else None.

    ``x`` is anything ``processes_of`` accepts, e.g. a
    :class:`~brainstorm.training.data_parallel.DataParallel` stepper. The
    hooks use it to aggregate figures over the ranks and to let only rank
    0 print and write files.
    """
    return processes_of(x).comm


def is_root_process(comm) -> bool:
    """Return whether this process prints and writes files.

    True in a single process (``comm`` None, see :func:`communicator_of`)
    and on rank 0.
    """
    return processes_of(comm).is_root


# ------------------------------------------------ ending a broken job ----

_abort_installed: list = []


def abort_on_exception(comm=None) -> None:
    """Make an uncaught exception on this rank end the whole MPI job.

    Installs a ``sys.excepthook`` that prints the traceback, prefixed with
    the rank, and calls ``comm.Abort(1)``: without it the other ranks would
    wait forever in their next collective call.
    :meth:`~brainstorm.training.data_parallel.DataParallel.start` calls it
    when the communicator has more than one process. Calling it again has
    no effect.

    Args:
        comm: the communicator (default: ``MPI.COMM_WORLD``).
    """
    if _abort_installed:
        return
    comm = world_communicator(comm)
    previous = sys.excepthook
    rank, size = comm.Get_rank(), comm.Get_size()

    def excepthook(exc_type, exc, tb):
        lines = traceback.format_exception(exc_type, exc, tb)
        text = ''.join(
            f'[rank {rank}] {line}'
            for chunk in lines
            for line in chunk.splitlines(keepends=True)
        )
        try:
            sys.stderr.write(
                f'[rank {rank}] brainstorm: uncaught {exc_type.__name__} on '
                f'rank {rank} of {size}; aborting all ranks.\n{text}'
            )
            sys.stderr.flush()
            # give the launcher time to forward the message before Abort
            # kills every process (it was sometimes lost otherwise)
            time.sleep(0.5)
        finally:
            if exc_type is KeyboardInterrupt:
                previous(exc_type, exc, tb)
            comm.Abort(1)

    sys.excepthook = excepthook
    _abort_installed.append(comm)


def _is_mpi4py(comm) -> bool:
    return type(comm).__module__.startswith('mpi4py')


def protect_job(comm=None, timeout: float | None = 600.0) -> bool:
    """Make sure that no failure of this rank leaves the others waiting.

    Called when a data-parallel run is set up (a
    :class:`~brainstorm.training.data_parallel.DataParallel` stepper is
    made), long before training starts: a rank may still fail before it
    reaches ``train()``, e.g. when its data iterator refuses its data, while
    the other ranks already wait in the parameter broadcast. For an mpi4py
    communicator of two or more processes it installs
    :func:`abort_on_exception` (an uncaught exception prints its rank and
    reason and aborts the job) and starts the watchdog (see
    :func:`watchdog_of`), which tells the others when this process ends
    and ends this rank when it waits for one that is gone.

    Args:
        comm: the communicator; None means ``MPI.COMM_WORLD`` if the
            process was started by an MPI launcher with two or more
            processes (read from the environment; without a launcher or
            without mpi4py nothing happens and MPI is not initialised).
        timeout: the watchdog's limit for collective calls in seconds
            (None: no limit); it replaces the current one.

    Returns:
        Whether the job is now protected (False for a single process or a
        stand-in communicator that is not mpi4py's).
    """
    if comm is None:
        if not has_mpi4py or mpi_world_size() < 2:
            return False
        comm = world_communicator()
    if not _is_mpi4py(comm) or comm.Get_size() < 2:
        return False
    abort_on_exception(comm)
    watchdog_of(comm).timeout = timeout
    return True


#: seconds a rank's process waits at its end for the other ranks' last
#: messages (see ``_Watchdog._wait_for_farewells``)
EXIT_WAIT = 1.0
_LEAVE_TAG = 31337  # point-to-point messages announcing that a rank leaves
_watchdogs: dict = {}  # id(comm) -> _Watchdog


class _Watchdog:
    """Ends every rank of a data-parallel job when one leaves training.

    A daemon thread per process (MPI is initialised with
    ``MPI_THREAD_MULTIPLE``) polls every 50 ms for two things:

    * a message from another rank saying that it leaves training (sent by
      :func:`announce_leaving`: an exception, caught or not, ``sys.exit``
      in a hook, short data) or that its process ends. If this rank is
      training (for the first kind) or waits in a guarded collective call
      (both kinds), it prints the leaving rank and its reason and calls
      ``comm.Abort``;
    * a guarded collective call (see :meth:`guard`) waiting longer than
      ``timeout`` seconds: another rank is gone without a word (killed,
      or never started training) or hangs. It prints this rank, the call
      and how long it waited, and aborts.

    ``comm.Abort`` ends all processes of the job: the other ranks are
    blocked in MPI calls that could otherwise never return.
    """

    def __init__(self, comm, timeout: float | None, start: bool = True):
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = timeout
        self.training = 0  # depth of running Trainer.train calls
        self.collective: tuple | None = None  # (what, monotonic start) while in one
        self.gone: tuple | None = None  # (rank, reason, during) of a rank that left
        self._requests: list = []
        self._heard: set = set()  # ranks whose announcement was received
        self._announced = False
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._run, daemon=True, name='brainstorm-mpi-watchdog'
        )
        if start:  # (tests drive an unstarted one by hand)
            self._thread.start()
            atexit.register(self._at_exit)

    def _receive(self, MPI, status) -> bool:
        """Record announcements of leaving ranks; False once MPI is gone."""
        try:
            while self.comm.Iprobe(
                source=MPI.ANY_SOURCE, tag=_LEAVE_TAG, status=status
            ):
                source = status.Get_source()
                during, reason = self.comm.recv(source=source, tag=_LEAVE_TAG)
                self._heard.add(source)
                if self.gone is None:
                    self.gone = (source, reason, during)
        except Exception:  # MPI finalised under us at exit
            return False
        return True

    def _run(self) -> None:
        MPI = mpi_module()
        status = MPI.Status()
        while not self._stop.wait(0.05):
            if not self._receive(MPI, status):
                return
            verdict = self.verdict(time.monotonic())
            if verdict is not None:
                self._abort(verdict)

    def verdict(self, now: float) -> str | None:
        """Return why this rank must end the job at time ``now``, or None."""
        # a rank that left during training is missed by any rank still
        # training; one whose process ended after training only by a rank
        # waiting for it in a collective call (it may just have finished
        # first)
        collective = self.collective
        if self.gone is not None and (
            collective is not None or (self.training and self.gone[2])
        ):
            source, reason, _ = self.gone
            return f'rank {source} of {self.size} left training: {reason}'
        if (
            collective is not None
            and self.timeout is not None
            and now - collective[1] > self.timeout
        ):
            return (
                f'rank {self.rank} of {self.size} waited more than '
                f'{self.timeout:g} s in {collective[0]}: another rank '
                'left training without a word (killed, or it never '
                'reached this call) or hangs (DataParallel(timeout=...) '
                'sets this limit)'
            )
        return None

    def _abort(self, message: str) -> None:
        try:
            sys.stderr.write(
                f'[rank {self.rank}] brainstorm: {message}; '
                f'ending all {self.size} ranks.\n'
            )
            sys.stderr.flush()
            time.sleep(0.5)  # let the launcher forward the message
        finally:
            self.comm.Abort(1)

    @contextlib.contextmanager
    def guard(self, what: str):
        """Mark a collective call ``what`` while the block runs.

        Inside a block that is guarded already, the outer call's name and
        start time stay. When the block ends, the call is over: neither
        the time limit nor a rank that leaves afterwards ends the job.
        """
        if self.collective is not None:
            yield
            return
        self.collective = (what, time.monotonic())
        try:
            yield
        finally:
            self.collective = None

    def announce(self, reason: str, during_training: bool = True) -> None:
        """Tell every other rank that this one leaves.

        Args:
            reason: what ended training here (shown by the other ranks).
            during_training: False when the process ends after training.
        """
        if self._announced:
            return
        self._announced = True
        for rank in range(self.size):
            if rank != self.rank:
                # small messages go out at once (eager protocol); the
                # requests are kept so they are not cancelled
                self._requests.append(
                    self.comm.isend(
                        (during_training, reason[:500]), dest=rank, tag=_LEAVE_TAG
                    )
                )

    def _at_exit(self) -> None:
        # also after training: another rank may still call train() again
        # and would wait for this one for ever (a rank that is not training
        # only records the message)
        try:
            self.announce(
                f'its process ended (rank {self.rank})',
                during_training=bool(self.training),
            )
        except Exception:  # MPI already finalised: nobody to tell
            pass
        self._stop.set()
        self._thread.join(1.0)
        try:
            self._wait_for_farewells(mpi_module(), EXIT_WAIT)
        except Exception:  # MPI already finalised
            pass

    def _wait_for_farewells(self, MPI, seconds: float) -> None:
        """Before MPI is finalised: wait up to ``seconds`` for the others.

        That is, until every other rank's announcement has been received
        and this rank's own have been delivered. Ranks that end together
        would otherwise finalise MPI while these messages are in flight,
        which MPICH sometimes answers by killing the job (seen with three
        ranks). A rank that goes on working is not waited for longer.
        """
        status = MPI.Status()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            if not self._receive(MPI, status):
                return
            if len(self._heard) >= self.size - 1 and MPI.Request.Testall(
                self._requests
            ):
                return
            time.sleep(0.01)


class _NullWatchdog:
    """The watchdog of a communicator that is not mpi4py's."""

    training = 0
    timeout = None

    def guard(self, what: str):
        return contextlib.nullcontext()

    def announce(self, reason: str, during_training: bool = True) -> None:
        pass


def watchdog_of(comm, timeout: float | None = None):
    """Return the process's watchdog for ``comm``, started on first use.

    Args:
        comm: the communicator; a stand-in that is not mpi4py's gets a
            watchdog without a thread.
        timeout: replaces the current time limit of collective calls
            when given.
    """
    watchdog = _watchdogs.get(id(comm))
    if watchdog is None:
        if not _is_mpi4py(comm):
            # a stand-in communicator (tests): no MPI, no thread
            watchdog = _watchdogs[id(comm)] = _NullWatchdog()
        else:
            watchdog = _watchdogs[id(comm)] = _Watchdog(comm, None)
    if timeout is not None:
        watchdog.timeout = timeout
    return watchdog


def guarded(comm, what: str):
    """Return a context manager marking a collective call on ``comm``.

    The watchdog of ``comm`` watches the call; without one (or without a
    communicator) it does nothing.
    """
    watchdog = _watchdogs.get(id(comm))
    if watchdog is None:
        return contextlib.nullcontext()
    return watchdog.guard(what)


def announce_leaving(comm, reason: str) -> None:
    """Tell the other ranks that this one leaves training.

    Their watchdogs end the job (see :func:`watchdog_of`).
    """
    watchdog = _watchdogs.get(id(comm))
    if watchdog is not None:
        watchdog.announce(f'{reason} (rank {comm.Get_rank()})')
