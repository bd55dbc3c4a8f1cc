#!/usr/bin/env python
"""A permutation-invariant MLP on MNIST, or offline on scikit-learn's digits.

Brainstorm 0.5's MNIST example: Dropout 0.2, two rectified FullyConnected
layers of 1200 units (``Hid1``, ``Hid2``) each followed by Dropout 0.5, and
a softmax output whose projection ``FC`` keeps each unit's incoming weights
within an L2 norm of 1; Gaussian(0.01) weights, momentum 0.9.

Data (``bs.datasets.load_mnist``): ``MNIST.hdf5`` of ``data/create_mnist.py``
in ``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``) with the settings of
Brainstorm 0.5, otherwise, offline, scikit-learn's 8x8 digits (run time:
docs/quickstart.rst). Saves the best network to ``mnist_pi_best.hdf5``.
Data-parallel on 4 processes (after ``pip install -e ".[mpi]"``; the batch
is the global one, only rank 0 prints and saves)::

    mpiexec -n 4 python examples/mnist_pi.py
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
    'mnist': {'epochs': 500, 'batch_size': 100, 'learning_rate': 0.1, 'lr_decay': 1.0},
    'digits': {'epochs': 60, 'batch_size': 20, 'learning_rate': 1.0, 'lr_decay': 0.93},
}
HELP = {
    'epochs': 'epochs',
    'batch_size': 'samples per update',
    'learning_rate': 'learning rate of the momentum stepper',
    'lr_decay': 'factor applied to the learning rate after every epoch',
}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bs.datasets.add_settings_arguments(parser, DEFAULTS, HELP, positive=HELP)
    bs.datasets.add_data_arguments(parser, 'MNIST.hdf5')
    add = parser.add_argument
    add('--save', default='mnist_pi_best.hdf5', help='file for the best network')
    add('--seed', type=int, default=42, help='seed of the global random state')
    add('--gpu', action='store_true', help='train on an NVIDIA GPU (PyCudaHandler)')
    add('--mpi', action='store_true', help='data-parallel (default: under mpiexec)')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    parallel = args.mpi or mpi_world_size() > 1
    if parallel and mpi_world_rank() > 0:
        sys.stdout = open(os.devnull, 'w')  # the trainer and hooks report on rank 0
    data = bs.datasets.load_mnist(args.data_dir).limit(args.limit)
    print(f'Data: {data.origin}')
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    settings = bs.datasets.choose_settings(args, DEFAULTS, data.name)
    print(
        f'{x_tr.shape[1]} training and {x_va.shape[1]} validation images of '
        f'{x_tr.shape[2]}x{x_tr.shape[3]} pixels; settings: {settings}'
    )

    batches = bs.data_iterators.Minibatches
    getter_tr = batches(settings['batch_size'], default=x_tr, targets=y_tr)
    getter_va = batches(100, default=x_va, targets=y_va)
    if parallel:  # each process takes its part of every (global) batch
        getter_tr = bs.data_iterators.Shard(getter_tr)
        getter_va = bs.data_iterators.Shard(getter_va)
        print(f'Data-parallel on {mpi_world_size()} processes.')

    inp, fc = bs.tools.get_in_out_layers(
        'classification', x_tr.shape[2:], data.nr_classes, projection_name='FC'
    )
    network = bs.Network.from_layer(
        inp
        >> bs.layers.Dropout(drop_prob=0.2)
        >> bs.layers.FullyConnected(1200, name='Hid1', activation='rel')
        >> bs.layers.Dropout(drop_prob=0.5)
        >> bs.layers.FullyConnected(1200, name='Hid2', activation='rel')
        >> bs.layers.Dropout(drop_prob=0.5)
        >> fc
    )
    network.initialize(bs.initializers.Gaussian(0.01))
    if args.gpu:  # needs the pycuda extra; parameters move to the GPU
        network.set_handler(bs.handlers.PyCudaHandler())
    print(f'Handler: {network.handler}')
    network.set_weight_modifiers({'FC': bs.value_modifiers.ConstrainL2Norm(1)})

    learning_rate = settings['learning_rate']
    stepper = bs.training.MomentumStepper(learning_rate=learning_rate, momentum=0.9)
    if parallel:  # sum the gradients of all processes in every update
        stepper = bs.training.DataParallel(stepper)
    trainer = bs.Trainer(stepper)
    trainer.add_hook(bs.hooks.ProgressBar())
    if settings['lr_decay'] != 1.0:
        decay = bs.training.Exponential(learning_rate, settings['lr_decay'])
        trainer.add_hook(bs.hooks.ModifyStepperAttribute(decay))
    scorers = [bs.scorers.Accuracy(out_name='Output.outputs.predictions')]
    trainer.add_hook(bs.hooks.MonitorScores('valid_getter', scorers, name='validation'))
    save = {'filename': args.save, 'name': 'best weights', 'criterion': 'max'}
    trainer.add_hook(bs.hooks.SaveBestNetwork('validation.Accuracy', **save))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))

    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    accuracies = trainer.logs['validation']['Accuracy']
    best = int(np.argmax(accuracies))
    print(f'Trained {trainer.current_epoch_nr} epochs in {time.time() - start:.0f} s.')
    print(
        f'Validation accuracy: {accuracies[best]:.2%} (best, epoch {best}, saved to '
        f'{args.save}); {accuracies[-1]:.2%} after the last epoch'
    )
    return {'best_accuracy': accuracies[best], 'final_accuracy': accuracies[-1]}


if __name__ == '__main__':
    main()
