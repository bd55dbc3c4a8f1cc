"""Where a training stands: the record the trainer keeps and checkpoints store.

:class:`TrainingProgress` is how far a
:class:`~brainstorm.training.trainer.Trainer` has come: its counters,
which rounds of hook calls at count 0 ran, its position in the current
epoch, and a checkpoint read but not yet continued. The trainer updates
it; :mod:`brainstorm.training.checkpoint` writes it into checkpoint files
and reads it back. :class:`TrainingRun` is what one call of
``Trainer.train`` works with: the network, the iterators, the processes
and the progress.
"""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.training.finite_check import FiniteCheck

__all__ = ['INITIAL_ROUNDS', 'TrainingProgress', 'TrainingRun']

#: the rounds of hook calls at count 0, in the order ``train`` runs them
INITIAL_ROUNDS = ('update', 'epoch')


class TrainingProgress:
    """How far a trainer's training has come.

    ``Trainer.current_epoch_nr`` and ``Trainer.current_update_nr`` are
    :attr:`epoch_nr` and :attr:`update_nr`.

    Attributes:
        epoch_nr: epochs begun so far (0 before the first).
        update_nr: updates done so far.
        initial_done: the rounds of hook calls at count 0 begun so far, a
            prefix of :data:`INITIAL_ROUNDS`. A round counts as begun
            before its hooks run, so that a checkpoint written by one of
            them continues after it.
        initial_calls: for each round at count 0 begun by ``train`` on this
            trainer (not by the run a checkpoint continues), ``{hook name:
            whether it asked to stop}`` of the hooks whose call in it went
            through (a hook that writes a checkpoint: once it is written).
            A ``train`` after one that a hook ended with an error in these
            rounds calls the other hooks only. Emptied once ``started``.
        started: whether ``train`` went through the rounds at count 0; a
            later ``train`` goes straight on with the next epoch.
        epoch_complete: whether the last epoch begun has ended (True
            before the first).
        batches_done: the training batches done in the current epoch.
        epoch_scores: the losses and scores gathered in the current epoch.
        epoch_start_iterator_states: ``{'training_data_iter': states}``,
            the random states of the training iterator and those it wraps
            when the current epoch began (a checkpoint written mid-epoch
            stores them to replay the epoch's batches), or None.
        training_states_now: resumed mid-epoch: the states of the training
            iterator's chain to go on with once the batches done are
            replayed, or None.
        resume: what a checkpoint holds that is put back when ``train``
            continues it, or None.
    """

    def __init__(self) -> None:
        self.epoch_nr = 0
        self.update_nr = 0
        self.initial_done: tuple = ()
        self.initial_calls: dict[str, dict[str, bool]] = {}
        self.started = False
        self.resume: dict | None = None
        self.begin_run()

    def __setstate__(self, state: dict) -> None:
        """Restore a copy, or a record pickled before ``initial_calls``."""
        self.__dict__.update(state)
        self.__dict__.setdefault('initial_calls', {})

    @classmethod
    def from_old_trainer_state(cls, state: dict) -> TrainingProgress:
        """Take the progress out of a trainer's state pickled before the record.

        Earlier versions kept the counters and ``_started``,
        ``_initial_done`` and ``_resume`` on the trainer itself.

        Args:
            state: the trainer's ``__dict__`` as pickled; those entries are
                removed from it.

        Returns:
            The record they make.
        """
        progress = cls()
        progress.epoch_nr = state.pop('current_epoch_nr', 0)
        progress.update_nr = state.pop('current_update_nr', 0)
        progress.started = state.pop('_started', False)
        progress.initial_done = tuple(state.pop('_initial_done', ()))
        progress.resume = state.pop('_resume', None)
        return progress

    def begin_run(self) -> None:
        """Forget the position in an epoch: each ``train`` begins an epoch.

        A checkpoint being continued puts its position back afterwards.
        """
        self.epoch_complete = True
        self.batches_done = 0
        self.epoch_scores: dict = OrderedDict()
        self.epoch_start_iterator_states: dict | None = None
        self.training_states_now: list | None = None

    def begin_initial_round(self, timescale: str) -> bool:
        """Record that the round of ``timescale`` hooks at count 0 begins.

        Args:
            timescale: ``'update'`` or ``'epoch'``.

        Returns:
            False if that round had begun already (then it is not run again).
        """
        if timescale in self.initial_done:
            return False
        self.initial_done = INITIAL_ROUNDS[: INITIAL_ROUNDS.index(timescale) + 1]
        return True

    def initial_round_calls(self, timescale: str) -> dict[str, bool] | None:
        """Begin the round of ``timescale`` hooks at count 0, or go on with it.

        A round that a hook ended with an error goes on in the next
        ``train``: the hooks that had their call in it are not called
        again, the others are.

        Args:
            timescale: ``'update'`` or ``'epoch'``.

        Returns:
            ``{hook name: whether it asked to stop}`` of the hooks whose
            call in the round went through so far (empty when it begins),
            for the trainer to fill in; None if the round is not to run:
            it went through, or began in the run a checkpoint continues.
        """
        if self.started:
            return None
        if self.begin_initial_round(timescale):
            self.initial_calls[timescale] = {}
        return self.initial_calls.get(timescale)

    def end_initial_rounds(self) -> None:
        """Record that ``train`` went through the rounds at count 0."""
        self.started = True
        self.initial_calls = {}

    @property
    def initial_rounds_begun(self) -> bool:
        """Whether ``train`` is through the rounds at count 0 or in the last.

        This is what checkpoints store as ``started``: a run continued from
        a checkpoint written during the last round goes on after it.
        """
        return self.started or self.initial_done == INITIAL_ROUNDS

    def begin_epoch(self, iterator_states: dict) -> None:
        """Count a new epoch and start its position at its first batch.

        Args:
            iterator_states: ``{'training_data_iter': states}`` now.
        """
        self.epoch_nr += 1
        self.epoch_complete = False
        self.batches_done = 0
        self.epoch_scores = OrderedDict()
        self.epoch_start_iterator_states = iterator_states


class TrainingRun:
    """What one call of ``Trainer.train`` works with.

    Args:
        net: the network trained.
        named_data_iters: the data iterators by name, the training one as
            ``'training_data_iter'``.
        processes: the processes of the run
            (:func:`brainstorm.parallel.processes_of`).
        progress: the trainer's :class:`TrainingProgress`.

    Attributes:
        finite_check: the trainer's
            :class:`~brainstorm.training.finite_check.FiniteCheck`, or None
            without ``check_finite``.
    """

    def __init__(self, net, named_data_iters, processes, progress: TrainingProgress):
        self.net = net
        self.named_data_iters = named_data_iters
        self.processes = processes
        self.progress = progress
        self.finite_check: FiniteCheck | None = None
