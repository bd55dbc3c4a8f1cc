"""Steppers that adapt the step size per parameter: RMSProp, Adam, AdamW."""

from __future__ import annotations

import numpy as np

from brainstorm.arguments import Arg, Real
from brainstorm.errors import TrainingValidationError
from brainstorm.training.steppers.base import TrainingStepper


def _check_epsilon(stepper, handler) -> None:
    """Refuse an ``epsilon`` the handler's dtype cannot hold as a normal number.

    The update adds ``epsilon`` in the handler's dtype: one below the
    dtype's smallest normal number is 0 there (the default 1e-8 in
    float16), so a zero gradient gives 0 / 0 = NaN at the first step, or
    subnormal (flushed to 0 on some devices), where a small gradient
    divided by it overflows.

    Raises:
        TrainingValidationError: naming the stepper, the epsilon, the dtype
            and the smallest epsilon that works.
    """
    epsilon = float(stepper.epsilon)
    tiny = float(np.finfo(handler.dtype).tiny)
    if epsilon >= tiny:
        return
    name = np.dtype(handler.dtype).name
    rounded = float(np.dtype(handler.dtype).type(epsilon))
    example = 1e-8 if tiny <= 1e-8 else 1e-4
    raise TrainingValidationError(
        f'{type(stepper).__name__}: epsilon must be at least {tiny:.4g}, the '
        f'smallest normal {name} number, on a {name} network: the update adds '
        f'epsilon in {name}, where {epsilon:g} is {rounded:g}, and a zero or '
        'small gradient then makes the parameters NaN or inf. Received: '
        f'epsilon={epsilon!r}. Use e.g. epsilon={example:g}.'
    )


