"""The GPU handler (placeholder until the PyCUDA implementation lands).

Without PyCUDA, ``PyCudaHandler`` is a stand-in that raises an ImportError
explaining how to install it as soon as it is used.
"""

from brainstorm.optional import MissingDependencyMock, has_pycuda, pycuda_mock

__all__ = ['PyCudaHandler']

if has_pycuda:
    PyCudaHandler = MissingDependencyMock(ImportError(
        'PyCudaHandler is not implemented in this version of brainstorm yet.'))
else:
    PyCudaHandler = pycuda_mock
