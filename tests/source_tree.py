"""The files of the project's source tree, for tests that copy it."""

from __future__ import annotations

import subprocess
from pathlib import Path

#: what a test run leaves in a tree that is no part of it
_LEFT_BY_RUNS = {'__pycache__', '.pytest_cache', '.mypy_cache', '.ruff_cache', 'dist'}


def tree_files(root: Path) -> list[str]:
    """The files of the tree at ``root``, as paths relative to it.

    In a git checkout: what git tracks or would track (nothing ignored). In
    an unpacked sdist (CI runs the suite there too, without git): every file,
    less what test runs leave behind.
    """
    try:
        listed = subprocess.run(
            ['git', 'ls-files', '-z', '--cached', '--others', '--exclude-standard'],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        return sorted(
            path.relative_to(root).as_posix()
            for path in root.rglob('*')
            if path.is_file()
            and not _LEFT_BY_RUNS.intersection(path.relative_to(root).parts)
        )
    return [name for name in listed.split('\0') if name and (root / name).is_file()]
