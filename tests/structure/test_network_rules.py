"""The rules of the Network at its edges: copies, threads, moves, passes.

``brainstorm/structure/network.py`` runs the layers forward and backward,
reads buffers by path, moves the memory to another handler, sets the
parameters, copies and pickles networks and checks what users pass. These
tests state what a user relies on there: a copy or pickle (also one made
before a flag of the network existed) runs and refuses as the original
does; every call leaves the network free for another thread; a network
that never moved is refused nothing for want of a forward pass; a reverse
layer's context holds each sequence's state at its first step; the names a
scorer may not take are those of the logged losses; the trainable mask is
zero exactly over the untrained parameters; a move to a handler that
refuses a layer changes nothing, and a move that lays the memory out anew
keeps the constant memory (or, if its size changed, the parameters) and
the batch shape; a refused forward pass or initialization changes nothing,
and an initializer's own refusal reaches the user unchanged.
"""

import copy
import pickle
import threading
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import LayerValidationError, NetworkValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.initializers import Initializer
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.network import Network
from brainstorm.structure.prediction import UninitializedNetworkError
from brainstorm.utils import ValidationError
from tests.structure.test_network import _ColumnsHandler

X = np.random.RandomState(0).randn(3, 2, 2)
DATA = {'default': X, 'targets': np.random.RandomState(1).randn(3, 2, 1)}


def _lstm_net(initialize=True, handler=True):
    """Input(2) -> Lstm 'R' (3) -> a regression output, Gaussian parameters.

    On a float64 NumpyHandler set after building (a move), or with
    ``handler=False`` on the default handler it was built on (no move).
    """
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> bs.layers.Lstm(3, name='R') >> out)
    if handler:
        net.set_handler(NumpyHandler(np.float64))
    if initialize:
        net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def _run(net, data=DATA, context=None):
    """The outputs of the Lstm in a forward pass over ``data``."""
    net.provide_external_data(data)
    net.forward_pass(context=context)
    return net.get('R.outputs.default')


def _old_copy(net):
    """A copy of ``net`` as pickled before the network had its flags.

    Networks pickled by older versions carry neither ``_parameters_set``
    nor ``_memory_moved`` in their state; unpickling one runs
    ``__setstate__`` with such a state.
    """
    state = pickle.loads(pickle.dumps(net)).__getstate__()
    del state['_parameters_set'], state['_memory_moved']
    restored = Network.__new__(Network)
    restored.__setstate__(state)
    return restored


def _in_another_thread(function):
    """Call ``function`` in a new thread; return what it raised (or None)."""
    raised = []

    def target():
        try:
            function()
        except Exception as error:  # noqa: BLE001 - handed to the test
            raised.append(error)

    thread = threading.Thread(target=target)
    thread.start()
    thread.join()
    return raised[0] if raised else None


# -------------------------------------------------------------- copies ---


def test_an_old_copy_of_an_uninitialized_network_is_refused_at_its_first_pass():
    old = _old_copy(_lstm_net(initialize=False))
    old.provide_external_data(DATA)
    with pytest.raises(UninitializedNetworkError):
        old.forward_pass()


def test_an_old_copy_of_an_initialized_network_runs_as_the_original():
    net = _lstm_net()
    old = _old_copy(net)
    np.testing.assert_array_equal(_run(old), _run(net))


def test_an_old_copy_keeps_the_context_and_gradients_of_the_last_pass():
    """Its memory came along: no set_handler moved it, nothing is refused."""
    net = _lstm_net()
    _run(net)
    old = _old_copy(net)
    np.testing.assert_array_equal(old.get_context()[2], net.get_context()[2])
    net.backward_pass()
    old.backward_pass()
    np.testing.assert_array_equal(old.get('gradients'), net.get('gradients'))
    assert np.abs(net.get('gradients')).max() > 0


# ------------------------------------------------------------- passes ---


def test_a_new_network_gives_the_zero_context_its_first_batch_starts_from():
    """Only set_handler's move refuses get_context until the next pass."""
    net = _lstm_net(handler=False)
    net.provide_external_data(DATA)
    context = net.get_context()
    assert context[2] is not None
    np.testing.assert_array_equal(
        _run(net, context=context), _run(_lstm_net(handler=False))
    )


# ------------------------------------------------------------ contexts ---


