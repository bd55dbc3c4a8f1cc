"""Threads: networks of their own train as if alone; one network shared by
threads raises a clear error instead of mixing batches (issue 22, point 3)."""

import copy
import sys
import threading

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.initializers import Gaussian
from brainstorm.utils import NetworkValidationError, TrainingValidationError
from tests.training.nets import blob_data, dropout_net, minibatches

WAIT = 30  # seconds; only reached if a thread dies


def default_handler_net(seed):
    """A network on the shared ``bs.handlers.default_handler``."""
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp
        >> bs.layers.FullyConnected(32, name='H1', activation='tanh')
        >> bs.layers.FullyConnected(16, name='H2')
        >> out
    )
    assert net.handler is bs.handlers.default_handler
    net.initialize(Gaussian(0.3), seed=seed)
    return net


class Lockstep(bs.hooks.Hook):
    """Waits at a barrier after every update: the threads' steps overlap."""

    def __init__(self, barrier):
        super().__init__(timescale='update')
        self.barrier = barrier

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if self.barrier is not None:
            self.barrier.wait(WAIT)


def train(net, barrier=None, epochs=4):
    trainer = bs.Trainer(bs.training.MomentumStepper(0.05, 0.9), verbose=False)
    trainer.add_hook(Lockstep(barrier))
    trainer.add_hook(bs.hooks.StopAfterEpoch(epochs))
    trainer.train(net, minibatches(blob_data(80), batch_size=10, shuffle=False))
    return net.get('parameters')


