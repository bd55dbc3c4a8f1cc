"""Brainstorm 0.5's module path of :mod:`brainstorm.layers.convolution_2d_layer`.

Kept so that 0.5 code (e.g. custom layers subclassing ``Convolution2DLayerImpl``)
imports unchanged; the classes are the same objects.
"""

# with the names Brainstorm 0.5's module imported (still importable from it)
from collections import OrderedDict as OrderedDict

from brainstorm.handlers.base_handler import Handler as Handler
from brainstorm.layers.base_layer import Layer as Layer
from brainstorm.layers.convolution_2d_layer import Convolution2D, Convolution2DLayerImpl
from brainstorm.shapes import flatten_time as flatten_time
from brainstorm.structure.buffer_structure import BufferStructure as BufferStructure
from brainstorm.structure.buffer_structure import StructureTemplate as StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper as ConstructionWrapper

__all__ = ['Convolution2D', 'Convolution2DLayerImpl']