def _reverse_masked_net():
    """Input(2, mask) -> reverse Lstm 'R' (3), float64, Gaussian parameters."""
    inp = bs.layers.Input({'default': ('T', 'B', 2), 'mask': ('T', 'B', 1)})
    layer = bs.layers.Lstm(3, reverse=True, name='R')
    inp - 'default' >> layer
    inp - 'mask' >> 'mask' - layer
    net = bs.Network.from_layer(layer)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def test_a_reverse_context_holds_the_state_at_each_sequences_first_step():
    """A later chunk where one sequence has a single step (its state is
    at step 0) and one fills the chunk (its state is at the last step):
    the earlier chunk continued from get_context gives what the whole
    sequences give."""
    net = _reverse_masked_net()
    x = np.random.RandomState(0).randn(6, 2, 2)
    lengths = [4, 6]  # the later chunk (steps 3 to 5) holds 1 and 3 steps
    whole = []
    for seq, n in enumerate(lengths):
        net.provide_external_data(
            {'default': x[:n, seq : seq + 1], 'mask': np.ones((n, 1, 1))}
        )
        net.forward_pass()
        whole.append(net.get('R.outputs.default')[:n, 0].copy())
    later = np.full((3, 2, 2), 7.0)  # padding of an odd value
    later[:1, 0] = x[3:4, 0]
    later[:, 1] = x[3:6, 1]
    mask = np.ones((3, 2, 1))
    mask[1:, 0] = 0
    net.provide_external_data({'default': later, 'mask': mask})
    net.forward_pass()
    context = net.get_context()
    net.provide_external_data({'default': x[:3], 'mask': np.ones((3, 2, 1))})
    net.forward_pass(context=context)
    earlier = net.get('R.outputs.default')[:3]
    np.testing.assert_allclose(earlier[:, 0], whole[0][:3], rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(earlier[:, 1], whole[1][:3], rtol=1e-12, atol=1e-14)


# ------------------------------------------------------------- threads ---


def _calls():
    """Public calls on a network, each of which must release it."""
    return {
        'initialize': lambda net: net.initialize(bs.initializers.Gaussian(0.5), seed=2),
        'set_handler': lambda net: net.set_handler(NumpyHandler(np.float64)),
        'provide_external_data': lambda net: net.provide_external_data(DATA),
        'forward_pass': lambda net: _run(net),
        'backward_pass': lambda net: (_run(net), net.backward_pass()),
        'predict': lambda net: net.predict(X, out_name='R.outputs.default'),
        'deepcopy': copy.deepcopy,
        'pickle': pickle.dumps,
    }


@pytest.mark.parametrize('call', sorted(_calls()))
def test_a_call_leaves_the_network_free_for_another_thread(call):
    net = _lstm_net()
    _run(net)
    _calls()[call](net)
    assert _in_another_thread(lambda: _run(net)) is None
    assert _in_another_thread(lambda: net.initialize(0.1)) is None


# --------------------------------------------------------------- losses ---


def _two_loss_net():
    """Two SquaredError layers, each with a Loss layer, 'LossA', 'LossB'."""
    from brainstorm.layers import Input, Loss, SquaredError

    inp = Input(out_shapes={'default': ('T', 'B', 2), 'targets': ('T', 'B', 2)})
    a, b = SquaredError(name='A'), SquaredError(name='B')
    inp >> a
    inp >> b
    inp - 'targets' >> 'targets' - a
    inp - 'targets' >> 'targets' - b
    a - 'loss' >> Loss(name='LossA')
    b - 'loss' >> Loss(name='LossB')
    return Network.from_layer(a)


def _start_training_with_a_scorer(net, data, name):
    """Start training ``net`` with a train scorer named ``name``; stop at once."""
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(0))
    trainer.train_scorers = [bs.scorers.Accuracy(name=name)]
    trainer.train(net, bs.data_iterators.Undivided(**data))


def test_a_scorer_may_not_take_the_name_of_a_logged_loss():
    """The logged losses: 'total_loss' alone for one Loss layer, each Loss
    layer's name and 'total_loss' for several. A scorer of such a name is
    refused before training; another name, also a single Loss layer's, is
    taken."""
    two = _two_loss_net()
    two.initialize(bs.initializers.Gaussian(0.1), seed=1)
    data = {'default': np.ones((1, 2, 2)), 'targets': np.zeros((1, 2, 2))}
    for name in ('LossA', 'LossB', 'total_loss'):
        with pytest.raises(ValidationError, match='named like a loss'):
            _start_training_with_a_scorer(two, data, name)
    _start_training_with_a_scorer(two, data, 'A')
    one = _lstm_net()
    with pytest.raises(ValidationError, match='named like a loss'):
        _start_training_with_a_scorer(one, DATA, 'total_loss')
    assert list(one.layers)[-1] == 'Loss'
    _start_training_with_a_scorer(one, DATA, 'Loss')
    two.provide_external_data(data)
    two.forward_pass()
    assert list(two.get_loss_values()) == ['LossA', 'LossB', 'total_loss']


