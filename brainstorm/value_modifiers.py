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

import math

import numpy as np

from brainstorm.arguments import Arg, Bool, NumericArray, Optional, Real
from brainstorm.describable import Describable  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.errors import (
    NetworkValidationError,
    ValidationError,
)
from brainstorm.handlers.representable import find_unrepresentable
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

    def _device_copy(
        self, handler, name: str, shape: tuple[int, ...], make_array, check=True
    ):
        """A handler copy of ``make_array()``, made once per handler/shape.

        Raises:
            NetworkValidationError: with ``check``, a value of the array is
                not finite in the handler's dtype (``1e39`` in float32).
        """
        cache = self._buffer_cache(handler)
        key = (name, tuple(shape))
        if key not in cache:
            array = make_array()
            if check:
                self._check_array_fits(handler, name, array)
            cache[key] = handler.create_from_numpy(array)
        return cache[key]

    def _where(self) -> str:
        if self.layer_name or self.view_name:
            return f' of {self.layer_name}.{self.view_name}'
        return ''

    def _check_array_fits(self, handler, name: str, array) -> None:
        """Refuse an array with a value that is not finite in the handler's dtype."""
        bad = find_unrepresentable(np.asarray(array), handler.dtype)
        if bad is not None:
            index, value, what = bad
            raise NetworkValidationError(
                f'{type(self).__name__}{self._where()}: {name}{list(index)}='
                f'{value!r} is {what}; its values must be finite in the '
                f'handler dtype {np.dtype(handler.dtype).name}'
            )

    def _cast(self, handler, value: float) -> float:
        """``value`` as the handler's dtype holds it (inf beyond its range)."""
        with np.errstate(over='ignore'):
            return float(np.asarray(value, dtype=np.float64).astype(handler.dtype))

    def _refuse_value(self, handler, name: str, value: float, why: str):
        return NetworkValidationError(
            f'{type(self).__name__}{self._where()}: {name}={value!r} {why} '
            f'in the handler dtype {np.dtype(handler.dtype).name} (largest '
            f'finite value {float(np.finfo(handler.dtype).max):.6g})'
        )


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
        """Clip ``view`` in place to ``[low, high]``.

        Raises:
            NetworkValidationError: ``low`` is above or ``high`` below the
                range of the handler's dtype: every value would become
                +-inf. (A bound beyond the range on its own side clips
                nothing and is allowed.)
        """
        low, high = self._check_dtype(handler)
        handler.clip_t(view, low, high, view)

    def before_training(self, handler, view) -> None:
        """Check the bounds against the handler's dtype (see ``__call__``)."""
        self._check_dtype(handler)

    def _check_dtype(self, handler) -> tuple[float, float]:
        """The bounds as the handler's dtype holds them (+-inf beyond its range).

        Raises:
            NetworkValidationError: bounds that would make every value
                +-inf.
        """
        cache = self._buffer_cache(handler)
        key = ('bounds', self.low, self.high)
        if key in cache:  # checked for this handler (its dtype) already
            return cache[key]
        low, high = self._cast(handler, self.low), self._cast(handler, self.high)
        if low == math.inf:
            raise self._refuse_value(
                handler, 'low', self.low, 'would clip every value to +inf'
            )
        if high == -math.inf:
            raise self._refuse_value(
                handler, 'high', self.high, 'would clip every value to -inf'
            )
        # a bound beyond the range on its own side clips no finite value,
        # as the dtype's largest finite value does (an infinite bound
        # would be refused by DebugHandler's checks)
        largest = float(np.finfo(handler.dtype).max)
        cache[key] = max(low, -largest), min(high, largest)
        return cache[key]


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
        """Scale down in place each row of ``view`` whose L2 norm exceeds ``limit``.

        The sums of squares are taken of the rows clipped to ``+-bound``, a
        power of two small enough that no square and no sum overflows (no
        op gives inf, which ``DebugHandler`` refuses). A row with no value
        beyond ``bound`` (every row of ordinary weights) gets the sum of
        squares of its own values, bit for bit. The norm of a row with
        larger values (float32 ``[2e19, 1]``, float16 ``[9.0] * 1000``) is
        taken from the row times a power of two (``_large_rows``),
        and it is scaled to norm ``limit`` too.

        Raises:
            NetworkValidationError: ``limit`` is beyond the range of the
                handler's dtype, or 0 in it.
        """
        if len(view.shape) < 2 or view.shape[0] == 0:
            return
        self._check_dtype(handler)
        rows = view.shape[0]
        matrix = view.reshape((rows, int(np.prod(view.shape[1:]))))
        limit = float(self.limit)
        bound = _square_bound(handler.dtype, matrix.shape[1])
        squares = self._scratch(handler, 'squares', matrix.shape)
        norms = self._scratch(handler, 'norms', (rows, 1))
        factors = self._scratch(handler, 'factors', (rows, 1))
        handler.clip_t(matrix, -bound, bound, squares)
        handler.mult_tt(squares, squares, squares)
        handler.sum_t(squares, 1, norms)
        # a row below bound**2 had no value clipped (a clipped one adds it)
        large = ~(handler.get_numpy_copy(norms)[:, 0] < bound * bound)
        fixes = self._large_rows(handler, matrix, bound, large) if large.any() else None
        handler.sqrt_t(norms, norms)
        # norms <- max(norm, limit), exactly limit for rows within the limit
        handler.add_st(-limit, norms, norms)
        handler.rel(norms, norms)
        handler.add_st(limit, norms, norms)
        handler.fill(factors, limit)
        handler.divide_tt(factors, norms, factors)
        if fixes is not None:
            self._fix_factors(handler, matrix, factors, *fixes)
        handler.mult_mv(matrix, factors, matrix)

    def before_training(self, handler, view) -> None:
        """Check ``limit`` against the handler's dtype (see ``__call__``)."""
        if len(view.shape) >= 2:
            self._check_dtype(handler)

    def _check_dtype(self, handler) -> None:
        cache = self._buffer_cache(handler)
        key = ('limit', self.limit)
        if key in cache:  # checked for this handler (its dtype) already
            return
        limit = self._cast(handler, self.limit)
        if limit == math.inf:
            raise self._refuse_value(
                handler, 'limit', self.limit, 'is beyond the range'
            )
        if limit == 0.0:
            raise self._refuse_value(handler, 'limit', self.limit, 'rounds to 0')
        cache[key] = True

    def _large_rows(self, handler, matrix, bound: float, large: np.ndarray):
        """The factors of the rows ``large`` marks whose values passed ``bound``.

        For e = 0, 1, 2, 4, ... the rows still pending are taken times
        ``2**-e`` (exact: a power of two) and clipped to ``+-bound``; a row
        that no clip changed has its norm: ``2**e`` times that of the
        scaled row (at e = 0 the sum computed already stands). The factor
        ``limit / norm`` is computed in float64, in two steps (``2**-e``
        first) where it would be subnormal in the handler's dtype. Only
        handler operations are used, and host reads of one value per row.

        Returns:
            None if nothing is to change (or the matrix holds NaN or inf:
            then the norms are the plain, non-finite ones); else the host
            arrays ``(pre, post)``: the row factors applied first, and those
            applied after (NaN: the computed one).
        """
        rows = matrix.shape[0]
        squares = self._scratch(handler, 'squares', matrix.shape)
        if not handler.is_fully_finite(matrix):
            with np.errstate(over='ignore', invalid='ignore'):
                handler.mult_tt(matrix, matrix, squares)
                handler.sum_t(squares, 1, self._scratch(handler, 'norms', (rows, 1)))
            return None
        limit = float(self.limit)
        tiny = float(np.finfo(handler.dtype).tiny)
        pre, post = np.ones(rows), np.full(rows, np.nan)
        scaled = self._scratch(handler, 'scaled', matrix.shape)
        clipped = self._scratch(handler, 'clipped', (rows, 1))
        scaled_norms = self._scratch(handler, 'scaled_norms', (rows, 1))
        pending, exponent = large.copy(), 0
        while pending.any() and exponent <= 4096:
            source = matrix
            if exponent:
                handler.mult_st(math.ldexp(1.0, -exponent), matrix, scaled)
                source = scaled
            handler.clip_t(source, -bound, bound, squares)
            # bound**2 for each value the clip changed, 0 for the others
            handler.subtract_tt(source, squares, scaled)
            handler.sign_t(scaled, scaled)
            handler.mult_st(bound, scaled, scaled)
            handler.mult_tt(scaled, scaled, scaled)
            handler.sum_t(scaled, 1, clipped)
            unclipped = handler.get_numpy_copy(clipped)[:, 0] == 0
            if not exponent:  # these rows' sums of squares in the norms are exact
                pending &= ~unclipped
                exponent = 1
                continue
            handler.mult_tt(squares, squares, squares)
            handler.sum_t(squares, 1, scaled_norms)
            handler.sqrt_t(scaled_norms, scaled_norms)
            found = handler.get_numpy_copy(scaled_norms)[:, 0].astype(np.float64)
            for row in np.flatnonzero(pending & unclipped):
                pending[row] = False
                scaled_norm = float(found[row])
                if math.ldexp(scaled_norm, exponent) <= limit:
                    post[row] = 1.0
                    continue
                factor = math.ldexp(limit / scaled_norm, -exponent)
                if factor >= tiny:
                    post[row] = factor
                else:  # a subnormal factor would lose precision: 2 steps
                    pre[row] = math.ldexp(1.0, -exponent)
                    post[row] = limit / scaled_norm
            exponent = 2 * exponent or 1
        if np.isnan(post).all():
            return None
        return pre, post

    def _fix_factors(self, handler, matrix, factors, pre, post) -> None:
        """Put ``post`` into ``factors`` where it is not NaN; apply ``pre``.

        The other factors are read and written back unchanged (a round
        trip through float64 is exact), so their rows stay bit for bit the
        same.
        """
        rows = matrix.shape[0]
        host = handler.get_numpy_copy(factors)[:, 0].astype(np.float64)
        fixed = ~np.isnan(post)
        host[fixed] = post[fixed]
        handler.set_from_numpy(factors, host.reshape(rows, 1))
        if (pre != 1.0).any():
            steps = self._scratch(handler, 'pre_factors', (rows, 1))
            handler.set_from_numpy(steps, pre.reshape(rows, 1))
            handler.mult_mv(matrix, steps, matrix)


