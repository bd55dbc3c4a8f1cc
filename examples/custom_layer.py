#!/usr/bin/env python
"""Write a layer, check it with brainstorm.testing, and train with it.

The layer is ``Square``: ``y = x**2 / 2`` elementwise, so ``dx += x * dy``.
A layer is a constructor function returning a ``ConstructionWrapper`` plus a
``Layer`` subclass whose name ends in ``LayerImpl``; its ``setup`` declares
the shapes of its outputs, parameters and internals, and its passes compute
with the operations of ``self.handler`` only.

The layer first goes through ``run_layer_tests`` for every standard test
configuration (finite-difference deltas, accumulation into input deltas,
independence from stale buffers). Then it trains in a network
``FullyConnected(500, linear) -> Square -> softmax output`` until the
validation accuracy stops improving for 10 epochs (or ``--epochs``).

Data: ``MNIST.hdf5`` from ``$BRAINSTORM_DATA_DIR`` (or ``--data-dir``; see
``data/create_mnist.py``), otherwise, offline, the 1797 handwritten digits of
8x8 pixels bundled with scikit-learn, scaled to [0, 1] and split with a
fixed seed into 1437 training and 360 validation images.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import OrderedDict

import h5py
import numpy as np

import brainstorm as bs
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,
)
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.testing import (
    get_test_configurations,
    instantiate_layer,
    run_layer_tests,
)

# ---- the layer ----------------------------------------------------------

def Square(name: str | None = None) -> ConstructionWrapper:
    """Half the elementwise square of the input: ``y = x**2 / 2``.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output of the same
        shape.
    """
    return ConstructionWrapper.create(SquareLayerImpl, name=name)


class SquareLayerImpl(Layer):
    """Implementation of :func:`Square`."""

    expected_inputs = {'default': StructureTemplate('T', 'B', '...')}

    def setup(self, kwargs, in_shapes):
        features = in_shapes['default'].feature_shape
        outputs = OrderedDict(default=BufferStructure('T', 'B', *features))
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        _h = self.handler
        x, y = buffers.inputs.default, buffers.outputs.default

        _h.mult_tt(x, x, y)
        _h.mult_st(0.5, y, y)

    def backward_pass(self, buffers):
        _h = self.handler
        x = buffers.inputs.default
        dx, dy = buffers.input_deltas.default, buffers.output_deltas.default

        # add, never assign: dx may already hold deltas from other layers
        _h.mult_add_tt(x, dy, dx)


def check_layer() -> int:
    """Run the standard layer tests on Square; return how many passed."""
    passed = 0
    for in_shape in [(3,), (2, 3, 2)]:
        for spec in get_test_configurations():
            layer = instantiate_layer(SquareLayerImpl, {'default': in_shape})
            run_layer_tests(layer, spec)  # raises LayerTestError on failure
            passed += 1
    return passed


# ---- the data -----------------------------------------------------------

def load_data(data_dir: str | None):
    """Training and validation images ``(1, N, H, W, 1)`` and labels."""
    filename = os.path.join(data_dir, 'MNIST.hdf5') if data_dir else None
    if filename and os.path.exists(filename):
        print(f'Data: MNIST from {filename}')
        with h5py.File(filename, 'r') as f:
            split = f['normalized_split']
            return ((split['training/default'][()],
                     split['training/targets'][()]),
                    (split['validation/default'][()],
                     split['validation/targets'][()]))
    where = f'in {data_dir}' if data_dir else '($BRAINSTORM_DATA_DIR not set)'
    print(f'Data: MNIST.hdf5 not found {where}; using the 8x8 handwritten '
          'digits bundled with scikit-learn instead.')
    from sklearn.datasets import load_digits
    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32).reshape((1, -1, 8, 8, 1))
    y = digits.target.astype(np.uint8).reshape((1, -1, 1))
    x, y = bs.tools.shuffle_data(x, y, seed=0)
    training, validation = bs.tools.split(x, y, ratios=(1437, 360))
    return tuple(training), tuple(validation)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Test a custom Square layer and train a network with it.')
    parser.add_argument('--epochs', type=int, default=100,
                        help='maximal number of epochs (training also stops '
                             'when the validation accuracy has not improved '
                             'for --patience epochs)')
    parser.add_argument('--patience', type=int, default=10,
                        help='epochs without improvement before stopping')
    parser.add_argument('--batch-size', type=int, default=20,
                        help='samples per update')
    parser.add_argument('--learning-rate', type=float, default=0.1,
                        help='learning rate of the momentum stepper')
    parser.add_argument('--limit', type=int,
                        help='use at most this many training and validation '
                             'samples (for quick runs)')
    parser.add_argument('--data-dir',
                        default=os.environ.get('BRAINSTORM_DATA_DIR'),
                        help='folder holding MNIST.hdf5 (default: '
                             '$BRAINSTORM_DATA_DIR)')
    parser.add_argument('--seed', type=int, default=42,
                        help='seed of the global random state')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    print(f'Square passed run_layer_tests in {check_layer()} '
          'configurations.')

    bs.global_rnd.set_seed(args.seed)
    (x_tr, y_tr), (x_va, y_va) = load_data(args.data_dir)
    if args.limit:
        x_tr, y_tr = x_tr[:, :args.limit], y_tr[:, :args.limit]
        x_va, y_va = x_va[:, :args.limit], y_va[:, :args.limit]
    getter_tr = bs.data_iterators.Minibatches(args.batch_size, default=x_tr,
                                              targets=y_tr)
    getter_va = bs.data_iterators.Minibatches(100, default=x_va,
                                              targets=y_va)

    inp, out = bs.tools.get_in_out_layers('classification', x_tr.shape[2:],
                                          10)
    network = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(500, activation='linear', name='FC')
        >> Square(name='Square')
        >> out)
    network.initialize(bs.initializers.Gaussian(0.05))

    trainer = bs.Trainer(bs.training.MomentumStepper(
        learning_rate=args.learning_rate, momentum=0.9))
    trainer.add_hook(bs.hooks.ProgressBar())
    scorers = [bs.scorers.Accuracy(out_name='Output.outputs.predictions')]
    trainer.add_hook(bs.hooks.MonitorScores('valid_getter', scorers,
                                            name='validation'))
    trainer.add_hook(bs.hooks.EarlyStopper('validation.Accuracy',
                                           patience=args.patience,
                                           criterion='max'))
    trainer.add_hook(bs.hooks.StopAfterEpoch(args.epochs))

    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    accuracies = trainer.logs['validation']['Accuracy']
    best = int(np.argmax(accuracies))
    print(f'Trained {trainer.current_epoch_nr} epochs in '
          f'{time.time() - start:.0f} s.')
    print(f'Validation accuracy: {accuracies[best]:.2%} (best, epoch '
          f'{best}); {accuracies[-1]:.2%} after the last epoch')
    return {'best_accuracy': accuracies[best],
            'final_accuracy': accuracies[-1]}


if __name__ == '__main__':
    main()
