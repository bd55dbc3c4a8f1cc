"""MultiHeadAttention: scaled dot-product self-attention over time."""

from __future__ import annotations

import math
from collections import OrderedDict

from brainstorm.arguments import Bool
from brainstorm.errors import LayerValidationError, NetworkValidationError
from brainstorm.layers.attributes import FloatIn, Kwarg, PositiveInt
from brainstorm.layers.base_layer import Layer, time_template
from brainstorm.shapes import flatten_time_and_features, reshape_view
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def MultiHeadAttention(
    size: int,
    heads: int,
    causal: bool = False,
    max_len: int = 256,
    dropout: float = 0.0,
    name: str | None = None,
) -> ConstructionWrapper:
    """Multi-head scaled dot-product self-attention over the time axis.

    Each sequence attends to itself. With ``d = size // heads`` and the
    input ``x`` of one sequence (time steps as rows)::

        [Q K V] = x W_qkv^T + bias_qkv                (each T x size)
        A_h     = masked_softmax(Q_h K_h^T / sqrt(d))  (T x T per head h)
        C_h     = dropout(A_h) V_h
        y       = [C_1 ... C_heads] W_out^T + bias_out

    where ``Q_h`` are the columns ``h*d .. (h+1)*d`` of ``Q``. The softmax
    of query ``t`` runs over the keys ``s`` that are real positions of the
    sequence (``mask[s] != 0``) and, if ``causal``, not in the future
    (``s <= t``). Padding positions thus give no attention to others, and
    receive none: their attention weights are 0, so their output is
    ``bias_out``. Without a ``mask`` input every position is real. The
    mask comes as a named input, e.g. from the Input layer::

        inp = Input({'default': ('T', 'B', 32), 'mask': ('T', 'B', 1)})
        attention = MultiHeadAttention(64, 4, causal=True, max_len=100)
        inp - 'mask' >> 'mask' - attention
        inp >> attention

    The attention weights live in an internal buffer of shape
    ``('T', 'B', heads, max_len)`` (time steps beyond ``T`` unused), so a
    network with this layer runs sequences of at most ``max_len`` steps;
    longer ones raise a NetworkValidationError saying so.

    Args:
        size: the model size, a positive multiple of ``heads``.
        heads: the number of attention heads.
        causal: if True, position ``t`` attends only to ``s <= t`` (for
            language models).
        max_len: the longest sequence the layer accepts.
        dropout: probability of dropping an attention weight in training
            (inverted dropout, as ``Dropout``);
            0 (the default) turns it off.
        name: the layer name.

    Shapes:
        inputs ``default ('T', 'B', F)`` and the optional ``mask ('T', 'B',
        1)`` -> default output ``('T', 'B', size)``; parameters ``W_qkv
        (3*size, F)``, ``bias_qkv (3*size,)``, ``W_out (size, size)``,
        ``bias_out (size,)``; internals ``qkv ('T', 'B', 3*size)``
        (``[Q/sqrt(d) K V]``: ``Q`` is scaled before the product, so in
        float16 ``Q K^T`` does not overflow where the scores fit),
        ``weights ('T', 'B', heads, max_len)``, ``context ('T', 'B',
        size)`` (with dropout also ``drop_mask`` and ``dropped``, of the
        weights' shape) and the backward-only ``dqkv``, ``dweights`` and
        ``dcontext``.
    """
    return ConstructionWrapper.create(
        MultiHeadAttentionLayerImpl,
        name=name,
        size=size,
        heads=heads,
        causal=causal,
        max_len=max_len,
        dropout=dropout,
    )


