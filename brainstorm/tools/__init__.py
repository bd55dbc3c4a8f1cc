"""Tools for building, inspecting and evaluating networks.

* :mod:`~brainstorm.tools.building`: ``get_in_out_layers``,
  ``create_net_from_spec``;
* :mod:`~brainstorm.tools.evaluation`: ``evaluate``, ``extract``,
  ``extract_and_save``;
* :mod:`~brainstorm.tools.inspection`: ``get_network_info``,
  ``print_network_info``, ``draw_network``;
* :mod:`~brainstorm.tools.arrays`: ``shuffle_data``, ``split``;
* :mod:`~brainstorm.tools.onnx_export`: ``export_onnx`` (needs the
  ``onnx`` extra).

All of them import from here: ``from brainstorm.tools import evaluate``.
"""

import numpy as np

import brainstorm.initializers as initializers
import brainstorm.layers as layers
from brainstorm.files import get_brainstorm_info, h5py_on_first_use
from brainstorm.naming import get_by_path
from brainstorm.scorers import aggregate_losses_and_scores, gather_losses_and_scores
from brainstorm.structure.network import Network
from brainstorm.tools.arrays import shuffle_data, split
from brainstorm.tools.building import (
    B,
    C,
    D,
    F,
    L,
    P,
    R,
    act_funcs,
    create_layer,
    create_net_from_spec,
    get_in_out_layers,
    trynumber,
)
from brainstorm.tools.evaluation import (
    BUFFERS_FILE_FORMAT,
    evaluate,
    extract,
    extract_and_save,
)
from brainstorm.tools.inspection import (
    draw_network,
    get_network_info,
    print_network_info,
)
from brainstorm.tools.onnx_export import export_onnx
from brainstorm.training.utils import run_network

# ``h5py``, in Brainstorm 0.5's namespace of this module, is imported when
# first asked for, so that importing brainstorm does not load HDF5
__getattr__ = h5py_on_first_use(__name__)

# the other names of Brainstorm 0.5's module brainstorm/tools.py (its imports,
# the spec helpers F, B, D, R, L, C, P, create_layer, trynumber and
# act_funcs) stay importable from here (tests/test_compat_05.py)
__all__ = [
    'get_in_out_layers',
    'create_net_from_spec',
    'evaluate',
    'extract',
    'extract_and_save',
    'get_network_info',
    'print_network_info',
    'draw_network',
    'shuffle_data',
    'split',
    'export_onnx',
]
