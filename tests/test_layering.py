"""The package's parts import each other only downward, as documented.

docs/internals.rst ("Layering: which part may import which") lists every
part of the package (a sub-package, or a top-level module or package) with
its level, from the bottom (0) to the top. These tests read that table and
every file under brainstorm/ with ``ast``; nothing is imported or run, so
a violation cannot hide behind an import that happens to work. Checked:

* no brainstorm module is imported inside a function or method;
* every import from one part of another goes to a strictly lower level
  (parts on one level are independent: they import neither way), counting
  imports made anywhere in a file;
* a class named by a string (``Instance('brainstorm.hooks:Hook')``), which
  is imported by name when first used, follows the same rule;
* the table lists every part that exists, and only those.

Because the order is parsed from the page, the documentation and the check
cannot drift apart.
"""

from __future__ import annotations

import ast
import pathlib
import re
from typing import NamedTuple

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = ROOT / 'brainstorm'
DOC = ROOT / 'docs' / 'internals.rst'
TABLE_ANCHOR = '.. _layering:'

BORDER = re.compile(r'^\s*=+(?: +=+)+\s*$')
PART_CELL = re.compile(r'^``(brainstorm(?:\.\w+)?)``$')
# 'module:Class', resolved with importlib when first used (arguments.py)
NAMED_CLASS = re.compile(r'^(brainstorm(?:\.\w+)*):\w+$')


# ---- the documented order ---------------------------------------------------


def table_rows(text: str) -> list[tuple[str, str, str]]:
    """The body rows (level, part, description) of the first simple table
    after the layering anchor, split at the columns of its border."""
    lines = text.splitlines()
    assert TABLE_ANCHOR in lines, f'{DOC}: anchor {TABLE_ANCHOR!r} not found'
    start = lines.index(TABLE_ANCHOR)
    borders = [i for i in range(start, len(lines)) if BORDER.match(lines[i])]
    assert len(borders) >= 3, f'{DOC}: no simple table after {TABLE_ANCHOR!r}'
    top, below_header, bottom = borders[:3]
    columns = [m.span() for m in re.finditer(r'=+', lines[top])]
    assert len(columns) == 3, (
        f'{DOC}:{top + 1}: the layering table must have three columns '
        f'(Level, Part, What lives there); found {len(columns)}'
    )
    header = [lines[top + 1][a:b].strip() for a, b in columns[:2]]
    assert header == ['Level', 'Part'], f'{DOC}:{top + 2}: header {header}'

    rows: list[tuple[str, str, str]] = []
    for nr in range(below_header + 1, bottom):
        line = lines[nr]
        if not line.strip():
            continue
        (a0, b0), (a1, b1), (a2, _) = columns
        level, part, text_ = line[a0:b0].strip(), line[a1:b1].strip(), line[a2:]
        if not level and not part:  # a description continued on the next line
            assert rows, f'{DOC}:{nr + 1}: continuation line without a row'
            rows[-1] = rows[-1][:2] + (rows[-1][2] + ' ' + text_.strip(),)
            continue
        rows.append((level, part, text_.strip()))
    return rows


def documented_levels() -> dict[str, int]:
    """Part name -> level, as the table in docs/internals.rst gives them."""
    rows = table_rows(DOC.read_text())
    levels: dict[str, int] = {}
    previous = -1
    for level_text, part_cell, description in rows:
        where = f'{DOC}: row {level_text!r} {part_cell!r}'
        assert re.fullmatch(r'\d+', level_text), f'{where}: level is not an int'
        match = PART_CELL.match(part_cell)
        assert match, f'{where}: the part must be written ``brainstorm.name``'
        assert description, f'{where}: says nothing of what lives there'
        level, part = int(level_text), match.group(1)
        assert level >= previous, (
            f'{where}: the table lists levels from the bottom (0) up; '
            f'level {level} comes after level {previous}'
        )
        assert part not in levels, f'{where}: {part} is listed twice'
        levels[part] = previous = level
    return levels


# ---- the package as it is on disk -------------------------------------------


def module_name(path: pathlib.Path, root: pathlib.Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix('').parts
    return '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)


def part_of(module: str) -> str:
    """'brainstorm.hooks.saving' and 'brainstorm.hooks' -> 'brainstorm.hooks'.

    Only the first two names count, so a part is the same whether it is a
    module (hooks.py) or a package (hooks/).
    """
    return '.'.join(module.split('.')[:2])


def package_files(root: pathlib.Path = ROOT) -> list[pathlib.Path]:
    return sorted(
        path
        for path in (root / 'brainstorm').rglob('*.py')
        if '__pycache__' not in path.parts
    )


def existing_parts(root: pathlib.Path = ROOT) -> set[str]:
    return {part_of(module_name(path, root)) for path in package_files(root)}


class Import(NamedTuple):
    path: str  # relative to the repository root
    line: int
    module: str  # the brainstorm module imported
    function: str | None  # the function it is imported in, if any
    by_name: str | None = None  # the 'module:Class' string naming a class


def imported_modules(node: ast.AST, here: str, is_package: bool) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom):
        if not node.level:
            return [node.module or '']
        # a relative import counts from the file's package
        package = here.split('.') if is_package else here.split('.')[:-1]
        base = package[: len(package) - (node.level - 1)]
        return ['.'.join(base + ([node.module] if node.module else []))]
    return []


