"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.batch_norm_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``BatchNormLayerImpl``)
imports unchanged; the classes are the same objects.
"""

# with the names Brainstorm 0.5's module imported (still importable from it)
from collections import OrderedDict as OrderedDict

from brainstorm.layers.base_layer import Layer as Layer
from brainstorm.layers.batch_norm_layer import BatchNorm, BatchNormLayerImpl
from brainstorm.shapes import flatten_all_but_last as flatten_all_but_last
from brainstorm.structure.buffer_structure import BufferStructure as BufferStructure
from brainstorm.structure.buffer_structure import StructureTemplate as StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper as ConstructionWrapper

__all__ = ['BatchNorm', 'BatchNormLayerImpl']
