"""Steppers: one training step (forward, backward, parameter update) each.

A stepper is given the network in :meth:`TrainingStepper.start` and then
performs one training step per :meth:`TrainingStepper.run`: it runs the
forward pass (``training_pass=True``) and the backward pass itself and then
updates ``net.buffer.parameters`` (one flat array) from
``net.buffer.gradients`` with a few handler operations over the whole array.
All state (velocities, moments) and scratch memory is allocated in
``start``, so a step allocates nothing.

Hyper-parameters are plain attributes read in every ``run``; schedules
change them through the hook
:class:`~brainstorm.hooks.ModifyStepperAttribute`.

Shared behaviour:

* Parameters where ``net.trainable_mask`` is 0 (running statistics kept by
  layers themselves) never change: their gradients are zeroed before the
  update, so they also leave no trace in velocities or moments.
* ``clip_norm`` (None: off) rescales the gradients so that their global L2
  norm (over everything the stepper updates) is at most ``clip_norm``.
* :class:`MultiStepper` gives different parts of the network different
  steppers, chosen by layer-name patterns.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np

from brainstorm.arguments import Arg, Bool, DictOf, Instance, Optional, Real
from brainstorm.describable import Describable
from brainstorm.structure.view_references import (
    pattern_matches as _pattern_matches,
)
from brainstorm.training.utils import check_number
from brainstorm.utils import TrainingValidationError

__all__ = ['TrainingStepper', 'ForwardStepper', 'SgdStepper',
           'MomentumStepper', 'NesterovStepper', 'RMSPropStepper',
           'AdamStepper', 'AdamWStepper', 'MultiStepper']


class _Part:
    """One contiguous range of the flat parameter array and its state."""

    __slots__ = ('start', 'stop', 'parameters', 'gradients', 'mask',
                 'state', 'tmp', 'norm')

    def __init__(self, net, start: int, stop: int):
        h = net.handler
        self.start, self.stop = start, stop
        self.parameters = net.buffer.parameters[start:stop]
        self.gradients = net.buffer.gradients[start:stop]
        mask = net.trainable_mask
        self.mask = None if mask is None else mask[start:stop]
        self.state: OrderedDict = OrderedDict()
        self.tmp = h.zeros((stop - start,))
        self.norm = h.zeros((1,))


class TrainingStepper(Describable):
    """Base class of all steppers.

    Subclasses implement ``_update`` (and, if they need them,
    ``_allocate_state``, ``_before_passes`` and
    ``_check_hyperparameters``).

    Args:
        clip_norm: if not None, a positive number: gradients with a global
            L2 norm above it are scaled down to that norm before the update.

    Attributes:
        net: the network given to :meth:`start` (None before).
        last_gradient_norm: the global gradient norm of the last step if
            ``clip_norm`` is set, else None.
    """

    __arguments__ = {
        'clip_norm': Arg(Optional(Real(0, include_low=False)), default=None),
    }

    __undescribed__ = {'net': None, '_parts': None, 'last_gradient_norm': None}
    __default_values__ = {'clip_norm': None}

    def __validate__(self) -> None:
        self._check_hyperparameters()

    def __init__(self, clip_norm: float | None = None):
        # set by start(net)
        self.net: Any = None
        self._parts: Any = None
        self.last_gradient_norm: float | None = None
        self.clip_norm = clip_norm
        self._check_hyperparameters()

    # ----------------------------------------------------------- public ---

    def start(self, net) -> None:
        """Get ready to train ``net``: allocate state (all zero) and scratch
        memory for its whole parameter array."""
        self._bind(net, [(0, int(net.buffer.parameters.shape[0]))])

    def run(self) -> None:
        """Do one training step on the data the network currently holds."""
        self._require_started()
        self._check_hyperparameters()
        self._before_passes()
        self.net.forward_pass(training_pass=True)
        self.net.backward_pass(input_deltas=False)
        self._mask_gradients()
        self._clip_gradients()
        self._update()

    def get_state(self) -> OrderedDict:
        """The stepper's state as NumPy arrays (for checkpoints).

        Returns:
            OrderedDict of dotted names to arrays; scalars are 0-d arrays.
        """
        self._require_started()
        h = self.net.handler
        state = OrderedDict()
        for i, part in enumerate(self._parts):
            for key, array in part.state.items():
                state[f'part{i}.{key}'] = h.get_numpy_copy(array)
        for key, value in self._get_scalar_state().items():
            state[key] = np.asarray(value)
        return state

    def set_state(self, state: dict) -> None:
        """Restore a state made by :meth:`get_state` (after :meth:`start`).

        Raises:
            TrainingValidationError: if names or shapes do not match.
        """
        self._require_started()
        own = self.get_state()
        if set(state) != set(own):
            raise TrainingValidationError(
                f'{type(self).__name__}: cannot restore a state with entries '
                f'{sorted(state)}; this stepper has {sorted(own)}. Was it '
                'saved by a different stepper or network?')
        for key, value in state.items():
            value = np.asarray(value)
            if value.shape != own[key].shape:
                raise TrainingValidationError(
                    f'{type(self).__name__}: state entry {key!r} has shape '
                    f'{value.shape}, expected {own[key].shape}.')
        h = self.net.handler
        for i, part in enumerate(self._parts):
            for key, array in part.state.items():
                h.set_from_numpy(array, np.asarray(state[f'part{i}.{key}']))
        self._set_scalar_state({k: np.asarray(v)[()] for k, v in state.items()
                                if not k.startswith('part')})

    # ------------------------------------------------------- internals ----

    def _bind(self, net, ranges) -> None:
        self.net = net
        self._parts = [_Part(net, start, stop) for start, stop in ranges]
        for part in self._parts:
            self._allocate_state(net.handler, part)
        self._reset_scalar_state()

    def _require_started(self) -> None:
        if self._parts is None:
            raise TrainingValidationError(
                f'{type(self).__name__}: call start(net) before run().')

    def _allocate_state(self, handler, part: _Part) -> None:
        """Add zero-initialised state arrays to ``part.state``."""

    def _reset_scalar_state(self) -> None:
        """Reset scalar state (e.g. step counts) at start."""

    def _get_scalar_state(self) -> dict:
        return {}

    def _set_scalar_state(self, state: dict) -> None:
        """Restore scalar state from :meth:`_get_scalar_state`'s keys."""

    def _check_hyperparameters(self) -> None:
        if self.clip_norm is not None:
            check_number(type(self).__name__, 'clip_norm', self.clip_norm,
                         low=0, include_low=False)

    def _before_passes(self) -> None:
        """Work done before the forward pass (Nesterov's look-ahead)."""

    def _mask_gradients(self) -> None:
        h = self.net.handler
        for part in self._parts:
            if part.mask is not None:
                h.mult_tt(part.gradients, part.mask, part.gradients)

    def _squared_gradient_norm(self) -> float:
        h = self.net.handler
        total = 0.0
        for part in self._parts:
            h.mult_tt(part.gradients, part.gradients, part.tmp)
            h.sum_t(part.tmp, None, part.norm)
            total += float(h.get_numpy_copy(part.norm)[0])
        return total

    def _scale_gradients(self, factor: float) -> None:
        h = self.net.handler
        for part in self._parts:
            h.mult_st(factor, part.gradients, part.gradients)

    def _clip_gradients(self) -> None:
        if self.clip_norm is None:
            self.last_gradient_norm = None
            return
        norm = math.sqrt(self._squared_gradient_norm())
        self.last_gradient_norm = norm
        if norm > self.clip_norm:
            self._scale_gradients(float(self.clip_norm) / norm)

    def _update(self) -> None:
        raise NotImplementedError

    def __repr__(self):
        args = ', '.join(f'{k}={v!r}' for k, v in self.__dict__.items()
                         if not k.startswith('_') and k not in
                         ('net', 'last_gradient_norm'))
        return f'{type(self).__name__}({args})'


