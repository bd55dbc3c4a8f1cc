"""The examples run end to end on their offline fallback data.

Each example runs as a subprocess for one short epoch (``--epochs 1`` and
``--limit``, the examples' own options, so the scripts themselves are
tested), with ``$BRAINSTORM_DATA_DIR`` unset so that they use the fallback
data. The hook of hutter_lstm is checked in-process; the data they load is
tested in tests/test_datasets.py.
"""

from __future__ import annotations

import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest

import brainstorm as bs

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / 'examples'


def run_example(name: str, *args: str, cwd) -> str:
    env = dict(os.environ)
    env.pop('BRAINSTORM_DATA_DIR', None)
    result = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, (
        f'{name} {" ".join(args)} failed with exit code {result.returncode}:'
        f'\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}'
    )
    return result.stdout


def percentage(pattern: str, output: str) -> float:
    match = re.search(pattern, output)
    assert match, f'{pattern!r} not found in the output:\n{output[-2000:]}'
    return float(match.group(1)) / 100


@pytest.mark.slow
def test_mnist_pi_runs_on_the_digits(tmp_path):
    out = run_example('mnist_pi.py', '--epochs', '10', '--limit', '600', cwd=tmp_path)
    assert 'handwritten digits bundled with scikit-learn' in out
    assert '600 training and 360 validation images of 8x8 pixels' in out
    # a short run already learns (94 % measured; chance is 10 %)
    best = percentage(r'Validation accuracy: ([\d.]+)% \(best', out)
    assert best >= 0.85
    assert (tmp_path / 'mnist_pi_best.hdf5').exists()


@pytest.mark.slow
def test_cifar10_cnn_runs_on_upscaled_digits(tmp_path):
    out = run_example(
        'cifar10_cnn.py',
        '--epochs',
        '6',
        '--limit',
        '600',
        '--save',
        'best.hdf5',
        cwd=tmp_path,
    )
    assert 'upscaled from 8x8 to 32x32 pixels' in out
    assert 'of shape (32, 32, 1)' in out
    best = percentage(r'Validation accuracy: ([\d.]+)% \(best', out)
    assert best >= 0.7  # 93.6 % measured
    assert (tmp_path / 'best.hdf5').exists()


@pytest.mark.slow
def test_custom_layer_passes_the_layer_tests_and_trains(tmp_path):
    out = run_example(
        'custom_layer.py', '--epochs', '10', '--limit', '600', cwd=tmp_path
    )
    # every configuration of brainstorm.testing (T, B, masks, activations)
    from brainstorm.testing import get_test_configurations

    configurations = 2 * len(list(get_test_configurations()))  # two input shapes
    assert f'Square passed run_layer_tests in {configurations} configurations.' in out
    best = percentage(r'Validation accuracy: ([\d.]+)% \(best', out)
    assert best >= 0.8  # 92.8 % measured


@pytest.mark.slow
def test_hutter_lstm_runs_on_the_help_topics(tmp_path):
    out = run_example(
        'hutter_lstm.py',
        '--epochs',
        '1',
        '--limit',
        '200',
        '--size',
        '16',
        cwd=tmp_path,
    )
    assert 'pydoc_data.topics' in out
    entropy = float(
        re.search(
            r'Unigram entropy of the validation text: '
            r'([\d.]+) bits',
            out,
        ).group(1)
    )
    loss = float(
        re.search(
            r'Validation loss: ([\d.]+) bits per character '
            r'\(best',
            out,
        ).group(1)
    )
    assert 3.5 < entropy < 5.5  # English text
    assert 0 < loss < 10
    assert (tmp_path / 'hutter_lstm_best.hdf5').exists()


def _bits(name: str, output: str) -> float:
    pattern = {
        'entropy': r'Unigram entropy of the validation text: ([\d.]+) bits',
        'loss': r'Validation loss: ([\d.]+) bits per character \(best',
    }[name]
    match = re.search(pattern, output)
    assert match, f'{pattern!r} not found in the output:\n{output[-2000:]}'
    return float(match.group(1))


