"""OneDnnHandler runs the SGD, momentum and Nesterov updates of big float32
arrays as oneDNN binary adds with run-time scales: NumpyHandler's results
bit for bit (both products rounded, then the sum), on all oneDNN's threads.
Everything else takes NumpyHandler's chunked ops.
"""

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import NumpyHandler, _numpy_update
from brainstorm.handlers.onednn.handler import ELEMENTWISE_MIN
from tests.onednn_support import onednn_handler

OPS = {  # op -> (number of arrays, scalars)
    'sgd_update': (2, (0.37,)),
    'momentum_update': (3, (0.37, 0.9)),
    'nesterov_update': (3, (0.37,)),
}


def operands(count, size, seed=0):
    """Random float32 arrays over many magnitudes, with NaN, inf, -0.0,
    subnormals and values whose products overflow."""
    rng = np.random.default_rng(seed)
    arrays = []
    for k in range(count):
        a = rng.standard_normal(size) * 10.0 ** rng.integers(-44, 38, size)
        a = a.astype(np.float32)
        a[k * 50 : k * 50 + 50] = [np.nan, np.inf, -np.inf, 0.0, -0.0] * 10
        a[-20:] = np.float32(3e38) * (-1) ** k
        arrays.append(a)
    return arrays


def same_bits(a, b):
    return bool(
        np.all((a.view(np.int32) == b.view(np.int32)) | (np.isnan(a) & np.isnan(b)))
    )


def count_numpy_updates(monkeypatch, op):
    calls = []
    original = getattr(_numpy_update, op)
    monkeypatch.setattr(
        _numpy_update, op, lambda *args: calls.append(op) or original(*args)
    )
    return calls


@pytest.mark.parametrize('size', [ELEMENTWISE_MIN, 3 * ELEMENTWISE_MIN + 5])
@pytest.mark.parametrize('op', list(OPS))
def test_updates_are_numpy_handlers_bit_for_bit(monkeypatch, op, size):
    h = onednn_handler(np.float32)
    count, hyper = OPS[op]
    expected = operands(count, size)
    got = [a.copy() for a in expected]
    with np.errstate(all='ignore'):
        getattr(NumpyHandler(np.float32), op)(*expected, *hyper)
    numpy_calls = count_numpy_updates(monkeypatch, op)
    getattr(h, op)(*got, *hyper)
    assert numpy_calls == [], 'oneDNN did not run'
    for name, a, b in zip(('parameters', 'gradients', 'velocity'), got, expected):
        assert same_bits(a, b), name


def _strided(arrays):
    return [np.repeat(a, 2)[::2] for a in arrays]


FALLBACKS = {
    'a float64 learning rate': lambda arrays, hyper: (
        arrays,
        (np.float64(hyper[0]),) + hyper[1:],
    ),
    'strided arrays': lambda arrays, hyper: (_strided(arrays), hyper),
    'too few elements': lambda arrays, hyper: (
        [a[: ELEMENTWISE_MIN - 1] for a in arrays],
        hyper,
    ),
    'read-only parameters': lambda arrays, hyper: (
        [arrays[0].copy()] + arrays[1:],
        hyper,
    ),
}


@pytest.mark.parametrize('case', list(FALLBACKS))
@pytest.mark.parametrize('op', list(OPS))
def test_other_operands_take_numpy_handlers_update(monkeypatch, op, case):
    """Where oneDNN could not give NumpyHandler's bits (a float64 scalar
    makes NumPy compute in float64) or is not worth it, NumpyHandler's
    op runs, with its results and errors."""
    h = onednn_handler(np.float32)
    count, hyper = OPS[op]
    arrays, hyper = FALLBACKS[case](operands(count, 2 * ELEMENTWISE_MIN), hyper)
    if case == 'read-only parameters':
        arrays[0].flags.writeable = False
    expected = [a.copy() for a in arrays]
    numpy_calls = count_numpy_updates(monkeypatch, op)
    with np.errstate(all='ignore'):
        if case == 'read-only parameters':
            with pytest.raises(ValueError, match='read-only'):
                getattr(h, op)(*arrays, *hyper)
            assert numpy_calls == [op]
            return
        getattr(NumpyHandler(np.float32), op)(*expected, *hyper)
        getattr(h, op)(*arrays, *hyper)
    assert numpy_calls == [op, op]
    for a, b in zip(arrays, expected):
        assert same_bits(np.ascontiguousarray(a), np.ascontiguousarray(b))


@pytest.mark.parametrize('op', ['momentum_update', 'nesterov_update'])
def test_shared_or_overlapping_arrays_take_numpy_handlers_update(monkeypatch, op):
    h = onednn_handler(np.float32)
    memory = operands(1, 4 * ELEMENTWISE_MIN)[0]
    size = 2 * ELEMENTWISE_MIN
    for p, g, v in (
        (memory[:size], memory[:size], memory[size:]),  # gradients are parameters
        (memory[:size], memory[size:], memory[size // 2 : size // 2 + size]),
    ):
        calls = count_numpy_updates(monkeypatch, op)
        with np.errstate(all='ignore'):
            getattr(h, op)(p, g, v, *OPS[op][1])
        assert calls == [op]


@pytest.mark.parametrize(
    'stepper',
    [
        lambda: bs.training.SgdStepper(learning_rate=0.3),
        lambda: bs.training.MomentumStepper(learning_rate=0.3, momentum=0.9),
        lambda: bs.training.NesterovStepper(learning_rate=0.3, momentum=0.9),
    ],
)
def test_an_mlp_trains_bit_for_bit_alike_on_both_cpu_handlers(monkeypatch, stepper):
    """A layer of more than 2**16 parameters, so oneDNN runs its updates."""
    results = []
    onednn = onednn_handler(np.float32)
    scaled = []
    original = type(onednn)._scaled_add
    monkeypatch.setattr(
        type(onednn),
        '_scaled_add',
        lambda self, *args: scaled.append(args[1].size) or original(self, *args),
    )
    for handler in (NumpyHandler(np.float32), onednn):
        inp, out = bs.tools.get_in_out_layers('classification', 20, 5)
        net = bs.Network.from_layer(
            inp >> bs.layers.FullyConnected(300) >> bs.layers.FullyConnected(300) >> out
        )
        net.set_handler(handler)
        net.initialize(bs.initializers.Gaussian(0.1), seed=3)
        assert net.buffer.parameters.size > ELEMENTWISE_MIN
        rnd = np.random.RandomState(4)
        data = bs.data_iterators.Minibatches(
            10,
            shuffle=False,
            default=rnd.randn(1, 40, 20),
            targets=rnd.randint(0, 5, (1, 40, 1)),
        )
        initial = net.get('parameters')
        trainer = bs.Trainer(stepper(), verbose=False)
        trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        trainer.train(net, data)
        results.append(net.get('parameters'))
        assert (results[-1] != initial).mean() > 0.5  # it learned
    np.testing.assert_array_equal(results[0], results[1])
    assert scaled and min(scaled) >= ELEMENTWISE_MIN, 'oneDNN ran no update'
