"""Mutation testing of brainstorm's trust code.

Puts one realistic bug at a time into a module (a mutant), runs the tests
that cover the changed lines, and reports the mutants that no test notices
(survivors). A survivor is a rule of the code that no test states.

Usage, from the repository root, in the project's venv::

    python tools/mutation.py                        # every configured module
    python tools/mutation.py brainstorm/randomness.py
    python tools/mutation.py --survivors brainstorm/randomness.py
    python tools/mutation.py --list brainstorm/randomness.py
    python tools/mutation.py --summary

Configuration lives in ``tools/mutation.toml``: for each module the test
files that state its rules, and the equivalent mutants (those that cannot
change behaviour) with the reason each one is equivalent::

    [module."brainstorm/randomness.py"]
    tests = ["tests/test_randomness.py"]

    [module."brainstorm/randomness.py".equivalent]
    "RandomState.seed::Lt->LtE::x < 2" = "x is never 2: ..."

How it works:

1. It runs the module's tests once under coverage (``coverage`` with the
   test-function context) to learn which tests run each line.
2. It makes the mutants from the module's syntax tree (the operators are
   listed in ``OPERATORS``). A mutant is named by the function it sits in,
   the operator and the original code, so the name survives edits elsewhere
   in the file.
3. For each mutant it writes the mutated source in place, runs the covering
   tests (all the module's tests where the line runs only in another
   process or at import), and restores the file. A test failure or a time-out
   kills the mutant. The file's original is kept in ``.mutation/`` while a
   mutant is in place and restored by the next run if the process died.

Results are kept in ``.mutation/results.json`` (``--survivors`` runs only the
last run's survivors again) and each module's report is written to
``tools/mutation_reports/`` (``--summary`` adds them up).

Bytecode: mutants are run with ``PYTHONDONTWRITEBYTECODE`` and the mutated
file gets a modification time derived from its content, so Python never
runs a stale cached compilation of another version of the file.
"""

from __future__ import annotations

import argparse
import ast
import datetime
import hashlib
import io
import json
import os
import re
import subprocess
import sys
import time
import tokenize
import zlib
from dataclasses import dataclass

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIG = os.path.join(ROOT, 'tools', 'mutation.toml')
STATE = os.path.join(ROOT, '.mutation')
REPORTS = os.path.join(ROOT, 'tools', 'mutation_reports')

COMPARE_SWAPS = {
    '<': '<=',
    '<=': '<',
    '>': '>=',
    '>=': '>',
    '==': '!=',
    '!=': '==',
    'is': 'is not',
    'is not': 'is',
    'in': 'not in',
    'not in': 'in',
}
BINARY_SWAPS = {'+': '-', '-': '+', '*': '/', '/': '*', '//': '/', '%': '//'}
AUG_SWAPS = {'+=': '-=', '-=': '+=', '*=': '/=', '/=': '*='}
BOOL_SWAPS = {'and': 'or', 'or': 'and'}
QUIET_CALLS = {'debug', 'info'}  # logging calls: removing one changes nothing

OPERATORS = {
    'compare': 'a comparison into its neighbour (< to <=, == to !=, in to not in)',
    'boolean': 'and into or, or into and',
    'not': 'a not removed',
    'negate': 'an if/while condition negated',
    'constant': 'True into False and back; an int n into n+1 (1 into 0)',
    'arithmetic': '+ into -, * into /, and the augmented assignments likewise',
    'remove-call': 'a statement that is a call removed',
    'remove-raise': 'a raise removed',
    'swap': 'two neighbouring call statements swapped',
}


@dataclass
class Mutant:
    """One mutation of a module: a replacement of a span of its source."""

    ident: str
    operator: str
    start: int  # character offsets into the source
    end: int
    replacement: str
    first_line: int
    last_line: int

    def apply(self, source: str) -> str:
        """The mutated source."""
        return source[: self.start] + self.replacement + source[self.end :]


# ------------------------------------------------------------- mutants ---


class _Positions:
    """Character offsets of AST positions (which count UTF-8 bytes)."""

    def __init__(self, source: str):
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def offset(self, lineno: int, col_bytes: int) -> int:
        line = self.lines[lineno - 1]
        col = len(line.encode('utf-8')[:col_bytes].decode('utf-8', 'replace'))
        return self.starts[lineno - 1] + col

    def span(self, node) -> tuple[int, int]:
        return (
            self.offset(node.lineno, node.col_offset),
            self.offset(node.end_lineno, node.end_col_offset),
        )

    def token_offset(self, row: int, col: int) -> int:
        return self.starts[row - 1] + col