@pytest.fixture
def switch_often():
    """Let the interpreter switch threads every few microseconds, so the
    threads' steps interleave op by op (not only one step after another)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(interval)


def run_in_threads(targets):
    """Run each callable in a thread of its own; re-raise the first error."""
    results, errors = [None] * len(targets), []

    def run(i):
        try:
            results[i] = targets[i]()
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(targets))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive(), 'a thread hangs'
    if errors:
        raise errors[0]
    return results


def test_threads_with_networks_of_their_own_train_as_if_alone(switch_often):
    # the same seeds, networks on the shared default handler (its scratch
    # memory) and with dropout on seeded handlers of their own
    makers = [
        lambda: default_handler_net(1),
        lambda: default_handler_net(2),
        lambda: dropout_net(seed=3, dtype=np.float32),
        lambda: dropout_net(seed=4, dtype=np.float32),
    ]
    alone = [train(make()) for make in makers]
    nets = [make() for make in makers]
    barrier = threading.Barrier(len(nets))
    together = run_in_threads([lambda net=net: train(net, barrier) for net in nets])
    for i, (a, b) in enumerate(zip(alone, together)):
        assert np.array_equal(a, b), (
            f'network {i}: trained in a thread differs from trained alone, '
            f'max |diff| {np.abs(a - b).max()}'
        )


def test_passes_of_own_networks_in_threads_are_exact(switch_often):
    nets = [default_handler_net(seed) for seed in (5, 6, 7)]
    data = blob_data(40)

    def passes(net):
        net.provide_external_data(data)
        net.forward_pass()
        net.backward_pass()
        return net.get('Output.outputs.predictions'), net.get('gradients')

    expected = [passes(net) for net in nets]
    barrier = threading.Barrier(len(nets))

    def repeat(net):
        results = []
        for _ in range(20):
            barrier.wait(WAIT)
            results.append(passes(net))
        return results

    results = run_in_threads([lambda net=net: repeat(net) for net in nets])
    for (outputs, gradients), repeated in zip(expected, results):
        for got_outputs, got_gradients in repeated:
            np.testing.assert_array_equal(got_outputs, outputs)
            np.testing.assert_array_equal(got_gradients, gradients)


class PauseAt(bs.hooks.Hook):
    """At ``update``, tell the test it is inside training and wait for it."""

    def __init__(self, update, inside, resume):
        super().__init__(timescale='update')
        self.update, self.inside, self.resume = update, inside, resume

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if update_nr == self.update:
            self.inside.set()
            assert self.resume.wait(WAIT), 'the test never resumed training'


def _shared_run(attempts):
    """Train a network in a thread, pause it mid-run and try ``attempts``
    from the main thread; return the errors, the final parameters and the
    parameters of the same run made without interruption."""
    inside, resume = threading.Event(), threading.Event()
    net = dropout_net(seed=11)

    def training():
        trainer = bs.Trainer(bs.training.MomentumStepper(0.05, 0.9), verbose=False)
        trainer.add_hook(PauseAt(3, inside, resume))
        trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        trainer.train(net, minibatches(blob_data(), shuffle=False))
        return net.get('parameters')

    worker = threading.Thread(target=lambda: results.append(training()), daemon=True)
    results: list = []
    worker.start()
    try:
        assert inside.wait(WAIT), 'training never reached update 3'
        errors = []
        for attempt in attempts:
            with pytest.raises(NetworkValidationError) as info:
                attempt(net)
            errors.append(str(info.value))
    finally:
        resume.set()
        worker.join(WAIT)
    assert not worker.is_alive()
    reference = dropout_net(seed=11)
    trainer = bs.Trainer(bs.training.MomentumStepper(0.05, 0.9), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    trainer.train(reference, minibatches(blob_data(), shuffle=False))
    return errors, results[0], reference.get('parameters')


def test_a_network_trained_in_one_thread_refuses_every_other_thread():
    data = blob_data(8)
    attempts = [
        lambda net: net.provide_external_data(data),
        lambda net: net.forward_pass(),
        lambda net: net.backward_pass(),
        lambda net: bs.tools.evaluate(net, minibatches(data)),
        lambda net: bs.tools.extract(net, minibatches(data), 'Hid1.outputs.default'),
        lambda net: bs.Trainer(bs.training.SgdStepper(), verbose=False).train(
            net, minibatches(data)
        ),
        lambda net: bs.Trainer(bs.training.SgdStepper(), verbose=False).evaluate(net),
        copy.deepcopy,
    ]
    errors, trained, reference = _shared_run(attempts)
    assert len(errors) == len(attempts)
    for message in errors:
        assert '<Network: 8 layers' in message
        assert "in thread 'MainThread'" in message
        assert '(in Trainer.train)' in message
        assert 'copy.deepcopy(net)' in message
    assert errors[0].split(' was called')[0].endswith('provide_external_data')
    # the refused calls changed nothing: the run is the uninterrupted one
    np.testing.assert_array_equal(trained, reference)


def test_one_network_evaluated_from_two_threads_is_refused_not_mixed():
    net = default_handler_net(9)
    data = blob_data(40)
    expected = bs.tools.evaluate(net, minibatches(data, shuffle=False))
    inside, resume = threading.Event(), threading.Event()

    def paused_batches():
        for i, batch in enumerate(minibatches(data, shuffle=False)()):
            if i == 1:
                inside.set()
                assert resume.wait(WAIT)
            yield batch

    results: list = []
    worker = threading.Thread(
        target=lambda: results.append(bs.tools.evaluate(net, paused_batches())),
        daemon=True,
    )
    worker.start()
    try:
        assert inside.wait(WAIT)
        with pytest.raises(NetworkValidationError, match=r'\(in evaluate\)'):
            bs.tools.evaluate(net, minibatches(data))
        with pytest.raises(NetworkValidationError, match='forward_pass was called'):
            net.forward_pass()
    finally:
        resume.set()
        worker.join(WAIT)
    assert results == [expected]
    # released afterwards: any thread may use it now
    assert run_in_threads(
        [lambda: bs.tools.evaluate(net, minibatches(data, shuffle=False))]
    ) == [expected]


def test_a_trainer_refused_a_busy_network_is_free_for_the_next_run():
    shared = dropout_net(seed=11)
    trainer = bs.Trainer(bs.training.SgdStepper(0.05), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    inside, resume = threading.Event(), threading.Event()

    def paused_batches():
        yield from minibatches(blob_data(8), shuffle=False)()
        inside.set()
        assert resume.wait(WAIT)

    worker = threading.Thread(
        target=lambda: bs.tools.evaluate(shared, paused_batches()), daemon=True
    )
    worker.start()
    try:
        assert inside.wait(WAIT)
        with pytest.raises(NetworkValidationError, match='Trainer.train was called'):
            trainer.train(shared, minibatches(blob_data()))
    finally:
        resume.set()
        worker.join(WAIT)
    # the refusal held neither the trainer nor the network
    run_in_threads(
        [lambda: trainer.train(dropout_net(seed=1), minibatches(blob_data()))]
    )
    assert trainer.current_epoch_nr == 1
    bs.tools.evaluate(shared, minibatches(blob_data(8)))


def test_one_trainer_shared_by_two_threads_is_refused():
    inside, resume = threading.Event(), threading.Event()
    trainer = bs.Trainer(bs.training.SgdStepper(0.05), verbose=False)
    trainer.add_hook(PauseAt(2, inside, resume))
    trainer.add_hook(bs.hooks.StopAfterEpoch(1))
    worker = threading.Thread(
        target=trainer.train,
        args=(dropout_net(seed=1), minibatches(blob_data(), shuffle=False)),
        daemon=True,
    )
    worker.start()
    try:
        assert inside.wait(WAIT)
        with pytest.raises(TrainingValidationError, match='one run at a time'):
            trainer.train(dropout_net(seed=2), minibatches(blob_data()))
    finally:
        resume.set()
        worker.join(WAIT)
    assert trainer.current_update_nr == 5
    # released: another thread may continue the run now
    trainer.hooks['StopAfterEpoch'].max_epochs = 2
    run_in_threads(
        [lambda: trainer.train(dropout_net(seed=1), minibatches(blob_data()))]
    )
    assert trainer.current_update_nr == 10


FRESH_PROCESS_SCRIPT = r"""
import sys
import threading

