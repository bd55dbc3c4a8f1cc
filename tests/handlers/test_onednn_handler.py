"""OneDnnHandler's own behaviour: oneDNN primitives made once per shape,
results equal to NumpyHandler's within float32's precision, the float64
fallback, copies, descriptions, files across handlers, loading and its
failure, and OpenMP's thread settings (in fresh processes).

The ops themselves are checked against float64 references by the handler
op table (tests/handlers/test_handler_ops.py)."""

import collections
import copy
import json
import os
import pickle
import subprocess
import sys

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.describable import create_from_description, get_description
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.onednn import _dnnl
from brainstorm.handlers.onednn.plans import EXACT_RELU_IMPLEMENTATIONS
from tests.onednn_support import onednn_handler

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def handler():
    return onednn_handler(np.float32, seed=1)


def out_size(size, kernel, padding, stride):
    return (size + 2 * padding - kernel) // stride + 1


GEOMETRIES = [  # n, h, w, c, f, kernel, padding, stride
    (4, 9, 8, 3, 5, (3, 3), 1, (1, 1)),
    (3, 12, 12, 16, 8, (5, 5), 2, (2, 2)),
    (2, 7, 9, 4, 6, (3, 2), 0, (2, 1)),
    (2, 24, 24, 3, 16, (3, 3), 0, (2, 2)),  # right padding of -1 in oneDNN
]


def run_conv(h, x, w, b, dy, dx0, padding, stride):
    on = h.create_from_numpy
    y = h.zeros(dy.shape)
    h.conv2d_forward_batch(on(x), on(w), on(b), y, padding, stride)
    dx, dw, db = on(dx0), h.zeros(w.shape), h.zeros(b.shape)
    h.conv2d_backward_batch(on(x), on(w), padding, stride, dx, on(dy), dw, db)
    return [h.get_numpy_copy(a).astype(np.float64) for a in (y, dx, dw, db)]


def run_pool(h, kind, x, dy, window, padding, stride):
    on = h.create_from_numpy
    y, dx = h.zeros(dy.shape), on(np.ones(x.shape))
    if kind == 'max':
        argmax = h.zeros(dy.shape)
        h.maxpool2d_forward_batch(on(x), window, y, padding, stride, argmax)
        h.maxpool2d_backward_batch(
            on(x), window, y, padding, stride, argmax, dx, on(dy)
        )
        return [h.get_numpy_copy(a) for a in (y, argmax, dx)]
    h.avgpool2d_forward_batch(on(x), window, y, padding, stride)
    h.avgpool2d_backward_batch(on(x), window, y, padding, stride, dx, on(dy))
    return [h.get_numpy_copy(a) for a in (y, dx)]


def close(got, expected, what):
    scale = max(1.0, float(np.abs(expected).max()))
    np.testing.assert_allclose(
        got, expected, rtol=1e-4, atol=1e-5 * scale, err_msg=what
    )


@pytest.mark.parametrize('geometry', GEOMETRIES)
def test_convolution_matches_numpy_float64(handler, geometry):
    n, h, w, c, f, k, p, s = geometry
    oh, ow = out_size(h, k[0], p, s[0]), out_size(w, k[1], p, s[1])
    conv_matches_numpy(handler, (n, h, w, c, f, k), (oh, ow), p, s, seed=3)


@pytest.mark.parametrize('kind', ['max', 'avg'])
@pytest.mark.parametrize('geometry', GEOMETRIES)
def test_pooling_matches_numpy_float64(handler, kind, geometry):
    n, h, w, c, _, k, p, s = geometry
    if p >= min(k):
        pytest.skip('windows of padding only: NumpyHandler runs those')
    rng = np.random.RandomState(4)
    oh, ow = out_size(h, k[0], p, s[0]), out_size(w, k[1], p, s[1])
    x, dy = rng.randn(n, h, w, c), rng.randn(n, oh, ow, c)
    got = run_pool(handler, kind, x, dy, k, p, s)
    expected = run_pool(NumpyHandler(np.float64), kind, x, dy, k, p, s)
    for a, b in zip(got, expected):
        close(a, b, kind)
    assert any(key[0] == kind for key in handler._plans), 'oneDNN did not run'


def test_max_pooling_takes_the_first_of_equal_maxima(handler):
    """Ties (ReLU zeros, small integers) go to the first cell in row-major
    window order, as NumpyHandler's do: argmax and the deltas agree
    exactly."""
    rng = np.random.RandomState(5)
    x = rng.randint(0, 3, (3, 10, 10, 4)).astype(np.float64)
    dy = rng.randn(3, 4, 4, 4)
    got = run_pool(handler, 'max', x, dy, (3, 3), 0, (2, 2))
    expected = run_pool(NumpyHandler(np.float64), 'max', x, dy, (3, 3), 0, (2, 2))
    np.testing.assert_array_equal(got[0], expected[0])
    np.testing.assert_array_equal(got[1], expected[1])
    close(got[2], expected[2], 'in_deltas')


def conv_matches_numpy(handler, shape, out_hw, padding, stride, seed):
    """Convolution forward and backward on ``handler`` against float64
    NumpyHandler, on random operands of ``shape`` ``(n, h, w, c, f,
    kernel)`` with outputs ``out_hw``."""
    n, h, w, c, f, k = shape
    rng = np.random.RandomState(seed)
    args = (
        rng.randn(n, h, w, c),
        rng.randn(f, *k, c),
        rng.randn(f),
        rng.randn(n, *out_hw, f),
        rng.randn(n, h, w, c),
    )
    got = run_conv(handler, *args, padding, stride)
    expected = run_conv(NumpyHandler(np.float64), *args, padding, stride)
    for name, a, b in zip(('outputs', 'in_deltas', 'dW', 'dbias'), got, expected):
        close(a, b, name)


def test_primitives_are_made_once_per_shape(handler):
    rng = np.random.RandomState(6)
    args = (
        rng.randn(2, 8, 8, 3),
        rng.randn(4, 3, 3, 3),
        rng.randn(4),
        rng.randn(2, 8, 8, 4),
        rng.randn(2, 8, 8, 3),
    )
    run_conv(handler, *args, 1, (1, 1))
    plans = dict(handler._plans)
    primitives = [
        id(p) for plan in plans.values() for p in (plan.forward, plan.backward_data)
    ]
    run_conv(handler, *args, 1, (1, 1))
    assert handler._plans == plans
    assert primitives == [
        id(p) for plan in plans.values() for p in (plan.forward, plan.backward_data)
    ]
    # another batch size is another shape
    x, w, b, dy, dx = args
    run_conv(handler, x[:1], w, b, dy[:1], dx[:1], 1, (1, 1))
    assert len(handler._plans) == len(plans) + 1


