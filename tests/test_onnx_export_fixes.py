"""bs.tools.export_onnx: batch-only layouts, layer classes that shadow a
built-in type, empty batches and sequences, models over protobuf's 2 GB."""

import gc
import re
from collections import OrderedDict

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.layers import (
    BatchNorm,
    Convolution2D,
    FullyConnected,
    Input,
    Lstm,
    Merge,
    NoOp,
    Pooling2D,
    Recurrent,
)
from brainstorm.layers.authoring import (
    BufferStructure,
    ConstructionWrapper,
    Layer,
    StructureTemplate,
)
from brainstorm.layers.noop_layer import NoOpLayerImpl as BuiltinNoOpLayerImpl
from brainstorm.registry import get_layer_class

onnx = pytest.importorskip('onnx')
ort = pytest.importorskip('onnxruntime')

ATOL = 2e-6


def _session(net, path, outputs=None):
    bs.tools.export_onnx(net, str(path), outputs=outputs)
    return ort.InferenceSession(str(path), providers=['CPUExecutionProvider'])


def _run_both(net, session, data, paths):
    """onnxruntime's and brainstorm's outputs for the same data."""
    net.provide_external_data(data, all_inputs=False)
    net.forward_pass()
    feed = {i.name: data[i.name] for i in session.get_inputs()}
    got = session.run(paths, feed)
    time_sized = [a for a in data.values() if a.ndim >= 3]
    expected = []
    for path in paths:
        value = net.get(path)
        layer, _, out = path.split('.')
        if net.layers[layer].out_shapes[out].buffer_type == 2:
            # a recurrent layer's buffer ends with its context slot
            value = value[: time_sized[0].shape[0]]
        expected.append(value)
    return got, expected


def _assert_same(got, expected, paths):
    for path, g, e in zip(paths, got, expected):
        assert g.shape == e.shape, (path, g.shape, e.shape)
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=ATOL, err_msg=path)


# ------------------------------------------------ batch-only layouts ---


def _batch_only_net():
    inp = Input({'a': ('B', 3), 'b': ('B', 2)})
    merge = Merge(name='M')
    inp - 'a' >> 'inputs_1' - merge
    inp - 'b' >> 'inputs_2' - merge
    net = bs.Network.from_layer(merge)
    net.initialize(0.1)
    return net


def test_batch_only_inputs_and_outputs_keep_their_layout(tmp_path):
    net = _batch_only_net()
    paths = ['M.outputs.default', 'Input.outputs.b']
    session = _session(net, tmp_path / 'net.onnx', paths)
    shapes = {i.name: i.shape for i in session.get_inputs()}
    assert shapes == {'a': ['B', 3], 'b': ['B', 2]}
    assert [o.shape for o in session.get_outputs()] == [['B', 5], ['B', 2]]
    rnd = np.random.RandomState(0)
    for batch in (4, 1, 0):
        data = {
            'a': rnd.randn(batch, 3).astype(np.float32),
            'b': rnd.randn(batch, 2).astype(np.float32),
        }
        got, expected = _run_both(net, session, data, paths)
        assert expected[0].shape == (batch, 5)
        _assert_same(got, expected, paths)


def test_batch_only_input_beside_a_time_sized_one(tmp_path):
    # (T, B) is read from the time-sized input, whichever comes first
    inp = Input({'flags': ('B', 2), 'default': ('T', 'B', 3)})
    merge = Merge(name='M')
    inp - 'flags' >> 'inputs_1' - merge
    inp - 'flags' >> 'inputs_2' - merge
    hidden = FullyConnected(4, name='F')
    inp - 'default' >> hidden
    net = bs.Network.from_layer(merge)
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    paths = ['M.outputs.default', 'F.outputs.default']
    session = _session(net, tmp_path / 'net.onnx', paths)
    rnd = np.random.RandomState(1)
    data = {
        'flags': rnd.randn(3, 2).astype(np.float32),
        'default': rnd.randn(2, 3, 3).astype(np.float32),
    }
    got, expected = _run_both(net, session, data, paths)
    _assert_same(got, expected, paths)


