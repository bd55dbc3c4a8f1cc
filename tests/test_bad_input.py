"""Bad input of every kind raises a ValidationError subclass naming the culprit.

Each case builds something malformed (architecture, layer argument,
connection, data dict, HDF5 file) and asserts

* the exact ValidationError subclass (no bare KeyError, IndexError, TypeError
  or NumPy error reaches the user), and
* that the message names the culprit (layer, input, argument or file) and,
  where a value was given, what was received.
"""

import copy
import json
import warnings

import h5py
import numpy as np
import pytest

from brainstorm.layers import (
    FullyConnected,
    Input,
    Loss,
    Recurrent,
    SoftmaxCE,
    SquaredError,
)
from brainstorm.structure.architecture import generate_architecture
from brainstorm.structure.buffer_structure import (
    BufferStructure,
    StructureTemplate,
)
from brainstorm.structure.network import Network
from brainstorm.utils import (
    IteratorValidationError,
    LayerValidationError,
    NetworkValidationError,
    StructureValidationError,
    ValidationError,
    add_checksums,
)

FAMILY = (
    NetworkValidationError,
    LayerValidationError,
    IteratorValidationError,
    StructureValidationError,
)


def params(cases):
    """pytest params from ``(id, *values[, mark])`` tuples."""
    result = []
    for case in cases:
        marks = ()
        if isinstance(case[-1], pytest.MarkDecorator):
            case, marks = case[:-1], case[-1]
        result.append(pytest.param(*case[1:], id=case[0], marks=marks))
    return result


def assert_raises_naming(error, culprits, action, *args, **kwargs):
    """Run ``action``; check the error type and that the message names all
    ``culprits``."""
    with pytest.raises(ValidationError) as info:
        action(*args, **kwargs)
    err = info.value
    assert [c for c in FAMILY if isinstance(err, c)] == [error], (
        f'expected {error.__name__}, got {type(err).__name__}: {err}'
    )
    message = str(err)
    for culprit in culprits:
        assert culprit in message, f'{culprit!r} not named in message: {message}'
    return err


# ----------------------------------------------------------- architectures ---


def classifier_architecture():
    inp = Input(out_shapes={'default': ('T', 'B', 3), 'targets': ('T', 'B', 1)})
    out = SoftmaxCE(name='Out')
    inp >> FullyConnected(4, name='Hid') >> Recurrent(2, name='Rnn') >> out
    inp - 'targets' >> 'targets' - out - 'loss' >> Loss()
    return generate_architecture(inp)


def _set(layer, key, value):
    def change(arch):
        arch[layer][key] = value

    return change


def _out(layer, out_name, targets):
    def change(arch):
        arch[layer]['@outgoing_connections'][out_name] = targets

    return change


def _del(layer, key=None):
    def change(arch):
        if key is None:
            del arch[layer]
        else:
            del arch[layer][key]

    return change


def _rename(old, new):
    def change(arch):
        arch[new] = arch.pop(old)
        for entry in arch.values():
            for targets in entry['@outgoing_connections'].values():
                targets[:] = [
                    new + t[len(old) :] if t.split('.')[0] == old else t
                    for t in targets
                ]

    return change


def _add(name, entry):
    def change(arch):
        arch[name] = entry

    return change


def _both(*changes):
    def change(arch):
        for c in changes:
            c(arch)

    return change


