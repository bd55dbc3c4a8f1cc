"""The earlier path of :mod:`brainstorm.handlers.cuda.kernels`."""

from brainstorm.handlers.cuda.kernels import *  # noqa: F403
from brainstorm.handlers.cuda.kernels import __all__  # noqa: F401
