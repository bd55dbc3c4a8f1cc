"""The trainer's check that training has not diverged (NaN, inf, huge values).

:class:`FiniteCheck` is used by :class:`~brainstorm.training.trainer.Trainer`
with ``check_finite=True`` (the default); it raises
:class:`~brainstorm.errors.NonFiniteError` naming the first layer and buffer
with a problem before any hook sees the broken network.
"""

from __future__ import annotations

import math

import numpy as np

from brainstorm.errors import NonFiniteError
from brainstorm.structure.buffer_views import BufferView
from brainstorm.training.utils import memory_of, same_memory

__all__ = ['FiniteCheck']


class FiniteCheck:
    """The trainer's check that the loss and all parameters are finite.

    After every update it checks that the training loss and all
    parameters are finite and no parameter is beyond ``max_abs``.

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
        self._memory: tuple | None = None
        self._follow_memory()

    def _follow_memory(self) -> None:
        """Views of the parameters for the network's memory as it is now.

        ``net.set_handler`` (during training, from a hook) moves the
        memory, possibly to another kind of array: the views are made
        again then.
        """
        net = self.net
        memory = memory_of(net)
        if same_memory(memory, self._memory):
            return
        self._memory = memory
        params = net.buffer.parameters
        self._numpy = isinstance(params, np.ndarray) and params.ndim == 1
        if not self._numpy and params.size:
            self._flat = params.reshape((1, params.size))
            self._out = net.handler.zeros((1, 1))

    def _square_norm(self) -> float:
        self._follow_memory()
        params = self.net.buffer.parameters
        if not params.size:
            return 0.0
        # huge finite values may overflow the sum: then the layers are
        # searched, which tells them from a real problem
        with np.errstate(over='ignore', invalid='ignore'):
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
        # math.isfinite: without a limit (inf), an inf square must fail too
        ok = math.isfinite(square) and square <= self.limit
        if not ok and self._locate() is not None:
            self._fail(trainer, update_nr, None)

    def _locate(self, loss_first: bool = False):
        """Return (layer, buffer, what) of the first problem, or None.

        Searched in canonical layer order: parameters first, then internals
        and outputs (the other way round for a non-finite loss: the outputs
        of the forward pass show where it began, the parameters are already
        updated with it).
        """
        net, h = self.net, self.net.handler
        order = [('parameters',), ('internals', 'outputs')]
        for kinds in order[::-1] if loss_first else order:
            for lname in net.layers:
                view = net.buffer[lname]
                for kind in kinds:
                    names = BufferView.keys(view[kind]) if kind in view else ()
                    for name in names:
                        values = h.get_numpy_copy(view[kind][name])
                        bad = ~np.isfinite(values)
                        if bad.any():
                            nan = int(np.isnan(values).sum())
                            return (
                                lname,
                                f'{kind}.{name}',
                                f'{nan} NaN and {int(bad.sum()) - nan} '
                                f'infinite of {values.size} values',
                            )
                        if (
                            kind == 'parameters'
                            and self.max_abs is not None
                            and values.size
                            and np.abs(values).max() > self.max_abs
                        ):
                            return (
                                lname,
                                f'{kind}.{name}',
                                f'values up to {np.abs(values).max():.3g}'
                                f' in magnitude, beyond max_abs_parameter'
                                f'={self.max_abs:g}: training diverged',
                            )
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
            place = (
                f"first problem in layer '{where[0]}', buffer '{where[1]}' ({where[2]})"
            )
        if self.last_finite_loss is None:
            last = 'no finite training loss before it'
        else:
            last = (
                f'last finite training loss {self.last_finite_loss:.6g} '
                f'at update {self.last_finite_update}'
            )
        raise NonFiniteError(
            f'Trainer: training stopped at update {update_nr} (epoch '
            f'{trainer.current_epoch_nr}): {what}; {place}; {last}. Lower '
            'the learning rate, clip gradients (clip_norm=...) or check the '
            'data. Trainer(check_finite=False) turns this check off.'
        )
