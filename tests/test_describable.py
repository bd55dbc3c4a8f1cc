"""Tests for brainstorm.describable."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.arguments import Arg, Bool, Int, ListOf, Optional, Str
from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.randomness import RandomState, Seedable
from brainstorm.utils import (
    DescriptionError,
    TrainingValidationError,
    ValidationError,
)


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


# ----------------------------------------- the rules of restoring, at edges ---
# Each test states one rule of Describable.__new_from_description__ and its
# helpers (issue 27: found by mutating brainstorm/describable.py).


class DescDeclared(Describable):
    """A user's class with its own declarations (restored strictly)."""

    __arguments__ = {
        'size': Arg(Int(1)),
        'label': Arg(Optional(Str()), default=None, attr='tag'),
        'items': Arg(Optional(ListOf(Int(0))), default=[]),
        'verbose': Arg(Bool(), default=True, init_only=True),
        'counter': Arg(Int(0), state=True),
        'offset': Arg(Int(0), default=3, state=True),
    }

    def __init__(self, size, label=None, items=(), verbose=True):
        self.size = size
        self.tag = label
        self.items = list(items)
        self.counter = 0
        self.offset = 3


def declared(**changes):
    description = {
        '@type': 'DescDeclared',
        'size': 2,
        'tag': 'x',
        'items': [1],
        'counter': 5,
        'offset': 4,
    }
    description.update(changes)
    return {k: v for k, v in description.items() if v is not _ABSENT}


_ABSENT = object()


def test_every_described_attribute_is_restored_through_its_declaration():
    obj = create_from_description(declared())
    assert type(obj) is DescDeclared
    assert vars(obj) == {
        'size': 2,
        'tag': 'x',
        'items': [1],
        'counter': 5,
        'offset': 4,
    }


@pytest.mark.parametrize(
    'key, value', [('size', 0), ('tag', 3), ('items', [1, -1]), ('counter', -1)]
)
def test_each_restored_attribute_is_checked(key, value):
    with pytest.raises(TrainingValidationError) as info:
        create_from_description(declared(**{key: value}))
    assert f'DescDeclared (from a description): {key}' in str(info.value)


def test_an_attribute_stored_under_another_name_is_named_by_its_key():
    """The error names the key of the description ('tag'), not the
    constructor argument ('label'), and a key equal to its argument's name
    is shown as name=value."""
    with pytest.raises(TrainingValidationError) as info:
        create_from_description(declared(tag=3))
    message = str(info.value)
    assert 'tag must be' in message and 'Received: 3' in message
    assert 'label' not in message
    with pytest.raises(TrainingValidationError) as info:
        create_from_description(declared(size=0))
    assert 'Received: size=0' in str(info.value)


def test_a_missing_attribute_gets_its_declared_default():
    obj = create_from_description(declared(tag=_ABSENT, items=_ABSENT, offset=_ABSENT))
    assert obj.tag is None
    assert obj.items == [] and obj.offset == 3
    other = create_from_description(declared(items=_ABSENT))
    other.items.append(1)
    assert create_from_description(declared(items=_ABSENT)).items == []
    assert DescDeclared.__arguments__['items'].default == []


@pytest.mark.parametrize('key', ['size', 'counter'])
def test_a_missing_required_attribute_is_refused_naming_it(key):
    """Also a required attribute that is state, not a constructor argument
    (it used to be skipped, leaving the object without it)."""
    with pytest.raises(DescriptionError) as info:
        create_from_description(declared(**{key: _ABSENT}))
    message = str(info.value)
    assert 'DescDeclared (from a description)' in message
    assert f"the key '{key}' is missing" in message


@pytest.mark.parametrize(
    'make, key',
    [
        (lambda: bs.data_iterators.Undivided(a=np.zeros((1, 2, 1))), 'data'),
        (lambda: bs.data_iterators.Undivided(a=np.zeros((1, 2, 1))), 'total_size'),
        (lambda: bs.Trainer(bs.training.SgdStepper()), 'hooks'),
        (lambda: bs.Trainer(bs.training.SgdStepper()), 'train_scorers'),
    ],
)
def test_library_objects_missing_a_state_attribute_are_refused(make, key):
    description = get_description(make())
    assert key in description
    del description[key]
    with pytest.raises(DescriptionError, match=f"the key '{key}' is missing"):
        create_from_description(description)


def test_a_hook_without_priority_gets_the_constructors_priority():
    """A hand-written hook description may leave out the priority (which
    Trainer.add_hook sets): the hook comes back as constructed, priority 0."""
    description = get_description(bs.hooks.StopAfterEpoch(1))
    del description['priority']
    assert create_from_description(description).priority == 0
    assert bs.hooks.StopAfterEpoch(1).priority == 0


class DescRequiredInDefaults(Describable):
    __arguments__ = {'n': Arg(Int(0)), 'm': Arg(Int(0), default=1)}
    __default_values__ = {'n': 7}
    __undescribed__ = {'m': 9}

    def __init__(self, n=7, m=1):
        self.n = n
        self.m = m


