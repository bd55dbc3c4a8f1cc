"""Files from anyone: crafted checkpoints and network files.

Each attack is a file built at test time from a legitimate one (an
attacker can recompute checksums, so crafted files carry valid ones unless
the attack is about integrity). A fresh interpreter runs the documented
user flow on each, in a child process per file with the working folder as
current directory (so it is on ``sys.path``, as for a user's script):

* ``trainer, net = Trainer.from_checkpoint('run.ckpt')`` then
  ``trainer.train(net, ...)`` with iterators built the same way, or
* ``net = Network.from_hdf5('net.hdf5')`` and a forward pass.

Every file must be refused with the library's validation error (naming the
file when loading refuses it), the child must exit normally, no file may
appear outside its working folder, no importable file inside it, no
module may run from it, ``sys.path`` and the stepper and hook classes stay
as they were, and the child's peak memory stays under 500 MB.
"""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.hooks import (
    ModifyStepperAttribute,
    MonitorLoss,
    ProgressBar,
    ReduceOnPlateau,
    SaveBestNetwork,
    SaveCheckpoint,
    SaveLogs,
    SaveLogsCSV,
    SaveNetwork,
    StopAfterEpoch,
)
from brainstorm.structure.network import Network
from brainstorm.training import Trainer
from brainstorm.training.schedules import Linear
from brainstorm.training.steppers import MomentumStepper
from brainstorm.utils import (
    NetworkValidationError,
    TrainingValidationError,
    add_checksums,
)
from tests.training.nets import xor_data, xor_net

ROOT = pathlib.Path(__file__).resolve().parent.parent
PEAK_MEMORY_MB = 500

pytestmark = pytest.mark.skipif(
    not hasattr(os, 'fork'), reason='the attack runner forks (POSIX)'
)


# ------------------------------------------------------ legitimate files --


def iterators():
    """The training and validation iterators of the legitimate run."""
    data = xor_data()
    return Minibatches(2, shuffle=True, **data), {'valid': Undivided(**data)}


def make_trainer():
    """A run using every hook that writes files or changes the stepper."""
    trainer = Trainer(MomentumStepper(0.1, 0.9), verbose=False)
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    trainer.add_hook(
        SaveBestNetwork('validation.total_loss', filename='best.hdf5', criterion='min')
    )
    trainer.add_hook(SaveNetwork('net.hdf5'))
    trainer.add_hook(SaveLogs('logs.hdf5'))
    trainer.add_hook(SaveLogsCSV('logs.csv'))
    trainer.add_hook(ModifyStepperAttribute(Linear(0.1, 0.01, 4)))
    trainer.add_hook(
        ReduceOnPlateau('validation.total_loss', attr_name='momentum', patience=0)
    )
    trainer.add_hook(ProgressBar(force=True))
    trainer.add_hook(SaveCheckpoint('run.ckpt'))
    trainer.add_hook(StopAfterEpoch(1))
    return trainer


@pytest.fixture(scope='module')
def legit(tmp_path_factory):
    """A folder holding run.ckpt (after epoch 1) and net.hdf5."""
    folder = tmp_path_factory.mktemp('legit')
    old = os.getcwd()
    os.chdir(folder)
    try:
        bs.global_rnd.set_seed(3)
        net = xor_net(hidden=4)
        trainer = make_trainer()
        trainer.hooks['ProgressBar'].file = open(os.devnull, 'w')
        train_iter, named = iterators()
        trainer.train(net, train_iter, **named)
        trainer.hooks['ProgressBar'].file.close()
    finally:
        os.chdir(old)
    assert {'run.ckpt', 'net.hdf5'} <= set(os.listdir(folder))
    return folder


# ------------------------------------------------------------- crafting --


def edit_json(key):
    """An edit of the JSON dataset ``key`` by ``change(dict)``."""

    def wrap(change):
        def edit(f, case):
            data = json.loads(f[key][()].tobytes())
            change(data, case)
            del f[key]
            f[key] = np.frombuffer(json.dumps(data).encode(), dtype=np.uint8)

        return edit

    return wrap


def hook_attr(hook, attr, value):
    @edit_json('trainer')
    def edit(data, case):
        data['hooks'][hook][attr] = value(case) if callable(value) else value

    return edit


def random_attr(attr, value, group='random/global'):
    def edit(f, case):
        f[group].attrs[attr] = value

    return edit


# the shuffling of the training data draws from this state during training
SHUFFLE_STATE = 'random/iterators/training_data_iter/0'


