"""DataParallel's rules, stated in this process with ranks as threads.

The ``mpi`` tests of tests/training/test_data_parallel.py state these
rules under ``mpiexec -n 2``, but they are skipped without mpi4py and run
in subprocesses (which coverage, and so the mutation runner, does not
see). Here every rank is a thread with its own network, stepper and
iterators, joined by ``ThreadComm``, a stand-in communicator whose
collectives (``Bcast``, ``Allreduce``, ``allgather``, ...) exchange the
ranks' values as MPI would: each rank's result is compared with one
process training on the global batches.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import (
    AddGaussianNoise,
    FromGenerator,
    Minibatches,
    Shard,
)
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.hooks import Hook, StopAfterEpoch
from brainstorm.layers import BatchNorm, FullyConnected
from brainstorm.training import DataParallel, Trainer, data_parallel
from brainstorm.training.steppers import (
    ForwardStepper,
    MomentumStepper,
    SgdStepper,
)
from brainstorm.utils import TrainingValidationError
from brainstorm.value_modifiers import ClipValues, ConstrainL2Norm
from tests.training.nets import batchnorm_net, blob_data, xor_data, xor_net

IN_PLACE = 'IN_PLACE'  # what DataParallel passes for MPI.IN_PLACE here
WAIT = 20  # seconds a rank waits for the others in a collective


class Hub:
    """What the ranks of one run share: a barrier and a slot per rank."""

    def __init__(self, size):
        self.size = size
        self.barrier = threading.Barrier(size, timeout=WAIT)
        self.slots = [None] * size
        self.calls = []  # (rank, name), in the order the ranks made them


class ThreadComm:
    """Rank ``rank`` of the ranks of ``hub``: the collectives exchange the
    values of all ranks (each waits for the others) as MPI's do."""

    def __init__(self, hub, rank):
        self.hub, self.rank = hub, rank

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return self.hub.size

    def _exchange(self, name, value):
        hub = self.hub
        hub.calls.append((self.rank, name))
        hub.slots[self.rank] = value
        hub.barrier.wait()
        values = list(hub.slots)
        hub.barrier.wait()
        return values

    def Bcast(self, values, root=0):
        values[...] = self._exchange('Bcast', np.array(values))[root]

    def Allreduce(self, in_place, values):
        assert in_place == IN_PLACE
        parts = self._exchange('Allreduce', np.array(values))
        total = parts[0].copy()
        for part in parts[1:]:
            total += part
        values[...] = total

    def allgather(self, obj):
        return self._exchange('allgather', obj)

    def gather(self, obj, root=0):
        values = self._exchange('gather', obj)
        return values if self.rank == root else None

    def allreduce(self, x):
        return sum(self._exchange('allreduce', x))

    def bcast(self, obj, root=0):
        return self._exchange('bcast', obj)[root]

    def Barrier(self):
        self._exchange('Barrier', None)


@pytest.fixture(autouse=True)
def without_mpi(monkeypatch):
    """No excepthook that aborts a job, and a stand-in for MPI.IN_PLACE."""
    monkeypatch.setattr(data_parallel, 'abort_on_exception', lambda comm: None)
    monkeypatch.setattr(DataParallel, '_mpi_in_place', staticmethod(lambda: IN_PLACE))


def run_ranks(build, size=2, expect_errors=False):
    """Train ``size`` ranks, each in a thread of its own.

    ``build(rank, comm)`` is called for each rank in turn, in this thread
    (so that what draws from ``global_rnd`` draws in a fixed order), and
    returns the rank's work, a function without arguments; the ranks' works
    then run at once. Returns their results, or (with ``expect_errors``)
    their results and exceptions; otherwise a rank's exception is raised.
    """
    hub = Hub(size)
    work = [build(rank, ThreadComm(hub, rank)) for rank in range(size)]
    results = [None] * size
    errors = [None] * size

    def target(rank):
        try:
            results[rank] = work[rank]()
        except BaseException as err:  # handed to the test
            errors[rank] = err
            hub.barrier.abort()  # the others stop waiting for this rank

    threads = [
        threading.Thread(target=target, args=(r,), daemon=True) for r in range(size)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT * 3)
        assert not thread.is_alive(), 'a rank hangs'
    if expect_errors:
        return results, errors
    first = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    for err in first + errors:
        if err is not None:
            raise err
    return results


# ------------------------------------------------------------ networks ----


