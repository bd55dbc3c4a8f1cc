"""OneDnnHandler: NumpyHandler with oneDNN's convolution, pooling and products."""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
import weakref
from collections import OrderedDict

import numpy as np

from brainstorm.handlers import _numpy_conv as _conv
from brainstorm.handlers.numpy_handler import NumpyHandler
from brainstorm.handlers.onednn import _dnnl, _openblas
from brainstorm.handlers.onednn._operands import (
    _ALIGNMENT,
    _address,
    _bounded,
    _conforming,
    _dense_float32,
    _matmul_operands,
    _operand_key,
    _overlapping,
)
from brainstorm.handlers.onednn.plans import ConvPlan, ElementwisePlan, MatmulPlan
from brainstorm.handlers.onednn.pooling import PoolingOps
from brainstorm.shapes import check_image_geometry, padding_sides

__all__ = ['OneDnnHandler']

#: the layer types whose passes run oneDNN primitives
IMAGE_LAYER_TYPES = frozenset({'Convolution2D', 'Pooling2D'})

#: the layer types whose passes run the float32 products on oneDNN, with
#: the recurrent weights packed (see ``network_pass``)
RECURRENT_LAYER_TYPES = frozenset({'Lstm', 'ClockworkLstm'})

#: the most matmul plans kept, and the most of each other kind (convolution,
#: pooling, elementwise work, ...); the least recently used go first
MATMUL_PLANS = 64
PLANS_PER_KIND = 64

#: in passes of networks with such layers, products of fewer multiply-adds
#: than this stay with NumPy (OpenBLAS on one thread): below it a oneDNN
#: call costs more than it saves (32 x 128 . 128 x 512: 70 us either way)
ONEDNN_PRODUCT_MIN = 1 << 21

#: in passes of networks with such layers, products of more multiply-adds
#: than this run on all of OpenBLAS's threads, smaller ones on one
SMALL_PRODUCT = 1 << 24

#: ReLU, the sigmoid's derivative and sums of fewer elements than this
#: stay with NumPy (calling oneDNN would cost more than its threads save)
ELEMENTWISE_MIN = 1 << 16

#: the types of the scalars (learning rate, momentum) with which updates run
#: on oneDNN, each with the magnitude it must stay below. NumPy 1.x computes
#: with a float in float32 only below 3.4e38 (from there in float64, which
#: oneDNN's float32 scale would not match), and rounds an int to float32 at
#: once where oneDNN's scale takes it through float64 (the same float32
#: while the int is exact in float64); it refuses ints beyond int64
ONEDNN_SCALAR_BOUNDS = {float: 3.4e38, int: 1 << 53}


def _kind(key):
    """The kind of the plan under ``key``, each capped on its own."""
    return key[:2] if key[0] == 'elementwise' else key[0]


#: the live handlers, whose plans a forked child gives new locks
_HANDLERS: weakref.WeakSet = weakref.WeakSet()


def _renew_locks() -> None:
    """In a forked child: a new lock for every plan of every live handler.

    A plan's lock is held while its primitive runs. A child forked while
    another thread of its parent ran one inherits that lock held, and no
    thread of the child would ever release it: the child's first op with
    that plan would wait forever.
    """
    for handler in list(_HANDLERS):
        for plan in list(handler._plans.values()):
            if getattr(plan, 'lock', None) is not None:
                plan.lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_locks)


def _unpickled(cls, state: dict):
    """A copy of a ``cls`` handler: a NumpyHandler where oneDNN cannot load."""
    try:
        _dnnl.library()
    except _dnnl.OneDnnUnavailable as error:
        warnings.warn(
            f'A pickled {cls.__name__} continues as a NumpyHandler: oneDNN '
            f'cannot be used in this process ({error}).',
            RuntimeWarning,
            stacklevel=2,
        )
        handler = NumpyHandler.__new__(NumpyHandler)
        handler.__dict__.update(
            {k: v for k, v in state.items() if k not in _ONEDNN_STATE}
        )
        return handler
    handler = cls.__new__(cls)
    handler.__setstate__(state)
    return handler


#: the parts of a OneDnnHandler's state a NumpyHandler has not
_ONEDNN_STATE = frozenset({'_plans', '_lib'})


