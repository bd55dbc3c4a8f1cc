"""Registry entries for Convolution2D, Pooling2D, BatchNorm and Dropout
(see test_layer_registry.py)."""

from brainstorm.layers.batch_norm_layer import BatchNormLayerImpl
from brainstorm.layers.convolution_2d_layer import Convolution2DLayerImpl
from brainstorm.layers.dropout_layer import DropoutLayerImpl
from brainstorm.layers.pooling_2d_layer import Pooling2DLayerImpl

LAYER_SPECS = [
    dict(
        id='Convolution2D',
        layer_class=Convolution2DLayerImpl,
        in_shapes={'default': (4, 5, 2)},
        kwargs={'num_filters': 3, 'kernel_size': (2, 3)},
        activation=True,
    ),
    dict(
        id='Convolution2D-pad1-stride2x1',
        layer_class=Convolution2DLayerImpl,
        in_shapes={'default': (5, 4, 2)},
        kwargs={
            'num_filters': 2,
            'kernel_size': (2, 3),
            'padding': 1,
            'stride': (2, 1),
        },
        activation=True,
    ),
    dict(
        id='Convolution2D-pad2-stride1x3',
        layer_class=Convolution2DLayerImpl,
        in_shapes={'default': (3, 5, 1)},
        kwargs={
            'num_filters': 2,
            'kernel_size': (3, 2),
            'padding': 2,
            'stride': (1, 3),
        },
        activation=True,
    ),
    dict(
        id='Pooling2D-max',
        layer_class=Pooling2DLayerImpl,
        in_shapes={'default': (4, 5, 2)},
        kwargs={'kernel_size': (2, 3), 'type': 'max'},
    ),
    dict(
        id='Pooling2D-max-pad1-stride2x1',
        layer_class=Pooling2DLayerImpl,
        in_shapes={'default': (5, 4, 2)},
        kwargs={'kernel_size': (2, 3), 'type': 'max', 'padding': 1, 'stride': (2, 1)},
    ),
    dict(
        id='Pooling2D-avg',
        layer_class=Pooling2DLayerImpl,
        in_shapes={'default': (4, 5, 2)},
        kwargs={'kernel_size': (2, 3), 'type': 'avg'},
    ),
    dict(
        id='Pooling2D-avg-pad1-stride2x1',
        layer_class=Pooling2DLayerImpl,
        in_shapes={'default': (5, 4, 2)},
        kwargs={'kernel_size': (2, 3), 'type': 'avg', 'padding': 1, 'stride': (2, 1)},
    ),
    dict(
        id='Pooling2D-avg-pad2-stride2x2',
        layer_class=Pooling2DLayerImpl,
        in_shapes={'default': (3, 3, 2)},
        kwargs={'kernel_size': (2, 2), 'type': 'avg', 'padding': 2, 'stride': (2, 2)},
    ),
]

# 'same' and 'valid' padding: odd and even kernels, strides above 1 and
# padding that differs by side (even kernels, odd totals)
PADDING_CASES = [
    ('same-k3', (4, 5, 2), (3, 3), (1, 1), 'same'),
    ('same-k2', (4, 5, 2), (2, 2), (1, 1), 'same'),
    ('same-k2x3-stride2', (5, 4, 2), (2, 3), (2, 2), 'same'),
    ('same-k3-stride2x3', (5, 7, 1), (3, 3), (2, 3), 'same'),
    ('valid-k2x3-stride2x1', (5, 4, 2), (2, 3), (2, 1), 'valid'),
    ('tuple-0121', (4, 4, 2), (3, 2), (1, 2), (0, 1, 2, 1)),
]
for name, image, kernel, stride, padding in PADDING_CASES:
    LAYER_SPECS += [
        dict(
            id=f'Convolution2D-{name}',
            layer_class=Convolution2DLayerImpl,
            in_shapes={'default': image},
            kwargs={
                'num_filters': 2,
                'kernel_size': kernel,
                'stride': stride,
                'padding': padding,
            },
            activation=True,
        ),
        dict(
            id=f'Pooling2D-max-{name}',
            layer_class=Pooling2DLayerImpl,
            in_shapes={'default': image},
            kwargs={
                'kernel_size': kernel,
                'type': 'max',
                'stride': stride,
                'padding': padding,
            },
        ),
        dict(
            id=f'Pooling2D-avg-{name}',
            layer_class=Pooling2DLayerImpl,
            in_shapes={'default': image},
            kwargs={
                'kernel_size': kernel,
                'type': 'avg',
                'stride': stride,
                'padding': padding,
            },
        ),
    ]

# Images of at least MIN_CELLS_TO_KEEP_COLUMNS (512) output cells: the
# NumpyHandler keeps the receptive fields in the internal 'columns' (a
# forward pass that fills them, a backward pass that reads them, the
# GEMMs per image). Padding wider than the kernel makes many cells from
# a small image, so the finite differences stay cheap. Pooling2D has no
# such path.
COLUMNS_CONFIGURATIONS = [(1, 2), (2, 1)]
LAYER_SPECS += [
    dict(
        id='Convolution2D-columns',
        layer_class=Convolution2DLayerImpl,
        in_shapes={'default': (10, 26, 1)},  # 16 x 32 = 512 output cells
        kwargs={
            'num_filters': 2,
            'kernel_size': (3, 3),
            'padding': 4,
        },
        configurations=COLUMNS_CONFIGURATIONS,
    ),
    # 8 channels, stride 1: input deltas by correlation, the weight
    # gradient from the kept columns; padding that differs by side
    dict(
        id='Convolution2D-columns-8-channels-tuple-padding',
        layer_class=Convolution2DLayerImpl,
        in_shapes={'default': (3, 4, 8)},  # 16 x 33 output cells
        kwargs={
            'num_filters': 2,
            'kernel_size': (3, 3),
            'padding': (7, 8, 15, 16),
        },
        configurations=COLUMNS_CONFIGURATIONS,
    ),
]

LAYER_SPECS += [
    dict(
        id='BatchNorm',
        layer_class=BatchNormLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={},
    ),
    dict(
        id='BatchNorm-images',
        layer_class=BatchNormLayerImpl,
        in_shapes={'default': (2, 3, 4)},
        kwargs={'decay': 0.5},
    ),
    dict(
        id='Dropout',
        layer_class=DropoutLayerImpl,
        in_shapes={'default': (4,)},
        kwargs={},
    ),
    dict(
        id='Dropout-p0.2-images',
        layer_class=DropoutLayerImpl,
        in_shapes={'default': (2, 3, 2)},
        kwargs={'drop_prob': 0.2},
    ),
    dict(
        id='Dropout-p0',
        layer_class=DropoutLayerImpl,
        in_shapes={'default': (3,)},
        kwargs={'drop_prob': 0.0},
    ),
]
