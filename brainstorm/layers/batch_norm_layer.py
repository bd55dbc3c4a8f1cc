"""BatchNorm: normalise each channel by batch statistics, scale and shift."""

from __future__ import annotations

from collections import OrderedDict

import numpy as np

from brainstorm.layers.attributes import FloatIn, Kwarg
from brainstorm.layers.base_layer import Layer, check_epsilon_for_handler, time_template
from brainstorm.shapes import SQUARE_SHIFT, flatten_time_and_features, summing_shrink
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def BatchNorm(
    name: str | None = None, decay: float = 0.9, epsilon: float = 1e-5
) -> ConstructionWrapper:
    """Batch normalisation over the last (channel) axis.

    The statistics of channel ``c`` are taken over all ``m`` elements of
    the batch with that channel (all time steps, sequences and, for images,
    positions). Padded time steps of sequences of different lengths count
    too: the layer takes no mask. In a training pass, with the batch mean
    ``mean`` and ``sigma_b = sqrt(var + epsilon)`` (biased variance)::

        x_hat = (x - mean) / sigma_b
        mu    <- decay * mu    + (1 - decay) * mean
        sigma <- decay * sigma + (1 - decay) * sigma_b

    In an inference pass ``x_hat = (x - mu) / sigma``. Always
    ``y = gamma * x_hat + beta``.

    ``mu`` and ``sigma`` are the running mean and standard deviation. They
    are parameters (saved with the network) that the layer maintains
    itself: they get no gradient, steppers and modifiers leave them alone,
    and ``net.initialize`` sets them to 0 and 1 unless a parameter pattern
    gives their full names (a ``*`` does not select them). ``sigma`` must
    be > 0: other values are refused when they are set or loaded.

    Args:
        name: the layer name.
        decay: weight of the old value in the running averages, in [0, 1].
        epsilon: added to the variance, a float > 0 that the network's
            dtype holds as a finite number other than 0 (float16: at least
            6e-8), checked when the handler is set: one it rounds to 0
            would make a constant channel NaN.

    Shapes:
        default input ``('T', 'B', ..., C)`` -> default output of the same
        shape; parameters ``gamma, beta, mu, sigma`` each ``(C,)``.
    """
    return ConstructionWrapper.create(
        BatchNormLayerImpl, name=name, decay=decay, epsilon=epsilon
    )


