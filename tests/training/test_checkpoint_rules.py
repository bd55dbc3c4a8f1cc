"""The rules of brainstorm.training.checkpoint, each at its edges: what a
checkpoint records, what loading checks, every attribute resuming puts
back, and the order of the restore steps. In-process, so that the
mutation runner (tools/mutation.py) finds the tests that run each line."""

import copy
import os
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import AddGaussianNoise, Minibatches
from brainstorm.handlers.base_handler import first_use_owner, peek_random_state
from brainstorm.hooks import (
    Hook,
    MonitorLoss,
    SaveBestNetwork,
    SaveCheckpoint,
    StopAfterEpoch,
)
from brainstorm.randomness import RandomState, global_rnd
from brainstorm.training import Trainer
from brainstorm.training import checkpoint as ck
from brainstorm.training.checkpoint_file import get_random_state
from brainstorm.training.progress import TrainingRun
from brainstorm.training.steppers import MomentumStepper
from brainstorm.training.utils import LogEntries
from brainstorm.utils import TrainingValidationError
from tests.training.nets import StopAtUpdate, blob_data

EPOCHS = 3  # 5 batches of 8 per epoch


# ------------------------------------------------------------ helpers ---


def network(activation='tanh'):
    """A default-handler network with dropout (the handler draws)."""
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Dropout(0.2)
        >> bs.layers.FullyConnected(6, activation=activation, name='H')
        >> out
    )
    net.initialize(bs.initializers.Gaussian(0.3))
    return net


def iterators(pattern):
    """The training iterator and the named ones of a pattern."""
    base = Minibatches(8, shuffle=True, **blob_data(40, seed=1))
    train = AddGaussianNoise(base, {'default': 0.3})
    if pattern == 'alias':  # the same object under a second name
        return train, {'valid': train}
    if pattern == 'shared':  # another named iterator wraps the same source
        return train, {'noisy': AddGaussianNoise(base, {'default': 0.1})}
    valid = Minibatches(7, shuffle=True, **blob_data(20, seed=2))
    return train, {'valid': valid}


def monitors(pattern):
    if pattern == 'monitor_training':
        return [
            MonitorLoss('training_data_iter', name='train_u', timescale='update'),
            MonitorLoss('valid', name='valid'),
        ]
    if pattern == 'shared':
        return [MonitorLoss('noisy', name='noisy_u', timescale='update')]
    return [
        MonitorLoss('valid', name='valid'),
        MonitorLoss('valid', name='valid_u', timescale='update', interval=2),
    ]


def make_trainer(pattern, filename=None, stop_at=None):
    bs.global_rnd.set_seed(5)
    net = network()
    trainer = Trainer(MomentumStepper(0.1, momentum=0.9), verbose=False)
    for hook in monitors(pattern):
        trainer.add_hook(hook)
    if filename is not None:
        trainer.add_hook(SaveCheckpoint(filename, timescale='update'))
    if stop_at is not None:
        trainer.add_hook(StopAtUpdate(stop_at))
    trainer.add_hook(StopAfterEpoch(EPOCHS))
    return trainer, net


def full_run(pattern):
    trainer, net = make_trainer(pattern)
    train, named = iterators(pattern)
    trainer.train(net, train, **named)
    return net.get('parameters'), bs.get_description(trainer.logs)


def checkpoint_at(tmp_path, pattern, update):
    """Write the checkpoint of ``pattern`` at ``update`` and return its name."""
    filename = str(tmp_path / f'{pattern}-{update}.ckpt')
    trainer, net = make_trainer(pattern, filename, stop_at=update)
    train, named = iterators(pattern)
    trainer.train(net, train, **named)
    return filename


def resume(filename, pattern):
    bs.global_rnd.set_seed(77)  # something in between uses global_rnd
    np.random.RandomState(0).rand(3)
    trainer, net = Trainer.from_checkpoint(filename)
    del trainer.hooks['StopAtUpdate']
    trainer.hooks['SaveCheckpoint'].filename = filename + '.more'
    train, named = iterators(pattern)
    trainer.train(net, train, **named)
    return net.get('parameters'), bs.get_description(trainer.logs)


@pytest.fixture(scope='module')
def plain7(tmp_path_factory):
    """The 'plain' checkpoint at update 7 (mid-epoch), written once."""
    return checkpoint_at(tmp_path_factory.mktemp('plain7'), 'plain', 7)


class FakeRanks:
    """The processes of a data-parallel run, seen from ``rank`` of
    ``size``: ``gather`` gives rank 0 its object and ``others``."""

    def __init__(self, rank, size, others=()):
        self.rank, self.size, self.is_root = rank, size, rank == 0
        self.others = list(others)
        self.roots, self.barriers = [], 0

    def gather(self, obj, root=0):
        self.roots.append(root)
        return [obj, *self.others] if self.rank == root else None

    def barrier(self):
        self.barriers += 1


