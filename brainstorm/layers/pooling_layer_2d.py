"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.pooling_2d_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``Pooling2DLayerImpl``)
imports unchanged; the classes are the same objects.
"""

from brainstorm.layers.pooling_2d_layer import Pooling2D, Pooling2DLayerImpl

__all__ = ['Pooling2D', 'Pooling2DLayerImpl']
