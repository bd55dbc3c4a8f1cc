"""Every registered layer on the OneDnnHandler (float32) against the
NumpyHandler in float64.

The registry (tests/layers/test_layer_registry.py) checks each layer's
gradients with finite differences on ``DebugHandler(NumpyHandler(float64))``.
Here the same layers, configurations, inputs and parameters run a forward
and a backward pass on a float32 OneDnnHandler (oneDNN's convolution and
pooling, NumpyHandler's other ops) and on a float64 NumpyHandler: outputs,
input deltas and gradients agree within float32's precision.
"""

import numpy as np
import pytest

from brainstorm.handlers import NumpyHandler
from brainstorm.testing import _Runner, instantiate_layer
from tests.layers.test_layer_registry import _cases
from tests.onednn_support import onednn_handler


def run(entry, time_steps, batch_size, activation, handler):
    kwargs = dict(entry.get('kwargs', {}))
    if activation:
        kwargs['activation'] = activation
    layer = instantiate_layer(entry['layer_class'], entry['in_shapes'], **kwargs)
    rnd = np.random.RandomState(7)
    spec = {'time_steps': time_steps, 'batch_size': batch_size}
    for key, value in entry.get('spec', {}).items():
        spec[key] = value(time_steps, batch_size, rnd) if callable(value) else value
    runner = _Runner(layer, spec, handler)
    runner.forward()
    outputs = {n: runner.real_steps('outputs', n) for n in layer.out_shapes}
    weights = runner.random_output_weights(list(layer.out_shapes))
    runner.backward(weights, prefill_input_deltas=0.5)
    results = {f'outputs.{n}': v.astype(np.float64) for n, v in outputs.items()}
    for category in ('input_deltas', 'gradients'):
        for name in runner.buffers[category]._buffer_names:
            value = runner.get((category, name)).astype(np.float64)
            results[f'{category}.{name}'] = value
    return results


@pytest.mark.parametrize('entry, time_steps, batch_size, activation', _cases())
def test_layer_on_onednn_float32_matches_numpy_float64(
    entry, time_steps, batch_size, activation
):
    fast = run(entry, time_steps, batch_size, activation, onednn_handler(np.float32))
    reference = run(entry, time_steps, batch_size, activation, NumpyHandler(np.float64))
    assert fast.keys() == reference.keys()
    for name, expected in reference.items():
        scale = max(1.0, float(np.abs(expected).max()) if expected.size else 1.0)
        np.testing.assert_allclose(
            fast[name], expected, rtol=1e-3, atol=1e-4 * scale, err_msg=name
        )