def loaded(filename):
    """``(trainer, net, resume data)`` of a checkpoint."""
    trainer, net = Trainer.from_checkpoint(filename)
    return trainer, net, trainer._progress.resume


def same_state(a, b):
    return (
        np.array_equal(a['keys'], b['keys'])
        and a['pos'] == b['pos']
        and a['has_gauss'] == b['has_gauss']
        and a['cached_gaussian'] == b['cached_gaussian']
    )


# ----------------------------------------- exact resume, in process ---


@pytest.mark.parametrize(
    'pattern, update',
    [
        ('plain', 7),
        ('monitor_training', 2),
        ('monitor_training', 5),  # the last batch of an epoch
        ('monitor_training', 8),
        ('alias', 7),
        ('shared', 7),
    ],
)
def test_resume_mid_epoch_equals_the_uninterrupted_run(tmp_path, pattern, update):
    full_params, full_logs = full_run(pattern)
    filename = checkpoint_at(tmp_path, pattern, update)
    params, logs = resume(filename, pattern)
    np.testing.assert_array_equal(params, full_params)
    assert logs == full_logs


def test_mid_epoch_checkpoint_keeps_epoch_start_and_current_training_states(
    tmp_path,
):
    """``iterators`` holds the training chain's states at the start of the
    epoch (to replay its batches), ``training_iterator_states`` those at
    the checkpoint; the other names hold their current states."""
    seen = {}

    class Records(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            seen[update_nr] = ck.iterator_states(named_all)

    filename = str(tmp_path / 'mid.ckpt')
    trainer, net = make_trainer('monitor_training', filename, stop_at=7)
    train, named = iterators('monitor_training')
    named_all = dict(named, training_data_iter=train)
    trainer.add_hook(Records('r', 'update'))  # after the monitors' passes
    trainer.train(net, train, **named)
    _, _, data = loaded(filename)
    saved = data['random_states']['iterators']
    now = data['progress']['training_iterator_states']
    # epoch 2 starts where update 5 (the last of epoch 1) left the states
    start, at_7 = seen[5], seen[7]
    assert len(saved['training_data_iter']) == len(now) == 2
    for a, b in zip(saved['training_data_iter'], start['training_data_iter']):
        assert same_state(a, b)
    for a, b in zip(now, at_7['training_data_iter']):
        assert same_state(a, b)
    assert not same_state(now[0], saved['training_data_iter'][0])
    assert same_state(saved['valid'][0], at_7['valid'][0])


def test_epoch_end_checkpoint_has_no_training_states_now(tmp_path):
    filename = str(tmp_path / 'e.ckpt')
    trainer, net = make_trainer('plain')
    trainer.add_hook(SaveCheckpoint(filename))
    train, named = iterators('plain')
    trainer.train(net, train, **named)
    _, _, data = loaded(filename)
    assert data['progress']['epoch_complete'] is True
    assert 'training_iterator_states' not in data['progress']
    current = ck.iterator_states({'training_data_iter': train})
    assert all(
        same_state(a, b)
        for a, b in zip(
            data['random_states']['iterators']['training_data_iter'],
            current['training_data_iter'],
        )
    )


# ------------------------------------------------- what is restored ---


def started_run(trainer, net, pattern='plain'):
    """A run as ``train`` makes it, with the stepper started."""
    train, named = iterators(pattern)
    named_all = OrderedDict(named, training_data_iter=train)
    trainer.stepper.start(net)
    return TrainingRun(
        net, named_all, bs.parallel.processes_of(None), trainer._progress
    )


def test_every_restored_attribute(plain7, tmp_path):
    """Counters, flags, logs with their counters, position in the epoch,
    epoch figures, stepper state and all random states."""
    filename = plain7
    trainer, net, data = loaded(filename)
    assert (trainer.current_epoch_nr, trainer.current_update_nr) == (2, 7)
    assert trainer._progress.started is True
    assert trainer._progress.initial_done == ('update', 'epoch')
    assert isinstance(trainer.logs, OrderedDict)
    valid = trainer.logs['valid']['total_loss']
    assert isinstance(valid, LogEntries)
    assert (valid.epochs, valid.updates) == ([0, 1], [0, 5])
    updates = trainer.logs['valid_u']['total_loss']
    assert (updates.epochs, updates.updates) == ([0, 1, 1, 2], [0, 2, 4, 6])

    run = started_run(trainer, net)
    ck.apply_resume(trainer, data, run)
    progress = data['progress']
    assert run.progress.epoch_complete is False
    assert run.progress.batches_done == progress['batches_done'] == 2
    assert run.progress.epoch_scores == progress['epoch_scores'] != {}
    assert isinstance(run.progress.epoch_scores, OrderedDict)
    saved = data['random_states']['iterators']
    assert run.progress.epoch_start_iterator_states == {
        'training_data_iter': saved['training_data_iter']
    }
    assert run.progress.training_states_now is progress['training_iterator_states']
    state = trainer.stepper.get_state()
    assert state.keys() == data['stepper_state'].keys()
    for key, value in data['stepper_state'].items():
        np.testing.assert_array_equal(state[key], value)
    assert np.abs(state['part0.velocity']).max() > 0
    states = data['random_states']
    assert same_state(get_random_state(global_rnd), states['global'])
    assert same_state(get_random_state(net.rnd), states['network'])
    handler_state = get_random_state(peek_random_state(net.handler))
    assert same_state(handler_state, states['handler'])
    for name, chain in saved.items():
        iterators_ = ck.iterator_chain(run.named_data_iters[name])
        assert len(iterators_) == len(chain)
        for it, st in zip(iterators_, chain):
            assert same_state(get_random_state(it.rnd), st), name


def test_hook_states_are_restored(tmp_path):
    filename = str(tmp_path / 'h.ckpt')
    trainer, net = make_trainer('plain', filename, stop_at=7)
    trainer.add_hook(SaveBestNetwork('valid.total_loss', criterion='min'))
    train, named = iterators('plain')
    trainer.train(net, train, **named)
    trainer, net, data = loaded(filename)
    stored = data['hook_states']['SaveBestNetwork']
    hook = trainer.hooks['SaveBestNetwork']
    before = hook.get_state()
    assert any(
        not np.array_equal(before.get(key), value) for key, value in stored.items()
    )
    ck.apply_resume(trainer, data, started_run(trainer, net))
    restored = hook.get_state()
    assert restored.keys() == stored.keys()
    for key, value in stored.items():
        np.testing.assert_array_equal(restored[key], value)


def test_global_random_state_is_restored_after_the_handlers(plain7, tmp_path):
    """Reading the handler's random state may draw its seed from
    global_rnd: the global state is restored last, so it is the saved one
    when training goes on."""
    filename = plain7
    trainer, net, data = loaded(filename)
    bs.global_rnd.set_seed(3)  # the handler's state must be drawn again
    owner = first_use_owner(net.handler)
    assert owner is not None and peek_random_state(net.handler) is None
    ck.apply_resume(trainer, data, started_run(trainer, net))
    states = data['random_states']
    assert same_state(get_random_state(global_rnd), states['global'])
    handler_state = get_random_state(peek_random_state(net.handler))
    assert same_state(handler_state, states['handler'])
    assert same_state(get_random_state(net.rnd), states['network'])


def test_handler_state_not_drawn_when_saved_is_drawn_later_from_global(tmp_path):
    """A checkpoint written before the handler drew its state (here at
    count 0) resumes with the state not drawn, as the recorded run."""
    filename = str(tmp_path / 'zero.ckpt')
    bs.global_rnd.set_seed(5)
    net = network()
    trainer = Trainer(MomentumStepper(0.1), verbose=False)
    trainer.add_hook(SaveCheckpoint(filename))
    trainer.add_hook(StopAfterEpoch(0))
    train, named = iterators('plain')
    bs.global_rnd.set_seed(6)  # the handler has not drawn since
    trainer.train(net, train, **named)
    trainer, net, data = loaded(filename)
    assert data['random_states']['handler'] is None
    _ = net.handler.rnd  # drawn now, in the new process
    assert peek_random_state(net.handler) is not None
    ck.apply_resume(trainer, data, started_run(trainer, net))
    assert peek_random_state(net.handler) is None
    assert same_state(get_random_state(global_rnd), data['random_states']['global'])


def rewrite(source, target, change):
    """Copy a checkpoint through ``change(data)`` (checksums recomputed)
    into its own folder (where its hooks may write), named like ``target``."""
    target = os.path.join(os.path.dirname(source), os.path.basename(target))
    data = ck.read_checkpoint(source)
    change(data)
    ck.write_checkpoint(
        target,
        data['network'],
        data['parameters'],
        data['trainer'],
        data['progress'],
        data['stepper_state'],
        data['hook_states'],
        data['random_states'],
    )
    return target


# ---------------------------------------------------- restored paths ---


@pytest.mark.parametrize(
    'path',
    [
        None,
        b'run.ckpt',
        '',
        'run\0.ckpt',
        'evil.py',
        'EVIL.PY',
        'sub/x.pth',
        'sub/x.so',
        'sitecustomize',
        'sitecustomize.ckpt',
        'usercustomize.h5',
        '__init__.txt',
        '.',
        '.hidden.ckpt',
        'sub/.hidden/x.ckpt',
        '../outside.ckpt',
        '/etc/outside.ckpt',
    ],
)
def test_restored_path_refused(tmp_path, monkeypatch, path):
    cwd = tmp_path / 'cwd'
    (cwd / 'sub').mkdir(parents=True)
    monkeypatch.chdir(cwd)
    with pytest.raises(TrainingValidationError, match="hook 'h': refusing"):
        ck.check_restored_path("hook 'h'", path)


@pytest.mark.parametrize(
    'path',
    ['run.ckpt', 'sub/run.ckpt', 'my_sitecustomize.ckpt', 'x.python', 'a.py.bak'],
)
def test_restored_path_accepted(tmp_path, monkeypatch, path):
    """Hidden folders above the working folder do not count."""
    cwd = tmp_path / '.above' / 'cwd'
    (cwd / 'sub').mkdir(parents=True)
    monkeypatch.chdir(cwd)
    ck.check_restored_path('h', path)
    ck.check_restored_path('h', str(cwd / path))


def test_restored_path_in_a_further_folder(tmp_path, monkeypatch):
    cwd, other = tmp_path / 'cwd', tmp_path / 'ckpts'
    cwd.mkdir()
    other.mkdir()
    monkeypatch.chdir(cwd)
    target = str(other / 'best.h5')
    with pytest.raises(TrainingValidationError, match='outside'):
        ck.check_restored_path('h', target)
    ck.check_restored_path('h', target, [str(other)])
    with pytest.raises(TrainingValidationError, match='hidden'):
        ck.check_restored_path('h', str(other / '.x' / 'best.h5'), [str(other)])


# ------------------------------------------------- random states as JSON ---


def json_state(seed=1):
    return ck._state_to_json(get_random_state(RandomState(seed)))


def test_random_state_json_round_trip():
    state = get_random_state(RandomState(4))
    state['has_gauss'], state['cached_gaussian'] = 1, 0.25
    back = ck._state_from_json(ck._state_to_json(state), 'w')
    assert same_state(back, state) and back['keys'].dtype == np.uint32
    assert ck._state_to_json(None) is None
    assert ck._state_from_json(None, 'w') is None


@pytest.mark.parametrize(
    'change',
    [
        lambda s: s.update(keys=s['keys'][:-1]),
        lambda s: s.update(keys=s['keys'] + [1]),
        lambda s: s['keys'].__setitem__(3, 2**32),
        lambda s: s['keys'].__setitem__(3, -1),
        lambda s: s['keys'].__setitem__(3, True),
        lambda s: s['keys'].__setitem__(3, 1.0),
        lambda s: s.update(keys='x' * 624),
        lambda s: s.pop('keys'),
        lambda s: s.update(pos=625),
        lambda s: s.update(name='PCG64'),
    ],
)
def test_random_state_json_refused(change):
    state = json_state()
    change(state)
    with pytest.raises(TrainingValidationError, match='where'):
        ck._state_from_json(state, 'where')
    with pytest.raises(TrainingValidationError):
        ck._state_from_json([1, 2], 'where')


def test_random_state_json_keys_at_their_bounds():
    state = json_state()
    state['keys'][0], state['keys'][1] = 0, 2**32 - 1
    assert ck._state_from_json(state, 'w')['keys'][1] == 2**32 - 1


# ------------------------------------------------------ progress checks ---


def test_is_count_edges():
    assert ck._is_count(0) and ck._is_count(5)
    for value in (-1, True, False, 1.0, None, '1'):
        assert not ck._is_count(value), value


def good_progress(filename):
    """The progress entry of a mid-epoch checkpoint, as stored (JSON)."""
    return ck.read_checkpoint(filename)['progress']


@pytest.mark.parametrize(
    'key, value',
    [
        ('current_epoch_nr', -1),
        ('current_update_nr', 1.5),
        ('batches_done', True),
        ('started', 1),
        ('epoch_complete', None),
        ('logs', []),
        ('epoch_scores', 'x'),
        ('rank_epoch_scores', {}),
        ('rank_epoch_scores', [{}, 3]),
        ('training_iterator_states', {}),
        ('training_iterator_states', [json_state(), 'x']),
        ('rank_training_iterator_states', {}),
        ('rank_training_iterator_states', [[json_state()], 'x']),
    ],
)
def test_bad_progress_entries_are_refused(plain7, key, value):
    progress = good_progress(plain7)
    ck._check_progress(copy.deepcopy(progress), 'C')  # the good one passes
    progress[key] = value
    with pytest.raises(TrainingValidationError, match='C'):
        ck._check_progress(progress, 'C')


def test_progress_states_are_decoded_when_checked(plain7):
    progress = good_progress(plain7)
    progress['rank_epoch_scores'] = [{}, {}]
    progress['rank_training_iterator_states'] = [[json_state(1)], [None]]
    ck._check_progress(progress, 'C')
    assert isinstance(progress['training_iterator_states'][0]['keys'], np.ndarray)
    ranks = progress['rank_training_iterator_states']
    assert ranks[0][0]['keys'].dtype == np.uint32 and ranks[1] == [None]


def test_a_bad_progress_entry_in_a_file_is_refused_when_loading(plain7, tmp_path):
    good = plain7
    bad = rewrite(
        good,
        str(tmp_path / 'bad.ckpt'),
        lambda d: d['progress'].update(batches_done=-3),
    )
    with pytest.raises(TrainingValidationError, match="'batches_done'"):
        Trainer.from_checkpoint(bad)


def test_missing_initial_done_follows_started(plain7, tmp_path):
    good = plain7

    def drop(started):
        def change(data):
            del data['progress']['initial_done']
            data['progress']['started'] = started

        return change

    on = rewrite(good, str(tmp_path / 'on.ckpt'), drop(True))
    assert Trainer.from_checkpoint(on)[0]._progress.initial_done == ('update', 'epoch')
    off = rewrite(good, str(tmp_path / 'off.ckpt'), drop(False))
    assert Trainer.from_checkpoint(off)[0]._progress.initial_done == ()


@pytest.mark.parametrize(
    'initial_done', ['epoch', ['epoch'], ['epoch', 'update'], ['update', 3], None]
)
def test_initial_done_must_be_the_rounds_in_their_order(plain7, tmp_path, initial_done):
    """The rounds at count 0 begun are [], ['update'] or ['update',
    'epoch']; anything else used to be taken as it came ('epoch' as the
    rounds 'e', 'p', 'o', 'c', 'h')."""
    bad = rewrite(
        plain7,
        str(tmp_path / 'rounds.ckpt'),
        lambda d: d['progress'].update(initial_done=initial_done),
    )
    with pytest.raises(TrainingValidationError, match="'initial_done' must be one of"):
        Trainer.from_checkpoint(bad)


def test_started_is_recorded_once_both_count_zero_emissions_began(tmp_path):
    """A checkpoint written by the epoch hooks at count 0 resumes after
    them (``started``), one written by update hooks at count 0 before."""
    for timescale, started, done in (
        ('epoch', True, ['update', 'epoch']),
        ('update', False, ['update']),
    ):
        filename = str(tmp_path / f'{timescale}0.ckpt')
        bs.global_rnd.set_seed(5)
        net = network()
        trainer = Trainer(MomentumStepper(0.1), verbose=False)
        trainer.add_hook(SaveCheckpoint(filename, timescale=timescale))
        trainer.add_hook(StopAfterEpoch(0))
        train, named = iterators('plain')
        trainer.train(net, train, **named)
        progress = ck.read_checkpoint(filename)['progress']
        assert progress['started'] is started
        assert progress['initial_done'] == done


def test_log_counters_that_do_not_fit_are_dropped(plain7, tmp_path):
    good = plain7

    def change(data):
        counters = data['progress']['log_counters']
        counters['valid']['total_loss'] = [[0], [0]]  # one each, two entries
        counters['valid_u']['total_loss'] = [[0, 1, 1, 2], [0, 2, 4, 6], []]
        counters['rolling_training'] = 'x'

    trainer, _ = Trainer.from_checkpoint(
        rewrite(good, str(tmp_path / 'c.ckpt'), change)
    )
    valid = trainer.logs['valid']['total_loss']
    assert (valid.epochs, valid.updates) == ([0, 1], [None, None])
    valid_u = trainer.logs['valid_u']['total_loss']
    assert valid_u.updates == [None] * 4
    rolling = trainer.logs['rolling_training']['total_loss']
    assert rolling.epochs == [0] and rolling.updates == [None]


def test_trainer_description_must_give_a_trainer(plain7, tmp_path):
    good = plain7
    other = rewrite(
        good,
        str(tmp_path / 'o.ckpt'),
        lambda d: d.update(trainer={'@type': 'SgdStepper', 'learning_rate': 0.1}),
    )
    with pytest.raises(TrainingValidationError, match='expected Trainer'):
        Trainer.from_checkpoint(other)
    plain = rewrite(good, str(tmp_path / 'd.ckpt'), lambda d: d.update(trainer={}))
    with pytest.raises(TrainingValidationError, match='does not hold a Trainer'):
        Trainer.from_checkpoint(plain)
    broken = rewrite(
        good,
        str(tmp_path / 'b.ckpt'),
        lambda d: d.update(trainer={'@type': 'Trainer', 'stepper': 3}),
    )
    with pytest.raises(TrainingValidationError, match='cannot recreate the trainer'):
        Trainer.from_checkpoint(broken)


def test_hook_paths_checked_unless_trusted(plain7, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    good = plain7

    def outside(data):
        hooks = data['trainer']['hooks']
        hooks['SaveCheckpoint']['filename'] = '/etc/x.ckpt'

    bad = rewrite(good, str(tmp_path / 'p.ckpt'), outside)
    with pytest.raises(TrainingValidationError, match="hook 'SaveCheckpoint'"):
        Trainer.from_checkpoint(bad)
    trainer, _ = Trainer.from_checkpoint(bad, trusted=True)
    assert trainer.hooks['SaveCheckpoint'].filename == '/etc/x.ckpt'


# ----------------------------------------------------- resume checks ---


def test_resume_refuses_another_architecture_with_as_many_parameters(plain7, tmp_path):
    filename = plain7
    trainer, net = Trainer.from_checkpoint(filename)
    other = network(activation='rel')  # the same parameter count
    assert other.buffer.parameters.shape == net.buffer.parameters.shape
    train, named = iterators('plain')
    with pytest.raises(TrainingValidationError, match='belongs to another network'):
        trainer.train(other, train, **named)
    trainer.train(net, train, **named)  # the right one continues


def test_stepper_and_hook_states_that_do_not_fit_are_refused(tmp_path):
    filename = str(tmp_path / 'h.ckpt')
    trainer, net = make_trainer('plain', filename, stop_at=7)
    trainer.add_hook(SaveBestNetwork('valid.total_loss', criterion='min'))
    train, named = iterators('plain')
    trainer.train(net, train, **named)

    def attempt(change, match):
        trainer, net, data = loaded(filename)
        change(trainer, data)
        with pytest.raises(TrainingValidationError, match=match):
            ck.apply_resume(trainer, data, started_run(trainer, net))

    attempt(
        lambda t, d: d['stepper_state'].update(extra=np.zeros(2)),
        'cannot restore the stepper state',
    )
    attempt(
        lambda t, d: t.hooks.pop('SaveBestNetwork'),
        "state for hook 'SaveBestNetwork', which the trainer does not have",
    )

    class NoState:
        timescale, interval, __name__ = 'epoch', 1, 'SaveBestNetwork'

    attempt(
        lambda t, d: t.hooks.__setitem__('SaveBestNetwork', NoState()),
        "state for hook 'SaveBestNetwork'",
    )

    def refuses(state):
        raise ValueError('no')

    def broken(t, d):
        t.hooks['SaveBestNetwork'].set_state = refuses

    attempt(broken, "cannot restore the state of hook 'SaveBestNetwork'")


def test_training_states_now_must_match_the_chain(plain7, tmp_path):
    filename = plain7
    trainer, net, data = loaded(filename)
    now = data['progress']['training_iterator_states']
    data['progress']['training_iterator_states'] = now[:1]
    with pytest.raises(TrainingValidationError, match='is corrupt'):
        ck.apply_resume(trainer, data, started_run(trainer, net))


def test_old_checkpoints_without_training_states_now_still_resume(plain7, tmp_path):
    good = plain7
    old = rewrite(
        good,
        str(tmp_path / 'old.ckpt'),
        lambda d: d['progress'].pop('training_iterator_states'),
    )
    full_params, _ = full_run('plain')
    params, _ = resume(old, 'plain')
    np.testing.assert_array_equal(params, full_params)  # no monitor draws


@pytest.mark.parametrize('extra', [1, -1])
def test_iterators_wrapped_differently_are_refused(plain7, tmp_path, extra):
    filename = plain7
    trainer, net = Trainer.from_checkpoint(filename)
    train, named = iterators('plain')
    train = AddGaussianNoise(train, {'default': 0.1}) if extra > 0 else train.iter
    with pytest.raises(
        TrainingValidationError, match="data iterator 'training_data_iter' wraps"
    ):
        trainer.train(net, train, **named)


def test_chain_states_skip_missing_states_and_iterators_without_rnd():
    class Plain:  # an iterator without a random state, wrapping one
        def __init__(self, inner):
            self.iter = inner

    inner = Minibatches(2, shuffle=True, default=np.zeros((1, 4, 1)))
    outer = Plain(inner)
    states = ck.iterator_states({'x': outer})['x']
    assert states[0] is None and states[1] is not None
    saved = states[1]
    inner.rnd.rand(5)
    ck.set_chain_states('x', outer, [json_state(2), None], 'f')  # skipped both
    assert not same_state(get_random_state(inner.rnd), saved)
    ck.set_chain_states('x', outer, [None, saved], 'f')
    assert same_state(get_random_state(inner.rnd), saved)


# ------------------------------------------------- data-parallel files ---


def test_every_rank_stores_its_states_on_rank_0(tmp_path):
    """Rank 0 gathers (at root 0) every rank's random states, epoch figures
    and training states now; the others write nothing and wait."""
    results = {}

    class Saves(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if update_nr != 7:
                return
            run = trainer._run
            mine = (
                ck._random_states(run),
                ck._jsonable(run.progress.epoch_scores),
                ck._training_states_now(run),
            )
            other = copy.deepcopy(mine)
            other[0]['global'] = get_random_state(RandomState(99))
            other[1]['marker'] = [1.0]
            for rank, others in ((0, [other]), (1, [])):
                fake = copy.copy(run)
                fake.processes = FakeRanks(rank, 2, others)
                name = str(tmp_path / f'rank{rank}.ckpt')
                ck.save_checkpoint(trainer, fake, name)
                results[rank] = (fake.processes, name, mine, other)

    trainer, net = make_trainer('monitor_training')
    trainer.add_hook(Saves('saves', 'update'))
    train, named = iterators('monitor_training')
    trainer.train(net, train, **named)

    ranks1, name1, _, _ = results[1]
    assert not os.path.exists(name1)
    assert ranks1.roots == [0] and ranks1.barriers == 1
    ranks0, name0, mine, other = results[0]
    assert ranks0.roots == [0] and ranks0.barriers == 1
    data = ck.read_checkpoint(name0)
    stored = data['random_states']['ranks']
    assert len(stored) == 2
    assert same_state(stored[0]['global'], mine[0]['global'])
    assert same_state(stored[1]['global'], other[0]['global'])
    assert same_state(data['random_states']['global'], mine[0]['global'])
    progress = data['progress']
    assert progress['rank_epoch_scores'] == [mine[1], other[1]]
    assert len(progress['rank_training_iterator_states']) == 2
    assert progress['rank_training_iterator_states'][1] == other[2]
    assert progress['training_iterator_states'] == mine[2]


def test_a_single_process_file_has_no_rank_entries(plain7, tmp_path):
    data = ck.read_checkpoint(plain7)
    assert 'ranks' not in data['random_states']
    assert 'rank_epoch_scores' not in data['progress']
    assert 'rank_training_iterator_states' not in data['progress']


def rank_data(filename, size=2):
    data = copy.deepcopy(loaded(filename)[2])
    states = data['random_states']
    second = copy.deepcopy(states)
    second['global'] = get_random_state(RandomState(99))
    states['ranks'] = [copy.deepcopy(states), second][:size]
    progress = data['progress']
    progress['rank_epoch_scores'] = [{'a': 1}, {'b': 2}][:size]
    now = progress['training_iterator_states']
    progress['rank_training_iterator_states'] = [now, list(reversed(now))][:size]
    return data


def test_each_rank_resumes_with_its_own_states(plain7):
    data = rank_data(plain7)
    states, scores, now = ck._states_of_this_rank(data, FakeRanks(1, 2), 'f')
    assert states is data['random_states']['ranks'][1]
    assert scores == {'b': 2}
    assert now is data['progress']['rank_training_iterator_states'][1]
    states, scores, now = ck._states_of_this_rank(data, FakeRanks(0, 2), 'f')
    assert states is data['random_states']['ranks'][0] and scores == {'a': 1}
    del data['progress']['rank_training_iterator_states']
    assert ck._states_of_this_rank(data, FakeRanks(1, 2), 'f')[2] is None
    single = copy.deepcopy(data)
    del single['random_states']['ranks']
    states, scores, now = ck._states_of_this_rank(single, FakeRanks(0, 1), 'f')
    assert states is single['random_states']
    assert scores is single['progress']['epoch_scores']
    assert now is single['progress'].get('training_iterator_states')


@pytest.mark.parametrize(
    'change, match',
    [
        (lambda d: None, 'on 2 processes; it can only continue on as many'),
        (lambda d: d['progress'].update(rank_epoch_scores=[{}]), 'epoch figures of 1'),
        (lambda d: d['progress'].update(rank_epoch_scores='x'), 'epoch figures of 0'),
        (
            lambda d: d['progress'].update(rank_training_iterator_states=[[]]),
            'training iterator states of 1',
        ),
    ],
)
def test_rank_entries_that_do_not_fit_are_refused(plain7, change, match):
    data = rank_data(plain7)
    change(data)
    size = 3 if 'processes' in match else 2
    with pytest.raises(TrainingValidationError, match=match):
        ck._states_of_this_rank(data, FakeRanks(1, size), 'f')


def test_a_refused_resume_leaves_the_random_states_alone(plain7):
    """Iterators built another way are refused before the network's and
    the global random states are touched."""
    trainer, net = Trainer.from_checkpoint(plain7)
    bs.global_rnd.set_seed(8)
    _ = net.handler.rnd
    train, named = iterators('plain')  # draws their seeds from global_rnd
    before = get_random_state(global_rnd), get_random_state(net.rnd)
    with pytest.raises(TrainingValidationError, match='wraps'):
        trainer.train(net, train.iter, **named)
    assert same_state(get_random_state(global_rnd), before[0])
    assert same_state(get_random_state(net.rnd), before[1])


@pytest.mark.parametrize('names', [('valid', 'extra'), ('extra',), ()])
def test_resume_needs_exactly_the_saved_iterator_names(plain7, names):
    trainer, net = Trainer.from_checkpoint(plain7)
    for hook in ('valid', 'valid_u'):  # monitors that would refuse first
        del trainer.hooks[hook]
    train, named = iterators('plain')
    given = {name: named['valid'] for name in names}
    with pytest.raises(
        TrainingValidationError,
        match=r"written with data iterators \['training_data_iter', 'valid'\]",
    ):
        trainer.train(net, train, **given)


def test_sizes_are_checked_before_the_network_is_built(plain7, monkeypatch):
    """A description needing other parameters than stored is refused
    before anything is built (a crafted one could claim any size)."""
    built = []
    monkeypatch.setattr(ck, '_build_from_file', lambda *a: built.append(a))

    def bigger(data):
        data['network']['architecture']['H']['size'] = 7

    bad = rewrite(plain7, 'sizes.ckpt', bigger)
    with pytest.raises(TrainingValidationError):
        Trainer.from_checkpoint(bad)
    assert built == []


def test_rank_0_waits_for_the_others_only_once_the_file_is_written(tmp_path):
    seen = []

    class Ranks(FakeRanks):
        def barrier(self):
            seen.append(os.path.exists(name))
            super().barrier()

    class Saves(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if update_nr == 3:
                run = copy.copy(trainer._run)
                run.processes = Ranks(0, 1)
                ck.save_checkpoint(trainer, run, name)

    name = str(tmp_path / 'r.ckpt')
    trainer, net = make_trainer('plain')
    trainer.add_hook(Saves('saves', 'update'))
    trainer.hooks['StopAfterEpoch'].max_epochs = 1
    train, named = iterators('plain')
    trainer.train(net, train, **named)
    assert seen == [True]


def test_a_resumed_run_refuses_a_network_with_other_parameters(tmp_path):
    """A network of the same architecture but other parameters was
    accepted: the run went on from its parameters, silently, not from
    where the checkpoint stopped."""
    from brainstorm.handlers import NumpyHandler

    def build():
        inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
        net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
        net.set_handler(NumpyHandler(np.float64))
        net.initialize(bs.initializers.Gaussian(0.5), seed=1)
        return net

    rng = np.random.RandomState(0)
    data = {'default': rng.randn(1, 6, 4), 'targets': rng.randint(0, 3, (1, 6, 1))}
    path = str(tmp_path / 'run.ckpt')
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.SaveCheckpoint(path))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    trainer.train(build(), bs.data_iterators.Minibatches(3, **data))
    resumed, net = bs.Trainer.from_checkpoint(path)
    resumed.hooks['StopAfterEpoch'].max_epochs = 2
    with pytest.raises(TrainingValidationError, match='other parameters'):
        resumed.train(build(), bs.data_iterators.Minibatches(3, **data))
    # its own network, also moved to float32, continues
    net.set_handler(NumpyHandler(np.float32))
    resumed.train(net, bs.data_iterators.Minibatches(3, **data))
    assert resumed.current_epoch_nr == 2


def test_a_checkpoint_whose_parameters_hold_nan_continues(tmp_path):
    """check_resume compares the parameters with NaN equal to NaN: a run
    with the finite check off whose parameters went NaN continues from its
    checkpoint instead of being refused as another network's."""
    bs.global_rnd.set_seed(4)
    rnd = np.random.RandomState(0)
    x, y = rnd.randn(1, 8, 3), rnd.randint(0, 2, (1, 8, 1))
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    net.buffer.parameters[0] = np.nan
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.check_finite = False
    trainer.add_hook(bs.hooks.SaveCheckpoint(str(tmp_path / 'run.ckpt')))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    data = bs.data_iterators.Minibatches(4, default=x, targets=y, shuffle=False)
    trainer.train(net, data)
    loaded, net2 = bs.Trainer.from_checkpoint(str(tmp_path / 'run.ckpt'))
    assert np.isnan(net2.get('parameters')).any()
    loaded.hooks['StopAfterEpoch'].max_epochs = 2
    loaded.train(
        net2, bs.data_iterators.Minibatches(4, default=x, targets=y, shuffle=False)
    )
    assert loaded.current_epoch_nr == 2
