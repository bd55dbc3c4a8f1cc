"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.pooling_2d_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``Pooling2DLayerImpl``)
imports unchanged; the classes are the same objects.
"""

# with the names Brainstorm 0.5's module imported (still importable from it)
from collections import OrderedDict as OrderedDict

from brainstorm.layers.base_layer import Layer as Layer
from brainstorm.layers.pooling_2d_layer import Pooling2D, Pooling2DLayerImpl
from brainstorm.shapes import flatten_time as flatten_time
from brainstorm.structure.buffer_structure import BufferStructure as BufferStructure
from brainstorm.structure.buffer_structure import StructureTemplate as StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper as ConstructionWrapper

__all__ = ['Pooling2D', 'Pooling2DLayerImpl']
