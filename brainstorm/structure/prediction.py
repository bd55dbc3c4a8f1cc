"""Running a network on data for its outputs: ``Network.predict``.

Also the checks shared by everything that reads a network output by name
(:func:`check_output_name`, used by ``predict``, ``tools.extract``,
``tools.evaluate`` and the scorers), and the check that refuses to run a
network whose parameters were never set (:func:`check_parameters_set`).
"""

from __future__ import annotations

import numpy as np

from brainstorm.arguments import Arg, Optional, Str, check_value
from brainstorm.errors import NetworkValidationError, ValidationError
from brainstorm.files import dataset_closed
from brainstorm.structure.external_data import (
    MissingInputError,
    check_data,
    find_unrepresentable,
)
from brainstorm.structure.layout import get_buffer_type

__all__ = [
    'UnknownOutputError',
    'UninitializedNetworkError',
    'output_names',
    'check_output_name',
    'check_parameters_set',
    'predict',
]

#: Inputs of layers with this name take targets (named in the error of a
#: ``predict`` call that lacks the inputs a loss needs).
TARGET_INPUT = 'targets'

#: ``out_name`` of ``predict``: None stands for ``net.output_name``.
_OUT_NAME = Arg(Optional(Str()))


class UnknownOutputError(NetworkValidationError, KeyError):
    """An output name that is not an output of the network.

    A KeyError too, as the bare BufferView KeyError it replaces.
    """

    def __str__(self):
        return str(self.args[0])


class UninitializedNetworkError(NetworkValidationError):
    """A network's parameters were never initialised, loaded or set."""


# ---------------------------------------------------------- output names ---


def output_names(network) -> list[str]:
    """Every output path of ``network``: ``'<layer>.outputs.<name>'``.

    Args:
        network: the network.

    Returns:
        The paths in the network's layer order (the Input layer's first).
    """
    return [
        f'{lname}.outputs.{oname}'
        for lname, layer in network.layers.items()
        for oname in layer.out_shapes
    ]


def check_output_name(network, out_name, who: str) -> str:
    """The buffer path of ``out_name``, or an error listing the outputs.

    Args:
        network: the network.
        out_name: a path such as ``'Output.outputs.predictions'``, or the
            name of a layer with a single output (that output).
        who: names the caller in the message (``'predict'``).

    Returns:
        The full buffer path.

    Raises:
        UnknownOutputError: if ``out_name`` is not an output (or another
            buffer) of ``network``; the message lists its output names.
    """
    if isinstance(out_name, str):
        layer = network.layers.get(out_name)
        if layer is not None and len(layer.out_shapes) == 1:
            return f'{out_name}.outputs.{next(iter(layer.out_shapes))}'
        if _is_buffer(network.layout, out_name):
            return out_name
    raise UnknownOutputError(
        f'{who}: {out_name!r} is not an output of the network. Its outputs '
        f'are {output_names(network)} (a layer name stands for its output '
        'if it has only one).'
    )


def _is_buffer(layout: dict, path: str) -> bool:
    node = layout
    for part in path.split('.'):
        if part.startswith('@') or not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return isinstance(node, dict) and '@shape' in node


# ------------------------------------------------------ initialisation ---


def check_parameters_set(network) -> None:
    """Refuse to run a network whose parameters were never set.

    A network's parameters count as set once :meth:`Network.initialize`
    ran, it was loaded from a file or a checkpoint, or any parameter holds
    a value other than zero (the user wrote them, e.g. through
    ``net.buffer.parameters``). Only a network that has parameters, all of
    them zero, and none of those is refused. The first check that passes
    is remembered, so this costs one look at the parameters per network.

    Args:
        network: the network.

    Raises:
        UninitializedNetworkError: naming ``net.initialize(...)``.
    """
    if getattr(network, '_parameters_set', True):
        return  # set, or no Network (a stand-in of a test)
    parameters = network.buffer.parameters
    if parameters.size and not network.handler.get_numpy_copy(parameters).any():
        raise UninitializedNetworkError(
            f'{network!r}: its parameters were never initialised (all '
            f'{parameters.size} are zero, so no hidden unit could ever '
            'differ from another). Call net.initialize(...) first, e.g. '
            'net.initialize(bs.initializers.Gaussian(0.01)), or load a '
            'trained network with bs.Network.from_hdf5(path). To start '
            'from zeros on purpose, call net.initialize(0.0).'
        )
    network._parameters_set = True


# ------------------------------------------------------------- predict ---


