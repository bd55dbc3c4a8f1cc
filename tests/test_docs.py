"""The documentation builds without warnings and all its code runs.

* ``sphinx-build -W -b html`` builds the docs with warnings as errors;
* ``sphinx-build -W -b doctest`` runs every snippet of the pages;
* the examples in the docstrings of every ``brainstorm`` module run in
  their module's namespace (``doctest``);
* the README's example runs;
* the generated parts (layer reference, seed layout) cover what they claim.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import pathlib
import pkgutil
import re
import subprocess
import sys

import pytest

import brainstorm
from brainstorm.optional import MissingDependencyMock

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / 'docs'

# modules that only import with their optional dependency installed
OPTIONAL_MODULES = {'brainstorm.handlers._cublas': 'pycuda',
                    'brainstorm.handlers._cuda_kernels': 'pycuda'}


def sphinx_build(builder: str, out_dir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-m', 'sphinx', '-W', '--keep-going', '-q', '-b',
         builder, '-d', str(out_dir / 'doctrees'), str(DOCS),
         str(out_dir / builder)],
        cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    result = sphinx_build('html', tmp_path)
    assert result.returncode == 0, (
        f'sphinx-build -W -b html failed:\n{result.stdout[-5000:]}\n'
        f'{result.stderr[-5000:]}')
    html = tmp_path / 'html'
    for page in ['index', 'quickstart', 'walkthrough', 'internals',
                 'custom_layer', 'custom_handler', 'data_format', 'layers',
                 'api', 'history']:
        assert (html / f'{page}.html').exists(), page
    layers = (html / 'layers.html').read_text()
    assert 'FullyConnectedLayerImpl' in layers
    internals = (html / 'internals.html').read_text()
    assert '@context_size' in internals


@pytest.mark.slow
def test_doc_snippets_run(tmp_path):
    result = sphinx_build('doctest', tmp_path)
    output = tmp_path / 'doctest' / 'output.txt'
    report = output.read_text() if output.exists() else ''
    assert result.returncode == 0, (
        f'sphinx-build -b doctest failed:\n{report[-6000:]}\n'
        f'{result.stderr[-3000:]}')
    totals = re.findall(r'^\s+(\d+) tests$', report, flags=re.M)
    # the last summary covers all pages
    assert totals and int(totals[-1]) >= 50, report[-2000:]
    assert report.rstrip().endswith('0 failures in cleanup code')


# ---- docstring examples ------------------------------------------------

def brainstorm_modules() -> list:
    return sorted(m.name for m in pkgutil.walk_packages(
        brainstorm.__path__, 'brainstorm.'))


def import_module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError as err:
        if name in OPTIONAL_MODULES:
            pytest.skip(f'{name} needs {OPTIONAL_MODULES[name]} ({err})')
        raise


def docstrings(module) -> list:
    """``(qualified name, object)`` of the module and of everything defined
    in it that can carry a docstring (classes, functions, methods,
    properties)."""
    found = [(module.__name__, module)]
    for key, value in vars(module).items():
        # optional-dependency stand-ins raise on every attribute access
        if isinstance(value, MissingDependencyMock):
            continue
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        if getattr(value, '__module__', None) != module.__name__:
            continue
        found.append((f'{module.__name__}.{key}', value))
        if inspect.isclass(value):
            for attr, member in vars(value).items():
                if isinstance(member, (staticmethod, classmethod)):
                    member = member.__func__
                if isinstance(member, property):
                    member = member.fget
                if inspect.isfunction(member):
                    found.append((f'{module.__name__}.{key}.{attr}', member))
    return found


@pytest.mark.parametrize('module_name', brainstorm_modules())
def test_docstring_examples_run(module_name):
    module = import_module(module_name)
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    filename = getattr(module, '__file__', None) or module_name
    failures: list = []
    for name, obj in docstrings(module):
        doc = module.__doc__ if obj is module else inspect.getdoc(obj)
        if doc and '>>>' in doc:
            test = parser.get_doctest(doc, dict(vars(module)), name,
                                      filename, 0)
            runner.run(test, out=failures.append)
    assert runner.failures == 0, ''.join(failures)


def test_docstring_examples_are_collected():
    count = 0
    for name in brainstorm_modules():
        if name in OPTIONAL_MODULES:
            continue
        module = importlib.import_module(name)
        for _, obj in docstrings(module):
            doc = module.__doc__ if obj is module else inspect.getdoc(obj)
            if doc:
                count += len(doctest.DocTestParser().get_examples(doc))
    assert count >= 5


# ---- README ------------------------------------------------------------

def readme_example() -> str:
    text = (ROOT / 'README.rst').read_text()
    match = re.search(r'^\.\. code-block:: python\n\n((?:    .*\n|\n)+)', text,
                      flags=re.M)
    assert match, 'README.rst has no Python example'
    return '\n'.join(line[4:] for line in match.group(1).splitlines())


def test_readme_example_runs_and_learns(capsys):
    code = readme_example()
    assert 'import brainstorm as bs' in code
    exec(compile(code, 'README.rst', 'exec'), {'__name__': '__readme__'})
    printed = capsys.readouterr().out
    accuracy = float(re.search(r"'Accuracy', ([\d.]+)", printed).group(1))
    assert accuracy > 0.8, printed


# ---- generated parts ---------------------------------------------------

@pytest.fixture
def docs_extension(monkeypatch):
    monkeypatch.syspath_prepend(str(DOCS / '_ext'))
    import brainstorm_docs
    return brainstorm_docs


def test_layout_example_is_the_seed_network(docs_extension):
    from tests.structure.test_layout import seed_network
    assert docs_extension.seed_network().layout == seed_network().layout
    namespace = {}
    exec('from brainstorm.layers import *\n'
         'from brainstorm.structure.network import Network\n'
         + docs_extension.SEED_NETWORK_SOURCE, namespace)
    assert namespace['net'].layout == seed_network().layout


def test_layout_example_renders_python(docs_extension):
    net = docs_extension.seed_network()
    text = docs_extension.format_layout(net.layout)
    assert eval(text) == net.layout


def test_layer_reference_lists_every_built_in_layer(docs_extension):
    from brainstorm import layers
    entries = docs_extension.built_in_layers()
    listed = {entry['type'] for entry in entries}
    assert listed == set(layers.__all__) - {'Layer'}
    text = '\n'.join(docs_extension.layer_reference_lines(entries))
    assert '.. autofunction:: brainstorm.layers.dropout_layer.Dropout' in text
    assert '``drop_prob``' in text
