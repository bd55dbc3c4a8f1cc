"""Resume patterns where a monitor draws from the training iterator's
random states, run in fresh processes by
tests/training/test_resume_patterns.py.

    python resume_patterns.py run OUTDIR PATTERN
        trains 3 epochs of 3 updates, writing a checkpoint at every update
        (``u<k>.ckpt``) and epoch (``e<k>.ckpt``); the logs (which hold a
        digest of the parameters at every update and epoch end) go to
        ``logs.json``, the final parameters to ``final.npy``.
    python resume_patterns.py resume OUTDIR PATTERN
        continues every checkpoint in OUTDIR to the end in this process and
        prints one JSON line per checkpoint: whether the final parameters
        and the whole logs equal those of the uninterrupted run.

PATTERN:
    ``monitor_training``: MonitorLoss and MonitorScores with
        ``timescale='update'`` watch the (shuffled, noisy) training
        iterator, so every update draws a pass from its random states.
    ``alias``: the training iterator object is also given as ``valid=``
        and monitored per epoch and every second update.
    ``samples_file``: as ``monitor_training``, with the training data in
        an HDF5 file (read batch by batch) and ``shuffle='samples'``.
"""

import glob
import hashlib
import json
import os
import sys

import h5py
import numpy as np

import brainstorm as bs
from brainstorm.data_iterators import AddGaussianNoise, Minibatches
from brainstorm.hooks import (
    MonitorLoss,
    MonitorScores,
    StopAfterEpoch,
)
from brainstorm.layers import Dropout, FullyConnected
from brainstorm.scorers import Accuracy
from brainstorm.training import Trainer, steppers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from seeded_run import PositionCheckpoint, data  # noqa: E402

EPOCHS = 3


class ParameterDigest(bs.hooks.Hook):
    """Logs a digest of the parameters' bytes (update and epoch ends)."""

    def __init__(self, timescale):
        super().__init__(f'digest_{timescale}', timescale, 1)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return hashlib.sha256(net.get('parameters').tobytes()).hexdigest()[:16]


def _file_data(outdir):
    """The datasets of ``data(24, 1)`` in an HDF5 file in ``outdir``."""
    path = os.path.join(outdir, 'data.h5')
    if not os.path.exists(path):
        with h5py.File(path, 'w') as f:
            for name, values in data(24, 1).items():
                f[name] = values
    f = h5py.File(path, 'r')
    return {name: f[name] for name in ('default', 'targets')}


def iterators(pattern, outdir):
    if pattern == 'samples_file':
        base = Minibatches(8, shuffle='samples', **_file_data(outdir))
    else:
        base = Minibatches(8, shuffle=True, **data(24, 1))
    train = AddGaussianNoise(base, {'default': 0.3})
    if pattern == 'alias':
        return train, {'valid': train}
    return train, {}


def run(outdir, pattern):
    bs.global_rnd.set_seed(3)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> Dropout(0.2) >> FullyConnected(6, activation='tanh', name='H') >> out
    )
    net.initialize(bs.initializers.Gaussian(0.3))
    trainer = Trainer(steppers.MomentumStepper(0.1, momentum=0.9), verbose=False)
    if pattern == 'alias':
        trainer.add_hook(MonitorLoss('valid', name='valid_epoch'))
        trainer.add_hook(
            MonitorLoss('valid', name='valid_update', timescale='update', interval=2)
        )
    else:
        trainer.add_hook(
            MonitorLoss('training_data_iter', name='train_loss', timescale='update')
        )
        trainer.add_hook(
            MonitorScores(
                'training_data_iter',
                [Accuracy(out_name='Output.outputs.predictions')],
                name='train_scores',
                timescale='update',
            )
        )
    trainer.add_hook(ParameterDigest('update'))
    trainer.add_hook(ParameterDigest('epoch'))
    trainer.add_hook(PositionCheckpoint(outdir, 'update'))
    trainer.add_hook(PositionCheckpoint(outdir, 'epoch'))
    trainer.add_hook(StopAfterEpoch(EPOCHS))
    train, named = iterators(pattern, outdir)
    trainer.train(net, train, **named)
    np.save(os.path.join(outdir, 'final.npy'), net.get('parameters'))
    with open(os.path.join(outdir, 'logs.json'), 'w') as f:
        json.dump(bs.get_description(trainer.logs), f)


def resume(outdir, pattern):
    final = np.load(os.path.join(outdir, 'final.npy'))
    with open(os.path.join(outdir, 'logs.json')) as f:
        logs = json.load(f)
    scratch = os.path.join(outdir, 'scratch')
    os.makedirs(scratch, exist_ok=True)
    for filename in sorted(glob.glob(os.path.join(outdir, '*.ckpt'))):
        trainer, net = Trainer.from_checkpoint(filename)
        if not filename.endswith(f'e{EPOCHS}.ckpt'):
            for name in ('ckpt_update', 'ckpt_epoch'):
                trainer.hooks[name].directory = scratch
            train, named = iterators(pattern, outdir)
            trainer.train(net, train, **named)
        resumed_logs = json.loads(json.dumps(bs.get_description(trainer.logs)))
        print(
            json.dumps(
                {
                    'checkpoint': os.path.basename(filename),
                    'params_equal': bool(np.array_equal(net.get('parameters'), final)),
                    'logs_equal': resumed_logs == logs,
                    'updates': trainer.current_update_nr,
                }
            ),
            flush=True,
        )


if __name__ == '__main__':
    mode, directory, name = sys.argv[1:4]
    if mode == 'run':
        run(directory, name)
    else:
        resume(directory, name)
