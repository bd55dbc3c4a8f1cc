"""bs.tools.export_onnx: the exported models run in onnxruntime and agree
with brainstorm's forward_pass to float32 tolerance."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import brainstorm as bs
from brainstorm.errors import NetworkValidationError
from brainstorm.layers import (
    BatchNorm,
    ClockworkLstm,
    Convolution2D,
    Dropout,
    Elementwise,
    FullyConnected,
    Lstm,
    Merge,
    NoOp,
    Pooling2D,
    Recurrent,
)

onnx = pytest.importorskip('onnx')
ort = pytest.importorskip('onnxruntime')

ATOL = 2e-6  # float32: the two computations round differently


def _randomise(net, seed, std=0.5):
    """Seeded random parameters, BatchNorm statistics away from 0 and 1."""
    rnd = np.random.RandomState(seed)
    net.initialize(bs.initializers.Gaussian(std), seed=seed)
    for name, layer in net.layers.items():
        if layer.layer_type == 'BatchNorm':
            params = net.buffer[name].parameters
            shape = params.mu.shape
            params.mu[:] = rnd.randn(*shape).astype(np.float32)
            params.sigma[:] = (rnd.rand(*shape) + 0.5).astype(np.float32)
            params.gamma[:] = rnd.randn(*shape).astype(np.float32)
            params.beta[:] = rnd.randn(*shape).astype(np.float32)


def _session(net, path, outputs=None):
    bs.tools.export_onnx(net, str(path), outputs=outputs)
    return ort.InferenceSession(str(path), providers=['CPUExecutionProvider'])


def _compare(net, session, x, paths):
    net.provide_external_data({'default': x}, all_inputs=False)
    net.forward_pass()
    got = session.run(paths, {'default': x})
    for path, value in zip(paths, got):
        # a recurrent layer's buffer ends with its context slot
        expected = net.get(path)[: x.shape[0]]
        assert value.shape == expected.shape, path
        assert value.dtype == np.float32
        np.testing.assert_allclose(value, expected, rtol=1e-5, atol=ATOL, err_msg=path)


def mlp_net(activation='rel'):
    inp, out = bs.tools.get_in_out_layers('classification', 6, 4)
    return bs.Network.from_layer(
        inp
        >> FullyConnected(8, activation='el', name='Hid1')
        >> BatchNorm(name='Norm')
        >> Dropout(0.5)
        >> FullyConnected(5, activation='sigmoid', name='Hid2')
        >> Elementwise(activation, name='Act')
        >> NoOp()
        >> out
    )


def cnn_net():
    inp, out = bs.tools.get_in_out_layers('classification', (9, 8, 3), 4)
    return bs.Network.from_layer(
        inp
        >> Convolution2D(5, (3, 3), padding=1, activation='rel', name='Conv1')
        >> Pooling2D((2, 2), stride=(2, 2), name='Pool1')
        >> Convolution2D(4, (2, 3), stride=(1, 2), padding=2, name='Conv2')
        >> BatchNorm(name='Norm')
        >> Pooling2D((3, 2), type='avg', padding=1, name='Pool2')
        >> FullyConnected(6, activation='tanh', name='Hid')
        >> out
    )


def lstm_net(activation='tanh'):
    inp, out = bs.tools.get_in_out_layers('classification', 5, 4)
    merge = Merge(name='Merge')
    inp >> Lstm(7, activation=activation, name='Lstm') >> 'inputs_1' - merge
    inp >> Recurrent(3, activation=activation, name='Rnn') >> 'inputs_2' - merge
    return bs.Network.from_layer(merge >> out)


MLP_PATHS = [
    'Output.outputs.predictions',
    'Hid1.outputs.default',
    'Norm.outputs.default',
    'Act.outputs.default',
]
CNN_PATHS = [
    'Output.outputs.predictions',
    'Conv1.outputs.default',
    'Pool1.outputs.default',
    'Conv2.outputs.default',
    'Norm.outputs.default',
    'Pool2.outputs.default',
]
LSTM_PATHS = [
    'Output.outputs.predictions',
    'Lstm.outputs.default',
    'Rnn.outputs.default',
    'Merge.outputs.default',
]


@pytest.mark.parametrize('activation', ['rel', 'tanh', 'sigmoid', 'linear', 'el'])
def test_mlp_agrees_with_forward_pass_at_several_batch_sizes(tmp_path, activation):
    net = mlp_net(activation)
    _randomise(net, 1)
    session = _session(net, tmp_path / 'mlp.onnx', MLP_PATHS)
    rnd = np.random.RandomState(2)
    for batch_size in (1, 3, 17):
        x = rnd.randn(1, batch_size, 6).astype(np.float32)
        _compare(net, session, x, MLP_PATHS)


def test_cnn_agrees_with_forward_pass_at_several_batch_sizes(tmp_path):
    net = cnn_net()
    _randomise(net, 3)
    session = _session(net, tmp_path / 'cnn.onnx', CNN_PATHS)
    rnd = np.random.RandomState(4)
    for batch_size in (1, 2, 9):
        x = rnd.randn(1, batch_size, 9, 8, 3).astype(np.float32)
        _compare(net, session, x, CNN_PATHS)
    # several time steps of images: T is free too
    _compare(net, session, rnd.randn(3, 2, 9, 8, 3).astype(np.float32), CNN_PATHS)


@pytest.mark.parametrize('activation', ['tanh', 'sigmoid', 'rel', 'linear', 'el'])
def test_lstm_and_rnn_agree_at_several_lengths_and_batch_sizes(tmp_path, activation):
    net = lstm_net(activation)
    # weights small enough that the recurrence does not amplify float32
    # rounding over 13 steps (linear cells with std 0.5 grow it tenfold)
    _randomise(net, 5, std=0.3)
    session = _session(net, tmp_path / 'lstm.onnx', LSTM_PATHS)
    rnd = np.random.RandomState(6)
    for time_steps in (1, 4, 13):
        for batch_size in (1, 5):
            x = rnd.randn(time_steps, batch_size, 5).astype(np.float32)
            _compare(net, session, x, LSTM_PATHS)


def test_lstm_each_gate_and_peephole_is_placed_where_onnx_reads_it(tmp_path):
    """One parameter group at a time is made large, the others small: a
    gate or peephole in the wrong ONNX slot changes the output."""
    rnd = np.random.RandomState(7)
    x = rnd.randn(6, 3, 5).astype(np.float32)
    inp, out = bs.tools.get_in_out_layers('classification', 5, 4)
    net = bs.Network.from_layer(inp >> Lstm(4, name='Lstm') >> out)
    params = net.buffer.Lstm.parameters
    names = list(params.keys())
    for loud in names:
        for name in names:
            scale = 2.0 if name == loud else 0.3
            params[name][:] = (scale * rnd.randn(*params[name].shape)).astype(
                np.float32
            )
        session = _session(net, tmp_path / f'{loud}.onnx', ['Lstm.outputs.default'])
        _compare(net, session, x, ['Lstm.outputs.default'])


def test_default_output_is_the_predictions_and_needs_no_targets(tmp_path):
    net = mlp_net()
    _randomise(net, 8)
    path = tmp_path / 'net.onnx'
    bs.tools.export_onnx(net, path)  # a pathlib.Path
    model = onnx.load(str(path))
    assert [i.name for i in model.graph.input] == ['default']
    assert [o.name for o in model.graph.output] == ['Output.outputs.predictions']
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_param or d.dim_value for d in dims] == ['T', 'B', 6]
    assert model.opset_import[0].version == bs.tools.onnx_export.ONNX_OPSET
    session = ort.InferenceSession(str(path), providers=['CPUExecutionProvider'])
    x = np.random.RandomState(9).randn(2, 4, 6).astype(np.float32)
    (got,) = session.run(None, {'default': x})
    np.testing.assert_allclose(got.sum(axis=-1), 1.0, rtol=1e-5)
    _compare(net, session, x, ['Output.outputs.predictions'])


def test_sigmoid_and_squared_error_outputs(tmp_path):
    for task in ('multi-label', 'regression'):
        inp, out = bs.tools.get_in_out_layers(task, 3, 2)
        net = bs.Network.from_layer(inp >> FullyConnected(4) >> out)
        _randomise(net, 10)
        session = _session(net, tmp_path / f'{task}.onnx')
        x = np.random.RandomState(11).randn(2, 3, 3).astype(np.float32)
        _compare(net, session, x, ['Output.outputs.predictions'])


def test_layer_without_equivalent_is_named_with_its_type(tmp_path):
    inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
    # a subclass of Lstm's implementation, but not an Lstm
    net = bs.Network.from_layer(inp >> ClockworkLstm(5, name='Clock') >> out)
    net.initialize(bs.initializers.Gaussian(0.1))
    path = tmp_path / 'net.onnx'
    with pytest.raises(NetworkValidationError) as info:
        bs.tools.export_onnx(net, path)
    message = str(info.value)
    assert "'Clock'" in message and 'ClockworkLstm' in message
    assert 'FullyConnected' in message  # the exportable types are listed
    assert not path.exists()


def test_unknown_output_lists_the_outputs(tmp_path):
    net = mlp_net()
    with pytest.raises(NetworkValidationError) as info:
        bs.tools.export_onnx(net, tmp_path / 'x.onnx', outputs=['Hid3.outputs.default'])
    assert 'Hid3' in str(info.value)
    assert 'Hid1.outputs.default' in str(info.value)


def test_loss_output_is_refused(tmp_path):
    net = mlp_net()
    with pytest.raises(NetworkValidationError, match='targets'):
        bs.tools.export_onnx(net, tmp_path / 'x.onnx', outputs='Output.outputs.loss')


def bidirectional_net(make, masked):
    """A forward and a reverse layer made by ``make`` on one input, merged;
    the reverse one gets the mask if ``masked``."""
    features = {'default': ('T', 'B', 3)}
    if masked:
        features['mask'] = ('T', 'B', 1)
    inp = bs.layers.Input(features)
    forward, backward = make('Forward', False), make('Backward', True)
    inp - 'default' >> forward
    inp - 'default' >> backward
    if masked:
        inp - 'mask' >> 'mask' - backward
    merge = Merge(name='Both')
    forward >> 'inputs_1' - merge
    backward >> 'inputs_2' - merge
    return bs.Network.from_layer(merge)


REVERSIBLE = {
    'Lstm': lambda name, reverse: Lstm(4, reverse=reverse, name=name),
    'Recurrent': lambda name, reverse: Recurrent(4, reverse=reverse, name=name),
}
BIDIRECTIONAL_PATHS = [
    'Forward.outputs.default',
    'Backward.outputs.default',
    'Both.outputs.default',
]


@pytest.mark.parametrize('layer', sorted(REVERSIBLE))
def test_a_reverse_layer_runs_backwards_in_time(tmp_path, layer):
    net = bidirectional_net(REVERSIBLE[layer], masked=False)
    _randomise(net, 3)
    session = _session(net, tmp_path / 'bi.onnx', BIDIRECTIONAL_PATHS)
    for T, B in ((6, 2), (1, 3), (9, 1)):
        x = np.random.RandomState(T).randn(T, B, 3).astype(np.float32)
        _compare(net, session, x, BIDIRECTIONAL_PATHS)


@pytest.mark.parametrize('layer', sorted(REVERSIBLE))
def test_a_masked_reverse_layer_runs_each_sequence_within_its_length(tmp_path, layer):
    net = bidirectional_net(REVERSIBLE[layer], masked=True)
    _randomise(net, 4)
    session = _session(net, tmp_path / 'bi.onnx', BIDIRECTIONAL_PATHS)
    assert [i.name for i in session.get_inputs()] == ['default', 'mask']
    rnd = np.random.RandomState(5)
    x = rnd.randn(7, 4, 3).astype(np.float32)
    lengths = np.array([7, 3, 1, 5])
    mask = (np.arange(7)[:, None] < lengths).astype(np.float32)[..., None]
    net.provide_external_data({'default': x, 'mask': mask})
    net.forward_pass()
    got = session.run(BIDIRECTIONAL_PATHS, {'default': x, 'mask': mask})
    for path, value in zip(BIDIRECTIONAL_PATHS, got):
        expected = net.get(path)[:7]
        for b, n in enumerate(lengths):  # within each sequence's length
            np.testing.assert_allclose(
                value[:n, b], expected[:n, b], rtol=1e-5, atol=ATOL, err_msg=path
            )
    # the mask decides: the same data unmasked gives other outputs
    unmasked = session.run(
        ['Backward.outputs.default'], {'default': x, 'mask': np.ones_like(mask)}
    )[0]
    assert np.abs(unmasked[:3, 1] - got[1][:3, 1]).max() > 1e-3


@pytest.mark.parametrize(
    'padding, kernel, stride',
    [
        ('same', (2, 2), (1, 1)),
        ('same', (3, 3), (2, 2)),
        ((0, 1, 2, 1), (3, 3), (1, 1)),
        ((1, 0, 0, 1), (2, 3), (2, 1)),
    ],
)
def test_uneven_padding_is_exported(tmp_path, padding, kernel, stride):
    inp, out = bs.tools.get_in_out_layers('classification', (7, 6, 2), 3)
    net = bs.Network.from_layer(
        inp
        >> Convolution2D(3, kernel, stride=stride, padding=padding, name='Conv')
        >> Pooling2D(kernel, stride=stride, padding=padding, name='MaxPool')
        >> Pooling2D(kernel, type='avg', padding=padding, name='AvgPool')
        >> out
    )
    _randomise(net, 6)
    paths = [
        'Conv.outputs.default',
        'MaxPool.outputs.default',
        'AvgPool.outputs.default',
    ]
    session = _session(net, tmp_path / 'pad.onnx', paths)
    x = np.random.RandomState(7).randn(2, 3, 7, 6, 2).astype(np.float32)
    _compare(net, session, x, paths)


def test_pooling_padded_by_its_window_is_refused(tmp_path):
    inp, out = bs.tools.get_in_out_layers('classification', (6, 6, 2), 3)
    net = bs.Network.from_layer(inp >> Pooling2D((2, 2), padding=2, name='Pool') >> out)
    _randomise(net, 8)
    with pytest.raises(NetworkValidationError, match="'Pool'.*less padding"):
        bs.tools.export_onnx(net, tmp_path / 'x.onnx', outputs=['Pool.outputs.default'])
    assert not (tmp_path / 'x.onnx').exists()


@pytest.mark.parametrize('activation', ['softplus', 'leaky_rel', 'gelu'])
def test_the_newer_activations_agree(tmp_path, activation):
    inp, out = bs.tools.get_in_out_layers('classification', 6, 4)
    x = inp
    if activation != 'gelu':  # the layers that accept it
        x = x >> FullyConnected(5, activation=activation, name='Hid')
    if activation == 'leaky_rel':  # softplus: see the next test
        x = x >> Recurrent(4, activation=activation, name='Rnn')
        x = x >> Lstm(3, activation=activation, name='Lstm')
    net = bs.Network.from_layer(x >> Elementwise(activation, name='Act') >> out)
    _randomise(net, 9, std=1.0)
    paths = [
        p for p in output_paths(net) if p.split('.')[0] in ('Hid', 'Rnn', 'Lstm', 'Act')
    ]
    session = _session(net, tmp_path / 'act.onnx', paths)
    # values spread enough to reach both sides of every kink and the tails
    x = (np.random.RandomState(10).randn(4, 3, 6) * 4).astype(np.float32)
    _compare(net, session, x, paths)


@pytest.mark.parametrize('layer', sorted(REVERSIBLE))
def test_softplus_in_a_recurrent_layer_is_refused_with_the_reason(tmp_path, layer):
    # onnxruntime's RNN and LSTM compute it as log(1 + exp(x)): inf for
    # large x, where brainstorm's outputs are finite
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    make = {'Lstm': Lstm, 'Recurrent': Recurrent}[layer]
    net = bs.Network.from_layer(inp >> make(4, activation='softplus', name='R') >> out)
    _randomise(net, 12)
    with pytest.raises(NetworkValidationError, match="'R'.*'softplus'.*overflows"):
        bs.tools.export_onnx(net, tmp_path / 'x.onnx')
    assert not (tmp_path / 'x.onnx').exists()


def output_paths(net):
    return [
        f'{n}.outputs.{o}' for n, layer in net.layers.items() for o in layer.out_shapes
    ]


def test_an_uninitialised_network_is_refused(tmp_path):
    net = mlp_net()
    with pytest.raises(bs.structure.prediction.UninitializedNetworkError):
        bs.tools.export_onnx(net, tmp_path / 'x.onnx')
    assert not (tmp_path / 'x.onnx').exists()


def test_an_output_named_twice_is_refused_by_name(tmp_path):
    net = mlp_net()
    _randomise(net, 11)
    path = 'Hid1.outputs.default'
    with pytest.raises(NetworkValidationError, match='more than once'):
        bs.tools.export_onnx(net, tmp_path / 'x.onnx', outputs=[path, path])
    # a tuple of paths works as a list does
    bs.tools.export_onnx(net, tmp_path / 'x.onnx', outputs=(path,))


FRESH = textwrap.dedent(
    """
    import sys
    import numpy as np
    import onnxruntime as ort
    import brainstorm as bs

    folder = sys.argv[1]
    bs.global_rnd.set_seed(42)
    inp, out = bs.tools.get_in_out_layers('classification', 5, 3)
    net = bs.Network.from_layer(inp >> bs.layers.Lstm(6) >> out)
    net.initialize(bs.initializers.Gaussian(0.3))
    rnd = np.random.RandomState(0)
    x = rnd.randn(7, 4, 5).astype(np.float32)
    t = rnd.randint(0, 3, size=(7, 4, 1)).astype(np.float32)
    trainer = bs.Trainer(bs.training.SgdStepper(0.1), verbose=False)
    trainer.add_hook(bs.hooks.StopAfterEpoch(2))
    trainer.train(net, bs.data_iterators.Undivided(default=x, targets=t))
    net.save_as_hdf5(folder + '/net.h5')
    net = bs.Network.from_hdf5(folder + '/net.h5')
    bs.tools.export_onnx(net, folder + '/net.onnx')

    session = ort.InferenceSession(folder + '/net.onnx',
                                   providers=['CPUExecutionProvider'])
    for T, B in ((7, 4), (2, 9)):
        x = rnd.randn(T, B, 5).astype(np.float32)
        (got,) = session.run(None, {'default': x})
        net.provide_external_data({'default': x}, all_inputs=False)
        net.forward_pass()
        expected = net.get('Output.outputs.predictions')
        print(T, B, got.shape, float(np.abs(got - expected).max()))
    """
)


def test_fresh_process_train_save_load_export_run(tmp_path):
    done = subprocess.run(
        [sys.executable, '-c', FRESH, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.split('\n')[:2]
    assert [line.split(' ')[:4] for line in lines] == [
        ['7', '4', '(7,', '4,'],
        ['2', '9', '(2,', '9,'],
    ]
    for line in lines:
        assert float(line.split(' ')[-1]) < ATOL


def test_fresh_process_without_onnx_says_how_to_install(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        sys.modules['onnx'] = None  # as if it were not installed
        import brainstorm as bs
        inp, out = bs.tools.get_in_out_layers('classification', 4, 3)
        net = bs.Network.from_layer(inp >> bs.layers.FullyConnected(5) >> out)
        try:
            bs.tools.export_onnx(net, sys.argv[1])
        except ImportError as err:
            print(err)
        print(bs.optional.has_onnx)
        try:
            bs.optional.onnx_mock.helper
        except ImportError as err:
            print(err)
        """
    )
    done = subprocess.run(
        [sys.executable, '-c', code, str(tmp_path / 'net.onnx')],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3, done.stdout
    assert 'export_onnx needs onnx' in lines[0]
    assert "pip install 'brainstorm-nn[onnx]'" in lines[0]
    assert lines[1] == 'False'
    assert "Install it with pip install 'brainstorm-nn[onnx]'" in lines[2]
    assert not (tmp_path / 'net.onnx').exists()


def test_bad_path_is_refused_and_a_file_is_replaced_whole(tmp_path):
    net = mlp_net()
    _randomise(net, 12)
    with pytest.raises(NetworkValidationError, match='export_onnx'):
        bs.tools.export_onnx(net, b'net.onnx')
    path = tmp_path / 'net.onnx'
    path.write_bytes(b'old')
    session = _session(net, path)
    x = np.random.RandomState(13).randn(1, 2, 6).astype(np.float32)
    _compare(net, session, x, ['Output.outputs.predictions'])
    assert os.listdir(tmp_path) == ['net.onnx']  # no temporary file left


def test_the_data_itself_can_be_an_output(tmp_path):
    net = mlp_net()
    _randomise(net, 14)
    session = _session(net, tmp_path / 'net.onnx', ['Input.outputs.default'])
    x = np.random.RandomState(15).randn(2, 3, 6).astype(np.float32)
    _compare(net, session, x, ['Input.outputs.default'])
