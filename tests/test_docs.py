"""The documentation builds without warnings and all its code runs.

* ``sphinx-build -W -n -b html`` builds the docs with warnings as errors
  and every cross-reference resolved (nitpicky);
* every page's snippets (and README.rst's) run as shown, top to bottom, in
  a fresh interpreter per page started in the repository root
  (``tests/doc_snippets.py``), without Sphinx and its set-up;
* the examples in the docstrings of every ``brainstorm`` module run in
  their module's namespace (``doctest``);
* the README's example runs;
* the generated parts (layer reference, seed layout) cover what they claim.
"""

from __future__ import annotations

import doctest
import importlib
import inspect
import os
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
OPTIONAL_MODULES = {
    'brainstorm.handlers.cuda.cublas': 'pycuda',
    'brainstorm.handlers.cuda.kernels': 'pycuda',
}


def sphinx_build(builder: str, out_dir) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            '-m',
            'sphinx',
            '-W',
            '-n',
            '--keep-going',
            '-q',
            '-b',
            builder,
            '-d',
            str(out_dir / 'doctrees'),
            str(DOCS),
            str(out_dir / builder),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.slow
def test_docs_build_without_warnings(tmp_path):
    result = sphinx_build('html', tmp_path)
    assert result.returncode == 0, (
        f'sphinx-build -W -b html failed:\n{result.stdout[-5000:]}\n'
        f'{result.stderr[-5000:]}'
    )
    html = tmp_path / 'html'
    for page in [
        'index',
        'quickstart',
        'walkthrough',
        'internals',
        'custom_layer',
        'custom_hook',
        'custom_stepper',
        'custom_handler',
        'data_format',
        'layers',
        'api',
        'history',
        'saving',
        'gpu',
        'troubleshooting',
        'inference',
        'coming_from_keras_pytorch',
    ]:
        assert (html / f'{page}.html').exists(), page
    layers = (html / 'layers.html').read_text()
    assert 'FullyConnectedLayerImpl' in layers
    internals = (html / 'internals.html').read_text()
    assert '@context_size' in internals


# ---- the pages' snippets, as a reader pastes them -------------------------

PAGES = sorted(DOCS.glob('*.rst')) + [ROOT / 'README.rst']
# pages whose snippets train for a while (seconds on a quiet machine)
SLOW_PAGES = {'custom_layer.rst', 'quickstart.rst', 'walkthrough.rst'}