def random_keys(value):
    def edit(f, case):
        del f['random/global/keys']
        f['random/global/keys'] = value

    return edit


def claim(key, shape, dtype):
    """Replace dataset ``key`` by one claiming ``shape`` but storing
    nothing (HDF5 fills unwritten chunks when read)."""

    def edit(f, case):
        del f[key]
        f.create_dataset(key, shape=shape, dtype=dtype, chunks=(1 << 16,))

    return edit


def architecture(change):
    def edit(data, case):
        arch = (
            data['architecture']
            if 'architecture' in data
            else data['network']['architecture']
        )
        change(arch)

    return edit


def blow_up(arch):
    # 176 bytes of parameters stored; this architecture needs 0.8 GB (and
    # as much again for the gradients), within the children's address
    # space limit, so building it would show in their peak memory
    arch['Hid']['size'] = 10000
    arch['Output_projection']['size'] = 10000


def change_parameter(f, case):
    f['parameters'][0] = f['parameters'][0] + 1.0


def dataset_not_group(f, case):
    del f['random/global']
    f['random/global'] = np.zeros(3)


def external_link(f, case):
    other = pathlib.Path(case['outside']) / 'other.hdf5'
    with h5py.File(other, 'w') as o:
        o['progress'] = f['progress'][()]
    del f['progress']
    f['progress'] = h5py.ExternalLink(str(other), '/progress')


def trainer_handler(data, case):
    data['handler'] = {
        '@type': 'Trainer',
        'stepper': {'@type': 'SgdStepper', 'learning_rate': 0.1},
    }


def weight_modifier_hook(data, case):
    data['weight_modifiers'] = {
        'Hid': {'W': [{'@type': 'SaveLogsCSV', 'filename': 'x.csv'}]}
    }


def outside(name):
    return lambda case: str(case['outside'] / name)


# what happens to the checksums after an edit: recomputed (anyone can),
# kept as they were (attacks on integrity), or all removed (like an older
# file: reading the checksum of a dataset claiming gigabytes would need
# them)
REHASH, KEEP, STRIP = 'rehash', 'keep', 'strip'


def strip_checksums(f) -> None:
    objects = [f]
    f.visititems(lambda name, obj: objects.append(obj))
    for obj in objects:
        if 'sha256' in obj.attrs:
            del obj.attrs['sha256']


