"""The activation ops, their tables (``act_func`` ...) and the one name list."""

import copy
import pickle
from collections.abc import Mapping

import numpy as np
import pytest

import brainstorm.handlers
from brainstorm.handlers import ACTIVATIONS, DebugHandler, NumpyHandler
from brainstorm.handlers.base_handler import (
    ACTIVATION_NAMES,
    NEEDS_INPUT,
    ActivationTable,
    Handler,
    UnknownActivationError,
)
from brainstorm.layers.attributes import ACTIVATIONS as LAYER_ACTIVATIONS

TABLES = ('act_func', 'act_func_deriv', 'inplace_act_func', 'inplace_act_func_deriv')

# the activations in plain float64 NumPy
FORMULAS = {
    'sigmoid': lambda x: 1.0 / (1.0 + np.exp(-x)),
    'tanh': np.tanh,
    'rel': lambda x: np.maximum(x, 0.0),
    'linear': lambda x: x.copy(),
    'el': lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    'softplus': lambda x: np.logaddexp(0.0, x),
    'leaky_rel': lambda x: np.where(x > 0, x, 0.01 * x),
    'gelu': lambda x: (
        0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    ),
}

HANDLERS = {
    'numpy': lambda: NumpyHandler(np.float64),
    'debug': lambda: DebugHandler(NumpyHandler(np.float64)),
}


@pytest.fixture(params=sorted(HANDLERS))
def handler(request):
    return HANDLERS[request.param]()


def sample(shape=(3, 7), seed=0):
    """Values away from the kinks of rel and el (finite differences)."""
    rng = np.random.RandomState(seed)
    x = rng.uniform(0.05, 4.0, shape) * rng.choice([-1.0, 1.0], shape)
    return x, rng.uniform(-1.0, 1.0, shape)


def run(handler, op, *arrays):
    """Call ``op`` on handler copies of ``arrays``; the NumPy values after."""
    mems = [None if a is None else handler.create_from_numpy(a) for a in arrays]
    op(*mems)
    return [None if m is None else handler.get_numpy_copy(m) for m in mems]


def test_one_list_of_names():
    assert ACTIVATIONS == (
        'sigmoid',
        'tanh',
        'rel',
        'linear',
        'el',
        'softplus',
        'leaky_rel',
        'gelu',
    )
    assert NEEDS_INPUT == ('gelu',)
    assert ACTIVATION_NAMES is ACTIVATIONS
    assert brainstorm.handlers.ACTIVATIONS is ACTIVATIONS
    assert LAYER_ACTIVATIONS is ACTIVATIONS
    assert set(FORMULAS) == set(ACTIVATIONS)


@pytest.mark.parametrize('name', ACTIVATIONS)
def test_every_name_is_an_op_pair_of_the_base_handler(name):
    for op in (name, f'{name}_deriv'):
        assert callable(getattr(Handler, op)), op
        assert len(getattr(Handler, op).__doc__) > 20


