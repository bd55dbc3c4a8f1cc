"""A seeded training script on the default handler, run in fresh processes
by tests/training/test_reproducibility.py.

    python seeded_run.py run OUTDIR CONFIG [SEED]
        trains 3 epochs of 3 updates with Dropout, BatchNorm, shuffling,
        Gaussian and salt-and-pepper noise and two schedules, writing a
        checkpoint at every update (``u<k>.ckpt``) and every epoch
        (``e<k>.ckpt``), the final parameters (``final.npy``) and the logs
        (``logs.json``) into OUTDIR.
    python seeded_run.py resume OUTDIR CONFIG
        continues every checkpoint in OUTDIR (one after the other, in this
        one process) to the end and prints one JSON line per checkpoint:
        whether the parameters are bit-identical to ``final.npy`` and the
        logs equal ``logs.json``.

CONFIG picks the stepper and schedules (see ``CONFIGS``).
"""

import glob
import json
import os
import sys

import numpy as np

import brainstorm as bs
from brainstorm.data_iterators import AddGaussianNoise, AddSaltNPepper, Minibatches
from brainstorm.hooks import (
    ModifyStepperAttribute,
    MonitorLoss,
    SaveCheckpoint,
    StopAfterEpoch,
)
from brainstorm.layers import BatchNorm, Dropout, FullyConnected
from brainstorm.training import Trainer, schedules, steppers

EPOCHS = 3


def _stepper(config):
    if config == 'sgd':
        return steppers.SgdStepper(0.1)
    if config == 'momentum':
        return steppers.MomentumStepper(0.1, momentum=0.9)
    if config == 'nesterov':
        return steppers.NesterovStepper(0.1, momentum=0.9)
    if config == 'rmsprop':
        return steppers.RMSPropStepper(0.01)
    if config == 'adam':
        return steppers.AdamStepper(0.01)
    if config == 'adamw':
        return steppers.AdamWStepper(0.01)
    return steppers.MultiStepper(
        {'Hid1': steppers.AdamStepper(0.01), 'default': steppers.MomentumStepper(0.1)}
    )


SCHEDULES = {
    'sgd': (
        schedules.Linear(0.1, 0.01, 6),
        schedules.MultiStep(1.0, [1, 2], [0.5, 0.25]),
    ),
    'momentum': (schedules.Exponential(0.1, 0.9), schedules.DecreaseAfterEpoch(1.0, 2)),
    'nesterov': (
        schedules.CosineWithWarmup(0.1, 8, warmup_changes=2),
        schedules.Linear(1.0, 0.5, 3),
    ),
    'rmsprop': (
        schedules.MultiStep(0.01, [3, 6], [0.005, 0.002]),
        schedules.Exponential(1.0, 0.5),
    ),
    'adam': (schedules.DecreaseAfterEpoch(0.01, 2), schedules.CosineWithWarmup(1.0, 3)),
    'adamw': (schedules.Linear(0.01, 0.001, 8), schedules.MultiStep(1.0, [2], [0.1])),
    'multi': (schedules.Exponential(0.1, 0.95), schedules.DecreaseAfterEpoch(1.0, 1)),
}
CONFIGS = sorted(SCHEDULES)


class PositionCheckpoint(SaveCheckpoint):
    """A checkpoint file per position: ``u<update>`` or ``e<epoch>``."""

    def __init__(self, directory, timescale):
        super().__init__(
            os.path.join(directory, 'x.ckpt'),
            name=f'ckpt_{timescale}',
            timescale=timescale,
        )
        self.directory = directory

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        tag = f'u{update_nr}' if self.timescale == 'update' else f'e{epoch_nr}'
        self.filename = os.path.join(self.directory, f'{tag}.ckpt')


def data(n, seed):
    rnd = np.random.RandomState(seed)
    ids = rnd.randint(0, 3, n)
    x = rnd.randn(3, 4)[ids] * 2 + rnd.randn(n, 4) * 0.5
    return {'default': x.reshape(1, n, 4), 'targets': ids.reshape(1, n, 1)}