ARCHITECTURE_CASES = [
    # id, change, error, culprits
    (
        'layer-name-not-string',
        _add(3, {'@type': 'Loss', '@outgoing_connections': {}}),
        NetworkValidationError,
        ['3'],
    ),
    (
        'layer-name-default',
        _rename('Loss', 'default'),
        NetworkValidationError,
        ["'default'"],
    ),
    (
        'layer-name-not-identifier',
        _rename('Loss', 'my loss'),
        NetworkValidationError,
        ["'my loss'"],
    ),
    ('layer-name-with-dot', _rename('Loss', 'a.b'), NetworkValidationError, ["'a.b'"]),
    (
        'entry-not-dict',
        _add('Loss', ['Loss']),
        NetworkValidationError,
        ["'Loss'", 'dict'],
    ),
    ('type-missing', _del('Hid', '@type'), NetworkValidationError, ["'Hid'", '@type']),
    (
        'type-not-string',
        _set('Hid', '@type', 5),
        NetworkValidationError,
        ["'Hid'", '@type', '5'],
    ),
    (
        'type-invalid',
        _set('Hid', '@type', 'Fully Connected'),
        NetworkValidationError,
        ["'Hid'", 'Fully Connected'],
    ),
    (
        'type-unknown',
        _set('Hid', '@type', 'NoSuchLayer'),
        NetworkValidationError,
        ["'Hid'", 'NoSuchLayer'],
    ),
    (
        'outgoing-missing',
        _del('Rnn', '@outgoing_connections'),
        NetworkValidationError,
        ["'Rnn'", '@outgoing_connections'],
    ),
    (
        'outgoing-not-dict',
        _set('Rnn', '@outgoing_connections', 'Out'),
        NetworkValidationError,
        ["'Rnn'", '@outgoing_connections', 'str'],
    ),
    (
        'outgoing-none',
        _set('Rnn', '@outgoing_connections', None),
        NetworkValidationError,
        ["'Rnn'", 'NoneType'],
    ),
    (
        'output-name-not-string',
        _out('Rnn', 1, ['Out']),
        NetworkValidationError,
        ["'Rnn'", '1'],
    ),
    (
        'destinations-not-list',
        _out('Rnn', 'default', 'Out'),
        NetworkValidationError,
        ["'Rnn'", "'default'", "'Out'"],
    ),
    (
        'destination-not-string',
        _out('Rnn', 'default', [('Out',)]),
        NetworkValidationError,
        ["'Rnn'", "('Out',)"],
    ),
    (
        'destination-unknown-layer',
        _out('Rnn', 'default', ['Ouch']),
        NetworkValidationError,
        ["'Rnn'", "'Ouch'"],
    ),
    (
        'destination-malformed',
        _out('Rnn', 'default', ['Out.a.b']),
        NetworkValidationError,
        ["'Rnn'", "'Out.a.b'"],
    ),
    (
        'destination-twice',
        _out('Rnn', 'default', ['Out', 'Out.default']),
        NetworkValidationError,
        ["'Rnn'", 'more than once'],
    ),
    ('no-input-layer', _rename('Input', 'Data'), NetworkValidationError, ["'Input'"]),
    (
        'input-of-wrong-type',
        _set('Input', '@type', 'FullyConnected'),
        NetworkValidationError,
        ["'Input'"],
    ),
    (
        'second-input-layer',
        _set('Hid', '@type', 'Input'),
        NetworkValidationError,
        ["'Hid'", "'Input'"],
    ),
    (
        'connection-into-input',
        _out('Rnn', 'default', ['Out', 'Input']),
        NetworkValidationError,
        ["'Rnn'", 'Input'],
    ),
    (
        'cycle',
        _out('Rnn', 'default', ['Out', 'Hid']),
        NetworkValidationError,
        ['cycle', 'Hid', 'Rnn'],
    ),
    (
        'self-loop',
        _out('Hid', 'default', ['Rnn', 'Hid']),
        NetworkValidationError,
        ['cycle', 'Hid -> Hid'],
    ),
    (
        'disconnected-layer',
        _add('Lonely', {'@type': 'FullyConnected', '@outgoing_connections': {}}),
        NetworkValidationError,
        ['Lonely', 'Input'],
    ),
    (
        'disconnected-chain',
        _both(
            _add(
                'A',
                {
                    '@type': 'FullyConnected',
                    '@outgoing_connections': {'default': ['Out.targets']},
                },
            ),
            _out('Input', 'targets', []),
        ),
        NetworkValidationError,
        ["'A'"],
    ),
    (
        'reserved-layer-name',
        _rename('Loss', 'parameters'),
        NetworkValidationError,
        ["'parameters'"],
    ),
    (
        'loss-named-total-loss',
        _rename('Loss', 'total_loss'),
        LayerValidationError,
        ["'total_loss'"],
    ),
    # layer arguments inside an architecture
    (
        'kwarg-unknown',
        _set('Hid', 'colour', 'red'),
        LayerValidationError,
        ["'Hid'", 'colour'],
    ),
    (
        'kwarg-ill-typed',
        _set('Hid', 'size', 'x'),
        LayerValidationError,
        ["'Hid'", 'size', "Received: size='x'"],
    ),
    (
        'kwarg-negative',
        _set('Rnn', 'size', -1),
        LayerValidationError,
        ["'Rnn'", 'Received: size=-1'],
    ),
    (
        'kwarg-required-missing',
        _del('Input', 'out_shapes'),
        LayerValidationError,
        ["'Input'", 'out_shapes'],
    ),
    (
        'input-shapes-malformed',
        _set('Input', 'out_shapes', {'default': ['T', 'B', 'x']}),
        LayerValidationError,
        ["'Input'", 'out_shapes', "'x'"],
    ),
    # connections inside an architecture
    (
        'unknown-output-name',
        _out('Hid', 'nope', ['Out']),
        LayerValidationError,
        ["'Hid'", "'nope'"],
    ),
    (
        'unknown-input-name',
        _out('Rnn', 'default', ['Out.nope']),
        LayerValidationError,
        ["'Out'", "'nope'"],
    ),
    (
        'expected-input-unconnected',
        _out('Input', 'targets', []),
        LayerValidationError,
        ["'Out'", "'targets'"],
    ),
]


