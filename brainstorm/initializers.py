"""Initializers: objects that create the initial values of parameters.

An initializer is called with the shape of a parameter and returns a NumPy
array of that shape. All random numbers come from the initializer's own
``rnd`` (see :class:`brainstorm.randomness.Seedable`), which
:meth:`Network.initialize` reseeds for every parameter, so initialisation is
reproducible per seed.

Conventions for a parameter of shape ``shape``: ``n_out = shape[0]`` and
``fan_in = prod(shape[1:])``. An initializer that cannot fill a shape raises
:class:`brainstorm.utils.InitializationError`, which makes the network use the
``fallback`` initializer instead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Real

import numpy as np

from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    Choice,
    Instance,
    Int,
    NumericArray,
    Optional,
)
from brainstorm.arguments import Real as RealArg
from brainstorm.describable import Describable
from brainstorm.randomness import Seedable
from brainstorm.utils import (
    InitializationError,
    NetworkValidationError,
    ValidationError,
)

__all__ = [
    'Initializer',
    'ArrayInitializer',
    'Gaussian',
    'Uniform',
    'DenseSqrtFanIn',
    'DenseSqrtFanInOut',
    'EchoState',
    'Identity',
    'Orthogonal',
    'RandomWalk',
    'SparseInputs',
    'SparseOutputs',
    'LstmOptInit',
    'evaluate_initializer',
]


# ------------------------------------------------------------------ base ---


class Initializer(Seedable, Describable):
    """Base class of all initializers.

    Subclasses implement ``__call__``; they draw random numbers only from
    ``self.rnd``.
    """

    __argument_error__ = NetworkValidationError

    def __call__(self, shape: tuple[int, ...]) -> np.ndarray:
        """Return an array of the given shape.

        Raises:
            InitializationError: if this initializer cannot fill ``shape``.
        """
        raise NotImplementedError

    def _check_at_least_2d(self, shape: tuple[int, ...]) -> None:
        if len(shape) < 2:
            raise InitializationError(
                f'{type(self).__name__} needs a parameter with at least 2 '
                f'dimensions. Received: shape={tuple(shape)}'
            )

    def _check_2d(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 2:
            raise InitializationError(
                f'{type(self).__name__} needs a 2-D parameter. '
                f'Received: shape={tuple(shape)}'
            )

    def _check_square(self, shape: tuple[int, ...]) -> None:
        if len(shape) != 2 or shape[0] != shape[1]:
            raise InitializationError(
                f'{type(self).__name__} needs a square 2-D parameter. '
                f'Received: shape={tuple(shape)}'
            )


def _is_number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _check_number(
    owner: str, name: str, value, minimum: float | None = None, strict: bool = False
) -> None:
    """Raise a ValidationError unless ``value`` is a real number in range."""
    if not _is_number(value) or not math.isfinite(value):
        raise ValidationError(
            f'{owner}: {name} must be a finite number. Received: {name}={value!r}'
        )
    if minimum is not None:
        too_small = value <= minimum if strict else value < minimum
        if too_small:
            relation = '>' if strict else '>='
            raise ValidationError(
                f'{owner}: {name} must be {relation} {minimum}. '
                f'Received: {name}={value!r}'
            )


def _check_sub_initializer(owner: str, name: str, value) -> None:
    if not (isinstance(value, Initializer) or _is_number(value)):
        raise ValidationError(
            f'{owner}: {name} must be an Initializer or a '
            f'number. Received: {name}={value!r}'
        )


def _check_positive_int(owner: str, name: str, value) -> None:
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
        raise ValidationError(
            f'{owner}: {name} must be a positive int. Received: {name}={value!r}'
        )


# --------------------------------------------------------- initializers ---

#: An initializer or a number, where a sub-initializer goes.
_SUB_INITIALIZER = AnyOf(Instance(Initializer, example=lambda: Gaussian()), RealArg())
_SCALE = AnyOf(Choice('rel', 'tanh', 'sigmoid', 'linear'), RealArg())


class ArrayInitializer(Initializer):
    """Initialize with a given array.

    It describes itself as a plain (nested) list; a list found in an
    initializer description is turned back into an ArrayInitializer by
    :meth:`Network.initialize` (and by :func:`evaluate_initializer`).

    Args:
        array: the values (array-like); the parameter must have its shape.
    """

    __arguments__ = {'array': Arg(NumericArray())}

    def __init__(self, array):
        super().__init__()
        self.array = np.array(array)

    def __call__(self, shape):
        if self.array.shape != tuple(shape):
            raise InitializationError(
                f'ArrayInitializer: the array has shape {self.array.shape} '
                f'but the parameter has shape {tuple(shape)}'
            )
        return self.array.copy()

    def __describe__(self):
        return self.array.tolist()


class Gaussian(Initializer):
    """Normally distributed values with mean ``mean`` and deviation ``std``.

    Args:
        std: standard deviation (>= 0).
        mean: mean.
    """

    __arguments__ = {
        'std': Arg(RealArg(0), default=0.1),
        'mean': Arg(RealArg(), default=0.0),
    }

    def __init__(self, std: float = 0.1, mean: float = 0.0):
        super().__init__()
        _check_number('Gaussian', 'std', std, minimum=0)
        _check_number('Gaussian', 'mean', mean)
        self.std = std
        self.mean = mean

    def __call__(self, shape):
        return self.rnd.normal(self.mean, self.std, size=shape)


class Uniform(Initializer):
    """Uniformly distributed values in ``[low, high)``.

    Args:
        low: lower bound; with ``high=None`` the range is
            ``[-abs(low), abs(low))``.
        high: upper bound, must be greater than ``low``.
    """

    __arguments__ = {
        'low': Arg(RealArg(), default=0.1),
        'high': Arg(Optional(RealArg()), default=None),
    }

    def __init__(self, low: float = 0.1, high: float | None = None):
        super().__init__()
        _check_number('Uniform', 'low', low)
        if high is None:
            low, high = -abs(low), abs(low)
        else:
            _check_number('Uniform', 'high', high)
        if not low < high:
            raise ValidationError(
                f'Uniform: low must be smaller than high. '
                f'Received: low={low!r}, high={high!r}'
            )
        self.low = low
        self.high = high

    def __validate__(self) -> None:
        if self.high is None or not self.low < self.high:
            raise NetworkValidationError(
                'Uniform: low must be smaller than high. '
                f'Received: low={self.low!r}, high={self.high!r}'
            )

    def __call__(self, shape):
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


def _resolve_scale(owner: str, scale, table: dict) -> float:
    if isinstance(scale, str):
        if scale not in table:
            raise ValidationError(
                f'{owner}: scale must be a number or one of {sorted(table)}. '
                f'Received: scale={scale!r}'
            )
        return table[scale]
    _check_number(owner, 'scale', scale)
    return float(scale)


class DenseSqrtFanIn(Initializer):
    """Uniform values in ``(-1, 1)`` times ``scale / sqrt(fan_in)``.

    Args:
        scale: a number, or the name of the activation function that follows:
            ``'rel'`` (sqrt 6), ``'tanh'`` (sqrt 3), ``'sigmoid'`` (4 sqrt 3)
            or ``'linear'`` (1).
    """

    __arguments__ = {
        'scale': Arg(
            AnyOf(Choice('rel', 'tanh', 'sigmoid', 'linear'), RealArg()), default='rel'
        ),
    }

    def __init__(self, scale: str | float = 'rel'):
        super().__init__()
        _resolve_scale('DenseSqrtFanIn', scale, _FAN_IN_SCALES)
        self.scale = scale

    def __call__(self, shape):
        self._check_at_least_2d(shape)
        scale = _resolve_scale('DenseSqrtFanIn', self.scale, _FAN_IN_SCALES)
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
        'scale': Arg(
            AnyOf(Choice('rel', 'tanh', 'sigmoid', 'linear'), RealArg()), default='rel'
        ),
    }

    def __init__(self, scale: str | float = 'rel'):
        super().__init__()
        _resolve_scale('DenseSqrtFanInOut', scale, _FAN_IN_OUT_SCALES)
        self.scale = scale

    def __call__(self, shape):
        self._check_at_least_2d(shape)
        scale = _resolve_scale('DenseSqrtFanInOut', self.scale, _FAN_IN_OUT_SCALES)
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

    __arguments__ = {'spectral_radius': Arg(RealArg(0), default=1.0)}

    def __init__(self, spectral_radius: float = 1.0):
        super().__init__()
        _check_number(
            'EchoState', 'spectral_radius', spectral_radius, minimum=0, strict=True
        )
        self.spectral_radius = spectral_radius

    def __call__(self, shape):
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
        'scale': Arg(RealArg(), default=1.0),
        'std': Arg(RealArg(0), default=0.01),
        'enforce_square': Arg(Bool(), default=True),
    }

    def __init__(
        self, scale: float = 1.0, std: float = 0.01, enforce_square: bool = True
    ):
        super().__init__()
        _check_number('Identity', 'scale', scale)
        _check_number('Identity', 'std', std, minimum=0)
        self.scale = scale
        self.std = std
        self.enforce_square = enforce_square

    def __call__(self, shape):
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

    __arguments__ = {'scale': Arg(RealArg(), default=1.0)}

    def __init__(self, scale: float = 1.0):
        super().__init__()
        _check_number('Orthogonal', 'scale', scale)
        self.scale = scale

    def __call__(self, shape):
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
        'act_func': Arg(Choice('linear', 'rel'), default='linear'),
        'scale': Arg(Optional(RealArg()), default=None),
    }

    def __init__(self, act_func: str = 'linear', scale: float | None = None):
        super().__init__()
        if act_func not in ('linear', 'rel'):
            raise ValidationError(
                f"RandomWalk: act_func must be 'linear' or 'rel'. "
                f'Received: act_func={act_func!r}'
            )
        if scale is not None:
            _check_number('RandomWalk', 'scale', scale)
        self.act_func = act_func
        self.scale = scale

    def __call__(self, shape):
        self._check_square(shape)
        n = shape[1]
        if self.scale is not None:
            scale = self.scale
        elif self.act_func == 'linear':
            scale = math.exp(1 / (2 * n))
        else:
            scale = math.sqrt(2) * math.exp(1.2 / (max(n, 6) - 2.4))
        return scale * self.rnd.normal(0.0, 1.0, size=shape) / math.sqrt(n)


class SparseInputs(Initializer):
    """Sub-initializer values where each column keeps ``connections`` entries.

    For a parameter of shape ``(n_out, ...)`` each column (one input unit,
    all trailing axes flattened) keeps ``connections`` randomly chosen of its
    ``n_out`` entries; the others are zero.

    Args:
        sub_initializer: an Initializer or number giving the values.
        connections: non-zero entries per column (needs
            ``shape[0] >= connections``).
    """

    __arguments__ = {
        'sub_initializer': Arg(_SUB_INITIALIZER),
        'connections': Arg(Int(1), default=15),
    }

    def __init__(self, sub_initializer: Initializer | float, connections: int = 15):
        super().__init__()
        _check_sub_initializer('SparseInputs', 'sub_initializer', sub_initializer)
        _check_positive_int('SparseInputs', 'connections', connections)
        self.sub_initializer = sub_initializer
        self.connections = connections

    def __call__(self, shape):
        self._check_at_least_2d(shape)
        if shape[0] < self.connections:
            raise InitializationError(
                f'SparseInputs: shape[0] must be at least connections='
                f'{self.connections}. Received: shape={tuple(shape)}'
            )
        values = evaluate_initializer(
            self.sub_initializer, shape, seed=self.rnd.generate_seed()
        )
        matrix = values.reshape(shape[0], -1)
        keep = np.zeros(matrix.shape, dtype=bool)
        for column in range(matrix.shape[1]):
            rows = self.rnd.choice(shape[0], self.connections, replace=False)
            keep[rows, column] = True
        return np.where(keep, matrix, 0.0).reshape(shape)


class SparseOutputs(Initializer):
    """Sub-initializer values where each row keeps ``connections`` entries.

    For a parameter of shape ``(n_out, ...)`` each row (one output unit, all
    trailing axes flattened) keeps ``connections`` randomly chosen entries;
    the others are zero.

    Args:
        sub_initializer: an Initializer or number giving the values.
        connections: non-zero entries per row (needs
            ``prod(shape[1:]) >= connections``).
    """

    __arguments__ = {
        'sub_initializer': Arg(_SUB_INITIALIZER),
        'connections': Arg(Int(1), default=15),
    }

    def __init__(self, sub_initializer: Initializer | float, connections: int = 15):
        super().__init__()
        _check_sub_initializer('SparseOutputs', 'sub_initializer', sub_initializer)
        _check_positive_int('SparseOutputs', 'connections', connections)
        self.sub_initializer = sub_initializer
        self.connections = connections

    def __call__(self, shape):
        self._check_at_least_2d(shape)
        row_size = int(np.prod(shape[1:]))
        if row_size < self.connections:
            raise InitializationError(
                f'SparseOutputs: shape[1] must be at least connections='
                f'{self.connections}. Received: shape={tuple(shape)}'
            )
        values = evaluate_initializer(
            self.sub_initializer, shape, seed=self.rnd.generate_seed()
        )
        matrix = values.reshape(shape[0], row_size)
        keep = np.zeros(matrix.shape, dtype=bool)
        for row in range(matrix.shape[0]):
            columns = self.rnd.choice(row_size, self.connections, replace=False)
            keep[row, columns] = True
        return np.where(keep, matrix, 0.0).reshape(shape)


class LstmOptInit(Initializer):
    """Separate initializers for the input block and the three gates of an
    LSTM.

    On an :func:`~brainstorm.layers.Lstm` layer (which keeps one parameter
    per gate: ``Wz Wi Wf Wo``, ``Rz ...``, ``bz ...`` and the peepholes
    ``pi pf po``) each parameter gets the initializer of its gate, e.g.
    ``net.initialize({'Lstm': LstmOptInit(Gaussian(0.1), 0, 1.0, 0)})``
    sets the forget-gate biases (and weights) to 1. A parameter of an Lstm
    that belongs to no gate is an error. On any other parameter (a layer
    that stacks the four gates) the first axis is split into four equal
    row blocks in the order input block (Z), input gate (I), forget gate
    (F), output gate (O).

    Args:
        input_block: Initializer or number for the input block rows.
        input_gate: Initializer or number for the input gate rows.
        forget_gate: Initializer or number for the forget gate rows.
        output_gate: Initializer or number for the output gate rows.
    """

    __arguments__ = {
        'input_block': Arg(_SUB_INITIALIZER, default=0.0),
        'input_gate': Arg(_SUB_INITIALIZER, default=0.0),
        'forget_gate': Arg(_SUB_INITIALIZER, default=0.0),
        'output_gate': Arg(_SUB_INITIALIZER, default=0.0),
    }

    def __init__(
        self,
        input_block: Initializer | float = 0.0,
        input_gate: Initializer | float = 0.0,
        forget_gate: Initializer | float = 0.0,
        output_gate: Initializer | float = 0.0,
    ):
        super().__init__()
        for name, value in [
            ('input_block', input_block),
            ('input_gate', input_gate),
            ('forget_gate', forget_gate),
            ('output_gate', output_gate),
        ]:
            _check_sub_initializer('LstmOptInit', name, value)
        self.input_block = input_block
        self.input_gate = input_gate
        self.forget_gate = forget_gate
        self.output_gate = output_gate

    def select_for(self, layer, parameter_name: str):
        """The initializer to use for ``parameter_name`` of ``layer``.

        Args:
            layer: the layer implementation whose parameter is initialized.
            parameter_name: the parameter's name.

        Returns:
            The gate's initializer on an Lstm (a layer with
            ``has_lstm_gates``), else this initializer.

        Raises:
            ValidationError: for an Lstm parameter that belongs to no gate.
        """
        if not getattr(layer, 'has_lstm_gates', False):
            return self
        gates = {
            'z': self.input_block,
            'i': self.input_gate,
            'f': self.forget_gate,
            'o': self.output_gate,
        }
        if len(parameter_name) == 2 and parameter_name[1] in gates:
            return gates[parameter_name[1]]
        raise ValidationError(
            f"LstmOptInit: parameter '{parameter_name}' of "
            f"{type(layer).__name__} '{layer.name}' belongs to no gate (gate "
            'parameters end in z, i, f or o). Use another initializer for '
            'it.'
        )

    def __call__(self, shape):
        if len(shape) < 1 or shape[0] % 4 != 0:
            raise InitializationError(
                f'LstmOptInit: shape[0] must be divisible by 4. '
                f'Received: shape={tuple(shape)}'
            )
        n = shape[0] // 4
        block_shape = (n,) + tuple(shape[1:])
        blocks = [
            evaluate_initializer(init, block_shape, seed=self.rnd.generate_seed())
            for init in (
                self.input_block,
                self.input_gate,
                self.forget_gate,
                self.output_gate,
            )
        ]
        return np.concatenate(blocks, axis=0)


# ------------------------------------------------------------ evaluation ---


def evaluate_initializer(
    initializer, shape: Sequence[int], fallback=None, seed: int | None = None
) -> np.ndarray:
    """Create the values for a parameter of shape ``shape``.

    Args:
        initializer: an :class:`Initializer`, a number (a constant array), or
            a list/array (used as :class:`ArrayInitializer`).
        shape: shape of the parameter.
        fallback: used (with the same seed) if ``initializer`` raises
            :class:`InitializationError`.
        seed: if given, the initializer's ``rnd`` is reseeded with it first.

    Returns:
        A NumPy array of shape ``shape``.

    Raises:
        InitializationError: if the initializer fails and there is no
            fallback (or the fallback fails too).
        TypeError: if ``initializer`` is of an unsupported type.
    """
    shape = tuple(int(s) for s in shape)
    if isinstance(initializer, (list, np.ndarray)):
        initializer = ArrayInitializer(initializer)
    if isinstance(initializer, Initializer):
        if seed is not None:
            initializer.rnd.set_seed(seed)
        try:
            result = np.asarray(initializer(shape))
        except InitializationError:
            if fallback is None:
                raise
            return evaluate_initializer(fallback, shape, seed=seed)
        assert result.shape == shape, (type(initializer).__name__, result.shape, shape)
        return result
    if _is_number(initializer):
        return np.full(shape, initializer, dtype=np.float64)
    raise TypeError(
        f'Cannot initialize with {initializer!r} of type '
        f'{type(initializer).__name__}: expected an Initializer, '
        'a number, a list or a NumPy array'
    )
