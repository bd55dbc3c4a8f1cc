"""A custom layer written as one file outside the package: it passes the
public layer tests and trains inside a network."""

import importlib.util
import sys
import textwrap

import numpy as np
import pytest

from brainstorm.testing import (
    LayerTestError,
    get_test_configurations,
    instantiate_layer,
    run_layer_tests,
)

LAYER_FILE = textwrap.dedent('''
    """A user's layer, shared as a single file."""
    from collections import OrderedDict

    from brainstorm.layers.attributes import FloatIn, Kwarg
    from brainstorm.layers.base_layer import Layer
    from brainstorm.structure.buffer_structure import StructureTemplate
    from brainstorm.structure.construction import ConstructionWrapper


    def ScaledSquare(factor=0.5, name=None):
        """y = factor * x * x"""
        return ConstructionWrapper.create(ScaledSquareLayerImpl, name=name,
                                          factor=factor)


    class ScaledSquareLayerImpl(Layer):
        expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
        declared_kwargs = {'factor': Kwarg(FloatIn(), default=0.5,
                                           description='scale')}

        def setup(self, kwargs, in_shapes):
            self.factor = kwargs['factor']
            return (OrderedDict(default=in_shapes['default']), OrderedDict(),
                    OrderedDict())

        def forward_pass(self, buffers, training_pass=True):
            _h = self.handler
            x, y = buffers.inputs.default, buffers.outputs.default
            _h.mult_tt(x, x, y)
            _h.mult_st(self.factor, y, y)

        def backward_pass(self, buffers):
            _h = self.handler
            x, dx = buffers.inputs.default, buffers.input_deltas.default
            dy = buffers.output_deltas.default
            # dx += 2 * factor * x * dy, using dy as scratch (allowed)
            _h.mult_tt(x, dy, dy)
            _h.mult_add_st(2 * self.factor, dy, dx)
''')


@pytest.fixture(scope='module')
def user_module(tmp_path_factory):
    path = tmp_path_factory.mktemp('userlayers') / 'scaled_square.py'
    path.write_text(LAYER_FILE)
    spec = importlib.util.spec_from_file_location('scaled_square', path)
    module = importlib.util.module_from_spec(spec)
    sys.modules['scaled_square'] = module
    spec.loader.exec_module(module)
    yield module
    del sys.modules['scaled_square']


def test_custom_layer_passes_the_public_layer_tests(user_module):
    for spec in get_test_configurations():
        layer = instantiate_layer(
            user_module.ScaledSquareLayerImpl, {'default': (3,)}, factor=0.7
        )
        run_layer_tests(layer, spec)


def test_a_wrong_custom_layer_fails_the_public_layer_tests(user_module):
    class WrongLayerImpl(user_module.ScaledSquareLayerImpl):
        def backward_pass(self, buffers):
            _h = self.handler
            x, dx = buffers.inputs.default, buffers.input_deltas.default
            _h.mult_add_tt(x, buffers.output_deltas.default, dx)  # missing 2f

    layer = instantiate_layer(WrongLayerImpl, {'default': (3,)}, factor=0.7)
    with pytest.raises(LayerTestError, match='WrongLayerImpl.*input delta'):
        run_layer_tests(layer, {'time_steps': 2, 'batch_size': 3})


def test_custom_layer_trains_in_a_network(user_module, tmp_path):
    from brainstorm.handlers import NumpyHandler
    from brainstorm.initializers import Gaussian
    from brainstorm.layers import FullyConnected
    from brainstorm.structure.network import Network
    from brainstorm.tools import get_in_out_layers

    rnd = np.random.RandomState(0)
    x = rnd.randn(1, 200, 4)
    targets = (x[0, :, 0] * x[0, :, 1] > 0).astype(float).reshape(1, 200, 1)
    inp, out = get_in_out_layers('classification', 4, 2)
    net = Network.from_layer(
        inp
        >> FullyConnected(8, activation='linear')
        >> user_module.ScaledSquare(0.5)
        >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(Gaussian(0.5), seed=3)
    data = {'default': x, 'targets': targets}

    def accuracy():
        net.provide_external_data(data)
        net.forward_pass()
        predictions = net.get('Output.outputs.predictions')[0]
        return np.mean(predictions.argmax(1) == targets[0, :, 0])

    before = accuracy()
    for _ in range(300):
        net.provide_external_data(data)
        net.forward_pass(training_pass=True)
        net.backward_pass()
        net.buffer.parameters[:] -= 0.05 * net.buffer.gradients
    assert accuracy() >= 0.95 > before
    # the architecture refers to the user's layer by type name and reloads
    filename = str(tmp_path / 'custom.hdf5')
    net.save_as_hdf5(filename)
    loaded = Network.from_hdf5(filename)
    assert type(loaded.layers['ScaledSquare']).__name__ == 'ScaledSquareLayerImpl'
