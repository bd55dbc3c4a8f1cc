"""The network's thread guard covers set_handler, initialize and copy.copy.

``set_handler`` or ``initialize`` from another thread while a thread runs
the network (e.g. trains it) moved or overwrote its memory under the
running passes; ``copy.copy(net)``, which shares the memory, got a guard
of its own, so a second thread could write its batch into the first
thread's network through the copy.
"""

import copy
import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler


def _net():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(4) >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(0.1)
    return net


def _in_another_thread(call):
    errors = []

    def run():
        try:
            call()
        except Exception as err:  # the outcome is checked by the caller
            errors.append(err)

    worker = threading.Thread(target=run, name='other')
    worker.start()
    worker.join()
    return errors


@pytest.mark.parametrize(
    'what, call',
    [
        ('set_handler', lambda net: net.set_handler(NumpyHandler(np.float32))),
        ('initialize', lambda net: net.initialize(0.5)),
        (
            'provide_external_data',
            lambda alias: alias.provide_external_data(
                {'default': np.ones((1, 2, 3)), 'targets': np.zeros((1, 2, 1))}
            ),
        ),
    ],
)
def test_another_thread_is_refused_while_one_holds_the_network(what, call):
    net = _net()
    alias = copy.copy(net)  # made before: the same network under another name
    before = net.get('parameters')
    net._enter('train')  # as Trainer.train holds it
    try:
        target = alias if what == 'provide_external_data' else net
        errors = _in_another_thread(lambda: call(target))
    finally:
        net._leave()
    assert len(errors) == 1
    assert isinstance(errors[0], NetworkValidationError)
    assert what in str(errors[0]) and "thread 'other'" in str(errors[0])
    assert net.handler.dtype == np.float64
    np.testing.assert_array_equal(net.get('parameters'), before)


def test_a_shallow_copy_is_the_same_network():
    net = _net()
    alias = copy.copy(net)
    assert alias.buffer_manager is net.buffer_manager
    alias.initialize(0.5)
    np.testing.assert_array_equal(net.get('parameters'), 0.5)
    # in one thread, the two names enter one after the other
    net._enter('train')
    try:
        alias.provide_external_data(
            {'default': np.ones((1, 2, 3)), 'targets': np.zeros((1, 2, 1))}
        )
    finally:
        net._leave()


def test_set_handler_through_a_shallow_copy_moves_the_original_too():
    """The copy had a ``handler`` of its own: moving the shared memory to
    another handler through it left the original computing with the old
    one on the new memory (its ``get`` cast float64 parameters back to
    float32, silently), and the original's next backward pass did not
    know the batch was gone."""
    net = _net()
    alias = copy.copy(net)
    net.provide_external_data(
        {'default': np.ones((1, 2, 3)), 'targets': np.zeros((1, 2, 1))}
    )
    net.forward_pass()
    new = NumpyHandler(np.float32)
    alias.set_handler(new)
    assert net.handler is new
    assert net.get('parameters').dtype == np.float32
    with pytest.raises(NetworkValidationError, match='forward_pass'):
        net.backward_pass()


def test_attributes_set_through_a_shallow_copy_are_the_networks():
    net = _net()
    alias = copy.copy(net)
    alias.output_name = 'Output.outputs.predictions'
    assert net.output_name == 'Output.outputs.predictions'
    assert copy.copy(alias).__dict__ is net.__dict__
