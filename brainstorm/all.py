"""Every public name of brainstorm in one namespace.

``from brainstorm.all import *`` star-imports all public submodules.
``value_modifiers`` comes last, so ``L1Decay`` and ``L2Decay`` here are the
gradient modifiers, not the layers of the same names (as in Brainstorm 0.5).
"""

from brainstorm.data_iterators import *
from brainstorm.datasets import *
from brainstorm.describable import *
from brainstorm.handlers import *
from brainstorm.hooks import *
from brainstorm.initializers import *
from brainstorm.layers import *
from brainstorm.randomness import *
from brainstorm.scorers import *
from brainstorm.structure import *
from brainstorm.tools import *
from brainstorm.training import *
from brainstorm.value_modifiers import *  # type: ignore[assignment]
