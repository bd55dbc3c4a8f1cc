"""The Trainer: runs a stepper over the data and calls hooks on the way."""

from __future__ import annotations

import json
import math
import os
from collections import OrderedDict

import numpy as np

from brainstorm._logging import get_logger
from brainstorm.arguments import (
    Arg,
    Bool,
    DictOf,
    Instance,
    ListOf,
    Optional,
    Real,
    declare,
)
from brainstorm.describable import Describable, get_description
from brainstorm.handlers.base_handler import (
    first_use_owner,
    peek_random_state,
)
from brainstorm.randomness import global_rnd
from brainstorm.scorers import (
    aggregate_losses_and_scores,
    gather_losses_and_scores,
)
from brainstorm.training.checkpoint import (
    get_random_state,
    iterator_chain,
    read_checkpoint,
    set_random_state,
    write_checkpoint,
)
from brainstorm.training.data_parallel import (
    DataParallel,
    announce_leaving,
    communicator_of,
    guarded,
    is_root_process,
    watchdog_of,
)
from brainstorm.training.steppers import SgdStepper, TrainingStepper
from brainstorm.training.utils import LogEntries, log_counters
from brainstorm.utils import (
    IteratorValidationError,
    NonFiniteError,
    TrainingValidationError,
)

__all__ = ['Trainer']

_log = get_logger('training')


def _add_log(logs: dict, name: str, value, epoch: int | None = None,
             update: int | None = None) -> None:
    """Log ``value`` under ``name``: dicts nest, other values are appended
    to a list (a :class:`LogEntries`, which keeps the epoch and update of
    each entry)."""
    if isinstance(value, dict):
        sub = logs.setdefault(name, OrderedDict())
        if not isinstance(sub, dict):
            raise TrainingValidationError(
                f"Cannot log a dict under '{name}': it already holds a list "
                'of values.')
        for key, inner in value.items():
            _add_log(sub, key, inner, epoch, update)
    else:
        entries = logs.setdefault(name, LogEntries())
        if not isinstance(entries, list):
            raise TrainingValidationError(
                f"Cannot log a value under '{name}': it already holds a dict "
                f'with keys {list(entries)}.')
        if isinstance(entries, LogEntries):
            entries.append_at(value, epoch, update)
        else:
            entries.append(value)


def _format_result(result, prefix: str = '') -> list:
    if isinstance(result, dict):
        lines = []
        for key, value in result.items():
            lines.extend(_format_result(value, f'{prefix}{key}.'))
        return lines
    if isinstance(result, float):
        return [f'{prefix[:-1]}: {result:.6g}']
    return [f'{prefix[:-1]}: {result}']


