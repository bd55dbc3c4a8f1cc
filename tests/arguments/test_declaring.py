"""Each rule of declaring and checking arguments
(brainstorm/arguments/declaring.py): every declared argument is checked
where it is given (constructor, ``**kwargs``, ``*args``, declared
functions), ``None`` passes only where the default is None, each error
names the owner, the argument, what was expected and what was received,
and ``__validate__`` runs once, after the outermost constructor.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from brainstorm.arguments import (
    REQUIRED,
    Arg,
    Check,
    Int,
    ListOf,
    Optional,
    Str,
    check_arguments,
    declare,
    declared_arguments,
)
from brainstorm.arguments.declaring import check_value
from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.utils import (
    DescriptionError,
    NetworkValidationError,
    TrainingValidationError,
    ValidationError,
)


class Counting(Check):
    """Accepts anything and counts how often it was asked."""

    expected = 'anything'

    def __init__(self):
        self.calls = 0

    def normalize(self, value):
        self.calls += 1
        return value


class Span(Describable):
    __arguments__ = {
        'low': Arg(Int(0, 5), default=0),
        'high': Arg(Int(0, 5), default=5),
    }
    validations = 0

    def __init__(self, low=0, high=5):
        self.low, self.high = low, high

    def __validate__(self):
        type(self).validations += 1
        if self.low > self.high:
            raise TrainingValidationError(
                f'{type(self).__name__}: low must be <= high. '
                f'Received: low={self.low}, high={self.high}'
            )


class SteppedSpan(Span):
    __arguments__ = {'step': Arg(Int(1), default=1)}
    validations = 0

    def __init__(self, low=0, high=5, step=1):
        super().__init__(low, high)
        self.step = step

    def __validate__(self):
        assert self.step >= 1  # set by this __init__, after Span's
        super().__validate__()


class PlainSpan(Span):
    """Inherits Span's checked constructor."""

    validations = 0


class Labelled(Describable):
    __arguments__ = {'**named': Arg(Int(0, 5), label="value '{}'")}

    def __init__(self, **named):
        self.named = named


class WithState(Describable):
    __arguments__ = {
        'size': Arg(Int(1)),
        'cache': Arg(Int(0), default=0, state=True),
    }

    def __init__(self, size, cache='anything', extra=None):
        self.size = size
        self.cache_given = cache
        self.cache = 0
        self.extra = extra


class NetError(Describable):
    __arguments__ = {'size': Arg(Int(1))}
    __argument_error__ = NetworkValidationError

    def __init__(self, size):
        self.size = size


# ------------------------------------------------------------------ Arg ---


def test_arg_defaults():
    arg = Arg(Int())
    assert arg.default is REQUIRED
    assert arg.attr is None
    assert arg.init_only is False
    assert arg.state is False
    assert arg.doc == ''
    assert arg.label == "'{}'"
    assert repr(REQUIRED) == 'REQUIRED'


def test_a_plain_declared_argument_is_checked_stored_and_restored():
    span = Span(1, np.int64(4))
    assert type(span.high) is int
    restored = create_from_description(get_description(span))
    assert (restored.low, restored.high) == (1, 4)


def test_declared_arguments_merge_along_the_mro():
    merged = declared_arguments(SteppedSpan)
    assert set(merged) == {'low', 'high', 'step'}
    assert merged['low'] is Span.__arguments__['low']
    assert declared_arguments(object) == {}


# ------------------------------------------------------ the constructor ---


@pytest.mark.parametrize('cls', [Span, SteppedSpan, PlainSpan])
@pytest.mark.parametrize(
    'kwargs, name',
    [({'low': -1}, 'low'), ({'high': 6}, 'high'), ({'low': True}, 'low')],
)
def test_each_declared_constructor_argument_is_checked(cls, kwargs, name):
    with pytest.raises(TrainingValidationError) as info:
        cls(**kwargs)
    assert str(info.value).startswith(
        f'{cls.__name__}: {name} must be an int in [0, 5].'
    )


def test_the_bounds_of_a_declared_argument_are_included():
    assert (Span(0, 0).low, Span(5, 5).high) == (0, 5)
    assert Span(low=5, high=5).low == 5


@pytest.mark.parametrize('cls', [Span, SteppedSpan, PlainSpan])
def test_validate_runs_at_construction(cls):
    with pytest.raises(TrainingValidationError, match=r'low must be <= high'):
        cls(4, 2)
    assert cls(2, 2).low == 2  # equal is fine