def test_the_plans_of_each_kind_are_capped(handler, monkeypatch):
    """Training with a new batch size every step made new convolution,
    pooling and elementwise plans without end (about 1 MiB per batch size
    for a small CNN): of each kind, the least recently used go, and the
    network still trains as NumpyHandler does."""
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'PLANS_PER_KIND', 3, raising=False)
    net = small_cnn()
    net.set_handler(handler)
    reference = small_cnn()
    reference.set_handler(NumpyHandler(np.float32))  # same seed: same parameters
    np.testing.assert_array_equal(reference.get('parameters'), net.get('parameters'))
    rng = np.random.RandomState(9)
    for size in range(1, 9):
        x = rng.rand(1, size, 8, 8, 3)
        t = rng.randint(0, 5, (1, size, 1))
        for n in (net, reference):
            n.provide_external_data({'default': x, 'targets': t})
            n.forward_pass(training_pass=True)
            n.backward_pass()
        np.testing.assert_allclose(
            net.get('gradients'), reference.get('gradients'), rtol=1e-4, atol=1e-6
        )
    kinds = collections.Counter(key[0] for key in handler._plans)
    assert kinds, 'oneDNN did not run'
    assert max(kinds.values()) <= 3, kinds
    # the newest batch sizes' plans are the ones kept
    conv = [key for key in handler._plans if key[0] == 'conv']
    assert sorted(key[1][0] for key in conv) == [6, 7, 8]


FRESH_BATCH_SIZES = """
import collections, json
import numpy as np
import brainstorm as bs
inp, out = bs.tools.get_in_out_layers('classification', (8, 8, 3), 5)
net = bs.Network.from_layer(
    inp >> bs.layers.Convolution2D(4, kernel_size=(3, 3), padding=1)
    >> bs.layers.Pooling2D(kernel_size=(2, 2), type='max', stride=(2, 2))
    >> out)
net.initialize(bs.initializers.Gaussian(0.1), seed=3)
rng = np.random.RandomState(9)
for size in range(1, 81):  # a new batch size every step
    net.provide_external_data({'default': rng.rand(1, size, 8, 8, 3),
                               'targets': rng.randint(0, 5, (1, size, 1))})
    net.forward_pass(training_pass=True)
    net.backward_pass()
kinds = collections.Counter(str(key[0]) for key in net.handler._plans)
print(json.dumps({'handler': type(net.handler).__name__, 'kinds': kinds,
                  'finite': bool(np.isfinite(net.get('gradients')).all())}))
"""


def test_eighty_batch_sizes_keep_64_plans_of_each_kind_by_default():
    """Default settings, a fresh process, the public API."""
    onednn_handler()
    got = run_fresh(FRESH_BATCH_SIZES)
    assert got['handler'] == 'OneDnnHandler'
    assert got['finite']
    assert got['kinds']['conv'] == got['kinds']['max'] == 64, got['kinds']


def test_each_kind_of_elementwise_work_is_capped_on_its_own(handler, monkeypatch):
    """Many sizes of one elementwise kind do not push out another kind's
    plan."""
    from brainstorm.handlers.onednn import handler as module

    monkeypatch.setattr(module, 'PLANS_PER_KIND', 2, raising=False)
    rng = np.random.RandomState(3)

    def run(op, size):
        x, y, dy = (rng.rand(size).astype(np.float32) for _ in range(3))
        getattr(handler, op)(x, y, dy, np.empty_like(x))

    run('sigmoid_deriv', 1 << 16)
    for extra in range(4):
        run('rel_deriv', (1 << 16) + extra)
    kinds = collections.Counter(key[:2] for key in handler._plans)
    assert kinds[('elementwise', 'sigmoid_deriv')] == 1, kinds
    assert kinds[('elementwise', 'relu_deriv')] == 2, kinds


def test_oneDNN_runs_its_optimized_kernels(handler):
    """Contiguous NHWC images get oneDNN's vectorised implementations, not
    its reference loops (strided memory would get those)."""
    rng = np.random.RandomState(7)
    run_conv(
        handler,
        rng.randn(4, 16, 16, 16),
        rng.randn(32, 5, 5, 16),
        rng.randn(32),
        rng.randn(4, 16, 16, 32),
        rng.randn(4, 16, 16, 16),
        2,
        (1, 1),
    )
    (plan,) = handler._plans.values()
    for primitive in (plan.forward, plan.backward_data, plan.backward_weights):
        assert not primitive.implementation.startswith('ref'), primitive.implementation


def test_strided_views_give_the_same_results(handler):
    """Feature slices of wider buffers (how a network may lay out images)
    go through scratch copies and give the results of contiguous arrays,
    writing nothing outside the view."""
    rng = np.random.RandomState(8)
    x, w, b = rng.randn(2, 6, 6, 3), rng.randn(4, 3, 3, 3), rng.randn(4)
    dy, dx0 = rng.randn(2, 6, 6, 4), rng.randn(2, 6, 6, 3)
    expected = run_conv(handler, x, w, b, dy, dx0, 1, (1, 1))

    def view(a):
        wide = handler.create_from_numpy(
            np.full(a.shape[:-1] + (a.shape[-1] + 4,), 7.0)
        )
        part = wide[..., 2 : 2 + a.shape[-1]]
        part[...] = a
        return wide, part

    (wx, vx), (wdy, vdy), (wdx, vdx) = view(x), view(dy), view(dx0)
    wy, vy = view(np.zeros(dy.shape))
    on = handler.create_from_numpy
    handler.conv2d_forward_batch(vx, on(w), on(b), vy, 1, (1, 1))
    dw, db = handler.zeros(w.shape), handler.zeros(b.shape)
    handler.conv2d_backward_batch(vx, on(w), 1, (1, 1), vdx, vdy, dw, db)
    for got, want in zip((vy, vdx, dw, db), expected):
        np.testing.assert_array_equal(got, want)
    for wide in (wx, wy, wdy, wdx):
        assert (wide[..., :2] == 7).all() and (wide[..., -2:] == 7).all()


