"""Data for a network: checking a batch and writing it into the Input layer.

``Network.provide_external_data`` calls :func:`provide_external_data`,
which checks every array against the Input layer's output shapes, sizes the
network's memory to the batch's time and batch size, and copies the data
in.
"""

from __future__ import annotations

import math

import numpy as np

from brainstorm.errors import NetworkValidationError
from brainstorm.files import dataset_closed
from brainstorm.handlers.representable import find_unrepresentable

__all__ = [
    'MissingInputError',
    'provide_external_data',
    'check_data',
    'find_unrepresentable',
]


class MissingInputError(NetworkValidationError, KeyError):
    """A data dict lacks an input the network needs."""

    def __str__(self):
        return str(self.args[0])


def provide_external_data(
    input_layer,
    buffer_manager,
    data: dict,
    all_inputs: bool = True,
    check_finite: bool = True,
    id_inputs: dict | None = None,
) -> None:
    """Put a batch of data into the Input layer's outputs.

    Args:
        input_layer: the network's Input layer.
        buffer_manager: the network's BufferManager (resized to the batch).
        data: input name -> array of shape ``(T, B, *features)`` (or
            ``(B, *features)`` for batch-sized inputs).
        all_inputs: if False, inputs missing from ``data`` are skipped: they
            keep their values, or are zeros if the batch changed ``(T, B)``.
        check_finite: refuse NaN, infinite values and values the handler's
            dtype cannot hold (e.g. float64 beyond the float32 range), see
            :func:`find_unrepresentable`; False skips the check.
        id_inputs: input name -> the layers that read it as whole-number
            ids (e.g. ``("Embedding 'emb'",)``, see ``Layer.id_inputs``):
            float data for these is refused where the cast to the
            handler's dtype would change a value.

    Data that is not a NumPy array is read with ``np.asarray`` (an h5py
    dataset, a torch tensor) and checked as an ndarray, unless it is an
    array of the handler (``handler.array_type`` of the handler's dtype),
    which is copied as it is.

    Raises:
        NetworkValidationError: for missing names, wrong shapes or ranks,
            inconsistent T/B, non-numeric data, or (with ``check_finite``)
            a value that is not finite in the handler's dtype, or (always)
            an integer that the handler's dtype does not hold exactly (see
            :func:`_find_inexact_integer`), or (always) an id of
            ``id_inputs`` that the cast to that dtype would change.
    """
    if not hasattr(data, 'items'):
        raise NetworkValidationError(
            f'Data must be a dict of input names to arrays. Received: '
            f'{type(data).__name__}'
        )
    if not isinstance(check_finite, (bool, np.bool_)):
        raise NetworkValidationError(
            f'check_finite must be a bool. Received: check_finite={check_finite!r}'
        )
    handler = buffer_manager.handler
    arrays = _collect_arrays(input_layer.out_shapes, data, all_inputs, handler)
    if not arrays:
        return
    _check_values(handler, arrays, check_finite, id_inputs or {})
    time_size, batch_size = _time_and_batch_size(input_layer.out_shapes, arrays)
    before = (buffer_manager.time_size, buffer_manager.batch_size)
    if time_size is None:
        # no time-sized data given (all_inputs=False): the time size stays
        time_size = buffer_manager.time_size or 1
    buffer_manager.resize(time_size, batch_size)
    outputs = buffer_manager.views.Input.outputs
    if before != (buffer_manager.time_size, buffer_manager.batch_size):
        # the skipped inputs now view memory laid out for another (T, B)
        for name in input_layer.out_shapes:
            if name not in arrays:
                handler.fill(outputs[name], 0.0)
    for name, array in arrays.items():
        if isinstance(array, np.ndarray):
            handler.set_from_numpy(outputs[name], array)
        else:
            handler.copy_to(array, outputs[name])


def _check_values(handler, arrays: dict, check_finite: bool, id_inputs: dict) -> None:
    """The checks of :func:`provide_external_data` on each array's values."""
    for name, array in arrays.items():
        if check_finite:
            _check_finite_input(handler, name, array)
        # always: a rounded id is no bad value but a wrong one (another row)
        _check_exact_integers(handler, name, array)
        if name in id_inputs:
            _check_exact_ids(handler, name, array, id_inputs[name])


