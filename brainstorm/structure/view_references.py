"""Layer- and parameter-name patterns, resolved to the values they select.

``Network.initialize``, ``Network.set_weight_modifiers``,
``Network.set_gradient_modifiers`` and ``MultiStepper`` all select layers
and parameters by name patterns; they share this one matcher so that a
pattern means the same everywhere. (Brainstorm 0.5 kept its reference
resolution in this module, so its path stays importable.)
"""

from __future__ import annotations

import re

from brainstorm.utils import NetworkValidationError

__all__ = ['pattern_matches', 'resolve_patterns']

SPECIAL_KEYS = ('default', 'fallback')


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether the layer/parameter name pattern selects the whole ``name``.

    ``*`` stands for any run of identifier characters; everything else is
    literal. The pattern must cover the name completely, so ``'Hid'`` does
    not select ``'Hid2'``.

    Args:
        pattern: the pattern, e.g. ``'Hid*'``.
        name: the layer or parameter name.

    Returns:
        True if the pattern matches the entire name.
    """
    regex = re.escape(pattern).replace(r'\*', '[_a-zA-Z0-9]*')
    return re.fullmatch(regex, name) is not None


def _same_value(a, b) -> bool:
    if a is b:
        return True
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and \
            not isinstance(a, bool) and not isinstance(b, bool):
        return a == b
    return False


def _distinct(values: list) -> list:
    result: list = []
    for v in values:
        if not any(_same_value(v, r) for r in result):
            result.append(v)
    return result


def resolve_patterns(layers, refs: dict, what: str, allow_fallback: bool):
    """Resolve a dict of name patterns for every parameter of ``layers``.

    For a parameter ``L.p`` the values are, in the order of ``refs``:

    * the values of every layer pattern matching ``L`` that is not a dict
      (they apply to all of the layer's parameters), and the entries of
      every matching sub-dict whose parameter pattern matches ``p``;
    * if there are none: the ``'default'`` of the matching sub-dicts;
    * if there is none either: the top-level ``'default'``.

    So an inherited ``default`` only fills parameters that no sub-dict of
    any matching pattern names (Brainstorm 0.5's rule). Callers decide
    whether several values are an error (initializers) or are all used in
    order (modifiers).

    Args:
        layers: dict of layer name -> layer (with ``parameter_shapes``).
        refs: the pattern dict.
        what: the calling method's name, for error messages.
        allow_fallback: whether ``'fallback'`` keys are allowed.

    Returns:
        ``{(layer, param): (values, fallbacks, explicit)}`` for every
        parameter, where ``explicit`` says a parameter pattern named it.

    Raises:
        NetworkValidationError: for non-str keys, a forbidden
            ``'fallback'``, and patterns matching nothing.
    """
    for key in refs:
        if not isinstance(key, str):
            raise NetworkValidationError(
                f'{what}: keys must be layer name patterns. Received: {key!r}')
    if not allow_fallback and 'fallback' in refs:
        raise NetworkValidationError(f"{what}: 'fallback' is not allowed here.")
    layer_patterns = [k for k in refs if k not in SPECIAL_KEYS]
    for pattern in layer_patterns:
        if not any(pattern_matches(pattern, name) for name in layers):
            raise NetworkValidationError(
                f"{what}: pattern '{pattern}' matches no layer. Layers: "
                f'{list(layers)}')
        value = refs[pattern]
        if isinstance(value, dict) and not allow_fallback and \
                'fallback' in value:
            raise NetworkValidationError(
                f"{what}: 'fallback' is not allowed here.")
    result = {}
    used_param_patterns = set()
    outer_fallback = refs.get('fallback')
    for lname, layer in layers.items():
        matching = [refs[p] for p in layer_patterns
                    if pattern_matches(p, lname)]
        for pname in layer.parameter_shapes:
            values, inner_defaults, fallbacks = [], [], []
            explicit = False
            for value in matching:
                if not isinstance(value, dict):
                    values.append(value)
                    continue
                for p in value:
                    if p not in SPECIAL_KEYS and pattern_matches(p, pname):
                        used_param_patterns.add((id(value), p))
                        values.append(value[p])
                        explicit = True
                if 'default' in value:
                    inner_defaults.append(value['default'])
                if 'fallback' in value:
                    fallbacks.append(value['fallback'])
            if not values:
                if inner_defaults:
                    values = inner_defaults
                elif 'default' in refs:
                    values = [refs['default']]
            if not fallbacks and outer_fallback is not None:
                fallbacks.append(outer_fallback)
            result[lname, pname] = (_distinct(values), _distinct(fallbacks),
                                    explicit)
    for pattern in layer_patterns:
        value = refs[pattern]
        if isinstance(value, dict):
            for p in value:
                if p not in SPECIAL_KEYS and \
                        (id(value), p) not in used_param_patterns:
                    raise NetworkValidationError(
                        f"{what}: parameter pattern '{p}' (under layer "
                        f"pattern '{pattern}') matches no parameter.")
    return result