@pytest.mark.slow
def test_char_transformer_runs_on_the_help_topics(tmp_path):
    args = ('--epochs', '3', '--limit', '320', '--size', '32', '--blocks', '1')
    out = run_example('char_transformer.py', *args, cwd=tmp_path)
    assert 'pydoc_data.topics' in out
    assert f'Handler: {bs.handlers.default_handler}\n' in out  # as the others
    assert '320 training and 320 validation sequences of 100 characters' in out
    entropy = _bits('entropy', out)
    assert 3.5 < entropy < 5.5  # English text
    # 30 updates already predict better than the character frequencies
    # (4.21 against 4.49 bits measured; uniform guesses: log2(103) = 6.69)
    assert 0 < _bits('loss', out) < entropy - 0.1


@pytest.mark.slow
def test_cifar10_resnet_runs_on_upscaled_digits(tmp_path):
    args = ('--epochs', '4', '--limit', '600', '--save', 'best.hdf5')
    out = run_example('cifar10_resnet.py', *args, cwd=tmp_path)
    assert 'upscaled from 8x8 to 32x32 pixels' in out
    assert f'Handler: {bs.handlers.default_handler}\n' in out  # as the others
    assert 'of shape (32, 32, 1)' in out
    best = percentage(r'Validation accuracy: ([\d.]+)% \(best', out)
    assert best >= 0.35  # 61.1 % measured (60.8 % on NumpyHandler); chance 10 %
    assert (tmp_path / 'best.hdf5').exists()


# ---- the examples' helpers, in-process ---------------------------------


@pytest.fixture
def examples_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))


def test_validation_with_context_equals_one_long_sequence(examples_path):
    import hutter_lstm

    import brainstorm as bs

    rnd = np.random.RandomState(1)
    ids = rnd.randint(0, 5, size=2 * 2 * 100 + 1)
    x, y = bs.datasets.to_streams(ids, streams=2)
    net = bs.tools.create_net_from_spec('classification', 5, 5, 'L4')
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=3)

    def one_hot(ids_):
        return (ids_ == np.arange(5)).astype(np.float64)

    getter = bs.data_iterators.OneHot(
        bs.data_iterators.Minibatches(2, shuffle=False, default=x, targets=y),
        {'default': 5},
    )
    hook = hutter_lstm.MonitorLossWithContext('valid')
    hook.start(net, None, False, {'valid': getter})
    result = hook(epoch_nr=1, update_nr=0, net=net, stepper=None, logs={})

    # the two batches of 100 steps read as one sequence of 200 steps
    long_x = np.concatenate([x[:, 0:2], x[:, 2:4]])
    long_y = np.concatenate([y[:, 0:2], y[:, 2:4]])
    net.provide_external_data({'default': one_hot(long_x), 'targets': long_y})
    net.forward_pass()
    expected = net.get_loss_values()['total_loss'] / 200 / math.log(2)
    assert result['bits_per_character'] == pytest.approx(expected, rel=1e-9)
    # and differs from evaluating every batch from a zero state
    plain = bs.tools.evaluate(net, getter)['total_loss'] / 100 / math.log(2)
    assert abs(plain - expected) > 1e-6


@pytest.mark.parametrize(
    'name',
    [
        'mnist_pi.py',
        'cifar10_cnn.py',
        'hutter_lstm.py',
        'custom_layer.py',
        'char_transformer.py',
        'cifar10_resnet.py',
    ],
)
def test_every_example_has_a_gpu_switch(name, tmp_path):
    """``--gpu`` moves the network to PyCudaHandler. Where PyCUDA is not
    installed (as in CI) the run ends at once with the install hint, before
    any training; with PyCUDA it trains there (checked on a GPU machine,
    docs/gpu.rst)."""
    from brainstorm.optional import has_pycuda

    if has_pycuda:
        pytest.skip('PyCUDA is installed: the example would train on the GPU')
    env = dict(os.environ)
    env.pop('BRAINSTORM_DATA_DIR', None)
    result = subprocess.run(
        [
            sys.executable,
            str(EXAMPLES / name),
            '--gpu',
            '--epochs',
            '1',
            '--limit',
            '50',
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode != 0
    assert 'ImportError' in result.stderr and 'pycuda' in result.stderr.lower()
    assert 'Epoch' not in result.stdout and not list(tmp_path.iterdir())
    help_text = subprocess.run(
        [sys.executable, str(EXAMPLES / name), '--help'],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout
    assert '--gpu' in help_text and 'PyCudaHandler' in help_text
