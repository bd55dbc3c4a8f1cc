"""Who takes part in a run: rank, size and the MPI communicator.

This is the one module that knows about processes. It reads the launcher's
environment without initialising MPI, and imports mpi4py (an optional
dependency, ``pip install 'brainstorm-nn[mpi]'``) only when a communicator
is first needed. Everything above it (data iterators, scorers, the trainer,
hooks) asks this module instead of testing for MPI itself.
"""

from __future__ import annotations

import os

from brainstorm.optional import has_mpi4py, mpi4py_mock

__all__ = ['mpi_module', 'mpi_world_size', 'mpi_world_rank',
           'world_rank_and_size']

# environment variables in which launchers announce the number of
# processes and the rank of each (MPICH/Hydra, Open MPI, PMIx, MVAPICH)
_SIZE_VARIABLES = ('PMI_SIZE', 'OMPI_COMM_WORLD_SIZE', 'PMIX_SIZE',
                   'MV2_COMM_WORLD_SIZE')
_RANK_VARIABLES = ('PMI_RANK', 'OMPI_COMM_WORLD_RANK', 'PMIX_RANK',
                   'MV2_COMM_WORLD_RANK')


def mpi_module():
    """The ``mpi4py.MPI`` module (initialises MPI on first use)."""
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


def world_rank_and_size() -> tuple[int, int]:
    """Rank and size in ``MPI.COMM_WORLD``; (0, 1) without mpi4py or
    without an MPI launcher (so MPI is not initialised needlessly)."""
    if not has_mpi4py or mpi_world_size() == 1:
        return 0, 1
    world = mpi_module().COMM_WORLD
    return world.Get_rank(), world.Get_size()
