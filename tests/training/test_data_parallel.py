"""Data-parallel training: DataParallel, Shard, joined figures, MPI runs.

The tests at the top run in this process without MPI. Those marked
``mpi`` start ``mpiexec -n 2`` on tests/training/mpi_worker.py (skipped
without mpi4py and mpiexec) and compare with the same training in this
process.
"""

import io
import json
import os
import shutil
import subprocess
import sys
from collections import OrderedDict
from pathlib import Path

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Shard
from brainstorm.hooks import ModifyStepperAttribute, StopAfterEpoch
from brainstorm.optional import has_mpi4py
from brainstorm.scorers import (
    Accuracy,
    aggregate_losses_and_scores,
    gather_from_all_ranks,
)
from brainstorm.training import DataParallel, Trainer
from brainstorm.training import checkpoint as checkpoint_module
from brainstorm.training.data_parallel import (
    communicator_of,
    mpi_world_rank,
    mpi_world_size,
)
from brainstorm.training.schedules import Exponential
from brainstorm.training.steppers import (
    AdamStepper,
    MomentumStepper,
    MultiStepper,
    SgdStepper,
)
from brainstorm.utils import IteratorValidationError, TrainingValidationError
from tests.training.mpi_worker import (
    BATCH_SIZE,
    TRAIN_SIZE,
    batchnorm_run,
    checkpoint_iterators,
    equivalence_run,
    file_run,
    modifier_run,
    unseeded_evaluation,
    unseeded_run,
    write_blob_file,
)
from tests.training.nets import batchnorm_net, roundtrip, xor_data, xor_net

ROOT = Path(__file__).resolve().parents[2]
MPI_TIMEOUT = 60


class SingleProcessComm:
    """A communicator of size 1 that fails if a collective is called."""

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1

    def __getattr__(self, name):
        raise AssertionError(f'collective {name} called on a size-1 run')


class FakeGatherComm:
    """allgather returns the given per-rank objects (rank 0's is replaced
    by what this process passes in)."""

    def __init__(self, others):
        self.others = others

    def Get_rank(self):
        return 0

    def Get_size(self):
        return 1 + len(self.others)

    def allgather(self, obj):
        return [obj] + list(self.others)


# ------------------------------------------------------- without MPI ----


def train_xor(stepper, steps=6):
    net = xor_net(seed=2)
    stepper.start(net)
    for _ in range(steps):
        net.provide_external_data(xor_data())
        stepper.run()
    return net.get('parameters')


def test_size_one_communicator_is_the_wrapped_stepper():
    plain = train_xor(MomentumStepper(0.3, 0.9))
    wrapped = train_xor(
        DataParallel(MomentumStepper(0.3, 0.9), comm=SingleProcessComm())
    )
    np.testing.assert_array_equal(wrapped, plain)


class TwinComm(SingleProcessComm):
    """Rank 0 of 2, where rank 1 holds the same data: the sums of the
    collectives are twice this rank's values."""

    def Get_size(self):
        return 2

    def Bcast(self, values, root):
        assert root == 0

    def Allreduce(self, in_place, values):
        assert in_place == 'IN_PLACE'
        np.multiply(values, 2, out=values)

    def allgather(self, value):
        return [value, value]


@pytest.mark.parametrize('make_net', [xor_net, batchnorm_net])
def test_twin_ranks_train_like_one_process_also_through_host_copies(
    monkeypatch, make_net
):
    """Twin ranks must train exactly like one process, also on a handler
    whose arrays are not NumPy arrays (DebugHandler, like a GPU): their
    parameters, gradients and running statistics go through host copies
    for MPI."""
    from brainstorm.handlers import DebugHandler, NumpyHandler
    from brainstorm.training import data_parallel

    monkeypatch.setattr(data_parallel, 'abort_on_exception', lambda c: None)
    monkeypatch.setattr(DataParallel, '_mpi_in_place', staticmethod(lambda: 'IN_PLACE'))
    rnd = np.random.RandomState(0)
    data = {
        'default': rnd.randn(1, 6, 3 if make_net is batchnorm_net else 2),
        'targets': rnd.randint(0, 2, (1, 6, 1)),
    }
    results = []
    for stepper, handler in [
        (MomentumStepper(0.3, 0.9), NumpyHandler(np.float64)),
        (
            DataParallel(MomentumStepper(0.3, 0.9), comm=TwinComm()),
            DebugHandler(NumpyHandler(np.float64)),
        ),
    ]:
        net = make_net(seed=2)
        net.set_handler(handler)
        stepper.start(net)
        for _ in range(4):
            net.provide_external_data(data)
            stepper.run()
        results.append(net.get('parameters'))
    np.testing.assert_array_equal(results[1], results[0])


