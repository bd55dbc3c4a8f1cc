"""oneDNN primitives for one shape of convolution, pooling or elementwise work.

A plan holds the primitive descriptors and primitives of one geometry
(batch size, image, kernel, padding, stride) for float32 NHWC images
(brainstorm's own layout, ``(N, H, W, C)``; oneDNN's dims are ``(N, C,
H, W)`` with the strides of NHWC). All primitives are made with the plan
(a shape oneDNN cannot run fails at once). Weights are ``(F, kh, kw, C)``,
oneDNN's ``ohwi``; the convolution chooses its own weight format, and the
plan reorders the network's weights into it (and the weight gradient back)
through reorder primitives.

Every primitive gets a user scratchpad (the handler's scratch memory), so
oneDNN allocates nothing while it runs.
"""

from __future__ import annotations

import ctypes
import math
import threading

import numpy as np

from brainstorm.handlers.onednn import _dnnl as d

__all__ = [
    'EXACT_RELU_IMPLEMENTATIONS',
    'ConvPlan',
    'MatmulPlan',
    'ElementwisePlan',
    'PoolPlan',
    'image_md',
    'dense_md',
]


def dense_md(lib, shape, dtype=np.float32):
    """The descriptor of a C-contiguous array of ``shape``."""
    strides = [math.prod(shape[i + 1 :]) for i in range(len(shape))]
    return lib.md(shape, strides, dtype)


def image_md(lib, shape, dtype=np.float32):
    """The descriptor of C-contiguous ``(N, H, W, C)`` images."""
    n, h, w, c = shape
    return lib.md((n, c, h, w), (h * w * c, 1, w * c, c), dtype)


def _weights_md(lib, shape):
    """The descriptor of C-contiguous ``(F, kh, kw, C)`` weights."""
    f, kh, kw, c = shape
    return lib.md((f, c, kh, kw), (kh * kw * c, 1, kw * c, c), np.float32)


def _create(lib, name: str, *args) -> ctypes.c_void_p:
    """Create a primitive descriptor with ``name``; its handle."""
    return lib._make(name, lib.engine, *args)


class _Reorder:
    """A reorder primitive from ``source`` to ``target`` (descriptors)."""

    def __init__(self, lib, source, target):
        pd = lib._make(
            'dnnl_reorder_primitive_desc_create',
            source.handle,
            lib.engine,
            target.handle,
            lib.engine,
            None,
        )
        self.primitive = d.Primitive(lib, pd, {d.ARG_SRC: source, d.ARG_DST: target})
        self.target_bytes = target.size


#: the convolution implementations (name prefixes) whose ReLU post-op is
#: NumPy's ``maximum(x, 0)`` bit for bit on finite values: oneDNN's JIT
#: kernels. Its GEMM-based and reference kernels give -0.0 for negative
#: values (``alpha * x`` with ``alpha = 0``), so those are not fused.
EXACT_RELU_IMPLEMENTATIONS = ('jit:', 'brg')