import numpy as np

import brainstorm as bs

sys.setswitchinterval(1e-6)  # threads interleave op by op
rnd = np.random.RandomState(0)
x, y = rnd.randn(1, 80, 4), rnd.randint(0, 3, (1, 80, 1))


def batches():
    return bs.data_iterators.Minibatches(10, shuffle=False, default=x, targets=y)


def make(seed):
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(32, activation='tanh') >> out)
    net.initialize(bs.initializers.Gaussian(0.3), seed=seed)
    return net


def train(net):
    trainer = bs.Trainer(bs.training.MomentumStepper(0.05, 0.9), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(5))
    trainer.train(net, batches())
    return net.get('parameters')


alone = [train(make(seed)) for seed in range(3)]
nets = [make(seed) for seed in range(3)]
together = [None] * 3
threads = [threading.Thread(target=lambda i=i: together.__setitem__(i, train(nets[i])))
           for i in range(3)]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print('own networks equal:', all(np.array_equal(a, b) for a, b in zip(alone, together)))

shared = make(7)
expected = bs.tools.evaluate(shared, batches())
inside, resume, results = threading.Event(), threading.Event(), []


def paused():
    for i, batch in enumerate(batches()()):
        if i == 2:
            inside.set()
            resume.wait(30)
        yield batch


worker = threading.Thread(
    target=lambda: results.append(bs.tools.evaluate(shared, paused())))
worker.start()
inside.wait(30)
try:
    bs.tools.evaluate(shared, batches())
except bs.utils.NetworkValidationError as err:
    print('shared network:', type(err).__name__)
resume.set()
worker.join()
print('first thread exact:', results == [expected])
"""


def test_threads_in_a_fresh_process():
    """The user's view: a fresh interpreter, the default handler, the
    public API."""
    import subprocess

    result = subprocess.run(
        [sys.executable, '-c', FRESH_PROCESS_SCRIPT],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(__import__('pathlib').Path(__file__).resolve().parents[2]),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        'own networks equal: True',
        'shared network: NetworkValidationError',
        'first thread exact: True',
    ], result.stdout + result.stderr
