"""Distribution name, single-sourced version, install hints and metadata.

Building the sdist and wheel, ``twine check``, installing the wheel into a
fresh venv and running this suite from the unpacked sdist are CI steps
(.ci/run): too slow for the suite itself.
"""

import importlib.metadata
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

import brainstorm
from brainstorm.__about__ import __distribution__, install_hint
from tests.source_tree import tree_files

ROOT = pathlib.Path(__file__).resolve().parent.parent
# PyPI's "brainstorm" is IDSIA's 0.5: a hint naming it installs that one.
# (Written in two pieces so this file does not match itself.)
OLD_HINT = re.compile(r'(?<![-\w])brainstorm' + r'\\?\[')
SEARCHED = ['brainstorm', 'docs', 'examples', 'tests', 'benchmarks', 'data']


def text_files():
    yield ROOT / 'README.rst'
    yield ROOT / 'HISTORY.rst'
    for folder in SEARCHED:
        for path in sorted((ROOT / folder).rglob('*')):
            if (
                path.suffix in {'.py', '.rst', '.md', '.txt'}
                and '_build' not in path.parts
            ):
                yield path


def test_no_text_names_the_old_distribution_with_an_extra():
    checked = 0
    offenders = []
    for path in text_files():
        checked += 1
        for nr, line in enumerate(path.read_text().splitlines(), 1):
            if OLD_HINT.search(line):
                offenders.append(f'{path.relative_to(ROOT)}:{nr}: {line}')
    assert checked > 100
    assert offenders == []


def test_old_hint_pattern_catches_the_old_name_only():
    assert OLD_HINT.search("pip install 'brainstorm" + "[mpi]'")
    assert OLD_HINT.search('pip install brainstorm' + '[plot]')
    assert OLD_HINT.search("match=r'brainstorm" + "\\[mpi\\]'")
    assert not OLD_HINT.search(f"pip install '{__distribution__}[mpi]'")


def test_install_hint_names_the_distribution():
    assert __distribution__ == 'brainstorm-nn'
    assert install_hint('mpi') == "pip install 'brainstorm-nn[mpi]'"


@pytest.mark.parametrize('extra', ['mpi', 'plot', 'pycuda'])
def test_hinted_extras_exist(extra):
    extras = importlib.metadata.metadata(__distribution__).get_all('Provides-Extra')
    assert extra in extras


def test_missing_dependency_messages_use_the_hint():
    from brainstorm.handlers.pycuda_handler import INSTALL_HINT
    from brainstorm.optional import _missing

    err = _missing('mpi4py', 'mpi', ImportError('No module named mpi4py'))
    assert install_hint('mpi') in str(err)
    assert install_hint('pycuda') in INSTALL_HINT


def test_version_is_single_sourced():
    # the installed metadata's version comes from brainstorm/__about__.py
    assert (
        importlib.metadata.version(__distribution__)
        == brainstorm.__version__
        == '1.0.0'
    )
    pyproject = (ROOT / 'pyproject.toml').read_text()
    assert re.search(r'^dynamic = \["version"\]$', pyproject, flags=re.M)
    assert not re.search(r'^version = "', pyproject, flags=re.M)


def test_metadata_has_classifiers_and_no_placeholder_urls():
    meta = importlib.metadata.metadata(__distribution__)
    classifiers = meta.get_all('Classifier')
    assert any(c.startswith('Development Status ::') for c in classifiers)
    assert any(c.startswith('Intended Audience ::') for c in classifiers)
    assert any(c.startswith('Operating System ::') for c in classifiers)
    versions = {
        c.rsplit(' ', 1)[1]
        for c in classifiers
        if re.fullmatch(r'Programming Language :: Python :: 3\.\d+', c)
    }
    # the Python versions claimed are those tox tests
    tox = (ROOT / 'tox.ini').read_text()
    tested = {f'3.{minor}' for minor in re.findall(r'\bpy3(\d+)\b', tox)}
    assert versions == tested
    assert min(versions, key=lambda v: int(v.split('.')[1])) == meta[
        'Requires-Python'
    ].lstrip('>=')
    assert meta.get_all('Project-URL') is None
    assert meta.get('Home-page') is None
    assert brainstorm.__about__.__url__ == ''


def test_package_is_marked_typed():
    assert (pathlib.Path(brainstorm.__file__).parent / 'py.typed').is_file()


LINK_TARGET = re.compile(r'`[^`<]*<([^>`]+)>`_')


def test_readme_links_work_where_the_readme_is_shown_alone():
    # PyPI shows README.rst without the repository: a relative target such
    # as docs/quickstart.rst leads nowhere there
    assert LINK_TARGET.findall('a `quickstart <docs/quickstart.rst>`_') == [
        'docs/quickstart.rst'
    ]
    text = (ROOT / 'README.rst').read_text()
    relative = [t for t in LINK_TARGET.findall(text) if not re.match(r'https?://', t)]
    assert relative == []
    assert not re.search(r'^\.\. (image|figure|include)::', text, flags=re.M)


@pytest.mark.slow
def test_wheel_and_sdist_carry_the_cuda_sources(tmp_path):
    """The kernels of PyCudaHandler are .cu files read at run time: both
    distributions must hold every one of them (a wheel without them imports
    brainstorm.handlers only to fail)."""
    root = pathlib.Path(brainstorm.__file__).resolve().parent.parent
    sources = sorted(
        p.relative_to(root).as_posix()
        for p in (root / 'brainstorm' / 'handlers' / 'cuda' / 'cu').glob('*.cu')
    )
    assert len(sources) >= 5, sources
    # the files of a clean checkout (committed or not, nothing ignored)
    tree = tmp_path / 'tree'
    for name in tree_files(root):
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / name, tree / name)
    result = subprocess.run(
        [sys.executable, '-m', 'build', '--no-isolation', '--outdir', 'dist'],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    (wheel,) = (tree / 'dist').glob('*.whl')
    (sdist,) = (tree / 'dist').glob('*.tar.gz')
    in_wheel = set(zipfile.ZipFile(wheel).namelist())
    with tarfile.open(sdist) as archive:
        in_sdist = {name.partition('/')[2] for name in archive.getnames()}
    missing_wheel = [name for name in sources if name not in in_wheel]
    missing_sdist = [name for name in sources if name not in in_sdist]
    assert not missing_wheel and not missing_sdist, (missing_wheel, missing_sdist)


@pytest.mark.parametrize(
    'extra, package, test_packages',
    [
        ('onnx', 'onnx', ['onnx', 'onnxruntime']),
        ('tensorboard', 'tensorboardX', ['tensorboardX', 'tensorboard']),
    ],
)
def test_optional_extras_and_their_tests_in_ci(extra, package, test_packages):
    """The hinted extra exists in pyproject.toml, and the test extra (CI's)
    installs it and what its tests read the results with."""
    tomllib = pytest.importorskip('tomllib')
    with open(ROOT / 'pyproject.toml', 'rb') as f:
        extras = tomllib.load(f)['project']['optional-dependencies']

    def names(requirements):
        return {re.split(r'[<>=!~ \[;]', r, maxsplit=1)[0] for r in requirements}

    assert names(extras[extra]) == {package}
    assert set(test_packages) <= names(extras['test'])
