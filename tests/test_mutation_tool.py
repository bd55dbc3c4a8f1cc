"""The mutation runner (tools/mutation.py) makes the mutants it promises.

The runner itself is run by hand (docs/testing.rst); these tests pin down
that each operator produces valid, distinct mutants at the right place, that
names do not depend on line numbers, and that a mutated file is restored.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location(
    'mutation', ROOT / 'tools' / 'mutation.py'
)
mutation = importlib.util.module_from_spec(spec)
sys.modules.setdefault('mutation', mutation)  # dataclasses look their module up
spec.loader.exec_module(mutation)

SOURCE = '''\
def check(x, low, high):
    """Docstring < is not mutated."""
    if x < low or x >= high:
        raise ValueError(f'{x} < {low}')
    log.debug('quiet')
    first()
    second()
    return not flag and x in items


class Thing:
    limit = 5

    def step(self, n):
        self.count += n * 2
        assert n > 0
        return True
'''


def mutants():
    return {m.ident: m for m in mutation.make_mutants(SOURCE)}


def test_each_operator_makes_its_mutant():
    changed = {
        (m.operator, SOURCE[m.start : m.end], m.replacement)
        for m in mutation.make_mutants(SOURCE)
    }
    expected = {
        ('compare', '<', '<='),
        ('compare', '>=', '>'),
        ('compare', 'in', 'not in'),
        ('boolean', 'or', 'and'),
        ('boolean', 'and', 'or'),
        ('not', 'not ', ''),
        ('remove-raise', "raise ValueError(f'{x} < {low}')", 'pass'),
        ('remove-call', 'first()', 'pass'),
        ('remove-call', 'second()', 'pass'),
        ('swap', 'first()\n    second()', 'second()\n    first()'),
        ('constant', '5', '6'),
        ('constant', '2', '3'),
        ('constant', 'True', 'False'),
        ('arithmetic', '+=', '-='),
        ('arithmetic', '*', '/'),
    }
    assert expected <= changed, expected - changed
    # docstrings, messages, asserts and logging calls are not mutated
    texts = {text for _, text, _ in changed}
    assert "log.debug('quiet')" not in texts
    assert not any(op == 'compare' and text == '>' for op, text, _ in changed)
    assert len(changed) == len(expected), changed - expected


def test_every_mutant_parses_and_differs():
    for mutant in mutation.make_mutants(SOURCE):
        mutated = mutant.apply(SOURCE)
        assert mutated != SOURCE, mutant.ident
        ast.parse(mutated)
        # line numbers stay where they were
        assert mutated.count('\n') == SOURCE.count('\n'), mutant.ident


def test_names_are_unique_and_do_not_depend_on_line_numbers():
    before = mutants()
    after = {m.ident for m in mutation.make_mutants('\n\n# moved\n' + SOURCE)}
    assert len(before) == len(mutation.make_mutants(SOURCE))
    assert set(before) == after
    assert any(name.startswith('Thing.step::') for name in before)
    assert any(name.startswith('check::') for name in before)


def test_only_restricts_the_mutated_scopes():
    only = {m.ident.split('::')[0] for m in mutation.make_mutants(SOURCE, ['Thing'])}
    assert only == {'Thing', 'Thing.step'}


def test_only_names_one_method_of_a_class():
    # a class that is partly trust code: its other methods and its class
    # body stay unmutated
    only = {
        m.ident.split('::')[0] for m in mutation.make_mutants(SOURCE, ['Thing.step'])
    }
    assert only == {'Thing.step'}


def test_pragma_skips_a_line():
    source = SOURCE.replace('first()', 'first()  # pragma: no mutate')
    names = {m.ident for m in mutation.make_mutants(source)}
    assert not any('first()' in name for name in names if 'remove-call' in name)


def test_non_ascii_positions():
    source = "def f(x):\n    return 'é' == x and x < 2\n"
    changed = {
        (source[m.start : m.end], m.replacement) for m in mutation.make_mutants(source)
    }
    assert ('<', '<=') in changed and ('==', '!=') in changed and ('2', '3') in changed


def test_a_left_over_mutant_is_restored(tmp_path, monkeypatch):
    module = 'pkg/mod.py'
    (tmp_path / 'pkg').mkdir()
    (tmp_path / module).write_text('x = 2\n')
    state = tmp_path / '.mutation'
    state.mkdir()
    dead = subprocess.Popen([sys.executable, '-c', 'pass'])
    dead.wait()
    (state / 'original-pkg.mod.py').write_text(f'{module}\n{dead.pid}\nx = 1\n')
    monkeypatch.setattr(mutation, 'ROOT', str(tmp_path))
    monkeypatch.setattr(mutation, 'STATE', str(state))
    mutation.restore_left_over()
    assert (tmp_path / module).read_text() == 'x = 1\n'
    assert not os.listdir(state)


def test_a_running_runs_mutant_is_left_alone(tmp_path, monkeypatch):
    module = 'pkg/mod.py'
    (tmp_path / 'pkg').mkdir()
    (tmp_path / module).write_text('x = 2\n')
    state = tmp_path / '.mutation'
    state.mkdir()
    running = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(30)'])
    try:
        backup = state / 'original-pkg.mod.py'
        backup.write_text(f'{module}\n{running.pid}\nx = 1\n')
        monkeypatch.setattr(mutation, 'ROOT', str(tmp_path))
        monkeypatch.setattr(mutation, 'STATE', str(state))
        mutation.restore_left_over()
        assert (tmp_path / module).read_text() == 'x = 2\n'
        assert backup.exists()
    finally:
        running.kill()
        running.wait()


def test_context_names_become_node_ids():
    nodeid = mutation._context_to_nodeid(
        'tests.test_mutation_tool.test_pragma_skips_a_line'
    )
    assert nodeid == 'tests/test_mutation_tool.py::test_pragma_skips_a_line'
    assert mutation._context_to_nodeid('nowhere.at_all') is None


@pytest.mark.parametrize('module', sorted(mutation.load_config()['module']))
def test_configured_modules_and_tests_exist(module):
    settings = mutation.load_config()['module'][module]
    assert (ROOT / module).is_file()
    for test in settings['tests']:
        assert (ROOT / test).is_file(), test
    source = (ROOT / module).read_text()
    names = {m.ident for m in mutation.make_mutants(source, settings.get('only'))}
    assert names, f'{module} has no mutants'
    # an equivalent entry names a mutant that exists and gives a reason
    for name, why in settings.get('equivalent', {}).items():
        assert name in names, f'{module}: no mutant named {name!r}'
        assert len(why.split()) >= 3, f'{module}: {name!r} needs a reason'


def test_a_mutant_that_breaks_the_import_of_a_test_module_is_killed(
    tmp_path, monkeypatch
):
    """Tests given by node id in a module that fails to import under the
    mutant (a default used at module level) make pytest exit with 4: that
    is a kill, not a failure of the runner."""
    (tmp_path / 'pkg').mkdir()
    (tmp_path / 'pkg' / '__init__.py').write_text('')
    source = 'LIMIT = 1\n'
    (tmp_path / 'pkg' / 'mod.py').write_text(source)
    (tmp_path / 'tests_m').mkdir()
    (tmp_path / 'tests_m' / 'test_m.py').write_text(
        'from pkg.mod import LIMIT\n'
        'assert LIMIT == 1\n'
        'def test_limit():\n'
        '    assert LIMIT == 1\n'
    )
    state = tmp_path / '.mutation'
    state.mkdir()
    monkeypatch.setattr(mutation, 'ROOT', str(tmp_path))
    monkeypatch.setattr(mutation, 'STATE', str(state))
    (mutant,) = [m for m in mutation.make_mutants(source) if '1 -> 0' in m.ident]
    stat = os.stat(tmp_path / 'pkg' / 'mod.py')
    status = mutation.run_mutant(
        'pkg/mod.py', source, stat, mutant, ['tests_m/test_m.py::test_limit'], 60
    )
    assert status == 'killed'
    assert (tmp_path / 'pkg' / 'mod.py').read_text() == source


def _mutant_at(line):
    return mutation.Mutant('m', 'constant', 0, 1, '6', line, line)


def test_tests_are_selected_by_the_lines_they_run():
    tests = ['tests/test_a.py', 'tests/test_b.py']
    lines = {3: {'tests/test_a.py::test_x'}, 4: {'tests/test_b.py::test_y'}}
    assert mutation.select_tests(_mutant_at(3), lines, tests) == [
        'tests/test_a.py::test_x'
    ]
    # a line no test ran here (other processes, or never): all the tests
    assert mutation.select_tests(_mutant_at(9), lines, tests) == tests


def test_a_line_run_at_import_selects_every_test_of_the_module():
    # what a line makes at import or collection (a constant, a check built
    # in a parametrize list) is used by tests that run no line of the
    # module: only running all of its tests can notice the mutant
    tests = ['tests/test_a.py', 'tests/test_b.py']
    lines = {1: {'', 'tests/test_a.py::test_x'}, 3: {'tests/test_a.py::test_x'}}
    assert mutation.select_tests(_mutant_at(1), lines, tests) == tests


MODULE = 'LIMIT = 5\n\n\ndef double(x):\n    return 2 * x\n'
TESTS = """\
from pkg.mod import LIMIT, double


