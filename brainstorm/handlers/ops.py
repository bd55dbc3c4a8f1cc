"""The op table: every handler op written once.

Each :class:`~brainstorm.handlers.op_spec.Op` row states an op's name,
its parameters (the signature every handler implements, written as in a
``def``), which operands it writes, whether an output may be the very same
array as an input or must overlap no operand at all, the rule that checks
its operands, and its contract text. From this table

* :class:`~brainstorm.handlers.base_handler.Handler` gets its abstract
  methods, with these signatures and docstrings
  (:func:`~brainstorm.handlers.op_spec.install_contract`);
* :class:`~brainstorm.handlers.debug_handler.DebugHandler` gets every op as
  a method that checks the operands by the row's ``check`` rule before
  calling the wrapped handler (:func:`~brainstorm.handlers.op_spec.op_method`);
* the CUDA handler gets its elementwise ops from this table and its kernel
  table (``brainstorm.handlers.cuda.kernels.ELEMENTWISE``);
* ``tests/handlers/test_handler_signatures.py`` checks every handler
  against it.

:class:`~brainstorm.handlers.numpy_handler.NumpyHandler` is written by
hand: it is the executable reference.

**Operand kinds** follow from the parameter names (scalars, flags, ...:
:data:`~brainstorm.handlers.op_spec.KINDS`); any other one is an array.

**Check rules** (the row's ``check``): ``'same'``, all array operands have
one shape (the ``_t``, ``_tt`` and ``_st`` ops and the activations);
``'mv'``, a matrix ``m``, a vector ``v`` of shape ``(1, N)`` or ``(M, 1)``
and ``out`` of ``m``'s shape (the ``_mv`` ops); ``'mv_full'``, the same
but ``v`` may also be a whole matrix; ``'dot'``, the matrix product of the
``_mm`` ops. Rows whose check follows from the op-name grammar leave
``check`` empty. Every other rule names an op-specific check of the debug
handler (``DebugHandler._check_<rule>``).

Adding an elementwise op (see docs/custom_handler.rst) takes a row here,
its NumPy line in ``numpy_handler.py`` and its CUDA statement in the
kernel table.
"""

from __future__ import annotations

from brainstorm.handlers.op_spec import (
    KINDS,
    Op,
    grammar_check,
    install_contract,
    install_ops,
    op_method,
    signature,
)
from brainstorm.handlers.ops_layers import (
    EARLY_SECTIONS,
    LAYER_SECTIONS,
    UPDATE_SECTIONS,
)

__all__ = [
    'Op',
    'OPS',
    'KINDS',
    'SECTIONS',
    'grammar_check',
    'signature',
    'op_method',
    'install_ops',
    'install_contract',
]

