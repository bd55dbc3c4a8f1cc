"""LayerNorm: normalise each position over its features, then scale and shift."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.layers.attributes import FloatIn, Kwarg
from brainstorm.layers.base_layer import Layer, check_epsilon_for_handler, time_template
from brainstorm.shapes import SQUARE_SHIFT, flatten_time_and_features, summing_shrink
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def LayerNorm(epsilon: float = 1e-5, name: str | None = None) -> ConstructionWrapper:
    """Layer normalisation over all feature axes, with learned scale and shift.

    Each time step of each sequence is normalised on its own, over its
    ``F`` features (all feature axes together), with the mean and the
    biased variance of those features::

        mean  = sum_f x[f] / F
        std   = sqrt(sum_f (x[f] - mean)**2 / F + epsilon)
        x_hat = (x - mean) / std
        y     = gamma * x_hat + beta

    ``gamma`` and ``beta`` have the input's feature shape (as the
    ``weight`` and ``bias`` of ``torch.nn.LayerNorm(feature_shape)``). The
    statistics never mix positions, so the layer behaves the same in
    training and inference, for every batch size and under masks. Initialise
    ``gamma`` with 1 and ``beta`` with 0 for the usual start, e.g.
    ``net.initialize({'default': Gaussian(0.1), 'Norm': {'gamma': 1, 'beta': 0}})``.

    Args:
        epsilon: added to the variance, a float > 0 that the network's
            dtype holds as a finite number other than 0 (float16: at
            least 6e-8), checked when the handler is set: one it rounds to
            0 would make a constant position NaN.
        name: the layer name.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output of the same
        shape; parameters ``gamma`` and ``beta`` of the feature shape.
    """
    return ConstructionWrapper.create(LayerNormLayerImpl, name=name, epsilon=epsilon)


class LayerNormLayerImpl(Layer):
    """Implementation of :func:`LayerNorm`."""

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'epsilon': Kwarg(
            FloatIn(0, np.inf, include_low=False, include_high=False),
            description='added to the variance',
        ),
    }
    overwrites_gradients = True
    overwrites_backward_internals = True

    def setup(self, kwargs, in_shapes):
        """Output of the input's shape; ``gamma`` and ``beta`` of its features.

        The internals keep ``x_hat`` and each position's ``std`` for the
        backward pass, the column of weights that sums the features and
        backward-only scratch.
        """
        self.epsilon = kwargs['epsilon']
        in_shape = in_shapes['default']
        self.features = in_shape.feature_size
        feature = BufferStructure(*in_shape.feature_shape)
        outputs = OrderedDict(default=BufferStructure(*in_shape.shape))
        parameters = OrderedDict(gamma=feature, beta=feature)
        internals = OrderedDict(
            x_hat=BufferStructure(*in_shape.shape),
            std=BufferStructure('T', 'B', 1),
            # 2**-k (2**k >= F) each: the means over the features are
            # products with it (see _row_mean)
            weights=BufferStructure(self.features, 1),
            scratch=BufferStructure(*in_shape.shape, is_backward_only=True),
            g_mean=BufferStructure('T', 'B', 1, is_backward_only=True),
            gx_mean=BufferStructure('T', 'B', 1, is_backward_only=True),
        )
        return outputs, parameters, internals

    def check_handler(self, handler) -> None:
        """Refuse an ``epsilon`` that ``handler``'s dtype makes 0 or inf."""
        check_epsilon_for_handler(self, self.epsilon, handler, 'constant position')

    def _row(self, vector):
        return vector.reshape((1, self.features))

    def _row_mean(self, rows, weights, out, scale: float = 1.0) -> None:
        """``out[n, 0] = scale * mean of rows[n]``.

        The sum is the product with the column ``weights`` of ``2**-k``
        (``2**k >= F``): no partial sum exceeds the largest term (a plain
        sum of ``F`` float16 values overflows from a mean of 65504 / F), and
        no term is rounded after the division (NumPy multiplies and adds
        float16 products in float32). A power of two, it changes no more than
        the summation order of float32 and float64 results.
        """
        _h = self.handler
        shrink = summing_shrink(self.features)
        _h.dot_mm(rows, weights, out)
        _h.mult_st(scale / (shrink * self.features), out, out)

    def forward_pass(self, buffers, training_pass=True):
        """``y = gamma * (x - mean) / std + beta`` per position."""
        _h = self.handler
        gamma, beta = buffers.parameters
        x = flatten_time_and_features(buffers.inputs.default)
        y = flatten_time_and_features(buffers.outputs.default)
        x_hat = flatten_time_and_features(buffers.internals.x_hat)
        std = flatten_time_and_features(buffers.internals.std)
        weights = buffers.internals.weights
        _h.fill(weights, summing_shrink(self.features))

        # the mean, kept in std until the variance replaces it; its rounding
        # (the mean of F equal values may be 1 ulp off them) is taken out
        # with the mean of the deviations: a constant position gives 0
        self._row_mean(x, weights, std)
        _h.subtract_mv(x, std, x_hat)
        self._row_mean(x_hat, weights, std)
        _h.subtract_mv(x_hat, std, x_hat)
        # the squares divided by 2**SQUARE_SHIFT (exactly: a power of two)
        _h.mult_st(2.0**-SQUARE_SHIFT, x_hat, y)
        _h.mult_tt(y, x_hat, y)
        self._row_mean(y, weights, std, 2.0**SQUARE_SHIFT)
        _h.add_st(self.epsilon, std, std)
        _h.sqrt_t(std, std)
        _h.divide_mv(x_hat, std, x_hat)
        _h.mult_mv(x_hat, self._row(gamma), y)
        _h.add_mv(y, self._row(beta), y)

    def backward_pass(self, buffers):
        """Add the input deltas; write the ``gamma`` and ``beta`` gradients.

        With ``g = gamma * dy``: ``dx += (g - mean(g) - x_hat * mean(g *
        x_hat)) / std``, the means over each position's features;
        ``dgamma = sum(dy * x_hat)`` and ``dbeta = sum(dy)`` over positions.
        """
        _h = self.handler
        gamma = buffers.parameters.gamma
        dgamma, dbeta = buffers.gradients.gamma, buffers.gradients.beta
        x_hat = flatten_time_and_features(buffers.internals.x_hat)
        std = flatten_time_and_features(buffers.internals.std)
        scratch = flatten_time_and_features(buffers.internals.scratch)
        g_mean = flatten_time_and_features(buffers.internals.g_mean)
        gx_mean = flatten_time_and_features(buffers.internals.gx_mean)
        weights = buffers.internals.weights
        dx = flatten_time_and_features(buffers.input_deltas.default)
        dy = flatten_time_and_features(buffers.output_deltas.default)

        _h.sum_t(dy, 0, self._row(dbeta))
        _h.mult_tt(dy, x_hat, scratch)
        _h.sum_t(scratch, 0, self._row(dgamma))
        if 'default' in self.skip_input_deltas:
            return
        # g = gamma * dy, and the two means over the features
        _h.mult_mv(dy, self._row(gamma), scratch)
        self._row_mean(scratch, weights, g_mean)
        _h.mult_tt(scratch, x_hat, scratch)
        self._row_mean(scratch, weights, gx_mean)
        # dx += (g - g_mean - x_hat * gx_mean) / std
        _h.mult_mv(x_hat, gx_mean, scratch)
        _h.mult_st(-1.0, scratch, scratch)
        _h.mult_add_mv(dy, self._row(gamma), scratch)
        _h.subtract_mv(scratch, g_mean, scratch)
        _h.divide_mv(scratch, std, scratch)
        _h.add_tt(dx, scratch, dx)
