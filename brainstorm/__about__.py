"""Package metadata.

The one place the version is written; pyproject.toml reads it from here.
"""

__version__ = '1.0.0'
__author__ = 'The brainstorm developers'
# The project has no public home page yet; kept (empty) for the 0.5 API.
__url__ = ''
__license__ = 'MIT'
# Import name stays ``brainstorm``; PyPI's ``brainstorm`` is IDSIA's 0.5.
__distribution__ = 'brainstorm-nn'


def install_hint(extra: str) -> str:
    """The pip command that installs this package with an optional extra.

    Args:
        extra: the name of the extra (``'mpi'``, ``'plot'``, ``'pycuda'``...).

    Returns:
        e.g. ``"pip install 'brainstorm-nn[mpi]'"``.
    """
    return f"pip install '{__distribution__}[{extra}]'"
