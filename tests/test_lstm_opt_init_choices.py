"""``LstmOptInit`` picks the gate of an Lstm parameter wherever it is given.

It did only as the initializer a pattern chose. As the ``'fallback'``
(Orthogonal for the matrices, LstmOptInit for the biases Orthogonal cannot
fill) or inside ``SparseInputs``/``SparseOutputs`` it split each parameter
into four row blocks instead: every bias got the pattern [z, i, f, o], so
the forget-gate bias was 1 for a quarter of the cells, and an Lstm whose
size is no multiple of 4 was refused with a message about row blocks.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.initializers import (
    LstmOptInit,
    Orthogonal,
    SparseInputs,
    SparseOutputs,
)


def _lstm(size):
    inp = bs.layers.Input(out_shapes={'default': ('T', 'B', 3)})
    return bs.Network.from_layer(inp >> bs.layers.Lstm(size, name='L'))


@pytest.mark.parametrize('size', [4, 6])
def test_as_the_fallback_it_picks_each_parameters_gate(size):
    net = _lstm(size)
    net.initialize(
        {'L': Orthogonal(), 'fallback': LstmOptInit(0.0, 0.5, 1.0, -1.0)}, seed=1
    )
    for name, value in (('bz', 0.0), ('bi', 0.5), ('bf', 1.0), ('bo', -1.0)):
        np.testing.assert_array_equal(
            net.get(f'L.parameters.{name}'), np.full(size, value, np.float32)
        )
    # the matrices are Orthogonal's: (size, 3), orthonormal columns
    w = net.get('L.parameters.Wf')
    np.testing.assert_allclose(w.T @ w, np.eye(3), atol=1e-5)


@pytest.mark.parametrize('sparse', [SparseInputs, SparseOutputs])
def test_inside_a_sparse_initializer_it_picks_the_gate(sparse):
    net = _lstm(4)
    net.initialize(
        {'L': {'W*': sparse(LstmOptInit(1.0, 2.0, 3.0, 4.0), 2), 'default': 0.0}},
        seed=2,
    )
    for name, value in (('Wz', 1.0), ('Wi', 2.0), ('Wf', 3.0), ('Wo', 4.0)):
        w = net.get(f'L.parameters.{name}')
        assert set(np.unique(w[w != 0])) == {value}, (name, w)


def test_on_a_layer_that_stacks_the_gates_it_still_splits_rows():
    inp = bs.layers.Input(out_shapes={'default': ('T', 'B', 3)})
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(8, name='F'))
    net.initialize({'F': Orthogonal(), 'fallback': LstmOptInit(1, 2, 3, 4)}, seed=3)
    np.testing.assert_array_equal(
        net.get('F.parameters.bias'), [1, 1, 2, 2, 3, 3, 4, 4]
    )
