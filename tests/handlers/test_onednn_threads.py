"""OneDnnHandler keeps NumPy's OpenBLAS threads asleep in passes of CNNs.

OpenBLAS's workers spin for about 0.1 s after each product they share and
take a core from oneDNN's OpenMP threads. In passes of networks with
convolution or pooling, OneDnnHandler runs NumPy on one OpenBLAS thread,
except big products (docs/cpu.rst).
"""

import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.handlers import DebugHandler, NumpyHandler
from brainstorm.handlers.onednn import _openblas
from tests.handlers.test_onednn_handler import run_fresh
from tests.onednn_support import onednn_handler


def numpy_uses_openblas() -> bool:
    try:
        blas = np.show_config(mode='dicts')['Build Dependencies']['blas']
    except Exception:  # noqa: BLE001 - older NumPy: no dicts mode
        return False
    return 'openblas' in str(blas.get('name', '')).lower()


@pytest.fixture
def blas():
    if not _openblas.available():
        assert not numpy_uses_openblas(), "NumPy's OpenBLAS was not found"
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    if _openblas.thread_count() < 2:
        pytest.skip('OpenBLAS runs on one thread here anyway')
    return _openblas


def test_quiet_blocks_run_openblas_on_one_thread_and_restore_it(blas):
    before = blas.thread_count()
    with blas.quiet():
        assert blas.thread_count() == 1
        with blas.all_threads():
            assert blas.thread_count() == before
        assert blas.thread_count() == 1
        with blas.quiet():
            assert blas.thread_count() == 1
        assert blas.thread_count() == 1
    assert blas.thread_count() == before
    with pytest.raises(RuntimeError), blas.quiet():
        raise RuntimeError('restored all the same')
    assert blas.thread_count() == before
    # outside quiet blocks all_threads changes nothing
    with blas.all_threads():
        assert blas.thread_count() == before
    assert blas.thread_count() == before


