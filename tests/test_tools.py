"""brainstorm.tools: network building, evaluation, extraction, inspection."""

import pathlib
import subprocess

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm import tools
from brainstorm.data_iterators import Minibatches, Undivided
from brainstorm.scorers import Accuracy
from brainstorm.tools import (
    create_net_from_spec,
    draw_network,
    evaluate,
    extract,
    extract_and_save,
    get_in_out_layers,
    get_network_info,
    print_network_info,
    shuffle_data,
    split,
)
from brainstorm.utils import FileWriteError, NetworkValidationError, ValidationError
from tests.training.nets import xor_data, xor_net


def layer_types(net):
    return [type(layer).__name__[: -len('LayerImpl')] for layer in net.layers.values()]


# ----------------------------------------------------- get_in_out_layers ---


def test_get_in_out_layers_classification():
    inp, proj = get_in_out_layers('classification', (4,), 3, mask_name='mask')
    net = bs.Network.from_layer(inp >> proj)
    assert net.layers['Input'].out_shapes['targets'].shape == ('T', 'B', 1)
    assert net.layers['Input'].out_shapes['mask'].shape == ('T', 'B', 1)
    assert layer_types(net) == ['Input', 'FullyConnected', 'SoftmaxCE', 'Mask', 'Loss']


# --------------------------------------------------- create_net_from_spec ---


def test_create_net_from_spec_layers_and_arguments():
    net = create_net_from_spec('classification', 5, 3, 'Fs8 D.2 R6 Lt4 B F|l7 D')
    assert layer_types(net) == [
        'Input',
        'FullyConnected',
        'Dropout',
        'Recurrent',
        'Lstm',
        'BatchNorm',
        'FullyConnected',
        'Dropout',
        'FullyConnected',
        'SoftmaxCE',
        'Loss',
    ]
    layers = list(net.layers.values())
    assert (layers[1].activation, layers[1].out_shapes['default'].shape[-1]) == (
        'sigmoid',
        8,
    )
    assert layers[2].drop_prob == 0.2 and layers[7].drop_prob == 0.5
    assert layers[3].activation == 'tanh' and layers[4].activation == 'tanh'
    assert layers[6].activation == 'linear'
    assert net.output_name == 'Output.outputs.predictions'


def test_create_net_from_spec_images():
    net = create_net_from_spec(
        'classification', (8, 8, 2), 4, 'C6:3p1s1 Pa2s2 Cl4:3 P2'
    )
    conv1, pool1, conv2, pool2 = list(net.layers.values())[1:5]
    assert conv1.out_shapes['default'].shape[2:] == (8, 8, 6)
    assert conv1.activation == 'rel'
    assert pool1.out_shapes['default'].shape[2:] == (4, 4, 6)
    assert conv2.activation == 'linear'
    assert conv2.out_shapes['default'].shape[2:] == (2, 2, 4)
    assert pool2.out_shapes['default'].shape[2:] == (1, 1, 4)


def test_create_net_from_spec_initialization():
    """0.5 Note: BatchNorm's parameters (sigma too) got Gaussian(0.1)."""
    net = create_net_from_spec('regression', 50, 2, 'F40 B')
    W = net.get('FullyConnected.parameters.W')
    limit = np.sqrt(12) / np.sqrt(40 + 50)
    assert np.abs(W).max() <= limit and np.abs(W).max() > 0.5 * limit
    assert net.get('BatchNorm.parameters.gamma').tolist() == [1.0] * 40
    assert net.get('BatchNorm.parameters.beta').tolist() == [0.0] * 40
    assert net.get('BatchNorm.parameters.mu').tolist() == [0.0] * 40
    assert net.get('BatchNorm.parameters.sigma').tolist() == [1.0] * 40
    bias = net.get('FullyConnected.parameters.bias')
    assert 0 < np.std(bias) < 0.3  # Gaussian fallback


@pytest.mark.parametrize(
    'spec', ['F', 'X10', 'F10 Q', 'Fx10', 'C4', 'D2x', 'P', 'C4:3q1', 'B3', 'f10']
)
def test_create_net_from_spec_bad_specs(spec):
    with pytest.raises(NetworkValidationError, match='create_net_from_spec'):
        create_net_from_spec('classification', 5, 3, spec)


# --------------------------------------------------------------- evaluate ---


