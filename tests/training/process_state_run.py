"""Run ``Trainer.train`` and ``evaluate`` in several ways, in a fresh
process, and print (as JSON) what each left changed in the process: signal
handlers, NumPy error and print state, NumPy's global random state,
warnings filters, loggers, exception and display hooks, threads, child
processes, the environment, the working folder, ``sys.path``, the standard
streams and tqdm's bars. Used by tests/training/test_process_state.py.

    python process_state_run.py
"""

import faulthandler
import hashlib
import io
import json
import logging
import multiprocessing
import os
import signal
import sys
import threading
import warnings

import numpy as np

import brainstorm as bs
from brainstorm.data_iterators import DataIterator, Minibatches
from brainstorm.hooks import (
    Hook,
    MonitorLoss,
    ProgressBar,
    SaveCheckpoint,
    StopAfterEpoch,
    StopOnSigQuit,
)


def snapshot() -> dict:
    loggers = [logging.getLogger()] + [
        logger
        for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    tqdm = sys.modules.get('tqdm')
    return {
        'signals': {
            int(s): signal.getsignal(s)
            for s in signal.valid_signals()
            if s not in (signal.SIGKILL, signal.SIGSTOP)
        },
        'numpy_err': np.geterr(),
        'numpy_print': np.get_printoptions(),
        'numpy_random': hashlib.sha256(np.random.get_state()[1].tobytes()).hexdigest(),
        'warnings': list(warnings.filters),
        'loggers': [
            (lg.name, lg.level, list(lg.handlers), lg.propagate, lg.disabled)
            for lg in loggers
        ],
        'hooks': (
            sys.excepthook,
            threading.excepthook,
            sys.displayhook,
            sys.unraisablehook,
        ),
        'threads': sorted(t.name for t in threading.enumerate()),
        'children': len(multiprocessing.active_children()),
        'environ': dict(os.environ),
        'cwd': os.getcwd(),
        'sys_path': list(sys.path),
        'streams': (id(sys.stdout), id(sys.stderr), id(sys.stdin)),
        'recursion': sys.getrecursionlimit(),
        'switch': sys.getswitchinterval(),
        'faulthandler': faulthandler.is_enabled(),
        'tqdm': None
        if tqdm is None
        else (len(tqdm.tqdm._instances), tqdm.tqdm.monitor is not None),
    }


def differences(before: dict, after: dict) -> list:
    return [key for key in before if before[key] != after[key]]


class Fail(Hook):
    """Raises ``error`` at update ``at`` (0: in ``start``)."""

    __undescribed__ = {'error': None, 'at': 0}

    def __init__(self, error, at):
        super().__init__('Fail', 'update', 1)
        self.error, self.at = error, at

    def start(self, net, stepper, verbose, named_data_iters):
        super().start(net, stepper, verbose, named_data_iters)
        if self.at == 0:
            raise self.error

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        if update_nr == self.at:
            raise self.error


class SeesSigQuit(Hook):
    """Logs whether StopOnSigQuit's handler is installed during training."""

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return signal.getsignal(signal.SIGQUIT) not in (
            signal.SIG_DFL,
            signal.SIG_IGN,
            None,
        )


class BreaksAfter(DataIterator):
    """Yields ``good`` batches of its inner iterator, then raises."""

    def __init__(self, inner, good):
        super().__init__(inner.data_shapes, inner.length)
        self.iter, self.good = inner, good

    def __call__(self, handler=None):
        for i, batch in enumerate(self.iter(handler)):
            if i == self.good:
                raise OSError('the data source went away')
            yield batch


def data():
    rnd = np.random.RandomState(0)
    x = rnd.rand(1, 30, 4)
    return {'default': x, 'targets': x.argmax(axis=2)[:, :, None] % 3}


def make(folder, extra=(), breaks=False, bar=True, verbose=False):
    bs.global_rnd.set_seed(1)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    trainer = bs.Trainer(bs.training.MomentumStepper(0.1), verbose=verbose)
    trainer.add_hook(StopOnSigQuit(timescale='update'))
    trainer.add_hook(SeesSigQuit('sees_sigquit', 'update'))
    if bar:  # needs the training iterator: not in evaluate
        trainer.add_hook(ProgressBar(file=io.StringIO(), force=True))
    trainer.add_hook(MonitorLoss('valid', name='validation'))
    trainer.add_hook(SaveCheckpoint(os.path.join(folder, 'run.ckpt')))
    for hook in extra:
        trainer.add_hook(hook)
    trainer.add_hook(StopAfterEpoch(2))
    train = Minibatches(7, shuffle=True, **data())
    if breaks:
        train = BreaksAfter(train, 2)
    return trainer, net, train, {'valid': Minibatches(10, **data())}


def scenario(name, folder, extra=(), breaks=False, evaluate=False, verbose=False):
    trainer, net, train, named = make(folder, extra, breaks, not evaluate, verbose)
    before = snapshot()
    raised = None
    try:
        if evaluate:
            trainer.evaluate(net, **named)
        else:
            trainer.train(net, train, **named)
    except BaseException as err:  # KeyboardInterrupt included
        raised = type(err).__name__
    after = snapshot()
    return {
        'scenario': name,
        'raised': raised,
        'changed': differences(before, after),
        'saw_handler': any(
            (trainer.results if evaluate else trainer.logs).get('sees_sigquit', [])
        ),
    }


def main(folder):
    # brainstorm imports these when first needed; importing them registers
    # their loggers, which is the import's doing, not training's
    import h5py  # noqa: F401  (imported by the first checkpoint)
    import tqdm  # noqa: F401  (imported by ProgressBar.start)

    results = [
        scenario('normal end', folder),
        scenario('normal end, verbose', folder, verbose=True),
        scenario('hook raises', folder, [Fail(ValueError('hook broke'), 2)]),
        scenario(
            'hook raises KeyboardInterrupt', folder, [Fail(KeyboardInterrupt(), 5)]
        ),
        scenario('hook start raises', folder, [Fail(ValueError('no start'), 0)]),
        scenario('data iterator raises', folder, breaks=True),
        scenario('evaluate', folder, evaluate=True),
    ]
    for result in results:
        print(json.dumps(result))


if __name__ == '__main__':
    main(sys.argv[1])