def _square_bound(dtype, columns: int) -> float:
    """The largest power of two ``b`` with ``columns * b**2 <= max(dtype)``.

    Values clipped to ``+-b`` have finite squares and a finite sum of
    squares over ``columns`` of them.
    """
    _, exponent = math.frexp(float(np.finfo(dtype).max) / max(columns, 1))
    return math.ldexp(1.0, (exponent - 1) // 2)


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
            NetworkValidationError: a mask value is beyond the range of the
                handler's dtype.
        """
        shape = tuple(view.shape)
        device_mask = self._device_copy(
            handler, 'mask', shape, lambda: self._broadcast_mask(shape)
        )
        handler.mult_tt(view, device_mask, view)

    def before_training(self, handler, view) -> None:
        """Check the mask against the view's shape and the handler's dtype."""
        self._check_array_fits(handler, 'mask', self._broadcast_mask(tuple(view.shape)))

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
            when the modifier is first applied. Values taken so are taken
            again at the start of each training (after ``net.initialize``
            a second ``train`` keeps the new values); given weights are
            kept as they are.

    Attributes:
        weights_taken: True once the modifier took ``weights`` from the
            view itself (described, so that a loaded network or a resumed
            run takes them again too).
    """

    __arguments__ = {
        'weights': Arg(Optional(NumericArray())),
        'weights_taken': Arg(Bool(), default=False, state=True, omit_default=True),
    }

    def __init__(self, weights=None):
        super().__init__()
        self.weights = None if weights is None else np.array(weights)
        self.weights_taken = False

    def __init_from_description__(self, description):
        super().__init_from_description__(description)
        if self.weights is not None:
            self.weights = np.array(self.weights)

    def before_training(self, handler, view) -> None:
        """Without given ``weights``, the view's values now become them.

        Before the first update, so the frozen values are those the
        network starts this training with (also when ``weights`` were
        taken by an earlier training); a run resumed from a checkpoint
        takes them again from its parameters, where they are still those
        values. Given weights are checked against the view's shape and
        the handler's dtype.
        """
        if self.weights is None or self.weights_taken:
            self._take(handler, view)
        else:
            self._check_weights(handler, tuple(view.shape))

    def _take(self, handler, view) -> None:
        self.weights = handler.get_numpy_copy(view)
        self.weights_taken = True
        # the device copy of earlier weights is stale
        self._buffer_cache(handler).pop(('weights', tuple(view.shape)), None)

    def _check_weights(self, handler, shape: tuple[int, ...]) -> None:
        if self.weights.shape != shape:
            raise ValidationError(
                f'{self!r}: weights of shape {self.weights.shape} do not fit '
                f'the view of shape {shape}'
            )
        self._check_array_fits(handler, 'weights', self.weights)

    def __call__(self, handler, view):
        """Overwrite ``view`` with the frozen weights.

        Without ``weights``, the view's values at the first call become them.

        Raises:
            ValidationError: the weights' shape differs from the view's.
            NetworkValidationError: a weight is beyond the range of the
                handler's dtype.
        """
        shape = tuple(view.shape)
        if self.weights is None:
            self._take(handler, view)
        if self.weights.shape != shape:
            raise ValidationError(
                f'{self!r}: weights of shape {self.weights.shape} do not fit '
                f'the view of shape {shape}'
            )
        frozen = self._device_copy(
            handler,
            'weights',
            shape,
            lambda: self.weights,
            check=not self.weights_taken,
        )
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
