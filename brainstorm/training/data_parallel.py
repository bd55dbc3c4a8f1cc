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

from typing import Any

import numpy as np

from brainstorm.arguments import Arg, Bool, Check, Instance, Optional, Real
from brainstorm.data_iterators import Shard
from brainstorm.describable import Describable
from brainstorm.errors import TrainingValidationError
from brainstorm.parallel import (
    abort_on_exception,
    announce_leaving,
    communicator_of,
    guarded,
    is_root_process,
    mpi_world_rank,
    mpi_world_size,
    processes_of,
    protect_job,
    watchdog_of,
    world_communicator,
)
from brainstorm.parallel import mpi_module as _mpi
from brainstorm.scorers import batch_size_of
from brainstorm.structure.prediction import check_parameters_set
from brainstorm.training.steppers import SgdStepper, TrainingStepper

__all__ = [
    'DataParallel',
    'share_shard_states',
    'communicator_of',
    'is_root_process',
    'mpi_world_size',
    'mpi_world_rank',
    'abort_on_exception',
    'announce_leaving',
    'guarded',
    'watchdog_of',
]


def _on_host(handler, array, collective, write: bool = True) -> None:
    """Run ``collective`` (an in-place MPI call) on ``array``.

    Directly on a contiguous NumPy array, else on a host copy written back
    after (unless ``write`` is False: ``collective`` only reads).
    """
    if isinstance(array, np.ndarray) and array.flags.c_contiguous:
        collective(array)
    else:
        values = np.ascontiguousarray(handler.get_numpy_copy(array))
        collective(values)
        if write:
            handler.set_from_numpy(array, values)