def test_double():
    assert double(3) == 6


def test_limit():
    assert LIMIT == 5  # runs no line of pkg/mod.py
"""


@pytest.mark.slow
def test_a_mutant_of_a_constant_used_only_at_import_is_killed(tmp_path, monkeypatch):
    for folder in ('pkg', 'tests'):
        (tmp_path / folder).mkdir()
        (tmp_path / folder / '__init__.py').write_text('')
    (tmp_path / 'pkg' / 'mod.py').write_text(MODULE)
    (tmp_path / 'tests' / 'test_mod.py').write_text(TESTS)
    state = tmp_path / '.mutation'
    state.mkdir()
    monkeypatch.setattr(mutation, 'ROOT', str(tmp_path))
    monkeypatch.setattr(mutation, 'STATE', str(state))
    monkeypatch.setattr(mutation, 'REPORTS', str(tmp_path / 'reports'))
    results = mutation.mutate_module(
        'pkg/mod.py', {'tests': ['tests/test_mod.py']}, only_survivors=False
    )
    assert results == {
        '<module>::constant::5 -> 6::5': 'killed',
        'double::arithmetic::* -> /::2 * x': 'killed',
        'double::constant::2 -> 3::2': 'killed',
    }
    assert (tmp_path / 'pkg' / 'mod.py').read_text() == MODULE
    report = (tmp_path / 'reports' / 'pkg.mod.txt').read_text()
    assert 'survived: 0' in report
