"""The rows of the op table for the ops of particular layers.

Part of :data:`brainstorm.handlers.ops.OPS` (see there for what a row
says), kept here so that ``ops.py`` holds the general ops:
``EARLY_SECTIONS`` (``Embedding``'s ops and the activations added in
this release) stand before ``'conv/pool'`` in the table,
``LAYER_SECTIONS`` (``Lstm``'s time step, the sequence reversal of the
reverse recurrent layers and ``MultiHeadAttention``'s ops) after it, and
``UPDATE_SECTIONS`` (the parameter updates of the steppers) at its end.
The LSTM step ops are not abstract: the base class composes them of the
general ops, and ``PyCudaHandler`` runs each as one kernel. Neither are the
update ops: the base class composes them of the general ops in the order
the steppers always used (so every handler gives the results it gave
before), and ``NumpyHandler`` runs that same sequence chunk by chunk.
"""

from __future__ import annotations

from brainstorm.handlers.op_spec import Op

__all__ = ['EARLY_SECTIONS', 'LAYER_SECTIONS', 'UPDATE_SECTIONS']

#: The sections that stand before ``'conv/pool'`` in the table: the ops of
#: ``Embedding`` and the activation functions added to
#: :data:`~brainstorm.handlers.base_handler.ACTIVATIONS`.
EARLY_SECTIONS: dict[str, tuple[Op, ...]] = {
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

#: The sections at the end of the table: the ops of ``Lstm``, of the
#: reverse recurrent layers and of ``MultiHeadAttention``.
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
            disjoint=True,
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
            disjoint=True,
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
            disjoint=True,
        ),
    ),
    'attention': (
        Op(
            'batch_dot_tt',
            'a, b, out, transa: bool = False, transb: bool = False',
            """Batched matrix products over the middle axes: ``out = op(a) @ op(b)``.

            The first and the last axis of each operand are the two axes of
            its matrices; all axes between them are batch axes, equal for
            ``a``, ``b`` and ``out``: for every batch index ``i``,
            ``out[:, i, :] = op(a[:, i, :]) @ op(b[:, i, :])``, where ``op``
            transposes the matrix if ``transa`` (``transb``) is set. This is
            the time-major layout of attention: with ``q`` and ``k`` of shape
            ``(T, B, heads, d)``, ``batch_dot_tt(q, k, scores, transb=True)``
            gives the ``(T, B, heads, T)`` scores of every sequence and head.

            Args:
                a: ``(M, *batch, K)``, or ``(K, *batch, M)`` with ``transa``.
                b: ``(K, *batch, N)``, or ``(N, *batch, K)`` with ``transb``.
                out: ``(M, *batch, N)``, overwritten; must not overlap ``a``
                    or ``b``.
                transa: transpose the matrices of ``a``.
                transb: transpose the matrices of ``b``.
            """,
            check='batch_dot',
            disjoint=True,
        ),
        Op(
            'batch_dot_add_tt',
            'a, b, out, transa: bool = False, transb: bool = False',
            """Like :meth:`batch_dot_tt`, but ADDS the products to ``out``.""",
            check='batch_dot',
            disjoint=True,
        ),
        Op(
            'masked_softmax_t',
            'x, mask, out, causal: bool = False',
            """Softmax of attention scores over their last axis, with masks.

            ``x`` holds scores ``x[t, i..., s]`` of query position ``t``
            for key position ``s`` (``i...`` are batch axes, the first of
            them the sequence ``b``). A key takes part if ``mask[s, b] != 0``
            and, with ``causal``, ``s <= t``; ``out[t, i..., :]`` is the
            softmax over those keys and 0 at all others. A query with
            ``mask[t, b] == 0``, or without any key, gets a row of zeros.
            So padding positions neither give nor receive attention.

            Args:
                x: ``(T, B, ..., S)``.
                mask: None (every position is real) or ``(L, B, 1)`` with
                    ``L >= max(T, S)``; non-zero marks a real position.
                out: of ``x``'s shape, overwritten; may alias ``x``.
                causal: let position ``t`` attend only to ``s <= t``.
            """,
            alias=True,
            may_be=(('out', 'x'),),
            optional=('mask',),
            check='masked_softmax',
        ),
        Op(
            'softmax_deriv_t',
            'y, dy, dx',
            """Deltas of a softmax over the last axis: ``dx = y * (dy - sum(dy * y))``.

            The sum runs over the last axis (keepdims). Entries where
            ``y == 0`` (masked ones of :meth:`masked_softmax_t`) get 0.

            Args:
                y: the softmax output, any shape.
                dy: the deltas of ``y``, of ``y``'s shape.
                dx: of ``y``'s shape, overwritten; may alias ``dy``.
            """,
            writes=('dx',),
            alias=True,
            may_be=(('dx', 'dy'),),  # not y: it is read after dx is written
        ),
    ),
}