class OneDnnHandler(PoolingOps, NumpyHandler):
    """A NumpyHandler running convolution and pooling with oneDNN.

    Convolution (forward, input deltas, weight and bias gradients) and max
    and average pooling (forward and backward) run as oneDNN primitives on
    NumPy arrays in brainstorm's own NHWC image layout. oneDNN's optimised
    kernels need images contiguous over the batch: such arrays, which is
    what a network's image buffers are unless an input concatenates them
    with other outputs, are used in place; others are copied into and out
    of contiguous scratch buffers. A ReLU after a convolution runs as its
    post-op where that gives NumPy's results. In passes of networks with
    ``Lstm`` layers the matrix products run on oneDNN too, the recurrent
    weights packed (see ``network_pass`` and ``fixed_operand``). The
    derivatives of ``rel`` and ``sigmoid`` from their outputs, the SGD,
    momentum and Nesterov updates and the sums into input deltas run as
    oneDNN elementwise primitives on all its threads, for float32 arrays
    of at least ``ELEMENTWISE_MIN`` (65536) elements, with NumPy's results
    bit for bit (except ``rel``'s derivative where an output is NaN:
    oneDNN gives ``dy`` there, NumPy 0). Every other op is NumpyHandler's; in
    passes of networks with convolution, pooling or ``Lstm`` layers,
    NumPy's OpenBLAS runs on one thread.

    Primitives are made once per shape and kept, and oneDNN's scratchpads
    are the handler's scratch buffers: after the first step nothing is
    allocated. Results ADDED to (input deltas) are computed into a scratch
    buffer first and then added.

    oneDNN has no float64 convolution or pooling: with ``dtype=float64``
    (which the tests use as the reference) every op is NumpyHandler's. A
    pooling geometry with windows of padding only (``padding >= kernel``
    size) also runs NumpyHandler's ops, which define their output as 0, as
    does any shape oneDNN has no implementation for.

    oneDNN comes from PyPI's ``onednn-cpu-gomp`` (installed with
    brainstorm-nn on Linux x86-64); its threads are GNU OpenMP's
    (``OMP_NUM_THREADS``), see :doc:`/cpu`.

    Args:
        dtype: the floating point type of all arrays.
        seed: seed of the handler's random state ``rnd`` (see
            :class:`~brainstorm.handlers.numpy_handler.NumpyHandler`).

    Raises:
        ImportError: (:class:`~brainstorm.handlers.onednn.OneDnnUnavailable`)
            if oneDNN cannot be loaded; the message says why.
    """

    def __init__(self, dtype=np.float32, seed: int | None = None):
        self._lib = _dnnl.library()
        super().__init__(dtype, seed)
        self._plans: OrderedDict = OrderedDict()  # least recently used first
        _HANDLERS.add(self)

    def __describe__(self) -> dict:
        """``{'@type': 'OneDnnHandler', 'dtype': 'float32'}``."""
        return {'@type': 'OneDnnHandler', 'dtype': np.dtype(self.dtype).name}

    def __init_from_description__(self, description: dict) -> None:
        """Recreate from :meth:`__describe__`'s output (fresh ``rnd``)."""
        type(self).__init__(self, self.dtype)

    @classmethod
    def __new_from_description__(cls, description: dict):
        """A NumpyHandler of the described dtype where oneDNN cannot load.

        As for a pickle (:meth:`__reduce__`): a network file or checkpoint
        saved with ``OneDnnHandler(float64)`` (or a DebugHandler around
        one) loads where oneDNN is off on ``NumpyHandler(float64)`` (or a
        DebugHandler around it), with a warning, and its parameters are the
        file's exactly.
        """
        try:
            _dnnl.library()
        except _dnnl.OneDnnUnavailable as error:
            substitute = dict(description, **{'@type': 'NumpyHandler'})
            handler = NumpyHandler.__new_from_description__(substitute)
            warnings.warn(
                f'A {cls.__name__} from a file or description continues as '
                f'{handler!r}: oneDNN '
                f'cannot be used in this process ({error}).',
                RuntimeWarning,
                stacklevel=2,
            )
            return handler
        return super().__new_from_description__(description)

    def __getstate__(self):
        """As NumpyHandler's, without oneDNN's objects (made again on use)."""
        state = super().__getstate__()
        state.pop('_lib', None)
        state['_plans'] = OrderedDict()
        return state

    def __setstate__(self, state) -> None:
        """Restore; loads oneDNN (ImportError if it cannot be here)."""
        self.__dict__.update(state)
        self._plans = OrderedDict()
        self._lib = _dnnl.library()
        _HANDLERS.add(self)

    def __reduce__(self):
        """Pickle and copy through :func:`_unpickled`.

        Where oneDNN cannot load (another platform, or
        ``BRAINSTORM_NO_ONEDNN=1``), the copy is a ``NumpyHandler`` of the
        same dtype and random state, with a warning, as a network loaded
        from a file falls back to the default handler.
        """
        return _unpickled, (type(self), self.__getstate__())

    def __str__(self) -> str:
        """The repr, then oneDNN's version and OpenMP's thread count."""
        return f'{self!r} with oneDNN {self.onednn_version} on {self.threads} threads'

    @property
    def onednn_version(self) -> str:
        """The version of the oneDNN library in use, like ``'3.2.0'``."""
        return self._lib.version

    @property
    def threads(self) -> int:
        """The number of OpenMP threads oneDNN's primitives run on."""
        return self._lib.threads

    def _checked(self, images, read, written) -> bool:
        """Do these operands of a convolution or pooling go to oneDNN?

        ``images`` (the 4-d arrays the plan is made for) and ``read``, none
        empty, and ``written`` (pairs of an array and its shape) are all
        float32 arrays of those shapes, and the written ones are writeable.
        """
        return (
            self.dtype == np.float32
            and all(getattr(a, 'ndim', None) == 4 and a.size for a in images)
            and _conforming([(a, a.shape) for a in images] + read, written)
        )

    def _plan(self, key, make):
        """The plan kept under ``key``, made by ``make()`` on first use.

        None (kept too) where oneDNN has no implementation for the shape:
        NumpyHandler's op runs then. Of each kind (``key[0]``; for
        elementwise work, its kind too) at most ``MATMUL_PLANS`` or
        ``PLANS_PER_KIND`` are kept, the least recently used going first:
        changing batch sizes and sequence lengths make new shapes, and the
        plans of shapes no longer used would pile up (a plan in use by a
        thread stays alive in that thread).
        """
        plans = self._plans
        plan = plans.get(key, False)
        if plan is not False:
            with contextlib.suppress(KeyError):  # another thread dropped it
                plans.move_to_end(key)
            return plan
        try:
            plan = make()
        except _dnnl.OneDnnError:
            plan = None
        kind = _kind(key)
        cap = MATMUL_PLANS if kind == 'matmul' else PLANS_PER_KIND
        same_kind = [k for k in list(plans) if _kind(k) == kind]
        for old in same_kind[: max(0, len(same_kind) - cap + 1)]:
            plans.pop(old, None)
        plans[key] = plan
        return plan

    # ----------------------------------------------------- memory in and out

    def _dense(self, name: str, array, copy_in: bool = True):
        """``array`` if C-contiguous, else a scratch copy (or empty scratch)."""
        if array.flags.c_contiguous:
            return array
        scratch = self._buffer(name, array.shape)
        if copy_in:
            np.copyto(scratch, array)
        return scratch

    def _aligned(self, name: str, size: int) -> int:
        """The 64-byte aligned address of ``size`` scratch bytes."""
        memory = _address(self._buffer(name, (size + _ALIGNMENT,), np.uint8))
        return memory + (-memory) % _ALIGNMENT

    def _scratchpad(self, *primitives) -> int:
        """The address of a scratchpad for any of ``primitives``."""
        size = max(p.scratchpad_bytes for p in primitives)
        if not size:
            return 0
        return self._aligned('onednn_scratchpad', size)

    def _weights_in(self, primitive, weights) -> int:
        """The weights in the primitive's format: their address."""
        weights = self._dense('onednn_w_user', weights)
        if primitive.reorder is None:
            return _address(weights)
        target = self._aligned('onednn_w', primitive.weights_bytes)
        primitive.reorder.primitive.run(
            (_address(weights), target), self._scratchpad(primitive.reorder.primitive)
        )
        return target

    # ------------------------------------------------- products and threads

    def network_pass(self, layer_types):
        """Keep OpenBLAS's threads asleep in passes of networks with images.

        NumPy's OpenBLAS threads spin for about 0.1 s after each product
        they share, holding a core that oneDNN's OpenMP threads then lack.
        So while a float32 pass of a network with layers of
        ``IMAGE_LAYER_TYPES`` runs, NumPy's OpenBLAS runs on one
        thread, except for products of more than ``SMALL_PRODUCT``
        multiply-adds. In float32 passes of networks with layers of
        ``RECURRENT_LAYER_TYPES``, OpenBLAS runs on one thread and the
        products of big float32 matrices run on oneDNN (its matmul), those by
        an operand of a :meth:`fixed_operand` block with that operand
        packed once in the block (see :doc:`/cpu`). Elsewhere nothing
        changes (OpenBLAS's thread count only where it is NumPy's BLAS).
        """
        if self.dtype != np.float32:
            return contextlib.nullcontext()
        if RECURRENT_LAYER_TYPES.intersection(layer_types):
            return self._products_on_onednn()
        if IMAGE_LAYER_TYPES.intersection(layer_types):
            return _openblas.quiet()
        return contextlib.nullcontext()

    @contextlib.contextmanager
    def _products_on_onednn(self):
        """The calling thread runs its products on oneDNN in this block."""
        self._scratch  # noqa: B018 - makes the thread's state
        state = self._per_thread
        outer = getattr(state, 'onednn_products', None)
        # fixed operands by (address, shape, strides): their packed copies
        state.onednn_products = {} if outer is None else outer
        try:
            with _openblas.quiet():
                yield
        finally:
            state.onednn_products = outer

    def _fixed_operands(self) -> dict | None:
        """The calling thread's fixed operands (None: products on NumPy)."""
        return getattr(getattr(self, '_per_thread', None), 'onednn_products', None)

    @contextlib.contextmanager
    def fixed_operand(self, array):
        """Products by ``array`` use a packed copy of it made in the block.

        Only in passes that run products on oneDNN (see ``network_pass``);
        elsewhere this does nothing.
        """
        fixed = self._fixed_operands()
        key = _operand_key(array)
        if fixed is None or key is None or key in fixed:
            yield
            return
        # a number no open block has (it names the packed copies: blocks
        # may end in any order, and the next block must not take the
        # number of one still open), the lowest so that the copies' memory
        # is reused; and plan key -> the packed copy's address
        taken = {number for number, _ in fixed.values()}
        number = next(n for n in range(len(fixed) + 1) if n not in taken)
        fixed[key] = (number, {})
        try:
            yield
        finally:
            del fixed[key]

    def dot_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        if not self._onednn_product(a, b, out, transa, transb, accumulate=False):
            with self._product_threads(a, out, transa):
                super().dot_mm(a, b, out, transa, transb)

    def dot_add_mm(self, a, b, out, transa: bool = False, transb: bool = False) -> None:
        if not self._onednn_product(a, b, out, transa, transb, accumulate=True):
            with self._product_threads(a, out, transa):
                super().dot_add_mm(a, b, out, transa, transb)

    def _onednn_product(self, a, b, out, transa, transb, accumulate) -> bool:
        """Run the product on oneDNN where the pass says so; whether it did.

        Float32 matrices of matching shapes, none empty, with positive
        strides, ``out`` writeable and sharing no memory with ``a`` or
        ``b``, of at least :data:`ONEDNN_PRODUCT_MIN` multiply-adds;
        anything else (and a shape oneDNN cannot run) is NumPy's.
        """
        fixed = self._fixed_operands()
        if fixed is None:
            return False
        left = a.T if transa else a
        right = b.T if transb else b
        if not _matmul_operands(left, right, out):
            return False
        if out.size * left.shape[1] < ONEDNN_PRODUCT_MIN:
            return False
        number, packed = fixed.get(_operand_key(b), (None, None))
        key = (
            'matmul', left.shape, left.strides, right.shape, right.strides,
            out.strides, accumulate, packed is not None,
        )  # fmt: skip
        plan = self._plan(
            key,
            lambda: MatmulPlan(
                self._lib, left, right, out, accumulate, packed is not None
            ),
        )
        if plan is None:
            return False
        with plan.lock:
            if packed is None:
                weights = _address(right)
            else:
                weights = packed.get(key)
                if weights is None:
                    # one buffer per open block and plan
                    name = f'onednn_packed_{number}_{len(packed)}'
                    weights = packed[key] = self._aligned(name, plan.b_bytes)
                    reorder = plan.pack.primitive
                    reorder.run((_address(right), weights), self._scratchpad(reorder))
            plan.primitive.run(
                (_address(left), weights, _address(out)),
                self._scratchpad(plan.primitive),
            )
        return True

    def _product_threads(self, a, out, transa: bool):
        """All OpenBLAS threads for a big product (see ``network_pass``).

        Not in passes that run products on oneDNN: OpenBLAS's threads would
        spin through the oneDNN products that follow.
        """
        inner = a.shape[0] if transa else a.shape[-1]
        if out.size * inner <= SMALL_PRODUCT or self._fixed_operands() is not None:
            return contextlib.nullcontext()
        return _openblas.all_threads()

    # ------------------------------------------------- elementwise work

    def _elementwise(self, kind: str, *arrays):
        """The plan for ``kind`` on ``arrays``, or None where NumPy runs.

        ``arrays`` are the primitive's operands in order, the result last.
        oneDNN runs C-contiguous float32 arrays of one shape and at least
        :data:`ELEMENTWISE_MIN` elements, the result writeable, any two of
        them the same array or disjoint.
        """
        if self.dtype != np.float32 or not _dense_float32(arrays, ELEMENTWISE_MIN):
            return None
        if not arrays[-1].flags.writeable or _overlapping(arrays):
            return None
        size = arrays[0].size
        return self._plan(
            ('elementwise', kind, size), lambda: ElementwisePlan(self._lib, kind, size)
        )

    def _run_elementwise(self, plan, *arrays) -> None:
        self._run_elementwise_at(plan, *[_address(a) for a in arrays])

    def _run_elementwise_at(self, plan, *pointers) -> None:
        with plan.lock:
            plan.primitive.run(pointers, self._scratchpad(plan.primitive))

    def rel_deriv(self, x, y, dy, dx) -> None:
        self._derivative('relu_deriv', super().rel_deriv, x, y, dy, dx)

    def sigmoid_deriv(self, x, y, dy, dx) -> None:
        self._derivative('sigmoid_deriv', super().sigmoid_deriv, x, y, dy, dx)

    def _derivative(self, kind: str, numpy_op, x, y, dy, dx) -> None:
        """A derivative from the outputs on oneDNN, else ``numpy_op``."""
        plan = self._elementwise(kind, y, dy, dx)
        if plan is None:
            numpy_op(x, y, dy, dx)
        else:
            self._run_elementwise(plan, y, dy, dx)

    # ------------------------------------------------- parameter updates

    def sgd_update(self, parameters, gradients, learning_rate: float) -> None:
        plans = self._update_plans(
            [parameters], [gradients], [learning_rate], 'scaled_add'
        )
        if plans is None:
            super().sgd_update(parameters, gradients, learning_rate)
            return
        # NumPy: p + g * -lr; here 1 * p + -lr * g, the same bits
        self._scaled_add(plans[0], parameters, 1.0, gradients, -learning_rate)

    def momentum_update(
        self, parameters, gradients, velocity, learning_rate: float, momentum: float
    ) -> None:
        plans = self._update_plans(
            [parameters, velocity], [gradients], [learning_rate, momentum],
            'scaled_add', 'add',
        )  # fmt: skip
        if plans is None:
            super().momentum_update(
                parameters, gradients, velocity, learning_rate, momentum
            )
            return
        # NumPy: v * mu + g * -lr, then p + v
        self._scaled_add(plans[0], velocity, momentum, gradients, -learning_rate)
        self._run_elementwise(plans[1], parameters, velocity, parameters)

    def nesterov_update(
        self, parameters, gradients, velocity, learning_rate: float
    ) -> None:
        plans = self._update_plans(
            [parameters, velocity], [gradients], [learning_rate], 'scaled_add'
        )
        if plans is None:
            super().nesterov_update(parameters, gradients, velocity, learning_rate)
            return
        # NumPy: t = g * -lr, v + t, p + t
        self._scaled_add(plans[0], velocity, 1.0, gradients, -learning_rate)
        self._scaled_add(plans[0], parameters, 1.0, gradients, -learning_rate)

    def _update_plans(self, written, read, scalars, *kinds):
        """The plans of ``kinds`` for an update, or None where NumPy runs.

        oneDNN runs updates of float32 C-contiguous arrays of one shape and
        at least :data:`ELEMENTWISE_MIN` elements, no two of them sharing
        memory, the ``written`` ones writeable, with Python floats or ints
        below :data:`ONEDNN_SCALAR_BOUNDS` in magnitude as scalars: NumPy
        computes with those in float32, rounded as oneDNN's scales are, on
        every version (NumPy 2 rounds any Python scalar to float32, NEP 50;
        NumPy 1.x only such small ones, by their value). Any other scalar
        takes NumpyHandler's update: a NumPy float64 makes NumPy compute in
        float64, and so does a float of 3.4e38 or more on NumPy 1.x; NumPy
        1.x rounds bigger ints otherwise, or refuses them; a NaN scalar
        would give another NaN than NumPy's (NaN and infinities fail the
        bound).
        """
        arrays = written + read
        if self.dtype != np.float32 or not _dense_float32(arrays, ELEMENTWISE_MIN):
            return None
        for s in scalars:  # written 'not abs(s) < bound' so that NaN fails it
            bound = ONEDNN_SCALAR_BOUNDS.get(type(s))
            if bound is None or not abs(s) < bound:
                return None
        if not all(a.flags.writeable for a in written):
            return None
        if len({_address(a) for a in arrays}) < len(arrays) or _overlapping(arrays):
            return None
        size = arrays[0].size
        plans = [
            self._plan(
                ('elementwise', kind, size),
                lambda kind=kind: ElementwisePlan(self._lib, kind, size),
            )
            for kind in kinds
        ]
        return None if None in plans else plans

    def _scaled_add(self, plan, a, alpha: float, b, beta: float) -> None:
        """``a = alpha * a + beta * b`` (both products rounded, as NumPy's)."""
        scales = self._buffer('onednn_scales', (2,), np.float32)
        scales[0], scales[1] = alpha, beta  # rounded to float32 as NumPy does
        scale = _address(scales)
        self._run_elementwise_at(
            plan, _address(a), _address(b), _address(a), scale, scale + 4
        )

    def _add_into(self, target, source) -> None:
        """``target += source`` for a C-contiguous ``source``."""
        plan = self._elementwise('add', target, source, target)
        if plan is None:
            _conv._add_into(target, source)
        else:
            self._run_elementwise(plan, target, source, target)

    # ---------------------------------------------------------- convolution

    def keeps_conv_columns(self, out_cells: int) -> bool:
        """No columns are kept for float32 (oneDNN needs none)."""
        if self.dtype == np.float32:
            return False
        return super().keeps_conv_columns(out_cells)

    def _conv_plan(self, inputs, weights, outputs, padding, stride, read, written):
        """The plan, or None where NumpyHandler's op must run.

        ``read`` and ``written``: the op's other operands, with the shapes
        they must have (``_conforming``; ``outputs`` is among them).
        """
        if not self._checked((inputs, weights, outputs), read, written):
            return None
        # the plan's padding on the bottom and right follows from the
        # outputs: sizes breaking the contract would compute with another
        check_image_geometry(
            'convolution', inputs.shape[1:3], weights.shape[1:3], padding, stride,
            outputs.shape[1:3],
        )  # fmt: skip
        top, _, left, _ = padding_sides(padding)
        stride = tuple(int(s) for s in stride)
        key = ('conv', inputs.shape, weights.shape, outputs.shape, top, left, stride)
        return self._plan(
            key,
            lambda: ConvPlan(
                self._lib,
                inputs.shape,
                weights.shape,
                outputs.shape,
                (top, left),
                stride,
            ),
        )

    def conv2d_forward_batch(
        self,
        inputs,
        weights,
        bias,
        outputs,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        *,
        columns=None,
        activation: str = 'linear',
    ) -> None:
        activate = self._activation_after(activation)
        plan = self._conv_plan(
            inputs, weights, outputs, padding, stride,
            [(bias, np.shape(weights)[:1])], [(outputs, np.shape(outputs))],
        )  # fmt: skip
        if plan is None:
            super().conv2d_forward_batch(
                inputs,
                weights,
                bias,
                outputs,
                padding,
                stride,
                columns=columns,
                activation=activation,
            )
            return
        x = self._dense('onednn_x', inputs)
        y = self._dense('onednn_y', outputs, copy_in=False)
        b = self._dense('onednn_b', bias)
        weights = self._dense('onednn_w_user', weights)  # once, for both uses
        # a ReLU fused into the convolution where it gives what rel gives:
        # the handler's rel is NumPy's (not a subclass's or an instance's
        # own), oneDNN has an exact fused kernel, and the outputs are finite
        # (oneDNN's ReLU turns NaN into 0)
        # (the bound is not computed where oneDNN is known to lack the fused
        # kernel, the fused primitive not made where the bound fails)
        fuse = (
            activation == 'rel'
            and getattr(self.rel, '__func__', None) is NumpyHandler.rel
            and not plan.relu_unavailable
            and _bounded(x, weights, b)
        )
        with plan.lock:
            forward = (plan.forward_relu if fuse else None) or plan.forward
            fused = forward is not plan.forward
            w = self._weights_in(forward, weights)
            forward.run(
                (_address(x), w, _address(b), _address(y)),
                self._scratchpad(forward),
            )
        if y is not outputs:
            np.copyto(outputs, y)
        if activate is not None and not fused:
            activate(outputs)

    def conv2d_backward_batch(
        self,
        inputs,
        weights,
        padding: int | tuple[int, int, int, int],
        stride: tuple[int, int],
        in_deltas,
        out_deltas,
        weight_deltas,
        bias_deltas,
        *,
        columns=None,
        skip_in_deltas: bool = False,
        overwrite_in_deltas: bool = False,
    ) -> None:
        filters = np.shape(weights)
        written = [(weight_deltas, filters), (bias_deltas, filters[:1])]
        if not skip_in_deltas:
            written.append((in_deltas, np.shape(inputs)))
        plan = self._conv_plan(
            inputs, weights, out_deltas, padding, stride, [], written
        )
        if plan is None:
            # In float32 the forward pass may have run on oneDNN, which
            # leaves ``columns`` untouched: NumPy's op must not read them.
            super().conv2d_backward_batch(
                inputs,
                weights,
                padding,
                stride,
                in_deltas,
                out_deltas,
                weight_deltas,
                bias_deltas,
                columns=None if self.dtype == np.float32 else columns,
                skip_in_deltas=skip_in_deltas,
                overwrite_in_deltas=overwrite_in_deltas,
            )
            return
        x = self._dense('onednn_x', inputs)
        dy = self._dense('onednn_y', out_deltas)
        with plan.lock:
            self._conv_gradients(plan, x, dy, weight_deltas, bias_deltas)
            if not skip_in_deltas:
                data = plan.backward_data
                dx = self._delta_target(in_deltas, overwrite_in_deltas, dy, weights)
                data.run(
                    (_address(dy), self._weights_in(data, weights), _address(dx)),
                    self._scratchpad(data),
                )
                self._deliver(in_deltas, dx, overwrite_in_deltas)

    def _delta_target(self, in_deltas, overwrite: bool, *read):
        """Where a primitive writes input deltas: ``in_deltas`` or scratch.

        ``in_deltas`` itself when the op overwrites them, they are
        C-contiguous and share no memory with the arrays the primitive
        reads; else a scratch array, for :meth:`_deliver`.
        """
        if (
            overwrite
            and in_deltas.flags.c_contiguous
            and not any(np.may_share_memory(in_deltas, r) for r in read)
        ):
            return in_deltas
        return self._buffer('onednn_dx', in_deltas.shape)

    def _deliver(self, in_deltas, dx, overwrite: bool) -> None:
        """Copy or add the deltas ``dx`` into ``in_deltas`` (unless they are it)."""
        if dx is in_deltas:
            return
        if overwrite:
            np.copyto(in_deltas, dx)
        else:
            self._add_into(in_deltas, dx)

    def _conv_gradients(self, plan, x, dy, weight_deltas, bias_deltas) -> None:
        """Overwrite ``weight_deltas`` and ``bias_deltas``."""
        grads = plan.backward_weights
        db = self._dense('onednn_b', bias_deltas, copy_in=False)
        dw = self._dense('onednn_w_user', weight_deltas, copy_in=False)
        if grads.reorder is None:
            target = _address(dw)
        else:
            target = self._aligned('onednn_w', grads.weights_bytes)
        grads.run(
            (_address(x), _address(dy), target, _address(db)), self._scratchpad(grads)
        )
        if grads.reorder is not None:
            grads.reorder.primitive.run(
                (target, _address(dw)), self._scratchpad(grads.reorder.primitive)
            )
        if dw is not weight_deltas:
            np.copyto(weight_deltas, dw)
        if db is not bias_deltas:
            np.copyto(bias_deltas, db)
