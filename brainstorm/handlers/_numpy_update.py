"""NumpyHandler's parameter updates, run one cache-sized chunk at a time.

The base :class:`~brainstorm.handlers.base_handler.Handler` composes each
update op (``momentum_update``, ``adam_update``, ...) of general ops, each
a pass over the whole parameter array: three to twelve passes over memory
per step. Here the same NumPy calls that those ops make run on one chunk of
:data:`UPDATE_CHUNK` elements after another, so the chunk's operands stay
in the cache from the first call to the last: about one pass over memory.
Every element goes through the very same floating point operations, with
the same scalars, in the same order, so the results are bit-identical to
the composition (``tests/handlers/test_numpy_update.py`` checks this).

Temporaries are chunk-sized scratch buffers of the handler, so a warm
update allocates nothing. Operands that cannot be viewed as one flat array
(a non-contiguous view of more than one dimension), or of different shapes
or another dtype than the handler's, take the composition (and its
errors). Like the composition, the chunks assume that no two operands
overlap (the ops' contract; ``DebugHandler`` checks it).
"""

from __future__ import annotations

import math

import numpy as np

from brainstorm.handlers.base_handler import Handler

__all__ = ['UPDATE_CHUNK']

#: Elements per chunk: the operands of a chunk (three to five arrays of
#: 128 KiB in float32) stay in a core's L2 cache.
UPDATE_CHUNK = 32768


def _flat(a):
    """``a`` as a one-dimensional view, or None where that takes a copy."""
    if a.ndim == 1:
        return a
    if a.flags.c_contiguous:
        return a.reshape(-1)
    return None


def _chunks(handler, arrays, temporaries: int = 1):
    """The chunks of ``arrays`` (None stays None) and of scratch buffers.

    Returns an iterator of tuples, one per chunk: the chunk of each array,
    then ``temporaries`` scratch arrays of the chunk's length. Returns None
    if an array cannot be viewed as one flat array.
    """
    given = [a for a in arrays if a is not None]
    if any(a.shape != given[0].shape or a.dtype != handler.dtype for a in given):
        return None  # the composition raises or computes what the contract says
    flat = [None if a is None else _flat(a) for a in arrays]
    if any(f is None and a is not None for f, a in zip(flat, arrays)):
        return None
    size = arrays[0].size
    chunk = max(1, min(UPDATE_CHUNK, size))
    scratch = [handler._buffer(f'update_{k}', (chunk,)) for k in range(temporaries)]
    return (
        tuple(None if f is None else f[start : start + chunk] for f in flat)
        + tuple(s[: min(chunk, size - start)] for s in scratch)
        for start in range(0, size, chunk)
    )


def sgd_update(handler, parameters, gradients, learning_rate: float) -> None:
    """:meth:`Handler.sgd_update`, chunk by chunk."""
    chunks = _chunks(handler, (parameters, gradients))
    if chunks is None:
        Handler.sgd_update(handler, parameters, gradients, learning_rate)
        return
    for p, g, tmp in chunks:
        np.multiply(g, -learning_rate, out=tmp)
        np.add(p, tmp, out=p)


def momentum_update(
    handler, parameters, gradients, velocity, learning_rate: float, momentum: float
) -> None:
    """:meth:`Handler.momentum_update`, chunk by chunk."""
    chunks = _chunks(handler, (parameters, gradients, velocity))
    if chunks is None:
        Handler.momentum_update(
            handler, parameters, gradients, velocity, learning_rate, momentum
        )
        return
    for p, g, v, tmp in chunks:
        np.multiply(v, momentum, out=v)
        np.multiply(g, -learning_rate, out=tmp)
        np.add(v, tmp, out=v)
        np.add(p, v, out=p)