def required_inputs(network, path: str) -> list[str]:
    """The Input outputs that the buffer at ``path`` depends on.

    Every output of a layer depends on all its inputs, except where the
    layer declares otherwise in ``independent_outputs``: by default an
    output layer's ``'predictions'`` do not depend on its ``'targets'``
    input. So the targets are needed for a loss and for everything
    computed from a loss, not for the predictions.

    Args:
        network: the network.
        path: a buffer path such as ``'Output.outputs.loss'``.

    Returns:
        The names of the needed Input outputs, in the Input layer's order.
    """
    parts = path.split('.')
    needed: set = set()
    seen: set = set()
    # (layer, the output of it that is followed; None for other buffers)
    todo = [(parts[0], parts[2] if parts[1:2] == ['outputs'] else None)]
    while todo:
        lname, oname = todo.pop()
        if (lname, oname) in seen:
            continue
        seen.add((lname, oname))
        if lname == 'Input':
            needed.add(oname)
            continue
        layer = network.layers[lname]
        ignored = layer.independent_outputs.get(oname, ())
        for connection in layer.incoming:
            if connection.input_name in ignored:
                continue
            todo.append((connection.start_layer, connection.output_name))
    return [name for name in network.layers['Input'].out_shapes if name in needed]


def _as_data_dict(network, data, needed: list) -> dict:
    """``data`` as a dict of input names to arrays, checked."""
    inputs = network.layers['Input'].out_shapes
    hint = TARGETS_HINT if TARGET_INPUT in inputs else ''
    if not hasattr(data, 'items'):
        if len(needed) != 1:
            error = MissingInputError if len(needed) > 1 else NetworkValidationError
            raise error(
                f'predict: give a dict of input names to arrays; this '
                f'output needs the inputs {needed}{hint}. Received: '
                f'{type(data).__name__}'
            )
        data = {needed[0]: data}
    unknown = [name for name in data if name not in inputs]
    if unknown:
        raise NetworkValidationError(
            f"predict: unknown inputs {unknown}. The network's inputs are "
            f'{list(inputs)}.'
        )
    missing = [name for name in needed if name not in data]
    if missing:
        raise MissingInputError(
            f'predict: data for the inputs {missing} is missing; this '
            f'output needs {needed}{hint}. Received {list(data)}.'
        )
    return dict(data)


#: how to read which inputs an output needs
TARGETS_HINT = (
    " (an output layer's 'predictions' need no targets; its 'loss' and "
    'everything computed from it do)'
)


def _batch_first(inputs: dict, data: dict) -> bool:
    """Whether ``data`` gives its time-sized arrays batch-first ``(B, ...)``.

    That is the case when every time-sized array has one dimension less
    than the input's ``(T, B, *features)`` (and is then read as T = 1);
    arrays with the full number of dimensions are ``(T, B, ...)``.

    Raises:
        NetworkValidationError: if the arrays mix both layouts.
    """
    layouts = {}
    for name, array in data.items():
        structure = inputs[name]
        # array-likes too (an object with shape, dtype and slicing)
        ndim = len(array.shape) if hasattr(array, 'shape') else None
        if structure.buffer_type == 2 and ndim is not None:
            layouts[name] = ndim == len(structure.shape) - 1
    if len(set(layouts.values())) > 1:
        raise NetworkValidationError(
            'predict: give every time-sized input as (T, B, ...) or every '
            'one as (B, ...) (read as T = 1), not both. Batch-first: '
            f'{sorted(n for n, b in layouts.items() if b)}; time-first: '
            f'{sorted(n for n, b in layouts.items() if not b)}.'
        )
    return any(layouts.values())


def _checked_arrays(network, data: dict) -> tuple[dict, bool, int]:
    """The arrays in ``(T, B, ...)`` layout, the layout given, and B.

    Array-likes that are read on slicing (an ``h5py.Dataset``) stay unread:
    their shape and dtype are checked here, their values batch by batch.
    """
    inputs = network.layers['Input'].out_shapes
    for name, array in data.items():
        _check_open(name, array)
    # other array-likes are read whole here, so that their layout is known
    data = {
        name: np.asarray(array)
        if hasattr(array, '__array__')
        and not isinstance(array, np.ndarray)
        and not _is_read_on_slicing(array)
        else array
        for name, array in data.items()
    }
    batch_first = _batch_first(inputs, data)
    arrays = {}
    for name, array in data.items():
        add_time_axis = batch_first and inputs[name].buffer_type == 2
        given = tuple(array.shape) if hasattr(array, 'shape') else None
        try:
            if _is_read_on_slicing(array):
                array = _ReadOnSlicing(array, add_time_axis, name)
                # a stand-in of its shape and dtype that holds no memory
                stand_in = np.broadcast_to(np.zeros((), array.dtype), array.shape)
                check_data(name, stand_in, inputs[name])
                arrays[name] = array
                continue
            if add_time_axis:
                array = array[np.newaxis]
            arrays[name] = check_data(name, array, inputs[name])
        except ValidationError as err:
            if add_time_axis:
                _add_to_message(
                    err,
                    f'the data of shape {given}, given batch-first, with the '
                    'time axis of T = 1 added in front',
                )
            raise
    sizes = {
        name: int(a.shape[inputs[name].buffer_type - 1]) for name, a in arrays.items()
    }
    if len(set(sizes.values())) > 1:
        raise NetworkValidationError(
            f'predict: the inputs differ in batch size (B): {sizes}.'
        )
    return arrays, batch_first, next(iter(sizes.values()), 0)


