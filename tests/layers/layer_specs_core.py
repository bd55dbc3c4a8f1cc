"""Registry entries for the core layers (see test_layer_registry.py)."""

from brainstorm.layers.fully_connected_layer import FullyConnectedLayerImpl
from brainstorm.layers.loss_layer import LossLayerImpl
from brainstorm.layers.recurrent_layer import RecurrentLayerImpl
from brainstorm.layers.softmax_ce_layer import SoftmaxCELayerImpl
from brainstorm.layers.squared_error_layer import SquaredErrorLayerImpl
from brainstorm.structure.buffer_structure import BufferStructure


def class_ids(num_classes):
    """A spec value: random class ids of shape (T, B, 1)."""

    def make(time_steps, batch_size, rnd):
        return rnd.randint(0, num_classes, (time_steps, batch_size, 1))

    return make


LAYER_SPECS = [
    dict(
        id='FullyConnected',
        layer_class=FullyConnectedLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'size': 4},
        activation=True,
    ),
    dict(
        id='FullyConnected-multidim',
        layer_class=FullyConnectedLayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'size': (2, 2)},
        activation=True,
    ),
    dict(
        id='FullyConnected-default-size',
        layer_class=FullyConnectedLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={},
        activation=True,
    ),
    dict(
        id='Recurrent',
        layer_class=RecurrentLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'size': 4},
        activation=True,
    ),
    dict(
        id='SoftmaxCE',
        layer_class=SoftmaxCELayerImpl,
        in_shapes={'default': (5,), 'targets': (1,)},
        kwargs={},
        spec={'targets': class_ids(5)},
    ),
    dict(
        id='SquaredError',
        layer_class=SquaredErrorLayerImpl,
        in_shapes={'default': (3,), 'targets': (3,)},
        kwargs={},
    ),
    dict(
        id='SquaredError-multidim',
        layer_class=SquaredErrorLayerImpl,
        in_shapes={'default': (2, 3), 'targets': (2, 3)},
        kwargs={},
    ),
    dict(
        id='Loss',
        layer_class=LossLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'importance': 0.7},
        spec={'output_weights': 'ones'},
    ),
    dict(
        id='Loss-constant',
        layer_class=LossLayerImpl,
        in_shapes={'default': BufferStructure(3)},
        kwargs={'importance': 0.5},
        spec={'output_weights': 'ones'},
    ),
    dict(
        id='Loss-batch-sized',
        layer_class=LossLayerImpl,
        in_shapes={'default': ('B', 3)},
        kwargs={'importance': 2.0},
        spec={'output_weights': 'ones'},
    ),
]
