"""Data-parallel training over MPI processes (one machine or many).

Every process (rank) holds a full copy of the network and trains on its
own part of each global minibatch; :class:`DataParallel` keeps the copies
identical:

* at :meth:`DataParallel.start` rank 0's flat parameter array is
  broadcast, so all ranks start from the same parameters;
* in every step each rank runs the forward and backward pass on its local
  batch; its flat gradient array is scaled by ``local_batch_size /
  global_batch_size`` and summed over all ranks with one in-place
  ``Allreduce``. Losses are divided by the batch size, so the sum is the
  gradient of the global batch, also when ranks hold different numbers of
  samples (a last, smaller batch);
* then the wrapped stepper updates the parameters as in a single process.
  Its state (velocities, moments) and hyper-parameters stay identical on
  all ranks, because they only ever see the summed gradients.

The data is split with :class:`~brainstorm.data_iterators.Shard`, the
trainer aggregates training and validation figures over all ranks, only
rank 0 prints and writes files, and stopping decisions are combined so
that all ranks stop together (see :class:`~brainstorm.training.Trainer`
and :mod:`brainstorm.hooks`).

MPI comes from mpi4py (``pip install 'brainstorm-nn[mpi]'``), which is only
imported when a :class:`DataParallel` stepper first needs its
communicator; ``import brainstorm`` never initialises MPI. Launch a script
with ``mpiexec -n 4 python script.py``.
"""

from __future__ import annotations

import sys
import time
import traceback
from typing import Any

import numpy as np

from brainstorm.arguments import Arg, Bool, Instance
from brainstorm.describable import Describable
from brainstorm.parallel import mpi_module as _mpi
from brainstorm.parallel import mpi_world_rank, mpi_world_size
from brainstorm.training.steppers import SgdStepper, TrainingStepper
from brainstorm.utils import TrainingValidationError

__all__ = ['DataParallel', 'communicator_of', 'is_root_process',
           'mpi_world_size', 'mpi_world_rank', 'abort_on_exception',
           'announce_leaving', 'guarded', 'watchdog_of']

_abort_installed: list = []


def abort_on_exception(comm=None) -> None:
    """Make an uncaught exception on this rank end the whole MPI job.

    Installs a ``sys.excepthook`` that prints the traceback, prefixed with
    the rank, and calls ``comm.Abort(1)``: without it the other ranks would
    wait forever in their next collective call. :meth:`DataParallel.start`
    calls it when the communicator has more than one process. Calling it
    again has no effect.

    Args:
        comm: the communicator (default: ``MPI.COMM_WORLD``).
    """
    if _abort_installed:
        return
    if comm is None:
        comm = _mpi().COMM_WORLD
    previous = sys.excepthook
    rank, size = comm.Get_rank(), comm.Get_size()

    def excepthook(exc_type, exc, tb):
        lines = traceback.format_exception(exc_type, exc, tb)
        text = ''.join(f'[rank {rank}] {line}' for chunk in lines
                       for line in chunk.splitlines(keepends=True))
        try:
            sys.stderr.write(
                f'[rank {rank}] brainstorm: uncaught {exc_type.__name__} on '
                f'rank {rank} of {size}; aborting all ranks.\n{text}')
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


