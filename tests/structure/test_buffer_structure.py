"""Tests for StructureTemplate, BufferStructure and their combination."""

import json

import numpy as np
import pytest

from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,
    combine_buffer_structures,
)
from brainstorm.utils import StructureValidationError, ValidationError

# ------------------------------------------------------- StructureTemplate ---


@pytest.mark.parametrize(
    'shape',
    [
        ('T', 'B', 3),
        ('T', 'B', 3, 4),
        ('B', 5),
        (5,),
        (2, 3),
        ('T', 'B', 'F'),
        ('T', 'B', 'F', 'F'),
        ('B', 'F'),
        ('F',),
        ('T', 'B', '...'),
        ('B', '...'),
        ('...',),
    ],
)
def test_valid_templates(shape):
    t = StructureTemplate(*shape)
    assert t.shape == shape
    assert t.context_size == 0
    assert t.is_backward_only is False


@pytest.mark.parametrize(
    'shape',
    [
        (),
        ('B', 'T', 3),  # 'T' only as leading ('T', 'B')
        ('T', 3),
        (3, 'T', 'B'),
        ('T', 'B', 3, 'B'),
        (3, 'B'),  # lone 'B' must be first
        ('T', 'B', '...', 3),  # '...' must be the only feature entry
        ('T', 'B', 3, '...'),
        ('...', '...'),
        ('T', 'B', 'F', 3),  # with 'F' all features 'F'
        ('B', 3, 'F'),
        ('T', 'B', 'X'),  # unknown entries
        ('T', 'B', 2.5),
        ('T', 'B', None),
        ('T', 'B', True),
        ('T', 'B', -1),
    ],
)
def test_invalid_templates(shape):
    with pytest.raises(StructureValidationError) as info:
        StructureTemplate(*shape)
    assert isinstance(info.value, ValidationError)


def test_template_context_size():
    t = StructureTemplate('T', 'B', 'F', context_size=1)
    assert t.context_size == 1
    for bad in (-1, 1.5, '1', None):
        with pytest.raises(StructureValidationError, match='context_size'):
            StructureTemplate('T', 'B', 'F', context_size=bad)
    for shape in (('B', 3), (3,), ('...',)):
        with pytest.raises(StructureValidationError, match='context_size'):
            StructureTemplate(*shape, context_size=1)


def test_template_unknown_kwarg_is_type_error():
    with pytest.raises(TypeError):
        StructureTemplate('T', 'B', 3, foo=1)


def test_template_attributes():
    t = StructureTemplate('T', 'B', 'F', 'F', is_backward_only=True)
    assert t.first_feature_dim == 2
    assert t.feature_shape == ('F', 'F')
    assert t.is_backward_only is True
    assert StructureTemplate('B', 3).first_feature_dim == 1
    assert StructureTemplate(3, 4).first_feature_dim == 0
    assert StructureTemplate(3, 4).feature_shape == (3, 4)


@pytest.mark.parametrize(
    'template, structure, expected',
    [
        (('T', 'B', 3), ('T', 'B', 3), True),
        (('T', 'B', 3), ('T', 'B', 4), False),
        (('T', 'B', 3), ('B', 3), False),
        (('T', 'B', 3), ('T', 'B', 3, 1), False),
        (('T', 'B', 'F'), ('T', 'B', 17), True),
        (('T', 'B', 'F'), ('T', 'B', 2, 3), False),
        (('T', 'B', 'F', 'F'), ('T', 'B', 2, 3), True),
        (('T', 'B', '...'), ('T', 'B', 2), True),
        (('T', 'B', '...'), ('T', 'B', 2, 3, 4), True),
        (('T', 'B', '...'), ('B', 2), False),
        (('T', 'B', '...'), (2, 3), False),
        (('B', '...'), ('B', 2, 3), True),
        (('B', 'F'), ('T', 'B', 2), False),
        (('F',), (7,), True),
        (('F',), (7, 2), False),
        ((7, 2), (7, 2), True),
        ((7, 2), (2, 7), False),
        (('...',), ('T', 'B', 1), True),
        (('...',), ('B', 1), True),
        (('...',), (4, 5), True),
    ],
)
def test_template_matches(template, structure, expected):
    assert StructureTemplate(*template).matches(BufferStructure(*structure)) is expected


def test_template_matches_ignores_context_size():
    t = StructureTemplate('T', 'B', 'F')
    assert t.matches(BufferStructure('T', 'B', 3, context_size=1))


# --------------------------------------------------------- BufferStructure ---


@pytest.mark.parametrize(
    'shape, buffer_type',
    [
        (('T', 'B', 3), 2),
        (('T', 'B', 3, 4), 2),
        (('B', 5), 1),
        ((5,), 0),
        ((2, 3), 0),
        ((0,), 0),
    ],
)
def test_buffer_types(shape, buffer_type):
    s = BufferStructure(*shape)
    assert s.buffer_type == buffer_type
    assert s.first_feature_dim == buffer_type
    assert s.scales_with_time == (buffer_type == 2)
    assert s.scales_with_batch_size == (buffer_type >= 1)
    assert s.scaling_shape == shape[:buffer_type]
    assert s.feature_shape == shape[buffer_type:]
    assert s.nr_dims == len(shape)


