"""Sphinx configuration of the brainstorm documentation.

Build with ``sphinx-build -W -b html docs docs/_build/html``; run the
snippets with ``sphinx-build -W -b doctest docs docs/_build/doctest``.
"""

import doctest
import importlib
import inspect
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
html_static_path = ['_static']
# long code lines wrap instead of being cut off (see _static/wrap.css)
html_css_files = ['wrap.css']
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

doctest_default_flags = doctest.NORMALIZE_WHITESPACE

# Every cross-reference must resolve (``sphinx-build -n``; CI runs it with
# ``-W``). The build is offline (no intersphinx), so references to the
# standard library's and NumPy's types in signatures cannot be linked; they
# are the only ones ignored.
nitpicky = True
nitpick_ignore = [
    ('py:class', name)
    for name in [
        'collections.OrderedDict',
        'collections.abc.Iterable',
        'collections.abc.Callable',
        'collections.abc.Mapping',
        'inspect.Signature',
        'os.PathLike',
        'argparse.ArgumentParser',
        'collections.abc.Iterator',
        'collections.abc.Sequence',
        'abc.ABC',
        'numpy.ndarray',
        'np.ndarray',
        'numpy.float32',
        'numpy.random.mtrand.RandomState',
        'types.ModuleType',
    ]
]


def public_bases(app, name, obj, options, bases):
    """Show a private base class (``_FileHook``) as the public classes it
    derives from: the private one is not documented."""

    def public(base):
        if base.__name__.startswith('_') and base.__module__.startswith('brainstorm'):
            return [b for parent in base.__bases__ for b in public(parent)]
        return [base]

    bases[:] = list(dict.fromkeys(b for base in bases for b in public(base)))


def resolve_short_names(app, env, node, contnode):
    """Resolve a docstring's short reference to a brainstorm object: a member
    inherited from a documented base class (``:meth:`start``` in a stepper
    subclass), or the one documented object whose name ends with the
    target (``:class:`Handler```, ``:meth:`Network.initialize```); a
    ``brainstorm.package.Name`` target may name an object of a submodule.
    Ambiguous or unknown targets stay unresolved (and fail the build)."""
    from sphinx.util.nodes import make_refnode

    if node.get('refdomain') != 'py':
        return None
    target = node['reftarget'].lstrip('~.')
    objects = env.get_domain('py').objects
    candidates = []
    module, cls = node.get('py:module'), node.get('py:class')
    if module and cls:
        try:
            owner = importlib.import_module(module)
            for part in cls.split('.'):
                owner = getattr(owner, part)
        except (ImportError, AttributeError):
            owner = None
        if inspect.isclass(owner):
            for base in inspect.getmro(owner)[1:]:
                name = f'{base.__module__}.{base.__qualname__}.{target}'
                if name in objects:
                    candidates = [name]
                    break
    if not candidates:
        prefix, _, last = target.rpartition('.')
        if prefix.startswith('brainstorm'):
            candidates = [
                name
                for name in objects
                if name.startswith(prefix + '.') and name.endswith('.' + last)
            ]
        else:
            candidates = [
                name
                for name in objects
                if name.startswith('brainstorm.') and name.endswith('.' + target)
            ]
    if len(candidates) != 1:
        return None
    entry = objects[candidates[0]]
    return make_refnode(
        app.builder,
        node['refdoc'],
        entry.docname,
        entry.node_id,
        contnode,
        candidates[0],
    )


def setup(app):
    app.connect('autodoc-process-bases', public_bases)
    app.connect('missing-reference', resolve_short_names)
