"""Evaluating networks and extracting their buffers, into arrays or an HDF5 file."""

from __future__ import annotations

import copy
from collections import OrderedDict

import numpy as np

from brainstorm.arguments import (
    AnyOf,
    Arg,
    FileName,
    Instance,
    ListOf,
    Optional,
    Str,
    declare,
)
from brainstorm.data_iterators import DataIterator
from brainstorm.errors import (
    IteratorValidationError,
    NetworkValidationError,
)
from brainstorm.files import (
    get_brainstorm_info,
    write_hdf5,
)
from brainstorm.naming import get_by_path
from brainstorm.scorers import (
    Scorer,
    aggregate_losses_and_scores,
    gather_from_all_ranks,
    gather_losses_and_scores,
)
from brainstorm.structure.external_data import MissingInputError
from brainstorm.structure.layout import get_buffer_type
from brainstorm.structure.network import Network
from brainstorm.structure.prediction import (
    TARGET_INPUT,
    TARGETS_HINT,
    UnknownOutputError,
    computed_forward,
    output_names,
    required_inputs,
)
from brainstorm.training.checkpoint_file import iterator_chain
from brainstorm.training.data_parallel import share_shard_states
from brainstorm.training.utils import checked_batches, run_network

BUFFERS_FILE_FORMAT = b'Buffers file v1.0'

_NETWORK = Instance(Network)
_BUFFER_NAMES = AnyOf(Str(nonempty=True), ListOf(Str(nonempty=True), nonempty=True))


@declare(
    NetworkValidationError,
    network=Arg(_NETWORK),
    scorers=Arg(ListOf(Instance(Scorer)), default=()),
    out_name=Arg(Str(), default=''),
    targets_name=Arg(Str(nonempty=True), default='targets'),
    mask_name=Arg(Optional(Str()), default=None),
)
def evaluate(
    network,
    iter,
    scorers=(),
    out_name: str = '',
    targets_name: str = 'targets',
    mask_name: str | None = None,
    *,
    comm=None,
) -> OrderedDict:
    """Return the losses and scores of ``network`` over one pass of ``iter``.

    The forward passes run with ``training_pass=False``.

    Args:
        network: the network.
        iter: the data iterator.
        scorers: scorers to evaluate (see :mod:`brainstorm.scorers`).
        out_name: output path for scorers without their own.
        targets_name: targets name for scorers whose own is empty
            (``targets_name=''``; a scorer's default is ``'targets'``).
        mask_name: mask name for scorers without their own.
        comm: an MPI communicator: the figures are joined over all its
            ranks (each evaluating its own part of the data). A ``Shard``
            in ``iter``, and what it wraps, first get rank 0's random
            states, so that all ranks shuffle alike.

    Returns:
        OrderedDict: the losses (batch-size weighted means), then the
        scores.

    Raises:
        IteratorValidationError: if ``iter`` yields no batch or only empty
            batches (the empty-data rule: no figure over no data).

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> inp, out = bs.tools.get_in_out_layers('classification', 2, 2)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)  # all outputs equal: every class gets 1/2
        >>> data = bs.data_iterators.Minibatches(
        ...     5, default=np.ones((1, 10, 2)), targets=np.zeros((1, 10, 1)))
        >>> scores = bs.tools.evaluate(net, data, scorers=[bs.scorers.Accuracy()],
        ...                            out_name='Output.outputs.predictions')
        >>> round(scores['total_loss'], 4)  # ln 2 per sample, averaged
        0.6931
    """
    share_shard_states(comm, [iter])
    return _evaluate(
        network,
        iter,
        scorers,
        out_name,
        targets_name,
        mask_name,
        comm=comm,
        who=f'evaluate: the data iterator {_short(iter)}',
    )


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + '...'


def _evaluate(
    network,
    iter,
    scorers=(),
    out_name: str = '',
    targets_name: str = 'targets',
    mask_name: str | None = None,
    *,
    comm=None,
    who: str,
) -> OrderedDict:
    """:func:`evaluate` with ``who`` (naming the iterator) in its errors.

    Raises:
        IteratorValidationError: if the iterator yields no batch, or only
            batches without samples (on all ranks together): the
            empty-data rule.
    """
    scorers = list(scorers)
    scores: OrderedDict = OrderedDict()
    network._enter('evaluate')  # the whole pass: no other thread's batches
    try:
        for _ in run_network(network, iter):
            network.forward_pass(training_pass=False)
            gather_losses_and_scores(
                network,
                scorers,
                scores,
                out_name=out_name,
                targets_name=targets_name,
                mask_name=mask_name or '',
            )
    finally:
        network._leave()
    scores = gather_from_all_ranks(scores, comm)
    batches = scores.get('total_loss', [])
    if not sum(weight for weight, _ in batches):
        what = f'{len(batches)} batches, all without samples' if batches else 'no batch'
        raise IteratorValidationError(
            f'{who} yielded {what}: there is nothing to evaluate (a loss of '
            '0.0 over no data would look like a perfect score). Give it '
            'data, or leave it out.'
        )
    return aggregate_losses_and_scores(scores, network, scorers)


