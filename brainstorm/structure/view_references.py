"""Layer- and parameter-name patterns, resolved to the values they select.

``Network.initialize``, ``Network.set_weight_modifiers``,
``Network.set_gradient_modifiers`` and ``MultiStepper`` all select layers
and parameters by name patterns; they share this one matcher so that a
pattern means the same everywhere. (Brainstorm 0.5 kept its reference
resolution in this module, so its path stays importable.)
"""

from __future__ import annotations

import copy
import re
from collections import (
    OrderedDict,
    namedtuple,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from copy import deepcopy  # noqa: F401 - in Brainstorm 0.5's namespace of this module

import numpy as np

from brainstorm.errors import (
    NetworkValidationError,
    ValidationError,
)
from brainstorm.initializers import ArrayInitializer, Initializer
from brainstorm.naming import (
    is_valid_layer_name,  # noqa: F401 - in Brainstorm 0.5's namespace of this module
)
from brainstorm.structure.buffer_views import BufferView  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from brainstorm.value_modifiers import GradientModifier, ValueModifier

__all__ = [
    'pattern_matches',
    'resolve_patterns',
    'merge_refs',
    'choose_initializer',
    'install_modifiers',
]

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
    if (
        isinstance(a, numbers)
        and isinstance(b, numbers)
        and not isinstance(a, bool)
        and not isinstance(b, bool)
    ):
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
        A layer's untrained parameters (BatchNorm's running ``mu`` and
        ``sigma``, a clock's ``timing``) are named only by their full
        names: a parameter pattern with a ``*`` skips them.

    Raises:
        NetworkValidationError: for non-str keys, a forbidden
            ``'fallback'``, and patterns matching nothing.
    """
    layer_patterns = _check_patterns(layers, refs, what, allow_fallback)
    result = {}
    used_param_patterns: set = set()
    for lname, layer in layers.items():
        matching = [refs[p] for p in layer_patterns if pattern_matches(p, lname)]
        for pname in layer.parameter_shapes:
            result[lname, pname] = _resolve_parameter(
                refs,
                matching,
                pname,
                used_param_patterns,
                pname in layer.untrained_parameters,
            )
    _check_parameter_patterns_used(
        layers, refs, layer_patterns, used_param_patterns, what
    )
    return result


def _check_patterns(layers, refs: dict, what: str, allow_fallback: bool) -> list:
    """Check the keys of a pattern dict; return its layer patterns.

    Raises:
        NetworkValidationError: for non-str keys, a forbidden
            ``'fallback'``, and layer patterns matching no layer.
    """
    for key in refs:
        if not isinstance(key, str):
            raise NetworkValidationError(
                f'{what}: keys must be layer name patterns. Received: {key!r}'
            )
    if not allow_fallback and 'fallback' in refs:
        raise NetworkValidationError(f"{what}: 'fallback' is not allowed here.")
    layer_patterns = [k for k in refs if k not in SPECIAL_KEYS]
    for pattern in layer_patterns:
        if not any(pattern_matches(pattern, name) for name in layers):
            raise NetworkValidationError(
                f"{what}: pattern '{pattern}' matches no layer. Layers: {list(layers)}"
            )
        value = refs[pattern]
        if isinstance(value, dict) and not allow_fallback and 'fallback' in value:
            raise NetworkValidationError(f"{what}: 'fallback' is not allowed here.")
    return layer_patterns


def _resolve_parameter(
    refs: dict, matching: list, pname: str, used: set, untrained: bool
) -> tuple:
    """``(values, fallbacks, explicit)`` of parameter ``pname`` of a layer.

    Args:
        refs: the pattern dict.
        matching: the values of the layer patterns matching the layer.
        pname: the parameter's name.
        used: collects ``(id(sub-dict), parameter pattern)`` of the
            parameter patterns that matched.
        untrained: whether ``pname`` is one of the layer's untrained
            parameters, which only their full names select (``{'*':
            Gaussian()}`` under a BatchNorm must not make its running
            ``sigma`` negative).
    """
    values, inner_defaults, fallbacks = [], [], []
    explicit = False
    for value in matching:
        if not isinstance(value, dict):
            values.append(value)
            continue
        for p in value:
            if p in SPECIAL_KEYS or (untrained and p != pname):
                continue
            if pattern_matches(p, pname):
                used.add((id(value), p))
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
    if not fallbacks and refs.get('fallback') is not None:
        fallbacks.append(refs['fallback'])
    return _distinct(values), _distinct(fallbacks), explicit


def _check_parameter_patterns_used(
    layers, refs: dict, layer_patterns: list, used: set, what: str
) -> None:
    """Check that every parameter pattern matched some parameter.

    Raises:
        NetworkValidationError: for a parameter pattern that matches no
            parameter of the layers its layer pattern selects (naming the
            untrained parameters it would match, which need their names).
    """
    for pattern in layer_patterns:
        value = refs[pattern]
        if not isinstance(value, dict):
            continue
        for p in value:
            if p not in SPECIAL_KEYS and (id(value), p) not in used:
                skipped = sorted(
                    f'{lname}.{pname}'
                    for lname, layer in layers.items()
                    if pattern_matches(pattern, lname)
                    for pname in layer.untrained_parameters
                    if pattern_matches(p, pname)
                )
                hint = (
                    f' It would match the untrained {", ".join(skipped)}, '
                    'which only their full names select.'
                    if skipped
                    else ''
                )
                raise NetworkValidationError(
                    f"{what}: parameter pattern '{p}' (under layer "
                    f"pattern '{pattern}') matches no parameter.{hint}"
                )


def merge_refs(default_or_dict, kwargs: dict) -> dict:
    """One pattern dict from a method's first argument and its keywords.

    Args:
        default_or_dict: None, a pattern dict, or a value for ``'default'``.
        kwargs: more patterns, given as keyword arguments.

    Raises:
        TypeError: if a keyword repeats a key of the dict.
    """
    if default_or_dict is None:
        refs = {}
    elif isinstance(default_or_dict, dict):
        refs = dict(default_or_dict)
    else:
        refs = {'default': default_or_dict}
    for key, value in kwargs.items():
        if key in refs:
            raise TypeError(
                f"Conflicting values for '{key}': given both in"
                ' the dict and as a keyword argument.'
            )
        refs[key] = value
    return refs


def as_initializer(value, where: str):
    """``value`` as an initializer.

    Initializers and numbers stay as they are (NumPy scalars such as
    ``np.float32(0.1)`` become the Python number), lists and arrays become
    an :class:`ArrayInitializer`. Bools are no numbers here.

    Raises:
        NetworkValidationError: for any other value.
    """
    if isinstance(value, Initializer):
        return value
    if isinstance(value, (np.integer, np.floating)):
        return value.item()  # a NumPy scalar (not a bool): a Python number
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value
    if isinstance(value, (list, np.ndarray)):
        return ArrayInitializer(value)
    raise NetworkValidationError(
        f'Initializer for {where} must be an Initializer, a number, a list or '
        f'an array. Received: {value!r}'
    )


def choose_initializer(layer, pname: str, resolved: tuple, where: str):
    """The initializer and fallback of one parameter.

    Args:
        layer: the layer owning the parameter.
        pname: the parameter's name.
        resolved: its ``(values, fallbacks, explicit)`` from
            :func:`resolve_patterns`.
        where: ``'Layer.param'``, for messages.

    Returns:
        ``(initializer, fallback)``; the fallback may be None. Untrained
        parameters get their layer's value unless a pattern names them;
        initializers with a ``select_for`` method (``LstmOptInit``) choose
        for the parameter. An array (or list) that a parameter pattern
        names gets no fallback: values of another shape are an error.

    Raises:
        NetworkValidationError: for no or several initializers, several
            fallbacks, or a value that is no initializer.
    """
    values, fallbacks, explicit = resolved
    untrained = layer.untrained_parameters
    if pname in untrained and not explicit:
        values, fallbacks = [untrained[pname]], []
    if not values:
        raise NetworkValidationError(
            f"No initializer for {where}. Add a 'default' or a pattern matching it."
        )
    if len(values) > 1:
        raise NetworkValidationError(f'Multiple initializers for {where}: {values}')
    if len(fallbacks) > 1:
        raise NetworkValidationError(f'Multiple fallbacks for {where}: {fallbacks}')
    init = _selected(as_initializer(values[0], where), layer, pname, where)
    fallback = (
        _selected(as_initializer(fallbacks[0], where), layer, pname, where)
        if fallbacks
        else None
    )
    if explicit and isinstance(init, ArrayInitializer):
        # values given for this parameter by name: one of another shape is
        # a mistake to report, not a reason to put the fallback there
        fallback = None
    return init, fallback


def _selected(init, layer, pname: str, where: str):
    """The initializer ``init`` chooses for the parameter, if it chooses.

    Initializers that depend on the parameter (``LstmOptInit`` picks the
    gate of an Lstm parameter, ``SparseInputs`` lets its sub-initializer
    pick) have a ``select_for`` method; a fallback chooses as the
    initializer does.

    Raises:
        NetworkValidationError: if the choice fails (an Lstm parameter of
            no gate), naming the parameter.
    """
    select = getattr(init, 'select_for', None)
    if select is None:
        return init
    try:
        return as_initializer(select(layer, pname), where)
    except ValidationError as err:
        raise NetworkValidationError(f'Initializing {where}: {err}') from None


def install_modifiers(layers, refs: dict, what: str) -> OrderedDict:
    """Copies of the modifiers a pattern dict selects, per parameter.

    Where several patterns select one parameter, all their modifiers are
    installed, in the order of the dict (as in Brainstorm 0.5); one
    modifier object that several patterns (or lists) select is installed
    once. Untrained parameters get only modifiers a parameter pattern
    names explicitly.

    Args:
        layers: dict of layer name -> layer.
        refs: the pattern dict (values: a modifier or a list of them).
        what: the calling method's name, for messages.

    Returns:
        ``{layer: {parameter: [modifier, ...]}}``; each modifier is a deep
        copy with ``layer_name`` and ``view_name`` set.

    Raises:
        NetworkValidationError: for patterns matching nothing or values
            that are not modifiers.
    """
    resolved = resolve_patterns(layers, refs, what, allow_fallback=False)
    installed: OrderedDict = OrderedDict()
    for lname, layer in layers.items():
        untrained = layer.untrained_parameters
        for pname in layer.parameter_shapes:
            values, _, explicit = resolved[lname, pname]
            if not values or (pname in untrained and not explicit):
                continue
            mods: list = []
            for value in values:
                for mod in value if isinstance(value, (list, tuple)) else [value]:
                    if not any(mod is earlier for earlier in mods):
                        mods.append(mod)
            copies = [_installed_copy(mod, lname, pname, what) for mod in mods]
            installed.setdefault(lname, OrderedDict())[pname] = copies
    return installed


def _installed_copy(mod, lname: str, pname: str, what: str):
    """A deep copy of a modifier, bound to ``lname.pname``.

    Weight modifiers are ValueModifiers; gradient modifiers may also be
    GradientModifiers (which see the parameters too).
    """
    kinds: tuple = (ValueModifier,)
    if what == 'set_gradient_modifiers':
        kinds = (ValueModifier, GradientModifier)
    if not isinstance(mod, kinds):
        names = ' or '.join(kind.__name__ for kind in kinds)
        raise NetworkValidationError(
            f'{what}: {lname}.{pname} got {mod!r}, which is not a modifier: '
            f'give a {names} of brainstorm.value_modifiers (or a subclass).'
        )
    mod = copy.deepcopy(mod)
    mod.layer_name, mod.view_name = lname, pname
    return mod