# ---------------------------------------------------------- watchdog ----

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

    def __init__(self, comm, timeout: float | None):
        import atexit
        import threading
        self.comm = comm
        self.rank, self.size = comm.Get_rank(), comm.Get_size()
        self.timeout = timeout
        self.training = 0  # depth of running Trainer.train calls
        self.collective = None  # (what, monotonic start) while in one
        self.gone: tuple | None = None  # (rank, reason, during) of a rank that left
        self._requests: list = []
        self._announced = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name='brainstorm-mpi-watchdog')
        self._thread.start()
        atexit.register(self._at_exit)

    def _run(self) -> None:
        MPI = _mpi()
        status = MPI.Status()
        while not self._stop.wait(0.05):
            try:
                while self.comm.Iprobe(source=MPI.ANY_SOURCE,
                                       tag=_LEAVE_TAG, status=status):
                    source = status.Get_source()
                    during, reason = self.comm.recv(source=source,
                                                    tag=_LEAVE_TAG)
                    if self.gone is None:
                        self.gone = (source, reason, during)
            except Exception:  # MPI finalised under us at exit
                return
            # a rank that left during training is missed by any rank still
            # training; one whose process ended after training only by a
            # rank waiting for it in a collective call (it may just have
            # finished first)
            if self.gone is not None and (
                    self.collective is not None or
                    (self.training and self.gone[2])):
                source, reason, _ = self.gone
                self._abort(f'rank {source} of {self.size} left training: '
                            f'{reason}')
            collective = self.collective
            if collective is not None and self.timeout is not None and \
                    time.monotonic() - collective[1] > self.timeout:
                self._abort(
                    f'rank {self.rank} of {self.size} waited more than '
                    f'{self.timeout:g} s in {collective[0]}: another rank '
                    'left training without a word (killed, or it never '
                    'reached this call) or hangs (DataParallel(timeout=...) '
                    'sets this limit)')

    def _abort(self, message: str) -> None:
        try:
            sys.stderr.write(f'[rank {self.rank}] brainstorm: {message}; '
                             f'ending all {self.size} ranks.\n')
            sys.stderr.flush()
            time.sleep(0.5)  # let the launcher forward the message
        finally:
            self.comm.Abort(1)

    def guard(self, what: str):
        """Context manager marking a collective call ``what``."""
        watchdog = self

        class _Guard:
            def __enter__(self):
                watchdog.collective = (what, time.monotonic())

            def __exit__(self, *exc):
                watchdog.collective = None

        return _Guard()

    def announce(self, reason: str, during_training: bool = True) -> None:
        """Tell every other rank that this one leaves (training, or its
        process ends: ``during_training=False``)."""
        if self._announced:
            return
        self._announced = True
        for rank in range(self.size):
            if rank != self.rank:
                # small messages go out at once (eager protocol); the
                # requests are kept so they are not cancelled
                self._requests.append(self.comm.isend(
                    (during_training, reason[:500]), dest=rank,
                    tag=_LEAVE_TAG))

    def _at_exit(self) -> None:
        # also after training: another rank may still call train() again
        # and would wait for this one for ever (a rank that is not training
        # only records the message)
        try:
            self.announce(f'its process ended (rank {self.rank})',
                          during_training=bool(self.training))
        except Exception:  # MPI already finalised: nobody to tell
            pass
        self._stop.set()
        self._thread.join(1.0)


class _NullWatchdog:
    """The watchdog of a communicator that is not mpi4py's."""

    training = 0
    timeout = None

    def guard(self, what: str):
        import contextlib
        return contextlib.nullcontext()

    def announce(self, reason: str, during_training: bool = True) -> None:
        pass


def watchdog_of(comm, timeout: float | None = None):
    """The process's watchdog thread for ``comm`` (started on first
    use; ``timeout`` replaces the current one when given)."""
    watchdog = _watchdogs.get(id(comm))
    if watchdog is None:
        if not type(comm).__module__.startswith('mpi4py'):
            # a stand-in communicator (tests): no MPI, no thread
            watchdog = _watchdogs[id(comm)] = _NullWatchdog()
        else:
            watchdog = _watchdogs[id(comm)] = _Watchdog(comm, timeout)
    elif timeout is not None:
        watchdog.timeout = timeout
    return watchdog


def guarded(comm, what: str):
    """A context manager marking a collective call on ``comm`` for the
    watchdog (a no-op without one)."""
    watchdog = _watchdogs.get(id(comm))
    if watchdog is None:
        import contextlib
        return contextlib.nullcontext()
    return watchdog.guard(what)


def announce_leaving(comm, reason: str) -> None:
    """Tell the other ranks that this one leaves training (see
    watchdog thread); their watchdogs end the job."""
    watchdog = _watchdogs.get(id(comm))
    if watchdog is not None:
        watchdog.announce(f'{reason} (rank {comm.Get_rank()})')


def communicator_of(stepper):
    """The communicator of a :class:`DataParallel` stepper with more than
    one process, else None (single-process training).

    The trainer and the hooks use it to aggregate figures over the ranks
    and to let only rank 0 print and write files.
    """
    if isinstance(stepper, DataParallel):
        comm = stepper.comm
        if comm.Get_size() > 1:
            return comm
    return None


def is_root_process(comm) -> bool:
    """Whether this process prints and writes files: True without a
    communicator (single-process training, see :func:`communicator_of`)
    and on rank 0."""
    return comm is None or comm.Get_rank() == 0


def _on_host(handler, array, collective) -> None:
    """Run ``collective`` (an in-place MPI call) on ``array``: directly on
    a contiguous NumPy array, else on a host copy written back after."""
    if isinstance(array, np.ndarray) and array.flags.c_contiguous:
        collective(array)
    else:
        values = np.ascontiguousarray(handler.get_numpy_copy(array))
        collective(values)
        handler.set_from_numpy(array, values)


