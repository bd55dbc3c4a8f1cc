"""``reverse=True`` for the recurrent layers: running backwards in time.

:func:`reversible` gives a recurrent layer class (``Recurrent``, ``Lstm``,
``GRU``) the argument ``reverse`` and the optional input ``mask``. A
reverse layer reverses each sequence of its input in time (within the
sequence's length, given by ``mask``; see the handler op
``reverse_time_t``) into the internal ``rev_x``, runs its unchanged passes
on the reversed buffers ``rev_x``, ``rev_y`` (and their deltas ``rev_dx``,
``rev_dy``) and reverses the outputs back. So output ``y[t]`` of a sequence
of length ``L`` depends on the inputs ``x[t], ..., x[L - 1]``, and the
padding after ``L`` never reaches it.

The context of a reverse layer is the context slot of ``rev_y`` (and of the
layer's other internals): the state after the end of the sequence, zero
unless a context is passed to ``forward_pass``. ``Network.get_context``
then gives the state the backward run ended with, at the sequence's start,
which continues the run into a chunk that comes *before* in time; with a
mask, the state at each sequence's own start (not after its padding; an
empty sequence passes on the context it was given). The
layer's own internals (``Ha``, ``Ca``, ...) hold the reversed run, in
reversed time.

A bidirectional layer is a forward and a reverse layer on the same input,
joined by ``Merge``::

    inp = Input({'default': ('T', 'B', 10), 'mask': ('T', 'B', 1)})
    forward = Lstm(20, name='Forward')
    backward = Lstm(20, reverse=True, name='Backward')
    inp - 'default' >> forward
    inp - 'default' >> backward
    inp - 'mask' >> 'mask' - backward
    merged = Merge(name='Both')
    forward >> 'inputs_1' - merged
    backward >> 'inputs_2' - merged
"""

from __future__ import annotations

import functools
import sys
from types import SimpleNamespace

from brainstorm.arguments import Bool
from brainstorm.arguments.declaring import resolve_defaults
from brainstorm.errors import LayerValidationError, ValidationError
from brainstorm.layers.attributes import Kwarg
from brainstorm.layers.base_layer import time_template
from brainstorm.shapes import flatten_features
from brainstorm.structure.buffer_structure import BufferStructure

__all__ = ['reversible', 'forwards_only', 'REVERSE_KWARG', 'REVERSAL_INTERNALS']

#: The declaration of the ``reverse`` argument (its default comes from the
#: layer's constructor function, as every default).
REVERSE_KWARG = Kwarg(
    Bool(),
    description=(
        'run backwards in time (each sequence within its length, given by the '
        "optional input 'mask')"
    ),
)

#: The internals a reverse layer adds (the reversed input and output and
#: their deltas).
REVERSAL_INTERNALS = ('rev_x', 'rev_y', 'rev_dx', 'rev_dy')

_REVERSIBLE: set = set()