@pytest.mark.parametrize('change, error, culprits', params(ARCHITECTURE_CASES))
def test_malformed_architecture(change, error, culprits):
    arch = classifier_architecture()
    Network.from_architecture(copy.deepcopy(arch))  # the original is fine
    change(arch)
    assert_raises_naming(error, culprits, Network.from_architecture, arch)


@pytest.mark.parametrize('arch', [None, [], 'Input', 3, ('Input',)], ids=repr)
def test_architecture_not_a_dict(arch):
    assert_raises_naming(
        NetworkValidationError,
        ['dict', type(arch).__name__],
        Network.from_architecture,
        arch,
    )


def test_empty_architecture():
    assert_raises_naming(
        NetworkValidationError, ["'Input'"], Network.from_architecture, {}
    )


# ------------------------------------------------------- layer arguments ---

KWARG_CASES = [
    (
        'fc-size-negative',
        lambda: FullyConnected(size=-3, name='Hid1'),
        ["FullyConnected 'Hid1'", 'size', 'positive int', 'Received: size=-3'],
    ),
    (
        'fc-size-zero',
        lambda: FullyConnected(size=0, name='Hid1'),
        ["'Hid1'", 'Received: size=0'],
    ),
    (
        'fc-size-string',
        lambda: FullyConnected(size='x', name='Hid1'),
        ["'Hid1'", "Received: size='x'"],
    ),
    (
        'fc-size-float',
        lambda: FullyConnected(size=3.0, name='Hid1'),
        ["'Hid1'", 'Received: size=3.0'],
    ),
    (
        'fc-size-tuple-with-zero',
        lambda: FullyConnected(size=(2, 0), name='Hid1'),
        ["'Hid1'", 'Received: size=(2, 0)'],
    ),
    (
        'fc-activation-unknown',
        lambda: FullyConnected(3, activation='foo', name='Hid1'),
        ["'Hid1'", 'activation', "'tanh'", "Received: activation='foo'"],
    ),
    (
        'fc-activation-none',
        lambda: FullyConnected(3, activation=None),
        ["'FullyConnected'", 'Received: activation=None'],
    ),
    (
        'rnn-size-float',
        lambda: Recurrent(size=2.5, name='Rnn'),
        ["Recurrent 'Rnn'", 'positive int', 'Received: size=2.5'],
    ),
    (
        'rnn-size-bool',
        lambda: Recurrent(size=True, name='Rnn'),
        ["'Rnn'", 'Received: size=True'],
    ),
    (
        'rnn-activation-unknown',
        lambda: Recurrent(2, activation='swish'),
        ["'Recurrent'", "Received: activation='swish'"],
    ),
    (
        'loss-importance-string',
        lambda: Loss(importance='x', name='L'),
        ["Loss 'L'", 'importance', "Received: importance='x'"],
    ),
    (
        'loss-importance-nan',
        lambda: Loss(importance=float('nan')),
        ["'Loss'", 'Received: importance=nan'],
    ),
    (
        'input-shapes-not-dict',
        lambda: Input(out_shapes=[('T', 'B', 3)]),
        ["Input 'Input'", 'out_shapes', "Received: out_shapes=[('T', 'B', 3)]"],
    ),
    (
        'input-shapes-empty',
        lambda: Input(out_shapes={}),
        ["'Input'", 'Received: out_shapes={}'],
    ),
    (
        'input-shape-without-time-or-batch',
        lambda: Input(out_shapes={'default': (3,)}),
        ["'Input'", "Received: out_shapes={'default': (3,)}"],
    ),
    (
        'input-shape-without-features',
        lambda: Input(out_shapes={'default': ('T', 'B')}),
        ["'Input'", "('T', 'B')"],
    ),
    (
        'input-shape-zero-feature',
        lambda: Input(out_shapes={'default': ('T', 'B', 0)}),
        ["'Input'", "('T', 'B', 0)"],
    ),
    (
        'input-shape-float-feature',
        lambda: Input(out_shapes={'default': ('T', 'B', 2.0)}),
        ["'Input'", "('T', 'B', 2.0)"],
    ),
    (
        'input-shape-swapped',
        lambda: Input(out_shapes={'default': ('B', 'T', 3)}),
        ["'Input'", "('B', 'T', 3)"],
    ),
    (
        'input-output-name-invalid',
        lambda: Input(out_shapes={'my data': ('T', 'B', 3)}),
        ["'Input'", "'my data'"],
    ),
    (
        'input-shape-not-a-tuple',
        lambda: Input(out_shapes={'default': 'TB3'}),
        ["'Input'", "'TB3'"],
    ),
]


