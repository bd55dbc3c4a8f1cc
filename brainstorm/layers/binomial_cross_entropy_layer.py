"""BinomialCrossEntropy: cross-entropy of probabilities, summed per row."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import (
    flatten_time,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
    flatten_time_and_features,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.construction import ConstructionWrapper

CLIP_MIN = 1e-6


def BinomialCrossEntropy(name: str | None = None) -> ConstructionWrapper:
    """Binary cross-entropy of probabilities, summed over the features.

    The input ``y`` is already a probability (e.g. the output of a sigmoid
    layer): ``out = -sum_features(t ln clip(y) + (1 - t) ln clip(1 - y))``
    with clipping to ``[1e-6, 1]``. Backward:
    ``dx += dout * (y - t) / clip(y - y^2, 1e-6, 1)``; the targets get no
    deltas.

    Args:
        name: the layer name.

    Shapes:
        inputs ``default`` and ``targets`` ``('T', 'B', ...)`` with equal
        features -> default output ``('T', 'B', 1)``.
    """
    return ConstructionWrapper.create(BinomialCrossEntropyLayerImpl, name=name)


class BinomialCrossEntropyLayerImpl(Layer):
    """Implementation of :func:`BinomialCrossEntropy`."""

    overwrites_backward_internals = True

    expected_inputs = {'default': time_template(), 'targets': time_template()}
    declared_kwargs = {}
    computes_no_input_deltas_for = ('targets',)

    def setup(self, kwargs, in_shapes):
        """Output ``default (T, B, 1)``; scratch internals of the input's shape.

        Raises:
            LayerValidationError: the targets' features differ from the input's.
        """
        y, t = in_shapes['default'], in_shapes['targets']
        if y.feature_shape != t.feature_shape:
            raise LayerValidationError(
                f'{self._desc()}: targets must have the same features as the '
                f'input {y.shape}. Received {t.shape}'
            )
        outputs = OrderedDict(default=BufferStructure('T', 'B', 1))
        internals = OrderedDict(
            cee=BufferStructure('T', 'B', *y.feature_shape),
            ceed=BufferStructure('T', 'B', *y.feature_shape, is_backward_only=True),
        )
        return outputs, OrderedDict(), internals

    def _sum_into(self, cee, out, negate: bool):
        """``out = sum_features(+-cee) + out``, via the first column of cee.

        There is no summing op that adds into its output.
        """
        _h = self.handler
        if negate:
            _h.mult_st(-1.0, cee, cee)
        _h.add_tt(cee[:, :1], out, cee[:, :1])
        _h.sum_t(cee, 1, out)

    def forward_pass(self, buffers, training_pass=True):
        """Per sample: ``-sum(t ln y + (1 - t) ln(1 - y))``, both logs clipped."""
        _h = self.handler
        y = flatten_time_and_features(buffers.inputs.default)
        t = flatten_time_and_features(buffers.inputs.targets)
        out = flatten_time_and_features(buffers.outputs.default)
        cee = flatten_time_and_features(buffers.internals.cee)

        # -out = sum((1 - t) A) + sum(t B) = sum(A) - sum(t A) + sum(t B)
        # with A = ln clip(1 - y) and B = ln clip(y), one sum at a time so
        # that cee is the only scratch buffer.
        _h.mult_st(-1.0, y, cee)
        _h.add_st(1.0, cee, cee)
        _h.clip_t(cee, CLIP_MIN, 1.0, cee)
        _h.log_t(cee, cee)
        _h.sum_t(cee, 1, out)
        _h.mult_tt(t, cee, cee)
        self._sum_into(cee, out, negate=True)
        _h.clip_t(y, CLIP_MIN, 1.0, cee)
        _h.log_t(cee, cee)
        _h.mult_tt(t, cee, cee)
        self._sum_into(cee, out, negate=False)
        _h.mult_st(-1.0, out, out)

    def backward_pass(self, buffers):
        """Add ``dout * (y - t) / clip(y - y^2)`` to the input deltas."""
        _h = self.handler
        y = flatten_time_and_features(buffers.inputs.default)
        t = flatten_time_and_features(buffers.inputs.targets)
        dx = flatten_time_and_features(buffers.input_deltas.default)
        dout = flatten_time_and_features(buffers.output_deltas.default)
        ceed = flatten_time_and_features(buffers.internals.ceed)
        # the forward scratch cee is free now and holds y - t
        cee = flatten_time_and_features(buffers.internals.cee)

        # dx += dout * (y - t) / clip(y - y^2, 1e-6, 1)
        _h.mult_tt(y, y, ceed)
        _h.subtract_tt(y, ceed, ceed)
        _h.clip_t(ceed, CLIP_MIN, 1.0, ceed)
        _h.subtract_tt(y, t, cee)
        _h.divide_tt(cee, ceed, ceed)
        _h.mult_add_mv(ceed, dout, dx)
