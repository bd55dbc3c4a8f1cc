"""Calls that are refused change nothing, and names that are list or view
methods still work (found by a hunter building networks as a user)."""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.layers import FullyConnected, Input, Loss, SquaredError


def mlp():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(
        inp >> FullyConnected(4, name='Hid1') >> FullyConnected(4, name='Hid2') >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def data():
    rnd = np.random.RandomState(0)
    return {'default': rnd.randn(2, 3, 3), 'targets': rnd.randint(0, 2, (2, 3, 1))}


class Halve(bs.value_modifiers.ValueModifier):
    """Not describable (it holds a plain object)."""

    def __init__(self, extra):
        super().__init__()
        self.extra = extra

    def __call__(self, handler, view):
        handler.mult_st(0.5, view, view)


@pytest.mark.parametrize('kind', ['weight', 'gradient'])
def test_a_refused_modifier_call_keeps_the_modifiers_installed_before(kind):
    net = mlp()
    setter = getattr(net, f'set_{kind}_modifiers')
    setter({'Hid1': bs.value_modifiers.ClipValues(-0.1, 0.1)})
    before = bs.get_description(net)
    installed = getattr(net, f'{kind}_modifiers')
    with pytest.raises(Exception):  # noqa: B017 - whatever the description says
        setter({'Hid1': Halve(object())})
    assert getattr(net, f'{kind}_modifiers') is installed
    assert bs.get_description(net) == before
    net.provide_external_data(data())
    net.forward_pass(training_pass=True)
    net.backward_pass()  # failed: the refused modifier was installed
    net.apply_weight_modifiers()


@pytest.mark.parametrize('kind', ['weight', 'gradient'])
def test_something_that_is_no_modifier_is_refused_naming_it(kind):
    net = mlp()
    with pytest.raises(NetworkValidationError, match='Hid1.W.*Gaussian.*modifier'):
        getattr(net, f'set_{kind}_modifiers')({'Hid1': bs.initializers.Gaussian()})


def test_a_refused_initialize_leaves_every_parameter_as_it_was():
    net = mlp()
    before = net.get('parameters')
    with pytest.raises(NetworkValidationError, match='Multiple initializers'):
        net.initialize({'default': 0.0, 'Out*': {'W': 2.0}, 'Output_projection': 3.0})
    np.testing.assert_array_equal(net.get('parameters'), before)


def test_a_refused_initialize_of_a_fresh_network_leaves_it_uninitialised():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> FullyConnected(4, name='Hid1') >> out)
    with pytest.raises(NetworkValidationError):
        net.initialize({'Hid1': 1.0, 'Out*': {'W': 2.0}, 'Output_projection': 3.0})
    assert not net.get('parameters').any()
    net.provide_external_data(data())
    with pytest.raises(bs.structure.prediction.UninitializedNetworkError):
        net.forward_pass()


def named_input_network(name):
    """Input output ``name`` -> FullyConnected 'FC' -> squared error."""
    inp = Input({name: ('T', 'B', 3), 'targets': ('T', 'B', 2)})
    error = SquaredError(name='Out')
    inp - name >> FullyConnected(2, name='FC') >> error
    inp - 'targets' >> 'targets' - error
    error - 'loss' >> Loss()
    return bs.Network.from_layer(inp)


@pytest.mark.parametrize('name', ['adjust', 'append', 'index', 'get_group'])
def test_layers_and_inputs_may_take_the_names_of_view_methods(name):
    """A layer (or Input output) named 'adjust' shadowed the view method the
    buffer manager calls on every resize: a bare TypeError at the first
    provide_external_data."""
    inp, out = bs.tools.get_in_out_layers('regression', 3, 2)
    net = bs.Network.from_layer(inp >> FullyConnected(4, name=name) >> out)
    net.initialize(bs.initializers.Gaussian(), seed=1)
    for T, B in ((2, 3), (4, 1)):
        net.provide_external_data(
            {'default': np.ones((T, B, 3)), 'targets': np.ones((T, B, 2))}
        )
        net.forward_pass()
    assert net.get(f'{name}.outputs.default').shape == (4, 1, 4)

    net = named_input_network(name)
    net.initialize(1.0)
    net.provide_external_data({name: np.ones((2, 3, 3)), 'targets': np.ones((2, 3, 2))})
    net.forward_pass()


