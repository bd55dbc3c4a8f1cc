"""The earlier path of :mod:`brainstorm.handlers.cuda.cublas`."""

from brainstorm.handlers.cuda.cublas import *  # noqa: F403
from brainstorm.handlers.cuda.cublas import __all__  # noqa: F401
