"""The rules of Network.predict at their edges: data read on slicing
(h5py datasets, array-likes) and closed datasets, batch-sized inputs and
outputs, the joining of the batches, what predict leaves in the network
(constant buffers, layer attributes), which inputs an output needs and
which buffers a forward pass computes (for predict and tools.extract)."""

from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.handlers import NumpyHandler
from brainstorm.layers.base_layer import Layer
from brainstorm.structure import prediction
from brainstorm.structure.buffer_structure import BufferStructure, StructureTemplate
from brainstorm.structure.construction import ConstructionWrapper
from brainstorm.structure.external_data import MissingInputError
from brainstorm.structure.prediction import UnknownOutputError

PREDICTIONS = 'Output.outputs.predictions'


def samples(T, B, F=4, seed=0):
    return np.random.default_rng(seed).normal(size=(T, B, F))


def mlp(seed=1):
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(
        inp >> bs.layers.FullyConnected(6, activation='tanh', name='Hid') >> out
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=seed)
    return net


def with_batch_input():
    """A network whose Input also has a batch-sized output 'c': (B, 2)."""
    inp = bs.layers.Input(
        {'default': ('T', 'B', 4), 'targets': ('T', 'B', 1), 'c': ('B', 2)}
    )
    out = bs.layers.SoftmaxCE(name='Output')
    inp - 'targets' >> 'targets' - out
    net = bs.Network.from_layer(
        inp
        >> bs.layers.FullyConnected(3, name='Hid')
        >> out - 'loss'
        >> bs.layers.Loss()
    )
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def forward(net, data, path):
    net.provide_external_data(data, all_inputs=False)
    net.forward_pass(training_pass=False)
    return net.handler.get_numpy_copy(net.get(path)).copy()


# ----------------------------------------------- batch-sized buffers ---


@pytest.mark.parametrize('batch_size', [None, 1, 2, 3, 5])
def test_a_batch_sized_output_comes_back_whole_and_in_order(batch_size):
    net = with_batch_input()
    c = np.arange(10.0).reshape(5, 2)
    got = net.predict({'c': c}, batch_size=batch_size, out_name='Input.outputs.c')
    assert got.shape == (5, 2)
    np.testing.assert_array_equal(got, c)


def test_batch_sized_inputs_do_not_count_as_time_first_data():
    # the layout is read from the time-sized inputs only: a (B, F) input
    # of a batch-sized Input output has its full number of dimensions
    net = with_batch_input()
    x = samples(1, 5)
    c = np.ones((5, 2))
    got = net.predict({'default': x[0], 'c': c}, batch_size=2, out_name=PREDICTIONS)
    assert got.shape == (5, 3)
    np.testing.assert_array_equal(got, net.predict(x, out_name=PREDICTIONS)[0])
    time_first = net.predict({'default': x, 'c': c}, out_name=PREDICTIONS)
    assert time_first.shape == (1, 5, 3)


def test_predict_leaves_the_batch_sized_buffers_of_the_last_batch():
    net = with_batch_input()
    c = np.arange(8.0).reshape(4, 2)
    data = {
        'default': samples(1, 4),
        'targets': np.zeros((1, 4, 1), dtype=int),
        'c': c,
    }
    net.provide_external_data(data)
    net.forward_pass(training_pass=True)
    # fewer samples than the last batch: they would fit in its memory
    got = net.predict({'c': -np.ones((3, 2))}, out_name='Input.outputs.c')
    np.testing.assert_array_equal(got, -np.ones((3, 2)))
    np.testing.assert_array_equal(net.get('Input.outputs.c'), c)
    assert (net.buffer_manager.time_size, net.buffer_manager.batch_size) == (1, 4)


# ------------------------------------------------- context time slots ---