def test_size_one_multistepper_state_round_trips():
    def make():
        return DataParallel(
            MultiStepper({'Hid': AdamStepper(0.01), 'default': MomentumStepper(0.1)}),
            comm=SingleProcessComm(),
        )

    stepper = make()
    train_xor(stepper, 3)
    state = stepper.get_state()
    assert int(state['steppers.Hid.step_count']) == 3
    other = make()
    other.start(xor_net(seed=2))
    other.set_state(state)
    assert other.stepper.steppers['Hid'].step_count == 3


def test_attributes_reach_the_wrapped_stepper():
    inner = MultiStepper(
        {'Hid': AdamStepper(0.01), 'default': MomentumStepper(0.1, 0.9)}
    )
    stepper = DataParallel(inner, comm=SingleProcessComm())
    stepper.clip_norm = 5.0
    assert inner.clip_norm == 5.0
    assert stepper.steppers is inner.steppers
    inner_momentum = DataParallel(MomentumStepper(0.1), comm=None)
    inner_momentum.learning_rate = 0.25
    assert inner_momentum.stepper.learning_rate == 0.25
    assert 'learning_rate' not in vars(inner_momentum)
    with pytest.raises(AttributeError):
        _ = stepper.no_such_attribute


def test_schedules_change_the_wrapped_stepper_in_training():
    inner = MultiStepper(
        {'Hid': AdamStepper(0.01), 'default': MomentumStepper(0.1, 0.9)}
    )
    trainer = Trainer(DataParallel(inner, comm=SingleProcessComm()), verbose=False)
    trainer.add_hook(
        ModifyStepperAttribute(Exponential(0.1, 0.5), 'steppers.default.learning_rate')
    )
    trainer.add_hook(
        ModifyStepperAttribute(Exponential(0.4, 0.5), 'clip_norm', name='clip')
    )
    trainer.add_hook(StopAfterEpoch(2))
    trainer.train(xor_net(), Minibatches(2, **xor_data()))
    assert inner.steppers['default'].learning_rate == pytest.approx(0.025)
    assert inner.clip_norm == pytest.approx(0.1)


def test_json_round_trip():
    stepper = DataParallel(MomentumStepper(0.2, momentum=0.5), check_finite=False)
    copy = roundtrip(stepper)
    assert isinstance(copy, DataParallel)
    assert copy.check_finite is False
    assert isinstance(copy.stepper, MomentumStepper)
    assert (copy.learning_rate, copy.momentum) == (0.2, 0.5)
    description = bs.get_description(stepper)
    assert set(description) == {'@type', 'stepper', 'check_finite'}
    assert roundtrip(DataParallel(MomentumStepper())).check_finite is True


def test_trainer_description_with_data_parallel_round_trips():
    trainer = Trainer(DataParallel(AdamStepper(0.003)), verbose=False)
    copy = roundtrip(trainer)
    assert isinstance(copy.stepper, DataParallel)
    assert copy.stepper.learning_rate == 0.003


@pytest.mark.parametrize('bad', [None, 'sgd', lambda: None])
def test_rejects_a_non_stepper(bad):
    with pytest.raises(TrainingValidationError, match='DataParallel'):
        DataParallel(bad)


def test_rejects_a_non_bool_check_finite():
    with pytest.raises(TrainingValidationError, match='check_finite'):
        DataParallel(MomentumStepper(), check_finite=1)


def test_communicator_of():
    assert communicator_of(MomentumStepper()) is None
    assert (
        communicator_of(DataParallel(MomentumStepper(), comm=SingleProcessComm()))
        is None
    )
    comm = FakeGatherComm([{}])
    assert communicator_of(DataParallel(MomentumStepper(), comm=comm)) is comm


def test_missing_mpi4py_raises_an_import_error_naming_the_extra(monkeypatch):
    from brainstorm import optional, parallel

    monkeypatch.setattr(parallel, 'has_mpi4py', False)
    monkeypatch.setattr(
        parallel,
        'mpi4py_mock',
        optional.MissingDependencyMock(
            optional._missing('mpi4py', 'mpi', ImportError('no mpi4py'))
        ),
    )
    stepper = DataParallel(MomentumStepper())
    with pytest.raises(ImportError, match=r"pip install 'brainstorm-nn\[mpi\]'"):
        _ = stepper.comm


def test_mpi_world_size_reads_the_launcher_environment(monkeypatch):
    for name in (
        'PMI_SIZE',
        'OMPI_COMM_WORLD_SIZE',
        'PMIX_SIZE',
        'MV2_COMM_WORLD_SIZE',
        'PMI_RANK',
        'OMPI_COMM_WORLD_RANK',
        'PMIX_RANK',
        'MV2_COMM_WORLD_RANK',
    ):
        monkeypatch.delenv(name, raising=False)
    assert (mpi_world_size(), mpi_world_rank()) == (1, 0)
    monkeypatch.setenv('OMPI_COMM_WORLD_SIZE', '3')
    monkeypatch.setenv('OMPI_COMM_WORLD_RANK', '2')
    assert (mpi_world_size(), mpi_world_rank()) == (3, 2)
    monkeypatch.setenv('PMI_SIZE', '4')
    monkeypatch.setenv('PMI_RANK', '1')
    assert (mpi_world_size(), mpi_world_rank()) == (4, 1)


