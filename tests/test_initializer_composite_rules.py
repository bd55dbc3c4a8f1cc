"""Rules of evaluating an initializer (brainstorm/initializers/base.py) and
of the composite initializers SparseInputs, SparseOutputs and LstmOptInit
(brainstorm/initializers/composite.py): the sizes the sparse initializers
accept at their edge and by default, the shapes LstmOptInit refuses, what
select_for gives for a layer that is no Lstm, and an ArrayInitializer
evaluated with a seed; each stated at its edge, so that mutation testing
(tools/mutation.py) finds no gap."""

import types

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.initializers import (
    ArrayInitializer,
    Gaussian,
    LstmOptInit,
    SparseInputs,
    SparseOutputs,
    evaluate_initializer,
)
from brainstorm.utils import InitializationError

# ------------------------------------------------------- sparse sizes ---


def test_sparse_inputs_keeps_every_row_when_connections_equal_the_rows():
    """shape[0] == connections is enough: each column keeps all its rows."""
    values = evaluate_initializer(SparseInputs(1.0, connections=4), (4, 3), seed=1)
    np.testing.assert_array_equal(values, np.ones((4, 3)))
    with pytest.raises(InitializationError, match='shape\\[0\\] must be at least'):
        SparseInputs(1.0, connections=5)((4, 3))


def test_sparse_outputs_keeps_every_entry_when_connections_equal_the_row():
    """prod(shape[1:]) == connections is enough: each row keeps all its
    entries (the trailing axes flattened: 2 * 3 = 6)."""
    values = evaluate_initializer(SparseOutputs(1.0, connections=6), (2, 2, 3), seed=1)
    np.testing.assert_array_equal(values, np.ones((2, 2, 3)))
    with pytest.raises(InitializationError, match='prod\\(shape\\[1:\\]\\) = 6'):
        SparseOutputs(1.0, connections=7)((2, 2, 3))


def test_sparse_inputs_keeps_fifteen_per_column_by_default():
    assert SparseInputs(1.0).connections == 15
    values = evaluate_initializer(SparseInputs(1.0), (20, 3), seed=2)
    np.testing.assert_array_equal((values != 0).sum(axis=0), [15] * 3)
    # 15 rows are enough, 14 are not
    full = evaluate_initializer(SparseInputs(1.0), (15, 2), seed=2)
    np.testing.assert_array_equal(full, np.ones((15, 2)))
    with pytest.raises(InitializationError, match='connections=15'):
        SparseInputs(1.0)((14, 2))


def test_sparse_outputs_keeps_fifteen_per_row_by_default():
    assert SparseOutputs(1.0).connections == 15
    values = evaluate_initializer(SparseOutputs(1.0), (3, 20), seed=2)
    np.testing.assert_array_equal((values != 0).sum(axis=1), [15] * 3)
    full = evaluate_initializer(SparseOutputs(1.0), (2, 3, 5), seed=2)
    np.testing.assert_array_equal(full, np.ones((2, 3, 5)))
    with pytest.raises(InitializationError, match='connections=15'):
        SparseOutputs(1.0)((2, 14))


@pytest.mark.parametrize('klass', [SparseInputs, SparseOutputs])
@pytest.mark.parametrize('connections', [0, -1])
def test_sparse_initializers_refuse_fewer_than_one_connection(klass, connections):
    """No connection would make an all-zero parameter."""
    with pytest.raises(NetworkValidationError, match=f'{klass.__name__}: connections'):
        klass(Gaussian(), connections=connections)


def test_sparse_initializers_accept_one_connection():
    values = evaluate_initializer(SparseOutputs(1.0, connections=1), (3, 4), seed=3)
    np.testing.assert_array_equal((values != 0).sum(axis=1), [1] * 3)
    values = evaluate_initializer(SparseInputs(1.0, connections=1), (3, 4), seed=3)
    np.testing.assert_array_equal((values != 0).sum(axis=0), [1] * 4)


# ---------------------------------------------------------- LstmOptInit ---


def test_lstm_opt_init_refuses_a_scalar_parameter():
    """A shape () has no first axis to split: InitializationError (so that
    a fallback takes over), not an IndexError."""
    init = LstmOptInit(1.0, 2.0, 3.0, 4.0)
    with pytest.raises(InitializationError, match='divisible by 4.*shape=\\(\\)'):
        init(())
    values = evaluate_initializer(init, (), fallback=0.5)
    assert values.shape == ()
    assert values == 0.5


def test_lstm_opt_init_splits_a_vector_of_four():
    """One dimension is enough: a bias of four rows gets one of each."""
    values = evaluate_initializer(LstmOptInit(1.0, 2.0, 3.0, 4.0), (4,), seed=1)
    np.testing.assert_array_equal(values, [1.0, 2.0, 3.0, 4.0])


def test_select_for_a_layer_without_lstm_gates_is_the_initializer_itself():
    """A layer that does not say it has Lstm gates (an object without
    has_lstm_gates, or with it False) is no Lstm: LstmOptInit gives itself,
    which splits the rows, for any parameter name."""
    init = LstmOptInit(1.0, 2.0, 3.0, 4.0)
    plain = types.SimpleNamespace(name='P')
    declared = types.SimpleNamespace(name='D', has_lstm_gates=False)
    for layer in (plain, declared):
        for name in ('Wz', 'bf', 'timing', 'W'):
            assert init.select_for(layer, name) is init
    lstm = types.SimpleNamespace(name='L', has_lstm_gates=True)
    assert init.select_for(lstm, 'bf') == 3.0
    sparse = SparseInputs(init, 2)
    assert sparse.select_for(plain, 'Wz') is sparse


# ------------------------------------------------------ ArrayInitializer ---


def test_array_initializer_takes_a_seed_like_every_initializer():
    """evaluate_initializer reseeds the initializer it is given; an array
    draws nothing, but has a random state to reseed (a network initializes
    every parameter with a seed)."""
    init = ArrayInitializer([[1.0, 2.0], [3.0, 4.0]])
    values = evaluate_initializer(init, (2, 2), seed=5)
    np.testing.assert_array_equal(values, [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(
        evaluate_initializer(np.array([1.0, 2.0, 3.0]), (3,), seed=6), [1, 2, 3]
    )


def test_a_network_initialized_with_a_list_and_a_seed():
    inp = bs.layers.Input(out_shapes={'default': ('T', 'B', 2)})
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(3, name='F'))
    net.initialize({'F': {'bias': [1.0, 2.0, 3.0], 'W': 0.5}}, seed=4)
    np.testing.assert_array_equal(net.get('F.parameters.bias'), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(net.get('F.parameters.W'), np.full((3, 2), 0.5))
