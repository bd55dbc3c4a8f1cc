"""Arguments refused where they are given, and refused clearly.

Layer arguments accepted at construction build (their normalised values go
into the architecture); feature shapes too large to allocate are refused
naming the layer and the shape; DataParallel's ``comm``, FromGenerator's
``batches`` and evaluate_initializer's ``shape`` are checked when given;
MultiHeadAttention refuses a ``size`` that is no multiple of ``heads`` when
it is made; Pooling2D takes the ``activation_function`` its architectures
accept.
"""

import json
from fractions import Fraction

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import (
    IteratorValidationError,
    LayerValidationError,
    NetworkValidationError,
    StructureValidationError,
    TrainingValidationError,
)

L = bs.layers


def _input(*features):
    return L.Input(out_shapes={'default': ('T', 'B') + features})


def _built(layer, *features):
    return bs.Network.from_layer(_input(*features) >> layer)


# ------------------------------------ layer arguments, normalised values ---


@pytest.mark.parametrize(
    'make, key, expected',
    [
        (lambda v: L.Dropout(v, name='Culprit'), 'drop_prob', 0.5),
        (lambda v: L.BatchNorm(name='Culprit', decay=v), 'decay', 0.5),
        (lambda v: L.BatchNorm(name='Culprit', epsilon=v), 'epsilon', 0.5),
        (lambda v: L.LayerNorm(v, name='Culprit'), 'epsilon', 0.5),
        (lambda v: L.DeltasScaling(v, name='Culprit'), 'factor', 0.5),
        (
            lambda v: L.MultiHeadAttention(4, 2, dropout=v, name='Culprit'),
            'dropout',
            0.5,
        ),
    ],
    ids=['Dropout', 'BatchNorm-decay', 'BatchNorm-epsilon', 'LayerNorm',
         'DeltasScaling', 'MultiHeadAttention'],
)  # fmt: skip
def test_an_accepted_fraction_builds_with_its_float(make, key, expected):
    """Fraction(1, 2) passed the declared check at construction, but the raw
    value was kept and Network.from_layer refused it as not describable."""
    net = _built(make(Fraction(1, 2)), 4)
    stored = net.architecture['Culprit'][key]
    assert type(stored) is float and stored == expected
    # the architecture is plain JSON and builds again
    again = bs.Network.from_architecture(json.loads(json.dumps(net.architecture)))
    assert again.architecture == net.architecture


def test_a_declared_check_still_refuses_at_construction():
    with pytest.raises(LayerValidationError) as info:
        L.Dropout(Fraction(3, 2), name='Culprit')
    message = str(info.value)
    for part in ("Dropout 'Culprit'", 'drop_prob', 'in [0, 1)', 'Fraction(3, 2)'):
        assert part in message, message


@pytest.mark.parametrize(
    'make, entry',
    [
        (lambda: L.Dropout(0, name='D'), {'drop_prob': 0}),
        (lambda: L.Dropout(np.float32(0.25), name='D'), {'drop_prob': 0.25}),
        (lambda: L.FullyConnected((2, 3), name='D'), {'size': [2, 3]}),
        (
            lambda: L.Pooling2D([2, 2], 'avg', (1, 1), name='D'),
            {'kernel_size': [2, 2], 'type': 'avg', 'stride': [1, 1], 'padding': 0},
        ),
        (
            lambda: L.Convolution2D(2, (3, 3), activation='tanh', name='D'),
            {'num_filters': 2, 'kernel_size': [3, 3], 'activation': 'tanh'},
        ),
    ],
    ids=['int', 'numpy-float', 'tuple', 'list-and-tuple', 'str'],
)
def test_ordinary_values_are_described_as_given(make, entry):
    """Describable values stay as given: Dropout(0) is still 0, not 0.0."""
    net = _built(make(), 4, 4, 1)
    stored = {k: net.architecture['D'][k] for k in entry}
    assert json.dumps(stored, sort_keys=True) == json.dumps(entry, sort_keys=True)


def test_a_05_architecture_with_plain_values_still_builds():
    architecture = {
        'Input': {
            '@type': 'Input',
            'out_shapes': {'default': ['T', 'B', 3]},
            '@outgoing_connections': {'default': ['D']},
        },
        'D': {'@type': 'Dropout', 'drop_prob': 0, '@outgoing_connections': {}},
    }
    net = bs.Network.from_architecture(architecture)
    assert net.architecture['D']['drop_prob'] == 0


