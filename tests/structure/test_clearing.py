"""Backward memory that its layers overwrite is not zeroed, and nothing reads it stale.

The network leaves unzeroed the deltas of an input written by one layer
that can overwrite them, and the backward internals of layers that
overwrite them (see ``brainstorm.structure.clearing``). The tests fill all
backward memory with NaN before each backward pass: a layer reading stale
memory would turn gradients or deltas into NaN. The results must equal
those of the same network with every layer adding to zeroed memory.
"""

import copy
import pickle

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.initializers import Gaussian
from brainstorm.layers import (
    Add,
    ClockworkLstm,
    Convolution2D,
    FullyConnected,
    Lstm,
    Pooling2D,
    Recurrent,
)
from brainstorm.layers.base_layer import Layer
from brainstorm.layers.pooling_2d_layer import Pooling2DLayerImpl
from brainstorm.structure.network import Network
from brainstorm.tools import get_in_out_layers
from tests.onednn_support import onednn_handler

FLAGS = ('can_overwrite_input_deltas', 'overwrites_backward_internals')


def _layer_classes(cls=Layer):
    for sub in cls.__subclasses__():
        yield sub
        yield from _layer_classes(sub)


def cnn():
    inp, out = get_in_out_layers('classification', (8, 8, 3), 3)
    return (
        inp
        >> Convolution2D(4, (3, 3), padding=1, activation='rel', name='C1')
        >> Pooling2D((2, 2), stride=(2, 2), name='P1')
        >> Convolution2D(5, (3, 3), padding=1, name='C2')
        >> Pooling2D((2, 2), type='avg', stride=(2, 2), name='P2')
        >> FullyConnected(6, name='F')
        >> out
    )


def fan_out():
    """Outputs feeding two layers (they must add), and a concatenated input.

    A feeds B and C; the Add S sums them and feeds P and Q; M gets P's and
    Q's outputs concatenated, the only writer of their deltas.
    """
    inp, out = get_in_out_layers('classification', 4, 3)
    a = FullyConnected(5, name='A')
    b, c = FullyConnected(4, name='B'), FullyConnected(4, name='C')
    s = Add(name='S')
    p, q = FullyConnected(3, name='P'), FullyConnected(2, name='Q')
    merge = FullyConnected(3, name='M')
    inp >> a
    a >> b >> 'inputs_1' - s
    a >> c >> 'inputs_2' - s
    s >> p >> merge
    s >> q >> merge
    return merge >> out


def lstm():
    inp, out = get_in_out_layers('classification', 3, 4)
    return (
        inp
        >> Lstm(5, name='L')
        >> Lstm(4, name='L2')
        >> FullyConnected(4, name='F')
        >> out
    )


def recurrent_mix():
    """A reversed Lstm, a ClockworkLstm, a Recurrent (which adds to its
    gradients) and an Lstm, each the next's input."""
    inp, out = get_in_out_layers('classification', 3, 4)
    return (
        inp
        >> Lstm(5, reverse=True, name='R')
        >> ClockworkLstm(4, name='K')
        >> Recurrent(4, name='N')
        >> Lstm(3, name='L')
        >> out
    )


def skip_connection():
    """A feeds B and, concatenated with C's output, D: A's deltas have two
    writers that are not neighbours in the network's order."""
    inp, out = get_in_out_layers('classification', 4, 3)
    a, d = FullyConnected(5, name='A'), FullyConnected(3, name='D')
    inp >> a >> FullyConnected(4, name='B') >> FullyConnected(3, name='C') >> d
    a >> d
    return d >> out


def build(make, handler, monkeypatch=None):
    """The network of ``make``; with ``monkeypatch``, no layer overwrites."""
    if monkeypatch is not None:
        for cls in _layer_classes():
            for flag in FLAGS:
                if flag in cls.__dict__:
                    monkeypatch.setattr(cls, flag, False)
    net = Network.from_layer(make())
    net.set_handler(handler)
    net.initialize(Gaussian(0.5), seed=3)
    if monkeypatch is not None:
        monkeypatch.undo()
    return net


def data(make, dtype):
    rng = np.random.default_rng(0)
    shape = {
        cnn: (1, 5, 8, 8, 3),
        fan_out: (1, 5, 4),
        lstm: (4, 5, 3),
        recurrent_mix: (6, 3, 3),
        skip_connection: (1, 5, 4),
    }[make]
    return {
        'default': rng.standard_normal(shape).astype(dtype),
        'targets': rng.integers(0, 3, shape[:2] + (1,)).astype(dtype),
    }


