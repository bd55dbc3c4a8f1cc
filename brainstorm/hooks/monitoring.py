"""Hooks that measure the network and report the progress of training.

The monitors log losses and scores on a data set, or statistics of a
layer's parameters, gradients, inputs, outputs and deltas; in a
data-parallel run they join the figures of all ranks.
:class:`InfoUpdater` copies the progress into a run object's ``info``.
"""

from __future__ import annotations

import types
from collections import OrderedDict
from collections.abc import Mapping

import numpy as np

from brainstorm.arguments import Arg, Check, Instance, ListOf, Str
from brainstorm.errors import (
    TrainingValidationError,
    UnknownNameError,
)
from brainstorm.hooks.base import Hook
from brainstorm.scorers import Accuracy, Scorer
from brainstorm.structure.buffer_views import BufferView
from brainstorm.tools.evaluation import _evaluate

__all__ = [
    'MonitorLoss',
    'MonitorScores',
    'MonitorLayerParameters',
    'MonitorLayerGradients',
    'MonitorLayerInOuts',
    'MonitorLayerDeltas',
    'InfoUpdater',
]


def _stats(array: np.ndarray) -> OrderedDict:
    """``min``, ``avg`` and ``max`` of an array, as floats."""
    return OrderedDict(
        [
            ('min', float(array.min())),
            ('avg', float(array.mean())),
            ('max', float(array.max())),
        ]
    )


def _view_stats(net, view) -> OrderedDict:
    """:func:`_stats` of each non-empty array of a buffer view."""
    result = OrderedDict()
    # through the class: a child named 'items' hides the method
    for key, array in BufferView.items(view):
        if isinstance(array, BufferView):
            continue
        values = net.handler.get_numpy_copy(array)
        if values.size:
            result[key] = _stats(values)
    return result


