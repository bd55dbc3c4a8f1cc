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
    """Random float32 arrays over many magnitudes, with NaN (of several
    payloads), inf, -0.0, subnormals and values whose sums overflow (and
    products, with a scalar above 1)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for k in range(count):
        a = rng.standard_normal(size) * 10.0 ** rng.integers(-44, 38, size)
        a = a.astype(np.float32)
        a[k * 50 : k * 50 + 50] = [np.nan, np.inf, -np.inf, 0.0, -0.0] * 10
        a.view(np.int32)[k * 50 + 200 : k * 50 + 210] = 0x7FC12345 + k
        a[-20:] = np.float32(3e38) * (-1) ** k
        arrays.append(a)
    return arrays


def same_bits(a, b):
    """Every bit, NaN payloads included."""
    return np.array_equal(a.view(np.int32), b.view(np.int32))


def same_values(a, b):
    """NaN at the same places, every bit of the other elements the same: for
    where the sign or payload of a NaN is NumPy's loops' choice, which
    varies with NumPy's version and the loop it takes, not the handler."""
    nan = np.isnan(a)
    return np.array_equal(nan, np.isnan(b)) and same_bits(a[~nan], b[~nan])


def count_numpy_updates(monkeypatch, op):
    calls = []
    original = getattr(_numpy_update, op)
    monkeypatch.setattr(
        _numpy_update, op, lambda *args: calls.append(op) or original(*args)
    )
    return calls


def check_update(monkeypatch, op, size, hyper, on_onednn=True, same=same_bits):
    """The op on OneDnnHandler and NumpyHandler: the ``same`` results; oneDNN
    ran (or, ``on_onednn`` False, NumpyHandler's op)."""
    h = onednn_handler(np.float32)
    expected = operands(OPS[op][0], size)
    got = [a.copy() for a in expected]
    with np.errstate(all='ignore'):
        getattr(NumpyHandler(np.float32), op)(*expected, *hyper)
        numpy_calls = count_numpy_updates(monkeypatch, op)
        getattr(h, op)(*got, *hyper)
    assert numpy_calls == ([] if on_onednn else [op])
    for name, a, b in zip(('parameters', 'gradients', 'velocity'), got, expected):
        assert same(a, b), name


@pytest.mark.parametrize('size', [ELEMENTWISE_MIN, 3 * ELEMENTWISE_MIN + 5])
@pytest.mark.parametrize('op', list(OPS))
def test_updates_are_numpy_handlers_bit_for_bit(monkeypatch, op, size):
    check_update(monkeypatch, op, size, OPS[op][1])


SCALARS = {  # learning rate, momentum
    'above 1': (3.0, 1.5),
    'ints': (2, 1),
    'zeros': (-0.0, 0.0),
    'tiny': (1e-46, 1e-45),
    'just below 3.4e38': (3.3999999999999992e38, -3.3999999999999992e38),
    'ints exact in float64': (2**53 - 1, -(2**53 - 1)),
}

#: momenta this big give velocities new NaN (inf - inf) where parameters
#: hold NaN of their own: which of the two NaN a sum passes on is the
#: choice of NumPy's loops (NumPy 1.24 and 2.0 the velocity's, 2.4 and
#: oneDNN the parameter's), so NaN compare by place
NAN_BY_PLACE = {'just below 3.4e38', 'ints exact in float64'}


@pytest.mark.parametrize('scalars', list(SCALARS))
@pytest.mark.parametrize('op', list(OPS))
def test_scalars_of_every_size_are_rounded_as_numpy_rounds_them(
    monkeypatch, op, scalars
):
    """Floats below 3.4e38 and ints below 2**53 in magnitude run on oneDNN,
    with NumPy's bits on every NumPy version (NumPy 1.x computes with them
    in float32 too, rounded as oneDNN's float32 scales are). Bigger ones:
    tests/test_old_numpy_r13.py."""
    hyper = SCALARS[scalars][: len(OPS[op][1])]
    same = same_values if scalars in NAN_BY_PLACE else same_bits
    check_update(monkeypatch, op, ELEMENTWISE_MIN, hyper, same=same)


def _strided(arrays):
    return [np.repeat(a, 2)[::2] for a in arrays]