class BatchNormLayerImpl(Layer):
    """Implementation of :func:`BatchNorm`.

    It maintains ``mu`` and ``sigma`` itself (see ``untrained_parameters``).
    """

    overwrites_backward_internals = True

    expected_inputs = {'default': time_template()}
    declared_kwargs = {
        'decay': Kwarg(
            FloatIn(0, 1),
            description='weight of the old running statistics',
        ),
        'epsilon': Kwarg(
            FloatIn(0, np.inf, include_low=False, include_high=False),
            description='added to the variance',
        ),
    }
    untrained_parameters = {'mu': 0.0, 'sigma': 1.0}
    computes_no_gradients_for = ('mu', 'sigma')

    def setup(self, kwargs, in_shapes):
        """Output of the input's shape; ``gamma, beta, mu, sigma`` per channel.

        The internals keep the batch's ``sigma_b``, the centred input and
        ``x_hat`` for the backward pass, plus a row of the channel vectors tiled
        over positions, the weights that sum over rows and positions (see
        :meth:`_channel_mean`) and backward-only scratch.
        """
        self.decay = kwargs['decay']
        self.epsilon = kwargs['epsilon']
        in_shape = in_shapes['default']
        self.channels = in_shape.feature_shape[-1]
        self.positions = in_shape.feature_size // self.channels
        channel = BufferStructure(self.channels)
        outputs = OrderedDict(default=BufferStructure(*in_shape.shape))
        parameters = OrderedDict(gamma=channel, beta=channel, mu=channel, sigma=channel)
        internals = OrderedDict(
            sigma_b=channel,
            centered=BufferStructure(*in_shape.shape),
            x_hat=BufferStructure(*in_shape.shape),
            # a per-channel vector repeated over all positions of a row
            tiled=BufferStructure(in_shape.feature_size),
            row_weights=BufferStructure('T', 'B', 1),
            position_weights=BufferStructure(self.positions, 1),
            scratch=BufferStructure(*in_shape.shape, is_backward_only=True),
        )
        return outputs, parameters, internals

    def parameters_from_05(self, parameters: dict) -> None:
        """Convert the parameters of a Brainstorm 0.5 network file in place.

        0.5 stored the running mean negated in ``mu`` (its inference pass
        computed ``(x + mu) / sigma``); ``sigma`` meant the same there
        (the running average of ``sqrt(var + epsilon)``). Called by
        ``Network.from_hdf5`` for files written by 0.5 only.

        Args:
            parameters: parameter name -> writable array.
        """
        np.negative(parameters['mu'], out=parameters['mu'])

    def check_handler(self, handler) -> None:
        """Refuse an ``epsilon`` that ``handler``'s dtype makes 0 or inf."""
        check_epsilon_for_handler(self, self.epsilon, handler, 'constant channel')

    def check_parameter_values(self, name: str, values) -> None:
        """Refuse a running ``sigma`` that is not > 0.

        ``sigma`` is a standard deviation (the running average of ``sqrt(var
        + epsilon)``) that the inference pass divides by: 0 would give
        inf, a negative value would flip the sign of the channel's
        outputs, both without a word.

        Raises:
            ValueError: naming the first such entry.
        """
        if name != 'sigma':
            return
        sigma = np.asarray(values, dtype=np.float64).ravel()
        bad = ~(sigma > 0)
        if bad.any():
            index = int(np.argmax(bad))
            raise ValueError(
                f'parameter sigma holds the running standard deviation of '
                f'each channel, which the inference pass divides by: values '
                f'> 0. Received: sigma[{index}] = {float(sigma[index])!r}.'
            )

    def _channel_sum(self, rows, tiled, out) -> None:
        """``out[c] = sum of rows[n, k*C + c]`` over ``n`` and ``k``."""
        _h = self.handler
        if self.positions == 1:
            _h.sum_t(rows, 0, out)
        else:
            _h.sum_t(rows, 0, tiled)
            _h.sum_t(tiled.reshape((self.positions, self.channels)), 0, out)

    def _fill_mean_weights(self, buffers, rows: int) -> None:
        """Fill the weight columns of :meth:`_channel_mean`.

        Once a training pass: the internals may hold anything before it.
        """
        _h = self.handler
        row_weights = flatten_time_and_features(buffers.internals.row_weights)
        _h.fill(row_weights, summing_shrink(rows))
        if self.positions > 1:
            _h.fill(buffers.internals.position_weights, summing_shrink(self.positions))

    def _channel_mean(self, rows, buffers, out, scale: float = 1.0) -> None:
        """``out[c] = scale * mean of rows[n, k*C + c]`` over ``n`` and ``k``.

        The sums over the rows and then over the positions are products with
        columns of ``2**-k`` (``2**k`` at least the number of terms): no
        partial sum exceeds the largest term (a plain sum of ``m`` float16
        values overflows from a mean of 65504 / m), and no term is rounded
        after the division (NumPy multiplies and adds float16 products in
        float32). Powers of two change no more than the summation order of
        float32 and float64 results.
        """
        _h = self.handler
        tiled = buffers.internals.tiled
        row_weights = flatten_time_and_features(buffers.internals.row_weights)
        channels = out.reshape((1, self.channels))
        shrink = summing_shrink(rows.shape[0])
        if self.positions == 1:
            _h.dot_mm(row_weights, rows, channels, transa=True)
        else:
            position_weights = buffers.internals.position_weights
            _h.dot_mm(
                row_weights, rows, tiled.reshape((1, tiled.shape[0])), transa=True
            )
            _h.dot_mm(
                position_weights,
                tiled.reshape((self.positions, self.channels)),
                channels,
                transa=True,
            )
            shrink *= summing_shrink(self.positions)
        _h.mult_st(scale / (shrink * rows.shape[0] * self.positions), out, out)

    def _tile(self, vector, tiled, scale: float = 1.0):
        """``scale * vector`` repeated over positions, as a ``(1, P)`` row."""
        _h = self.handler
        _h.broadcast_t(
            vector.reshape((1, self.channels)),
            0,
            tiled.reshape((self.positions, self.channels)),
        )
        if scale != 1.0:
            _h.mult_st(scale, tiled, tiled)
        return tiled.reshape((1, tiled.shape[0]))

    def forward_pass(self, buffers, training_pass=True):
        """Normalise, then scale and shift: ``y = gamma * x_hat + beta``.

        A training pass normalises by the batch statistics and updates the
        running ``mu`` and ``sigma``; an inference pass uses ``mu`` and ``sigma``.
        An empty batch (a data-parallel rank's part of a small last batch
        may be) has no statistics: nothing changes. Which kind of pass ran
        decides the backward pass (:meth:`backward_pass`).
        """
        _h = self.handler
        gamma, beta, mu, sigma = buffers.parameters
        sigma_b, tiled = buffers.internals.sigma_b, buffers.internals.tiled
        x = flatten_time_and_features(buffers.inputs.default)
        y = flatten_time_and_features(buffers.outputs.default)
        centered = flatten_time_and_features(buffers.internals.centered)
        x_hat = flatten_time_and_features(buffers.internals.x_hat)
        m = x.shape[0] * self.positions
        self._inference = not training_pass
        if not m:
            return

        if training_pass:
            self._fill_mean_weights(buffers, x.shape[0])
            # batch mean (kept in sigma_b until the variance replaces it);
            # its rounding (the mean of m equal values may be 1 ulp off
            # them) is taken out with the mean of the deviations: a
            # constant channel gives 0
            self._channel_mean(x, buffers, sigma_b)
            _h.mult_st(self.decay, mu, mu)
            _h.mult_add_st(1.0 - self.decay, sigma_b, mu)
            _h.subtract_mv(x, self._tile(sigma_b, tiled), centered)
            self._channel_mean(centered, buffers, sigma_b)
            _h.mult_add_st(1.0 - self.decay, sigma_b, mu)
            _h.subtract_mv(centered, self._tile(sigma_b, tiled), centered)
            # sigma_b = sqrt(biased variance + epsilon), from the squares
            # divided by 2**SQUARE_SHIFT (exactly: a power of two)
            _h.mult_st(2.0**-SQUARE_SHIFT, centered, x_hat)
            _h.mult_tt(x_hat, centered, x_hat)
            self._channel_mean(x_hat, buffers, sigma_b, 2.0**SQUARE_SHIFT)
            _h.add_st(self.epsilon, sigma_b, sigma_b)
            _h.sqrt_t(sigma_b, sigma_b)
            _h.mult_st(self.decay, sigma, sigma)
            _h.mult_add_st(1.0 - self.decay, sigma_b, sigma)
        else:
            _h.subtract_mv(x, self._tile(mu, tiled), centered)
            _h.copy_to(sigma, sigma_b)
        _h.divide_mv(centered, self._tile(sigma_b, tiled), x_hat)
        _h.mult_mv(x_hat, self._tile(gamma, tiled), y)
        _h.add_mv(y, self._tile(beta, tiled), y)

    def backward_pass(self, buffers):
        """Add the input deltas; write the ``gamma`` and ``beta`` gradients.

        ``dx += gamma / sigma_b * (dy - x_hat * dgamma / m - dbeta / m)`` with
        ``dbeta = sum(dy)`` and ``dgamma = sum(dy * x_hat)`` over the ``m``
        elements of each channel. After an inference pass, whose statistics
        are constants, ``dx += gamma / sigma * dy``: the gradient of what
        that pass computed (as Dropout's backward pass after one is).
        """
        _h = self.handler
        gamma = buffers.parameters.gamma
        dgamma, dbeta = buffers.gradients.gamma, buffers.gradients.beta
        sigma_b, tiled = buffers.internals.sigma_b, buffers.internals.tiled
        x_hat = flatten_time_and_features(buffers.internals.x_hat)
        scratch = flatten_time_and_features(buffers.internals.scratch)
        dx = flatten_time_and_features(buffers.input_deltas.default)
        dy = flatten_time_and_features(buffers.output_deltas.default)
        m = dy.shape[0] * self.positions
        if not m:  # an empty batch: no deltas, zero gradients
            _h.fill(dgamma, 0.0)
            _h.fill(dbeta, 0.0)
            return

        # dbeta = sum(dy), dgamma = sum(dy * x_hat)
        self._channel_sum(dy, tiled, dbeta)
        _h.mult_tt(dy, x_hat, scratch)
        self._channel_sum(scratch, tiled, dgamma)
        if getattr(self, '_inference', False):
            # the statistics were the running ones: constants
            _h.copy_to(dy, scratch)
        else:
            # dx += gamma / sigma_b * (dy - x_hat * dgamma / m - dbeta / m)
            _h.mult_mv(x_hat, self._tile(dgamma, tiled, 1.0 / m), scratch)
            _h.subtract_tt(dy, scratch, scratch)
            _h.subtract_mv(scratch, self._tile(dbeta, tiled, 1.0 / m), scratch)
        scale = self._tile(gamma, tiled)
        _h.divide_mv(
            scale.reshape((self.positions, self.channels)),
            sigma_b.reshape((1, self.channels)),
            scale.reshape((self.positions, self.channels)),
        )
        _h.mult_add_mv(scratch, scale, dx)
