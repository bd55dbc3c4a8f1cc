#!/usr/bin/env python
"""A character-level Transformer on the Hutter Prize data, or offline on CPython's text.

The text of ``hutter_lstm.py`` (``bs.datasets.load_hutter``: ``HutterPrize.hdf5`` of
``data/create_hutter.py`` in ``$BRAINSTORM_DATA_DIR`` or ``--data-dir``, else CPython's
help topics), cut into sequences of 100 characters. Each character id goes through an
Embedding plus a learned PositionEmbedding, then ``--blocks`` pre-norm Transformer
blocks: LayerNorm -> causal MultiHeadAttention -> residual Add, LayerNorm ->
FullyConnected (rectified) -> FullyConnected (linear) -> residual Add. A final
LayerNorm and a softmax predict the next character; Adam. Prints the validation loss
in bits per character next to the unigram entropy of the validation text.
"""

import argparse
import math
import time

import numpy as np

import brainstorm as bs

SETTINGS = ('epochs', 'batch_size', 'learning_rate', 'size', 'heads', 'blocks')
DEFAULTS = {
    'hutter': dict(zip(SETTINGS, (5, 50, 0.001, 256, 8, 4))),
    'python_text': dict(zip(SETTINGS, (2, 32, 0.003, 64, 4, 2))),
}
HELP = {
    'epochs': 'epochs',
    'batch_size': 'sequences per update',
    'learning_rate': 'learning rate of the Adam stepper',
    'size': 'model size (embedding and attention)',
    'heads': 'attention heads',
    'blocks': 'Transformer blocks',
}
L = bs.layers


def residual(x, layers, name):
    """``x + block(x)`` for the block of ``layers`` in a row, summed by an Add layer."""
    add = L.Add(name=name)
    x >> 'inputs_1' - add
    for a, b in zip([x, *layers], [*layers, 'inputs_2' - add]):
        a >> b
    return add


def build_network(classes, max_len, size, heads, blocks):
    """Embedding + positions, ``blocks`` Transformer blocks, a softmax output."""
    inp, out = bs.tools.get_in_out_layers('classification', 1, classes)
    x = inp >> L.Embedding(classes, size) >> L.PositionEmbedding(max_len)
    for i in range(blocks):
        attend = L.MultiHeadAttention(size, heads, True, max_len, name=f'Att{i}')
        x = residual(x, [L.LayerNorm(name=f'Norm{i}a'), attend], f'Res{i}a')
        hidden = L.FullyConnected(2 * size, activation='rel', name=f'FF{i}')
        back = L.FullyConnected(size, activation='linear', name=f'FF{i}out')
        x = residual(x, [L.LayerNorm(name=f'Norm{i}b'), hidden, back], f'Res{i}b')
    network = bs.Network.from_layer(x >> L.LayerNorm(name='NormOut') >> out)
    gaussian = bs.initializers.Gaussian
    zero_biases = {'FF*': {'bias': 0}, 'Att*': {'bias_*': 0}, 'Output_*': {'bias': 0}}
    norms = {'Norm*': {'gamma': 1, 'beta': 0}}
    network.initialize({'default': gaussian(0.02), **norms, **zero_biases})
    return network


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    bs.datasets.add_settings_arguments(parser, DEFAULTS, HELP, positive=HELP)
    bs.datasets.add_data_arguments(parser, 'HutterPrize.hdf5')
    add = parser.add_argument
    add('--seed', type=int, default=42, help='global random seed')
    add('--gpu', action='store_true', help='train on an NVIDIA GPU (PyCudaHandler)')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    bs.global_rnd.set_seed(args.seed)
    data = bs.datasets.load_hutter(args.data_dir).limit(args.limit)
    print(f'Data: {data.origin}')
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    settings = bs.datasets.choose_settings(args, DEFAULTS, data.name)
    steps = x_tr.shape[0]
    sizes = f'{x_tr.shape[1]} training and {x_va.shape[1]} validation sequences'
    print(f'{sizes} of {steps} characters; settings: {settings}')
    batches = bs.data_iterators.Minibatches
    getter_tr = batches(settings['batch_size'], default=x_tr, targets=y_tr)
    getter_va = batches(100, shuffle=False, default=x_va, targets=y_va)
    sizes = [settings[k] for k in ('size', 'heads', 'blocks')]
    network = build_network(data.nr_classes, steps, *sizes)
    if args.gpu:  # needs the pycuda extra; parameters move to the GPU
        network.set_handler(bs.handlers.PyCudaHandler())
    print(f'Handler: {network.handler}')

    trainer = bs.Trainer(
        bs.training.AdamStepper(settings['learning_rate'], clip_norm=1.0)
    )
    trainer.add_hook(bs.hooks.ProgressBar())
    trainer.add_hook(bs.hooks.MonitorLoss('valid_getter', name='validation'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(settings['epochs']))
    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    # total_loss: the loss summed over the time steps, averaged over the sequences
    bits = np.array(trainer.logs['validation']['total_loss']) / steps / math.log(2)
    p = np.bincount(y_va.ravel()) / y_va.size
    entropy = float(-(p[p > 0] * np.log2(p[p > 0])).sum())
    print(f'Trained {trainer.current_epoch_nr} epochs in {time.time() - start:.0f} s.')
    print(f'Unigram entropy of the validation text: {entropy:.3f} bits per character')
    print(
        f'Validation loss: {bits.min():.3f} bits per character (best); '
        f'{bits[-1]:.3f} after the last epoch'
    )
    return {'unigram_entropy': entropy, 'best_loss': bits.min(), 'final_loss': bits[-1]}


if __name__ == '__main__':
    main()
