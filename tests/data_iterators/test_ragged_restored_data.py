"""Ragged data in a description is refused as such, with or without
``data_dtypes``.

A ``FromGenerator`` description with ``data_dtypes`` whose batch held a
ragged nested list failed while it was restored with NumPy's bare
``ValueError: setting an array element with a sequence``, naming neither
the iterator nor the data; without ``data_dtypes`` the same value was
refused as a malformed array of its batch when a pass reached it.
"""

import json

import numpy as np
import pytest

from brainstorm.data_iterators import FromGenerator, Minibatches
from brainstorm.describable import create_from_description, get_description
from brainstorm.utils import IteratorValidationError

RAGGED = [[[0, 0], [0]]]


def edited(iterator, edit):
    description = json.loads(json.dumps(get_description(iterator)))
    edit(description)
    return description


@pytest.mark.parametrize('with_dtypes', [True, False])
def test_a_ragged_batch_of_a_described_generator_is_refused_naming_it(with_dtypes):
    def edit(description):
        assert 'data_dtypes' in description
        if not with_dtypes:
            del description['data_dtypes']
        description['batches'][0]['x'] = RAGGED

    description = edited(FromGenerator([{'x': np.zeros((1, 2, 2))}]), edit)
    with pytest.raises(IteratorValidationError) as info:
        restored = create_from_description(description)
        for _ in restored():
            pass
    message = str(info.value)
    assert "'x' of batch 0" in message and 'ragged' in message, message


@pytest.mark.parametrize('dtype', [np.float64, np.float32, np.int64])
def test_ragged_described_minibatches_data_is_refused_naming_it(dtype):
    def edit(description):
        description['data']['x'] = RAGGED

    iterator = Minibatches(batch_size=1, x=np.zeros((1, 2, 2), dtype=dtype))
    with pytest.raises(IteratorValidationError) as info:
        create_from_description(edited(iterator, edit))
    message = str(info.value)
    assert "data['x']" in message and 'ragged' in message, message
