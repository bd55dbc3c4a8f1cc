"""The rules of batching at their edges: which samples and time steps each
batch (and each part of a batch) holds, how an empty part read from a file
is shaped, the sequence lengths a mask gives, the blocks in which data in
memory is checked and a mask is read, the checks of a pass and of the
batches a generator makes, and what a description of a base iterator
holds and restores."""

import json

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import FromGenerator, Minibatches, Shard, Undivided
from brainstorm.describable import (
    Describable,
    create_from_description,
    get_description,
)
from brainstorm.randomness import RandomState
from brainstorm.utils import IteratorValidationError
from tests.data_iterators.helpers import CountingReads, batch_ids, in_file, samples

# ------------------------------------------------------ parts of batches ---


def test_the_default_part_of_a_batch_cuts_its_samples_not_its_time_steps():
    """FromGenerator has no own _part: a Shard cuts each whole batch."""
    x = samples(t=2, b=6)
    it = FromGenerator([{'x': x}])
    parts = [list(Shard(it, rank, 2)()) for rank in (0, 1)]
    assert [batch_ids(p) for p in parts] == [[[0, 1, 2]], [[3, 4, 5]]]
    assert [p[0]['x'].shape for p in parts] == [(2, 3, 3), (2, 3, 3)]


@pytest.mark.parametrize('cut', [None, [2, 2, 2, 2, 2]])
def test_an_empty_part_read_from_a_file_is_shaped_as_one_from_memory(tmp_path, cut):
    """Batches of one sample shuffled by samples: part 0 of 2 of each batch
    is empty. It keeps the batch's time steps and feature dimensions, the
    data's dtype, and holds no sample."""
    x = samples(t=3, b=5, f=4).astype(np.float32)
    kwargs = {'shuffle': 'samples', 'cut_according_to': cut}
    from_file = list(
        Shard(Minibatches(1, x=in_file(tmp_path, x=x)['x'], **kwargs), 0, 2)()
    )
    in_memory = list(Shard(Minibatches(1, x=x, **kwargs), 0, 2)())
    steps = 3 if cut is None else 2
    assert [b['x'].shape for b in from_file] == [(steps, 0, 4)] * 5
    assert [b['x'].shape for b in in_memory] == [(steps, 0, 4)] * 5
    assert {b['x'].dtype for b in from_file} == {np.dtype(np.float32)}


# ------------------------------------------------------ sequence lengths ---


def test_a_mask_longer_than_a_block_per_sample_gives_each_sample_its_length():
    """Each sample's mask holds more than a block of values: the samples
    are read one at a time."""
    steps = 2**20 + 1
    mask = np.zeros((steps, 2, 1), dtype=np.uint8)
    mask[4, 0, 0] = 1
    mask[steps - 1, 1, 0] = 1
    x = np.zeros((steps, 2, 1), dtype=np.float32)
    it = Minibatches(1, shuffle=False, default=x, mask=mask)
    np.testing.assert_array_equal(it.seq_lens, [5, steps])


def test_a_mask_is_read_in_blocks_of_about_a_million_values_whatever_its_shape():
    """A mask of 1024 values per sample (one time step of 1024 features):
    blocks of 2**20 // 1024 = 1024 samples, never the whole mask at once."""
    mask = CountingReads(np.ones((1, 2048, 1024), dtype=bool))
    it = Minibatches(4, shuffle=False, default=np.zeros((1, 2048, 1)), mask=mask)
    assert mask.reads == [1024, 1024]
    np.testing.assert_array_equal(it.seq_lens, np.ones(2048))


def test_a_mask_without_values_gives_length_zero_and_batches_keep_one_step():
    mask = np.zeros((2, 3, 0))
    it = Minibatches(2, shuffle=False, default=samples(t=2, b=3), mask=mask)
    np.testing.assert_array_equal(it.seq_lens, [0, 0, 0])
    assert [b['default'].shape for b in it()] == [(1, 2, 3), (1, 1, 3)]


# ------------------------------------------------------ the finite check ---


