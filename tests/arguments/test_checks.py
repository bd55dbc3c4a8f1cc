"""Each rule of the single-value checks (brainstorm/arguments/checks.py) at
its edges.

The generated bad-input suite (tests/test_declared_arguments.py) tries each
check's ``invalid_examples``; these tests pin down what the generated suite
cannot see: that each bound is included or excluded exactly as documented
(both ends, ints and floats, NumPy scalars, bools, inf and NaN), that the
``expected`` phrase says what the check does, that every ``example`` is
accepted and every invalid example refused, and that the invalid examples
hold the values just outside each bound.
"""

from __future__ import annotations

import fractions
import functools
import io
import math
import sys

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.arguments import (
    MAX_INT,
    SEED,
    AnyOf,
    Arg,
    Bool,
    Callable,
    Check,
    Choice,
    DictOf,
    FloatDtype,
    Instance,
    Int,
    ListOf,
    Optional,
    Real,
    Str,
    Writable,
    checks,
    declare,
)
from brainstorm.describable import Describable, get_description
from brainstorm.handlers.base_handler import Handler
from brainstorm.utils import DescriptionError, ValidationError


def accepts(check, value) -> bool:
    try:
        check.normalize(value)
    except (ValueError, TypeError):
        return False
    return True


def refuses(check, value) -> bool:
    return not accepts(check, value)


class EdgeThing(Describable):
    """A user class to restore through the checks."""

    __arguments__ = {'n': Arg(Int(0, 5), default=0)}

    def __init__(self, n=0):
        self.n = n


class OtherThing(Describable):
    __arguments__ = {'m': Arg(Int(), default=0)}

    def __init__(self, m=0):
        self.m = m


# ------------------------------------------------------------------ Int ---

INTS = {
    'Int()': Int(),
    'Int(0)': Int(0),
    'Int(1)': Int(1),
    'Int(0, 5)': Int(0, 5),
    'Int(3, 5)': Int(3, 5),
    'Int(-5, -1)': Int(-5, -1),
    'Int(high=5)': Int(high=5),
    'Int(high=0)': Int(high=0),
    'Int(high=-3)': Int(high=-3),
    'SEED': SEED,
}


@pytest.mark.parametrize('low, high', [(0, 5), (-5, -1), (3, 3), (1, MAX_INT)])
def test_int_includes_both_bounds_and_nothing_beyond(low, high):
    check = Int(low, high)
    assert check.normalize(low) == low
    assert check.normalize(high) == high
    assert refuses(check, low - 1)
    assert refuses(check, high + 1)


def test_int_without_low_has_no_lower_bound_and_high_defaults_to_max_int():
    assert Int().normalize(-(2**40)) == -(2**40)
    assert Int().normalize(MAX_INT) == MAX_INT
    assert refuses(Int(), MAX_INT + 1)
    assert Int(high=5).normalize(-(10**30)) == -(10**30)
    assert refuses(Int(high=5), 6)


def test_max_int_is_the_largest_int32():
    assert MAX_INT == 2**31 - 1
    assert Int(1).normalize(2**31 - 1) == 2**31 - 1
    assert refuses(Int(1), 2**31)


@pytest.mark.parametrize(
    'value', [np.int8(5), np.int64(5), np.uint8(5), np.uint64(5), np.int32(0)]
)
def test_int_accepts_numpy_integers_and_returns_python_ints(value):
    result = Int(0, 5).normalize(value)
    assert result == int(value)
    assert type(result) is int


@pytest.mark.parametrize(
    'value',
    [
        True,
        False,
        np.bool_(True),
        np.bool_(False),
        2.0,
        1.5,
        np.float64(2.0),
        float('inf'),
        float('-inf'),
        float('nan'),
        '2',
        None,
        [2],
        fractions.Fraction(2),
        np.array(2),
    ],
)
def test_int_refuses_bools_floats_and_other_types_even_inside_the_bounds(value):
    assert refuses(Int(0, 5), value)
    assert refuses(Int(), value)


@pytest.mark.parametrize('value', [np.uint64(2**63), np.int64(-(2**62))])
def test_int_bounds_hold_for_numpy_integers(value):
    assert refuses(Int(0, 5), value)