def test_class_level_defaults_fill_a_missing_attribute_before_the_declaration():
    """An attribute left out because it equals ``__default_values__`` (or
    is undescribed) comes back with that value; it is not 'missing'."""
    obj = create_from_description({'@type': 'DescRequiredInDefaults'})
    assert obj.n == 7 and obj.m == 9
    assert get_description(DescRequiredInDefaults(n=7)) == {
        '@type': 'DescRequiredInDefaults'
    }


class DescHookedDefaults(Describable):
    __arguments__ = {'n': Arg(Int(0), default=3)}

    def __init__(self, n=3):
        self.n = n
        self.squares = [i * i for i in range(n)]

    def __init_from_description__(self, description):
        self.squares = [i * i for i in range(self.n)]


def test_init_from_description_sees_the_defaults_of_missing_attributes():
    obj = create_from_description({'@type': 'DescHookedDefaults'})
    assert obj.n == 3 and obj.squares == [0, 1, 4]


def test_init_only_arguments_are_not_restored():
    """'verbose' is checked at construction only: no attribute holds it, so
    a description may not hold it, and it is not missing either."""
    obj = create_from_description(declared())
    assert not hasattr(obj, 'verbose')
    with pytest.raises(DescriptionError, match="unknown key 'verbose'"):
        create_from_description(declared(verbose=True))


def test_keyword_declarations_are_not_attributes():
    """A '**name' declaration checks each keyword value; it is neither a
    key nor an attribute of the restored object."""
    it = bs.data_iterators.Undivided(a=np.zeros((1, 2, 1)))
    restored = create_from_description(get_description(it))
    assert not any(k.startswith('**') for k in vars(restored))
    with pytest.raises(DescriptionError):
        create_from_description(dict(get_description(it), **{'**named_data': {}}))


def test_the_type_key_is_no_attribute():
    obj = create_from_description(declared())
    assert '@type' not in vars(obj)


# keys that are never restored, for every class
DUNDER_KEYS = ['__class__', '__dict__', '__init__', '__x__', '__']


@pytest.mark.parametrize('key', ['no_such_key', '_private', *DUNDER_KEYS])
def test_a_declaring_class_takes_only_declared_keys(key):
    with pytest.raises(DescriptionError) as info:
        create_from_description(declared(**{key: 1}))
    message = str(info.value)
    assert repr(key) in message and "Allowed keys: ['counter'," in message


def test_a_library_class_without_own_declarations_takes_only_declared_keys():
    """NesterovStepper declares nothing itself; as a class of the library
    it still takes no undeclared key."""
    assert '__arguments__' not in bs.training.NesterovStepper.__dict__
    description = get_description(bs.training.NesterovStepper())
    with pytest.raises(DescriptionError, match="unknown key 'extra'"):
        create_from_description(dict(description, extra=1))
    with pytest.raises(DescriptionError, match="'_extra' is not allowed"):
        create_from_description(dict(description, _extra=1))


class DescUserHook(bs.hooks.Hook):
    """A user's hook: no declarations of its own, extra members."""

    def __init__(self, name=None):
        super().__init__(name=name)
        self.count = 0
        self._seen = [1]
        self.total__ = 2


def test_a_users_subclass_keeps_its_own_members():
    hook = DescUserHook(name='mine')
    hook.count = 4
    restored = round_trip(hook)
    assert type(restored) is DescUserHook
    assert restored.count == 4 and restored._seen == [1] and restored.total__ == 2
    assert restored.__name__ == 'mine' and restored.priority == 0


@pytest.mark.parametrize('key', DUNDER_KEYS)
def test_a_users_subclass_refuses_dunder_keys(key):
    description = get_description(DescUserHook())
    with pytest.raises(DescriptionError) as info:
        create_from_description(dict(description, **{key: 'Trainer'}))
    assert f'{key!r} is not allowed' in str(info.value)


def test_a_users_subclass_refuses_keys_that_are_no_str():
    description = get_description(DescUserHook())
    description[3] = 1
    with pytest.raises(DescriptionError, match='3 is not allowed'):
        create_from_description(description)


def test_a_users_subclass_checks_the_declared_keys_it_inherits():
    description = get_description(DescUserHook())
    with pytest.raises(ValidationError, match='interval'):
        create_from_description(dict(description, interval=0))
    with pytest.raises(ValidationError, match='__name__'):
        create_from_description(dict(description, __name__=''))


class DescPlainUser(Describable):
    def __init__(self):
        self.a = 1


@pytest.mark.parametrize('key', ['_x', '__x', 'x__', '_x_', 'b'])
def test_a_users_plain_class_takes_undeclared_keys(key):
    obj = create_from_description({'@type': 'DescPlainUser', 'a': 2, key: [3]})
    assert obj.a == 2 and getattr(obj, key) == [3]


@pytest.mark.parametrize('key', DUNDER_KEYS)
def test_a_users_plain_class_refuses_dunder_keys(key):
    with pytest.raises(DescriptionError, match='not allowed'):
        create_from_description({'@type': 'DescPlainUser', key: {}})