def blob_net(seed, handler=None):
    """Input(4) -> FC 'Hid' (5, tanh) -> projection (3) -> softmax CE."""
    inp, proj = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> FullyConnected(5, activation='tanh', name='Hid') >> proj
    )
    net.set_handler(handler or NumpyHandler(np.float64, seed=seed))
    net.initialize(bs.initializers.Gaussian(0.5), seed=seed)
    return net


def handler_of(kind):
    """A NumpyHandler, or one whose arrays are no NumPy arrays (like a
    GPU's: MPI gets host copies)."""
    if kind == 'numpy':
        return NumpyHandler(np.float64)
    return DebugHandler(NumpyHandler(np.float64))


HANDLERS = ['numpy', 'host copies']

# 13 samples in global batches of 5: batches of 5, 5 and 3, split 2 / 3,
# 2 / 3 and 1 / 2 over two ranks (unequal local batch sizes); 11 samples
# end with a global batch of 1 sample, split 0 / 1 (rank 0's is empty)
DATA = blob_data(13, seed=1)
SIZES = [13, 11]


def train(net, iterator, stepper, epochs=2, hooks=()):
    trainer = Trainer(stepper, verbose=False)
    for hook in hooks:
        trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(epochs))
    trainer.train(net, iterator)
    return trainer


# ---------------------------------------------- like one process -------


@pytest.mark.parametrize('n', SIZES)
@pytest.mark.parametrize('kind', HANDLERS)
def test_two_ranks_train_like_one_process_on_the_global_batches(kind, n):
    """Rank 1 starts from other parameters and shuffles with another
    seed: it gets rank 0's parameters and shuffle, and the gradients of
    local batches of 2 and 3 samples are weighted into the gradient of
    the global batch of 5 (also where one rank's batch is empty)."""
    data = blob_data(n, seed=1)

    def build(rank, comm):
        net = blob_net(seed=2 + 5 * rank, handler=handler_of(kind))
        iterator = Minibatches(5, shuffle=True, **data)
        iterator.rnd.set_seed(11 + rank)
        stepper = DataParallel(MomentumStepper(0.2, 0.5), comm=comm)

        def go():
            train(net, Shard(iterator, rank=rank, size=2), stepper)
            return net.get('parameters')

        return go

    ranks = run_ranks(build)
    net = blob_net(seed=2, handler=handler_of(kind))
    iterator = Minibatches(5, shuffle=True, **data)
    iterator.rnd.set_seed(11)
    train(net, iterator, MomentumStepper(0.2, 0.5))
    single = net.get('parameters')
    assert not np.allclose(single, blob_net(seed=2).get('parameters'))
    np.testing.assert_array_equal(ranks[0], ranks[1])
    np.testing.assert_allclose(ranks[0], single, rtol=1e-12, atol=1e-14)


def test_gradient_modifiers_act_on_the_global_batchs_gradient():
    """Clipping and a norm bound are not linear: applied to each rank's
    part before the sum they would give another step."""

    def make(seed):
        net = blob_net(seed)
        net.set_gradient_modifiers(
            Hid=ClipValues(-0.02, 0.02), Output=ConstrainL2Norm(0.05)
        )
        return net

    def build(rank, comm):
        net = make(seed=4 + rank)
        iterator = Minibatches(5, shuffle=False, **DATA)
        stepper = DataParallel(SgdStepper(0.5), comm=comm)
        return lambda: (train(net, Shard(iterator, rank=rank, size=2), stepper), net)[1]

    ranks = run_ranks(build)
    net = make(seed=4)
    train(net, Minibatches(5, shuffle=False, **DATA), SgdStepper(0.5))
    for rank in ranks:
        np.testing.assert_allclose(
            rank.get('parameters'), net.get('parameters'), rtol=1e-12, atol=1e-14
        )
    # the network's random state (seeding the modifiers) is rank 0's
    assert ranks[1].rnd.get_seed() == ranks[0].rnd.get_seed()
    assert ranks[1].rnd.get_state()[2] == ranks[0].rnd.get_state()[2]


# --------------------------------------------------- running statistics ----


def statistics_data(n=13):
    rnd = np.random.RandomState(0)
    return {
        'default': rnd.randn(1, n, 3) * 2 + np.arange(n)[None, :, None] / 4,
        'targets': rnd.randint(0, 2, (1, n, 1)),
    }


