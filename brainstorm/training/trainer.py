"""The Trainer: runs a stepper over the data and calls hooks on the way."""

from __future__ import annotations

import itertools
import sys  # noqa: F401 - in Brainstorm 0.5's namespace of this module
import threading
import traceback  # noqa: F401 - in Brainstorm 0.5's namespace of this module
from collections import OrderedDict

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
from brainstorm.describable import Describable
from brainstorm.errors import (
    IteratorValidationError,
    TrainingValidationError,
)
from brainstorm.files import as_file_name, hold_back_interrupts
from brainstorm.parallel import processes_of
from brainstorm.scorers import (
    Scorer,
    aggregate_losses_and_scores,
    check_scorer_names,
    gather_from_all_ranks,
    gather_losses_and_scores,
)
from brainstorm.structure.prediction import check_parameters_set
from brainstorm.training import checkpoint
from brainstorm.training.data_parallel import DataParallel, share_shard_states
from brainstorm.training.finite_check import FiniteCheck
from brainstorm.training.hook_calls import (
    call_hook,
    check_hook_timing,
    due_hooks,
    end_hooks,
    note_hook_error,
    start_hooks,
)
from brainstorm.training.hook_check import HookCheck
from brainstorm.training.progress import (
    INITIAL_ROUNDS,
    TrainingProgress,
    TrainingRun,
)
from brainstorm.training.steppers import SgdStepper, TrainingStepper
from brainstorm.training.utils import (
    add_log,
    check_data_iterators,
    check_lengths_agree,
    run_network,  # noqa: F401 - 0.5's tools imported it from here
)

__all__ = ['Trainer']

_log = get_logger('training')


#: id(trainer) -> its calls of train() and evaluate() running now, each as
#: (thread id, thread name, method name); kept here, not on the trainer, so
#: that copies, pickles, descriptions and checkpoints never see them
_RUNNING: dict[int, list[tuple]] = {}
_RUNNING_LOCK = threading.Lock()

_FiniteCheck = FiniteCheck  # its name before it had a module of its own

#: the log names the trainer writes itself, refused as hook names
RESERVED_LOG_NAMES = ('rolling_training',)


_NETWORK = Instance('brainstorm.structure.network:Network')


def _check_resumed_epoch_length(resume: dict, training_data_iter) -> None:
    """Refuse a training iterator too short for the checkpoint's epoch.

    Resumed mid-epoch, ``train`` skips the batches the checkpoint's run
    had done; an iterator with fewer batches (another batch size) would be
    skipped whole, silently. Iterators that declare their ``length`` are
    refused here, before any state is restored; the others when the
    skipped batches run out (see ``Trainer._train_epoch``).

    Raises:
        TrainingValidationError: naming both numbers of batches.
    """
    progress = resume['progress']
    done = int(progress['batches_done'])
    length = getattr(training_data_iter, 'length', None)
    if progress['epoch_complete'] or not isinstance(length, int) or length >= done:
        return
    raise TrainingValidationError(
        f"Checkpoint '{resume['filename']}' was written after {done} batches "
        f'of epoch {progress["current_epoch_nr"]}, but the training iterator '
        f'({type(training_data_iter).__name__}) has {length} batches in an '
        'epoch: it is not the iterator of the checkpoint. Pass one built the '
        'same way (same data, batch size and shuffling) to continue exactly.'
    )


