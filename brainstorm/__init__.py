"""brainstorm: fast, flexible and fun neural networks.

``import brainstorm as bs`` gives the network, the trainer, descriptions,
the global random state and the submodules users need::

    import brainstorm as bs
    inp, out = bs.tools.get_in_out_layers('classification', 784, 10)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(100) >> out)

``bs.datasets`` (the examples' data sets, read with h5py) is imported when
it is first used, so that ``import brainstorm`` (and importing a module of
it, e.g. to write a layer) loads neither the data sets nor HDF5.
"""

import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from brainstorm import (
    data_iterators,
    handlers,
    hooks,
    initializers,
    layers,
    scorers,
    tools,
    training,
    utils,  # noqa: F401 - ``bs.utils``: Brainstorm 0.5's helpers, re-exported
    value_modifiers,
)
from brainstorm.__about__ import __version__
from brainstorm.describable import create_from_description, get_description
from brainstorm.randomness import global_rnd
from brainstorm.structure import Network, generate_architecture
from brainstorm.training import Trainer

if TYPE_CHECKING:  # for type checkers and readers; at run time see __getattr__
    from brainstorm import datasets

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

#: submodules imported on first use (PEP 562), each declared above under
#: TYPE_CHECKING
_ON_FIRST_USE = ('datasets',)


def __getattr__(name: str) -> ModuleType:
    """``bs.datasets``: imports the submodule when it is first asked for."""
    if name in _ON_FIRST_USE:
        return importlib.import_module(f'{__name__}.{name}')
    raise AttributeError(f'module {__name__!r} has no attribute {name!r}')


def __dir__() -> list:
    """The module's names, with those imported on first use."""
    return sorted(set(globals()) | set(_ON_FIRST_USE))
