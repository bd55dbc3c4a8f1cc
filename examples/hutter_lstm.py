#!/usr/bin/env python
"""A character-level LSTM language model on the Hutter Prize data, or
offline on English text shipped with CPython.

The network is Brainstorm 0.5's Hutter Prize example, built with
``create_net_from_spec``: one-hot characters -> one Lstm layer -> softmax
over the next character, weights from Gaussian(0.01), trained with momentum
0.9 on sequences of 100 characters read in order.

Data:

* ``HutterPrize.hdf5`` in ``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``),
  written by ``data/create_hutter.py``: the first 100M bytes of English
  Wikipedia as 205 byte classes. Settings of Brainstorm 0.5: ``L1000`` (an
  Lstm of 1000 cells), learning rate 0.01, batches of 100 sequences,
  validation every 3000 updates.
* Otherwise, offline: the English text of CPython's help topics
  (``pydoc_data.topics``, about 460000 characters), its characters as the
  vocabulary, the first 90% for training and the rest for validation. An
  Lstm of 1000 cells would take hours on a CPU, so the default is 128 cells,
  a learning rate of 2.0 with the gradient norm clipped at 5, validation
  after every epoch and 4 epochs (run time: see the table "Run times of
  the examples" in docs/quickstart.rst).

Both data sets are laid out as ``batch_size`` parallel streams of text, cut
into sequences of 100 characters such that batch ``k + 1`` continues batch
``k``. The validation hook below carries the LSTM's state (the network's
context) from each batch to the next, so it reads every stream as one long
text; training starts every batch from a zero state, because the steppers
run their forward pass without a context.

The script prints the unigram entropy of the validation text (the loss of
the best model that ignores all context) and the validation loss, both in
bits per character. The best network (lowest validation loss) is saved to
``hutter_lstm_best.hdf5``.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import h5py
import numpy as np

import brainstorm as bs

SEQUENCE_LENGTH = 100
DEFAULTS = {
    'hutter': {'epochs': 10, 'batch_size': 100, 'learning_rate': 0.01,
               'size': 1000, 'clip_norm': None, 'valid_every': 3000},
    'topics': {'epochs': 4, 'batch_size': 100, 'learning_rate': 2.0,
               'size': 128, 'clip_norm': 5.0, 'valid_every': None},
}


def load_hutter(filename: str):
    """``(vocabulary size, training, validation)`` from HutterPrize.hdf5;
    each part is ``(inputs, targets)`` of shape ``(100, N, 1)``."""
    with h5py.File(filename, 'r') as f:
        vocabulary_size = len(f.attrs['unique'])
        split = f['split']
        return (vocabulary_size,
                (split['training/default'][()],
                 split['training/targets'][()]),
                (split['validation/default'][()],
                 split['validation/targets'][()]))


def to_streams(ids: np.ndarray, batch_size: int):
    """Cut ``ids`` into ``batch_size`` streams of sequences so that batch
    ``k + 1`` continues batch ``k``; targets are the next characters.

    Returns:
        ``(inputs, targets)`` of shape ``(SEQUENCE_LENGTH, N, 1)``, where
        sample ``k * batch_size + b`` is piece ``k`` of stream ``b``.
    """
    pieces = (len(ids) - 1) // (batch_size * SEQUENCE_LENGTH)
    length = pieces * SEQUENCE_LENGTH

    def arrange(values):
        values = values[:batch_size * length].reshape(
            (batch_size, pieces, SEQUENCE_LENGTH))
        return values.transpose(2, 1, 0).reshape(
            (SEQUENCE_LENGTH, pieces * batch_size, 1))

    return arrange(ids), arrange(ids[1:])


def load_topics(batch_size: int):
    """``(vocabulary size, training, validation)`` from the help topics of
    CPython's pydoc_data, in the layout of HutterPrize.hdf5."""
    from pydoc_data.topics import topics
    text = ''.join(topics[key] for key in sorted(topics))
    vocabulary = sorted(set(text))
    lookup = {char: i for i, char in enumerate(vocabulary)}
    ids = np.array([lookup[char] for char in text], dtype=np.uint8)
    cut = int(0.9 * len(ids))
    print(f'{len(text)} characters, {len(vocabulary)} distinct; '
          f'{cut} for training, {len(text) - cut} for validation.')
    return (len(vocabulary), to_streams(ids[:cut], batch_size),
            to_streams(ids[cut:], batch_size))


def get_data(data_dir: str | None, batch_size: int):
    """``(name, vocabulary size, training, validation)``; says which data
    it uses."""
    filename = os.path.join(data_dir, 'HutterPrize.hdf5') if data_dir \
        else None
    if filename and os.path.exists(filename):
        print(f'Data: Hutter Prize from {filename}')
        return ('hutter',) + load_hutter(filename)
    where = f'in {data_dir}' if data_dir else '($BRAINSTORM_DATA_DIR not set)'
    print(f'Data: HutterPrize.hdf5 not found {where}; using the English '
          "text of CPython's help topics (pydoc_data.topics) instead (see "
          'data/create_hutter.py for the Hutter Prize data).')
    return ('topics',) + load_topics(batch_size)


