"""Training leaves the process as it found it: whatever ``train`` or
``evaluate`` (and the built-in hooks they start) change process-wide is
put back when they end, normally or by an exception."""

import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.data_iterators import Minibatches
from brainstorm.hooks import Hook, StopAfterEpoch, StopOnSigQuit

WORKER = os.path.join(os.path.dirname(__file__), 'process_state_run.py')
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(__file__)))


def test_train_and_evaluate_leave_no_process_state_behind(tmp_path):
    """Fresh process: signal handlers, NumPy state, warnings, loggers,
    exception hooks, threads, children, environment, working folder,
    sys.path, streams and tqdm compared before and after each run."""
    done = subprocess.run(
        [sys.executable, WORKER, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=ROOT),
    )
    assert done.returncode == 0, done.stderr
    results = [
        json.loads(line)
        for line in done.stdout.splitlines()
        if line.startswith('{"scenario"')
    ]
    raised = {r['scenario']: r['raised'] for r in results}
    assert raised == {
        'normal end': None,
        'normal end, verbose': None,
        'hook raises': 'ValueError',
        'hook raises KeyboardInterrupt': 'KeyboardInterrupt',
        'hook start raises': 'ValueError',
        'data iterator raises': 'OSError',
        'evaluate': None,
    }
    for result in results:
        assert result['changed'] == [], result
        # the SIGQUIT handler was really installed while the hooks ran
        if result['scenario'] != 'hook start raises':
            assert result['saw_handler'], result


def _xor():
    x = np.array([[0, 0], [0, 1], [1, 0], [1, 1]], dtype=float).reshape(1, 4, 2)
    y = np.array([0, 1, 1, 0]).reshape(1, 4, 1)
    inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(3) >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net, Minibatches(2, default=x, targets=y)


class Ends(Hook):
    """Records start and end calls; its end may raise."""

    __undescribed__ = {'calls': None, 'fail': None}

    def __init__(self, name, calls, fail=None):
        super().__init__(name, 'epoch', 1)
        self.calls, self.fail = calls, fail

    def start(self, net, stepper, verbose, named_data_iters):
        super().start(net, stepper, verbose, named_data_iters)
        self.calls.append(('start', self.__name__))

    def end(self):
        self.calls.append(('end', self.__name__))
        if self.fail is not None:
            raise self.fail

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return None


def test_hooks_end_in_reverse_order_after_each_train_call():
    net, data = _xor()
    calls = []
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(Ends('a', calls))
    trainer.add_hook(Ends('b', calls))
    trainer.add_hook(StopAfterEpoch(1))
    trainer.train(net, data)
    assert calls == [('start', 'a'), ('start', 'b'), ('end', 'b'), ('end', 'a')]


def test_a_failing_end_is_raised_after_all_hooks_ended():
    net, data = _xor()
    calls = []
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(Ends('a', calls))
    trainer.add_hook(Ends('b', calls, fail=RuntimeError('cannot end')))
    trainer.add_hook(StopAfterEpoch(1))
    with pytest.raises(RuntimeError, match='cannot end') as info:
        trainer.train(net, data)
    assert calls[-2:] == [('end', 'b'), ('end', 'a')]
    assert any("'b'" in note for note in info.value.__notes__)


def test_a_failing_end_does_not_hide_the_error_that_ended_training():
    net, data = _xor()
    calls = []

    class Breaks(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if update_nr == 1:
                raise ValueError('the real problem')

    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(Ends('a', calls, fail=RuntimeError('cannot end')))
    trainer.add_hook(Breaks('breaks', 'update'))
    with pytest.raises(ValueError, match='the real problem') as info:
        trainer.train(net, data)
    assert ('end', 'a') in calls
    assert any('cannot end' in note for note in info.value.__notes__)


@pytest.mark.skipif(not hasattr(signal, 'SIGQUIT'), reason='no SIGQUIT')
def test_stop_on_sigquit_puts_back_the_users_handler():
    def users_handler(signum, frame):
        pass

    previous = signal.signal(signal.SIGQUIT, users_handler)
    try:
        net, data = _xor()
        trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
        hook = StopOnSigQuit(timescale='update')
        trainer.add_hook(hook)
        trainer.add_hook(StopAfterEpoch(1))
        trainer.train(net, data)
        assert signal.getsignal(signal.SIGQUIT) is users_handler
        # a second run installs it again and puts the user's back again
        trainer.hooks['StopAfterEpoch'].max_epochs = 2
        trainer.train(net, data)
        assert signal.getsignal(signal.SIGQUIT) is users_handler
    finally:
        signal.signal(signal.SIGQUIT, previous)


@pytest.mark.skipif(not hasattr(signal, 'SIGQUIT'), reason='no SIGQUIT')
def test_stop_on_sigquit_still_stops_training():
    net, data = _xor()
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)

    class Quit(Hook):
        def __call__(self, epoch_nr, update_nr, net, stepper, logs):
            if update_nr == 3:
                os.kill(os.getpid(), signal.SIGQUIT)

    trainer.add_hook(Quit('quit', 'update'))
    trainer.add_hook(StopOnSigQuit(timescale='update'))
    trainer.add_hook(StopAfterEpoch(100))
    # what the process had: SIG_DFL, or SIG_IGN in a shell's background job
    before = signal.getsignal(signal.SIGQUIT)
    trainer.train(net, data)
    assert trainer.current_update_nr == 3
    assert signal.getsignal(signal.SIGQUIT) == before  # put back


def test_a_failing_end_beside_an_error_without_notes_leaves_that_error():
    """Python 3.10's exceptions take no notes: the failing end is logged,
    and the error that ended the run stays the one raised."""
    from brainstorm.training.hook_calls import end_hooks
    from brainstorm.training.progress import TrainingProgress

    class NoNotes(Exception):
        @property
        def add_note(self):  # as on Python 3.10
            raise AttributeError('add_note')

    calls = []
    hook = Ends('a', calls, fail=RuntimeError('cannot end'))
    end_hooks([('a', hook)], NoNotes('the run failed'), TrainingProgress())
    assert calls == [('end', 'a')]