def run_page(page: pathlib.Path, cwd=ROOT) -> subprocess.CompletedProcess:
    """Run a page's snippets with tests/doc_snippets.py in a fresh
    interpreter started in ``cwd`` (nothing inherited from this process)."""
    env = {key: value for key, value in os.environ.items() if key != 'PYTHONPATH'}
    return subprocess.run(
        [sys.executable, str(ROOT / 'tests' / 'doc_snippets.py'), str(page)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


@pytest.mark.parametrize(
    'page',
    [
        pytest.param(
            page,
            id=page.name,
            marks=[pytest.mark.slow] if page.name in SLOW_PAGES else [],
        )
        for page in PAGES
    ],
)
def test_page_snippets_run_as_shown(page):
    result = run_page(page)
    assert result.returncode == 0, (
        f'{page.name}: a snippet failed when run as shown:\n'
        f'{result.stdout[-6000:]}\n{result.stderr[-3000:]}'
    )


def test_pages_have_their_snippets():
    """The runner finds the code of the pages that have some (a page whose
    directives it no longer recognised would pass trivially)."""
    from tests.doc_snippets import blocks

    counts = {page.name: len(blocks(page.read_text())) for page in PAGES}
    for name in [
        'quickstart.rst',
        'walkthrough.rst',
        'internals.rst',
        'custom_layer.rst',
        'custom_hook.rst',
        'custom_stepper.rst',
        'custom_handler.rst',
        'data_format.rst',
        'saving.rst',
        'gpu.rst',
        'troubleshooting.rst',
        'inference.rst',
        'coming_from_keras_pytorch.rst',
        'README.rst',
    ]:
        assert counts[name] >= 1, (name, counts)
    assert sum(counts.values()) >= 50, counts


@pytest.mark.parametrize(
    'text, reason',
    [
        # numpy is not imported on the page
        ('.. doctest::\n\n    >>> np.zeros(2).shape\n    (2,)\n', 'NameError'),
        # a wrong expected output
        ('.. testcode::\n\n    print(1 + 1)\n\n.. testoutput::\n\n    3\n', 'expected'),
        # a python code block that raises
        (
            '.. code-block:: python\n\n    import brainstorm_docs\n',
            'ModuleNotFoundError',
        ),
        # a later block cannot see names that no block defined
        (
            '.. testcode::\n\n    import numpy as np\n\n.. doctest::\n\n'
            '    >>> bs.__name__\n    "brainstorm"\n',
            'NameError',
        ),
    ],
)
def test_runner_fails_on_broken_pages(tmp_path, text, reason):
    page = tmp_path / 'page.rst'
    page.write_text('Title\n=====\n\n' + text)
    result = run_page(page, cwd=tmp_path)
    assert result.returncode == 1, result.stdout
    assert reason in result.stdout, result.stdout


def test_runner_shares_names_between_blocks_of_a_page(tmp_path):
    page = tmp_path / 'page.rst'
    page.write_text(
        '.. testcode::\n\n    import numpy as np\n    a = 2\n\n'
        '.. doctest::\n\n    >>> b = np.ones(a)\n\n'
        '.. code-block:: python\n\n    print(b.sum())\n'
    )
    result = run_page(page, cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip() == '2.0'


def test_no_hidden_setup_and_no_docs_only_helpers():
    conf = (DOCS / 'conf.py').read_text()
    assert 'doctest_global_setup' not in conf
    assert 'ELLIPSIS' not in conf
    from tests.doc_snippets import blocks

    for page in PAGES:
        for _, code, line in blocks(page.read_text()):
            assert 'brainstorm_docs' not in code, (page.name, line)


def test_ci_builds_the_docs_nitpicky():
    """CI builds the docs with warnings as errors and unresolved references
    as warnings (the slow test above does the same)."""
    conf = (DOCS / 'conf.py').read_text()
    assert re.search(r'^nitpicky = True$', conf, flags=re.M)
    ci = (ROOT / '.ci' / 'run').read_text()
    assert re.search(r'sphinx -W -n .*-b html docs ', ci), ci


def test_code_lines_wrap_in_the_rendered_pages():
    """Long code lines wrap instead of being cut off in narrow windows."""
    css = (DOCS / '_static' / 'wrap.css').read_text()
    assert 'white-space: pre-wrap' in css
    assert "html_css_files = ['wrap.css']" in (DOCS / 'conf.py').read_text()


# ---- docstring examples ------------------------------------------------


def brainstorm_modules() -> list:
    return sorted(
        m.name for m in pkgutil.walk_packages(brainstorm.__path__, 'brainstorm.')
    )


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
        optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    )
    filename = getattr(module, '__file__', None) or module_name
    failures: list = []
    for name, obj in docstrings(module):
        doc = module.__doc__ if obj is module else inspect.getdoc(obj)
        if doc and '>>>' in doc:
            test = parser.get_doctest(doc, dict(vars(module)), name, filename, 0)
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
    match = re.search(
        r'^\.\. code-block:: python\n\n((?:    .*\n|\n)+)', text, flags=re.M
    )
    assert match, 'README.rst has no Python example'
    return '\n'.join(line[4:] for line in match.group(1).splitlines())


def test_readme_example_runs_and_learns(capsys):
    code = readme_example()
    assert 'import brainstorm as bs' in code
    exec(compile(code, 'README.rst', 'exec'), {'__name__': '__readme__'})
    printed = capsys.readouterr().out
    # OrderedDict's repr: "[('Accuracy', x)]" up to Python 3.11, "{'Accuracy': x}" since
    accuracy = float(re.search(r"'Accuracy'(?:, |: )([\d.]+)", printed).group(1))
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
    exec(
        'from brainstorm.layers import *\n'
        'from brainstorm.structure.network import Network\n'
        + docs_extension.SEED_NETWORK_SOURCE,
        namespace,
    )
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
