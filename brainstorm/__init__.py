"""brainstorm: fast, flexible and fun neural networks.

``import brainstorm as bs`` gives the network, the trainer, descriptions,
the global random state and the submodules users need.
"""

from brainstorm.__about__ import __version__
from brainstorm.describable import create_from_description, get_description
from brainstorm.randomness import global_rnd

__all__ = ['get_description', 'create_from_description', 'global_rnd',
           '__version__']