class _SynchronizedNetwork:
    """Stands in for the network inside the wrapped stepper: the backward
    pass is followed by the gradient Allreduce, every other attribute is
    read from the network."""

    def __init__(self, net, owner: DataParallel):
        self._net = net
        self._owner = owner

    def backward_pass(self, *args, **kwargs) -> None:
        self._net.backward_pass(*args, **kwargs)
        self._owner._synchronize_gradients(self._net)

    def __getattr__(self, name):
        # only called for names not set in __init__; object.__getattribute__
        # raises AttributeError (not recursion) on an uninitialised copy
        return getattr(object.__getattribute__(self, '_net'), name)


class DataParallel(Describable):
    """Data-parallel training: wraps a stepper and averages its gradients
    over all MPI processes.

    ``DataParallel(MomentumStepper(0.1, momentum=0.9))`` trains exactly like
    the wrapped stepper on one process whose batches are the union of the
    ranks' batches (up to floating-point rounding of the sum). Any stepper
    works, :class:`~brainstorm.training.steppers.MultiStepper` included.

    Attribute access falls through to the wrapped stepper, so schedules
    and hooks work unchanged: ``ModifyStepperAttribute(schedule,
    'learning_rate')`` or ``'steppers.Hid1.learning_rate'`` reach it.

    Parameters that layers maintain themselves (``trainable_mask`` 0, e.g.
    BatchNorm's running mean and deviation) are updated by each rank from
    its local batch and then averaged over the ranks, weighted by batch
    size, in every step. (BatchNorm still normalises with the statistics
    of each rank's local batch: there is no synchronised batch
    normalisation. Its running mean follows the mean of the global batch;
    its running deviation is the weighted mean of the ranks' deviations.)

    With a communicator of size 1 it *is* the wrapped stepper (no MPI
    calls). With more processes, :meth:`start` also

    * broadcasts rank 0's parameters;
    * reseeds the handler's random state on ranks > 0 (once per network,
      from its seed and the rank), so that e.g. dropout draws different
      masks on different ranks;
    * installs :func:`abort_on_exception`.

    Args:
        stepper: the stepper to wrap (any
            :class:`~brainstorm.training.steppers.TrainingStepper`).
        comm: an mpi4py communicator; default ``MPI.COMM_WORLD`` (looked
            up when first needed; not part of the description).
        check_finite: before the Allreduce, check that the local gradients
            are finite and raise FloatingPointError naming the rank if not
            (a NaN would otherwise spread to every rank).
        timeout: seconds a collective call of the training may wait for
            the other ranks before the watchdog ends the job (None: no
            limit). When a rank leaves training in any other way
            (exception, ``sys.exit``, short data, its process ending) it
            tells the others, which end at once. See
            watchdog thread.

    Raises:
        TrainingValidationError: if ``stepper`` is not a stepper.
        ImportError: when the communicator is needed and mpi4py is missing.
    """

    __arguments__ = {
        'stepper': Arg(Instance(TrainingStepper, example=lambda: SgdStepper())),
        'check_finite': Arg(Bool(), default=True),
    }

    __undescribed__ = {'_comm': None, '_reseeded': None,
                       '_sizes': None, '_maintained': None,
                       '_maintained_values': None}
    __default_values__ = {'check_finite': True, 'timeout': 600.0}
    _own_attributes = frozenset({'stepper', 'check_finite', 'timeout'})

    def __init__(self, stepper, comm=None, check_finite: bool = True,
                 timeout: float | None = 600.0):
        if not isinstance(stepper, TrainingStepper):
            raise TrainingValidationError(
                'DataParallel: stepper must be a TrainingStepper (e.g. '
                f'MomentumStepper(0.1)). Received: {stepper!r}')
        if not isinstance(check_finite, bool):
            raise TrainingValidationError(
                'DataParallel: check_finite must be a bool. Received: '
                f'check_finite={check_finite!r}')
        if timeout is not None and (
                isinstance(timeout, bool) or
                not isinstance(timeout, (int, float)) or not timeout > 0):
            raise TrainingValidationError(
                'DataParallel: timeout must be a positive number of seconds '
                f'or None. Received: timeout={timeout!r}')
        self.stepper = stepper
        self.check_finite = check_finite
        self.timeout = timeout
        self._comm = comm
        self._reseeded = None
        # set by start(net)
        self._sizes: Any = None
        self._maintained: Any = None
        self._maintained_values: Any = None

    # ---------------------------------------------- attribute forwarding ---

    def __getattr__(self, name):
        # only called for names DataParallel does not have itself
        if name.startswith('_') or 'stepper' not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__['stepper'], name)

    def __setattr__(self, name, value):
        inner = self.__dict__.get('stepper')
        if name.startswith('_') or name in self._own_attributes or \
                inner is None or not hasattr(inner, name):
            object.__setattr__(self, name, value)
        else:
            setattr(inner, name, value)

    # ----------------------------------------------------------- public ---

    @property
    def comm(self):
        """The communicator (``MPI.COMM_WORLD`` unless one was given)."""
        if self._comm is None:
            self._comm = _mpi().COMM_WORLD
        return self._comm

    @property
    def rank(self) -> int:
        """This process's rank in :attr:`comm`."""
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        """The number of processes in :attr:`comm`."""
        return int(self.comm.Get_size())

    def start(self, net) -> None:
        """Start the wrapped stepper on ``net``; with several processes,
        broadcast rank 0's parameters first (see the class docstring)."""
        comm = self.comm
        if comm.Get_size() == 1:
            self.stepper.start(net)
            return
        abort_on_exception(comm)
        watchdog = watchdog_of(comm, getattr(self, 'timeout', 600.0))
        with watchdog.guard('the parameter broadcast of DataParallel.start'):
            _on_host(net.handler, net.buffer.parameters,
                     lambda values: comm.Bcast(values, root=0))
        self._reseed(net)
        self._sizes = np.zeros(1, dtype=np.float64)
        self._find_maintained_parameters(net)
        self.stepper.start(net)
        self.stepper.net = _SynchronizedNetwork(net, self)

    def run(self) -> None:
        """One step of the wrapped stepper, with the gradients summed over
        all ranks between the backward pass and the update."""
        self.stepper.run()

    def get_state(self):
        """The wrapped stepper's state (the same on every rank)."""
        return self.stepper.get_state()

    def set_state(self, state: dict) -> None:
        """Restore a state made by :meth:`get_state`."""
        self.stepper.set_state(state)

    def __repr__(self):
        return f'DataParallel({self.stepper!r})'

    # ------------------------------------------------------- internals ----

    def _reseed(self, net) -> None:
        """Different random streams per rank (dropout masks, noise drawn by
        the handler), derived from rank 0's seed; once per network, so a
        second ``train`` call continues the streams."""
        rank = self.comm.Get_rank()
        rnd = getattr(net.handler, 'rnd', None)
        if rank == 0 or rnd is None or not hasattr(rnd, 'set_seed') or \
                self._reseeded is net:
            return
        seed = int(rnd.get_seed()) if hasattr(rnd, 'get_seed') else 0
        derived = np.random.SeedSequence([seed, rank]).generate_state(1)[0]
        rnd.set_seed(int(derived) % 1000000000)
        self._reseeded = net

    def _find_maintained_parameters(self, net) -> None:
        """Indices of the parameters layers maintain themselves (running
        statistics, ``trainable_mask`` 0): each rank updates them from its
        own batch, so they are averaged over the ranks every step."""
        mask = net.trainable_mask
        self._maintained = self._maintained_values = None
        if mask is None:
            return
        indices = np.flatnonzero(net.handler.get_numpy_copy(mask) == 0)
        if indices.size:
            self._maintained = indices
            self._maintained_values = np.zeros(indices.size,
                                               dtype=net.handler.dtype)

    def _average_maintained_parameters(self, net, weight: float) -> None:
        values = self._maintained_values

        def average(parameters):
            np.take(parameters, self._maintained, out=values)
            np.multiply(values, weight, out=values)
            self.comm.Allreduce(self._mpi_in_place(), values)
            parameters[self._maintained] = values

        _on_host(net.handler, net.buffer.parameters, average)

    def _synchronize_gradients(self, net) -> None:
        """Scale the local gradients by local / global batch size and sum
        them over all ranks, in place."""
        from brainstorm.scorers import _get_batch_size
        h = net.handler
        comm = self.comm
        gradients = net.buffer.gradients
        local = _get_batch_size(net)
        sizes = self._sizes
        sizes[0] = local
        with guarded(comm, 'the batch size Allreduce of a training step'):
            comm.Allreduce(self._mpi_in_place(), sizes)
        total = sizes[0]
        if self.check_finite and not h.is_fully_finite(gradients):
            losses = net.get_loss_values()
            raise FloatingPointError(
                f'DataParallel: rank {comm.Get_rank()} of {comm.Get_size()}: '
                'the gradients of this step are not finite (NaN or inf), '
                f'with local batch size {local} and losses {dict(losses)}. '
                'Lower the learning rate, clip gradients (clip_norm) or '
                'check the data of this rank.')
        if total <= 0:
            raise TrainingValidationError(
                'DataParallel: all ranks received empty batches.')
        h.mult_st(float(local / total), gradients, gradients)
        with guarded(comm, 'the gradient Allreduce of a training step'):
            if self._maintained is not None:
                self._average_maintained_parameters(net,
                                                    float(local / total))
            _on_host(h, gradients, lambda values: comm.Allreduce(
                self._mpi_in_place(), values))

    @staticmethod
    def _mpi_in_place():
        return _mpi().IN_PLACE
