"""Package metadata."""

__version__ = "0.5"
__author__ = "The brainstorm developers"
__url__ = "https://github.com/brainstorm-successor/brainstorm"
__license__ = "MIT"