# name -> (file, edit, checksums)
ATTACKS = {
    # arbitrary file writes
    'csv-absolute-path': (
        'run.ckpt',
        hook_attr('SaveLogsCSV', 'filename', outside('authorized_keys')),
        REHASH,
    ),
    'csv-parent-path': (
        'run.ckpt',
        hook_attr('SaveLogsCSV', 'filename', '../outside/log.csv'),
        REHASH,
    ),
    'csv-home-ssh': (
        'run.ckpt',
        hook_attr(
            'SaveLogsCSV',
            'filename',
            lambda case: str(case['home'] / '.ssh' / 'authorized_keys'),
        ),
        REHASH,
    ),
    'csv-hidden-file': (
        'run.ckpt',
        hook_attr('SaveLogsCSV', 'filename', '.bashrc'),
        REHASH,
    ),
    'logs-through-symlink': (
        'run.ckpt',
        hook_attr('SaveLogs', 'filename', 'link/logs.hdf5'),
        REHASH,
    ),
    'checkpoint-absolute-path': (
        'run.ckpt',
        hook_attr('SaveCheckpoint', 'filename', outside('run.ckpt')),
        REHASH,
    ),
    'best-network-absolute-path': (
        'run.ckpt',
        hook_attr('SaveBestNetwork', 'filename', outside('best.hdf5')),
        REHASH,
    ),
    # code execution
    'csv-writes-tqdm-module': (
        'run.ckpt',
        hook_attr('SaveLogsCSV', 'filename', 'tqdm.py'),
        REHASH,
    ),
    'network-writes-sitecustomize': (
        'run.ckpt',
        hook_attr('SaveNetwork', 'filename', 'sitecustomize.py'),
        REHASH,
    ),
    'network-writes-pth': (
        'run.ckpt',
        hook_attr('SaveNetwork', 'filename', 'evil.pth'),
        REHASH,
    ),
    'logs-write-extension-module': (
        'run.ckpt',
        hook_attr('SaveLogs', 'filename', 'tqdm.cpython-311-x86_64-linux-gnu.so'),
        REHASH,
    ),
    # arbitrary attribute writes
    'schedule-dunder-path': (
        'run.ckpt',
        hook_attr(
            'ModifyStepperAttribute',
            'attr_name',
            '__class__.__init__.__globals__.sys.path',
        ),
        REHASH,
    ),
    'schedule-dunder-name': (
        'run.ckpt',
        hook_attr('ModifyStepperAttribute', 'attr_name', '__class__'),
        REHASH,
    ),
    'plateau-private-attribute': (
        'run.ckpt',
        hook_attr('ReduceOnPlateau', 'attr_name', '_parts'),
        REHASH,
    ),
    'plateau-other-object': (
        'run.ckpt',
        hook_attr('ReduceOnPlateau', 'attr_name', 'net.handler.dtype'),
        REHASH,
    ),
    # interpreter crash
    'random-position-huge': (
        'run.ckpt',
        random_attr('pos', 10**6, SHUFFLE_STATE),
        REHASH,
    ),
    'random-position-negative': (
        'run.ckpt',
        random_attr('pos', -7, SHUFFLE_STATE),
        REHASH,
    ),
    'random-global-position-huge': ('run.ckpt', random_attr('pos', 10**6), REHASH),
    'random-has-gauss': ('run.ckpt', random_attr('has_gauss', 3), REHASH),
    'random-cached-nan': (
        'run.ckpt',
        random_attr('cached_gaussian', float('nan')),
        REHASH,
    ),
    'random-name': ('run.ckpt', random_attr('name', 'PCG64'), REHASH),
    'random-keys-short': (
        'run.ckpt',
        random_keys(np.zeros(10, dtype=np.uint32)),
        REHASH,
    ),
    'random-keys-float': ('run.ckpt', random_keys(np.zeros(624)), REHASH),
    # memory blow-up
    'checkpoint-architecture-blow-up': (
        'run.ckpt',
        edit_json('network')(architecture(blow_up)),
        REHASH,
    ),
    'network-architecture-blow-up': (
        'net.hdf5',
        edit_json('description')(architecture(blow_up)),
        REHASH,
    ),
    'checkpoint-parameters-claim-8GB': (
        'run.ckpt',
        claim('parameters', (10**9,), np.float64),
        STRIP,
    ),
    'network-parameters-claim-8GB': (
        'net.hdf5',
        claim('parameters', (10**9,), np.float64),
        STRIP,
    ),
    'checkpoint-progress-claims-2GB': (
        'run.ckpt',
        claim('progress', (1 << 31,), np.uint8),
        STRIP,
    ),
    'network-description-claims-2GB': (
        'net.hdf5',
        claim('description', (1 << 31,), np.uint8),
        STRIP,
    ),
    # silent corruption and raw errors
    'checkpoint-parameter-changed': ('run.ckpt', change_parameter, KEEP),
    'network-parameter-changed': ('net.hdf5', change_parameter, KEEP),
    'random-state-not-a-group': ('run.ckpt', dataset_not_group, REHASH),
    'progress-in-another-file': ('run.ckpt', external_link, STRIP),
    'progress-counter-not-an-int': (
        'run.ckpt',
        edit_json('progress')(lambda d, case: d.update(current_update_nr='ten')),
        REHASH,
    ),
}

# objects nobody asked for: refusing these is the job of the checks in
# describable.create_from_description (an @type of the expected kind,
# constructor checks on restore), which land separately
RESTORE_VALIDATION = {
    'checkpoint-trainer-as-handler': (
        'run.ckpt',
        edit_json('network')(trainer_handler),
        REHASH,
    ),
    'network-trainer-as-handler': (
        'net.hdf5',
        edit_json('description')(trainer_handler),
        REHASH,
    ),
    'network-hook-as-weight-modifier': (
        'net.hdf5',
        edit_json('description')(weight_modifier_hook),
        REHASH,
    ),
    'hook-timescale-day': (
        'run.ckpt',
        hook_attr('StopAfterEpoch', 'timescale', 'day'),
        REHASH,
    ),
    'hook-interval-zero': (
        'run.ckpt',
        hook_attr('StopAfterEpoch', 'interval', 0),
        REHASH,
    ),
    'handler-dtype-object': (
        'run.ckpt',
        edit_json('network')(lambda d, case: d['handler'].update(dtype='object')),
        REHASH,
    ),
}