def test_evaluate_matches_a_manual_pass():
    net = xor_net()
    result = evaluate(net, Minibatches(2, shuffle=False, **xor_data()), [Accuracy()])
    net.provide_external_data(xor_data())
    net.forward_pass()
    predictions = net.get('Output.outputs.predictions')[0]
    accuracy = np.mean(predictions.argmax(1) == xor_data()['targets'][0, :, 0])
    assert list(result) == ['total_loss', 'Accuracy']
    assert result['Accuracy'] == pytest.approx(accuracy)
    assert result['total_loss'] == pytest.approx(net.get_loss_values()['total_loss'])


def test_evaluate_uses_inference_passes():
    passes = []
    net = xor_net()
    forward = net.forward_pass
    net.forward_pass = lambda training_pass=False, context=None: (
        passes.append(training_pass),
        forward(training_pass, context),
    )
    evaluate(net, Undivided(**xor_data()))
    assert passes == [False]


# ---------------------------------------------------------------- extract ---


def sequence_net():
    from brainstorm.layers import FullyConnected

    inp, proj = get_in_out_layers('regression', 2, 3)
    net = bs.Network.from_layer(inp >> FullyConnected(4, name='Hid') >> proj)
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    return net


def sequences():
    rnd = np.random.RandomState(0)
    x = rnd.randn(5, 6, 2)
    mask = np.ones((5, 6, 1))
    mask[3:, :3] = 0  # the first three sequences have 3 steps
    return {'default': x, 'targets': rnd.randn(5, 6, 3), 'mask': mask}


def test_extract_concatenates_batches():
    net = sequence_net()
    data = sequences()
    data.pop('mask')
    result = extract(
        net,
        Minibatches(4, shuffle=False, **data),
        ['Hid.outputs.default', 'Hid.parameters.W'],
    )
    net.provide_external_data(data)
    net.forward_pass()
    np.testing.assert_allclose(
        result['Hid.outputs.default'], net.get('Hid.outputs.default'), rtol=1e-6
    )
    assert result['Hid.outputs.default'].shape == (5, 6, 4)
    np.testing.assert_array_equal(
        result['Hid.parameters.W'], net.get('Hid.parameters.W')
    )
    single = extract(net, Undivided(default=data['default']), 'Hid.outputs.default')
    assert single['Hid.outputs.default'].shape == (5, 6, 4)


def test_extract_pads_shorter_batches():
    net = sequence_net()
    data = sequences()
    iterator = Minibatches(
        3,
        shuffle=False,
        cut_according_to='mask',
        default=data['default'],
        mask=data['mask'],
    )
    result = extract(net, iterator, 'Hid.outputs.default')['Hid.outputs.default']
    assert result.shape == (5, 6, 4)
    assert not result[3:, :3].any()
    assert result[3:, 3:].any()


def test_extract_and_save_grows_time_and_batch(tmp_path):
    """0.5 Note: T was fixed by the first batch; here a longer later batch
    grows the dataset."""
    net = sequence_net()
    data = sequences()
    filename = str(tmp_path / 'buffers.hdf5')
    iterator = Minibatches(
        3,
        shuffle=False,
        cut_according_to='mask',
        default=data['default'],
        mask=data['mask'],
    )
    extract_and_save(
        net, iterator, ['Hid.outputs.default', 'Hid.parameters.bias'], filename
    )
    expected = extract(net, iterator, 'Hid.outputs.default')
    with h5py.File(filename, 'r') as f:
        assert f.attrs['format'] == b'Buffers file v1.0'
        stored = f['Hid.outputs.default'][()]
        assert f['Hid.parameters.bias'].shape == (4,)
    np.testing.assert_array_equal(stored, expected['Hid.outputs.default'])


def test_extract_unknown_buffer():
    with pytest.raises(NetworkValidationError, match='Unknown buffer'):
        extract(sequence_net(), Undivided(**xor_data()), 'Nope.outputs.x')
    with pytest.raises(NetworkValidationError, match='view'):
        extract(sequence_net(), Undivided(**xor_data()), 'Hid.outputs')


# -------------------------------------------------------------- inspection ---


def test_network_info():
    net = xor_net(hidden=5)
    info = get_network_info(net)
    lines = info.splitlines()
    assert lines[0] == f'Total number of parameters: {5 * 2 + 5 + 2 * 5 + 2}'
    assert '-' * 80 in lines
    assert 'Hid (FullyConnected)' in lines
    assert '  parameters: W (5, 2), bias (5,) = 15' in lines
    assert '  inputs: default (2,)' in lines
    assert '  outputs: default (5,)' in lines


def test_print_network_info(capsys):
    net = xor_net()
    print_network_info(net)
    out = capsys.readouterr().out
    assert out.startswith('=' * 80)
    assert get_network_info(net) in out


