"""All built-in layers: constructor functions and their implementations.

Each layer lives in its own module ``<name>_layer.py`` beside its
``<Name>LayerImpl`` class.
"""

from brainstorm.layers.base_layer import Layer
from brainstorm.layers.batch_norm_layer import BatchNorm
from brainstorm.layers.binomial_cross_entropy_layer import BinomialCrossEntropy
from brainstorm.layers.clockwork_layer import Clockwork
from brainstorm.layers.clockwork_lstm_layer import ClockworkLstm
from brainstorm.layers.convolution_2d_layer import Convolution2D
from brainstorm.layers.deltas_scaling_layer import DeltasScaling
from brainstorm.layers.dropout_layer import Dropout
from brainstorm.layers.elementwise_layer import Elementwise
from brainstorm.layers.fully_connected_layer import FullyConnected
from brainstorm.layers.highway_layer import Highway
from brainstorm.layers.input_layer import Input
from brainstorm.layers.l1_decay_layer import L1Decay
from brainstorm.layers.l2_decay_layer import L2Decay
from brainstorm.layers.loss_layer import Loss
from brainstorm.layers.lstm_layer import Lstm
from brainstorm.layers.mask_layer import Mask
from brainstorm.layers.merge_layer import Merge
from brainstorm.layers.noop_layer import NoOp
from brainstorm.layers.pooling_2d_layer import Pooling2D
from brainstorm.layers.recurrent_layer import Recurrent
from brainstorm.layers.sigmoid_ce_layer import SigmoidCE
from brainstorm.layers.softmax_ce_layer import SoftmaxCE
from brainstorm.layers.squared_difference_layer import SquaredDifference
from brainstorm.layers.squared_error_layer import SquaredError

__all__ = ['Layer', 'Input', 'FullyConnected', 'Recurrent', 'Loss',
           'SoftmaxCE', 'SquaredError']
__all__ += ['Convolution2D', 'Pooling2D', 'BatchNorm', 'Dropout']
__all__ += ['Highway', 'Elementwise', 'NoOp', 'DeltasScaling', 'Merge',
            'Mask', 'SigmoidCE', 'BinomialCrossEntropy', 'SquaredDifference',
            'L1Decay', 'L2Decay']
__all__ += ['Lstm', 'Clockwork', 'ClockworkLstm']
