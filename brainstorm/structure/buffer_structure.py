"""Shape templates (what a layer accepts) and buffer structures (what it gets).

A shape starts with ``('T', 'B')`` for time-sized buffers, ``('B',)`` for
batch-sized ones, or directly with the feature dimensions for constant-size
buffers such as parameters.
"""

from __future__ import annotations

import numpy as np

from brainstorm.errors import (
    StructureValidationError,
    ValidationError,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.shapes import product

__all__ = ['StructureTemplate', 'BufferStructure', 'combine_buffer_structures']

BUFFER_TYPE_NAMES = ('constant', 'batch-sized', 'time-sized')

#: The most elements the feature dimensions of one buffer may hold: the
#: elements of 8-byte floats whose bytes NumPy can still index (``intp``).
#: A bigger buffer could never be allocated; its size would wrap around in
#: NumPy's int64 arithmetic instead of failing.
MAX_FEATURE_SIZE = int(np.iinfo(np.intp).max) // 8


def _leading_dims(shape: tuple) -> int:
    if len(shape) >= 2 and shape[0] == 'T' and shape[1] == 'B':
        return 2
    if len(shape) >= 1 and shape[0] == 'B':
        return 1
    return 0


def _check_common(kind: str, shape: tuple, context_size) -> int:
    if not shape:
        raise StructureValidationError(f'{kind} needs at least one entry. Received: ()')
    lead = _leading_dims(shape)
    for i, entry in enumerate(shape[lead:]):
        if entry in ('T', 'B'):
            raise StructureValidationError(
                f"{kind}{shape}: '{entry}' is only allowed as leading "
                f"('T', 'B') or a leading 'B'. Received it at position "
                f'{i + lead}.'
            )
    if (
        not isinstance(context_size, (int, np.integer))
        or isinstance(context_size, bool)
        or context_size < 0
    ):
        raise StructureValidationError(
            f'{kind}{shape}: context_size must be an int >= 0. '
            f'Received: context_size={context_size!r}'
        )
    if context_size and lead != 2:
        raise StructureValidationError(
            f'{kind}{shape}: context_size is only allowed for time-sized '
            f"shapes starting with ('T', 'B'). Received: "
            f'context_size={context_size}'
        )
    return lead


class StructureTemplate:
    """A pattern of acceptable buffer shapes.

    Entries: ``'T'``, ``'B'`` (leading only), ints, ``'F'`` (any int) and
    ``'...'`` (any number >= 1 of feature dimensions).

    Example:
        ``StructureTemplate('T', 'B', '...')`` accepts any time-sized buffer.
    """

    def __init__(self, *shape, context_size: int = 0, is_backward_only: bool = False):
        self.shape = tuple(shape)
        lead = _check_common('StructureTemplate', self.shape, context_size)
        features = self.shape[lead:]
        if not features:
            # it would match no buffer (each has a feature dimension)
            raise StructureValidationError(
                f'StructureTemplate{self.shape} needs at least one feature entry '
                "after 'T' and 'B': an int, 'F' or '...' (e.g. "
                "StructureTemplate('T', 'B', '...') for any time-sized buffer)."
            )
        if '...' in features and len(features) != 1:
            raise StructureValidationError(
                f"StructureTemplate{self.shape}: '...' must be the only feature entry."
            )
        if 'F' in features and any(f != 'F' for f in features):
            raise StructureValidationError(
                f"StructureTemplate{self.shape}: with 'F' all feature entries "
                "must be 'F'."
            )
        if not ('...' in features or 'F' in features):
            for f in features:
                if not isinstance(f, (int, np.integer)) or isinstance(f, bool) or f < 0:
                    raise StructureValidationError(
                        f'StructureTemplate{self.shape}: feature entries must '
                        f"be ints >= 0, 'F' or '...'. Received: {f!r}"
                    )
        self.context_size = int(context_size)
        self.is_backward_only = bool(is_backward_only)
        self.first_feature_dim = lead
        self.feature_shape = features

    def matches(self, structure: BufferStructure) -> bool:
        """Whether ``structure`` fits this template.

        The template ``('...',)`` alone accepts every buffer, of any type.
        """
        shape = structure.shape
        if self.shape == ('...',):
            return True
        lead = self.first_feature_dim
        if _leading_dims(shape) != lead or shape[:lead] != self.shape[:lead]:
            return False
        features = shape[lead:]
        if self.feature_shape == ('...',):
            return len(features) >= 1
        if len(features) != len(self.feature_shape):
            return False
        return all(t == 'F' or t == f for t, f in zip(self.feature_shape, features))

    def __repr__(self):
        return f'StructureTemplate{self.shape}'


class BufferStructure:
    """The shape of one buffer, with ``'T'``/``'B'`` placeholders.

    Args:
        *shape: e.g. ``('T', 'B', 5)``, ``('B', 10)`` or ``(4, 5)``.
        context_size: extra time steps at the end (time-sized only).
        is_backward_only: whether it is needed only for the backward pass.
    """

    def __init__(self, *shape, context_size: int = 0, is_backward_only: bool = False):
        self.shape = tuple(int(s) if isinstance(s, np.integer) else s for s in shape)
        lead = _check_common('BufferStructure', self.shape, context_size)
        features = self.shape[lead:]
        if not features:
            raise StructureValidationError(
                f'BufferStructure{self.shape} needs at least one feature dimension.'
            )
        for f in features:
            if not isinstance(f, int) or isinstance(f, bool) or f < 0:
                raise StructureValidationError(
                    f'BufferStructure{self.shape}: feature dimensions must be '
                    f'ints >= 0. Received: {f!r}'
                )
        self.context_size = int(context_size)
        self.is_backward_only = bool(is_backward_only)
        self.buffer_type = lead
        self.first_feature_dim = lead
        self.feature_shape = features
        self.feature_size = product(features)
        if self.feature_size > MAX_FEATURE_SIZE:
            raise StructureValidationError(
                f'BufferStructure{self.shape}: the feature dimensions must hold '
                f'at most {MAX_FEATURE_SIZE} elements (what can be allocated '
                f'and indexed). Received: {features} ({self.feature_size} '
                'elements)'
            )
        self.scaling_shape = self.shape[:lead]
        self.nr_dims = len(self.shape)

    @property
    def scales_with_time(self) -> bool:
        """Whether the buffer has a time axis (buffer type 2)."""
        return self.buffer_type == 2

    @property
    def scales_with_batch_size(self) -> bool:
        """Whether the buffer has a batch axis (buffer type 1 or 2)."""
        return self.buffer_type >= 1

    def get_shape(self, time_size: int, batch_size: int) -> tuple:
        """The concrete shape for the given sequence length and batch size."""
        if self.buffer_type == 2:
            return (time_size + self.context_size, batch_size) + self.feature_shape
        if self.buffer_type == 1:
            return (batch_size,) + self.feature_shape
        return self.feature_shape

    def to_json(self, i: int) -> dict:
        """The array node of a layout, without its ``@slice``."""
        node = {'@type': 'array', '@index': i, '@shape': self.shape}
        if self.context_size:
            node['@context_size'] = self.context_size
        if self.is_backward_only:
            node['@is_backward_only'] = True
        return node

    @classmethod
    def from_layout(cls, node: dict) -> BufferStructure:
        """The structure described by an array node of a layout."""
        return cls(
            *node['@shape'],
            context_size=node.get('@context_size', 0),
            is_backward_only=node.get('@is_backward_only', False),
        )

    def __eq__(self, other):
        return isinstance(other, BufferStructure) and self.shape == other.shape

    def __hash__(self):
        return hash(self.shape)

    def __repr__(self):
        extra = f', context_size={self.context_size}' if self.context_size else ''
        return f'BufferStructure{self.shape}'[:-1] + extra + ')'


def joins_flat_on_last_axis(structures) -> bool:
    """Whether laying ``structures`` out one after another joins them on the last axis.

    A network places buffers that one input (or one group) sees side by
    side on the feature axis of its memory, each as one flat block. That
    is their concatenation along the last feature axis only if each has
    no other feature dimension but 1s (``('T', 'B', 5)``,
    ``('B', 1, 3)``), or if there is just one: two image-like buffers
    ``('T', 'B', 4, 4, 2)`` and ``('T', 'B', 4, 4, 3)`` laid out so would be
    read as ``('T', 'B', 4, 4, 5)`` with their pixels scrambled.
    """
    structures = list(structures)
    return len(structures) <= 1 or all(
        product(s.feature_shape[:-1]) == 1 for s in structures
    )


def combine_buffer_structures(structures) -> BufferStructure:
    """Concatenate buffer structures along their last feature axis.

    This is the shape of the concatenation only; a network refuses to
    feed several buffers with other feature dimensions than the last into
    one input (see ``joins_flat_on_last_axis``).

    Raises:
        StructureValidationError: if the structures differ in buffer type,
            rank, or any feature dimension but the last.
    """
    structures = list(structures)
    if not structures:
        return BufferStructure(0)
    first = structures[0]
    for s in structures[1:]:
        if s.buffer_type != first.buffer_type:
            raise StructureValidationError(
                f'Cannot concatenate {BUFFER_TYPE_NAMES[first.buffer_type]} '
                f'{first.shape} with {BUFFER_TYPE_NAMES[s.buffer_type]} '
                f'{s.shape}: all must have the same buffer type.'
            )
        if s.nr_dims != first.nr_dims:
            raise StructureValidationError(
                f'Cannot concatenate shapes of different rank: {first.shape} '
                f'and {s.shape}.'
            )
        if s.feature_shape[:-1] != first.feature_shape[:-1]:
            raise StructureValidationError(
                f'Cannot concatenate {first.shape} and {s.shape} along the '
                'last axis: the other feature dimensions differ.'
            )
    last = sum(s.feature_shape[-1] for s in structures)
    return BufferStructure(*(first.shape[:-1] + (last,)))