def _is_read_on_slicing(array) -> bool:
    """Whether ``array`` is an array-like (no ndarray) to read by slices.

    That is one with ``__array__``, ``__getitem__``, a ``shape`` and a
    NumPy ``dtype``, as an ``h5py.Dataset``: reading it whole could take
    more memory than ``batch_size`` allows. (A ``np.memmap`` is an ndarray
    and is sliced without a copy anyway.)
    """
    if isinstance(array, np.ndarray) or not all(
        hasattr(array, attribute)
        for attribute in ('__array__', '__getitem__', 'shape', 'dtype')
    ):
        return False
    try:
        np.dtype(array.dtype)
    except TypeError:
        return False  # e.g. a tensor of another library: read it whole
    return True


def _closed_error(name: str, error: Exception) -> NetworkValidationError:
    """The error for the data of input ``name`` whose h5py file was closed."""
    return NetworkValidationError(
        f"predict: the data for input '{name}' cannot be read: it is an h5py "
        f'dataset whose file was closed (h5py: {error}). Keep the file open '
        'while predict reads it, or open the file again and pass its dataset.'
    )


def _check_open(name: str, array) -> None:
    """Refuse an h5py dataset whose file was closed, naming the input."""
    if not dataset_closed(array):
        return
    for attribute in ('shape', 'ndim', 'size'):  # h5py caches some shapes
        try:
            getattr(array, attribute)  # h5py's own error, for the cause
        except Exception as error:
            raise _closed_error(name, error) from error
    raise _closed_error(name, RuntimeError('the dataset is closed'))


def _describe_source(array) -> str:
    """The data behind ``array`` for a message: an h5py dataset and its file."""
    try:
        file = getattr(array, 'file', None)
        if isinstance(getattr(array, 'name', None), str) and file is not None:
            return f"the dataset '{array.name}' of the file '{file.filename}'"
    except Exception:  # a closed h5py dataset names neither
        pass
    return type(array).__name__


class _ReadOnSlicing:
    """Data read one batch at a time from an array-like such as an h5py.Dataset.

    Args:
        source: the array-like.
        add_time_axis: the source is batch-first ``(B, ...)``, read as
            ``(1, B, ...)``.
        name: the input the data is for (named in errors).
    """

    def __init__(self, source, add_time_axis: bool, name: str = ''):
        self.source = source
        self.add_time_axis = add_time_axis
        self.name = name
        shape = tuple(int(n) for n in source.shape)
        self.shape = (1,) + shape if add_time_axis else shape
        self.dtype = np.dtype(source.dtype)
        self.described = _describe_source(source)  # while it is open

    def read(self, buffer_type: int, start: int, stop: int) -> np.ndarray:
        """Samples ``start:stop``, read into memory.

        Raises:
            NetworkValidationError: naming the input and the dataset and
                its file, chained from h5py's error, if the values cannot
                be read (a damaged file, or one closed meanwhile).
        """
        try:
            if buffer_type == 2 and not self.add_time_axis:
                return np.asarray(self.source[:, start:stop])
            batch = np.asarray(self.source[start:stop])
        except (OSError, RuntimeError, ValueError) as error:
            if dataset_closed(self.source):
                raise _closed_error(self.name, error) from error
            if not isinstance(error, OSError):
                raise
            raise NetworkValidationError(
                f"predict: the data for input '{self.name}' could not be read "
                f'from {self.described}: {error}'
            ) from error
        return batch[np.newaxis] if self.add_time_axis else batch


