"""brainstorm's messages go through :mod:`logging`, under the logger ``brainstorm``.

The trainer logs on ``brainstorm.training`` and the hooks on
``brainstorm.hooks``, at INFO (a hook's failure at ERROR). Unless the user
configured the ``brainstorm`` logger first, it gets level INFO and one
:class:`ConsoleHandler`, which writes each message alone on its line to the
*current* ``sys.stdout`` (ERROR and WARNING to ``sys.stderr``): the console
output of ``verbose=True`` is what it was when these were prints, and
stream redirection (``contextlib.redirect_stdout``, pytest's ``capsys``)
keeps working. Users silence the messages with
``logging.getLogger('brainstorm').setLevel(logging.WARNING)`` and send them
elsewhere with the usual configuration (e.g. ``logging.config.dictConfig``
naming the ``brainstorm`` logger, which replaces its handlers). The records
also propagate to the root logger, so ``caplog`` sees them; a user who gives
the root logger a console handler too (``logging.basicConfig``) removes this
one (``logging.getLogger('brainstorm').handlers.clear()``) to see each
message once.
"""

from __future__ import annotations

import logging
import sys

__all__ = ['ConsoleHandler', 'get_logger']

ROOT_NAME = 'brainstorm'


class ConsoleHandler(logging.Handler):
    """Writes the bare message to ``sys.stdout``, from WARNING up to ``sys.stderr``.

    The stream is looked up at each message, so redirections made later
    (``contextlib.redirect_stdout``, pytest's ``capsys``) take effect.
    """

    def emit(self, record: logging.LogRecord) -> None:
        try:
            stream = sys.stderr if record.levelno >= logging.WARNING else sys.stdout
            stream.write(self.format(record) + '\n')
            stream.flush()
        except Exception:
            self.handleError(record)


_configured = False


def _configure_root_logger() -> None:
    global _configured
    if _configured:
        # once only: a handler the user removed later must stay removed
        return
    _configured = True
    logger = logging.getLogger(ROOT_NAME)
    # leave alone what the user set up before importing brainstorm
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if not logger.handlers:
        logger.addHandler(ConsoleHandler())


def get_logger(name: str) -> logging.Logger:
    """The logger ``brainstorm.<name>``.

    Args:
        name: the part after ``brainstorm.``, e.g. ``'training'``.

    Returns:
        the child logger; its parent ``brainstorm`` is configured as the
        module docstring says.
    """
    _configure_root_logger()
    return logging.getLogger(f'{ROOT_NAME}.{name}')