class ConvPlan:
    """Convolution forward, backward-data and backward-weights of one shape.

    Args:
        lib: the loaded library (``_dnnl.library()``).
        x_shape: ``(N, H, W, C)`` of the inputs.
        w_shape: ``(F, kh, kw, C)`` of the weights.
        y_shape: ``(N, OH, OW, F)`` of the outputs.
        padding: ``(top, left)``, the zero cells above and left of the
            image (those below and right follow from the output size).
        stride: ``(sy, sx)``.
    """

    def __init__(self, lib, x_shape, w_shape, y_shape, padding, stride):
        self.lib = lib
        self.lock = threading.Lock()
        n, h, w, c = x_shape
        f, kh, kw, _ = w_shape
        oh, ow = y_shape[1:3]
        self.x_md = image_md(lib, x_shape)
        self.y_md = image_md(lib, y_shape)
        self.user_w_md = _weights_md(lib, w_shape)
        self.b_md = dense_md(lib, (f,))
        self.any_w_md = lib.md_any((f, c, kh, kw), np.float32)
        self.geometry = (
            d.dims(stride),
            d.dims((0, 0)),
            d.dims(padding),
            # the right padding that gives the (floored) output size: may be
            # negative, which oneDNN accepts
            d.dims(
                (
                    (oh - 1) * stride[0] + kh - h - padding[0],
                    (ow - 1) * stride[1] + kw - w - padding[1],
                )
            ),
        )
        self.attr = lib.attr()
        self.forward = self._forward_primitive(self.attr)
        # all made now: a shape oneDNN cannot run fails here, not later
        self._backward_data: d.Primitive | None = None
        self._backward_weights: d.Primitive | None = None
        self.backward_data, self.backward_weights  # noqa: B018
        self.relu_attr: d.Attributes | None = None  # made with forward_relu
        self._forward_relu: d.Primitive | None | bool = False

    @property
    def forward_relu(self) -> d.Primitive | None:
        """The forward primitive with a ReLU post-op, made on first use.

        Call it holding ``lock``. None where oneDNN has no implementation
        of it for this shape, or where the one it chose is not among
        :data:`EXACT_RELU_IMPLEMENTATIONS`.
        """
        if self._forward_relu is False:
            self.relu_attr = self.lib.relu_attr()
            try:
                primitive = self._forward_primitive(self.relu_attr)
            except d.OneDnnError:
                primitive = None
            if primitive is not None and not primitive.implementation.startswith(
                EXACT_RELU_IMPLEMENTATIONS
            ):
                primitive = None
            self._forward_relu = primitive
        return self._forward_relu  # type: ignore[return-value]

    @property
    def relu_unavailable(self) -> bool:
        """Whether :attr:`forward_relu` was found to be None."""
        return self._forward_relu is None

    def _forward_primitive(self, attr) -> d.Primitive:
        """The forward primitive with the attributes ``attr``."""
        pd = _create(
            self.lib,
            'dnnl_convolution_forward_primitive_desc_create',
            d.FORWARD_TRAINING,
            d.CONVOLUTION_DIRECT,
            self.x_md.handle,
            self.any_w_md.handle,
            self.b_md.handle,
            self.y_md.handle,
            *self.geometry,
            attr.handle,
        )
        return self._primitive(
            pd,
            {
                d.ARG_SRC: self.x_md,
                d.ARG_WEIGHTS: d.QUERY_WEIGHTS_MD,
                d.ARG_BIAS: self.b_md,
                d.ARG_DST: self.y_md,
            },
            d.QUERY_WEIGHTS_MD,
        )

    def _primitive(self, pd, args, weights_query) -> d.Primitive:
        """A primitive of ``pd``; its weights argument in the format chosen.

        ``args`` maps argument indices to descriptors, or to the query of
        the weights' descriptor, which the primitive answers. A reorder
        from or to the network's weights format is kept for it in
        ``reorders[weights_query]`` if the formats differ (else None).
        """
        chosen = self.lib.query_md(pd, weights_query)
        full = {k: (chosen if isinstance(v, int) else v) for k, v in args.items()}
        primitive = d.Primitive(self.lib, pd, full)
        if chosen == self.user_w_md:
            reorder = None
        elif weights_query == d.QUERY_DIFF_WEIGHTS_MD:
            reorder = _Reorder(self.lib, chosen, self.user_w_md)
        else:
            reorder = _Reorder(self.lib, self.user_w_md, chosen)
        primitive.reorder = reorder  # type: ignore[attr-defined]
        primitive.weights_bytes = chosen.size  # type: ignore[attr-defined]
        return primitive

    @property
    def backward_data(self) -> d.Primitive:
        """The backward-data primitive."""
        if self._backward_data is None:
            pd = _create(
                self.lib,
                'dnnl_convolution_backward_data_primitive_desc_create',
                d.CONVOLUTION_DIRECT,
                self.x_md.handle,
                self.any_w_md.handle,
                self.y_md.handle,
                *self.geometry,
                self.fwd_pd_handle,
                self.attr.handle,
            )
            self._backward_data = self._primitive(
                pd,
                {
                    d.ARG_DIFF_DST: self.y_md,
                    d.ARG_WEIGHTS: d.QUERY_WEIGHTS_MD,
                    d.ARG_DIFF_SRC: self.x_md,
                },
                d.QUERY_WEIGHTS_MD,
            )
        return self._backward_data

    @property
    def backward_weights(self) -> d.Primitive:
        """The backward-weights primitive."""
        if self._backward_weights is None:
            pd = _create(
                self.lib,
                'dnnl_convolution_backward_weights_primitive_desc_create',
                d.CONVOLUTION_DIRECT,
                self.x_md.handle,
                self.any_w_md.handle,
                self.b_md.handle,
                self.y_md.handle,
                *self.geometry,
                self.fwd_pd_handle,
                self.attr.handle,
            )
            self._backward_weights = self._primitive(
                pd,
                {
                    d.ARG_SRC: self.x_md,
                    d.ARG_DIFF_DST: self.y_md,
                    d.ARG_DIFF_WEIGHTS: d.QUERY_DIFF_WEIGHTS_MD,
                    d.ARG_DIFF_BIAS: self.b_md,
                },
                d.QUERY_DIFF_WEIGHTS_MD,
            )
        return self._backward_weights

    @property
    def fwd_pd_handle(self) -> ctypes.c_void_p:
        """The forward primitive descriptor (the hint of the backward ones)."""
        return self.forward.pd


