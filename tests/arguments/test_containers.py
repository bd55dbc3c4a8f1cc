"""Each rule of the container checks (brainstorm/arguments/containers.py) at
its edges: one bad item among good ones, lengths exactly n, n-1 and n+1,
empty containers, 1-D arrays where lists go, descriptions of the wrong shape,
and arrays with a single NaN among finite values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from brainstorm.arguments import (
    AnyOf,
    Arg,
    Bool,
    Choice,
    DictOf,
    Instance,
    Int,
    ListOf,
    NumericArray,
    Optional,
    Real,
    Str,
    declare,
)
from brainstorm.describable import Describable, get_description
from brainstorm.utils import DescriptionError, ValidationError


def accepts(check, value) -> bool:
    try:
        check.normalize(value)
    except (ValueError, TypeError):
        return False
    return True


def refuses(check, value) -> bool:
    return not accepts(check, value)


class BoxThing(Describable):
    __arguments__ = {'n': Arg(Int(0, 5), default=0)}

    def __init__(self, n=0):
        self.n = n


class CrateThing(Describable):
    __arguments__ = {'m': Arg(Int(), default=0)}

    def __init__(self, m=0):
        self.m = m


# --------------------------------------------------------------- ListOf ---


def test_list_of_accepts_lists_and_tuples_and_returns_a_list():
    check = ListOf(Int(0, 5))
    assert check.normalize([0, 5]) == [0, 5]
    assert check.normalize((0, 5)) == [0, 5]
    assert type(check.normalize((0, 5))) is list
    assert check.normalize([]) == []
    assert ListOf(Int(), as_tuple=True).normalize([1, 2]) == (1, 2)


def test_list_of_normalises_each_item():
    result = ListOf(Int()).normalize([np.int64(1), np.int8(2)])
    assert result == [1, 2]
    assert all(type(v) is int for v in result)


@pytest.mark.parametrize('position', [0, 1, 2, 3])
def test_list_of_refuses_one_bad_item_among_good_ones(position):
    items = [1, 2, 3, 4]
    items[position] = 6
    with pytest.raises(ValueError, match=rf'^\[{position}\] must be an int in'):
        ListOf(Int(0, 5)).normalize(items)


@pytest.mark.parametrize(
    'value', ['ab', {'a': 1}, {1, 2}, 5, None, iter([1]), b'ab', np.int64(3)]
)
def test_list_of_refuses_what_is_not_a_list_even_if_iterable(value):
    assert refuses(ListOf(Str()), value)
    assert refuses(ListOf(Int()), value)


def test_list_of_takes_one_dimensional_arrays_only():
    result = ListOf(Int()).normalize(np.array([1, 2], dtype=np.int64))
    assert result == [1, 2] and all(type(v) is int for v in result)
    assert ListOf(Real()).normalize(np.array([0.5])) == [0.5]
    assert refuses(ListOf(Int()), np.array([[1, 2]]))
    assert refuses(ListOf(ListOf(Int())), np.array([[1, 2]]))
    assert refuses(ListOf(Int()), np.array(1))


@pytest.mark.parametrize('n', [1, 2, 3])
def test_list_of_a_fixed_length_takes_exactly_that_length(n):
    check = ListOf(Int(), length=n)
    assert check.normalize([0] * n) == [0] * n
    assert refuses(check, [0] * (n - 1))
    assert refuses(check, [0] * (n + 1))
    assert refuses(check, [])


def test_list_of_nonempty_refuses_only_the_empty_list():
    check = ListOf(Int(), nonempty=True)
    assert refuses(check, [])
    assert refuses(check, ())
    assert check.normalize([0]) == [0]


def test_list_of_defaults_allow_empty_lists_and_return_lists():
    check = ListOf(Int())
    assert check.nonempty is False and check.as_tuple is False
    assert check.length is None
    assert check.normalize([]) == []


def test_list_of_nested_bad_item_names_its_path():
    with pytest.raises(ValueError, match=r'^\[1\]\[0\] must be an int'):
        ListOf(ListOf(Int())).normalize([[1], ['x']])


def test_list_of_says_what_it_expects():
    assert ListOf(Int()).expected == 'a list of (an int)'
    assert ListOf(Int(), nonempty=True).expected == 'a non-empty list of (an int)'
    assert ListOf(Int(), length=2).expected == 'a list of 2 (an int)'


def test_list_of_example_has_the_declared_length():
    assert ListOf(Int(1), length=3).example == [1, 1, 1]
    assert ListOf(Int(1)).example == [1]
    assert ListOf(Int(1), nonempty=True).example == [1]


@pytest.mark.parametrize('n', [1, 2, 3])
def test_list_of_invalid_examples_hold_both_wrong_lengths(n):
    check = ListOf(Int(0, 5), length=n)
    lengths = {len(v) for v in check.invalid_examples if isinstance(v, list)}
    assert {n - 1, n + 1} <= lengths


def test_list_of_invalid_examples_hold_a_bad_item_among_good_ones():
    for check in (ListOf(Int(0, 5)), ListOf(Int(0, 5), length=3)):
        lists = [v for v in check.invalid_examples if isinstance(v, list)]
        mixed = [
            v
            for v in lists
            if len(v) == (check.length or len(v))
            and len(v) > 1
            and sum(accepts(check.check, x) for x in v) == len(v) - 1
        ]
        assert mixed, lists


@pytest.mark.parametrize(
    'check',
    [
        ListOf(Int(0, 5)),
        ListOf(Int(0, 5), nonempty=True),
        ListOf(Int(1), length=1),
        ListOf(Int(1), length=2, as_tuple=True),
        ListOf(Real(0, 1), length=3),
        ListOf(ListOf(Str(), nonempty=True)),
    ],
)
def test_list_of_examples(check):
    assert accepts(check, check.example)
    assert check.invalid_examples
    for bad in check.invalid_examples:
        assert refuses(check, bad), bad


def test_dict_of_with_a_key_check_without_hashable_invalid_examples():
    keys = Choice('no such choice', 3, None)  # its one invalid example is a list
    check = DictOf(Int(), keys=keys)
    assert check.normalize({3: 1}) == {3: 1}
    for bad in check.invalid_examples:
        assert refuses(check, bad), bad


def test_list_of_invalid_examples_hold_the_empty_list_when_nonempty():
    assert [] in ListOf(Int(), nonempty=True).invalid_examples


def test_list_of_restores_lists_only():
    check = ListOf(Instance(BoxThing))
    restored = check.restore(
        [get_description(BoxThing(1)), get_description(BoxThing(2))]
    )
    assert [t.n for t in restored] == [1, 2]
    assert ListOf(Int()).restore([1, 2]) == [1, 2]
    for value in ('ab', 5, {'a': 1}, None):
        with pytest.raises(DescriptionError, match='expected a list'):
            ListOf(Str()).restore(value)


# --------------------------------------------------------------- DictOf ---


def test_dict_of_accepts_dicts_and_normalises_each_value():
    check = DictOf(Int(0, 5))
    assert check.normalize({}) == {}
    result = check.normalize({'a': np.int64(0), 'b': 5})
    assert result == {'a': 0, 'b': 5} and type(result['a']) is int


@pytest.mark.parametrize('key', ['a', 'b', 'c'])
def test_dict_of_refuses_one_bad_value_among_good_ones(key):
    value = {'a': 1, 'b': 2, 'c': 3}
    value[key] = 6
    with pytest.raises(ValueError, match=rf"^\['{key}'\] must be an int in"):
        DictOf(Int(0, 5)).normalize(value)


def test_dict_of_refuses_a_key_its_key_check_refuses():
    with pytest.raises(ValueError, match=r'^ key 3 must be a str'):
        DictOf(Int()).normalize({'a': 1, 3: 1})
    keyed = DictOf(Int(), keys=Choice('a', 'b'))
    assert keyed.normalize({'a': 1, 'b': 2}) == {'a': 1, 'b': 2}
    assert refuses(keyed, {'a': 1, 'c': 2})
    assert keyed.expected == "a dict of one of 'a', 'b' to (an int)"


@pytest.mark.parametrize('value', [5, 'x', [('a', 1)], None, [1]])
def test_dict_of_refuses_non_dicts(value):
    assert refuses(DictOf(Int()), value)


def test_dict_of_nonempty_refuses_only_the_empty_dict():
    check = DictOf(Int(), nonempty=True)
    assert refuses(check, {})
    assert check.normalize({'a': 1}) == {'a': 1}
    assert DictOf(Int()).nonempty is False
    assert {} in check.invalid_examples
    assert {} not in DictOf(Int()).invalid_examples


def test_dict_of_says_what_it_expects():
    assert DictOf(Int()).expected == 'a dict of a str to (an int)'
    assert DictOf(Int(), nonempty=True).expected == (
        'a non-empty dict of a str to (an int)'
    )


@pytest.mark.parametrize(
    'check',
    [DictOf(Int()), DictOf(Int(), keys=Int(0)), DictOf(Real(0, 1), keys=Choice('a'))],
)
def test_dict_of_examples(check):
    assert accepts(check, check.example)
    for bad in check.invalid_examples:
        assert refuses(check, bad), bad
    assert any(
        isinstance(v, dict) and len(v) == 1 and refuses(check.keys, next(iter(v)))
        for v in check.invalid_examples
    )


def test_dict_of_restores_plain_dicts_only():
    check = DictOf(Instance(BoxThing))
    restored = check.restore({'x': get_description(BoxThing(3))})
    assert restored['x'].n == 3
    for value in (5, 'x', [1], None, {'@type': 'BoxThing', 'n': 1}):
        with pytest.raises(DescriptionError, match='expected a dict'):
            check.restore(value)


def test_dict_of_restores_keys_through_its_key_check():
    check = DictOf(Int(), keys=Str(identifier=True))
    assert check.restore({'a': 1}) == {'a': 1}
    with pytest.raises(ValueError):
        check.restore({'a b': 1})


# ---------------------------------------------------------------- AnyOf ---


def test_any_of_returns_the_first_accepting_checks_result():
    check = AnyOf(Choice('auto'), Int(1))
    assert check.normalize('auto') == 'auto'
    assert check.normalize(np.int64(3)) == 3
    assert type(check.normalize(np.int64(3))) is int
    for value in ('x', 0, None, True):
        assert refuses(check, value), value
    assert check.expected == "one of 'auto' or a positive int"


def test_any_of_example_is_the_first_checks_example():
    assert AnyOf(Int(0, 5), Str()).example == 0
    assert AnyOf(Str()).example == 'a'
    assert accepts(AnyOf(Int(3, 5)), AnyOf(Int(3, 5)).example)


def test_any_of_invalid_examples_are_those_no_check_accepts_each_once():
    first, second = Int(0, 5), Bool()
    check = AnyOf(first, second)
    invalid = check.invalid_examples
    for bad in invalid:
        assert refuses(check, bad), bad
    wanted = [
        v
        for c in (first, second)
        for v in c.invalid_examples
        if refuses(first, v) and refuses(second, v)
    ]
    assert len(invalid) == len({id(v) for v in invalid})  # no duplicates
    assert {id(v) for v in invalid} == {id(v) for v in wanted}
    assert invalid  # e.g. None, 'x', 6


def test_any_of_kind():
    assert AnyOf(Int(), Str()).kind is None
    assert AnyOf(Int(), Instance(BoxThing)).kind is BoxThing
    assert AnyOf(Instance(BoxThing), Instance(CrateThing)).kind == (
        BoxThing,
        CrateThing,
    )


def test_any_of_restores_a_description_with_the_check_for_its_kind():
    check = AnyOf(Int(), Instance(BoxThing))
    restored = check.restore({'@type': 'BoxThing', 'n': 2})
    assert isinstance(restored, BoxThing) and restored.n == 2
    assert check.restore(3) == 3


def test_any_of_restores_plain_values_with_the_first_check_that_takes_them():
    check = AnyOf(Instance(BoxThing), ListOf(Int()), Int())
    assert check.restore(3) == 3
    assert check.restore([1, 2]) == [1, 2]


def test_any_of_restore_reports_the_first_checks_error_when_none_takes_it():
    check = AnyOf(Instance(BoxThing), ListOf(Int()))
    with pytest.raises(DescriptionError, match='a description of a BoxThing'):
        check.restore(5)


# --------------------------------------------------------- NumericArray ---


def test_numeric_array_accepts_numbers_of_any_real_dtype_and_shape():
    check = NumericArray()
    for value in (
        3.0,
        3,
        np.float32(1),
        [1, 2],
        [[1.0, 2.0]],
        np.zeros((2, 3, 4)),
        np.arange(3, dtype=np.uint8),
        np.array([True, False]),
        np.zeros(0),
    ):
        assert accepts(check, value), value


def test_numeric_array_returns_arrays_unchanged_and_converts_lists():
    data = np.ones(3)
    assert NumericArray().normalize(data) is data
    result = NumericArray().normalize([1.0, 2.0])
    assert isinstance(result, np.ndarray) and result.tolist() == [1.0, 2.0]


@pytest.mark.parametrize('bad', [math.nan, math.inf, -math.inf])
@pytest.mark.parametrize('position', [0, 3])
def test_numeric_array_refuses_one_non_finite_value_among_finite_ones(bad, position):
    data = np.ones(4)
    data[position] = bad
    with pytest.raises(ValueError, match='NaN or Inf'):
        NumericArray().normalize(data)
    assert NumericArray(finite=False).normalize(data) is data
    as_float32 = data.astype(np.float32)
    assert refuses(NumericArray(), as_float32)


def test_numeric_array_refuses_masked_arrays_even_with_nothing_masked():
    for mask in (True, False, [True, False]):
        data = np.ma.masked_array([1.0, 2.0], mask=mask)
        with pytest.raises(ValueError, match='masked arrays are not supported'):
            NumericArray().normalize(data)


@pytest.mark.parametrize(
    'value',
    [
        np.array(['a', 'b']),
        np.array([b'a']),
        np.zeros(2, dtype=object),
        np.array([1 + 2j]),
        np.array([1 + 0j]),
        'x',
        None,
        np.array(['2020-01-01'], dtype='datetime64[D]'),
    ],
)
def test_numeric_array_refuses_non_numeric_and_complex_dtypes(value):
    assert refuses(NumericArray(), value)
    assert refuses(NumericArray(finite=False), value)


def test_numeric_array_refuses_ragged_lists_with_a_value_error():
    with pytest.raises(ValueError, match='ragged'):
        NumericArray().normalize([[1.0], [1.0, 2.0]])


def test_numeric_array_bools_only_when_allowed():
    assert accepts(NumericArray(), np.array([True]))
    assert refuses(NumericArray(allow_bool=False), np.array([True]))
    assert refuses(NumericArray(allow_bool=False), [True, False])
    assert accepts(NumericArray(allow_bool=False), np.array([1]))


@pytest.mark.parametrize('min_ndim', [1, 2, 3])
def test_numeric_array_min_ndim_is_included(min_ndim):
    check = NumericArray(min_ndim=min_ndim)
    assert accepts(check, np.zeros((1,) * min_ndim))
    assert accepts(check, np.zeros((1,) * (min_ndim + 1)))
    with pytest.raises(ValueError, match='it has shape'):
        check.normalize(np.zeros((1,) * (min_ndim - 1)))


def test_numeric_array_defaults_accept_scalars_bools_and_refuse_nan():
    check = NumericArray()
    assert check.min_ndim == 0 and check.allow_bool is True and check.finite is True
    assert accepts(check, 1.0)
    assert accepts(check, np.array(True))
    assert refuses(check, [1.0, math.nan])


def test_numeric_array_says_what_it_expects():
    assert NumericArray().expected == 'a numeric array of finite values'
    assert NumericArray(finite=False).expected == 'a numeric array'
    assert NumericArray(min_ndim=2).expected == (
        'a numeric array of finite values with at least 2 dimensions'
    )


@pytest.mark.parametrize('min_ndim', [0, 1, 2])
@pytest.mark.parametrize('finite', [True, False])
def test_numeric_array_examples(min_ndim, finite):
    check = NumericArray(min_ndim=min_ndim, finite=finite)
    assert accepts(check, check.example)
    for bad in check.invalid_examples:
        assert refuses(check, bad), bad
    arrays = [v for v in check.invalid_examples if isinstance(v, np.ndarray)]
    if finite:
        # a single NaN among finite values, not only all-NaN arrays
        assert any(
            v.dtype.kind == 'f' and np.isnan(v).sum() == 1 and v.size > 1
            for v in arrays
        )
    if min_ndim:
        assert any(v.ndim == min_ndim - 1 for v in arrays)


# ------------------------------------------------------ through messages ---


@declare(
    sizes=Arg(ListOf(Int(1), length=2)),
    scales=Arg(Optional(DictOf(Real(0, 1))), default=None),
    data=Arg(Optional(NumericArray()), default=None),
)
def _shape(sizes, scales=None, data=None):
    return sizes, scales, data


def test_container_errors_name_the_argument_the_item_and_the_value():
    with pytest.raises(ValidationError) as info:
        _shape([1, 0])
    assert str(info.value) == (
        '_shape: sizes[1] must be a positive int. Received: sizes=[1, 0]'
    )
    with pytest.raises(ValidationError) as info:
        _shape([1])
    assert str(info.value) == (
        '_shape: sizes must be a list of 2 (a positive int). Received: sizes=[1]'
    )
    with pytest.raises(ValidationError) as info:
        _shape([1, 1], {'a': 0.5, 'b': 2.0})
    assert str(info.value) == (
        "_shape: scales['b'] must be a finite number in [0, 1]. "
        "Received: scales={'a': 0.5, 'b': 2.0}"
    )
    with pytest.raises(ValidationError) as info:
        _shape([1, 1], data=np.array([1.0, math.nan, 2.0]))
    assert str(info.value) == (
        '_shape: data must be None or a numeric array of finite values '
        '(it holds NaN or Inf). Received: data=array of shape (3,) and dtype float64'
    )
    assert _shape((1, 2)) == ([1, 2], None, None)
