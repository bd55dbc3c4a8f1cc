"""BufferView: a named, ordered tuple-like view onto buffers."""

from __future__ import annotations

import numbers

from brainstorm.naming import get_by_path  # noqa: F401 - in Brainstorm 0.5's namespace of this module

__all__ = ['BufferView']


class BufferView(list):
    """A list of buffers (or nested views) that can also be read by name.

    ``W, R, bias = view`` unpacks in ``@index`` order; ``view.W``,
    ``view['W']``, ``view[0]`` and dotted ``view['L.outputs.default']`` all
    work.

    Args:
        buffer_names: the names, in order.
        buffers: the arrays or BufferViews, same order.
        full_buffer: an array spanning all children, if they are contiguous.
        groups: group name -> an array spanning several adjacent children
            (see :meth:`get_group`).
    """

    # internal state lives in slots, which take precedence over the
    # instance dict holding the children: a child named e.g. '_keys' must
    # not overwrite it
    __slots__ = ('_buffer_names', '_keys', '_full_buffer', '_groups', '__dict__')

    def __init__(self, buffer_names, buffers, full_buffer=None, groups=None):
        super().__init__(buffers)
        names = list(buffer_names)
        if len(names) != len(self):
            raise ValueError(
                f'BufferView needs as many names as buffers. '
                f'Received {len(names)} names and {len(self)} '
                'buffers.'
            )
        self._buffer_names = tuple(names)
        self._keys = set(names)
        self._full_buffer = full_buffer
        self._groups = dict(groups or {})
        for name, buffer in zip(names, self):
            self.__dict__[name] = buffer

    def get_group(self, name: str):
        """One array over a group of adjacent children.

        The groups are those of the layer's ``grouped_buffers``.

        Raises:
            KeyError: if there is no such group.
        """
        try:
            return self._groups[name]
        except KeyError:
            raise KeyError(
                f'{name!r} is not a group of this BufferView. '
                f'Groups: {sorted(self._groups)}'
            ) from None

    def adjust(self, buffer_names=None, buffers=None, full_buffer=None, groups=None):
        """Replace the buffers in place (after a resize)."""
        if buffer_names is not None and tuple(buffer_names) != self._buffer_names:
            raise ValueError(
                f'Cannot adjust a BufferView with names '
                f'{self._buffer_names} to {tuple(buffer_names)}'
            )
        buffers = list(buffers)
        if len(buffers) != len(self):
            raise ValueError(
                f'BufferView.adjust needs {len(self)} buffers. Received {len(buffers)}.'
            )
        self[:] = buffers
        self._full_buffer = full_buffer
        self._groups = dict(groups or {})
        for name, buffer in zip(self._buffer_names, buffers):
            self.__dict__[name] = buffer
        return self

    def __getitem__(self, item):
        # a bool is no index here (True would read child 1)
        if isinstance(item, (numbers.Integral, slice)) and not isinstance(item, bool):
            return super().__getitem__(item)
        if isinstance(item, str):
            if item in self._keys:
                return self.__dict__[item]
            if '.' in item:
                head, _, rest = item.partition('.')
                child = self[head]
                if isinstance(child, BufferView):
                    return child[rest]
            raise KeyError(
                f'{item!r} is not in this BufferView. Available '
                f'keys: {list(self._buffer_names)}'
            )
        raise TypeError(
            f'BufferView indices must be ints, slices or names. Received: {item!r}'
        )

    def __getattr__(self, item):
        # only reached for names that are not children
        try:
            names = object.__getattribute__(self, '_buffer_names')
        except AttributeError:
            # not initialised yet (copy/pickle create the object first)
            raise AttributeError(item) from None
        raise AttributeError(
            f'{item!r} is not in this BufferView. Available keys: {list(names)}'
        )

    def __contains__(self, item):
        if isinstance(item, str):
            return item in self._keys
        return any(item is b for b in self)

    def keys(self):
        """The names of the children, in order."""
        return list(self._buffer_names)

    def values(self):
        """The children (arrays or views), in order."""
        return list(self)

    def items(self):
        """``(name, child)`` pairs, in order."""
        return list(zip(self._buffer_names, self))

    def _asdict(self):
        return dict(zip(self._buffer_names, self))

    def __repr__(self):
        return f'BufferView({list(self._buffer_names)})'

    # lists are unhashable and compare by content; views compare by identity
    __hash__ = object.__hash__  # type: ignore[assignment]

    def __eq__(self, other):
        return self is other

    def __ne__(self, other):
        # list.__ne__ would compare contents
        return self is not other