def test_seed_is_the_range_of_numpy_random_state():
    assert SEED.normalize(0) == 0
    assert SEED.normalize(2**32 - 1) == 2**32 - 1
    assert SEED.normalize(np.uint32(2**32 - 1)) == 2**32 - 1
    assert refuses(SEED, -1)
    assert refuses(SEED, 2**32)
    assert refuses(SEED, True)
    np.random.RandomState(SEED.normalize(2**32 - 1))  # NumPy agrees


@pytest.mark.parametrize(
    'check, expected',
    [
        (Int(), 'an int'),
        (Int(0), 'an int >= 0'),
        (Int(2), 'an int >= 2'),
        (Int(1), 'a positive int'),
        (Int(1, MAX_INT), 'a positive int'),
        (Int(1, 5), 'an int in [1, 5]'),
        (Int(0, 5), 'an int in [0, 5]'),
        (Int(high=5), 'an int <= 5'),
        (Int(0, 2**32 - 1), 'an int in [0, 4294967295]'),
    ],
)
def test_int_says_what_it_expects(check, expected):
    assert check.expected == expected


# ----------------------------------------------------------------- Real ---

REALS = {
    'Real()': Real(),
    'Real(0)': Real(0),
    'Real(5)': Real(5),
    'Real(0, open)': Real(0, include_low=False),
    'Real(high=0)': Real(high=0),
    'Real(high=-5)': Real(high=-5),
    'Real(high=0, open)': Real(high=0, include_high=False),
    'Real(0, 1)': Real(0, 1),
    'Real(0.5, 2)': Real(0.5, 2),
    'Real(0, 1, open)': Real(0, 1, include_low=False, include_high=False),
    'Real(2, 4, open)': Real(2, 4, include_low=False, include_high=False),
    'Real(-4, -2, open)': Real(-4, -2, include_low=False, include_high=False),
    'Real(finite=False)': Real(finite=False),
    'Real(0, finite=False)': Real(0, finite=False),
    'Real(high=0, finite=False)': Real(high=0, finite=False),
}


def test_real_includes_both_bounds_by_default():
    check = Real(0, 1)
    assert check.normalize(0) == 0.0
    assert check.normalize(1) == 1.0
    assert check.normalize(0.0) == 0.0
    assert check.normalize(1.0) == 1.0
    assert refuses(check, -1e-300)
    assert refuses(check, np.nextafter(1.0, 2.0))


def test_real_excludes_a_bound_exactly_when_told():
    low_open = Real(0, 1, include_low=False)
    assert refuses(low_open, 0.0)
    assert refuses(low_open, 0)
    assert low_open.normalize(5e-324) == 5e-324
    assert low_open.normalize(1.0) == 1.0
    high_open = Real(0, 1, include_high=False)
    assert refuses(high_open, 1.0)
    assert refuses(high_open, np.float32(1.0))
    assert high_open.normalize(np.nextafter(1.0, 0.0)) < 1.0
    assert high_open.normalize(0.0) == 0.0


def test_real_one_sided_bounds():
    assert Real(0).normalize(0) == 0.0
    assert Real(0).normalize(1e300) == 1e300
    assert refuses(Real(0), -5e-324)
    assert refuses(Real(0, include_low=False), 0.0)
    assert Real(high=0).normalize(0) == 0.0
    assert Real(high=0).normalize(-1e300) == -1e300
    assert refuses(Real(high=0), 5e-324)
    assert refuses(Real(high=0, include_high=False), 0.0)


@pytest.mark.parametrize(
    'value',
    [
        True,
        False,
        np.bool_(True),
        np.bool_(False),
        float('nan'),
        np.float32('nan'),
        '0.5',
        None,
        [0.5],
        complex(0.5),
        np.array(0.5),
    ],
)
def test_real_refuses_bools_nan_and_other_types_even_inside_the_bounds(value):
    assert refuses(Real(0, 1), value)
    assert refuses(Real(), value)
    assert refuses(Real(finite=False), value)


@pytest.mark.parametrize('value', [math.inf, -math.inf, np.float64('inf')])
def test_real_refuses_infinity_unless_finite_is_false(value):
    assert refuses(Real(), value)
    assert Real(finite=False).normalize(value) == value


