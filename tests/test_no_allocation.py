"""Training steps on the NumpyHandler and the OneDnnHandler allocate
nothing after warm-up.

Four checks per network and handler, all after two warm-up steps:

* the handler's allocating ops (``allocate``, ``zeros``, ``ones``,
  ``create_from_numpy``) are not called by ``provide_external_data``,
  ``forward_pass``, ``backward_pass`` or ``MomentumStepper.run``;
* every array of ``net.buffer`` and the stepper's velocity keep their
  identity and data pointer;
* tracemalloc sees no more than ``PEAK_LIMIT`` bytes allocated at once
  during a step. NumPy reports its array memory to tracemalloc, so a hidden
  ``x <= 0`` or ``a * b`` of one of the big operands (0.5 to 2.5 MB here)
  would show up. What a step may allocate are NumPy's ufunc iterator
  buffers (``np.getbufsize()`` elements per operand, freed after each call,
  independent of the array sizes) and small Python objects;
* the handler's scratch buffers and oneDNN primitives (made once per
  shape, with the scratch buffers as their scratchpads) stay the same.

The same checks run for the other steppers' updates (each one handler op
per part, run in chunks with chunk-sized scratch buffers).
"""

import tracemalloc
from collections import Counter

import numpy as np
import pytest

from brainstorm.handlers import _numpy_update
from brainstorm.initializers import Gaussian
from brainstorm.layers import (
    GRU,
    Convolution2D,
    FullyConnected,
    Input,
    Loss,
    Lstm,
    Pooling2D,
    Recurrent,
    SoftmaxCE,
)
from brainstorm.structure.buffer_views import BufferView
from brainstorm.structure.network import Network
from brainstorm.tools import get_in_out_layers
from brainstorm.training.steppers import (
    AdamWStepper,
    MomentumStepper,
    NesterovStepper,
    RMSPropStepper,
    SgdStepper,
)
from tests.onednn_support import onednn_handler
from tests.training.nets import CountingHandler

ALLOCATING_OPS = ('allocate', 'zeros', 'ones', 'create_from_numpy')


# The hidden operands hold 2**17 or more float32 numbers (at least 0.5 MB);
# NumPy's ufunc iterator buffers take up to ~100 KB for three operands.
T, B = 4, 128
PEAK_LIMIT = 256 * 1024


def mlp():
    inp, out = get_in_out_layers('classification', 48, 40)
    stack = inp
    for activation in ('rel', 'tanh', 'sigmoid', 'el', 'linear'):
        stack = stack >> FullyConnected(
            256, activation=activation, name=f'Fc_{activation}'
        )
    return Network.from_layer(stack >> out), {'default': (T, B, 48), 'targets': 40}


def recurrent():
    inp, out = get_in_out_layers('classification', 48, 40)
    net = Network.from_layer(
        inp >> Lstm(256) >> Recurrent(256, activation='tanh') >> out
    )
    return net, {'default': (T, B, 48), 'targets': 40}


def reverse_rnn():
    """GRU and reverse layers with a mask (sequences of different lengths)."""
    inp = Input(
        {'default': ('T', 'B', 48), 'targets': ('T', 'B', 1), 'mask': ('T', 'B', 1)}
    )
    back = Lstm(256, reverse=True)
    inp - 'default' >> GRU(256) >> back
    inp - 'mask' >> 'mask' - back
    rev = Recurrent(64, reverse=True)
    back >> rev
    out = SoftmaxCE()
    rev >> FullyConnected(40, activation='linear') >> out
    inp - 'targets' >> 'targets' - out
    net = Network.from_layer(out - 'loss' >> Loss())
    return net, {'default': (T, B, 48), 'targets': 40, 'mask': True}


