"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.batch_norm_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``BatchNormLayerImpl``)
imports unchanged; the classes are the same objects.
"""

from brainstorm.layers.batch_norm_layer import BatchNorm, BatchNormLayerImpl

__all__ = ['BatchNorm', 'BatchNormLayerImpl']