@pytest.mark.parametrize('kind', HANDLERS)
def test_running_means_follow_the_global_batches_weighted_by_samples(kind):
    """With the parameters fixed (learning rate 0) BatchNorm's running mean
    depends only on the means of the global batches: the ranks' updates
    from their 2 and 3 samples are weighted 2/5 and 3/5, not 1/2 each."""
    data = statistics_data()

    def make(seed):
        net = batchnorm_net(seed=seed)
        net.set_handler(handler_of(kind))
        return net

    def build(rank, comm):
        net = make(seed=2 + rank)
        iterator = Shard(Minibatches(5, shuffle=False, **data), rank=rank, size=2)
        stepper = DataParallel(MomentumStepper(0.0, 0.5), comm=comm)
        return lambda: (train(net, iterator, stepper), net)[1]

    ranks = run_ranks(build)
    net = make(seed=2)
    before = net.get('BN.parameters.mu')
    train(net, Minibatches(5, shuffle=False, **data), MomentumStepper(0.0, 0.5))
    single = net.get('BN.parameters.mu')
    assert not np.allclose(single, before)
    for rank in ranks:
        np.testing.assert_allclose(
            rank.get('BN.parameters.mu'), single, rtol=1e-12, atol=1e-14
        )
        # the trained parameters did not move: only the statistics did
        np.testing.assert_array_equal(
            rank.get('Hid.parameters.W'), net.get('Hid.parameters.W')
        )


def forward_statistics_net():
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> BatchNorm(name='BN') >> out)
    net.set_handler(NumpyHandler(np.float64, seed=1))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


@pytest.mark.parametrize('n', SIZES)
def test_a_forward_stepper_averages_the_running_statistics(n):
    """ForwardStepper(use_training_pass=True) re-estimates BatchNorm's
    statistics without a backward pass: they are averaged after its step,
    weighted by the ranks' samples (2 and 3 of 5, 0 and 1 of 1)."""
    data = statistics_data(n)

    def build(rank, comm):
        net = forward_statistics_net()
        iterator = Shard(Minibatches(5, shuffle=False, **data), rank=rank, size=2)
        stepper = DataParallel(ForwardStepper(use_training_pass=True), comm=comm)
        return lambda: (train(net, iterator, stepper, epochs=1), net)[1]

    ranks = run_ranks(build)
    net = forward_statistics_net()
    train(net, Minibatches(5, shuffle=False, **data), ForwardStepper(True), epochs=1)
    single = net.get('BN.parameters.mu')
    assert not np.allclose(single, forward_statistics_net().get('BN.parameters.mu'))
    for rank in ranks:
        np.testing.assert_allclose(
            rank.get('BN.parameters.mu'), single, rtol=1e-12, atol=1e-14
        )


def test_constant_untrained_parameters_stay_exact():
    """A Clockwork layer's timing (trainable_mask 0, changed by no rank)
    stays [1, 2, 4, 7] to the last bit: a weighted mean of equal values
    gave 6.999999999999999, which switched a unit off."""
    from tests.training.mpi_worker import clockwork_data, clockwork_net

    data = clockwork_data()

    def build(rank, comm):
        net = clockwork_net()
        iterator = Shard(Minibatches(3, shuffle=False, **data), rank=rank, size=2)
        stepper = DataParallel(SgdStepper(0.01), comm=comm)
        return lambda: (train(net, iterator, stepper), net)[1]

    for net in run_ranks(build):
        assert net.get('Clockwork.parameters.timing').tolist() == [1.0, 2.0, 4.0, 7.0]


# ----------------------------------------------------- empty batches ----


def empty_batch_net():
    inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float64, seed=1))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def three_batches():
    rnd = np.random.RandomState(0)
    x, y = rnd.randn(1, 8, 2), rnd.randn(1, 8, 1)

    def batches():
        yield {'default': x[:, :4], 'targets': y[:, :4]}
        yield {'default': x[:, :0], 'targets': y[:, :0]}
        yield {'default': x[:, 4:], 'targets': y[:, 4:]}

    return FromGenerator(batches, length=3)


def test_a_global_batch_without_samples_is_a_zero_step():
    """Every rank gets an empty part of the empty global batch: a step of
    zero gradients (momentum still moves the parameters), as in one
    process."""

    def build(rank, comm):
        net = empty_batch_net()
        iterator = Shard(three_batches(), rank=rank, size=2)
        stepper = DataParallel(MomentumStepper(0.1), comm=comm)
        return lambda: (train(net, iterator, stepper), net)[1]

    ranks = run_ranks(build)
    net = empty_batch_net()
    train(net, three_batches(), MomentumStepper(0.1))
    for rank in ranks:
        np.testing.assert_allclose(
            rank.get('parameters'), net.get('parameters'), rtol=1e-12, atol=1e-14
        )


