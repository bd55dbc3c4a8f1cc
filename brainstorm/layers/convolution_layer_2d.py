"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.convolution_2d_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``Convolution2DLayerImpl``)
imports unchanged; the classes are the same objects.
"""

from brainstorm.layers.convolution_2d_layer import Convolution2D, Convolution2DLayerImpl

__all__ = ['Convolution2D', 'Convolution2DLayerImpl']
