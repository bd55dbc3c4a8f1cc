"""The earlier path of :class:`~brainstorm.handlers.cuda.handler.PyCudaHandler`.

The CUDA handler lives in :mod:`brainstorm.handlers.cuda`; its names still
import from here, and so do those of Brainstorm 0.5's module.
"""

import numpy as np  # noqa: F401 - 0.5's namespace

from brainstorm.handlers.base_handler import Handler  # noqa: F401 - 0.5's namespace
from brainstorm.handlers.cuda.handler import INSTALL_HINT, PyCudaHandler
from brainstorm.handlers.cuda.views import GPUView, coalesce
from brainstorm.randomness import global_rnd  # noqa: F401 - 0.5's namespace
from brainstorm.shapes import flatten_all_but_last  # noqa: F401 - 0.5's namespace

__all__ = ['PyCudaHandler', 'GPUView', 'coalesce', 'INSTALL_HINT']