def test_a_forward_stepper_leaves_statistics_alone_on_an_empty_global_batch():
    """Without samples there is nothing to average (the weights would be
    0 / 0): the statistics stay as they were, on every rank."""

    def build(rank, comm):
        net = forward_statistics_net()
        stepper = DataParallel(ForwardStepper(use_training_pass=True), comm=comm)

        def go():
            stepper.start(net)
            mu = net.get('BN.parameters.mu')
            net.provide_external_data(
                {'default': np.zeros((1, 0, 3)), 'targets': np.zeros((1, 0, 1))}
            )
            stepper.run()
            return mu, net.get('BN.parameters.mu')

        return go

    ranks = run_ranks(build)
    for before, after in ranks:
        np.testing.assert_array_equal(after, before)


# ---------------------------------------------------- finite gradients ----


def nan_on_rank_1(check_finite):
    def build(rank, comm):
        net = blob_net(seed=3)
        stepper = DataParallel(SgdStepper(0.1), comm=comm, check_finite=check_finite)
        inputs = DATA['default'][:, :4].copy()
        if rank == 1:
            inputs[0, 1, 2] = np.nan

        def go():
            stepper.start(net)
            net.provide_external_data(
                {'default': inputs, 'targets': DATA['targets'][:, :4]},
                check_finite=False,
            )
            stepper.run()
            return net.get('parameters')

        return go

    return run_ranks(build, expect_errors=True)


def test_non_finite_gradients_are_refused_naming_the_rank():
    """Checked before the Allreduce, which would spread the NaN to every
    rank: rank 1 raises, and rank 0 never gets a sum to step with."""
    results, errors = nan_on_rank_1(check_finite=True)
    assert isinstance(errors[1], FloatingPointError)
    message = str(errors[1])
    assert 'rank 1 of 2' in message
    assert 'local batch size 4' in message
    assert isinstance(errors[0], threading.BrokenBarrierError)
    assert results == [None, None]


def test_without_the_check_a_non_finite_gradient_reaches_every_rank():
    results, errors = nan_on_rank_1(check_finite=False)
    assert errors == [None, None]
    for parameters in results:
        assert np.isnan(parameters).any()


# ------------------------------------------------------ random states ----


def random_states(size=2, seed=7):
    """Each rank's network and handler states after ``start``: every rank
    built the same network (handler seed ``seed``), and seeded the
    network's random state differently."""

    def build(rank, comm):
        net = blob_net(seed=3, handler=NumpyHandler(np.float64, seed=seed))
        net.rnd.set_seed(20 + rank)
        stepper = DataParallel(SgdStepper(0.1), comm=comm)

        def go():
            stepper.start(net)
            return {
                'net_seed': net.rnd.get_seed(),
                'net_draws': net.rnd.random_sample(3).tolist(),
                'handler_seed': net.handler.rnd.get_seed(),
                'handler_draws': net.handler.rnd.random_sample(3).tolist(),
            }

        return go

    return run_ranks(build, size=size)


def test_the_networks_random_state_is_rank_0s_on_every_rank():
    """It seeds the gradient modifiers, which act on the same summed
    gradients everywhere: seed and stream are rank 0's."""
    ranks = random_states(size=3)
    for rank in ranks:
        assert rank['net_seed'] == 20
        assert rank['net_draws'] == ranks[0]['net_draws']


def test_each_rank_draws_its_own_stream_from_the_handlers_seed():
    """Rank 0 keeps the handler's stream; every other rank gets one of its
    own, derived from the seed and the rank, reproducibly."""
    ranks = random_states(size=3)
    assert ranks[0]['handler_seed'] == 7
    assert (
        ranks[0]['handler_draws']
        == NumpyHandler(np.float64, seed=7).rnd.random_sample(3).tolist()
    )
    seeds = [rank['handler_seed'] for rank in ranks]
    draws = [tuple(rank['handler_draws']) for rank in ranks]
    assert len(set(seeds)) == 3 and len(set(draws)) == 3
    for seed in seeds:
        assert 0 <= seed < 1000000000
    assert random_states(size=3) == ranks
    # another seed gives other streams on the other ranks too
    other = random_states(size=3, seed=8)
    assert other[1]['handler_seed'] not in seeds
    assert other[2]['handler_seed'] not in seeds


