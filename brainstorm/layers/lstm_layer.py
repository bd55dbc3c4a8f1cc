"""Lstm: a long short-term memory layer with peephole connections."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.attributes import Activation, Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.utils import flatten_time, flatten_time_and_features

#: The forward internals in ``setup`` order; each has a delta ``'d' + name``.
LSTM_INTERNALS = ('Za', 'Zb', 'Ia', 'Ib', 'Fa', 'Fb', 'Oa', 'Ob', 'Ca', 'Cb')


def Lstm(size: int, activation: str = 'tanh',
         name: str | None = None) -> ConstructionWrapper:
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
        activation: 'sigmoid', 'tanh', 'rel', 'linear' or 'el' (``g, h``).
        name: the layer name.

    Shapes:
        ``('T', 'B', ...)`` -> ``('T', 'B', size)`` with context 1;
        parameters ``Wz Wi Wf Wo (size, in)``, ``pi pf po (1, size)``,
        ``Rz Ri Rf Ro (size, size)``, ``bz bi bf bo (size,)``.
    """
    return ConstructionWrapper.create(LstmLayerImpl, name=name, size=size,
                                      activation=activation)


class LstmLayerImpl(Layer):
    """The implementation of :func:`Lstm`.

    The input projections of all time steps are four matrix products before
    the time loop, the recurrent part runs step by step, and the weight
    gradients are again matrix products over all time steps. Subclasses
    add a clock through :meth:`_clock_forward` and :meth:`_clock_backward`
    (see :class:`~brainstorm.layers.clockwork_lstm_layer.ClockworkLstmLayerImpl`).
    """

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'size': Kwarg(PositiveInt(), default=None,
                      description='number of cells (default: input size)'),
        'activation': Kwarg(Activation(), default='tanh',
                            description='cell input and output activation'),
    }

    def setup(self, kwargs, in_shapes):
        self.activation = kwargs['activation']
        n_in = in_shapes['default'].feature_size
        size = kwargs['size'] or n_in
        self.size = size
        outputs = OrderedDict(default=BufferStructure('T', 'B', size,
                                                      context_size=1))
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
            (n, BufferStructure('T', 'B', size, context_size=1))
            for n in LSTM_INTERNALS)
        internals.update(
            ('d' + n, BufferStructure('T', 'B', size, context_size=1,
                                      is_backward_only=True))
            for n in LSTM_INTERNALS)
        return outputs, parameters, internals

    # Hooks for ClockworkLstm: a mask that is non-zero where a unit keeps
    # its previous state, and a (B, size) scratch array for the backward
    # pass. Plain Lstm units are always active.

    def _clock_forward(self, buffers, time_steps: int):
        """Return the ``(T, B, size)`` mask of inactive units, or None."""
        return None

    def _clock_backward(self, buffers):
        """Return ``(inactive, carry)``: the forward mask and a (B, size)
        scratch array, or ``(None, None)``."""
        return None, None

    def forward_pass(self, buffers, training_pass=True):
        _h = self.handler
        (Wz, Wi, Wf, Wo, pi, pf, po, Rz, Ri, Rf, Ro,
         bz, bi, bf, bo) = list(buffers.parameters)[:15]
        Za, Zb, Ia, Ib, Fa, Fb, Oa, Ob, Ca, Cb = (
            buffers.internals[n] for n in LSTM_INTERNALS)
        x = buffers.inputs.default
        y = buffers.outputs.default
        T = x.shape[0]
        act = _h.act_func[self.activation]
        sigmoid = _h.sigmoid
        inactive = self._clock_forward(buffers, T)

        # input projections for all time steps, one matrix product per gate
        x_all = flatten_time_and_features(x)
        for W, bias, A in ((Wz, bz, Za), (Wi, bi, Ia), (Wf, bf, Fa),
                           (Wo, bo, Oa)):
            A_all = flatten_time(A[:T])
            _h.dot_mm(x_all, W, A_all, transb=True)
            _h.add_mv(A_all, bias.reshape((1, self.size)), A_all)

        # index -1 is the context slot, so t = 0 needs no special case
        for t in range(T):
            _h.dot_add_mm(y[t - 1], Rz, Za[t], transb=True)
            _h.dot_add_mm(y[t - 1], Ri, Ia[t], transb=True)
            _h.dot_add_mm(y[t - 1], Rf, Fa[t], transb=True)
            _h.dot_add_mm(y[t - 1], Ro, Oa[t], transb=True)
            _h.mult_add_mv(Ca[t - 1], pi, Ia[t])
            _h.mult_add_mv(Ca[t - 1], pf, Fa[t])
            act(Za[t], Zb[t])
            sigmoid(Ia[t], Ib[t])
            sigmoid(Fa[t], Fb[t])
            _h.mult_tt(Ib[t], Zb[t], Ca[t])
            _h.mult_add_tt(Fb[t], Ca[t - 1], Ca[t])
            if inactive is not None and t:
                _h.copy_to_if(Ca[t - 1], Ca[t], inactive[t])
            _h.mult_add_mv(Ca[t], po, Oa[t])
            sigmoid(Oa[t], Ob[t])
            act(Ca[t], Cb[t])
            _h.mult_tt(Ob[t], Cb[t], y[t])
            if inactive is not None and t:
                _h.copy_to_if(y[t - 1], y[t], inactive[t])

    def backward_pass(self, buffers):
        _h = self.handler
        (Wz, Wi, Wf, Wo, pi, pf, po, Rz, Ri, Rf, Ro,
         bz, bi, bf, bo) = list(buffers.parameters)[:15]
        (dWz, dWi, dWf, dWo, dpi, dpf, dpo, dRz, dRi, dRf, dRo,
         dbz, dbi, dbf, dbo) = list(buffers.gradients)[:15]
        Za, Zb, Ia, Ib, Fa, Fb, Oa, Ob, Ca, Cb = (
            buffers.internals[n] for n in LSTM_INTERNALS)
        dZa, dZb, dIa, dIb, dFa, dFb, dOa, dOb, dCa, dCb = (
            buffers.internals['d' + n] for n in LSTM_INTERNALS)
        x, dx = buffers.inputs.default, buffers.input_deltas.default
        y, dy = buffers.outputs.default, buffers.output_deltas.default
        T = x.shape[0]
        act_deriv = _h.act_func_deriv[self.activation]
        sigmoid_deriv = _h.sigmoid_deriv
        inactive, carry = self._clock_backward(buffers)

        # dy[t] accumulates the full delta of y[t] in place (a layer may
        # overwrite its own output deltas). The deltas at t + 1 = T are the
        # zeroed backward context slots, so the last step is not special.
        for t in range(T - 1, -1, -1):
            _h.dot_add_mm(dZa[t + 1], Rz, dy[t])
            _h.dot_add_mm(dIa[t + 1], Ri, dy[t])
            _h.dot_add_mm(dFa[t + 1], Rf, dy[t])
            _h.dot_add_mm(dOa[t + 1], Ro, dy[t])
            clocked = inactive is not None and t + 1 < T
            if clocked:  # an inactive unit passes y[t + 1]'s delta to y[t]
                _h.add_into_if(dy[t + 1], dy[t], inactive[t + 1])

            _h.mult_tt(dy[t], Cb[t], dOb[t])
            sigmoid_deriv(Oa[t], Ob[t], dOb[t], dOa[t])
            _h.mult_tt(dy[t], Ob[t], dCb[t])
            if inactive is not None and t:
                _h.fill_if(dOa[t], 0., inactive[t])
                _h.fill_if(dCb[t], 0., inactive[t])
            act_deriv(Ca[t], Cb[t], dCb[t], dCa[t])
            _h.mult_add_mv(dOa[t], po, dCa[t])
            _h.mult_add_mv(dIa[t + 1], pi, dCa[t])
            _h.mult_add_mv(dFa[t + 1], pf, dCa[t])
            if clocked:  # Ca[t + 1] = Ca[t] for inactive units
                _h.mult_tt(Fb[t + 1], dCa[t + 1], carry)
                _h.copy_to_if(dCa[t + 1], carry, inactive[t + 1])
                _h.add_tt(dCa[t], carry, dCa[t])
            else:
                _h.mult_add_tt(Fb[t + 1], dCa[t + 1], dCa[t])

            _h.mult_tt(dCa[t], Ib[t], dZb[t])
            act_deriv(Za[t], Zb[t], dZb[t], dZa[t])
            _h.mult_tt(dCa[t], Zb[t], dIb[t])
            sigmoid_deriv(Ia[t], Ib[t], dIb[t], dIa[t])
            _h.mult_tt(dCa[t], Ca[t - 1], dFb[t])
            sigmoid_deriv(Fa[t], Fb[t], dFb[t], dFa[t])
            if inactive is not None and t:
                _h.fill_if(dZa[t], 0., inactive[t])
                _h.fill_if(dIa[t], 0., inactive[t])
                _h.fill_if(dFa[t], 0., inactive[t])

        # input deltas and gradients for all time steps at once
        x_all = flatten_time_and_features(x)
        dx_all = flatten_time_and_features(dx)
        for W, dW, dR, dbias, dA in (
                (Wz, dWz, dRz, dbz, dZa), (Wi, dWi, dRi, dbi, dIa),
                (Wf, dWf, dRf, dbf, dFa), (Wo, dWo, dRo, dbo, dOa)):
            dA_all = flatten_time(dA[:T])
            _h.dot_add_mm(dA_all, W, dx_all)
            # the gradients are this layer's own (zeroed before the pass;
            # deltas of layers fed with '..parameters.W' are added later by
            # the network): the first product overwrites them
            _h.dot_mm(dA_all, x_all, dW, transa=True)
            # y[t - 1] at t = 0 is the context y[-1], not a time step
            _h.dot_mm(dA[0], y[-1], dR, transa=True)
            if T > 1:
                _h.dot_add_mm(flatten_time(dA[1:T]), flatten_time(y[:T - 1]),
                              dR, transa=True)
            _h.sum_t(dA_all, 0, dbias)

        # peephole gradients; dy is no longer needed and serves as scratch
        scratch = dy[:T]
        for dA, dp, C_prev in ((dIa, dpi, True), (dFa, dpf, True),
                               (dOa, dpo, False)):
            if C_prev:  # Ca[t - 1]: the context at t = 0
                _h.mult_tt(dA[0], Ca[-1], scratch[0])
                if T > 1:
                    _h.mult_tt(dA[1:T], Ca[:T - 1], scratch[1:T])
            else:
                _h.mult_tt(dA[:T], Ca[:T], scratch)
            _h.sum_t(flatten_time(scratch), 0, dp)