class PoolPlan:
    """Max or average pooling forward and backward of one shape.

    Args:
        lib: the loaded library.
        kind: ``'max'`` or ``'avg'`` (average over in-bounds cells).
        x_shape: ``(N, H, W, C)`` of the inputs.
        y_shape: ``(N, OH, OW, C)`` of the outputs.
        window: ``(kh, kw)``.
        padding: ``(top, left)``, the padding cells above and left of the
            image (those below and right follow from the output size).
        stride: ``(sy, sx)``.
    """

    def __init__(self, lib, kind, x_shape, y_shape, window, padding, stride):
        self.lib = lib
        self.lock = threading.Lock()
        h, w = x_shape[1:3]
        oh, ow = y_shape[1:3]
        self.x_md = image_md(lib, x_shape)
        self.y_md = image_md(lib, y_shape)
        self.alg = d.POOLING_MAX if kind == 'max' else d.POOLING_AVG_EXCLUDE_PADDING
        self.geometry = (
            d.dims(stride),
            d.dims(window),
            d.dims((0, 0)),
            d.dims(padding),
            d.dims(
                (
                    (oh - 1) * stride[0] + window[0] - h - padding[0],
                    (ow - 1) * stride[1] + window[1] - w - padding[1],
                )
            ),
        )
        self.attr = lib.attr()
        pd = _create(
            lib,
            'dnnl_pooling_forward_primitive_desc_create',
            d.FORWARD_TRAINING,
            self.alg,
            self.x_md.handle,
            self.y_md.handle,
            *self.geometry,
            self.attr.handle,
        )
        args = {d.ARG_SRC: self.x_md, d.ARG_DST: self.y_md}
        workspace = lib.query_md(pd, d.QUERY_WORKSPACE_MD)
        self.workspace_bytes = workspace.size
        if self.workspace_bytes:
            args[d.ARG_WORKSPACE] = workspace
            # the index of each maximum in its window (u * kw + v), one per
            # output, as unsigned bytes or int32
            self.workspace_dtype = np.dtype(
                np.uint8 if self.workspace_bytes == math.prod(y_shape) else np.int32
            )
        self.workspace = workspace
        self.forward = d.Primitive(lib, pd, args)
        self._backward: d.Primitive | None = None
        self.backward  # noqa: B018 - made now, like the forward primitive

    @property
    def backward(self) -> d.Primitive:
        """The backward primitive."""
        if self._backward is None:
            pd = _create(
                self.lib,
                'dnnl_pooling_backward_primitive_desc_create',
                self.alg,
                self.x_md.handle,
                self.y_md.handle,
                *self.geometry,
                self.forward.pd,
                self.attr.handle,
            )
            args = {d.ARG_DIFF_DST: self.y_md, d.ARG_DIFF_SRC: self.x_md}
            if self.workspace_bytes:
                args[d.ARG_WORKSPACE] = self.workspace
            self._backward = d.Primitive(self.lib, pd, args)
        return self._backward


