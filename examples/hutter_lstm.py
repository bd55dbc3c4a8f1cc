#!/usr/bin/env python
"""A character-level LSTM on the Hutter Prize data, or offline on CPython's text.

Brainstorm 0.5's Hutter Prize example: one-hot characters -> Lstm -> softmax over
the next character; Gaussian(0.01) weights, momentum 0.9. Data: ``HutterPrize.hdf5``
(``data/create_hutter.py``) in ``$BRAINSTORM_DATA_DIR`` or ``--data-dir``, else
CPython's help topics with smaller settings (``bs.datasets.load_hutter``). Batch
``k + 1`` continues batch ``k``; validation carries the LSTM's state across batches
(training starts each batch from zero). Prints the unigram entropy of the validation
text and the loss in bits per character; saves the best network (``--save``).
"""

import argparse
import math
import time

import numpy as np

import brainstorm as bs

# settings per data set (chosen by the name of the data that was loaded)
SETTINGS = ('epochs', 'batch_size', 'learning_rate', 'size', 'clip_norm', 'valid_every')
DEFAULTS = {
    'hutter': dict(zip(SETTINGS, (10, 100, 0.01, 1000, None, 3000))),
    'python_text': dict(zip(SETTINGS, (4, 100, 2.0, 128, 5.0, None))),
}
HELP = {
    'epochs': 'epochs',
    'batch_size': 'text streams per batch',
    'learning_rate': 'learning rate of the momentum stepper',
    'size': 'LSTM cells',
    'clip_norm': 'clip the global gradient norm at this value (None: no clipping)',
    'valid_every': 'validate every N updates (None: after every epoch)',
}


class MonitorLossWithContext(bs.hooks.MonitorLoss):
    """MonitorLoss that carries the context between batches; logs bits_per_character."""

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        context, batch_size = None, None
        loss_sum, sequences, characters = 0.0, 0, 0
        for data in self.iter(handler=net.handler):
            time_steps, size = data['targets'].shape[:2]
            if size != batch_size:  # a context only fits the same batch size
                context, batch_size = None, size
            net.provide_external_data(data)
            net.forward_pass(training_pass=False, context=context)
            context = net.get_context()
            # total_loss is the loss summed over time, averaged over the batch
            loss_sum += net.get_loss_values()['total_loss'] * size
            sequences += size
            characters += time_steps * size
        bits = loss_sum / characters / math.log(2)
        return {'total_loss': loss_sum / sequences, 'bits_per_character': bits}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bs.datasets.add_settings_arguments(parser, DEFAULTS, HELP, positive=HELP)
    bs.datasets.add_data_arguments(parser, 'HutterPrize.hdf5')
    add = parser.add_argument
    add('--save', default='hutter_lstm_best.hdf5', help='file for the best network')
    add('--seed', type=int, default=42, help='global random seed')
    add('--gpu', action='store_true', help='train on an NVIDIA GPU (PyCudaHandler)')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    batch_size = args.batch_size or 100
    data = bs.datasets.load_hutter(args.data_dir, streams=batch_size).limit(args.limit)
    print(f'Data: {data.origin}')
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    settings = bs.datasets.choose_settings(args, DEFAULTS, data.name)
    sizes = f'{x_tr.shape[1]} training and {x_va.shape[1]} validation sequences'
    print(f'{sizes} of {x_tr.shape[0]} characters; settings: {settings}')

    def one_hot_batches(x, y):  # in order, so that each batch continues the last
        batches = bs.data_iterators.Minibatches(
            batch_size, shuffle=False, default=x, targets=y
        )
        return bs.data_iterators.OneHot(batches, {'default': data.nr_classes})

    getter_tr, getter_va = one_hot_batches(x_tr, y_tr), one_hot_batches(x_va, y_va)
    network = bs.tools.create_net_from_spec(
        'classification', data.nr_classes, data.nr_classes, f'L{settings["size"]}'
    )
    network.initialize(bs.initializers.Gaussian(0.01))
    if args.gpu:  # needs the pycuda extra; parameters move to the GPU
        network.set_handler(bs.handlers.PyCudaHandler())
    print(f'Handler: {network.handler}')

    lr, clip = settings['learning_rate'], settings['clip_norm']
    stepper = bs.training.MomentumStepper(lr, momentum=0.9, clip_norm=clip)
    trainer = bs.Trainer(stepper)
    trainer.add_hook(bs.hooks.ProgressBar())
    every = settings['valid_every']  # validate every N updates, or after every epoch
    when = {'timescale': 'update' if every else 'epoch', 'interval': every or 1}
    trainer.add_hook(MonitorLossWithContext('valid_getter', name='validation', **when))
    save = {'filename': args.save, 'name': 'best weights', 'criterion': 'min'}
    trainer.add_hook(bs.hooks.SaveBestNetwork('validation.total_loss', **save, **when))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))
    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    losses = trainer.logs['validation']['bits_per_character']
    best = int(np.argmin(losses))
    p = np.bincount(y_va.ravel()) / y_va.size  # unigram entropy of the validation text
    entropy = float(-(p[p > 0] * np.log2(p[p > 0])).sum())
    epochs, updates = trainer.current_epoch_nr, trainer.current_update_nr
    print(
        f'Trained {epochs} epochs ({updates} updates) in {time.time() - start:.0f} s.'
    )
    print(f'Unigram entropy of the validation text: {entropy:.3f} bits per character')
    where = f'best, validation {best}, saved to {args.save}'
    last = f'{losses[-1]:.3f} at the last validation'
    print(f'Validation loss: {losses[best]:.3f} bits per character ({where}); {last}')
    return dict(unigram_entropy=entropy, best_loss=losses[best], final_loss=losses[-1])


if __name__ == '__main__':
    main()