def test_draw_network_without_graphviz(tmp_path, monkeypatch):
    monkeypatch.setattr(tools.inspection.shutil, 'which', lambda name: None)
    with pytest.warns(UserWarning, match="Graphviz's 'dot' program was not found"):
        result = draw_network(xor_net(), str(tmp_path / 'net.png'))
    assert result == str(tmp_path / 'net.dot')
    text = open(result).read()
    assert text.startswith('digraph network {')
    assert '"Hid" -> "Output_projection" [label="default -> default"];' in text
    assert '"Input" -> "Output" [label="targets -> targets"];' in text


def test_draw_network_with_graphviz(tmp_path, monkeypatch):
    calls = []

    def run(args, **kwargs):
        calls.append(args)
        pathlib.Path(args[-1]).write_text('<svg/>')
        return subprocess.CompletedProcess(args, 0, '', '')

    monkeypatch.setattr(tools.inspection.shutil, 'which', lambda name: '/usr/bin/dot')
    monkeypatch.setattr(tools.inspection.subprocess, 'run', run)
    result = draw_network(xor_net(), tmp_path / 'net.svg')
    assert result == str(tmp_path / 'net.svg')
    assert len(calls) == 1
    assert calls[0][:4] == ['/usr/bin/dot', '-Tsvg', str(tmp_path / 'net.dot'), '-o']
    # rendered into a temporary file of the same folder, then moved
    assert pathlib.Path(calls[0][4]).parent == tmp_path
    assert (tmp_path / 'net.svg').read_text() == '<svg/>'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['net.dot', 'net.svg']


def test_a_failing_dot_keeps_the_previous_drawing(tmp_path, monkeypatch):
    def run(args, **kwargs):
        pathlib.Path(args[-1]).write_text('half')
        return subprocess.CompletedProcess(args, 1, '', 'out of memory')

    (tmp_path / 'net.svg').write_text('previous')
    monkeypatch.setattr(tools.inspection.shutil, 'which', lambda name: '/usr/bin/dot')
    monkeypatch.setattr(tools.inspection.subprocess, 'run', run)
    with pytest.raises(FileWriteError, match='net.svg.*dot failed: out of memory'):
        draw_network(xor_net(), str(tmp_path / 'net.svg'))
    assert (tmp_path / 'net.svg').read_text() == 'previous'
    assert sorted(p.name for p in tmp_path.iterdir()) == ['net.dot', 'net.svg']


# -------------------------------------------------------------------- data ---


def test_shuffle_data():
    a = np.arange(10).reshape(1, 10, 1)
    b = np.arange(10, 20).reshape(1, 10, 1)
    x, none, y = shuffle_data(a, None, b, seed=3)
    assert none is None
    assert sorted(x.ravel()) == list(range(10))
    assert not np.array_equal(x, a)
    np.testing.assert_array_equal(y - 10, x)
    again = shuffle_data(a, b, seed=3)
    np.testing.assert_array_equal(again[0], x)
    with pytest.raises(ValidationError, match='axis 1'):
        shuffle_data(a, np.zeros((1, 3, 1)))


def test_split():
    a = np.arange(10).reshape(1, 10, 1)
    (a1, n1), (a2, n2) = split(a, None)
    assert a1.shape == (1, 9, 1) and a2.ravel().tolist() == [9]
    assert n1 is None and n2 is None
    parts = split(a, ratios=(1, 1, 1))
    assert [p[0].shape[1] for p in parts] == [3, 4, 3]
    assert np.concatenate([p[0] for p in parts], axis=1).ravel().tolist() == list(
        range(10)
    )
    with pytest.raises(ValidationError, match='ratios'):
        split(a, ratios=(1, 0))


@pytest.mark.parametrize('layer', ['Lstm', 'Recurrent'])
def test_extract_returns_only_the_data_time_steps_of_context_layers(layer, tmp_path):
    """0.5 semantics: extract gives exactly the data's time steps. (Guards
    against: returning the context slot as a trailing zero row, which with
    batches of different lengths landed in the middle of the padded
    output.) Each sequence must equal a run of the network on it alone."""
    from brainstorm import layers

    inp, proj = get_in_out_layers('regression', 2, 3)
    net = bs.Network.from_layer(inp >> getattr(layers, layer)(4, name='Rec') >> proj)
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    data = sequences()
    iterator = Minibatches(
        3,
        shuffle=False,
        cut_according_to='mask',
        default=data['default'],
        mask=data['mask'],
    )
    name = 'Rec.outputs.default'
    result = extract(net, iterator, name)[name]
    assert result.shape == (5, 6, 4)
    filename = str(tmp_path / 'buffers.hdf5')
    extract_and_save(net, iterator, name, filename)
    with h5py.File(filename, 'r') as f:
        np.testing.assert_array_equal(f[name][()], result)
    for b in range(6):
        steps = 3 if b < 3 else 5
        net.provide_external_data(
            {'default': data['default'][:steps, b : b + 1]}, all_inputs=False
        )
        net.forward_pass()
        alone = net.get(name)[:steps, 0]
        np.testing.assert_allclose(result[:steps, b], alone, rtol=1e-12)
        assert not result[steps:, b].any()


