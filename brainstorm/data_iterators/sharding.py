"""The wrapper giving each process its share of every batch: :class:`Shard`."""

from __future__ import annotations

from brainstorm.arguments import (
    Arg,
    Instance,
    Int,
    Optional,
)
from brainstorm.data_iterators.base import DataIterator, _part_bounds
from brainstorm.data_iterators.sources import _example_iterator
from brainstorm.errors import IteratorValidationError
from brainstorm.parallel import world_rank_and_size
from brainstorm.randomness import RandomState, Seedable


class Shard(DataIterator):
    """This process's part of every batch, for data-parallel training.

    Each batch of the wrapped iterator (a *global* batch) is split along
    the batch axis into ``size`` contiguous parts of (almost) equal size;
    rank ``r`` gets part ``r``: samples
    ``[r * B // size, (r + 1) * B // size)`` of a global batch of ``B``
    samples. All ranks build the same wrapped iterator from the same seed,
    so they walk through the same global batches in the same order and
    together see every sample of an epoch exactly once; ``size`` ranks
    with global batches of ``size * b`` samples train like one process with
    batches of ``size * b`` (see
    :class:`~brainstorm.training.data_parallel.DataParallel`).

    Wrap the base iterator (e.g. :class:`Minibatches`) directly, and put
    random augmentation around the Shard, so that each rank only
    transforms its own samples. Every rank yields one (possibly empty)
    batch per global batch, so all ranks make the same number of steps.
    ``data_shapes`` are those of the wrapped iterator.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        rank: this process's index in [0, size); default: its rank in
            ``MPI.COMM_WORLD`` (0 without mpi4py).
        size: the number of processes; default: the size of
            ``MPI.COMM_WORLD`` (1 without mpi4py).
    """

    _wraps = 'same shapes'

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'rank': Arg(Optional(Int(0))),
        'size': Arg(Optional(Int(1))),
    }

    def __init__(
        self, iter: DataIterator, rank: int | None = None, size: int | None = None
    ):
        if rank is None or size is None:
            world_rank, world_size = world_rank_and_size()
            rank = world_rank if rank is None else rank
            size = world_size if size is None else size
        # rank < size is checked by __validate__
        # a Shard draws no random numbers; a fixed seed keeps it from
        # taking one from global_rnd, so wrapping an iterator in a Shard
        # changes no other seed (the network starts as without MPI)
        Seedable.__init__(self, seed=0)
        self.data_shapes = dict(iter.data_shapes)
        self.length = iter.length
        self.iter = iter
        self.rank = int(rank)
        self.size = int(size)

    def __init_from_description__(self, description: dict) -> None:
        self.data_shapes = {
            name: tuple(shape) for name, shape in self.data_shapes.items()
        }
        self.rnd = RandomState(0)

    def __validate__(self) -> None:
        rank, size = self.rank, self.size
        if not (isinstance(rank, int) and isinstance(size, int) and 0 <= rank < size):
            raise IteratorValidationError(
                f'Shard: rank must be an int in [0, {self.size}). Received: '
                f'rank={self.rank!r}'
            )

    def bounds(self, batch_size: int) -> tuple[int, int]:
        """Return ``(start, stop)`` of this rank's part of a global batch.

        Args:
            batch_size: the number of samples in the global batch.
        """
        return _part_bounds(batch_size, self.rank, self.size)

    def __call__(self, handler=None):
        """Return a generator over this rank's parts of the batches.

        Iterators that read their data on demand (:class:`Minibatches`
        and :class:`Undivided` over an ``h5py.Dataset`` or a
        ``np.memmap``) read only this rank's part of each batch.
        """
        return self.iter._part(handler, self.rank, self.size)
