"""The BufferManager: three flat buffers, carved into the layout's views."""

from __future__ import annotations

import bisect
import math
from typing import Any

import numpy as np

import brainstorm.handlers as handlers
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import default_handler  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.handlers.representable import (
    find_overflow,
    find_unrepresentable,
    narrows,
)
from brainstorm.shapes import reshape_view
from brainstorm.structure.buffer_structure import BufferStructure  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.structure.buffer_views import BufferView
from brainstorm.structure.layout import (
    get_buffer_type,
    sort_by_index_key,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)

__all__ = ['BufferManager']


class _ArraySpec:
    """One array node of the layout, flattened for fast carving."""

    __slots__ = (
        'path',
        'buffer_type',
        'start',
        'stop',
        'feature_shape',
        'context_size',
        'is_backward_only',
    )

    def __init__(self, path, node):
        self.path = path
        self.buffer_type = get_buffer_type(node['@shape'])
        self.start, self.stop = (int(x) for x in node['@slice'])
        self.feature_shape = tuple(
            int(x) for x in tuple(node['@shape'])[self.buffer_type :]
        )
        self.context_size = int(node.get('@context_size', 0))
        self.is_backward_only = bool(node.get('@is_backward_only', False))


def _blocks(spans, size: int) -> list:
    """The finest cut of ``[0, size)`` into blocks that no span crosses.

    A cut may fall at any span's start or stop that lies strictly inside no
    other span. Returns the ``(start, stop)`` of each block, in order; a
    single empty block for ``size == 0``.
    """
    points = sorted({0, size, *(p for span in spans for p in span)})
    # covered[i]: how many spans hold points[i] strictly inside them
    covered = [0] * (len(points) + 1)
    for a, b in spans:
        lo, hi = bisect.bisect_right(points, a), bisect.bisect_left(points, b)
        if lo < hi:
            covered[lo] += 1
            covered[hi] -= 1
    cuts, depth = [], 0
    for i, p in enumerate(points):
        depth += covered[i]
        if depth == 0:
            cuts.append(p)
    if len(cuts) < 2:
        return [(0, size)]
    return list(zip(cuts, cuts[1:]))


def _describe_value(value) -> str:
    """Type and, for arrays, shape of ``value``, for messages."""
    shape = getattr(value, 'shape', None)
    if shape is not None:
        return f'{type(value).__name__} of shape {tuple(shape)}'
    return f'{type(value).__name__} {value!r:.80}'


def _covered(ranges):
    """``f(a, b)``: is ``[a, b)`` inside the union of the ``(start, stop)`` ranges?"""
    merged: list = []
    for a, b in sorted((int(a), int(b)) for a, b in ranges):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    starts = [a for a, _ in merged]

    def covered(a: int, b: int) -> bool:
        k = bisect.bisect_right(starts, a) - 1
        return k >= 0 and merged[k][0] <= a and b <= merged[k][1]

    return covered


