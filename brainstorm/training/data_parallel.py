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

MPI comes from mpi4py (``pip install brainstorm[mpi]``), which is only
imported when a :class:`DataParallel` stepper first needs its
communicator; ``import brainstorm`` never initialises MPI. Launch a script
with ``mpiexec -n 4 python script.py``.
"""

from __future__ import annotations

import os
import sys
import time
import traceback

import numpy as np

from brainstorm.arguments import Arg, Bool, Instance
from brainstorm.describable import Describable
from brainstorm.training.steppers import SgdStepper, TrainingStepper
from brainstorm.utils import TrainingValidationError

__all__ = ['DataParallel', 'communicator_of', 'is_root_process',
           'mpi_world_size', 'mpi_world_rank', 'abort_on_exception']

# environment variables in which launchers announce the number of
# processes and the rank of each (MPICH/Hydra, Open MPI, PMIx, MVAPICH)
_SIZE_VARIABLES = ('PMI_SIZE', 'OMPI_COMM_WORLD_SIZE', 'PMIX_SIZE',
                   'MV2_COMM_WORLD_SIZE')
_RANK_VARIABLES = ('PMI_RANK', 'OMPI_COMM_WORLD_RANK', 'PMIX_RANK',
                   'MV2_COMM_WORLD_RANK')


def _mpi():
    """The ``mpi4py.MPI`` module (initialises MPI on first use)."""
    from brainstorm.optional import has_mpi4py, mpi4py_mock
    if not has_mpi4py:
        mpi4py_mock()  # raises the ImportError explaining the install
    from mpi4py import MPI
    return MPI


def mpi_world_size() -> int:
    """The number of processes ``mpiexec`` started, read from the
    environment (MPICH/Hydra, Open MPI, PMIx, MVAPICH); 1 without a
    launcher. Does not import mpi4py or initialise MPI.

    Example:
        >>> use_mpi = mpi_world_size() > 1  # doctest: +SKIP
    """
    return _from_environment(_SIZE_VARIABLES, 1)


def mpi_world_rank() -> int:
    """This process's rank among those ``mpiexec`` started, read from the
    environment like :func:`mpi_world_size`; 0 without a launcher.

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


_abort_installed = []


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
    __default_values__ = {'check_finite': True}
    _own_attributes = frozenset({'stepper', 'check_finite'})

    def __init__(self, stepper, comm=None, check_finite: bool = True):
        if not isinstance(stepper, TrainingStepper):
            raise TrainingValidationError(
                'DataParallel: stepper must be a TrainingStepper (e.g. '
                f'MomentumStepper(0.1)). Received: {stepper!r}')
        if not isinstance(check_finite, bool):
            raise TrainingValidationError(
                'DataParallel: check_finite must be a bool. Received: '
                f'check_finite={check_finite!r}')
        self.stepper = stepper
        self.check_finite = check_finite
        self._comm = comm
        self._reseeded = None
        self._sizes = None
        self._maintained = None
        self._maintained_values = None

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
        if self._maintained is not None:
            self._average_maintained_parameters(net, float(local / total))
        _on_host(h, gradients,
                 lambda values: comm.Allreduce(self._mpi_in_place(), values))

    @staticmethod
    def _mpi_in_place():
        return _mpi().IN_PLACE
