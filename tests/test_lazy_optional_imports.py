"""``import brainstorm`` looks the optional packages up without importing them.

docs/data_parallel.rst says mpi4py is imported only where MPI is first
needed; bokeh took about 35 ms of every ``import brainstorm``. Both were
imported by ``brainstorm.optional``. ``optional.bokeh``, a name of 0.5's
module, still gives the module where bokeh is installed.
"""

import importlib.util
import subprocess
import sys

import pytest

import brainstorm.optional as optional


def _run(code: str) -> str:
    done = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_import_brainstorm_imports_neither_mpi4py_nor_bokeh():
    out = _run(
        'import sys, brainstorm\n'
        'import brainstorm.training, brainstorm.hooks, brainstorm.parallel\n'
        "print('mpi4py' in sys.modules, 'bokeh' in sys.modules)"
    )
    assert out == 'False False'


def test_has_flags_follow_what_is_installed():
    assert optional.has_mpi4py is (importlib.util.find_spec('mpi4py') is not None)
    assert optional.has_bokeh is (importlib.util.find_spec('bokeh') is not None)
    assert (optional.mpi4py_mock is None) is optional.has_mpi4py


@pytest.mark.skipif(not optional.has_bokeh, reason='bokeh is not installed')
def test_optional_bokeh_is_the_module_when_asked_for():
    out = _run(
        'import sys\n'
        'import brainstorm.optional as o\n'
        "print('bokeh' in sys.modules, end=' ')\n"
        'from brainstorm.optional import bokeh\n'
        "print(bokeh is sys.modules['bokeh'], o.bokeh is bokeh)"
    )
    assert out == 'False True True'


def test_other_names_are_no_attributes():
    with pytest.raises(AttributeError, match="'no_such_name'"):
        optional.no_such_name  # noqa: B018