@pytest.mark.parametrize('make, culprits', params(KWARG_CASES))
def test_bad_layer_argument(make, culprits):
    assert_raises_naming(LayerValidationError, culprits, make)


@pytest.mark.parametrize('name', ['default', 'fallback', '2fast', 'a-b'])
def test_bad_layer_name(name):
    assert_raises_naming(
        NetworkValidationError, [repr(name)], FullyConnected, 3, name=name
    )


# ------------------------------------------------------------ connections ---


def _build(connect):
    def build():
        inp = Input(
            out_shapes={
                'default': ('T', 'B', 3),
                'targets': ('T', 'B', 1),
                'seq': ('B', 3),
                'image': ('T', 'B', 2, 2),
            }
        )
        connect(inp)
        return Network.from_layer(inp)

    return build


def _softmax(targets_name):
    def connect(inp):
        out = SoftmaxCE(name='Out')
        inp >> out
        inp - targets_name >> 'targets' - out - 'loss' >> Loss()

    return connect


def _into_loss(*outputs):
    def connect(inp):
        loss = Loss(name='Sum')
        for name in outputs:
            inp - name >> loss

    return connect


def _from_fc(selector):
    def connect(inp):
        inp >> FullyConnected(2, name='Hid') - selector >> Loss(name='Sum')

    return connect


def _from_rnn(selector):
    def connect(inp):
        inp >> Recurrent(2, name='Rnn') - selector >> Loss(name='Sum')

    return connect


CONNECTION_CASES = [
    (
        'unknown-input-name',
        lambda inp: inp >> 'nope' - FullyConnected(2, name='Hid'),
        ["FullyConnected 'Hid'", "'nope'", "'default'"],
    ),
    (
        'expected-input-unconnected',
        lambda inp: inp >> SoftmaxCE(name='Out') - 'loss' >> Loss(),
        ["SoftmaxCE 'Out'", "'targets'", 'not connected'],
    ),
    (
        'unknown-output-name',
        _from_fc('nope'),
        ["FullyConnected 'Hid'", "'nope'", "'default'"],
    ),
    (
        'expose-unknown-parameter',
        _from_fc('..parameters.Q'),
        ["'Hid'", '..parameters.Q'],
    ),
    (
        'expose-outputs-category',
        _from_fc('..outputs.default'),
        ["'Hid'", '..outputs.default'],
    ),
    ('expose-internal-without-delta', _from_rnn('..internals.dHa'), ["'Rnn'", 'dHa']),
    (
        'template-mismatch-batch-sized',
        lambda inp: inp - 'seq' >> FullyConnected(2, name='Hid') >> Loss(),
        ["'Hid'", "'default'", "('B', 3)"],
    ),
    (
        'softmax-targets-wrong-shape',
        _softmax('default'),
        ["SoftmaxCE 'Out'", 'targets', "('T', 'B', 3)"],
    ),
    (
        'squared-error-shape-mismatch',
        lambda inp: (
            inp >> SquaredError(name='SE'),
            inp - 'targets' >> 'targets' - SquaredError(name='SE'),
        ),
        ["'SE_1'"],
    ),
    (
        'concatenate-rank-mismatch',
        _into_loss('default', 'image'),
        ["Loss 'Sum'", "'default'", 'Input.image', "'B', 2, 2)"],
    ),
    (
        'concatenate-type-mismatch',
        _into_loss('default', 'seq'),
        ["Loss 'Sum'", "'default'", "('B', 3)"],
    ),
]


