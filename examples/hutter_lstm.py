#!/usr/bin/env python
"""A character-level LSTM on the Hutter Prize data, or offline on CPython's text.

Brainstorm 0.5's Hutter Prize example: one-hot characters -> one Lstm layer -> softmax
over the next character (``create_net_from_spec``), Gaussian(0.01) weights, momentum
0.9. Data (``bs.datasets.load_hutter``): ``HutterPrize.hdf5`` of
``data/create_hutter.py`` in ``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``) with the
settings of Brainstorm 0.5, otherwise, offline, the English text of CPython's help
topics with smaller settings (run time: docs/quickstart.rst, "Run times"). The text is
laid out in parallel streams so that batch ``k + 1`` continues batch ``k``; the
validation hook below carries the LSTM's state from batch to batch (training starts each
batch from zero). Prints the unigram entropy of the validation text and the validation
loss in bits per character; saves the best network to ``hutter_lstm_best.hdf5``.
"""

import argparse
import math
import time

import numpy as np

import brainstorm as bs

# settings per data set (chosen by the name of the data that was loaded)
DEFAULTS = {'hutter': {'epochs': 10, 'batch_size': 100, 'learning_rate': 0.01,
                       'size': 1000, 'clip_norm': None, 'valid_every': 3000},
            'python_text': {'epochs': 4, 'batch_size': 100, 'learning_rate': 2.0,
                            'size': 128, 'clip_norm': 5.0, 'valid_every': None}}


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
        return {'total_loss': loss_sum / sequences,
                'bits_per_character': loss_sum / characters / math.log(2)}


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--epochs', type=int, help='epochs (Hutter 10, offline 4)')
    parser.add_argument('--size', type=int, help='cells (Hutter 1000, offline 128)')
    parser.add_argument('--batch-size', type=int, help='text streams per batch (100)')
    parser.add_argument('--learning-rate', type=float, help='learning rate of the '
                        'momentum stepper (Hutter 0.01, offline 2.0)')
    parser.add_argument('--clip-norm', type=float, help='clip the global gradient '
                        'norm at this value (Hutter: no clipping, offline 5)')
    parser.add_argument('--valid-every', type=int, help='validate every N updates '
                        '(Hutter 3000; offline: after every epoch)')
    bs.datasets.add_data_arguments(parser, 'HutterPrize.hdf5')
    parser.add_argument('--save', default='hutter_lstm_best.hdf5',
                        help='file for the best network')
    parser.add_argument('--seed', type=int, default=42, help='global random seed')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    batch_size = args.batch_size or 100
    data = bs.datasets.load_hutter(args.data_dir, streams=batch_size).limit(args.limit)
    print(f'Data: {data.origin}')
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    settings = {key: value if getattr(args, key) is None else getattr(args, key)
                for key, value in DEFAULTS[data.name].items()}
    print(f'{x_tr.shape[1]} training and {x_va.shape[1]} validation sequences of '
          f'{x_tr.shape[0]} characters; settings: {settings}')

    def one_hot_batches(x, y):  # in order, so that each batch continues the last
        batches = bs.data_iterators.Minibatches(batch_size, shuffle=False, default=x,
                                                targets=y)
        return bs.data_iterators.OneHot(batches, {'default': data.nr_classes})

    getter_tr, getter_va = one_hot_batches(x_tr, y_tr), one_hot_batches(x_va, y_va)
    network = bs.tools.create_net_from_spec(
        'classification', data.nr_classes, data.nr_classes, f'L{settings["size"]}')
    network.initialize(bs.initializers.Gaussian(0.01))

    trainer = bs.Trainer(bs.training.MomentumStepper(
        learning_rate=settings['learning_rate'], momentum=0.9,
        clip_norm=settings['clip_norm']))
    trainer.add_hook(bs.hooks.ProgressBar())
    every = settings['valid_every']  # validate every N updates, or after every epoch
    when = {'timescale': 'update' if every else 'epoch', 'interval': every or 1}
    trainer.add_hook(MonitorLossWithContext('valid_getter', name='validation', **when))
    trainer.add_hook(bs.hooks.SaveBestNetwork(
        'validation.total_loss', filename=args.save, name='best weights',
        criterion='min', **when))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))
    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    losses = trainer.logs['validation']['bits_per_character']
    best = int(np.argmin(losses))
    counts = np.bincount(y_va.ravel())  # the unigram entropy of the validation text
    p = counts[counts > 0] / counts.sum()
    entropy = float(-(p * np.log2(p)).sum())
    print(f'Trained {trainer.current_epoch_nr} epochs ({trainer.current_update_nr} '
          f'updates) in {time.time() - start:.0f} s.')
    print(f'Unigram entropy of the validation text: {entropy:.3f} bits per character')
    print(f'Validation loss: {losses[best]:.3f} bits per character (best, validation '
          f'{best}, saved to {args.save}); {losses[-1]:.3f} at the last validation')
    return {'unigram_entropy': entropy, 'best_loss': losses[best],
            'final_loss': losses[-1]}


if __name__ == '__main__':
    main()
