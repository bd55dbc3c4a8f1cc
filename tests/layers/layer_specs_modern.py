"""Registry entries for the layers of today: Add, LayerNorm, Embedding,
GlobalPooling, Softmax and the newer activations (see
test_layer_registry.py), and ``network_round_trips``, which their own test
modules use to check a layer inside a network."""

import numpy as np

import brainstorm as bs
from brainstorm.layers.add_layer import AddLayerImpl
from brainstorm.layers.elementwise_layer import ElementwiseLayerImpl
from brainstorm.layers.embedding_layer import EmbeddingLayerImpl
from brainstorm.layers.global_pooling_layer import GlobalPoolingLayerImpl
from brainstorm.layers.layer_norm_layer import LayerNormLayerImpl
from brainstorm.layers.softmax_layer import SoftmaxLayerImpl
from brainstorm.structure.buffer_structure import BufferStructure
from tests.layers.layer_specs_core import class_ids


def network_round_trips(net, data, tmp_path):
    """Run ``net`` forward and backward on ``data``; check that its
    description and its HDF5 file give a network with the same outputs and
    gradients. Returns the outputs of the first run (path -> array)."""
    from brainstorm.describable import create_from_description, get_description

    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.3), seed=2)

    def run(network):
        network.provide_external_data(data)
        network.forward_pass(training_pass=True)
        network.backward_pass()
        return {
            'outputs': {
                name: network.get(f'{name}.outputs.default')
                for name in network.layers
                if 'default' in network.buffer[name].outputs
            },
            'gradients': network.get('gradients'),
        }

    first = run(net)
    copy = create_from_description(get_description(net))
    copy.set_handler(bs.handlers.NumpyHandler(np.float64))
    copy.buffer.parameters[:] = net.buffer.parameters
    path = str(tmp_path / 'net.hdf5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    loaded.set_handler(bs.handlers.NumpyHandler(np.float64))
    for other in (copy, loaded):
        assert get_description(other) == get_description(net)
        again = run(other)
        for name, value in first['outputs'].items():
            np.testing.assert_allclose(again['outputs'][name], value, rtol=1e-12)
        np.testing.assert_allclose(again['gradients'], first['gradients'], rtol=1e-12)
    return first['outputs']


LAYER_SPECS = [
    dict(
        id='Add',
        layer_class=AddLayerImpl,
        in_shapes={'inputs_1': (3,), 'inputs_2': (3,)},
    ),
    dict(
        id='Add-three-multidim',
        layer_class=AddLayerImpl,
        in_shapes={'inputs_1': (2, 3), 'inputs_2': (2, 3), 'inputs_3': (2, 3)},
        kwargs={'num_inputs': 3},
    ),
    dict(
        id='Add-batch-sized',
        layer_class=AddLayerImpl,
        in_shapes={'inputs_1': ('B', 4), 'inputs_2': ('B', 4)},
    ),
    dict(
        id='Add-constant',
        layer_class=AddLayerImpl,
        in_shapes={'inputs_1': BufferStructure(2), 'inputs_2': BufferStructure(2)},
        spec={'output_weights': 'ones'},
    ),
    dict(
        id='LayerNorm',
        layer_class=LayerNormLayerImpl,
        in_shapes={'default': (5,)},
    ),
    dict(
        id='LayerNorm-multidim-epsilon',
        layer_class=LayerNormLayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'epsilon': 0.5},
    ),
    dict(
        id='LayerNorm-one-feature',
        layer_class=LayerNormLayerImpl,
        in_shapes={'default': (1,)},
    ),
    dict(
        id='Embedding',
        layer_class=EmbeddingLayerImpl,
        in_shapes={'default': (1,)},
        kwargs={'vocab_size': 4, 'size': 3},
        spec={'default': class_ids(4)},
    ),
    dict(
        id='Embedding-repeated-ids',
        layer_class=EmbeddingLayerImpl,
        in_shapes={'default': (1,)},
        kwargs={'vocab_size': 7, 'size': 2},
        spec={'default': class_ids(2)},
    ),
    dict(
        id='GlobalPooling-avg',
        layer_class=GlobalPoolingLayerImpl,
        in_shapes={'default': (3, 2, 4)},
        kwargs={'type': 'avg'},
    ),
    dict(
        id='GlobalPooling-max',
        layer_class=GlobalPoolingLayerImpl,
        in_shapes={'default': (2, 3, 2)},
        kwargs={'type': 'max'},
    ),
    dict(
        id='GlobalPooling-avg-sequence',
        layer_class=GlobalPoolingLayerImpl,
        in_shapes={'default': (5, 3)},
        kwargs={'type': 'avg'},
    ),
    dict(
        id='GlobalPooling-max-sequence',
        layer_class=GlobalPoolingLayerImpl,
        in_shapes={'default': (4, 2)},
        kwargs={'type': 'max'},
    ),
    dict(
        id='Softmax',
        layer_class=SoftmaxLayerImpl,
        in_shapes={'default': (4,)},
    ),
    dict(
        id='Softmax-multidim',
        layer_class=SoftmaxLayerImpl,
        in_shapes={'default': (2, 3)},
    ),
    dict(
        id='Softmax-one-feature',
        layer_class=SoftmaxLayerImpl,
        in_shapes={'default': (1,)},
    ),
    dict(
        id='Elementwise-relu-alias',
        layer_class=ElementwiseLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'activation': 'relu'},
    ),
]
