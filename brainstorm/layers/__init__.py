"""All built-in layers: constructor functions and their implementations.

Each layer lives in its own module ``<name>_layer.py`` beside its
``<Name>LayerImpl`` class.
"""

from brainstorm.layers.base_layer import Layer
from brainstorm.layers.fully_connected_layer import FullyConnected
from brainstorm.layers.input_layer import Input
from brainstorm.layers.loss_layer import Loss
from brainstorm.layers.recurrent_layer import Recurrent
from brainstorm.layers.softmax_ce_layer import SoftmaxCE
from brainstorm.layers.squared_error_layer import SquaredError

__all__ = ['Layer', 'Input', 'FullyConnected', 'Recurrent', 'Loss',
           'SoftmaxCE', 'SquaredError']