def run_python(code):
    """Run ``code`` in a fresh interpreter without an MPI launcher's
    variables; return its stdout."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(('PMI_', 'PMIX_', 'OMPI_', 'MV2_'))
    }
    env['PYTHONPATH'] = str(ROOT)
    done = subprocess.run(
        [sys.executable, '-c', code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=MPI_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


TRAIN_WITHOUT_MPI = """
import sys
import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Shard
from brainstorm.hooks import MonitorLoss, StopAfterEpoch
from tests.training.nets import xor_data, xor_net
trainer = bs.Trainer(bs.training.MomentumStepper(0.1), verbose=False)
trainer.add_hook(MonitorLoss('valid'))
trainer.add_hook(StopAfterEpoch(2))
shard = Shard(Minibatches(2, **xor_data()))
trainer.train(xor_net(), shard, valid=Minibatches(4, **xor_data()))
print((shard.rank, shard.size), len(trainer.logs['MonitorLoss']['total_loss']),
      bs.optional.has_mpi4py, 'mpi4py.MPI' in sys.modules)
"""


def test_brainstorm_trains_without_mpi4py():
    blocked = "import sys; sys.modules['mpi4py'] = None\n"
    assert run_python(blocked + TRAIN_WITHOUT_MPI).split() == [
        '(0,',
        '1)',
        '3',
        'False',
        'False',
    ]


@pytest.mark.skipif(not has_mpi4py, reason='needs mpi4py')
def test_single_process_training_does_not_initialise_mpi():
    assert run_python(TRAIN_WITHOUT_MPI).split() == ['(0,', '1)', '3', 'True', 'False']


# ------------------------------------------------- rank 0 writes, prints ----


class RankComm(SingleProcessComm):
    """Rank ``rank`` of 2; no collective may be called."""

    def __init__(self, rank):
        self.rank = rank

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 2


@pytest.mark.parametrize('rank', [0, 1])
def test_only_rank_0_prints_and_writes_files(tmp_path, capsys, rank):
    from brainstorm.hooks import (
        ProgressBar,
        SaveBestNetwork,
        SaveLogs,
        SaveLogsCSV,
        SaveNetwork,
    )

    stepper = DataParallel(MomentumStepper(), comm=RankComm(rank))
    net = xor_net()
    net.provide_external_data(xor_data())
    net.forward_pass()
    logs = {'validation': {'loss': [1.0, 0.5]}}
    bar = io.StringIO()
    hooks = [
        SaveNetwork(str(tmp_path / 'net.h5')),
        SaveBestNetwork('validation.loss', str(tmp_path / 'best.h5'), criterion='min'),
        SaveLogs(str(tmp_path / 'logs.h5')),
        SaveLogsCSV(str(tmp_path / 'logs.csv')),
        ProgressBar(file=bar, force=True),
        StopAfterEpoch(1, verbose=True),
    ]
    iterators = {'training_data_iter': Minibatches(2, **xor_data())}
    for hook in hooks:
        hook.start(net, stepper, True, iterators)
        try:
            hook(epoch_nr=1, update_nr=1, net=net, stepper=stepper, logs=logs)
        except StopIteration:
            pass
    written = sorted(path.name for path in tmp_path.iterdir())
    printed = capsys.readouterr().out
    if rank == 0:
        assert written == ['best.h5', 'logs.csv', 'logs.h5', 'net.h5']
        assert 'improved' in printed and 'Stopping' in printed
        assert 'Epoch 1' in bar.getvalue()
    else:
        assert written == []
        assert printed == ''
        assert bar.getvalue() == ''


# ------------------------------------------------------------- Shard ----


def sample_ids(iterator):
    return [batch['default'][0, :, 0].tolist() for batch in iterator()]


def numbered(n):
    return {
        'default': np.arange(n, dtype=float).reshape(1, n, 1),
        'targets': np.zeros((1, n, 1)),
    }


def test_shard_splits_each_global_batch_contiguously():
    data = numbered(11)
    parts = [
        sample_ids(Shard(Minibatches(4, shuffle=False, **data), rank=r, size=2))
        for r in range(2)
    ]
    assert parts[0] == [[0, 1], [4, 5], [8]]
    assert parts[1] == [[2, 3], [6, 7], [9, 10]]


def test_ranks_cover_a_shuffled_epoch_exactly_once():
    data = numbered(23)
    bs.global_rnd.set_seed(3)
    seen = []
    global_batches = None
    for rank in range(3):
        base = Minibatches(5, shuffle=True, **data)
        base.rnd.set_seed(11)  # the same seed on every rank
        if rank == 0:
            global_batches = sample_ids(base)
            base.rnd.set_seed(11)
        shard = Shard(base, rank=rank, size=3)
        assert shard.length == base.length == 5
        seen.append(sample_ids(shard))
    for k, batch in enumerate(global_batches):
        assert sum((seen[r][k] for r in range(3)), []) == batch
    assert sorted(sum(sum(seen, []), [])) == list(range(23))


def test_shard_gives_empty_parts_when_a_batch_is_smaller_than_size():
    parts = [
        sample_ids(Shard(Minibatches(3, shuffle=False, **numbered(4)), rank=r, size=3))
        for r in range(3)
    ]
    assert [p[1] for p in parts] == [[], [], [3]]


def test_shard_defaults_to_a_single_process(monkeypatch):
    monkeypatch.delenv('PMI_SIZE', raising=False)
    monkeypatch.delenv('OMPI_COMM_WORLD_SIZE', raising=False)
    shard = Shard(Minibatches(4, **numbered(6)))
    assert (shard.rank, shard.size) == (0, 1)
    assert shard.bounds(4) == (0, 4)


@pytest.mark.parametrize(
    'kwargs',
    [
        {'rank': 2, 'size': 2},
        {'rank': -1, 'size': 2},
        {'rank': 0, 'size': 0},
        {'rank': 0.5, 'size': 2},
    ],
)
def test_shard_rejects_bad_ranks(kwargs):
    with pytest.raises(IteratorValidationError, match='Shard'):
        Shard(Minibatches(4, **numbered(6)), **kwargs)


def test_shard_json_round_trip():
    shard = Shard(Minibatches(4, shuffle=False, **numbered(6)), rank=1, size=2)
    copy = roundtrip(shard)
    assert (copy.rank, copy.size) == (1, 2)
    assert sample_ids(copy) == [[2, 3], [5]]


# ------------------------------------------------ joining the figures ----


def test_figures_are_joined_from_sums_and_counts():
    net = xor_net()
    scorers = [Accuracy()]
    everything = {
        'total_loss': [(4, 0.5), (2, 2.0), (3, 1.0)],
        'Accuracy': [(4, 3.0), (2, 0.0), (3, 3.0)],
    }
    rank0 = {k: v[:1] for k, v in everything.items()}
    rank1 = {k: v[1:] for k, v in everything.items()}
    joined = aggregate_losses_and_scores(
        rank0, net, scorers, comm=FakeGatherComm([rank1])
    )
    single = aggregate_losses_and_scores(everything, net, scorers)
    assert joined == single
    # not the mean of the ranks' means
    assert joined['total_loss'] == pytest.approx((2 + 4 + 3) / 9)
    assert joined['Accuracy'] == pytest.approx(6 / 9)


def test_gather_from_all_ranks_keeps_names_missing_on_a_rank():
    joined = gather_from_all_ranks(
        {'a': [(1, 2.0)]}, FakeGatherComm([{'b': [(2, 1.0)]}])
    )
    assert joined == OrderedDict([('a', [(1.0, 2.0)]), ('b', [(2.0, 1.0)])])


def test_checkpoint_file_keeps_the_random_states_of_every_rank(tmp_path):
    from brainstorm.randomness import RandomState
    from brainstorm.training.checkpoint import get_random_state

    def states(seed):
        return {
            'global': get_random_state(RandomState(seed)),
            'network': get_random_state(RandomState(seed + 1)),
            'handler': None,
            'iterators': {
                'training_data_iter': [get_random_state(RandomState(seed + 2)), None]
            },
        }

    random_states = dict(states(1), ranks=[states(1), states(10)])
    filename = str(tmp_path / 'ranks.ckpt')
    checkpoint_module.write_checkpoint(
        filename, {}, np.zeros(3), {}, {}, {}, {}, random_states
    )
    read = checkpoint_module.read_checkpoint(filename)['random_states']
    assert len(read['ranks']) == 2
    assert read['ranks'][1]['global']['seed'] == 10
    np.testing.assert_array_equal(
        read['ranks'][1]['iterators']['training_data_iter'][0]['keys'],
        random_states['ranks'][1]['iterators']['training_data_iter'][0]['keys'],
    )
    assert read['ranks'][0]['handler'] is None
    assert read['ranks'][1]['iterators']['training_data_iter'][1] is None


# --------------------------------------------------- with mpiexec -n 2 ----


def find_mpiexec():
    local = Path(sys.executable).parent / 'mpiexec'
    if local.exists():
        return str(local)
    return shutil.which('mpiexec')


needs_mpi = pytest.mark.skipif(
    not has_mpi4py or find_mpiexec() is None,
    reason="needs mpi4py and mpiexec (pip install 'brainstorm-nn[mpi]')",
)


def run_ranks(scenario, outdir, expect_success=True, timeout=None, ranks=2):
    """``mpiexec -n ranks`` the worker; a hang fails through the timeout
    (default ``MPI_TIMEOUT``)."""
    timeout = timeout or MPI_TIMEOUT
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [str(ROOT)] + [p for p in [env.get('PYTHONPATH')] if p]
    )
    env['OMP_NUM_THREADS'] = env['OPENBLAS_NUM_THREADS'] = '1'
    command = [
        find_mpiexec(),
        '-n',
        str(ranks),
        sys.executable,
        '-m',
        'tests.training.mpi_worker',
        scenario,
        str(outdir),
    ]
    try:
        done = subprocess.run(
            command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired as err:
        pytest.fail(
            f'mpiexec -n {ranks} ({scenario}) did not end within '
            f'{timeout} s: a rank hangs. Output: {err.stdout!r} '
            f'{err.stderr!r}'
        )
    if expect_success:
        assert done.returncode == 0, (
            f'mpiexec -n {ranks} ({scenario}) failed with {done.returncode}:\n'
            f'{done.stdout}\n{done.stderr}'
        )
    results = []
    for rank in range(ranks):
        npz = outdir / f'rank{rank}.npz'
        if npz.exists():
            with open(outdir / f'rank{rank}.json') as f:
                results.append((dict(np.load(npz)), json.load(f)))
    return done, results


def assert_logs_close(logs, reference, path=''):
    assert set(logs) == set(reference), path
    for key, value in reference.items():
        if isinstance(value, dict):
            assert_logs_close(logs[key], value, f'{path}{key}.')
        else:
            np.testing.assert_allclose(
                logs[key], value, rtol=1e-12, atol=1e-14, err_msg=path + key
            )


@pytest.fixture(scope='module')
def equivalence_results(tmp_path_factory):
    """The 'equivalence' run on two ranks (shared by two tests)."""
    return run_ranks('equivalence', tmp_path_factory.mktemp('equivalence'))[1]


@needs_mpi
def test_two_ranks_train_like_one_process_on_the_global_batches(equivalence_results):
    (rank0, logs0), (rank1, logs1) = equivalence_results
    # every rank holds bit-identical parameters
    np.testing.assert_array_equal(rank0['parameters'], rank1['parameters'])
    assert logs0 == logs1
    parameters, _ = equivalence_run(parallel=False)
    # the last global batch holds 3 samples: 1 on rank 0, 2 on rank 1
    assert TRAIN_SIZE % BATCH_SIZE == 3
    np.testing.assert_allclose(rank0['parameters'], parameters, rtol=1e-10, atol=1e-13)
    initial, _ = equivalence_run(parallel=False, epochs=0)
    assert np.abs(parameters - initial).max() > 0.1


@needs_mpi
def test_running_statistics_stay_identical_on_all_ranks(equivalence_results):
    (rank0, _), (rank1, _) = equivalence_results
    np.testing.assert_array_equal(rank0['batchnorm'], rank1['batchnorm'])
    _, single_mu = batchnorm_run(parallel=False)
    # the running mean moved from 0 like that of one process (not equal:
    # each rank normalises with its own batch statistics)
    assert np.abs(rank0['mu']).min() > 0.05
    np.testing.assert_allclose(rank0['mu'], single_mu, rtol=0, atol=0.02)


@needs_mpi
def test_running_mean_is_weighted_per_sample_like_one_process(equivalence_results):
    """With fixed parameters, BatchNorm's running mean after two ranks
    (uneven last batch: 1 and 2 samples) equals one process to 1e-12.
    (Guards against: averaging the ranks' running statistics per rank
    instead of per sample, which the atol=0.02 comparison above lets
    through.)"""
    (rank0, _), (rank1, _) = equivalence_results
    assert TRAIN_SIZE % BATCH_SIZE == 3
    np.testing.assert_array_equal(rank0['mu_frozen'], rank1['mu_frozen'])
    _, single_mu = batchnorm_run(parallel=False, learning_rate=0.0)
    assert np.abs(single_mu).min() > 0.05, 'the running mean must move'
    np.testing.assert_allclose(rank0['mu_frozen'], single_mu, rtol=1e-12, atol=1e-12)


@needs_mpi
def test_gradient_modifiers_act_on_the_global_batchs_gradient(equivalence_results):
    """Clipping and a norm bound on two ranks train like one process: they
    acted on each rank's scaled local gradient before the sum, and the
    parameters differed by about the clipped steps (0.015)."""
    (rank0, _), (rank1, _) = equivalence_results
    np.testing.assert_array_equal(rank0['modifiers'], rank1['modifiers'])
    single = modifier_run(parallel=False)
    np.testing.assert_allclose(rank0['modifiers'], single, rtol=1e-10, atol=1e-13)


@needs_mpi
@pytest.mark.parametrize('shuffle', [True, 'samples'])
def test_ranks_seeded_differently_walk_through_rank_0s_batches(
    equivalence_results, shuffle
):
    """Processes that never call ``global_rnd.set_seed`` are seeded
    differently: the ranks shuffled differently and took parts of other
    global batches (with shuffle='samples' some samples twice, others never
    in an epoch). They now share rank 0's shuffling: the run equals one
    process seeded as rank 0."""
    (rank0, _), (rank1, _) = equivalence_results
    key = f'unseeded_{shuffle}'
    np.testing.assert_array_equal(rank0[key], rank1[key])
    single = unseeded_run(parallel=False, shuffle=shuffle, rank=0)
    np.testing.assert_allclose(rank0[key], single, rtol=1e-10, atol=1e-13)


@needs_mpi
def test_evaluations_of_ranks_seeded_differently_equal_one_process(
    equivalence_results,
):
    """Trainer.evaluate and tools.evaluate (with comm) give the ranks rank
    0's shuffling too (they evaluated parts of different permutations:
    1.14 against one process's 1.55)."""
    (rank0, _), (rank1, _) = equivalence_results
    np.testing.assert_array_equal(
        rank0['unseeded_evaluation'], rank1['unseeded_evaluation']
    )
    single = unseeded_evaluation(parallel=False)
    np.testing.assert_allclose(
        rank0['unseeded_evaluation'], single, rtol=1e-12, atol=1e-14
    )