def nesterov_lookahead(handler, parameters, velocity, momentum: float) -> None:
    """:meth:`Handler.nesterov_lookahead`, chunk by chunk."""
    chunks = _chunks(handler, (parameters, velocity), temporaries=0)
    if chunks is None:
        Handler.nesterov_lookahead(handler, parameters, velocity, momentum)
        return
    for p, v in chunks:
        np.multiply(v, momentum, out=v)
        np.add(p, v, out=p)


def nesterov_update(
    handler, parameters, gradients, velocity, learning_rate: float
) -> None:
    """:meth:`Handler.nesterov_update`, chunk by chunk."""
    chunks = _chunks(handler, (parameters, gradients, velocity))
    if chunks is None:
        Handler.nesterov_update(handler, parameters, gradients, velocity, learning_rate)
        return
    for p, g, v, tmp in chunks:
        # both mult_add_st of the composition add this same product
        np.multiply(g, -learning_rate, out=tmp)
        np.add(v, tmp, out=v)
        np.add(p, tmp, out=p)


def rmsprop_update(
    handler,
    parameters,
    gradients,
    mean_square,
    scratch,
    learning_rate: float,
    decay: float,
    epsilon: float,
) -> None:
    """:meth:`Handler.rmsprop_update`, chunk by chunk (``scratch`` unused)."""
    chunks = _chunks(handler, (parameters, gradients, mean_square))
    if chunks is None:
        Handler.rmsprop_update(
            handler,
            parameters,
            gradients,
            mean_square,
            scratch,
            learning_rate,
            decay,
            epsilon,
        )
        return
    for p, g, s, tmp in chunks:
        np.multiply(s, decay, out=s)
        np.multiply(g, 1.0 - decay, out=tmp)  # before squaring: see Handler
        np.multiply(tmp, g, out=tmp)
        np.add(s, tmp, out=s)
        np.sqrt(s, out=tmp)
        np.add(tmp, epsilon, out=tmp)
        np.divide(g, tmp, out=tmp)
        np.multiply(tmp, -learning_rate, out=tmp)
        np.add(p, tmp, out=p)


def adam_update(
    handler,
    parameters,
    gradients,
    m,
    v,
    mask,
    scratch,
    learning_rate: float,
    beta1: float,
    beta2: float,
    epsilon: float,
    step: int,
    weight_decay: float,
) -> None:
    """:meth:`Handler.adam_update`, chunk by chunk (``scratch`` unused)."""
    chunks = _chunks(handler, (parameters, gradients, m, v, mask))
    if chunks is None:
        Handler.adam_update(
            handler,
            parameters,
            gradients,
            m,
            v,
            mask,
            scratch,
            learning_rate,
            beta1,
            beta2,
            epsilon,
            step,
            weight_decay,
        )
        return
    # the scalars exactly as the composition computes them
    decay = learning_rate * weight_decay
    correction1 = 1.0 - beta1**step
    root_correction2 = math.sqrt(1.0 - beta2**step)
    for p, g, m_, v_, keep, tmp in chunks:
        if decay != 0.0:
            if keep is None:
                np.multiply(p, 1.0 - decay, out=p)
            else:
                np.multiply(p, keep, out=tmp)
                np.multiply(tmp, -decay, out=tmp)
                np.add(p, tmp, out=p)
        np.multiply(m_, beta1, out=m_)
        np.multiply(g, 1.0 - beta1, out=tmp)
        np.add(m_, tmp, out=m_)
        np.multiply(v_, beta2, out=v_)
        np.multiply(g, 1.0 - beta2, out=tmp)  # before squaring: see Handler
        np.multiply(tmp, g, out=tmp)
        np.add(v_, tmp, out=v_)
        np.sqrt(v_, out=tmp)
        np.multiply(tmp, 1.0 / root_correction2, out=tmp)
        np.add(tmp, epsilon, out=tmp)
        np.divide(m_, tmp, out=tmp)
        np.multiply(tmp, -learning_rate / correction1, out=tmp)
        np.add(p, tmp, out=p)
