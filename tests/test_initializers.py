"""Tests for brainstorm.initializers."""

import json
import math

import numpy as np
import pytest

from brainstorm.describable import create_from_description, get_description
from brainstorm.initializers import (
    ArrayInitializer,
    DenseSqrtFanIn,
    DenseSqrtFanInOut,
    EchoState,
    Gaussian,
    Identity,
    Initializer,
    LstmOptInit,
    Orthogonal,
    RandomWalk,
    SparseInputs,
    SparseOutputs,
    Uniform,
    evaluate_initializer,
)
from brainstorm.utils import InitializationError, ValidationError


def all_initializers():
    return [
        Gaussian(0.5, mean=1.0),
        Uniform(0.2),
        Uniform(-1.0, 3.0),
        DenseSqrtFanIn('tanh'),
        DenseSqrtFanIn(2.0),
        DenseSqrtFanInOut('sigmoid'),
        EchoState(0.9),
        Identity(scale=2.0, std=0.0, enforce_square=False),
        Orthogonal(1.5),
        RandomWalk('rel'),
        RandomWalk(scale=3.0),
        SparseInputs(Gaussian(), connections=3),
        SparseOutputs(1.0, connections=2),
        LstmOptInit(input_block=Gaussian(), forget_gate=1.0),
    ]


def shape_for(init):
    if isinstance(init, LstmOptInit):
        return (8, 5)
    return (6, 6)


def json_round_trip(obj):
    return create_from_description(json.loads(json.dumps(get_description(obj))))


# ---------------------------------------------------------- descriptions ---


@pytest.mark.parametrize('init', all_initializers(), ids=lambda i: type(i).__name__)
def test_description_round_trip_gives_equivalent_initializer(init):
    recreated = json_round_trip(init)
    assert type(recreated) is type(init)
    assert get_description(recreated) == get_description(init)
    shape = shape_for(init)
    expected = evaluate_initializer(init, shape, seed=7)
    result = evaluate_initializer(recreated, shape, seed=7)
    np.testing.assert_array_equal(result, expected)


def test_recreated_uniform_has_a_fresh_random_state():
    # Note fix: 0.5 recreated Uniform with rnd=None, breaking from_hdf5.
    recreated = json_round_trip(Uniform(0.5))
    values = recreated((100,))
    assert values.shape == (100,)
    assert np.all(values >= -0.5) and np.all(values < 0.5)
    assert values.std() > 0.1


def test_array_initializer_describes_as_plain_list():
    init = ArrayInitializer([[1, 2], [3, 4]])
    assert get_description(init) == [[1, 2], [3, 4]]
    recreated = json_round_trip(init)
    np.testing.assert_array_equal(
        evaluate_initializer(recreated, (2, 2)), [[1, 2], [3, 4]]
    )


# ---------------------------------------------------------------- values ---


def test_array_initializer_returns_a_copy_of_the_array():
    array = np.arange(6.0).reshape(2, 3)
    init = ArrayInitializer(array)
    result = init((2, 3))
    np.testing.assert_array_equal(result, array)
    result[0, 0] = 99
    assert init((2, 3))[0, 0] == 0


def test_array_initializer_shape_mismatch_raises():
    with pytest.raises(InitializationError, match=r'\(2, 3\)'):
        ArrayInitializer(np.zeros((2, 3)))((3, 2))


def test_gaussian_statistics():
    values = evaluate_initializer(Gaussian(std=2.0, mean=3.0), (200, 100), seed=1)
    assert abs(values.mean() - 3.0) < 0.05
    assert abs(values.std() - 2.0) < 0.05


def test_uniform_symmetric_and_explicit_range():
    values = evaluate_initializer(Uniform(-0.3), (100, 100), seed=1)
    assert values.min() >= -0.3 and values.max() < 0.3
    assert values.min() < -0.29 and values.max() > 0.29
    values = evaluate_initializer(Uniform(2.0, 5.0), (100, 100), seed=1)
    assert values.min() >= 2.0 and values.max() < 5.0
    assert abs(values.mean() - 3.5) < 0.05


@pytest.mark.parametrize(
    'scale, factor',
    [
        ('rel', math.sqrt(6)),
        ('tanh', math.sqrt(3)),
        ('sigmoid', 4 * math.sqrt(3)),
        ('linear', 1.0),
        (2.5, 2.5),
    ],
)
def test_dense_sqrt_fan_in_bounds(scale, factor):
    shape = (50, 4, 5)
    values = evaluate_initializer(DenseSqrtFanIn(scale), shape, seed=2)
    bound = factor / math.sqrt(20)
    assert values.shape == shape
    assert np.abs(values).max() <= bound
    assert np.abs(values).max() > 0.95 * bound