def test_float64_runs_numpy_handler_ops_exactly(handler):
    """oneDNN has no float64 convolution: the float64 handler is
    NumpyHandler, bit for bit, and makes no primitives."""
    h64 = onednn_handler(np.float64)
    rng = np.random.RandomState(9)
    args = (
        rng.randn(2, 7, 7, 3),
        rng.randn(4, 3, 3, 3),
        rng.randn(4),
        rng.randn(2, 4, 4, 4),
        rng.randn(2, 7, 7, 3),
    )
    got = run_conv(h64, *args, 1, (2, 2))
    expected = run_conv(NumpyHandler(np.float64), *args, 1, (2, 2))
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert h64._plans == {}
    assert h64.keeps_conv_columns(10**6) and not handler.keeps_conv_columns(10**6)


def test_windows_of_padding_only_follow_numpy_handler(handler):
    x = np.random.RandomState(10).randn(1, 2, 2, 1)
    dy = np.ones((1, 4, 4, 1))
    for kind in ('max', 'avg'):
        got = run_pool(handler, kind, x, dy, (1, 1), 1, (1, 1))
        expected = run_pool(NumpyHandler(np.float64), kind, x, dy, (1, 1), 1, (1, 1))
        for a, b in zip(got, expected):
            close(a, b, kind)


def test_description_copy_and_pickle(handler):
    description = get_description(handler)
    assert description == {'@type': 'OneDnnHandler', 'dtype': 'float32'}
    again = create_from_description(description)
    assert type(again) is type(handler) and again.dtype == np.float32
    assert repr(handler) == 'OneDnnHandler(dtype=np.float32)'
    rng = np.random.RandomState(11)
    args = (
        rng.randn(2, 5, 5, 2),
        rng.randn(3, 3, 3, 2),
        rng.randn(3),
        rng.randn(2, 5, 5, 3),
        rng.randn(2, 5, 5, 2),
    )
    expected = run_conv(handler, *args, 1, (1, 1))
    for other in (copy.deepcopy(handler), pickle.loads(pickle.dumps(handler))):
        assert other._plans == {}
        for a, b in zip(run_conv(other, *args, 1, (1, 1)), expected):
            np.testing.assert_array_equal(a, b)


def small_cnn():
    inp, out = bs.tools.get_in_out_layers('classification', (8, 8, 3), 5)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(4, kernel_size=(3, 3), padding=1)
        >> bs.layers.Pooling2D(kernel_size=(2, 2), type='max', stride=(2, 2))
        >> bs.layers.FullyConnected(5)
        >> out
    )
    net.initialize(bs.initializers.Gaussian(0.1), seed=3)
    return net


