"""Initializers: objects that create the initial values of parameters.

An initializer is called with the shape of a parameter and returns a NumPy
array of that shape. All random numbers come from the initializer's own
``rnd`` (see :class:`brainstorm.randomness.Seedable`), which
:meth:`Network.initialize` reseeds for every parameter, so initialisation is
reproducible per seed.

Conventions for a parameter of shape ``shape``: ``n_out = shape[0]`` and
``fan_in = prod(shape[1:])``. An initializer that cannot fill a shape raises
:class:`brainstorm.errors.InitializationError`, which makes the network use the
``fallback`` initializer instead.
"""

import numpy as np

from brainstorm.describable import Describable
from brainstorm.errors import InitializationError
from brainstorm.initializers.base import (
    ArrayInitializer,
    Initializer,
    evaluate_initializer,
)
from brainstorm.initializers.composite import LstmOptInit, SparseInputs, SparseOutputs
from brainstorm.initializers.dense import (
    DenseSqrtFanIn,
    DenseSqrtFanInOut,
    EchoState,
    Gaussian,
    Identity,
    Orthogonal,
    RandomWalk,
    Uniform,
)
from brainstorm.randomness import Seedable

# np, Describable, Seedable and InitializationError: the names Brainstorm
# 0.5's module brainstorm/initializers.py imported stay importable from here
# (0.5's own tests import InitializationError so; tests/test_compat_05.py)
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
