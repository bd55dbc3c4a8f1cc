"""Registry entries for the recurrent layers Lstm, Clockwork and
ClockworkLstm (see test_layer_registry.py).

The harness fills the context slots of outputs and forward internals with
random values, so every entry also checks exact gradients with a non-zero
context. Clockwork entries fix ``timing`` (random values would be
meaningless) to a non-trivial pattern with sequences longer than the
largest period.

The module also holds plain-NumPy references of the SPEC formulas and a
network-level gradient check with a context, shared by the layers' own
test modules.
"""

import numpy as np

from brainstorm.handlers import NumpyHandler
from brainstorm.layers import Input, Loss, SquaredError
from brainstorm.layers.clockwork_layer import ClockworkLayerImpl
from brainstorm.layers.clockwork_lstm_layer import ClockworkLstmLayerImpl
from brainstorm.layers.gru_layer import GRULayerImpl
from brainstorm.layers.lstm_layer import LstmLayerImpl
from brainstorm.layers.recurrent_layer import RecurrentLayerImpl
from brainstorm.structure.network import Network
from brainstorm.testing import instantiate_layer, set_up_layer

#: The SPEC's Lstm parameters and forward internals, in order.
LSTM_PARAMETERS = [
    'Wz',
    'Wi',
    'Wf',
    'Wo',
    'pi',
    'pf',
    'po',
    'Rz',
    'Ri',
    'Rf',
    'Ro',
    'bz',
    'bi',
    'bf',
    'bo',
]
LSTM_INTERNALS = ['Za', 'Zb', 'Ia', 'Ib', 'Fa', 'Fb', 'Oa', 'Ob', 'Ca', 'Cb']

LONG_CONFIGURATIONS = [(1, 1), (5, 1), (7, 3)]

LAYER_SPECS = [
    dict(
        id='Lstm',
        layer_class=LstmLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'size': 4},
        activation=True,
    ),
    dict(
        id='Lstm-multidim',
        layer_class=LstmLayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'size': 3},
        activation=True,
    ),
    dict(
        id='Lstm-default-size',
        layer_class=LstmLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={},
        configurations=LONG_CONFIGURATIONS,
    ),
]

LAYER_SPECS += [
    dict(
        id='GRU',
        layer_class=GRULayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'size': 4},
        activation=True,
    ),
    dict(
        id='GRU-multidim',
        layer_class=GRULayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'size': 3},
        activation=True,
    ),
    dict(
        id='GRU-default-size',
        layer_class=GRULayerImpl,
        in_shapes={'default': (3,)},
        kwargs={},
        configurations=LONG_CONFIGURATIONS,
    ),
]


def prefix_mask(time_steps, batch_size, rnd):
    """A ``(T, B, 1)`` mask of ones up to random lengths in [1, T]; the
    first sequence is full, the last of length 1."""
    lengths = rnd.randint(1, time_steps + 1, batch_size)
    lengths[0], lengths[-1] = time_steps, 1
    return (np.arange(time_steps)[:, None] < lengths)[:, :, None].astype(float)


def mask_with_empty(time_steps, batch_size, rnd):
    """A ``(T, B, 1)`` mask of ones up to random lengths in [0, T]; the
    first sequence is full, the last empty (with one sequence: empty)."""
    lengths = rnd.randint(0, time_steps + 1, batch_size)
    lengths[0], lengths[-1] = time_steps, 0
    return (np.arange(time_steps)[:, None] < lengths)[:, :, None].astype(float)


# reverse=True, without a mask (every sequence full), with one and with one
# holding an empty sequence
for _name, _class, _kwargs in [
    ('Recurrent', RecurrentLayerImpl, {'size': 4}),
    ('Lstm', LstmLayerImpl, {'size': 4}),
    ('GRU', GRULayerImpl, {'size': 4}),
]:
    LAYER_SPECS += [
        dict(
            id=f'{_name}-reverse',
            layer_class=_class,
            in_shapes={'default': (2, 3)},
            kwargs={**_kwargs, 'reverse': True},
            activation=True,
        ),
        dict(
            id=f'{_name}-reverse-mask',
            layer_class=_class,
            in_shapes={'default': (3,), 'mask': (1,)},
            kwargs={**_kwargs, 'reverse': True},
            activation=True,
            spec={'mask': prefix_mask},
        ),
        dict(
            id=f'{_name}-reverse-mask-empty',
            layer_class=_class,
            in_shapes={'default': (3,), 'mask': (1,)},
            kwargs={**_kwargs, 'reverse': True},
            spec={'mask': mask_with_empty},
            configurations=[(1, 2), (3, 3), (2, 1)],
        ),
    ]

