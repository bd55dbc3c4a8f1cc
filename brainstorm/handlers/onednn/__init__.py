"""The oneDNN-backed CPU handler and whether it can run here.

The handler is :class:`~brainstorm.handlers.onednn.handler.OneDnnHandler`.
Importing this package never loads oneDNN; creating a handler does (and
raises :class:`OneDnnUnavailable`, an ImportError, if it cannot).
:func:`onednn_available` says whether it can, and why not.
"""

from brainstorm.handlers.onednn._dnnl import OneDnnUnavailable, library
from brainstorm.handlers.onednn.handler import OneDnnHandler

__all__ = ['OneDnnHandler', 'OneDnnUnavailable', 'onednn_available']


def onednn_available() -> tuple[bool, str]:
    """``(True, version)`` if oneDNN loads here, else ``(False, reason)``."""
    try:
        return True, library().version
    except OneDnnUnavailable as error:
        return False, str(error)
