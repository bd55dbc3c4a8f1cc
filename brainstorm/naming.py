"""Layer names and dotted paths (``'Hid1.parameters.W'``).

Layers, buffers, logs and descriptions are found by name: a layer name is
an ASCII identifier (:data:`LAYER_NAME_RULE`), and a dotted path walks
nested dicts (``net.buffer``, ``trainer.logs``, architectures).
"""

from __future__ import annotations

import re

__all__ = [
    'NAME_BLACKLIST',
    'PYTHON_IDENTIFIER',
    'LAYER_NAME_RULE',
    'is_valid_layer_name',
    'get_by_path',
    'get_normalized_path',
    'flatten_keys',
]

NAME_BLACKLIST = {'default', 'fallback'}
# \Z, not $: '$' also matches before a final newline, so 'default\n'
# would pass (and get round NAME_BLACKLIST) with .match
_IDENTIFIER = re.compile(r'^[_a-zA-Z][_a-zA-Z0-9]*\Z')
#: Brainstorm 0.5's name for the pattern of a Python identifier (anchored
#: with ``\Z``, so ``.match`` rejects a trailing newline too).
PYTHON_IDENTIFIER = _IDENTIFIER

#: The rule for layer names and layer types, as error messages state it.
LAYER_NAME_RULE = (
    "an ASCII identifier (letters a-z and A-Z, digits and '_', not "
    "starting with a digit) other than 'default' and 'fallback'; "
    'non-ASCII letters are not allowed, as in Brainstorm 0.5, because '
    "the '*' of initializer and modifier patterns matches only these "
    'characters'
)


def is_valid_layer_name(name) -> bool:
    """True if ``name`` is a valid layer name (see ``LAYER_NAME_RULE``).

    That is an ASCII identifier (``[_a-zA-Z][_a-zA-Z0-9]*``, as in
    Brainstorm 0.5) other than ``'default'`` and ``'fallback'``. Python
    identifiers with other letters (``'名前'``) are not layer names: the
    ``*`` of initializer and modifier patterns matches only ASCII letters,
    digits and ``_``.
    """
    return (
        isinstance(name, str)
        and _IDENTIFIER.fullmatch(name) is not None
        and name not in NAME_BLACKLIST
    )


def get_by_path(d, path: str):
    """Look up a dotted ``path`` in nested dict-likes.

    Raises:
        KeyError: naming the missing part and listing the available keys.
    """
    current = d
    for i, part in enumerate(path.split('.')):
        try:
            current = current[part]
        except (KeyError, TypeError, IndexError):
            prefix = '.'.join(path.split('.')[:i])
            keys = list(current.keys()) if hasattr(current, 'keys') else []
            where = f" in '{prefix}'" if prefix else ''
            raise KeyError(
                f"Unknown key '{part}'{where} of path '{path}'. Available keys: {keys}"
            ) from None
    return current


def get_normalized_path(*parts: str) -> str:
    """Join path parts with dots; ``..`` removes the preceding component.

    ``get_normalized_path('L', 'outputs', '..parameters.W')`` gives
    ``'L.parameters.W'``.
    """
    result: list = []
    # split each part on its own: joining first would turn a bare '..' part
    # into '....' (two pops)
    for part in parts:
        for component in re.split(r'(\.\.|\.)', part):
            if component in ('', '.'):
                continue
            if component == '..':
                if result:
                    result.pop()
            else:
                result.append(component)
    return '.'.join(result)


def flatten_keys(dictionary: dict) -> set:
    """All dotted leaf paths of a nested dict."""
    keys = set()
    for k, v in dictionary.items():
        if isinstance(v, dict):
            keys |= {f'{k}.{sub}' for sub in flatten_keys(v)}
        else:
            keys.add(k)
    return keys
