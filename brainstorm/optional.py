"""Optional dependencies and stand-ins that explain how to install them."""

from __future__ import annotations

import importlib
import importlib.util
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
    'has_onnx',
    'onnx_mock',
    'has_tensorboardx',
    'tensorboardx_mock',
    'import_optional',
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


# bokeh, mpi4py, onnx and tensorboardX are looked up, not imported:
# importing them takes time that ``import brainstorm`` should not spend
# (bokeh about 35 ms), and mpi4py is imported where MPI is first needed
# (brainstorm.parallel, brainstorm.training.data_parallel). import_optional
# imports them where they are used; ``optional.bokeh``, a name of 0.5's
# module, imports bokeh when first asked for (see __getattr__).
def _found(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


_OPTIONAL_MODULES = {
    # module -> (what to call it in messages, extra)
    'bokeh': ('bokeh', 'bokeh'),
    'onnx': ('onnx', 'onnx'),
    'tensorboardX': ('tensorboardX', 'tensorboard'),
}


def _looked_up(module: str, package: str, extra: str) -> tuple:
    """``(found, mock)``: whether ``module`` is installed, and the stand-in if not."""
    if _found(module):
        return True, None
    error = ImportError(f"No module named '{module}'")
    return False, MissingDependencyMock(_missing(package, extra, error))


has_bokeh, bokeh_mock = _looked_up('bokeh', 'bokeh', 'bokeh')
has_mpi4py, mpi4py_mock = _looked_up(
    'mpi4py', 'mpi4py (with an MPI library, e.g. the mpich wheel)', 'mpi'
)
has_onnx, onnx_mock = _looked_up('onnx', 'onnx', 'onnx')
has_tensorboardx, tensorboardx_mock = _looked_up(
    'tensorboardX', 'tensorboardX', 'tensorboard'
)


def import_optional(module: str, feature: str):
    """Import an optional module, or fail with the command that installs it.

    Args:
        module: ``'onnx'`` or ``'tensorboardX'``.
        feature: what needs it, for the message (e.g. ``'export_onnx'``).

    Returns:
        the imported module.

    Raises:
        ImportError: naming the feature, the package and the ``pip``
            command that installs the extra.
    """
    package, extra = _OPTIONAL_MODULES[module]
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(
            f'{feature} needs {package}, which could not be imported ({err}). '
            f'Install it with: {install_hint(extra)}'
        ) from err


def __getattr__(name: str):
    """``optional.bokeh``: the bokeh module where it is installed, as in 0.5.

    Imported when first asked for, not by ``import brainstorm``.

    Raises:
        AttributeError: for other names, and for ``bokeh`` where it is not
            installed (as 0.5's module had no such name there).
    """
    if name == 'bokeh' and has_bokeh:
        module = import_optional('bokeh', 'brainstorm.optional.bokeh')
        globals()['bokeh'] = module
        return module
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')
