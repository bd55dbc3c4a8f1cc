"""bs.tools.evaluate, extract and extract_and_save: their rules at the edges.

What evaluate measures (with a mask name for the scorers, and on one rank
of a data-parallel run, which shuffles like rank 0); that extract returns
each buffer in data order, time-sized ones zero-padded to the longest batch
(also where a batch's size equals that length), batch-sized ones joined
sample by sample and constant ones as the last batch left them, all
computed by inference passes; that extract_and_save writes the same into
a plain HDF5 file; that both leave the network free for other threads; and
the names and arguments they refuse.
"""

import threading

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import (
    AddGaussianNoise,
    Minibatches,
    Shard,
    Undivided,
)
from brainstorm.errors import NetworkValidationError
from brainstorm.layers import Dropout, FullyConnected, Input
from brainstorm.scorers import Accuracy
from brainstorm.structure.external_data import MissingInputError
from brainstorm.structure.prediction import TARGETS_HINT
from brainstorm.tools import evaluate, extract, extract_and_save
from brainstorm.tools.evaluation import in_data_order
from tests.training.nets import xor_data, xor_net

PREDICTIONS = 'Output.outputs.predictions'


def _identity_net():
    """Input(1) -> Output: predictions are the inputs (x * 1 + 0)."""
    inp, out = bs.tools.get_in_out_layers('regression', 1, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize({'default': 1.0, 'Output_projection': {'bias': 0.0}})
    return net


def _batch_sized_net():
    """Input with a time-sized 'default' and a batch-sized 'extra' (B, 2),
    and a linear FullyConnected 'Out' (W = b = 1) over 'default'."""
    inp = Input({'default': ('T', 'B', 1), 'extra': ('B', 2)})
    out = FullyConnected(1, name='Out', activation='linear')
    net = bs.Network.from_layer(inp - 'default' >> out)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(1.0)
    return net


def _batch(steps, first, size):
    """A batch of ``size`` sequences of ``steps`` steps: sample i holds
    ``first + i`` at every step; 'extra' holds it twice."""
    values = np.arange(first, first + size, dtype=float)
    return {
        'default': np.tile(values.reshape(1, size, 1), (steps, 1, 1)),
        'extra': np.stack([values, values], axis=1),
    }


def _read(path):
    """The datasets of an HDF5 file, by name."""
    with h5py.File(path, 'r') as f:
        return {name: f[name][()] for name in f}


# -------------------------------------------------------------- evaluate ---


def test_evaluate_gives_its_mask_name_to_scorers_without_their_own():
    """All outputs equal: every sample is called class 0. Masking the
    samples of class 1 leaves only right answers."""
    inp, out = bs.tools.get_in_out_layers('classification', 1, 2, mask_name='mask')
    net = bs.Network.from_layer(inp >> out)
    net.initialize(0.0)
    data = {
        'default': np.ones((1, 4, 1)),
        'targets': np.array([0, 1, 0, 1]).reshape(1, 4, 1),
        'mask': np.array([1, 0, 1, 0]).reshape(1, 4, 1),
    }
    masked = evaluate(
        net, Undivided(**data), [Accuracy()], out_name=PREDICTIONS, mask_name='mask'
    )
    unmasked = evaluate(net, Undivided(**data), [Accuracy()], out_name=PREDICTIONS)
    assert masked['Accuracy'] == 1.0
    assert unmasked['Accuracy'] == 0.5


class _RankOneOfTwo:
    """Rank 1 of 2, where rank 0's random states are all
    ``RandomState(seed)``'s and rank 0 evaluated the same figures."""

    def __init__(self, seed):
        self.seed = seed
        self.rank0 = np.random.RandomState(seed)

    def Get_rank(self):
        return 1

    def Get_size(self):
        return 2

    def Bcast(self, buffer, root=0):
        assert root == 0
        _, key, pos, has_gauss, cached = self.rank0.get_state()
        if buffer.dtype == np.uint32:
            buffer[:] = key
        else:
            buffer[:] = [pos, has_gauss, cached, self.seed]

    def allgather(self, obj):
        return [obj, obj]


def test_evaluate_on_a_rank_shuffles_its_shard_like_rank_0():
    """With a communicator the Shard and the Minibatches it wraps take
    rank 0's random states before the pass, so every rank walks through
    the same global batches (however its process was seeded)."""
    data = {'default': np.arange(12.0).reshape(1, 12, 1)}
    data['targets'] = 2 * data['default']
    net = _identity_net()
    shard = Shard(Minibatches(4, **data), rank=1, size=2)
    shard.iter.rnd.set_seed(1)
    evaluate(net, shard, comm=_RankOneOfTwo(7))
    # the same pass from rank 0's state leaves the same state
    reference = Shard(Minibatches(4, **data), rank=1, size=2)
    reference.iter.rnd.set_state(np.random.RandomState(7).get_state())
    reference.rnd.set_state(np.random.RandomState(7).get_state())
    evaluate(net, reference)
    assert shard.iter.rnd.get_seed() == 7
    np.testing.assert_array_equal(
        shard.iter.rnd.get_state()[1], reference.iter.rnd.get_state()[1]
    )
    assert shard.iter.rnd.get_state()[2] == reference.iter.rnd.get_state()[2]


def _use_in_another_thread(net):
    """Run ``evaluate`` over ``net`` in a new thread; return its error."""
    errors = []

    def run():
        try:
            evaluate(net, Undivided(**xor_data()))
        except Exception as error:  # returned to the test
            errors.append(error)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    return errors


@pytest.mark.parametrize('function', ['evaluate', 'extract', 'extract_and_save'])
def test_the_network_is_free_for_another_thread_afterwards(function, tmp_path):
    net = xor_net()
    data = Minibatches(2, shuffle=False, **xor_data())
    if function == 'evaluate':
        evaluate(net, data)
    elif function == 'extract':
        extract(net, data, PREDICTIONS)
    else:
        extract_and_save(net, data, PREDICTIONS, tmp_path / 'out.h5')
    assert _use_in_another_thread(net) == []


def test_evaluate_refuses_an_empty_targets_name():
    with pytest.raises(NetworkValidationError, match='targets_name'):
        evaluate(xor_net(), Undivided(**xor_data()), targets_name='')


# --------------------------------------------------------------- extract ---


@pytest.mark.parametrize('names', ['', [], ['']], ids=['empty', 'no-name', 'list'])
@pytest.mark.parametrize('function', ['extract', 'extract_and_save'])
def test_extract_refuses_empty_buffer_names(function, names, tmp_path):
    args = (tmp_path / 'out.h5',) if function == 'extract_and_save' else ()
    with pytest.raises(NetworkValidationError, match='buffer_names'):
        getattr(bs.tools, function)(xor_net(), Undivided(**xor_data()), names, *args)
    assert not (tmp_path / 'out.h5').exists()


def test_in_data_order_returns_an_iterator_without_shuffling_as_it_is():
    data = xor_data()
    for iterator in [
        Undivided(**data),
        Minibatches(2, shuffle=False, **data),
        AddGaussianNoise(Minibatches(2, shuffle=False, **data), {'default': 1.0}),
    ]:
        assert in_data_order(iterator) is iterator


def test_in_data_order_copies_the_chain_above_a_shuffling_iterator():
    inner = Minibatches(2, shuffle=True, **xor_data())
    outer = AddGaussianNoise(inner, {'default': 1.0})
    ordered = in_data_order(outer)
    assert ordered is not outer and ordered.iter is not inner
    assert ordered.iter.shuffle is False
    assert outer.iter is inner and inner.shuffle is True


def test_extract_pads_a_short_batch_whose_size_equals_the_longest_length():
    """Batches (T=3, N=3) then (T=2, N=3): the second one's size is the
    longest length, and it is still padded with zeros to 3 steps."""
    batches = [_batch(3, 0, 3), _batch(2, 3, 3)]
    got = extract(_batch_sized_net(), batches, 'Out.outputs.default')
    result = got['Out.outputs.default'][..., 0]
    assert result.shape == (3, 6)
    np.testing.assert_array_equal(result[:2], np.tile(np.arange(1.0, 7.0), (2, 1)))
    np.testing.assert_array_equal(result[2], [1, 2, 3, 0, 0, 0])


def test_extract_pads_a_short_batch_of_another_size_than_its_length():
    """Batches (T=4, N=1) then (T=2, N=3), then (T=1, N=2)."""
    batches = [_batch(4, 0, 1), _batch(2, 1, 3), _batch(1, 4, 2)]
    result = extract(_batch_sized_net(), batches, 'Out.outputs.default')
    expected = np.zeros((4, 6))
    expected[:4, 0] = 1
    expected[:2, 1:4] = [2, 3, 4]
    expected[:1, 4:] = [5, 6]
    np.testing.assert_array_equal(result['Out.outputs.default'][..., 0], expected)


def test_extract_joins_batch_sized_buffers_sample_by_sample():
    batches = [_batch(1, 0, 2), _batch(3, 2, 3)]
    result = extract(_batch_sized_net(), batches, ['Input.outputs.extra'])
    np.testing.assert_array_equal(
        result['Input.outputs.extra'], np.arange(5.0).reshape(5, 1).repeat(2, 1)
    )


def test_extract_returns_a_constant_buffer_as_the_last_batch_left_it():
    """The loss (one value per batch) is the last batch's, not the first's
    and not a join of all."""
    net = _identity_net()
    net.buffer.Output_projection.parameters.W[:] = 0.5
    data = {'default': np.arange(1.0, 5.0).reshape(1, 4, 1)}
    data['targets'] = np.zeros((1, 4, 1))
    got = extract(net, Minibatches(2, shuffle=False, **data), 'Loss.outputs.loss')
    net.provide_external_data({k: v[:, 2:] for k, v in data.items()})
    net.forward_pass()
    last = net.get('Loss.outputs.loss')
    net.provide_external_data({k: v[:, :2] for k, v in data.items()})
    net.forward_pass()
    assert not np.array_equal(net.get('Loss.outputs.loss'), last)
    np.testing.assert_array_equal(got['Loss.outputs.loss'], last)


def test_extract_computes_with_inference_passes():
    """Dropout passes its inputs on unchanged outside training."""
    inp, out = bs.tools.get_in_out_layers('regression', 8, 8)
    net = bs.Network.from_layer(inp >> Dropout(0.5, name='Drop') >> out)
    net.initialize(1.0)
    x = np.arange(1.0, 33.0).reshape(1, 4, 8)
    got = extract(net, Undivided(default=x), 'Drop.outputs.default')
    np.testing.assert_allclose(got['Drop.outputs.default'], x)


def test_a_missing_input_names_the_targets_hint_only_where_targets_are_needed():
    net = xor_net()
    only_inputs = Undivided(default=xor_data()['default'])
    with pytest.raises(MissingInputError) as refused:
        extract(net, only_inputs, 'Loss.outputs.loss')
    assert TARGETS_HINT in str(refused.value)
    only_targets = [{'targets': xor_data()['targets']}]
    with pytest.raises(MissingInputError, match=r"\['default'\]") as refused:
        extract(net, only_targets, 'Hid.outputs.default')
    assert TARGETS_HINT not in str(refused.value)


# ------------------------------------------------------ extract_and_save ---


def test_extract_and_save_writes_what_extract_returns(tmp_path):
    """Time-sized, batch-sized and constant buffers over batches of
    several lengths and sizes, the longest one in the middle."""
    names = ['Out.outputs.default', 'Input.outputs.extra', 'Out.parameters.W']
    batches = [_batch(2, 0, 3), _batch(3, 3, 1), _batch(1, 4, 2)]
    net = _batch_sized_net()
    extract_and_save(net, batches, names, tmp_path / 'out.h5')
    stored = _read(tmp_path / 'out.h5')
    expected = extract(net, batches, names)
    assert sorted(stored) == sorted(names)
    for name in names:
        np.testing.assert_array_equal(stored[name], expected[name])


def test_extract_and_save_keeps_a_constant_buffer_as_the_last_batch_left_it(
    tmp_path,
):
    net = _identity_net()
    net.buffer.Output_projection.parameters.W[:] = 0.5
    data = {'default': np.arange(1.0, 5.0).reshape(1, 4, 1)}
    data['targets'] = np.zeros((1, 4, 1))
    iterator = Minibatches(2, shuffle=False, **data)
    extract_and_save(net, iterator, 'Loss.outputs.loss', tmp_path / 'out.h5')
    stored = _read(tmp_path / 'out.h5')
    expected = extract(net, iterator, 'Loss.outputs.loss')['Loss.outputs.loss']
    np.testing.assert_array_equal(stored['Loss.outputs.loss'], expected)


def test_extract_and_save_writes_a_plain_file_with_its_two_attributes(tmp_path):
    """The file's attributes are exactly 'info' and 'format', as
    documented, and its datasets carry none: no checksums, which the
    writer would compute from what it was given, not from the buffers
    written into the file directly."""
    names = [PREDICTIONS, 'Hid.parameters.W']
    extract_and_save(xor_net(), Undivided(**xor_data()), names, tmp_path / 'out.h5')
    with h5py.File(tmp_path / 'out.h5', 'r') as f:
        assert sorted(f.attrs) == ['format', 'info']
        assert f.attrs['format'] == bs.tools.BUFFERS_FILE_FORMAT
        for name in f:
            assert list(f[name].attrs) == []