def reversible(cls):
    """Give the recurrent layer class ``cls`` the argument ``reverse``.

    Wraps its ``setup``, ``forward_pass`` and ``backward_pass``; with
    ``reverse=False`` they are unchanged. The layer's constructor function
    (named like its type, defined above the class) takes ``reverse`` and
    gives its default. Subclasses do not inherit the argument's use:
    ``reverse=True`` raises for them (give them
    ``declared_kwargs = forwards_only(...)`` to drop it).
    """
    setup, forward, backward = cls.setup, cls.forward_pass, cls.backward_pass
    factory = vars(sys.modules[cls.__module__])[cls.get_type_name()]
    declared = {**cls.declared_kwargs, 'reverse': REVERSE_KWARG}
    cls.declared_kwargs = resolve_defaults(declared, factory)
    cls.expected_kwargs = set(cls.declared_kwargs)
    cls.optional_inputs = {'mask': time_template(1)}
    cls.computes_no_input_deltas_for = (*cls.computes_no_input_deltas_for, 'mask')

    @functools.wraps(setup)
    def reversible_setup(self, kwargs, in_shapes):
        self.reverse = kwargs.get('reverse', False)
        _check_reverse_use(self, type(self) in _REVERSIBLE, in_shapes)
        outputs, parameters, internals = setup(self, kwargs, in_shapes)
        if self.reverse:
            n_in = in_shapes['default'].feature_size
            size = outputs['default'].feature_size
            internals['rev_x'] = BufferStructure('T', 'B', n_in)
            internals['rev_y'] = BufferStructure('T', 'B', size, context_size=1)
            internals['rev_dx'] = BufferStructure('T', 'B', n_in, is_backward_only=True)
            internals['rev_dy'] = BufferStructure(
                'T', 'B', size, context_size=1, is_backward_only=True
            )
        return outputs, parameters, internals

    @functools.wraps(forward)
    def reversible_forward(self, buffers, training_pass=True):
        if not self.reverse:
            return forward(self, buffers, training_pass)
        x = flatten_features(buffers.inputs.default)
        self._reverse_time(x, buffers, buffers.internals.rev_x)
        forward(self, _reversed(buffers), training_pass)
        T = x.shape[0]
        self._reverse_time(
            buffers.internals.rev_y[:T], buffers, buffers.outputs.default[:T]
        )
        return None

    @functools.wraps(backward)
    def reversible_backward(self, buffers):
        if not self.reverse:
            return backward(self, buffers)
        internals = buffers.internals
        dx = flatten_features(buffers.input_deltas.default)
        T = dx.shape[0]
        self._reverse_time(
            buffers.output_deltas.default[:T], buffers, internals.rev_dy[:T]
        )
        # reversing is its own inverse: the deltas other layers added to dx
        # come back unchanged, with this layer's added to them (a layer
        # asked to overwrite its input deltas overwrites the reversed ones)
        self._reverse_time(dx, buffers, internals.rev_dx)
        backward(self, _reversed(buffers))
        self._reverse_time(internals.rev_dx, buffers, dx)
        return None

    def context_steps(self, buffers):
        """The step of each sequence whose state continues the run.

        A reverse run ends at a sequence's start, step ``L - 1`` of the
        reversed buffers for a sequence of length ``L`` (the steps after it
        run over padding); -1 for an empty sequence, whose state is the
        context it was given. None (all at step ``T - 1``) without a mask.
        """
        if not self.reverse or 'mask' not in self.in_shapes:
            return None
        mask = self.handler.get_numpy_copy(buffers.inputs.mask)
        T = buffers.inputs.default.shape[0]
        return (mask[:T, :, 0] != 0).sum(axis=0) - 1

    def reverse_time(self, a, buffers, out):
        mask = buffers.inputs['mask'] if 'mask' in self.in_shapes else None
        try:
            self.handler.reverse_time_t(a, mask, out)
        except ValidationError as err:
            raise type(err)(f"{self._desc()}: input 'mask': {err}") from None

    cls.setup = reversible_setup
    cls.forward_pass = reversible_forward
    cls.backward_pass = reversible_backward
    cls._reverse_time = reverse_time
    cls._context_steps = context_steps
    _REVERSIBLE.add(cls)
    return cls


def forwards_only(declared_kwargs: dict) -> dict:
    """``declared_kwargs`` of a reversible layer without ``reverse``.

    For subclasses that run forwards only (``Clockwork``, ``ClockworkLstm``).
    """
    return {name: arg for name, arg in declared_kwargs.items() if name != 'reverse'}


def _check_reverse_use(layer, supported: bool, in_shapes) -> None:
    """Refuse ``reverse`` where unsupported and a mask without ``reverse``."""
    if layer.reverse and not supported:
        raise LayerValidationError(
            f'{layer._desc()}: reverse=True is not supported by '
            f'{layer.layer_type} (only by the layers it is declared for).'
        )
    if 'mask' in in_shapes and not layer.reverse:
        raise LayerValidationError(
            f"{layer._desc()}: input 'mask' is only used with reverse=True "
            '(running forwards, the padding at the end of a sequence never '
            'reaches its earlier outputs). Connect no mask, or set reverse=True.'
        )


def _reversed(buffers):
    """``buffers`` with the reversed internals as inputs, outputs and deltas."""
    internals = buffers.internals
    return SimpleNamespace(
        parameters=buffers.parameters,
        gradients=buffers.gradients,
        internals=internals,
        inputs=SimpleNamespace(default=internals.rev_x),
        outputs=SimpleNamespace(default=internals.rev_y),
        input_deltas=SimpleNamespace(default=internals.rev_dx),
        output_deltas=SimpleNamespace(default=internals.rev_dy),
    )