RUNNER = r"""
import json, os, resource, signal, sys
cases = json.load(open(sys.argv[1]))
import brainstorm as bs
from brainstorm.hooks import Hook
from brainstorm.structure.network import Network
from brainstorm.training import Trainer
from brainstorm.training.steppers import TrainingStepper
from brainstorm.utils import ValidationError, get_inheritors
from tests.test_file_safety import iterators

def class_dicts():
    classes = get_inheritors(TrainingStepper) | get_inheritors(Hook)
    return {c.__qualname__: sorted(vars(c)) for c in classes}

for case in cases:
    pid = os.fork()
    if pid:
        _, status = os.waitpid(pid, 0)
        case['status'] = status
        continue
    signal.alarm(60)  # a file that makes training run forever fails too
    # an allocation of gigabytes fails (MemoryError) instead of taking the
    # machine's memory
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    os.chdir(case['work'])
    sys.path.insert(0, '')  # as for a script run from this folder
    before = (list(sys.path), class_dicts())
    result = {'stage': 'load', 'outcome': 'loaded'}
    try:
        if case['file'] == 'run.ckpt':
            trainer, net = Trainer.from_checkpoint('run.ckpt')
            result['stage'] = 'train'
            train_iter, named = iterators()
            trainer.train(net, train_iter, **named)
        else:
            net = Network.from_hdf5('net.hdf5')
            result['stage'] = 'run'
            train_iter, _ = iterators()
            net.provide_external_data(next(train_iter()))
            net.forward_pass()
    except ValidationError as err:
        result['outcome'] = 'refused'
        result['error'] = type(err).__name__
        result['message'] = str(err)
    except BaseException as err:
        result['outcome'] = 'other error'
        result['error'] = type(err).__name__
        result['message'] = str(err)[:2000]
    result['sys_path_kept'] = list(sys.path) == before[0]
    result['classes_kept'] = class_dicts() == before[1]
    tqdm = sys.modules.get('tqdm')
    result['tqdm_file'] = getattr(tqdm, '__file__', None)
    result['peak_mb'] = resource.getrusage(
        resource.RUSAGE_SELF).ru_maxrss / 1024
    with open(case['result'], 'w') as f:
        json.dump(result, f)
    os._exit(0)
json.dump(cases, open(sys.argv[1], 'w'))
"""


def tree(folder: pathlib.Path, skip: set) -> set:
    """All paths below ``folder``, except below the folders in ``skip``."""
    found = set()
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if pathlib.Path(dirpath, d) not in skip]
        found |= {
            str(pathlib.Path(dirpath, n).relative_to(folder))
            for n in filenames + dirnames
        }
    return found