def test_use_conv_with_a_one_dimensional_output_is_fully_connected():
    """As in 0.5 (SPEC 14): one output dimension gives FullyConnected
    whatever use_conv says; a 0.5 conv-net script passing use_conv=True
    for its class scores failed to build."""
    inp, out = bs.tools.get_in_out_layers(
        'classification', (8, 8, 3), 10, use_conv=True
    )
    net = bs.Network.from_layer(
        inp >> bs.layers.Convolution2D(4, (3, 3), padding=1) >> out
    )
    assert net.layers['Output_projection'].layer_type == 'FullyConnected'


def test_data_for_a_batch_sized_input_alone_keeps_the_time_size():
    """provide_external_data(all_inputs=False) with only a batch-sized
    input of the same B cut the time-sized inputs to one zero step: the
    data names no time size, and skipped inputs keep their values."""
    inp = Input({'default': ('T', 'B', 3), 'b': ('B', 2)})
    inp - 'b' >> Loss(name='Lb')
    inp >> FullyConnected(2, name='FC') >> Loss(name='Lx')
    net = bs.Network.from_layer(inp)
    net.initialize(1.0)
    x = np.random.RandomState(0).randn(5, 4, 3)
    net.provide_external_data({'default': x, 'b': np.ones((4, 2))})
    net.provide_external_data({'b': 2 * np.ones((4, 2))}, all_inputs=False)
    np.testing.assert_array_equal(net.get_input('default'), x.astype(np.float32))
    np.testing.assert_array_equal(net.get_input('b'), 2 * np.ones((4, 2)))


def test_a_network_without_a_context_gives_one_entry_per_buffer_type():
    """As in 0.5: [None, None, None], not None (0.5's own idiom iterates
    over it), for a network without recurrent layers and before the first
    batch; given back to forward_pass it means a zero context."""
    net = mlp()
    assert net.get_context() == [None, None, None]
    net.provide_external_data(data())
    context = net.get_context()
    assert [c for c in context] == [None, None, None]
    net.forward_pass(context=context)

    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    rnn = bs.Network.from_layer(inp >> bs.layers.Lstm(4, name='L') >> out)
    rnn.set_handler(NumpyHandler(np.float64))
    rnn.initialize(bs.initializers.Gaussian(0.5), seed=2)
    empty = rnn.get_context()
    assert empty == [None, None, None]
    rnn.provide_external_data(data())
    rnn.forward_pass()
    plain = rnn.get('L.outputs.default').copy()
    rnn.forward_pass(context=rnn.get_context())  # a real context changes it
    assert not np.array_equal(rnn.get('L.outputs.default'), plain)
    rnn.forward_pass(context=empty)  # the empty one is a zero context
    np.testing.assert_array_equal(rnn.get('L.outputs.default'), plain)


@pytest.mark.parametrize('name', ['keys', 'items', 'values'])
def test_inputs_named_after_view_methods_work_with_monitors_and_checks(name):
    """Library code called ``view.items()`` and the like through the
    instance, where a child of that name hid the method: a monitor of the
    layer failed with a bare TypeError, and so did the finite check's
    search for the broken buffer."""
    net = named_input_network(name)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(0.5)
    data = {name: np.ones((2, 4, 3)), 'targets': np.ones((2, 4, 2))}
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.MonitorLayerInOuts('Input', name='monitor'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(net, bs.data_iterators.Minibatches(2, **data))
    assert name in trainer.logs['monitor']['outputs']
    net.buffer.FC.parameters.W[0, 0] = np.nan
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    with pytest.raises(bs.errors.NonFiniteError, match='FC'):
        trainer.train(net, bs.data_iterators.Minibatches(2, **data))


@pytest.mark.parametrize('value', [0, 0.0])
def test_a_description_initializing_with_zero_initializes(value):
    """``'initializers': 0`` was taken for "none" (a truth test), so the
    rebuilt network refused to run as never initialised; 1 or 0.5 worked."""

    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
    description = bs.get_description(net)
    description['initializers'] = value  # written by hand, as initialize takes it
    rebuilt = bs.create_from_description(description)
    np.testing.assert_array_equal(
        rebuilt.handler.get_numpy_copy(rebuilt.buffer.parameters), 0
    )
    rebuilt.provide_external_data(
        {'default': np.ones((1, 2, 4)), 'targets': np.zeros((1, 2, 1))}
    )
    rebuilt.forward_pass()  # initialised: runs