@pytest.mark.parametrize(
    'scale, factor',
    [
        ('rel', math.sqrt(12)),
        ('tanh', math.sqrt(6)),
        ('sigmoid', 4 * math.sqrt(6)),
        ('linear', 1.0),
    ],
)
def test_dense_sqrt_fan_in_out_bounds(scale, factor):
    shape = (30, 70)
    values = evaluate_initializer(DenseSqrtFanInOut(scale), shape, seed=2)
    bound = factor / math.sqrt(100)
    assert np.abs(values).max() <= bound
    assert np.abs(values).max() > 0.95 * bound


@pytest.mark.parametrize('init', [DenseSqrtFanIn(), DenseSqrtFanInOut()])
def test_dense_initializers_reject_vectors(init):
    with pytest.raises(InitializationError, match='at least 2'):
        init((5,))


def test_echo_state_spectral_radius():
    values = evaluate_initializer(EchoState(0.8), (20, 20), seed=3)
    radius = np.max(np.abs(np.linalg.eigvals(values)))
    assert radius == pytest.approx(0.8)


@pytest.mark.parametrize('shape', [(3, 4), (4,), (2, 2, 2)])
def test_echo_state_needs_square_matrix(shape):
    with pytest.raises(InitializationError, match='square'):
        EchoState()(shape)


def test_identity_values():
    values = evaluate_initializer(Identity(scale=2.0, std=0.0), (3, 3))
    np.testing.assert_array_equal(values, 2 * np.eye(3))
    noisy = evaluate_initializer(Identity(std=0.01), (50, 50), seed=4)
    assert abs((noisy - np.eye(50)).std() - 0.01) < 0.001
    with pytest.raises(InitializationError):
        Identity()((3, 4))
    with pytest.raises(InitializationError):
        Identity()((3,))
    rectangular = Identity(std=0.0, enforce_square=False)((2, 3))
    np.testing.assert_array_equal(rectangular, np.eye(2, 3))


@pytest.mark.parametrize('shape', [(5, 5), (3, 8), (8, 3)])
def test_orthogonal_rows_or_columns_are_orthonormal(shape):
    values = evaluate_initializer(Orthogonal(scale=2.0), shape, seed=5)
    assert values.shape == shape
    small = min(shape)
    gram = values @ values.T if shape[0] == small else values.T @ values
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-10)


def test_orthogonal_needs_2d():
    with pytest.raises(InitializationError):
        Orthogonal()((2, 3, 4))


def test_random_walk_uses_sqrt_n():
    # Note fix: 0.5 divided by N; the paper (and we) divide by sqrt(N).
    n = 400
    values = evaluate_initializer(RandomWalk('linear'), (n, n), seed=6)
    expected_std = math.exp(1 / (2 * n)) / math.sqrt(n)
    assert values.std() == pytest.approx(expected_std, rel=0.01)
    values = evaluate_initializer(RandomWalk('rel'), (n, n), seed=6)
    expected_std = math.sqrt(2) * math.exp(1.2 / (n - 2.4)) / math.sqrt(n)
    assert values.std() == pytest.approx(expected_std, rel=0.01)
    values = evaluate_initializer(RandomWalk(scale=3.0), (n, n), seed=6)
    assert values.std() == pytest.approx(3.0 / math.sqrt(n), rel=0.01)


def test_random_walk_small_rel_uses_six():
    values = evaluate_initializer(RandomWalk('rel'), (4, 4), seed=6)
    rnd = np.random.RandomState(6)
    expected = math.sqrt(2) * math.exp(1.2 / 3.6) * rnd.normal(size=(4, 4)) / 2
    np.testing.assert_allclose(values, expected)


def test_random_walk_needs_square():
    with pytest.raises(InitializationError):
        RandomWalk()((3, 4))


def test_sparse_inputs_keeps_connections_per_column():
    values = evaluate_initializer(SparseInputs(1.0, connections=3), (10, 7), seed=8)
    np.testing.assert_array_equal((values != 0).sum(axis=0), [3] * 7)
    assert set(np.unique(values)) == {0.0, 1.0}
    # several columns differ in which rows they keep
    assert len({tuple(np.flatnonzero(c)) for c in values.T}) > 1


def test_sparse_outputs_keeps_connections_per_row():
    values = evaluate_initializer(
        SparseOutputs(Gaussian(1.0), connections=4), (6, 9), seed=8
    )
    np.testing.assert_array_equal((values != 0).sum(axis=1), [4] * 6)


