"""Value and gradient modifiers: constraints and regularisers on parameters.

A :class:`ValueModifier` changes one parameter (or gradient) view in place;
a :class:`GradientModifier` changes a gradient view using the parameters.
The network installs them with ``set_weight_modifiers`` /
``set_gradient_modifiers``, which sets ``layer_name`` and ``view_name``.

Modifiers work only through handler operations, so they run unchanged on
every handler (including the GPU and the checking ``DebugHandler``). Scratch
arrays and device copies of masks are allocated once per handler and shape
and then reused.
"""

from __future__ import annotations

import numpy as np

from brainstorm.arguments import Arg, NumericArray, Optional, Real
from brainstorm.describable import Describable  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.errors import (
    NetworkValidationError,
    ValidationError,
)
from brainstorm.randomness import Seedable

__all__ = [
    'ValueModifier',
    'GradientModifier',
    'ClipValues',
    'ConstrainL2Norm',
    'MaskValues',
    'FreezeValues',
    'L1Decay',
    'L2Decay',
]


class _Modifier(Seedable):
    """Shared parts of value and gradient modifiers."""

    __argument_error__ = NetworkValidationError

    __undescribed__ = {
        'layer_name': '',
        'view_name': '',
        '_handler': None,
        '_buffers': None,
    }

    def __init__(self):
        super().__init__()
        self.layer_name = ''
        self.view_name = ''
        self._handler = None
        self._buffers = None

    def __repr__(self):
        return f'<{self.layer_name}.{self.view_name}.{type(self).__name__}>'

    def __getstate__(self):
        # scratch buffers belong to one handler; copies start without them
        state = self.__dict__.copy()
        state['_handler'] = None
        state['_buffers'] = None
        return state

    def _buffer_cache(self, handler) -> dict:
        if handler is not self._handler or self._buffers is None:
            self._handler = handler
            self._buffers = {}
        return self._buffers

    def _scratch(self, handler, name: str, shape: tuple[int, ...]):
        """A handler array of ``shape`` reused between calls."""
        cache = self._buffer_cache(handler)
        key = (name, tuple(shape))
        if key not in cache:
            cache[key] = handler.allocate(tuple(shape))
        return cache[key]

    def _device_copy(self, handler, name: str, shape: tuple[int, ...], make_array):
        """A handler copy of ``make_array()``, made once per handler/shape."""
        cache = self._buffer_cache(handler)
        key = (name, tuple(shape))
        if key not in cache:
            cache[key] = handler.create_from_numpy(make_array())
        return cache[key]


class ValueModifier(_Modifier):
    """Base class of modifiers that change a view in place.

    Attributes:
        layer_name: name of the layer whose view is modified (set by the
            network, not described).
        view_name: name of the modified parameter (not described).
    """

    def __call__(self, handler, view) -> None:
        """Modify ``view`` in place using only operations of ``handler``."""
        raise NotImplementedError

    def before_training(self, handler, view) -> None:
        """Called by ``Trainer.train`` before its first update; reads ``view``.

        Nothing by default. It must not change ``view`` or draw random
        numbers: a run resumed from a checkpoint calls it again, and must
        go on as the uninterrupted run did.
        """


class GradientModifier(_Modifier):
    """Base class of modifiers that change gradients using the parameters.

    Attributes:
        layer_name: name of the layer (set by the network, not described).
        view_name: name of the parameter (not described).
    """

    def __call__(self, handler, parameters, gradients) -> None:
        """Modify ``gradients`` in place; ``parameters`` is read only."""
        raise NotImplementedError


# -------------------------------------------------------- value modifiers ---


class ClipValues(ValueModifier):
    """Clip all values to ``[low, high]``.

    Args:
        low: lower bound.
        high: upper bound (``>= low``).
    """

    __arguments__ = {
        'low': Arg(Real()),
        'high': Arg(Real()),
    }

    def __init__(self, low: float = -1.0, high: float = 1.0):
        super().__init__()
        # low <= high is checked by __validate__
        self.low = low
        self.high = high

    def __validate__(self) -> None:
        if self.low > self.high:
            raise NetworkValidationError(
                'ClipValues: low must not be greater than high. Received: '
                f'low={self.low}, high={self.high}'
            )

    def __call__(self, handler, view):
        """Clip ``view`` in place to ``[low, high]``."""
        handler.clip_t(view, float(self.low), float(self.high), view)