@needs_mpi
def test_validation_scores_on_two_ranks_equal_one_process(equivalence_results):
    (_, logs0), _ = equivalence_results
    _, logs = equivalence_run(parallel=False)
    reference = json.loads(json.dumps(bs.get_description(logs)))
    assert_logs_close(logs0['validation'], reference['validation'])
    assert logs0['validation']['Accuracy'] == reference['validation']['Accuracy']
    assert_logs_close(logs0['rolling_training'], reference['rolling_training'])


@needs_mpi
def test_two_ranks_read_their_parts_of_sample_shuffled_batches_from_a_file(tmp_path):
    """Minibatches over HDF5 datasets with shuffle='samples' under Shard:
    each rank reads only its part of every global batch from the file,
    and the ranks train like one process over the arrays in memory."""
    write_blob_file(str(tmp_path / 'train.h5'))
    _, ((rank0, _), (rank1, _)) = run_ranks('file', tmp_path)
    np.testing.assert_array_equal(rank0['parameters'], rank1['parameters'])
    parameters, _ = file_run(None, parallel=False)
    np.testing.assert_allclose(rank0['parameters'], parameters, rtol=1e-10, atol=1e-13)
    initial, _ = file_run(None, parallel=False, epochs=0)
    assert np.abs(parameters - initial).max() > 0.1
    # 21 samples in global batches of 6 (3 + 3, 3 + 3, 3 + 3, 1 + 2), 3 epochs
    assert (int(rank0['samples_read']), int(rank1['samples_read'])) == (30, 33)