def _batch_slices(arrays: dict, inputs: dict, batch_size: int, total: int):
    """Yield the first sample and the data of batches of ``batch_size``."""
    for start in range(0, total, batch_size):
        stop = min(start + batch_size, total)
        yield (
            start,
            {
                name: _batch_of(a, inputs[name].buffer_type, start, stop)
                for name, a in arrays.items()
            },
        )


def _check_finite(network, name: str, array, start: int, batch_first: bool) -> None:
    """Refuse a value the handler's dtype cannot hold, at its index as given.

    ``array`` is the batch of input ``name`` from sample ``start`` on (with
    a time axis added where the data came batch first).
    """
    array = np.asarray(array)
    found = find_unrepresentable(array, network.handler.dtype)
    if found is None:
        return
    index, value, what = found
    time_sized = network.layers['Input'].out_shapes[name].buffer_type == 2
    index = list(index)
    index[1 if time_sized else 0] += start
    if batch_first and time_sized:
        index = index[1:]
    raise NetworkValidationError(
        f"Input '{name}': the data holds {what} at index {tuple(index)}: "
        f'{value!r}. Clean the data, or pass check_finite=False to skip this '
        'check.'
    )


def _batch_of(array, buffer_type: int, start: int, stop: int):
    """Samples ``start:stop`` of one input's data."""
    if isinstance(array, _ReadOnSlicing):
        return array.read(buffer_type, start, stop)
    return array[start:stop] if buffer_type == 1 else array[:, start:stop]


def _join(results: list, buffer_type: int) -> np.ndarray:
    if buffer_type == 0:
        return results[-1]
    axis = 1 if buffer_type == 2 else 0
    if buffer_type == 2:
        steps = max(r.shape[0] for r in results)
        padded = []
        for r in results:
            if r.shape[0] < steps:
                r = np.concatenate(
                    [r, np.zeros((steps - r.shape[0],) + r.shape[1:], r.dtype)]
                )
            padded.append(r)
        results = padded
    return np.concatenate(results, axis=axis)


def predict(network, data, batch_size=None, out_name=None, check_finite=True):
    """See :meth:`brainstorm.structure.network.Network.predict`."""
    if out_name is None:
        out_name = network.output_name
    path = _checked_arguments(network, out_name, batch_size, check_finite)
    data = _as_data_dict(network, data, required_inputs(network, path))
    arrays, batch_first, total = _checked_arrays(network, data)
    if not total:
        raise NetworkValidationError(
            'predict: the data holds no sample (its batch size B is 0).'
        )
    buffer_type = _buffer_type_of(network, path)
    size = int(batch_size or total)
    if buffer_type == 0 and size < total:
        raise NetworkValidationError(
            f"predict: '{out_name}' is one value for the whole batch (such as "
            f'a loss), not one per sample, so it cannot be computed in batches '
            f'of batch_size={batch_size} of the {total} samples. Leave '
            'batch_size out (None) to compute it over all of them at once.'
        )
    inputs = network.layers['Input'].out_shapes
    results = []
    moved = network._memory_moved  # the batch buffers are put back as they were
    try:
        with _SpareBuffers(network.buffer_manager), _KeptLayerState(network):
            for start, batch in _batch_slices(arrays, inputs, size, total):
                if check_finite:  # naming the index in the data as given
                    for name, array in batch.items():
                        _check_finite(network, name, array, start, batch_first)
                try:
                    network.provide_external_data(
                        batch, all_inputs=False, check_finite=False
                    )
                    network.forward_pass(training_pass=False)
                except ValidationError as err:
                    if size < total or batch_first:
                        _add_to_message(
                            err, _batch_place(start, size, total, batch_first)
                        )
                    raise
                result = network.get(path)
                if buffer_type == 2:
                    result = result[: network.buffer_manager.time_size]
                results.append(result)
    finally:
        network._memory_moved = moved
    output = _join(results, buffer_type)
    if batch_first and buffer_type == 2:
        output = output[0]
    return output


def _batch_place(start: int, size: int, total: int, batch_first: bool) -> str:
    """Where the batch read from sample ``start`` on lies in the data."""
    stop = min(start + size, total)
    place = (
        f'predict read the data in batches: this one holds samples {start} to '
        f'{stop - 1} of the data, and the indices, sequences and time steps '
        'above count within it'
    )
    if batch_first:
        place += ' (with the time axis of batch-first data added in front)'
    return place


def _add_to_message(error: Exception, note: str) -> None:
    """Append ``[note]`` to the message of ``error`` (a ValidationError)."""
    error.args = (f'{error} [{note}]',)