TIMING = {'timing': [1, 2, 3, 1]}

LAYER_SPECS += [
    dict(
        id='Clockwork',
        layer_class=ClockworkLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'size': 4},
        activation=True,
        spec={'inits': TIMING},
    ),
    dict(
        id='Clockwork-long',
        layer_class=ClockworkLayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'size': 4},
        spec={'inits': TIMING},
        configurations=LONG_CONFIGURATIONS,
    ),
    dict(
        id='Clockwork-every-step',
        layer_class=ClockworkLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'size': 2},
        spec={'inits': {'timing': [1, 1]}},
        configurations=[(3, 2)],
    ),
    dict(
        id='ClockworkLstm',
        layer_class=ClockworkLstmLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'size': 4},
        activation=True,
        spec={'inits': TIMING},
    ),
    dict(
        id='ClockworkLstm-long',
        layer_class=ClockworkLstmLayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'size': 4},
        spec={'inits': TIMING},
        configurations=LONG_CONFIGURATIONS,
    ),
]


# ------------------------------------------ helpers for the layer tests ---


def sigmoid(a):
    return 1.0 / (1.0 + np.exp(-a))


ACTIVATION_FUNCTIONS = {
    'sigmoid': sigmoid,
    'tanh': np.tanh,
    'rel': lambda a: np.maximum(a, 0.0),
    'linear': lambda a: a,
    'el': lambda a: np.where(a > 0, a, np.expm1(np.minimum(a, 0.0))),
}


def keep_mask(t, timing):
    """Units that keep their previous state at step ``t`` (None: none)."""
    if timing is None:
        return np.zeros(1, dtype=bool)
    return np.fmod(t, np.asarray(timing, dtype=float)) != 0


def recurrent_reference(x, p, y0, activation='tanh', timing=None):
    """Clockwork (or, without timing, Recurrent) by the SPEC formulas in
    plain NumPy: ``(T, B, ...)`` input -> ``(T, B, size)`` output."""
    f = ACTIVATION_FUNCTIONS[activation]
    x = x.reshape(x.shape[0], x.shape[1], -1)
    ys, y_prev = [], y0
    for t in range(x.shape[0]):
        y = f(x[t] @ p['W'].T + p['bias'] + y_prev @ p['R'].T)
        y = np.where(keep_mask(t, timing), y_prev, y)
        ys.append(y)
        y_prev = y
    return np.array(ys)


def lstm_reference(x, p, y0, c0, activation='tanh', timing=None):
    """ClockworkLstm (or, without timing, Lstm) by the SPEC formulas in
    plain NumPy. Returns the outputs and the cell states ``Ca``."""
    g = h = ACTIVATION_FUNCTIONS[activation]
    x = x.reshape(x.shape[0], x.shape[1], -1)
    ys, cs, y_prev, c_prev = [], [], y0, c0

    def gate(name, t):
        return x[t] @ p['W' + name].T + y_prev @ p['R' + name].T + p['b' + name]

    for t in range(x.shape[0]):
        z = g(gate('z', t))
        i = sigmoid(gate('i', t) + p['pi'] * c_prev)
        f = sigmoid(gate('f', t) + p['pf'] * c_prev)
        c = i * z + f * c_prev
        o = sigmoid(gate('o', t) + p['po'] * c)
        y = o * h(c)
        keep = keep_mask(t, timing)
        c, y = np.where(keep, c_prev, c), np.where(keep, y_prev, y)
        ys.append(y)
        cs.append(c)
        y_prev, c_prev = y, c
    return np.array(ys), np.array(cs)


