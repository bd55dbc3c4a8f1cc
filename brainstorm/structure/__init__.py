"""Network structure: construction, architectures, layouts and buffers."""

from brainstorm.structure.architecture import generate_architecture
from brainstorm.structure.network import Network

__all__ = ['Network', 'generate_architecture']