def _buffer_type(network, path: str) -> int:
    try:
        node = get_by_path(network.layout, path)
    except KeyError:
        raise UnknownOutputError(
            f"Unknown buffer '{path}'. The network's outputs are "
            f'{output_names(network)}; other buffers are reached the same '
            "way (e.g. 'parameters', '<layer>.internals.<name>')."
        ) from None
    if '@shape' not in node:
        raise NetworkValidationError(
            f"'{path}' is a view, not a buffer. Its entries: "
            f'{[k for k in node if not k.startswith("@")]}'
        )
    return get_buffer_type(node['@shape'])


def _checked_types(network, names: list, who: str) -> dict:
    """The buffer type of each of ``names``.

    Buffers that no forward pass computes are refused: the deltas and
    gradients of the last backward pass would be returned, stale.
    """
    types = {name: _buffer_type(network, name) for name in names}
    for name in names:
        if not computed_forward(network, name):
            raise NetworkValidationError(
                f"{who}: '{name}' is not computed by a forward pass, so it "
                'cannot be extracted (a forward pass runs per batch; deltas, '
                "gradients and backward-only internals are a backward pass's). "
                'Extract outputs, internals or parameters, or read it with '
                f"net.get('{name}')."
            )
    return types


def _needed_inputs(network, names: list) -> list:
    """The Input outputs that the buffers ``names`` depend on."""
    needed: set = set()
    for name in names:
        if name.split('.')[0] in network.layers:
            needed.update(required_inputs(network, name))
    return [name for name in network.layers['Input'].out_shapes if name in needed]


def _as_names(buffer_names) -> list:
    if isinstance(buffer_names, str):
        return [buffer_names]
    return list(buffer_names)


def in_data_order(iterator):
    """``iterator`` reading its data in order: its shuffling turned off.

    Every iterator of the chain (the iterator and those it wraps through
    ``.iter``) that has a true ``shuffle`` attribute (``Minibatches``) is
    replaced by a shallow copy with ``shuffle = False``, and so is every
    wrapper above it. The data arrays are shared, nothing is read, and the
    given iterators and their random states are left as they were (the
    shuffling draws nothing). An iterator without shuffling is returned
    as it is.

    Args:
        iterator: a :class:`~brainstorm.data_iterators.DataIterator` (or
            any iterable of batches, returned as it is).

    Returns:
        The iterator to read from.
    """
    inner = getattr(iterator, 'iter', None)
    unshuffled = in_data_order(inner) if isinstance(inner, DataIterator) else inner
    shuffles = bool(getattr(iterator, 'shuffle', False))
    if unshuffled is inner and not shuffles:
        return iterator
    result = copy.copy(iterator)
    if unshuffled is not inner:
        result.iter = unshuffled
    if shuffles:
        result.shuffle = False
    return result


def _extract_batches(network, iter, types, who):
    """Yield ``{path: array}`` per batch after a forward pass, in data order.

    ``types``: buffer path -> buffer type. A batch without an input that
    one of the buffers depends on raises a
    MissingInputError: the forward pass would compute it from the values
    the last batch left (or zeros).
    """
    names = list(types)
    time_sized = {name for name, kind in types.items() if kind == 2}
    needed = _needed_inputs(network, names)
    batches = checked_batches(
        network, in_data_order(iter) if isinstance(iter, DataIterator) else iter
    )
    # the random states of an augmenting wrapper (noise, crops) are put back
    # as they were (the shuffling draws nothing in data order)
    states = [
        (it.rnd, it.rnd.get_state())
        for it in iterator_chain(iter)
        if isinstance(getattr(it, 'rnd', None), np.random.RandomState)
    ]
    try:
        yield from _extracted(network, batches, names, needed, time_sized, who)
    finally:
        for rnd, state in states:
            rnd.set_state(state)


