"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.l1_decay_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``L1DecayLayerImpl``)
imports unchanged; the classes are the same objects.
"""

from brainstorm.layers.l1_decay_layer import L1Decay, L1DecayLayerImpl

__all__ = ['L1Decay', 'L1DecayLayerImpl']