def unigram_entropy(targets: np.ndarray) -> float:
    """Entropy in bits of the character frequencies of ``targets``."""
    counts = np.bincount(targets.ravel())
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log2(p)).sum())


class MonitorLossWithContext(bs.hooks.MonitorLoss):
    """Like ``MonitorLoss`` (same arguments), but each batch continues where
    the previous one ended: the network's context is carried from batch to
    batch.

    Logs ``total_loss`` (the mean loss per sequence, as ``MonitorLoss``)
    and ``bits_per_character``.
    """

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
    parser = argparse.ArgumentParser(
        description='Train a character-level LSTM on the Hutter Prize data '
                    "(or, offline, on CPython's help topics).")
    parser.add_argument('--epochs', type=int,
                        help='epochs to train (Hutter 10, offline 4)')
    parser.add_argument('--size', type=int,
                        help='LSTM cells (Hutter 1000, offline 128)')
    parser.add_argument('--batch-size', type=int,
                        help='parallel text streams per batch (100)')
    parser.add_argument('--learning-rate', type=float,
                        help='learning rate of the momentum stepper '
                             '(Hutter 0.01, offline 2.0)')
    parser.add_argument('--clip-norm', type=float,
                        help='clip the global gradient norm at this value '
                             '(Hutter: no clipping, offline 5)')
    parser.add_argument('--valid-every', type=int,
                        help='validate every N updates (Hutter 3000; '
                             'offline: after every epoch)')
    parser.add_argument('--limit', type=int,
                        help='use at most this many training and validation '
                             'sequences (for quick runs)')
    parser.add_argument('--data-dir',
                        default=os.environ.get('BRAINSTORM_DATA_DIR'),
                        help='folder holding HutterPrize.hdf5 (default: '
                             '$BRAINSTORM_DATA_DIR)')
    parser.add_argument('--save', default='hutter_lstm_best.hdf5',
                        help='file for the best network')
    parser.add_argument('--seed', type=int, default=42,
                        help='seed of the global random state')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    batch_size = args.batch_size or 100
    data_name, vocabulary_size, (x_tr, y_tr), (x_va, y_va) = get_data(
        args.data_dir, batch_size)
    if args.limit:
        x_tr, y_tr = x_tr[:, :args.limit], y_tr[:, :args.limit]
        x_va, y_va = x_va[:, :args.limit], y_va[:, :args.limit]
    settings = dict(DEFAULTS[data_name])
    for key in settings:
        if getattr(args, key) is not None:
            settings[key] = getattr(args, key)
    print(f'{x_tr.shape[1]} training and {x_va.shape[1]} validation '
          f'sequences of {x_tr.shape[0]} characters; settings: {settings}')

    getter_tr = bs.data_iterators.OneHot(
        bs.data_iterators.Minibatches(batch_size, shuffle=False,
                                      default=x_tr, targets=y_tr),
        {'default': vocabulary_size})
    getter_va = bs.data_iterators.OneHot(
        bs.data_iterators.Minibatches(batch_size, shuffle=False,
                                      default=x_va, targets=y_va),
        {'default': vocabulary_size})

    network = bs.tools.create_net_from_spec(
        'classification', vocabulary_size, vocabulary_size,
        f'L{settings["size"]}')
    network.initialize(bs.initializers.Gaussian(0.01))

    trainer = bs.Trainer(bs.training.MomentumStepper(
        learning_rate=settings['learning_rate'], momentum=0.9,
        clip_norm=settings['clip_norm']))
    trainer.add_hook(bs.hooks.ProgressBar())
    if settings['valid_every']:
        when = {'timescale': 'update', 'interval': settings['valid_every']}
    else:
        when = {'timescale': 'epoch', 'interval': 1}
    trainer.add_hook(MonitorLossWithContext('valid_getter', name='validation',
                                            **when))
    trainer.add_hook(bs.hooks.SaveBestNetwork('validation.total_loss',
                                              filename=args.save,
                                              name='best weights',
                                              criterion='min', **when))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))

    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    losses = trainer.logs['validation']['bits_per_character']
    best = int(np.argmin(losses))
    entropy = unigram_entropy(y_va)
    print(f'Trained {trainer.current_epoch_nr} epochs '
          f'({trainer.current_update_nr} updates) in '
          f'{time.time() - start:.0f} s.')
    print(f'Unigram entropy of the validation text: {entropy:.3f} bits per '
          'character')
    print(f'Validation loss: {losses[best]:.3f} bits per character (best, '
          f'validation {best}, saved to {args.save}); {losses[-1]:.3f} at '
          'the last validation')
    return {'unigram_entropy': entropy, 'best_loss': losses[best],
            'final_loss': losses[-1]}


if __name__ == '__main__':
    main()