def _check_learning_rate(stepper) -> None:
    check_number(type(stepper).__name__, 'learning_rate',
                 stepper.learning_rate, low=0)


def _check_momentum(stepper) -> None:
    check_number(type(stepper).__name__, 'momentum', stepper.momentum,
                 low=0, high=1, include_high=False)
    if not isinstance(stepper.scale_learning_rate, bool):
        raise TrainingValidationError(
            f'{type(stepper).__name__}: scale_learning_rate must be a bool. '
            f'Received: scale_learning_rate={stepper.scale_learning_rate!r}')


class ForwardStepper(TrainingStepper):
    """Only runs the forward pass; never changes the parameters.

    Useful to gather training losses and scores with the Trainer, or
    (inside a :class:`MultiStepper`) to freeze some layers.

    Args:
        use_training_pass: run the forward pass as a training pass.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)
        >>> data = bs.data_iterators.Minibatches(
        ...     4, default=np.ones((1, 8, 2)), targets=np.ones((1, 8, 1)))
        >>> trainer = bs.Trainer(bs.training.steppers.ForwardStepper(),
        ...                      verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # never changes them
        False
    """

    __arguments__ = {'use_training_pass': Arg(Bool(), default=False)}

    def __init__(self, use_training_pass: bool = False):
        super().__init__()
        self.use_training_pass = use_training_pass

    def run(self) -> None:
        """Run the forward pass on the current data."""
        self._require_started()
        self.net.forward_pass(training_pass=self.use_training_pass)

    def _update(self) -> None:
        pass


