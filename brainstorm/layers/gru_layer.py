"""GRU: a gated recurrent unit layer (the variant of PyTorch and cuDNN)."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.attributes import Activation, Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.layers.time_reversal import reversible
from brainstorm.shapes import (
    flatten_time,
    flatten_time_and_features,
)
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper

#: The forward internals in ``setup`` order.
GRU_INTERNALS = ('Ra', 'Za', 'Na', 'Rb', 'Zb', 'Nb', 'Hn')
#: The backward-only internals (deltas and the ``P*`` derivative factors).
GRU_BACKWARD = ('dRa', 'dZa', 'dHn', 'dNa', 'PR', 'PZ', 'PN')
#: The parameters of the three gates, grouped by kind (``grouped_buffers``).
_GATE_PARAMETERS = {
    'W': ('Wr', 'Wz', 'Wn'),
    'R': ('Rr', 'Rz', 'Rn'),
    'b': ('br', 'bz', 'bn'),
}


def GRU(
    size: int,
    activation: str = 'tanh',
    name: str | None = None,
    reverse: bool = False,
) -> ConstructionWrapper:
    """A gated recurrent unit layer.

    With ``sigma`` the logistic sigmoid, ``f`` the activation and ``y_`` the
    output of the previous time step (the context at ``t = 0``, zero unless
    a context is passed to ``forward_pass``)::

        Ra = Wr x + Rr y_ + br,          Rb = sigma(Ra)     (reset gate)
        Za = Wz x + Rz y_ + bz,          Zb = sigma(Za)     (update gate)
        Hn = Rn y_ + bhn
        Na = Wn x + bn + Rb * Hn,        Nb = f(Na)         (candidate)
        y  = (1 - Zb) * Nb + Zb * y_

    This is the variant of PyTorch's ``torch.nn.GRU`` and of cuDNN: the
    reset gate multiplies the recurrent product ``Rn y_ + bhn``, not
    ``y_`` before the product (as in Cho et al., 2014). PyTorch's weights
    map one to one: ``weight_ih_l0`` is the group ``W`` (``Wr``, ``Wz``,
    ``Wn`` stacked in this order), ``weight_hh_l0`` the group ``R``, ``b``
    is ``bias_ih_l0`` plus ``bias_hh_l0`` for the reset and update gates and
    ``bias_ih_l0`` alone for ``bn``, and ``bhn`` is the last third of
    ``bias_hh_l0``. Multi-dimensional input features are flattened.

    Args:
        size: number of units (defaults to the input feature size when
            absent from an architecture).
        activation: the candidate's activation ``f``: 'sigmoid', 'tanh',
            'rel' (or 'relu'), 'linear', 'el', 'softplus' or 'leaky_rel'.
        name: the layer name.
        reverse: run backwards in time, each sequence within the length
            given by the optional input ``mask`` (see
            :mod:`brainstorm.layers.time_reversal`).

    Shapes:
        ``('T', 'B', ...)`` -> ``('T', 'B', size)`` with context 1;
        parameters ``Wr Wz Wn (size, in)``, ``Rr Rz Rn (size, size)``,
        ``br bz bn bhn (size,)``. Like ``Lstm``'s, the gate parameters lie
        side by side in the groups ``W (3*size, in)``, ``R (3*size, size)``
        and ``b (3*size,)``, and the gate activations in ``GA`` (``Ra Za
        Na``) and ``GB`` (``Rb Zb``).
    """
    return ConstructionWrapper.create(
        GRULayerImpl,
        name=name,
        size=size,
        activation=activation,
        # only where set: the architecture of a forward layer stays 0.5's
        **({} if reverse is False else {'reverse': reverse}),
    )


@reversible
class GRULayerImpl(Layer):
    """The implementation of :func:`GRU`.

    The input projections of all gates and time steps are one matrix
    product before the time loop; each step takes two recurrent products
    (the reset and update gates together, then the candidate's), and the
    weight gradients are matrix products over all time steps.
    """

    overwrites_gradients = True
    overwrites_backward_internals = True
    expected_inputs = {'default': time_template()}
    grouped_buffers = {
        'parameters': _GATE_PARAMETERS,
        'gradients': _GATE_PARAMETERS,
        'internals': {
            'GA': ('Ra', 'Za', 'Na'),
            'GB': ('Rb', 'Zb'),
            # the deltas of the recurrent products R y_ (and of W x for the
            # reset and update gates)
            'dGR': ('dRa', 'dZa', 'dHn'),
        },
    }
    declared_kwargs = {
        'size': Kwarg(
            PositiveInt(),
            default=None,
            description='number of units (default: input size)',
        ),
        'activation': Kwarg(Activation(), description='candidate activation'),
    }

    def setup(self, kwargs, in_shapes):
        """Weights and biases per gate, the recurrent candidate bias; internals."""
        self.activation = kwargs['activation']
        n_in = in_shapes['default'].feature_size
        size = kwargs['size'] or n_in
        self.size = size
        outputs = OrderedDict(default=BufferStructure('T', 'B', size, context_size=1))
        parameters = OrderedDict()
        for gate in 'rzn':
            parameters['W' + gate] = BufferStructure(size, n_in)
        for gate in 'rzn':
            parameters['R' + gate] = BufferStructure(size, size)
        for gate in 'rzn':
            parameters['b' + gate] = BufferStructure(size)
        parameters['bhn'] = BufferStructure(size)
        internals = OrderedDict(
            (n, BufferStructure('T', 'B', size, context_size=1)) for n in GRU_INTERNALS
        )
        internals.update(
            (
                n,
                BufferStructure('T', 'B', size, context_size=1, is_backward_only=True),
            )
            for n in GRU_BACKWARD
        )
        return outputs, parameters, internals

    def forward_pass(self, buffers, training_pass=True):
        """Input projections for all steps at once, then the steps in order."""
        _h = self.handler
        S = self.size
        params, internals = buffers.parameters, buffers.internals
        W, R, b = (params.get_group(n) for n in 'WRb')
        Rn, bhn = params.Rn, params.bhn.reshape((1, S))
        GA, GB = internals.get_group('GA'), internals.get_group('GB')
        Na, Nb, Zb, Hn = (internals[n] for n in ('Na', 'Nb', 'Zb', 'Hn'))
        RZa, R_rz = GA[:, :, : 2 * S], R[: 2 * S]
        x = buffers.inputs.default
        y = buffers.outputs.default
        T = x.shape[0]
        act = self.handler.act_func[self.activation]

        GA_all = flatten_time(GA[:T])
        _h.dot_mm(flatten_time_and_features(x), W, GA_all, transb=True)
        _h.add_mv(GA_all, b.reshape((1, 3 * S)), GA_all)

        # index -1 is the context slot, so t = 0 needs no special case
        for t in range(T):
            _h.dot_add_mm(y[t - 1], R_rz, RZa[t], transb=True)
            _h.sigmoid(RZa[t], GB[t])
            _h.dot_mm(y[t - 1], Rn, Hn[t], transb=True)
            _h.add_mv(Hn[t], bhn, Hn[t])
            _h.mult_add_tt(GB[t][:, :S], Hn[t], Na[t])
            act(Na[t], Nb[t])
            # y = Nb + Zb * (y_ - Nb)
            _h.subtract_tt(y[t - 1], Nb[t], y[t])
            _h.mult_tt(Zb[t], y[t], y[t])
            _h.add_tt(y[t], Nb[t], y[t])

    def backward_pass(self, buffers):
        """The steps in reverse, then the weight gradients as matrix products."""
        _h = self.handler
        params, internals = buffers.parameters, buffers.internals
        W, R = params.get_group('W'), params.get_group('R')
        dW, dR, db = (buffers.gradients.get_group(n) for n in 'WRb')
        Ra, Za, Na, Rb, Zb, Nb, Hn = (internals[n] for n in GRU_INTERNALS)
        dRa, dZa, dHn, dNa, PR, PZ, PN = (internals[n] for n in GRU_BACKWARD)
        dGR = internals.get_group('dGR')
        x, dx = buffers.inputs.default, buffers.input_deltas.default
        y, dy = buffers.outputs.default, buffers.output_deltas.default
        T = x.shape[0]

        # Every delta of the recurrence is a delta times a factor that
        # depends only on the forward pass; the factors for all steps:
        #   dNa = dy * PN,  PN = (1 - Zb) f'(Na)
        #   dZa = dy * PZ,  PZ = (y_ - Nb) s'(Za)
        #   dRa = dNa * PR, PR = Hn s'(Ra);   dHn = dNa * Rb
        _h.mult_st(-1.0, Zb[:T], PN[:T])
        _h.add_st(1.0, PN[:T], PN[:T])
        self.handler.act_func_deriv[self.activation](Na[:T], Nb[:T], PN[:T], PN[:T])
        _h.subtract_tt(y[-1:], Nb[:1], PZ[:1])
        if T > 1:
            _h.subtract_tt(y[: T - 1], Nb[1:T], PZ[1:T])
        _h.sigmoid_deriv(Za[:T], Zb[:T], PZ[:T], PZ[:T])
        _h.sigmoid_deriv(Ra[:T], Rb[:T], Hn[:T], PR[:T])

        # dy[t] accumulates the full delta of y[t] in place (a layer may
        # overwrite its own output deltas); dGR[T] is the zeroed context slot
        for t in range(T - 1, -1, -1):
            _h.dot_add_mm(dGR[t + 1], R, dy[t])
            if t + 1 < T:  # y[t + 1] = ... + Zb[t + 1] * y[t]
                _h.mult_add_tt(dy[t + 1], Zb[t + 1], dy[t])
            _h.mult_tt(dy[t], PN[t], dNa[t])
            _h.mult_tt(dy[t], PZ[t], dZa[t])
            _h.mult_tt(dNa[t], PR[t], dRa[t])
            _h.mult_tt(dNa[t], Rb[t], dHn[t])

        self._gradients(buffers, dW, dR, db, W, dx)

    def _gradients(self, buffers, dW, dR, db, W, dx) -> None:
        """Input deltas and gradients of all gates and time steps at once.

        The gradients are this layer's own (``overwrites_gradients``): the
        first product of each overwrites.
        """
        _h = self.handler
        S = self.size
        internals = buffers.internals
        x, y = buffers.inputs.default, buffers.outputs.default
        T = x.shape[0]
        dGR = internals.get_group('dGR')
        x_all = flatten_time_and_features(x)
        dRZ_all = flatten_time(dGR[:T])[:, : 2 * S]
        dNa_all = flatten_time(internals.dNa[:T])
        dHn_all = flatten_time(internals.dHn[:T])

        if 'default' not in self.skip_input_deltas:
            dx_all = flatten_time_and_features(dx)
            _h.dot_add_mm(dRZ_all, W[: 2 * S], dx_all)
            _h.dot_add_mm(dNa_all, W[2 * S :], dx_all)
        _h.dot_mm(dRZ_all, x_all, dW[: 2 * S], transa=True)
        _h.dot_mm(dNa_all, x_all, dW[2 * S :], transa=True)
        # y[t - 1] at t = 0 is the context y[-1], not a time step
        _h.dot_mm(dGR[0], y[-1], dR, transa=True)
        if T > 1:
            _h.dot_add_mm(
                flatten_time(dGR[1:T]), flatten_time(y[: T - 1]), dR, transa=True
            )
        _h.sum_t(dRZ_all, 0, db[: 2 * S])
        _h.sum_t(dNa_all, 0, db[2 * S :])
        _h.sum_t(dHn_all, 0, buffers.gradients.bhn)
