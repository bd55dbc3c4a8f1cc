"""All built-in layers: constructor functions and their implementations.

Each layer lives in its own module ``<name>_layer.py`` beside its
``<Name>LayerImpl`` class.
"""

from brainstorm.layers.base_layer import Layer
from brainstorm.layers.batch_norm_layer import BatchNorm
from brainstorm.layers.convolution_2d_layer import Convolution2D
from brainstorm.layers.dropout_layer import Dropout
from brainstorm.layers.fully_connected_layer import FullyConnected
from brainstorm.layers.input_layer import Input
from brainstorm.layers.loss_layer import Loss
from brainstorm.layers.pooling_2d_layer import Pooling2D
from brainstorm.layers.recurrent_layer import Recurrent
from brainstorm.layers.softmax_ce_layer import SoftmaxCE
from brainstorm.layers.squared_error_layer import SquaredError

__all__ = ['Layer', 'Input', 'FullyConnected', 'Recurrent', 'Loss',
           'SoftmaxCE', 'SquaredError']
__all__ += ['Convolution2D', 'Pooling2D', 'BatchNorm', 'Dropout']