@pytest.mark.parametrize('saving', ['numpy', 'onednn'])
def test_a_file_saved_under_one_handler_loads_under_the_other(tmp_path, saving):
    handlers = {
        'numpy': lambda: NumpyHandler(np.float32),
        'onednn': lambda: onednn_handler(np.float32),
    }
    loading = 'onednn' if saving == 'numpy' else 'numpy'
    net = small_cnn()
    net.set_handler(handlers[saving]())
    path = str(tmp_path / 'net.h5')
    net.save_as_hdf5(path)
    loaded = bs.Network.from_hdf5(path)
    assert (
        type(loaded.handler).__name__
        == {
            'numpy': 'NumpyHandler',
            'onednn': 'OneDnnHandler',
        }[saving]
    )
    loaded.set_handler(handlers[loading]())
    np.testing.assert_array_equal(loaded.get('parameters'), net.get('parameters'))
    # and the two compute the same outputs within float32's precision
    x = np.random.RandomState(12).rand(1, 6, 8, 8, 3).astype(np.float32)
    results = []
    for n in (net, loaded):
        n.provide_external_data({'default': x, 'targets': np.zeros((1, 6, 1))})
        n.forward_pass()
        results.append(n.get('Output.outputs.predictions'))
    np.testing.assert_allclose(results[0], results[1], rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------- loading


def test_a_missing_library_makes_the_handler_unavailable(monkeypatch):
    """Where no libdnnl.so.3 loads, creating the handler raises an
    ImportError naming the places searched and how to install it."""
    monkeypatch.setattr(_dnnl, '_loaded', None)
    monkeypatch.setattr(_dnnl, '_failure', None)
    monkeypatch.setattr(_dnnl, '_candidates', lambda: ['/nonexistent/libdnnl.so.3'])
    from brainstorm.handlers.onednn import OneDnnHandler, onednn_available

    with pytest.raises(ImportError) as info:
        OneDnnHandler()
    message = str(info.value)
    assert 'pip install onednn-cpu-gomp' in message
    assert '/nonexistent/libdnnl.so.3' in message
    assert onednn_available() == (False, message)


def run_fresh(code, argv=(), **env):
    environment = {k: v for k, v in os.environ.items() if not k.startswith('OMP_')}
    environment.pop('BRAINSTORM_NO_ONEDNN', None)
    environment.update(env)
    done = subprocess.run(
        [sys.executable, '-c', code, *argv],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[0])
    result['openmp'] = done.stdout + done.stderr
    return result


PROBE = """
import ctypes, json, os, sys
import numpy as np
from brainstorm.handlers.onednn import OneDnnHandler, onednn_available
ok, why = onednn_available()
h = OneDnnHandler() if ok else None
print(json.dumps({'ok': ok, 'why': why,
                  'threads': h.threads if ok else None,
                  'policy': os.environ.get('OMP_WAIT_POLICY')}), flush=True)
if ok:  # libgomp's own view of its settings, on stderr
    ctypes.CDLL('libgomp.so.1').omp_display_env(1)
"""


PLACE_PROBE = """
import json, site, sys
sys.path.insert(0, sys.argv[1])  # this record of onednn-cpu-gomp comes first
# a Python that uses the user's site-packages, or one that does not (venv)
site.ENABLE_USER_SITE = sys.argv[2] == 'user-site'
sys.prefix = sys.base_prefix = '/nonexistent'  # the environment lacks it
from brainstorm.handlers.onednn import _dnnl, onednn_available
ok, why = onednn_available()
print(json.dumps({'ok': ok, 'why': why,
                  'path': _dnnl.library().path if ok else None,
                  'places': [str(place) for place in _dnnl.library_path()]}))
"""


def fake_distribution(site, record: str):
    """A record of ``onednn-cpu-gomp`` in ``site`` listing ``record``."""
    info = site / 'onednn_cpu_gomp-2023.2.0.dist-info'
    info.mkdir(parents=True)
    (info / 'METADATA').write_text(
        'Metadata-Version: 2.1\nName: onednn-cpu-gomp\nVersion: 2023.2.0\n'
    )
    (info / 'RECORD').write_text(record)


def linked_library(place):
    """``place/libdnnl.so.3``, a link to the library this process loaded."""
    place.mkdir(parents=True)
    link = place / 'libdnnl.so.3'
    link.symlink_to(os.path.realpath(_dnnl.library().path))
    return str(link)


def probe_places(tmp_path, library_at: str, record: str, python: str):
    """The probe's answer where the library lies at ``tmp_path/library_at``.

    ``record``: what the fake distribution's record lists; ``python``:
    'user-site' (a Python using the user's site-packages, whose base is
    ``tmp_path/user``) or 'venv'. Returns the answer and the library's path.
    """
    onednn_handler()
    link = linked_library(tmp_path / library_at)
    fake_distribution(tmp_path / 'site', record)
    got = run_fresh(
        PLACE_PROBE, PYTHONUSERBASE=str(tmp_path / 'user'),
        argv=[str(tmp_path / 'site'), python],
    )  # fmt: skip
    return got, link


def test_the_library_is_found_where_its_distribution_put_it(tmp_path):
    """Install schemes put the library in other places (a system's
    /usr/local/lib, --user, --prefix): the distribution's own record of
    installed files says where."""
    record = '../odd/place/libdnnl.so.3,,\n'
    got, link = probe_places(tmp_path, 'odd/place', record, 'venv')
    assert got['ok'], got['why']
    assert got['path'] == link


def test_the_library_of_a_user_install_is_found(tmp_path):
    """``pip install --user`` puts libdnnl.so.3 under the user's base
    (``site.getuserbase()/lib``), not under ``sys.prefix``: the default
    handler was NumpyHandler there. Found even where the distribution's
    record names no library."""
    got, link = probe_places(tmp_path, 'user/lib', '', 'user-site')
    assert got['ok'], got['why']
    assert got['path'] == link


def test_a_virtual_environment_does_not_look_in_the_users_base(tmp_path):
    """Where Python ignores the user's site-packages (a virtual
    environment, python -s), a library under the user's base is not the
    environment's: it is not loaded from there."""
    got, link = probe_places(tmp_path, 'user/lib', '', 'venv')
    assert str(tmp_path / 'user' / 'lib') not in got['places']
    assert got['path'] != link


@pytest.mark.parametrize('value', ['1', 'yes', 'TRUE'])
def test_the_environment_switch_turns_onednn_off(value):
    got = run_fresh(PROBE, BRAINSTORM_NO_ONEDNN=value)
    assert got['ok'] is False
    assert 'BRAINSTORM_NO_ONEDNN' in got['why']


@pytest.mark.parametrize('value', ['0', 'false', 'No', ' off '])
def test_the_environment_switch_set_to_off_leaves_onednn_on(value):
    """'false', 'no' and 'off' turned oneDNN off: only '' and '0' counted
    as off."""
    onednn_handler()  # skips where oneDNN cannot load
    got = run_fresh(PROBE, BRAINSTORM_NO_ONEDNN=value)
    assert got['ok'] is True


def test_openmp_threads_follow_omp_num_threads():
    onednn_handler()  # skips where oneDNN cannot load
    got = run_fresh(PROBE, OMP_NUM_THREADS='1')
    assert got['threads'] == 1
    default = run_fresh(PROBE)
    assert default['threads'] == len(os.sched_getaffinity(0))


def test_idle_openmp_threads_sleep_unless_the_user_says_otherwise():
    """Between oneDNN's primitives NumPy's OpenBLAS threads run: OpenMP's
    idle threads must not spin on the same cores. The handler sets
    OMP_WAIT_POLICY=PASSIVE before oneDNN (and libgomp) load, but keeps a
    policy the user set."""
    onednn_handler()
    passive = run_fresh(PROBE)
    assert passive['policy'] == 'PASSIVE'
    # libgomp spins 300000 times before sleeping unless the policy is passive
    assert "GOMP_SPINCOUNT = '0'" in passive['openmp'], passive['openmp']
    active = run_fresh(PROBE, OMP_WAIT_POLICY='ACTIVE')
    assert active['policy'] == 'ACTIVE'
    assert "OMP_WAIT_POLICY = 'ACTIVE'" in active['openmp'], active['openmp']


# ------------------------------------------------------------ the default

DEFAULT_PROBE = """
import json, os
import brainstorm as bs
inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
net = bs.Network.from_layer(inp >> out)
print(json.dumps({'default': repr(bs.handlers.default_handler),
                  'net': repr(net.handler),
                  'same': net.handler is bs.handlers.default_handler}))
"""


def test_the_default_handler_is_onednn_where_it_loads():
    onednn_handler()
    got = run_fresh(DEFAULT_PROBE)
    assert got['default'] == got['net'] == 'OneDnnHandler(dtype=np.float32)'
    assert got['same']


def test_the_environment_switch_makes_numpy_handler_the_default():
    got = run_fresh(DEFAULT_PROBE, BRAINSTORM_NO_ONEDNN='1')
    assert got['default'] == got['net'] == 'NumpyHandler(dtype=np.float32)'


def test_set_default_handler_forces_numpy_handler():
    previous = bs.handlers.set_default_handler(NumpyHandler(np.float32))
    try:
        inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
        net = bs.Network.from_layer(inp >> out)
        assert type(net.handler) is NumpyHandler
        with pytest.raises(TypeError, match='must be a Handler.*received str'):
            bs.handlers.set_default_handler('numpy')
    finally:
        assert type(bs.handlers.set_default_handler(previous)) is NumpyHandler
    assert bs.handlers.default_handler is previous


def test_print_network_info_names_the_handler(handler, capsys):
    net = small_cnn()
    net.set_handler(handler)
    bs.tools.print_network_info(net)
    text = capsys.readouterr().out
    assert (
        f'Handler: OneDnnHandler(dtype=np.float32) with oneDNN '
        f'{handler.onednn_version} on {handler.threads} threads'
    ) in text
    net.set_handler(NumpyHandler(np.float64))
    bs.tools.print_network_info(net)
    assert 'Handler: NumpyHandler(dtype=np.float64)\n' in capsys.readouterr().out


def test_a_checkpoint_resumes_bit_for_bit_on_onednn(tmp_path, handler):
    """oneDNN's kernels are deterministic for fixed shapes and threads: a
    CNN run continued from a checkpoint (on a fresh handler with fresh
    primitives) ends with the parameters of the uninterrupted run."""

    def setup():
        bs.global_rnd.set_seed(7)
        rnd = np.random.RandomState(0)
        x = rnd.rand(1, 24, 8, 8, 3)
        y = rnd.randint(0, 5, (1, 24, 1))
        net = small_cnn()
        net.set_handler(onednn_handler(np.float32))
        trainer = bs.Trainer(bs.training.MomentumStepper(0.1, 0.9), verbose=False)
        trainer.add_hook(
            bs.hooks.SaveCheckpoint(
                str(tmp_path / 'run.ckpt'), timescale='update', interval=4
            )
        )
        trainer.add_hook(bs.hooks.StopAfterEpoch(3))
        data = bs.data_iterators.Minibatches(6, shuffle=True, default=x, targets=y)
        return net, trainer, data

    net, trainer, data = setup()
    trainer.train(net, data)
    full = net.get('parameters')
    net, trainer, data = setup()
    trainer.hooks['StopAfterEpoch'].max_epochs = 2
    trainer.train(net, data)
    resumed, net = bs.Trainer.from_checkpoint(str(tmp_path / 'run.ckpt'))
    assert type(net.handler).__name__ == 'OneDnnHandler'
    assert resumed.current_update_nr == 8
    resumed.hooks['StopAfterEpoch'].max_epochs = 3
    resumed.train(net, setup()[2])
    np.testing.assert_array_equal(net.get('parameters'), full)


def test_cnns_in_threads_share_one_handler(handler):
    """Networks of the same shapes in several threads share the handler's
    primitives (one lock each) and keep their scratch memory per thread:
    each thread's training ends exactly as when it runs alone."""
    import sys
    import threading

    rnd = np.random.RandomState(13)
    x = rnd.rand(1, 12, 8, 8, 3)
    y = rnd.randint(0, 5, (1, 12, 1))

    def run(seed, results, barrier=None):
        net = small_cnn()
        net.initialize(bs.initializers.Gaussian(0.1), seed=seed)
        net.set_handler(handler)
        stepper = bs.training.MomentumStepper(0.05, 0.9)
        stepper.start(net)
        for _ in range(6):
            if barrier is not None:
                barrier.wait(30)
            net.provide_external_data({'default': x, 'targets': y})
            stepper.run()
        results[seed] = net.get('parameters')

    alone: dict = {}
    for seed in (1, 2, 3):
        run(seed, alone)
    together: dict = {}
    barrier = threading.Barrier(3)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        threads = [
            threading.Thread(target=run, args=(seed, together, barrier), daemon=True)
            for seed in (1, 2, 3)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)  # each takes about a second
    finally:
        sys.setswitchinterval(interval)
    assert not any(thread.is_alive() for thread in threads), 'a thread hangs'
    assert sorted(together) == [1, 2, 3]
    for seed in (1, 2, 3):
        np.testing.assert_array_equal(together[seed], alone[seed])


def test_a_file_saved_on_onednn_loads_where_onednn_cannot(tmp_path, handler):
    """Another machine (here: a fresh process with oneDNN switched off)
    loads the file on a NumpyHandler, says so, and gets the parameters."""
    net = small_cnn()
    net.set_handler(handler)
    path = tmp_path / 'net.h5'
    net.save_as_hdf5(str(path))
    np.save(tmp_path / 'saved.npy', net.get('parameters'))
    code = f"""
import json, warnings
import numpy as np
import brainstorm as bs
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    net = bs.Network.from_hdf5({str(path)!r})
same = np.array_equal(net.get('parameters'), np.load({str(tmp_path / 'saved.npy')!r}))
print(json.dumps({{'handler': repr(net.handler), 'same': bool(same),
                  'warnings': [str(w.message) for w in caught]}}))
"""
    got = run_fresh(code, BRAINSTORM_NO_ONEDNN='1')
    assert got['handler'] == 'NumpyHandler(dtype=np.float32)'
    assert got['same']
    assert any(
        'OneDnnHandler' in w and 'BRAINSTORM_NO_ONEDNN' in w for w in got['warnings']
    ), got['warnings']


def test_shapes_onednn_cannot_run_use_numpy_handler_ops(handler, monkeypatch):
    """Where oneDNN has no implementation for a shape (its primitive
    descriptor fails), the op runs NumpyHandler's code, and oneDNN is not
    asked again for that shape."""
    from brainstorm.handlers.onednn import handler as handler_module
    from brainstorm.handlers.onednn import pooling

    asked = []

    def unimplemented(*args):
        asked.append(args)
        raise _dnnl.OneDnnError('oneDNN: ... failed: unimplemented (status 3)')

    monkeypatch.setattr(handler_module, 'ConvPlan', unimplemented)
    monkeypatch.setattr(pooling, 'PoolPlan', unimplemented)
    rng = np.random.RandomState(14)
    args = (
        rng.randn(2, 6, 6, 3),
        rng.randn(4, 3, 3, 3),
        rng.randn(4),
        rng.randn(2, 6, 6, 4),
        rng.randn(2, 6, 6, 3),
    )
    for _ in range(2):
        got = run_conv(handler, *args, 1, (1, 1))
        expected = run_conv(NumpyHandler(np.float32), *args, 1, (1, 1))
        for a, b in zip(got, expected):
            np.testing.assert_array_equal(a, b)
        x, dy = rng.randn(2, 6, 6, 3), rng.randn(2, 2, 2, 3)
        for kind in ('max', 'avg'):
            pooled = run_pool(handler, kind, x, dy, (3, 3), 0, (2, 2))
            reference = run_pool(
                NumpyHandler(np.float32), kind, x, dy, (3, 3), 0, (2, 2)
            )
            for a, b in zip(pooled, reference):
                np.testing.assert_array_equal(a, b)
    assert len(asked) == 3  # one convolution and two pooling shapes, once each
    assert set(handler._plans.values()) == {None}


@pytest.mark.parametrize(
    'padding, stride',
    [((0, 1, 0, 1), (1, 1)), ((1, 1, 0, 1), (2, 2)), ((1, 1, 2, 2), (2, 1))],
)
def test_per_side_padding_matches_numpy_float64(handler, padding, stride):
    """Padding given per side (``'same'`` with even kernels, say): oneDNN's
    left padding is the top/left one, its right padding follows from the
    output size."""
    top, bottom, left, right = padding
    n, h, w, c, f, k = 2, 9, 8, 3, 4, (2, 3)
    oh = (h + top + bottom - k[0]) // stride[0] + 1
    ow = (w + left + right - k[1]) // stride[1] + 1
    rng = np.random.RandomState(15)
    conv_matches_numpy(handler, (n, h, w, c, f, k), (oh, ow), padding, stride, 15)
    x, dy = rng.randn(n, h, w, c), rng.randn(n, oh, ow, c)
    for kind in ('max', 'avg'):
        pooled = run_pool(handler, kind, x, dy, k, padding, stride)
        reference = run_pool(NumpyHandler(np.float64), kind, x, dy, k, padding, stride)
        for a, b in zip(pooled, reference):
            close(a, b, kind)
    assert all(plan is not None for plan in handler._plans.values())
    assert len(handler._plans) == 3


def _train_small(handler, layer, steps=3):
    rng = np.random.RandomState(7)
    inp, out = bs.tools.get_in_out_layers('classification', 6, 4)
    net = bs.Network.from_layer(inp >> layer >> out)
    net.initialize(bs.initializers.Gaussian(0.3), seed=4)
    net.set_handler(handler)
    stepper = bs.training.AdamStepper(0.01)
    stepper.start(net)
    data = {
        'default': rng.randn(5, 3, 6).astype(handler.dtype),
        'targets': rng.randint(0, 4, (5, 3, 1)).astype(handler.dtype),
    }
    for _ in range(steps):
        net.provide_external_data(data)
        stepper.run()
    return net.get('parameters')


@pytest.mark.parametrize('dtype', [np.float32, np.float64])
@pytest.mark.parametrize('name', ['Lstm', 'GRU', 'FullyConnected'])
def test_networks_without_conv_or_pooling_train_alike_on_both(dtype, name):
    """As docs/reproducibility.rst says: without Convolution2D, Pooling2D
    and (in float32) Lstm layers both CPU handlers run the same NumPy code,
    bit for bit. A float32 Lstm's products run on oneDNN: the same within
    float32's precision, not bit for bit."""
    make = {
        'Lstm': lambda: bs.layers.Lstm(9),
        'GRU': lambda: bs.layers.GRU(9),
        'FullyConnected': lambda: bs.layers.FullyConnected(9, activation='tanh'),
    }[name]
    onednn = _train_small(onednn_handler(dtype), make())
    numpy = _train_small(NumpyHandler(dtype), make())
    if dtype == np.float32 and name == 'Lstm':
        np.testing.assert_allclose(onednn, numpy, rtol=1e-4, atol=1e-6)
    else:
        np.testing.assert_array_equal(onednn, numpy)


# ------------------------------------- derivatives and sums on oneDNN


SPECIAL = np.array([np.nan, -np.nan, np.inf, -np.inf, -0.0, 0.0, 1.0, -1e30])


def elementwise_operands(size, seed=0):
    """Random float32 operands with zeros, negative zeros, big values, NaN
    and inf."""
    rnd = np.random.RandomState(seed)
    x = rnd.randn(size).astype(np.float32)
    x[::7] = 0.0
    x[1::11] = -0.0
    x[2::13] *= 1e30
    x[5::17] = SPECIAL[rnd.randint(0, len(SPECIAL), len(x[5::17]))]
    dy = rnd.randn(size).astype(np.float32)
    dy[3::5] = -0.0
    dy[4::19] = SPECIAL[rnd.randint(0, len(SPECIAL), len(dy[4::19]))]
    return x, dy


def assert_same_bits_or_both_nan(got, expected):
    """The same bits (so signed zeros too), except NaN's sign and payload."""
    nan = np.isnan(expected)
    np.testing.assert_array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(
        got[~nan].view(np.uint32), expected[~nan].view(np.uint32)
    )


@pytest.mark.parametrize('shape', [(1 << 16,), (3, 100, 17, 17, 8)])
def test_derivatives_and_sums_are_numpys_bit_for_bit(handler, shape):
    """rel_deriv differs only where its y is NaN (oneDNN passes dy on)."""
    size = int(np.prod(shape))
    x, dy = elementwise_operands(size)
    x, dy = x.reshape(shape), dy.reshape(shape)
    reference = NumpyHandler(np.float32)
    y = np.zeros(shape, np.float32)
    reference.rel(np.nan_to_num(x, nan=-1.0, posinf=np.inf), y)  # no NaN
    s = np.zeros(shape, np.float32)  # with exact 0, 0.5 and 1 among them
    with np.errstate(over='ignore', invalid='ignore'):
        reference.sigmoid(np.nan_to_num(x, nan=0.0).clip(-100, 100), s)
    s[::23] = np.nan
    results = {}
    for h in (handler, reference):
        dx = np.full(shape, 7.0, np.float32)
        ds = np.full(shape, 7.0, np.float32)
        total = x.copy()
        with np.errstate(over='ignore', invalid='ignore'):
            h.rel_deriv(x, y, dy, dx)
            h.sigmoid_deriv(x, s, dy, ds)
            if h is handler:
                h._add_into(total, dy)
            else:
                np.add(total, dy, out=total)
        results[h] = [dx, ds, total]
    for got, expected in zip(results[handler], results[reference]):
        assert_same_bits_or_both_nan(got, expected)
    assert {'relu_deriv', 'sigmoid_deriv', 'add'} <= {
        key[1] for key in handler._plans if key[0] == 'elementwise'
    }
    # where y is NaN (no ReLU output is: rel stays NumPy's), dy comes through
    y[0, ...] = np.nan
    dx = np.zeros(shape, np.float32)
    handler.rel_deriv(x, y, dy, dx)
    np.testing.assert_array_equal(dx[0], dy[0])


def test_relu_keeps_nan_as_numpy_does(handler):
    """oneDNN's ReLU gives 0 for NaN, so rel stays NumPy's."""
    x, _ = elementwise_operands(1 << 17, seed=2)
    y = np.zeros_like(x)
    handler.rel(x, y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    assert np.isnan(y).sum() == np.isnan(x).sum() > 0


def test_derivative_in_place(handler):
    x, dy = elementwise_operands(1 << 17, seed=1)
    y = np.maximum(np.nan_to_num(x, nan=-1.0, posinf=np.inf), 0)
    with np.errstate(invalid='ignore'):
        expected = dy * (y > 0)
    handler.rel_deriv(None, y, dy, dy)
    np.testing.assert_array_equal(dy, expected)


@pytest.mark.parametrize(
    'case', ['small', 'strided', 'float64', 'fortran', 'overlap', 'read-only']
)
def test_other_operands_take_numpys_ops(handler, case, monkeypatch):
    calls = []
    original = NumpyHandler.rel_deriv

    def spy(self, *args):
        calls.append('rel_deriv')
        original(self, *args)

    monkeypatch.setattr(NumpyHandler, 'rel_deriv', spy)
    h = onednn_handler(np.float64) if case == 'float64' else handler
    size = 1000 if case == 'small' else 1 << 16
    x, dy = elementwise_operands(2 * size)
    x, dy = x.astype(h.dtype), dy.astype(h.dtype)
    y = np.maximum(x, 0)
    dx = np.zeros(2 * size, h.dtype)
    if case == 'strided':
        y, dy, dx = y[::2], dy[::2], dx[::2]
    elif case == 'fortran':  # one operand not C-contiguous
        y, dy = y.reshape(2, size), dy.reshape(2, size)
        dx = np.zeros((size, 2), h.dtype).T
    elif case == 'overlap':  # dx overlaps dy without being dy
        both = np.concatenate([dy, np.zeros(8, h.dtype)])
        y, dy, dx = y[: size * 2 - 8], both[8 : 2 * size], both[: 2 * size - 8]
    elif case == 'read-only':
        dx.flags.writeable = False
    with np.errstate(invalid='ignore'):  # inf * 0 among the operands
        expected = dy * (y > 0)
        if case == 'read-only':
            with pytest.raises(ValueError, match='read-only'):
                h.rel_deriv(None, y, dy, dx)
        else:
            h.rel_deriv(None, y, dy, dx)
            np.testing.assert_array_equal(dx, expected)
    assert calls == ['rel_deriv']
    assert not [key for key in h._plans if key[0] == 'elementwise']


def test_max_pooling_passes_nan_on_as_numpy_handler(handler):
    """oneDNN's maximum skips NaN: inputs with NaN or inf take
    NumpyHandler's pooling, so a NaN in a network stays visible."""
    rnd = np.random.RandomState(1)
    x = rnd.rand(2, 6, 6, 4).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    x[1, 3, 2, 1] = np.inf
    results = []
    for h in (handler, NumpyHandler(np.float32)):
        y = np.zeros((2, 3, 3, 4), np.float32)
        argmax = np.zeros_like(y)
        h.maxpool2d_forward_batch(x, (2, 2), y, 0, (2, 2), argmax)
        results.append((y, argmax))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    np.testing.assert_array_equal(results[0][1], results[1][1])
    assert np.isnan(results[0][0][0, 0, 0, 0])


def test_a_nan_weight_makes_a_cnns_loss_nan(handler):
    """As on NumpyHandler: the trainer's finite check relies on it."""
    inp, out = bs.tools.get_in_out_layers('classification', (16, 16, 3), 4)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(16, kernel_size=(3, 3), padding=1, name='C')
        >> bs.layers.Pooling2D(kernel_size=(2, 2), stride=(2, 2))
        >> bs.layers.FullyConnected(8)
        >> out
    )
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    weights = net.get('C.parameters.W')
    weights[0, 1, 1, 0] = np.nan
    np.copyto(net.buffer.C.parameters.W, weights)
    rnd = np.random.RandomState(2)
    net.provide_external_data(
        {
            'default': rnd.rand(1, 16, 16, 16, 3),
            'targets': rnd.randint(0, 4, (1, 16, 1)),
        }
    )
    with np.errstate(invalid='ignore'):
        net.forward_pass()
    assert np.isnan(net.get('Loss.outputs.loss')).all()


def test_a_sum_into_a_read_only_target_raises_as_numpys(handler):
    target = np.zeros(1 << 16, np.float32)
    target.flags.writeable = False
    with pytest.raises(ValueError, match='read-only'):
        handler._add_into(target, np.ones(1 << 16, np.float32))
    assert not target.any()


@pytest.mark.parametrize(
    'case',
    ['finite', 'nan-input', 'inf-input', 'nan-weight', 'nan-bias', 'big', 'overflow'],
)
def test_a_fused_relu_is_numpys_relu_after_the_convolution(handler, case):
    """``activation='rel'`` runs the ReLU as the convolution's post-op only
    where no output can overflow (a bound from the operands' norms): there
    it is NumPy's ReLU bit for bit. Operands with NaN or inf, or big enough
    that the bound exceeds 2^100, get NumPy's ReLU after the convolution,
    which passes NaN on where oneDNN's would give 0."""
    rnd = np.random.RandomState(3)
    x = rnd.uniform(-1, 1, (4, 9, 8, 3)).astype(np.float32)
    w = rnd.uniform(-1, 1, (5, 3, 3, 3)).astype(np.float32)
    b = rnd.uniform(-1, 1, 5).astype(np.float32)
    if case == 'nan-input':
        x[1, 2, 3, 0] = np.nan
    elif case == 'inf-input':
        x[2, 0, 0, 1] = -np.inf
    elif case == 'nan-weight':
        w[3, 1, 1, 2] = np.nan
    elif case == 'nan-bias':
        b[2] = np.nan
    elif case == 'big':  # finite outputs near 1e30, the bound above 2^100
        x *= np.float32(1e15)
        w *= np.float32(1e15)
    elif case == 'overflow':  # outputs near 1e40: inf, and inf - inf
        x *= np.float32(1e20)
        w *= np.float32(1e20)
    fused = np.zeros((4, 9, 8, 5), np.float32)
    separate = np.zeros_like(fused)
    with np.errstate(invalid='ignore', over='ignore'):
        handler.conv2d_forward_batch(x, w, b, fused, 1, (1, 1), activation='rel')
        handler.conv2d_forward_batch(x, w, b, separate, 1, (1, 1))
        np.maximum(separate, 0, out=separate)
    assert_same_bits_or_both_nan(fused, separate)
    (plan,) = [p for key, p in handler._plans.items() if key[0] == 'conv']
    if case == 'finite':  # made and used where oneDNN has an exact kernel
        if not plan.forward.implementation.startswith(EXACT_RELU_IMPLEMENTATIONS):
            pytest.skip(f'oneDNN runs this geometry with {plan.forward.implementation}')
        assert plan._forward_relu.implementation.startswith(EXACT_RELU_IMPLEMENTATIONS)
    else:  # never needed
        assert plan._forward_relu is False
    assert (case == 'big') == (np.isfinite(fused).all() and fused.max() > 1e28)
    if case.startswith('nan'):
        assert np.isnan(fused).any()


def test_relu_is_fused_only_with_exact_implementations(handler, monkeypatch):
    """oneDNN's GEMM-based convolution (this geometry) gives -0.0 for
    negative values in its ReLU post-op: it is not fused, and the outputs
    are NumPy's +0.0."""
    from brainstorm.handlers.onednn import handler as handler_module

    rnd = np.random.RandomState(4)
    x = rnd.uniform(-1, 1, (1, 7, 5, 3)).astype(np.float32)
    w = rnd.uniform(-1, 1, (2, 2, 3, 3)).astype(np.float32)
    b = rnd.uniform(-1, 1, 2).astype(np.float32)
    y = np.zeros((1, 5, 3, 2), np.float32)
    handler.conv2d_forward_batch(x, w, b, y, 2, (2, 3), activation='rel')
    (plan,) = handler._plans.values()
    if plan.forward.implementation.startswith(EXACT_RELU_IMPLEMENTATIONS):
        pytest.skip(f'oneDNN runs this geometry with {plan.forward.implementation}')
    assert plan._forward_relu is None
    assert (y == 0).any() and not np.signbit(y).any()
    # once known, the norm bound is not computed again for this plan
    bounds = []
    monkeypatch.setattr(
        handler_module, '_bounded', lambda *args: bounds.append(args) or True
    )
    handler.conv2d_forward_batch(x, w, b, y, 2, (2, 3), activation='rel')
    assert bounds == []


@pytest.mark.parametrize('where', ['subclass', 'instance'])
def test_a_subclass_rel_is_used_by_convolutions(handler, where):
    """Overriding rel (in a subclass, or on the instance) changes what every
    layer uses: no fused ReLU then."""

    def clipping(x, y):
        np.clip(x, 0, 0.5, out=y)

    if where == 'subclass':

        class Clipping(type(handler)):
            def rel(self, x, y):
                clipping(x, y)

        h = Clipping()
    else:
        h = type(handler)()
        h.rel = clipping
    rnd = np.random.RandomState(5)
    x = rnd.uniform(-1, 1, (4, 9, 8, 3)).astype(np.float32)
    w = rnd.uniform(-1, 1, (5, 3, 3, 3)).astype(np.float32)
    y = np.zeros((4, 9, 8, 5), np.float32)
    h.conv2d_forward_batch(
        x, w, np.zeros(5, np.float32), y, 1, (1, 1), activation='rel'
    )
    assert y.max() == 0.5 and y.min() == 0.0


def test_a_cnn_runs_no_separate_relu_over_its_convolutions(handler, monkeypatch):
    """The Convolution2D layer hands its activation to the op, which fuses
    a ReLU with the convolution: no ReLU pass over the images remains."""
    shapes = []
    original = NumpyHandler.rel

    def spy(self, x, y):
        shapes.append(x.shape)
        original(self, x, y)

    monkeypatch.setattr(NumpyHandler, 'rel', spy)
    inp, out = bs.tools.get_in_out_layers('classification', (8, 8, 3), 4)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(6, kernel_size=(3, 3), padding=1)
        >> bs.layers.Convolution2D(6, kernel_size=(3, 3), padding=1)
        >> out
    )
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    rnd = np.random.RandomState(2)
    net.provide_external_data(
        {'default': rnd.rand(1, 5, 8, 8, 3), 'targets': rnd.randint(0, 4, (1, 5, 1))}
    )
    net.forward_pass(training_pass=True)
    net.backward_pass()
    assert shapes == []
    for name in ('Convolution2D_1', 'Convolution2D_2'):
        outputs = net.get(name + '.outputs.default')
        assert (outputs >= 0).all() and (outputs == 0).any(), name
    assert len([k for k in handler._plans if k[0] == 'conv']) == 2


