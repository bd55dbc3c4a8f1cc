#!/usr/bin/env python
"""A convolutional network on CIFAR-10, or offline on scikit-learn's digits.

Brainstorm 0.5's CIFAR-10 example: three blocks of a 5x5 convolution (32, 32
and 64 rectified filters, padding 2) and 3x3 max pooling with stride 2, a
FullyConnected layer of 64 units (``FC``) and a softmax output; momentum 0.9.
Data (``bs.datasets.load_cifar10``): ``CIFAR-10.hdf5`` of ``data/create_cifar10.py``
in ``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``), otherwise, offline, scikit-learn's
digits upscaled to 32x32 pixels (the same network fits). Saves the best network to
``cifar10_cnn_best.hdf5``. Data-parallel on N processes under ``mpiexec -n N``.
"""

import argparse
import os
import sys
import time

import numpy as np

import brainstorm as bs
from brainstorm.training.data_parallel import mpi_world_rank, mpi_world_size

# settings per data set (chosen by the name of the data that was loaded)
DEFAULTS = {
    'cifar10': {'epochs': 20, 'batch_size': 100, 'learning_rate': 0.01},
    'digits': {'epochs': 10, 'batch_size': 20, 'learning_rate': 0.1},
}
HELP = {
    'epochs': 'epochs',
    'batch_size': 'samples per update',
    'learning_rate': 'learning rate of the momentum stepper',
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bs.datasets.add_settings_arguments(parser, DEFAULTS, HELP, positive=HELP)
    bs.datasets.add_data_arguments(parser, 'CIFAR-10.hdf5')
    add = parser.add_argument
    add('--save', default='cifar10_cnn_best.hdf5', help='file for the best network')
    add('--seed', type=int, default=42, help='global random seed')
    add('--gpu', action='store_true', help='train on an NVIDIA GPU (PyCudaHandler)')
    add('--mpi', action='store_true', help='data-parallel (default: under mpiexec)')
    return parser.parse_args(argv)


def build_network(in_shape: tuple) -> bs.Network:
    """The CNN for images of shape ``(height, width, channels)``."""
    conv, pool = bs.layers.Convolution2D, bs.layers.Pooling2D
    inp, out = bs.tools.get_in_out_layers('classification', in_shape, 10)
    network = bs.Network.from_layer(
        inp
        >> conv(32, kernel_size=(5, 5), padding=2, name='Conv1')
        >> pool(type='max', kernel_size=(3, 3), stride=(2, 2), name='Pool1')
        >> conv(32, kernel_size=(5, 5), padding=2, name='Conv2')
        >> pool(type='max', kernel_size=(3, 3), stride=(2, 2), name='Pool2')
        >> conv(64, kernel_size=(5, 5), padding=2, name='Conv3')
        >> pool(type='max', kernel_size=(3, 3), stride=(2, 2), name='Pool3')
        >> bs.layers.FullyConnected(64, name='FC')
        >> out
    )
    gaussian = bs.initializers.Gaussian
    stds = {'Conv*': 0.01, 'FC': 0.1, 'Output_projection': 0.1}  # of the weights W
    init = {name: {'W': gaussian(std), 'bias': 0} for name, std in stds.items()}
    network.initialize(init)
    return network


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    parallel = args.mpi or mpi_world_size() > 1
    if parallel and mpi_world_rank() > 0:
        sys.stdout = open(os.devnull, 'w')  # only rank 0 reports
    data = bs.datasets.load_cifar10(args.data_dir).limit(args.limit)
    print(f'Data: {data.origin}')
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    settings = bs.datasets.choose_settings(args, DEFAULTS, data.name)
    sizes = f'{x_tr.shape[1]} training and {x_va.shape[1]} validation images'
    print(f'{sizes} of shape {x_tr.shape[2:]}; settings: {settings}')

    # ---- data iterators: batches of (T=1, B, 32, 32, C) images
    batches = bs.data_iterators.Minibatches
    getter_tr = batches(settings['batch_size'], default=x_tr, targets=y_tr)
    getter_va = batches(100, default=x_va, targets=y_va)
    if parallel:  # each MPI process takes its part of every batch
        getter_tr = bs.data_iterators.Shard(getter_tr)
        getter_va = bs.data_iterators.Shard(getter_va)

    # ---- the network
    network = build_network(x_tr.shape[2:])
    if args.gpu:  # needs the pycuda extra; parameters move to the GPU
        network.set_handler(bs.handlers.PyCudaHandler())
    print(f'Handler: {network.handler}')

    # ---- the trainer: a stepper and hooks
    learning_rate = settings['learning_rate']
    stepper = bs.training.MomentumStepper(learning_rate=learning_rate, momentum=0.9)
    if parallel:  # sum the gradients of all MPI processes in every update
        stepper = bs.training.DataParallel(stepper)
    trainer = bs.Trainer(stepper)
    trainer.add_hook(bs.hooks.ProgressBar())
    scorers = [bs.scorers.Accuracy(out_name='Output.outputs.predictions')]
    trainer.train_scorers = scorers
    trainer.add_hook(bs.hooks.MonitorScores('valid_getter', scorers, name='validation'))
    save = {'filename': args.save, 'name': 'best weights', 'criterion': 'max'}
    trainer.add_hook(bs.hooks.SaveBestNetwork('validation.Accuracy', **save))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))

    # ---- train, then report from the logs
    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    accuracies = trainer.logs['validation']['Accuracy']
    training = trainer.logs['rolling_training']['Accuracy']
    best = int(np.argmax(accuracies))
    took = f'{trainer.current_epoch_nr} epochs in {time.time() - start:.0f} s'
    print(f'Trained {took}; training accuracy of the last epoch {training[-1]:.2%}.')
    result = f'{accuracies[best]:.2%} (best, epoch {best}, saved to {args.save})'
    print(f'Validation accuracy: {result}; {accuracies[-1]:.2%} after the last epoch')
    return {'best_accuracy': accuracies[best], 'final_accuracy': accuracies[-1]}


if __name__ == '__main__':
    main()