@pytest.mark.parametrize('cls', [Span, SteppedSpan, PlainSpan])
def test_validate_runs_once_after_the_outermost_constructor(cls):
    cls.validations = 0
    cls(1, 2)
    assert cls.validations == 1


def test_validate_also_runs_when_restoring():
    description = {'@type': 'Span', 'low': 4, 'high': 2}
    with pytest.raises(TrainingValidationError, match=r'low must be <= high'):
        create_from_description(description)


def test_undeclared_constructor_arguments_pass_unchecked():
    thing = WithState(2, extra=object)
    assert thing.extra is object


def test_state_arguments_are_not_checked_at_construction():
    assert WithState(1, cache='not an int').cache_given == 'not an int'
    with pytest.raises(TrainingValidationError, match='size must be a positive int'):
        WithState(0)


def test_each_keyword_of_a_declared_var_keyword_argument_is_checked():
    thing = Labelled(a=np.int64(1), b=5)
    assert thing.named == {'a': 1, 'b': 5}
    assert type(thing.named['a']) is int
    with pytest.raises(TrainingValidationError) as info:
        Labelled(a=1, b=6)
    assert str(info.value) == (
        "Labelled: value 'b' must be an int in [0, 5]. Received: 6"
    )


def test_the_class_chooses_its_error():
    with pytest.raises(NetworkValidationError, match=r'^NetError: size must be'):
        NetError(0)


def test_a_checked_constructor_is_not_wrapped_twice():
    counting = Counting()

    class Once(Describable):
        __arguments__ = {'x': Arg(counting)}

        def __init__(self, x):
            self.x = x

    class Again(Once):
        __init__ = Once.__init__

    assert Again.__init__ is Once.__init__
    Again(1)
    assert counting.calls == 1


# ---------------------------------------------------------- check_value ---


def test_none_passes_only_where_the_default_is_none():
    maybe = Arg(Int(0, 5), default=None)
    assert check_value('f', Span, 'n', maybe, None) is None
    assert check_value('f', Span, 'n', maybe, 3) == 3
    with pytest.raises(TrainingValidationError):
        check_value('f', Span, 'n', maybe, 'x')
    with pytest.raises(TrainingValidationError):
        check_value('f', Span, 'n', maybe, 6)
    for default in (1, REQUIRED, 0):
        with pytest.raises(TrainingValidationError, match='Received: n=None'):
            check_value('f', Span, 'n', Arg(Int(0, 5), default=default), None)


def test_check_value_messages():
    arg = Arg(ListOf(Int(0, 5)))
    with pytest.raises(TrainingValidationError) as info:
        check_value('Owner', Span, 'sizes', arg, [1, 9])
    assert str(info.value) == (
        'Owner: sizes[1] must be an int in [0, 5]. Received: sizes=[1, 9]'
    )
    with pytest.raises(TrainingValidationError) as info:
        check_value('Owner', Span, 'sizes', arg, [1, 9], shown="data 'x'")
    assert str(info.value) == (
        "Owner: data 'x'[1] must be an int in [0, 5]. Received: data 'x'=[1, 9]"
    )
    with pytest.raises(TrainingValidationError) as info:
        check_value('Owner', Span, 'size', Arg(Int(1)), 0)
    assert str(info.value) == 'Owner: size must be a positive int. Received: size=0'
    with pytest.raises(TrainingValidationError) as info:
        check_value('Owner', Span, 'size', Arg(Int(1)), 0, shown='weight')
    assert str(info.value) == 'Owner: weight must be a positive int. Received: 0'


def test_check_value_errors_keep_the_checks_detail():
    class Explained(Check):
        expected = 'an even int'

        def normalize(self, value):
            if value % 2:
                raise ValueError('it is odd')
            return value

    with pytest.raises(TrainingValidationError) as info:
        check_value('Owner', Span, 'n', Arg(Explained()), 3)
    assert str(info.value) == (
        'Owner: n must be an even int (it is odd). Received: n=3'
    )


# ------------------------------------------------------ check_arguments ---