def test_sparse_initializers_work_on_more_dimensions():
    values = evaluate_initializer(SparseOutputs(1.0, connections=5), (3, 2, 4), seed=8)
    np.testing.assert_array_equal((values != 0).reshape(3, 8).sum(1), [5] * 3)
    values = evaluate_initializer(SparseInputs(1.0, connections=2), (3, 2, 4), seed=8)
    np.testing.assert_array_equal((values != 0).reshape(3, 8).sum(0), [2] * 8)


@pytest.mark.parametrize('klass', [SparseInputs, SparseOutputs])
def test_sparse_initializers_honour_the_seed(klass):
    # Note fix: 0.5 used the global NumPy random state for the pattern and
    # did not reseed the sub-initializer.
    init = klass(Gaussian(), connections=3)
    first = evaluate_initializer(init, (8, 8), seed=11)
    np.random.seed(0)
    second = evaluate_initializer(init, (8, 8), seed=11)
    np.testing.assert_array_equal(first, second)
    other = evaluate_initializer(init, (8, 8), seed=12)
    assert not np.array_equal(first, other)
    pattern_a = evaluate_initializer(klass(1.0, 3), (8, 8), seed=11) != 0
    pattern_b = evaluate_initializer(klass(1.0, 3), (8, 8), seed=12) != 0
    assert not np.array_equal(pattern_a, pattern_b)


def test_sparse_initializers_too_few_units():
    with pytest.raises(InitializationError):
        SparseInputs(1.0, connections=5)((4, 10))
    with pytest.raises(InitializationError):
        SparseOutputs(1.0, connections=5)((10, 4))
    with pytest.raises(InitializationError):
        SparseOutputs(1.0, connections=1)((10,))


def test_lstm_opt_init_blocks():
    init = LstmOptInit(
        input_block=1.0, input_gate=2.0, forget_gate=3.0, output_gate=Gaussian(0.1)
    )
    values = evaluate_initializer(init, (12, 5), seed=9)
    np.testing.assert_array_equal(values[0:3], 1.0)
    np.testing.assert_array_equal(values[3:6], 2.0)
    np.testing.assert_array_equal(values[6:9], 3.0)
    assert values[9:].std() > 0.01
    bias = evaluate_initializer(init, (8,), seed=9)
    np.testing.assert_array_equal(bias[:6], [1, 1, 2, 2, 3, 3])
    np.testing.assert_array_equal(evaluate_initializer(init, (12, 5), seed=9), values)
    with pytest.raises(InitializationError, match='divisible by 4'):
        init((6, 5))


# ------------------------------------------------- evaluate_initializer ---


def test_evaluate_initializer_constants():
    result = evaluate_initializer(3, (2, 2))
    assert result.dtype == np.float64
    np.testing.assert_array_equal(result, np.full((2, 2), 3.0))
    np.testing.assert_array_equal(evaluate_initializer(0.5, (3,)), [0.5] * 3)


def test_evaluate_initializer_lists_and_arrays():
    np.testing.assert_array_equal(evaluate_initializer([1, 2], (2,)), [1, 2])
    np.testing.assert_array_equal(
        evaluate_initializer(np.ones((2, 1)), (2, 1)), np.ones((2, 1))
    )