class SgdStepper(TrainingStepper):
    """Plain stochastic gradient descent: ``θ -= learning_rate * g``.

    Args:
        learning_rate: step size (>= 0).
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
        >>> trainer = bs.Trainer(bs.training.SgdStepper(learning_rate=0.1),
        ...                      verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    __arguments__ = {'learning_rate': Arg(Real(0), default=0.1)}

    def __init__(self, learning_rate: float = 0.1,
                 clip_norm: float | None = None):
        self.learning_rate = learning_rate
        super().__init__(clip_norm)

    def _check_hyperparameters(self) -> None:
        super()._check_hyperparameters()
        _check_learning_rate(self)

    def _update(self) -> None:
        h = self.net.handler
        lr = float(self.learning_rate)
        for part in self._parts:
            h.mult_add_st(-lr, part.gradients, part.parameters)


class MomentumStepper(TrainingStepper):
    """Gradient descent with (classical) momentum.

    ``lr' = learning_rate * (1 - momentum)`` if ``scale_learning_rate``
    else ``learning_rate``; ``v <- momentum * v - lr' * g``; ``θ += v``.
    The velocity ``v`` is zero at :meth:`start`.

    Args:
        learning_rate: step size (>= 0).
        momentum: in [0, 1).
        scale_learning_rate: scale the learning rate by ``1 - momentum``
            (must be a bool).
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
        >>> trainer = bs.Trainer(bs.training.MomentumStepper(0.1, momentum=0.9),
        ...                      verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    __arguments__ = {
        'learning_rate': Arg(Real(0), default=0.1),
        'momentum': Arg(Real(0, 1, include_high=False), default=0.0),
        'scale_learning_rate': Arg(Bool(), default=True),
    }

    def __init__(self, learning_rate: float = 0.1, momentum: float = 0.0,
                 scale_learning_rate: bool = True,
                 clip_norm: float | None = None):
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.scale_learning_rate = scale_learning_rate
        super().__init__(clip_norm)

    def _check_hyperparameters(self) -> None:
        super()._check_hyperparameters()
        _check_learning_rate(self)
        _check_momentum(self)

    def _allocate_state(self, handler, part) -> None:
        part.state['velocity'] = handler.zeros(part.parameters.shape)

    def _effective_learning_rate(self) -> float:
        if self.scale_learning_rate:
            return float(self.learning_rate) * (1.0 - float(self.momentum))
        return float(self.learning_rate)

    def _update(self) -> None:
        h = self.net.handler
        lr = self._effective_learning_rate()
        mu = float(self.momentum)
        for part in self._parts:
            v = part.state['velocity']
            h.mult_st(mu, v, v)
            h.mult_add_st(-lr, part.gradients, v)
            h.add_tt(part.parameters, v, part.parameters)


class NesterovStepper(MomentumStepper):
    """Gradient descent with Nesterov's accelerated momentum.

    Before the passes: ``v <- momentum * v``; ``θ += v`` (look ahead).
    After them: ``v -= lr' * g``; ``θ -= lr' * g``, with ``lr'`` as in
    :class:`MomentumStepper`. Same arguments as :class:`MomentumStepper`.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)
        >>> data = bs.data_iterators.Minibatches(
        ...     4, default=np.ones((1, 8, 2)), targets=np.ones((1, 8, 1)))
        >>> trainer = bs.Trainer(bs.training.NesterovStepper(0.1, momentum=0.9),
        ...                      verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    def _before_passes(self) -> None:
        h = self.net.handler
        mu = float(self.momentum)
        for part in self._parts:
            v = part.state['velocity']
            h.mult_st(mu, v, v)
            h.add_tt(part.parameters, v, part.parameters)

    def _update(self) -> None:
        h = self.net.handler
        lr = self._effective_learning_rate()
        for part in self._parts:
            h.mult_add_st(-lr, part.gradients, part.state['velocity'])
            h.mult_add_st(-lr, part.gradients, part.parameters)


class RMSPropStepper(TrainingStepper):
    """RMSProp: divide the gradient by a running RMS of recent gradients.

    ``s <- decay * s + (1 - decay) * g²``;
    ``θ -= learning_rate * g / (sqrt(s) + epsilon)``; ``s`` is zero at
    :meth:`start`.

    Args:
        learning_rate: step size (>= 0).
        decay: decay of the running mean square, in [0, 1).
        epsilon: added to the root for stability (> 0).
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
        'learning_rate': Arg(Real(0), default=0.001),
        'decay': Arg(Real(0, 1, include_high=False), default=0.9),
        'epsilon': Arg(Real(0, include_low=False), default=1e-8),
    }

    def __init__(self, learning_rate: float = 0.001, decay: float = 0.9,
                 epsilon: float = 1e-8, clip_norm: float | None = None):
        self.learning_rate = learning_rate
        self.decay = decay
        self.epsilon = epsilon
        super().__init__(clip_norm)

    def _check_hyperparameters(self) -> None:
        super()._check_hyperparameters()
        name = type(self).__name__
        _check_learning_rate(self)
        check_number(name, 'decay', self.decay, 0, 1, include_high=False)
        check_number(name, 'epsilon', self.epsilon, 0, include_low=False)

    def _allocate_state(self, handler, part) -> None:
        part.state['mean_square'] = handler.zeros(part.parameters.shape)

    def _update(self) -> None:
        h = self.net.handler
        lr, rho = float(self.learning_rate), float(self.decay)
        for part in self._parts:
            g, s, tmp = part.gradients, part.state['mean_square'], part.tmp
            h.mult_st(rho, s, s)
            h.mult_tt(g, g, tmp)
            h.mult_add_st(1.0 - rho, tmp, s)
            h.sqrt_t(s, tmp)
            h.add_st(float(self.epsilon), tmp, tmp)
            h.divide_tt(g, tmp, tmp)
            h.mult_add_st(-lr, tmp, part.parameters)


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
        epsilon: added to the root for stability (> 0).
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
        'learning_rate': Arg(Real(0), default=0.001),
        'beta1': Arg(Real(0, 1, include_high=False), default=0.9),
        'beta2': Arg(Real(0, 1, include_high=False), default=0.999),
        'epsilon': Arg(Real(0, include_low=False), default=1e-8),
    }

    __undescribed__ = {'step_count': 0}

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 clip_norm: float | None = None):
        self.learning_rate = learning_rate
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.step_count = 0
        super().__init__(clip_norm)

    def _check_hyperparameters(self) -> None:
        super()._check_hyperparameters()
        name = type(self).__name__
        _check_learning_rate(self)
        check_number(name, 'beta1', self.beta1, 0, 1, include_high=False)
        check_number(name, 'beta2', self.beta2, 0, 1, include_high=False)
        check_number(name, 'epsilon', self.epsilon, 0, include_low=False)

    def _allocate_state(self, handler, part) -> None:
        part.state['m'] = handler.zeros(part.parameters.shape)
        part.state['v'] = handler.zeros(part.parameters.shape)

    def _reset_scalar_state(self) -> None:
        self.step_count = 0

    def _get_scalar_state(self) -> dict:
        return {'step_count': np.int64(self.step_count)}

    def _set_scalar_state(self, state: dict) -> None:
        self.step_count = int(state['step_count'])

    def _decay_weights(self) -> None:
        """Hook for decoupled weight decay (AdamW)."""

    def _update(self) -> None:
        h = self.net.handler
        self.step_count += 1
        t = self.step_count
        lr = float(self.learning_rate)
        b1, b2 = float(self.beta1), float(self.beta2)
        correction1 = 1.0 - b1 ** t
        root_correction2 = math.sqrt(1.0 - b2 ** t)
        self._decay_weights()
        for part in self._parts:
            g, m, v, tmp = (part.gradients, part.state['m'], part.state['v'],
                            part.tmp)
            h.mult_st(b1, m, m)
            h.mult_add_st(1.0 - b1, g, m)
            h.mult_st(b2, v, v)
            h.mult_tt(g, g, tmp)
            h.mult_add_st(1.0 - b2, tmp, v)
            # tmp = sqrt(v̂) + epsilon, then the step m̂ / tmp
            h.sqrt_t(v, tmp)
            h.mult_st(1.0 / root_correction2, tmp, tmp)
            h.add_st(float(self.epsilon), tmp, tmp)
            h.divide_tt(m, tmp, tmp)
            h.mult_add_st(-lr / correction1, tmp, part.parameters)


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
        epsilon: added to the root for stability (> 0).
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

    __arguments__ = {'weight_decay': Arg(Real(0), default=0.01)}

    def __init__(self, learning_rate: float = 0.001, beta1: float = 0.9,
                 beta2: float = 0.999, epsilon: float = 1e-8,
                 weight_decay: float = 0.01, clip_norm: float | None = None):
        self.weight_decay = weight_decay
        super().__init__(learning_rate, beta1, beta2, epsilon, clip_norm)

    def _check_hyperparameters(self) -> None:
        super()._check_hyperparameters()
        check_number(type(self).__name__, 'weight_decay', self.weight_decay,
                     low=0)

    def _decay_weights(self) -> None:
        h = self.net.handler
        decay = float(self.learning_rate) * float(self.weight_decay)
        if decay == 0.0:
            return
        for part in self._parts:
            if part.mask is None:
                h.mult_st(1.0 - decay, part.parameters, part.parameters)
            else:
                h.mult_tt(part.parameters, part.mask, part.tmp)
                h.mult_add_st(-decay, part.tmp, part.parameters)


