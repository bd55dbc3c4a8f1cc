"""brainstorm: fast, flexible and fun neural networks.

``import brainstorm as bs`` gives the network, the trainer, descriptions,
the global random state and the submodules users need::

    import brainstorm as bs
    inp, out = bs.tools.get_in_out_layers('classification', 784, 10)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(100) >> out)
"""

from brainstorm import (
    data_iterators,
    datasets,
    handlers,
    hooks,
    initializers,
    layers,
    scorers,
    tools,
    training,
    value_modifiers,
)
from brainstorm.__about__ import __version__
from brainstorm.describable import create_from_description, get_description
from brainstorm.randomness import global_rnd
from brainstorm.structure import Network, generate_architecture
from brainstorm.training import Trainer

__all__ = [
    'get_description',
    'create_from_description',
    'global_rnd',
    'Network',
    'generate_architecture',
    'Trainer',
    'initializers',
    'data_iterators',
    'value_modifiers',
    'tools',
    'hooks',
    'layers',
    'handlers',
    'training',
    'scorers',
    'datasets',
    '__version__',
]
