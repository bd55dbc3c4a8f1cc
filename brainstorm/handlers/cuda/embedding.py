"""The embedding ops of :class:`PyCudaHandler` (kernels in ``cu/embedding.cu``).

Written here rather than in ``handler.py`` so that the handler file stays
readable; :func:`install_embedding_ops` puts them on the class.
"""

from __future__ import annotations

import abc

from brainstorm.handlers.ops import OPS

__all__ = ['install_embedding_ops']


def _rows_by_id(handler, kernel: str, m, v, out, rows: int, ids: int) -> None:
    """Run ``kernel`` over the ``rows x cols`` elements of a gather/scatter."""
    cols = m.shape[1]
    if (
        m.ndim != 2
        or out.ndim != 2
        or tuple(v.shape) != (rows, 1)
        or (out.shape[1] != cols)
    ):
        raise ValueError(
            f'{kernel}: m and out must be matrices with one number of '
            f'columns and v ({rows}, 1). Received: m {m.shape}, v {v.shape}, '
            f'out {out.shape}'
        )
    args = (cols, ids, m.ptr, *m.strides, v.ptr, v.strides[0], out.ptr, *out.strides)
    handler._launch('embedding', kernel, rows * cols, *args)


def gather_m_by_v(self, m, v, out) -> None:  # noqa: D103 - the op table's
    _rows_by_id(self, 'gather_rows', m, v, out, out.shape[0], m.shape[0])


def scatter_add_m_by_v(self, m, v, out) -> None:  # noqa: D103 - the op table's
    _rows_by_id(self, 'scatter_add_rows', m, v, out, m.shape[0], out.shape[0])


def install_embedding_ops(cls: type) -> None:
    """Give the handler class ``cls`` the embedding ops, with the table's docs."""
    for function in (gather_m_by_v, scatter_add_m_by_v):
        function.__doc__ = OPS[function.__name__].doc
        function.__qualname__ = f'{cls.__name__}.{function.__name__}'
        setattr(cls, function.__name__, function)
    abc.update_abstractmethods(cls)  # type: ignore[arg-type]