# ------------------------------------------------------------ handlers ---


def test_set_handler_refuses_a_dtype_a_layer_cannot_compute_in():
    """BatchNorm's epsilon 1e-10 is 0 in float16: the move is refused
    before anything moves, and the network runs on as before."""
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(
        inp >> bs.layers.BatchNorm(epsilon=1e-10, name='BN') >> out
    )
    old = NumpyHandler(np.float64)
    net.set_handler(old)
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    net.provide_external_data(DATA)
    net.forward_pass()
    outputs = net.get('Output.outputs.predictions')
    with pytest.raises(LayerValidationError, match='epsilon'):
        net.set_handler(NumpyHandler(np.float16))
    assert net.handler is old
    assert all(layer.handler is old for layer in net.layers.values())
    net.forward_pass()
    np.testing.assert_array_equal(net.get('Output.outputs.predictions'), outputs)


# ---------------------------------------------------------- parameters ---


def test_a_network_initialized_with_zeros_is_not_taken_for_uninitialized():
    net = _lstm_net(initialize=False)
    net.initialize(0.0)
    np.testing.assert_array_equal(net.get('parameters'), 0.0)
    np.testing.assert_array_equal(_run(net), 0.0)  # runs, is not refused


def _batch_norm_last():
    """FullyConnected 'Hid' -> BatchNorm 'ZBN': its statistics end the
    parameters (they are laid out by layer name)."""
    inp, out = bs.tools.get_in_out_layers('regression', 3, 2)
    return bs.Network.from_layer(
        inp
        >> bs.layers.FullyConnected(4, name='Hid')
        >> bs.layers.BatchNorm(name='ZBN')
        >> out
    )


def _parameters_after_a_loss():
    """BatchNorm 'B' whose gamma (the first parameter) is fed to a Loss
    after the constant output of Loss 'AA': the parameters do not start
    the constant buffer."""
    from brainstorm.layers import Input, Loss, SquaredError

    inp = Input({'default': ('T', 'B', 3), 'targets': ('T', 'B', 4)})
    bn, se, first = (
        bs.layers.BatchNorm(name='B'),
        SquaredError(name='SE'),
        Loss(name='AA'),
    )
    second = Loss(name='L2')
    inp - 'default' >> bs.layers.FullyConnected(4, name='F') >> bn >> se
    inp - 'targets' >> 'targets' - se
    se - 'loss' >> first
    first - 'loss' >> second
    bn - '..parameters.gamma' >> second
    net = bs.Network.from_layer(inp)
    assert net.layout['parameters']['@slice'][0] > 0
    return net


@pytest.mark.parametrize(
    'make', [_batch_norm_last, _parameters_after_a_loss], ids=['last', 'offset']
)
def test_the_trainable_mask_is_zero_exactly_over_the_untrained_parameters(make):
    net = make()
    (bn,) = [name for name, layer in net.layers.items() if layer.untrained_parameters]
    mask = net.handler.get_numpy_copy(net.trainable_mask)
    expected = np.ones(net.buffer.parameters.shape)
    for pname in ('mu', 'sigma'):  # the running statistics BatchNorm keeps
        expected[_offsets(net, net.buffer[bn].parameters[pname])] = 0.0
    np.testing.assert_array_equal(mask, expected)
    assert net.trainable_mask is net.trainable_mask  # made once
    assert _lstm_net().trainable_mask is None  # everything trainable


def _offsets(net, view):
    """The indices of ``net.buffer.parameters`` that ``view`` covers."""
    start = (
        view.__array_interface__['data'][0]
        - net.buffer.parameters.__array_interface__['data'][0]
    ) // view.itemsize
    return slice(start, start + view.size)