@pytest.mark.parametrize('connect, culprits', params(CONNECTION_CASES))
def test_bad_connection(connect, culprits):
    assert_raises_naming(LayerValidationError, culprits, _build(connect))


@pytest.mark.parametrize(
    'shape, culprit',
    [
        (('B', 'T', 3), "'T'"),
        (('T', 'B', 'F', 3), "'F'"),
        (('T', 'B', 3, '...'), "'...'"),
        (('T', 'B', 'X'), "'X'"),
    ],
)
def test_bad_structure_template(shape, culprit):
    assert_raises_naming(StructureValidationError, [culprit], StructureTemplate, *shape)


@pytest.mark.parametrize(
    'shape, culprit',
    [(('T', 'B', -1), '-1'), (('T', 'B', 'F'), "'F'"), (('T', 'B'), 'feature')],
)
def test_bad_buffer_structure(shape, culprit):
    assert_raises_naming(StructureValidationError, [culprit], BufferStructure, *shape)


# --------------------------------------------------------------- data dicts ---


@pytest.fixture(scope='module')
def data_net():
    inp = Input(
        out_shapes={
            'default': ('T', 'B', 3),
            'targets': ('T', 'B', 1),
            'weights': ('B', 2),
        }
    )
    out = SoftmaxCE(name='Out')
    inp >> FullyConnected(4, name='Hid') >> out
    inp - 'targets' >> 'targets' - out - 'loss' >> Loss()
    inp - 'weights' >> Loss(name='WLoss')
    net = Network.from_layer(inp)
    net.initialize(0.1, seed=1)
    return net


def good_data():
    return {
        'default': np.zeros((2, 3, 3)),
        'targets': np.zeros((2, 3, 1)),
        'weights': np.zeros((3, 2)),
    }


def _with(**changes):
    data = good_data()
    data.update(changes)
    return data


def _without(name):
    data = good_data()
    del data[name]
    return data


DATA_CASES = [
    ('missing-name', _without('targets'), ["'targets'", "'default'"]),
    ('missing-batch-input', _without('weights'), ["'weights'"]),
    (
        'wrong-feature-shape',
        _with(default=np.zeros((2, 3, 4))),
        ["'default'", '(3,)', '(2, 3, 4)'],
    ),
    (
        'wrong-feature-shape-batch-sized',
        _with(weights=np.zeros((3, 5))),
        ["'weights'", '(2,)', '(3, 5)'],
    ),
    ('rank-too-small', _with(default=np.zeros((2, 3))), ["'default'", '(2, 3)']),
    (
        'rank-too-large',
        _with(default=np.zeros((2, 3, 3, 1))),
        ["'default'", '(2, 3, 3, 1)'],
    ),
    ('rank-zero', _with(targets=np.float64(1.0)), ["'targets'", '()']),
    (
        'batch-sized-given-time',
        _with(weights=np.zeros((2, 3, 2))),
        ["'weights'", '(2, 3, 2)'],
    ),
    (
        'mismatched-time',
        _with(targets=np.zeros((3, 3, 1))),
        ["'targets'", '(3, 3)', '(2, 3)'],
    ),
    ('mismatched-batch', _with(targets=np.zeros((2, 4, 1))), ["'targets'", '(2, 4)']),
    (
        'mismatched-batch-batch-sized',
        _with(weights=np.zeros((5, 2))),
        ["'weights'", '5', '3'],
    ),
    (
        'string-dtype',
        _with(default=np.full((2, 3, 3), 'a')),
        ["'default'", 'numeric', '<U1'],
    ),
    (
        'bytes-dtype',
        _with(default=np.zeros((2, 3, 3), dtype='S2')),
        ["'default'", 'numeric', 'S2'],
    ),
    (
        'object-dtype',
        _with(default=np.empty((2, 3, 3), dtype=object)),
        ["'default'", 'numeric', 'object'],
    ),
    (
        'datetime-dtype',
        _with(targets=np.zeros((2, 3, 1), dtype='M8[s]')),
        ["'targets'", 'numeric', 'datetime64'],
    ),
    ('nested-list', _with(default=np.zeros((2, 3, 3)).tolist()), ["'default'", 'list']),
    ('string-value', _with(default='abc'), ["'default'", 'str']),
    ('none-value', _with(targets=None), ["'targets'", 'NoneType']),
    (
        'complex-dtype',
        _with(default=np.zeros((2, 3, 3), dtype=np.complex64)),
        ["'default'", 'complex'],
    ),
]


