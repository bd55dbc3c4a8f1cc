"""The trainer's and hooks' messages go through logging (logger
``brainstorm``): verbose output as before, capturable, silenceable,
redirectable with the standard configuration."""

import logging
import subprocess
import sys
import textwrap

import pytest

from brainstorm.hooks import MonitorLoss, StopAfterEpoch
from brainstorm.training import Trainer
from brainstorm.training.steppers import SgdStepper
from tests.training.nets import Recorder, minibatches, xor_data, xor_net

HEADER = f'{"-" * 30} Epoch 1 {"-" * 30}'


def xor_iter():
    return minibatches(xor_data(), batch_size=2)


def train_verbose():
    trainer = Trainer(SgdStepper(0.01), verbose=True)
    trainer.add_hook(Recorder('talker', value={'x': 0.5}))
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(xor_net(), xor_iter())


def brainstorm_records(caplog):
    return [r for r in caplog.records if r.name.startswith('brainstorm')]


def test_trainer_messages_are_captured_with_caplog(caplog, capsys):
    caplog.set_level(logging.INFO, logger='brainstorm')
    train_verbose()
    records = brainstorm_records(caplog)
    messages = [r.getMessage() for r in records]
    assert 'talker >> x: 0.5' in messages
    assert HEADER in messages
    # results and headers come from the trainer, Hook.message from the hooks
    assert {r.name for r in records} == {'brainstorm.training', 'brainstorm.hooks'}
    assert [
        r.name for r in records if r.getMessage().startswith('StopAfterEpoch >>')
    ] == ['brainstorm.hooks']
    assert {r.levelno for r in records} == {logging.INFO}
    # the console shows exactly the logged messages, one per line, on stdout
    out, err = capsys.readouterr()
    assert out == ''.join(f'{m}\n' for m in messages)
    assert err == ''


def test_messages_are_silenced_through_the_brainstorm_logger(caplog, capsys):
    logger = logging.getLogger('brainstorm')
    old_level = logger.level
    logger.setLevel(logging.WARNING)
    try:
        train_verbose()
    finally:
        logger.setLevel(old_level)
    assert brainstorm_records(caplog) == []
    assert capsys.readouterr() == ('', '')


def test_hook_failure_is_logged_as_an_error(caplog, capsys):
    trainer = Trainer(SgdStepper(), verbose=False)
    trainer.add_hook(MonitorLoss('missing', name='val_monitor'))
    with pytest.raises(KeyError):
        trainer.train(xor_net(), xor_iter())
    errors = [r for r in brainstorm_records(caplog) if r.levelno == logging.ERROR]
    assert len(errors) == 1
    assert "'val_monitor'" in errors[0].getMessage()
    assert errors[0].name == 'brainstorm.training'
    assert "'val_monitor'" in capsys.readouterr().err


TRAIN = textwrap.dedent("""
    import numpy as np
    import brainstorm as bs


    class Talker(bs.hooks.Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            self.message(f'epoch {epoch_nr}')
            return {'x': 0.5}


    x = np.array([[[0, 0], [0, 1], [1, 0], [1, 1]]], dtype=float)
    t = np.array([[[0], [1], [1], [0]]])
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(3) >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=True)
    trainer.add_hook(Talker(name='talker'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1, verbose=False))
    trainer.train(net, bs.data_iterators.Minibatches(2, default=x,
                                                     targets=t))
""")

EXPECTED = (
    f'{"-" * 30} Epoch 0 {"-" * 30}\n'
    'talker >> epoch 0\n'
    'talker >> x: 0.5\n'
    f'{"-" * 30} Epoch 1 {"-" * 30}\n'
    'talker >> epoch 1\n'
    'talker >> x: 0.5\n'
)


def run_fresh(before: str = '', after_import: str = ''):
    code = before + '\nimport brainstorm\n' + after_import + '\n' + TRAIN
    result = subprocess.run(
        [sys.executable, '-c', code], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout, result.stderr


def test_fresh_process_verbose_output_is_plain_lines_on_stdout():
    assert run_fresh() == (EXPECTED, '')


def test_fresh_process_silenced_by_level():
    out, err = run_fresh(
        after_import='import logging\n'
        "logging.getLogger('brainstorm')"
        '.setLevel(logging.WARNING)'
    )
    assert (out, err) == ('', '')


def test_fresh_process_redirected_with_dict_config(tmp_path):
    log_file = tmp_path / 'train.log'
    config = {
        'version': 1,
        'disable_existing_loggers': False,
        'formatters': {'f': {'format': '%(name)s %(levelname)s %(message)s'}},
        'handlers': {
            'file': {
                'class': 'logging.FileHandler',
                'filename': str(log_file),
                'formatter': 'f',
            }
        },
        'loggers': {
            'brainstorm': {'handlers': ['file'], 'level': 'INFO', 'propagate': False}
        },
    }
    out, err = run_fresh(
        after_import=f'import logging.config\nlogging.config.dictConfig({config!r})'
    )
    assert (out, err) == ('', '')
    lines = log_file.read_text().splitlines()
    assert lines == [
        f'brainstorm.training INFO {"-" * 30} Epoch 0 {"-" * 30}',
        'brainstorm.hooks INFO talker >> epoch 0',
        'brainstorm.training INFO talker >> x: 0.5',
        f'brainstorm.training INFO {"-" * 30} Epoch 1 {"-" * 30}',
        'brainstorm.hooks INFO talker >> epoch 1',
        'brainstorm.training INFO talker >> x: 0.5',
    ]


def test_fresh_process_configured_before_import_is_respected(tmp_path):
    # a level and handler set before brainstorm is imported stay as they are
    out, err = run_fresh(
        before='import logging, sys\n'
        "logger = logging.getLogger('brainstorm')\n"
        'logger.setLevel(logging.INFO)\n'
        'logger.addHandler(logging.StreamHandler(sys.stderr))'
    )
    assert (out, err) == ('', EXPECTED)


def test_fresh_process_root_configuration_after_clearing_the_console():
    # the README's recipe: basicConfig for the root logger, brainstorm's
    # console handler removed, so every message appears once, formatted
    out, err = run_fresh(
        after_import='import logging, sys\n'
        "logging.getLogger('brainstorm').handlers.clear()\n"
        'logging.basicConfig(stream=sys.stdout, '
        "format='%(name)s: %(message)s')"
    )
    assert err == ''
    assert out.splitlines() == [
        f'brainstorm.training: {"-" * 30} Epoch 0 {"-" * 30}',
        'brainstorm.hooks: talker >> epoch 0',
        'brainstorm.training: talker >> x: 0.5',
        f'brainstorm.training: {"-" * 30} Epoch 1 {"-" * 30}',
        'brainstorm.hooks: talker >> epoch 1',
        'brainstorm.training: talker >> x: 0.5',
    ]