class _FiniteCheck:
    """The trainer's check, after every update, that the training loss and
    all parameters are finite and no parameter is beyond ``max_abs``.

    The loss is checked after every update; the parameters whenever hooks
    are due (before they run, so no hook sees or saves a broken network),
    which is after every update when an ``'update'`` hook has interval 1,
    else at least once per epoch. A non-finite parameter makes the next
    loss non-finite, so it is caught one update later at most, unless it
    does not enter the forward pass (e.g. BatchNorm's running statistics)
    or is only too large: then when the next hook is due.

    The fast parameter test is one dot product of the flat parameter array with
    itself: it is finite and at most ``max_abs ** 2`` exactly when nothing
    is wrong (NaN and inf propagate, and every value is at most the norm).
    Only when it fails are the layers searched, which also tells a large
    norm of moderate values (no error) from a real problem.
    """

    def __init__(self, net, max_abs: float | None):
        self.net = net
        self.max_abs = max_abs
        self.limit = math.inf if max_abs is None else float(max_abs) ** 2
        self.last_finite_loss: float | None = None
        self.last_finite_update: int | None = None
        params = net.buffer.parameters
        self._numpy = isinstance(params, np.ndarray) and params.ndim == 1
        if not self._numpy and params.size:
            self._flat = params.reshape((1, params.size))
            self._out = net.handler.zeros((1, 1))

    def _square_norm(self) -> float:
        params = self.net.buffer.parameters
        if not params.size:
            return 0.0
        if self._numpy:
            return float(np.dot(params, params))
        h = self.net.handler
        h.dot_mm(self._flat, self._flat, self._out, transb=True)
        return float(h.get_numpy_copy(self._out).ravel()[0])

    def check_loss(self, trainer, update_nr: int) -> None:
        """After every update: the training loss (a few microseconds)."""
        loss = self.net.get_loss_values()['total_loss']
        if not math.isfinite(loss):
            self._fail(trainer, update_nr, loss)
        self.last_finite_loss, self.last_finite_update = loss, update_nr

    def check_parameters(self, trainer, update_nr: int) -> None:
        """Before hooks run: the parameters (one read of all of them)."""
        square = self._square_norm()
        if not square <= self.limit and self._locate() is not None:
            self._fail(trainer, update_nr, None)

    def _locate(self, loss_first: bool = False):
        """(layer, buffer, what) of the first problem in canonical layer
        order: parameters first, then internals and outputs (the other way
        round for a non-finite loss: the outputs of the forward pass show
        where it began, the parameters are already updated with it)."""
        net, h = self.net, self.net.handler
        order = [('parameters',), ('internals', 'outputs')]
        for kinds in order[::-1] if loss_first else order:
            for lname in net.layers:
                view = net.buffer[lname]
                for kind in kinds:
                    for name in view[kind].keys() if kind in view else ():
                        values = h.get_numpy_copy(view[kind][name])
                        bad = ~np.isfinite(values)
                        if bad.any():
                            nan = int(np.isnan(values).sum())
                            return (lname, f'{kind}.{name}',
                                    f'{nan} NaN and {int(bad.sum()) - nan} '
                                    f'infinite of {values.size} values')
                        if kind == 'parameters' and self.max_abs is not \
                                None and values.size and \
                                np.abs(values).max() > self.max_abs:
                            return (lname, f'{kind}.{name}',
                                    f'values up to {np.abs(values).max():.3g}'
                                    f' in magnitude, beyond max_abs_parameter'
                                    f'={self.max_abs:g}: training diverged')
        return None

    def _fail(self, trainer, update_nr: int, loss) -> None:
        loss_failed = loss is not None and not math.isfinite(loss)
        where = self._locate(loss_first=loss_failed)
        if loss_failed:
            what = f'the training loss is {loss}'
        else:
            what = 'a parameter is not finite or too large'
        if where is None:
            place = 'no layer buffer holds a non-finite value'
        else:
            place = (f"first problem in layer '{where[0]}', buffer "
                     f"'{where[1]}' ({where[2]})")
        if self.last_finite_loss is None:
            last = 'no finite training loss before it'
        else:
            last = (f'last finite training loss {self.last_finite_loss:.6g} '
                    f'at update {self.last_finite_update}')
        raise NonFiniteError(
            f'Trainer: training stopped at update {update_nr} (epoch '
            f'{trainer.current_epoch_nr}): {what}; {place}; {last}. Lower '
            'the learning rate, clip gradients (clip_norm=...) or check the '
            'data. Trainer(check_finite=False) turns this check off.')


def _log_counter_tree(logs):
    """The logs' tree with ``[epochs, updates]`` in place of each log."""
    if isinstance(logs, dict):
        return {key: _log_counter_tree(value) for key, value in logs.items()}
    return [list(part) for part in log_counters(logs)]


def _with_counters(logs, counters):
    """Logs read from a checkpoint, as LogEntries with their counters."""
    if isinstance(logs, dict):
        return OrderedDict(
            (key, _with_counters(value, (counters or {}).get(key)
                                 if isinstance(counters, dict) else None))
            for key, value in logs.items())
    if isinstance(counters, list) and len(counters) == 2 and \
            all(len(c) == len(logs) for c in counters):
        return LogEntries(logs, *counters)
    return LogEntries(logs)


def _jsonable(value):
    return json.loads(json.dumps(get_description(value)))


class _Run:
    """What the trainer knows while ``train`` runs (used for checkpoints)."""

    def __init__(self, net, named_data_iters, comm=None):
        self.net = net
        self.named_data_iters = named_data_iters
        self.comm = comm
        self.is_root = is_root_process(comm)
        self.epoch_complete = True
        self.batches_done = 0
        self.epoch_scores = {}
        self.epoch_start_iterator_states = None
        self.finite_check = None


_NETWORK = Instance('brainstorm.structure.network:Network')