@needs_mpi
def test_two_rank_checkpoint_resumes_like_an_uninterrupted_run(tmp_path):
    _, ((rank0, logs0), (rank1, logs1)) = run_ranks('checkpoint', tmp_path)
    np.testing.assert_array_equal(rank0['full'], rank1['full'])
    np.testing.assert_array_equal(rank0['resumed'], rank0['full'])
    np.testing.assert_array_equal(rank1['resumed'], rank1['full'])
    assert logs0 == logs1
    assert len(logs0['validation']['total_loss']) == 4  # epochs 0 to 3
    stored = checkpoint_module.read_checkpoint(str(tmp_path / 'run.ckpt'))
    ranks = stored['random_states']['ranks']
    assert len(ranks) == 2
    # dropout and noise draw differently on the two ranks
    assert not np.array_equal(ranks[0]['handler']['keys'], ranks[1]['handler']['keys'])
    # it cannot continue exactly on another number of processes
    resumed, net = Trainer.from_checkpoint(str(tmp_path / 'run.ckpt'))
    resumed.stepper._comm = SingleProcessComm()
    train_iter, named = checkpoint_iterators()
    with pytest.raises(
        TrainingValidationError,
        match='on 2 processes; it can only continue on as '
        r'many \(this run has 1\)',
    ):
        resumed.train(net, train_iter, **named)


