"""The array type of the CUDA handler: strided float32 views of GPU memory.

A :class:`GPUView` is a device pointer into a PyCUDA allocation, a shape
and element strides; indexing and reshaping follow NumPy's view rules and
never copy (see the :mod:`brainstorm.handlers.cuda.handler` docstring).
:func:`coalesce` merges the axes of operands for the kernels. Nothing here
needs PyCUDA.
"""

from __future__ import annotations

import math
import operator

import numpy as np

__all__ = [
    'GPUView',
    'coalesce',
    'c_strides',
    'broadcast_mv',
    'check_shapes',
    'check_channels',
]


def c_strides(shape: tuple) -> tuple:
    """Element strides of a C-contiguous array of ``shape``."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(n, 1)
    return tuple(reversed(strides))


def coalesce(shape: tuple, strides_list: list) -> tuple:
    """Merge the axes of several same-shaped operands as far as possible.

    Size-1 axes are dropped, and axis ``k`` is merged into axis ``k - 1``
    wherever ``stride[k-1] == stride[k] * shape[k]`` holds for every
    operand. The logical C-order of the elements is kept.

    Args:
        shape: the common shape.
        strides_list: one tuple of element strides per operand.

    Returns:
        ``(shape, strides_list)`` with at least one axis.
    """
    keep = [k for k, n in enumerate(shape) if n != 1]
    if not keep:
        return (1,), [(0,) for _ in strides_list]
    dims = [shape[keep[0]]]
    merged = [[st[keep[0]]] for st in strides_list]
    for k in keep[1:]:
        n = shape[k]
        if all(m[-1] == st[k] * n for m, st in zip(merged, strides_list)):
            dims[-1] *= n
            for m, st in zip(merged, strides_list):
                m[-1] = st[k]
        else:
            dims.append(n)
            for m, st in zip(merged, strides_list):
                m.append(st[k])
    return tuple(dims), [tuple(m) for m in merged]


def _reshape_strides(shape: tuple, strides: tuple, new_shape: tuple):
    """Strides viewing ``(shape, strides)`` as ``new_shape``, or None.

    Groups of old axes whose sizes multiply to groups of new axes must be
    contiguous among themselves (NumPy's no-copy reshape rule).
    """
    if math.prod(shape) == 0:
        return c_strides(new_shape)
    old = [(n, s) for n, s in zip(shape, strides) if n != 1]
    new_strides = [0] * len(new_shape)
    oi = ni = 0
    while oi < len(old) and ni < len(new_shape):
        oj, nj = oi + 1, ni + 1
        o_size, n_size = old[oi][0], new_shape[ni]
        while o_size != n_size:
            if n_size < o_size:
                n_size *= new_shape[nj]
                nj += 1
            else:
                o_size *= old[oj][0]
                oj += 1
        for k in range(oi, oj - 1):
            if old[k][1] != old[k + 1][0] * old[k + 1][1]:
                return None
        new_strides[nj - 1] = old[oj - 1][1]
        for k in range(nj - 1, ni, -1):
            new_strides[k - 1] = new_strides[k] * new_shape[k]
        oi, ni = oj, nj
    last = new_strides[ni - 1] if ni > 0 else 1
    for k in range(ni, len(new_shape)):
        new_strides[k] = last
    return tuple(new_strides)


class GPUView:
    """A strided float32 view of GPU memory, the array type of PyCudaHandler.

    Like a NumPy view it shares memory with the array it came from:
    indexing with ints, slices (positive steps), ``...`` and ``None``,
    :meth:`reshape` and :meth:`broadcast_to` never copy. It has no
    arithmetic; math goes through the handler ops, and
    ``handler.get_numpy_copy(view)`` gives its values. Other CUDA libraries
    can use it through ``__cuda_array_interface__``.

    Args:
        base: the object owning the memory (a flat PyCUDA ``GPUArray``),
            kept alive by every view of it.
        base_ptr: device address of element 0 of ``base``.
        offset: elements from ``base_ptr`` to the first element of the view.
        shape: the shape.
        strides: element strides (NOT bytes), C-contiguous if None.

    Attributes:
        shape: tuple of ints.
        strides: tuple of element strides, one per axis.
        dtype: always ``numpy.float32``.
    """

    __slots__ = ('base', 'base_ptr', 'offset', 'shape', 'strides')
    dtype = np.dtype(np.float32)
    itemsize = 4

    def __init__(
        self,
        base,
        base_ptr: int,
        offset: int,
        shape: tuple | list,
        strides: tuple | list | None = None,
    ):
        self.base = base
        self.base_ptr = int(base_ptr)
        self.offset = int(offset)
        self.shape = tuple(int(n) for n in shape)
        self.strides = (
            c_strides(self.shape) if strides is None else tuple(int(s) for s in strides)
        )
        assert len(self.strides) == len(self.shape), (shape, strides)

    @property
    def ndim(self) -> int:
        """Number of axes."""
        return len(self.shape)

    @property
    def size(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        """Bytes of the elements (not of the memory they span)."""
        return 4 * self.size

    @property
    def ptr(self) -> int:
        """Device address of the first element."""
        return self.base_ptr + 4 * self.offset

    @property
    def is_contiguous(self) -> bool:
        """True if the elements are adjacent in C order."""
        dims, (strides,) = coalesce(self.shape, [self.strides])
        return self.size <= 1 or (len(dims) == 1 and strides[0] == 1)

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError('len() of a 0-d GPUView')
        return self.shape[0]

    def __getitem__(self, item) -> GPUView:
        """A view of the selected elements (like NumPy basic indexing)."""
        if type(item) is int and self.shape and -self.shape[0] <= item < self.shape[0]:
            # the hot case (a time step of a buffer): no parsing
            view = GPUView.__new__(GPUView)
            view.base, view.base_ptr = self.base, self.base_ptr
            view.offset = self.offset + (item % self.shape[0]) * self.strides[0]
            view.shape, view.strides = self.shape[1:], self.strides[1:]
            return view
        parts = item if isinstance(item, tuple) else (item,)
        n_real = sum(1 for p in parts if p is not None and p is not Ellipsis)
        n_ellipsis = sum(1 for p in parts if p is Ellipsis)
        if n_ellipsis > 1:
            raise IndexError("an index can only have a single ellipsis ('...')")
        if n_real > self.ndim:
            raise IndexError(
                f'too many indices for a GPUView of shape {self.shape}: {item!r}'
            )
        fill = (slice(None),) * (self.ndim - n_real)
        if n_ellipsis:
            k = next(i for i, p in enumerate(parts) if p is Ellipsis)
            parts = parts[:k] + fill + parts[k + 1 :]
        else:
            parts = parts + fill
        offset, shape, strides, axis = self.offset, [], [], 0
        for part in parts:
            if part is None:
                shape.append(1)
                strides.append(0)
                continue
            n, stride = self.shape[axis], self.strides[axis]
            axis += 1
            if isinstance(part, slice):
                start, stop, step = part.indices(n)
                if step < 0:
                    raise IndexError(
                        f'GPUView slices need a positive step. Received: {item!r}'
                    )
                offset += start * stride
                shape.append(len(range(start, stop, step)))
                strides.append(stride * step)
            elif isinstance(part, (bool, np.bool_)):
                raise IndexError(
                    f'GPUView does not support boolean indices. Received: {item!r}'
                )
            else:
                try:
                    index = operator.index(part)
                except TypeError:
                    raise IndexError(
                        f'GPUView indices must be ints, slices, ... or None. '
                        f'Received: {item!r}'
                    ) from None
                if not -n <= index < n:
                    raise IndexError(
                        f'index {index} is out of bounds for '
                        f'axis {axis - 1} with size {n}'
                    )
                offset += (index % n) * stride
        return GPUView(self.base, self.base_ptr, offset, shape, strides)

    def reshape(self, *shape) -> GPUView:
        """The same elements in a new shape, as a view (one entry may be -1).

        Raises:
            ValueError: if the sizes differ or the result cannot be a view
                of the same memory (a copy would be needed).
        """
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        dims = [operator.index(n) for n in shape]
        if dims.count(-1) > 1 or any(n < -1 for n in dims):
            raise ValueError(f'Invalid shape for reshape: {tuple(dims)}')
        if -1 in dims:
            known = math.prod(n for n in dims if n != -1)
            if known == 0 or self.size % known:
                raise ValueError(
                    f'Cannot reshape a GPUView of shape '
                    f'{self.shape} into {tuple(dims)}.'
                )
            dims[dims.index(-1)] = self.size // known
        shape = tuple(dims)
        if math.prod(shape) != self.size:
            raise ValueError(
                f'Cannot reshape a GPUView of shape {self.shape} '
                f'(size {self.size}) into {shape}.'
            )
        strides = _reshape_strides(self.shape, self.strides, shape)
        if strides is None:
            raise ValueError(
                f'Cannot reshape a GPUView of shape {self.shape} with element '
                f'strides {self.strides} to {shape} without copying it.'
            )
        return GPUView(self.base, self.base_ptr, self.offset, shape, strides)

    def broadcast_to(self, shape: tuple) -> GPUView:
        """A read-only-use view repeating size-1 axes (stride 0) to ``shape``.

        Raises:
            ValueError: if an axis is neither equal nor of size 1, or the
                number of axes differs.
        """
        shape = tuple(int(n) for n in shape)
        if len(shape) != self.ndim or any(
            n != m and m != 1 for n, m in zip(shape, self.shape)
        ):
            raise ValueError(
                f'Cannot broadcast a GPUView of shape {self.shape} to {shape}.'
            )
        strides = tuple(
            s if m == n else 0 for n, m, s in zip(shape, self.shape, self.strides)
        )
        return GPUView(self.base, self.base_ptr, self.offset, shape, strides)

    @property
    def __cuda_array_interface__(self) -> dict:
        return {
            'shape': self.shape,
            'strides': tuple(4 * s for s in self.strides),
            'data': (self.ptr if self.size else 0, False),
            'typestr': '<f4',
            'version': 3,
        }

    def __array__(self, *args, **kwargs):
        raise TypeError(
            'A GPUView lives on the GPU: use '
            'handler.get_numpy_copy(view) to get its values.'
        )

    def __repr__(self) -> str:
        return f'GPUView(shape={self.shape}, strides={self.strides})'


def broadcast_mv(m: GPUView, v: GPUView, what: str) -> GPUView:
    """``v`` of shape (1, N), (M, 1) or (M, N) as an (M, N) view of ``m``'s shape."""
    if (
        m.ndim == 2
        and v.ndim == 2
        and (v.shape == m.shape or v.shape in ((1, m.shape[1]), (m.shape[0], 1)))
    ):
        return v.broadcast_to(m.shape)
    raise ValueError(
        f'{what}: v must be (1, N), (M, 1) (or (M, N)) for m of '
        f'shape (M, N) = {m.shape}. Received: {v.shape}'
    )


def check_shapes(what: str, a: GPUView, b: GPUView) -> None:
    """Raise ValueError naming ``what`` unless ``a`` and ``b`` have one shape."""
    if a.shape != b.shape:
        raise ValueError(f'{what}: shapes {a.shape} and {b.shape} must be equal.')


def check_channels(what: str, inputs: GPUView, weights: GPUView, bias: GPUView) -> None:
    """Raise ValueError unless inputs and bias fit the convolution weights."""
    f, c = weights.shape[0], weights.shape[3]
    if inputs.shape[3] != c or tuple(bias.shape) != (f,):
        raise ValueError(
            f'{what}: weights {weights.shape} need inputs with '
            f'{c} channels and a bias of shape ({f},). Received: '
            f'inputs {inputs.shape}, bias {bias.shape}'
        )
