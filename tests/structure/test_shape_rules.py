"""The rules of the shape helpers and of the buffer structures at their edges.

``brainstorm/shapes.py`` gives layers views of their buffers, checks the
geometry of image ops and scales sums; ``brainstorm/structure/
buffer_structure.py`` says what shape each buffer has and which buffers a
layer accepts. A gap there gives a layer a view of the wrong shape or the
wrong memory, accepts an image geometry whose outputs do not fit, or takes
a buffer it cannot handle, and the numbers come out wrong without a word.
"""

import numpy as np
import pytest

from brainstorm.errors import StructureValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.shapes import (
    as_rows,
    check_image_geometry,
    reshape_view,
    summing_shrink,
)
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,
)

# ----------------------------------------------------------------- as_rows ---


def test_as_rows_merges_every_axis_but_the_first_into_a_view():
    a = np.arange(24.0).reshape(2, 3, 4)
    rows = as_rows(a)
    assert rows.shape == (2, 12)
    rows[1, 0] = -1
    assert a[1, 0, 0] == -1


def test_as_rows_of_a_feature_slice_keeps_its_rows():
    """Rows of a slice of a longer last axis are a view, the whole is not."""
    base = np.arange(24.0).reshape(4, 6)
    sliced = reshape_view(base[:, 1:5], (4, 2, 2))
    rows = as_rows(sliced)
    assert rows.shape == (4, 4)
    rows[2, 3] = -1
    assert base[2, 4] == -1


def test_as_rows_gives_the_array_itself_where_no_row_view_exists():
    a = np.arange(24.0).reshape(2, 3, 4)[:, :, 1:3]
    assert as_rows(a) is a


# ---------------------------------------------------- check_image_geometry ---


def test_a_window_of_one_is_a_valid_geometry():
    """A 1x1 convolution or pooling: out = (in + padding - 1) // stride + 1."""
    check_image_geometry('op', (6, 5), (1, 1), 0, (1, 1), (6, 5))
    check_image_geometry('op', (6, 5), (1, 1), (1, 0, 0, 2), (2, 3), (4, 3))
    handler = NumpyHandler(np.float64)
    x = np.arange(2 * 4 * 4 * 3, dtype=np.float64).reshape(2, 4, 4, 3)
    y = np.zeros((2, 4, 4, 3))
    handler.maxpool2d_forward_batch(x, (1, 1), y, 0, (1, 1), np.zeros_like(y))
    np.testing.assert_array_equal(y, x)


def test_no_outputs_follow_from_a_window_larger_than_the_padded_image():
    """The formula gives 0 outputs: an empty output is taken, nothing is read;
    a negative size, which no formula makes an array of, is refused."""
    check_image_geometry('op', (2, 2), (3, 3), 0, (1, 1), (0, 0))
    check_image_geometry('op', (2, 2), (4, 4), 0, (2, 2), (0, 0))
    handler = NumpyHandler(np.float64)
    x, w, b = np.ones((2, 2, 2, 3)), np.ones((4, 3, 3, 3)), np.zeros(4)
    y = np.zeros((2, 0, 0, 4))
    handler.conv2d_forward_batch(x, w, b, y, 0, (1, 1))
    for in_hw, window, stride, out in [
        ((1, 1), (4, 4), (1, 1), (-2, -2)),
        ((2, 2), (5, 5), (2, 2), (-1, -1)),
        ((2, 2), (3, 3), (1, 1), (0, 1)),
    ]:
        with pytest.raises(ValueError, match='do not follow from images'):
            check_image_geometry('op', in_hw, window, 0, stride, out)


# ---------------------------------------------------------- summing_shrink ---


@pytest.mark.parametrize(
    'count, shrink',
    [
        (0, 1.0),
        (1, 1.0),
        (2, 0.5),
        (3, 0.25),
        (4, 0.25),
        (5, 0.125),
        (1024, 2.0**-10),
        (1025, 2.0**-11),
        (2**24, 2.0**-24),
        (2**24 + 1, 2.0**-24),
        (2**40, 2.0**-24),
    ],
)
def test_summing_shrink_is_one_over_the_smallest_power_of_two_not_below_count(
    count, shrink
):
    """``2**-k`` with ``2**k >= count`` smallest, but not below float16's 2**-24."""
    assert summing_shrink(count) == shrink


