"""Scorers: measure how well a network does, batch by batch.

A scorer is called with the targets, the network's predictions and an
optional mask, all reshaped to ``(rows, last_dim)``, and returns the SUM of
its score over the rows of the batch. :func:`gather_losses_and_scores`
collects ``(weight, value)`` pairs per batch and
:func:`aggregate_losses_and_scores` turns them into one number each, with
:meth:`Scorer.aggregate` computing ``sum(values) / sum(weights)``.

Masks: a mask holds one weight per row (``(rows, 1)``); MeanSquaredError
and Hamming also take one weight per element of the predictions
(``(rows, n)``, as Brainstorm 0.5's ``errors *= mask`` did). The weight of
a batch is the mask's sum. Entries of weight 0 do not count at all, not
even when the network's output there is NaN.

A diverged network is not scored well: Accuracy and Hamming give NaN for a
batch with a NaN or infinite prediction among the scored entries, and
MeanSquaredError's errors are NaN or infinite there anyway; the NaN carries
through :meth:`Scorer.aggregate` to the figure of the whole data.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any, ClassVar

import numpy as np

from brainstorm.arguments import Arg, Optional, Real, Str
from brainstorm.describable import Describable
from brainstorm.errors import (
    TrainingValidationError,
    ValidationError,
)
from brainstorm.parallel import processes_of
from brainstorm.shapes import flatten_all_but_last
from brainstorm.structure.layout import get_buffer_type
from brainstorm.structure.prediction import check_output_name

__all__ = [
    'Scorer',
    'Accuracy',
    'Hamming',
    'MeanSquaredError',
    'gather_losses_and_scores',
    'aggregate_losses_and_scores',
    'gather_from_all_ranks',
    'batch_size_of',
    'ScorerInputError',
]


class _LogKey(Str):
    """A name that becomes one key of the trainer's logs: no ``'.'`` in it.

    Log names are dotted paths (``'validation.Accuracy'``), so a hook or
    scorer named ``'a.b'`` would log values that no dotted path can name.
    """

    def __init__(self) -> None:
        super().__init__(nonempty=True)
        self.expected = (
            "a non-empty str without '.' (log names are dotted paths, so a "
            "'.' could not be told from a nesting level)"
        )
        self.invalid_examples = (*self.invalid_examples, 'a.b')

    def normalize(self, value: Any) -> Any:
        """Return ``value`` if it is a non-empty str without ``'.'``."""
        value = super().normalize(value)
        if '.' in value:
            raise ValueError
        return value


class Scorer(Describable):
    """Base class of all scorers.

    Args:
        out_name: path of the network output to score (e.g.
            ``'Output.outputs.predictions'``); empty means the default
            given to :func:`gather_losses_and_scores` or ``net.output_name``.
        targets_name: name of the Input output holding the targets; empty
            means the ``targets_name`` given to
            :func:`~brainstorm.tools.evaluate` or
            :func:`gather_losses_and_scores` (by default ``'targets'``).
        mask_name: name of the Input output holding a mask (empty: none).
        name: name under which the score is logged (default: class name);
            no ``'.'`` in it (log names are dotted paths).
    """

    __argument_error__ = TrainingValidationError
    #: Whether a mask may hold one weight per element of the predictions
    #: (``(rows, n)``) besides one per row (``(rows, 1)``). True: it may;
    #: False: such a mask is refused rather than broadcast (``Accuracy``
    #: scores whole rows). None (a scorer class of one's own that does not
    #: say): the mask reaches ``__call__`` with the columns it has, as in
    #: Brainstorm 0.5.
    elementwise_mask: ClassVar[bool | None] = None
    __arguments__ = {
        'out_name': Arg(Str()),
        'targets_name': Arg(Str()),
        'mask_name': Arg(Str()),
        'name': Arg(Optional(_LogKey()), attr='__name__'),
    }

    def __init__(
        self,
        out_name: str = '',
        targets_name: str = 'targets',
        mask_name: str = '',
        name: str | None = None,
    ):
        self.out_name = out_name
        self.targets_name = targets_name
        self.mask_name = mask_name
        self.__name__ = name if name is not None else type(self).__name__

    def __init_from_description__(self, description: dict) -> None:
        super().__init_from_description__(description)
        if self.__name__ is None:  # as the constructor gives it: the class name
            self.__name__ = type(self).__name__

    def __call__(
        self,
        true_labels: np.ndarray,
        predicted: np.ndarray,
        mask: np.ndarray | None = None,
    ) -> float:
        """Return the summed score of one batch.

        Args:
            true_labels: targets, shape ``(rows, k)``.
            predicted: network outputs, shape ``(rows, n)``.
            mask: optional weights, one per row (shape ``(rows, 1)``) or,
                where :attr:`elementwise_mask` is set, one per element
                (shape ``(rows, n)``); the batch's weight is its sum.
        """
        raise NotImplementedError

    @staticmethod
    def aggregate(outputs: Sequence[tuple[float, float]]) -> float:
        """Combine ``(weight, value)`` pairs into ``sum(value) / sum(weight)``.

        Returns 0.0 if the weights sum to zero. A NaN batch value (a
        diverged network's, see :class:`Accuracy`) makes the result NaN.
        """
        pairs = np.asarray(outputs, dtype=np.float64).reshape(-1, 2)
        total_weight = pairs[:, 0].sum()
        if total_weight == 0:
            return 0.0
        return float(pairs[:, 1].sum() / total_weight)


def _names(scorer) -> tuple[str, str, str]:
    """How a scorer's errors name its targets, predictions and mask."""
    targets = f"targets '{scorer.targets_name}'" if scorer.targets_name else 'targets'
    output = f"predictions '{scorer.out_name}'" if scorer.out_name else 'predictions'
    mask = f"mask '{scorer.mask_name}'" if scorer.mask_name else 'mask'
    return targets, output, mask


def _same_shape(scorer, true_labels: np.ndarray, predicted: np.ndarray) -> None:
    """Refuse targets of another shape than the predictions (no broadcast)."""
    if true_labels.shape != predicted.shape:
        targets, output, _ = _names(scorer)
        raise ValidationError(
            f'{scorer.__name__}: {targets} and {output} must have the same '
            f'shape. Received: {true_labels.shape} and {predicted.shape}'
        )


def _mask_of_call(scorer, mask, predicted: np.ndarray) -> np.ndarray | None:
    """The mask given to a scorer's ``__call__``, checked against ``predicted``.

    A 1-D mask is read as one weight per row.

    Raises:
        ValidationError: naming the scorer, if the mask has not one row per
            row of ``predicted`` and one column (or, for scorers with
            ``elementwise_mask``, as many as ``predicted``).
    """
    if mask is None:
        return None
    mask = np.asarray(mask)
    if mask.ndim == 1:
        mask = mask.reshape(-1, 1)
    rows, columns = predicted.shape
    if mask.ndim == 2 and mask.shape[0] == rows and _columns_fit(scorer, mask, columns):
        return mask
    _, output, name = _names(scorer)
    raise ValidationError(
        f'{scorer.__name__}: {name} must hold one weight per row '
        f'{_mask_expected(scorer, columns)}. Received: {name} of shape '
        f'{mask.shape} for {output} of shape {predicted.shape}'
    )


def _columns_fit(scorer, mask: np.ndarray, columns: int) -> bool:
    if scorer.elementwise_mask is None:  # the scorer's own business
        return True
    return mask.shape[1] == 1 or (scorer.elementwise_mask and mask.shape[1] == columns)


def _mask_expected(scorer, columns: int) -> str:
    """The last dimensions a mask of ``scorer`` may have, in words."""
    if scorer.elementwise_mask is None:
        return '(any last dimension)'
    if scorer.elementwise_mask:
        return f'(a last dimension of 1) or per element (a last dimension of {columns})'
    return (
        f'(a last dimension of 1); {type(scorer).__name__} takes no weight per '
        'element (its elementwise_mask is False: it scores whole rows)'
    )


def _weigh(values: np.ndarray, mask: np.ndarray | None) -> np.ndarray:
    """``values * mask``, with 0 wherever the mask is 0 (also for NaN values)."""
    if mask is None:
        return values
    out = np.zeros(np.broadcast_shapes(values.shape, mask.shape))
    return np.multiply(values, mask, out=out, where=mask != 0)


def _diverged(predicted: np.ndarray, mask: np.ndarray | None) -> bool:
    """Whether a prediction of nonzero weight is NaN or infinite."""
    bad = ~np.isfinite(predicted)
    if mask is not None:
        bad &= mask != 0
    return bool(bad.any())


class Accuracy(Scorer):
    """Fraction of rows classified correctly.

    Predictions with more than one column are turned into class ids by
    argmax; so are targets with more than one column (one-hot targets).
    Single-column predictions are compared with the targets as they are.
    Targets and predictions need the same number of rows, and a mask one
    weight per row.

    A batch with a NaN or infinite prediction in a row of nonzero weight
    (a diverged network) scores NaN, and so does the aggregate over all
    batches: argmax would read a NaN row as class 0.
    """

    elementwise_mask = False

    def __call__(self, true_labels, predicted, mask=None):
        """Return the summed score of one batch (see :meth:`Scorer.__call__`)."""
        if true_labels.shape[0] != predicted.shape[0]:
            targets, output, _ = _names(self)
            raise ValidationError(
                f'{self.__name__}: {targets} and {output} must have the same '
                'number of rows (one target per predicted row). Received: '
                f'{true_labels.shape} and {predicted.shape}'
            )
        mask = _mask_of_call(self, mask, predicted)
        if _diverged(predicted, mask):
            return float('nan')
        if predicted.shape[1] > 1:
            predicted = predicted.argmax(axis=1).reshape(-1, 1)
        if true_labels.shape[1] > 1:
            true_labels = true_labels.argmax(axis=1).reshape(-1, 1)
        correct = (predicted == true_labels).astype(np.float64)
        return float(_weigh(correct, mask).sum())


class Hamming(Scorer):
    """Per row, the fraction of bits predicted correctly (an accuracy).

    A bit is predicted as 1 where ``predicted >= threshold``. A mask holds
    one weight per row or one per bit (the predictions' shape); with one
    per bit the figure is the weighted fraction of bits predicted
    correctly, ``sum(correct * mask) / sum(mask)``.

    A batch with a NaN or infinite prediction of nonzero weight (a
    diverged network) scores NaN, and so does the aggregate over all
    batches: such a bit would be read as 0.

    Args:
        threshold: decision threshold for the predictions.
        out_name: see :class:`Scorer`.
        targets_name: see :class:`Scorer`.
        mask_name: see :class:`Scorer`.
        name: see :class:`Scorer`.
    """

    elementwise_mask = True
    __arguments__ = {'threshold': Arg(Real())}

    def __init__(
        self,
        threshold: float = 0.5,
        out_name: str = '',
        targets_name: str = 'targets',
        mask_name: str = '',
        name: str | None = None,
    ):
        super().__init__(out_name, targets_name, mask_name, name)
        self.threshold = threshold

    def __call__(self, true_labels, predicted, mask=None):
        """Return the summed score of one batch (see :meth:`Scorer.__call__`)."""
        _same_shape(self, true_labels, predicted)
        mask = _mask_of_call(self, mask, predicted)
        if _diverged(predicted, mask):
            return float('nan')
        bits = (predicted >= self.threshold) == (true_labels >= 0.5)
        if mask is not None and mask.shape[1] > 1:  # one weight per bit
            return float(_weigh(bits, mask).sum())
        per_row = bits.mean(axis=1, keepdims=True)
        return float(_weigh(per_row, mask).sum())


class MeanSquaredError(Scorer):
    """Half the summed squared error per row, averaged over the rows.

    With a mask of one weight per element (the predictions' shape) it is
    half the squared error per element, averaged over the elements as
    weighed: ``sum(0.5 * (t - p)**2 * mask) / sum(mask)``, as in Brainstorm
    0.5 (a mask of ones thus gives the unmasked figure divided by the
    number of columns). Entries of weight 0 do not count, not even when
    they are NaN. The errors and their sum are computed in float64, also
    for a float16 network (where errors of 256 have squares beyond its
    range).
    """

    elementwise_mask = True

    def __call__(self, true_labels, predicted, mask=None):
        """Return the summed score of one batch (see :meth:`Scorer.__call__`)."""
        _same_shape(self, true_labels, predicted)  # no silent broadcasting
        mask = _mask_of_call(self, mask, predicted)
        # in float64: float16 squares overflow from errors of 256 on, and
        # their sum over a batch long before
        errors = np.subtract(true_labels, predicted, dtype=np.float64)
        np.square(errors, out=errors)
        return float(0.5 * _weigh(errors, mask).sum())


# --------------------------------------------------------------- helpers ---


def batch_size_of(net) -> int:
    """Return B of the current batch of ``net``.

    Read from the buffer manager if the network has one, else from the
    shape of the first Input output ``(T, B, ...)``.
    """
    manager = getattr(net, 'buffer_manager', None)
    batch_size = getattr(manager, 'batch_size', None)
    if batch_size is not None:
        return int(batch_size)
    outputs = net.buffer['Input']['outputs']
    return int(outputs[0].shape[1])


_get_batch_size = batch_size_of  # the name before it was public


def _weighted_mean(outputs: Sequence[tuple[float, float]]) -> float:
    """``sum(weight * value) / sum(weight)`` of ``(weight, value)`` pairs."""
    pairs = np.asarray(outputs, dtype=np.float64).reshape(-1, 2)
    total_weight = pairs[:, 0].sum()
    if total_weight == 0:
        return 0.0
    return float((pairs[:, 0] * pairs[:, 1]).sum() / total_weight)


def gather_losses_and_scores(
    net,
    scorers: Iterable[Scorer],
    scores: dict,
    out_name: str = '',
    targets_name: str = 'targets',
    mask_name: str = '',
) -> None:
    """Append the losses and scores of the current batch to ``scores``.

    Call after a forward pass. For each entry of ``net.get_loss_values()``
    ``(batch_size, loss)`` is appended under its name; for each scorer
    ``(weight, score)`` under ``scorer.__name__``, where weight is the mask
    sum (or the number of rows without mask). Missing lists are created.
    A mask holds one weight per sample, per row of the output or (for
    scorers with ``elementwise_mask``) per element of the output.

    Args:
        net: the network.
        scorers: the scorers to evaluate.
        scores: dict name -> list of ``(weight, value)``, updated in place.
        out_name: output path used for scorers without their own.
        targets_name: targets name used for scorers whose own is empty
            (``targets_name=''``).
        mask_name: mask name used for scorers without their own.
    """
    batch_size = batch_size_of(net)
    losses = net.get_loss_values()
    scorers = list(scorers)
    check_scorer_names(scorers, losses)
    for name, loss in losses.items():
        scores.setdefault(name, []).append((batch_size, loss))
    for scorer in scorers:
        path = scorer.out_name or out_name or net.output_name
        if not path:
            raise ValidationError(
                f'{scorer.__name__}: no output to score. Set out_name on the '
                'scorer, pass out_name, or set net.output_name'
            )
        try:
            output = net.get(path)
        except KeyError:
            # a layer's name stands for its single output; a wrong name is
            # refused with a message listing the network's outputs
            path = check_output_name(net, path, f'{scorer.__name__} (out_name)')
            output = net.get(path)
        output = _without_context(net, path, output)
        predicted = flatten_all_but_last(output)
        true_labels = flatten_all_but_last(
            _input_of(net, _targets_of(scorer, targets_name), scorer, 'targets_name')
        )
        mask_path = scorer.mask_name or mask_name
        if mask_path:
            mask = _mask_rows(
                _input_of(net, mask_path, scorer, 'mask_name'),
                predicted,
                mask_path,
                scorer,
                path,
                output.shape,
            )
            # in float64: a float16 mask of more than 65504 ones sums to inf
            weight = float(mask.sum(dtype=np.float64))
        else:
            mask = None
            weight = predicted.shape[0]
        scores.setdefault(scorer.__name__, []).append(
            (weight, scorer(true_labels, predicted, mask))
        )


def _without_context(net, path: str, output):
    """``output`` without the context rows of a time-sized buffer.

    A recurrent layer's outputs hold ``T + context`` time steps in the
    buffer; the context rows are no time steps of the batch (``predict``
    leaves them out too).
    """
    node = getattr(net, 'layout', None)
    steps = getattr(getattr(net, 'buffer_manager', None), 'time_size', None)
    if node is None or steps is None:
        return output
    for part in path.split('.'):
        node = node.get(part) if isinstance(node, dict) else None
        if node is None:
            return output
    if get_buffer_type(node['@shape']) == 2 and node.get('@context_size'):
        return output[:steps]
    return output


class ScorerInputError(ValidationError, KeyError):
    """A scorer's targets or mask input that the network lacks.

    A KeyError too, as the bare BufferView KeyError it replaces.
    """

    def __str__(self):
        return str(self.args[0])


def _input_of(net, name: str, scorer, argument: str) -> np.ndarray:
    """The data of the Input output ``name``, refused naming the scorer."""
    inputs = list(net.layers['Input'].out_shapes) if hasattr(net, 'layers') else []
    if inputs and name not in inputs:
        raise ScorerInputError(
            f'{scorer.__name__}: {argument} {name!r} is no input of the '
            f'network; its inputs are {inputs}. Give the scorer its own '
            f"{argument}, or {argument}='' to take the one given to evaluate "
            'or the monitor.'
        )
    return net.get_input(name)


def _targets_of(scorer, targets_name: str) -> str:
    """The targets a scorer reads: its own, or ``targets_name``.

    A scorer with an empty ``targets_name`` reads ``targets_name`` (as in
    Brainstorm 0.5: ``sc.targets_name or targets_name``); the others read
    their own, ``'targets'`` by default.
    """
    return scorer.targets_name or targets_name


def check_scorer_names(scorers: list, losses) -> None:
    """Refuse scorers whose figures would mix with others of their name.

    Scores and losses are logged and aggregated by name: two scorers of
    one name, or a scorer named like a loss (``'total_loss'``, a Loss
    layer), would be averaged together silently.
    """
    seen: dict = {}
    for scorer in scorers:
        name = scorer.__name__
        if name in losses:
            raise ValidationError(
                f'{type(scorer).__name__} {name!r}: a scorer may not be named '
                f'like a loss of the network ({list(losses)}); give it '
                'another name=...'
            )
        if name in seen:
            raise ValidationError(
                f'{type(scorer).__name__} {name!r}: two scorers are named '
                f'{name!r} (the other one: {seen[name]!r}); their figures '
                'would be averaged together. Give each its own name=...'
            )
        seen[name] = scorer


def _mask_rows(
    mask: np.ndarray,
    predicted: np.ndarray,
    name: str,
    scorer: Scorer,
    out_name: str,
    output_shape: tuple,
) -> np.ndarray:
    """The mask ``(T, B, ..., c)`` with one row per row of ``predicted``.

    A mask of one value per sample (``(T, B, 1)``) over outputs with more
    rows per sample (an image's pixels, ``(T, B, H, W, K)``) weighs each of
    the sample's rows: its value is repeated for them. The mask has one
    column (a weight per row) or, if the scorer has ``elementwise_mask``,
    as many as ``predicted`` (a weight per element).

    Raises:
        ValidationError: naming the scorer, the mask and both shapes, if
            the output's rows are no multiple of the mask's or the mask
            has another number of columns.
    """
    shape = mask.shape
    mask = flatten_all_but_last(mask)
    rows, columns = predicted.shape
    if _columns_fit(scorer, mask, columns):
        if mask.shape[0] == rows:  # also a batch without samples
            return mask
        if mask.shape[0] and not rows % mask.shape[0]:
            return np.repeat(mask, rows // mask.shape[0], axis=0)
    raise ValidationError(
        f"{scorer.__name__}: mask '{name}' must hold one weight per sample or "
        f"per row of the output '{out_name}' {_mask_expected(scorer, columns)}. "
        f'Received: mask of shape {shape} for an output of shape {output_shape}.'
    )


def gather_from_all_ranks(scores: dict, comm) -> OrderedDict:
    """Return the ``(weight, value)`` lists of all ranks, joined by name.

    The lists are joined name by name in rank order; every rank receives
    the same result.

    Args:
        scores: this rank's dict name -> list of ``(weight, value)``.
        comm: an mpi4py communicator, a processes object or None (see
            ``brainstorm.parallel.processes_of``).
    """
    joined: OrderedDict = OrderedDict()
    for rank_scores in processes_of(comm).allgather(
        {
            name: [(float(w), float(v)) for w, v in pairs]
            for name, pairs in scores.items()
        }
    ):
        for name, pairs in rank_scores.items():
            joined.setdefault(name, []).extend(pairs)
    return joined


def aggregate_losses_and_scores(
    scores: dict, net, scorers: Iterable[Scorer], comm=None
) -> OrderedDict:
    """Combine gathered ``(weight, value)`` lists into one value each.

    Losses (the names of ``net.get_loss_values()``) become batch-size
    weighted means, then each scorer aggregates its own list.

    Args:
        scores: dict name -> list of ``(weight, value)``.
        net: the network (for the names of its losses).
        scorers: the scorers.
        comm: for data-parallel runs, an mpi4py communicator or a
            processes object (see ``brainstorm.parallel.processes_of``;
            None: a single process): the lists of all its ranks are joined
            first (see
            :func:`gather_from_all_ranks`), so the result is the figure
            over all their data, the same on every rank.

    Returns:
        An OrderedDict: losses first, then the scorers in order.
    """
    scores = gather_from_all_ranks(scores, comm)
    results = OrderedDict()
    for name in net.get_loss_values():
        results[name] = _weighted_mean(scores.get(name, []))
    for scorer in scorers:
        results[scorer.__name__] = scorer.aggregate(scores.get(scorer.__name__, []))
    return results