def test_streams_are_reseeded_once_per_network_and_handler():
    """A second start (a second train call) continues the streams; a
    handler set since gets a stream of its own on rank 1 at the next
    step, and so does another network."""

    def build(rank, comm):
        net = blob_net(seed=3, handler=NumpyHandler(np.float64, seed=7))
        other = blob_net(seed=3, handler=NumpyHandler(np.float64, seed=7))
        stepper = DataParallel(SgdStepper(0.1), comm=comm)
        data = {'default': DATA['default'][:, :4], 'targets': DATA['targets'][:, :4]}

        def go():
            seeds = []
            stepper.start(net)
            seeds.append(net.handler.rnd.get_seed())
            stepper.start(net)
            net.provide_external_data(data)
            stepper.run()
            seeds.append(net.handler.rnd.get_seed())
            net.set_handler(NumpyHandler(np.float64, seed=7))
            net.provide_external_data(data)
            stepper.run()
            seeds.append(net.handler.rnd.get_seed())
            stepper.start(other)
            seeds.append(other.handler.rnd.get_seed())
            return seeds

        return go

    rank0, rank1 = run_ranks(build)
    assert rank0 == [7, 7, 7, 7]
    assert rank1[0] != 7
    assert rank1 == [rank1[0]] * 4  # each reseeded from seed 7 and rank 1


