"""Reproducible random numbers: seeds flow from ``global_rnd`` downwards."""

from __future__ import annotations

import numpy as np

from brainstorm.arguments import SEED, Arg, Optional
from brainstorm.describable import Describable
from brainstorm.errors import ValidationError

__all__ = ['RandomState', 'Seedable', 'global_rnd']


def _checked_seed(seed) -> int:
    """``seed`` as an int, if it is one NumPy accepts (in ``[0, 2**32 - 1]``).

    Raises:
        ValidationError: for anything else (floats, strings, bools, ints out
            of range), which NumPy would truncate, convert or refuse with
            its own message.
    """
    try:
        return SEED.normalize(seed)
    except ValueError:
        raise ValidationError(
            f'RandomState: seed must be {SEED.expected}. Received: seed={seed!r}'
        ) from None


class RandomState(np.random.RandomState):
    """A NumPy ``RandomState`` that remembers its seed and makes child seeds.

    Args:
        seed: an int in ``[0, 2**32 - 1]`` (the seeds it makes itself lie in
            ``seed_range``); drawn from :data:`global_rnd` if None.

    Raises:
        ValidationError: for a seed that is no such int.
    """

    seed_range = (0, 1000000000)
    #: counts the seedings of this state; handlers compare it to redraw
    #: their first-use random states after ``global_rnd.set_seed``
    seedings = 0

    def __init__(self, seed: int | None = None):
        if seed is None:
            seed = global_rnd.generate_seed()
        self._seed = _checked_seed(seed)
        super().__init__(self._seed)

    # narrower than NumPy's seed(): brainstorm seeds are single ints
    def seed(self, seed: int | None = None) -> None:  # type: ignore[override]
        """Reseed (a fresh seed from :data:`global_rnd` if ``seed`` is None)."""
        if seed is None:
            seed = global_rnd.generate_seed()
        self.set_seed(seed)

    def set_seed(self, seed: int) -> None:
        """Reseed with ``seed``.

        Raises:
            ValidationError: for a seed that is not an int in
                ``[0, 2**32 - 1]`` (the state is left as it was).
        """
        self._seed = _checked_seed(seed)
        super().seed(self._seed)
        self.seedings += 1

    def get_seed(self) -> int:
        """The seed this state was last seeded with."""
        return self._seed

    def reset(self) -> None:
        """Go back to the state right after the last seeding."""
        super().seed(self._seed)

    def generate_seed(self) -> int:
        """Draw a new seed from this state."""
        return int(self.randint(*self.seed_range))

    def create_random_state(self, seed: int | None = None) -> RandomState:
        """A new RandomState seeded with ``seed`` or a seed drawn from this one."""
        if seed is None:
            seed = self.generate_seed()
        return RandomState(seed)

    def __reduce__(self):
        return _restore_random_state, (self._seed, self.get_state())


def _restore_random_state(seed, state):
    rnd = RandomState(seed)
    rnd.set_state(state)
    return rnd


class Seedable(Describable):
    """Base class of objects owning a random state ``self.rnd``.

    The random state is not described; a recreated object gets a fresh one.
    """

    __arguments__ = {
        'seed': Arg(Optional(SEED), init_only=True),
    }

    __undescribed__: set | dict = {'rnd'}

    def __init__(self, seed: int | None = None):
        self.rnd = RandomState(seed)

    def __init_from_description__(self, description):
        self.rnd = RandomState()


global_rnd = RandomState(np.random.randint(*RandomState.seed_range))