def test_real_bounds_hold_for_infinity_when_it_is_allowed():
    assert Real(0, finite=False).normalize(math.inf) == math.inf
    assert refuses(Real(0, finite=False), -math.inf)
    assert Real(high=0, finite=False).normalize(-math.inf) == -math.inf
    assert refuses(Real(high=0, finite=False), math.inf)


@pytest.mark.parametrize('value', [10**400, -(10**400)])
def test_real_refuses_an_int_too_large_for_a_float_with_a_clear_error(value):
    for check in (Real(), Real(finite=False), Real(0, 1)):
        with pytest.raises(ValueError):
            check.normalize(value)

    @declare(rate=Arg(Real(0)))
    def train(rate):
        return rate

    with pytest.raises(ValidationError, match=r'train: rate must be a finite number'):
        train(value)


@pytest.mark.parametrize(
    'value',
    [np.float16(0.5), np.float32(0.5), np.float64(0.5), np.int64(1), np.uint8(0)],
)
def test_real_accepts_numpy_scalars_and_returns_python_floats(value):
    result = Real(0, 1).normalize(value)
    assert result == float(value)
    assert type(result) is float


def test_real_accepts_ints_and_fractions_as_floats():
    assert type(Real().normalize(3)) is float
    assert Real(0, 1).normalize(fractions.Fraction(1, 2)) == 0.5


@pytest.mark.parametrize(
    'check, expected',
    [
        (Real(), 'a finite number'),
        (Real(finite=False), 'a number'),
        (Real(0), 'a finite number >= 0'),
        (Real(0, include_low=False), 'a finite number > 0'),
        (Real(high=1), 'a finite number <= 1'),
        (Real(high=1, include_high=False), 'a finite number < 1'),
        (Real(0, 1), 'a finite number in [0, 1]'),
        (Real(0, 1, include_low=False), 'a finite number in (0, 1]'),
        (Real(0, 1, include_high=False), 'a finite number in [0, 1)'),
        (Real(0, 1, False, False), 'a finite number in (0, 1)'),
        (Real(0, finite=False), 'a number >= 0'),
    ],
)
def test_real_says_what_it_expects(check, expected):
    assert check.expected == expected


# ---------------------------------------------------- Bool, Str, Choice ---


def test_bool_accepts_only_bools():
    assert Bool().normalize(True) is True
    assert Bool().normalize(False) is False
    assert Bool().normalize(np.bool_(True)) is True
    assert Bool().normalize(np.bool_(False)) is False
    for value in (0, 1, 1.0, 0.0, np.int64(1), 'True', 'no', None, [True]):
        assert refuses(Bool(), value), value


def test_bool_invalid_examples_hold_the_ints_equal_to_false_and_true():
    ints = [v for v in Bool().invalid_examples if type(v) is int]
    assert 0 in ints and 1 in ints


def test_str_accepts_any_str_by_default():
    assert Str().normalize('') == ''
    assert Str().normalize('a b') == 'a b'
    assert Str().normalize('1') == '1'
    result = Str().normalize(np.str_('a'))
    assert result == 'a' and type(result) is str
    for value in (5, None, b'a', ['a'], np.bytes_(b'a')):
        assert refuses(Str(), value), value


def test_str_nonempty_refuses_only_the_empty_str():
    check = Str(nonempty=True)
    assert refuses(check, '')
    assert check.normalize(' ') == ' '
    assert check.normalize('a b') == 'a b'


def test_str_identifier_refuses_non_identifiers():
    check = Str(identifier=True)
    for bad in ('', 'a b', '1a', 'a-b', 'a.b', ' a'):
        assert refuses(check, bad), bad
    for good in ('a', '_a', 'a1', 'Hid_1'):
        assert check.normalize(good) == good


def test_str_says_what_it_expects():
    assert Str().expected == 'a str'
    assert Str(nonempty=True).expected == 'a non-empty str'
    assert Str(identifier=True).expected == 'a name (str, Python identifier)'


def test_str_invalid_examples_hold_the_edge_strs():
    assert '' in Str(nonempty=True).invalid_examples
    assert '' in Str(identifier=True).invalid_examples
    assert any(
        isinstance(v, str) and v and not v.isidentifier()
        for v in Str(identifier=True).invalid_examples
    )