# ---------------------------------------------------------- per layer -----

class MultiStepper(TrainingStepper):
    """Different steppers for different layers (neon's multi-optimizer).

    Keys are layer-name patterns as in ``Network.initialize`` (``*``
    matches any run of identifier characters; ``'default'`` covers the
    layers no other pattern matches). Every layer with parameters must be
    covered by exactly one stepper (the same stepper object may appear
    under several patterns). The forward and backward passes run once per
    step; then each stepper updates its own part of the flat parameter
    array.

    Args:
        steppers: dict of layer-name pattern -> stepper.
        clip_norm: if set, the global gradient norm over the whole network
            is clipped before the steppers (which may also clip their own
            parts).

    Example:
        >>> stepper = MultiStepper({'Conv*': AdamStepper(0.001),
        ...                         'default': MomentumStepper(0.01, 0.9)})

    Attributes:
        assignment: after :meth:`start`, layer name -> pattern of its
            stepper.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)
        >>> data = bs.data_iterators.Minibatches(
        ...     4, default=np.ones((1, 8, 2)), targets=np.ones((1, 8, 1)))
        >>> trainer = bs.Trainer(bs.training.MultiStepper(
        ...     {'default': bs.training.SgdStepper(0.1)}), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    __arguments__ = {
        'steppers': Arg(DictOf(Instance(TrainingStepper,
                                        example=lambda: SgdStepper()),
                               nonempty=True)),
    }

    __undescribed__ = {'assignment': None}

    def __init__(self, steppers: dict, clip_norm: float | None = None):
        if not isinstance(steppers, dict) or not steppers:
            raise TrainingValidationError(
                'MultiStepper: steppers must be a non-empty dict of layer '
                f'name patterns to steppers. Received: {steppers!r}')
        for pattern, stepper in steppers.items():
            if not isinstance(pattern, str):
                raise TrainingValidationError(
                    'MultiStepper: keys must be layer name patterns (str). '
                    f'Received: {pattern!r}')
            if not isinstance(stepper, TrainingStepper) or \
                    isinstance(stepper, MultiStepper):
                raise TrainingValidationError(
                    f"MultiStepper: the value for '{pattern}' must be a "
                    f'stepper (not a MultiStepper). Received: {stepper!r}')
        self.steppers = OrderedDict(steppers)
        self.assignment: OrderedDict | None = None
        super().__init__(clip_norm)

    def __validate__(self) -> None:
        super().__validate__()
        for pattern, stepper in self.steppers.items():
            if isinstance(stepper, MultiStepper):
                raise TrainingValidationError(
                    f"MultiStepper: steppers[{pattern!r}] must be a stepper "
                    f'(not a MultiStepper). Received: {stepper!r}')

    def _unique_steppers(self) -> OrderedDict:
        """pattern -> stepper, each stepper object once (first pattern)."""
        result = OrderedDict()
        seen = set()
        for pattern, stepper in self.steppers.items():
            if id(stepper) not in seen:
                seen.add(id(stepper))
                result[pattern] = stepper
        return result

    def start(self, net) -> None:
        """Assign each layer with parameters to a stepper and start them.

        Raises:
            TrainingValidationError: for patterns matching no layer with
                parameters, layers matched by several steppers, and layers
                with no stepper.
        """
        with_params = [name for name, layer in net.layers.items()
                       if layer.parameter_shapes]
        patterns = [p for p in self.steppers if p != 'default']
        for pattern in patterns:
            if not any(_pattern_matches(pattern, n) for n in with_params):
                raise TrainingValidationError(
                    f"MultiStepper: pattern '{pattern}' matches no layer with "
                    f'parameters. Layers with parameters: {with_params}')
        owner_pattern = {id(s): p for p, s in
                         reversed(list(self.steppers.items()))}
        assignment = OrderedDict()
        for lname in with_params:
            matching = [p for p in patterns if _pattern_matches(p, lname)]
            chosen = {id(self.steppers[p]) for p in matching}
            if len(chosen) > 1:
                raise TrainingValidationError(
                    f"MultiStepper: layer '{lname}' is matched by patterns "
                    f'{matching} with different steppers; it needs exactly '
                    'one.')
            if chosen:
                assignment[lname] = owner_pattern[chosen.pop()]
            elif 'default' in self.steppers:
                assignment[lname] = owner_pattern[id(self.steppers['default'])]
            else:
                raise TrainingValidationError(
                    f"MultiStepper: no stepper for layer '{lname}'. Add a "
                    "'default' or a pattern matching it.")
        offset = net.layout['parameters']['@slice'][0]
        ranges: dict = {p: [] for p in self._unique_steppers()}
        for lname, pattern in assignment.items():
            node = net.layout[lname]['parameters']
            for key, child in node.items():
                if not key.startswith('@'):
                    start, stop = child['@slice']
                    ranges[pattern].append((start - offset, stop - offset))
        self.net = net
        self.assignment = assignment
        self._parts = [_Part(net, 0, int(net.buffer.parameters.shape[0]))]
        for pattern, stepper in self._unique_steppers().items():
            stepper._bind(net, _merge_ranges(ranges[pattern]))

    def run(self) -> None:
        """One step: all look-aheads, the passes once, then each update."""
        self._require_started()
        self._check_hyperparameters()
        steppers = list(self._unique_steppers().values())
        for stepper in steppers:
            stepper._check_hyperparameters()
        for stepper in steppers:
            stepper._before_passes()
        self.net.forward_pass(training_pass=True)
        self.net.backward_pass(input_deltas=False)
        for stepper in steppers:
            stepper._mask_gradients()
        self._clip_gradients()
        for stepper in steppers:
            stepper._clip_gradients()
            stepper._update()

    def get_state(self) -> OrderedDict:
        """The states of all steppers, prefixed ``'steppers.<pattern>.'``."""
        self._require_started()
        state = OrderedDict()
        for pattern, stepper in self._unique_steppers().items():
            for key, value in stepper.get_state().items():
                state[f'steppers.{pattern}.{key}'] = value
        return state

    def set_state(self, state: dict) -> None:
        """Restore a state made by :meth:`get_state`."""
        self._require_started()
        own = self.get_state()
        if set(state) != set(own):
            raise TrainingValidationError(
                f'MultiStepper: cannot restore a state with entries '
                f'{sorted(state)}; this stepper has {sorted(own)}.')
        for pattern, stepper in self._unique_steppers().items():
            prefix = f'steppers.{pattern}.'
            stepper.set_state({k[len(prefix):]: v for k, v in state.items()
                               if k.startswith(prefix)})

    def _update(self) -> None:
        raise AssertionError('MultiStepper updates through its steppers')


def _merge_ranges(ranges: list) -> list:
    merged: list = []
    for start, stop in sorted(ranges):
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], stop)
        else:
            merged.append((start, stop))
    return merged