class BufferManager:
    """Allocates the three flat buffers of a layout and carves the views.

    Memory is allocated through the handler, one flat array per buffer type
    (constant, batch-sized, time-sized). :meth:`resize` adapts the batch- and
    time-sized ones to the current ``(T, B)``; they are reallocated only when
    they must grow. The constant buffer (parameters, gradients) never moves.

    The layout places every array on a range of its buffer type's feature
    axis. The batch- and time-sized flat buffers are cut along that axis
    into *blocks*, the smallest ranges that no array, input concatenation
    or group crosses (a view whose ``@slice`` crosses blocks gets no full
    buffer), and each block is stored contiguously: a block
    of features ``[a, b)`` is an array ``(B, b - a)`` or ``(T + C, B, b -
    a)`` starting at element ``B * a`` or ``(T + C) * B * a`` of the flat
    buffer. So an output that no input concatenates with others is one
    contiguous array (image operands of convolutions need no copies), and
    all backward-only memory is still one range of each flat buffer.

    Args:
        layout: the layout dict (see :mod:`brainstorm.structure.layout`).
        handler: the handler that allocates and computes.

    Attributes:
        views: the root :class:`BufferView` (``net.buffer``).
        sizes: feature size of each buffer type.
        forward_sizes: where the backward-only part of each buffer begins.
        max_context_size: the number of context slots of the time buffer.
        time_size, batch_size: the current ``T`` and ``B``.
        blocks: for each buffer type, the feature range ``(a, b)`` of each
            block (one block ``(0, N0)`` for the constant buffer).
        buffers: the constant array ``(N0,)``, then for the batch- and
            time-sized buffers the list of their blocks' arrays ``(B, b -
            a)`` and ``(T + C, B, b - a)``.
    """

    def __init__(self, layout: dict, handler=None):
        self.layout = layout
        self.handler = handler or handlers.default_handler
        self._specs: list = []
        self._collect(layout, ())
        self.sizes = [0, 0, 0]
        self.forward_sizes: list = [None, None, None]
        self.max_context_size = 0
        for spec in self._specs:
            t = spec.buffer_type
            self.sizes[t] = max(self.sizes[t], spec.stop)
            # an empty array (a network's gradients when it has no
            # parameters) takes no memory and marks no boundary
            if spec.is_backward_only and spec.stop > spec.start:
                fs = self.forward_sizes[t]
                self.forward_sizes[t] = (
                    spec.start if fs is None else min(fs, spec.start)
                )
            if t == 2:
                self.max_context_size = max(self.max_context_size, spec.context_size)
        self.forward_sizes = [
            s if f is None else f for s, f in zip(self.sizes, self.forward_sizes)
        ]
        self._context_specs = [
            s
            for s in self._specs
            if s.buffer_type == 2 and s.context_size and not s.is_backward_only
        ]
        self._plan_blocks()
        self.skip_clearing(())
        # None until resize(0, 0) below
        self.time_size: Any = None
        self.batch_size: Any = None
        self._flat: list = [None, None, None]
        self.buffers: list = [None, None, None]
        self.views: Any = None
        self._allocate_constant()
        self.resize(0, 0)

    def _collect(self, node, path):
        for name, child in sorted(
            ((k, v) for k, v in node.items() if not k.startswith('@')),
            key=lambda kv: kv[1]['@index'],
        ):
            if child['@type'] == 'array':
                self._specs.append(_ArraySpec(path + (name,), child))
            else:
                self._collect(child, path + (name,))

    def _plan_blocks(self) -> None:
        """Cut the batch- and time-sized buffers into blocks (``blocks``)."""
        spans: list = [[], [], []]
        for spec in self._specs:
            spans[spec.buffer_type].append((spec.start, spec.stop))
        self._collect_group_spans(self.layout, spans)
        self.blocks = [[(0, self.sizes[0])]] + [
            _blocks(spans[t], self.sizes[t]) for t in (1, 2)
        ]
        # the layout places no array, concatenation or group across the
        # start of the backward-only memory, so that is a block edge too
        # (clear_backward_buffers relies on it)
        self._block_starts = [[a for a, _ in blocks] for blocks in self.blocks]

    def _collect_group_spans(self, node, spans) -> None:
        """Add the ranges of groups to ``spans``.

        Views with a ``@slice`` do not count: one whose range crosses blocks
        gets no full buffer (see :meth:`_make_view`).
        """
        for name, child in node.items():
            if name.startswith('@') or child['@type'] == 'array':
                continue
            for group in child.get('@groups', {}).values():
                first, last = child[group[0]], child[group[-1]]
                t = get_buffer_type(first['@shape'])
                spans[t].append((int(first['@slice'][0]), int(last['@slice'][1])))
            self._collect_group_spans(child, spans)

    @property
    def size(self) -> int:
        """Total number of elements currently in use."""
        return sum(self._needed(t) for t in range(3))

    @property
    def full_buffer(self):
        """The three flat arrays (constant, batch-sized, time-sized)."""
        return self._flat

    def _needed(self, buffer_type: int) -> int:
        if buffer_type == 0:
            return self.sizes[0]
        if buffer_type == 1:
            return (self.batch_size or 0) * self.sizes[1]
        return (
            ((self.time_size or 0) + self.max_context_size)
            * (self.batch_size or 0)
            * self.sizes[2]
        )

    def _allocate_constant(self):
        self._flat[0] = self.handler.zeros((self.sizes[0],))
        self.buffers[0] = self._flat[0]

    def resize(self, time_size: int, batch_size: int) -> None:
        """Adapt the batch- and time-sized buffers to ``(T, B)``.

        Arrays fetched earlier from ``views`` may be invalid afterwards; the
        BufferView objects themselves are updated in place.
        """
        if (time_size, batch_size) == (self.time_size, self.batch_size):
            return
        self.time_size, self.batch_size = time_size, batch_size
        h = self.handler
        for t in (1, 2):
            needed = self._needed(t)
            flat = self._flat[t]
            if flat is None or flat.shape[0] < needed:
                self._flat[t] = h.zeros((needed,))
        for t in (1, 2):
            rows = self._rows(t)
            flat = self._flat[t]
            self.buffers[t] = [
                reshape_view(flat[rows * a : rows * b], self._row_shape(t) + (b - a,))
                for a, b in self.blocks[t]
            ]
        self._build_views()

    def _row_shape(self, buffer_type: int) -> tuple:
        """The leading axes of a block: ``(B,)`` or ``(T + C, B)``."""
        B = self.batch_size or 0
        if buffer_type == 1:
            return (B,)
        return ((self.time_size or 0) + self.max_context_size, B)

    def _rows(self, buffer_type: int) -> int:
        """Elements per feature in a block of the batch- or time-sized buffer."""
        return math.prod(self._row_shape(buffer_type))

    def _block_index(self, buffer_type: int, start: int, stop: int) -> int | None:
        """The block holding features ``[start, stop)``, None if none does."""
        k = max(bisect.bisect_right(self._block_starts[buffer_type], start) - 1, 0)
        a, b = self.blocks[buffer_type][k]
        return k if a <= start <= stop <= b else None

    def _block(self, buffer_type: int, start: int, stop: int) -> tuple:
        """``(a, array)`` of the block holding features ``[start, stop)``."""
        k = self._block_index(buffer_type, start, stop)
        if k is None:
            raise NetworkValidationError(
                f'Failed to lay out buffers: features [{start}, {stop}) of '
                f'buffer type {buffer_type} cross a block boundary.'
            )
        return self.blocks[buffer_type][k][0], self.buffers[buffer_type][k]

    def _carve(self, spec: _ArraySpec):
        s, e = spec.start, spec.stop
        if spec.buffer_type == 0:
            return reshape_view(self.buffers[0][s:e], spec.feature_shape)
        a, block = self._block(spec.buffer_type, s, e)
        B = self.batch_size
        if spec.buffer_type == 1:
            return reshape_view(block[:, s - a : e - a], (B,) + spec.feature_shape)
        T = self.time_size + spec.context_size
        return reshape_view(block[:T, :, s - a : e - a], (T, B) + spec.feature_shape)

    def _build_views(self):
        arrays = {spec.path: self._carve(spec) for spec in self._specs}
        self.views = self._make_view(self.layout, (), arrays, self.views)

    def _make_view(self, node, path, arrays, existing):
        names, children = [], []
        for name, child in sorted(
            ((k, v) for k, v in node.items() if not k.startswith('@')),
            key=lambda kv: kv[1]['@index'],
        ):
            names.append(name)
            if child['@type'] == 'array':
                children.append(arrays[path + (name,)])
            else:
                old = existing[name] if existing is not None else None
                children.append(self._make_view(child, path + (name,), arrays, old))
        full = None
        if '@slice' in node and node['@type'] == 'BufferView' and names:
            first = node[names[0]]
            t = get_buffer_type(first['@shape'])
            start, stop = node['@slice']
            if t and self._block_index(t, start, stop) is None:
                return self._adjusted(existing, names, children, None, node)
            spec = _ArraySpec(
                None,
                {
                    '@shape': tuple(first['@shape'][: get_buffer_type(first['@shape'])])
                    + (node['@slice'][1] - node['@slice'][0],),
                    '@slice': node['@slice'],
                    '@context_size': first.get('@context_size', 0),
                },
            )
            full = self._carve(spec)
        return self._adjusted(existing, names, children, full, node)

    def _adjusted(self, existing, names, children, full, node):
        """``existing`` adjusted to the new arrays, or a new BufferView."""
        groups = {
            group: self._carve_group(node, members)
            for group, members in node.get('@groups', {}).items()
        }
        if existing is not None:
            # the class's method: a child named 'adjust' shadows the attribute
            return BufferView.adjust(existing, names, children, full, groups)
        return BufferView(names, children, full, groups)

    def _carve_group(self, node, members):
        """One array over adjacent array nodes.

        They are concatenated along the first feature axis in the constant
        buffer, along the last one otherwise.
        """
        first, last = node[members[0]], node[members[-1]]
        shape = tuple(first['@shape'])
        t = get_buffer_type(shape)
        if t and len(members) > 1:
            # flat blocks side by side join on the last axis only if no
            # member has another feature dimension (create_layout refuses
            # such groups; this guards layouts made elsewhere)
            shapes = {m: tuple(node[m]['@shape']) for m in members}
            if any(int(np.prod(s[t:-1])) != 1 for s in shapes.values()):
                raise NetworkValidationError(
                    f'Group {members!r} cannot be one array: its members '
                    f'{shapes} have feature dimensions other than the last, '
                    'so their memory side by side is not their '
                    'concatenation along the last axis.'
                )
        features = [int(x) for x in shape[t:]]
        sizes = [int(node[m]['@shape'][t if t == 0 else -1]) for m in members]
        features[0 if t == 0 else -1] = sum(sizes)
        return self._carve(
            _ArraySpec(
                None,
                {
                    '@shape': shape[:t] + tuple(features),
                    '@slice': (first['@slice'][0], last['@slice'][1]),
                    '@context_size': first.get('@context_size', 0),
                },
            )
        )

    # --------------------------------------------------------- clearing ---

    def skip_clearing(self, ranges, overwritten=None) -> None:
        """Leave backward-only memory that its layers overwrite uncleared.

        :meth:`clear_backward_buffers` then skips it.

        Args:
            ranges: ``(start, stop)`` ranges of the constant buffer:
                gradients that their layers overwrite in every backward pass.
            overwritten: ``{buffer_type: [(start, stop), ...]}``, feature
                ranges of the batch- (1) and time-sized (2) buffers that the
                backward pass overwrites before reading (input deltas, backward
                internals). Only their context slots are still zeroed. A
                block is left uncleared only where such ranges cover it
                whole.
        """
        f0, end = self.forward_sizes[0], self.sizes[0]
        keep, start = [], f0
        for a, b in sorted((max(int(a), f0), min(int(b), end)) for a, b in ranges):
            if a > start:
                keep.append((start, a))
            start = max(start, b)
        if start < end:
            keep.append((start, end))
        self._constant_clear = keep
        overwritten = overwritten or {}
        # per sized buffer type: feature ranges zeroed whole (adjacent
        # blocks merged); the time buffer's overwritten blocks by index,
        # whose context slots are zeroed
        self._sized_clear: list = [[], [], []]
        self._context_clear = []
        for t in (1, 2):
            covered = _covered(overwritten.get(t, ()))
            for k, (a, b) in enumerate(self.blocks[t]):
                if a < self.forward_sizes[t] or a == b:
                    continue
                if covered(a, b):
                    if t == 2:
                        self._context_clear.append(k)
                    continue
                clear = self._sized_clear[t]
                if clear and clear[-1][1] == a:
                    clear[-1] = (clear[-1][0], b)
                else:
                    clear.append((a, b))

    def clear_backward_buffers(self) -> None:
        """Zero the backward-only memory (deltas, gradients) that layers add to.

        Context slots are included; what :meth:`skip_clearing` excluded is
        left alone, except the context slots of the time-sized buffer.
        """
        h = self.handler
        for a, b in self._constant_clear:
            h.fill(self.buffers[0][a:b], 0.0)
        for t in (1, 2):
            # blocks are stored in feature order, so adjacent blocks are one
            # range of the flat buffer
            rows = self._rows(t)
            if not rows:
                continue
            for a, b in self._sized_clear[t]:
                h.fill(self._flat[t][rows * a : rows * b], 0.0)
        if self.max_context_size and self._rows(2):
            T = self.time_size
            for k in self._context_clear:
                h.fill(self.buffers[2][k][T:], 0.0)

    def _forward_time_blocks(self):
        """``(a, b, array)`` of each forward block of the time-sized buffer."""
        f2 = self.forward_sizes[2]
        for (a, b), array in zip(self.blocks[2], self.buffers[2]):
            if b <= f2 and b > a:
                yield a, b, array

    def clear_context(self) -> None:
        """Zero the context slots of all forward time-sized arrays."""
        C = self.max_context_size
        if C and self.batch_size and self.forward_sizes[2]:
            T = self.time_size
            for _, _, array in self._forward_time_blocks():
                self.handler.fill(array[T : T + C], 0.0)

    def get_context(self) -> list | None:
        """A copy of the last ``C`` time steps of the forward time buffer.

        Returns:
            A list with one entry per buffer type, None where there is no
            context: ``[None, None, None]`` for a network without recurrent
            layers (or before its first batch), as in Brainstorm 0.5.
        """
        C, T = self.max_context_size, self.time_size
        if not C or not self.batch_size or not self._context_specs:
            return [None, None, None]
        h = self.handler
        copy = h.allocate((C, self.batch_size, self.forward_sizes[2]))
        if T >= C:
            for a, b, array in self._forward_time_blocks():
                h.copy_to(array[T - C : T], copy[:, :, a:b])
        else:
            self._short_batch_context(copy)
        return [None, None, copy]

    def _short_batch_context(self, copy) -> None:
        """Fill ``copy`` for a batch of fewer time steps than the context.

        Each recurrent buffer's last ``c`` states (its context size) are
        the batch's steps and, before them, the newest of the context the
        pass began with (in the context slots): a batch of ``T = 0`` hands
        that context on unchanged. The other features stay zero (no
        context reads them).
        """
        C, T = self.max_context_size, self.time_size
        h = self.handler
        h.fill(copy, 0.0)
        for spec in self._context_specs:
            c = spec.context_size
            a, block = self._block(2, spec.start, spec.stop)
            inside, outside = (
                slice(spec.start - a, spec.stop - a),
                slice(spec.start, spec.stop),
            )
            older = max(0, c - T)  # the steps -older .. -1, newest last
            if older:
                h.copy_to(
                    block[T + c - older : T + c, :, inside],
                    copy[C - T - older : C - T, :, outside],
                )
            steps = min(c, T)
            if steps:
                h.copy_to(
                    block[T - steps : T, :, inside], copy[C - steps :, :, outside]
                )

    def apply_context(self, context) -> None:
        """Write a context from :meth:`get_context` into the context slots.

        Args:
            context: None (a zero context) or the list :meth:`get_context`
                returns, one entry per buffer type: only the time-sized
                buffer (entry 2) has context slots, so entries 0 and 1
                must be None; entry 2 is None (a zero context) or an array
                (the handler's, or a NumPy copy) of shape ``(C, B,
                features)``.

        Raises:
            NetworkValidationError: for anything else, naming the entry,
                what was expected and what was received.
        """
        ctx = self._context_array(context)
        if ctx is None:  # no context taken: a zero one
            self.clear_context()
            return
        h = self.handler
        C, T = self.max_context_size, self.time_size
        expected = (C, self.batch_size, self.forward_sizes[2])
        # a NumPy context is checked before any cast to the handler's dtype:
        # a float64 1e5 would be inf in float16
        given_numpy = isinstance(ctx, np.ndarray)
        bad = find_unrepresentable(ctx, h.dtype) if given_numpy else None
        if given_numpy and not isinstance(ctx, h.array_type):
            # a NumPy copy of a context, for a handler of other arrays
            ctx = h.create_from_numpy(ctx)
        if tuple(ctx.shape) != expected:
            received = tuple(ctx.shape)
            raise NetworkValidationError(
                f'The context does not fit this batch: expected shape '
                f'{expected} (context steps, batch size, features). Received: '
                f'{received}. Contexts carry over only between batches of the '
                'same batch size.'
            )
        if bad is not None:
            index, value, what = bad
            raise NetworkValidationError(
                'The context holds NaN or infinite values, or values beyond '
                f'the range of {np.dtype(h.dtype).name} (the dtype of the '
                f'handler): {what} at index {index} ({value!r}). A context '
                'from net.get_context() of a pass on finite data in this dtype '
                'has none. Pass None (or no context) to start from zero.'
            )
        if not given_numpy and not h.is_fully_finite(ctx):
            raise NetworkValidationError(
                'The context holds NaN or infinite values: a context from '
                'net.get_context() of a pass on finite data has none. Pass '
                'None (or no context) to start from zero.'
            )
        self.clear_context()
        for spec in self._context_specs:
            c = spec.context_size
            a, block = self._block(2, spec.start, spec.stop)
            h.copy_to(
                ctx[C - c : C, :, spec.start : spec.stop],
                block[T : T + c, :, spec.start - a : spec.stop - a],
            )

    def _context_array(self, context):
        """The array entry of a context for :meth:`apply_context`, checked.

        Returns:
            None for a zero context (``None``, or no array in entry 2).

        Raises:
            NetworkValidationError: for a context that is no list of three
                entries, an entry 0 or 1 that is not None, or an entry 2
                that is neither None nor a real-valued array (or is one for
                a network without context slots).
        """
        if context is None:
            return None
        if not isinstance(context, (list, tuple)) or len(context) != 3:
            raise NetworkValidationError(
                'A context must be the list returned by net.get_context(). '
                f'Received: {type(context).__name__}'
            )
        for i in (0, 1):
            if context[i] is not None:
                raise NetworkValidationError(
                    f'context[{i}] must be None: the context has one entry '
                    'per buffer type, and only the time-sized buffer '
                    '(context[2]) has context slots; the '
                    f'{("constant", "batch-sized")[i]} buffer takes none. '
                    f'Received: {_describe_value(context[i])}. Pass the list '
                    'net.get_context() returned.'
                )
        ctx = context[2]
        if ctx is None:
            return None
        if not self._context_specs:
            raise NetworkValidationError(
                'context[2] must be None: this network has no buffer with '
                'context slots (no recurrent layer), so it takes no context '
                f'(its get_context() gives [None, None, None]). Received: '
                f'{_describe_value(ctx)}.'
            )
        array_type = self.handler.array_type
        if not isinstance(ctx, (np.ndarray, array_type)):
            paths = ', '.join('.'.join(spec.path) for spec in self._context_specs)
            raise NetworkValidationError(
                'context[2], the context of the time-sized buffer '
                f'({paths}), must be an array of the handler '
                f'({array_type.__name__}) or a NumPy array, as '
                f'net.get_context() returns. Received: {_describe_value(ctx)}.'
            )
        if isinstance(ctx, np.ndarray) and ctx.dtype.kind not in 'biuf':
            raise NetworkValidationError(
                'context[2], the context of the time-sized buffer, must hold '
                f'real numbers. Received: an array of dtype {ctx.dtype}.'
            )
        return ctx

    # ------------------------------------------------- copies, pickles ---

    def __getstate__(self) -> dict:
        """The state for ``copy.deepcopy`` and pickle.

        The buffers and views are arrays carved out of the three flat
        buffers; copied one by one they would no longer share memory (the
        copy's views would not see its parameters, and training it would
        change nothing). So only the flat buffers' contents are kept, as
        NumPy copies, and :meth:`__setstate__` carves the views anew.
        """
        state = dict(self.__dict__)
        state['_flat'] = [
            None if flat is None else self.handler.get_numpy_copy(flat)
            for flat in self._flat
        ]
        state['buffers'] = [None, None, None]
        state['views'] = None
        return state

    def __setstate__(self, state: dict) -> None:
        """Rebuild the flat buffers on the handler and carve the views."""
        contents = state['_flat']
        self.__dict__.update(state)
        h = self.handler
        self._flat = [
            None if array is None else h.create_from_numpy(array) for array in contents
        ]
        self.buffers[0] = self._flat[0]
        T, B = self.time_size, self.batch_size
        self.time_size = self.batch_size = None
        self.resize(T, B)

    # --------------------------------------------------------- handlers ---

    def check_handler(self, new_handler) -> None:
        """Refuse ``new_handler`` if its dtype cannot hold the parameters.

        A narrower dtype (float64 to float16) would make the parameters
        beyond its range inf. Only the parameters are looked at: the rest
        of the constant buffer (gradients, constant-size internals and
        outputs) is scratch that the next passes write anew. To an equal or
        wider dtype this costs one dtype comparison.

        Raises:
            NetworkValidationError: naming the parameter, the index and
                value and the new dtype.
        """
        if not narrows(self.handler.dtype, new_handler.dtype):
            return
        dtype = new_handler.dtype
        constant = self.handler.get_numpy_copy(self._flat[0])
        for spec in self._specs:
            if spec.buffer_type or len(spec.path) != 3 or spec.path[1] != 'parameters':
                continue
            values = constant[spec.start : spec.stop].reshape(spec.feature_shape)
            found = find_overflow(values, dtype)
            if found is not None:
                index, value, what = found
                name, old = np.dtype(dtype).name, np.dtype(self.handler.dtype).name
                raise NetworkValidationError(
                    f'Cannot move the parameters to a handler of dtype {name}: '
                    f'{spec.path[0]}.{spec.path[2]} holds {what} at index '
                    f'{index} ({value!r}), which would become inf there; '
                    'parameters must be finite. Nothing was moved (the memory '
                    f'stays on the handler of dtype {old}): scale the '
                    f'parameter down, or use a dtype wider than {name}.'
                )

    def set_handler(self, new_handler) -> None:
        """Move all memory to ``new_handler``.

        The constant buffer (parameters and other constant-size values) is
        kept. Call :meth:`check_handler` first (``Network.set_handler``
        does): it refuses parameters beyond the range of a narrower dtype.
        Scratch values beyond it (a stale gradient) become inf here, as the
        next passes write them anew.
        """
        constant = self.handler.get_numpy_copy(self._flat[0])
        self.handler = new_handler
        self._flat = [None, None, None]
        self._allocate_constant()
        with np.errstate(over='ignore'):  # only scratch can overflow now
            new_handler.set_from_numpy(self._flat[0], constant)
        T, B = self.time_size, self.batch_size
        self.time_size = self.batch_size = None
        self.resize(T, B)

    def __repr__(self):
        return (
            f'BufferManager(sizes={self.sizes}, T={self.time_size}, '
            f'B={self.batch_size}, handler={self.handler!r})'
        )