def test_summing_shrink_keeps_sums_of_up_to_2_24_terms_within_the_largest():
    for count in range(1, 70):
        assert 0.5 < count * summing_shrink(count) <= 1.0
    assert summing_shrink(2**30) == np.float16(2.0**-24) > 0


# ---------------------------------------------------------- BufferStructure ---


def _biggest_feature_size():
    """The most 8-byte elements whose bytes NumPy's intp can still index."""
    return int(np.iinfo(np.intp).max) // 8


def test_the_biggest_buffer_that_can_be_indexed_is_accepted():
    n = _biggest_feature_size()
    assert n * 8 <= np.iinfo(np.intp).max < (n + 1) * 8
    assert BufferStructure('B', n).feature_size == n
    if n % 3 == 0:
        assert BufferStructure('T', 'B', 3, n // 3).feature_size == n


@pytest.mark.parametrize('kind', ['one axis', 'two axes'])
def test_one_element_more_is_refused(kind):
    """A size past intp would wrap around in NumPy's arithmetic, not fail."""
    n = _biggest_feature_size() + 1
    shape = ('B', n) if kind == 'one axis' else ('T', 'B', 2, n // 2)
    assert n % 2 == 0
    with pytest.raises(StructureValidationError, match=rf'at most {n - 1} elements'):
        BufferStructure(*shape)
    with pytest.raises(StructureValidationError, match='at most'):
        BufferStructure(2**40, 2**40)


@pytest.mark.parametrize('shape', [('T', 'B'), ('B',)])
def test_a_buffer_needs_a_feature_dimension(shape):
    """('T', 'B') and ('B',) are leading axes without features, not misplaced
    'T's and 'B's."""
    with pytest.raises(
        StructureValidationError, match='at least one feature dimension'
    ):
        BufferStructure(*shape)


@pytest.mark.parametrize(
    'cls, shape, entry, position',
    [
        (BufferStructure, ('T', 'B', 3, 'B'), 'B', 3),
        (BufferStructure, (3, 'B'), 'B', 1),
        (BufferStructure, ('T', 3, 2), 'T', 0),
        (StructureTemplate, ('B', 'F', 'T'), 'T', 2),
        (StructureTemplate, ('T', 'B', '...', 'B'), 'B', 3),
        (StructureTemplate, ('B', 'T', 'F'), 'T', 1),
    ],
)
def test_a_misplaced_t_or_b_is_named_with_its_position(cls, shape, entry, position):
    with pytest.raises(
        StructureValidationError,
        match=rf"'{entry}' is only allowed as leading .* position {position}\.",
    ):
        cls(*shape)


# -------------------------------------------------------- StructureTemplate ---


def test_a_template_takes_feature_sizes_of_zero():
    """Feature entries are ints >= 0, as a buffer's feature dimensions are."""
    template = StructureTemplate('T', 'B', 0, 3)
    assert template.feature_shape == (0, 3)
    assert template.matches(BufferStructure('T', 'B', 0, 3))
    assert not template.matches(BufferStructure('T', 'B', 1, 3))
    assert StructureTemplate(0).matches(BufferStructure(0))


@pytest.mark.parametrize(
    'template, structure',
    [
        (('F', 'F'), ('B', 5)),
        (('F', 'F', 'F'), ('T', 'B', 5)),
        ((5, 5), ('B', 5)),
    ],
)
def test_a_constant_size_template_refuses_batch_and_time_sized_buffers(
    template, structure
):
    """The leading 'T' and 'B' of a buffer are no feature dimensions."""
    assert not StructureTemplate(*template).matches(BufferStructure(*structure))
    assert StructureTemplate(*template).matches(BufferStructure(*(5,) * len(template)))


@pytest.mark.parametrize('shape', [('T', 'B'), ('B',)])
def test_a_template_without_feature_entries_is_refused_when_made(shape):
    # it could match no buffer: a layer declaring it refused every input
    # with "must match", naming the input rather than the declaration
    with pytest.raises(StructureValidationError, match='at least one feature entry'):
        StructureTemplate(*shape)


@pytest.mark.parametrize('kind', [StructureTemplate, BufferStructure])
def test_a_shape_without_any_entry_is_refused_naming_what_it_needs(kind):
    with pytest.raises(StructureValidationError) as info:
        kind()
    assert str(info.value) == f'{kind.__name__} needs at least one entry. Received: ()'