@needs_mpi
def test_a_stop_asked_on_one_rank_stops_all_ranks_and_only_rank_0_prints(tmp_path):
    done, ((rank0, logs0), (rank1, logs1)) = run_ranks('stop', tmp_path)
    # 4 updates per epoch: rank 1 asks to stop at update 5, in epoch 2; no
    # rank goes on into an Allreduce the other never joins
    np.testing.assert_array_equal(rank0['counts'], [2, 5])
    np.testing.assert_array_equal(rank1['counts'], [2, 5])
    assert logs0 == logs1
    assert len(logs0['validation']['total_loss']) == 3  # epochs 0, 1, 2
    # rank 0 prints every epoch header and result once; rank 1 (whose
    # hook asked to stop) prints nothing
    for epoch in range(3):
        assert done.stdout.count(f' Epoch {epoch} ') == 1
    assert done.stdout.count('validation >> total_loss') == 3
    assert 'asks to stop' not in done.stdout + done.stderr


@needs_mpi
@pytest.mark.parametrize(
    'scenario, message',
    [
        ('exception', 'RuntimeError: deliberate failure on rank 1'),
        (
            'nan',
            'FloatingPointError: DataParallel: rank 1 of 2: the gradients '
            'of this step are not finite',
        ),
    ],
)
def test_a_failure_on_rank_1_ends_both_processes(tmp_path, scenario, message):
    # "within seconds": the job ends in about 1 s; the other rank would
    # otherwise wait in a collective for ever (generous bound for CI load)
    done, results = run_ranks(scenario, tmp_path, expect_success=False, timeout=20)
    assert done.returncode != 0
    assert results == []
    output = done.stdout + done.stderr
    assert message in output
    assert 'uncaught' in output and 'on rank 1 of 2; aborting all ranks' in output