def lstm_net():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    net = bs.Network.from_layer(inp >> bs.layers.Lstm(5, name='Lstm') >> out)
    net.set_handler(NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


@pytest.mark.parametrize('batch_size', [None, 2])
def test_outputs_with_a_context_slot_give_the_data_time_steps_only(batch_size):
    net = lstm_net()
    x = samples(3, 4)
    got = net.predict(x, batch_size=batch_size, out_name='Lstm.outputs.default')
    assert got.shape == (3, 4, 5)
    full = forward(lstm_net(), {'default': x}, 'Lstm.outputs.default')
    assert full.shape[0] > 3  # the network keeps an extra slot
    np.testing.assert_allclose(got, full[:3], rtol=1e-12, atol=1e-14)


# ------------------------------------------------------- joining ---


def test_join_pads_shorter_sequences_with_zeros_to_the_longest():
    # as extract does: batches with fewer time steps are zero-padded (the
    # shorter batch holds more samples than the longer one has steps)
    short = np.arange(2 * 5 * 2, dtype=np.float32).reshape(2, 5, 2) + 1
    long = np.arange(4 * 1 * 2, dtype=np.float32).reshape(4, 1, 2) + 100
    joined = prediction._join([short, long], 2)
    assert joined.shape == (4, 6, 2)
    assert joined.dtype == np.float32
    np.testing.assert_array_equal(joined[:2, :5], short)
    np.testing.assert_array_equal(joined[2:, :5], 0)
    np.testing.assert_array_equal(joined[:, 5:], long)
    np.testing.assert_array_equal(prediction._join([long, short], 2)[:, :1], long)


# ------------------------------------------------- check_finite default ---


def test_the_module_function_checks_for_non_finite_values_by_default():
    net = mlp()
    x = samples(1, 3)
    x[0, 2, 1] = np.nan
    with pytest.raises(NetworkValidationError, match=r'NaN at index \(0, 2, 1\)'):
        prediction.predict(net, x, out_name=PREDICTIONS)


def test_check_finite_false_runs_the_data_as_it_is():
    net = mlp()
    x = samples(1, 3)
    x[0, 2, 1] = np.nan
    got = net.predict(x, out_name=PREDICTIONS, check_finite=False)
    assert np.isnan(got[0, 2]).all()
    np.testing.assert_array_equal(
        got[:, :2], net.predict(x[:, :2], out_name=PREDICTIONS)
    )


# ------------------------------------------------------ the data given ---


class ArrayOnly:
    """Data that only converts itself to an array (no shape, no slicing)."""

    def __init__(self, array):
        self._array = array
        self.conversions = 0

    def __array__(self, dtype=None, copy=None):
        self.conversions += 1
        return self._array


class ForeignDtype:
    """A dtype that NumPy does not know (as a torch.float64)."""

    def __repr__(self):
        return 'foreign.float64'


class TensorLike:
    """A tensor of another library: sliceable, but its dtype is none of
    NumPy's, so it is read whole through __array__."""

    def __init__(self, array):
        self._array = array
        self.shape = array.shape
        self.ndim = array.ndim
        self.dtype = ForeignDtype()
        self.reads = []

    def __getitem__(self, key):
        self.reads.append(key)
        return self._array[key]

    def __array__(self, dtype=None, copy=None):
        return self._array


def test_an_object_with_only_array_is_read_as_an_array():
    net = mlp()
    x = samples(2, 5)
    wrapped = ArrayOnly(x)
    got = net.predict(wrapped, batch_size=2, out_name=PREDICTIONS)
    np.testing.assert_allclose(
        got, net.predict(x, out_name=PREDICTIONS), rtol=1e-12, atol=1e-14
    )
    assert wrapped.conversions >= 1


def test_an_object_with_only_array_may_be_given_batch_first():
    # it has no ndim: its layout is read from the array it converts to
    net = mlp()
    x = samples(1, 5)[0]
    got = net.predict(ArrayOnly(x), out_name=PREDICTIONS)
    np.testing.assert_array_equal(got, net.predict(x, out_name=PREDICTIONS))
    assert got.shape == (5, 3)


def test_a_tensor_of_another_library_is_read_whole():
    net = mlp()
    x = samples(2, 5)
    tensor = TensorLike(x)
    got = net.predict({'default': tensor}, batch_size=2, out_name=PREDICTIONS)
    np.testing.assert_allclose(
        got, net.predict(x, out_name=PREDICTIONS), rtol=1e-12, atol=1e-14
    )
    assert tensor.reads == []  # not sliced batch by batch


def test_masked_arrays_are_refused_by_predict():
    net = mlp()
    x = np.ma.masked_array(samples(1, 3), mask=np.zeros((1, 3, 4), bool))
    x.mask[0, 1, 2] = True
    with pytest.raises(NetworkValidationError, match='masked arrays are not supported'):
        net.predict(x, out_name=PREDICTIONS)


def test_one_array_for_several_inputs_asks_for_a_dict():
    net = mlp()
    with pytest.raises(MissingInputError) as info:
        net.predict(samples(1, 2), out_name='Output.outputs.loss')
    message = str(info.value)
    assert message.startswith('predict: give a dict of input names to arrays')
    assert "needs the inputs ['default', 'targets']" in message
    assert message.endswith('Received: ndarray')
    # the network has targets: the message says what needs them
    assert prediction.TARGETS_HINT in message


def test_the_targets_hint_only_where_the_network_has_targets():
    inp = bs.layers.Input({'a': ('T', 'B', 2), 'b': ('T', 'B', 2)})
    merged = bs.layers.Merge(name='M')
    inp - 'a' >> 'inputs_1' - merged
    inp - 'b' >> 'inputs_2' - merged
    net = bs.Network.from_layer(merged >> bs.layers.FullyConnected(2, name='Out'))
    net.initialize(1.0)
    with pytest.raises(MissingInputError) as info:
        net.predict(np.ones((1, 3, 2)), out_name='Out')
    message = str(info.value)
    assert "needs the inputs ['a', 'b']. Received: ndarray" in message
    assert 'targets' not in message
    with pytest.raises(MissingInputError) as info:
        net.predict({'a': np.ones((1, 3, 2))}, out_name='Out')
    assert str(info.value) == (
        "predict: data for the inputs ['b'] is missing; this output needs "
        "['a', 'b']. Received ['a']."
    )


# ------------------------------------- an output that needs no input ---


class ConstantLayerImpl(Layer):
    """Its output does not depend on its input (as it declares)."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 'F')}
    independent_outputs = {'default': ('default',)}

    def setup(self, kwargs, in_shapes):
        return (
            OrderedDict(default=BufferStructure('T', 'B', 1)),
            OrderedDict(),
            OrderedDict(),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.fill(buffers.outputs.default, 1.0)

    def backward_pass(self, buffers):
        pass


def constant_net():
    inp = bs.layers.Input({'default': ('T', 'B', 3)})
    out = ConstructionWrapper.create(ConstantLayerImpl, name='Const')
    net = bs.Network.from_layer(inp >> out)
    net.set_handler(NumpyHandler(np.float64))
    return net


def test_an_output_that_needs_no_input_still_needs_samples():
    net = constant_net()
    assert prediction.required_inputs(net, 'Const.outputs.default') == []
    with pytest.raises(NetworkValidationError, match='no sample') as info:
        net.predict({}, out_name='Const')
    assert 'batch size B is 0' in str(info.value)
    with pytest.raises(NetworkValidationError) as info:
        net.predict(np.ones((1, 2, 3)), out_name='Const')
    assert not isinstance(info.value, MissingInputError)
    assert str(info.value) == (
        'predict: give a dict of input names to arrays; this output needs '
        'the inputs []. Received: ndarray'
    )
    got = net.predict({'default': np.zeros((2, 3, 3))}, out_name='Const')
    np.testing.assert_array_equal(got, np.ones((2, 3, 1)))


# --------------------------------------------------------- output names ---


@pytest.mark.parametrize(
    'name',
    [
        'Hid.parameters',  # a view: W and bias
        'Hid.outputs',
        'Hid.outputs.default.@shape',
        'Hid.outputs.default.@shape.T',
        'Hid.@type.B',
        'Hid.outputs.default.@slice.0',
    ],
)
def test_views_and_layout_entries_are_no_outputs(name):
    net = mlp()
    with pytest.raises(UnknownOutputError) as info:
        net.predict(samples(1, 2), out_name=name)
    message = str(info.value)
    assert message.startswith(f'predict: {name!r} is not an output of the network')
    assert PREDICTIONS in message


# ---------------------------------------------- computed by a forward pass ---


def _iterator():
    return bs.data_iterators.Minibatches(
        2, default=samples(1, 4), targets=np.zeros((1, 4, 1)), shuffle=False
    )


def test_extract_refuses_the_flat_gradients():
    net = mlp()
    with pytest.raises(NetworkValidationError) as info:
        bs.tools.extract(net, _iterator(), 'gradients')
    message = str(info.value)
    assert "'gradients' is not computed by a forward pass" in message
    assert "net.get('gradients')" in message


def test_extract_gives_the_flat_parameters():
    net = mlp()
    got = bs.tools.extract(net, _iterator(), ['parameters', 'Hid.parameters.W'])
    np.testing.assert_array_equal(got['parameters'], net.get('parameters'))
    np.testing.assert_array_equal(got['Hid.parameters.W'], net.get('Hid.parameters.W'))


class BackwardNoteLayerImpl(Layer):
    """Copies its input; its internal 'default' is written by its backward
    pass only (and named as its output)."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 'F')}

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        return (
            OrderedDict(default=BufferStructure(*s.shape)),
            OrderedDict(),
            OrderedDict(default=BufferStructure(*s.shape, is_backward_only=True)),
        )

    def forward_pass(self, buffers, training_pass=True):
        self.handler.copy_to(buffers.inputs.default, buffers.outputs.default)

    def backward_pass(self, buffers):
        pass


def test_only_a_backward_only_internal_is_refused_not_an_output_of_its_name():
    inp = bs.layers.Input({'default': ('T', 'B', 3)})
    net = bs.Network.from_layer(
        inp >> ConstructionWrapper.create(BackwardNoteLayerImpl, name='Note')
    )
    net.set_handler(NumpyHandler(np.float64))
    x = samples(2, 3, F=3)
    np.testing.assert_array_equal(net.predict(x, out_name='Note.outputs.default'), x)
    np.testing.assert_array_equal(net.predict(x, out_name='Note.inputs.default'), x)
    with pytest.raises(NetworkValidationError, match='not computed by a forward pass'):
        net.predict(x, out_name='Note.internals.default')


# ------------------------------------------------------- required inputs ---


class CountingLayers(dict):
    def __init__(self, layers):
        super().__init__(layers)
        self.lookups = []

    def __getitem__(self, name):
        self.lookups.append(name)
        return super().__getitem__(name)


def diamonds(n):
    """n diamonds in a row: each layer feeds two, which a Merge joins."""
    inp = bs.layers.Input({'default': ('T', 'B', 2), 'other': ('T', 'B', 2)})
    last = inp - 'default'
    for i in range(n):
        top = bs.layers.FullyConnected(2, name=f'Top{i}')
        merged = bs.layers.Merge(name=f'Merge{i}')
        last >> top
        top >> bs.layers.FullyConnected(2, name=f'Left{i}') >> 'inputs_1' - merged
        top >> bs.layers.FullyConnected(2, name=f'Right{i}') >> 'inputs_2' - merged
        last = merged
    net = bs.Network.from_layer(last >> bs.layers.FullyConnected(2, name='Out'))
    return net


def test_required_inputs_visits_a_layer_reached_twice_once():
    net = diamonds(6)
    spy = SimpleNamespace(layers=CountingLayers(net.layers))
    assert prediction.required_inputs(spy, 'Out.outputs.default') == ['default']
    lookups = spy.layers.lookups
    assert lookups.count('Top0') == 1
    assert lookups.count('Input') <= 2  # the visit and the final order
    assert len(lookups) <= len(net.layers) + 1


# --------------------------------------- what predict leaves in the network ---


class NotingLayerImpl(Layer):
    """Copies its input, and notes the batch size of its last forward pass
    in a constant internal (named as the network's flat buffers) and on
    itself; its forward pass deletes the attribute 'fresh'."""

    expected_inputs = {'default': StructureTemplate('T', 'B', 'F')}

    def setup(self, kwargs, in_shapes):
        s = in_shapes['default']
        return (
            OrderedDict(default=BufferStructure(*s.shape)),
            OrderedDict(),
            OrderedDict(
                [('parameters', BufferStructure(1)), ('gradients', BufferStructure(1))]
            ),
        )

    def forward_pass(self, buffers, training_pass=True):
        x = buffers.inputs.default
        self.handler.copy_to(x, buffers.outputs.default)
        self.handler.fill(buffers.internals.parameters, float(x.shape[1]))
        self.handler.fill(buffers.internals.gradients, float(x.shape[0]))
        self.last_batch_size = x.shape[1]
        if 'fresh' in vars(self):
            del self.fresh

    def backward_pass(self, buffers):
        pass


def noting_net():
    inp = bs.layers.Input({'default': ('T', 'B', 3)})
    net = bs.Network.from_layer(
        inp >> ConstructionWrapper.create(NotingLayerImpl, name='Note')
    )
    net.set_handler(NumpyHandler(np.float64))
    return net


def test_constant_buffers_written_by_the_forward_pass_are_put_back():
    net = noting_net()
    net.provide_external_data({'default': samples(2, 4, F=3)})
    net.forward_pass()
    assert net.get('Note.internals.parameters').tolist() == [4.0]
    assert net.get('Note.internals.gradients').tolist() == [2.0]
    x = samples(3, 7, F=3, seed=1)
    np.testing.assert_array_equal(net.predict(x, out_name='Note'), x)
    assert net.get('Note.internals.parameters').tolist() == [4.0]
    assert net.get('Note.internals.gradients').tolist() == [2.0]


def test_layer_attributes_set_or_deleted_by_predict_are_put_back():
    net = noting_net()
    layer = net.layers['Note']
    assert not hasattr(layer, 'last_batch_size')  # no forward pass yet
    layer.fresh = 'kept'
    x = samples(1, 5, F=3)
    np.testing.assert_array_equal(net.predict(x, out_name='Note'), x)
    assert not hasattr(layer, 'last_batch_size')
    assert layer.fresh == 'kept'
    net.provide_external_data({'default': samples(1, 2, F=3)})
    net.forward_pass()
    assert layer.last_batch_size == 2 and 'fresh' not in vars(layer)
    net.predict(x, batch_size=3, out_name='Note')
    assert layer.last_batch_size == 2 and 'fresh' not in vars(layer)


# ------------------------------------------------ check_parameters_set ---


def test_check_parameters_set_passes_what_is_no_network():
    assert prediction.check_parameters_set(SimpleNamespace()) is None


# ----------------------------------------------- data read on slicing ---


class CachedShapeClosed:
    """A dataset (as of an h5py that caches shapes) whose file was closed:
    its id says so, its shape still answers."""

    def __init__(self, array):
        self._array = array
        self.shape = array.shape
        self.ndim = array.ndim
        self.size = array.size
        self.dtype = array.dtype
        self.id = SimpleNamespace(valid=0)
        self.reads = []

    def __getitem__(self, key):
        self.reads.append(key)
        return self._array[key]

    def __array__(self, dtype=None, copy=None):
        raise AssertionError('read whole')


def test_a_closed_dataset_is_refused_even_if_its_shape_answers():
    net = mlp()
    closed = CachedShapeClosed(samples(1, 4))
    with pytest.raises(NetworkValidationError) as info:
        net.predict({'default': closed}, batch_size=2, out_name=PREDICTIONS)
    message = str(info.value)
    assert message.startswith(
        "predict: the data for input 'default' cannot be read: it is an h5py "
        'dataset whose file was closed (h5py: the dataset is closed).'
    )
    assert closed.reads == []


def test_a_dataset_closed_before_predict_names_the_input(tmp_path):
    h5py = pytest.importorskip('h5py')
    net = mlp()
    with h5py.File(tmp_path / 'data.h5', 'w') as f:
        f['x'] = samples(1, 4)
    f = h5py.File(tmp_path / 'data.h5', 'r')
    dataset = f['x']
    f.close()
    with pytest.raises(NetworkValidationError) as info:
        net.predict({'default': dataset}, out_name=PREDICTIONS)
    message = str(info.value)
    assert "the data for input 'default' cannot be read" in message
    assert 'whose file was closed' in message
    assert info.value.__cause__ is not None
    assert f'(h5py: {info.value.__cause__})' in message


def _subclass(h5py, name, get):
    return type(name, (h5py.Dataset,), {'__getitem__': get})


def test_a_dataset_closed_while_predict_reads_it_names_the_input(tmp_path):
    h5py = pytest.importorskip('h5py')
    net = mlp()
    x = samples(2, 6)
    with h5py.File(tmp_path / 'data.h5', 'w') as f:
        f['x'] = x
    reads = []

    def get(self, key):
        reads.append(key)
        if len(reads) == 2:  # the file is closed before the second batch
            self.file.close()
        return h5py.Dataset.__getitem__(self, key)

    f = h5py.File(tmp_path / 'data.h5', 'r')
    dataset = _subclass(h5py, 'ClosingDataset', get)(f['x'].id)
    with pytest.raises(NetworkValidationError) as info:
        net.predict({'default': dataset}, batch_size=3, out_name=PREDICTIONS)
    assert len(reads) == 2
    message = str(info.value)
    assert message.startswith(
        "predict: the data for input 'default' cannot be read: it is an h5py "
        'dataset whose file was closed (h5py: '
    )
    assert isinstance(info.value.__cause__, (OSError, RuntimeError, ValueError))


def test_a_dataset_that_cannot_be_read_names_it_and_its_file(tmp_path):
    h5py = pytest.importorskip('h5py')
    net = mlp()

    def get(self, key):
        raise OSError('damaged block')

    Broken = _subclass(h5py, 'BrokenDataset', get)
    with h5py.File(tmp_path / 'data.h5', 'w') as f:
        f['x'] = samples(1, 4)
        anonymous = f.create_dataset(None, data=samples(1, 4))
        assert anonymous.name is None
        with pytest.raises(NetworkValidationError) as info:
            net.predict({'default': Broken(f['x'].id)}, out_name=PREDICTIONS)
        assert str(info.value) == (
            "predict: the data for input 'default' could not be read from the "
            f"dataset '/x' of the file '{f.filename}': damaged block"
        )
        assert isinstance(info.value.__cause__, OSError)
        # an anonymous dataset has no name to give: its type is named
        with pytest.raises(NetworkValidationError) as info:
            net.predict({'default': Broken(anonymous.id)}, out_name=PREDICTIONS)
        assert str(info.value) == (
            "predict: the data for input 'default' could not be read from "
            'BrokenDataset: damaged block'
        )


class FailingRead(CachedShapeClosed):
    """An open array-like whose reading fails with an error of its own."""

    def __init__(self, array, error):
        super().__init__(array)
        self.id = SimpleNamespace(valid=1)
        self.error = error

    def __getitem__(self, key):
        raise self.error


@pytest.mark.parametrize('error', [ValueError('bad key'), RuntimeError('busy')])
def test_other_read_errors_of_an_open_dataset_pass_unchanged(error):
    net = mlp()
    data = FailingRead(samples(1, 4), error)
    with pytest.raises(type(error)) as info:
        net.predict({'default': data}, out_name=PREDICTIONS)
    assert info.value is error


def test_an_hdf5_dataset_and_a_memmap_give_the_array_results(tmp_path):
    h5py = pytest.importorskip('h5py')
    net = mlp()
    x = samples(3, 7)
    want = net.predict(x, out_name=PREDICTIONS)
    mapped = np.memmap(tmp_path / 'x.dat', dtype=np.float64, mode='w+', shape=x.shape)
    mapped[:] = x
    mapped.flush()
    mapped = np.memmap(tmp_path / 'x.dat', dtype=np.float64, mode='r', shape=x.shape)
    np.testing.assert_array_equal(net.predict(mapped, out_name=PREDICTIONS), want)
    with h5py.File(tmp_path / 'data.h5', 'w') as f:
        f['x'] = x
        f['first'] = x[0]
    with h5py.File(tmp_path / 'data.h5', 'r') as f:
        np.testing.assert_array_equal(net.predict(f['x'], out_name=PREDICTIONS), want)
        batch_first = net.predict(f['first'], batch_size=3, out_name=PREDICTIONS)
    assert batch_first.shape == (7, 3)
    np.testing.assert_allclose(batch_first, want[0], rtol=1e-12, atol=1e-14)