class MonitorLoss(Hook):
    """Log the losses of the network on a data set.

    Args:
        iter_name: the name of a data iterator given to ``trainer.train``
            (only the name is kept in the trainer's description).
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLoss('valid_getter', name='validation'))
        >>> list(trainer.hooks)
        ['validation']
    """

    __arguments__ = {'iter_name': Arg(Str(nonempty=True))}

    __undescribed__ = {'iter': None}
    #: Brainstorm 0.5 described the iterator it was last started with
    __dropped_05__ = {'iter'}

    def __init__(
        self,
        iter_name: str,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        super().__init__(name, timescale, interval, verbose)
        self.iter_name = iter_name
        self.iter = None

    def start(self, net, stepper, verbose, named_data_iters):
        """Take the iterator ``iter_name`` from ``named_data_iters``.

        Raises:
            UnknownNameError: (a KeyError) if there is no such iterator.
        """
        super().start(net, stepper, verbose, named_data_iters)
        if self.iter_name not in named_data_iters:
            raise UnknownNameError(
                f"{type(self).__name__} '{self.__name__}': no data iterator "
                f"named '{self.iter_name}'. Available: "
                f'{sorted(named_data_iters)} (pass it to trainer.train as '
                f'{self.iter_name}=...)'
            )
        self.iter = named_data_iters[self.iter_name]

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Evaluate the network on the iterator; return the losses.

        The network's loss values (:meth:`Network.get_loss_values
        <brainstorm.structure.network.Network.get_loss_values>`) are those
        of the training batch again afterwards, for the hooks after this
        one (a ``ProgressBar``, ``StopOnNan`` at the update timescale).

        Raises:
            IteratorValidationError: naming the hook and the iterator, if
                the iterator yields no batch or only empty ones (the
                empty-data rule, see :func:`~brainstorm.tools.evaluate`).
        """
        return self._evaluate_keeping_losses(net)

    def _evaluate_keeping_losses(self, net, scorers=()):
        """The figures over the iterator; the loss outputs kept as they were."""
        kept = {
            name: net.handler.get_numpy_copy(net.buffer[name].outputs.loss)
            for name in net.loss_layers
        }
        try:
            return _evaluate(net, self.iter, scorers, comm=self.comm, who=self._who())
        finally:
            for name, values in kept.items():
                net.handler.set_from_numpy(net.buffer[name].outputs.loss, values)

    def _who(self) -> str:
        """Names the hook and its iterator in the errors of evaluation."""
        return (
            f"{type(self).__name__} '{self.__name__}': the data iterator "
            f"'{self.iter_name}'"
        )


class MonitorScores(MonitorLoss):
    """Log the losses and scores of the network on a data set.

    Args:
        iter_name: the name of a data iterator given to ``trainer.train``.
        scorers: the scorers (e.g. ``[Accuracy()]``).
        name, timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorScores(
        ...     'valid_getter', [bs.scorers.Accuracy()], name='validation'))
        >>> list(trainer.hooks)
        ['validation']
    """

    __arguments__ = {
        'scorers': Arg(ListOf(Instance(Scorer, example=Accuracy))),
    }

    def __init__(
        self,
        iter_name: str,
        scorers,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        super().__init__(iter_name, name, timescale, interval, verbose)
        self.scorers = list(scorers)

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Evaluate the network on the iterator; return losses and scores."""
        return self._evaluate_keeping_losses(net, self.scorers)


class _MonitorLayer(Hook):
    """Base of the hooks that monitor one layer, named ``<prefix>_<layer>``."""

    __arguments__ = {'layer_name': Arg(Str(nonempty=True))}

    prefix = ''

    def __init__(
        self,
        layer_name: str,
        name: str | None = None,
        timescale: str = 'epoch',
        interval: int = 1,
        verbose: bool | None = None,
    ):
        super().__init__(
            name or f'{self.prefix}_{layer_name}', timescale, interval, verbose
        )
        self.layer_name = layer_name

    def start(self, net, stepper, verbose, named_data_iters):
        """Check that the network has the layer.

        Raises:
            UnknownNameError: if it has not, listing its layers.
        """
        super().start(net, stepper, verbose, named_data_iters)
        if self.layer_name not in net.layers:
            raise UnknownNameError(
                f"{type(self).__name__} '{self.__name__}': the network has "
                f"no layer '{self.layer_name}'. Layers: {list(net.layers)}"
            )


class MonitorLayerParameters(_MonitorLayer):
    """Log ``min``/``avg``/``max`` of each parameter of a layer.

    For parameters with 2 or more dimensions also ``min/avg/max_L2_norm``
    of the L2 norms taken along axis 1.

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorParameters_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerParameters('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorParameters_Hid1']
    """

    prefix = 'MonitorParameters'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Return the statistics of each parameter, by parameter name."""
        result = OrderedDict()
        for key, array in BufferView.items(net.buffer[self.layer_name].parameters):
            values = net.handler.get_numpy_copy(array)
            stats = _stats(values)
            if values.ndim >= 2:
                norms = np.sqrt(np.sum(values**2, axis=1))
                stats['min_L2_norm'] = float(norms.min())
                stats['avg_L2_norm'] = float(norms.mean())
                stats['max_L2_norm'] = float(norms.max())
            result[key] = stats
        return result


class MonitorLayerGradients(_MonitorLayer):
    """Log ``min``/``avg``/``max`` of each gradient of a layer.

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorGradients_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerGradients('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorGradients_Hid1']
    """

    prefix = 'MonitorGradients'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Return the statistics of each gradient, by parameter name."""
        return _view_stats(net, net.buffer[self.layer_name].gradients)


class MonitorLayerInOuts(_MonitorLayer):
    """Log ``min``/``avg``/``max`` of each input and output of a layer.

    The log entry is ``{'inputs': {...}, 'outputs': {...}}``.

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorInOuts_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerInOuts('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorInOuts_Hid1']
    """

    prefix = 'MonitorInOuts'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Return the statistics of the inputs and outputs."""
        view = net.buffer[self.layer_name]
        return OrderedDict(
            [
                ('inputs', _view_stats(net, view.inputs)),
                ('outputs', _view_stats(net, view.outputs)),
            ]
        )


class MonitorLayerDeltas(_MonitorLayer):
    """Log ``min``/``avg``/``max`` of a layer's internals and deltas.

    The log entry is ``{'internals': …, 'output_deltas': …,
    'input_deltas': …}``.

    Args:
        layer_name: the layer to monitor.
        name: default ``'MonitorDeltas_<layer_name>'``.
        timescale, interval, verbose: see :class:`Hook`.

    Example:
        >>> import brainstorm as bs
        >>> trainer = bs.Trainer(bs.training.SgdStepper(), verbose=False)
        >>> trainer.add_hook(bs.hooks.MonitorLayerDeltas('Hid1'))
        >>> list(trainer.hooks)
        ['MonitorDeltas_Hid1']
    """

    prefix = 'MonitorDeltas'

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Return the statistics of the internals and deltas."""
        view = net.buffer[self.layer_name]
        return OrderedDict(
            [
                ('internals', _view_stats(net, view.internals)),
                ('output_deltas', _view_stats(net, view.output_deltas)),
                ('input_deltas', _view_stats(net, view.input_deltas)),
            ]
        )


class _RunWithInfo(Check):
    """A run object with an ``info`` dict (e.g. a sacred Run)."""

    expected = "an object with an 'info' attribute that is a dict"
    invalid_examples = (5, 'run', None)

    @property
    def example(self) -> object:
        return types.SimpleNamespace(info={})

    def normalize(self, value: object) -> object:
        if not isinstance(getattr(value, 'info', None), dict):
            raise TypeError
        return value


class InfoUpdater(Hook):
    """Write the training progress into a run object's ``info`` dict.

    As Brainstorm 0.5 did for sacred runs; any object with an ``info`` dict
    works, sacred is not needed. Each call sets ``info['epoch_nr']``,
    ``info['update_nr']``, ``info['logs']`` (a plain copy of the logs) and,
    once, ``info['nr_parameters']``.

    Args:
        run: an object with an ``info`` attribute that is a dict.
        name, timescale, interval: see :class:`Hook`.
    """

    __undescribed__ = {'run': None}
    __arguments__ = {'run': Arg(_RunWithInfo(), init_only=True)}

    def __init__(
        self, run, name: str | None = None, timescale: str = 'epoch', interval: int = 1
    ):
        super().__init__(name, timescale, interval)
        self.run = run

    def __call__(self, epoch_nr, update_nr, net, stepper, logs):
        """Copy the counters and logs into ``run.info``.

        Raises:
            TrainingValidationError: if the hook has no run object (after
                being recreated from a description).
        """
        if self.run is None:
            # the run object is not part of a description or checkpoint
            raise TrainingValidationError(
                f"InfoUpdater '{self.__name__}': no run object; set its "
                '.run after recreating it from a description.'
            )
        info = self.run.info
        info['epoch_nr'] = epoch_nr
        info['update_nr'] = update_nr
        info['logs'] = _plain_logs(logs)
        info.setdefault('nr_parameters', int(net.buffer.parameters.size))
        return None


def _plain_logs(logs):
    """A copy of the logs as plain dicts, lists and Python numbers."""
    if isinstance(logs, Mapping):
        return {key: _plain_logs(value) for key, value in logs.items()}
    # NumPy scalars become Python numbers, so the info stays JSON-able
    return [v.item() if isinstance(v, np.generic) else v for v in logs]
