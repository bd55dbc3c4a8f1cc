"""Sections of the op table added with the layers of today.

Rows as in :mod:`brainstorm.handlers.ops`, which places these sections
before ``'conv/pool'`` in :data:`~brainstorm.handlers.ops.SECTIONS`; they
live in a module of their own so that the table stays readable. Section
``'embedding'``: the ops of the ``Embedding`` layer.
"""

from __future__ import annotations

from brainstorm.handlers.op_spec import Op

__all__ = ['SECTIONS_ADDED']

#: Section name -> its rows, in the order they join the table.
SECTIONS_ADDED: dict[str, tuple[Op, ...]] = {
    'embedding': (
        Op(
            'gather_m_by_v',
            'm, v, out',
            """Pick one row per id: ``out[i, :] = m[int(v[i, 0]), :]``.

            Args:
                m: matrix ``(K, F)`` (e.g. an embedding table).
                v: vector ``(N, 1)`` of integral row ids in ``[0, K)``.
                out: matrix ``(N, F)``, overwritten.
            """,
            check='rows_by_id',
        ),
        Op(
            'scatter_add_m_by_v',
            'm, v, out',
            """Add each row to the row its id names: ``out[v[i, 0], :] += m[i, :]``.

            Rows with the same id all add to it (the gradient of
            :meth:`gather_m_by_v`); the order of the additions is unspecified.

            Args:
                m: matrix ``(N, F)``.
                v: vector ``(N, 1)`` of integral row ids in ``[0, K)``.
                out: matrix ``(K, F)``, added to.
            """,
            check='rows_by_id',
        ),
    ),
}
