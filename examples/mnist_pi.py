#!/usr/bin/env python
"""A permutation-invariant MLP on MNIST, or offline on scikit-learn's digits.

The network is Brainstorm 0.5's MNIST example: Dropout 0.2, two rectified
FullyConnected layers of 1200 units (``Hid1``, ``Hid2``) each followed by
Dropout 0.5, and a softmax output whose projection ``FC`` keeps every
unit's incoming weights within an L2 norm of 1. Weights start from
Gaussian(0.01); training uses momentum 0.9 and stops after ``--epochs``.

Data:

* ``MNIST.hdf5`` in ``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``), written
  by ``data/create_mnist.py``: 50000 training and 10000 validation images of
  28x28 pixels. Settings of Brainstorm 0.5: batches of 100, learning rate
  0.1, 500 epochs.
* Otherwise, offline: the 1797 handwritten digits of 8x8 pixels bundled
  with scikit-learn, scaled to [0, 1] and split with a fixed seed into 1437
  training and 360 validation images. The same network learns them with
  batches of 20, a learning rate of 1.0 decaying by a factor 0.93 per
  epoch, and 60 epochs (run time: see the table "Run times of the
  examples" in docs/quickstart.rst).

Run ``python examples/mnist_pi.py --help`` for the options. The best
network (by validation accuracy) is saved to ``mnist_pi_best.hdf5``.

Data-parallel on N processes (needs ``pip install 'brainstorm-nn[mpi]'``)::

    mpiexec -n 4 python examples/mnist_pi.py

Started by ``mpiexec`` (or with ``--mpi``), every process trains on its
part of each batch (``--batch-size`` is the global batch) through
``DataParallel`` and ``Shard``; only rank 0 prints and saves.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import h5py
import numpy as np

import brainstorm as bs
from brainstorm.training.data_parallel import mpi_world_rank, mpi_world_size

# settings per data set: those of Brainstorm 0.5 for MNIST, and settings
# that train the same network quickly on the small digits data
DEFAULTS = {
    'mnist': {'epochs': 500, 'batch_size': 100, 'learning_rate': 0.1,
              'lr_decay': 1.0},
    'digits': {'epochs': 60, 'batch_size': 20, 'learning_rate': 1.0,
               'lr_decay': 0.93},
}


def load_mnist(filename: str):
    """Training and validation images ``(1, N, 28, 28, 1)`` and labels
    ``(1, N, 1)`` from MNIST.hdf5."""
    with h5py.File(filename, 'r') as f:
        split = f['normalized_split']
        return ((split['training/default'][()],
                 split['training/targets'][()]),
                (split['validation/default'][()],
                 split['validation/targets'][()]))


def load_digits():
    """scikit-learn's 8x8 digits in [0, 1], split 1437/360 with a fixed
    seed, in the layout of MNIST.hdf5."""
    from sklearn.datasets import load_digits as sklearn_digits
    digits = sklearn_digits()
    images = (digits.images / 16.0).astype(np.float32)
    x = images.reshape((1, -1, 8, 8, 1))
    y = digits.target.astype(np.uint8).reshape((1, -1, 1))
    x, y = bs.tools.shuffle_data(x, y, seed=0)
    training, validation = bs.tools.split(x, y, ratios=(1437, 360))
    return tuple(training), tuple(validation)


def get_data(data_dir: str | None):
    """``(name, training, validation)``; says which data it uses."""
    filename = os.path.join(data_dir, 'MNIST.hdf5') if data_dir else None
    if filename and os.path.exists(filename):
        print(f'Data: MNIST from {filename}')
        return ('mnist',) + load_mnist(filename)
    where = f'in {data_dir}' if data_dir else '($BRAINSTORM_DATA_DIR not set)'
    print(f'Data: MNIST.hdf5 not found {where}; using the 8x8 handwritten '
          'digits bundled with scikit-learn instead (see '
          'data/create_mnist.py for MNIST).')
    return ('digits',) + load_digits()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Train a permutation-invariant MLP on MNIST (or, '
                    "offline, on scikit-learn's digits).")
    parser.add_argument('--epochs', type=int,
                        help='epochs to train (MNIST 500, digits 60)')
    parser.add_argument('--batch-size', type=int,
                        help='samples per update (MNIST 100, digits 20)')
    parser.add_argument('--learning-rate', type=float,
                        help='learning rate of the momentum stepper '
                             '(MNIST 0.1, digits 1.0)')
    parser.add_argument('--lr-decay', type=float,
                        help='factor applied to the learning rate after '
                             'every epoch (MNIST 1.0, digits 0.93)')
    parser.add_argument('--limit', type=int,
                        help='use at most this many training and validation '
                             'samples (for quick runs)')
    parser.add_argument('--data-dir',
                        default=os.environ.get('BRAINSTORM_DATA_DIR'),
                        help='folder holding MNIST.hdf5 (default: '
                             '$BRAINSTORM_DATA_DIR)')
    parser.add_argument('--save', default='mnist_pi_best.hdf5',
                        help='file for the best network')
    parser.add_argument('--seed', type=int, default=42,
                        help='seed of the global random state')
    parser.add_argument('--mpi', action='store_true',
                        help='data-parallel training over MPI processes '
                             '(on by default when started by mpiexec with '
                             'more than one process)')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    parallel = args.mpi or mpi_world_size() > 1
    if parallel and mpi_world_rank() > 0:
        # the trainer and hooks only report on rank 0; so does this script
        sys.stdout = open(os.devnull, 'w')
    data_name, (x_tr, y_tr), (x_va, y_va) = get_data(args.data_dir)
    if args.limit:
        x_tr, y_tr = x_tr[:, :args.limit], y_tr[:, :args.limit]
        x_va, y_va = x_va[:, :args.limit], y_va[:, :args.limit]
    settings = dict(DEFAULTS[data_name])
    for key in settings:
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    print(f'{x_tr.shape[1]} training and {x_va.shape[1]} validation images '
          f'of {x_tr.shape[2]}x{x_tr.shape[3]} pixels; settings: {settings}')

    getter_tr = bs.data_iterators.Minibatches(
        settings['batch_size'], default=x_tr, targets=y_tr)
    getter_va = bs.data_iterators.Minibatches(100, default=x_va,
                                              targets=y_va)
    if parallel:
        # each process takes its part of every (global) batch
        getter_tr = bs.data_iterators.Shard(getter_tr)
        getter_va = bs.data_iterators.Shard(getter_va)
        print(f'Data-parallel on {mpi_world_size()} processes: '
              f"{settings['batch_size']} samples per update in all.")

    # ---- the network ---------------------------------------------------
    inp, fc = bs.tools.get_in_out_layers('classification', x_tr.shape[2:],
                                         10, projection_name='FC')
    network = bs.Network.from_layer(
        inp >> bs.layers.Dropout(drop_prob=0.2)
        >> bs.layers.FullyConnected(1200, name='Hid1', activation='rel')
        >> bs.layers.Dropout(drop_prob=0.5)
        >> bs.layers.FullyConnected(1200, name='Hid2', activation='rel')
        >> bs.layers.Dropout(drop_prob=0.5)
        >> fc)
    network.initialize(bs.initializers.Gaussian(0.01))
    network.set_weight_modifiers({'FC': bs.value_modifiers.ConstrainL2Norm(1)})

    # ---- the trainer ---------------------------------------------------
    stepper = bs.training.MomentumStepper(
        learning_rate=settings['learning_rate'], momentum=0.9)
    if parallel:  # sum the gradients of all processes in every update
        stepper = bs.training.DataParallel(stepper)
    trainer = bs.Trainer(stepper)
    trainer.add_hook(bs.hooks.ProgressBar())
    if settings['lr_decay'] != 1.0:
        trainer.add_hook(bs.hooks.ModifyStepperAttribute(
            bs.training.Exponential(settings['learning_rate'],
                                    settings['lr_decay'])))
    scorers = [bs.scorers.Accuracy(out_name='Output.outputs.predictions')]
    trainer.add_hook(bs.hooks.MonitorScores('valid_getter', scorers,
                                            name='validation'))
    trainer.add_hook(bs.hooks.SaveBestNetwork('validation.Accuracy',
                                              filename=args.save,
                                              name='best weights',
                                              criterion='max'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))

    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    accuracies = trainer.logs['validation']['Accuracy']
    best = int(np.argmax(accuracies))
    print(f'Trained {trainer.current_epoch_nr} epochs in '
          f'{time.time() - start:.0f} s.')
    print(f'Validation accuracy: {accuracies[best]:.2%} (best, epoch {best}, '
          f'saved to {args.save}); {accuracies[-1]:.2%} after the last epoch')
    return {'best_accuracy': accuracies[best],
            'final_accuracy': accuracies[-1]}


if __name__ == '__main__':
    main()
