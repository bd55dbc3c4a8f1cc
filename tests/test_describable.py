"""Tests for brainstorm.describable."""

import json

import numpy as np
import pytest

from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.randomness import RandomState, Seedable


class DescPlain(Describable):
    def __init__(self, a, b=2):
        self.a = a
        self.b = b


class DescWithUndescribed(Describable):
    __undescribed__ = {'cache'}

    def __init__(self):
        self.value = 3
        self.cache = {'big': 'thing'}


class DescWithUndescribedDefaults(Describable):
    __undescribed__ = {'counter': 0, 'items': []}

    def __init__(self):
        self.x = 1
        self.counter = 17
        self.items = [1, 2]


class DescWithDefaults(Describable):
    __default_values__ = {'scale': 1.0, 'mode': 'fast'}

    def __init__(self, scale=1.0, mode='fast'):
        self.scale = scale
        self.mode = mode


class DescChild(DescWithDefaults, DescWithUndescribed):
    __default_values__ = {'extra': None}

    def __init__(self):
        DescWithDefaults.__init__(self)
        DescWithUndescribed.__init__(self)
        self.extra = None


class DescHooked(Describable):
    def __init__(self, n):
        self.n = n
        self.squares = [i * i for i in range(n)]

    def __describe__(self):
        return {'@type': 'DescHooked', 'n': self.n}

    def __init_from_description__(self, description):
        self.squares = [i * i for i in range(self.n)]


class DescSeeded(Seedable):
    def __init__(self, seed=None):
        super().__init__(seed)
        self.p = 0.5


def round_trip(obj):
    return create_from_description(json.loads(json.dumps(get_description(obj))))


# -------------------------------------------------------- get_description ---


@pytest.mark.parametrize('value', [None, True, False, 0, -3, 1.5, 'text', ''])
def test_scalars_describe_themselves(value):
    assert get_description(value) == value
    assert type(get_description(value)) is type(value)


def test_numpy_scalars_become_python_scalars():
    assert type(get_description(np.int64(3))) is int
    assert type(get_description(np.float32(0.5))) is float
    assert get_description(np.float32(0.5)) == 0.5


def test_numpy_bools_become_python_bools():
    # np.bool_ (e.g. from a comparison) is not an int; it used to be refused
    assert get_description(np.bool_(True)) is True
    assert get_description(np.array([1, 2]) > 1) == [False, True]


def test_containers():
    assert get_description((1, 2)) == [1, 2]
    assert get_description([1, (2, 3)]) == [1, [2, 3]]
    assert get_description({'a': (1,), 'b': {'c': None}}) == {
        'a': [1],
        'b': {'c': None},
    }
    assert get_description(np.arange(6).reshape(2, 3)) == [[0, 1, 2], [3, 4, 5]]


def test_describable_object():
    d = get_description(DescPlain(1, b=[3, 4]))
    assert d == {'@type': 'DescPlain', 'a': 1, 'b': [3, 4]}
    json.dumps(d)


def test_nested_describables():
    d = get_description(DescPlain(DescPlain('x'), {'k': DescPlain(2.5)}))
    assert d == {
        '@type': 'DescPlain',
        'a': {'@type': 'DescPlain', 'a': 'x', 'b': 2},
        'b': {'k': {'@type': 'DescPlain', 'a': 2.5, 'b': 2}},
    }


@pytest.mark.parametrize('value', [object(), {1, 2}, b'bytes', 1j, lambda x: x])
def test_undescribable_values_raise_type_error(value):
    with pytest.raises(TypeError, match=type(value).__name__):
        get_description(value)


def test_type_error_names_the_attribute_path():
    with pytest.raises(TypeError) as info:
        get_description(DescPlain(1, b={'inner': object()}))
    assert 'DescPlain.b' in str(info.value)
    assert "'inner'" in str(info.value)


def test_undescribed_members_are_left_out():
    d = get_description(DescWithUndescribed())
    assert d == {'@type': 'DescWithUndescribed', 'value': 3}


def test_default_values_are_left_out_when_equal():
    assert get_description(DescWithDefaults()) == {'@type': 'DescWithDefaults'}
    assert get_description(DescWithDefaults(scale=2.0)) == {
        '@type': 'DescWithDefaults',
        'scale': 2.0,
    }


def test_class_attributes_merge_along_the_mro():
    child = DescChild()
    assert get_description(child) == {'@type': 'DescChild', 'value': 3}
    child.mode = 'slow'
    assert get_description(child) == {'@type': 'DescChild', 'value': 3, 'mode': 'slow'}


# ------------------------------------------------ create_from_description ---


def test_round_trip_plain():
    obj = round_trip(DescPlain(1, b=[3, 4]))
    assert type(obj) is DescPlain
    assert obj.a == 1 and obj.b == [3, 4]


def test_recreation_does_not_call_init():
    calls = []

    class DescCounting(Describable):
        def __init__(self):
            calls.append(1)
            self.v = 1

    obj = DescCounting()
    recreated = create_from_description(get_description(obj))
    assert len(calls) == 1
    assert recreated.v == 1


def test_undescribed_set_members_become_none():
    obj = round_trip(DescWithUndescribed())
    assert obj.value == 3
    assert obj.cache is None


def test_undescribed_dict_members_get_fresh_copies_of_their_values():
    a = round_trip(DescWithUndescribedDefaults())
    b = round_trip(DescWithUndescribedDefaults())
    assert a.counter == 0 and a.items == []
    a.items.append(5)
    assert b.items == []
    assert DescWithUndescribedDefaults.__undescribed__['items'] == []


def test_defaults_are_restored():
    obj = round_trip(DescWithDefaults(mode='slow'))
    assert obj.scale == 1.0 and obj.mode == 'slow'
    child = round_trip(DescChild())
    assert child.scale == 1.0 and child.mode == 'fast'
    assert child.extra is None and child.cache is None and child.value == 3


def test_init_from_description_hook():
    obj = round_trip(DescHooked(4))
    assert obj.n == 4
    assert obj.squares == [0, 1, 4, 9]


def test_seedable_gets_a_fresh_random_state():
    obj = DescSeeded(seed=12)
    d = get_description(obj)
    assert d == {'@type': 'DescSeeded', 'p': 0.5}
    recreated = create_from_description(d)
    assert isinstance(recreated.rnd, RandomState)
    assert recreated.rnd is not obj.rnd


def test_nested_round_trip():
    obj = round_trip(DescPlain([DescPlain(1)], {'k': DescWithDefaults(scale=3.0)}))
    assert type(obj.a[0]) is DescPlain and obj.a[0].a == 1
    assert type(obj.b['k']) is DescWithDefaults and obj.b['k'].scale == 3.0


def test_plain_containers_and_scalars():
    assert create_from_description({'a': [1, {'b': None}]}) == {'a': [1, {'b': None}]}
    assert create_from_description(5) == 5
    assert create_from_description('s') == 's'
    assert create_from_description(None) is None


def test_unknown_type_raises_type_error_naming_it():
    with pytest.raises(TypeError, match='NoSuchClass'):
        create_from_description({'@type': 'NoSuchClass'})


def test_builtin_describables_are_found_at_any_depth():
    from brainstorm.initializers import Gaussian

    obj = create_from_description({'x': [get_description(Gaussian(0.3))]})
    assert type(obj['x'][0]) is Gaussian
