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
    (state / 'original-pkg.mod.py').write_text(module + '\nx = 1\n')
    monkeypatch.setattr(mutation, 'ROOT', str(tmp_path))
    monkeypatch.setattr(mutation, 'STATE', str(state))
    mutation.restore_left_over()
    assert (tmp_path / module).read_text() == 'x = 1\n'
    assert not os.listdir(state)


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
