"""Input: the entry point for data (and targets) of a network."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.errors import LayerValidationError
from brainstorm.layers.attributes import Kwarg, ShapeDict
from brainstorm.layers.base_layer import Layer
from brainstorm.structure.buffer_structure import BufferStructure
from brainstorm.structure.construction import ConstructionWrapper


def Input(out_shapes: dict) -> ConstructionWrapper:
    """The Input layer, always named ``'Input'``.

    Args:
        out_shapes: output name -> shape, e.g. ``{'default': ('T', 'B', 784),
            'targets': ('T', 'B', 1)}``. ``('B', ...)`` shapes give
            batch-sized inputs (one value per sequence).

    Its outputs are filled by ``net.provide_external_data``.
    """
    return ConstructionWrapper.create(InputLayerImpl, out_shapes=out_shapes)


class InputLayerImpl(Layer):
    """Holds the data of a batch; computes nothing."""

    expected_inputs = {}
    declared_kwargs = {
        'out_shapes': Kwarg(
            ShapeDict(),
            description='output name -> shape template of '
            "the data, e.g. ('T', 'B', 784)",
        ),
    }

    def setup(self, kwargs, in_shapes):
        """One output per entry of ``out_shapes``; nothing else.

        Raises:
            LayerValidationError: the layer has incoming connections.
        """
        if self.incoming:
            raise LayerValidationError(
                f'{self._desc()}: the Input layer cannot have incoming connections.'
            )
        outputs = OrderedDict(
            (name, BufferStructure(*shape))
            for name, shape in kwargs['out_shapes'].items()
        )
        return outputs, OrderedDict(), OrderedDict()