def _checked_arguments(network, out_name, batch_size, check_finite) -> str:
    """The path of ``out_name``, after checking predict's arguments."""
    # an array's truth is ambiguous; a non-str was refused as unknown before
    check_value(
        'predict', None, 'out_name', _OUT_NAME, out_name, error=UnknownOutputError
    )
    if not out_name:
        raise NetworkValidationError(
            'predict: this network has no output_name; name the output to '
            f'return with out_name=..., one of {output_names(network)}.'
        )
    path = check_output_name(network, out_name, 'predict')
    if not isinstance(check_finite, (bool, np.bool_)):
        raise NetworkValidationError(
            'predict: check_finite must be a bool. Received: '
            f'check_finite={check_finite!r}'
        )
    if path.split('.')[0] not in network.layers or not computed_forward(network, path):
        raise NetworkValidationError(
            f"predict: '{out_name}' is not computed by a forward pass; predict "
            "returns what a forward pass computes (a layer's outputs or "
            f"internals). Read it with net.get('{path}')."
        )
    if batch_size is not None and (
        isinstance(batch_size, bool)
        or not isinstance(batch_size, (int, np.integer))
        or batch_size < 1
    ):
        raise NetworkValidationError(
            'predict: batch_size must be a positive int or None. Received: '
            f'batch_size={batch_size!r}'
        )
    return path


def _buffer_type_of(network, path: str) -> int:
    node = network.layout
    for part in path.split('.'):
        node = node[part]
    return get_buffer_type(node['@shape'])


class _SpareBuffers:
    """Run on fresh batch and time buffers, then put the old ones back.

    Everything the last training or evaluation batch left in the network
    (its data, activations, deltas, context, ``(T, B)``) is kept as it was:
    the network computes in new memory meanwhile. The constant buffer is
    shared: its parameters and gradients are not written by a forward pass
    that is no training pass, and its other arrays (the value of a
    ``Loss`` layer) are copied and put back.
    """

    def __init__(self, manager):
        self.manager = manager

    def __enter__(self):
        m = self.manager
        h = m.handler
        self.saved = (list(m._flat), list(m.buffers), m.time_size, m.batch_size)
        self.constants = []
        for spec in m._specs:
            if spec.buffer_type == 0 and not _KEPT.intersection(spec.path[:2]):
                source = m.buffers[0][spec.start : spec.stop]
                copy = h.allocate(source.shape)
                h.copy_to(source, copy)
                self.constants.append((spec, copy))
        m._flat[1] = m._flat[2] = None
        m.time_size = m.batch_size = None
        return self

    def __exit__(self, *exc):
        m = self.manager
        flat, buffers, time_size, batch_size = self.saved
        m._flat[:] = flat
        m.buffers[:] = buffers
        m.time_size, m.batch_size = time_size, batch_size
        m._build_views()
        for spec, copy in self.constants:
            m.handler.copy_to(copy, m.buffers[0][spec.start : spec.stop])
        return False


class _KeptLayerState:
    """Bind each layer's attributes again to their objects after predict.

    A layer may note something about the pass on itself (BatchNorm notes
    whether it was an inference pass, which decides its backward pass);
    the batch that predict leaves in place must find the note of its own
    forward pass. (An object a layer changes in place is not copied.)
    """

    def __init__(self, network):
        self.layers = list(network.layers.values())

    def __enter__(self):
        self.saved = [dict(vars(layer)) for layer in self.layers]
        return self

    def __exit__(self, *exc):
        for layer, attributes in zip(self.layers, self.saved):
            vars(layer).clear()
            vars(layer).update(attributes)
        return False


#: the parts of a layer that a forward pass does not compute (their values
#: are a backward pass's)
_NOT_COMPUTED = frozenset({'input_deltas', 'output_deltas', 'gradients'})


def computed_forward(network, path: str) -> bool:
    """Whether a forward pass computes (or reads) the buffer at ``path``.

    Not so for the deltas, the gradients (also the network's flat
    ``'gradients'``) and the internals a layer declares backward-only:
    predict and extract refuse them, whose values would be zeros or the
    last backward pass's.
    """
    parts = path.split('.')
    if parts[0] in _NOT_COMPUTED:
        return False
    layer = network.layers.get(parts[0])
    if layer is None or len(parts) < 2:
        return True
    if parts[1] in _NOT_COMPUTED:
        return False
    if parts[1] == 'internals' and len(parts) > 2:
        structure = layer.internal_shapes.get(parts[2])
        return not (structure is not None and structure.is_backward_only)
    return True


#: parts of a layer's constant memory that a forward pass (no training
#: pass) leaves alone
_KEPT = frozenset({'parameters', 'gradients'})
