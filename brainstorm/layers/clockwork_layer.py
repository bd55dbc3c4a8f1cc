"""Clockwork: a recurrent layer whose units update at their own periods."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.errors import LayerValidationError  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.layers.base_layer import Layer  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.layers.recurrent_layer import RecurrentLayerImpl
from brainstorm.layers.time_reversal import forwards_only
from brainstorm.shapes import (  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    flatten_time,
    flatten_time_and_features,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def Clockwork(
    size: int, activation: str = 'tanh', name: str | None = None
) -> ConstructionWrapper:
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
        activation: 'sigmoid', 'tanh', 'rel' (or 'relu'), 'linear', 'el',
            'softplus' or 'leaky_rel'.
        name: the layer name.

    Shapes:
        ``('T', 'B', ...)`` -> ``('T', 'B', size)`` with context 1;
        parameters ``W (size, in)``, ``R (size, size)``, ``bias (size,)``,
        ``timing (size,)``.
    """
    return ConstructionWrapper.create(
        ClockworkLayerImpl, name=name, size=size, activation=activation
    )


def clock_internals(size: int) -> OrderedDict:
    """The internals a clocked layer adds.

    ``inactive`` (T, B, size), non-zero where a unit keeps its state, and
    ``timing_rows`` (B, size), the timing repeated for every sequence of the
    batch.
    """
    return OrderedDict(
        inactive=BufferStructure('T', 'B', size), timing_rows=BufferStructure('B', size)
    )


def check_timing(name: str, values) -> None:
    """Refuse clock periods of 0 or NaN (``check_parameter_values``).

    A unit updates at the steps ``t`` where ``fmod(t, timing) == 0``:
    ``fmod(t, 0)`` and ``fmod(t, nan)`` are NaN, so such a unit would
    never update after ``t = 0``, silently. Other values keep their
    ``fmod`` meaning, as in Brainstorm 0.5 (1.5 updates every 3 steps, -2
    every 2), though the periods are meant to be integers >= 1.

    Raises:
        ValueError: naming the entry.
    """
    if name != 'timing':
        return
    periods = np.asarray(values, dtype=np.float64).ravel()
    bad = (periods == 0) | np.isnan(periods)
    if bad.any():
        index = int(np.argmax(bad))
        raise ValueError(
            f'parameter timing holds the periods of the units (a unit '
            f'updates at the steps t where t mod timing == 0), integers >= '
            f'1; a period of 0 or NaN would stop the unit after t = 0. '
            f'Received: timing[{index}] = {float(periods[index])!r}.'
        )


def compute_inactive(handler, timing, timing_rows, inactive, time_steps: int) -> None:
    """Fill ``inactive[t]`` with ``fmod(t, timing)`` for every time step.

    The result is zero exactly where a unit updates (always at ``t = 0``).
    """
    size = timing.shape[0]
    handler.broadcast_t(timing.reshape((1, size)), 0, timing_rows)
    for t in range(time_steps):
        handler.fill(inactive[t], float(t))
        handler.modulo_tt(inactive[t], timing_rows, inactive[t])


class ClockworkLayerImpl(RecurrentLayerImpl):
    """Implementation of :func:`Clockwork`.

    A Recurrent layer whose units update only every ``timing[i]`` steps.

    Besides the internals of Recurrent it keeps the mask ``inactive``
    (``fmod(t, timing)``, non-zero where a unit keeps its output) and
    ``timing_rows`` (the timing repeated for every sequence).
    """

    untrained_parameters = {'timing': 1.0}
    computes_no_gradients_for = ('timing',)
    passes_back_internal_deltas = ()

    def check_parameter_values(self, name: str, values) -> None:
        """Refuse a ``timing`` of 0 or NaN (see :func:`check_timing`)."""
        check_timing(name, values)

    # the clock runs forwards: no ``reverse`` and no ``mask`` input
    declared_kwargs = forwards_only(RecurrentLayerImpl.declared_kwargs)
    optional_inputs: dict = {}

    def setup(self, kwargs, in_shapes):
        """Recurrent's buffers plus the parameter ``timing`` and the clock internals."""
        outputs, parameters, internals = super().setup(kwargs, in_shapes)
        parameters['timing'] = BufferStructure(self.size)
        internals.update(clock_internals(self.size))
        return outputs, parameters, internals

    def forward_pass(self, buffers, training_pass=True):
        """As Recurrent, but a unit whose period has not come keeps its last output."""
        _h = self.handler
        R, timing = buffers.parameters.R, buffers.parameters.timing
        y = buffers.outputs.default
        Ha, inactive = buffers.internals.Ha, buffers.internals.inactive
        act = _h.act_func[self.activation]

        T = self._project_inputs(buffers)
        compute_inactive(_h, timing, buffers.internals.timing_rows, inactive, T)
        for t in range(T):
            _h.dot_add_mm(y[t - 1], R, Ha[t], transb=True)
            act(Ha[t], y[t])
            if t:  # every unit is active at t = 0
                _h.copy_to_if(y[t - 1], y[t], inactive[t])

    def backward_pass(self, buffers):
        """As Recurrent, but an inactive unit passes its delta to the previous step.

        Inactive units get no delta through their activation (``dHa`` is 0).
        """
        _h = self.handler
        R = buffers.parameters.R
        y, dy = buffers.outputs.default, buffers.output_deltas.default
        Ha, dHa, dHb = (buffers.internals[n] for n in ('Ha', 'dHa', 'dHb'))
        inactive = buffers.internals.inactive
        T = buffers.inputs.default.shape[0]
        act_deriv = _h.act_func_deriv[self.activation]

        # dHb[t] is the full delta of y[t]; dHa[T] is the zeroed context slot
        for t in range(T - 1, -1, -1):
            _h.copy_to(dy[t], dHb[t])
            _h.dot_add_mm(dHa[t + 1], R, dHb[t])
            if t + 1 < T:  # an inactive unit passes y[t + 1]'s delta on
                _h.add_into_if(dHb[t + 1], dHb[t], inactive[t + 1])
            act_deriv(Ha[t], y[t], dHb[t], dHa[t])
            if t:
                _h.fill_if(dHa[t], 0.0, inactive[t])
        self._backward_through_inputs(buffers)
