"""The Trainer: runs a stepper over the data and calls hooks on the way."""

from __future__ import annotations

import json
import sys
from collections import OrderedDict

from brainstorm.describable import Describable, get_description
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
    communicator_of,
    is_root_process,
)
from brainstorm.utils import IteratorValidationError, TrainingValidationError

__all__ = ['Trainer']


def _add_log(logs: dict, name: str, value) -> None:
    """Log ``value`` under ``name``: dicts nest, other values are appended
    to a list."""
    if isinstance(value, dict):
        sub = logs.setdefault(name, OrderedDict())
        if not isinstance(sub, dict):
            raise TrainingValidationError(
                f"Cannot log a dict under '{name}': it already holds a list "
                'of values.')
        for key, inner in value.items():
            _add_log(sub, key, inner)
    else:
        entries = logs.setdefault(name, [])
        if not isinstance(entries, list):
            raise TrainingValidationError(
                f"Cannot log a value under '{name}': it already holds a dict "
                f'with keys {list(entries)}.')
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


class Trainer(Describable):
    """Trains a network with a stepper, calling hooks along the way.

    Args:
        stepper: the :class:`~brainstorm.training.steppers.TrainingStepper`.
        verbose: whether hooks print (unless a hook sets its own
            ``verbose``) and the trainer prints an epoch header.

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

    __undescribed__ = {'current_epoch_nr': 0, 'current_update_nr': 0,
                       'logs': {}, 'results': {}, '_started': False,
                       '_resume': None, '_run': None}
    __default_values__ = {'verbose': True}

    def __init__(self, stepper, verbose: bool = True):
        if not (hasattr(stepper, 'start') and hasattr(stepper, 'run')):
            raise TrainingValidationError(
                'Trainer: stepper must be a TrainingStepper (with start(net) '
                f'and run()). Received: {stepper!r}')
        self.stepper = stepper
        self.verbose = verbose
        self.hooks = OrderedDict()
        self.train_scorers = []
        self.current_epoch_nr = 0
        self.current_update_nr = 0
        self.logs = OrderedDict()
        self.results = OrderedDict()
        self._started = False
        self._resume = None
        self._run = None

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
        print(f'{note} {type(err).__name__}: {err}', file=sys.stderr)

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
            print(f'{"-" * 30} Epoch {count} {"-" * 30}')
        for name, hook in fired:
            try:
                result = hook(epoch_nr=self.current_epoch_nr,
                              update_nr=self.current_update_nr, net=net,
                              stepper=self.stepper, logs=logs)
            except StopIteration as request:
                stop = True
                if request.value is not None:
                    _add_log(logs, name, request.value)
                continue
            except Exception as err:
                self._name_hook(err, name, hook, f'its {timescale} call')
                raise
            if result is not None:
                _add_log(logs, name, result)
                if getattr(hook, 'run_verbosity', self.verbose) and is_root:
                    for line in _format_result(result):
                        print(f'{name} >> {line}')
        if comm is not None and fired:
            # a hook may ask only one rank to stop (a signal, a local
            # figure); all ranks must stop together or some would wait
            # forever in the next collective call
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
        lengths = comm.allgather(getattr(training_data_iter, 'length', None))
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
        if comm is not None:
            self._check_lengths_agree(comm, training_data_iter)
        self._start_hooks(net, named_data_iters, comm)
        run = _Run(net, named_data_iters, comm)
        if resume is not None:
            self._apply_resume(resume, run)
        self._run = run
        try:
            if not self._started:
                self._started = True
                stop = self._emit_hooks(net, 'update', self.logs)
                stop = self._emit_hooks(net, 'epoch', self.logs) or stop
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
            run.batches_done += 1
            if self._emit_hooks(net, 'update', self.logs):
                stop = True
                break
        _add_log(self.logs, 'rolling_training', aggregate_losses_and_scores(
            run.epoch_scores, net, self.train_scorers, comm=run.comm))
        run.epoch_complete = True
        return self._emit_hooks(net, 'epoch', self.logs) or stop

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
        handler_rnd = getattr(net.handler, 'rnd', None)
        random_states = {
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
            'started': self._started,
            'logs': logs,
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
    def from_checkpoint(cls, filename: str):
        """Recreate a trainer and its network from a checkpoint file.

        Call ``trainer.train(net, train_iter, **named_iters)`` with
        iterators built the same way (same classes, data, names) to continue
        the run exactly: parameters, stepper state, counters, logs, hook
        states and all random states are restored. A checkpoint of a
        data-parallel run continues on the same number of ranks, each rank
        with its own random states.

        Returns:
            ``(trainer, net)``.

        Raises:
            TrainingValidationError: if the file is missing, corrupt or not
                a checkpoint.
        """
        from brainstorm.describable import create_from_description
        from brainstorm.structure.network import Network
        data = read_checkpoint(filename)
        try:
            net = create_from_description(data['network'])
            trainer = create_from_description(data['trainer'])
        except (TypeError, KeyError, ValueError) as err:
            raise TrainingValidationError(
                f"Checkpoint '{filename}' is corrupt: cannot recreate the "
                f'network and trainer ({err}).') from None
        if not isinstance(net, Network) or not isinstance(trainer, Trainer):
            raise TrainingValidationError(
                f"Checkpoint '{filename}' does not hold a Network and a "
                'Trainer.')
        parameters = data['parameters']
        expected = tuple(net.buffer.parameters.shape)
        if parameters.shape != expected:
            raise TrainingValidationError(
                f"Checkpoint '{filename}' is corrupt: it holds "
                f'{parameters.shape} parameters, its network needs {expected}.')
        net.handler.set_from_numpy(net.buffer.parameters, parameters)
        progress = data['progress']
        trainer.current_epoch_nr = int(progress['current_epoch_nr'])
        trainer.current_update_nr = int(progress['current_update_nr'])
        trainer._started = bool(progress['started'])
        trainer.logs = _ordered(progress['logs'])
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
        except TrainingValidationError as err:
            raise TrainingValidationError(
                f"Checkpoint '{filename}': {err}") from None
        for name, state in resume['hook_states'].items():
            hook = self.hooks.get(name)
            if hook is None or not hasattr(hook, 'set_state'):
                raise TrainingValidationError(
                    f"Checkpoint '{filename}' holds a state for hook '{name}'"
                    f', which the trainer does not have (hooks: '
                    f'{list(self.hooks)}).')
            hook.set_state(state)
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
        set_random_state(global_rnd, states['global'])
        set_random_state(net.rnd, states['network'])
        handler_rnd = getattr(net.handler, 'rnd', None)
        if states['handler'] is not None and handler_rnd is not None:
            set_random_state(handler_rnd, states['handler'])
        run.epoch_complete = bool(progress['epoch_complete'])
        run.batches_done = int(progress['batches_done'])
        run.epoch_scores = _ordered(epoch_scores)
        if not run.epoch_complete:
            run.epoch_start_iterator_states = {
                'training_data_iter': states['iterators']['training_data_iter']}
        self._resume = None


def _ordered(value):
    if isinstance(value, dict):
        return OrderedDict((k, _ordered(v)) for k, v in value.items())
    return value