def test_a_sample_larger_than_a_block_is_checked_on_its_own():
    x = np.zeros((1, 2, 2**20 + 1), dtype=np.float32)
    x[0, 1, 5] = np.nan
    with pytest.raises(IteratorValidationError, match=r'index \(0, 1, 5\): nan'):
        Minibatches(1, default=x)
    x[0, 1, 5] = 0.0
    assert Minibatches(1, default=x).sample_size == 2


def test_the_first_sample_of_a_time_step_larger_than_a_block_is_checked():
    x = np.zeros((2, 2**20 + 7, 1), dtype=np.float32)
    x[1, 0, 0] = np.inf
    with pytest.raises(IteratorValidationError, match=r'index \(1, 0, 0\): inf'):
        Minibatches(1, default=x)


@pytest.mark.parametrize('klass', [Undivided, Minibatches])
def test_data_refused_as_not_finite_draws_no_seed_from_the_global_state(klass):
    """A refused iterator leaves the seeds that later objects draw as they
    were (the check comes before the iterator's random state is made)."""
    x = samples()
    x[1, 2, 0] = np.nan
    bs.global_rnd.set_seed(3)
    with pytest.raises(IteratorValidationError, match='NaN or infinite'):
        klass(x=x)
    after_refusal = bs.global_rnd.generate_seed()
    bs.global_rnd.set_seed(3)
    assert bs.global_rnd.generate_seed() == after_refusal


# ---------------------------------------------------------------- passes ---


class _Resizable(CountingReads):
    """Data read on demand whose shape can change (as a resizable dataset's)."""


def test_a_pass_over_resized_data_is_refused_before_it_draws_its_order():
    """Its data set back to the shape it had, the iterator yields the
    passes of a twin built under the same seed."""
    x = _Resizable(samples(b=6))
    bs.global_rnd.set_seed(5)
    it = Minibatches(2, x=x)
    bs.global_rnd.set_seed(5)
    twin = Minibatches(2, x=samples(b=6))
    x.shape = (2, 4, 3)
    with pytest.raises(IteratorValidationError, match="data 'x' had shape"):
        next(it())
    x.shape = (2, 6, 3)
    assert [batch_ids(it()) for _ in range(3)] == [batch_ids(twin()) for _ in range(3)]


class _FailingReads(CountingReads):
    """Data read on demand whose reader has a bug."""

    def __getitem__(self, index):
        raise RuntimeError('a bug in the reader')


def test_an_error_of_a_reader_other_than_a_read_failure_is_not_disguised():
    """Only an OSError (a file that cannot be read) becomes an
    IteratorValidationError naming the source; a RuntimeError of an open
    array-like goes on as it is."""
    it = Minibatches(2, x=_FailingReads(samples()))
    with pytest.raises(RuntimeError, match='a bug in the reader') as info:
        next(it())
    assert type(info.value) is RuntimeError


# ------------------------------------------------- FromGenerator's checks ---


def test_a_generated_batch_without_time_steps_is_refused_even_for_one_sample():
    it = FromGenerator([{'x': np.zeros((0, 1, 3))}], data_shapes={'x': (1, 1, 3)})
    with pytest.raises(IteratorValidationError, match='has no time steps'):
        list(it())


def test_the_first_batch_looked_at_for_the_shapes_is_named_batch_0():
    with pytest.raises(IteratorValidationError, match='batch 0 of the pass must be'):
        FromGenerator(lambda: iter([['not', 'a', 'dict']]))
    with pytest.raises(IteratorValidationError, match="data 'x' of batch 0 "):
        FromGenerator(lambda: iter([{'x': np.zeros((2, 3))}]))


def test_the_generator_made_to_find_the_shapes_is_closed_at_once():
    """Not left to the garbage collector: its ``finally`` (a file it
    opened) runs while the iterator is built, even where the generator is
    still referenced."""
    made, closed = [], []

    def batches():
        try:
            yield {'x': samples()}
            yield {'x': samples()}
        finally:
            closed.append(True)

    def make():
        made.append(batches())
        return made[-1]

    FromGenerator(make)
    assert (len(made), closed) == (1, [True])


# ---------------------------------------------------------- descriptions ---

