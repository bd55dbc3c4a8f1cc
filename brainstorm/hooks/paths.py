"""Checks of the file names that hooks restored from a file write to.

A hook recreated from a checkpoint or a description writes to the file
names stored there; :func:`check_restored_path` refuses names that lead
outside the working folder or that Python could import.
"""

from __future__ import annotations

import importlib.machinery
import os
import re

from brainstorm.utils import TrainingValidationError

__all__ = ['check_restored_path']

# file names Python (or site) would import or run from a folder on sys.path
_IMPORTABLE_SUFFIXES = frozenset(
    suffix.lower() for suffix in importlib.machinery.all_suffixes()
) | {
    '.py',
    '.pyc',
    '.pyo',
    '.pyw',
    '.pyd',
    '.so',
    '.pth',
    '.pyz',
    '.zip',
    '.egg',
    '.whl',
}
_IMPORTABLE_NAMES = frozenset(
    {'sitecustomize', 'usercustomize', '__init__', '__main__', '__pycache__'}
)


def check_restored_path(owner: str, filename, folders=()) -> None:
    """Check a file name that a hook restored from a file will write to.

    The path (relative paths taken from the working folder, symbolic links
    resolved) must lead inside the current working folder or one of
    ``folders``, have no hidden (``.``) part below that folder, and not
    name a file Python would import (``*.py``, ``*.pyc``, ``*.so``,
    ``*.pth``, ``sitecustomize``...).

    Args:
        owner: names the hook, for messages.
        filename: the restored path.
        folders: further folders writes may go to (the checkpoint's).

    Raises:
        TrainingValidationError: naming ``owner``, the path and the rule.
    """

    def refuse(rule: str):
        raise TrainingValidationError(
            f'{owner}: refusing to write to {filename!r}: {rule}. If you '
            'wrote this file yourself, load it with trusted=True, or replace '
            'the hook.'
        )

    if not isinstance(filename, str) or not filename or '\0' in filename:
        refuse('a file name must be a non-empty str')
    name = re.split(r'[\\/]', filename)[-1].lower()
    if (
        any(name.endswith(suffix) for suffix in _IMPORTABLE_SUFFIXES)
        or name.split('.')[0] in _IMPORTABLE_NAMES
    ):
        refuse('it names a file Python could import')
    target = os.path.realpath(filename)
    roots = [os.path.realpath(folder) for folder in (os.getcwd(), *folders)]
    for root in roots:
        if os.path.commonpath([root, target]) == root and target != root:
            below = os.path.relpath(target, root).split(os.sep)
            if any(part.startswith('.') for part in below):
                refuse('it names a hidden file or folder')
            return
    refuse(f"it leads outside the working folder and the checkpoint's folder {roots}")