@pytest.mark.parametrize('data, culprits', params(DATA_CASES))
def test_bad_data(data_net, data, culprits):
    with warnings.catch_warnings():
        warnings.simplefilter('error')
        assert_raises_naming(
            NetworkValidationError, culprits, data_net.provide_external_data, data
        )


def test_missing_name_is_also_a_key_error(data_net):
    with pytest.raises(KeyError):
        data_net.provide_external_data(_without('default'))


@pytest.mark.parametrize(
    'data',
    [None, [np.zeros((2, 3, 3))], np.zeros((2, 3, 3)), 'default', 3],
    ids=lambda d: type(d).__name__,
)
def test_data_not_a_dict(data_net, data):
    assert_raises_naming(
        NetworkValidationError,
        ['dict', type(data).__name__],
        data_net.provide_external_data,
        data,
    )


@pytest.mark.parametrize(
    'dtype', [np.float32, np.float64, np.int64, np.uint8, np.bool_]
)
def test_numeric_data_is_accepted(data_net, dtype):
    data = {k: v.astype(dtype) for k, v in good_data().items()}
    data['unused'] = np.zeros(7)  # extra keys are ignored
    data_net.provide_external_data(data)
    data_net.forward_pass()
    assert data_net.get_input('default').shape == (2, 3, 3)


def test_partial_data_allowed_with_all_inputs_false(data_net):
    data_net.provide_external_data(good_data())
    data_net.provide_external_data({'default': np.ones((2, 3, 3))}, all_inputs=False)
    np.testing.assert_array_equal(data_net.get_input('default'), np.ones((2, 3, 3)))


# ------------------------------------------------------------------- HDF5 ---


@pytest.fixture(scope='module')
def saved(tmp_path_factory):
    """(path, description) of a valid network file."""
    inp = Input(out_shapes={'default': ('T', 'B', 3)})
    inp >> FullyConnected(2, name='Hid') >> Loss()
    net = Network.from_layer(inp)
    net.initialize(0.5, seed=3)
    path = tmp_path_factory.mktemp('nets') / 'good.hdf5'
    net.save_as_hdf5(str(path))
    with h5py.File(path, 'r') as f:
        raw = f['description'][()]
    text = raw.tobytes().decode() if isinstance(raw, np.ndarray) else raw.decode()
    return path, json.loads(text)


def _write(path, name, content):
    p = path.parent / name
    p.write_bytes(content)
    return p


def _edit(path, name, edit):
    p = path.parent / name
    p.write_bytes(path.read_bytes())
    with h5py.File(p, 'r+') as f:
        edit(f)
        # a crafted file carries valid checksums (anyone can compute them),
        # so each case reaches the check it is about
        add_checksums(f)
    return p


def _replace(dataset, value):
    def edit(f):
        del f[dataset]
        f[dataset] = value

    return edit


def _description(change):
    def make(path, desc):
        desc = copy.deepcopy(desc)
        desc = change(desc)
        return _edit(path, 'desc.hdf5', _replace('description', json.dumps(desc)))

    return make


def _group(dataset):
    def edit(f):
        del f[dataset]
        f.create_group(dataset)

    return edit


def _set_description(desc, key, value):
    desc[key] = value
    return desc


def _arch(desc, layer, key, value):
    desc['architecture'][layer][key] = value
    return desc


def _foreign_data_file(f):
    for key in list(f):
        del f[key]
    for key in list(f.attrs):
        del f.attrs[key]
    f.create_dataset('training/default', data=np.zeros((2, 3, 4)))
    f.create_dataset('training/targets', data=np.zeros((2, 3, 1)))


