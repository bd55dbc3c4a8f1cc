"""The network file format's rules at their edges."""

import json

import h5py
import numpy as np
import pytest

import brainstorm as bs
from brainstorm.structure import network_io
from brainstorm.structure.network import Network
from brainstorm.utils import DescriptionError, NetworkValidationError, add_checksums


def make_net(hidden=4):
    inp, out = bs.tools.get_in_out_layers('classification', 3, 2)
    net = Network.from_layer(inp >> bs.layers.FullyConnected(hidden, name='H') >> out)
    net.initialize(bs.initializers.Gaussian(0.1), seed=1)
    return net


def crafted(path, edit=None, description=None, parameters=None, sign=True):
    """A network file whose parts are replaced, re-signed like an attacker would."""
    net = make_net()
    net.save_as_hdf5(path)
    with h5py.File(path, 'r+') as f:
        if description is not None:
            del f['description']
            f.create_dataset('description', data=description)
        if parameters is not None:
            del f['parameters']
            f.create_dataset('parameters', data=parameters)
        if edit is not None:
            edit(f)
        if sign:
            add_checksums(f)
    return net


def json_array(obj):
    return np.frombuffer(json.dumps(obj).encode(), dtype=np.uint8)


def refused(path, match):
    with pytest.raises(NetworkValidationError, match=match):
        Network.from_hdf5(path)


def test_a_file_loads_with_its_parameters(tmp_path):
    net = crafted(tmp_path / 'n.h5')
    loaded = Network.from_hdf5(tmp_path / 'n.h5')
    assert np.array_equal(loaded.get('parameters'), net.get('parameters'))
    description, parameters = network_io.read_network_file(tmp_path / 'n.h5')
    assert description == bs.get_description(net)
    assert isinstance(parameters, np.ndarray)


@pytest.mark.parametrize(
    'edit',
    [
        lambda f: f.attrs.__setitem__('format', np.bytes_(b'Network file v2.0')),
        lambda f: f.attrs.__setitem__('format', b'Network file v1.0'[:-1]),
        lambda f: f.attrs.__delitem__('format'),
        lambda f: f.attrs.__setitem__('format', 5),
        lambda f: (f.__delitem__('parameters'), f.create_group('parameters')),
        lambda f: (f.__delitem__('description'), f.create_group('description')),
        lambda f: f.__delitem__('parameters'),
    ],
)
def test_a_file_of_another_kind_is_named(edit, tmp_path):
    crafted(tmp_path / 'n.h5', edit)
    refused(tmp_path / 'n.h5', 'is not a brainstorm network file: expected format')


def test_a_text_format_attribute_is_accepted(tmp_path):
    crafted(
        tmp_path / 'n.h5', lambda f: f.attrs.__setitem__('format', 'Network file v1.0')
    )
    Network.from_hdf5(tmp_path / 'n.h5')


@pytest.mark.parametrize(
    'parameters, match',
    [
        (
            np.zeros((2, 13)),
            r'expected a 1-d numeric array. Received float64 of shape \(2, 13\)',
        ),
        (np.array([b'a'] * 26), 'expected a 1-d numeric array'),
        (np.zeros(26, dtype=bool), 'expected a 1-d numeric array'),
        (np.zeros(25), r'holds \(25,\) parameters, its architecture needs \(26,\)'),
        (np.zeros(27), r'holds \(27,\) parameters, its architecture needs \(26,\)'),
    ],
)
def test_parameters_of_the_wrong_kind_or_size_are_refused(parameters, match, tmp_path):
    crafted(tmp_path / 'n.h5', parameters=parameters)
    refused(tmp_path / 'n.h5', match)


@pytest.mark.parametrize('dtype', [np.float32, np.float64, np.int32, np.uint8])
def test_parameters_of_every_numeric_kind_load(dtype, tmp_path):
    crafted(tmp_path / 'n.h5', parameters=np.ones(26, dtype=dtype))
    assert Network.from_hdf5(tmp_path / 'n.h5').get('parameters').sum() == 26