MAKERS = {
    'Undivided': lambda **kw: Undivided(x=samples(b=3), **kw),
    'Minibatches': lambda **kw: Minibatches(2, x=samples(b=3), **kw),
    'FromGenerator': lambda **kw: FromGenerator([{'x': samples(b=3)}], **kw),
}


def _round_trip(iterator):
    return create_from_description(json.loads(json.dumps(get_description(iterator))))


@pytest.mark.parametrize('name', sorted(MAKERS))
def test_a_description_leaves_check_finite_out_at_its_default(name):
    """As Brainstorm 0.5 described the iterators; False is described, and
    both restore."""
    make = MAKERS[name]
    assert 'check_finite' not in get_description(make())
    assert get_description(make(check_finite=False))['check_finite'] is False
    assert _round_trip(make()).check_finite is True
    assert _round_trip(make(check_finite=False)).check_finite is False


@pytest.mark.parametrize(
    'name, field', [('Undivided', 'total_size'), ('Minibatches', 'sample_size')]
)
def test_an_edited_count_of_no_samples_is_refused_naming_the_data_s_count(name, field):
    description = json.loads(json.dumps(get_description(MAKERS[name]())))
    description[field] = 0
    with pytest.raises(IteratorValidationError) as info:
        create_from_description(description)
    assert f'{field} must be the number of samples of the data: 3 ' in str(info.value)


def test_a_restored_generator_iterator_has_the_shapes_and_a_random_state_of_its_own():
    it = MAKERS['FromGenerator']()
    restored = _round_trip(it)
    assert restored.data_shapes == it.data_shapes == {'x': (2, 3, 3)}
    assert isinstance(restored.rnd, RandomState) and restored.rnd is not it.rnd
    assert batch_ids(restored()) == batch_ids(it()) == [[0, 1, 2]]


class _DescribedBatches(Describable):
    """An iterator of two batches that is its own description."""

    def __init__(self, n=2):
        self.n, self.i = n, 0

    def __iter__(self):
        return self

    def __next__(self):
        if self.i >= self.n:
            raise StopIteration
        self.i += 1
        return {'default': np.full((1, 2, 3), float(self.i))}


def test_a_restored_generator_over_a_describable_iterator_gives_its_first_pass():
    """Batches that are a describable iterator (not a list) are described
    and restored as such: the restored FromGenerator's first pass gives
    them all, as the built one's does; only a second pass finds the
    iterator used up."""
    it = FromGenerator(_DescribedBatches(), data_shapes={'default': (1, 2, 3)})
    restored = create_from_description(get_description(it))
    firsts = [float(b['default'][0, 0, 0]) for b in restored()]
    assert firsts == [1.0, 2.0]
    with pytest.raises(IteratorValidationError, match='used up'):
        list(restored())


def test_a_described_batch_without_dtypes_is_reported_as_described():
    """Without data_dtypes the described batches are left as they are
    until a pass checks them: a value of too few dimensions is refused
    showing the list the description holds (not an array made of it)."""
    description = json.loads(json.dumps(get_description(MAKERS['FromGenerator']())))
    del description['data_dtypes']
    description['batches'].append({'x': [[0.0, 1.0]]})
    restored = create_from_description(description)
    with pytest.raises(IteratorValidationError) as info:
        list(restored())
    message = str(info.value)
    assert "data 'x' of batch 1" in message, message
    assert message.endswith('Received: [[0.0, 1.0]]'), message


def test_a_described_list_of_batches_without_dtypes_is_checked_when_used():
    """A description written before data_dtypes loads as before: a batch
    value that is no array is refused when its pass reaches it, as the
    batches given to the constructor are, with the iterator's error."""
    description = json.loads(json.dumps(get_description(MAKERS['FromGenerator']())))
    del description['data_dtypes']
    description['batches'].append({'x': [[[0.0, 1.0, 2.0], [0.0]]]})
    restored = create_from_description(description)
    batches = restored()
    assert batch_ids([next(batches)]) == [[0, 1, 2]]
    with pytest.raises(IteratorValidationError, match="data 'x' of batch 1 must be"):
        next(batches)