def scan(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[Import]:
    """Every import of a brainstorm module in one file, with where it is."""
    here = module_name(path, root)
    tree = ast.parse(path.read_text(), str(path))
    enclosing: dict[int, str] = {}  # id(node) -> innermost function name
    functions = [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    # outer functions first, so that inner ones overwrite with their name
    for function in sorted(functions, key=lambda f: (f.lineno, f.col_offset)):
        for node in ast.walk(function):
            if node is not function:
                enclosing[id(node)] = function.name
    found = []
    relative = str(path.relative_to(root))
    for node in ast.walk(tree):
        modules = imported_modules(node, here, path.name == '__init__.py')
        by_name = None
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = NAMED_CLASS.match(node.value)
            modules, by_name = ([match.group(1)] if match else []), node.value
        for module in modules:
            if module == 'brainstorm' or module.startswith('brainstorm.'):
                found.append(
                    Import(
                        relative, node.lineno, module, enclosing.get(id(node)), by_name
                    )
                )
    return sorted(found, key=lambda i: (i.path, i.line, i.module))


def all_imports() -> list[Import]:
    return [imp for path in package_files() for imp in scan(path)]


def owner(imp: Import) -> str:
    return part_of(module_name(ROOT / imp.path))


def downward_violations(imports: list[Import], levels: dict[str, int]) -> list[str]:
    """One message per import that does not go to a lower level."""
    found = []
    for imp in imports:
        source, target = owner(imp), part_of(imp.module)
        if source == target or source not in levels or target not in levels:
            continue  # unplaced parts fail test_every_part_is_placed
        if levels[target] < levels[source]:
            continue
        what = (
            f'names the class {imp.by_name!r}'
            if imp.by_name
            else f'imports {imp.module}'
        )
        relation = (
            'the same level' if levels[target] == levels[source] else 'a higher level'
        )
        found.append(
            f'{imp.path}:{imp.line}: {source} (level '
            f'{levels[source]}) {what}, of {target} (level '
            f'{levels[target]}): {relation}'
        )
    return found


# ---- the tests ---------------------------------------------------------------


def test_no_brainstorm_import_inside_a_function():
    inner = [
        f'{imp.path}:{imp.line}: {owner(imp)} imports {imp.module} '
        f'inside {imp.function}()'
        for imp in all_imports()
        if imp.function is not None and imp.by_name is None
    ]
    assert inner == [], (
        f'{len(inner)} import(s) of brainstorm modules inside functions '
        '(move them to the top of the file; docs/internals.rst, "Layering"):'
        '\n' + '\n'.join(inner)
    )


def test_imports_go_to_a_lower_level():
    statements = [imp for imp in all_imports() if imp.by_name is None]
    assert len(statements) > 100  # the scan found the package's imports
    wrong = downward_violations(statements, documented_levels())
    assert wrong == [], (
        f'{len(wrong)} import(s) against the layering of docs/internals.rst '
        '(a part imports only parts on a strictly lower level):\n' + '\n'.join(wrong)
    )


def test_classes_named_by_strings_go_to_a_lower_level():
    named = [imp for imp in all_imports() if imp.by_name is not None]
    wrong = downward_violations(named, documented_levels())
    assert wrong == [], (
        f'{len(wrong)} class(es) named by a string against the layering of '
        'docs/internals.rst (importing by name is still importing):\n'
        + '\n'.join(wrong)
    )


def test_every_part_is_placed():
    levels = documented_levels()
    missing = sorted(existing_parts() - set(levels))
    assert missing == [], (
        f'parts of brainstorm/ missing from the layering table in {DOC}: '
        f'{missing}; give each a level and a line on what lives there'
    )


def test_every_listed_part_exists():
    listed = set(documented_levels())
    stale = sorted(listed - existing_parts())
    assert stale == [], (
        f'the layering table in {DOC} lists parts that brainstorm/ does not '
        f'have: {stale}'
    )


def test_no_part_is_both_a_module_and_a_package():
    both = sorted(
        path.stem
        for path in PACKAGE.glob('*.py')
        if (PACKAGE / path.stem).is_dir() and any((PACKAGE / path.stem).rglob('*.py'))
    )
    assert both == [], f'{both}: both name.py and name/ exist in brainstorm/'


# ---- the checker itself, on made-up input -----------------------------------

TABLE = """\
.. _layering:

Text.

   =====  ================  ====================
   Level  Part              What lives there
   =====  ================  ====================
   0      ``brainstorm.a``  the bottom
   1      ``brainstorm.b``  one, with a long
                            description
   1      ``brainstorm.c``  a peer of b
   =====  ================  ====================
"""


def test_table_parser_reads_rows_and_continuations():
    assert table_rows(TABLE) == [
        ('0', '``brainstorm.a``', 'the bottom'),
        ('1', '``brainstorm.b``', 'one, with a long description'),
        ('1', '``brainstorm.c``', 'a peer of b'),
    ]


def test_the_documented_table_is_read_in_full():
    levels = documented_levels()
    # the page's table, not a prefix of it
    assert levels['brainstorm.__about__'] == 0
    assert levels['brainstorm'] == max(levels.values())
    assert levels['brainstorm.structure'] < levels['brainstorm.layers']
    assert levels['brainstorm.training'] < levels['brainstorm.hooks']


def test_part_of_treats_a_module_and_a_package_alike():
    assert part_of('brainstorm.hooks') == 'brainstorm.hooks'
    assert part_of('brainstorm.hooks.saving') == 'brainstorm.hooks'
    assert part_of('brainstorm') == 'brainstorm'
    assert (
        module_name(ROOT / 'brainstorm' / 'hooks' / '__init__.py') == 'brainstorm.hooks'
    )
    assert (
        module_name(ROOT / 'brainstorm' / 'hooks' / 'saving.py')
        == 'brainstorm.hooks.saving'
    )


def test_parts_are_found_whether_modules_or_packages(tmp_path):
    for name in [
        '__init__.py',
        'utils.py',
        'hooks/__init__.py',
        'hooks/saving.py',
        'structure/network.py',
        'new_part.py',
        'training/__pycache__/trainer.py',
    ]:
        (tmp_path / 'brainstorm' / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / 'brainstorm' / name).write_text('')
    assert existing_parts(tmp_path) == {
        'brainstorm',
        'brainstorm.utils',
        'brainstorm.hooks',
        'brainstorm.structure',
        'brainstorm.new_part',
    }


def test_scan_finds_every_kind_of_import(tmp_path):
    source = """\
import os
import brainstorm.utils
from brainstorm.layers import base_layer
from . import sibling
from .. import describable
KIND = 'brainstorm.hooks:Hook'
NOT_A_CLASS = 'brainstorm.hooks'


def f():
    from brainstorm.structure.network import Network
    import numpy


class C:
    def method(self):
        def inner():
            import brainstorm
"""
    package = tmp_path / 'brainstorm' / 'training'
    package.mkdir(parents=True)
    (package / 'mod.py').write_text(source)
    found = scan(package / 'mod.py', root=tmp_path)
    assert [(i.line, i.module, i.function, i.by_name) for i in found] == [
        (2, 'brainstorm.utils', None, None),
        (3, 'brainstorm.layers', None, None),
        (4, 'brainstorm.training', None, None),
        (5, 'brainstorm', None, None),
        (6, 'brainstorm.hooks', None, 'brainstorm.hooks:Hook'),
        (11, 'brainstorm.structure.network', 'f', None),
        (18, 'brainstorm', 'inner', None),
    ]
    assert all(
        i.path == str(pathlib.Path('brainstorm', 'training', 'mod.py')) for i in found
    )


def test_violations_name_file_line_parts_and_levels():
    levels = {
        'brainstorm.utils': 1,
        'brainstorm.optional': 1,
        'brainstorm.training': 5,
        'brainstorm.hooks': 6,
    }
    imports = [
        Import('brainstorm/training/trainer.py', 7, 'brainstorm.hooks.saving', None),
        Import('brainstorm/utils.py', 3, 'brainstorm.optional', None),
        Import('brainstorm/hooks/saving.py', 9, 'brainstorm.training.trainer', None),
        Import('brainstorm/training/steppers.py', 4, 'brainstorm.training.utils', None),
        Import(
            'brainstorm/training/trainer.py',
            12,
            'brainstorm.hooks',
            None,
            'brainstorm.hooks:Hook',
        ),
    ]
    assert downward_violations(imports, levels) == [
        'brainstorm/training/trainer.py:7: brainstorm.training (level 5) '
        'imports brainstorm.hooks.saving, of brainstorm.hooks (level 6): '
        'a higher level',
        'brainstorm/utils.py:3: brainstorm.utils (level 1) imports '
        'brainstorm.optional, of brainstorm.optional (level 1): the same level',
        'brainstorm/training/trainer.py:12: brainstorm.training (level 5) '
        "names the class 'brainstorm.hooks:Hook', of brainstorm.hooks (level 6): "
        'a higher level',
    ]
