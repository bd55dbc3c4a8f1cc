"""Run the code of one documentation page as a reader would paste it.

``python tests/doc_snippets.py PAGE.rst`` runs, top to bottom in one fresh
namespace, every ``doctest``, ``testcode`` (checked against the
``testoutput`` that follows it) and ``code-block:: python`` block of the
page, exactly as written: no global setup, no extra imports. Run it from
the folder the page says (the repository root unless stated); like an
interactive interpreter, the current folder is on ``sys.path`` and this
script's folder is not. Exits with status 1 and prints what differed if a
block fails.

Expected outputs are compared with whitespace normalised only (no
``...`` placeholders).
"""

from __future__ import annotations

import builtins
import contextlib
import doctest
import io
import pathlib
import re
import sys
import traceback

DIRECTIVE = re.compile(
    r'^\.\. (doctest|testcode|testoutput|code-block|code)::\s*(\S*)\s*$'
)
RUNNABLE = {'doctest', 'testcode', 'testoutput', 'python'}


def blocks(text: str) -> list:
    """``(kind, code, line number)`` of the runnable blocks of a page, in
    order; ``kind`` is ``doctest``, ``testcode``, ``testoutput`` or
    ``python`` (a ``code-block:: python``)."""
    lines = text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i])
        i += 1
        if not match:
            continue
        kind, argument = match.groups()
        if kind in ('code-block', 'code'):
            if argument not in ('python', 'python3', 'pycon'):
                continue
            kind = 'python'
        start = i
        # options (``:hide:`` and the like) right below the directive
        while i < len(lines) and re.match(r'^\s+:\w[\w-]*:', lines[i]):
            i += 1
        body = []
        while i < len(lines) and (not lines[i].strip() or lines[i].startswith(' ')):
            body.append(lines[i])
            i += 1
        content = [line for line in body if line.strip()]
        indent = min(len(line) - len(line.lstrip()) for line in content)
        code = '\n'.join(line[indent:] for line in body).strip('\n') + '\n'
        found.append((kind, code, start))
    return found


def normalise(text: str) -> str:
    return ' '.join(text.split())


def run_page(path: pathlib.Path) -> list:
    """Run every block of the page; return the failure reports."""
    namespace = {'__name__': '__main__', '__builtins__': builtins}
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=doctest.NORMALIZE_WHITESPACE)
    failures: list = []
    page = blocks(path.read_text())
    for index, (kind, code, line) in enumerate(page):
        where = f'{path.name}, line {line}'
        if kind == 'doctest':
            test = parser.get_doctest(code, namespace, where, str(path), line)
            test.globs = namespace  # DocTest copies it; the page shares one
            before = runner.failures
            runner.run(test, out=failures.append, clear_globs=False)
            if runner.failures != before:
                break
        elif kind in ('testcode', 'python'):
            expected = None
            if (
                kind == 'testcode'
                and index + 1 < len(page)
                and page[index + 1][0] == 'testoutput'
            ):
                expected = page[index + 1][1]
            printed = io.StringIO()
            try:
                with contextlib.redirect_stdout(printed):
                    exec(compile(code, where, 'exec'), namespace)
            except BaseException:  # noqa: BLE001 - reported, then stop
                failures.append(f'{where}: raised\n{traceback.format_exc()}')
                break
            if expected is not None and normalise(printed.getvalue()) != normalise(
                expected
            ):
                failures.append(
                    f'{where}: printed\n{printed.getvalue()}\nexpected\n{expected}'
                )
                break
            if kind == 'python':
                sys.stdout.write(printed.getvalue())
    return failures


def main(argv: list) -> int:
    # like ``python`` started in this folder: '' first, not tests/
    sys.path[0] = ''
    failures = run_page(pathlib.Path(argv[1]))
    for failure in failures:
        print(failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