# ------------------------------------- classes shadowing a built-in ---


def _define_shadow(kind):
    """A user's layer class of the type name 'NoOp', defined here so that
    the registry finds it (instead of brainstorm's) only while it lives."""
    if kind == 'doubling':

        class NoOpLayerImpl(Layer):
            """A user's own 'NoOp': it doubles its input."""

            expected_inputs = {'default': StructureTemplate('T', 'B', '...')}
            declared_kwargs = {}

            def setup(self, kwargs, in_shapes):
                shape = in_shapes['default'].shape
                outputs = OrderedDict(default=BufferStructure(*shape))
                return outputs, OrderedDict(), OrderedDict()

            def forward_pass(self, buffers, training_pass=True):
                inputs, outputs = buffers.inputs, buffers.outputs
                self.handler.mult_st(2.0, inputs.default, outputs.default)

            def backward_pass(self, buffers):
                self.handler.mult_add_st(
                    2.0, buffers.output_deltas.default, buffers.input_deltas.default
                )

        return NoOpLayerImpl

    class NoOpLayerImpl(BuiltinNoOpLayerImpl):  # type: ignore[no-redef]
        """A subclass of brainstorm's NoOp under its name."""

    return NoOpLayerImpl


def _export_error(impl, path) -> tuple:
    """The layer type of an ``impl`` layer and the message refusing its
    export (None if exported); raising nothing, so that no traceback keeps
    the class alive in the registry after a failed test."""
    inp = Input({'default': ('T', 'B', 3)})
    net = bs.Network.from_layer(inp >> ConstructionWrapper.create(impl, name='Double'))
    net.initialize(0.1)
    assert type(net.layers['Double']) is impl
    try:
        bs.tools.export_onnx(net, path, outputs=['Double.outputs.default'])
    except NetworkValidationError as error:
        return net.layers['Double'].layer_type, str(error)
    return net.layers['Double'].layer_type, None


@pytest.mark.parametrize('kind', ['doubling', 'subclass'])
def test_a_class_shadowing_a_builtin_type_name_is_refused(tmp_path, kind):
    with pytest.warns(UserWarning, match="replaces brainstorm's built-in"):
        impl = _define_shadow(kind)
    try:
        layer_type, message = _export_error(impl, tmp_path / 'net.onnx')
    finally:
        del impl
        gc.collect()  # the registry finds brainstorm's NoOp again
    assert get_layer_class('NoOpLayerImpl') is BuiltinNoOpLayerImpl
    assert layer_type == 'NoOp'
    assert message is not None, "exported as brainstorm's NoOp"
    assert "'Double'" in message and 'NoOp' in message
    # what it received and what it expected
    assert f'{__name__}._define_shadow.<locals>.NoOpLayerImpl' in message
    assert 'brainstorm.layers.noop_layer.NoOpLayerImpl' in message
    assert not (tmp_path / 'net.onnx').exists()


def test_brainstorms_own_noop_is_still_exported(tmp_path):
    inp = Input({'default': ('T', 'B', 3)})
    net = bs.Network.from_layer(inp >> NoOp(name='Same'))
    net.initialize(0.1)
    assert type(net.layers['Same']) is BuiltinNoOpLayerImpl
    session = _session(net, tmp_path / 'net.onnx', ['Same.outputs.default'])
    x = np.random.RandomState(2).randn(2, 3, 3).astype(np.float32)
    paths = ['Same.outputs.default']
    _assert_same(*_run_both(net, session, {'default': x}, paths), paths)


# ---------------------------------------- empty batches and sequences ---