def run(net, batch, input_deltas):
    """Two forward-backward passes on NaN-filled backward memory."""
    manager = net.buffer_manager
    net.provide_external_data(batch)
    for _ in range(2):
        net.forward_pass(training_pass=True)
        for t in (1, 2):
            rows = manager._rows(t)
            manager.full_buffer[t][rows * manager.forward_sizes[t] :] = np.nan
        manager.full_buffer[0][manager.forward_sizes[0] :] = np.nan
        net.backward_pass(input_deltas=input_deltas)
    gradients = net.handler.get_numpy_copy(net.buffer.gradients)
    deltas = net.handler.get_numpy_copy(net.buffer.Input.output_deltas.default)
    return gradients, deltas


HANDLERS = {
    'numpy64': lambda: NumpyHandler(np.float64),
    'onednn': onednn_handler,
}


@pytest.mark.parametrize('input_deltas', [True, False])
@pytest.mark.parametrize(
    'make',
    [cnn, fan_out, lstm, recurrent_mix, skip_connection],
    ids=lambda f: f.__name__,
)
@pytest.mark.parametrize('handler', list(HANDLERS))
def test_results_equal_those_on_zeroed_memory(monkeypatch, handler, make, input_deltas):
    h = HANDLERS[handler]()
    fast, plain = build(make, h), build(make, HANDLERS[handler](), monkeypatch)
    assert fast._overwritten_inputs and not plain._overwritten_inputs
    batch = data(make, h.dtype)
    g1, d1 = run(fast, batch, input_deltas)
    g2, d2 = run(plain, batch, input_deltas)
    assert not np.isnan(g1).any() and np.abs(g1).sum() > 0
    np.testing.assert_array_equal(g1, g2)
    np.testing.assert_array_equal(d1, d2)
    assert np.abs(d1).sum() > 0 if input_deltas else not d1.any()


def test_only_sole_writers_that_can_overwrite_are_asked_to():
    cnn_net = build(cnn, NumpyHandler(np.float64))
    # C1 is fed by the data: its deltas may be skipped, and stay zero then
    assert cnn_net._overwritten_inputs == {
        name: frozenset({'default'}) for name in ('P1', 'C2', 'P2', 'F')
    } | {'Output_projection': frozenset({'default'})}
    fan = build(fan_out, NumpyHandler(np.float64))
    # A's and S's outputs feed two layers each: they add; the Add S cannot
    # overwrite; M is the only writer of its concatenated input's deltas
    assert fan._overwritten_inputs == {
        'M': frozenset({'default'}),
        'Output_projection': frozenset({'default'}),
    }
    skip = build(skip_connection, NumpyHandler(np.float64))
    # A's deltas: B and D write them; D's input holds C's output and A's
    assert skip._overwritten_inputs == {
        'C': frozenset({'default'}),
        'Output_projection': frozenset({'default'}),
    }
    net = build(lstm, NumpyHandler(np.float64))
    assert net._overwritten_inputs == {
        'L2': frozenset({'default'}),
        'F': frozenset({'default'}),
        'Output_projection': frozenset({'default'}),
    }


def test_the_layers_are_asked_only_during_the_backward_pass():
    net = build(cnn, NumpyHandler(np.float64))
    seen = {}
    layer = net.layers['P1']
    original = type(layer).backward_pass

    def spy(self, buffers):
        seen['during'] = self.overwrite_input_deltas
        original(self, buffers)

    type(layer).backward_pass, saved = spy, original
    try:
        net.provide_external_data(data(cnn, np.float64))
        net.forward_pass(training_pass=True)
        net.backward_pass()
    finally:
        type(layer).backward_pass = saved
    assert seen['during'] == frozenset({'default'})
    assert layer.overwrite_input_deltas == frozenset()


@pytest.mark.parametrize('how', ['deepcopy', 'pickle', 'old pickle'])
def test_copies_clear_as_the_original(how):
    net = build(cnn, NumpyHandler(np.float64))
    batch = data(cnn, np.float64)
    expected = run(net, batch, True)
    if how == 'deepcopy':
        twin = copy.deepcopy(net)
    elif how == 'pickle':
        twin = pickle.loads(pickle.dumps(net))
    else:  # pickled before the network and its manager had these attributes
        state = copy.deepcopy(net).__getstate__()
        del state['_overwritten_inputs']
        manager = state['buffer_manager']
        del manager._sized_clear, manager._context_clear
        twin = Network.__new__(Network)
        twin.__setstate__(pickle.loads(pickle.dumps(state)))
    got = run(twin, batch, True)
    for a, b in zip(got, expected):
        assert not np.isnan(a).any() and np.abs(a).sum() > 0
        np.testing.assert_array_equal(a, b)