# ------------------------------------------------- feature size overflow ---


@pytest.mark.parametrize(
    'layer, features, culprit, shape_text',
    [
        (
            lambda: L.FullyConnected((65536,) * 4, name='Culprit'),
            (1,),
            "FullyConnected 'Culprit'",
            '65536, 65536, 65536, 65536',
        ),
        (
            lambda: L.FullyConnected((2**31 - 1,) * 3, name='Culprit'),
            (1,),
            "FullyConnected 'Culprit'",
            '2147483647, 2147483647, 2147483647',
        ),
        (
            lambda: L.Convolution2D(2, (3, 3), padding=2**31 - 1, name='Culprit'),
            (3, 3, 1),
            "Convolution2D 'Culprit'",
            '4294967295, 4294967295, 2',
        ),
        (lambda: L.NoOp(), (65536,) * 4, "Input 'Input'", '65536, 65536, 65536'),
    ],
    ids=['FullyConnected-int64', 'FullyConnected-huge', 'Convolution2D', 'Input'],
)
def test_feature_shapes_too_large_to_allocate_are_refused(
    layer, features, culprit, shape_text
):
    """np.prod wrapped around: bare reshape or 'Maximum allowed dimension'
    ValueErrors, or a layout error with negative sizes."""
    with pytest.raises(StructureValidationError) as info:
        _built(layer(), *features)
    message = str(info.value)
    for part in (culprit, shape_text, 'at most', 'elements', 'Received'):
        assert part in message, message


def test_a_large_feature_shape_that_fits_still_builds():
    net = _built(L.NoOp(name='N'), 2**20, 2**20)
    assert net.layers['N'].out_shapes['default'].feature_size == 2**40


class _ShapeOnly:
    """An array of another library: only its shape and reshape are read."""

    def __init__(self, shape):
        self.shape = shape

    def reshape(self, shape):
        return _ShapeOnly(shape)


def test_flatten_helpers_multiply_exactly():
    """np.prod wrapped around: (2**32, 2**32) gave 0 features."""
    x = _ShapeOnly((1, 1, 2**32, 2**32))
    assert bs.shapes.flatten_time_and_features(x).shape == (1, 2**64)
    assert bs.shapes.flatten_features(x, 1).shape == (1, 2**64)
    assert bs.shapes.flatten_all_but_last(x).shape == (2**32, 2**32)
    y = _ShapeOnly((2**32, 2**32, 3))
    assert bs.shapes.flatten_all_but_last(y).shape == (2**64, 3)


# --------------------------------------------------- DataParallel's comm ---


class _RankOnly:
    def Get_size(self):
        return 1

    def Get_rank(self):
        return 0


@pytest.mark.parametrize(
    'comm',
    ['x', 5, object(), _RankOnly, type('NoRank', (), {'Get_size': lambda s: 1})()],
    ids=['str', 'int', 'object', 'class', 'no-Get_rank'],
)
def test_data_parallel_refuses_a_comm_that_is_no_communicator(comm):
    """comm='x' was accepted; train() then failed with a bare AttributeError."""
    with pytest.raises(TrainingValidationError) as info:
        bs.training.DataParallel(bs.training.SgdStepper(), comm=comm)
    message = str(info.value)
    for part in ('DataParallel', 'comm', 'Get_size', 'Get_rank', 'Received: comm='):
        assert part in message, message


def test_data_parallel_takes_none_or_a_stand_in_communicator():
    comm = _RankOnly()
    stepper = bs.training.DataParallel(bs.training.SgdStepper(), comm=comm)
    assert stepper.comm is comm and stepper.rank == 0 and stepper.size == 1
    assert bs.training.DataParallel(bs.training.SgdStepper(), comm=None)._comm is None


# ------------------------------------------------ FromGenerator's batches ---


def test_from_generator_refuses_a_0d_array():
    """isinstance(np.array(3), Iterable) is True, but iter() refuses it:
    the error came from inside the iterator ('iteration over a 0-d array')."""
    with pytest.raises(IteratorValidationError) as info:
        bs.data_iterators.FromGenerator(np.array(3))
    message = str(info.value)
    for part in ('FromGenerator', 'batches', 'iterable', 'array of shape ()'):
        assert part in message, message


