"""Handlers: the objects that own array memory and run all array operations.

``NumpyHandler`` runs on the CPU, ``OneDnnHandler`` is a NumpyHandler
running convolution and pooling with oneDNN (creating one without oneDNN
raises an ImportError saying why), ``PyCudaHandler`` runs on an NVIDIA GPU
(creating one without PyCUDA raises an ImportError saying how to install
it), and ``DebugHandler`` wraps either one and checks every call.
``default_handler``, the handler of networks built without one, is a
float32 ``OneDnnHandler`` where oneDNN loads and a float32 ``NumpyHandler``
elsewhere, or where the environment variable ``BRAINSTORM_NO_ONEDNN=1``
switches oneDNN off; :func:`~brainstorm.handlers.set_default_handler`
replaces it (e.g. with ``NumpyHandler(np.float32)``, the plain reference).
``ACTIVATIONS`` is
the one list of activation names (each one a handler op). Every op is one
row of the op table, ``brainstorm.handlers.ops``; the CUDA side is the
package ``brainstorm.handlers.cuda``.
"""

import numpy as np

from brainstorm.handlers.base_handler import ACTIVATIONS, Handler
from brainstorm.handlers.cuda import PyCudaHandler
from brainstorm.handlers.debug_handler import DebugHandler
from brainstorm.handlers.numpy_handler import NumpyHandler
from brainstorm.handlers.onednn import OneDnnHandler, OneDnnUnavailable
from brainstorm.optional import has_pycuda, pycuda_mock  # noqa: F401 - in Brainstorm 0.5's namespace of this module


def _first_default() -> NumpyHandler:
    """A float32 OneDnnHandler if oneDNN loads, else a NumpyHandler."""
    try:
        return OneDnnHandler(np.float32)
    except OneDnnUnavailable:
        return NumpyHandler(np.float32)


# the handler of networks built without one (documented in docs/api.rst)
default_handler: Handler = _first_default()


def set_default_handler(handler: Handler) -> Handler:
    """Make ``handler`` the handler of networks built from now on.

    ``set_default_handler(NumpyHandler(np.float32))`` forces the plain NumPy
    reference (as the environment variable ``BRAINSTORM_NO_ONEDNN=1`` does
    for a whole process). Networks built before keep their handler
    (``net.set_handler`` moves one).

    Args:
        handler: the new ``brainstorm.handlers.default_handler``.

    Returns:
        The previous default handler.

    Raises:
        TypeError: if ``handler`` is not a Handler.
    """
    global default_handler
    if not isinstance(handler, Handler):
        raise TypeError(
            'set_default_handler: handler must be a Handler (e.g. '
            f'NumpyHandler(np.float32)); received {type(handler).__name__}.'
        )
    previous, default_handler = default_handler, handler
    return previous


__all__ = [
    'NumpyHandler',
    'OneDnnHandler',
    'PyCudaHandler',
    'default_handler',
    'set_default_handler',
    'ACTIVATIONS',
]