@pytest.mark.parametrize(
    'description, match',
    [
        (
            np.ones(3, dtype=np.int8),
            r"'description': expected UTF-8 JSON. Received a int8",
        ),
        (np.ones((1, 3), dtype=np.uint8), r'of shape \(1, 3\)'),
        (np.frombuffer(b'\xff\xfe', np.uint8), 'it is not UTF-8 JSON'),
        (np.frombuffer(b'{"a": ', np.uint8), 'it is not UTF-8 JSON'),
        (json_array([1, 2]), 'does not describe a Network'),
        (json_array({'@type': 'Trainer'}), 'does not describe a Network'),
        (json_array({'@type': 'Network'}), 'holds an invalid network architecture'),
        (
            json_array({'@type': 'Network', 'architecture': {'Input': 5}}),
            'holds an invalid network architecture',
        ),
    ],
)
def test_a_bad_description_is_refused_naming_it(description, match, tmp_path):
    crafted(tmp_path / 'n.h5', description=description)
    refused(tmp_path / 'n.h5', match)


def test_a_description_stored_as_text_loads_like_brainstorm_05(tmp_path):
    net = make_net()
    text = json.dumps(bs.get_description(net))
    for data in (text, text.encode()):
        crafted(tmp_path / 'n.h5', description=data, sign=False)
        with h5py.File(tmp_path / 'n.h5', 'r+') as f:
            for obj in (f, f['description'], f['parameters']):
                if 'sha256' in obj.attrs:
                    del obj.attrs['sha256']
        loaded = Network.from_hdf5(tmp_path / 'n.h5')
        assert list(loaded.layers) == list(net.layers)


def test_a_file_that_is_no_hdf5_is_named(tmp_path):
    (tmp_path / 'n.h5').write_bytes(b'not hdf5')
    refused(tmp_path / 'n.h5', "Cannot read network file '.*n.h5': it is not an HDF5")
    refused(tmp_path / 'missing.h5', r'it is missing \(no such file\)')


def test_an_unexpected_failure_is_a_corrupt_file(tmp_path, monkeypatch):
    crafted(tmp_path / 'n.h5')

    def broken(*args):
        raise KeyError('surprise')

    monkeypatch.setattr(network_io, '_read_description', broken)
    refused(
        tmp_path / 'n.h5', r"Network file '.*n.h5' is corrupt: KeyError: 'surprise'"
    )


def test_sizes_that_break_the_layout_code_are_refused(monkeypatch):
    def broken(*args):
        raise OverflowError('too big')

    monkeypatch.setattr(network_io, 'plan_network', broken)
    with pytest.raises(
        NetworkValidationError,
        match='^F holds an invalid network architecture: OverflowError: too big$',
    ):
        network_io.check_stored_sizes(
            {'@type': 'Network', 'architecture': {}}, 1, 'F', NetworkValidationError
        )


# ----------------------------------------------------------- build_from_file --


def test_build_from_file_checks_the_class_and_the_parameter_shape():
    net = make_net()
    description = bs.get_description(net)
    params = net.get('parameters')
    built = network_io.build_from_file(
        Network, description, params, 'f.h5', NetworkValidationError, 'Network file'
    )
    assert np.array_equal(built.get('parameters'), params)
    with pytest.raises(
        NetworkValidationError,
        match=r"^Network file 'f.h5' is corrupt: it holds \(25,\) parameters, "
        r'its architecture needs \(26,\).$',
    ):
        network_io.build_from_file(
            Network,
            description,
            params[:25],
            'f.h5',
            NetworkValidationError,
            'Network file',
        )
    with pytest.raises(
        NetworkValidationError, match='holds an invalid network description'
    ):
        network_io.build_from_file(
            Network, {'@type': 'Nope'}, params, 'f.h5', NetworkValidationError, 'X'
        )


def test_build_from_file_refuses_an_object_of_another_class(monkeypatch):
    net = make_net()
    monkeypatch.setattr(network_io, 'create_from_description', lambda d, expected: 5)
    with pytest.raises(
        NetworkValidationError, match="^X 'f.h5' does not describe a Network"
    ):
        network_io.build_from_file(
            Network, {}, net.get('parameters'), 'f.h5', NetworkValidationError, 'X'
        )


# --------------------------------------------------------- check_description --


def arch():
    return bs.get_description(make_net())['architecture']