@pytest.mark.parametrize('name', ACTIVATIONS)
def test_op_matches_the_formula(handler, name):
    x, _ = sample()
    x_out, y = run(handler, getattr(handler, name), x, np.zeros_like(x))
    np.testing.assert_allclose(y, FORMULAS[name](x), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(x_out, x)


@pytest.mark.parametrize('name', ACTIVATIONS)
def test_op_in_place(handler, name):
    x, _ = sample()
    (y,) = run(handler, lambda a: getattr(handler, name)(a, a), x)
    np.testing.assert_allclose(y, FORMULAS[name](x), rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize('name', ACTIVATIONS)
def test_derivative_matches_finite_differences(handler, name):
    x, dy = sample(seed=1)
    f, eps = FORMULAS[name], 1e-6
    expected = dy * (f(x + eps) - f(x - eps)) / (2 * eps)
    y = f(x)
    deriv = getattr(handler, f'{name}_deriv')
    # the derivative needs y alone, except for NEEDS_INPUT
    for given_x in (x,) if name in NEEDS_INPUT else (x, None):
        _, _, dy_out, dx = run(handler, deriv, given_x, y, dy, np.zeros_like(x))
        np.testing.assert_allclose(dx, expected, rtol=1e-7, atol=1e-9)
        np.testing.assert_array_equal(dy_out, dy)


@pytest.mark.parametrize('name', ACTIVATIONS)
def test_tables_run_the_ops(handler, name):
    x, dy = sample(seed=2)
    f = FORMULAS[name]
    y = f(x)
    ref = NumpyHandler(np.float64)
    _, _, _, expected_dx = run(
        ref, getattr(ref, f'{name}_deriv'), x, y, dy, np.zeros_like(x)
    )
    _, got = run(handler, handler.act_func[name], x, np.zeros_like(x))
    np.testing.assert_allclose(got, y, rtol=1e-12, atol=1e-15)
    *_, got = run(handler, handler.act_func_deriv[name], x, y, dy, np.zeros_like(x))
    np.testing.assert_allclose(got, expected_dx, rtol=1e-12, atol=1e-15)
    (got,) = run(handler, handler.inplace_act_func[name], x)
    np.testing.assert_allclose(got, y, rtol=1e-12, atol=1e-15)
    if name in NEEDS_INPUT:
        with pytest.raises(ValueError, match='needs the input x'):
            run(handler, handler.inplace_act_func_deriv[name], y, dy)
        return
    _, got = run(handler, handler.inplace_act_func_deriv[name], y, dy)
    np.testing.assert_allclose(got, expected_dx, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize('name', ACTIVATIONS)
def test_tables_resolve_names_to_the_bound_ops(handler, name):
    assert handler.act_func[name] == getattr(handler, name)
    assert handler.act_func[name].__self__ is handler
    assert handler.act_func_deriv[name] == getattr(handler, f'{name}_deriv')
    assert handler.inplace_act_func[name].args == (getattr(handler, name),)
    assert handler.inplace_act_func_deriv[name].args == (
        getattr(handler, f'{name}_deriv'),
    )


def test_tables_are_read_only_mappings_of_all_names(handler):
    for table_name in TABLES:
        table = getattr(handler, table_name)
        assert isinstance(table, ActivationTable) and isinstance(table, Mapping)
        assert [name for name, op in table.items() if callable(op)] == list(ACTIVATIONS)
        assert all(callable(op) for op in table.values())
        assert len(table.values()) == len(ACTIVATIONS)
        assert list(table) == list(ACTIVATIONS)
        assert len(table) == len(ACTIVATIONS)
        assert set(table.keys()) == set(ACTIVATIONS)
        assert 'tanh' in table and 'softmax' not in table and None not in table
        assert table.get('softmax') is None
        with pytest.raises(TypeError):
            table['tanh'] = print
        with pytest.raises(AttributeError):
            setattr(handler, table_name, {})
        assert table_name in repr(table)
    assert not any(name in vars(handler) for name in TABLES)


@pytest.mark.parametrize('name', ['softmax', 'Tanh', '', None, 3, ('tanh',)])
@pytest.mark.parametrize('table_name', TABLES)
def test_unknown_name_names_itself_and_the_valid_ones(handler, table_name, name):
    with pytest.raises(KeyError) as info:
        getattr(handler, table_name)[name]
    assert isinstance(info.value, UnknownActivationError)
    message = str(info.value)
    assert message.startswith(f'Unknown activation {name!r}.')
    for valid in ACTIVATIONS:
        assert repr(valid) in message
    assert info.value.name == name


def test_unknown_activation_error_pickles():
    error = pickle.loads(pickle.dumps(UnknownActivationError('softmax')))
    assert str(error) == str(UnknownActivationError('softmax'))
    assert error.name == 'softmax'


def test_table_form_is_checked():
    with pytest.raises(ValueError, match="form must be one of.*'act_func'"):
        ActivationTable(NumpyHandler(), 'activations')


def test_str_subclass_names_are_found(handler):
    assert handler.act_func[np.str_('tanh')] == handler.tanh


def test_subclass_ops_are_found_by_the_tables():
    class HardTanh(NumpyHandler):
        def tanh(self, x, y) -> None:
            np.clip(x, -1, 1, out=y)

    h = HardTanh(np.float64)
    x = h.create_from_numpy(np.array([[-3.0, 0.5, 2.0]]))
    h.inplace_act_func['tanh'](x)
    np.testing.assert_array_equal(h.get_numpy_copy(x), [[-1.0, 0.5, 1.0]])


class CountingCopies(NumpyHandler):
    def __init__(self, dtype=np.float64, seed=None):
        super().__init__(dtype, seed)
        self.copies = 0

    def copy_to(self, src, dest) -> None:
        self.copies += 1
        super().copy_to(src, dest)


def test_linear_in_place_does_nothing():
    h = CountingCopies()
    x = h.create_from_numpy(np.array([[1.0, -2.0]]))
    h.inplace_act_func['linear'](x)
    h.inplace_act_func_deriv['linear'](x, x)
    assert h.copies == 0
    y, dx = h.zeros((1, 2)), h.zeros((1, 2))
    h.act_func['linear'](x, y)
    h.act_func_deriv['linear'](None, y, x, dx)
    assert h.copies == 2
    np.testing.assert_array_equal(h.get_numpy_copy(dx), [[1.0, -2.0]])


DUPLICATES = {
    'deepcopy': copy.deepcopy,
    'pickle': lambda h: pickle.loads(pickle.dumps(h)),
}


@pytest.mark.parametrize('duplicate', sorted(DUPLICATES))
@pytest.mark.parametrize(
    'make',
    [
        lambda: NumpyHandler(np.float32),
        lambda: NumpyHandler(np.float64, seed=3),
        lambda: DebugHandler(NumpyHandler(np.float64)),
        lambda: DebugHandler(DebugHandler(NumpyHandler(np.float32, seed=1))),
        lambda: CountingCopies(),
    ],
    ids=['numpy32', 'numpy64-seeded', 'debug', 'debug-debug', 'subclass'],
)
def test_copies_and_pickles_work_on_their_own_ops(make, duplicate):
    handler = make()
    handler.rnd  # noqa: B018 (draws the random state)
    other = DUPLICATES[duplicate](handler)
    assert type(other) is type(handler) and other is not handler
    assert other.dtype is handler.dtype
    for table_name in TABLES:
        table = getattr(other, table_name)
        for name in ACTIVATIONS:
            op = table[name]
            bound = op.args[0] if hasattr(op, 'args') else op
            assert bound.__self__ is other
    x = other.create_from_numpy(np.array([[-1.0, 2.0]]))
    other.inplace_act_func['rel'](x)
    np.testing.assert_array_equal(other.get_numpy_copy(x), [[0.0, 2.0]])
    a, b = handler.zeros((2, 3)), other.zeros((2, 3))
    handler.fill_gaussian(0.0, 1.0, a)
    other.fill_gaussian(0.0, 1.0, b)
    np.testing.assert_array_equal(handler.get_numpy_copy(a), other.get_numpy_copy(b))


def test_no_state_hooks_for_the_tables():
    """Pickling needs no rebuild: the base and debug handlers define none."""
    for cls in (Handler, DebugHandler):
        assert '__getstate__' not in vars(cls)
        assert '__setstate__' not in vars(cls)
    assert '__setstate__' not in vars(NumpyHandler)


def test_numpy_copies_start_with_empty_scratch_buffers():
    h = NumpyHandler(np.float64)
    x = h.create_from_numpy(np.ones((50, 40)))
    h.mult_add_tt(x, x, x)
    assert h._scratch
    for duplicate in DUPLICATES.values():
        other = duplicate(h)
        assert other._scratch == {} and other._constants == {}
        assert h._scratch  # the original keeps its buffers