class MultiHeadAttentionLayerImpl(Layer):
    """Implementation of :func:`MultiHeadAttention`."""

    overwrites_gradients = True
    overwrites_backward_internals = True
    expected_inputs = {'default': time_template()}
    optional_inputs = {'mask': time_template(1)}
    computes_no_input_deltas_for = ('mask',)
    declared_kwargs = {
        'size': Kwarg(PositiveInt(), description='model size (a multiple of heads)'),
        'heads': Kwarg(PositiveInt(), description='number of attention heads'),
        'causal': Kwarg(Bool(), description='attend only to earlier positions'),
        'max_len': Kwarg(PositiveInt(), description='longest sequence accepted'),
        'dropout': Kwarg(
            FloatIn(0, 1, include_high=False),
            description='probability of dropping an attention weight',
        ),
    }

    @classmethod
    def check_kwargs(cls, name: str, kwargs: dict) -> dict:
        """The declared checks, then ``size`` against ``heads``.

        Both are known when the layer is made, so a ``size`` that is no
        multiple of ``heads`` is refused then, not when the network is
        built.

        Raises:
            LayerValidationError: for an invalid argument, or a ``size``
                that is no multiple of ``heads``.
        """
        resolved = super().check_kwargs(name, kwargs)
        size, heads = resolved['size'], resolved['heads']
        if size % heads:
            raise LayerValidationError(
                f"{cls.get_type_name()} '{name}': argument 'size' must be a "
                f"multiple of 'heads' ({heads}). Received: size={size}"
            )
        return resolved

    def setup(self, kwargs, in_shapes):
        """Lay out parameters and internals.

        ``size`` is a multiple of ``heads`` (see :meth:`check_kwargs`).
        Inputs with several feature axes are flattened (``(T, B, 2, 3)``
        is read as ``(T, B, 6)``), as FullyConnected reads them.
        """
        self.size, self.heads = kwargs['size'], kwargs['heads']
        self.causal, self.max_len = kwargs['causal'], kwargs['max_len']
        self.dropout = kwargs['dropout']
        self.head_size = self.size // self.heads
        n_in = in_shapes['default'].feature_size
        size, scores = self.size, (self.heads, self.max_len)
        outputs = OrderedDict(default=BufferStructure('T', 'B', size))
        parameters = OrderedDict(
            W_qkv=BufferStructure(3 * size, n_in),
            bias_qkv=BufferStructure(3 * size),
            W_out=BufferStructure(size, size),
            bias_out=BufferStructure(size),
        )
        internals = OrderedDict(
            qkv=BufferStructure('T', 'B', 3 * size),
            weights=BufferStructure('T', 'B', *scores),
            context=BufferStructure('T', 'B', size),
        )
        if self.dropout:
            internals['drop_mask'] = BufferStructure('T', 'B', *scores)
            internals['dropped'] = BufferStructure('T', 'B', *scores)
        internals['dqkv'] = BufferStructure('T', 'B', 3 * size, is_backward_only=True)
        internals['dweights'] = BufferStructure(
            'T', 'B', *scores, is_backward_only=True
        )
        internals['dcontext'] = BufferStructure('T', 'B', size, is_backward_only=True)
        return outputs, parameters, internals

    # ------------------------------------------------------------- views ---

    def _time_steps(self, buffers) -> int:
        steps = buffers.inputs.default.shape[0]
        if steps > self.max_len:
            raise NetworkValidationError(
                f'{self._desc()}: the sequences have {steps} time steps, more '
                f'than its max_len={self.max_len}. Create the layer with '
                f'max_len >= {steps}.'
            )
        return steps

    def _heads(self, array, part: int = 0):
        """Part ``part`` (of ``size`` features) of ``array`` as (T, B, heads, d)."""
        view = array[:, :, part * self.size : (part + 1) * self.size]
        return reshape_view(view, view.shape[:2] + (self.heads, self.head_size))

    @staticmethod
    def _used(buffers, name: str, steps: int):
        """The first ``steps`` keys of a score-shaped internal."""
        return buffers.internals[name][:, :, :, :steps]

    # ---------------------------------------------------------- forward ---

    def forward_pass(self, buffers, training_pass=True):
        """Project to Q, K, V; attend per head; project the context.

        Raises:
            NetworkValidationError: if the sequences are longer than
                ``max_len``.
        """
        _h = self.handler
        steps = self._time_steps(buffers)
        if not steps:
            return  # no time steps: nothing to attend to
        W_qkv, bias_qkv, W_out, bias_out = buffers.parameters
        qkv, context = buffers.internals.qkv, buffers.internals.context
        flat_qkv = flatten_time_and_features(qkv)
        _h.dot_mm(
            flatten_time_and_features(buffers.inputs.default),
            W_qkv,
            flat_qkv,
            transb=True,
        )
        _h.add_mv(flat_qkv, bias_qkv.reshape((1, 3 * self.size)), flat_qkv)

        # Q is scaled before the product (kept scaled in qkv), so Q K^T does
        # not overflow in float16 where Q K^T / sqrt(d) would not.
        q = self._heads(qkv, 0)
        _h.mult_st(1.0 / math.sqrt(self.head_size), q, q)
        weights = self._used(buffers, 'weights', steps)
        _h.batch_dot_tt(q, self._heads(qkv, 1), weights, transb=True)
        mask = buffers.inputs['mask'] if 'mask' in buffers.inputs else None
        _h.masked_softmax_t(weights, mask, weights, causal=self.causal)
        attended = self._drop(buffers, weights, steps, training_pass)
        _h.batch_dot_tt(attended, self._heads(qkv, 2), self._heads(context))

        y = flatten_time_and_features(buffers.outputs.default)
        _h.dot_mm(flatten_time_and_features(context), W_out, y, transb=True)
        _h.add_mv(y, bias_out.reshape((1, self.size)), y)

    def _drop(self, buffers, weights, steps: int, training_pass: bool):
        """Dropout on the attention weights; returns the weights to use."""
        if not self.dropout:
            return weights
        _h = self.handler
        drop_mask = self._used(buffers, 'drop_mask', steps)
        dropped = self._used(buffers, 'dropped', steps)
        if training_pass:
            keep = 1.0 - self.dropout
            _h.generate_probability_mask(drop_mask, keep)
            _h.mult_st(1.0 / keep, drop_mask, drop_mask)
        else:  # a backward pass after inference lets the deltas through
            _h.fill(drop_mask, 1.0)
        _h.mult_tt(weights, drop_mask, dropped)
        return dropped

    # --------------------------------------------------------- backward ---

    def backward_pass(self, buffers):
        """Deltas through both projections, the weights and the softmax.

        The gradients are overwritten; the input deltas are added.
        """
        _h = self.handler
        steps = self._time_steps(buffers)
        if not steps:  # no time steps: nothing seen
            self._zero_gradients(buffers)
            return
        W_qkv, _, W_out, _ = buffers.parameters
        dW_qkv, dbias_qkv, dW_out, dbias_out = buffers.gradients
        qkv, context = buffers.internals.qkv, buffers.internals.context
        dqkv, dcontext = buffers.internals.dqkv, buffers.internals.dcontext
        dy = flatten_time_and_features(buffers.output_deltas.default)

        _h.dot_mm(dy, flatten_time_and_features(context), dW_out, transa=True)
        _h.sum_t(dy, 0, dbias_out)
        _h.dot_mm(dy, W_out, flatten_time_and_features(dcontext))

        weights = self._used(buffers, 'weights', steps)
        attended = self._used(buffers, 'dropped', steps) if self.dropout else weights
        dweights = self._used(buffers, 'dweights', steps)
        dctx = self._heads(dcontext)
        _h.batch_dot_tt(dctx, self._heads(qkv, 2), dweights, transb=True)
        _h.batch_dot_tt(attended, dctx, self._heads(dqkv, 2), transa=True)
        if self.dropout:
            _h.mult_tt(dweights, self._used(buffers, 'drop_mask', steps), dweights)
        _h.softmax_deriv_t(weights, dweights, dweights)
        # qkv holds the scaled Q, so dK needs no scaling; dQ's deltas are
        # scaled before the product, as Q was (no float16 overflow in it)
        _h.batch_dot_tt(
            dweights, self._heads(qkv, 0), self._heads(dqkv, 1), transa=True
        )
        _h.mult_st(1.0 / math.sqrt(self.head_size), dweights, dweights)
        _h.batch_dot_tt(dweights, self._heads(qkv, 1), self._heads(dqkv, 0))

        flat_dqkv = flatten_time_and_features(dqkv)
        x = flatten_time_and_features(buffers.inputs.default)
        _h.dot_mm(flat_dqkv, x, dW_qkv, transa=True)
        _h.sum_t(flat_dqkv, 0, dbias_qkv)
        if 'default' not in self.skip_input_deltas:
            dx = flatten_time_and_features(buffers.input_deltas.default)
            _h.dot_add_mm(flat_dqkv, W_qkv, dx)