def same_padding_cnn():
    inp, out = get_in_out_layers('classification', (24, 24, 3), 40)
    net = Network.from_layer(
        inp
        >> Convolution2D(16, kernel_size=(2, 2), padding='same')
        >> Pooling2D(kernel_size=(2, 2), type='max', stride=(2, 2), padding='same')
        >> Convolution2D(16, kernel_size=(4, 4), stride=(2, 2), padding='same')
        >> Pooling2D(kernel_size=(2, 2), type='avg', padding='same')
        >> FullyConnected(40)
        >> out
    )
    return net, {'default': (1, B // 2, 24, 24, 3), 'targets': 40}


def cnn():
    inp, out = get_in_out_layers('classification', (24, 24, 3), 40)
    net = Network.from_layer(
        inp
        >> Convolution2D(16, kernel_size=(3, 3), padding=1)
        >> Pooling2D(kernel_size=(3, 3), type='max', stride=(2, 2))
        >> Convolution2D(16, kernel_size=(3, 3), padding=1, activation='tanh')
        >> Pooling2D(kernel_size=(2, 2), type='avg', stride=(1, 1), padding=1)
        >> FullyConnected(40)
        >> out
    )
    return net, {'default': (1, B // 2, 24, 24, 3), 'targets': 40}


def make_data(shapes, rnd):
    x = rnd.rand(*shapes['default']).astype(np.float32)
    targets = rnd.randint(0, shapes['targets'], x.shape[:2] + (1,))
    data = {'default': x, 'targets': targets.astype(np.float32)}
    if shapes.get('mask'):
        lengths = rnd.randint(1, x.shape[0] + 1, x.shape[1])
        mask = np.arange(x.shape[0])[:, None] < lengths
        data['mask'] = mask[:, :, None].astype(np.float32)
    return data


def all_arrays(view, path=''):
    """``{path: array}`` for every array in a (nested) BufferView."""
    arrays = {}
    for name in view._buffer_names:
        child = view[name]
        if isinstance(child, BufferView):
            arrays.update(all_arrays(child, f'{path}{name}.'))
        else:
            arrays[path + name] = child
    return arrays


def pointer(array) -> int:
    return array.__array_interface__['data'][0]


def counting_onednn_handler(dtype, seed):
    """A OneDnnHandler counting its allocating ops (skips without oneDNN)."""
    onednn_handler()
    from brainstorm.handlers.onednn import OneDnnHandler

    class CountingOneDnnHandler(CountingHandler, OneDnnHandler):
        pass

    return CountingOneDnnHandler(dtype, seed=seed)


HANDLERS = {'numpy': CountingHandler, 'onednn': counting_onednn_handler}
NETS = {
    'mlp': mlp,
    'recurrent': recurrent,
    'cnn': cnn,
    'reverse-rnn': reverse_rnn,
    'same-padding-cnn': same_padding_cnn,
}


@pytest.fixture(
    params=[(n, h) for h in HANDLERS for n in NETS.values()],
    ids=[f'{n}-{h}' for h in HANDLERS for n in NETS],
)
def trained(request):
    """A network with a started MomentumStepper after two warm-up steps."""
    make_net, kind = request.param
    net, shapes = make_net()
    handler = HANDLERS[kind](np.float32, seed=1)
    net.set_handler(handler)
    net.initialize(Gaussian(0.1), seed=1)
    stepper = MomentumStepper(learning_rate=0.01, momentum=0.9)
    stepper.start(net)
    data = make_data(shapes, np.random.RandomState(1))
    for _ in range(2):
        net.provide_external_data(data)
        stepper.run()
    handler.calls.clear()
    return net, stepper, data


def test_no_allocating_handler_op_is_called_in_a_step(trained):
    net, stepper, data = trained
    net.provide_external_data(data)
    net.forward_pass(training_pass=True)
    net.backward_pass()
    stepper.run()
    assert net.handler.calls == Counter(), (
        f'allocating ops called during a training step: {net.handler.calls}'
    )


def test_buffers_keep_identity_and_memory(trained):
    net, stepper, data = trained
    before = {path: (id(a), pointer(a)) for path, a in all_arrays(net.buffer).items()}
    velocity = stepper._parts[0].state['velocity']
    velocity_before = (id(velocity), pointer(velocity))
    net.provide_external_data(data)
    stepper.run()
    after = {path: (id(a), pointer(a)) for path, a in all_arrays(net.buffer).items()}
    changed = sorted(p for p in before if before[p] != after[p])
    assert not changed, f'buffers replaced during a step: {changed}'
    velocity = stepper._parts[0].state['velocity']
    assert (id(velocity), pointer(velocity)) == velocity_before


def test_a_step_makes_no_large_temporaries(trained):
    net, stepper, data = trained
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        net.provide_external_data(data)
        stepper.run()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT, (
        f'a training step allocated up to {peak} bytes at once; the limit '
        f'is {PEAK_LIMIT} bytes'
    )


def scratch_memory(handler):
    """``{(name, dtype): data pointer}`` of the handler's scratch buffers."""
    return {key: pointer(a) for key, a in handler._scratch.items()}


def test_primitives_and_scratch_memory_are_made_once(trained):
    """oneDNN's primitives (and their user scratchpads, which are handler
    scratch buffers) exist after the warm-up; a step makes no new ones and
    grows no scratch buffer. (tracemalloc does not see oneDNN's own C
    allocations: with user scratchpads it makes none while it runs.)"""
    net, stepper, data = trained
    handler = net.handler
    plans = dict(getattr(handler, '_plans', {}))
    scratch = scratch_memory(handler)
    net.provide_external_data(data)
    stepper.run()
    assert getattr(handler, '_plans', {}) == plans
    assert scratch_memory(handler) == scratch
    if 'Convolution2D_1' in net.layers and hasattr(handler, '_plans'):
        assert plans, 'the convolution and pooling did not run on oneDNN'


UPDATE_STEPPERS = {
    'sgd': lambda: SgdStepper(0.01),
    'nesterov': lambda: NesterovStepper(0.01, 0.9),
    'rmsprop': lambda: RMSPropStepper(0.001),
    'adamw': lambda: AdamWStepper(0.001, weight_decay=0.1, clip_norm=1.0),
}


@pytest.mark.parametrize('kind', list(HANDLERS))
@pytest.mark.parametrize('make_stepper', UPDATE_STEPPERS.values(), ids=UPDATE_STEPPERS)
def test_every_stepper_updates_through_its_op_without_allocating(make_stepper, kind):
    """The other steppers too: after warm-up a step calls no allocating op,
    makes no large temporary and grows no scratch buffer; the update ran
    through its handler op, in chunks of chunk-sized scratch buffers (or,
    on oneDNN, as scaled adds)."""
    net, shapes = mlp()
    handler = HANDLERS[kind](np.float32, seed=1)
    net.set_handler(handler)
    net.initialize(Gaussian(0.1), seed=1)
    stepper = make_stepper()
    stepper.start(net)
    data = make_data(shapes, np.random.RandomState(1))
    for _ in range(2):
        net.provide_external_data(data)
        stepper.run()
    handler.calls.clear()
    scratch = scratch_memory(handler)
    scaled = []  # oneDNN's scaled adds (tests/handlers/test_onednn_updates.py)
    if kind == 'onednn':
        original = handler._scaled_add
        handler._scaled_add = lambda *args: scaled.append(1) or original(*args)
    net.provide_external_data(data)
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        stepper.run()
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert handler.calls == Counter(), handler.calls
    assert peak < PEAK_LIMIT, f'a step allocated up to {peak} bytes at once'
    assert scratch_memory(handler) == scratch
    if kind == 'onednn' and isinstance(stepper, (SgdStepper, NesterovStepper)):
        assert scaled, 'oneDNN ran no update'
        return
    chunk = handler._scratch[('update_0', np.float32)]
    assert chunk.size == _numpy_update.UPDATE_CHUNK < net.buffer.parameters.size
