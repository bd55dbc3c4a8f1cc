"""Everything a custom layer's file needs, in one import.

::

    from brainstorm.layers.authoring import (
        BufferStructure, ConstructionWrapper, Kwarg, Layer,
        LayerValidationError, StructureTemplate, flatten_time_and_features)

* the base class :class:`~brainstorm.layers.base_layer.Layer`, and
  :class:`~brainstorm.structure.construction.ConstructionWrapper` for the
  constructor function (``ConstructionWrapper.create(MyLayerImpl, ...)``);
* the shape templates:
  :class:`~brainstorm.structure.buffer_structure.StructureTemplate` for
  ``expected_inputs``,
  :class:`~brainstorm.structure.buffer_structure.BufferStructure` for what
  ``setup`` returns;
* the argument declarations of ``declared_kwargs``:
  :class:`~brainstorm.arguments.Arg` with the checks
  :class:`~brainstorm.arguments.Real`, :class:`~brainstorm.arguments.Int`
  and :class:`~brainstorm.arguments.Choice` (the language of every class
  of brainstorm), and the layer spellings of the same,
  :class:`~brainstorm.layers.attributes.Kwarg`,
  :data:`~brainstorm.layers.attributes.REQUIRED` and the constraints
  (``FloatIn``, ``PositiveInt``, ``OneOf``...);
* the shape helpers, which reshape buffers as views and never copy:
  ``flatten_time``, ``flatten_time_and_features``, ``flatten_features``,
  ``flatten_all_but_last``, ``reshape_view``;
* the error a layer raises for bad arguments or input shapes,
  :class:`~brainstorm.errors.LayerValidationError`.

Each name is the object defined in its home (:mod:`brainstorm.layers.base_layer`,
:mod:`brainstorm.structure.buffer_structure`,
:mod:`brainstorm.structure.construction`, :mod:`brainstorm.arguments`,
:mod:`brainstorm.layers.attributes`,
:mod:`brainstorm.shapes`, :mod:`brainstorm.errors`). Importing this module
loads neither h5py nor the data sets. docs/custom_layer.rst walks through
writing a layer with it; :mod:`brainstorm.testing` checks the result.
"""

from brainstorm.arguments import Arg, Choice, Int, Real
from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import (
    ACTIVATIONS,
    REQUIRED,
    Activation,
    Constraint,
    FloatIn,
    Kwarg,
    NonNegativeInt,
    Number,
    OneOf,
    PairOfPositiveInts,
    PositiveInt,
    PositiveIntOrTuple,
    ShapeDict,
)
from brainstorm.layers.base_layer import Layer
from brainstorm.shapes import (
    flatten_all_but_last,
    flatten_features,
    flatten_time,
    flatten_time_and_features,
    reshape_view,
)
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper

__all__ = [
    # the layer and its constructor
    'Layer',
    'ConstructionWrapper',
    # shape templates
    'StructureTemplate',
    'BufferStructure',
    # argument declarations
    'Arg',
    'Real',
    'Int',
    'Choice',
    'Kwarg',
    'REQUIRED',
    'Constraint',
    'PositiveInt',
    'NonNegativeInt',
    'PositiveIntOrTuple',
    'PairOfPositiveInts',
    'FloatIn',
    'Number',
    'OneOf',
    'Activation',
    'ShapeDict',
    'ACTIVATIONS',
    # shape helpers
    'flatten_time',
    'flatten_time_and_features',
    'flatten_features',
    'flatten_all_but_last',
    'reshape_view',
    # the error
    'LayerValidationError',
]