@pytest.mark.parametrize(
    'shape',
    [
        (),
        ('T', 'B'),
        ('B',),
        ('T', 'B', 'F'),
        ('T', 'B', '...'),
        ('B', 'T', 3),
        ('T', 3),
        (3, 'B'),
        ('T', 'B', -1),
        ('T', 'B', 2.0),
        ('T', 'B', True),
        ('T', 'B', None),
        ('T', 'B', '3'),
    ],
)
def test_invalid_buffer_structures(shape):
    with pytest.raises(StructureValidationError):
        BufferStructure(*shape)


def test_buffer_structure_context_size_only_with_time():
    assert BufferStructure('T', 'B', 3, context_size=2).context_size == 2
    with pytest.raises(StructureValidationError, match='context_size'):
        BufferStructure('B', 3, context_size=1)
    with pytest.raises(StructureValidationError, match='context_size'):
        BufferStructure(3, context_size=1)
    with pytest.raises(StructureValidationError, match='context_size'):
        BufferStructure('T', 'B', 3, context_size=-1)


def test_buffer_structure_unknown_kwarg_is_type_error():
    with pytest.raises(TypeError):
        BufferStructure('T', 'B', 3, dtype='float32')


def test_numpy_ints_become_python_ints():
    s = BufferStructure('T', 'B', np.int64(3), np.int32(2))
    assert s.shape == ('T', 'B', 3, 2)
    assert all(type(x) is int for x in s.feature_shape)
    json.dumps(s.to_json(0))


def test_feature_size():
    assert BufferStructure('T', 'B', 2, 3, 4).feature_size == 24
    assert BufferStructure('B', 5).feature_size == 5
    assert BufferStructure(0).feature_size == 0


def test_get_shape():
    assert BufferStructure('T', 'B', 2, 3).get_shape(5, 4) == (5, 4, 2, 3)
    assert BufferStructure('T', 'B', 2, context_size=1).get_shape(5, 4) == (6, 4, 2)
    assert BufferStructure('B', 3).get_shape(5, 4) == (4, 3)
    assert BufferStructure(7, 2).get_shape(5, 4) == (7, 2)


def test_equality_and_hash_use_shape_only():
    a = BufferStructure('T', 'B', 3)
    b = BufferStructure('T', 'B', 3, context_size=1, is_backward_only=True)
    assert a == b
    assert hash(a) == hash(b)
    assert len({a, b}) == 1
    assert a != BufferStructure('T', 'B', 4)
    assert a != BufferStructure('B', 3)
    assert a != ('T', 'B', 3)


def test_to_json():
    assert BufferStructure('T', 'B', 3).to_json(4) == {
        '@type': 'array',
        '@index': 4,
        '@shape': ('T', 'B', 3),
    }
    node = BufferStructure('T', 'B', 3, context_size=1, is_backward_only=True).to_json(
        0
    )
    assert node == {
        '@type': 'array',
        '@index': 0,
        '@shape': ('T', 'B', 3),
        '@context_size': 1,
        '@is_backward_only': True,
    }


@pytest.mark.parametrize(
    'structure',
    [
        BufferStructure('T', 'B', 3, 2),
        BufferStructure('T', 'B', 3, context_size=2),
        BufferStructure('B', 4, is_backward_only=True),
        BufferStructure(5, 6),
    ],
)
def test_from_layout_round_trip(structure):
    node = json.loads(json.dumps(structure.to_json(1)))
    recreated = BufferStructure.from_layout(node)
    assert recreated == structure
    assert recreated.context_size == structure.context_size
    assert recreated.is_backward_only == structure.is_backward_only
    assert recreated.buffer_type == structure.buffer_type


def test_repr_mentions_shape():
    assert "'T', 'B', 3" in repr(BufferStructure('T', 'B', 3))
    assert 'context_size=1' in repr(BufferStructure('T', 'B', 3, context_size=1))
    assert '3' in repr(StructureTemplate('T', 'B', 3))


# ---------------------------------------------------------------- combine ---


def test_combine_concatenates_last_axis():
    combined = combine_buffer_structures(
        [BufferStructure('T', 'B', 2, 3), BufferStructure('T', 'B', 2, 5)]
    )
    assert combined == BufferStructure('T', 'B', 2, 8)
    assert combine_buffer_structures([BufferStructure('B', 1)] * 3) == BufferStructure(
        'B', 3
    )
    assert combine_buffer_structures(
        [BufferStructure(4, 2), BufferStructure(4, 1)]
    ) == BufferStructure(4, 3)


def test_combine_one_and_generators():
    single = BufferStructure('T', 'B', 3, context_size=1)
    assert combine_buffer_structures(iter([single])) == single


def test_combine_empty():
    assert combine_buffer_structures([]) == BufferStructure(0)


@pytest.mark.parametrize(
    'structures, message',
    [
        ([('T', 'B', 3), ('B', 3)], 'buffer type'),
        ([('B', 3), (3,)], 'buffer type'),
        ([('T', 'B', 3), ('T', 'B', 3, 1)], 'rank'),
        ([('T', 'B', 2, 3), ('T', 'B', 4, 3)], 'feature dimensions'),
        ([('T', 'B', 2), ('T', 'B', 2), ('T', 'B', 2, 2)], 'rank'),
    ],
)
def test_combine_mismatch_raises(structures, message):
    with pytest.raises(StructureValidationError, match=message) as info:
        combine_buffer_structures(BufferStructure(*s) for s in structures)
    # the message shows the offending shapes
    assert str(structures[-1][-1]) in str(info.value)
