"""``predict``'s messages about batches and batch-first data.

* With ``batch_size`` (or batch-first data), errors raised by the checks of
  each batch (ids, integers, the layers' own) named positions in the batch,
  not in the data: a bad id of sample 5 was reported at sequence 1. The
  message now says which samples the batch holds.
* Batch-first data whose shape does not fit was reported with the time
  axis predict added, a shape the user never passed.
* A batch-first array-like with ``shape``, ``dtype`` and slicing but no
  ``ndim`` (docs/inference.rst: the layout rule is the number of
  dimensions) was taken as time-first and refused.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError


def _embedding_net():
    inp = bs.layers.Input({'default': ('T', 'B', 1)})
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Embedding(10, 4, name='Emb')
        >> bs.layers.FullyConnected(3, name='Out')
    )
    net.initialize(bs.initializers.Gaussian(0.3), seed=1)
    return net


@pytest.mark.parametrize(
    ('bad', 'match'), [(2.5, 'not a whole number'), (12.0, 'Received 12 at')]
)
def test_a_bad_id_in_a_later_batch_names_the_batch(bad, match):
    net = _embedding_net()
    ids = np.zeros((2, 7, 1))
    ids[1, 5, 0] = bad
    with pytest.raises(NetworkValidationError, match=match) as info:
        net.predict(ids, batch_size=2, out_name='Out')
    assert 'this one holds samples 4 to 5 of the data' in str(info.value)


def test_batch_first_data_says_the_time_axis_was_added():
    net = _embedding_net()
    ids = np.zeros((7, 1))
    ids[5, 0] = 2.5
    with pytest.raises(NetworkValidationError) as info:
        net.predict(ids, batch_size=2, out_name='Out')
    message = str(info.value)
    assert 'samples 4 to 5' in message and 'batch-first' in message


def test_whole_data_in_one_batch_is_not_annotated():
    net = _embedding_net()
    ids = np.zeros((2, 7, 1))
    ids[1, 5, 0] = 2.5
    with pytest.raises(NetworkValidationError) as info:
        net.predict(ids, out_name='Out')
    assert '(1, 5, 0)' in str(info.value)
    assert 'predict read the data in batches' not in str(info.value)


def test_a_batch_first_shape_that_does_not_fit_is_shown_as_given():
    inp = bs.layers.Input({'default': ('T', 'B', 6, 6, 2)})
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(2, name='Out'))
    net.initialize(0.1)
    with pytest.raises(NetworkValidationError) as info:
        net.predict(np.zeros((2, 2, 6, 6)), out_name='Out')
    assert 'the data of shape (2, 2, 6, 6), given batch-first' in str(info.value)


class _Rows:
    """An array-like read on slicing: shape, dtype and __getitem__, no ndim."""

    def __init__(self, array):
        self._array = array
        self.shape = array.shape
        self.dtype = array.dtype
        self.reads = 0

    def __getitem__(self, key):
        self.reads += 1
        return self._array[key]

    def __array__(self, dtype=None, copy=None):
        return np.asarray(self._array, dtype=dtype)


def test_a_batch_first_array_like_without_ndim_is_read_as_batch_first():
    net = bs.Network.from_layer(
        bs.layers.Input({'default': ('T', 'B', 4)})
        >> bs.layers.FullyConnected(3, name='Out')
    )
    net.initialize(bs.initializers.Gaussian(0.5), seed=2)
    x = np.random.RandomState(0).randn(10, 4)
    rows = _Rows(x)
    assert not hasattr(rows, 'ndim')
    got = net.predict(rows, batch_size=4, out_name='Out')
    np.testing.assert_array_equal(got, net.predict(x, batch_size=4, out_name='Out'))
    assert got.shape == (10, 3)
    assert rows.reads == 3  # read batch by batch
