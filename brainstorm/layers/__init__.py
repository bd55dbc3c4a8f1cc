"""All built-in layers: constructor functions and their implementations.

Each layer lives in its own module ``<name>_layer.py`` beside its
``<Name>LayerImpl`` class. :func:`describe_layers` lists every registered
layer (built-in and user-defined) with its inputs, outputs, parameters and
declared arguments.
"""

from brainstorm.layers.add_layer import Add
from brainstorm.layers.base_layer import Layer, describe_layers
from brainstorm.layers.batch_norm_layer import BatchNorm
from brainstorm.layers.binomial_cross_entropy_layer import BinomialCrossEntropy
from brainstorm.layers.clockwork_layer import Clockwork
from brainstorm.layers.clockwork_lstm_layer import ClockworkLstm
from brainstorm.layers.convolution_2d_layer import Convolution2D
from brainstorm.layers.deltas_scaling_layer import DeltasScaling
from brainstorm.layers.dropout_layer import Dropout
from brainstorm.layers.elementwise_layer import Elementwise
from brainstorm.layers.embedding_layer import Embedding
from brainstorm.layers.fully_connected_layer import FullyConnected
from brainstorm.layers.global_pooling_layer import GlobalPooling
from brainstorm.layers.gru_layer import GRU
from brainstorm.layers.highway_layer import Highway
from brainstorm.layers.input_layer import Input
from brainstorm.layers.l1_decay_layer import L1Decay
from brainstorm.layers.l2_decay_layer import L2Decay
from brainstorm.layers.layer_norm_layer import LayerNorm
from brainstorm.layers.loss_layer import Loss
from brainstorm.layers.lstm_layer import Lstm
from brainstorm.layers.mask_layer import Mask
from brainstorm.layers.merge_layer import Merge
from brainstorm.layers.noop_layer import NoOp
from brainstorm.layers.pooling_2d_layer import Pooling2D
from brainstorm.layers.recurrent_layer import Recurrent
from brainstorm.layers.sigmoid_ce_layer import SigmoidCE
from brainstorm.layers.softmax_ce_layer import SoftmaxCE
from brainstorm.layers.softmax_layer import Softmax
from brainstorm.layers.squared_difference_layer import SquaredDifference
from brainstorm.layers.squared_error_layer import SquaredError

__all__ = [
    'Layer',
    'Input',
    'FullyConnected',
    'Recurrent',
    'Lstm',
    'GRU',
    'Clockwork',
    'ClockworkLstm',
    'Highway',
    'Convolution2D',
    'Pooling2D',
    'BatchNorm',
    'Dropout',
    'Elementwise',
    'Merge',
    'Mask',
    'NoOp',
    'DeltasScaling',
    'Loss',
    'SoftmaxCE',
    'SigmoidCE',
    'BinomialCrossEntropy',
    'SquaredDifference',
    'SquaredError',
    'L1Decay',
    'L2Decay',
    'Add',
    'LayerNorm',
    'Embedding',
    'GlobalPooling',
    'Softmax',
]
