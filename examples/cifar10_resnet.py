#!/usr/bin/env python
"""A small residual CNN on CIFAR-10, or offline on scikit-learn's digits.

A 3x3 convolution of stride 2, then three stages of residual blocks with
``padding='same'`` (``width``, 2 and 4 times as many filters; the second and third
stage start with a stride-2 convolution), each block ``x -> Conv -> Conv (linear) ->
Add(x, .) -> rectify``, then GlobalPooling (average over all positions) and a softmax
output; momentum 0.9.
Data (``bs.datasets.load_cifar10``): ``CIFAR-10.hdf5`` of ``data/create_cifar10.py`` in
``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``), otherwise, offline, scikit-learn's
digits upscaled to 32x32 pixels. Saves the best network to ``cifar10_resnet_best.hdf5``.
"""

import argparse
import time

import numpy as np

import brainstorm as bs

DEFAULTS = {
    'cifar10': {'epochs': 20, 'batch_size': 100, 'learning_rate': 0.05, 'width': 16},
    'digits': {'epochs': 6, 'batch_size': 20, 'learning_rate': 0.05, 'width': 8},
}
HELP = {
    'epochs': 'epochs',
    'batch_size': 'samples per update',
    'learning_rate': 'learning rate of the momentum stepper',
    'width': 'filters of the first stage (doubled in each further stage)',
}
L = bs.layers


def conv(filters, name, stride=1, activation='rel'):
    """A 3x3 convolution whose output has the input's size (for stride 1)."""
    stride = (stride, stride)
    return L.Convolution2D(filters, (3, 3), stride, 'same', activation, name=name)


def residual_block(x, filters, name):
    """``rectify(x + Conv(Conv(x)))``, the sum taken by an Add layer."""
    add = L.Add(name=f'{name}_add')
    x >> 'inputs_1' - add
    first, second = conv(filters, f'{name}_a'), conv(filters, f'{name}_b', 1, 'linear')
    x >> first >> second >> 'inputs_2' - add
    return add >> L.Elementwise('rel', name=f'{name}_out')


def build_network(in_shape: tuple, width: int) -> bs.Network:
    """The residual network for images of shape ``(height, width, channels)``."""
    inp, out = bs.tools.get_in_out_layers('classification', in_shape, 10)
    x = inp >> conv(width, 'Conv0', stride=2)  # 32x32 -> 16x16
    for stage in range(3):
        filters = width * 2**stage
        if stage:  # halve the image size, double the filters
            x = x >> conv(filters, f'Down{stage}', stride=2)
        x = residual_block(x, filters, f'Block{stage}')
    network = bs.Network.from_layer(x >> L.GlobalPooling('avg', name='Pool') >> out)
    # the last convolution of each block starts small: each block starts near identity
    fan_in = bs.initializers.DenseSqrtFanIn
    network.initialize(
        {'default': fan_in('rel'), '*_b': {'W': fan_in(0.5)}, 'fallback': 0.0}
    )
    return network


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bs.datasets.add_settings_arguments(parser, DEFAULTS, HELP, positive=HELP)
    bs.datasets.add_data_arguments(parser, 'CIFAR-10.hdf5')
    add = parser.add_argument
    add('--save', default='cifar10_resnet_best.hdf5', help='file for the best network')
    add('--seed', type=int, default=42, help='global random seed')
    add('--gpu', action='store_true', help='train on an NVIDIA GPU (PyCudaHandler)')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    data = bs.datasets.load_cifar10(args.data_dir).limit(args.limit)
    print(f'Data: {data.origin}')
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    settings = bs.datasets.choose_settings(args, DEFAULTS, data.name)
    sizes = f'{x_tr.shape[1]} training and {x_va.shape[1]} validation images'
    print(f'{sizes} of shape {x_tr.shape[2:]}; settings: {settings}')
    batches = bs.data_iterators.Minibatches
    getter_tr = batches(settings['batch_size'], default=x_tr, targets=y_tr)
    getter_va = batches(100, default=x_va, targets=y_va)
    network = build_network(x_tr.shape[2:], settings['width'])
    if args.gpu:  # needs the pycuda extra; parameters move to the GPU
        network.set_handler(bs.handlers.PyCudaHandler())
    print(f'Handler: {network.handler}')

    stepper = bs.training.MomentumStepper(settings['learning_rate'], momentum=0.9)
    trainer = bs.Trainer(stepper)
    trainer.add_hook(bs.hooks.ProgressBar())
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
    result = f'{accuracies[best]:.2%} (best, epoch {best}, saved to {args.save})'
    print(f'Validation accuracy: {result}; {accuracies[-1]:.2%} after the last epoch')
    return {'best_accuracy': accuracies[best], 'final_accuracy': accuracies[-1]}


if __name__ == '__main__':
    main()