def test_a_move_to_a_new_layout_keeps_the_constant_buffer_and_the_batch_shape():
    """set_handler keeps the parameters and the rest of the constant memory
    (the gradients, the losses) and the (T, B) of the last batch, also
    where the new handler's workspaces make the layout anew."""
    inp = bs.layers.Input({'default': ('T', 'B', 6, 5, 2)})
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(3, (3, 3), padding=1, name='Conv')
        >> bs.layers.Loss(name='Loss')
    )
    net.set_handler(_ColumnsHandler(False))
    net.initialize(bs.initializers.Gaussian(0.5), seed=2)
    net.provide_external_data(
        {'default': np.random.RandomState(3).randn(2, 3, 6, 5, 2)}
    )
    net.forward_pass()
    net.backward_pass()
    constant = net.handler.get_numpy_copy(net.buffer_manager.buffers[0])
    gradients, loss = net.get('gradients'), net.get_loss_values()
    shape = net.get('Conv.outputs.default').shape
    assert np.abs(gradients).max() > 0 and shape[:2] == (2, 3)
    net.set_handler(_ColumnsHandler(True))
    assert 'columns' in net.buffer['Conv'].internals  # laid out anew
    np.testing.assert_array_equal(net.get('gradients'), gradients)
    assert net.get_loss_values() == loss
    np.testing.assert_array_equal(
        net.handler.get_numpy_copy(net.buffer_manager.buffers[0]), constant
    )
    assert net.get('Conv.outputs.default').shape == shape
    assert net.get('Conv.internals.columns').shape[:2] == (2, 3)


def test_a_move_that_changes_the_constant_size_keeps_the_parameters():
    """A workspace of constant size (here one that a layer wants on the
    new handler) changes the size of the constant buffer: the parameters
    are carried over into the new layout."""
    net = _lstm_net()
    net.set_handler(_ColumnsHandler(False))
    parameters, outputs = net.get('parameters'), _run(net)
    size = net.buffer_manager.sizes[0]

    def workspace_shapes(handler):
        keeps = getattr(handler, 'keeps', False)
        return OrderedDict(scratch=BufferStructure(5)) if keeps else OrderedDict()

    net.layers['R'].workspace_shapes = workspace_shapes
    net.set_handler(_ColumnsHandler(True))
    assert net.buffer_manager.sizes[0] == size + 5  # laid out anew
    np.testing.assert_array_equal(net.get('parameters'), parameters)
    np.testing.assert_array_equal(_run(net), outputs)


def test_a_forward_pass_refused_as_uninitialized_leaves_the_memory_as_it_was():
    """Refused before it begins: the context given is not written either."""
    context_net = _lstm_net()
    _run(context_net)
    context = context_net.get_context()
    assert np.abs(context[2]).max() > 0
    net = _lstm_net(initialize=False)
    net.provide_external_data(DATA)
    before = _memory(net)
    with pytest.raises(UninitializedNetworkError):
        net.forward_pass(context=context)
    for now, was in zip(_memory(net), before):
        np.testing.assert_array_equal(now, was)


def _memory(net):
    """NumPy copies of all of the network's memory, block by block."""
    blocks = []
    for buffer in net.buffer_manager.buffers:
        for block in buffer if isinstance(buffer, list) else [buffer]:
            blocks.append(net.handler.get_numpy_copy(block))
    return blocks


class _Refusing(Initializer):
    """A user's initializer that refuses with the library's own error."""

    def __call__(self, shape):
        raise NetworkValidationError(f'_Refusing: no values for {shape}')


def test_an_initializers_own_refusal_reaches_the_user_unchanged():
    net = _lstm_net()
    parameters = net.get('parameters')
    with pytest.raises(NetworkValidationError) as info:
        net.initialize({'default': 0.5, 'R': {'Wz': _Refusing()}})
    assert str(info.value) == '_Refusing: no values for (3, 2)'
    np.testing.assert_array_equal(net.get('parameters'), parameters)


def test_initialize_refuses_values_a_parameter_cannot_hold():
    """Values that are not finite, and values the layer refuses (a running
    sigma of BatchNorm that is not > 0): refused, nothing is set."""
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> bs.layers.BatchNorm(name='BN') >> out)
    net.initialize(1.0)
    parameters = net.get('parameters')
    with pytest.raises(NetworkValidationError, match=r'BN\.beta.*NaN'):
        net.initialize({'default': 1.0, 'BN': {'beta': np.nan}})
    with pytest.raises(NetworkValidationError, match=r'BN\.sigma'):
        net.initialize({'default': 1.0, 'BN': {'sigma': [1.0, 0.0]}})
    np.testing.assert_array_equal(net.get('parameters'), parameters)
