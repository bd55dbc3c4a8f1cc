"""The rows of the op table for the ops of particular layers.

Part of :data:`brainstorm.handlers.ops.OPS` (see there for what a row
says). These ops exist so that a layer's inner loop is one handler call: the
base class composes each of them of the general ops (the reference), and a
handler may run one as a single pass (``PyCudaHandler`` does, with one
kernel each).
"""

from __future__ import annotations

from brainstorm.handlers.op_spec import Op

__all__ = ['LAYER_SECTIONS']

#: Section name -> rows, in the order of the handler files.
LAYER_SECTIONS: dict[str, tuple[Op, ...]] = {
    'recurrent': (
        Op(
            'lstm_forward_step',
            'gates, c_prev, pi, pf, po, activation: str, gate_outputs, c, c_out, y',
            """One time step of an LSTM cell with peepholes, after its products.

        With ``S`` cells, ``gates`` holds the pre-activations
        ``[Z | I | F | O]`` of the step side by side (input and
        recurrent products and biases already added). With ``g = h``
        the activation and ``s`` the logistic sigmoid::

            I += c_prev * pi;  F += c_prev * pf       (in ``gates``)
            Zb = g(Z); Ib = s(I); Fb = s(F)
            c = Ib * Zb + Fb * c_prev;  c_out = h(c)
            O += c * po;  Ob = s(O)                    (in ``gates``)
            y = Ob * c_out

        The base class composes it of the other ops (the reference); a
        handler may run it as one pass. ``Lstm`` calls it once per time
        step.

        Args:
            gates: ``(B, 4*S)``; the peephole terms are added in place.
            c_prev: ``(B, S)``, the previous cell state.
            pi, pf, po: ``(1, S)``, the peephole weights.
            activation: the name of ``g`` and ``h`` (``act_func``).
            gate_outputs: ``(B, 4*S)``, ``[Zb | Ib | Fb | Ob]``,
                overwritten.
            c: ``(B, S)``, the cell state, overwritten.
            c_out: ``(B, S)``, ``h(c)``, overwritten.
            y: ``(B, S)``, the output, overwritten.
        """,
            writes=('gates', 'gate_outputs', 'c', 'c_out', 'y'),
            check='lstm',
            abstract=False,
        ),
        Op(
            'lstm_backward_step',
            'dy, factors, c_factor, d_gates_next, dc_next, f_next, pi, pf, po, '
            'd_gates, dc',
            """One time step of the LSTM backward pass, after its products.

        ``factors`` ``[PZ | PI | PF | PO]`` and ``c_factor`` ``PC`` are
        what the deltas are multiplied by (they depend only on the
        forward pass: ``PZ = Ib g'(Z)``, ``PI = Zb s'(I)``,
        ``PF = c_prev s'(F)``, ``PO = c_out s'(O)``, ``PC = Ob h'(c)``).
        With ``dI+, dF+`` the gate deltas of the next step::

            dO = dy * PO
            dc = dy * PC + dO * po + dI+ * pi + dF+ * pf + f_next * dc_next
            dZ = dc * PZ;  dI = dc * PI;  dF = dc * PF

        and ``d_gates = [dZ | dI | dF | dO]``. At the last step the next
        step's deltas are zeros.

        Args:
            dy: ``(B, S)``, the whole delta of the step's output.
            factors: ``(B, 4*S)``.
            c_factor: ``(B, S)``.
            d_gates_next: ``(B, 4*S)``, the gate deltas of the next step.
            dc_next: ``(B, S)``, the cell-state delta of the next step.
            f_next: ``(B, S)``, the forget gate ``Fb`` of the next step.
            pi, pf, po: ``(1, S)``, the peephole weights.
            d_gates: ``(B, 4*S)``, overwritten.
            dc: ``(B, S)``, the cell-state delta, overwritten.
        """,
            writes=('d_gates', 'dc'),
            check='lstm',
            abstract=False,
        ),
    ),
    'sequences': (
        Op(
            'reverse_time_t',
            'a, mask, out',
            """Reverse each sequence of ``a`` in time, within its own length.

            ``out[t, b] = a[L_b - 1 - t, b]`` for ``t < L_b`` and ``out[t,
            b] = a[t, b]`` for ``t >= L_b`` (the padding stays where it is),
            where ``L_b`` is the number of non-zero entries of ``mask[:, b,
            0]``, or ``T`` for every sequence if ``mask`` is None. Applying
            the op twice gives ``a`` back, so it is its own gradient.
            (Layers with ``reverse=True`` run on reversed copies of their
            inputs and outputs.)

            Args:
                a: ``(T, B, F)``.
                mask: None or ``(T, B, 1)``: 1 up to each sequence's length
                    and 0 after it. Handlers may raise
                    ``NetworkValidationError`` for other masks (NumpyHandler
                    and DebugHandler do); others give an unspecified order.
                out: ``(T, B, F)``, overwritten; must not alias ``a``.
            """,
            optional=('mask',),
            check='reverse_time',
        ),
    ),
}