HDF5_CASES = [
    ('missing-file', lambda p, d: p.parent / 'no_such_net.hdf5'),
    ('directory', lambda p, d: p.parent),
    ('empty-file', lambda p, d: _write(p, 'empty.hdf5', b'')),
    (
        'random-bytes',
        lambda p, d: _write(p, 'random.hdf5', np.random.RandomState(0).bytes(4096)),
    ),
    ('json-not-hdf5', lambda p, d: _write(p, 'net.json', json.dumps(d).encode())),
    (
        'no-format-attribute',
        lambda p, d: _edit(p, 'noformat.hdf5', lambda f: f.attrs.__delitem__('format')),
    ),
    (
        'wrong-format',
        lambda p, d: _edit(
            p,
            'wrongformat.hdf5',
            lambda f: f.attrs.__setitem__('format', b'Logs file v1.0'),
        ),
    ),
    (
        'format-not-a-string',
        lambda p, d: _edit(
            p, 'arrayformat.hdf5', lambda f: f.attrs.__setitem__('format', [1, 2])
        ),
    ),
    ('foreign-data-file', lambda p, d: _edit(p, 'data.hdf5', _foreign_data_file)),
    (
        'no-parameters',
        lambda p, d: _edit(p, 'noparams.hdf5', lambda f: f.__delitem__('parameters')),
    ),
    (
        'no-description',
        lambda p, d: _edit(p, 'nodesc.hdf5', lambda f: f.__delitem__('description')),
    ),
    (
        'description-is-a-group',
        lambda p, d: _edit(p, 'descgroup.hdf5', _group('description')),
    ),
    (
        'parameters-is-a-group',
        lambda p, d: _edit(p, 'paramgroup.hdf5', _group('parameters')),
    ),
    (
        'description-not-utf8',
        lambda p, d: _edit(
            p,
            'utf.hdf5',
            _replace('description', np.frombuffer(b'\xff\xfe{', dtype=np.uint8)),
        ),
    ),
    (
        'description-corrupt-json',
        lambda p, d: _edit(p, 'json.hdf5', _replace('description', '{"@type": "Netw')),
    ),
    (
        'description-of-an-initializer',
        _description(lambda d: {'@type': 'Gaussian', 'std': 0.1, 'mean': 0.0}),
    ),
    ('description-a-list', _description(lambda d: [1, 2])),
    ('description-unknown-type', _description(lambda d: {'@type': 'NoSuchThing'})),
    ('description-without-architecture', _description(lambda d: {'@type': 'Network'})),
    (
        'description-with-cyclic-architecture',
        _description(
            lambda d: _arch(
                d, 'Hid', '@outgoing_connections', {'default': ['Loss', 'Hid']}
            )
        ),
    ),
    (
        'description-with-bad-layer-argument',
        _description(lambda d: _arch(d, 'Hid', 'size', -2)),
    ),
    (
        'description-with-unknown-handler',
        _description(lambda d: _set_description(d, 'handler', {'@type': 'NoHandler'})),
    ),
    (
        'parameters-too-short',
        lambda p, d: _edit(p, 'short.hdf5', _replace('parameters', np.zeros(3))),
    ),
    (
        'parameters-too-long',
        lambda p, d: _edit(p, 'long.hdf5', _replace('parameters', np.zeros(100))),
    ),
    (
        'parameters-wrong-rank',
        lambda p, d: _edit(p, 'rank.hdf5', _replace('parameters', np.zeros((2, 4)))),
    ),
    (
        'parameters-not-numeric',
        lambda p, d: _edit(
            p, 'strparams.hdf5', _replace('parameters', np.array([b'a'] * 8))
        ),
    ),
]


@pytest.mark.parametrize('make_file', params(HDF5_CASES))
def test_bad_network_file(saved, make_file):
    path, description = saved
    bad = make_file(path, description)
    assert_raises_naming(
        NetworkValidationError, [str(bad)], Network.from_hdf5, str(bad)
    )


def test_good_network_file_loads(saved):
    path, _ = saved
    net = Network.from_hdf5(str(path))
    assert list(net.layers) == ['Input', 'Hid', 'Loss']
    np.testing.assert_array_equal(net.get('parameters'), 0.5)


def test_string_description_as_written_by_brainstorm_05_loads(saved):
    path, description = saved
    p = _edit(
        path,
        'string_description.hdf5',
        _replace('description', json.dumps(description)),
    )
    with h5py.File(p, 'r+') as f:  # 0.5 wrote no checksums
        for obj in [f, f['description'], f['parameters']]:
            del obj.attrs['sha256']
    net = Network.from_hdf5(str(p))
    assert list(net.layers) == ['Input', 'Hid', 'Loss']


def test_number_of_bad_input_cases():
    # acceptance: at least 40 malformed inputs across all categories
    total = (
        len(ARCHITECTURE_CASES)
        + len(KWARG_CASES)
        + len(CONNECTION_CASES)
        + len(DATA_CASES)
        + len(HDF5_CASES)
    )
    assert total >= 40
