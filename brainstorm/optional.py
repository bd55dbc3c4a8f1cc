"""Optional dependencies and stand-ins that explain how to install them."""

from __future__ import annotations

import sys  # noqa: F401 - in Brainstorm 0.5's namespace of this module

from brainstorm.__about__ import install_hint

__all__ = [
    'MissingDependencyMock',
    'has_pycuda',
    'pycuda_mock',
    'has_bokeh',
    'bokeh_mock',
    'has_mpi4py',
    'mpi4py_mock',
]


class MissingDependencyMock:
    """Stands in for an optional module or class that could not be imported.

    Any attribute access or call re-raises the stored ImportError, so the
    error appears where the missing dependency is first used.
    """

    def __init__(self, error: ImportError):
        object.__setattr__(self, '_error', error)

    def __getattr__(self, item):
        if item.startswith('__') and item.endswith('__'):
            # introspection (copy, pickle, inspect.unwrap, doctest) asks for
            # dunder names; answering those must not fail
            raise AttributeError(item)
        raise object.__getattribute__(self, '_error')

    def __call__(self, *args, **kwargs):
        """Raise the stored ImportError: the missing class cannot be created."""
        raise object.__getattribute__(self, '_error')


def _missing(package: str, extra: str, error: ImportError) -> ImportError:
    err = ImportError(
        f'{package} is needed for this feature but could not be '
        f'imported ({error}). Install it with '
        f'{install_hint(extra)}.'
    )
    err.__cause__ = error
    return err


try:
    import pycuda  # noqa: F401

    has_pycuda = True
    pycuda_mock = None
except ImportError as _err:
    has_pycuda = False
    pycuda_mock = MissingDependencyMock(
        _missing('PyCUDA (with the CUDA toolkit)', 'pycuda', _err)
    )

try:
    import bokeh  # noqa: F401

    has_bokeh = True
    bokeh_mock = None
except ImportError as _err:
    has_bokeh = False
    bokeh_mock = MissingDependencyMock(
        ImportError(
            f'bokeh is needed for the BokehVisualizer but could not be imported '
            f'({_err}). Install it with: {install_hint("bokeh")}'
        )
    )

try:
    # only the package: ``from mpi4py import MPI`` would initialise MPI,
    # which brainstorm.training.data_parallel does when it is first needed
    import mpi4py  # noqa: F401

    has_mpi4py = True
    mpi4py_mock = None
except ImportError as _err:
    has_mpi4py = False
    mpi4py_mock = MissingDependencyMock(
        _missing('mpi4py (with an MPI library, e.g. the mpich wheel)', 'mpi', _err)
    )
