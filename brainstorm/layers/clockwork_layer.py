"""Clockwork: a recurrent layer whose units update at their own periods."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.layers.attributes import Activation, Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.utils import flatten_time, flatten_time_and_features


def Clockwork(size: int, activation: str = 'tanh',
              name: str | None = None) -> ConstructionWrapper:
    """A clockwork recurrent layer (Koutnik et al., 2014).

    A :func:`~brainstorm.layers.Recurrent` layer in which unit ``i`` only
    updates at time steps ``t`` with ``t mod timing[i] == 0`` and otherwise
    keeps its previous output::

        Ha[t] = W x[t] + bias + R y[t-1]
        y[t]  = f(Ha[t])   if t mod timing[i] == 0   else   y[t-1]

    ``t`` counts the steps of the current forward pass, so every unit is
    active at ``t = 0``, also when a context is passed to ``forward_pass``
    (as in Brainstorm 0.5); the context enters only through ``y[-1]``.

    ``timing`` is a parameter that is not trained: it gets no gradient,
    steppers and modifiers leave it alone, and ``net.initialize`` sets it
    to 1 (every unit active at every step) unless a pattern names it, e.g.
    ``net.initialize({'Clockwork': {'timing': [1, 2, 4, 8]}, ...})``. Its
    entries should be positive integers.

    Multi-dimensional input features are flattened.

    Args:
        size: number of units (defaults to the input feature size when
            absent from an architecture).
        activation: 'sigmoid', 'tanh', 'rel', 'linear' or 'el'.
        name: the layer name.

    Shapes:
        ``('T', 'B', ...)`` -> ``('T', 'B', size)`` with context 1;
        parameters ``W (size, in)``, ``R (size, size)``, ``bias (size,)``,
        ``timing (size,)``.
    """
    return ConstructionWrapper.create(ClockworkLayerImpl, name=name,
                                      size=size, activation=activation)


def clock_internals(size: int) -> OrderedDict:
    """The internals a clocked layer adds: ``inactive`` (T, B, size), non-zero
    where a unit keeps its state, and ``timing_rows`` (B, size), the timing
    repeated for every sequence of the batch."""
    return OrderedDict(inactive=BufferStructure('T', 'B', size),
                       timing_rows=BufferStructure('B', size))


def compute_inactive(handler, timing, timing_rows, inactive,
                     time_steps: int) -> None:
    """Fill ``inactive[t]`` with ``fmod(t, timing)`` for every time step.

    The result is zero exactly where a unit updates (always at ``t = 0``).
    """
    size = timing.shape[0]
    handler.broadcast_t(timing.reshape((1, size)), 0, timing_rows)
    for t in range(time_steps):
        handler.fill(inactive[t], float(t))
        handler.modulo_tt(inactive[t], timing_rows, inactive[t])


class ClockworkLayerImpl(Layer):
    """The implementation of :func:`Clockwork`.

    Besides the internals of Recurrent it keeps the mask ``inactive``
    (``fmod(t, timing)``, non-zero where a unit keeps its output) and
    ``timing_rows`` (the timing repeated for every sequence).
    """

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'size': Kwarg(PositiveInt(), default=None,
                      description='number of units (default: input size)'),
        'activation': Kwarg(Activation(), default='tanh',
                            description='activation function'),
    }
    untrained_parameters = {'timing': 1.0}
    computes_no_gradients_for = ('timing',)

    def setup(self, kwargs, in_shapes):
        self.activation = kwargs['activation']
        n_in = in_shapes['default'].feature_size
        size = kwargs['size'] or n_in
        self.size = size
        outputs = OrderedDict(default=BufferStructure('T', 'B', size,
                                                      context_size=1))
        parameters = OrderedDict(W=BufferStructure(size, n_in),
                                 R=BufferStructure(size, size),
                                 bias=BufferStructure(size),
                                 timing=BufferStructure(size))
        internals = OrderedDict(
            Ha=BufferStructure('T', 'B', size, context_size=1),
            dHa=BufferStructure('T', 'B', size, context_size=1,
                                is_backward_only=True),
            dHb=BufferStructure('T', 'B', size, context_size=1,
                                is_backward_only=True))
        internals.update(clock_internals(size))
        return outputs, parameters, internals

    def forward_pass(self, buffers, training_pass=True):
        _h = self.handler
        W, R, bias, timing = buffers.parameters
        x = buffers.inputs.default
        y = buffers.outputs.default
        Ha = buffers.internals.Ha
        inactive = buffers.internals.inactive
        T = x.shape[0]
        act = _h.act_func[self.activation]
        compute_inactive(_h, timing, buffers.internals.timing_rows, inactive,
                         T)

        # input projection for all time steps in one matrix product
        Ha_all = flatten_time(Ha[:T])
        _h.dot_mm(flatten_time_and_features(x), W, Ha_all, transb=True)
        _h.add_mv(Ha_all, bias.reshape((1, self.size)), Ha_all)
        for t in range(T):
            _h.dot_add_mm(y[t - 1], R, Ha[t], transb=True)
            act(Ha[t], y[t])
            if t:  # every unit is active at t = 0
                _h.copy_to_if(y[t - 1], y[t], inactive[t])

    def backward_pass(self, buffers):
        _h = self.handler
        W, R, bias, timing = buffers.parameters
        dW, dR, dbias, dtiming = buffers.gradients
        x = buffers.inputs.default
        dx = buffers.input_deltas.default
        y, dy = buffers.outputs.default, buffers.output_deltas.default
        Ha, dHa, dHb = buffers.internals.Ha, buffers.internals.dHa, \
            buffers.internals.dHb
        inactive = buffers.internals.inactive
        T = x.shape[0]
        act_deriv = _h.act_func_deriv[self.activation]

        # dHb[t] is the full delta of y[t]; dHa[T] is the zeroed context slot
        for t in range(T - 1, -1, -1):
            _h.copy_to(dy[t], dHb[t])
            _h.dot_add_mm(dHa[t + 1], R, dHb[t])
            if t + 1 < T:  # an inactive unit passes y[t + 1]'s delta on
                _h.add_into_if(dHb[t + 1], dHb[t], inactive[t + 1])
            act_deriv(Ha[t], y[t], dHb[t], dHa[t])
            if t:
                _h.fill_if(dHa[t], 0., inactive[t])

        dHa_all = flatten_time(dHa[:T])
        x_all = flatten_time_and_features(x)
        _h.dot_add_mm(dHa_all, W, flatten_time_and_features(dx))
        _h.dot_add_mm(dHa_all, x_all, dW, transa=True)
        _h.dot_add_mm(dHa[0], y[-1], dR, transa=True)
        if T > 1:
            _h.dot_add_mm(flatten_time(dHa[1:T]), flatten_time(y[:T - 1]), dR,
                          transa=True)
        _h.sum_t(dHa_all, 0, dbias)
