"""Issue 26, points 1, 2, 3 and 6 as a user meets them: each flow runs in
a fresh interpreter through ``import brainstorm as bs``, with default
settings."""

import json
import pathlib
import subprocess
import sys
import textwrap

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run(script: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, '-c', textwrap.dedent(script)],
        cwd=cwd,
        env={'PYTHONPATH': str(ROOT), 'PATH': '/usr/bin:/bin'},
        capture_output=True,
        text=True,
        timeout=120,
    )


def ok(result: subprocess.CompletedProcess) -> str:
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


TRAIN = """
import numpy as np
import brainstorm as bs

rng = np.random.default_rng(0)
x = rng.normal(size=(1, 50, 4))
labels = (x[0, :, :1] + x[0, :, 1:2] > 0).astype(float)[None]
bs.global_rnd.set_seed(42)
inp, out = bs.tools.get_in_out_layers('classification', 4, 2)
net = bs.Network.from_layer(
    inp >> bs.layers.FullyConnected(8, activation='tanh') >> out)
net.initialize(bs.initializers.Gaussian(0.1))
trainer = bs.Trainer(bs.training.MomentumStepper(0.1), verbose=False)
trainer.add_hook(bs.hooks.StopAfterEpoch(5))
trainer.train(net, bs.data_iterators.Minibatches(10, default=x, targets=labels))
net.save_as_hdf5('net.h5')

# the reference: the three calls that predict replaces
test = rng.normal(size=(1, 23, 4))
net.provide_external_data({'default': test}, all_inputs=False)
net.forward_pass()
np.save('test.npy', test)
np.save('forward.npy', net.get('Output.outputs.predictions'))
"""

PREDICT = """
import json
import numpy as np
import brainstorm as bs

net = bs.Network.from_hdf5('net.h5')
test = np.load('test.npy')
name = 'Output.outputs.predictions'
whole = net.predict(test, out_name=name)
batched = net.predict({'default': test}, batch_size=4, out_name=name)
# each sample alone, in its place: the order of the input
alone = np.concatenate(
    [net.predict(test[:, i:i + 1], out_name=name) for i in range(23)], axis=1)
forward = np.load('forward.npy')
print(json.dumps({
    'shape': whole.shape,
    'exact': bool(np.array_equal(whole, forward)),
    'batched': float(np.abs(batched - forward).max()),
    'alone': float(np.abs(alone - forward).max()),
    'spread': float(np.ptp(forward[..., 0])),
}))
"""


def test_trained_saved_loaded_model_predicts_exactly_forward_pass(tmp_path):
    ok(run(TRAIN, tmp_path))
    got = json.loads(ok(run(PREDICT, tmp_path)))
    assert got['shape'] == [1, 23, 2]
    assert got['exact'], 'predict differs from forward_pass'
    # other batch sizes: the same sums, in float32 perhaps in another order
    assert got['batched'] < 1e-6 and got['alone'] < 1e-6, got
    assert got['spread'] > 1e-3, 'the samples must differ to show the order'


def test_extract_returns_results_in_data_order(tmp_path):
    script = """
    import json
    import h5py
    import numpy as np
    import brainstorm as bs

    inp, out = bs.tools.get_in_out_layers('regression', 1, 1)
    net = bs.Network.from_layer(inp >> out)
    net.initialize(1.0)
    x = np.arange(10.0).reshape(1, 10, 1)
    data = bs.data_iterators.Minibatches(3, default=x, targets=x)
    name = 'Input.outputs.default'
    got = [bs.tools.extract(net, data, name)[name].ravel().tolist()
           for _ in range(3)]
    bs.tools.extract_and_save(net, data, name, 'out.h5')
    with h5py.File('out.h5', 'r') as f:
        saved = f[name][()].ravel().tolist()
    print(json.dumps({'extract': got, 'saved': saved}))
    """
    got = json.loads(ok(run(script, tmp_path)))
    order = list(map(float, range(10)))
    assert got['extract'] == [order] * 3
    assert got['saved'] == order


def test_never_initialised_network_is_refused_and_initialised_trains(tmp_path):
    script = """
    import sys
    import numpy as np
    import brainstorm as bs

    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
    data = bs.data_iterators.Minibatches(
        5, default=np.ones((1, 10, 4)), targets=np.zeros((1, 10, 1)))
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    if sys.argv[1:] == ['initialise']:
        net.initialize(bs.initializers.Gaussian(0.1))
    trainer.train(net, data)
    print(trainer.logs['rolling_training']['total_loss'])
    """
    refused = run(script, tmp_path)
    assert refused.returncode == 1
    assert 'UninitializedNetworkError' in refused.stderr
    assert 'never initialised' in refused.stderr
    assert 'net.initialize(' in refused.stderr
    initialised = subprocess.run(
        [sys.executable, '-c', textwrap.dedent(script), 'initialise'],
        cwd=tmp_path,
        env={'PYTHONPATH': str(ROOT), 'PATH': '/usr/bin:/bin'},
        capture_output=True,
        text=True,
        timeout=120,
    )
    losses = json.loads(ok(initialised))
    assert len(losses) == 2 and np.isfinite(losses).all()


def test_errors_name_the_outputs_and_how_to_run_without_targets(tmp_path):
    script = """
    import json
    import numpy as np
    import brainstorm as bs

    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    data = bs.data_iterators.Minibatches(
        5, default=np.ones((1, 10, 4)), targets=np.zeros((1, 10, 1)))
    messages = {}
    calls = {
        'predict': lambda: net.predict(np.ones((1, 2, 4)), out_name='Output.x'),
        'evaluate': lambda: bs.tools.evaluate(
            net, data, [bs.scorers.Accuracy()], out_name='Output.x'),
        'extract': lambda: bs.tools.extract(net, data, 'Output.x'),
        'targets': lambda: net.provide_external_data(
            {'default': np.ones((1, 2, 4))}),
    }
    for who, call in calls.items():
        try:
            call()
        except Exception as err:
            messages[who] = type(err).__name__ + ': ' + str(err)
    print(json.dumps(messages))
    """
    messages = json.loads(ok(run(script, tmp_path)))
    for who in ('predict', 'evaluate', 'extract'):
        assert messages[who].startswith('UnknownOutputError'), messages[who]
        assert "'Output.outputs.predictions'" in messages[who]
        assert "'FullyConnected.outputs.default'" in messages[who]
    assert messages['targets'].startswith('MissingInputError')
    assert 'all_inputs=False' in messages['targets']
    assert 'net.predict(data)' in messages['targets']