def test_check_description_builds_every_part():
    parts = network_io.check_description(
        {
            '@type': 'Network',
            'architecture': arch(),
            'output_name': 'Output.outputs.predictions',
            'handler': {'@type': 'NumpyHandler', 'dtype': 'float64'},
            'initializers': {'default': {'@type': 'Gaussian', 'std': 0.5}},
        }
    )
    assert parts['output_name'] == 'Output.outputs.predictions'
    assert parts['handler'] == {'@type': 'NumpyHandler', 'dtype': 'float64'}
    assert isinstance(parts['initializers']['default'], bs.initializers.Gaussian)
    assert parts['weight_modifiers'] is None and parts['gradient_modifiers'] is None


@pytest.mark.parametrize(
    'change, error, match',
    [
        ({'extra': 1}, DescriptionError, r"unknown key\(s\) \['extra'\]"),
        ({'architecture': None}, DescriptionError, "'architecture' is missing"),
        (
            {'output_name': 5},
            NetworkValidationError,
            'output_name must be a str or None',
        ),
        (
            {'handler': 'numpy'},
            DescriptionError,
            'handler must be a handler description',
        ),
        ({'handler': {'dtype': 'x'}}, DescriptionError, 'handler must be a handler'),
    ],
)
def test_check_description_refuses(change, error, match):
    description = {'@type': 'Network', 'architecture': arch()}
    description.update(change)
    if change.get('architecture', 1) is None:
        del description['architecture']
    with pytest.raises(error, match=match):
        network_io.check_description(description)


def test_check_description_accepts_none_for_the_optional_parts():
    parts = network_io.check_description(
        {
            '@type': 'Network',
            'architecture': arch(),
            'output_name': None,
            'handler': None,
        }
    )
    assert parts['output_name'] is None and parts['handler'] is None


@pytest.mark.parametrize(
    'extra, ok', [(0, True), (1 << 16, True), ((1 << 16) + 1, False)]
)
def test_the_constant_buffer_may_exceed_three_times_the_parameters_by_65536(
    extra, ok, monkeypatch
):
    net = make_net()
    description = bs.get_description(net)
    n = net.get('parameters').size
    monkeypatch.setattr(network_io, 'constant_size', lambda layout: 3 * n + extra)
    if ok:
        network_io.check_stored_sizes(description, n, 'F', NetworkValidationError)
    else:
        with pytest.raises(
            NetworkValidationError,
            match=rf'^F: its architecture needs a constant buffer of {3 * n + extra} '
            rf'elements for {n} parameters \(at most {3 * n + (1 << 16)} allowed\).$',
        ):
            network_io.check_stored_sizes(description, n, 'F', NetworkValidationError)


@pytest.mark.parametrize(
    'edit, start',
    [
        (
            lambda f: f.attrs.__setitem__('format', np.bytes_(b'x')),
            "'{}' is not a brainstorm network file",
        ),
        (
            lambda f: f['parameters'].attrs.__setitem__('sha256', np.bytes_(b'0')),
            "Network file '{}' is corrupt: 'parameters': its checksum",
        ),
    ],
)
def test_the_library_error_is_raised_as_it_is_not_wrapped(edit, start, tmp_path):
    path = tmp_path / 'n.h5'
    crafted(path, edit, sign=False)
    with pytest.raises(NetworkValidationError) as info:
        Network.from_hdf5(path)
    assert str(info.value).startswith(start.format(path))
    assert 'NetworkValidationError' not in str(info.value)


def test_a_loaded_network_of_zero_parameters_counts_as_initialised(tmp_path):
    """Loaded parameters were set, whatever they are: a network saved with
    all parameters zero runs after loading (a never-initialised network
    is refused)."""
    inp, out = bs.tools.get_in_out_layers('regression', 3, 2)
    net = Network.from_layer(inp >> out)
    net.initialize(0.0)
    path = str(tmp_path / 'zeros.h5')
    net.save_as_hdf5(path)
    loaded = Network.from_hdf5(path)
    outputs = loaded.predict(
        {'default': np.ones((1, 4, 3))}, out_name='Output.outputs.predictions'
    )
    np.testing.assert_array_equal(outputs, 0.0)
