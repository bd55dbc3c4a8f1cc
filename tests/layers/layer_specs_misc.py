"""Registry entries for the elementwise, merging, masking and loss-like
layers (see test_layer_registry.py), and ``run_layer``, which their own test
modules use to run one layer on given data."""

from types import SimpleNamespace

import numpy as np

from brainstorm.layers.attributes import ACTIVATIONS
from brainstorm.layers.binomial_cross_entropy_layer import (
    BinomialCrossEntropyLayerImpl,
)
from brainstorm.layers.deltas_scaling_layer import DeltasScalingLayerImpl
from brainstorm.layers.elementwise_layer import ElementwiseLayerImpl
from brainstorm.layers.highway_layer import HighwayLayerImpl
from brainstorm.layers.l1_decay_layer import L1DecayLayerImpl
from brainstorm.layers.l2_decay_layer import L2DecayLayerImpl
from brainstorm.layers.mask_layer import MaskLayerImpl
from brainstorm.layers.merge_layer import MergeLayerImpl
from brainstorm.layers.noop_layer import NoOpLayerImpl
from brainstorm.layers.sigmoid_ce_layer import SigmoidCELayerImpl
from brainstorm.layers.squared_difference_layer import (
    SquaredDifferenceLayerImpl,
)
from brainstorm.testing import instantiate_layer, set_up_layer


def run_layer(
    layer_class,
    inputs: dict,
    kwargs=None,
    output_deltas=None,
    prefill_deltas=0.0,
    time_sized=True,
):
    """Run one forward and (if ``output_deltas`` are given) one backward
    pass of a layer under the test handler.

    Args:
        layer_class: the ``...LayerImpl`` class.
        inputs: input name -> array ``(T, B, *features)`` (or ``(B, *F)``
            with ``time_sized=False``).
        kwargs: the layer's arguments.
        output_deltas: output name -> array of the output's shape.
        prefill_deltas: value the input deltas hold before backward.
        time_sized: whether the inputs are time-sized.

    Returns:
        A namespace with the ``layer`` and NumPy copies of ``outputs``,
        ``internals``, ``input_deltas`` and ``output_deltas`` (after the
        passes), each a dict name -> array.
    """
    lead = 2 if time_sized else 1
    in_shapes = {
        n: (('B',) if not time_sized else ()) + v.shape[lead:]
        for n, v in inputs.items()
    }
    layer = instantiate_layer(layer_class, in_shapes, **(kwargs or {}))
    first = next(iter(inputs.values()))
    time_steps, batch_size = first.shape[:2] if time_sized else (1, first.shape[0])
    spec = {'time_steps': time_steps, 'batch_size': batch_size, **inputs}
    buffers, manager = set_up_layer(layer, spec)
    h = manager.handler
    layer.forward_pass(buffers, training_pass=True)
    if output_deltas is not None:
        manager.clear_backward_buffers()
        for name, value in output_deltas.items():
            h.set_from_numpy(buffers.output_deltas[name], value)
        for array in buffers.input_deltas.values():
            h.fill(array, float(prefill_deltas))
        layer.backward_pass(buffers)

    def copies(category):
        return {n: h.get_numpy_copy(a) for n, a in buffers[category].items()}

    return SimpleNamespace(
        layer=layer,
        outputs=copies('outputs'),
        internals=copies('internals'),
        input_deltas=copies('input_deltas'),
        output_deltas=copies('output_deltas'),
    )


def random_data(seed, *shape):
    """Seeded N(0, 1) data of ``shape``."""
    return np.random.RandomState(seed).randn(*shape)


def uniform(low, high, *features):
    """A spec value: uniform random values of shape (T, B, *features)."""

    def make(time_steps, batch_size, rnd):
        return rnd.uniform(low, high, (time_steps, batch_size) + features)

    return make


def away_from_zero(*features):
    """A spec value: values with |x| in [0.1, 2], where |x| and sign(x)
    are smooth enough for finite differences."""

    def make(time_steps, batch_size, rnd):
        shape = (time_steps, batch_size) + features
        return rnd.uniform(0.1, 2.0, shape) * rnd.choice([-1.0, 1.0], shape)

    return make


def _elementwise_entries():
    # rel and el have kinks at 0; the standard N(0, 1) inputs stay far
    # enough from it for eps=1e-5 in these seeded runs
    return [
        dict(
            id=f'Elementwise-{act}',
            layer_class=ElementwiseLayerImpl,
            in_shapes={'default': (3,)},
            kwargs={'activation': act},
        )
        for act in ACTIVATIONS
    ] + [
        dict(
            id='Elementwise-multidim',
            layer_class=ElementwiseLayerImpl,
            in_shapes={'default': (2, 3)},
            kwargs={},
            activation=True,
        )
    ]