def test_choice_compares_type_and_value():
    check = Choice('a', 'b')
    assert check.normalize('a') == 'a'
    assert check.normalize('b') == 'b'
    assert refuses(check, 'c')
    assert refuses(check, None)
    numbers = Choice(1, 2)
    assert numbers.normalize(1) == 1
    assert numbers.normalize(2) == 2
    for value in (True, 1.0, np.int64(1), 3, '1'):
        assert refuses(numbers, value), value


def test_choice_of_one_value():
    check = Choice('only')
    assert check.example == 'only'
    assert check.expected == "one of 'only'"
    assert check.normalize('only') == 'only'


def test_choice_example_is_the_first_choice():
    assert Choice('max', 'min').example == 'max'
    assert Choice('max', 'min').expected == "one of 'max', 'min'"


@pytest.mark.parametrize('choices', [(3, 4), (None, 'a'), ('no such choice',)])
def test_choice_invalid_examples_never_hold_a_choice(choices):
    check = Choice(*choices)
    assert check.invalid_examples
    for bad in check.invalid_examples:
        assert refuses(check, bad), bad


# ------------------------------------------------------------- Optional ---


def test_optional_accepts_none_and_what_the_inner_check_accepts():
    check = Optional(Int(0, 5))
    assert check.normalize(None) is None
    assert check.normalize(5) == 5
    assert check.normalize(np.int64(0)) == 0
    assert refuses(check, 6)
    assert refuses(check, 'x')
    assert check.expected == 'None or an int in [0, 5]'
    assert check.example == 0
    assert None not in check.invalid_examples
    assert 6 in check.invalid_examples


def test_optional_restores_none_and_descriptions():
    check = Optional(Instance(EdgeThing))
    assert check.kind is EdgeThing
    assert check.restore(None) is None
    restored = check.restore(get_description(EdgeThing(3)))
    assert isinstance(restored, EdgeThing) and restored.n == 3
    assert Optional(Int()).kind is None


# ------------------------------------------------------------- Instance ---


def test_instance_accepts_instances_of_the_kind_and_its_subclasses():
    handler = bs.handlers.NumpyHandler(np.float64)
    assert Instance(bs.handlers.NumpyHandler).normalize(handler) is handler
    assert Instance(Handler).normalize(handler) is handler
    for value in (5, 'x', None, bs.handlers.NumpyHandler, object()):
        assert refuses(Instance(Handler), value), value


def test_instance_refuses_a_class_even_where_classes_are_instances_of_the_kind():
    assert Instance(object).normalize(5) == 5
    assert refuses(Instance(object), int)
    assert refuses(Instance(object), EdgeThing)


def test_instance_of_a_tuple_of_kinds():
    check = Instance((EdgeThing, OtherThing))
    assert check.normalize(EdgeThing()).n == 0
    assert check.normalize(OtherThing()).m == 0
    assert refuses(check, 5)
    assert check.expected == 'an EdgeThing or an OtherThing'


@pytest.mark.parametrize(
    'check, expected',
    [
        (Instance(bs.handlers.NumpyHandler), 'a NumpyHandler'),
        (Instance(bs.initializers.Initializer), 'an Initializer'),
        (Instance('brainstorm.handlers:NumpyHandler'), 'a NumpyHandler'),
        (Instance('brainstorm.initializers:Initializer'), 'an Initializer'),
        (Instance(EdgeThing, what='a thing with n'), 'a thing with n'),
    ],
)
def test_instance_says_what_it_expects(check, expected):
    assert check.expected == expected


def test_instance_imports_a_named_kind_on_first_use():
    check = Instance('brainstorm.handlers:NumpyHandler')
    assert check.kind is bs.handlers.NumpyHandler
    assert check.kind is bs.handlers.NumpyHandler
    assert check.normalize(bs.handlers.NumpyHandler(np.float64))


def test_instance_example_is_called_when_callable():
    assert Instance(EdgeThing, example=lambda: EdgeThing(2)).example.n == 2
    thing = EdgeThing(1)
    assert Instance(EdgeThing, example=thing).example is thing