class ConstrainL2Norm(ValueModifier):
    """Rescale rows whose L2 norm exceeds ``limit`` to norm ``limit``.

    A row is everything at one index of the first axis (for a
    FullyConnected weight matrix: the incoming weights of one unit). Views
    with fewer than 2 dimensions, such as biases, are left unchanged.

    Args:
        limit: the maximal L2 norm per row (> 0).
    """

    __arguments__ = {'limit': Arg(Real(0, include_low=False))}

    def __init__(self, limit: float):
        super().__init__()
        self.limit = limit

    def __call__(self, handler, view):
        """Scale down in place each row of ``view`` whose L2 norm exceeds ``limit``."""
        if len(view.shape) < 2 or view.shape[0] == 0:
            return
        rows = view.shape[0]
        matrix = view.reshape((rows, int(np.prod(view.shape[1:]))))
        limit = float(self.limit)
        squares = self._scratch(handler, 'squares', matrix.shape)
        norms = self._scratch(handler, 'norms', (rows, 1))
        factors = self._scratch(handler, 'factors', (rows, 1))
        handler.mult_tt(matrix, matrix, squares)
        handler.sum_t(squares, 1, norms)
        handler.sqrt_t(norms, norms)
        # norms <- max(norm, limit), exactly limit for rows within the limit
        handler.add_st(-limit, norms, norms)
        handler.rel(norms, norms)
        handler.add_st(limit, norms, norms)
        handler.fill(factors, limit)
        handler.divide_tt(factors, norms, factors)
        handler.mult_mv(matrix, factors, matrix)


class MaskValues(ValueModifier):
    """Multiply the view elementwise with a fixed mask.

    Args:
        mask: NumPy array of the view's shape (or broadcastable to it); it
            is copied to the handler once.
    """

    __arguments__ = {'mask': Arg(NumericArray())}

    def __init__(self, mask):
        super().__init__()
        self.mask = np.array(mask)  # a numeric array, as declared

    def __init_from_description__(self, description):
        super().__init_from_description__(description)
        self.mask = np.array(self.mask)

    def __call__(self, handler, view):
        """Multiply ``view`` in place by the mask, broadcast to its shape.

        Raises:
            ValidationError: the mask does not broadcast to the view's shape.
        """
        shape = tuple(view.shape)
        device_mask = self._device_copy(
            handler, 'mask', shape, lambda: self._broadcast_mask(shape)
        )
        handler.mult_tt(view, device_mask, view)

    def _broadcast_mask(self, shape: tuple[int, ...]) -> np.ndarray:
        try:
            return np.ascontiguousarray(np.broadcast_to(self.mask, shape))
        except ValueError:
            raise ValidationError(
                f'{self!r}: the mask of shape {self.mask.shape} does not fit '
                f'the view of shape {shape}'
            ) from None


class FreezeValues(ValueModifier):
    """Keep the view at fixed values.

    Args:
        weights: the values (array of the view's shape); if None, the values
            the view has when training starts (``Trainer.train``, before
            the first update) are kept, or, outside a trainer, those it has
            when the modifier is first applied.
    """

    __arguments__ = {
        'weights': Arg(Optional(NumericArray())),
    }

    def __init__(self, weights=None):
        super().__init__()
        self.weights = None if weights is None else np.array(weights)

    def __init_from_description__(self, description):
        super().__init_from_description__(description)
        if self.weights is not None:
            self.weights = np.array(self.weights)

    def before_training(self, handler, view) -> None:
        """Without ``weights``, the view's values now become them.

        Before the first update, so the frozen values are those the
        network started with; a run resumed from a checkpoint takes them
        again from its parameters, where they are still those values.
        """
        if self.weights is None:
            self.weights = handler.get_numpy_copy(view)

    def __call__(self, handler, view):
        """Overwrite ``view`` with the frozen weights.

        Without ``weights``, the view's values at the first call become them.

        Raises:
            ValidationError: the weights' shape differs from the view's.
        """
        shape = tuple(view.shape)
        if self.weights is None:
            self.weights = handler.get_numpy_copy(view)
        if self.weights.shape != shape:
            raise ValidationError(
                f'{self!r}: weights of shape {self.weights.shape} do not fit '
                f'the view of shape {shape}'
            )
        frozen = self._device_copy(handler, 'weights', shape, lambda: self.weights)
        handler.copy_to(frozen, view)


# ----------------------------------------------------- gradient modifiers ---


class L1Decay(GradientModifier):
    """L1 weight decay: ``gradients += factor * sign(parameters)``.

    Args:
        factor: strength of the decay (>= 0).
    """

    __arguments__ = {'factor': Arg(Real(0))}

    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def __call__(self, handler, parameters, gradients):
        """Add ``factor * sign(parameters)`` to ``gradients``."""
        signs = self._scratch(handler, 'signs', tuple(parameters.shape))
        handler.sign_t(parameters, signs)
        handler.mult_add_st(float(self.factor), signs, gradients)


class L2Decay(GradientModifier):
    """L2 weight decay: ``gradients += factor * parameters``.

    Args:
        factor: strength of the decay (>= 0).
    """

    __arguments__ = {'factor': Arg(Real(0))}

    def __init__(self, factor: float):
        super().__init__()
        self.factor = factor

    def __call__(self, handler, parameters, gradients):
        """Add ``factor * parameters`` to ``gradients``."""
        handler.mult_add_st(float(self.factor), parameters, gradients)