LAYER_SPECS = _elementwise_entries() + [
    dict(id='NoOp', layer_class=NoOpLayerImpl, in_shapes={'default': (3,)}),
    dict(
        id='NoOp-multidim', layer_class=NoOpLayerImpl, in_shapes={'default': (2, 2, 3)}
    ),
    # only factor 1 matches finite differences; other factors are checked
    # in test_deltas_scaling_layer.py
    dict(
        id='DeltasScaling',
        layer_class=DeltasScalingLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'factor': 1.0},
    ),
    dict(
        id='DeltasScaling-multidim',
        layer_class=DeltasScalingLayerImpl,
        in_shapes={'default': (2, 3)},
        kwargs={'factor': 1},
    ),
    dict(
        id='Highway',
        layer_class=HighwayLayerImpl,
        in_shapes={'H': (3,), 'T': (3,), 'x': (3,)},
        spec={'T': uniform(0.0, 1.0, 3)},
    ),
    dict(
        id='Highway-multidim',
        layer_class=HighwayLayerImpl,
        in_shapes={'H': (2, 3), 'T': (2, 3), 'x': (2, 3)},
    ),
    dict(
        id='Merge',
        layer_class=MergeLayerImpl,
        in_shapes={'inputs_1': (2,), 'inputs_2': (3,)},
    ),
    dict(
        id='Merge-same-size',
        layer_class=MergeLayerImpl,
        in_shapes={'inputs_1': (3,), 'inputs_2': (3,)},
    ),
    dict(
        id='Merge-multidim',
        layer_class=MergeLayerImpl,
        in_shapes={'inputs_1': (2, 1), 'inputs_2': (2, 3)},
    ),
    dict(
        id='Merge-batch-sized',
        layer_class=MergeLayerImpl,
        in_shapes={'inputs_1': ('B', 4), 'inputs_2': ('B', 1)},
    ),
    dict(
        id='Mask-full',
        layer_class=MaskLayerImpl,
        in_shapes={'default': (3,), 'mask': (3,)},
    ),
    dict(
        id='Mask-per-step',
        layer_class=MaskLayerImpl,
        in_shapes={'default': (3,), 'mask': (1,)},
    ),
    dict(
        id='Mask-multidim-full',
        layer_class=MaskLayerImpl,
        in_shapes={'default': (2, 3), 'mask': (2, 3)},
    ),
    dict(
        id='Mask-multidim-per-row',
        layer_class=MaskLayerImpl,
        in_shapes={'default': (2, 3), 'mask': (2, 1)},
    ),
    dict(
        id='Mask-multidim-per-step',
        layer_class=MaskLayerImpl,
        in_shapes={'default': (2, 3), 'mask': (1,)},
    ),
    dict(
        id='Mask-3d-per-row',
        layer_class=MaskLayerImpl,
        in_shapes={'default': (2, 2, 3), 'mask': (2, 2, 1)},
    ),
    dict(
        id='SigmoidCE',
        layer_class=SigmoidCELayerImpl,
        in_shapes={'default': (3,), 'targets': (3,)},
        spec={'targets': uniform(0.0, 1.0, 3)},
    ),
    dict(
        id='SigmoidCE-multidim',
        layer_class=SigmoidCELayerImpl,
        in_shapes={'default': (2, 3), 'targets': (2, 3)},
        spec={'targets': uniform(0.0, 1.0, 2, 3)},
    ),
    dict(
        id='BinomialCrossEntropy',
        layer_class=BinomialCrossEntropyLayerImpl,
        in_shapes={'default': (3,), 'targets': (3,)},
        spec={'default': uniform(0.1, 0.9, 3), 'targets': uniform(0.0, 1.0, 3)},
    ),
    dict(
        id='BinomialCrossEntropy-one-feature',
        layer_class=BinomialCrossEntropyLayerImpl,
        in_shapes={'default': (1,), 'targets': (1,)},
        spec={'default': uniform(0.1, 0.9, 1), 'targets': uniform(0.0, 1.0, 1)},
    ),
    dict(
        id='BinomialCrossEntropy-multidim',
        layer_class=BinomialCrossEntropyLayerImpl,
        in_shapes={'default': (2, 3), 'targets': (2, 3)},
        spec={'default': uniform(0.1, 0.9, 2, 3), 'targets': uniform(0.0, 1.0, 2, 3)},
    ),
    dict(
        id='SquaredDifference',
        layer_class=SquaredDifferenceLayerImpl,
        in_shapes={'inputs_1': (3,), 'inputs_2': (3,)},
    ),
    dict(
        id='SquaredDifference-multidim',
        layer_class=SquaredDifferenceLayerImpl,
        in_shapes={'inputs_1': (2, 3), 'inputs_2': (2, 3)},
    ),
    dict(
        id='L1Decay',
        layer_class=L1DecayLayerImpl,
        in_shapes={'default': (3,)},
        spec={'default': away_from_zero(3)},
    ),
    dict(
        id='L1Decay-multidim',
        layer_class=L1DecayLayerImpl,
        in_shapes={'default': (2, 3)},
        spec={'default': away_from_zero(2, 3)},
    ),
    dict(id='L2Decay', layer_class=L2DecayLayerImpl, in_shapes={'default': (3,)}),
    dict(
        id='L2Decay-multidim',
        layer_class=L2DecayLayerImpl,
        in_shapes={'default': (2, 3)},
    ),
]
