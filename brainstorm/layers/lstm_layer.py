"""Lstm: a long short-term memory layer with peephole connections."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import (
    LayerValidationError,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.layers.attributes import Activation, Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.layers.time_reversal import reversible
from brainstorm.shapes import (
    flatten_time,
    flatten_time_and_features,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper

#: The forward internals in ``setup`` order; each has a delta ``'d' + name``.
LSTM_INTERNALS = ('Za', 'Zb', 'Ia', 'Ib', 'Fa', 'Fb', 'Oa', 'Ob', 'Ca', 'Cb')
#: The parameters of the four gates, grouped by kind (``grouped_buffers``).
_GATE_PARAMETERS = {
    'W': ('Wz', 'Wi', 'Wf', 'Wo'),
    'R': ('Rz', 'Ri', 'Rf', 'Ro'),
    'b': ('bz', 'bi', 'bf', 'bo'),
}


def Lstm(
    size: int,
    activation: str = 'tanh',
    name: str | None = None,
    reverse: bool = False,
) -> ConstructionWrapper:
    """A long short-term memory layer with peephole connections.

    With ``g = h = activation``, ``sigma`` the logistic sigmoid and ``_``
    marking the previous time step (the context at ``t = 0``, zero unless a
    context is passed to ``forward_pass``)::

        Za = Wz x + Rz y_ + bz,              Zb = g(Za)
        Ia = Wi x + Ri y_ + pi * Ca_ + bi,   Ib = sigma(Ia)
        Fa = Wf x + Rf y_ + pf * Ca_ + bf,   Fb = sigma(Fa)
        Ca = Ib * Zb + Fb * Ca_,             Cb = h(Ca)
        Oa = Wo x + Ro y_ + po * Ca + bo,    Ob = sigma(Oa)
        y  = Ob * Cb

    Multi-dimensional input features are flattened.

    Args:
        size: number of cells (defaults to the input feature size when
            absent from an architecture).
        activation: 'sigmoid', 'tanh', 'rel' (or 'relu'), 'linear', 'el',
            'softplus' or 'leaky_rel' (``g, h``).
        name: the layer name.
        reverse: run backwards in time, each sequence within the length
            given by the optional input ``mask`` (see
            :mod:`brainstorm.layers.time_reversal`).

    Shapes:
        ``('T', 'B', ...)`` -> ``('T', 'B', size)`` with context 1;
        parameters ``Wz Wi Wf Wo (size, in)``, ``pi pf po (1, size)``,
        ``Rz Ri Rf Ro (size, size)``, ``bz bi bf bo (size,)``.
    """
    return ConstructionWrapper.create(
        LstmLayerImpl,
        name=name,
        size=size,
        activation=activation,
        # only where set: the architecture of a forward layer stays 0.5's
        **({} if reverse is False else {'reverse': reverse}),
    )


@reversible
class LstmLayerImpl(Layer):
    """The implementation of :func:`Lstm`.

    The input projections of all time steps are four matrix products before
    the time loop, the recurrent part runs step by step, and the weight
    gradients are again matrix products over all time steps. Subclasses
    add a clock through :meth:`_clock_forward` and :meth:`_clock_backward`
    (see :class:`~brainstorm.layers.clockwork_lstm_layer.ClockworkLstmLayerImpl`).
    """

    overwrites_gradients = True
    overwrites_backward_internals = True
    can_overwrite_input_deltas = True
    has_lstm_gates = True
    expected_inputs = {'default': time_template()}
    # the four gates side by side: one product per time step for all of
    # them, and the weights (and gradients) of all gates as one matrix
    grouped_buffers = {
        'parameters': _GATE_PARAMETERS,
        'gradients': _GATE_PARAMETERS,
        'internals': {
            'GA': ('Za', 'Ia', 'Fa', 'Oa'),
            'GB': ('Zb', 'Ib', 'Fb', 'Ob'),
            'dGA': ('dZa', 'dIa', 'dFa', 'dOa'),
            'dGB': ('dZb', 'dIb', 'dFb', 'dOb'),
        },
    }
    declared_kwargs = {
        'size': Kwarg(
            PositiveInt(),
            default=None,
            description='number of cells (default: input size)',
        ),
        'activation': Kwarg(
            Activation(), description='cell input and output activation'
        ),
    }

    def setup(self, kwargs, in_shapes):
        """Input, peephole and recurrent weights and biases per gate; internals."""
        self.activation = kwargs['activation']
        n_in = in_shapes['default'].feature_size
        size = kwargs['size'] or n_in
        self.size = size
        outputs = OrderedDict(default=BufferStructure('T', 'B', size, context_size=1))
        parameters = OrderedDict()
        for gate in 'zifo':
            parameters['W' + gate] = BufferStructure(size, n_in)
        for gate in 'ifo':
            parameters['p' + gate] = BufferStructure(1, size)
        for gate in 'zifo':
            parameters['R' + gate] = BufferStructure(size, size)
        for gate in 'zifo':
            parameters['b' + gate] = BufferStructure(size)
        internals = OrderedDict(
            (n, BufferStructure('T', 'B', size, context_size=1)) for n in LSTM_INTERNALS
        )
        internals.update(
            (
                'd' + n,
                BufferStructure('T', 'B', size, context_size=1, is_backward_only=True),
            )
            for n in LSTM_INTERNALS
        )
        return outputs, parameters, internals

    # Hooks for ClockworkLstm: a mask that is non-zero where a unit keeps
    # its previous state, and a (B, size) scratch array for the backward
    # pass. Plain Lstm units are always active.

    def _clock_forward(self, buffers, time_steps: int):
        """Return the ``(T, B, size)`` mask of inactive units, or None."""
        return None

    def _clock_backward(self, buffers):
        """The clock's state for the backward pass.

        Returns:
            ``(inactive, carry)``: the forward mask and a (B, size) scratch
            array, or ``(None, None)`` without a clock.
        """
        return None, None

    def forward_pass(self, buffers, training_pass=True):
        """Input projections for all steps at once, then the steps in order."""
        _h = self.handler
        S = self.size
        params, internals = buffers.parameters, buffers.internals
        W, R, b = (params.get_group(n) for n in 'WRb')
        pi, pf, po = params.pi, params.pf, params.po
        GA, GB = internals.get_group('GA'), internals.get_group('GB')
        Ca, Cb = internals.Ca, internals.Cb
        x = buffers.inputs.default
        y = buffers.outputs.default
        T = x.shape[0]
        inactive = self._clock_forward(buffers, T)

        # the input projections of all gates and time steps: one product
        GA_all = flatten_time(GA[:T])
        _h.dot_mm(flatten_time_and_features(x), W, GA_all, transb=True)
        _h.add_mv(GA_all, b.reshape((1, 4 * S)), GA_all)

        # index -1 is the context slot, so t = 0 needs no special case;
        # R is multiplied once per time step (a handler may pack it)
        with _h.fixed_operand(R):
            if inactive is None:  # every unit steps: the cell is one handler op
                for t in range(T):
                    _h.dot_add_mm(y[t - 1], R, GA[t], transb=True)
                    _h.lstm_forward_step(
                        GA[t], Ca[t - 1], pi, pf, po, self.activation, GB[t],
                        Ca[t], Cb[t], y[t],
                    )  # fmt: skip
            else:
                self._clocked_forward_steps(buffers, T, inactive)

    def _clocked_forward_steps(self, buffers, T: int, inactive) -> None:
        """The forward time steps where units may keep their state."""
        _h = self.handler
        S = self.size
        params, internals = buffers.parameters, buffers.internals
        R = params.get_group('R')
        pi, pf, po = params.pi, params.pf, params.po
        GA, GB = internals.get_group('GA'), internals.get_group('GB')
        Za, Zb, Ia, Ib, Fa, Fb, Oa, Ob, Ca, Cb = (internals[n] for n in LSTM_INTERNALS)
        IFa, IFb = GA[:, :, S : 3 * S], GB[:, :, S : 3 * S]
        y = buffers.outputs.default
        act = _h.act_func[self.activation]
        sigmoid = _h.sigmoid
        for t in range(T):
            _h.dot_add_mm(y[t - 1], R, GA[t], transb=True)
            _h.mult_add_mv(Ca[t - 1], pi, Ia[t])
            _h.mult_add_mv(Ca[t - 1], pf, Fa[t])
            act(Za[t], Zb[t])
            sigmoid(IFa[t], IFb[t])
            _h.mult_tt(Ib[t], Zb[t], Ca[t])
            _h.mult_add_tt(Fb[t], Ca[t - 1], Ca[t])
            if t:
                _h.copy_to_if(Ca[t - 1], Ca[t], inactive[t])
            _h.mult_add_mv(Ca[t], po, Oa[t])
            sigmoid(Oa[t], Ob[t])
            act(Ca[t], Cb[t])
            _h.mult_tt(Ob[t], Cb[t], y[t])
            if t:
                _h.copy_to_if(y[t - 1], y[t], inactive[t])

    def backward_pass(self, buffers):
        """The steps in reverse, then the weight gradients as matrix products."""
        _h = self.handler
        params, internals = buffers.parameters, buffers.internals
        W, R = params.get_group('W'), params.get_group('R')
        pi, pf, po = params.pi, params.pf, params.po
        dW, dR, db = (buffers.gradients.get_group(n) for n in 'WRb')
        dpi, dpf, dpo = (buffers.gradients[n] for n in ('pi', 'pf', 'po'))
        Za, Zb, Ia, Ib, Fa, Fb, Oa, Ob, Ca, Cb = (internals[n] for n in LSTM_INTERNALS)
        dZa, dZb, dIa, dIb, dFa, dFb, dOa, dOb, dCa, dCb = (
            internals['d' + n] for n in LSTM_INTERNALS
        )
        dGA = internals.get_group('dGA')
        x, dx = buffers.inputs.default, buffers.input_deltas.default
        y, dy = buffers.outputs.default, buffers.output_deltas.default
        T = x.shape[0]
        if not T:  # no time steps: nothing seen, zero gradients
            self._zero_gradients(buffers)
            return
        act_deriv = _h.act_func_deriv[self.activation]
        sigmoid_deriv = _h.sigmoid_deriv
        inactive, carry = self._clock_backward(buffers)

        # Every delta of the recurrence is a delta times a factor that
        # depends only on the forward pass, so the factors are computed for
        # all time steps at once, in the memory of dZb, dIb, dFb, dOb, dCb:
        #   dZa = dCa * Ib g'(Za)      dIa = dCa * Zb s'(Ia)
        #   dFa = dCa * Ca_ s'(Fa)     dOa = dy * Cb s'(Oa)
        #   dCa = dy * Ob h'(Ca) + peephole and next-step terms
        PZ, PI, PF, PO, PC = dZb, dIb, dFb, dOb, dCb
        act_deriv(Za[:T], Zb[:T], Ib[:T], PZ[:T])
        sigmoid_deriv(Ia[:T], Ib[:T], Zb[:T], PI[:T])
        sigmoid_deriv(Fa[:1], Fb[:1], Ca[-1:], PF[:1])
        if T > 1:
            sigmoid_deriv(Fa[1:T], Fb[1:T], Ca[: T - 1], PF[1:T])
        sigmoid_deriv(Oa[:T], Ob[:T], Cb[:T], PO[:T])
        act_deriv(Ca[:T], Cb[:T], Ob[:T], PC[:T])
        if inactive is not None and T > 1:
            # inactive units kept their state: no deltas through the gates
            for factor in (PZ, PI, PF, PO, PC):
                _h.fill_if(factor[1:T], 0.0, inactive[1:T])

        # dy[t] accumulates the full delta of y[t] in place (a layer may
        # overwrite its own output deltas). The deltas at t + 1 = T are the
        # zeroed backward context slots, so the last step is not special.
        with _h.fixed_operand(R):
            if inactive is None:  # every unit stepped: the cell is one handler op
                dGB = internals.get_group('dGB')
                for t in range(T - 1, -1, -1):
                    _h.dot_add_mm(dGA[t + 1], R, dy[t])
                    _h.lstm_backward_step(
                        dy[t], dGB[t], PC[t], dGA[t + 1], dCa[t + 1], Fb[t + 1],
                        pi, pf, po, dGA[t], dCa[t],
                    )  # fmt: skip
            else:
                self._clocked_backward_steps(buffers, T, inactive, carry)

        # input deltas and gradients of all gates and time steps at once
        x_all = flatten_time_and_features(x)
        dGA_all = flatten_time(dGA[:T])
        if 'default' not in self.skip_input_deltas:
            product = (
                _h.dot_mm if 'default' in self.overwrite_input_deltas else _h.dot_add_mm
            )
            product(dGA_all, W, flatten_time_and_features(dx))
        # the gradients are this layer's own (overwrites_gradients: the
        # network does not zero them; deltas of layers fed with
        # '..parameters.W' are added later): the first product overwrites
        _h.dot_mm(dGA_all, x_all, dW, transa=True)
        # y[t - 1] at t = 0 is the context y[-1], not a time step
        _h.dot_mm(dGA[0], y[-1], dR, transa=True)
        if T > 1:
            _h.dot_add_mm(
                flatten_time(dGA[1:T]), flatten_time(y[: T - 1]), dR, transa=True
            )
        _h.sum_t(dGA_all, 0, db)

        # peephole gradients; dy is no longer needed and serves as scratch
        scratch = dy[:T]
        for dA, dp in ((dIa, dpi), (dFa, dpf)):
            # Ca[t - 1]: the context at t = 0
            _h.mult_tt(dA[0], Ca[-1], scratch[0])
            if T > 1:
                _h.mult_tt(dA[1:T], Ca[: T - 1], scratch[1:T])
            _h.sum_t(flatten_time(scratch), 0, dp)
        _h.mult_tt(dOa[:T], Ca[:T], scratch)
        _h.sum_t(flatten_time(scratch), 0, dpo)

    def _clocked_backward_steps(self, buffers, T: int, inactive, carry) -> None:
        """The backward time steps where units may keep their state."""
        _h = self.handler
        R = buffers.parameters.get_group('R')
        pi, pf, po = buffers.parameters.pi, buffers.parameters.pf, buffers.parameters.po
        internals = buffers.internals
        Fb, dGA = internals['Fb'], internals.get_group('dGA')
        dZa, dIa, dFa, dOa, dCa = (internals['d' + n + 'a'] for n in 'ZIFOC')
        PZ, PI, PF, PO, PC = (internals['d' + n + 'b'] for n in 'ZIFOC')
        dy = buffers.output_deltas.default
        for t in range(T - 1, -1, -1):
            _h.dot_add_mm(dGA[t + 1], R, dy[t])
            clocked = t + 1 < T
            if clocked:  # an inactive unit passes y[t + 1]'s delta to y[t]
                _h.add_into_if(dy[t + 1], dy[t], inactive[t + 1])
            _h.mult_tt(dy[t], PO[t], dOa[t])
            _h.mult_tt(dy[t], PC[t], dCa[t])
            _h.mult_add_mv(dOa[t], po, dCa[t])
            _h.mult_add_mv(dIa[t + 1], pi, dCa[t])
            _h.mult_add_mv(dFa[t + 1], pf, dCa[t])
            if clocked:  # Ca[t + 1] = Ca[t] for inactive units
                _h.mult_tt(Fb[t + 1], dCa[t + 1], carry)
                _h.copy_to_if(dCa[t + 1], carry, inactive[t + 1])
                _h.add_tt(dCa[t], carry, dCa[t])
            else:
                _h.mult_add_tt(Fb[t + 1], dCa[t + 1], dCa[t])
            _h.mult_tt(dCa[t], PZ[t], dZa[t])
            _h.mult_tt(dCa[t], PI[t], dIa[t])
            _h.mult_tt(dCa[t], PF[t], dFa[t])