# ---------------------------------------- results in data order (issue 26) ---


def _identity_net():
    """Input(1) -> Output: predictions are the inputs (x * 1 + 0)."""
    inp, out = bs.tools.get_in_out_layers('regression', 1, 1)
    net = bs.Network.from_layer(inp >> out)
    net.initialize({'default': 1.0, 'Output_projection': {'bias': 0.0}})
    return net


def _ordered_data(n=10, T=1):
    x = np.arange(float(n)).reshape(1, n, 1).repeat(T, axis=0)
    return {'default': x, 'targets': x}


def _shuffling_chains(data):
    minibatches = Minibatches(3, **data)  # shuffle=True, the 0.5 default
    return {
        'Minibatches': minibatches,
        'noise': bs.data_iterators.AddGaussianNoise(
            Minibatches(3, **data), {'targets': 1.0}
        ),
        'Shard': bs.data_iterators.Shard(Minibatches(4, **data), rank=0, size=1),
        'samples': Minibatches(3, shuffle='samples', **data),
    }


@pytest.mark.parametrize('chain', ['Minibatches', 'noise', 'Shard', 'samples'])
def test_extract_returns_the_data_order_of_shuffling_iterators(chain):
    data = _ordered_data()
    iterator = _shuffling_chains(data)[chain]
    shuffling = iterator
    while not isinstance(shuffling, Minibatches):
        shuffling = shuffling.iter
    state = shuffling.rnd.get_state()[1].copy()
    for _ in range(3):  # each pass would draw another batch order
        got = extract(_identity_net(), iterator, 'Output.outputs.predictions')
        np.testing.assert_array_equal(
            got['Output.outputs.predictions'].ravel(), np.arange(10.0)
        )
    # the iterator itself still shuffles, and extract drew no batch order
    np.testing.assert_array_equal(shuffling.rnd.get_state()[1], state)
    assert shuffling.shuffle == ('samples' if chain == 'samples' else True)


def test_extract_and_save_writes_the_data_order(tmp_path):
    data = _ordered_data(T=2)
    path = tmp_path / 'out.h5'
    extract_and_save(
        _identity_net(), Minibatches(3, **data), 'Output.outputs.predictions', path
    )
    with h5py.File(path, 'r') as f:
        stored = f['Output.outputs.predictions'][()]
    assert stored.shape == (2, 10, 1)
    np.testing.assert_array_equal(stored[1].ravel(), np.arange(10.0))


def test_evaluate_does_not_depend_on_the_batch_order():
    data = _ordered_data()
    net = _identity_net()
    net.set_handler(bs.handlers.NumpyHandler(np.float64))
    net.buffer.Output_projection.parameters.W[:] = 0.5  # a non-zero loss
    figures = [
        evaluate(net, Minibatches(3, shuffle=shuffle, **data))['total_loss']
        for shuffle in (False, True, True)
    ]
    assert figures[0] > 0
    np.testing.assert_allclose(figures[1:], figures[0], rtol=1e-14)


# ------------------------------------------ extract: what it can compute ---


@pytest.mark.parametrize('extractor', ['extract', 'extract_and_save'])
def test_extract_refuses_an_iterator_without_the_targets_of_a_loss(extractor, tmp_path):
    # the loss was computed from the targets the last batch left (or zeros),
    # so the values depended on what ran before
    net = sequence_net()
    data = sequences()
    it = Minibatches(3, shuffle=False, default=data['default'])
    args = (tmp_path / 'out.h5',) if extractor == 'extract_and_save' else ()
    with pytest.raises(bs.structure.network.MissingInputError, match=r"\['targets'\]"):
        getattr(tools, extractor)(net, it, 'Loss.outputs.loss', *args)


def test_extract_of_what_needs_no_targets_runs_without_them():
    net = sequence_net()
    data = sequences()
    got = extract(net, Minibatches(3, shuffle=False, default=data['default']),
                  'Hid.outputs.default')  # fmt: skip
    net.provide_external_data({'default': data['default']}, all_inputs=False)
    net.forward_pass()
    np.testing.assert_allclose(
        got['Hid.outputs.default'], net.get('Hid.outputs.default')
    )


