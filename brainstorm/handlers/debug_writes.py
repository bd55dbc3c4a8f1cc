"""Blocks in which the debug handler refuses writes into given arrays.

:class:`~brainstorm.handlers.debug_handler.DebugHandler` has them. The
layer-test harness runs a layer's passes in such a block, so that a pass
writing into its inputs or parameters is named even where the values it
writes are those already there.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

import numpy as np

from brainstorm.handlers.debug_array import (
    DebugArray,
    DebugHandlerWriteError,
    _unwrap,
)

__all__ = ['ReadOnlyBlocks', 'DebugHandlerWriteError']


class ReadOnlyBlocks:
    """The :meth:`read_only` blocks of a checking handler (a mixin).

    The handler calls ``_expect_writable`` before each op.
    """

    #: ``(arrays, during)`` while :meth:`read_only` runs: label -> wrapped
    #: array that no op may write into, and what runs meanwhile
    _read_only: tuple[dict, str] | None = None

    @contextlib.contextmanager
    def read_only(
        self, arrays: Mapping[str, DebugArray], during: str
    ) -> Iterator[None]:
        """Refuse every op that writes into ``arrays`` while the block runs.

        Args:
            arrays: a label for the message (``"the input 'default'"``)
                -> an array of this handler.
            during: what runs in the block, for the message.

        Raises:
            DebugHandlerWriteError: in the block, from an op whose
                written operand shares memory with one of ``arrays``, naming
                the op, the operand and the array's label.
        """
        previous = self._read_only
        self._read_only = (
            {label: _unwrap(array) for label, array in arrays.items()},
            during,
        )
        try:
            yield
        finally:
            self._read_only = previous

    def _expect_writable(self, op, args: dict) -> None:
        """Raise if ``op`` would write into an array of the current block."""
        if self._read_only is None:
            return
        arrays, during = self._read_only
        for name in op.writes:
            value = args.get(name)
            if not isinstance(value, DebugArray) or not isinstance(
                value.array, np.ndarray
            ):
                continue
            for label, array in arrays.items():
                if isinstance(array, np.ndarray) and np.shares_memory(
                    value.array, array
                ):
                    raise DebugHandlerWriteError(
                        f"DebugHandler.{op.name}: argument '{name}' writes "
                        f'into {label}, which must stay unchanged during '
                        f'{during}.',
                        op.name,
                        name,
                        label,
                    )
