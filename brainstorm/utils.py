"""Brainstorm 0.5's module of helpers, kept so that code written for it runs.

Nothing is defined here any more: every name is imported from the module
that is now its home, and is the very object defined there. New code
imports from those homes:

* :mod:`brainstorm.errors`: the error family (``ValidationError`` and its
  subclasses, ``FileWriteError``, ``InitializationError``);
* :mod:`brainstorm.shapes`: the shape helpers of layers
  (``flatten_time``, ``flatten_time_and_features``, ``reshape_view``...);
* :mod:`brainstorm.naming`: layer names and dotted paths (``get_by_path``);
* :mod:`brainstorm.files`: atomic writes and checked HDF5 files
  (``write_atomically``, ``write_hdf5``, ``CheckedReader``...);
* :mod:`brainstorm.describable`: ``get_inheritors``;
* ``brainstorm.structure.layout`` and ``brainstorm.hooks.display``:
  0.5's helpers that brainstorm no longer uses (``flatten``,
  ``convert_to_nested_indices``, ``sort_by_index_key``, ``progress_bar``,
  ``silence``).

A custom layer imports what it needs in one line from
:mod:`brainstorm.layers.authoring`. No module of brainstorm imports this
one.
"""

import math  # noqa: F401 - in Brainstorm 0.5's namespace of this module
import operator  # noqa: F401 - in Brainstorm 0.5's namespace of this module
import re  # noqa: F401 - in Brainstorm 0.5's namespace of this module
import threading  # noqa: F401 - in this module's namespace before the split
from datetime import datetime  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from functools import reduce  # noqa: F401 - in Brainstorm 0.5's namespace of this module

import numpy as np  # noqa: F401 - in this module's namespace before the split

from brainstorm.__about__ import __version__  # noqa: F401 - in Brainstorm 0.5's namespace
from brainstorm.describable import get_inheritors
from brainstorm.errors import (
    DatasetValidationError,
    DescriptionError,
    FileWriteError,
    InitializationError,
    IteratorValidationError,
    LayerValidationError,
    NetworkValidationError,
    NonFiniteError,
    StructureValidationError,
    TrainingValidationError,
    UnknownNameError,
    ValidationError,
)
from brainstorm.files import (
    CHECKSUM_ATTRIBUTE,  # noqa: F401 - importable from here before the split
    CheckedReader,  # noqa: F401 - importable from here before the split
    CheckedWriter,
    add_checksums,  # noqa: F401 - importable from here before the split
    as_file_name,  # noqa: F401 - importable from here before the split
    get_brainstorm_info,
    open_hdf5,  # noqa: F401 - importable from here before the split
    write_atomically,
    write_hdf5,
)
from brainstorm.hooks.display import progress_bar, silence
from brainstorm.naming import (
    LAYER_NAME_RULE,  # noqa: F401 - importable from here before the split
    NAME_BLACKLIST,
    PYTHON_IDENTIFIER,
    flatten_keys,
    get_by_path,
    get_normalized_path,
    is_valid_layer_name,
)
from brainstorm.shapes import (
    flatten_all_but_last,
    flatten_features,
    flatten_time,
    flatten_time_and_features,
    product,
    reshape_view,
)
from brainstorm.structure.layout import (
    convert_to_nested_indices,
    flatten,
    sort_by_index_key,
)

__all__ = [
    'ValidationError',
    'NetworkValidationError',
    'LayerValidationError',
    'IteratorValidationError',
    'StructureValidationError',
    'TrainingValidationError',
    'UnknownNameError',
    'NonFiniteError',
    'DescriptionError',
    'DatasetValidationError',
    'InitializationError',
    'FileWriteError',
    'NAME_BLACKLIST',
    'PYTHON_IDENTIFIER',
    'product',
    'flatten',
    'convert_to_nested_indices',
    'sort_by_index_key',
    'silence',
    'is_valid_layer_name',
    'get_by_path',
    'get_normalized_path',
    'flatten_time',
    'flatten_time_and_features',
    'flatten_features',
    'flatten_all_but_last',
    'flatten_keys',
    'reshape_view',
    'get_inheritors',
    'progress_bar',
    'write_atomically',
    'write_hdf5',
    'CheckedWriter',
    'get_brainstorm_info',
]