def iterators():
    train = AddSaltNPepper(
        AddGaussianNoise(Minibatches(8, shuffle=True, **data(24, 1)), {'default': 0.3}),
        {'default': 0.1},
    )
    valid = AddGaussianNoise(
        Minibatches(5, shuffle=True, **data(10, 2)), {'default': 0.2}
    )
    return train, {'valid': valid}


def run(outdir, config, seed):
    bs.global_rnd.set_seed(seed)
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp
        >> Dropout(0.2)
        >> FullyConnected(6, name='Hid1')
        >> BatchNorm(name='BN')
        >> Dropout(0.3)
        >> FullyConnected(5, activation='tanh', name='Hid2')
        >> out
    )
    net.initialize(bs.initializers.Gaussian(0.3))
    update_schedule, epoch_schedule = SCHEDULES[config]
    stepper = _stepper(config)
    attr = 'steppers.default.learning_rate' if config == 'multi' else 'learning_rate'
    trainer = Trainer(stepper, verbose=False)
    trainer.add_hook(
        ModifyStepperAttribute(update_schedule, attr, timescale='update', name='lr')
    )
    # an epoch schedule for a second attribute, logged by a monitor
    trainer.add_hook(MonitorLoss('valid', name='valid_epoch'))
    trainer.add_hook(
        MonitorLoss('valid', name='valid_update', timescale='update', interval=2)
    )
    scale = EpochValue(epoch_schedule)
    trainer.add_hook(scale)
    trainer.add_hook(PositionCheckpoint(outdir, 'update'))
    trainer.add_hook(PositionCheckpoint(outdir, 'epoch'))
    trainer.add_hook(StopAfterEpoch(EPOCHS))
    train, named = iterators()
    trainer.train(net, train, **named)
    np.save(os.path.join(outdir, 'final.npy'), net.get('parameters'))
    with open(os.path.join(outdir, 'logs.json'), 'w') as f:
        json.dump(bs.get_description(trainer.logs), f)


class EpochValue(bs.hooks.Hook):
    """Logs an epoch schedule's value (so a skipped value shows in the
    logs)."""

    def __init__(self, schedule, name='epoch_value'):
        super().__init__(name, 'epoch', 1)
        self.schedule = schedule

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        return float(self.schedule(epoch_nr, update_nr, 'epoch', 1, net, stepper, logs))


def resume(outdir, config):
    final = np.load(os.path.join(outdir, 'final.npy'))
    with open(os.path.join(outdir, 'logs.json')) as f:
        logs = json.load(f)
    scratch = os.path.join(outdir, 'scratch')
    os.makedirs(scratch, exist_ok=True)
    for filename in sorted(glob.glob(os.path.join(outdir, '*.ckpt'))):
        trainer, net = Trainer.from_checkpoint(filename)
        loaded_equal = bool(np.array_equal(net.get('parameters'), final))
        if trainer.current_epoch_nr == EPOCHS and filename.endswith(f'e{EPOCHS}.ckpt'):
            # written when StopAfterEpoch ended the run: nothing is left
            print(
                json.dumps(
                    {
                        'checkpoint': os.path.basename(filename),
                        'params_equal': loaded_equal,
                        'logs_equal': json.loads(
                            json.dumps(bs.get_description(trainer.logs))
                        )
                        == logs,
                        'updates': trainer.current_update_nr,
                    }
                ),
                flush=True,
            )
            continue
        for name in ('ckpt_update', 'ckpt_epoch'):
            trainer.hooks[name].directory = scratch
        train, named = iterators()
        trainer.train(net, train, **named)
        print(
            json.dumps(
                {
                    'checkpoint': os.path.basename(filename),
                    'params_equal': bool(np.array_equal(net.get('parameters'), final)),
                    'logs_equal': json.loads(
                        json.dumps(bs.get_description(trainer.logs))
                    )
                    == logs,
                    'updates': trainer.current_update_nr,
                }
            ),
            flush=True,
        )


if __name__ == '__main__':
    mode, directory, configuration = sys.argv[1:4]
    if mode == 'run':
        run(directory, configuration, int(sys.argv[4]) if len(sys.argv) > 4 else 11)
    else:
        resume(directory, configuration)