def run_attacks(attacks: dict, legit: pathlib.Path, root: pathlib.Path) -> dict:
    """Craft every attack's file in its own working folder and run the
    user flow on each in a fresh interpreter; return name -> result."""
    home, outside_folder = root / 'home', root / 'outside'
    (home / '.ssh').mkdir(parents=True)
    outside_folder.mkdir()
    cases, works = [], set()
    for name, (filename, edit, checksums) in attacks.items():
        work = root / f'work-{name}'
        work.mkdir()
        works.add(work)
        shutil.copy(legit / filename, work / filename)
        os.symlink(outside_folder, work / 'link')
        case = {
            'name': name,
            'file': filename,
            'work': str(work),
            'home': home,
            'outside': outside_folder,
            'result': str(root / f'result-{name}.json'),
        }
        with h5py.File(work / filename, 'r+') as f:
            edit(f, case)
            if checksums == REHASH:
                add_checksums(f)
            elif checksums == STRIP:
                strip_checksums(f)
        cases.append({k: str(v) for k, v in case.items()})
    before = tree(root, works)
    cases_file = root / 'cases.json'
    cases_file.write_text(json.dumps(cases))
    env = dict(os.environ, HOME=str(home), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, '-c', RUNNER, str(cases_file)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    appeared = (
        tree(root, works)
        - before
        - {f'result-{c["name"]}.json' for c in cases}
        - {'cases.json'}
    )
    assert appeared == set(), f'files outside the working folders: {appeared}'
    results = {}
    for case in json.loads(cases_file.read_text()):
        name = case['name']
        assert case['status'] == 0, (
            f'{name}: the child process died (wait status {case["status"]})'
        )
        result = json.loads(pathlib.Path(case['result']).read_text())
        work = pathlib.Path(case['work'])
        result['importable'] = sorted(
            p.name for p in work.iterdir() if p.suffix in ('.py', '.pth', '.pyc', '.so')
        )
        results[name] = result
    return results


def check_refused(name: str, result: dict, filename: str) -> None:
    assert result['outcome'] == 'refused', (name, result)
    if result['stage'] == 'load':
        assert filename in result['message'], (name, result['message'])
    assert result['sys_path_kept'], name
    assert result['classes_kept'], name
    assert result['importable'] == [], (name, result['importable'])
    tqdm_file = result['tqdm_file']
    assert tqdm_file is None or 'work-' not in tqdm_file, (name, tqdm_file)
    assert result['peak_mb'] < PEAK_MEMORY_MB, (name, result['peak_mb'])


@pytest.fixture(scope='module')
def attack_results(legit, tmp_path_factory):
    return run_attacks(ATTACKS, legit, tmp_path_factory.mktemp('attacks'))


@pytest.mark.parametrize('name', list(ATTACKS))
def test_crafted_file_is_refused(attack_results, name):
    check_refused(name, attack_results[name], ATTACKS[name][0])


def test_the_legitimate_files_resume_and_load(legit, tmp_path):
    """The same runner on the untouched files: training continues, files
    are written inside the working folder only, ProgressBar's tqdm comes
    from the installed package."""
    attacks = {
        'legit-checkpoint': ('run.ckpt', lambda f, c: None, KEEP),
        'legit-network': ('net.hdf5', lambda f, c: None, KEEP),
    }
    results = run_attacks(attacks, legit, tmp_path)
    for name, result in results.items():
        assert result['outcome'] == 'loaded', (name, result)
        assert result['peak_mb'] < PEAK_MEMORY_MB
    assert 'site-packages' in results['legit-checkpoint']['tqdm_file']
    written = set(os.listdir(tmp_path / 'work-legit-checkpoint'))
    assert {'logs.csv', 'logs.hdf5', 'best.hdf5', 'net.hdf5'} <= written


def test_objects_nobody_asked_for_are_refused(legit, tmp_path):
    results = run_attacks(RESTORE_VALIDATION, legit, tmp_path)
    for name, result in results.items():
        check_refused(name, result, RESTORE_VALIDATION[name][0])


# --------------------------------------------------------- trusted files --


def test_trusted_keeps_the_paths_of_your_own_checkpoint(legit, tmp_path, monkeypatch):
    target = tmp_path / 'elsewhere' / 'logs.csv'
    target.parent.mkdir()
    work = tmp_path / 'work'
    work.mkdir()
    shutil.copy(legit / 'run.ckpt', work / 'run.ckpt')
    with h5py.File(work / 'run.ckpt', 'r+') as f:
        hook_attr('SaveLogsCSV', 'filename', str(target))(f, {})
        add_checksums(f)
    monkeypatch.chdir(work)
    with pytest.raises(
        TrainingValidationError, match=r'run.ckpt.*SaveLogsCSV.*outside'
    ):
        Trainer.from_checkpoint('run.ckpt')
    trainer, net = Trainer.from_checkpoint('run.ckpt', trusted=True)
    trainer.hooks['ProgressBar'].force = False
    train_iter, named = iterators()
    trainer.train(net, train_iter, **named)
    assert 'validation.total_loss' in target.read_text().splitlines()[0]
    with pytest.raises(TrainingValidationError, match='trusted must be'):
        Trainer.from_checkpoint('run.ckpt', trusted='yes')


def test_absolute_paths_into_the_checkpoint_folder_resume(legit, tmp_path, monkeypatch):
    """A run that saved under absolute names next to its checkpoint
    resumes from another working folder."""
    run = tmp_path / 'run'
    run.mkdir()
    shutil.copy(legit / 'run.ckpt', run / 'run.ckpt')
    with h5py.File(run / 'run.ckpt', 'r+') as f:
        for hook in ('SaveLogsCSV', 'SaveCheckpoint'):
            name = 'logs.csv' if hook == 'SaveLogsCSV' else 'run.ckpt'
            hook_attr(hook, 'filename', str(run / name))(f, {})
        add_checksums(f)
    (tmp_path / 'elsewhere').mkdir()
    monkeypatch.chdir(tmp_path / 'elsewhere')
    trainer, net = Trainer.from_checkpoint(str(run / 'run.ckpt'))
    assert trainer.hooks['SaveLogsCSV'].filename == str(run / 'logs.csv')


@pytest.mark.parametrize(
    'path',
    [
        'a/../../x.csv',
        '/etc/x.csv',
        'runs/.git/hooks/pre-commit',
        'x.PY',
        'usercustomize.csv',
        'pkg/__init__.txt',
        'x.pyc',
        'lib.abi3.so',
        '',
        'nul\0l.csv',
    ],
)
def test_restored_paths_that_are_refused(path, tmp_path, monkeypatch):
    from brainstorm.hooks import check_restored_path

    monkeypatch.chdir(tmp_path)
    with pytest.raises(TrainingValidationError, match='refusing'):
        check_restored_path('hook', path)


@pytest.mark.parametrize(
    'path', ['logs.csv', 'runs/net.hdf5', 'runs/../logs.h5', 'python.log']
)
def test_restored_paths_that_are_accepted(path, tmp_path, monkeypatch):
    from brainstorm.hooks import check_restored_path

    monkeypatch.chdir(tmp_path)
    check_restored_path('hook', path)


# ----------------------------------------------------------- bit flips ----

FLIP_RUNNER = r"""
import json, sys
import numpy as np
from brainstorm.describable import get_description
from brainstorm.structure.network import Network
from brainstorm.training import Trainer
from brainstorm.training.checkpoint import read_checkpoint
from brainstorm.utils import ValidationError

def content(path, kind):
    if kind == 'network':
        net = Network.from_hdf5(path)
        return [json.dumps(get_description(net), sort_keys=True),
                net.get('parameters')]
    trainer, net = Trainer.from_checkpoint(path)
    data = read_checkpoint(path)
    return [json.dumps(get_description(trainer), sort_keys=True),
            json.dumps(get_description(net), sort_keys=True),
            net.get('parameters'), data['progress'], data['stepper_state'],
            data['hook_states'], repr(data['random_states'])]

def same(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) \
            and a.dtype == b.dtype and np.array_equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(
            same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(
            same(x, y) for x, y in zip(a, b))
    return a == b

path, kind, flips, seed, out = sys.argv[1:]
original = open(path, 'rb').read()
expected = content(path, kind)
rnd = np.random.RandomState(int(seed))
counts = {'refused': 0, 'identical': 0, 'changed': [], 'other': []}
for bit in rnd.choice(len(original) * 8, int(flips), replace=False):
    data = bytearray(original)
    data[bit // 8] ^= 1 << (bit % 8)
    with open(path + '.flip', 'wb') as f:
        f.write(data)
    try:
        result = content(path + '.flip', kind)
    except ValidationError:
        counts['refused'] += 1
        continue
    except BaseException as err:
        counts['other'].append([int(bit), type(err).__name__, str(err)[:300]])
        continue
    if same(result, expected):
        counts['identical'] += 1
    else:
        counts['changed'].append(int(bit))
json.dump(counts, open(out, 'w'))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    'filename, kind', [('run.ckpt', 'checkpoint'), ('net.hdf5', 'network')]
)
def test_single_bit_flips_are_refused_or_harmless(legit, tmp_path, filename, kind):
    shutil.copy(legit / filename, tmp_path / filename)
    out = tmp_path / 'counts.json'
    done = subprocess.run(
        [
            sys.executable,
            '-c',
            FLIP_RUNNER,
            str(tmp_path / filename),
            kind,
            '320',
            '12',
            str(out),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counts = json.loads(out.read_text())
    assert counts['changed'] == [], counts
    assert counts['other'] == [], counts
    assert counts['refused'] + counts['identical'] == 320
    assert counts['refused'] >= 320 // 5, counts  # flips reach content


def test_a_file_without_checksums_still_loads(legit, tmp_path):
    """Older files of ours and Brainstorm 0.5 files carry no checksums."""
    shutil.copy(legit / 'net.hdf5', tmp_path / 'old.hdf5')
    with h5py.File(tmp_path / 'old.hdf5', 'r+') as f:
        for obj in (f, f['description'], f['parameters']):
            del obj.attrs['sha256']
    net = Network.from_hdf5(str(tmp_path / 'old.hdf5'))
    np.testing.assert_array_equal(
        net.get('parameters'),
        Network.from_hdf5(str(legit / 'net.hdf5')).get('parameters'),
    )


def test_a_missing_checksum_in_a_checked_file_is_refused(legit, tmp_path):
    shutil.copy(legit / 'net.hdf5', tmp_path / 'n.hdf5')
    with h5py.File(tmp_path / 'n.hdf5', 'r+') as f:
        del f['parameters'].attrs['sha256']
    with pytest.raises(
        NetworkValidationError, match=r"n.hdf5.*'parameters'.*no checksum"
    ):
        Network.from_hdf5(str(tmp_path / 'n.hdf5'))