class Trainer(Describable):
    """Trains a network with a stepper, calling hooks along the way.

    Args:
        stepper: the :class:`~brainstorm.training.steppers.TrainingStepper`.
        verbose: whether hooks print (unless a hook sets its own
            ``verbose``) and the trainer prints an epoch header.
        check_finite: raise, before any hook sees the broken network,
            :class:`~brainstorm.errors.NonFiniteError` if the training loss
            or a parameter is NaN or infinite, or a parameter's magnitude
            exceeds ``max_abs_parameter``. The loss is checked after every
            update, the parameters before hooks run (one dot product over
            them; costs in ``benchmarks/README.md``). Each training batch
            is checked too (see ``Network.provide_external_data``).
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
        logs: the values returned by hooks (see :meth:`train`).
        results: the values returned by hooks in :meth:`evaluate`.

    Counting: ``current_epoch_nr`` and ``current_update_nr`` start at 0 and
    are never reset. A second call of :meth:`train` continues the counting
    and the logs: it starts the hooks again but does not repeat the
    emission at count 0, and goes on with epoch ``current_epoch_nr + 1``
    (raise e.g. ``StopAfterEpoch.max_epochs`` to train longer). If a hook
    ended the first call with an error during the emission at count 0,
    the next call completes it: the hooks that had not had their call at
    count 0 (the one that raised included) get it, the others do not get
    it twice. Like Brainstorm 0.5, every call starts the stepper again
    (``stepper.start(net)``): its state (momentum velocities, the moment
    estimates and step count of Adam and RMSProp) begins from zero, while
    its attributes (a learning rate set by a schedule) keep their values.
    To continue a run with its stepper state, write a checkpoint
    (:class:`~brainstorm.hooks.SaveCheckpoint`) and continue it with
    :meth:`from_checkpoint`.

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
        'stepper': Arg(
            Instance((TrainingStepper, DataParallel), example=lambda: SgdStepper())
        ),
        'verbose': Arg(Bool(), omit_default=True),
        'check_finite': Arg(Bool(), omit_default=True),
        'max_abs_parameter': Arg(
            Optional(Real(0, include_low=False)), omit_default=True
        ),
        'hooks': Arg(DictOf(HookCheck()), state=True),
        'train_scorers': Arg(ListOf(Instance(Scorer)), state=True),
    }

    __undescribed__ = {
        'logs': {},
        'results': {},
        '_progress': TrainingProgress(),
        '_run': None,
    }

    def __init__(
        self,
        stepper,
        verbose: bool = True,
        check_finite: bool = True,
        max_abs_parameter: float | None = 1e7,
    ):
        self.stepper = stepper
        self.verbose = verbose
        self.check_finite = check_finite
        self.max_abs_parameter = max_abs_parameter
        self.hooks: OrderedDict = OrderedDict()
        self.train_scorers: list = []
        self.logs: OrderedDict = OrderedDict()
        self.results: OrderedDict = OrderedDict()
        self._progress = TrainingProgress()
        self._run: TrainingRun | None = None

    def __init_from_description__(self, description: dict) -> None:
        hooks = sorted(
            self.hooks.items(), key=lambda item: getattr(item[1], 'priority', 0)
        )
        self.hooks = OrderedDict()
        for name, hook in hooks:
            hook.__name__ = name
            self.hooks[name] = hook
        self.logs = OrderedDict()
        self.results = OrderedDict()

    @property
    def current_epoch_nr(self) -> int:
        """Epochs done so far (see the counting rules above)."""
        return self._progress.epoch_nr

    @current_epoch_nr.setter
    def current_epoch_nr(self, value: int) -> None:
        self._progress.epoch_nr = value

    @property
    def current_update_nr(self) -> int:
        """Updates done so far."""
        return self._progress.update_nr

    @current_update_nr.setter
    def current_update_nr(self, value: int) -> None:
        self._progress.update_nr = value

    def __getstate__(self) -> dict:
        """The state for ``copy.deepcopy`` and pickle, outside ``train``.

        Raises:
            TrainingValidationError: while :meth:`train` runs (from a hook,
                say): the copy would hold a run that no loop drives. Copy
                the network instead, or write a checkpoint
                (:meth:`save_checkpoint`) to continue the run elsewhere.
        """
        if self._run is not None:
            raise TrainingValidationError(
                'Trainer: cannot copy or pickle a Trainer while train() runs '
                f'(epoch {self.current_epoch_nr}, update '
                f'{self.current_update_nr}). Copy the network instead '
                '(copy.deepcopy(net)), or save a checkpoint '
                '(trainer.save_checkpoint or the SaveCheckpoint hook) and '
                'resume it with Trainer.from_checkpoint.'
            )
        return dict(self.__dict__)

    def __setstate__(self, state: dict) -> None:
        """Restore a copy, or a trainer pickled by an earlier version.

        Earlier versions kept the counters, ``_started``,
        ``_initial_done`` and ``_resume`` on the trainer itself.
        """
        state = dict(state)
        if '_progress' not in state:
            state['_progress'] = TrainingProgress.from_old_trainer_state(state)
        state.pop('_running', None)  # now kept off the trainer (_RUNNING)
        state.setdefault('_run', None)
        self.__dict__.update(state)

    # ------------------------------------------------------------ hooks ---

    @declare(hook=Arg(HookCheck()))
    def add_hook(self, hook) -> None:
        """Add a hook; hooks run in the order they were added.

        Args:
            hook: a :class:`~brainstorm.hooks.Hook` such as
                ``StopAfterEpoch(5)``, or an object that acts like one
                (see ``brainstorm.training.hook_check``).

        Hooks are added before :meth:`train` or between two calls: adding
        one while ``train`` or :meth:`evaluate` runs (e.g. from inside
        another hook) is refused, since it would run without having been
        started for this run.

        Raises:
            TrainingValidationError: (a ValueError) if a hook of the same
                name (``hook.__name__``) was added before, if the name is
                empty, holds a '.' or is one the trainer logs under itself
                (``'rolling_training'``), or if ``train`` or ``evaluate``
                is running.
        """
        name = getattr(hook, '__name__', None)
        if not isinstance(name, str):
            raise TrainingValidationError(
                f'Trainer.add_hook: a hook needs a __name__ (str). Received: {hook!r}'
            )
        if '.' in name or not name:
            raise TrainingValidationError(
                "Trainer.add_hook: a hook's name must be a non-empty str without "
                "'.', since log names are dotted paths ('validation.total_loss'). "
                f'Received: __name__={name!r} (of {type(hook).__name__})'
            )
        _check_not_reserved(name, type(hook).__name__, 'Trainer.add_hook')
        if id(self) in _RUNNING:
            raise TrainingValidationError(
                f"Trainer.add_hook: cannot add hook '{name}' while train() or "
                'evaluate() runs (e.g. from inside another hook): it would be '
                'called without having been started. Add it before train(), '
                'or between two train() calls.'
            )
        if name in self.hooks:
            raise TrainingValidationError(
                f"Trainer.add_hook: a hook named '{name}' was already added. "
                'Give the new one another name (name=...).'
            )
        hook.priority = 1 + max(
            (getattr(h, 'priority', 0) for h in self.hooks.values()), default=0
        )
        self.hooks[name] = hook

    def _with_hooks(self, net, named_data_iters, body, method: str):
        """Start the hooks, run ``body()`` and end the hooks however it ends.

        First the hooks are checked (as :meth:`add_hook` does; they may
        have been changed since, or restored from a description).
        """
        for name, hook in self.hooks.items():
            _check_not_reserved(name, type(hook).__name__, f'Trainer.{method}')
            check_hook_timing(name, hook)
        started: list = []
        verbose = self.verbose and processes_of(self.stepper).is_root
        try:
            start_hooks(
                self.hooks,
                net,
                self.stepper,
                verbose,
                named_data_iters,
                started,
                self._progress,
            )
            result = body()
        except BaseException as err:
            end_hooks(started, err, self._progress)
            raise
        end_hooks(started, None, self._progress)
        return result

    def _emit_hooks(
        self, net, timescale: str, logs: dict, called: dict | None = None
    ) -> bool:
        """Call all hooks due now; return True if one asked to stop.

        Args:
            net: the network.
            timescale: ``'update'`` or ``'epoch'``.
            logs: where the hooks' results go: :attr:`logs` (in
                ``train``) or :attr:`results` (in ``evaluate``). The hooks
                read :attr:`logs` in both.
            called: in a round at count 0, ``{hook name: whether it asked
                to stop}`` of the hooks whose call went through in an
                earlier ``train`` (they are not called again; their stop
                requests count), filled in with the hooks called now.
        """
        progress = self._progress
        fired = due_hooks(self.hooks, timescale, progress)
        if not fired:
            return False
        processes = processes_of(self.stepper)
        training = logs is self.logs
        if timescale == 'epoch' and self.verbose and processes.is_root and training:
            _log.info(f'{"-" * 30} Epoch {progress.epoch_nr} {"-" * 30}')
        run = self._run
        if run is not None and run.finite_check is not None and training:
            run.finite_check.check_parameters(self, progress.update_nr)
        stop = False
        now = []
        for name, hook in fired:
            if called is not None and name in called:
                stop = stop or called[name]
                continue
            asked = call_hook(
                name,
                hook,
                timescale,
                net,
                self.stepper,
                self.logs,
                progress,
                self.verbose,
                processes.is_root,
                results=logs,
            )
            now.append((name, hook, asked))
            stop = stop or asked
            if called is not None and not _writes_checkpoint(hook):
                called[name] = asked
        # a hook may ask only one rank to stop (a signal, a local figure);
        # all ranks must stop together or some would wait forever in the
        # next collective call
        with processes.guarded('the stop decision after the hooks'):
            stop = processes.allreduce_sum(int(stop)) > 0
        for name, hook, asked in now:
            if _writes_checkpoint(hook) and self._run is not None:
                # written here, after every hook of this count ran, but a
                # failure is the hook's: noted like an error of its call
                try:
                    self.save_checkpoint(hook.filename)
                except Exception as err:
                    note_hook_error(err, name, hook, f'its {timescale} call', progress)
                    raise
            if called is not None and _writes_checkpoint(hook):
                called[name] = asked  # its call is through once it wrote
        return stop

    # -------------------------------------------------- running calls ---

    def _begin_call(self, method: str) -> tuple:
        """Record a call of ``method`` (train or evaluate) as running.

        While any runs, :meth:`add_hook` refuses. ``train`` runs in one
        thread at a time, and neither call runs inside another in the same
        thread (from a hook): the inner call would start and end the hooks
        of the outer one, mix its counters and logs into them, and on
        leaving end the outer run's checkpoint writing and finite checks.

        Raises:
            TrainingValidationError: for ``train`` while another thread's
                ``train`` runs, and for either while this thread runs one.
        """
        token = (threading.get_ident(), threading.current_thread().name, method)
        with _RUNNING_LOCK:
            calls = _RUNNING.get(id(self), [])
            for ident, thread_name, other in calls:
                if ident == token[0]:
                    raise TrainingValidationError(
                        f'Trainer: {method}() was called while {other}() of '
                        'the same trainer runs in this thread (from one of '
                        'its hooks, say). A Trainer (with its stepper and '
                        'hooks) drives one call at a time: call '
                        f'{method}() after {other}() returned, or use '
                        'another Trainer (bs.tools.evaluate for scores '
                        'from inside a hook).'
                    )
                if method == other == 'train':
                    raise TrainingValidationError(
                        f'Trainer: train() was called in thread {token[1]!r} '
                        f'while it runs in thread {thread_name!r}. A Trainer '
                        '(with its stepper and hooks) drives one run at a '
                        'time: give each thread a Trainer of its own.'
                    )
            _RUNNING.setdefault(id(self), calls).append(token)
        return token

    def _end_call(self, token: tuple) -> None:
        with _RUNNING_LOCK:
            calls = _RUNNING[id(self)]
            calls.remove(token)
            if not calls:
                del _RUNNING[id(self)]

    # ---------------------------------------------------------- training ---

    @declare(net=Arg(_NETWORK))
    def train(self, net, training_data_iter, **named_data_iters) -> None:
        """Train ``net`` until a hook asks to stop.

        Steps: check that each iterator provides exactly the network's input
        names; ``stepper.start(net)``; start the hooks (the training
        iterator is added to ``named_data_iters`` as
        ``'training_data_iter'``); on the first call, call all ``'update'``
        hooks and then all ``'epoch'`` hooks at count 0 (return if one
        asks to stop; if one raises, the next call calls those that had
        not had their call at count 0); then loop over epochs: for each
        batch provide the data, count the update, ``stepper.run()``,
        gather the losses and ``train_scorers``, apply the weight
        modifiers and call the ``'update'`` hooks (a stop request ends the
        epoch); after each epoch log ``'rolling_training'`` and call the
        ``'epoch'`` hooks; stop if one asked to.

        However ``train`` ends (a stop request, an exception from a hook or
        an iterator, ``KeyboardInterrupt``), it calls ``hook.end()`` of
        every hook it started, last first, so that what hooks changed in
        the process (a signal handler, a progress bar) is put back.

        A hook is due when its ``timescale`` matches and the count is a
        multiple of its ``interval`` (both are checked when ``train``
        starts and whenever hooks are due). Its non-None return value is
        logged under its name (dicts nest, other values are appended to
        lists); ``StopIteration`` asks to stop (its value, if any, is
        logged); other errors are re-raised with a note naming the hook.

        After :meth:`from_checkpoint`, the run continues exactly where the
        checkpoint was written, given iterators built the same way.

        Args:
            net: the network to train.
            training_data_iter: the data iterator for training.
            **named_data_iters: further iterators, for hooks (e.g.
                ``valid_getter=...`` for ``MonitorScores('valid_getter')``).

        Raises:
            IteratorValidationError: for iterators whose data names differ
                from the network's inputs, and for a training iterator that
                yields no batch in an epoch, or only batches without
                samples.
            TrainingValidationError: when continuing a checkpoint with
                another network or differently named iterators; when
                called while ``train`` or :meth:`evaluate` of this trainer
                runs in the same thread (from a hook), or ``train`` in
                another; for a hook with a name the trainer logs under
                itself, or whose ``timescale`` or ``interval`` was set to a
                value it cannot run with.
        """
        processes = processes_of(self.stepper)
        # data-parallel: however this rank leaves training early, from the
        # first check on (an error caught by the caller too), the others
        # must learn it, or they wait in their next collective call (the
        # parameter counts of DataParallel.start) until the watchdog's
        # time-out (see brainstorm.parallel.watchdog_of)
        with processes.training(self._leaving_reason):
            named_data_iters = OrderedDict(named_data_iters)
            named_data_iters['training_data_iter'] = training_data_iter
            check_data_iterators(net, named_data_iters)
            # before the first update, not after it (as gathering would)
            check_scorer_names(self.train_scorers, net._loss_names())
            resume = self._progress.resume
            if resume is not None:
                checkpoint.check_resume(resume, net, named_data_iters)
                _check_resumed_epoch_length(resume, training_data_iter)
            # the whole run holds the trainer and the network: another
            # thread using either meanwhile gets a clear error instead of
            # mixing its batches and counters into this run
            token = self._begin_call('train')
            try:
                net._enter('Trainer.train')
                try:
                    self._start_and_train(
                        net, training_data_iter, named_data_iters, processes
                    )
                finally:
                    net._leave()
            finally:
                self._end_call(token)

    def _start_and_train(self, net, training_data_iter, named_data_iters, processes):
        self.stepper.start(net)
        # after start: DataParallel gives every rank rank 0's parameters
        check_parameters_set(net)
        net._start_weight_modifiers()  # FreezeValues() takes its values
        if isinstance(self.stepper, DataParallel):
            # each rank its own augmentation noise (checkpoints restore it)
            self.stepper.reseed_iterators(named_data_iters.values())
        check_lengths_agree(processes, training_data_iter)
        run = TrainingRun(net, named_data_iters, processes, self._progress)
        self._with_hooks(
            net, named_data_iters, lambda: self._train_started(run), 'train'
        )

    def _leaving_reason(self, err: BaseException) -> str:
        return (
            f'{type(err).__name__}: {err} (epoch {self.current_epoch_nr}'
            f', update {self.current_update_nr})'
        )

    def _train_started(self, run: TrainingRun) -> None:
        progress = run.progress
        progress.begin_run()
        if progress.resume is not None:
            checkpoint.apply_resume(self, progress.resume, run)
            progress.resume = None
        self._run = run
        if getattr(self, 'check_finite', True):
            run.finite_check = FiniteCheck(
                run.net, getattr(self, 'max_abs_parameter', 1e7)
            )
        try:
            if not progress.started:
                # each round at count 0 is recorded as begun before its
                # hooks run, so that a checkpoint written at its end (by
                # SaveCheckpoint) resumes with what comes after it, never
                # skipping the epoch-0 hooks; a round a hook ended with an
                # error goes on here with the hooks not yet called
                stop = False
                for timescale in INITIAL_ROUNDS:
                    called = progress.initial_round_calls(timescale)
                    if called is not None:
                        stop = (
                            self._emit_hooks(run.net, timescale, self.logs, called)
                            or stop
                        )
                progress.end_initial_rounds()
                if stop:
                    return
            training_data_iter = run.named_data_iters['training_data_iter']
            while True:
                if self._train_epoch(run, training_data_iter):
                    return
        finally:
            self._run = None

    def _train_epoch(self, run: TrainingRun, training_data_iter) -> bool:
        net, progress = run.net, run.progress
        if progress.epoch_complete:
            progress.begin_epoch(
                checkpoint.iterator_states({'training_data_iter': training_data_iter})
            )
        batches = iter(training_data_iter(handler=net.handler))
        # resumed mid-epoch: replay the batches done (the same order and
        # draws as the recorded run), then go on with the states the
        # recorded run had, which monitors passing over the training
        # iterator may have advanced
        replayed = sum(1 for _ in itertools.islice(batches, progress.batches_done))
        if replayed < progress.batches_done:
            raise TrainingValidationError(
                f'Trainer: the run resumes after {progress.batches_done} '
                f'batches of epoch {progress.epoch_nr}, but the training '
                f'iterator ({type(training_data_iter).__name__}) yields only '
                f'{replayed} in an epoch: it is not the iterator of the '
                'checkpoint. Load the checkpoint again and pass one built '
                'the same way (same data, batch size and shuffling).'
            )
        if progress.training_states_now is not None:
            checkpoint.set_chain_states(
                'training_data_iter',
                training_data_iter,
                progress.training_states_now,
                'resumed',
            )
            progress.training_states_now = None
        stop = False
        for data in batches:
            net.provide_external_data(data, check_finite=run.finite_check is not None)
            # a Ctrl-C waits for the step to end: stopped halfway, an
            # update mixed two steps' parameters and the count was ahead
            with hold_back_interrupts():
                progress.update_nr += 1
                self.stepper.run()
                gather_losses_and_scores(net, self.train_scorers, progress.epoch_scores)
                net.apply_weight_modifiers()
                if run.finite_check is not None:
                    run.finite_check.check_loss(self, progress.update_nr)
                progress.batches_done += 1
            if self._emit_hooks(net, 'update', self.logs):
                stop = True
                break
        self._check_epoch_length(run, training_data_iter, stop)
        # the figures of all ranks, joined once (a collective)
        scores = gather_from_all_ranks(progress.epoch_scores, run.processes)
        self._check_epoch_samples(run, training_data_iter, scores)
        add_log(
            self.logs,
            'rolling_training',
            aggregate_losses_and_scores(scores, net, self.train_scorers),
            progress.epoch_nr,
            progress.update_nr,
        )
        progress.epoch_complete = True
        return self._emit_hooks(net, 'epoch', self.logs) or stop

    @staticmethod
    def _check_epoch_length(run: TrainingRun, training_data_iter, stop: bool):
        progress = run.progress
        if not progress.batches_done:
            # the empty-data rule: a loss of 0.0 over no data is no result
            error = IteratorValidationError(
                f"Trainer: the training iterator ('training_data_iter', "
                f'{type(training_data_iter).__name__}) yielded no batch in '
                f'epoch {progress.epoch_nr}: there is nothing to train on.'
            )
            # the epoch never began: a train() called again with data
            # numbers its first epoch as this one
            progress.epoch_nr -= 1
            progress.epoch_complete = True
            raise error
        length = getattr(training_data_iter, 'length', None)
        if (
            run.processes.size > 1
            and not stop
            and length is not None
            and progress.batches_done != length
        ):
            # the other ranks still expect a training step's collectives
            raise IteratorValidationError(
                f'Trainer: rank {run.processes.rank}: the training '
                f'iterator yielded {progress.batches_done} batches in epoch '
                f'{progress.epoch_nr}, but its length is {length}; in '
                'data-parallel training every rank must yield as many '
                'batches as it declares.'
            )

    @staticmethod
    def _check_epoch_samples(run: TrainingRun, training_data_iter, scores: dict):
        """Refuse an epoch whose batches all had no samples (on all ranks).

        Single empty batches are fine (in data-parallel runs, a rank's part
        of a small last batch is empty); an epoch without any sample would
        log a training loss of 0.0 over no data.

        Args:
            run: the run.
            training_data_iter: the training iterator, for the message.
            scores: the epoch's ``(weight, value)`` lists, of all ranks.

        Raises:
            IteratorValidationError: naming the iterator, if the batches of
                all ranks together hold no sample.
        """
        if sum(weight for weight, _ in scores.get('total_loss', [])):
            return
        progress = run.progress
        batches = progress.batches_done
        where = (
            f' (on all {run.processes.size} ranks)' if run.processes.size > 1 else ''
        )
        raise IteratorValidationError(
            f"Trainer: the training iterator ('training_data_iter', "
            f'{type(training_data_iter).__name__}) yielded '
            f'{batches} batch{"es" if batches != 1 else ""} in epoch '
            f'{progress.epoch_nr}, all without samples{where}: there is '
            'nothing to train on (a training loss of 0.0 over no data would '
            'look like a perfect score). Give it data.'
        )

    @declare(net=Arg(_NETWORK))
    def evaluate(self, net, **named_data_iters) -> OrderedDict:
        """Start the hooks and call them once with the current counters.

        ``'epoch'`` hooks are called, then ``'update'`` hooks, their
        results logged into :attr:`results` instead of :attr:`logs`; then
        every hook's ``end`` (also if one raised). The hooks read
        :attr:`logs`, as in :meth:`train` (and as in Brainstorm 0.5), which
        ``evaluate`` leaves unchanged: a ``SaveLogs`` or ``SaveBestNetwork``
        hook sees the training run's logs, not the evaluation's. On a
        trainer loaded with :meth:`from_checkpoint` the hooks get the
        states the checkpoint holds before they run, as in :meth:`train`.

        Returns:
            :attr:`results`.

        Raises:
            TrainingValidationError: when called while :meth:`train` or
                ``evaluate`` of this trainer runs in the same thread (from
                a hook); for a hook with a name the trainer logs under
                itself, or whose ``timescale`` or ``interval`` was set to a
                value it cannot run with.
        """
        check_data_iterators(net, named_data_iters)
        if isinstance(self.stepper, DataParallel):
            # the ranks shuffle alike, as in train (a collective)
            share_shard_states(self.stepper.comm, named_data_iters.values())

        def emit():
            if self._progress.resume is not None:
                # a loaded trainer not yet trained: its hooks get their
                # states before they run, as train gives them (again)
                checkpoint.restore_hook_states(self, self._progress.resume)
            self._emit_hooks(net, 'epoch', self.results)
            self._emit_hooks(net, 'update', self.results)

        net._enter('Trainer.evaluate')
        try:
            token = self._begin_call('evaluate')
            try:
                self._with_hooks(net, named_data_iters, emit, 'evaluate')
            finally:
                self._end_call(token)
        finally:
            net._leave()
        return self.results

    # ------------------------------------------------------- checkpoints ---

    def save_checkpoint(self, filename: str) -> None:
        """Write a checkpoint of the running training.

        See :class:`~brainstorm.hooks.SaveCheckpoint` and
        :func:`brainstorm.training.checkpoint.save_checkpoint`; only
        possible while :meth:`train` runs.

        Args:
            filename: the file (a str or ``os.PathLike``).

        Raises:
            TrainingValidationError: if called outside :meth:`train`.
            FileWriteError: if the file cannot be written (disk full,
                file-size limit, ...); the previous file is untouched.
        """
        if self._run is None:
            raise TrainingValidationError(
                'Trainer.save_checkpoint: only possible during train() (use '
                'the SaveCheckpoint hook).'
            )
        filename = as_file_name(
            filename, 'Trainer.save_checkpoint', TrainingValidationError
        )
        checkpoint.save_checkpoint(self, self._run, filename)

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
        restored hook that writes files (``filename``, or the ``log_dir`` of
        ``SaveLogsTensorBoard``) must name a safe
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
        if not isinstance(trusted, bool):
            raise TrainingValidationError(
                'Trainer.from_checkpoint: trusted must be a bool. Received: '
                f'trusted={trusted!r}'
            )
        trainer, net, progress = checkpoint.load_checkpoint(filename, trusted, Trainer)
        trainer._progress = progress
        return trainer, net


def _writes_checkpoint(hook) -> bool:
    return bool(getattr(hook, 'writes_checkpoint', False))


def _check_not_reserved(name: str, kind: str, who: str) -> None:
    """Refuse a hook named like a log the trainer writes itself.

    Raises:
        TrainingValidationError: naming the hook and the reserved names.
    """
    if name in RESERVED_LOG_NAMES:
        raise TrainingValidationError(
            f"{who}: a hook cannot be named '{name}' ({kind}): the trainer "
            f'logs under {", ".join(repr(n) for n in RESERVED_LOG_NAMES)} '
            "itself, and the hook's entries would mix into its log. Give "
            'the hook another name (name=...).'
        )