def _tokens(source: str, positions: _Positions) -> list[tuple[int, int, str]]:
    """(start, end, text) of the operator and name tokens of ``source``."""
    found = []
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type in (tokenize.OP, tokenize.NAME):
            start = positions.token_offset(*tok.start)
            end = positions.token_offset(*tok.end)
            found.append((start, end, tok.string))
    return found


def _is_quiet(call: ast.Call) -> bool:
    """Whether a call only logs (removing or moving it changes nothing)."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, 'id', '')
    return name in QUIET_CALLS


class _Maker(ast.NodeVisitor):
    def __init__(self, source: str):
        self.source = source
        self.positions = _Positions(source)
        self.tokens = _tokens(source, self.positions)
        self.scope: list[str] = []
        self.mutants: list[Mutant] = []
        self.skip_lines = {
            i + 1
            for i, line in enumerate(self.positions.lines)
            if 'pragma: no mutate' in line
        }

    # -- helpers

    def _text(self, start: int, end: int) -> str:
        return self.source[start:end]

    def _add(self, node, operator: str, start: int, end: int, replacement: str):
        if node.lineno in self.skip_lines:
            return
        original = ' '.join(self._text(*self.positions.span(node)).split())
        if len(original) > 70:
            original = original[:67] + '...'
        what = self._text(start, end).strip() or '<empty>'
        change = (
            ' '.join(what.split())[:30] + ' -> ' + ' '.join(replacement.split())[:30]
        )
        scope = '.'.join(self.scope) or '<module>'
        ident = f'{scope}::{operator}::{change}::{original}'
        self.mutants.append(
            Mutant(
                ident, operator, start, end, replacement, node.lineno, node.end_lineno
            )
        )

    def _operator_token(self, after: int, before: int, choices) -> tuple | None:
        """The first token in [after, before) that is one of ``choices``."""
        toks = [t for t in self.tokens if after <= t[0] and t[1] <= before]
        for i, (start, end, text) in enumerate(toks):
            if text == 'not' and i + 1 < len(toks) and toks[i + 1][2] == 'in':
                text, end = 'not in', toks[i + 1][1]
            elif text == 'is' and i + 1 < len(toks) and toks[i + 1][2] == 'not':
                text, end = 'is not', toks[i + 1][1]
            if text in choices:
                return start, end, text
        return None

    # -- scopes and skipped nodes

    def visit_FunctionDef(self, node):
        if node.name == '__repr__':
            return
        for decorator in node.decorator_list:
            self.visit(decorator)
        for default in node.args.defaults + node.args.kw_defaults:
            if default is not None:
                self.visit(default)
        self.scope.append(node.name)
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            body = body[1:]  # the docstring
        self._body(body)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        body = node.body
        if (
            body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
        ):
            body = body[1:]
        self._body(body)
        self.scope.pop()

    def visit_Module(self, node):
        self._body(node.body)

    def visit_Assert(self, node):
        return  # internal invariants, not rules

    def visit_JoinedStr(self, node):
        return  # messages

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)

    def visit_arguments(self, node):
        return  # annotations

    # -- statements

    def _body(self, body):
        for stmt in body:
            self.visit(stmt)
        calls = [
            s
            for s in body
            if isinstance(s, ast.Expr)
            and isinstance(s.value, ast.Call)
            and not _is_quiet(s.value)
        ]
        for a, b in zip(body, body[1:]):
            if a in calls and b in calls:
                sa, ea = self.positions.span(a)
                sb, eb = self.positions.span(b)
                ta, tb = self._text(sa, ea), self._text(sb, eb)
                if ta != tb:
                    between = self._text(ea, sb)
                    self._add(a, 'swap', sa, eb, tb + between + ta)

    def visit_If(self, node):
        self._negate(node)
        self.visit(node.test)
        self._body(node.body)
        self._body(node.orelse)

    def visit_While(self, node):
        self._negate(node)
        self.visit(node.test)
        self._body(node.body)
        self._body(node.orelse)

    def visit_For(self, node):
        self.visit(node.iter)
        self._body(node.body)
        self._body(node.orelse)

    def visit_With(self, node):
        for item in node.items:
            self.visit(item.context_expr)
        self._body(node.body)

    def visit_Try(self, node):
        self._body(node.body)
        for handler in node.handlers:
            self._body(handler.body)
        self._body(node.orelse)
        self._body(node.finalbody)

    def _negate(self, node):
        test = node.test
        if isinstance(test, (ast.Compare, ast.BoolOp)) or (
            isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        ):
            return  # their own operators cover them
        start, end = self.positions.span(test)
        self._add(test, 'negate', start, end, f'not ({self._text(start, end)})')

    def visit_Expr(self, node):
        value = node.value
        if isinstance(value, ast.Call):
            if not _is_quiet(value):
                start, end = self.positions.span(node)
                lines = self._text(start, end).count('\n')
                self._add(node, 'remove-call', start, end, 'pass' + '\n' * lines)
        self.visit(value)

    def visit_Raise(self, node):
        start, end = self.positions.span(node)
        lines = self._text(start, end).count('\n')
        self._add(node, 'remove-raise', start, end, 'pass' + '\n' * lines)
        # the raised expression is a message: not mutated

    def visit_AugAssign(self, node):
        start, end = self.positions.span(node)
        found = self._operator_token(start, end, AUG_SWAPS)
        if found:
            s, e, text = found
            self._add(node, 'arithmetic', s, e, AUG_SWAPS[text])
        self.visit(node.value)

    # -- expressions

    def _swap_operators(self, node, operands, swaps, operator: str) -> None:
        """Mutate the operator token between each two neighbouring operands."""
        for left, right in zip(operands, operands[1:]):
            after = self.positions.span(left)[1]
            before = self.positions.span(right)[0]
            found = self._operator_token(after, before, swaps)
            if found:
                s, e, text = found
                self._add(node, operator, s, e, swaps[text])
        self.generic_visit(node)

    def visit_Compare(self, node):
        operands = [node.left, *node.comparators]
        self._swap_operators(node, operands, COMPARE_SWAPS, 'compare')

    def visit_BoolOp(self, node):
        self._swap_operators(node, node.values, BOOL_SWAPS, 'boolean')

    def visit_UnaryOp(self, node):
        if isinstance(node.op, ast.Not):
            start, _ = self.positions.span(node)
            operand_start, _ = self.positions.span(node.operand)
            self._add(node, 'not', start, operand_start, '')
        self.generic_visit(node)

    def visit_BinOp(self, node):
        after = self.positions.span(node.left)[1]
        before = self.positions.span(node.right)[0]
        found = self._operator_token(after, before, BINARY_SWAPS)
        if found and not (
            isinstance(node.left, ast.Constant) and isinstance(node.left.value, str)
        ):
            s, e, text = found
            self._add(node, 'arithmetic', s, e, BINARY_SWAPS[text])
        self.generic_visit(node)

    def visit_Constant(self, node):
        value = node.value
        start, end = self.positions.span(node)
        if value is True or value is False:
            self._add(node, 'constant', start, end, str(not value))
        elif isinstance(value, int):
            new = 0 if value == 1 else value + 1
            self._add(node, 'constant', start, end, str(new))


def _within(scope: str, names) -> bool:
    """Whether the dotted ``scope`` is one of ``names`` or nested in one."""
    parts = scope.split('.')
    return any('.'.join(parts[:n]) in names for n in range(1, len(parts) + 1))


def make_mutants(source: str, only=None) -> list[Mutant]:
    """The mutants of a module's source, each with a unique name.

    ``only``: names of the functions, classes or methods (``Class.method``)
    to mutate (all if None); a name covers what is nested in it.
    """
    maker = _Maker(source)
    maker.visit(ast.parse(source))
    seen: dict[str, int] = {}
    for mutant in maker.mutants:
        n = seen.get(mutant.ident, 0)
        seen[mutant.ident] = n + 1
        if n:
            mutant.ident = f'{mutant.ident}#{n + 1}'
    mutants = []
    for mutant in maker.mutants:
        if only is not None and not _within(mutant.ident.split('::')[0], only):
            continue
        mutated = mutant.apply(source)
        try:
            ast.parse(mutated)
        except SyntaxError:
            continue
        mutants.append(mutant)
    return mutants


# ------------------------------------------------------------ coverage ---


def _digest_files(paths) -> str:
    h = hashlib.sha256()
    for path in paths:
        h.update(path.encode() + b'\0')
        with open(os.path.join(ROOT, path), 'rb') as f:
            h.update(f.read())
    return h.hexdigest()


def _context_to_nodeid(context: str) -> str | None:
    """'tests.test_x.TestY.test_z' -> 'tests/test_x.py::TestY::test_z'."""
    parts = context.split('.')
    for i in range(len(parts) - 1, 0, -1):
        path = os.path.join(*parts[:i]) + '.py'
        if os.path.exists(os.path.join(ROOT, path)):
            return '::'.join([path] + parts[i:])
    return None


def line_tests(module: str, tests: list[str]) -> dict[int, set[str]]:
    """Which test node ids run each line of ``module`` (cached).

    A line that runs at import (empty context) is given the pseudo test ''.
    """
    key = _digest_files([module] + tests)
    cache = os.path.join(STATE, 'coverage-' + module.replace('/', '.') + '.json')
    if os.path.exists(cache):
        with open(cache) as f:
            stored = json.load(f)
        if stored.get('key') == key:
            return {int(k): set(v) for k, v in stored['lines'].items()}
    data_file = os.path.join(STATE, 'coverage.data')
    rc_file = os.path.join(STATE, 'coveragerc')
    with open(rc_file, 'w') as f:
        f.write(
            f'[run]\ndynamic_context = test_function\ndata_file = {data_file}\n'
            f'include = {os.path.join(ROOT, module)}\n'
        )
    if os.path.exists(data_file):
        os.remove(data_file)
    print(f'{module}: recording which tests run each line...', flush=True)
    cmd = [sys.executable, '-m', 'coverage', 'run', f'--rcfile={rc_file}', '-m']
    cmd += ['pytest', '-q', '-p', 'no:cacheprovider', '-p', 'no:xdist', *tests]
    started = time.time()
    result = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.time() - started
    if result.returncode != 0:
        sys.exit(
            f'The tests of {module} fail without a mutant; fix them first.\n'
            + result.stdout[-3000:]
            + result.stderr[-2000:]
        )
    import coverage

    data = coverage.CoverageData(basename=data_file)
    data.read()
    lines: dict[int, set[str]] = {}
    for measured in data.measured_files():
        for lineno, contexts in data.contexts_by_lineno(measured).items():
            for context in contexts:
                nodeid = _context_to_nodeid(context) if context else ''
                if nodeid is not None:
                    lines.setdefault(lineno, set()).add(nodeid)
    lines[0] = {f'{seconds:.3f}'}  # how long all the tests take
    with open(cache, 'w') as f:
        json.dump({'key': key, 'lines': {k: sorted(v) for k, v in lines.items()}}, f)
    return lines


# ------------------------------------------------------------- running ---


def _backup_path(module: str) -> str:
    return os.path.join(STATE, 'original-' + module.replace('/', '.'))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # exists, another user's
    return True


def restore_left_over() -> None:
    """Put back a module that a killed run left mutated.

    The backup names the run's process; a backup of a run that is still
    going (in another terminal) is left alone.
    """
    if not os.path.isdir(STATE):
        return
    for name in os.listdir(STATE):
        if name.startswith('original-'):
            backup = os.path.join(STATE, name)
            with open(backup) as f:
                module, pid, source = f.read().split('\n', 2)
            if int(pid) != os.getpid() and _alive(int(pid)):
                continue
            with open(os.path.join(ROOT, module), 'w') as f:
                f.write(source)
            os.remove(backup)
            print(f'restored {module}, left mutated by a killed run')


def _write_with_mtime(path: str, source: str, mtime: float) -> None:
    with open(path, 'w') as f:
        f.write(source)
    os.utime(path, (mtime, mtime))


def run_mutant(module, source, stat, mutant, tests, timeout) -> str:
    """'killed', 'survived' or 'timeout' for one mutant."""
    path = os.path.join(ROOT, module)
    mutated = mutant.apply(source)
    # a modification time no other version of the file has
    fake_mtime = 1_000_000_000 + zlib.crc32(mutated.encode()) % 500_000_000
    with open(_backup_path(module), 'w') as f:
        f.write(f'{module}\n{os.getpid()}\n{source}')
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE='1')
    cmd = [sys.executable, '-m', 'pytest', '-x', '-q', '-p', 'no:cacheprovider']
    cmd += ['-p', 'no:xdist', *tests]
    try:
        _write_with_mtime(path, mutated, fake_mtime)
        try:
            result = subprocess.run(
                cmd, cwd=ROOT, env=env, capture_output=True, timeout=timeout
            )
        except subprocess.TimeoutExpired:
            return 'timeout'
    finally:
        _write_with_mtime(path, source, stat.st_mtime)
        os.remove(_backup_path(module))
    if result.returncode == 0:
        return 'survived'
    if result.returncode in (4, 5):
        # a mutant that breaks importing makes the selected tests
        # uncollectable ('not found'); without it they must run
        check = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True)
        if check.returncode != 0:
            raise RuntimeError(
                f'pytest cannot run the tests selected for {mutant.ident} '
                'even without the mutant:\n' + check.stdout.decode()[-2000:]
            )
    return 'killed'


def load_config() -> dict:
    """tools/mutation.toml as a dict."""
    with open(CONFIG, 'rb') as f:
        return tomllib.load(f)


def load_results() -> dict:
    """The stored results of earlier runs."""
    path = os.path.join(STATE, 'results.json')
    if os.path.exists(path):
        with open(path) as f:
            return json.load(f)
    return {}


def save_results(results: dict) -> None:
    """Store the results (atomically)."""
    path = os.path.join(STATE, 'results.json')
    with open(path + '.new', 'w') as f:
        json.dump(results, f, indent=1, sort_keys=True)
    os.replace(path + '.new', path)


def select_tests(mutant: Mutant, lines: dict, tests: list[str]) -> list[str]:
    """The tests to run against ``mutant``: those that ran its lines.

    All of the module's tests where a line ran at import or test collection
    (the pseudo test ''): a test may use what was built then without running
    a line of the module itself (a check made in a parametrize list, a
    module constant). All of them too where no test ran the lines in this
    process (they run only in other processes, or never).
    """
    covering: set[str] = set()
    for line in range(mutant.first_line, mutant.last_line + 1):
        covering |= lines.get(line, set())
    if not covering or '' in covering:
        return list(tests)
    return sorted(covering)


def mutate_module(module: str, settings: dict, only_survivors: bool) -> dict:
    """Run every mutant of ``module``; return its results by mutant name."""
    tests = settings['tests']
    equivalent = settings.get('equivalent', {})
    with open(os.path.join(ROOT, module)) as f:
        source = f.read()
    stat = os.stat(os.path.join(ROOT, module))
    mutants = make_mutants(source, settings.get('only'))
    lines = line_tests(module, tests)
    results = load_results()
    previous = results.get(module, {})
    current: dict[str, str] = {}
    start = time.time()
    baseline = float(lines.pop(0, {'60'}).pop())
    timeout = max(30.0, 3 * baseline + 10)
    print(f'{module}: {len(mutants)} mutants; all its tests take {baseline:.1f} s')
    for i, mutant in enumerate(mutants, 1):
        if mutant.ident in equivalent:
            current[mutant.ident] = 'equivalent'
            continue
        if only_survivors and previous.get(mutant.ident) == 'killed':
            current[mutant.ident] = 'killed'
            continue
        selected = select_tests(mutant, lines, tests)
        status = run_mutant(module, source, stat, mutant, selected, timeout)
        current[mutant.ident] = status
        mark = {'killed': '.', 'timeout': 'T', 'survived': 'S'}[status]
        print(mark, end='', flush=True)
        if i % 60 == 0:
            print(f' {i}/{len(mutants)}', flush=True)
        results[module] = {**previous, **current}
        save_results(results)
    print()
    stale = set(equivalent) - {m.ident for m in mutants}
    results[module] = current
    save_results(results)
    write_report(module, current, equivalent, stale, time.time() - start)
    return current


def _count(current: dict) -> dict:
    counts = {'killed': 0, 'timeout': 0, 'equivalent': 0, 'survived': 0}
    for status in current.values():
        counts[status] += 1
    return counts


def write_report(module, current, equivalent, stale, seconds) -> None:
    """Write ``tools/mutation_reports/<module>.txt``."""
    os.makedirs(REPORTS, exist_ok=True)
    counts = _count(current)
    survivors = sorted(k for k, v in current.items() if v == 'survived')
    out = [
        f'module: {module}',
        f'date: {datetime.date.today().isoformat()}',
        f'command: python tools/mutation.py {module}',
        f'mutants: {len(current)}',
        f'killed: {counts["killed"] + counts["timeout"]} '
        f'(by a time-out: {counts["timeout"]})',
        f'equivalent: {counts["equivalent"]}',
        f'survived: {counts["survived"]}',
        f'seconds: {seconds:.0f}',
        '',
    ]
    if survivors:
        out.append('survivors:')
        out += [f'  {s}' for s in survivors]
    if stale:
        out.append('equivalent entries that match no mutant any more:')
        out += [f'  {s}' for s in sorted(stale)]
    name = module.replace('/', '.').removesuffix('.py') + '.txt'
    with open(os.path.join(REPORTS, name), 'w') as f:
        f.write('\n'.join(out) + '\n')
    print('\n'.join(out))


def summary() -> int:
    """Add up the module reports; return 1 if any survivor is left."""
    rows = []
    totals = {'mutants': 0, 'killed': 0, 'equivalent': 0, 'survived': 0}
    for name in sorted(os.listdir(REPORTS)):
        if not name.endswith('.txt') or name == 'SUMMARY.txt':
            continue
        with open(os.path.join(REPORTS, name)) as f:
            fields = dict(
                line.split(': ', 1) for line in f.read().splitlines() if ': ' in line
            )
        row = {k: int(re.match(r'\d+', fields[k]).group()) for k in totals}
        rows.append((fields['module'], fields['date'], row))
        for k in totals:
            totals[k] += row[k]
    lines = [
        f'{"module":55} {"date":10} {"mutants":>7} {"killed":>6} '
        f'{"equiv.":>6} {"survived":>8}'
    ]
    for module, date, row in rows:
        lines.append(
            f'{module:55} {date:10} {row["mutants"]:7} {row["killed"]:6} '
            f'{row["equivalent"]:6} {row["survived"]:8}'
        )
    lines.append(
        f'{"total":55} {"":10} {totals["mutants"]:7} {totals["killed"]:6} '
        f'{totals["equivalent"]:6} {totals["survived"]:8}'
    )
    text = '\n'.join(lines) + '\n'
    with open(os.path.join(REPORTS, 'SUMMARY.txt'), 'w') as f:
        f.write(text)
    print(text, end='')
    return 1 if totals['survived'] else 0


def main(argv=None) -> int:
    """The command line."""
    parser = argparse.ArgumentParser(
        description=__doc__.split('\n\n')[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument('modules', nargs='*', help='modules (default: all configured)')
    parser.add_argument(
        '--survivors', action='store_true', help="run only the last run's survivors"
    )
    parser.add_argument(
        '--list', action='store_true', help='list the mutants, run nothing'
    )
    parser.add_argument(
        '--summary', action='store_true', help='add up the module reports'
    )
    parser.add_argument(
        '--show', metavar='NAME', help='print the diff of the mutant named NAME'
    )
    args = parser.parse_args(argv)
    os.makedirs(STATE, exist_ok=True)
    if args.summary:
        return summary()
    config = load_config()['module']
    modules = args.modules or list(config)
    unknown = [m for m in modules if m not in config]
    if unknown:
        parser.error(f'not configured in tools/mutation.toml: {unknown}')
    if not (args.list or args.show):
        restore_left_over()
    for module in modules:
        with open(os.path.join(ROOT, module)) as f:
            source = f.read()
        if args.list or args.show:
            for mutant in make_mutants(source, config[module].get('only')):
                if args.show and mutant.ident != args.show:
                    continue
                print(f'{mutant.first_line:5} {mutant.ident}')
                if args.show:
                    _print_diff(module, source, mutant)
            continue
        mutate_module(module, config[module], args.survivors)
    return 0


def _print_diff(module, source, mutant) -> None:
    import difflib

    print(
        ''.join(
            difflib.unified_diff(
                source.splitlines(keepends=True),
                mutant.apply(source).splitlines(keepends=True),
                module,
                module + ' (mutant)',
            )
        )
    )


if __name__ == '__main__':
    sys.exit(main())