class RMSPropStepper(TrainingStepper):
    """RMSProp: divide the gradient by a running RMS of recent gradients.

    ``s <- decay * s + (1 - decay) * g²``;
    ``θ -= learning_rate * g / (sqrt(s) + epsilon)``; ``s`` is zero at
    :meth:`start`.

    Args:
        learning_rate: step size (>= 0).
        decay: decay of the running mean square, in [0, 1).
        epsilon: added to the root for stability (> 0); at least the
            smallest normal number of the network's dtype (float16: 6.1e-5,
            so e.g. 1e-4 rather than the default), checked at ``start`` and
            before each step.
        clip_norm: see :class:`TrainingStepper`.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)
        >>> data = bs.data_iterators.Minibatches(
        ...     4, default=np.ones((1, 8, 2)), targets=np.ones((1, 8, 1)))
        >>> trainer = bs.Trainer(bs.training.RMSPropStepper(learning_rate=0.01),
        ...                      verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    __arguments__ = {
        'learning_rate': Arg(Real(0)),
        'decay': Arg(Real(0, 1, include_high=False)),
        'epsilon': Arg(Real(0, include_low=False)),
    }

    def __init__(
        self,
        learning_rate: float = 0.001,
        decay: float = 0.9,
        epsilon: float = 1e-8,
        clip_norm: float | None = None,
    ):
        self.learning_rate = learning_rate
        self.decay = decay
        self.epsilon = epsilon
        super().__init__(clip_norm)

    def _allocate_state(self, handler, part) -> None:
        part.state['mean_square'] = handler.zeros(part.parameters.shape)

    def _check_for_handler(self, handler) -> None:
        _check_epsilon(self, handler)

    def _update(self) -> None:
        h = self.net.handler
        lr, rho = float(self.learning_rate), float(self.decay)
        epsilon = float(self.epsilon)
        for part in self._parts:
            h.rmsprop_update(
                part.parameters,
                part.gradients,
                part.state['mean_square'],
                part.tmp,
                lr,
                rho,
                epsilon,
            )


class AdamStepper(TrainingStepper):
    """Adam (Kingma & Ba, 2015) with bias correction.

    With step count ``t`` (1 at the first step):
    ``m <- beta1 * m + (1 - beta1) * g``,
    ``v <- beta2 * v + (1 - beta2) * g²``,
    ``m̂ = m / (1 - beta1^t)``, ``v̂ = v / (1 - beta2^t)``,
    ``θ -= learning_rate * m̂ / (sqrt(v̂) + epsilon)``.
    ``m``, ``v`` and ``t`` are zero at :meth:`start`.

    Args:
        learning_rate: step size (>= 0).
        beta1: decay of the first moment, in [0, 1).
        beta2: decay of the second moment, in [0, 1).
        epsilon: added to the root for stability (> 0); at least the
            smallest normal number of the network's dtype (float16: 6.1e-5,
            so e.g. 1e-4 rather than the default), checked at ``start`` and
            before each step.
        clip_norm: see :class:`TrainingStepper`.

    Attributes:
        step_count: the number of updates since :meth:`start`.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)
        >>> data = bs.data_iterators.Minibatches(
        ...     4, default=np.ones((1, 8, 2)), targets=np.ones((1, 8, 1)))
        >>> trainer = bs.Trainer(bs.training.AdamStepper(learning_rate=0.01),
        ...                      verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    __arguments__ = {
        'learning_rate': Arg(Real(0)),
        'beta1': Arg(Real(0, 1, include_high=False)),
        'beta2': Arg(Real(0, 1, include_high=False)),
        'epsilon': Arg(Real(0, include_low=False)),
    }

    __undescribed__ = {'step_count': 0}

    def __init__(
        self,
        learning_rate: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        clip_norm: float | None = None,
    ):
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.step_count = 0
        super().__init__(clip_norm)

    def _allocate_state(self, handler, part) -> None:
        part.state['m'] = handler.zeros(part.parameters.shape)
        part.state['v'] = handler.zeros(part.parameters.shape)

    def _check_for_handler(self, handler) -> None:
        _check_epsilon(self, handler)

    def _reset_scalar_state(self) -> None:
        self.step_count = 0

    def _get_scalar_state(self) -> dict:
        return {'step_count': np.int64(self.step_count)}

    def _set_scalar_state(self, state: dict) -> None:
        self.step_count = int(state['step_count'])

    def _weight_decay(self) -> float:
        """The decoupled weight decay per unit learning rate (AdamW's)."""
        return 0.0

    def _update(self) -> None:
        h = self.net.handler
        self.step_count += 1
        lr, epsilon = float(self.learning_rate), float(self.epsilon)
        b1, b2 = float(self.beta1), float(self.beta2)
        weight_decay = self._weight_decay()
        for part in self._parts:
            h.adam_update(
                part.parameters,
                part.gradients,
                part.state['m'],
                part.state['v'],
                part.mask,
                part.tmp,
                lr,
                b1,
                b2,
                epsilon,
                int(self.step_count),
                weight_decay,
            )


class AdamWStepper(AdamStepper):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019).

    Each step first shrinks the parameters,
    ``θ -= learning_rate * weight_decay * θ``, then applies the
    :class:`AdamStepper` update (which does not see the decay).
    Parameters with ``trainable_mask`` 0 are not decayed.

    Args:
        learning_rate: step size (>= 0).
        beta1: decay of the first moment, in [0, 1).
        beta2: decay of the second moment, in [0, 1).
        epsilon: added to the root for stability (> 0); at least the
            smallest normal number of the network's dtype (float16: 6.1e-5,
            so e.g. 1e-4 rather than the default), checked at ``start`` and
            before each step.
        weight_decay: decay factor per unit learning rate (>= 0).
        clip_norm: see :class:`TrainingStepper`.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)
        >>> data = bs.data_iterators.Minibatches(
        ...     4, default=np.ones((1, 8, 2)), targets=np.ones((1, 8, 1)))
        >>> trainer = bs.Trainer(bs.training.AdamWStepper(learning_rate=0.01),
        ...                      verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    __arguments__ = {'weight_decay': Arg(Real(0))}

    def __init__(
        self,
        learning_rate: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        weight_decay: float = 0.01,
        clip_norm: float | None = None,
    ):
        self.weight_decay = weight_decay
        super().__init__(learning_rate, beta1, beta2, epsilon, clip_norm)

    def _weight_decay(self) -> float:
        return float(self.weight_decay)


# ---------------------------------------------------------- per layer -----