#: The table, each op once, by section.
SECTIONS: dict[str, tuple[Op, ...]] = {
    'allocation': (
        Op(
            'allocate',
            'shape: tuple[int, ...]',
            """Return a new array of ``shape`` and the handler dtype.

            The content is arbitrary (the NumPy handler gives zeros); use
            :meth:`zeros` where it matters.
            """,
            returns='',
            writes=(),
            check='shape',
        ),
        Op(
            'zeros',
            'shape: tuple[int, ...]',
            'Return a new array of ``shape`` filled with 0.',
            returns='',
            writes=(),
            check='shape',
        ),
        Op(
            'ones',
            'shape: tuple[int, ...]',
            'Return a new array of ``shape`` filled with 1.',
            returns='',
            writes=(),
            check='shape',
        ),
        Op(
            'create_from_numpy',
            'arr',
            """Return a new handler array holding a copy of the NumPy ``arr``.

            The values are cast to the handler dtype; the shape is kept.
            """,
            returns='',
            writes=(),
            check='numpy',
        ),
        Op(
            'get_numpy_copy',
            'mem',
            """Return a new NumPy array (handler dtype) with the content of ``mem``.

            Changing the result never changes ``mem``.
            """,
            returns='',
            writes=(),
            check='same',
        ),
        Op(
            'set_from_numpy',
            'mem, arr',
            """Overwrite the handler array ``mem`` with the NumPy ``arr``.

            Both have the same shape; the values are cast to the handler dtype.
            """,
            writes=('mem',),
            check='numpy',
        ),
    ),
    'copy/fill': (
        Op(
            'copy_to',
            'src, dest',
            """Copy ``src`` into ``dest`` (note the order: source first).

            Args:
                src: tensor.
                dest: tensor of the same shape, overwritten.
            """,
            writes=('dest',),
            may_be=(('dest', 'src'),),
            check='same',
        ),
        Op(
            'copy_to_if',
            'src, dest, cond',
            """Copy ``src`` into ``dest`` where ``cond`` is non-zero.

            Args:
                src: tensor.
                dest: tensor of the same shape; elements where ``cond == 0``
                    keep their value.
                cond: tensor of the same shape.
            """,
            writes=('dest',),
            check='same',
        ),
        Op(
            'fill',
            'mem, val: float',
            'Set every element of the tensor ``mem`` to the scalar ``val``.',
            writes=('mem',),
            check='same',
        ),
        Op(
            'fill_if',
            'mem, val: float, cond',
            """Set the elements of ``mem`` where ``cond`` is non-zero to ``val``.

            Args:
                mem: tensor, changed in place.
                val: scalar.
                cond: tensor of the same shape as ``mem``.
            """,
            writes=('mem',),
            check='same',
        ),
        Op(
            'fill_gaussian',
            'mean: float, std: float, out',
            """Fill ``out`` with samples of N(mean, std**2) drawn from ``self.rnd``.

            Args:
                mean: scalar.
                std: scalar, ``>= 0``.
                out: tensor, overwritten.
            """,
            check='gaussian',
        ),
        Op(
            'generate_probability_mask',
            'mask, probability: float',
            """Fill ``mask`` with 1 with ``probability`` and 0 otherwise.

            Each element is drawn independently from ``self.rnd``.

            Args:
                mask: tensor, overwritten.
                probability: scalar in ``[0, 1]``.
            """,
            writes=('mask',),
            check='probability',
        ),
    ),
    'checks': (
        Op(
            'is_fully_finite',
            'a',
            'Return True if the tensor ``a`` holds no NaN and no +-Inf.',
            returns='bool',
            writes=(),
            check='same',
        ),
    ),
    'math A to Z': (
        Op(
            'abs_t',
            'a, out',
            "Elementwise ``out = |a|``; ``out`` has ``a``'s shape, may alias it.",
            alias=True,
        ),
        Op(
            'add_into_if',
            'a, out, cond',
            """Elementwise ``out += a`` where ``cond`` is non-zero.

            Args:
                a: tensor.
                out: tensor of the same shape; unchanged where ``cond == 0``.
                cond: tensor of the same shape.
            """,
            check='same',
        ),
        Op(
            'add_mv',
            'm, v, out',
            """``out = m + v`` with ``v`` broadcast over ``m``.

            Args:
                m: matrix ``(M, N)``.
                v: vector ``(1, N)`` (added to every row) or ``(M, 1)`` (added to
                    every column).
                out: matrix ``(M, N)``; may alias ``m``.
            """,
            alias=True,
        ),
        Op(
            'add_st',
            's: float, t, out',
            'Elementwise ``out = t + s`` for a scalar ``s``; ``out`` may alias ``t``.',
            alias=True,
        ),
        Op(
            'add_tt',
            'a, b, out',
            'Elementwise ``out = a + b``; all of one shape, ``out`` may alias.',
            alias=True,
        ),
        Op(
            'binarize_v',
            'v, out',
            """One-hot encode class ids: ``out[i, k] = 1 if v[i, 0] == k else 0``.

            Args:
                v: vector ``(N, 1)`` of integral ids in ``[0, K)``.
                out: matrix ``(N, K)``, overwritten.
            """,
            check='binarize',
        ),
        Op(
            'broadcast_t',
            'a, axis: int, out',
            """Replicate ``a`` along ``axis`` into ``out``.

            Args:
                a: tensor with size 1 along ``axis``.
                axis: int in ``[0, out.ndim)``.
                out: tensor of ``a``'s shape except along ``axis``.
            """,
            check='broadcast',
        ),
        Op(
            'clip_t',
            'a, a_min: float, a_max: float, out',
            """Elementwise ``out = min(max(a, a_min), a_max)``.

            Args:
                a: tensor.
                a_min: scalar lower bound.
                a_max: scalar upper bound, ``>= a_min``.
                out: tensor of ``a``'s shape; may alias ``a``.
            """,
            alias=True,
            check='clip',
        ),
        Op(
            'divide_mv',
            'm, v, out',
            '``out = m / v`` with ``v`` broadcast as in :meth:`add_mv`.',
            alias=True,
        ),
        Op(
            'divide_tt',
            'a, b, out',
            'Elementwise ``out = a / b``; all of one shape, ``out`` may alias.',
            alias=True,
        ),
        Op(
            'dot_add_mm',
            'a, b, out, transa: bool = False, transb: bool = False',
            """Matrix product added to ``out``: ``out += op(a) @ op(b)``.

            Args:
                a: matrix; ``op(a)`` is ``a.T`` if ``transa`` else ``a``,
                    of shape ``(M, K)``.
                b: matrix; ``op(b)`` is ``b.T`` if ``transb`` else ``b``,
                    of shape ``(K, N)``.
                out: matrix ``(M, N)``; must not overlap ``a`` or ``b``.
                transa: bool.
                transb: bool.
            """,
            disjoint=True,
        ),
        Op(
            'dot_mm',
            'a, b, out, transa: bool = False, transb: bool = False',
            """Matrix product ``out = op(a) @ op(b)``.

            Arguments as in :meth:`dot_add_mm`.
            """,
            disjoint=True,
        ),
        Op(
            'index_m_by_v',
            'm, v, out',
            """Pick one entry per row: ``out[i, 0] = m[i, int(v[i, 0])]``.

            Args:
                m: matrix ``(N, K)``.
                v: vector ``(N, 1)`` of integral column ids in ``[0, K)``.
                out: vector ``(N, 1)``, overwritten.
            """,
            check='index',
        ),
        Op(
            'log_t',
            'a, out',
            'Elementwise natural log ``out = ln(a)``; ``out`` may alias ``a``.',
            alias=True,
        ),
        Op(
            'merge_tt',
            'a, b, out',
            """Concatenate ``a`` and ``b`` along the last axis into ``out``.

            Args:
                a: tensor ``(..., Fa)``.
                b: tensor ``(..., Fb)`` with the same leading dimensions.
                out: tensor ``(..., Fa + Fb)``, overwritten.
            """,
            check='merge',
        ),
        Op(
            'modulo_tt',
            'a, b, out',
            """Elementwise C-style remainder ``out = fmod(a, b)``.

            The result has the sign of ``a``. All of one shape, ``out`` may alias.
            """,
            alias=True,
        ),
        Op(
            'mult_add_mv',
            'm, v, out',
            """``out += m * v`` with ``v`` broadcast as in :meth:`mult_mv`.

            ``out`` is a matrix ``(M, N)`` and may alias ``m``.
            """,
            alias=True,
            check='mv_full',
        ),
        Op(
            'mult_add_st',
            's: float, t, out',
            'Elementwise ``out += s * t`` for a scalar ``s``; ``out`` may alias ``t``.',
            alias=True,
        ),
        Op(
            'mult_add_tt',
            'a, b, out',
            'Elementwise ``out += a * b``; all of one shape, ``out`` may alias.',
            alias=True,
        ),
        Op(
            'mult_mv',
            'm, v, out',
            """``out = m * v`` elementwise with ``v`` broadcast over ``m``.

            Args:
                m: matrix ``(M, N)``.
                v: vector ``(1, N)`` or ``(M, 1)`` (broadcast as in
                    :meth:`add_mv`), or a matrix ``(M, N)``.
                out: matrix ``(M, N)``; may alias ``m``.
            """,
            alias=True,
            check='mv_full',
        ),
        Op(
            'mult_st',
            's: float, t, out',
            'Elementwise ``out = s * t`` for a scalar ``s``; ``out`` may alias ``t``.',
            alias=True,
        ),
        Op(
            'mult_tt',
            'a, b, out',
            'Elementwise ``out = a * b``; all of one shape, ``out`` may alias.',
            alias=True,
        ),
        Op(
            'sign_t',
            'a, out',
            'Elementwise sign (-1, 0 or 1) of ``a``; ``out`` may alias ``a``.',
            alias=True,
        ),
        Op(
            'softmax_m',
            'm, out',
            """Softmax over each row: ``out[i] = exp(m[i] - max m[i]) / sum(...)``.

            Subtracting the row maximum keeps it finite for large inputs.

            Args:
                m: matrix ``(M, N)``.
                out: matrix ``(M, N)``; may alias ``m``.
            """,
            alias=True,
            check='softmax',
        ),
        Op(
            'split_add_tt',
            'x, out_a, out_b',
            """Undo :meth:`merge_tt`, adding the two parts to the outputs.

            ``out_a += x[..., :Fa]`` and ``out_b += x[..., Fa:]``.

            Args:
                x: tensor ``(..., Fa + Fb)``.
                out_a: tensor ``(..., Fa)``.
                out_b: tensor ``(..., Fb)``.
            """,
            writes=('out_a', 'out_b'),
            check='split',
        ),
        Op(
            'sqrt_t',
            'a, out',
            'Elementwise square root; ``out`` may alias ``a``.',
            alias=True,
        ),
        Op(
            'subtract_mv',
            'm, v, out',
            '``out = m - v`` with ``v`` broadcast as in :meth:`add_mv`.',
            alias=True,
        ),
        Op(
            'subtract_tt',
            'a, b, out',
            'Elementwise ``out = a - b``; all of one shape, ``out`` may alias.',
            alias=True,
        ),
        Op(
            'sum_t',
            'a, axis: int | None, out',
            """Sum ``a`` over ``axis`` (or over everything) into ``out``.

            Args:
                a: tensor; any shape if ``axis`` is None, else 1-D or 2-D.
                axis: None, or an axis of ``a`` (0 or 1).
                out: for ``axis=None`` an array with one element (any shape,
                    e.g. ``()``, ``(1,)`` or ``(1, 1)``); otherwise ``a``'s
                    shape without ``axis`` or with size 1 at ``axis``
                    (``(M, N)``, axis 0 -> ``(N,)`` or ``(1, N)``).
            """,
            check='sum',
        ),
    ),
    'activations': (
        Op(
            'el',
            'x, y',
            """Exponential linear unit (alpha 1): ``y = x if x > 0 else exp(x) - 1``.

            ``y`` has ``x``'s shape and may alias it.
            """,
            alias=True,
            writes=('y',),
        ),
        Op(
            'el_deriv',
            'x, y, dy, dx',
            """``dx = dy if y >= 0 else dy * (y + 1)`` (uses only ``y``).

            Args:
                x: the activation input (unused, may be None).
                y: ``el(x)``.
                dy: delta of ``y``.
                dx: delta of ``x``, overwritten; same shape, may alias ``dy``.
            """,
            alias=True,
            writes=('dx',),
            optional=('x',),
        ),
        Op(
            'linear',
            'x, y',
            """Identity ``y = x``; nothing to do if ``y`` is ``x`` itself.

            ``y`` has ``x``'s shape and may alias it.
            """,
            alias=True,
            writes=('y',),
            abstract=False,
        ),
        Op(
            'linear_deriv',
            'x, y, dy, dx',
            """``dx = dy``; nothing to do if ``dx`` is ``dy`` itself.

            Arguments as in :meth:`el_deriv`.
            """,
            alias=True,
            writes=('dx',),
            optional=('x',),
            abstract=False,
        ),
        Op(
            'rel',
            'x, y',
            'Rectified linear: ``y = max(0, x)``; ``y`` may alias ``x``.',
            alias=True,
            writes=('y',),
        ),
        Op(
            'rel_deriv',
            'x, y, dy, dx',
            '``dx = dy * (y > 0)``; arguments as in :meth:`el_deriv`.',
            alias=True,
            writes=('dx',),
            optional=('x',),
        ),
        Op(
            'sigmoid',
            'x, y',
            """Logistic sigmoid ``y = 1 / (1 + exp(-x))``; ``y`` may alias ``x``.

            Finite (0 or 1 at the extremes) for every finite ``x``.
            """,
            alias=True,
            writes=('y',),
        ),
        Op(
            'sigmoid_deriv',
            'x, y, dy, dx',
            '``dx = dy * y * (1 - y)``; arguments as in :meth:`el_deriv`.',
            alias=True,
            writes=('dx',),
            optional=('x',),
        ),
        Op(
            'tanh',
            'x, y',
            'Hyperbolic tangent of ``x`` into ``y``, which may alias ``x``.',
            alias=True,
            writes=('y',),
        ),
        Op(
            'tanh_deriv',
            'x, y, dy, dx',
            '``dx = dy * (1 - y**2)``; arguments as in :meth:`el_deriv`.',
            alias=True,
            writes=('dx',),
            optional=('x',),
        ),
    ),
    # the ops of particular layers stand in ops_layers.py
    **EARLY_SECTIONS,
    'conv/pool': (
        Op(
            'conv2d_forward_batch',
            (
                'inputs, weights, bias, outputs, '
                'padding: int | tuple[int, int, int, int], '
                'stride: tuple[int, int], *, columns=None, '
                "activation: str = 'linear'"
            ),
            """2-D cross-correlation of a batch of images, plus bias.

            ``outputs[n, i, j, f] = bias[f] + sum_{u, v, c} weights[f, u, v, c]
            * xpad[n, i*sy + u, j*sx + v, c]``, where ``xpad`` is ``inputs`` with
            ``padding`` zero cells on every side, or, for a tuple ``(top,
            bottom, left, right)``, that many on each side (see the class
            docstring for the output size); then ``activation`` replaces the
            outputs in place.

            Args:
                inputs: ``(N, H, W, C)``.
                weights: ``(F, kh, kw, C)``.
                bias: ``(F,)``.
                outputs: ``(N, OH, OW, F)``, overwritten.
                padding: an int ``>= 0`` or ``(top, bottom, left, right)``.
                stride: ``(sy, sx)``.
                columns: keyword-only; None or an ``(N, OH, OW, kh*kw*C)``
                    workspace that the caller keeps unchanged until the
                    :meth:`conv2d_backward_batch` of the same inputs, which gets
                    it too (a layer internal). The handler may store there
                    what that backward pass needs (NumpyHandler: the receptive
                    fields, ``columns[n, i, j, (u*kw + v)*C + c] = xpad[n,
                    i*sy + u, j*sx + v, c]``) instead of recomputing it; its
                    content is otherwise unspecified and it may stay untouched.
                    Handlers whose op lacks this keyword (Brainstorm 0.5's
                    signature) get it dropped by ``Handler.__init_subclass__``.
                activation: keyword-only; the name of an activation
                    (:data:`~brainstorm.handlers.base_handler.ACTIVATIONS`)
                    applied to the outputs, exactly as
                    ``inplace_act_func[activation]`` would after the op
                    (``'linear'``, the default: none). A handler may fuse it
                    with the convolution; the results must be the same.
                    Handlers whose op lacks this keyword get
                    ``inplace_act_func[activation]`` called after their op by
                    ``Handler.__init_subclass__``.
            """,
            writes=('outputs',),
            optional=('columns',),
            check='conv',
        ),
        Op(
            'conv2d_backward_batch',
            (
                'inputs, weights, padding: int | tuple[int, int, int, int], '
                'stride: tuple[int, int], in_deltas, '
                'out_deltas, weight_deltas, bias_deltas, *, columns=None, '
                'skip_in_deltas: bool = False, overwrite_in_deltas: bool = False'
            ),
            """Gradients of :meth:`conv2d_forward_batch`.

            Args:
                inputs: ``(N, H, W, C)``, as in the forward pass.
                weights: ``(F, kh, kw, C)``.
                padding: an int ``>= 0`` or ``(top, bottom, left, right)``.
                stride: ``(sy, sx)``.
                in_deltas: ``(N, H, W, C)``; the input gradient is ADDED.
                out_deltas: ``(N, OH, OW, F)``, the output gradient.
                weight_deltas: ``(F, kh, kw, C)``, OVERWRITTEN.
                bias_deltas: ``(F,)``, OVERWRITTEN.
                columns: keyword-only; the workspace given to the forward pass
                    of the same inputs (or None, also if the forward pass got
                    None); read only.
                skip_in_deltas: keyword-only; if True the input gradient is
                    not computed and ``in_deltas`` is left untouched (for a
                    caller whose input deltas nobody reads). Handlers whose op
                    lacks this keyword get it dropped (then the deltas are
                    added anyway, which nobody reads).
                overwrite_in_deltas: keyword-only; if True the input gradient
                    is WRITTEN to ``in_deltas`` (their previous content, which
                    may be garbage, is ignored) instead of added. Handlers
                    whose op lacks this keyword get ``in_deltas`` zeroed before
                    their op by ``Handler.__init_subclass__``.
            """,
            writes=('in_deltas', 'weight_deltas', 'bias_deltas'),
            optional=('columns',),
            check='conv',
        ),
        Op(
            'maxpool2d_forward_batch',
            (
                'inputs, window: tuple[int, int], outputs, '
                'padding: int | tuple[int, int, int, int], '
                'stride: tuple[int, int], argmax'
            ),
            """Max pooling over windows of in-bounds cells (padding is ignored).

            ``argmax`` receives the position of each maximum as the flat
            in-image index ``(row * W + col) * C + c`` (the first maximum in
            row-major window order wins ties). A NaN is the maximum of its
            window: output NaN, argmax the first NaN cell. A window holding
            only padding gives output 0 and argmax -1. A geometry whose
            index arithmetic passes 2**24 (float32) raises a ValueError.

            Args:
                inputs: ``(N, H, W, C)``.
                window: ``(kh, kw)``.
                outputs: ``(N, OH, OW, C)``, overwritten.
                padding: an int ``>= 0`` or ``(top, bottom, left, right)``.
                stride: ``(sy, sx)``.
                argmax: ``(N, OH, OW, C)`` in the handler dtype, overwritten.
            """,
            writes=('outputs', 'argmax'),
            check='pool',
        ),
        Op(
            'maxpool2d_backward_batch',
            (
                'inputs, window: tuple[int, int], outputs, '
                'padding: int | tuple[int, int, int, int], '
                'stride: tuple[int, int], argmax, in_deltas, out_deltas, *, '
                'overwrite_in_deltas: bool = False'
            ),
            """Gradient of :meth:`maxpool2d_forward_batch`.

            ``out_deltas[n, i, j, c]`` is ADDED to ``in_deltas[n]`` at the flat
            index ``argmax[n, i, j, c]`` (nothing for -1).

            Args:
                inputs: ``(N, H, W, C)``, as in the forward pass.
                window: ``(kh, kw)``.
                outputs: ``(N, OH, OW, C)``, as in the forward pass.
                padding: an int ``>= 0`` or ``(top, bottom, left, right)``.
                stride: ``(sy, sx)``.
                argmax: ``(N, OH, OW, C)`` from the forward pass.
                in_deltas: ``(N, H, W, C)``, added to.
                out_deltas: ``(N, OH, OW, C)``.
                overwrite_in_deltas: keyword-only; if True ``in_deltas`` is
                    overwritten (zero where no delta goes) instead of added
                    to, as in :meth:`conv2d_backward_batch`.
            """,
            writes=('in_deltas',),
            check='pool',
        ),
        Op(
            'avgpool2d_forward_batch',
            (
                'inputs, window: tuple[int, int], outputs, '
                'padding: int | tuple[int, int, int, int], '
                'stride: tuple[int, int]'
            ),
            """Average pooling: the mean over the in-bounds cells of each window.

            Padding cells do not count; a window of padding only gives 0.

            Args:
                inputs: ``(N, H, W, C)``.
                window: ``(kh, kw)``.
                outputs: ``(N, OH, OW, C)``, overwritten.
                padding: an int ``>= 0`` or ``(top, bottom, left, right)``.
                stride: ``(sy, sx)``.
            """,
            writes=('outputs',),
            check='pool',
        ),
        Op(
            'avgpool2d_backward_batch',
            (
                'inputs, window: tuple[int, int], outputs, '
                'padding: int | tuple[int, int, int, int], '
                'stride: tuple[int, int], in_deltas, out_deltas, *, '
                'overwrite_in_deltas: bool = False'
            ),
            """Gradient of :meth:`avgpool2d_forward_batch`.

            Each in-bounds cell of a window gets ``out_delta / count`` ADDED,
            ``count`` being the number of in-bounds cells of that window.

            Args:
                inputs: ``(N, H, W, C)``.
                window: ``(kh, kw)``.
                outputs: ``(N, OH, OW, C)``.
                padding: an int ``>= 0`` or ``(top, bottom, left, right)``.
                stride: ``(sy, sx)``.
                in_deltas: ``(N, H, W, C)``, added to.
                out_deltas: ``(N, OH, OW, C)``.
                overwrite_in_deltas: keyword-only; if True ``in_deltas`` is
                    overwritten instead of added to, as in
                    :meth:`conv2d_backward_batch`.
            """,
            writes=('in_deltas',),
            check='pool',
        ),
    ),
    **LAYER_SECTIONS,
    **UPDATE_SECTIONS,
}

#: Every op, in the order of the handler files' sections.
OPS: dict[str, Op] = {
    op.name: op._replace(section=section)
    for section, ops in SECTIONS.items()
    for op in ops
}