def test_check_arguments_checks_and_normalises_declared_values_only():
    result = check_arguments(
        WithState, 'WithState', {'size': np.int64(2), 'extra': 'x'}
    )
    assert result == {'size': 2, 'extra': 'x'}
    assert type(result['size']) is int
    # state is checked when restoring, not here
    assert check_arguments(WithState, 'W', {'cache': 'x'}) == {'cache': 'x'}
    with pytest.raises(TrainingValidationError, match='^W: size must be'):
        check_arguments(WithState, 'W', {'size': 0})


# -------------------------------------------------------------- declare ---


@declare(
    NetworkValidationError,
    n=Arg(Int(0, 5)),
    name=Arg(Optional(Str()), default=None),
    **{
        '*values': Arg(Int(0)),
        '**extra': Arg(ListOf(Int()), label="extra '{}'"),
    },
)
def _gather(n, *values, name=None, **extra):
    return n, values, name, extra


@declare(n=Arg(Int(0, 5)))
def _plain(n, other=None):
    return n, other


def test_declare_checks_and_normalises_each_kind_of_parameter():
    result = _gather(np.int64(5), np.int8(1), 0, name='a', e=(1, 2))
    assert result == (5, (1, 0), 'a', {'e': [1, 2]})
    assert type(result[0]) is int and type(result[1][0]) is int
    assert _gather(0) == (0, (), None, {})
    assert _plain(3, other='anything') == (3, 'anything')


@pytest.mark.parametrize(
    'args, kwargs, message',
    [
        ((6,), {}, '_gather: n must be an int in [0, 5]. Received: n=6'),
        ((-1,), {}, '_gather: n must be an int in [0, 5]. Received: n=-1'),
        (
            (1, 2, -3),
            {},
            '_gather: values[1] must be an int >= 0. Received: values[1]=-3',
        ),
        (
            (1,),
            {'e': [1, 'x']},
            "_gather: extra 'e'[1] must be an int. Received: extra 'e'=[1, 'x']",
        ),
        ((1,), {'name': 5}, '_gather: name must be None or a str. Received: name=5'),
    ],
)
def test_declare_errors_name_the_function_and_the_argument(args, kwargs, message):
    with pytest.raises(NetworkValidationError) as info:
        _gather(*args, **kwargs)
    assert str(info.value) == message


def test_declare_wrong_call_is_pythons_type_error_naming_the_function():
    with pytest.raises(TypeError, match=r'^_plain: .*unexpected keyword'):
        _plain(1, bogus=2)
    with pytest.raises(TypeError, match=r"^_plain: missing a required argument: 'n'"):
        _plain()


def test_declare_default_error_and_listing():
    with pytest.raises(TrainingValidationError):
        _plain(6)
    assert set(_gather.__arguments__) == {'n', 'name', '*values', '**extra'}
    assert _gather.__argument_error__ is NetworkValidationError
    assert _plain.__argument_error__ is TrainingValidationError
    assert issubclass(NetworkValidationError, ValidationError)


def test_restoring_refuses_an_undeclared_key_of_a_declaring_class():
    with pytest.raises(DescriptionError, match='unknown key'):
        create_from_description({'@type': 'Span', 'low': 1, 'middle': 2})


# ------------------------------------------- the library's declarations ---


def _library_constructors():
    import brainstorm as bs  # noqa: F401
    import brainstorm.data_iterators  # noqa: F401
    import brainstorm.hooks  # noqa: F401
    import brainstorm.initializers  # noqa: F401
    import brainstorm.scorers  # noqa: F401
    import brainstorm.training  # noqa: F401
    import brainstorm.value_modifiers  # noqa: F401
    from brainstorm.utils import get_inheritors

    for cls in sorted(get_inheritors(Describable), key=lambda c: c.__name__):
        if cls.__module__.startswith('brainstorm.') and declared_arguments(cls):
            yield cls


def test_each_declared_default_is_the_constructors_default():
    # restoring a description that lacks a key gives the declared default,
    # so it must be what the constructor gives when the argument is left out
    checked = 0
    for cls in _library_constructors():
        parameters = inspect.signature(cls.__init__).parameters
        for name, arg in declared_arguments(cls).items():
            parameter = parameters.get(name)
            if parameter is None or arg.state or name.startswith('*'):
                continue
            checked += 1
            where = f'{cls.__name__}.{name}'
            if parameter.default is parameter.empty:
                assert arg.default is REQUIRED, where
            else:
                assert arg.default is not REQUIRED, where
                assert type(arg.default) is type(parameter.default), where
                assert arg.default == parameter.default, where
    assert checked > 100