def test_evaluate_initializer_seed_reproducible():
    init = Gaussian()
    a = evaluate_initializer(init, (5, 5), seed=1)
    b = evaluate_initializer(init, (5, 5), seed=1)
    c = evaluate_initializer(init, (5, 5), seed=2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_evaluate_initializer_fallback():
    result = evaluate_initializer(Identity(), (4,), fallback=0.5)
    np.testing.assert_array_equal(result, [0.5] * 4)
    with_seed = evaluate_initializer(EchoState(), (3,), fallback=Gaussian(), seed=3)
    np.testing.assert_array_equal(
        with_seed, evaluate_initializer(Gaussian(), (3,), seed=3)
    )
    with pytest.raises(InitializationError):
        evaluate_initializer(Identity(), (4,))


@pytest.mark.parametrize('bad', ['0.1', None, {'a': 1}, True])
def test_evaluate_initializer_type_error(bad):
    with pytest.raises(TypeError, match='Cannot initialize'):
        evaluate_initializer(bad, (2,))


def test_base_initializer_is_abstract():
    with pytest.raises(NotImplementedError):
        Initializer()((2,))


# ------------------------------------------------------- argument checks ---


@pytest.mark.parametrize(
    'factory, pattern',
    [
        (lambda: Uniform(0.5, 0.1), r'Uniform: low must be smaller.*low=0.5'),
        (lambda: Uniform(0.0), r'Uniform: low must be smaller'),
        (lambda: Uniform('a'), r'Uniform: low must be a finite number'),
        (lambda: Gaussian(-1.0), r'Gaussian: std must be .*>= 0.*std=-1.0'),
        (lambda: Gaussian(mean=float('nan')), r'Gaussian: mean'),
        (lambda: DenseSqrtFanIn('relu'), r"DenseSqrtFanIn: scale must be.*'relu'"),
        (lambda: DenseSqrtFanInOut('x'), r'DenseSqrtFanInOut: scale'),
        (lambda: EchoState(0), r'EchoState: spectral_radius must be a finite.* > 0'),
        (lambda: Identity(std=-0.1), r'Identity: std'),
        (lambda: Orthogonal('big'), r'Orthogonal: scale'),
        (lambda: RandomWalk('tanh'), r'RandomWalk: act_func'),
        (lambda: SparseInputs(1.0, connections=0), r'SparseInputs: connections'),
        (lambda: SparseOutputs('x'), r'SparseOutputs: sub_initializer'),
        (lambda: LstmOptInit(forget_gate='1'), r'LstmOptInit: forget_gate'),
    ],
)
def test_bad_arguments_raise_validation_error(factory, pattern):
    with pytest.raises(ValidationError, match=pattern):
        factory()


# ------------------------------------------------------ with a real net ---


def make_net():
    from brainstorm.layers import FullyConnected, Input
    from brainstorm.structure.network import Network

    inp = Input(out_shapes={'default': ('T', 'B', 20)})
    return Network.from_layer(inp >> FullyConnected(16, name='Hid'))


def test_network_initialized_with_uniform_reloads(tmp_path):
    # Note fix: 0.5 could not load a network initialised with Uniform.
    from brainstorm.structure.network import Network

    net = make_net()
    net.initialize(Uniform(0.3), seed=5)
    filename = str(tmp_path / 'net.hdf5')
    net.save_as_hdf5(filename)
    loaded = Network.from_hdf5(filename)
    np.testing.assert_array_equal(loaded.get('parameters'), net.get('parameters'))
    weights = loaded.get('Hid.parameters.W')
    assert np.abs(weights).max() < 0.3 and weights.std() > 0.1


def test_network_initialization_with_sparse_initializers_is_seeded():
    nets = [make_net() for _ in range(3)]
    init = {'default': SparseInputs(Gaussian(), connections=4), 'fallback': 0.0}
    for net, global_seed, seed in zip(nets, [0, 1, 0], [42, 42, 43]):
        np.random.seed(global_seed)  # the global NumPy state must not matter
        net.initialize(init, seed=seed)
    first, second, third = (n.get('Hid.parameters.W') for n in nets)
    np.testing.assert_array_equal(first, second)
    assert not np.array_equal(first != 0, third != 0)
    np.testing.assert_array_equal((first != 0).sum(axis=0), [4] * 20)
    np.testing.assert_array_equal(nets[0].get('Hid.parameters.bias'), 0.0)


def test_lstm_opt_init_initializes_each_gate_of_an_lstm():
    """On an Lstm (one parameter per gate) every W, R, b and peephole
    parameter gets its gate's initializer. (Guards against: splitting each
    gate's own bias into quarters, which 0.5-style use silently did.)"""
    import brainstorm as bs
    from brainstorm.handlers import NumpyHandler
    from brainstorm.initializers import LstmOptInit
    from brainstorm.layers import ClockworkLstm, Input, Lstm

    net = bs.Network.from_layer(
        Input(out_shapes={'default': ('T', 'B', 3)}) >> Lstm(4, name='L')
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(
        {
            'L': LstmOptInit(
                input_block=1.0, input_gate=2.0, forget_gate=3.0, output_gate=4.0
            )
        }
    )
    values = {'z': 1.0, 'i': 2.0, 'f': 3.0, 'o': 4.0}
    params = net.buffer.L.parameters
    checked = 0
    for pname in net.layers['L'].parameter_shapes:
        np.testing.assert_array_equal(params[pname], values[pname[1]], err_msg=pname)
        checked += 1
    assert checked == 15  # W, R, b for four gates and three peepholes

    cw = bs.Network.from_layer(
        Input(out_shapes={'default': ('T', 'B', 3)}) >> ClockworkLstm(4, name='C')
    )
    # ClockworkLstm is an Lstm; its untrained 'timing' keeps its own values
    cw.initialize({'C': LstmOptInit(1.0, 2.0, 3.0, 4.0)})
    np.testing.assert_array_equal(cw.buffer.C.parameters['bf'], 3.0)
    np.testing.assert_array_equal(cw.buffer.C.parameters['Ri'], 2.0)
    with pytest.raises(bs.utils.ValidationError, match="'timing'.*no gate"):
        LstmOptInit(1.0).select_for(cw.layers['C'], 'timing')