UNPICKLE = """
import json, pickle, sys, warnings
import numpy as np
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    net = pickle.loads(bytes.fromhex(sys.argv[1]))
x = np.random.RandomState(0).randn(1, 3, 4)
net.provide_external_data({'default': x}, all_inputs=False)
net.forward_pass()
print(json.dumps({
    'handler': type(net.handler).__name__,
    'dtype': np.dtype(net.handler.dtype).name,
    'warnings': [str(w.message) for w in caught],
    'outputs': net.get('Output.outputs.predictions').tolist(),
}))
"""


def test_a_pickled_network_falls_back_to_numpy_where_onednn_cannot_load():
    """Unpickling raised OneDnnUnavailable (an ImportError) where oneDNN is
    switched off or missing, while a network file falls back to the
    default handler."""
    inp, out = bs.tools.get_in_out_layers('regression', 4, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
    net.set_handler(onednn_handler(np.float32, seed=3))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    x = np.random.RandomState(0).randn(1, 3, 4)
    net.provide_external_data({'default': x}, all_inputs=False)
    net.forward_pass()
    expected = net.get('Output.outputs.predictions')
    blob = pickle.dumps(net).hex()
    off = run_fresh(UNPICKLE, [blob], BRAINSTORM_NO_ONEDNN='1')
    assert off['handler'] == 'NumpyHandler' and off['dtype'] == 'float32'
    assert any('continues as a NumpyHandler' in w for w in off['warnings'])
    np.testing.assert_allclose(off['outputs'], expected, rtol=1e-6, atol=1e-6)
    on = run_fresh(UNPICKLE, [blob])
    assert on['handler'] == 'OneDnnHandler' and on['warnings'] == []
    np.testing.assert_array_equal(on['outputs'], expected)


LOAD_FILE = """
import json, sys, warnings
import numpy as np
import brainstorm as bs
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    net = bs.Network.from_hdf5(sys.argv[1])
print(json.dumps({
    'handler': repr(net.handler),
    'warnings': [str(w.message) for w in caught],
    'same': bool(np.array_equal(net.get('parameters'), np.load(sys.argv[2]))),
}))
"""


@pytest.mark.parametrize('debug', [False, True], ids=['plain', 'debug'])
def test_a_float64_file_loads_on_numpy_float64_where_onednn_cannot_load(
    debug, tmp_path
):
    # It loaded on the default handler, NumpyHandler(float32): the file's
    # float64 parameters were rounded and a DebugHandler around the handler
    # was dropped (a pickle kept both).
    handler = onednn_handler(np.float64)
    inp, out = bs.tools.get_in_out_layers('regression', 4, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
    net.set_handler(DebugHandler(handler) if debug else handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    path, params = tmp_path / 'net.h5', tmp_path / 'params.npy'
    net.save_as_hdf5(str(path))
    np.save(params, net.get('parameters'))
    off = run_fresh(LOAD_FILE, [str(path), str(params)], BRAINSTORM_NO_ONEDNN='1')
    expected = 'NumpyHandler(dtype=np.float64)'
    assert off['handler'] == (f'DebugHandler({expected})' if debug else expected)
    assert off['same']
    assert any(
        'continues as NumpyHandler(dtype=np.float64)' in w for w in off['warnings']
    )
    on = run_fresh(LOAD_FILE, [str(path), str(params)])
    assert 'OneDnnHandler(dtype=np.float64)' in on['handler'] and on['same']
    assert on['warnings'] == []
