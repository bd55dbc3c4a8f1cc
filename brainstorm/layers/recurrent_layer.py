"""Recurrent: a simple (Elman) recurrent layer."""

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


def Recurrent(
    size: int,
    activation: str = 'tanh',
    name: str | None = None,
    reverse: bool = False,
) -> ConstructionWrapper:
    """A simple recurrent layer.

    ``Ha[t] = W x[t] + bias + R y[t-1]``, ``y[t] = f(Ha[t])``, with
    ``y[-1]`` the context (zero unless a context is passed to
    ``forward_pass``).

    Args:
        size: number of units.
        activation: 'sigmoid', 'tanh', 'rel' (or 'relu'), 'linear', 'el',
            'softplus' or 'leaky_rel'.
        name: the layer name.
        reverse: run backwards in time, each sequence within the length
            given by the optional input ``mask`` (see
            :mod:`brainstorm.layers.time_reversal`).

    Shapes:
        ``('T', 'B', ...)`` -> ``('T', 'B', size)``; parameters
        ``W (size, in)``, ``R (size, size)``, ``bias (size,)``.
    """
    return ConstructionWrapper.create(
        RecurrentLayerImpl,
        name=name,
        size=size,
        activation=activation,
        # only where set: the architecture of a forward layer stays 0.5's
        **({} if reverse is False else {'reverse': reverse}),
    )


@reversible
class RecurrentLayerImpl(Layer):
    """Implementation of :func:`Recurrent`."""

    overwrites_backward_internals = True

    expected_inputs = {'default': time_template()}
    passes_back_internal_deltas: tuple[str, ...] = ('Ha',)
    declared_kwargs = {
        'size': Kwarg(
            PositiveInt(),
            default=None,
            description='number of units (default: input size)',
        ),
        'activation': Kwarg(Activation(), description='activation function'),
    }

    def setup(self, kwargs, in_shapes):
        """Output ``default (T, B, size)`` with one step of context.

        Parameters ``W (size, in)``, ``R (size, size)`` and ``bias (size,)``;
        internals ``Ha`` (the activations' inputs) and the backward-only ``dHa``
        and ``dHb``.
        """
        self.activation = kwargs['activation']
        n_in = in_shapes['default'].feature_size
        size = kwargs['size'] or n_in
        self.size = size
        outputs = OrderedDict(default=BufferStructure('T', 'B', size, context_size=1))
        parameters = OrderedDict(
            W=BufferStructure(size, n_in),
            R=BufferStructure(size, size),
            bias=BufferStructure(size),
        )
        internals = OrderedDict(
            Ha=BufferStructure('T', 'B', size, context_size=1),
            dHa=BufferStructure('T', 'B', size, context_size=1, is_backward_only=True),
            dHb=BufferStructure('T', 'B', size, context_size=1, is_backward_only=True),
        )
        return outputs, parameters, internals

    def forward_pass(self, buffers, training_pass=True):
        """``y[t] = f(W x[t] + R y[t-1] + bias)``, step by step."""
        _h = self.handler
        R = buffers.parameters.R
        y = buffers.outputs.default
        Ha = buffers.internals.Ha
        act = _h.act_func[self.activation]

        T = self._project_inputs(buffers)
        for t in range(T):
            _h.dot_add_mm(y[t - 1], R, Ha[t], transb=True)
            act(Ha[t], y[t])

    def backward_pass(self, buffers):
        """Back-propagate through time, then add the input deltas and gradients.

        The output deltas accumulate the full delta of each step in place.
        """
        _h = self.handler
        R = buffers.parameters.R
        y, dy = buffers.outputs.default, buffers.output_deltas.default
        Ha, dHa, dHb = (buffers.internals[n] for n in ('Ha', 'dHa', 'dHb'))
        T = buffers.inputs.default.shape[0]
        act_deriv = _h.act_func_deriv[self.activation]

        # dy[t] accumulates the full delta of y[t] in place (a layer may
        # overwrite its own output deltas) and dHb[t] holds f' times it.
        # dHa[T] is the (zeroed) context slot, so the last step needs no
        # special case; dHa is added to, not overwritten, because a layer fed
        # with '..internals.Ha' has put its deltas there already
        for t in range(T - 1, -1, -1):
            _h.dot_add_mm(dHa[t + 1], R, dy[t])
            act_deriv(Ha[t], y[t], dy[t], dHb[t])
            _h.add_tt(dHa[t], dHb[t], dHa[t])
        self._backward_through_inputs(buffers)

    def _project_inputs(self, buffers) -> int:
        """``Ha[t] = W x[t] + bias`` for all time steps in one product; returns T."""
        _h = self.handler
        W, bias = buffers.parameters.W, buffers.parameters.bias
        x = buffers.inputs.default
        T = x.shape[0]
        Ha_all = flatten_time(buffers.internals.Ha[:T])
        _h.dot_mm(flatten_time_and_features(x), W, Ha_all, transb=True)
        _h.add_mv(Ha_all, bias.reshape((1, self.size)), Ha_all)
        return T

    def _backward_through_inputs(self, buffers) -> None:
        """Input deltas and the W, R, bias gradients from ``dHa``.

        Each is one matrix product over all time steps.
        """
        _h = self.handler
        W = buffers.parameters.W
        dW, dR, dbias = (buffers.gradients[n] for n in ('W', 'R', 'bias'))
        x, dx = buffers.inputs.default, buffers.input_deltas.default
        y = buffers.outputs.default
        dHa = buffers.internals.dHa
        T = x.shape[0]

        dHa_all = flatten_time(dHa[:T])
        if 'default' not in self.skip_input_deltas:
            _h.dot_add_mm(dHa_all, W, flatten_time_and_features(dx))
        _h.dot_add_mm(dHa_all, flatten_time_and_features(x), dW, transa=True)
        _h.dot_add_mm(dHa[0], y[-1], dR, transa=True)
        if T > 1:
            _h.dot_add_mm(
                flatten_time(dHa[1:T]), flatten_time(y[: T - 1]), dR, transa=True
            )
        _h.sum_t(dHa_all, 0, dbias)
