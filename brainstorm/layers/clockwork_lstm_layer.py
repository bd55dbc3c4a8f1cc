"""ClockworkLstm: an Lstm whose cells update at their own periods."""

from __future__ import annotations

from collections import OrderedDict  # noqa: F401 - in Brainstorm 0.5's namespace of this module

from brainstorm.errors import LayerValidationError  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.layers.base_layer import Layer  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.layers.clockwork_layer import (
    check_timing,
    clock_internals,
    compute_inactive,
)
from brainstorm.layers.lstm_layer import LstmLayerImpl
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


def ClockworkLstm(
    size: int, activation: str = 'tanh', name: str | None = None
) -> ConstructionWrapper:
    """An :func:`~brainstorm.layers.Lstm` with clockwork timing.

    Cell ``i`` computes the Lstm step only at time steps ``t`` with
    ``t mod timing[i] == 0``; otherwise it keeps both its output and its
    cell state: ``y[t, i] = y[t-1, i]`` and ``Ca[t, i] = Ca[t-1, i]``.

    ``t`` counts the steps of the current forward pass, so every cell is
    active at ``t = 0``, also when a context is passed to ``forward_pass``
    (as in Brainstorm 0.5); the context enters only through ``y[-1]`` and
    ``Ca[-1]``.

    ``timing`` is a parameter that is not trained: it gets no gradient,
    steppers and modifiers leave it alone, and ``net.initialize`` sets it
    to 1 (every cell active at every step) unless a pattern names it, e.g.
    ``net.initialize({'ClockworkLstm': {'timing': [1, 2, 4, 8]}, ...})``.
    Its entries should be positive integers.

    Multi-dimensional input features are flattened.

    Args:
        size: number of cells (defaults to the input feature size when
            absent from an architecture).
        activation: 'sigmoid', 'tanh', 'rel' (or 'relu'), 'linear', 'el',
            'softplus' or 'leaky_rel'.
        name: the layer name.

    Shapes:
        ``('T', 'B', ...)`` -> ``('T', 'B', size)`` with context 1;
        parameters as :func:`~brainstorm.layers.Lstm`, then
        ``timing (size,)``.
    """
    return ConstructionWrapper.create(
        ClockworkLstmLayerImpl, name=name, size=size, activation=activation
    )


class ClockworkLstmLayerImpl(LstmLayerImpl):
    """The implementation of :func:`ClockworkLstm`: Lstm passes with a clock.

    Adds the parameter ``timing`` and the internals ``inactive`` and
    ``timing_rows`` (as Clockwork) and ``carry``, a backward scratch array
    for the cell-state delta an inactive cell passes back.
    """

    untrained_parameters = {'timing': 1.0}
    computes_no_gradients_for = ('timing',)

    def check_parameter_values(self, name: str, values) -> None:
        """Refuse a ``timing`` of 0 or NaN (see ``check_timing``)."""
        check_timing(name, values)

    # the clock runs forwards: no ``reverse`` and no ``mask`` input
    declared_kwargs = forwards_only(LstmLayerImpl.declared_kwargs)
    optional_inputs: dict = {}

    def setup(self, kwargs, in_shapes):
        """The Lstm's buffers plus ``timing`` and the clock internals."""
        outputs, parameters, internals = super().setup(kwargs, in_shapes)
        parameters['timing'] = BufferStructure(self.size)
        internals.update(clock_internals(self.size))
        # scratch for the delta an inactive cell passes back to Ca[t - 1]
        internals['carry'] = BufferStructure('B', self.size, is_backward_only=True)
        return outputs, parameters, internals

    def _clock_forward(self, buffers, time_steps: int):
        inactive = buffers.internals.inactive
        compute_inactive(
            self.handler,
            buffers.parameters.timing,
            buffers.internals.timing_rows,
            inactive,
            time_steps,
        )
        return inactive

    def _clock_backward(self, buffers):
        return buffers.internals.inactive, buffers.internals.carry