def test_an_unpickled_network_follows_the_layer_classes_of_now(monkeypatch):
    """A class that no longer claims to overwrite is not asked to."""
    net = build(cnn, NumpyHandler(np.float64))
    pickled = pickle.dumps(net)
    monkeypatch.setattr(Pooling2DLayerImpl, 'can_overwrite_input_deltas', False)
    twin = pickle.loads(pickled)
    assert set(twin._overwritten_inputs) == {'C2', 'F', 'Output_projection'}
    batch = data(cnn, np.float64)
    for a, b in zip(run(twin, batch, True), run(net, batch, True)):
        assert not np.isnan(a).any() and np.abs(a).sum() > 0
        np.testing.assert_array_equal(a, b)


def test_changing_batch_and_sequence_sizes_keep_the_results(monkeypatch):
    """The buffers are cut anew for each (T, B); garbage stays unread."""
    fast = build(recurrent_mix, NumpyHandler(np.float64))
    plain = build(recurrent_mix, NumpyHandler(np.float64), monkeypatch)
    rng = np.random.default_rng(5)
    for T, B in ((4, 3), (2, 5), (7, 2), (4, 3)):
        batch = {
            'default': rng.standard_normal((T, B, 3)),
            'targets': rng.integers(0, 4, (T, B, 1)).astype(float),
        }
        for a, b in zip(run(fast, batch, True), run(plain, batch, True)):
            assert not np.isnan(a).any() and np.abs(a).sum() > 0
            np.testing.assert_array_equal(a, b)


def test_clearing_leaves_exactly_the_overwritten_memory():
    """Filled with 7, then cleared: what the layers overwrite keeps its 7s
    (context slots zeroed), what they add to is zero."""
    net = build(recurrent_mix, NumpyHandler(np.float64))
    net.provide_external_data(data(recurrent_mix, np.float64))
    manager = net.buffer_manager
    for flat in manager.full_buffer:
        flat[:] = 7.0
    manager.clear_backward_buffers()
    T = 6

    def get(path):
        return net.handler.get_numpy_copy(net.buffer[path])

    assert (get('L.gradients.Wz') == 7.0).all()  # Lstm: overwrites_gradients
    assert not get('N.gradients.W').any()  # Recurrent adds to its gradients
    # Lstm L overwrites N's output deltas; backward internals of R and N
    for path in ('N.output_deltas.default', 'R.internals.dZa', 'N.internals.dHb'):
        array = get(path)
        assert (array[:T] == 7.0).all(), path
        assert not array[T:].any(), path
    # N's input deltas: N adds to them (Recurrent cannot overwrite); Ha's
    # deltas are passed back (added to); the Input layer's deltas
    for path in (
        'K.output_deltas.default',
        'N.internals.dHa',
        'Input.output_deltas.default',
    ):
        assert not get(path).any(), path


class TimingMixin:
    """Forwards every call: a mixin taking ``**kwargs`` is left unwrapped."""

    calls: list = []

    def maxpool2d_backward_batch(self, *args, **kwargs):
        self.calls.append(sorted(kwargs))
        return super().maxpool2d_backward_batch(*args, **kwargs)


def test_a_forwarding_mixin_passes_the_keyword_on():
    class Timed(TimingMixin, NumpyHandler):
        pass

    net = build(cnn, Timed(np.float64))
    reference = build(cnn, NumpyHandler(np.float64))
    batch = data(cnn, np.float64)
    for a, b in zip(run(net, batch, True), run(reference, batch, True)):
        assert not np.isnan(a).any()
        np.testing.assert_array_equal(a, b)
    assert ['overwrite_in_deltas'] in TimingMixin.calls


def test_a_network_without_parameters_keeps_its_loss_through_the_backward_pass():
    """Its empty gradient array lay at the start of the constant buffer and
    was taken for the start of the backward memory, so the backward pass
    zeroed the Loss layer's value (a forward result): the loss read 0
    after it (e.g. for the gradient of a loss with respect to the data)."""
    import brainstorm as bs

    inp = bs.layers.Input({'default': ('T', 'B', 3), 'targets': ('T', 'B', 3)})
    error = bs.layers.SquaredError(name='SE')
    inp - 'default' >> 'default' - error
    inp - 'targets' >> 'targets' - error
    net = bs.Network.from_layer(error - 'loss' >> bs.layers.Loss(name='Loss'))
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    rnd = np.random.RandomState(0)
    net.provide_external_data(
        {'default': rnd.randn(2, 3, 3), 'targets': rnd.randn(2, 3, 3)}
    )
    net.forward_pass(training_pass=True)
    loss = net.get_loss_values()['total_loss']
    assert loss > 0
    net.backward_pass()
    assert net.get_loss_values()['total_loss'] == loss
    assert net.get('Input.output_deltas.default').any()