def test_a_network_moved_to_float32_keeps_averaging_its_statistics():
    """BatchNorm's statistics go through scratch arrays in the
    parameters' dtype: after set_handler to float32 during training they
    are still averaged like one process's."""
    data = statistics_data()

    class ToFloat32(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if epoch_nr == 1:
                net.set_handler(NumpyHandler(np.float32, seed=5))

    def build(rank, comm):
        net = batchnorm_net(seed=2)
        iterator = Shard(Minibatches(5, shuffle=False, **data), rank=rank, size=2)
        stepper = DataParallel(MomentumStepper(0.0), comm=comm)
        return lambda: (train(net, iterator, stepper, 3, [ToFloat32()]), net)[1]

    ranks = run_ranks(build)
    net = batchnorm_net(seed=2)
    train(
        net,
        Minibatches(5, shuffle=False, **data),
        MomentumStepper(0.0),
        3,
        [ToFloat32()],
    )
    single = net.get('BN.parameters.mu')
    assert single.dtype == np.float32
    for rank in ranks:
        mu = rank.get('BN.parameters.mu')
        assert mu.dtype == np.float32
        np.testing.assert_allclose(mu, single, rtol=1e-5)


# ----------------------------------------------------- the iterators ----


def shard_chain(rank, seed):
    """Noise above a Shard of shuffled batches, each seeded by ``seed``
    and the rank (as processes that never call ``global_rnd.set_seed``)."""
    base = Minibatches(2, shuffle=True, **blob_data(6, seed=0))
    base.rnd.set_seed(seed + rank)
    base.rnd.standard_normal()  # a Gaussian kept for the next draw
    shard = Shard(base, rank=rank, size=2)
    shard.rnd.set_seed(seed + 10 + rank)
    noisy = AddGaussianNoise(shard, {'default': 1.0})
    noisy.rnd.set_seed(seed + 20 + rank)
    return noisy, shard, base


def states(iterator):
    kind, key, pos, has_gauss, cached = iterator.rnd.get_state()
    return iterator.rnd.get_seed(), key.tolist(), pos, has_gauss, cached


def test_the_shard_and_what_it_wraps_get_rank_0s_random_states():
    """So that every rank walks through the same global batches; the
    iterators above the Shard keep theirs (they are reseeded per rank)."""

    def build(rank, comm):
        chain = shard_chain(rank, seed=30)
        plain = Minibatches(2, shuffle=True, **blob_data(6, seed=0))
        plain.rnd.set_seed(50 + rank)

        def go():
            data_parallel.share_shard_states(comm, [chain[0], plain])
            return [states(it) for it in chain + (plain,)]

        return go

    rank0, rank1 = run_ranks(build)
    # rank 0 keeps its own
    assert rank0[:3] == [states(it) for it in shard_chain(0, seed=30)]
    assert rank0[3][0] == 50
    noisy, shard, base = shard_chain(1, seed=30)
    assert rank1[0] == states(noisy)  # above the Shard: rank 1's own
    assert rank1[1:3] == rank0[1:3]  # the Shard and below it: rank 0's
    assert rank1[1][0] == 40 and rank1[2][0] == 30  # with rank 0's seeds
    assert rank1[2][3] == 1 and rank1[1][3] == 0  # and kept Gaussians
    assert rank1[3][0] == 51  # without a Shard: left alone
    assert rank1[3] != rank0[3]


@pytest.mark.parametrize('comm', [None, object(), SgdStepper()])
def test_sharing_shard_states_needs_a_communicator_of_two_ranks(comm):
    noisy, shard, base = shard_chain(1, seed=30)
    before = [states(it) for it in (noisy, shard, base)]
    data_parallel.share_shard_states(comm, [noisy])
    assert [states(it) for it in (noisy, shard, base)] == before


def test_sharing_shard_states_on_one_rank_calls_no_collective():
    class OneRank:
        def Get_size(self):
            return 1

        def Get_rank(self):
            return 0

    noisy, shard, base = shard_chain(1, seed=30)
    before = [states(it) for it in (noisy, shard, base)]
    data_parallel.share_shard_states(OneRank(), [noisy])
    assert [states(it) for it in (noisy, shard, base)] == before


# -------------------------------------------------- what a step sends ----


def collectives(make_net, stepper, steps=2):
    """The collective calls rank 0 makes in ``start`` and in each step."""
    data = statistics_data(8)

    def build(rank, comm):
        net = make_net()
        wrapped = DataParallel(stepper(), comm=comm)

        def go():
            wrapped.start(net)
            calls = [[name for r, name in comm.hub.calls if r == 0]]
            for _ in range(steps):
                done = len([r for r, _ in comm.hub.calls if r == 0])
                net.provide_external_data(
                    {name: d[:, 4 * rank : 4 * rank + 4] for name, d in data.items()}
                )
                wrapped.run()
                calls.append([n for r, n in comm.hub.calls if r == 0][done:])
            return calls

        return go

    return run_ranks(build)[0]


def test_a_step_sums_the_gradients_with_one_allreduce():
    """Start: the parameter counts, rank 0's parameters and its network's
    random state (key and position). Each step: the global batch size,
    then the gradients in one Allreduce."""
    calls = collectives(lambda: batchnorm_net(seed=2), lambda: SgdStepper(0.1))
    start, steps = calls[0], calls[1:]
    assert start == ['allgather', 'Bcast', 'Bcast', 'Bcast']
    # with running statistics, they are averaged before the gradients
    assert steps == [['Allreduce', 'Allreduce', 'Allreduce']] * 2

    def plain():
        inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
        net = bs.Network.from_layer(inp >> FullyConnected(4, name='Hid') >> out)
        net.initialize(bs.initializers.Gaussian(0.5), seed=1)
        return net

    calls = collectives(plain, lambda: SgdStepper(0.1))
    assert calls[1:] == [['Allreduce', 'Allreduce']] * 2


def test_a_step_without_backward_pass_averages_the_statistics_once():
    calls = collectives(forward_statistics_net, lambda: ForwardStepper(True))
    assert calls[1:] == [['Allreduce', 'Allreduce']] * 2


def test_the_network_applies_its_gradient_modifiers_again_after_a_step():
    """DataParallel defers the network's gradient modifiers during its
    backward pass (they act on the summed gradients) and leaves the
    network as it found it: a backward pass of its own clips again."""

    def build(rank, comm):
        net = blob_net(seed=4)
        net.set_gradient_modifiers(Hid=ClipValues(-0.001, 0.001))
        stepper = DataParallel(SgdStepper(0.5), comm=comm)
        data = {'default': DATA['default'][:, :4], 'targets': DATA['targets'][:, :4]}

        def go():
            stepper.start(net)
            net.provide_external_data(data)
            stepper.run()
            net.forward_pass(training_pass=True)
            net.backward_pass()
            return net.get('Hid.gradients.W')

        return go

    for gradients in run_ranks(build):
        assert np.abs(gradients).max() == pytest.approx(0.001)


def test_only_rank_0_needs_initialised_parameters():
    """Rank 1's network gets rank 0's parameters, also where those are
    zeros on purpose (net.initialize(0.0)): it counts as set."""

    def build(rank, comm):
        inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
        net = bs.Network.from_layer(inp >> out)
        if rank == 0:
            net.initialize(0.0)
        iterator = Shard(Minibatches(5, shuffle=False, **DATA), rank=rank, size=2)
        stepper = DataParallel(SgdStepper(0.1), comm=comm)
        return lambda: (train(net, iterator, stepper, epochs=1), net)[1]

    rank0, rank1 = run_ranks(build)
    np.testing.assert_array_equal(rank1.get('parameters'), rank0.get('parameters'))
    assert rank0.get('parameters').any()


# ------------------------------------------------ the stepper's faces ----


class KeepsNames(SgdStepper):
    """A stepper with attributes named like DataParallel's own."""

    def __init__(self, learning_rate=0.1):
        super().__init__(learning_rate)
        self.timeout = 'inner'
        self.check_finite = 'inner'
        self._comm = 'inner'
        self._sizes = 'inner'


class OneRank:
    def Get_size(self):
        return 1

    def Get_rank(self):
        return 0


def test_dataparallels_own_attributes_stay_its_own():
    """Also where the wrapped stepper has attributes of the same names:
    setting them on DataParallel changes DataParallel's, not the
    stepper's, and its internals never reach the stepper."""
    inner = KeepsNames()
    comm = OneRank()
    stepper = DataParallel(inner, comm=comm, check_finite=False, timeout=5.0)
    assert (stepper.check_finite, stepper.timeout) == (False, 5.0)
    stepper.timeout = 7.0
    stepper.check_finite = True
    assert (stepper.timeout, stepper.check_finite) == (7.0, True)
    assert stepper.comm is comm
    assert (inner.timeout, inner.check_finite, inner._comm, inner._sizes) == (
        'inner',
        'inner',
        'inner',
        'inner',
    )
    # public attributes of the stepper are reached through DataParallel
    stepper.learning_rate = 0.3
    assert inner.learning_rate == 0.3 and 'learning_rate' not in vars(stepper)
    # names the stepper lacks are DataParallel's
    stepper.note = 'mine'
    assert vars(stepper)['note'] == 'mine' and not hasattr(inner, 'note')


def test_private_attributes_of_the_stepper_are_not_forwarded():
    inner = SgdStepper(0.1)
    assert hasattr(inner, '_bound')
    stepper = DataParallel(inner, comm=OneRank())
    assert not hasattr(stepper, '_bound')
    assert stepper.learning_rate == 0.1


def test_the_declared_example_communicator_is_one_process():
    """The declared arguments' example (what the argument tests build
    with) is rank 0 of 1: DataParallel with it is the wrapped stepper."""
    example = DataParallel.__arguments__['comm'].check.example
    stepper = DataParallel(MomentumStepper(0.3, 0.9), comm=example)
    assert (stepper.rank, stepper.size) == (0, 1)
    net = xor_net(seed=2)
    stepper.start(net)
    net.provide_external_data(xor_data())
    stepper.run()
    plain = xor_net(seed=2)
    single = MomentumStepper(0.3, 0.9)
    single.start(plain)
    plain.provide_external_data(xor_data())
    single.run()
    np.testing.assert_array_equal(net.get('parameters'), plain.get('parameters'))


@pytest.mark.parametrize('timeout', [None, 1e-3, 0.5, 600.0, float('inf')])
def test_a_timeout_is_none_or_any_positive_number_of_seconds(timeout):
    stepper = DataParallel(SgdStepper(), timeout=timeout)
    assert stepper.timeout == timeout


@pytest.mark.parametrize('timeout', [0, 0.0, -1.0, float('nan')])
def test_a_timeout_of_no_seconds_is_refused(timeout):
    with pytest.raises(TrainingValidationError, match='timeout'):
        DataParallel(SgdStepper(), timeout=timeout)


def test_the_default_timeout_is_left_out_of_the_description():
    assert 'timeout' not in bs.get_description(DataParallel(SgdStepper()))
    described = bs.get_description(DataParallel(SgdStepper(), timeout=30.0))
    assert described['timeout'] == 30.0
    assert 'comm' not in described


# ------------------------------------------------- protecting the job ----


def test_start_with_two_ranks_installs_the_abort_on_exceptions(monkeypatch):
    """An uncaught exception on a rank must end the job, not leave the
    others waiting in a collective; one process needs no such hook."""
    installed = []
    monkeypatch.setattr(data_parallel, 'abort_on_exception', installed.append)

    def build(rank, comm):
        net = blob_net(seed=3)
        stepper = DataParallel(SgdStepper(0.1), comm=comm)
        return lambda: (stepper.start(net), comm)[1]

    comms = run_ranks(build)
    assert sorted(installed, key=id) == sorted(comms, key=id)
    DataParallel(SgdStepper(0.1), comm=OneRank()).start(blob_net(seed=3))
    assert len(installed) == 2


def test_a_new_stepper_protects_the_job_at_once(monkeypatch):
    """Made (or restored from a description), DataParallel protects the
    job with its communicator and timeout, before train() is called: a
    rank failing before then must not leave the others waiting."""
    calls = []
    monkeypatch.setattr(
        data_parallel,
        'protect_job',
        lambda comm, timeout: calls.append((comm, timeout)),
    )
    comm = OneRank()
    DataParallel(SgdStepper(), comm=comm, timeout=12.0)
    assert calls == [(comm, 12.0)]
    description = bs.get_description(DataParallel(SgdStepper(), timeout=None))
    calls.clear()
    restored = bs.create_from_description(description)
    assert isinstance(restored, DataParallel)
    assert calls == [(None, None)]


# ----------------------------------------------- deriving the streams ----


def derived_seed(seed, rank):
    folded = np.random.SeedSequence([seed, rank]).generate_state(1)[0]
    return int(folded) % bs.randomness.RandomState.seed_range[1]


def test_a_ranks_seed_is_derived_from_the_seed_and_the_rank_alone():
    """So that a script reproduces its runs, also across releases: rank
    r's stream is seeded with NumPy's SeedSequence([seed, r]), folded
    into the range of the seeds brainstorm makes (RandomState.seed_range)."""
    ranks = random_states(size=3, seed=7)
    assert [rank['handler_seed'] for rank in ranks] == [
        7,
        derived_seed(7, 1),
        derived_seed(7, 2),
    ]
    assert derived_seed(7, 1) != derived_seed(7, 2)


class SeedOnly:
    """A random state that can be seeded but tells no seed of its own."""

    def __init__(self):
        self.seeds = []

    def set_seed(self, seed):
        self.seeds.append(seed)


def test_random_states_of_other_kinds_above_a_shard():
    """One that tells no seed counts as seed 0; one that cannot be seeded
    (a NumPy RandomState) is left alone."""
    seed_only = AddGaussianNoise(
        Shard(Minibatches(2, **blob_data(6)), rank=1, size=3), {'default': 1.0}
    )
    seed_only.rnd = SeedOnly()
    numpy_state = AddGaussianNoise(
        Shard(Minibatches(2, **blob_data(6)), rank=1, size=3), {'default': 1.0}
    )
    numpy_state.rnd = np.random.RandomState(3)
    before = numpy_state.rnd.get_state()[1].tolist()
    DataParallel(SgdStepper(), comm=RankOf3(1)).reseed_iterators(
        [seed_only, numpy_state]
    )
    assert seed_only.rnd.seeds == [derived_seed(0, 1)]
    assert numpy_state.rnd.get_state()[1].tolist() == before


class RankOf3:
    """Rank ``rank`` of 3, where every rank built the same iterators: the
    broadcasts keep the values."""

    def __init__(self, rank):
        self.rank = rank

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 3

    def Bcast(self, values, root):
        assert root == 0


def test_random_states_without_a_state_below_a_shard_are_skipped():
    """Only states with get_state can be sent; the others (None, or one
    that can only be seeded) are left as they are."""

    def build(rank, comm):
        base = Minibatches(2, shuffle=True, **blob_data(6))
        base.rnd = SeedOnly()
        shard = Shard(base, rank=rank, size=2)
        shard.rnd.set_seed(60 + rank)
        return lambda: (data_parallel.share_shard_states(comm, [shard]), shard)[1]

    rank0, rank1 = run_ranks(build)
    assert rank1.rnd.get_seed() == 60
    assert rank0.iter.rnd.seeds == rank1.iter.rnd.seeds == []


class TwoRanks(OneRank):
    """Rank 0 of 2; no collective may be called."""

    def Get_size(self):
        return 2


@pytest.mark.parametrize('comm', [OneRank(), TwoRanks()])
def test_a_step_before_start_is_refused_as_the_wrapped_stepper_refuses_it(comm):
    stepper = DataParallel(SgdStepper(), comm=comm)
    with pytest.raises(TrainingValidationError, match=r'call start\(net\) before run'):
        stepper.run()
