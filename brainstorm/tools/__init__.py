"""Tools for building, inspecting and evaluating networks.

* :mod:`~brainstorm.tools.building`: ``get_in_out_layers``,
  ``create_net_from_spec``;
* :mod:`~brainstorm.tools.evaluation`: ``evaluate``, ``extract``,
  ``extract_and_save``;
* :mod:`~brainstorm.tools.inspection`: ``get_network_info``,
  ``print_network_info``, ``draw_network``;
* :mod:`~brainstorm.tools.arrays`: ``shuffle_data``, ``split``.

All of them import from here: ``from brainstorm.tools import evaluate``.
"""

from brainstorm.tools.arrays import shuffle_data, split
from brainstorm.tools.building import create_net_from_spec, get_in_out_layers
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
]
