"""Steppers with a fixed step size: forward only, SGD, momentum, Nesterov."""

from __future__ import annotations

from brainstorm.arguments import Arg, Bool, Real
from brainstorm.training.steppers.base import TrainingStepper


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

    __arguments__ = {'use_training_pass': Arg(Bool())}

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

    __arguments__ = {'learning_rate': Arg(Real(0))}

    def __init__(self, learning_rate: float = 0.1, clip_norm: float | None = None):
        self.learning_rate = learning_rate
        super().__init__(clip_norm)

    def _update(self) -> None:
        h = self.net.handler
        lr = float(self.learning_rate)
        for part in self._parts:
            h.sgd_update(part.parameters, part.gradients, lr)


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
        'learning_rate': Arg(Real(0)),
        'momentum': Arg(Real(0, 1, include_high=False)),
        'scale_learning_rate': Arg(Bool()),
    }

    def __init__(
        self,
        learning_rate: float = 0.1,
        momentum: float = 0.0,
        scale_learning_rate: bool = True,
        clip_norm: float | None = None,
    ):
        self.learning_rate = learning_rate
        self.momentum = momentum
        self.scale_learning_rate = scale_learning_rate
        super().__init__(clip_norm)

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
            h.momentum_update(
                part.parameters, part.gradients, part.state['velocity'], lr, mu
            )


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
            h.nesterov_lookahead(part.parameters, part.state['velocity'], mu)

    def _update(self) -> None:
        h = self.net.handler
        lr = self._effective_learning_rate()
        for part in self._parts:
            h.nesterov_update(
                part.parameters, part.gradients, part.state['velocity'], lr
            )
