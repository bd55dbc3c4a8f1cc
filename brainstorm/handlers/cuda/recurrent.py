"""The LSTM step ops of :class:`PyCudaHandler` as one kernel each.

``Lstm`` calls
:meth:`~brainstorm.handlers.base_handler.Handler.lstm_forward_step` and
:meth:`~brainstorm.handlers.base_handler.Handler.lstm_backward_step`
once per time step. The base class composes them of about ten
elementwise ops; on a GPU each op is a kernel launch, and at the sizes of
a time step the launches, not the arithmetic, take the time. The kernels
of ``cu/recurrent.cu`` do a step in one launch. They take matrices whose
columns are adjacent (the feature slices a network's buffers give); other
operands, and activations the kernels do not know, take the base class's
composition.
"""

from __future__ import annotations

__all__ = ['RecurrentKernels', 'LSTM_ACTIVATIONS']

#: Activation name -> its code in ``cu/recurrent.cu``.
LSTM_ACTIVATIONS = {'linear': 0, 'rel': 1, 'sigmoid': 2, 'tanh': 3, 'el': 4}


def _row_stride(x) -> int | None:
    """The row stride of a 2-D view with adjacent columns, else None."""
    if len(x.shape) != 2:
        return None
    rows, cols = x.shape
    if cols > 1 and x.strides[1] != 1:
        return None
    return int(x.strides[0]) if rows > 1 else cols


class RecurrentKernels:
    """The one-kernel LSTM steps (a mixin of :class:`PyCudaHandler`)."""

    def lstm_forward_step(  # noqa: D102 - documented in the op table
        self, gates, c_prev, pi, pf, po, activation: str, gate_outputs, c, c_out, y
    ) -> None:
        code = LSTM_ACTIVATIONS.get(activation)
        strides = [_row_stride(a) for a in (gates, c_prev, gate_outputs, c, c_out, y)]
        peepholes = [_row_stride(p) for p in (pi, pf, po)]
        if code is None or None in strides or None in peepholes:
            super().lstm_forward_step(  # type: ignore[misc]
                gates, c_prev, pi, pf, po, activation, gate_outputs, c, c_out, y
            )
            return
        rows, size = c.shape
        g, cp, h, cs, co, ys = strides
        self._launch(  # type: ignore[attr-defined]
            'recurrent', 'lstm_forward_step', rows * size, size, code,
            gates.ptr, g, c_prev.ptr, cp, pi.ptr, pf.ptr, po.ptr,
            gate_outputs.ptr, h, c.ptr, cs, c_out.ptr, co, y.ptr, ys,
        )  # fmt: skip

    def lstm_backward_step(  # noqa: D102 - documented in the op table
        self, dy, factors, c_factor, d_gates_next, dc_next, f_next, pi, pf, po,
        d_gates, dc,
    ) -> None:  # fmt: skip
        arrays = (dy, factors, c_factor, d_gates_next, dc_next, f_next, d_gates, dc)
        strides = [_row_stride(a) for a in arrays]
        peepholes = [_row_stride(p) for p in (pi, pf, po)]
        if None in strides or None in peepholes:
            super().lstm_backward_step(  # type: ignore[misc]
                dy, factors, c_factor, d_gates_next, dc_next, f_next, pi, pf, po,
                d_gates, dc,
            )  # fmt: skip
            return
        rows, size = dc.shape
        s_dy, s_f, s_fc, s_gn, s_dcn, s_fn, s_dg, s_dc = strides
        self._launch(  # type: ignore[attr-defined]
            'recurrent', 'lstm_backward_step', rows * size, size,
            dy.ptr, s_dy, factors.ptr, s_f, c_factor.ptr, s_fc,
            d_gates_next.ptr, s_gn, dc_next.ptr, s_dcn, f_next.ptr, s_fn,
            pi.ptr, pf.ptr, po.ptr, d_gates.ptr, s_dg, dc.ptr, s_dc,
        )  # fmt: skip