def test_instance_restores_only_descriptions_of_its_kind():
    check = Instance(EdgeThing)
    restored = check.restore({'@type': 'EdgeThing', 'n': 4})
    assert isinstance(restored, EdgeThing) and restored.n == 4
    for value in (5, 'EdgeThing', None, [], {'n': 4}):
        with pytest.raises(DescriptionError, match='a description of an EdgeThing'):
            check.restore(value)
    with pytest.raises(DescriptionError, match='not allowed here'):
        check.restore({'@type': 'OtherThing'})


# ----------------------------------------- Callable, Writable, FloatDtype ---


class _WithMethod:
    def method(self):
        return 1


def test_callable_accepts_callables_that_are_not_classes():
    check = Callable()
    for value in (len, lambda: 1, _WithMethod().method, functools.partial(max, 1)):
        assert check.normalize(value) is value
    for value in (5, 'x', None, int, EdgeThing, _WithMethod):
        assert refuses(check, value), value


def test_callable_example_takes_any_arguments():
    example = Callable().example
    assert example(7) == 7
    assert example(7, 8, key=9) == 7
    assert example() is None


def test_writable_accepts_objects_with_a_callable_write():
    check = Writable()
    out = io.StringIO()
    assert check.normalize(out) is out
    assert check.normalize(sys.stdout) is sys.stdout

    class NotCallable:
        write = 5

    for value in ('x', 5, b'', None, NotCallable()):
        assert refuses(check, value), value
    assert Writable().example is not Writable().example  # a fresh file each time


@pytest.mark.parametrize(
    'value, expected',
    [
        (np.float32, np.float32),
        ('float64', np.float64),
        (np.dtype('float16'), np.float16),
        (float, np.float64),
    ],
)
def test_float_dtype_accepts_float_types_and_names(value, expected):
    assert FloatDtype().normalize(value) is expected


@pytest.mark.parametrize('value', [None, 'day', np.int32, 'object', 5, object, int])
def test_float_dtype_refuses_everything_else_with_a_value_or_type_error(value):
    with pytest.raises((ValueError, TypeError)) as info:
        FloatDtype().normalize(value)
    assert not isinstance(info.value, NameError)


# ------------------------------------------ examples and invalid examples ---

ALL = {
    **INTS,
    **REALS,
    'Bool()': Bool(),
    'Str()': Str(),
    'Str(nonempty)': Str(nonempty=True),
    'Str(identifier)': Str(identifier=True),
    'Choice': Choice('a', 'b'),
    'Choice(ints)': Choice(3, 4),
    'Optional(Int(1))': Optional(Int(1)),
    'Optional(Real(0, 1))': Optional(Real(0, 1)),
    'Instance': Instance(EdgeThing, example=EdgeThing),
    'Instance(tuple)': Instance((EdgeThing, OtherThing), example=OtherThing),
    'Instance(object)': Instance(object, example=5),
    'Instance(int)': Instance(int, example=5),
    'Callable': Callable(),
    'Writable': Writable(),
    'FloatDtype': FloatDtype(),
}


@pytest.mark.parametrize('check', ALL.values(), ids=list(ALL))
def test_each_example_is_accepted(check):
    assert accepts(check, check.example), check.example


@pytest.mark.parametrize('check', ALL.values(), ids=list(ALL))
def test_each_invalid_example_is_refused(check):
    assert check.invalid_examples
    for bad in check.invalid_examples:
        assert refuses(check, bad), bad


@pytest.mark.parametrize('check', INTS.values(), ids=list(INTS))
def test_int_invalid_examples_hold_the_neighbours_of_each_bound(check):
    invalid = [v for v in check.invalid_examples if type(v) is int]
    assert check.high + 1 in invalid
    if check.low is not None:
        assert check.low - 1 in invalid


@pytest.mark.parametrize('check', REALS.values(), ids=list(REALS))
def test_real_invalid_examples_hold_the_values_beyond_each_bound(check):
    invalid = [float(v) for v in check.invalid_examples if type(v) in (int, float)]
    assert any(math.isnan(v) for v in invalid)
    if check.finite:
        assert math.inf in invalid
    if math.isfinite(check.low):
        assert any(v < check.low for v in invalid)
        if not check.include_low:
            assert check.low in invalid
    if math.isfinite(check.high):
        assert any(v > check.high for v in invalid)
        if not check.include_high:
            assert check.high in invalid


