"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.l2_decay_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``L2DecayLayerImpl``)
imports unchanged; the classes are the same objects.
"""

from brainstorm.layers.l2_decay_layer import L2Decay, L2DecayLayerImpl

__all__ = ['L2Decay', 'L2DecayLayerImpl']
