"""``independent_outputs`` is checked for batch-sized inputs too.

The check gives a declared-independent input other values made of its
own. Whole rows were drawn only for inputs of more than two dimensions,
taken as ``(T, B, ...)``; a batch-sized input ``('B', F)`` of one-hot rows
got only a shift and a draw element by element, which make rows that are
no one-hot rows. A layer that refuses such values had them skipped, so a
layer whose output read its one-hot targets passed the check although it
declared itself independent of them. Whole samples are now drawn over the
axes that count the input's samples (its buffer type).
"""

from collections import OrderedDict

import numpy as np
import pytest

from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import StructureTemplate
from brainstorm.testing import LayerTestError, instantiate_layer, run_layer_tests

TARGETS = np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=float)


class _OneHotTargetsLayerImpl(Layer):
    """``predictions = x (+ targets[b] where it leaks)``, declared
    independent of one-hot ``targets`` of shape ``(B, 3)``; it refuses
    targets that are not one-hot rows."""

    leaks = False
    expected_inputs = {
        'default': StructureTemplate('T', 'B', 'F'),
        'targets': StructureTemplate('B', 'F'),
    }
    computes_no_input_deltas_for = ('targets',)
    independent_outputs = {'predictions': ('targets',)}

    def setup(self, kwargs, in_shapes):
        outputs = OrderedDict(predictions=in_shapes['default'])
        return outputs, OrderedDict(), OrderedDict()

    def forward_pass(self, buffers, training_pass=True):
        _h = self.handler
        targets = _h.get_numpy_copy(buffers.inputs.targets)
        if not (np.isin(targets, (0.0, 1.0)).all() and (targets.sum(-1) == 1).all()):
            raise ValueError('the targets must be one-hot rows')
        x, y = buffers.inputs.default, buffers.outputs.predictions
        for step in range(x.shape[0]):
            if self.leaks:
                _h.add_tt(x[step], buffers.inputs.targets, y[step])
            else:
                _h.copy_to(x[step], y[step])

    def backward_pass(self, buffers):
        b = buffers
        _h = self.handler
        _h.add_tt(
            b.output_deltas.predictions, b.input_deltas.default, b.input_deltas.default
        )


class LeakingOneHotTargetsLayerImpl(_OneHotTargetsLayerImpl):
    leaks = True


class OneHotTargetsLayerImpl(_OneHotTargetsLayerImpl):
    leaks = False


def layer_of(cls):
    return instantiate_layer(cls, {'default': (3,), 'targets': ('B', 3)})


SPEC = {'time_steps': 2, 'batch_size': 3, 'targets': TARGETS}


def test_a_layer_reading_its_declared_independent_batch_targets_fails():
    with pytest.raises(LayerTestError) as info:
        run_layer_tests(layer_of(LeakingOneHotTargetsLayerImpl), dict(SPEC))
    message = str(info.value)
    assert "'predictions'" in message and "'targets'" in message, message
    assert 'independent_outputs' in message, message


def test_a_layer_independent_of_its_batch_targets_passes():
    run_layer_tests(layer_of(OneHotTargetsLayerImpl), dict(SPEC))
