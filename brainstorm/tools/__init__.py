"""Tools for building, inspecting and evaluating networks.

* :mod:`~brainstorm.tools.building`: :func:`get_in_out_layers`,
  :func:`create_net_from_spec`;
* :mod:`~brainstorm.tools.evaluation`: :func:`evaluate`, :func:`extract`,
  :func:`extract_and_save`;
* :mod:`~brainstorm.tools.inspection`: :func:`get_network_info`,
  :func:`print_network_info`, :func:`draw_network`;
* :mod:`~brainstorm.tools.arrays`: :func:`shuffle_data`, :func:`split`.
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