def _check_finite_input(handler, name: str, array) -> None:
    """Raise NetworkValidationError if ``array`` holds a bad value.

    ``array`` is a NumPy array or an array of the handler in its dtype
    (see :func:`_as_array`): only there does ``is_fully_finite`` say
    whether the values fit the handler's dtype.
    """
    if not isinstance(array, np.ndarray):
        if handler.is_fully_finite(array):
            return
        array = handler.get_numpy_copy(array)
    found = find_unrepresentable(array, handler.dtype)
    if found is not None:
        index, value, what = found
        raise NetworkValidationError(
            f"Input '{name}': the data holds {what} at index {index}: "
            f'{value!r}. Clean the data, or pass check_finite=False to '
            'skip this check.'
        )


def _find_inexact_integer(array, dtype) -> tuple | None:
    """The first integer of ``array`` that a cast to ``dtype`` changes.

    A float dtype holds every integer up to ``2**(nmant + 1)`` in magnitude
    exactly (2048 in float16, 2**24 in float32, 2**53 in float64); beyond,
    only some. Embedding ids and SoftmaxCE targets given as integers are
    cast to the handler's dtype, where float16 made id 2049 the id 2048: the
    wrong row, silently. The usual case costs nothing for integer types too
    small to reach that bound (int8, int16 and their unsigned kinds below
    float32) and one ``min`` and one ``max`` otherwise, without allocation;
    arrays of other kinds (floats, bools) are not looked at.

    Args:
        array: a NumPy array.
        dtype: the float dtype the values are stored in.

    Returns:
        None if the cast keeps every value, else ``(index, value,
        rounded)``: the index (a tuple) and value of the first integer it
        changes, and what it becomes (a Python float, maybe inf).
    """
    if array.dtype.kind not in 'iu' or not array.size:
        return None
    info = np.finfo(dtype)
    exact = _exact_up_to(dtype)
    kind = np.iinfo(array.dtype)
    if kind.max <= exact and -kind.min <= exact:
        return None
    if int(array.max()) <= exact and -int(array.min()) <= exact:
        return None
    # |x| as uint64 (int64's minimum too): exact where its bits from the
    # highest to the lowest set one fit the significand and it is in range
    if kind.min < 0:
        magnitude = np.abs(array.astype(np.int64)).view(np.uint64)
    else:
        magnitude = array.astype(np.uint64)
    lowest_bit = magnitude & (~magnitude + np.uint64(1))
    significand = magnitude // np.maximum(lowest_bit, np.uint64(1))
    inexact = significand > np.uint64(exact - 1)
    largest = int(info.max)
    if largest < 2**64:  # float16: 65520 and above become inf
        inexact |= magnitude > np.uint64(largest)
    if not inexact.any():
        return None
    index = tuple(
        int(i) for i in np.unravel_index(int(np.argmax(inexact)), array.shape)
    )
    value = array[index]
    with np.errstate(over='ignore'):
        rounded = float(value.astype(dtype))
    return index, int(value), rounded


def _exact_up_to(dtype) -> int:
    """The bound up to which the float ``dtype`` holds every integer."""
    return 2 ** (int(np.finfo(dtype).nmant) + 1)


def _check_exact_integers(handler, name: str, array) -> None:
    """Refuse integers that the handler's dtype does not hold exactly.

    Raises:
        NetworkValidationError: naming the input, the first such integer,
            its index, what it would become and wider dtypes (see
            :func:`_find_inexact_integer`).
    """
    if not isinstance(array, np.ndarray):
        return  # a handler array: already in the handler's dtype
    found = _find_inexact_integer(array, handler.dtype)
    if found is None:
        return
    index, value, rounded = found
    dtype = np.dtype(handler.dtype)
    became = f'{int(rounded)}' if math.isfinite(rounded) else f'{rounded}'
    raise NetworkValidationError(
        f"Input '{name}': the integer {value} at index {index} is not exact "
        f'in {dtype.name}, the dtype of the handler: it would become '
        f'{became} (an Embedding id or a class index would pick another '
        f'row). {_exact_integers_hint(dtype)}.'
    )