def test_a_users_module_named_like_brainstorm_is_not_the_library():
    """Only modules of the package 'brainstorm' count as the library."""

    class DescPluginHook(bs.hooks.Hook):
        __module__ = 'brainstorm_plugins.hooks'

        def __init__(self):
            super().__init__()
            self.extra = 1

    restored = create_from_description(get_description(DescPluginHook()))
    assert restored.extra == 1

    class DescInLibrary(bs.hooks.Hook):
        __module__ = 'brainstorm.hooks.more'

        def __init__(self):
            super().__init__()
            self.extra = 1

    with pytest.raises(DescriptionError, match="unknown key 'extra'"):
        create_from_description(get_description(DescInLibrary()))


def test_a_nested_description_of_the_wrong_kind_names_owner_and_key():
    description = get_description(bs.Trainer(bs.training.SgdStepper()))
    description['stepper'] = get_description(bs.initializers.Gaussian())
    with pytest.raises(DescriptionError) as info:
        create_from_description(description)
    assert 'Trainer (from a description): stepper:' in str(info.value)


def test_nested_descriptions_are_restored_at_every_depth():
    description = {
        '@type': 'DescPlainUser',
        'a': {'k': [get_description(DescDeclared(2, 'y', [3]))]},
    }
    obj = create_from_description(json.loads(json.dumps(description)))
    inner = obj.a['k'][0]
    assert type(inner) is DescDeclared and inner.tag == 'y' and inner.items == [3]
    description['a']['k'][0]['size'] = 0
    with pytest.raises(ValidationError, match='size'):
        create_from_description(description)


# ---------------------------------------------------------- the type key ---


@pytest.mark.parametrize('bad', [3, None, ['DescPlain']])
def test_a_type_that_is_no_str_is_refused_saying_so(bad):
    with pytest.raises(DescriptionError, match="'@type' must be a str"):
        create_from_description({'@type': bad})


def test_expected_kinds():
    gaussian = get_description(bs.initializers.Gaussian())
    stepper = get_description(bs.training.SgdStepper())
    init = bs.initializers.Initializer
    assert type(create_from_description(gaussian, expected=init)).__name__ == (
        'Gaussian'
    )
    kinds = (bs.training.SgdStepper, init)
    assert len(create_from_description([gaussian, stepper], expected=kinds)) == 2
    with pytest.raises(DescriptionError, match='expected Initializer'):
        create_from_description({'k': [stepper]}, expected=init)
    with pytest.raises(DescriptionError, match='a plain value'):
        create_from_description([1, gaussian], expected=())
    assert create_from_description({'k': [1, 'a']}, expected=()) == {'k': [1, 'a']}


# ------------------------------------------------- subclasses and arrays ---


def test_init_subclass_cooperates_with_other_bases():
    """Describable passes __init_subclass__ on along the MRO."""

    class Registering:
        seen: list = []

        def __init_subclass__(cls, **kwargs):
            super().__init_subclass__(**kwargs)
            Registering.seen.append(cls.__name__)

    class DescMixed(Describable, Registering):
        pass

    assert Registering.seen == ['DescMixed']


def test_a_subclass_without_its_own_init_keeps_the_checked_one():
    class DescSubDeclared(DescDeclared):
        pass

    assert DescSubDeclared(2).size == 2
    with pytest.raises(TrainingValidationError, match='size'):
        DescSubDeclared(0)


class DescArrayDefault(Describable):
    __default_values__ = {'w': np.zeros(3)}

    def __init__(self, w):
        self.w = w


@pytest.mark.parametrize(
    'value, left_out',
    [
        (np.zeros(3), True),
        (np.array([0.0, 1.0, 0.0]), False),
        (np.zeros((2, 3)), False),  # equal where broadcast, another shape
        (np.zeros(2), False),  # not comparable with the default
        (np.zeros(1), False),
    ],
)
def test_an_array_is_left_out_only_if_it_equals_its_default(value, left_out):
    description = get_description(DescArrayDefault(value))
    assert ('w' not in description) == left_out
    restored = create_from_description(description)
    np.testing.assert_array_equal(restored.w, value)
    assert np.shape(restored.w) == value.shape


def test_a_value_that_does_not_compare_is_described():
    class Uncomparable:
        def __eq__(self, other):
            raise TypeError('no')

    class DescOddDefault(Describable):
        __default_values__ = {'v': Uncomparable()}

        def __init__(self):
            self.v = 1

    assert get_description(DescOddDefault()) == {'@type': 'DescOddDefault', 'v': 1}


@pytest.mark.parametrize(
    'description, expected',
    [
        ({'@type': 'StopAfterEpoch', 'max_epochs': 1, '__name__': None},
         'StopAfterEpoch'),
        ({'@type': 'Accuracy', '__name__': None}, 'Accuracy'),
    ],
)  # fmt: skip
def test_a_described_name_of_none_is_the_class_name_as_in_the_constructor(
    description, expected
):
    """``'__name__': None`` gave a hook that add_hook refused and a scorer
    logged under the key None; the constructor makes None the class name."""
    made = bs.create_from_description(description)
    assert made.__name__ == expected
    if expected == 'StopAfterEpoch':
        bs.Trainer(bs.training.SgdStepper(0.1)).add_hook(made)
