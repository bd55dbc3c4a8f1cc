#!/usr/bin/env python
"""A convolutional network on CIFAR-10, or offline on scikit-learn's digits.

The network is Brainstorm 0.5's CIFAR-10 example: three blocks of a 5x5
convolution (32, 32 and 64 rectified filters, zero padding 2) followed by
3x3 max pooling with stride 2, then a FullyConnected layer of 64 units
(``FC``) and a softmax output. Convolution weights start from
Gaussian(0.01), the fully connected ones from Gaussian(0.1), all biases from
0; training uses momentum 0.9 and also reports the training accuracy.

Data:

* ``CIFAR-10.hdf5`` in ``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``), written
  by ``data/create_cifar10.py``: 40000 training and 10000 validation colour
  images of 32x32 pixels. Settings of Brainstorm 0.5: batches of 100,
  learning rate 0.01, 20 epochs.
* Otherwise, offline: the 1797 handwritten digits of 8x8 pixels bundled
  with scikit-learn, split with a fixed seed into 1437 training and 360
  validation images. Three rounds of 3x3 pooling with stride 2 would shrink
  8x8 images to nothing, so each pixel is repeated 4x4 times (32x32 images
  with one channel, the size of CIFAR-10) and the images are standardised:
  the network stays exactly the same. Settings: batches of 20, learning
  rate 0.1, 10 epochs.

Run ``python examples/cifar10_cnn.py --help`` for the options. The best
network (by validation accuracy) is saved to ``cifar10_cnn_best.hdf5``.
Started by ``mpiexec -n N`` (or with ``--mpi``) it trains data-parallel
on N processes (``pip install 'brainstorm-nn[mpi]'``); ``--batch-size`` is then
the global batch and only rank 0 prints and saves.
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

DEFAULTS = {
    'cifar10': {'epochs': 20, 'batch_size': 100, 'learning_rate': 0.01},
    'digits': {'epochs': 10, 'batch_size': 20, 'learning_rate': 0.1},
}


def load_cifar10(filename: str):
    """Training and validation images ``(1, N, 32, 32, 3)`` and labels
    ``(1, N, 1)`` from CIFAR-10.hdf5 (already standardised)."""
    with h5py.File(filename, 'r') as f:
        split = f['normalized_split']
        return ((split['training/default'][()],
                 split['training/targets'][()]),
                (split['validation/default'][()],
                 split['validation/targets'][()]))


def load_digits(scale: int = 4):
    """scikit-learn's 8x8 digits, each pixel repeated ``scale`` x ``scale``
    times and standardised, split 1437/360 with a fixed seed."""
    from sklearn.datasets import load_digits as sklearn_digits
    digits = sklearn_digits()
    images = np.kron(digits.images, np.ones((1, scale, scale)))
    size = 8 * scale
    x = images.reshape((1, -1, size, size, 1))
    y = digits.target.astype(np.uint8).reshape((1, -1, 1))
    x, y = bs.tools.shuffle_data(x, y, seed=0)
    (x_tr, y_tr), (x_va, y_va) = bs.tools.split(x, y, ratios=(1437, 360))
    # standardise with the statistics of the training images (as
    # create_cifar10.py does per pixel; here one mean and std for all)
    mean, std = x_tr.mean(), x_tr.std()
    x_tr = ((x_tr - mean) / std).astype(np.float32)
    x_va = ((x_va - mean) / std).astype(np.float32)
    return (x_tr, y_tr), (x_va, y_va)


def get_data(data_dir: str | None):
    """``(name, training, validation)``; says which data it uses."""
    filename = os.path.join(data_dir, 'CIFAR-10.hdf5') if data_dir else None
    if filename and os.path.exists(filename):
        print(f'Data: CIFAR-10 from {filename}')
        return ('cifar10',) + load_cifar10(filename)
    where = f'in {data_dir}' if data_dir else '($BRAINSTORM_DATA_DIR not set)'
    print(f'Data: CIFAR-10.hdf5 not found {where}; using the handwritten '
          'digits bundled with scikit-learn instead, upscaled from 8x8 to '
          '32x32 pixels (see data/create_cifar10.py for CIFAR-10).')
    return ('digits',) + load_digits()


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Train a convolutional network on CIFAR-10 (or, '
                    "offline, on scikit-learn's digits).")
    parser.add_argument('--epochs', type=int,
                        help='epochs to train (CIFAR-10 20, digits 10)')
    parser.add_argument('--batch-size', type=int,
                        help='samples per update (CIFAR-10 100, digits 20)')
    parser.add_argument('--learning-rate', type=float,
                        help='learning rate of the momentum stepper '
                             '(CIFAR-10 0.01, digits 0.1)')
    parser.add_argument('--limit', type=int,
                        help='use at most this many training and validation '
                             'samples (for quick runs)')
    parser.add_argument('--data-dir',
                        default=os.environ.get('BRAINSTORM_DATA_DIR'),
                        help='folder holding CIFAR-10.hdf5 (default: '
                             '$BRAINSTORM_DATA_DIR)')
    parser.add_argument('--save', default='cifar10_cnn_best.hdf5',
                        help='file for the best network')
    parser.add_argument('--seed', type=int, default=42,
                        help='seed of the global random state')
    parser.add_argument('--mpi', action='store_true',
                        help='data-parallel training over MPI processes '
                             '(on by default when started by mpiexec with '
                             'more than one process)')
    return parser.parse_args(argv)


def build_network(in_shape: tuple) -> bs.Network:
    """The CNN for images of shape ``(height, width, channels)``."""
    conv = bs.layers.Convolution2D
    pool = bs.layers.Pooling2D
    inp, out = bs.tools.get_in_out_layers('classification', in_shape, 10)
    network = bs.Network.from_layer(
        inp >> conv(32, kernel_size=(5, 5), padding=2, name='Conv1')
        >> pool(type='max', kernel_size=(3, 3), stride=(2, 2), name='Pool1')
        >> conv(32, kernel_size=(5, 5), padding=2, name='Conv2')
        >> pool(type='max', kernel_size=(3, 3), stride=(2, 2), name='Pool2')
        >> conv(64, kernel_size=(5, 5), padding=2, name='Conv3')
        >> pool(type='max', kernel_size=(3, 3), stride=(2, 2), name='Pool3')
        >> bs.layers.FullyConnected(64, name='FC')
        >> out)
    network.initialize({'Conv*': {'W': bs.initializers.Gaussian(0.01),
                                  'bias': 0},
                        'FC': {'W': bs.initializers.Gaussian(0.1), 'bias': 0},
                        'Output_projection': {
                            'W': bs.initializers.Gaussian(0.1), 'bias': 0}})
    return network


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    parallel = args.mpi or mpi_world_size() > 1
    if parallel and mpi_world_rank() > 0:
        sys.stdout = open(os.devnull, 'w')  # only rank 0 reports
    data_name, (x_tr, y_tr), (x_va, y_va) = get_data(args.data_dir)
    if args.limit:
        x_tr, y_tr = x_tr[:, :args.limit], y_tr[:, :args.limit]
        x_va, y_va = x_va[:, :args.limit], y_va[:, :args.limit]
    settings = dict(DEFAULTS[data_name])
    for key in settings:
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    print(f'{x_tr.shape[1]} training and {x_va.shape[1]} validation images '
          f'of shape {x_tr.shape[2:]}; settings: {settings}')

    # ---- data iterators: batches of (T=1, B, 32, 32, C) images
    getter_tr = bs.data_iterators.Minibatches(
        settings['batch_size'], default=x_tr, targets=y_tr)
    getter_va = bs.data_iterators.Minibatches(100, default=x_va,
                                              targets=y_va)
    if parallel:  # each MPI process takes its part of every batch
        getter_tr = bs.data_iterators.Shard(getter_tr)
        getter_va = bs.data_iterators.Shard(getter_va)

    # ---- the network
    network = build_network(x_tr.shape[2:])

    # ---- the trainer: a stepper and hooks
    stepper = bs.training.MomentumStepper(
        learning_rate=settings['learning_rate'], momentum=0.9)
    if parallel:  # sum the gradients of all MPI processes in every update
        stepper = bs.training.DataParallel(stepper)
    trainer = bs.Trainer(stepper)
    trainer.add_hook(bs.hooks.ProgressBar())
    scorers = [bs.scorers.Accuracy(out_name='Output.outputs.predictions')]
    trainer.train_scorers = scorers
    trainer.add_hook(bs.hooks.MonitorScores('valid_getter', scorers,
                                            name='validation'))
    trainer.add_hook(bs.hooks.SaveBestNetwork('validation.Accuracy',
                                              filename=args.save,
                                              name='best weights',
                                              criterion='max'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))

    # ---- train, then report from the logs
    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    accuracies = trainer.logs['validation']['Accuracy']
    training = trainer.logs['rolling_training']['Accuracy']
    best = int(np.argmax(accuracies))
    print(f'Trained {trainer.current_epoch_nr} epochs in '
          f'{time.time() - start:.0f} s; training accuracy of the last '
          f'epoch {training[-1]:.2%}.')
    print(f'Validation accuracy: {accuracies[best]:.2%} (best, epoch {best}, '
          f'saved to {args.save}); {accuracies[-1]:.2%} after the last epoch')
    return {'best_accuracy': accuracies[best],
            'final_accuracy': accuracies[-1]}


if __name__ == '__main__':
    main()