class Trainer(Describable):
    """Trains a network with a stepper, calling hooks along the way.

    Args:
        stepper: the :class:`~brainstorm.training.steppers.TrainingStepper`.
        verbose: whether hooks print (unless a hook sets its own
            ``verbose``) and the trainer prints an epoch header.
        check_finite: raise, before any hook sees the broken network,
            :class:`~brainstorm.utils.NonFiniteError` if the training loss
            or a parameter is NaN or infinite, or a parameter's magnitude
            exceeds ``max_abs_parameter``. The loss is checked after every
            update, the parameters before hooks run (one dot product over
            them; costs in ``benchmarks/README.md``).
        max_abs_parameter: the largest parameter magnitude accepted by the
            check (None: no limit). Steppers that normalise their steps
            (Adam, RMSProp) diverge with finite values and, through the
            clipped SoftmaxCE loss, a normal-looking loss; this limit
            catches them. The default 1e7 is near 2**24, beyond which a
            float32 parameter no longer changes by steps below 1.

    Attributes:
        hooks: OrderedDict hook name -> hook, in the order they run.
        train_scorers: scorers evaluated on every training batch; their
            epoch aggregates are logged in ``logs['rolling_training']``.
        current_epoch_nr: epochs done so far.
        current_update_nr: updates done so far.
        logs: the values returned by hooks (see :meth:`train`).
        results: the values returned by hooks in :meth:`evaluate`.

    Counting: ``current_epoch_nr`` and ``current_update_nr`` start at 0 and
    are never reset. A second call of :meth:`train` continues the run: it
    starts the hooks again but does not repeat the emission at count 0,
    and goes on with epoch ``current_epoch_nr + 1`` (raise e.g.
    ``StopAfterEpoch.max_epochs`` to train longer).

    Data-parallel runs: with a
    :class:`~brainstorm.training.data_parallel.DataParallel` stepper on
    several MPI processes, every rank runs the same script. The trainer
    then checks that all training iterators have the same length, joins
    the ranks' ``rolling_training`` figures (and the monitoring hooks
    theirs) before aggregating, so all ranks log the figures of the whole
    data; prints only on rank 0; ends training on all ranks as soon as a
    hook on any rank asks to stop; and writes checkpoints on rank 0 with
    the random states of every rank.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> x = np.random.RandomState(1).rand(1, 40, 4)
        >>> y = x.argmax(axis=2)[:, :, None]
        >>> inp, out = bs.tools.get_in_out_layers('classification', 4, 4)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(bs.initializers.Gaussian(0.1))
        >>> trainer = bs.Trainer(bs.training.AdamStepper(0.05), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(20))
        >>> trainer.train(net, bs.data_iterators.Minibatches(10, default=x, targets=y))
        >>> trainer.current_epoch_nr, trainer.current_update_nr
        (20, 80)
        >>> losses = trainer.logs['rolling_training']['total_loss']
        >>> bool(losses[-1] < losses[0])
        True
    """

    __arguments__ = {
        'stepper': Arg(Instance((TrainingStepper, DataParallel),
                            example=lambda: SgdStepper())),
        'verbose': Arg(Bool(), default=True),
        'check_finite': Arg(Bool(), default=True),
        'max_abs_parameter': Arg(Optional(Real(0, include_low=False)),
                                 default=1e7),
        'hooks': Arg(DictOf(Instance('brainstorm.hooks:Hook')), state=True),
        'train_scorers': Arg(ListOf(Instance('brainstorm.scorers:Scorer')), state=True),
    }

    __undescribed__ = {'current_epoch_nr': 0, 'current_update_nr': 0,
                       'logs': {}, 'results': {}, '_started': False,
                       '_resume': None, '_run': None, '_initial_done': ()}
    __default_values__ = {'verbose': True, 'check_finite': True,
                          'max_abs_parameter': 1e7}

    def __init__(self, stepper, verbose: bool = True,
                 check_finite: bool = True,
                 max_abs_parameter: float | None = 1e7):
        if not (hasattr(stepper, 'start') and hasattr(stepper, 'run')):
            raise TrainingValidationError(
                'Trainer: stepper must be a TrainingStepper (with start(net) '
                f'and run()). Received: {stepper!r}')
        if not isinstance(check_finite, bool):
            raise TrainingValidationError(
                'Trainer: check_finite must be a bool. Received: '
                f'check_finite={check_finite!r}')
        if max_abs_parameter is not None and (
                isinstance(max_abs_parameter, bool) or
                not isinstance(max_abs_parameter, (int, float)) or
                not max_abs_parameter > 0):
            raise TrainingValidationError(
                'Trainer: max_abs_parameter must be a positive number or '
                f'None. Received: max_abs_parameter={max_abs_parameter!r}')
        self.stepper = stepper
        self.verbose = verbose
        self.check_finite = check_finite
        self.max_abs_parameter = max_abs_parameter
        self.hooks: OrderedDict = OrderedDict()
        self.train_scorers: list = []
        self.current_epoch_nr = 0
        self.current_update_nr = 0
        self.logs: OrderedDict = OrderedDict()
        self.results: OrderedDict = OrderedDict()
        self._started = False
        self._initial_done: tuple = ()  # emissions at count 0 begun: 'update'...
        self._resume: dict | None = None
        self._run: _Run | None = None

    def __init_from_description__(self, description: dict) -> None:
        hooks = sorted(self.hooks.items(),
                       key=lambda item: getattr(item[1], 'priority', 0))
        self.hooks = OrderedDict()
        for name, hook in hooks:
            hook.__name__ = name
            self.hooks[name] = hook
        self.logs = OrderedDict()
        self.results = OrderedDict()

    # ------------------------------------------------------------ hooks ---

    @declare(hook=Arg(Instance('brainstorm.hooks:Hook')))
    def add_hook(self, hook) -> None:
        """Add a hook; hooks run in the order they were added.

        Raises:
            TrainingValidationError: (a ValueError) if a hook of the same
                name (``hook.__name__``) was added before.
        """
        name = getattr(hook, '__name__', None)
        if not isinstance(name, str):
            raise TrainingValidationError(
                f'Trainer.add_hook: a hook needs a __name__ (str). Received: '
                f'{hook!r}')
        if name in self.hooks:
            raise TrainingValidationError(
                f"Trainer.add_hook: a hook named '{name}' was already added. "
                'Give the new one another name (name=...).')
        hook.priority = 1 + max((getattr(h, 'priority', 0)
                                 for h in self.hooks.values()), default=0)
        self.hooks[name] = hook

    def _start_hooks(self, net, named_data_iters, comm=None) -> None:
        verbose = self.verbose and is_root_process(comm)
        for name, hook in self.hooks.items():
            try:
                hook.start(net, self.stepper, verbose, named_data_iters)
            except Exception as err:
                self._name_hook(err, name, hook, 'start')
                raise

    def _name_hook(self, err, name, hook, when: str) -> None:
        note = (f"Raised in hook '{name}' ({type(hook).__name__}) during "
                f'{when} (epoch {self.current_epoch_nr}, update '
                f'{self.current_update_nr}).')
        if hasattr(err, 'add_note'):
            err.add_note(note)
        _log.error(f'{note} {type(err).__name__}: {err}')

    def _emit_hooks(self, net, timescale: str, logs: dict) -> bool:
        """Call all hooks due now; return True if one asked to stop."""
        count = self.current_epoch_nr if timescale == 'epoch' else \
            self.current_update_nr
        stop = False
        fired = [(name, hook) for name, hook in self.hooks.items()
                 if hook.timescale == timescale and count % hook.interval == 0]
        comm = communicator_of(self.stepper)
        is_root = is_root_process(comm)
        if timescale == 'epoch' and fired and self.verbose and is_root and \
                logs is self.logs:
            _log.info(f'{"-" * 30} Epoch {count} {"-" * 30}')
        run = self._run
        if fired and run is not None and run.finite_check is not None \
                and logs is self.logs:
            run.finite_check.check_parameters(self, self.current_update_nr)
        for name, hook in fired:
            try:
                result = hook(epoch_nr=self.current_epoch_nr,
                              update_nr=self.current_update_nr, net=net,
                              stepper=self.stepper, logs=logs)
            except StopIteration as request:
                stop = True
                if request.value is not None:
                    _add_log(logs, name, request.value,
                             self.current_epoch_nr, self.current_update_nr)
                continue
            except Exception as err:
                self._name_hook(err, name, hook, f'its {timescale} call')
                raise
            if result is not None:
                _add_log(logs, name, result, self.current_epoch_nr,
                         self.current_update_nr)
                if getattr(hook, 'run_verbosity', self.verbose) and is_root:
                    for line in _format_result(result):
                        _log.info(f'{name} >> {line}')
        if comm is not None and fired:
            # a hook may ask only one rank to stop (a signal, a local
            # figure); all ranks must stop together or some would wait
            # forever in the next collective call
            with guarded(comm, 'the stop decision after the hooks'):
                stop = comm.allreduce(int(stop)) > 0
        from brainstorm.hooks import SaveCheckpoint
        for _, hook in fired:
            if isinstance(hook, SaveCheckpoint) and self._run is not None:
                self.save_checkpoint(hook.filename)
        return stop

    # ---------------------------------------------------------- training ---

    @staticmethod
    def _check_lengths_agree(comm, training_data_iter) -> None:
        """All ranks must make the same number of steps per epoch."""
        with guarded(comm, 'the check of the iterator lengths'):
            lengths = comm.allgather(getattr(training_data_iter, 'length',
                                             None))
        if len(set(lengths)) > 1:
            raise IteratorValidationError(
                'Trainer: in data-parallel training every rank must make the '
                'same number of updates per epoch, but the training '
                f'iterators of the ranks have lengths {lengths}. Build them '
                'the same way on every rank and split the data with '
                'brainstorm.data_iterators.Shard.')

    @staticmethod
    def _check_iterators(net, named_data_iters) -> None:
        expected = set(net.layers['Input'].out_shapes)
        for name, iterator in named_data_iters.items():
            shapes = getattr(iterator, 'data_shapes', None)
            if shapes is None or not callable(iterator):
                raise IteratorValidationError(
                    f"Data iterator '{name}' must be a DataIterator. "
                    f'Received: {iterator!r}')
            if set(shapes) != expected:
                raise IteratorValidationError(
                    f"Data iterator '{name}' provides data "
                    f'{sorted(shapes)}, but the network\'s Input layer has '
                    f'outputs {sorted(expected)}: the names must be the same.')

    @declare(net=Arg(_NETWORK))
    def train(self, net, training_data_iter, **named_data_iters) -> None:
        """Train ``net`` until a hook asks to stop.

        Steps: check that each iterator provides exactly the network's input
        names; ``stepper.start(net)``; start the hooks (the training
        iterator is added to ``named_data_iters`` as
        ``'training_data_iter'``); on the first call, call all ``'update'``
        hooks and then all ``'epoch'`` hooks at count 0 (return if one
        asks to stop); then loop over epochs: for each batch provide the
        data, count the update, ``stepper.run()``, gather the losses and
        ``train_scorers``, apply the weight modifiers and call the
        ``'update'`` hooks (a stop request ends the epoch); after each
        epoch log ``'rolling_training'`` and call the ``'epoch'`` hooks;
        stop if one asked to.

        A hook is due when its ``timescale`` matches and the count is a
        multiple of its ``interval``. Its non-None return value is logged
        under its name (dicts nest, other values are appended to lists);
        ``StopIteration`` asks to stop (its value, if any, is logged); other
        errors are re-raised with a note naming the hook.

        After :meth:`from_checkpoint`, the run continues exactly where the
        checkpoint was written, given iterators built the same way.

        Args:
            net: the network to train.
            training_data_iter: the data iterator for training.
            **named_data_iters: further iterators, for hooks (e.g.
                ``valid_getter=...`` for ``MonitorScores('valid_getter')``).

        Raises:
            IteratorValidationError: for iterators whose data names differ
                from the network's inputs.
            TrainingValidationError: when continuing a checkpoint with
                another network or differently named iterators.
        """
        named_data_iters = OrderedDict(named_data_iters)
        named_data_iters['training_data_iter'] = training_data_iter
        self._check_iterators(net, named_data_iters)
        resume = self._resume
        if resume is not None:
            self._check_resume(resume, net, named_data_iters)
        self.stepper.start(net)
        comm = communicator_of(self.stepper)
        if comm is None:
            self._train(net, training_data_iter, named_data_iters, resume,
                        comm)
            return
        # data-parallel: however this rank leaves training early, the
        # others must learn it, or they wait forever in their next
        # collective call (see data_parallel._Watchdog)
        watchdog = watchdog_of(comm)
        watchdog.training += 1
        try:
            self._train(net, training_data_iter, named_data_iters, resume,
                        comm)
        except BaseException as err:
            announce_leaving(comm, f'{type(err).__name__}: {err} (epoch '
                             f'{self.current_epoch_nr}, update '
                             f'{self.current_update_nr})')
            raise
        finally:
            watchdog.training -= 1

    def _train(self, net, training_data_iter, named_data_iters, resume,
               comm) -> None:
        if comm is not None:
            self._check_lengths_agree(comm, training_data_iter)
        self._start_hooks(net, named_data_iters, comm)
        run = _Run(net, named_data_iters, comm)
        if resume is not None:
            self._apply_resume(resume, run)
        self._run = run
        if getattr(self, 'check_finite', True):
            run.finite_check = _FiniteCheck(
                net, getattr(self, 'max_abs_parameter', 1e7))
        try:
            if not self._started:
                # each emission at count 0 is recorded as done before its
                # hooks run, so that a checkpoint written at its end (by
                # SaveCheckpoint) resumes with what comes after it, never
                # skipping the epoch-0 hooks
                stop = False
                if 'update' not in self._initial_done:
                    self._initial_done = ('update',)
                    stop = self._emit_hooks(net, 'update', self.logs)
                self._initial_done = ('update', 'epoch')
                stop = self._emit_hooks(net, 'epoch', self.logs) or stop
                self._started = True
                if stop:
                    return
            while True:
                if self._train_epoch(run, training_data_iter):
                    return
        finally:
            self._run = None

    def _train_epoch(self, run: _Run, training_data_iter) -> bool:
        net = run.net
        if run.epoch_complete:
            self.current_epoch_nr += 1
            run.epoch_complete = False
            run.batches_done = 0
            run.epoch_scores = OrderedDict()
            run.epoch_start_iterator_states = self._iterator_states(
                {'training_data_iter': training_data_iter})
        skip = run.batches_done
        stop = False
        for i, data in enumerate(training_data_iter(handler=net.handler)):
            if i < skip:
                continue
            net.provide_external_data(data)
            self.current_update_nr += 1
            self.stepper.run()
            gather_losses_and_scores(net, self.train_scorers,
                                     run.epoch_scores)
            net.apply_weight_modifiers()
            if run.finite_check is not None:
                run.finite_check.check_loss(self, self.current_update_nr)
            run.batches_done += 1
            if self._emit_hooks(net, 'update', self.logs):
                stop = True
                break
        length = getattr(training_data_iter, 'length', None)
        if run.comm is not None and not stop and length is not None and \
                run.batches_done != length:
            # the other ranks still expect a training step's collectives
            raise IteratorValidationError(
                f'Trainer: rank {run.comm.Get_rank()}: the training '
                f'iterator yielded {run.batches_done} batches in epoch '
                f'{self.current_epoch_nr}, but its length is {length}; in '
                'data-parallel training every rank must yield as many '
                'batches as it declares.')
        _add_log(self.logs, 'rolling_training', aggregate_losses_and_scores(
            run.epoch_scores, net, self.train_scorers, comm=run.comm),
            self.current_epoch_nr, self.current_update_nr)
        run.epoch_complete = True
        return self._emit_hooks(net, 'epoch', self.logs) or stop

    @declare(net=Arg(_NETWORK))
    def evaluate(self, net, **named_data_iters) -> OrderedDict:
        """Start the hooks and call them once (``'epoch'`` hooks, then
        ``'update'`` hooks) with the current counters, logging into
        :attr:`results` instead of :attr:`logs`.

        Returns:
            :attr:`results`.
        """
        self._check_iterators(net, named_data_iters)
        self._start_hooks(net, named_data_iters,
                          communicator_of(self.stepper))
        self._emit_hooks(net, 'epoch', self.results)
        self._emit_hooks(net, 'update', self.results)
        return self.results

    # ------------------------------------------------------- checkpoints ---

    @staticmethod
    def _iterator_states(named_data_iters) -> dict:
        return {name: [get_random_state(it.rnd) if getattr(it, 'rnd', None)
                       is not None else None for it in iterator_chain(it0)]
                for name, it0 in named_data_iters.items()}

    def save_checkpoint(self, filename: str) -> None:
        """Write a checkpoint of the running training (see
        :class:`~brainstorm.hooks.SaveCheckpoint`); only possible while
        :meth:`train` runs.

        Raises:
            TrainingValidationError: if called outside :meth:`train`.
        """
        run = self._run
        if run is None:
            raise TrainingValidationError(
                'Trainer.save_checkpoint: only possible during train() (use '
                'the SaveCheckpoint hook).')
        net = run.net
        iterator_states = self._iterator_states(run.named_data_iters)
        if not run.epoch_complete:
            iterator_states.update(run.epoch_start_iterator_states)
        # the handler's state only if it was drawn already: reading
        # handler.rnd would draw its seed from global_rnd now, and the run
        # with checkpoints would differ from the one without
        handler_rnd = peek_random_state(net.handler)
        random_states: dict = {
            'global': get_random_state(global_rnd),
            'network': get_random_state(net.rnd),
            'handler': (get_random_state(handler_rnd)
                        if handler_rnd is not None else None),
            'iterators': iterator_states,
        }
        try:
            logs = _jsonable(self.logs)
            epoch_scores = _jsonable(run.epoch_scores)
        except (TypeError, ValueError) as err:
            raise TrainingValidationError(
                f"Checkpoint '{filename}': the logs cannot be stored: {err}") \
                from None
        rank_epoch_scores = None
        if run.comm is not None:
            # each rank has its own random states and partial epoch
            # figures; rank 0 stores them all (and its own as the defaults)
            gathered = run.comm.gather((random_states, epoch_scores), root=0)
            if not run.is_root:
                # returns once rank 0 has written the file (see below)
                run.comm.Barrier()
                return
            random_states = dict(random_states,
                                 ranks=[states for states, _ in gathered])
            rank_epoch_scores = [scores for _, scores in gathered]
        progress = {
            'current_epoch_nr': self.current_epoch_nr,
            'current_update_nr': self.current_update_nr,
            'started': self._started or len(self._initial_done) == 2,
            'initial_done': list(self._initial_done),
            'logs': logs,
            'log_counters': _log_counter_tree(self.logs),
            'epoch_complete': run.epoch_complete,
            'batches_done': run.batches_done,
            'epoch_scores': epoch_scores,
        }
        if rank_epoch_scores is not None:
            progress['rank_epoch_scores'] = rank_epoch_scores
        hook_states = OrderedDict()
        for name, hook in self.hooks.items():
            get_state = getattr(hook, 'get_state', None)
            if get_state is not None:
                hook_states[name] = get_state()
        write_checkpoint(filename, get_description(net), net.get('parameters'),
                         get_description(self), progress,
                         self.stepper.get_state(), hook_states, random_states)
        if run.comm is not None:
            run.comm.Barrier()

    @classmethod
    def from_checkpoint(cls, filename: str, trusted: bool = False):
        """Recreate a trainer and its network from a checkpoint file.

        Call ``trainer.train(net, train_iter, **named_iters)`` with
        iterators built the same way (same classes, data, names) to continue
        the run exactly: parameters, stepper state, counters, logs, hook
        states and all random states are restored. A checkpoint of a
        data-parallel run continues on the same number of ranks, each rank
        with its own random states.

        Loading checks the whole file first (checksums, sizes against the
        architecture, random states; see :ref:`sharing-files-safely`). A
        restored hook that writes files (``filename``) must name a safe
        path: one that leads (symbolic links resolved) inside the current
        working folder or the checkpoint's folder, with no hidden (``.``)
        part below it, and not a file Python would import (``*.py``,
        ``*.pyc``, ``*.so``, ``*.pth``, ``sitecustomize``...). Pass
        ``trusted=True`` for a checkpoint you wrote yourself to keep its
        paths as they are.

        Args:
            filename: the checkpoint file.
            trusted: keep the stored file names of hooks unchecked (only
                for files from yourself).

        Returns:
            ``(trainer, net)``.

        Raises:
            TrainingValidationError: if the file is missing, damaged,
                inconsistent or not a checkpoint, or (unless ``trusted``) a
                hook would write outside the working folder or to a file
                Python would import.
        """
        from brainstorm.describable import create_from_description
        from brainstorm.hooks import check_restored_path
        from brainstorm.structure.network import (
            _build_from_file,
            check_stored_sizes,
        )
        if not isinstance(trusted, bool):
            raise TrainingValidationError(
                'Trainer.from_checkpoint: trusted must be a bool. Received: '
                f'trusted={trusted!r}')
        where = f"Checkpoint '{filename}'"
        data = read_checkpoint(filename)
        parameters = data['parameters']
        # sizes before memory: nothing is built before this passes
        check_stored_sizes(data['network'], int(parameters.shape[0]), where,
                           TrainingValidationError)
        progress = data['progress']
        _check_progress(progress, where)
        try:
            trainer = create_from_description(data['trainer'],
                                              expected=Trainer)
        except Exception as err:  # a crafted description may break anything
            raise TrainingValidationError(
                f'{where} is corrupt: cannot recreate the trainer '
                f'({type(err).__name__}: {err}).') from None
        if not isinstance(trainer, Trainer):
            raise TrainingValidationError(
                f'{where} does not hold a Trainer.')
        if not trusted:
            folder = os.path.dirname(os.path.abspath(filename))
            for name, hook in trainer.hooks.items():
                path = getattr(hook, 'filename', None)
                if path is not None:
                    check_restored_path(
                        f"{where}: hook '{name}' ({type(hook).__name__})",
                        path, [folder])
        net = _build_from_file(data['network'], parameters, filename,
                               TrainingValidationError, 'Checkpoint')
        trainer.current_epoch_nr = int(progress['current_epoch_nr'])
        trainer.current_update_nr = int(progress['current_update_nr'])
        trainer._started = bool(progress['started'])
        trainer._initial_done = tuple(progress.get(
            'initial_done', ('update', 'epoch') if trainer._started else ()))
        trainer.logs = _with_counters(_ordered(progress['logs']),
                                      progress.get('log_counters'))
        data['filename'] = filename
        data['architecture'] = _jsonable(net.architecture)
        trainer._resume = data
        return trainer, net

    def _check_resume(self, resume, net, named_data_iters) -> None:
        filename = resume['filename']
        if _jsonable(net.architecture) != resume['architecture'] or \
                tuple(net.buffer.parameters.shape) != \
                resume['parameters'].shape:
            raise TrainingValidationError(
                f"Checkpoint '{filename}' belongs to another network: "
                'train() must get the network returned by '
                'Trainer.from_checkpoint (or one with the same architecture).')
        saved = set(resume['random_states']['iterators'])
        if saved != set(named_data_iters):
            raise TrainingValidationError(
                f"Checkpoint '{filename}' was written with data iterators "
                f'{sorted(saved)}; train() received {sorted(named_data_iters)}'
                '. Pass the same names to continue exactly.')

    def _apply_resume(self, resume, run: _Run) -> None:
        filename = resume['filename']
        net = run.net
        try:
            self.stepper.set_state(resume['stepper_state'])
        except Exception as err:  # a damaged state may break anything
            raise TrainingValidationError(
                f"Checkpoint '{filename}': cannot restore the stepper state "
                f'({type(err).__name__}: {err})') from None
        for name, state in resume['hook_states'].items():
            hook = self.hooks.get(name)
            if hook is None or not hasattr(hook, 'set_state'):
                raise TrainingValidationError(
                    f"Checkpoint '{filename}' holds a state for hook '{name}'"
                    f', which the trainer does not have (hooks: '
                    f'{list(self.hooks)}).')
            try:
                hook.set_state(state)
            except Exception as err:
                raise TrainingValidationError(
                    f"Checkpoint '{filename}': cannot restore the state of "
                    f"hook '{name}' ({type(err).__name__}: {err})") from None
        states = resume['random_states']
        progress = resume['progress']
        epoch_scores = progress['epoch_scores']
        if 'ranks' in states:
            size = 1 if run.comm is None else run.comm.Get_size()
            if len(states['ranks']) != size:
                raise TrainingValidationError(
                    f"Checkpoint '{filename}' was written by a data-parallel "
                    f"run on {len(states['ranks'])} processes; it can only "
                    f'continue on as many (this run has {size}).')
            scores = progress.get('rank_epoch_scores')
            if not isinstance(scores, list) or len(scores) != size:
                raise TrainingValidationError(
                    f"Checkpoint '{filename}' is corrupt: it holds random "
                    f'states of {size} ranks but epoch figures of '
                    f'{len(scores) if isinstance(scores, list) else 0}.')
            rank = 0 if run.comm is None else run.comm.Get_rank()
            states = states['ranks'][rank]
            epoch_scores = progress['rank_epoch_scores'][rank]
        for name, chain_states in states['iterators'].items():
            chain = iterator_chain(run.named_data_iters[name])
            if len(chain) != len(chain_states):
                raise TrainingValidationError(
                    f"Checkpoint '{filename}': data iterator '{name}' wraps "
                    f'{len(chain) - 1} iterators, the saved one wrapped '
                    f'{len(chain_states) - 1}. Build it the same way.')
            for iterator, state in zip(chain, chain_states):
                if state is not None and getattr(iterator, 'rnd', None) \
                        is not None:
                    set_random_state(iterator.rnd, state)
        # the handler first: reading handler.rnd may draw a seed from
        # global_rnd, which is restored last
        if states['handler'] is not None:
            handler_rnd = getattr(net.handler, 'rnd', None)
            if handler_rnd is not None:
                set_random_state(handler_rnd, states['handler'])
        elif first_use_owner(net.handler) is not None:
            # not drawn yet when the checkpoint was written: draw it from
            # global_rnd when first needed, as the recorded run did
            first_use_owner(net.handler).rnd = None
        set_random_state(net.rnd, states['network'])
        set_random_state(global_rnd, states['global'])
        run.epoch_complete = bool(progress['epoch_complete'])
        run.batches_done = int(progress['batches_done'])
        run.epoch_scores = _ordered(epoch_scores)
        if not run.epoch_complete:
            run.epoch_start_iterator_states = {
                'training_data_iter': states['iterators']['training_data_iter']}
        self._resume = None


def _is_count(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and \
        value >= 0


def _check_progress(progress: dict, where: str) -> None:
    """Check the types of a checkpoint's progress entries."""
    def bad(key, expected):
        raise TrainingValidationError(
            f"{where} is corrupt: progress entry '{key}' must be {expected}. "
            f'Received: {progress.get(key)!r:.200}')

    for key in ('current_epoch_nr', 'current_update_nr', 'batches_done'):
        if not _is_count(progress.get(key)):
            bad(key, 'an int >= 0')
    for key in ('started', 'epoch_complete'):
        if not isinstance(progress.get(key), bool):
            bad(key, 'a bool')
    for key in ('logs', 'epoch_scores'):
        if not isinstance(progress.get(key), dict):
            bad(key, 'a dict')
    if 'rank_epoch_scores' in progress and not (
            isinstance(progress['rank_epoch_scores'], list)
            and all(isinstance(s, dict)
                    for s in progress['rank_epoch_scores'])):
        bad('rank_epoch_scores', 'a list of dicts')


def _ordered(value):
    if isinstance(value, dict):
        return OrderedDict((k, _ordered(v)) for k, v in value.items())
    return value
