"""docs/custom_handler.rst's walkthrough "Adding an op", followed for real.

The page adds the elementwise op ``exp_t`` in three places: a row of the op
table, a NumPy line and a CUDA statement. This test takes the three
fragments from the page, puts each where the page says in a copy of the
repository, and runs the op-table tests there on NumpyHandler, DebugHandler
and (with g++) PyCudaHandler emulated on the CPU, plus the signature
meta-test: they must pass, and must have run ``exp_t``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.source_tree import tree_files

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / 'docs' / 'custom_handler.rst'

# a file fragment of the page: a ``code-block:: py`` with the file as caption
FRAGMENT = re.compile(
    r'^( *)\.\. code-block:: py\n\1   :caption: (\S+)\n\n((?:\1   .*\n|\n)+)', re.M
)

# where the page puts each fragment: before this line, indented so
PLACES = {
    'brainstorm/handlers/ops.py': ("            'index_m_by_v',", 8, 1),
    'brainstorm/handlers/numpy_handler.py': ('    def index_m_by_v(', 4, 0),
    'brainstorm/handlers/cuda/kernels.py': ("    'log_t':", 4, 0),
}


def page_fragments() -> dict:
    """File -> the code the page adds to it."""
    found = {}
    for _, path, code in FRAGMENT.findall(PAGE.read_text()):
        found[path] = textwrap.dedent(code).strip('\n') + '\n'
    return found


def test_the_page_names_exactly_three_places():
    fragments = page_fragments()
    assert set(fragments) == set(PLACES), sorted(fragments)
    assert "'exp_t'" in fragments['brainstorm/handlers/ops.py']
    assert 'def exp_t(' in fragments['brainstorm/handlers/numpy_handler.py']
    assert "'exp_t':" in fragments['brainstorm/handlers/cuda/kernels.py']


def insert(text: str, anchor: str, indent: int, lines_before: int, code: str) -> str:
    """``code`` indented by ``indent``, put ``lines_before`` lines above the
    line that starts with ``anchor``."""
    lines = text.splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines) if line.startswith(anchor)]
    assert len(hits) == 1, f'{anchor!r} found {len(hits)} times'
    at = hits[0] - lines_before
    block = textwrap.indent(code, ' ' * indent)
    if not block.endswith('\n\n') and 'def ' in code:
        block += '\n'  # a blank line after a method
    return ''.join(lines[:at]) + block + ''.join(lines[at:])


def copy_of_the_repository(target: Path) -> None:
    for name in tree_files(ROOT):
        if name.startswith(('brainstorm/', 'tests/')):
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, target / name)
    shutil.copy2(ROOT / 'pyproject.toml', target / 'pyproject.toml')


@pytest.mark.slow
def test_following_the_page_gives_an_op_every_handler_passes(tmp_path):
    copy_of_the_repository(tmp_path)
    for path, code in page_fragments().items():
        anchor, indent, lines_before = PLACES[path]
        file = tmp_path / path
        file.write_text(insert(file.read_text(), anchor, indent, lines_before, code))
    result = subprocess.run(
        [
            sys.executable,
            '-m',
            'pytest',
            '-v',
            '-p',
            'no:cacheprovider',
            'tests/handlers/test_handler_signatures.py',
            'tests/handlers/test_handler_ops.py',
            'tests/handlers/test_pycuda_handler.py',
            '-k',
            'exp_t or signature or table or section_order or by_hand',
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    passed = [
        line
        for line in result.stdout.splitlines()
        if 'exp_t' in line and 'PASSED' in line
    ]
    handlers = ['numpy-float32', 'numpy-float64', 'debug-numpy-float64']
    if shutil.which('g++'):
        handlers.append('emulated')
    for handler in handlers:
        rows = [line for line in passed if f'[{handler}-exp_t' in line]
        assert len(rows) == 4, (handler, rows)  # plain, views, T1B1, alias
    for name in ('NumpyHandler', 'DebugHandler', 'PyCudaHandler'):
        assert any(f'exp_t-{name}]' in line for line in passed), name