class _Communicator(Check):
    """An mpi4py communicator, or a stand-in with its rank methods.

    Every use of a communicator asks it for ``Get_size()`` and
    ``Get_rank()`` first; the collectives (``Bcast``, ``Allreduce``,
    ``allgather``) are called only with two or more processes, and a
    stand-in used only for its rank need not have them.
    """

    expected = 'an mpi4py communicator (an object with callable Get_size and Get_rank)'
    invalid_examples = ('x', 5, object(), SgdStepper)

    @property
    def example(self) -> object:
        """A stand-in communicator of one process."""
        return _OneProcess()

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it has callable ``Get_size`` and ``Get_rank``."""
        if isinstance(value, type) or not all(
            callable(getattr(value, name, None)) for name in ('Get_size', 'Get_rank')
        ):
            raise TypeError
        return value


class _OneProcess:
    """The declared example of ``comm``: rank 0 of 1 (no collective runs)."""

    def Get_size(self) -> int:
        return 1

    def Get_rank(self) -> int:
        return 0


def _reseed_state(rnd, rank: int) -> None:
    """Reseed ``rnd`` on ranks > 0 from its seed and the rank."""
    if rank == 0 or rnd is None or not hasattr(rnd, 'set_seed'):
        return
    seed = int(rnd.get_seed()) if hasattr(rnd, 'get_seed') else 0
    derived = np.random.SeedSequence([seed, rank]).generate_state(1)[0]
    rnd.set_seed(int(derived) % 1000000000)


def _share_random_state(comm, rnd, what: str) -> None:
    """Give ``rnd`` rank 0's state (and seed) on every rank; a collective.

    Where the ranks' states agree already (``global_rnd.set_seed`` with the
    same seed on every rank, or a resumed run) nothing changes.
    """
    if rnd is None or not hasattr(rnd, 'get_state'):
        return
    kind, key, pos, has_gauss, cached = rnd.get_state()
    key = np.array(key, dtype=np.uint32)
    seed = getattr(rnd, '_seed', 0)
    rest = np.array([pos, has_gauss, cached, seed], dtype=np.float64)
    with guarded(comm, f'the broadcast of the random state of {what}'):
        comm.Bcast(key, root=0)
        comm.Bcast(rest, root=0)
    rnd.set_state((kind, key, int(rest[0]), int(rest[1]), float(rest[2])))
    if hasattr(rnd, '_seed'):
        rnd._seed = int(rest[3])  # what get_seed() reports, as on rank 0


def share_shard_states(comm, iterators) -> None:
    """Give each Shard in ``iterators``, and what it wraps, rank 0's states.

    A collective: every rank calls it with the same iterators. Afterwards
    all ranks shuffle alike, so they walk through the same global batches
    also where their processes were seeded differently (a script that
    never calls ``global_rnd.set_seed``). Nothing happens without a
    communicator of two or more ranks.

    Args:
        comm: an mpi4py communicator (or None).
        iterators: data iterators; those without a Shard are left alone.
    """
    size = getattr(comm, 'Get_size', None)
    if size is None or size() < 2:
        return
    for iterator in iterators:
        while iterator is not None and not isinstance(iterator, Shard):
            iterator = getattr(iterator, 'iter', None)
        below: Any = iterator
        while below is not None:
            _share_random_state(comm, getattr(below, 'rnd', None), type(below).__name__)
            below = getattr(below, 'iter', None)


class _SynchronizedNetwork:
    """Stands in for the network inside the wrapped stepper.

    The backward pass is followed by the gradient Allreduce, and the
    network's gradient modifiers then act on the summed gradients (the
    global batch's); every other attribute is read from the network.
    """

    def __init__(self, net, owner: DataParallel):
        self._net = net
        self._owner = owner

    def backward_pass(self, *args, **kwargs) -> None:
        net = self._net
        self._owner._synchronized = True
        net._gradient_modifiers_deferred = True
        try:
            net.backward_pass(*args, **kwargs)
        finally:
            net._gradient_modifiers_deferred = False
        self._owner._synchronize_gradients(net)
        net.apply_gradient_modifiers()

    def __getattr__(self, name):
        # only called for names not set in __init__; object.__getattribute__
        # raises AttributeError (not recursion) on an uninitialised copy
        return getattr(object.__getattribute__(self, '_net'), name)


class DataParallel(Describable):
    """Data-parallel training: averages a stepper's gradients over processes.

    Wraps a stepper and averages its gradients over all MPI processes.

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

    Made under an MPI launcher with two or more processes (or given such
    an mpi4py communicator), it installs :func:`abort_on_exception` and
    starts the watchdog at once: a rank that fails after this, also before
    ``train()`` (e.g. its data iterator refuses its data), ends the whole
    job with a message naming it instead of leaving the others waiting.

    With a communicator of size 1 it *is* the wrapped stepper (no MPI
    calls). With more processes, :meth:`start` also

    * broadcasts rank 0's parameters, and the network's random state
      (it seeds the gradient modifiers, which act on the summed gradients
      after the Allreduce);
    * reseeds the handler's random state on ranks > 0 (once per network
      and handler, from its seed and the rank; again when
      ``net.set_handler`` gave it another), so that e.g. dropout draws
      different masks on different ranks;
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
        TrainingValidationError: if ``stepper`` is not a stepper, or
            ``comm`` is neither None nor a communicator.
        ImportError: when the communicator is needed and mpi4py is missing.
    """

    __arguments__ = {
        'stepper': Arg(Instance(TrainingStepper, example=lambda: SgdStepper())),
        'comm': Arg(Optional(_Communicator()), init_only=True),
        'check_finite': Arg(Bool(), omit_default=True),
        'timeout': Arg(
            Optional(Real(0, include_low=False, finite=False)), omit_default=True
        ),
    }

    __undescribed__ = {
        '_comm': None,
        '_reseeded': None,
        '_reseeded_iterators': [],
        '_sizes': None,
        '_maintained': None,
        '_maintained_values': None,
        '_maintained_before': None,
        '_synchronized': False,
    }
    _own_attributes = frozenset({'stepper', 'check_finite', 'timeout'})

    def __init__(
        self,
        stepper,
        comm=None,
        check_finite: bool = True,
        timeout: float | None = 600.0,
    ):
        # stepper, comm, check_finite and timeout are checked as declared above
        self.stepper = stepper
        self.check_finite = check_finite
        self.timeout = timeout
        self._comm = comm
        self._reseeded: tuple | None = None  # (network, handler)
        self._reseeded_iterators: list = []
        # set by start(net)
        self._sizes: Any = None
        self._maintained: Any = None
        self._maintained_values: Any = None
        self._maintained_before: Any = None
        self._synchronized = False
        self._protect()

    def __init_from_description__(self, description: dict) -> None:
        """Protect the job as ``__init__`` does (see ``_protect``)."""
        self._protect()

    def _protect(self) -> None:
        """From now on no failure of this rank leaves the others waiting.

        Under an MPI launcher with two or more processes, an uncaught
        exception (e.g. a data iterator refusing this rank's data before
        ``train()``) aborts the job naming this rank, and the watchdog
        tells the others when this process ends (see
        ``brainstorm.parallel.protect_job``).
        """
        protect_job(self._comm, getattr(self, 'timeout', 600.0))

    # ---------------------------------------------- attribute forwarding ---

    def __getattr__(self, name):
        # only called for names DataParallel does not have itself
        if name.startswith('_') or 'stepper' not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__['stepper'], name)

    def __setattr__(self, name, value):
        inner = self.__dict__.get('stepper')
        if (
            name.startswith('_')
            or name in self._own_attributes
            or inner is None
            or not hasattr(inner, name)
        ):
            object.__setattr__(self, name, value)
        else:
            setattr(inner, name, value)

    # ----------------------------------------------------------- public ---

    @property
    def comm(self):
        """The communicator (``MPI.COMM_WORLD`` unless one was given)."""
        self._comm = world_communicator(self._comm)
        return self._comm

    @property
    def processes(self):
        """The processes of the run (see ``brainstorm.parallel.processes_of``)."""
        return processes_of(self.comm)

    @property
    def rank(self) -> int:
        """This process's rank in :attr:`comm`."""
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        """The number of processes in :attr:`comm`."""
        return int(self.comm.Get_size())

    def start(self, net) -> None:
        """Start the wrapped stepper on ``net``.

        With several processes, broadcast rank 0's parameters first (see
        the class docstring).
        """
        comm = self.comm
        if comm.Get_size() == 1:
            self.stepper.start(net)
            return
        abort_on_exception(comm)
        watchdog = watchdog_of(comm)
        # also None (no limit), which watchdog_of(comm, None) would keep
        watchdog.timeout = getattr(self, 'timeout', 600.0)
        with watchdog.guard('the parameter counts of DataParallel.start'):
            counts = comm.allgather(int(net.buffer.parameters.size))
        if len(set(counts)) > 1:
            sizes = ', '.join(f'rank {r}: {n}' for r, n in enumerate(counts))
            raise TrainingValidationError(
                'DataParallel.start: every rank must train the same network, '
                f'but the numbers of parameters differ ({sizes}). Build the '
                'network from the same code and arguments on every rank.'
            )
        if comm.Get_rank() == 0:
            # every rank trains from rank 0's parameters: all zeros there
            # (never initialised) are refused before they are broadcast
            check_parameters_set(net)
        with watchdog.guard('the parameter broadcast of DataParallel.start'):
            _on_host(
                net.handler,
                net.buffer.parameters,
                lambda values: comm.Bcast(values, root=0),
            )
        # rank 0's parameters, checked there
        net._parameters_set = True
        # the network's random state seeds its gradient modifiers, which
        # now act on the same summed gradients on every rank
        _share_random_state(comm, getattr(net, 'rnd', None), 'the network')
        self._reseed(net)
        self._sizes = np.zeros(1, dtype=np.float64)
        self._find_maintained_parameters(net)
        self.stepper.start(net)
        self.stepper.net = _SynchronizedNetwork(net, self)

    def reseed_iterators(self, iterators) -> None:
        """Give each rank its own random streams in the iterators above a Shard.

        Every rank builds its iterators from the same seeds, so an
        augmentation wrapped around a :class:`~brainstorm.data_iterators.Shard`
        (e.g. ``AddGaussianNoise``) would draw the same noise on every rank.
        On ranks > 0 the random state of each iterator between the top and
        the Shard is reseeded (once per iterator, from its seed and the
        rank, like the handler's in :meth:`start`). The Shard and what it
        wraps keep their streams: the ranks must shuffle alike. Iterators
        without a Shard are left alone. :class:`~brainstorm.training.Trainer`
        calls it at the start of ``train``.

        The Shard and the iterators below it first get rank 0's random
        states, so that every rank walks through the same global batches
        also where the processes were seeded differently (a script that
        never calls ``global_rnd.set_seed``: the ranks shuffled differently
        and took parts of different global batches).

        Args:
            iterators: the data iterators of the run.
        """
        if self.size == 1:
            return
        iterators = list(iterators)
        share_shard_states(self.comm, iterators)
        rank = self.rank
        for iterator in iterators:
            above = []
            while iterator is not None and not isinstance(iterator, Shard):
                above.append(iterator)
                iterator = getattr(iterator, 'iter', None)
            if iterator is None:
                continue
            for owner in above:
                if not any(owner is done for done in self._reseeded_iterators):
                    _reseed_state(getattr(owner, 'rnd', None), rank)
                    self._reseeded_iterators.append(owner)

    def run(self) -> None:
        """Run one step of the wrapped stepper, gradients summed over ranks.

        The gradients are summed over all ranks between the backward pass
        and the update, and the parameters layers maintain themselves are
        averaged then; a stepper without a backward pass
        (``ForwardStepper``, re-estimating BatchNorm's statistics) gets
        them averaged after its step.
        """
        stepper = self.stepper
        net = getattr(stepper.net, '_net', None)
        if net is None or self.comm.Get_size() == 1:
            stepper.run()
            return
        self._reseed(net)  # a handler set since start: its own streams
        self._remember_maintained(net)
        self._synchronized = False
        stepper.run()
        if not self._synchronized and self._maintained is not None:
            total, local = self._global_batch_size(net)
            if total > 0:
                with guarded(self.comm, 'the statistics Allreduce of a step'):
                    self._average_maintained_parameters(net, float(local / total))

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
        """Give each rank its own random streams, derived from rank 0's seed.

        The streams are those of the handler (dropout masks, noise);
        reseeded once per network, so a second ``train`` call continues
        them.
        """
        if (
            self._reseeded is not None
            and self._reseeded[0] is net
            and self._reseeded[1] is net.handler
        ):
            return
        _reseed_state(getattr(net.handler, 'rnd', None), self.comm.Get_rank())
        self._reseeded = (net, net.handler)

    def _find_maintained_parameters(self, net) -> None:
        """Find the parameters that layers maintain themselves.

        These are running statistics (``trainable_mask`` 0): each rank
        updates them from its own batch, so they are averaged over the
        ranks every step.
        """
        mask = net.trainable_mask
        self._maintained = self._maintained_values = self._maintained_before = None
        if mask is None:
            return
        indices = np.flatnonzero(net.handler.get_numpy_copy(mask) == 0)
        if indices.size:
            self._maintained = indices

    def _maintained_buffers(self, dtype) -> tuple:
        """Host arrays for the maintained values, in the parameters' dtype.

        Made again if the dtype changed (``net.set_handler`` to another
        dtype during training).
        """
        values = self._maintained_values
        if values is None or values.dtype != dtype:
            size = self._maintained.size
            self._maintained_values = np.zeros(size, dtype=dtype)
            self._maintained_before = np.zeros(size, dtype=dtype)
        return self._maintained_values, self._maintained_before

    def _remember_maintained(self, net) -> None:
        """Keep the maintained values before a step (equal on all ranks)."""
        if self._maintained is None:
            return

        def remember(parameters):
            _, before = self._maintained_buffers(parameters.dtype)
            np.take(parameters, self._maintained, out=before)

        _on_host(net.handler, net.buffer.parameters, remember, write=False)

    def _average_maintained_parameters(self, net, weight: float) -> None:
        """Average the changes the ranks made to the maintained values.

        Each rank's change in this step is weighted by its share of the
        global batch and summed, and added to the value before the step:
        the weighted mean of the ranks' values, and exactly the old value
        where no rank changed it (a constant such as a Clockwork layer's
        ``timing``; a weighted mean of equal values may differ from them
        in the last bit).
        """

        def average(parameters):
            values, before = self._maintained_buffers(parameters.dtype)
            np.take(parameters, self._maintained, out=values)
            np.subtract(values, before, out=values)
            np.multiply(values, weight, out=values)
            self.comm.Allreduce(self._mpi_in_place(), values)
            np.add(before, values, out=values)
            parameters[self._maintained] = values

        _on_host(net.handler, net.buffer.parameters, average)

    def _global_batch_size(self, net) -> tuple:
        """The global batch size (summed over the ranks) and the local one."""
        local = batch_size_of(net)
        sizes = self._sizes
        sizes[0] = local
        with guarded(self.comm, 'the batch size Allreduce of a training step'):
            self.comm.Allreduce(self._mpi_in_place(), sizes)
        return sizes[0], local

    def _synchronize_gradients(self, net) -> None:
        """Scale the local gradients by local / global batch size and sum them.

        The sum over all ranks is taken in place.
        """
        h = net.handler
        comm = self.comm
        gradients = net.buffer.gradients
        total, local = self._global_batch_size(net)
        if self.check_finite and not h.is_fully_finite(gradients):
            losses = net.get_loss_values()
            raise FloatingPointError(
                f'DataParallel: rank {comm.Get_rank()} of {comm.Get_size()}: '
                'the gradients of this step are not finite (NaN or inf), '
                f'with local batch size {local} and losses {dict(losses)}. '
                'Lower the learning rate, clip gradients (clip_norm) or '
                'check the data of this rank.'
            )
        if total <= 0:
            # a global batch without samples: a step of zero gradients, as
            # in one process (every rank sees the same total)
            h.fill(gradients, 0.0)
            return
        h.mult_st(float(local / total), gradients, gradients)
        with guarded(comm, 'the gradient Allreduce of a training step'):
            if self._maintained is not None:
                self._average_maintained_parameters(net, float(local / total))
            _on_host(
                h,
                gradients,
                lambda values: comm.Allreduce(self._mpi_in_place(), values),
            )

    @staticmethod
    def _mpi_in_place():
        return _mpi().IN_PLACE
