#!/usr/bin/env python
"""Write a layer, check it with brainstorm.testing, and train with it.

``Square(name)`` returns a ``ConstructionWrapper`` of ``SquareLayerImpl``, which
computes ``y = x**2 / 2`` elementwise (so ``dx += x * dy``) with ``self.handler``'s
operations only; docs/custom_layer.rst explains each part. Square first passes
``run_layer_tests`` in every standard configuration (finite-difference deltas,
accumulation into input deltas, independence from stale buffers), then trains in
``FullyConnected(500, linear) -> Square -> softmax output`` until the validation
accuracy stops improving for 10 epochs, on MNIST or scikit-learn's digits.
"""

import argparse
import time
from collections import OrderedDict

import numpy as np

import brainstorm as bs
from brainstorm import testing
from brainstorm.layers.authoring import (
    BufferStructure,
    ConstructionWrapper,
    Layer,
    StructureTemplate,
)


def Square(name: str | None = None) -> ConstructionWrapper:
    """Half the elementwise square of the input: ``y = x**2 / 2``.

    Shapes:
        default input ``('T', 'B', ...)`` -> default output of the same shape.
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
        x, dy = buffers.inputs.default, buffers.output_deltas.default
        dx = buffers.input_deltas.default
        # add, never assign: dx may already hold deltas from other layers
        self.handler.mult_add_tt(x, dy, dx)


def check_layer() -> int:
    """Run the standard layer tests on Square; return how many passed."""
    passed = 0
    for in_shape in [(3,), (2, 3, 2)]:
        for spec in testing.get_test_configurations():
            layer = testing.instantiate_layer(SquareLayerImpl, {'default': in_shape})
            testing.run_layer_tests(layer, spec)  # raises LayerTestError on failure
            passed += 1
    return passed


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add = parser.add_argument
    add('--epochs', type=int, default=100, help='maximal number of epochs')
    add('--patience', type=int, default=10, help='stop after N epochs without progress')
    add('--batch-size', type=int, default=20, help='samples per update')
    add('--learning-rate', type=float, default=0.1, help='learning rate of the stepper')
    bs.datasets.add_data_arguments(parser, 'MNIST.hdf5')
    add('--seed', type=int, default=42, help='global random seed')
    add('--gpu', action='store_true', help='train on an NVIDIA GPU (PyCudaHandler)')
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = parse_args(argv)
    print(f'Square passed run_layer_tests in {check_layer()} configurations.')
    bs.global_rnd.set_seed(args.seed)
    data = bs.datasets.load_mnist(args.data_dir).limit(args.limit)
    print(f'Data: {data.origin}')
    (x_tr, y_tr), (x_va, y_va) = data.training, data.validation
    batches = bs.data_iterators.Minibatches
    getter_tr = batches(args.batch_size, default=x_tr, targets=y_tr)
    getter_va = batches(100, default=x_va, targets=y_va)

    inp, out = bs.tools.get_in_out_layers(
        'classification', x_tr.shape[2:], data.nr_classes
    )
    hidden = bs.layers.FullyConnected(500, activation='linear', name='FC')
    network = bs.Network.from_layer(inp >> hidden >> Square(name='Square') >> out)
    network.initialize(bs.initializers.Gaussian(0.05))
    if args.gpu:  # needs the pycuda extra; parameters move to the GPU
        network.set_handler(bs.handlers.PyCudaHandler())
    print(f'Handler: {network.handler}')

    trainer = bs.Trainer(bs.training.MomentumStepper(args.learning_rate, momentum=0.9))
    trainer.add_hook(bs.hooks.ProgressBar())
    scorers = [bs.scorers.Accuracy(out_name='Output.outputs.predictions')]
    trainer.add_hook(bs.hooks.MonitorScores('valid_getter', scorers, name='validation'))
    early = {'criterion': 'max', 'patience': args.patience}
    trainer.add_hook(bs.hooks.EarlyStopper('validation.Accuracy', **early))
    trainer.add_hook(bs.hooks.StopAfterEpoch(args.epochs))

    start = time.time()
    trainer.train(network, getter_tr, valid_getter=getter_va)
    accuracies = trainer.logs['validation']['Accuracy']
    best = int(np.argmax(accuracies))
    print(f'Trained {trainer.current_epoch_nr} epochs in {time.time() - start:.0f} s.')
    last = f'{accuracies[-1]:.2%} after the last epoch'
    print(f'Validation accuracy: {accuracies[best]:.2%} (best, epoch {best}); {last}')
    return {'best_accuracy': accuracies[best], 'final_accuracy': accuracies[-1]}


if __name__ == '__main__':
    main()
