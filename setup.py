"""Kept for tools that still call ``python setup.py``.

All metadata lives in pyproject.toml.
"""

from setuptools import setup

setup()