class ElementwisePlan:
    """A derivative from the outputs, a sum or a scaled sum of ``size`` floats.

    All operands are C-contiguous float32 arrays of ``size`` elements, seen
    as one axis. oneDNN runs them on all its threads; the results are
    NumPy's bit for bit (``dy * ((1 - y) * y)``; ``a + b``; ``dy * (y >
    0)``, except where ``y`` is NaN: there oneDNN gives ``dy``, NumPy 0).

    Args:
        lib: the loaded library.
        kind: ``'relu_deriv'`` or ``'sigmoid_deriv'`` (arguments ``y, dy,
            dx``), ``'add'`` (``a, b, out``: ``out = a + b``) or
            ``'scaled_add'`` (``a, b, out, alpha, beta``: ``out = alpha * a +
            beta * b``, ``alpha`` and ``beta`` the addresses of float32
            scalars; NumPy's ``a * alpha + b * beta`` bit for bit, each
            product rounded).
        size: the number of elements.
    """

    _BACKWARD = {
        'relu_deriv': d.ELTWISE_RELU_USE_DST_FOR_BWD,
        'sigmoid_deriv': d.ELTWISE_LOGISTIC_USE_DST_FOR_BWD,
    }

    def __init__(self, lib, kind: str, size: int):
        self.lock = threading.Lock()
        self.md = md = dense_md(lib, (size,))
        self.attr = lib.attr()
        zero = ctypes.c_float(0.0)
        if kind in ('add', 'scaled_add'):
            args = {d.ARG_SRC: md, d.ARG_SRC_1: md, d.ARG_DST: md}
            if kind == 'scaled_add':
                self.attr = lib.scales_attr(d.ARG_SRC, d.ARG_SRC_1)
                self.scale_md = scale = dense_md(lib, (1,))
                args[d.ARG_ATTR_SCALES | d.ARG_SRC] = scale
                args[d.ARG_ATTR_SCALES | d.ARG_SRC_1] = scale
            pd = _create(
                lib,
                'dnnl_binary_primitive_desc_create',
                d.BINARY_ADD,
                md.handle,
                md.handle,
                md.handle,
                self.attr.handle,
            )
            self.primitive = d.Primitive(lib, pd, args)
            return
        forward_pd = _create(
            lib,
            'dnnl_eltwise_forward_primitive_desc_create',
            d.FORWARD_TRAINING,
            self._BACKWARD[kind],
            md.handle,
            md.handle,
            zero,
            zero,
            self.attr.handle,
        )
        # the forward primitive's descriptor is the backward one's hint;
        # it is kept as long as the plan (oneDNN may refer to the hint)
        self.hint = d.Primitive(lib, forward_pd, {d.ARG_SRC: md, d.ARG_DST: md})
        pd = _create(
            lib,
            'dnnl_eltwise_backward_primitive_desc_create',
            self._BACKWARD[kind],
            md.handle,
            md.handle,
            md.handle,
            zero,
            zero,
            self.hint.pd,
            self.attr.handle,
        )
        self.primitive = d.Primitive(
            lib, pd, {d.ARG_DST: md, d.ARG_DIFF_DST: md, d.ARG_DIFF_SRC: md}
        )


class MatmulPlan:
    """``out (+)= a . b`` for float32 matrices of given shapes and strides.

    Args:
        lib: the loaded library.
        a, b, out: arrays whose shapes and strides (of ``a`` and ``b`` as
            multiplied, i.e. transposed views where the product transposes)
            the plan is made for; their data is given to each run.
        accumulate: add the product to ``out`` (a sum post-op) instead of
            overwriting it.
        packed: let oneDNN choose the layout of ``b`` (a packed one, much
            faster for a ``b`` used in many products); each run then takes
            ``b`` in that layout, which :attr:`pack` makes from the array.
    """

    def __init__(self, lib, a, b, out, accumulate: bool, packed: bool):
        self.lock = threading.Lock()
        self.a_md, self.user_b_md, self.out_md = (
            lib.md(x.shape, [s // x.itemsize for s in x.strides], np.float32)
            for x in (a, b, out)
        )
        b_md = lib.md_any(b.shape, np.float32) if packed else self.user_b_md
        self.attr = lib.attr()
        if accumulate:
            lib.add_sum_post_op(self.attr)
        pd = _create(
            lib,
            'dnnl_matmul_primitive_desc_create',
            self.a_md.handle,
            b_md.handle,
            None,
            self.out_md.handle,
            self.attr.handle,
        )
        chosen = lib.query_md(pd, d.QUERY_WEIGHTS_MD)
        self.primitive = d.Primitive(
            lib,
            pd,
            {d.ARG_SRC: self.a_md, d.ARG_WEIGHTS: chosen, d.ARG_DST: self.out_md},
        )
        self.b_bytes = chosen.size
        self.pack = _Reorder(lib, self.user_b_md, chosen) if packed else None
