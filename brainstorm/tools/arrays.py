"""Preparing data arrays: shuffling and splitting them along the batch axis."""

from __future__ import annotations

import numpy as np

from brainstorm.arguments import (
    SEED,
    Arg,
    ListOf,
    NumericArray,
    Optional,
    Real,
    declare,
)
from brainstorm.errors import (
    NetworkValidationError,
    ValidationError,
)
from brainstorm.randomness import global_rnd


@declare(
    NetworkValidationError,
    seed=Arg(Optional(SEED), default=None),
    **{'*arrays': Arg(Optional(NumericArray(min_ndim=2, finite=False)), default=None)},
)
def shuffle_data(*arrays, seed: int | None = None) -> list:
    """Permute all arrays identically along axis 1 (the batch axis).

    Args:
        *arrays: arrays of shape ``(T, B, ...)`` with the same B; None
            entries pass through.
        seed: seed for the permutation (drawn from ``global_rnd`` if None).

    Returns:
        list of the shuffled arrays (new arrays), in order.
    """
    present = [a for a in arrays if a is not None]
    if not present:
        return list(arrays)
    sizes = {np.shape(a)[1] for a in present}
    if len(sizes) != 1:
        raise ValidationError(
            'shuffle_data: all arrays need the same size along axis 1. '
            f'Received shapes {[np.shape(a) for a in present]}'
        )
    rnd = global_rnd.create_random_state(seed)
    order = rnd.permutation(sizes.pop())
    return [None if a is None else np.asarray(a)[:, order] for a in arrays]


@declare(
    NetworkValidationError,
    ratios=Arg(ListOf(Real(0, include_low=False), nonempty=True), default=(9, 1)),
    **{'*arrays': Arg(Optional(NumericArray(min_ndim=2, finite=False)), default=None)},
)
def split(*arrays, ratios=(9, 1)) -> list:
    """Cut arrays along axis 1 in the given ratios.

    The cut points are the rounded cumulative fractions of the size.

    Args:
        *arrays: arrays of shape ``(T, B, ...)`` with the same B; None
            entries pass through.
        ratios: relative sizes of the parts (positive numbers).

    Returns:
        one list per part, holding the part of each array (views).

    Example:
        >>> train, valid = split(np.zeros((1, 10, 2)), ratios=(8, 2))
        >>> train[0].shape, valid[0].shape
        ((1, 8, 2), (1, 2, 2))
    """
    ratios = list(ratios)
    if not ratios or any(not isinstance(r, (int, float)) or r <= 0 for r in ratios):
        raise ValidationError(
            f'split: ratios must be positive numbers. Received: {ratios!r}'
        )
    present = [a for a in arrays if a is not None]
    if not present:
        return [list(arrays) for _ in ratios]
    sizes = {np.shape(a)[1] for a in present}
    if len(sizes) != 1:
        raise ValidationError(
            'split: all arrays need the same size along axis 1. Received '
            f'shapes {[np.shape(a) for a in present]}'
        )
    size = sizes.pop()
    bounds = np.round(np.cumsum(ratios) / np.sum(ratios) * size).astype(int)
    starts = [0] + list(bounds[:-1])
    return [
        [None if a is None else a[:, start:stop] for a in arrays]
        for start, stop in zip(starts, bounds)
    ]
