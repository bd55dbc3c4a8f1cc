"""Initializers that draw every value: distributions and matrix structures.

Conventions for a parameter of shape ``shape``: ``n_out = shape[0]`` and
``fan_in = prod(shape[1:])``.
"""

from __future__ import annotations

import math
import sys

import numpy as np

from brainstorm.arguments import AnyOf, Arg, Bool, Choice, Optional
from brainstorm.arguments import Real as RealArg
from brainstorm.errors import NetworkValidationError
from brainstorm.initializers.base import Initializer

__all__ = [
    'Gaussian',
    'Uniform',
    'DenseSqrtFanIn',
    'DenseSqrtFanInOut',
    'EchoState',
    'Identity',
    'Orthogonal',
    'RandomWalk',
]

_SCALE = AnyOf(Choice('rel', 'tanh', 'sigmoid', 'linear'), RealArg())


class Gaussian(Initializer):
    """Normally distributed values with mean ``mean`` and deviation ``std``.

    Args:
        std: standard deviation (>= 0).
        mean: mean.
    """

    __arguments__ = {
        'std': Arg(RealArg(0)),
        'mean': Arg(RealArg()),
    }

    def __init__(self, std: float = 0.1, mean: float = 0.0):
        super().__init__()
        self.std = std
        self.mean = mean

    def __call__(self, shape):
        """Draw normal values of ``shape``."""
        return self.rnd.normal(self.mean, self.std, size=shape)


class Uniform(Initializer):
    """Uniformly distributed values in ``[low, high)``.

    Args:
        low: lower bound; with ``high=None`` the range is
            ``[-abs(low), abs(low))``.
        high: upper bound, must be greater than ``low``; ``high - low``
            must be a finite float.
    """

    __arguments__ = {
        'low': Arg(RealArg()),
        'high': Arg(Optional(RealArg())),
    }

    def __init__(self, low: float = 0.1, high: float | None = None):
        super().__init__()
        if high is None:
            low, high = -abs(low), abs(low)
        # low < high is checked by __validate__
        self.low = low
        self.high = high

    def __validate__(self) -> None:
        if self.high is None or not self.low < self.high:
            raise NetworkValidationError(
                'Uniform: low must be smaller than high. '
                f'Received: low={self.low!r}, high={self.high!r}'
            )
        if not math.isfinite(self.high - self.low):
            raise NetworkValidationError(
                'Uniform: the range high - low must be a finite float (at '
                f'most {sys.float_info.max:.6g}). Received: low={self.low!r}, '
                f'high={self.high!r}'
            )

    def __call__(self, shape):
        """Draw uniform values of ``shape`` in ``[low, high)``."""
        return self.rnd.uniform(self.low, self.high, size=shape)


_FAN_IN_SCALES = {
    'rel': math.sqrt(6),
    'tanh': math.sqrt(3),
    'sigmoid': 4 * math.sqrt(3),
    'linear': 1.0,
}
_FAN_IN_OUT_SCALES = {
    'rel': math.sqrt(12),
    'tanh': math.sqrt(6),
    'sigmoid': 4 * math.sqrt(6),
    'linear': 1.0,
}


def _resolve_scale(scale, table: dict) -> float:
    """The factor of ``scale``: a number, or an activation's name in ``table``."""
    return table[scale] if isinstance(scale, str) else float(scale)


class DenseSqrtFanIn(Initializer):
    """Uniform values in ``(-1, 1)`` times ``scale / sqrt(fan_in)``.

    Args:
        scale: a number, or the name of the activation function that follows:
            ``'rel'`` (sqrt 6), ``'tanh'`` (sqrt 3), ``'sigmoid'`` (4 sqrt 3)
            or ``'linear'`` (1).
    """

    __arguments__ = {
        'scale': Arg(_SCALE),
    }

    def __init__(self, scale: str | float = 'rel'):
        super().__init__()
        self.scale = scale

    def __call__(self, shape):
        """Draw scaled uniform values; ``shape`` needs at least 2 dimensions."""
        self._check_at_least_2d(shape)
        scale = _resolve_scale(self.scale, _FAN_IN_SCALES)
        fan_in = int(np.prod(shape[1:]))
        return self.rnd.uniform(-1, 1, size=shape) * scale / math.sqrt(fan_in)


