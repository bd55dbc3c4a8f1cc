"""A checkpoint naming a class whose module was not imported.

Before, ``Trainer.from_checkpoint`` called such a file "corrupt"; it must
say which class is unknown and that its module must be imported first.
Run in fresh processes, as a user meets it: one process writes the
checkpoint with a hook of its own module, another loads it.
"""

import os
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HOOK_MODULE = """
import brainstorm as bs

class CountingHook(bs.hooks.Hook):
    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return None
"""

WRITE = """
import numpy as np
import brainstorm as bs
import myhooks
inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
net = bs.Network.from_layer(inp >> out)
net.initialize(0.1, seed=1)
trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
trainer.add_hook(myhooks.CountingHook(name='counter'))
trainer.add_hook(bs.hooks.StopAfterEpoch(1))
trainer.add_hook(bs.hooks.SaveCheckpoint('run.ckpt'))
x = np.ones((1, 4, 2)); y = np.zeros((1, 4, 1))
trainer.train(net, bs.data_iterators.Minibatches(2, default=x, targets=y))
"""

LOAD = """
import sys
import brainstorm as bs
if sys.argv[1] == 'import':
    import myhooks
try:
    trainer, net = bs.Trainer.from_checkpoint('run.ckpt')
except bs.utils.TrainingValidationError as err:
    print('ERROR', err)
else:
    print('LOADED', type(trainer.hooks['counter']).__name__)
"""


def _run(tmp_path, code, *args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, str(tmp_path)]))
    result = subprocess.run(
        [sys.executable, '-c', textwrap.dedent(code), *args],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def checkpoint_dir(tmp_path):
    (tmp_path / 'myhooks.py').write_text(HOOK_MODULE)
    _run(tmp_path, WRITE)
    (tmp_path / 'myhooks.py').rename(tmp_path / 'elsewhere.py')
    return tmp_path


def test_an_unknown_hook_class_is_named_and_not_called_corrupt(checkpoint_dir):
    out = _run(checkpoint_dir, LOAD, 'no-import')
    assert out.startswith('ERROR'), out
    assert 'corrupt' not in out
    assert "'CountingHook'" in out
    assert 'not known' in out
    assert 'import the modules that define them' in out
    assert 'hooks.counter' in out  # where it is used


def test_with_its_module_imported_the_checkpoint_loads(checkpoint_dir):
    (checkpoint_dir / 'elsewhere.py').rename(checkpoint_dir / 'myhooks.py')
    out = _run(checkpoint_dir, LOAD, 'import')
    assert out.strip() == 'LOADED CountingHook', out


# ---- the same rule in this process, at its edges ---------------------------
# (the runner of tools/mutation.py selects tests by the lines they run in
# this process, so the rule is also stated here, without a subprocess)


def test_unknown_classes_are_found_in_nested_dicts_and_lists_with_their_paths():
    from brainstorm.training.checkpoint import _unknown_classes

    description = {
        '@type': 'Trainer',
        'hooks': {'counter': {'@type': 'NoSuchHook', 'n': 1}},
        'scorers': [{'@type': 'Accuracy'}, {'@type': 'NoSuchScorer'}],
    }
    assert _unknown_classes(description) == [
        ('hooks.counter', 'NoSuchHook'),
        ('scorers[1]', 'NoSuchScorer'),
    ]
    assert _unknown_classes([{'@type': 'Nope'}]) == [('[0]', 'Nope')]


def test_an_unknown_class_at_the_top_is_the_trainer():
    from brainstorm.training.checkpoint import _unknown_classes

    assert _unknown_classes({'@type': 'NoSuchTrainer'}) == [
        ('trainer', 'NoSuchTrainer')
    ]


def test_known_classes_and_plain_values_are_not_listed():
    import brainstorm as bs
    from brainstorm.describable import get_description
    from brainstorm.training.checkpoint import _unknown_classes

    trainer = bs.Trainer(bs.training.MomentumStepper(), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    assert _unknown_classes(get_description(trainer)) == []
    assert _unknown_classes({'@type': 5, 'a': ['x', 1, None]}) == []


def test_the_error_lists_every_unknown_class_where_it_is_used():
    import brainstorm as bs
    from brainstorm.training.checkpoint import _create_trainer
    from brainstorm.utils import TrainingValidationError

    description = {
        '@type': 'Trainer',
        'hooks': {'a': {'@type': 'HookA'}, 'b': {'@type': 'HookB'}},
    }
    with pytest.raises(TrainingValidationError) as info:
        _create_trainer(description, bs.Trainer, "Checkpoint 'x.ckpt'")
    message = str(info.value)
    assert message.startswith("Checkpoint 'x.ckpt' names classes that are not known")
    assert "'HookA' (at hooks.a), 'HookB' (at hooks.b)" in message
    assert 'corrupt' not in message