@pytest.mark.parametrize(
    'check', [*INTS.values(), *REALS.values()], ids=[*INTS, *REALS]
)
def test_a_bool_the_bounds_alone_would_accept_is_among_the_invalid_examples(check):
    # a bool equal to an accepted number shows that bools are refused as
    # bools, not merely for being out of range
    inside = [b for b in (False, True) if accepts(check, int(b))]
    if not inside:
        pytest.skip('no bool lies inside these bounds')
    bools = [v for v in check.invalid_examples if isinstance(v, bool)]
    assert set(inside) <= set(bools), bools


# --------------------------------------------------- restoring, messages ---


def test_restoring_without_a_registered_restorer_says_so(monkeypatch):
    monkeypatch.delitem(checks._RESTORER, 'restore')
    with pytest.raises(RuntimeError, match='no restorer registered'):
        Check().restore(5)


def test_a_plain_check_restores_plain_values_and_refuses_descriptions():
    assert Check().restore(5) == 5
    assert Check().restore({'a': [1, 2]}) == {'a': [1, 2]}
    with pytest.raises(DescriptionError):
        Check().restore({'@type': 'EdgeThing'})


def test_only_a_dict_with_type_counts_as_a_description():
    # a plain dict goes to the check that restores plain dicts, even where a
    # check for descriptions comes first
    check = AnyOf(Instance(EdgeThing), DictOf(Real()))
    assert check.restore({'a': 1.0, '@typo': 2.0}) == {'a': 1.0, '@typo': 2.0}
    assert isinstance(check.restore({'@type': 'EdgeThing'}), EdgeThing)


def test_a_bad_item_error_says_where_it_sits_when_normalize_is_called_directly():
    with pytest.raises(ValueError, match=r'^\[1\] must be an int in \[0, 5\]$'):
        ListOf(Int(0, 5)).normalize([1, 'x'])
    with pytest.raises(ValueError, match=r"^\['b'\]\[0\] must be a finite number"):
        DictOf(ListOf(Real())).normalize({'a': [1.0], 'b': [math.nan]})


@declare(count=Arg(Int()))
def _count(count):
    return count


@pytest.mark.parametrize('length', [78, 79, 200])
def test_received_values_are_shown_up_to_80_characters(length):
    value = 'x' * length
    shown = repr(value)
    with pytest.raises(ValidationError) as info:
        _count(value)
    received = str(info.value).split('Received: count=', 1)[1]
    if len(shown) <= 80:
        assert received == shown
    else:
        assert len(received) == 80
        assert received == shown[:77] + '...'


def test_a_received_value_of_exactly_80_characters_is_shown_whole():
    value = 'x' * 78  # its repr has 80 characters
    assert checks._short(value) == repr(value)
    assert checks._short(value + 'x') == repr(value + 'x')[:77] + '...'
    assert len(checks._short(value + 'x')) == 80


def test_arrays_are_shown_by_shape_and_dtype():
    assert checks._short(np.zeros((2, 3))) == 'array of shape (2, 3) and dtype float64'
    masked = np.ma.masked_array([1.0], mask=[True])
    assert checks._short(masked) == 'masked array of shape (1,) and dtype float64'
    assert checks._short([1, 2]) == '[1, 2]'


# ---- FileName ---------------------------------------------------------------


@pytest.mark.parametrize('value', [5, 1.5, ['a'], b'a.h5', '', 'a\0b'])
def test_file_name_refuses_what_is_no_name_saying_only_what_it_expects(value):
    with pytest.raises(ValidationError) as info:
        bs.hooks.SaveBestNetwork('validation.total_loss', filename=value)
    # the message is the check's own, without Python's wording from os.fspath
    assert str(info.value) == (
        'SaveBestNetwork: filename must be None or a file name (a non-empty '
        f'str or os.PathLike). Received: filename={value!r}'
    )


def test_file_name_takes_str_and_path_like_as_str():
    import pathlib

    from brainstorm.arguments import FileName

    assert FileName().normalize('a.h5') == 'a.h5'
    assert FileName().normalize(pathlib.Path('d') / 'a.h5') == 'd/a.h5'