@needs_mpi
def test_three_ranks_draw_their_own_random_numbers_reproducibly(tmp_path):
    """Every rank's handler (dropout masks) and the noise added around its
    Shard draw their own numbers; parameters stay identical on all ranks,
    and a second run reproduces the first exactly. (Ranks 1 and 2 must
    differ too: two ranks cannot tell "rank > 0" from "the rank".)"""
    runs = []
    for run in ('first', 'second'):
        outdir = tmp_path / run
        outdir.mkdir()
        runs.append([r for r, _ in run_ranks('random', outdir, ranks=3)[1]])
    first, second = runs
    assert len(first) == len(second) == 3
    for a, b in zip(first, second):
        assert set(a) == set(b)
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    for rank in (1, 2):
        np.testing.assert_array_equal(first[rank]['parameters'], first[0]['parameters'])
    for key in ('handler_seed', 'handler_draws', 'noise_draws'):
        values = [tuple(np.ravel(r[key])) for r in first]
        assert len(set(values)) == 3, (key, values)
    # rank 0 keeps the streams it was given
    assert first[0]['handler_seed'][0] == 7


class RankOf3(SingleProcessComm):
    """Rank ``rank`` of 3; only ``Bcast`` may be called, and it keeps the
    values (every rank built the same iterators, as rank 0 did)."""

    def __init__(self, rank):
        self.rank = rank

    def Bcast(self, values, root):
        assert root == 0

    def Get_rank(self):
        return self.rank

    def Get_size(self):
        return 3


def test_iterators_above_a_shard_get_each_rank_its_own_stream():
    from brainstorm.data_iterators import AddGaussianNoise

    def build():
        bs.global_rnd.set_seed(3)
        base = Minibatches(2, shuffle=True, **numbered(6))
        shard = Shard(base, rank=0, size=3)
        noisy = AddGaussianNoise(
            AddGaussianNoise(shard, {'default': 1.0}), {'default': 1.0}
        )
        plain = AddGaussianNoise(Minibatches(2, **numbered(6)), {'default': 1.0})
        return base, shard, noisy, plain

    seeds = {}
    for rank in (0, 1, 2):
        base, shard, noisy, plain = build()
        before = [it.rnd.get_seed() for it in (base, shard, noisy, noisy.iter, plain)]
        stepper = DataParallel(SgdStepper(), comm=RankOf3(rank))
        stepper.reseed_iterators([noisy, plain])
        after = [it.rnd.get_seed() for it in (base, shard, noisy, noisy.iter, plain)]
        # what the Shard wraps, the Shard itself and iterators without a
        # Shard keep their streams
        assert after[:2] == before[:2] and after[4] == before[4]
        seeds[rank] = tuple(after[2:4])
        if rank == 0:
            assert after == before
        else:
            assert after[2] != before[2] and after[3] != before[3]
        # once per iterator: a second call (a second train()) continues
        stepper.reseed_iterators([noisy])
        assert noisy.rnd.get_seed() == after[2]
    assert len(set(seeds.values())) == 3
    # on one process nothing changes
    base, shard, noisy, plain = build()
    seed = noisy.rnd.get_seed()
    DataParallel(SgdStepper(), comm=SingleProcessComm()).reseed_iterators([noisy])
    assert noisy.rnd.get_seed() == seed


def test_a_shard_takes_no_seed_from_the_global_random_state():
    bs.global_rnd.set_seed(5)
    base = Minibatches(4, **numbered(6))
    expected = bs.global_rnd.generate_seed()
    bs.global_rnd.set_seed(5)
    base = Minibatches(4, **numbered(6))
    Shard(base, rank=0, size=2)
    assert bs.global_rnd.generate_seed() == expected
    shard = roundtrip(Shard(base, rank=0, size=2))
    assert shard.data_shapes == {'default': (1, 6, 1), 'targets': (1, 6, 1)}
    assert shard.rnd.get_seed() == 0


