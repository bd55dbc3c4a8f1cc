"""Network files: writing and reading the HDF5 file of a network.

A network file holds the network's description (JSON, as UTF-8 bytes) and
its parameters, with checksums. Reading checks everything before anything
is built: the format, the checksums, and that the architecture's sizes fit
the stored parameters (see :func:`check_stored_sizes`). Brainstorm 0.5's
network files (description stored as a string, no checksums) load too,
their parameters converted where 0.5 stored them differently (BatchNorm's
``mu``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

import brainstorm.handlers as handlers
from brainstorm.describable import create_from_description
from brainstorm.errors import (
    DescriptionError,
    NetworkValidationError,
    ValidationError,
)
from brainstorm.files import (
    CheckedReader,
    get_brainstorm_info,
    open_hdf5,
    write_hdf5,
)
from brainstorm.initializers import Initializer
from brainstorm.structure.layout import constant_size, plan_network
from brainstorm.value_modifiers import GradientModifier, ValueModifier

__all__ = [
    'NETWORK_FILE_FORMAT',
    'write_network_file',
    'read_network_file',
    'check_stored_sizes',
    'build_from_file',
]

NETWORK_FILE_FORMAT = b'Network file v1.0'

#: The keys of a network description (nothing else is accepted).
DESCRIPTION_KEYS = frozenset(
    {
        '@type',
        'architecture',
        'handler',
        'initializers',
        'weight_modifiers',
        'gradient_modifiers',
        'output_name',
    }
)

#: elements of constant buffer allowed beyond three times the parameters
_CONSTANT_ALLOWANCE = 1 << 16


def write_network_file(
    filename, description: dict, parameters: np.ndarray, comment: str = ''
) -> None:
    """Write a network file atomically.

    The file is built in memory and written to a temporary name that is
    then moved into place, so an existing file is never left half-written
    or replaced by a damaged one; its checksums cover the description and
    parameters given here (not what was read back from the disk).

    Args:
        filename: where to write (a str or ``os.PathLike``).
        description: the network's description.
        parameters: the network's parameters as a 1-d NumPy array.
        comment: stored as the file's ``comment`` attribute if not empty.

    Raises:
        FileWriteError: if the file cannot be written (disk full, file-size
            limit, ...), naming it; the file keeps its previous content.
    """
    encoded = json.dumps(description).encode('utf-8')

    def build(writer):
        writer.set_attribute('', 'info', np.bytes_(get_brainstorm_info()))
        writer.set_attribute('', 'format', np.bytes_(NETWORK_FILE_FORMAT))
        if comment:
            writer.set_attribute('', 'comment', np.bytes_(comment.encode('utf-8')))
        writer.dataset('description', np.frombuffer(encoded, dtype=np.uint8))
        writer.dataset('parameters', parameters, compression='gzip')

    write_hdf5(filename, build)


def read_network_file(filename: str) -> tuple:
    """The checked description and parameters of a network file.

    The parameters of a file written by Brainstorm 0.5 are converted to
    this package's meaning (see :func:`_parameters_from_05`); files
    written here are returned as stored.

    Returns:
        ``(description, parameters)``.

    Raises:
        NetworkValidationError: if the file is missing, damaged,
            inconsistent or not a brainstorm network file.
    """
    f, fmt = open_hdf5(filename, NetworkValidationError, 'network file')
    with f:
        try:
            return _read_network_file(f, fmt, filename)
        except ValidationError:
            raise
        except Exception as err:  # whatever h5py or NumPy raise
            raise NetworkValidationError(
                f"Network file '{filename}' is corrupt: {type(err).__name__}: {err}"
            ) from None


def _read_description(reader, raw):
    """Decode the stored description.

    Ours is a uint8 array of UTF-8 JSON, Brainstorm 0.5's a (variable-length)
    string.
    """
    try:
        if isinstance(raw, np.ndarray):
            if raw.dtype != np.uint8 or raw.ndim != 1:
                reader.fail(
                    'description',
                    'expected UTF-8 JSON. Received '
                    f'a {raw.dtype} array of shape {raw.shape}',
                )
            text = raw.tobytes().decode('utf-8')
        elif isinstance(raw, bytes):
            text = raw.decode('utf-8')
        else:
            text = str(raw)
        return json.loads(text)
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        reader.fail('description', f'it is not UTF-8 JSON ({err}).')


def _read_network_file(f, fmt, filename: str) -> tuple:
    """The checked description and parameters of an open network file.

    See :meth:`Network.from_hdf5`.
    """
    import h5py

    if (
        not isinstance(fmt, bytes)
        or fmt != NETWORK_FILE_FORMAT
        or not isinstance(f.get('description'), h5py.Dataset)
        or not isinstance(f.get('parameters'), h5py.Dataset)
    ):
        raise NetworkValidationError(
            f"'{filename}' is not a brainstorm network file: expected "
            f'format attribute {NETWORK_FILE_FORMAT!r} and datasets '
            "'description' and 'parameters'. Received format "
            f'{fmt!r} and datasets {sorted(f.keys())}.'
        )
    reader = CheckedReader(f, filename, NetworkValidationError, 'Network file')
    raw = reader.array('description')
    description = _read_description(reader, raw)
    dataset = f['parameters']
    if dataset.ndim != 1 or dataset.dtype.kind not in 'iuf':
        reader.fail(
            'parameters',
            'expected a 1-d numeric array. Received '
            f'{dataset.dtype} of shape {dataset.shape}',
        )
    where = f"Network file '{filename}'"
    layers, layout = _plan_stored(
        description, int(dataset.shape[0]), where, NetworkValidationError
    )
    parameters = np.asarray(reader.array('parameters', shape=dataset.shape))
    if not isinstance(raw, np.ndarray):  # a string: written by Brainstorm 0.5
        parameters = _parameters_from_05(layers, layout, parameters)
    return description, parameters


def _parameters_from_05(
    layers: dict, layout: dict, parameters: np.ndarray
) -> np.ndarray:
    """The parameters of a Brainstorm 0.5 network file, in this package's meaning.

    Network files written by Brainstorm 0.5 store the description as a
    string (ours: a uint8 array; see :func:`_read_description`). Some of
    0.5's parameters meant something else: a layer whose parameters
    changed meaning has a method ``parameters_from_05(parameters)`` that
    converts them in place, given a dict of its parameters' names to
    (writable) views into a copy of ``parameters``; e.g. BatchNorm negates
    ``mu``, which 0.5 stored negated.

    Args:
        layers: the network's layers (as planned from the file).
        layout: the network's layout (as planned from the file).
        parameters: the stored 1-d parameter array (not changed).

    Returns:
        ``parameters`` itself if no layer converts anything, else a
        converted copy.
    """
    converting = [
        (name, layer.parameters_from_05)
        for name, layer in layers.items()
        if callable(getattr(layer, 'parameters_from_05', None))
    ]
    if not converting:
        return parameters
    parameters = np.array(parameters)
    base = int(layout['parameters']['@slice'][0])
    for name, convert in converting:
        views = {}
        for pname, node in layout.get(name, {}).get('parameters', {}).items():
            if pname.startswith('@'):
                continue
            start, stop = (int(i) - base for i in node['@slice'])
            views[pname] = parameters[start:stop].reshape(node['@shape'])
        convert(views)
    return parameters


def check_stored_sizes(description, n_parameters: int, where: str, error: type) -> None:
    """Check a stored network description against its stored parameters.

    Runs before anything is allocated. The architecture's layers and
    layout are computed (no memory); the number of parameters must equal
    ``n_parameters``, and the constant buffer (parameters, gradients and
    constant internals) may not exceed a small multiple of it, so a file
    cannot make the loader allocate much more than it stores.

    Args:
        description: the stored network description.
        n_parameters: the length of the stored parameter array.
        where: names the file, for messages.
        error: the ValidationError subclass to raise.

    Raises:
        ValidationError: ``error``, if the description is not a valid
            network's or its sizes do not fit.
    """
    _plan_stored(description, n_parameters, where, error)


def _plan_stored(description, n_parameters: int, where: str, error: type) -> tuple:
    """:func:`check_stored_sizes`, returning the planned ``(layers, layout)``."""
    if not (isinstance(description, dict) and description.get('@type') == 'Network'):
        raise error(f'{where} does not describe a Network.')
    try:
        # plan_network validates what the file holds (None or any type)
        _, layers, layout = plan_network(
            description.get('architecture'),  # type: ignore[arg-type]
            handlers.default_handler,
        )
        needed = int(layout['parameters']['@slice'][1]) - int(
            layout['parameters']['@slice'][0]
        )
        constant = constant_size(layout)
    except ValidationError as err:
        raise error(f'{where} holds an invalid network architecture: {err}') from None
    except Exception as err:  # huge or malformed numbers in the layers
        raise error(
            f'{where} holds an invalid network architecture: '
            f'{type(err).__name__}: {err}'
        ) from None
    if needed != n_parameters:
        raise error(
            f'{where} is corrupt: it holds ({n_parameters},) '
            f'parameters, its architecture needs ({needed},).'
        )
    limit = 3 * n_parameters + _CONSTANT_ALLOWANCE
    if constant > limit:
        raise error(
            f'{where}: its architecture needs a constant buffer of '
            f'{constant} elements for {n_parameters} parameters '
            f'(at most {limit} allowed).'
        )
    return layers, layout


def build_from_file(
    network_class: Any,
    description: dict,
    parameters: np.ndarray,
    filename: str,
    error: type,
    what: str,
):
    """The network of a checked description, holding ``parameters``.

    Args:
        network_class: the class to build (``Network``).
        description: the checked network description.
        parameters: the stored parameters.
        filename: the file, for messages.
        error: the ValidationError subclass to raise.
        what: names the kind of file, for messages (``'Network file'``).

    Raises:
        ValidationError: ``error``, if the description does not build a
            network of ``network_class`` with as many parameters.
    """
    try:
        net = create_from_description(description, expected=network_class)
    except Exception as err:  # a crafted description may break anything
        raise error(
            f"{what} '{filename}' holds an invalid network "
            f'description: {type(err).__name__}: {err}'
        ) from None
    if not isinstance(net, network_class):
        raise error(f"{what} '{filename}' does not describe a Network.")
    expected = tuple(net.buffer.parameters.shape)
    if parameters.shape != expected:
        raise error(
            f"{what} '{filename}' is corrupt: it holds "
            f'{parameters.shape} parameters, its architecture needs '
            f'{expected}.'
        )
    net.handler.set_from_numpy(net.buffer.parameters, parameters)
    for lname, layer in net.layers.items():
        for pname in layer.parameter_shapes:
            values = net.get(f'{lname}.parameters.{pname}')
            try:
                layer.check_parameter_values(pname, values)
            except ValueError as err:
                raise error(
                    f"{what} '{filename}': parameter {lname}.{pname}: {err}"
                ) from None
    net._parameters_set = True  # loaded: whatever they are, they were set
    return net


def check_description(description: dict) -> dict:
    """Check a network description's keys and build its described parts.

    Every described object is built (each ``@type`` checked for its place)
    before the network, so nothing is built for a description refused
    later.

    Args:
        description: a network description (``@type`` ``'Network'``).

    Returns:
        A dict with ``output_name``, ``handler`` (still a description, or
        None), and the built ``initializers``, ``weight_modifiers`` and
        ``gradient_modifiers``.

    Raises:
        DescriptionError: for unknown or missing keys, or a handler entry
            that is no description.
        NetworkValidationError: for an output name that is not a str.
    """
    unknown = sorted(set(description) - DESCRIPTION_KEYS, key=str)
    if unknown:
        raise DescriptionError(
            f'Network (from a description): unknown key(s) {unknown}. '
            f'Allowed keys: {sorted(DESCRIPTION_KEYS)}'
        )
    if 'architecture' not in description:
        raise DescriptionError(
            "Network (from a description): the key 'architecture' is missing."
        )
    output_name = description.get('output_name')
    if output_name is not None and not isinstance(output_name, str):
        raise NetworkValidationError(
            'Network (from a description): output_name must be a str or '
            f'None. Received: output_name={output_name!r}'
        )
    modifiers = (ValueModifier, GradientModifier)
    handler = description.get('handler')
    parts = {
        'output_name': output_name,
        'handler': handler,
        'initializers': create_from_description(
            description.get('initializers'), expected=Initializer
        ),
        'weight_modifiers': create_from_description(
            description.get('weight_modifiers'), expected=modifiers
        ),
        'gradient_modifiers': create_from_description(
            description.get('gradient_modifiers'), expected=modifiers
        ),
    }
    if handler is not None and (
        not isinstance(handler, dict) or '@type' not in handler
    ):
        raise DescriptionError(
            'Network (from a description): handler must be a handler '
            f"description (a dict with '@type'). Received: {handler!r:.80}"
        )
    return parts