@pytest.mark.parametrize(
    'name', ['Hid.output_deltas.default', 'Hid.input_deltas.default', 'Hid.gradients.W']
)
def test_extract_refuses_what_no_forward_pass_computes(name):
    # the last backward pass's values came back, stale
    net = sequence_net()
    data = sequences()
    data.pop('mask')
    with pytest.raises(NetworkValidationError, match='not computed by a forward pass'):
        extract(net, Minibatches(3, shuffle=False, **data), name)


@pytest.mark.parametrize('function', ['evaluate', 'extract', 'extract_and_save'])
@pytest.mark.parametrize('data', ['dict', 'array'])
def test_arrays_given_as_the_iterator_are_refused_with_a_hint(function, data, tmp_path):
    # a dict was iterated key by key: "Data must be a dict ... Received: str"
    net = sequence_net()
    given = sequences() if data == 'dict' else sequences()['default']
    args = {
        'evaluate': (),
        'extract': ('Hid.outputs.default',),
        'extract_and_save': ('Hid.outputs.default', tmp_path / 'out.h5'),
    }[function]
    received = "a dict with the keys \\['default'" if data == 'dict' else 'an array'
    with pytest.raises(
        bs.errors.IteratorValidationError, match=f'Received {received}.*Minibatches'
    ):
        getattr(tools, function)(net, given, *args)


def test_a_batch_that_is_no_dict_is_refused_naming_it():
    net = sequence_net()
    x = sequences()['default']
    with pytest.raises(bs.errors.IteratorValidationError, match='Batch 0 of the data'):
        extract(net, [x], 'Hid.outputs.default')


def test_extract_leaves_the_random_state_of_an_augmenting_wrapper():
    # docs/inference.rst: the iterator and its random state are left as
    # they were; an AddGaussianNoise wrapper's noise state moved on
    net = sequence_net()
    data = sequences()
    data.pop('mask')
    noisy = bs.data_iterators.AddGaussianNoise(Minibatches(3, **data), {'default': 0.5})
    before = noisy.rnd.get_state()[1].copy(), noisy.iter.rnd.get_state()[1].copy()
    first = extract(net, noisy, 'Hid.outputs.default')
    assert np.array_equal(noisy.rnd.get_state()[1], before[0])
    assert np.array_equal(noisy.iter.rnd.get_state()[1], before[1])
    second = extract(net, noisy, 'Hid.outputs.default')
    np.testing.assert_array_equal(
        first['Hid.outputs.default'], second['Hid.outputs.default']
    )


def test_extract_refuses_a_backward_only_internal():
    # the last backward pass's values came back (a LayerNorm's 'scratch')
    inp, out = get_in_out_layers('regression', 2, 3)
    net = bs.Network.from_layer(inp >> bs.layers.LayerNorm(name='LN') >> out)
    net.initialize(bs.initializers.Gaussian(0.5), seed=1)
    data = sequences()
    data.pop('mask')
    with pytest.raises(NetworkValidationError, match='backward-only internals'):
        extract(net, Minibatches(3, shuffle=False, **data), 'LN.internals.scratch')


class _SequenceOfBatches:
    """Iterable through __getitem__ only (no __iter__), as Python allows."""

    def __init__(self, batches):
        self.batches = batches

    def __getitem__(self, index):
        return self.batches[index]


class _DuckBatch:
    """A batch with items() but no Mapping: provide_external_data takes it."""

    def __init__(self, data):
        self.data = data

    def items(self):
        return self.data.items()

    def __getitem__(self, key):
        return self.data[key]

    def __contains__(self, key):
        return key in self.data

    def __iter__(self):
        return iter(self.data)

    def keys(self):
        return self.data.keys()


@pytest.mark.parametrize('kind', ['getitem-iterable', 'duck-batch'])
def test_iterables_that_worked_before_the_checks_still_work(kind):
    net = sequence_net()
    data = sequences()
    data.pop('mask')
    batch = _DuckBatch(data) if kind == 'duck-batch' else data
    batches = _SequenceOfBatches([batch]) if kind == 'getitem-iterable' else [batch]
    got = extract(net, batches, 'Hid.outputs.default')['Hid.outputs.default']
    net.provide_external_data(data)
    net.forward_pass()
    np.testing.assert_allclose(got, net.get('Hid.outputs.default'))
    assert np.isfinite(evaluate(net, batches)['total_loss'])