def _extracted(network, batches, names, needed, time_sized, who):
    """Yield ``{path: array}`` per batch (see :func:`_extract_batches`)."""
    hint = TARGETS_HINT if TARGET_INPUT in needed else ''
    for data in batches:
        missing = [name for name in needed if name not in data]
        if missing:
            raise MissingInputError(
                f'{who}: the iterator gives no data for the inputs {missing}; '
                f'the buffers {names} need {needed}{hint}. A batch holds '
                f'{list(data)}.'
            )
        # each batch is held from its data to its results (not across the
        # yield: the caller may stop early)
        network._enter('extract')
        try:
            network.provide_external_data(data, all_inputs=False)
            network.forward_pass(training_pass=False)
            # Layers with a context keep an extra time slot after the
            # data's last step; only the data's time steps are results.
            time_size = network.buffer_manager.time_size
            batch = {
                name: network.get(name)[:time_size]
                if name in time_sized
                else network.get(name)
                for name in names
            }
        finally:
            network._leave()
        yield batch


def _pad_time(array: np.ndarray, time_steps: int) -> np.ndarray:
    if array.shape[0] == time_steps:
        return array
    padded = np.zeros((time_steps,) + array.shape[1:], dtype=array.dtype)
    padded[: array.shape[0]] = array
    return padded


@declare(NetworkValidationError, network=Arg(_NETWORK), buffer_names=Arg(_BUFFER_NAMES))
def extract(network, iter, buffer_names) -> dict:
    """Run the network over ``iter`` and collect buffers.

    Time-sized buffers are returned as ``(T, N_total, ...)`` (batches with
    fewer time steps are zero-padded to the longest), batch-sized ones as
    ``(N_total, ...)``, constant ones as they are.

    Args:
        network: the network.
        iter: a data iterator, or an iterable of batch dicts. Inputs that
            the buffers do not depend on may be missing (the targets, for
            predictions); a missing one they need raises a
            ``MissingInputError``.
        buffer_names: a dotted buffer path or a list of them, e.g.
            ``'Output.outputs.predictions'``.

    Returns:
        dict path -> NumPy array.
    """
    names = _as_names(buffer_names)
    types = _checked_types(network, names, 'extract')
    collected: dict = {name: [] for name in names}
    for batch in _extract_batches(network, iter, types, 'extract'):
        for name, array in batch.items():
            collected[name].append(array)
    result: dict = {}
    for name, arrays in collected.items():
        if not arrays:
            result[name] = None
        elif types[name] == 2:
            time_steps = max(a.shape[0] for a in arrays)
            result[name] = np.concatenate(
                [_pad_time(a, time_steps) for a in arrays], axis=1
            )
        elif types[name] == 1:
            result[name] = np.concatenate(arrays, axis=0)
        else:
            result[name] = arrays[-1]
    return result


@declare(
    NetworkValidationError,
    network=Arg(_NETWORK),
    buffer_names=Arg(_BUFFER_NAMES),
    file_name=Arg(FileName()),
)
def extract_and_save(network, iter, buffer_names, file_name: str) -> None:
    """Like :func:`extract`, but write each buffer into an HDF5 file.

    Each buffer becomes a dataset, written as the batches come; the file
    has the attributes ``info`` and ``format = b'Buffers file v1.0'``.

    Datasets grow along the batch axis, and along the time axis when a
    later batch is longer (shorter batches are zero-padded).

    Args:
        network: the network.
        iter: a data iterator.
        buffer_names: a dotted buffer path or a list of them.
        file_name: the HDF5 file to write (a str or ``os.PathLike``).

    The file is built in memory and then written under a temporary name
    that is moved into place, so an interrupted or failed run (a full
    disk, a file-size limit) leaves the previous file, not half of a new
    one.

    Raises:
        FileWriteError: if the file cannot be written, naming it.
    """
    names = _as_names(buffer_names)
    types = _checked_types(network, names, 'extract_and_save')

    def build(writer):
        f = writer.file
        f.attrs['info'] = np.bytes_(get_brainstorm_info())
        f.attrs['format'] = np.bytes_(BUFFERS_FILE_FORMAT)
        for batch in _extract_batches(network, iter, types, 'extract_and_save'):
            for name, array in batch.items():
                kind = types[name]
                if kind == 0:
                    if name in f:
                        del f[name]
                    f.create_dataset(name, data=array)
                    continue
                axis = 1 if kind == 2 else 0
                if name not in f:
                    maxshape = list(array.shape)
                    maxshape[axis] = None
                    if kind == 2:
                        maxshape[0] = None
                    f.create_dataset(
                        name, data=array, maxshape=maxshape, chunks=True, fillvalue=0
                    )
                    continue
                dataset = f[name]
                shape = list(dataset.shape)
                start = shape[axis]
                shape[axis] += array.shape[axis]
                if kind == 2:
                    shape[0] = max(shape[0], array.shape[0])
                dataset.resize(shape)
                if kind == 2:
                    dataset[: array.shape[0], start:] = array
                else:
                    dataset[start:] = array

    write_hdf5(file_name, build, checksums=False)


# ------------------------------------------------------------ inspection ---
