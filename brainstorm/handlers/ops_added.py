"""Sections of the op table added with the layers of today.

Rows as in :mod:`brainstorm.handlers.ops`, which places these sections
before ``'conv/pool'`` in :data:`~brainstorm.handlers.ops.SECTIONS`; they
live in a module of their own so that the table stays readable. Section
``'embedding'``: the ops of the ``Embedding`` layer; ``'more activations'``:
the activation functions added to
:data:`~brainstorm.handlers.base_handler.ACTIVATIONS`.
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
    'more activations': (
        Op(
            'gelu',
            'x, y',
            """Gaussian error linear unit, tanh approximation; ``y`` may alias ``x``.

            ``y = x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x**3)))``
            (``torch.nn.GELU(approximate='tanh')``; within 1e-3 of the exact
            ``x * Phi(x)``).
            """,
            alias=True,
            writes=('y',),
        ),
        Op(
            'gelu_deriv',
            'x, y, dy, dx',
            """``dx = dy * gelu'(x)``, from ``x`` (it does not follow from ``y``).

            Args:
                x: the activation input (required).
                y: ``gelu(x)`` (unused).
                dy: delta of ``y``.
                dx: delta of ``x``, overwritten; same shape, may alias ``dy``.
            """,
            alias=True,
            writes=('dx',),
        ),
        Op(
            'leaky_rel',
            'x, y',
            """Leaky rectified linear: ``y = x if x > 0 else 0.01 * x``.

            The slope 0.01 is fixed (PyTorch's default); ``y`` may alias ``x``.
            """,
            alias=True,
            writes=('y',),
            check='same',
        ),
        Op(
            'leaky_rel_deriv',
            'x, y, dy, dx',
            """``dx = dy if y > 0 else 0.01 * dy`` (uses only ``y``).

            Arguments as in :meth:`el_deriv`.
            """,
            alias=True,
            writes=('dx',),
            optional=('x',),
        ),
        Op(
            'softplus',
            'x, y',
            """Softplus ``y = ln(1 + exp(x))``, finite for every finite ``x``.

            ``y`` may alias ``x``.
            """,
            alias=True,
            writes=('y',),
        ),
        Op(
            'softplus_deriv',
            'x, y, dy, dx',
            """``dx = dy * (1 - exp(-y))`` (the sigmoid of ``x``; uses only ``y``).

            Arguments as in :meth:`el_deriv`.
            """,
            alias=True,
            writes=('dx',),
            optional=('x',),
        ),
    ),
}