def _exact_integers_hint(dtype) -> str:
    """How far ``dtype`` holds every integer, and which dtypes hold more."""
    exact = _exact_up_to(dtype)
    wider = [
        f'{other} (exact up to {_exact_up_to(other)})'
        for other in ('float32', 'float64')
        if _exact_up_to(other) > exact
    ]
    hint = (
        f'use a handler of a wider dtype: {" or ".join(wider)}'
        if wider
        else 'no float dtype of a handler holds it: number the ids anew'
    )
    return f'{dtype.name} holds every integer only up to {exact}; {hint}'


def _find_bad_float_id(array, dtype) -> tuple | None:
    """The first finite float of ``array`` that is no id ``dtype`` holds.

    A value with a fraction (2.5) is no id; a whole one the cast to
    ``dtype`` changes (a float64 2049.0 becomes 2048 in float16, and
    2.0001, a fraction, 2) would be another row. Arrays of other kinds are
    not looked at (integers: see :func:`_find_inexact_integer`); NaN and
    inf are left to the finite check and the layers. One ``floor`` and one
    comparison, and a cast where ``dtype`` is narrower than the data.

    Returns:
        None if every finite value is a whole number the cast keeps, else
        ``(index, value, rounded)``: the index (a tuple) and value of the
        first that is not, and what the cast makes of it (a Python float).
    """
    if array.dtype.kind != 'f' or not array.size:
        return None
    with np.errstate(over='ignore', invalid='ignore'):
        bad = np.floor(array) != array
        if not np.can_cast(array.dtype, dtype):
            bad |= array.astype(dtype) != array
        bad &= np.isfinite(array)
    if not bad.any():
        return None
    index = tuple(int(i) for i in np.unravel_index(int(np.argmax(bad)), array.shape))
    value = array[index]
    with np.errstate(over='ignore'):
        rounded = float(value.astype(dtype))
    return index, float(value), rounded


def _check_exact_ids(handler, name: str, array, readers: tuple) -> None:
    """Refuse float ids that are not whole or that the cast would change.

    Raises:
        NetworkValidationError: naming the input, the layers reading it as
            ids, the first such value, its index and (for a whole number)
            what it would become.
    """
    if not isinstance(array, np.ndarray):
        return  # a handler array: already in the handler's dtype
    found = _find_bad_float_id(array, handler.dtype)
    if found is None:
        return
    index, value, rounded = found
    where = (
        f"Input '{name}' holds ids for {', '.join(readers)}: the value "
        f'{value!r} at index {index}'
    )
    if not float(value).is_integer():
        raise NetworkValidationError(
            f'{where} is not a whole number (ids are whole numbers: class '
            'indices, vocabulary ids).'
        )
    dtype = np.dtype(handler.dtype)
    raise NetworkValidationError(
        f'{where} would become {rounded!r} in {dtype.name}, the dtype of the '
        f'handler (another row or class, silently). '
        f'{_exact_integers_hint(dtype)}.'
    )


def _collect_arrays(out_shapes: dict, data: dict, all_inputs: bool, handler) -> dict:
    """The checked arrays of ``data`` for the network's inputs.

    Each is a NumPy array or an array of ``handler`` (see :func:`_as_array`).
    """
    arrays = {}
    for name, structure in out_shapes.items():
        if name not in data:
            if all_inputs:
                raise MissingInputError(
                    f"Data for input '{name}' is missing. The network's "
                    f'inputs are {list(out_shapes)}; received '
                    f'{list(data)}. To run without targets, pass '
                    'all_inputs=False (inputs left out keep no data of this '
                    "batch), or use net.predict(data) for the network's "
                    'outputs.'
                )
            continue
        array = data[name]
        if dataset_closed(array):
            raise NetworkValidationError(
                f"Input '{name}': the data cannot be read: it is an h5py "
                'dataset whose file was closed. Keep the file open, or open '
                'it again and pass its dataset.'
            )
        check_data(name, array, structure)
        arrays[name] = _as_array(handler, name, array)
    return arrays


