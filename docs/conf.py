"""Sphinx configuration of the brainstorm documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html``; run the
snippets with ``sphinx-build -W -b doctest docs docs/_build/doctest``.
"""

import doctest
import pathlib
import sys

DOCS = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / '_ext'))
sys.path.insert(0, str(DOCS.parent))

import brainstorm  # noqa: E402

project = 'brainstorm'
author = 'The brainstorm developers'
copyright = '2025, The brainstorm developers'  # noqa: A001
version = release = brainstorm.__version__

extensions = [
    'sphinx.ext.autodoc',
    'sphinx.ext.napoleon',
    'sphinx.ext.doctest',
    'sphinx.ext.viewcode',
    'brainstorm_docs',
]

exclude_patterns = ['_build']
templates_path = []
html_static_path = []
html_theme = 'alabaster'
html_theme_options = {
    'description': 'Fast, flexible and fun neural networks.',
    'fixed_sidebar': True,
}

autodoc_member_order = 'bysource'
autodoc_default_options = {'members': True, 'show-inheritance': True}
autodoc_typehints = 'description'
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False

# Only the snippets of these pages run in the doctest builder (inside
# ``doctest``/``testcode`` directives); docstring examples run in their
# module's namespace through tests/test_docs.py.
doctest_test_doctest_blocks = ''

# every snippet starts from the same random state
doctest_global_setup = f'''
import sys
sys.path.insert(0, {str(DOCS.parent / 'examples')!r})
import numpy as np
import brainstorm as bs
bs.global_rnd.set_seed(42)
np.random.seed(42)
'''
doctest_default_flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
