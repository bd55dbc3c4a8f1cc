"""SoftmaxCE: softmax output with cross-entropy loss against class ids."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.errors import (
    LayerValidationError,
    NetworkValidationError,
    ValidationError,
)
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import (
    flatten_all_but_last,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    flatten_time,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper


def SoftmaxCE(name: str | None = None) -> ConstructionWrapper:
    """Softmax over the last axis with cross-entropy loss.

    ``predictions = softmax(x)``; ``loss = -ln(clip(p[target], 1e-6, 1))``
    where the targets hold class indices. The backward pass adds
    ``dloss * (p - onehot(target))`` to the input deltas; targets get no
    deltas and deltas arriving at ``predictions`` are ignored.

    Shapes:
        inputs ``default ('T', 'B', ..., K)``, ``targets ('T', 'B', ..., 1)``
        -> outputs ``predictions`` (like default) and ``loss``
        ``('T', 'B', ..., 1)``.
    """
    return ConstructionWrapper.create(SoftmaxCELayerImpl, name=name)


class SoftmaxCELayerImpl(Layer):
    """Implementation of :func:`SoftmaxCE`."""

    overwrites_backward_internals = True

    expected_inputs = {'default': time_template(), 'targets': time_template()}
    declared_kwargs = {}
    computes_no_input_deltas_for = ('targets',)
    id_inputs = ('targets',)
    takes_no_output_deltas_from = ('predictions',)

    def setup(self, kwargs, in_shapes):
        """Outputs ``predictions`` (input's shape) and ``loss`` (targets' shape).

        Raises:
            LayerValidationError: the targets are not one class id per position.
        """
        x, t = in_shapes['default'], in_shapes['targets']
        if t.feature_shape != x.feature_shape[:-1] + (1,):
            raise LayerValidationError(
                f'{self._desc()}: targets must have the features of '
                f'the input with last dimension 1 (class ids), i.e. '
                f'{("T", "B") + x.feature_shape[:-1] + (1,)}. Received '
                f'{t.shape}'
            )
        outputs = OrderedDict(
            predictions=BufferStructure('T', 'B', *x.feature_shape),
            loss=BufferStructure('T', 'B', *t.feature_shape),
        )
        internals = OrderedDict(
            t_bin=BufferStructure('T', 'B', *x.feature_shape, is_backward_only=True)
        )
        return outputs, OrderedDict(), internals

    def forward_pass(self, buffers, training_pass=True):
        """``p = softmax(x)`` over the last axis; ``loss = -ln p[target]`` (clipped).

        Raises:
            NetworkValidationError: a target is not a valid class id.
        """
        _h = self.handler
        for x, t, p, loss in zip(
            _rows(buffers.inputs.default),
            _rows(buffers.inputs.targets),
            _rows(buffers.outputs.predictions),
            _rows(buffers.outputs.loss),
        ):
            _h.softmax_m(x, p)
            try:
                _h.index_m_by_v(p, t, loss)
            except ValidationError as err:
                raise NetworkValidationError(
                    f'{self._desc()}: the targets must be class ids '
                    f'for {p.shape[-1]} classes. {err}'
                ) from None
            _h.clip_t(loss, 1e-6, 1.0, loss)
            _h.log_t(loss, loss)
            _h.mult_st(-1.0, loss, loss)

    def backward_pass(self, buffers):
        """Add ``dloss * (p - onehot(t))`` to the input deltas."""
        _h = self.handler
        for t, p, dloss, dx, t_bin in zip(
            _rows(buffers.inputs.targets),
            _rows(buffers.outputs.predictions),
            _rows(buffers.output_deltas.loss),
            _rows(buffers.input_deltas.default),
            _rows(buffers.internals.t_bin),
        ):
            _h.binarize_v(t, t_bin)
            _h.subtract_tt(p, t_bin, t_bin)
            _h.mult_add_mv(t_bin, dloss, dx)


def _rows(array) -> list:
    """2-D views ``(T*B, K)`` covering a ``(T, B, ..., K)`` buffer.

    Network buffers are feature slices of a larger array, so with several
    feature axes ``(T*B*..., K)`` is not a view; one matrix per index of the
    middle axes is.
    """
    flat = flatten_time(array)
    return [flat[(slice(None),) + index] for index in np.ndindex(*flat.shape[1:-1])]