class DenseSqrtFanInOut(Initializer):
    """Uniform values in ``(-1, 1)`` times ``scale / sqrt(n_out + fan_in)``.

    Args:
        scale: a number, or the name of the activation function that follows:
            ``'rel'`` (sqrt 12), ``'tanh'`` (sqrt 6), ``'sigmoid'`` (4 sqrt 6)
            or ``'linear'`` (1).
    """

    __arguments__ = {
        'scale': Arg(_SCALE),
    }

    def __init__(self, scale: str | float = 'rel'):
        super().__init__()
        self.scale = scale

    def __call__(self, shape):
        """Draw scaled uniform values; ``shape`` needs at least 2 dimensions."""
        self._check_at_least_2d(shape)
        scale = _resolve_scale(self.scale, _FAN_IN_OUT_SCALES)
        n_out = shape[0]
        fan_in = int(np.prod(shape[1:]))
        return self.rnd.uniform(-1, 1, size=shape) * scale / math.sqrt(n_out + fan_in)


class EchoState(Initializer):
    """A square matrix with the given spectral radius (echo state networks).

    Values are drawn from ``U(-0.5, 0.5)`` and rescaled so that the largest
    absolute eigenvalue equals ``spectral_radius``.

    Args:
        spectral_radius: the desired spectral radius (> 0).
    """

    __arguments__ = {'spectral_radius': Arg(RealArg(0, include_low=False))}

    def __init__(self, spectral_radius: float = 1.0):
        super().__init__()
        self.spectral_radius = spectral_radius

    def __call__(self, shape):
        """A matrix of ``shape`` (square) with the spectral radius wanted."""
        self._check_square(shape)
        matrix = self.rnd.uniform(-0.5, 0.5, size=shape)
        radius = np.max(np.abs(np.linalg.eigvals(matrix)))
        return matrix * (self.spectral_radius / radius)


class Identity(Initializer):
    """``scale`` times the identity matrix plus Gaussian noise.

    Args:
        scale: factor of the identity.
        std: standard deviation of the added noise (>= 0).
        enforce_square: if True, non-square shapes raise InitializationError;
            otherwise the ones sit on the main diagonal.
    """

    __arguments__ = {
        'scale': Arg(RealArg()),
        'std': Arg(RealArg(0)),
        'enforce_square': Arg(Bool()),
    }

    def __init__(
        self, scale: float = 1.0, std: float = 0.01, enforce_square: bool = True
    ):
        super().__init__()
        self.scale = scale
        self.std = std
        self.enforce_square = enforce_square

    def __call__(self, shape):
        """The scaled noisy identity of ``shape`` (square if enforced)."""
        if self.enforce_square:
            self._check_square(shape)
        else:
            self._check_2d(shape)
        return self.scale * np.eye(*shape) + self.rnd.normal(0.0, self.std, size=shape)


class Orthogonal(Initializer):
    """``scale`` times a random (semi-)orthogonal matrix.

    The matrix is the orthogonal factor of the SVD of a Gaussian matrix: its
    rows (or columns, whichever are fewer) are orthonormal.

    Args:
        scale: factor applied to the orthogonal matrix.
    """

    __arguments__ = {'scale': Arg(RealArg())}

    def __init__(self, scale: float = 1.0):
        super().__init__()
        self.scale = scale

    def __call__(self, shape):
        """A scaled (semi-)orthogonal matrix of ``shape`` (2-D)."""
        self._check_2d(shape)
        gaussian = self.rnd.normal(0.0, 1.0, size=shape)
        u, _, vt = np.linalg.svd(gaussian, full_matrices=False)
        q = u if u.shape == tuple(shape) else vt
        return self.scale * q


class RandomWalk(Initializer):
    """Random-walk initialisation for deep networks (Sussillo & Abbott, 2014).

    Values are ``scale * N(0, 1) / sqrt(N)`` for a square ``(N, N)`` matrix.
    The default scale depends on the activation function: ``exp(1/(2N))``
    for ``'linear'`` and ``sqrt(2) * exp(1.2 / (max(N, 6) - 2.4))`` for
    ``'rel'``.

    Args:
        act_func: ``'linear'`` or ``'rel'``.
        scale: overrides the default scale if given.
    """

    __arguments__ = {
        'act_func': Arg(Choice('linear', 'rel')),
        'scale': Arg(Optional(RealArg())),
    }

    def __init__(self, act_func: str = 'linear', scale: float | None = None):
        super().__init__()
        self.act_func = act_func
        self.scale = scale

    def __call__(self, shape):
        """The scaled Gaussian matrix of ``shape`` (square)."""
        self._check_square(shape)
        n = shape[1]
        if self.scale is not None:
            scale = self.scale
        elif self.act_func == 'linear':
            scale = math.exp(1 / (2 * n))
        else:
            scale = math.sqrt(2) * math.exp(1.2 / (max(n, 6) - 2.4))
        return scale * self.rnd.normal(0.0, 1.0, size=shape) / math.sqrt(n)
