"""Handlers: the objects that own array memory and run all array operations.

``NumpyHandler`` runs on the CPU, ``OneDnnHandler`` is a NumpyHandler
running convolution and pooling with oneDNN (creating one without oneDNN
raises an ImportError saying why), ``PyCudaHandler`` runs on an NVIDIA GPU
(creating one without PyCUDA raises an ImportError saying how to install
it), and ``DebugHandler`` wraps either one and checks every call.
``default_handler`` is a float32 ``NumpyHandler``. ``ACTIVATIONS`` is
the one list of activation names (each one a handler op). Every op is one
row of the op table, ``brainstorm.handlers.ops``; the CUDA side is the
package ``brainstorm.handlers.cuda``.
"""

import numpy as np

from brainstorm.handlers.base_handler import ACTIVATIONS
from brainstorm.handlers.cuda import PyCudaHandler
from brainstorm.handlers.debug_handler import DebugHandler
from brainstorm.handlers.numpy_handler import NumpyHandler
from brainstorm.handlers.onednn import OneDnnHandler
from brainstorm.optional import has_pycuda, pycuda_mock  # noqa: F401 - in Brainstorm 0.5's namespace of this module

default_handler = NumpyHandler(np.float32)

__all__ = [
    'NumpyHandler',
    'OneDnnHandler',
    'PyCudaHandler',
    'default_handler',
    'ACTIVATIONS',
]
