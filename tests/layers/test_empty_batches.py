"""Every registered layer runs a batch without samples or time steps.

A data-parallel rank whose part of a small last batch is empty, or a
generator that yields such a batch now and then, gives a layer ``B = 0``
(or ``T = 0``). The forward pass has nothing to compute and the backward
pass must leave zero gradients (nothing was seen) and add nothing. The
convolution and pooling ops, and the Lstm at ``T = 0``, raised bare
IndexErrors and ValueErrors inside the backward pass.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.onednn import onednn_available
from brainstorm.structure.buffer_views import BufferView
from brainstorm.testing import instantiate_layer, set_up_layer
from tests.layers.test_layer_registry import _collect

HANDLERS = ['numpy'] + (['onednn'] if onednn_available()[0] else [])


def _handler(name):
    if name == 'numpy':
        return NumpyHandler(np.float32)
    from brainstorm.handlers.onednn import OneDnnHandler

    return OneDnnHandler(np.float32)


def _cases():
    cases = []
    for entry in _collect():
        for T, B in ((1, 0), (0, 2)):
            for handler in HANDLERS:
                case_id = f'{entry["id"]}-T{T}-B{B}-{handler}'
                cases.append(pytest.param(entry, T, B, handler, id=case_id))
    return cases


@pytest.mark.parametrize('entry, T, B, handler', _cases())
def test_a_layer_runs_an_empty_batch(entry, T, B, handler):
    layer = instantiate_layer(
        entry['layer_class'], entry['in_shapes'], **entry.get('kwargs', {})
    )
    time_sized = any(s.buffer_type == 2 for s in layer.in_shapes.values())
    if T == 0 and not time_sized:
        pytest.skip('no time-sized input: T does not reach the layer')
    buffers, manager = set_up_layer(
        layer, {'time_steps': T, 'batch_size': B}, _handler(handler)
    )
    h = manager.handler
    # valid values: 0.5, or an untrained parameter's own (a clock's period)
    untrained = getattr(layer, 'untrained_parameters', {})
    for name, array in BufferView.items(buffers.parameters):
        value = untrained.get(name, 0.5)
        h.set_from_numpy(array, np.full(array.shape, value, np.float32))
    layer.forward_pass(buffers, training_pass=True)
    manager.clear_backward_buffers()
    # the network zeroes the gradients, except a layer's that overwrites them
    garbage = 7.0 if layer.overwrites_gradients else 0.0
    for array in BufferView.values(buffers.gradients):
        h.set_from_numpy(array, np.full(array.shape, garbage, np.float32))
    layer.backward_pass(buffers)
    for name, array in BufferView.items(buffers.gradients):
        if name in layer.computes_no_gradients_for:
            continue
        got = h.get_numpy_copy(array)
        # nothing seen: zero gradients
        np.testing.assert_array_equal(got, 0 * got, err_msg=f'gradient {name!r}')


@pytest.mark.parametrize('handler', HANDLERS)
def test_a_network_of_images_runs_a_batch_without_samples(handler):
    """As a data-parallel rank does with its empty part of a last batch."""
    import brainstorm as bs

    layers = bs.layers
    inp, out = bs.tools.get_in_out_layers('classification', (6, 6, 2), 3)
    net = bs.Network.from_layer(
        inp
        >> layers.Convolution2D(4, (3, 3), padding=1)
        >> layers.Pooling2D((2, 2), type='max', stride=(2, 2))
        >> layers.Pooling2D((3, 3), type='avg', stride=(3, 3))
        >> out
    )
    net.set_handler(_handler(handler))
    net.initialize(bs.initializers.Gaussian(0.3), seed=1)
    net.provide_external_data(
        {
            'default': np.ones((1, 0, 6, 6, 2), np.float32),
            'targets': np.zeros((1, 0, 1), np.float32),
        }
    )
    net.forward_pass(training_pass=True)
    net.backward_pass()
    np.testing.assert_array_equal(net.handler.get_numpy_copy(net.buffer.gradients), 0)