def _as_array(handler, name: str, array):
    """``array`` as a NumPy array, unless it is an array of ``handler``.

    An array of the handler (an instance of ``handler.array_type`` in the
    handler's dtype, e.g. a GPU array) is copied in as it is. Other
    array-likes (an h5py dataset, a torch tensor) are read into a NumPy
    array, so that the checks of NumPy data apply to them too: their values
    are cast to the handler's dtype like an ndarray's.

    Raises:
        NetworkValidationError: NumPy cannot read the data, or it is not
            numeric.
    """
    if isinstance(array, np.ndarray):
        return array
    array_type = handler.array_type
    if array_type is not None and isinstance(array, array_type):
        if array.dtype == handler.dtype:
            return array
    try:
        converted = np.asarray(array)
    except Exception as err:  # the array-like's own error, for the cause
        raise NetworkValidationError(
            f"Input '{name}': expected a NumPy array, an array of the handler "
            f'or an array-like NumPy can read. Received: '
            f'{type(array).__name__} ({type(err).__name__}: {err})'
        ) from err
    _check_numeric(name, converted.dtype)
    return converted


def _time_and_batch_size(out_shapes: dict, arrays: dict) -> tuple:
    """The common ``(T, B)`` of the arrays (T None if all are batch-sized).

    Raises:
        NetworkValidationError: if the arrays disagree on T or B.
    """
    T = B = None
    for name, array in arrays.items():
        if out_shapes[name].buffer_type == 2:
            tb = tuple(array.shape)[:2]
            if T is None:
                T, B = tb
            elif tb != (T, B):
                raise NetworkValidationError(
                    f"Input '{name}': time and batch size {tb} differ "
                    f'from those of the other inputs {(T, B)}.'
                )
    for name, array in arrays.items():
        if out_shapes[name].buffer_type == 1:
            if B is None:
                B = array.shape[0]
            elif array.shape[0] != B:
                raise NetworkValidationError(
                    f"Input '{name}': batch size {array.shape[0]} differs "
                    f'from that of the other inputs ({B}).'
                )
    return T, B


def check_data(name: str, array, structure):
    """Check one input's data against the Input layer's output structure.

    Args:
        name: the input's name.
        array: the data, a NumPy array or a handler array.
        structure: the :class:`BufferStructure` of that output.

    Returns:
        ``array``, unchanged.

    Raises:
        NetworkValidationError: for something that is no array, masked or
            non-numeric data, or a wrong number of dimensions or features.
    """
    expected = structure.shape
    if not hasattr(array, 'shape') or not hasattr(array, 'dtype'):
        raise NetworkValidationError(
            f"Input '{name}': expected an array of shape {expected}. "
            f'Received: {type(array).__name__}'
        )
    if isinstance(array, np.ma.MaskedArray):
        # its mask would be dropped silently
        raise NetworkValidationError(
            f"Input '{name}': masked arrays are not supported (the mask "
            'would be lost). Pass array.filled(value) and give the mask '
            "as an input of its own (e.g. 'mask'). Received: "
            'MaskedArray'
        )
    if isinstance(array.dtype, np.dtype):  # not e.g. a torch dtype
        _check_numeric(name, array.dtype)
    shape = tuple(array.shape)
    if len(shape) != len(expected):
        raise NetworkValidationError(
            f"Input '{name}': expected {len(expected)} dimensions "
            f'{expected}. Received shape {shape}'
        )
    if shape[structure.buffer_type :] != structure.feature_shape:
        raise NetworkValidationError(
            f"Input '{name}': expected feature shape "
            f'{structure.feature_shape} (full shape {expected}). '
            f'Received shape {shape}'
        )
    return array


def _check_numeric(name: str, dtype) -> None:
    """Raise NetworkValidationError unless ``dtype`` is real numbers or bool."""
    if not _is_real_numeric(dtype):
        raise NetworkValidationError(
            f"Input '{name}': expected numeric data. Received dtype {dtype}"
        )


def _is_real_numeric(dtype) -> bool:
    """Whether ``dtype`` is a real number type or bool (not complex)."""
    if np.issubdtype(dtype, np.complexfloating):
        return False
    return bool(np.issubdtype(dtype, np.number) or dtype == np.bool_)