def _empty_nets():
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    yield 'mlp', (4,), inp >> FullyConnected(5, name='F') >> BatchNorm() >> out
    inp, out = bs.tools.get_in_out_layers('classification', (5, 5, 2), 3)
    yield (
        'cnn',
        (5, 5, 2),
        (inp >> Convolution2D(3, (3, 3), name='C') >> Pooling2D((2, 2)) >> out),
    )
    for kind, make in (('rnn', Recurrent), ('lstm', Lstm)):
        for reverse in (False, True):
            inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
            name = f'{kind}{"-reverse" if reverse else ""}'
            yield name, (4,), inp >> make(5, reverse=reverse, name='R') >> out


@pytest.mark.parametrize(
    'kind', ['mlp', 'cnn', 'rnn', 'rnn-reverse', 'lstm', 'lstm-reverse']
)
def test_empty_batches_and_sequences_give_empty_outputs(tmp_path, kind):
    name, features, layers = next(n for n in _empty_nets() if n[0] == kind)
    net = bs.Network.from_layer(layers)
    net.initialize(bs.initializers.Gaussian(0.5), seed=3)
    paths = ['Output.outputs.predictions']
    if kind.startswith(('rnn', 'lstm')):
        paths.append('R.outputs.default')
    session = _session(net, tmp_path / 'net.onnx', paths)
    rnd = np.random.RandomState(3)
    for T, B in [(0, 2), (2, 0), (0, 0), (3, 2)]:
        x = rnd.randn(T, B, *features).astype(np.float32)
        got, expected = _run_both(net, session, {'default': x}, paths)
        assert expected[0].shape == (T, B, 3)
        _assert_same(got, expected, paths)


@pytest.mark.parametrize('make', [Lstm, Recurrent])
def test_empty_batch_with_a_masked_reverse_layer(tmp_path, make):
    inp = Input({'default': ('T', 'B', 3), 'mask': ('T', 'B', 1)})
    layer = make(4, reverse=True, name='R')
    inp - 'default' >> layer
    inp - 'mask' >> 'mask' - layer
    net = bs.Network.from_layer(layer)
    net.initialize(bs.initializers.Gaussian(0.5), seed=4)
    paths = ['R.outputs.default']
    session = _session(net, tmp_path / 'net.onnx', paths)
    for T, B in [(0, 2), (3, 0)]:
        data = {
            'default': np.ones((T, B, 3), np.float32),
            'mask': np.ones((T, B, 1), np.float32),
        }
        _assert_same(*_run_both(net, session, data, paths), paths)


# ------------------------------------------- over protobuf's 2 GB ---


def test_a_model_over_the_protobuf_limit_is_refused_by_size(tmp_path, monkeypatch):
    # a real model over 2 GB needs several GB of memory: the limit is
    # lowered instead, below this network's parameters
    from brainstorm.tools import onnx_export

    inp = Input({'default': ('T', 'B', 20)})
    net = bs.Network.from_layer(inp >> FullyConnected(30, name='Big'))
    net.initialize(0.1)
    path = tmp_path / 'net.onnx'
    path.write_bytes(b'old')
    monkeypatch.setattr(onnx_export, '_PROTOBUF_LIMIT', 1000)
    with pytest.raises(NetworkValidationError) as info:
        bs.tools.export_onnx(net, path, outputs=['Big.outputs.default'])
    message = str(info.value)
    assert '2 GB' in message and 'protobuf' in message
    # the layer's parameters, (30 * 20 + 30) float32, and its shape constants
    size = int(re.search(r"'Big' (\d+) bytes", message).group(1))
    assert 2520 <= size < 2600
    assert path.read_bytes() == b'old'  # the existing file is kept
    monkeypatch.undo()
    session = _session(net, path, ['Big.outputs.default'])
    x = np.random.RandomState(5).randn(2, 1, 20).astype(np.float32)
    _assert_same(
        *_run_both(net, session, {'default': x}, ['Big.outputs.default']),
        ['Big.outputs.default'],
    )