FALLBACKS = {  # case -> (arrays, scalars) from the usual ones
    'a float64 learning rate': lambda arrays, hyper: (
        arrays,
        (np.float64(hyper[0]),) + hyper[1:],
    ),
    'a NaN learning rate': lambda arrays, hyper: (
        arrays,
        (float('nan'),) + hyper[1:],
    ),
    'an infinite learning rate': lambda arrays, hyper: (
        arrays,
        (float('inf'),) + hyper[1:],
    ),
    'a bool learning rate': lambda arrays, hyper: (arrays, (True,) + hyper[1:]),
    'strided arrays': lambda arrays, hyper: (_strided(arrays), hyper),
    'too few elements': lambda arrays, hyper: (
        [a[: ELEMENTWISE_MIN - 1] for a in arrays],
        hyper,
    ),
    'read-only parameters': lambda arrays, hyper: (arrays, hyper),
    'read-only velocity': lambda arrays, hyper: (arrays, hyper),
}


@pytest.mark.parametrize('case', list(FALLBACKS))
@pytest.mark.parametrize('op', list(OPS))
def test_other_operands_take_numpy_handlers_update(monkeypatch, op, case):
    """Where oneDNN could not give NumpyHandler's bits (NumPy computes with
    a float64 scalar in float64; a NaN scalar gives NumPy's NaN) or is not
    worth it, NumpyHandler's op runs, with its results and errors."""
    h = onednn_handler(np.float32)
    count, hyper = OPS[op]
    if case == 'read-only velocity' and count < 3:
        pytest.skip('sgd_update has no velocity')
    arrays, hyper = FALLBACKS[case](operands(count, 2 * ELEMENTWISE_MIN), hyper)
    read_only = {'read-only parameters': 0, 'read-only velocity': 2}.get(case)
    if read_only is not None:
        arrays[read_only].flags.writeable = False
    expected = [a.copy() for a in arrays]
    numpy_calls = count_numpy_updates(monkeypatch, op)
    with np.errstate(all='ignore'):
        if read_only is not None:
            with pytest.raises(ValueError, match='read-only'):
                getattr(h, op)(*arrays, *hyper)
            assert numpy_calls == [op]
            return
        getattr(NumpyHandler(np.float32), op)(*expected, *hyper)
        getattr(h, op)(*arrays, *hyper)
    assert numpy_calls == [op, op]
    # NumPy 1.24 gives a NaN learning rate's products either sign on two
    # handlers running the same NumPy code
    same = same_values if case == 'a NaN learning rate' else same_bits
    for a, b in zip(arrays, expected):
        assert same(np.ascontiguousarray(a), np.ascontiguousarray(b))


@pytest.mark.parametrize('op', list(OPS))
@pytest.mark.parametrize('sharing', ['the same array', 'overlapping views'])
def test_shared_or_overlapping_arrays_take_numpy_handlers_update(
    monkeypatch, op, sharing
):
    h = onednn_handler(np.float32)
    memory = operands(1, 4 * ELEMENTWISE_MIN)[0]
    size = 2 * ELEMENTWISE_MIN
    if sharing == 'the same array':  # the gradients are the parameters
        arrays = (memory[:size], memory[:size], memory[size:])
    else:  # the last operand overlaps the first
        arrays = (memory[:size], memory[size:], memory[size // 2 : size // 2 + size])
        if OPS[op][0] == 2:
            arrays = (arrays[0], arrays[2])
    calls = count_numpy_updates(monkeypatch, op)
    with np.errstate(all='ignore'):
        getattr(h, op)(*arrays[: OPS[op][0]], *OPS[op][1])
    assert calls == [op]


def test_a_float64_handler_takes_numpy_handlers_update(monkeypatch):
    h = onednn_handler(np.float64)
    p, g, v = (a.astype(np.float64) for a in operands(3, 2 * ELEMENTWISE_MIN))
    calls = count_numpy_updates(monkeypatch, 'momentum_update')
    with np.errstate(all='ignore'):
        h.momentum_update(p, g, v, 0.3, 0.9)
    assert calls == ['momentum_update']


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
    assert scaled, 'oneDNN ran no update'