def test_from_generator_check_consumes_no_batch_of_a_generator():
    def batches():
        for i in range(3):
            yield {'default': np.full((1, 2, 1), float(i))}

    it = bs.data_iterators.FromGenerator(batches())
    seen = [float(b['default'][0, 0, 0]) for b in it()]
    assert seen == [0.0, 1.0, 2.0]


def test_from_generator_check_does_not_iterate_what_it_is_given():
    # iter() of a loader with workers starts its processes: the check
    # must not call it
    class Loader:
        iterated = 0

        def __iter__(self):
            Loader.iterated += 1
            return iter([{'default': np.zeros((1, 2, 1))}])

    bs.data_iterators.FromGenerator(Loader(), data_shapes={'default': (1,)})
    assert Loader.iterated == 0


# ----------------------------------------- evaluate_initializer's shape ---


@pytest.mark.parametrize(
    'shape, where',
    [(3, 'shape'), (('x', 2), 'shape[0]'), ((2.7, True), 'shape[0]'),
     ((2, True), 'shape[1]'), ((2, -1), 'shape[1]'), (None, 'shape')],
    ids=['int', 'str-item', 'float-item', 'bool-item', 'negative', 'None'],
)  # fmt: skip
def test_evaluate_initializer_refuses_a_shape_of_no_ints(shape, where):
    """3 gave a bare TypeError, ('x', 2) a bare ValueError, and (2.7, True)
    silently the shape (2, 1)."""
    with pytest.raises(NetworkValidationError) as info:
        bs.initializers.evaluate_initializer(bs.initializers.Gaussian(), shape)
    message = str(info.value)
    for part in ('evaluate_initializer', where, 'an int', f'Received: shape={shape!r}'):
        assert part in message, message


@pytest.mark.parametrize(
    'shape',
    [(2, 3), [2, 3], (np.int64(2), np.int32(3)), np.array([2, 3]), (0, 3)],
    ids=['tuple', 'list', 'numpy-ints', 'array', 'zero'],
)
def test_evaluate_initializer_takes_sequences_of_ints(shape):
    values = bs.initializers.evaluate_initializer(0.5, shape)
    assert values.shape == tuple(int(s) for s in shape)
    assert np.all(values == 0.5)


# ----------------------------------------------- MultiHeadAttention size ---


def test_multi_head_attention_refuses_size_against_heads_when_made():
    with pytest.raises(LayerValidationError) as info:
        L.MultiHeadAttention(5, 2, name='Culprit')
    assert str(info.value) == (
        "MultiHeadAttention 'Culprit': argument 'size' must be a multiple of "
        "'heads' (2). Received: size=5"
    )


def test_multi_head_attention_refuses_it_in_an_architecture_too():
    net = _built(L.MultiHeadAttention(4, 2, name='A'), 3)
    architecture = json.loads(json.dumps(net.architecture))
    architecture['A']['size'] = 5
    with pytest.raises(LayerValidationError) as info:
        bs.Network.from_architecture(architecture)
    assert "MultiHeadAttention 'A'" in str(info.value)
    assert 'Received: size=5' in str(info.value)


# ------------------------------------------- Pooling2D activation_function ---


def test_pooling_2d_accepts_and_ignores_activation_function():
    """The layer reference listed it, the architecture accepted it, but the
    constructor raised Python's 'unexpected keyword argument'."""
    reference = {d['type']: d for d in bs.layers.base_layer.describe_layers()}
    assert 'activation_function' in reference['Pooling2D']['kwargs']
    x = np.random.default_rng(0).normal(size=(1, 2, 4, 4, 1))
    outputs = []
    for extra in ({}, {'activation_function': 'tanh'}):
        net = _built(L.Pooling2D((2, 2), name='P', **extra), 4, 4, 1)
        net.provide_external_data({'default': x})
        net.forward_pass()
        outputs.append(net.get('P.outputs.default').copy())
        assert ('activation_function' in net.architecture['P']) == bool(extra)
    np.testing.assert_array_equal(outputs[0], outputs[1])