def test_quiet_blocks_of_several_threads_restore_the_count(blas):
    """OpenBLAS's count is the process's: the last block out restores it,
    in whatever order the threads leave."""
    before = blas.thread_count()
    entered = threading.Barrier(3)
    leave = [threading.Event(), threading.Event()]
    seen = []

    def block(i):
        with blas.quiet():
            entered.wait(timeout=10)
            leave[i].wait(timeout=10)
            seen.append(blas.thread_count())

    threads = [threading.Thread(target=block, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    entered.wait(timeout=10)
    assert blas.thread_count() == 1
    leave[0].set()  # the first to enter leaves first
    threads[0].join(timeout=10)
    assert blas.thread_count() == 1
    leave[1].set()
    threads[1].join(timeout=10)
    assert seen == [1, 1]
    assert blas.thread_count() == before


def small_and_big_products():
    rnd = np.random.RandomState(0)
    small = (
        rnd.rand(100, 576).astype(np.float32),
        rnd.rand(576, 64).astype(np.float32),
    )
    big = (rnd.rand(256, 512).astype(np.float32), rnd.rand(512, 256).astype(np.float32))
    assert small[0].shape[0] * small[0].shape[1] * small[1].shape[1] <= (1 << 24)
    assert big[0].shape[0] * big[0].shape[1] * big[1].shape[1] > (1 << 24)
    return small, big


def threads_in_products(handler, monkeypatch, run):
    """The OpenBLAS thread counts NumpyHandler's products ran with."""
    seen = []
    original = NumpyHandler.dot_mm

    def spy(self, a, b, out, transa=False, transb=False):
        seen.append((out.shape, _openblas.thread_count()))
        original(self, a, b, out, transa, transb)

    monkeypatch.setattr(NumpyHandler, 'dot_mm', spy)
    run()
    return seen


def test_cnn_passes_run_small_products_on_one_thread(blas, monkeypatch):
    handler = onednn_handler()
    before = blas.thread_count()
    (a, b), (c, d) = small_and_big_products()
    small_out = np.zeros((100, 64), np.float32)
    big_out = np.zeros((256, 256), np.float32)

    def run():
        with handler.network_pass({'Input', 'Convolution2D', 'FullyConnected'}):
            assert blas.thread_count() == 1  # NumPy's other calls, too
            handler.dot_mm(a, b, small_out)
            handler.dot_mm(c, d, big_out)
            # a nested pass changes nothing
            with handler.network_pass({'Pooling2D'}):
                handler.dot_mm(a, b, small_out)
            assert blas.thread_count() == 1
        assert blas.thread_count() == before

    seen = threads_in_products(handler, monkeypatch, run)
    assert seen == [((100, 64), 1), ((256, 256), before), ((100, 64), 1)]
    np.testing.assert_allclose(small_out, a.astype(np.float64) @ b, rtol=1e-5)
    np.testing.assert_allclose(big_out, c.astype(np.float64) @ d, rtol=1e-5)


@pytest.mark.parametrize(
    'dtype, types',
    [
        (np.float32, {'Input', 'FullyConnected', 'Recurrent'}),
        (np.float64, {'Input', 'Convolution2D'}),
    ],
)
def test_other_passes_leave_openblas_alone(blas, monkeypatch, dtype, types):
    handler = onednn_handler(dtype)
    before = blas.thread_count()
    (a, b), _ = small_and_big_products()
    out = np.zeros((100, 64), dtype)

    def run():
        with handler.network_pass(types):
            handler.dot_mm(a.astype(dtype), b.astype(dtype), out)
            handler.dot_add_mm(a.astype(dtype), b.astype(dtype), out)

    assert threads_in_products(handler, monkeypatch, run) == [((100, 64), before)]


def test_the_debug_handler_passes_the_pass_on(blas):
    handler = DebugHandler(onednn_handler())
    with handler.network_pass({'Convolution2D'}):
        assert blas.thread_count() == 1
    with DebugHandler(NumpyHandler(np.float32)).network_pass({'Convolution2D'}):
        assert blas.thread_count() > 1


def cnn(handler):
    inp, out = bs.tools.get_in_out_layers('classification', (8, 8, 3), 4)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.Convolution2D(4, kernel_size=(3, 3), padding=1)
        >> bs.layers.Pooling2D(kernel_size=(2, 2), stride=(2, 2))
        >> bs.layers.FullyConnected(6)
        >> out
    )
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    rnd = np.random.RandomState(2)
    net.provide_external_data(
        {
            'default': rnd.rand(1, 5, 8, 8, 3),
            'targets': rnd.randint(0, 4, (1, 5, 1)),
        }
    )
    return net


def test_a_cnns_passes_run_its_products_on_one_thread(blas, monkeypatch):
    net = cnn(onednn_handler())
    before = blas.thread_count()

    def run():
        net.forward_pass(training_pass=True)
        net.backward_pass()

    seen = threads_in_products(net.handler, monkeypatch, run)
    assert seen and {threads for _, threads in seen} == {1}
    assert blas.thread_count() == before
    # the same results as on NumpyHandler
    reference = cnn(NumpyHandler(np.float64))
    reference.forward_pass(training_pass=True)
    reference.backward_pass()
    np.testing.assert_allclose(
        net.get('gradients'), reference.get('gradients'), rtol=1e-3, atol=1e-5
    )


def test_an_error_in_a_pass_restores_the_thread_count(blas, monkeypatch):
    net = cnn(onednn_handler())
    before = blas.thread_count()

    def fail(*args, **kwargs):
        raise RuntimeError('a layer failed')

    monkeypatch.setattr(net.layers['FullyConnected'], 'forward_pass', fail)
    with pytest.raises(RuntimeError, match='a layer failed'):
        net.forward_pass()
    assert blas.thread_count() == before


def test_a_cnns_images_are_used_in_place(monkeypatch):
    """The network's image buffers are contiguous blocks: a training step
    copies none of them into the handler's scratch buffers."""
    handler = onednn_handler()
    net = cnn(handler)
    for _ in range(2):
        net.forward_pass(training_pass=True)
        net.backward_pass(input_deltas=False)
    copies = {name for name, _ in handler._scratch if name in ('onednn_x', 'onednn_y')}
    assert not copies
    # a strided image is copied (the check above can fail)
    rnd = np.random.RandomState(0)
    wide = rnd.rand(5, 8, 8, 6).astype(np.float32)
    out = np.zeros((5, 4, 4, 3), np.float32)
    argmax = np.zeros_like(out)
    handler.maxpool2d_forward_batch(wide[..., :3], (2, 2), out, 0, (2, 2), argmax)
    assert ('onednn_x', np.float32) in handler._scratch


FRESH_CNN = """
import json
import brainstorm as bs  # before NumPy, as a script may import it
from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.onednn import _openblas
seen = []
original = NumpyHandler.dot_mm
def spy(self, *args, **kwargs):
    seen.append(_openblas.thread_count())
    original(self, *args, **kwargs)
NumpyHandler.dot_mm = spy
import numpy as np
inp, out = bs.tools.get_in_out_layers('classification', (8, 8, 3), 4)
net = bs.Network.from_layer(
    inp >> bs.layers.Convolution2D(4, kernel_size=(3, 3), padding=1)
    >> bs.layers.Pooling2D(kernel_size=(2, 2), stride=(2, 2)) >> out)
net.initialize(bs.initializers.Gaussian(0.1), seed=1)
rnd = np.random.RandomState(2)
data = bs.data_iterators.Minibatches(
    batch_size=5, default=rnd.rand(1, 10, 8, 8, 3),
    targets=rnd.randint(0, 4, (1, 10, 1)))
before = _openblas.thread_count()
trainer = bs.Trainer(bs.training.SgdStepper(learning_rate=0.01), verbose=False)
trainer.add_hook(bs.hooks.StopAfterEpoch(1))
trainer.train(net, data)
fused = [key for key, plan in net.handler._plans.items()
         if key[0] == 'conv' and plan._forward_relu not in (False, None)]
print(json.dumps({'handler': type(net.handler).__name__, 'before': before,
                  'seen': sorted(set(seen)), 'after': _openblas.thread_count(),
                  'fused': len(fused)}))
"""


def test_training_a_cnn_in_a_fresh_process_keeps_openblas_quiet_and_restores_it():
    """Default settings, the public API, brainstorm imported before NumPy."""
    onednn_handler()
    if not numpy_uses_openblas():
        pytest.skip("NumPy's BLAS is not OpenBLAS")
    got = run_fresh(FRESH_CNN)
    assert got['handler'] == 'OneDnnHandler'
    assert got['seen'] == [1]
    assert got['after'] == got['before']
    assert got['fused'] == 1  # the convolution's ReLU ran as its post-op


FRESH_LSTM = """
import json
import brainstorm as bs  # before NumPy, as a script may import it
from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.onednn import _openblas
seen = []
def spying(original):
    def spy(self, *args, **kwargs):
        seen.append(_openblas.thread_count())
        original(self, *args, **kwargs)
    return spy
NumpyHandler.dot_mm = spying(NumpyHandler.dot_mm)
NumpyHandler.dot_add_mm = spying(NumpyHandler.dot_add_mm)
import numpy as np
rnd = np.random.RandomState(2)
x, t = rnd.rand(7, 64, 6), rnd.randint(0, 4, (7, 64, 1))
def train(handler=None):
    inp, out = bs.tools.get_in_out_layers('classification', 6, 4)
    # batches of 32 x 128 cells: the recurrent products reach
    # ONEDNN_PRODUCT_MIN (32 * 128 * 512 multiply-adds); the others not
    net = bs.Network.from_layer(inp >> bs.layers.Lstm(128) >> out)
    if handler is not None:
        net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    data = bs.data_iterators.Minibatches(
        batch_size=32, default=x, targets=t, shuffle=False)
    trainer = bs.Trainer(bs.training.MomentumStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(3))
    trainer.train(net, data)
    return net
before = _openblas.thread_count()
net = train()
after = _openblas.thread_count()
numpy_calls = len(seen)
reference = train(NumpyHandler(np.float32))
packed = [key for key in net.handler._plans if key[0] == 'matmul' and key[-1]]
print(json.dumps({'handler': type(net.handler).__name__, 'before': before,
                  'after': after, 'numpy_threads': sorted(set(seen[:numpy_calls])),
                  'packed': len(packed),
                  'gap': float(np.abs(net.get('parameters')
                                      - reference.get('parameters')).max()),
                  'moved': float(np.abs(reference.get('parameters')).max())}))
"""


def test_training_an_lstm_in_a_fresh_process_packs_its_recurrent_weights():
    """Default settings, the public API: the recurrent products of the
    Lstm network ran on oneDNN with the recurrent weights packed forward
    and backward, the products too small for oneDNN on NumPy with OpenBLAS
    on one thread, OpenBLAS's count restored afterwards, and the parameters
    after three epochs those of NumpyHandler within float32's precision."""
    onednn_handler()
    got = run_fresh(FRESH_LSTM)
    assert got['handler'] == 'OneDnnHandler'
    assert got['numpy_threads'] == [1]
    assert got['packed'] == 2
    assert got['after'] == got['before']
    assert got['gap'] < 1e-4 * got['moved']


def test_lstm_passes_run_every_numpy_product_on_one_thread(blas, monkeypatch):
    """Products oneDNN does not take (here: a result overlapping a factor)
    stay on one OpenBLAS thread, big ones too: OpenBLAS's spinning workers
    would slow the oneDNN products that follow."""
    handler = onednn_handler()
    before = blas.thread_count()
    rnd = np.random.RandomState(1)
    a, both = (rnd.rand(320, 320).astype(np.float32) for _ in range(2))
    assert 320**3 > (1 << 24)  # a big product

    def run():
        with handler.network_pass({'Input', 'Lstm'}):
            assert blas.thread_count() == 1
            handler.dot_mm(a, both, both)

    assert threads_in_products(handler, monkeypatch, run) == [((320, 320), 1)]
    assert blas.thread_count() == before


FRESH_FORK = """
import json, multiprocessing, queue
import numpy as np
import brainstorm as bs
rnd = np.random.RandomState(3)
x, t = rnd.rand(1, 16, 12, 12, 3), rnd.randint(0, 4, (1, 16, 1))
inp, out = bs.tools.get_in_out_layers('classification', (12, 12, 3), 4)
net = bs.Network.from_layer(
    inp >> bs.layers.Convolution2D(8, kernel_size=(3, 3), padding=1)
    >> bs.layers.Pooling2D((2, 2), type='max', stride=(2, 2)) >> out)
net.initialize(bs.initializers.Gaussian(0.1), seed=1)
def gradients():
    net.provide_external_data({'default': x, 'targets': t})
    net.forward_pass(training_pass=True)
    net.backward_pass()
    return net.get('gradients').tolist()
first = gradients()  # the parent's OpenMP threads run now
def child(results):
    results.put(gradients())
context = multiprocessing.get_context('fork')
results = context.Queue()
process = context.Process(target=child, args=(results,))
process.start()
try:
    in_child = results.get(timeout=30)
except queue.Empty:
    in_child = None
process.join(timeout=10)
hung = process.is_alive()
if hung:
    process.kill()
print(json.dumps({'handler': type(net.handler).__name__,
                  'threads': net.handler.threads, 'hung': hung,
                  'exitcode': process.exitcode, 'child': in_child == first,
                  'parent_after': gradients() == first}))
"""


def test_a_forked_child_runs_the_network_its_parent_ran():
    """multiprocessing's 'fork' start method after the parent ran oneDNN
    on two OpenMP threads: the child computes the parent's gradients
    instead of waiting forever for OpenMP threads it did not inherit, and
    the parent computes them again after the fork."""
    onednn_handler()
    got = run_fresh(FRESH_FORK, OMP_NUM_THREADS='2')
    assert got['handler'] == 'OneDnnHandler'
    assert got['threads'] == 2
    assert not got['hung']
    assert got['exitcode'] == 0
    assert got['child']
    assert got['parent_after']


FRESH_FORK_BUSY = """
import json, multiprocessing, queue, threading
import numpy as np
import brainstorm as bs
from brainstorm.handlers.onednn import _openblas
rnd = np.random.RandomState(3)
x, t = rnd.rand(1, 16, 12, 12, 3), rnd.randint(0, 4, (1, 16, 1))
def network():
    inp, out = bs.tools.get_in_out_layers('classification', (12, 12, 3), 4)
    net = bs.Network.from_layer(
        inp >> bs.layers.Convolution2D(8, kernel_size=(3, 3), padding=1)
        >> bs.layers.Pooling2D((2, 2), type='max', stride=(2, 2)) >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net
def gradients(net):
    net.provide_external_data({'default': x, 'targets': t})
    net.forward_pass(training_pass=True)
    net.backward_pass()
    return net.get('gradients').tolist()
net = network()
first = gradients(net)
before = _openblas.thread_count()
# another thread is inside an op when the process forks: it holds the
# locks of the plans the child needs, and is inside a pass of a CNN
holding, release = threading.Event(), threading.Event()
def busy():
    plans = list(net.handler._plans.values())
    for plan in plans:
        plan.lock.acquire()
    with _openblas.quiet():
        holding.set()
        release.wait(60)
    for plan in plans:
        plan.lock.release()
worker = threading.Thread(target=busy)
worker.start()
holding.wait(10)
def child(results):
    results.put((gradients(network()), _openblas.thread_count()))
context = multiprocessing.get_context('fork')
results = context.Queue()
process = context.Process(target=child, args=(results,))
process.start()
try:
    in_child, threads_in_child = results.get(timeout=30)
except queue.Empty:
    in_child = threads_in_child = None
process.join(timeout=10)
hung = process.is_alive()
if hung:
    process.kill()
release.set()
worker.join()
print(json.dumps({'hung': hung, 'child': in_child == first, 'before': before,
                  'threads_in_child': threads_in_child,
                  'after': _openblas.thread_count()}))
"""


def test_a_child_forked_while_another_thread_runs_an_op_does_not_wait_for_it():
    """The child inherits the plans' locks and OpenBLAS's one-thread block
    of a thread it does not have: it must neither wait for that thread
    nor keep OpenBLAS on one thread after its own passes."""
    onednn_handler()
    got = run_fresh(FRESH_FORK_BUSY, OMP_NUM_THREADS='2', OPENBLAS_NUM_THREADS='2')
    assert not got['hung']
    assert got['child']
    if _openblas.available():
        assert got['threads_in_child'] == got['before'] == got['after']


FRESH_FORK_IN_BLOCK = """
import json, os
from brainstorm.handlers.onednn import _openblas
before = _openblas.thread_count()
read_end, write_end = os.pipe()
with _openblas.quiet():  # the forking thread is inside a pass
    pid = os.fork()
    inside = _openblas.thread_count()
if pid == 0:
    state = {'inside': inside, 'after': _openblas.thread_count(),
             'depth': _openblas._depth}
    os.write(write_end, json.dumps(state).encode())
    os._exit(0)
os.waitpid(pid, 0)
child = json.loads(os.read(read_end, 4096))
print(json.dumps({'before': before, 'child': child,
                  'after': _openblas.thread_count()}))
"""


def test_a_child_forked_inside_a_pass_keeps_its_block_until_it_ends(blas):
    """The forking thread's own one-thread block goes on in the child: one
    OpenBLAS thread until the block ends there, then the count from before."""
    got = run_fresh(FRESH_FORK_IN_BLOCK, OPENBLAS_NUM_THREADS='2')
    assert got['before'] == got['after'] == 2
    assert got['child'] == {'inside': 1, 'after': 2, 'depth': 0}


FRESH_FORK_WHILE_LOADING = """
import json, os, threading, time
from brainstorm.handlers.onednn import _dnnl
held, release = threading.Event(), threading.Event()
def loading():  # as a thread inside library() would
    with _dnnl._load_lock:
        held.set()
        release.wait(60)
worker = threading.Thread(target=loading)
worker.start()
held.wait(10)
pid = os.fork()
if pid == 0:
    os._exit(0 if _dnnl.library() is not None else 1)
deadline = time.monotonic() + 20
status = None
while time.monotonic() < deadline:
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        break
    time.sleep(0.05)
else:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
release.set()
worker.join()
print(json.dumps({'hung': status is None or not done, 'status': status}))
"""


def test_a_child_forked_while_another_thread_loads_onednn_loads_it_too():
    onednn_handler()
    got = run_fresh(FRESH_FORK_WHILE_LOADING)
    assert not got['hung']
    assert got['status'] == 0


STARVED = """
import json, sys, threading
import numpy as np
import brainstorm as bs
from brainstorm.handlers import NumpyHandler
from brainstorm.handlers.onednn import OneDnnHandler, onednn_available
from brainstorm.layers import Convolution2D, FullyConnected, Pooling2D

ok, why = onednn_available()
assert ok, why


def gradients(handler):
    inp, out = bs.tools.get_in_out_layers('classification', (12, 12, 3), 4)
    net = bs.Network.from_layer(
        inp >> Convolution2D(8, (3, 3), padding=1, activation='rel')
        >> Pooling2D((2, 2), stride=(2, 2)) >> FullyConnected(10) >> out
    )
    net.set_handler(handler)
    net.initialize(bs.initializers.Gaussian(0.1), seed=3)
    rnd = np.random.RandomState(4)
    net.provide_external_data({
        'default': rnd.randn(1, 16, 12, 12, 3).astype(handler.dtype),
        'targets': rnd.randint(0, 4, (1, 16, 1)).astype(handler.dtype),
    })
    net.forward_pass(training_pass=True)
    net.backward_pass()
    return np.array(net.buffer.gradients, np.float64)


want = gradients(NumpyHandler(np.float32))
handler = OneDnnHandler(np.float32)
main = gradients(handler)
in_thread = []
worker = threading.Thread(target=lambda: in_thread.append(gradients(handler)))
worker.start()
worker.join()
print(json.dumps({
    'threads': handler.threads,
    'main': float(np.abs(main - want).max()),
    'thread': float(np.abs(in_thread[0] - want).max()),
}))
"""


@pytest.mark.parametrize(
    'setting',
    [
        {'OMP_THREAD_LIMIT': '1'},
        {'OMP_DYNAMIC': 'true'},
        {'OMP_MAX_ACTIVE_LEVELS': '0'},
        {'OMP_THREAD_LIMIT': '1', 'OMP_DYNAMIC': 'true', 'OMP_NUM_THREADS': '2'},
    ],
)
def test_openmp_settings_that_allow_fewer_threads_do_not_hang_the_primitives(setting):
    """OpenMP may give oneDNN's parallel regions fewer threads than its
    kernels planned for (a thread limit, dynamic adjustment, no active
    levels); a kernel that waits for all of them at a barrier waited for
    ever (the first backward convolution hung). The handler makes each
    thread that runs a primitive give oneDNN what it plans for."""
    onednn_handler(np.float32)  # skips without oneDNN
    result = run_fresh(STARVED, **setting)
    assert result['main'] < 1e-4 and result['thread'] < 1e-4, result
    if 'OMP_THREAD_LIMIT' in setting:
        assert result['threads'] == 1
