"""What the trainer accepts as a hook, recognised by what a hook does.

The hooks live above training (in :mod:`brainstorm.hooks`), so the trainer
cannot name their base class. It accepts any object that behaves like one:
callable, with ``start(net, stepper, verbose, named_data_iters)``, a
``timescale`` of ``'epoch'`` or ``'update'`` and an int ``interval`` >= 1.
Every :class:`brainstorm.hooks.Hook` does.
"""

from __future__ import annotations

import abc
from typing import Any

from brainstorm.arguments import Check
from brainstorm.describable import create_from_description
from brainstorm.errors import DescriptionError

__all__ = ['HookLike', 'HookCheck', 'is_hook']


def _defines_call(klass: type) -> bool:
    return any('__call__' in vars(base) for base in klass.__mro__[:-1])


class HookLike(abc.ABC):
    """The kind of class the trainer takes hooks of (a structural check).

    ``issubclass(cls, HookLike)`` is True for every class that defines
    ``__call__`` and a callable ``start``, such as the subclasses of
    :class:`brainstorm.hooks.Hook`; nothing needs to inherit from it.
    """

    @abc.abstractmethod
    def start(self, net, stepper, verbose: bool, named_data_iters: dict) -> None:
        """Prepare the hook before training (the trainer calls it)."""

    @abc.abstractmethod
    def __call__(self, epoch_nr: int, update_nr: int, net, stepper, logs: dict):
        """Run the hook; return a value to log, or raise StopIteration."""

    @classmethod
    def __subclasshook__(cls, klass):
        if callable(getattr(klass, 'start', None)) and _defines_call(klass):
            return True
        return NotImplemented


def is_hook(value) -> bool:
    """Return whether ``value`` can be called by the trainer as a hook."""
    return (
        not isinstance(value, type)
        and isinstance(value, HookLike)
        and getattr(value, 'timescale', None) in ('epoch', 'update')
        and _is_interval(getattr(value, 'interval', None))
    )


def _is_interval(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 1


class HookCheck(Check):
    """A hook: a :class:`brainstorm.hooks.Hook` or an object that acts like one.

    Restoring requires a description whose ``@type`` names such a class.
    """

    expected = (
        'a hook (a brainstorm.hooks.Hook such as StopAfterEpoch(5): callable, '
        "with start(), timescale 'epoch' or 'update' and an int interval >= 1)"
    )
    invalid_examples = (5, 'x', None, HookLike, object())
    kind = HookLike

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it is a hook.

        Raises:
            TypeError: for anything else.
        """
        if not is_hook(value):
            raise TypeError
        return value

    def restore(self, described: object) -> object:
        """Recreate a hook from its description.

        Raises:
            DescriptionError: if ``described`` does not describe a hook.
        """
        if not (isinstance(described, dict) and '@type' in described):
            raise DescriptionError(
                f'expected a description of {self.expected} (a dict with '
                f"'@type'). Received: {str(described)[:80]}"
            )
        return create_from_description(described, expected=HookLike)