#: The section at the very end of the table: one op per update rule of the
#: steppers (:mod:`brainstorm.training.steppers`), one call per contiguous
#: part of the parameters.
UPDATE_SECTIONS: dict[str, tuple[Op, ...]] = {
    'updates': (
        Op(
            'sgd_update',
            'parameters, gradients, learning_rate: float',
            """Plain gradient descent: ``parameters -= learning_rate * gradients``.

            Computed as ``mult_add_st(-learning_rate, gradients,
            parameters)``. The update ops are not abstract: the base class
            composes each of the general ops, in the order given, and a
            handler may run that same sequence in one pass over memory
            (``NumpyHandler`` runs it chunk by chunk) with the very same
            results. Operands of one op have one shape and must not overlap.

            Args:
                parameters: updated in place.
                gradients: of the same shape (scaled or clipped already).
                learning_rate: the step size.
            """,
            writes=('parameters',),
            check='same',
            abstract=False,
            disjoint=True,
        ),
        Op(
            'momentum_update',
            'parameters, gradients, velocity, learning_rate: float, momentum: float',
            """Gradient descent with classical momentum, as one op.

            In this order::

                mult_st(momentum, velocity, velocity)
                mult_add_st(-learning_rate, gradients, velocity)
                add_tt(parameters, velocity, parameters)

            Args:
                parameters: updated in place.
                gradients: of the same shape.
                velocity: of the same shape, updated in place.
                learning_rate: the step size (already scaled by
                    ``1 - momentum`` where the stepper does so).
                momentum: the decay of the velocity.
            """,
            writes=('parameters', 'velocity'),
            check='same',
            abstract=False,
            disjoint=True,
        ),
        Op(
            'nesterov_lookahead',
            'parameters, velocity, momentum: float',
            """The first half of Nesterov's momentum, before the passes.

            ``mult_st(momentum, velocity, velocity)``, then
            ``add_tt(parameters, velocity, parameters)``: the parameters
            step ahead along the decayed velocity. :meth:`nesterov_update`
            is the second half.

            Args:
                parameters: updated in place.
                velocity: of the same shape, updated in place.
                momentum: the decay of the velocity.
            """,
            writes=('parameters', 'velocity'),
            check='same',
            abstract=False,
            disjoint=True,
        ),
        Op(
            'nesterov_update',
            'parameters, gradients, velocity, learning_rate: float',
            """The second half of Nesterov's momentum, after the passes.

            In this order::

                mult_add_st(-learning_rate, gradients, velocity)
                mult_add_st(-learning_rate, gradients, parameters)

            Args:
                parameters: updated in place.
                gradients: of the same shape.
                velocity: of the same shape, updated in place.
                learning_rate: the step size.
            """,
            writes=('parameters', 'velocity'),
            check='same',
            abstract=False,
            disjoint=True,
        ),
        Op(
            'rmsprop_update',
            (
                'parameters, gradients, mean_square, scratch, '
                'learning_rate: float, decay: float, epsilon: float'
            ),
            """RMSProp: the gradients divided by a running root mean square.

            In this order::

                mult_st(decay, mean_square, mean_square)
                mult_st(1.0 - decay, gradients, scratch)
                mult_add_tt(scratch, gradients, mean_square)
                sqrt_t(mean_square, scratch)
                add_st(epsilon, scratch, scratch)
                divide_tt(gradients, scratch, scratch)
                mult_add_st(-learning_rate, scratch, parameters)

            Args:
                parameters: updated in place.
                gradients: of the same shape.
                mean_square: of the same shape (``>= 0``), updated in place.
                scratch: of the same shape; its content is arbitrary
                    afterwards (a handler may leave it alone).
                learning_rate: the step size.
                decay: the decay of the running mean square.
                epsilon: added to the root.
            """,
            writes=('parameters', 'mean_square', 'scratch'),
            check='same',
            abstract=False,
            disjoint=True,
        ),
        Op(
            'adam_update',
            (
                'parameters, gradients, m, v, mask, scratch, '
                'learning_rate: float, beta1: float, beta2: float, '
                'epsilon: float, step: int, weight_decay: float'
            ),
            """Adam with bias correction and decoupled weight decay (AdamW).

            With ``decay = learning_rate * weight_decay``, the parameters
            first shrink, if ``decay`` is not 0: by
            ``mult_st(1.0 - decay, parameters, parameters)``, or, with a
            ``mask``, by ``mult_tt(parameters, mask, scratch)`` and
            ``mult_add_st(-decay, scratch, parameters)`` (parameters where
            ``mask`` is 0 keep their value). Then, with
            ``c1 = 1.0 - beta1**step`` and ``r2 = math.sqrt(1.0 -
            beta2**step)``, in this order::

                mult_st(beta1, m, m)
                mult_add_st(1.0 - beta1, gradients, m)
                mult_st(beta2, v, v)
                mult_st(1.0 - beta2, gradients, scratch)
                mult_add_tt(scratch, gradients, v)
                sqrt_t(v, scratch)
                mult_st(1.0 / r2, scratch, scratch)
                add_st(epsilon, scratch, scratch)
                divide_tt(m, scratch, scratch)
                mult_add_st(-learning_rate / c1, scratch, parameters)

            Args:
                parameters: updated in place.
                gradients: of the same shape.
                m: the first moment, of the same shape, updated in place.
                v: the second moment, of the same shape (``>= 0``), updated
                    in place.
                mask: None, or of the same shape: 0 where a parameter is
                    not trained (only the weight decay reads it; the
                    steppers have masked the gradients already).
                scratch: of the same shape; its content is arbitrary
                    afterwards (a handler may leave it alone).
                learning_rate: the step size.
                beta1: the decay of the first moment.
                beta2: the decay of the second moment.
                epsilon: added to the corrected root.
                step: the number of this update, 1 at the first.
                weight_decay: the decoupled weight decay per unit learning
                    rate (0 for plain Adam).
            """,
            writes=('parameters', 'm', 'v', 'scratch'),
            optional=('mask',),
            check='same',
            abstract=False,
            disjoint=True,
        ),
    ),
}