@needs_mpi
@pytest.mark.slow
def test_mnist_example_runs_on_two_ranks_and_only_rank_0_reports(tmp_path):
    pytest.importorskip('sklearn')
    env = dict(os.environ, OMP_NUM_THREADS='1', OPENBLAS_NUM_THREADS='1')
    save = tmp_path / 'best.hdf5'
    done = subprocess.run(
        [
            find_mpiexec(),
            '-n',
            '2',
            sys.executable,
            str(ROOT / 'examples' / 'mnist_pi.py'),
            '--epochs',
            '1',
            '--limit',
            '100',
            '--save',
            str(save),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=MPI_TIMEOUT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert 'Data-parallel on 2 processes' in done.stdout
    assert done.stdout.count('Epoch 1 ---') == 1
    assert done.stdout.count('Validation accuracy') == 1
    assert save.exists()


class OtherNetworkComm(TwinComm):
    """Rank 0 of 2, where rank 1 built a network with one parameter more."""

    def allgather(self, value):
        return [value, value + 1]


def test_ranks_with_different_networks_are_refused_naming_the_sizes(monkeypatch):
    """Before, the parameter broadcast failed inside MPI ('message sizes do
    not match'), naming nothing the user could act on."""
    from brainstorm.training import data_parallel

    monkeypatch.setattr(data_parallel, 'abort_on_exception', lambda c: None)
    net = xor_net(seed=2)
    size = net.buffer.parameters.size
    with pytest.raises(TrainingValidationError, match='same network') as info:
        DataParallel(SgdStepper(0.5), comm=OtherNetworkComm()).start(net)
    assert f'rank 0: {size}' in str(info.value)
    assert f'rank 1: {size + 1}' in str(info.value)


# ------------------------------------------ the second round of MPI fixes ---


@pytest.fixture(scope='module')
def second_round_results(tmp_path_factory):
    return run_ranks('second_round', tmp_path_factory.mktemp('second_round'))[1]


@needs_mpi
def test_a_forward_stepper_averages_the_running_statistics(second_round_results):
    """ForwardStepper(use_training_pass=True) re-estimating BatchNorm's
    statistics: without a backward pass nothing was averaged, and each
    rank kept the statistics of its own half of the data."""
    from tests.training.mpi_worker import forward_statistics_run

    (rank0, _), (rank1, _) = second_round_results
    np.testing.assert_array_equal(rank0['forward_mu'], rank1['forward_mu'])
    single = forward_statistics_run(False)
    np.testing.assert_allclose(rank0['forward_mu'], single, rtol=1e-12, atol=1e-12)


@needs_mpi
def test_constant_untrained_parameters_stay_exact(second_round_results):
    """A Clockwork layer's timing [1, 2, 4, 7] came back as 6.999999999999999
    (a weighted mean of equal values), which switched a unit off."""
    (rank0, _), (rank1, _) = second_round_results
    assert rank0['timing'].tolist() == [1.0, 2.0, 4.0, 7.0]
    assert rank1['timing'].tolist() == [1.0, 2.0, 4.0, 7.0]


@needs_mpi
def test_a_global_batch_without_samples_is_a_zero_step(second_round_results):
    """It aborted the job ('all ranks received empty batches'), while one
    process trains through it."""
    from tests.training.mpi_worker import empty_batch_run

    (rank0, _), (rank1, _) = second_round_results
    np.testing.assert_array_equal(rank0['empty'], rank1['empty'])
    np.testing.assert_allclose(
        rank0['empty'], empty_batch_run(False), rtol=1e-12, atol=1e-14
    )


@needs_mpi
def test_a_new_handler_gets_streams_of_its_own_and_keeps_training(
    second_round_results,
):
    """After set_handler between two train calls every rank drew the same
    dropout masks; a BatchNorm network moved to float32 during training
    crashed in the averaging of its statistics (float64 scratch)."""
    (rank0, _), (rank1, _) = second_round_results
    assert not np.array_equal(rank0['draws'], rank1['draws'])
    np.testing.assert_array_equal(rank0['bn_mu'], rank1['bn_mu'])
    assert rank0['bn_mu'].dtype == np.float32


@needs_mpi
def test_an_error_caught_before_training_starts_ends_the_other_ranks(tmp_path):
    """Rank 1's iterator was refused before train() announced anything:
    rank 0 waited in DataParallel.start until the watchdog's time-out
    (600 s by default) although rank 1 had left."""
    import time

    start = time.monotonic()
    done, _ = run_ranks('early_failure', tmp_path, expect_success=False, timeout=50)
    assert time.monotonic() - start < 40
    assert done.returncode != 0
    assert 'rank 1 of 2 left training: IteratorValidationError' in (
        done.stdout + done.stderr
    )


@needs_mpi
def test_rank_0_refuses_a_network_it_never_initialised_and_ends_the_others(
    tmp_path,
):
    """Rank 0's parameters are broadcast to every rank: a rank 0 that never
    initialised its network made every rank train from zeros, without a
    word."""
    import time

    start = time.monotonic()
    done, _ = run_ranks('blank_root', tmp_path, expect_success=False, timeout=50)
    assert time.monotonic() - start < 40
    assert done.returncode != 0
    printed = done.stdout + done.stderr
    assert 'UninitializedNetworkError' in printed
    assert 'never initialised' in printed