def run_with_context(
    layer_class, timing, activation, T=7, B=2, size=5, params=None, seed=3
) -> dict:
    """One forward pass of a recurrent layer on ``(2, 3)`` input features
    with a random context: ``y0`` in the output's context slot and, for a
    layer with a cell state ``Ca``, ``c0`` in its context slot.

    Args:
        layer_class: the ``...LayerImpl`` class.
        timing: the ``timing`` parameter (None for a layer without one).
        activation: the layer's activation.
        T, B, size: time steps, batch size, units.
        params: parameter name -> value; the others are random.
        seed: seed of the data, the parameters and the context.

    Returns:
        The parameters by name, plus ``x``, ``y`` (the T steps), ``y0``
        and, with a cell state, ``Ca`` (the T steps) and ``c0``.
    """
    layer = instantiate_layer(
        layer_class, {'default': (2, 3)}, size=size, activation=activation
    )
    spec = {'time_steps': T, 'batch_size': B, 'seed': seed, 'inits': dict(params or {})}
    if timing is not None:
        spec['inits']['timing'] = timing
    buffers, manager = set_up_layer(layer, spec)
    h = manager.handler
    rnd = np.random.RandomState(seed)
    result = {'y0': rnd.randn(B, size)}
    h.set_from_numpy(buffers.outputs.default[T], result['y0'])
    cell_state = 'Ca' in layer.internal_shapes
    if cell_state:
        result['c0'] = rnd.randn(B, size)
        h.set_from_numpy(buffers.internals.Ca[T], result['c0'])
    layer.forward_pass(buffers)
    result.update((n, h.get_numpy_copy(a)) for n, a in buffers.parameters.items())
    result['x'] = h.get_numpy_copy(buffers.inputs.default)
    result['y'] = h.get_numpy_copy(buffers.outputs.default)[:T]
    if cell_state:
        result['Ca'] = h.get_numpy_copy(buffers.internals.Ca)[:T]
    return result


def regression_net(layer, n_in=3, n_out=4, handler=None):
    """``Input >> layer >> SquaredError >> Loss`` in float64; ``layer``
    must have ``n_out`` units."""
    inp = Input(out_shapes={'default': ('T', 'B', n_in), 'targets': ('T', 'B', n_out)})
    error = SquaredError(name='Error')
    inp >> layer >> error
    inp - 'targets' >> 'targets' - error
    error - 'loss' >> Loss()
    net = Network.from_layer(error)
    net.set_handler(handler or NumpyHandler(np.float64))
    return net


def regression_data(T, B, n_in=3, n_out=4, seed=0):
    rnd = np.random.RandomState(seed)
    return {'default': rnd.randn(T, B, n_in), 'targets': rnd.randn(T, B, n_out)}


def gradient_error_with_context(net, skip=(), eps=1e-6):
    """Largest |analytic - numeric| gradient of the total loss, for a
    second batch run with the context left by a first batch.

    Parameters named in ``skip`` (``'Layer.param'``) are left out.
    """
    net.provide_external_data(regression_data(4, 2, seed=1))
    net.forward_pass()
    context = net.get_context()
    data = regression_data(5, 2, seed=2)
    net.provide_external_data(data)
    net.forward_pass(context=context)
    net.backward_pass()
    analytic = net.get('gradients')
    params = net.get('parameters')
    mask = np.ones(params.shape, dtype=bool)
    offset = net.layout['parameters']['@slice'][0]
    for path in skip:
        lname, pname = path.split('.')
        start, stop = net.layout[lname]['parameters'][pname]['@slice']
        mask[start - offset : stop - offset] = False

    def loss(values):
        net.handler.set_from_numpy(net.buffer.parameters, values)
        net.forward_pass(context=context)
        return net.get_loss_values()['total_loss']

    numeric = np.zeros_like(params)
    for i in np.flatnonzero(mask):
        plus, minus = params.copy(), params.copy()
        plus[i] += eps
        minus[i] -= eps
        numeric[i] = (loss(plus) - loss(minus)) / (2 * eps)
    net.handler.set_from_numpy(net.buffer.parameters, params)
    return np.abs(analytic - numeric)[mask].max()
