"""The base of all steppers: state, gradient masking and clipping.

:class:`TrainingStepper` binds a network's flat parameter array in
``start``, runs the passes in ``run`` and leaves the update rule
(``_update``) to its subclasses. ``_Part`` holds one contiguous range
of the array with its state and scratch memory.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np

from brainstorm.arguments import Arg, Optional, Real, check_attributes
from brainstorm.describable import Describable
from brainstorm.errors import TrainingValidationError
from brainstorm.handlers.representable import find_overflow, narrows
from brainstorm.training.utils import memory_of, same_memory


def _powers_of_two(exponent: int, dtype) -> list[float]:
    """``2**exponent`` as factors that ``dtype`` holds exactly.

    One factor where ``dtype`` holds it (from its smallest subnormal to its
    largest power of two); else several, to apply in turn. Downwards the
    last is the smallest subnormal power, so that the numbers stay as large
    as they can until the last step and only it rounds.
    """
    info = np.finfo(dtype)
    lowest = int(info.minexp) - int(info.nmant)
    highest = int(info.maxexp) - 1
    steps = []
    while exponent > highest:
        steps.append(math.ldexp(1.0, highest))
        exponent -= highest
    if exponent >= lowest:
        return [*steps, math.ldexp(1.0, exponent)]
    exponent -= lowest
    while exponent < int(info.minexp):
        steps.append(math.ldexp(1.0, int(info.minexp)))
        exponent -= int(info.minexp)
    return [*steps, math.ldexp(1.0, exponent), math.ldexp(1.0, lowest)]


class _Part:
    """One contiguous range of the flat parameter array and its state."""

    __slots__ = (
        'start',
        'stop',
        'parameters',
        'gradients',
        'mask',
        'state',
        'tmp',
        'norm',
    )

    def __init__(self, net, start: int, stop: int):
        h = net.handler
        self.start, self.stop = start, stop
        self.parameters = net.buffer.parameters[start:stop]
        self.gradients = net.buffer.gradients[start:stop]
        mask = net.trainable_mask
        self.mask = None if mask is None else mask[start:stop]
        self.state: OrderedDict = OrderedDict()
        self.tmp = h.zeros((stop - start,))
        self.norm = h.zeros((1,))


class TrainingStepper(Describable):
    """Base class of all steppers.

    Subclasses declare their hyperparameters in ``__arguments__`` (the
    bounds once, in the checks; the defaults once, in the signature),
    implement ``_update`` and, if they need them, ``_allocate_state``,
    ``_before_passes`` and ``_check_for_handler`` (hyperparameters the
    network's dtype cannot use). The declared hyperparameters are checked
    when the stepper is made or restored, and again before each step (a
    schedule may have changed them).

    Args:
        clip_norm: if not None, a positive number: gradients with a global
            L2 norm above it are scaled down to that norm before the update.

    Attributes:
        net: the network given to :meth:`start` (None before).
        last_gradient_norm: the global gradient norm of the last step if
            ``clip_norm`` is set, else None.
    """

    __arguments__ = {
        'clip_norm': Arg(Optional(Real(0, include_low=False)), omit_default=True),
    }

    __undescribed__ = {
        'net': None,
        '_parts': None,
        'last_gradient_norm': None,
        '_bound': None,
    }

    def __init__(self, clip_norm: float | None = None):
        # set by start(net)
        self.net: Any = None
        self._parts: Any = None
        # (handler, constant memory) of the network the parts view
        self._bound: Any = None
        self.last_gradient_norm: float | None = None
        self.clip_norm = clip_norm

    # ----------------------------------------------------------- public ---

    def start(self, net) -> None:
        """Get ready to train ``net``.

        Allocates the state (all zero) and scratch memory for its whole
        parameter array.
        """
        self._check_for_handler(net.handler)
        self._bind(net, [(0, int(net.buffer.parameters.shape[0]))])

    def run(self) -> None:
        """Do one training step on the data the network currently holds."""
        self._require_started()
        self._check_hyperparameters()
        self._before_passes()
        self.net.forward_pass(training_pass=True)
        self.net.backward_pass(input_deltas=False)
        self._mask_gradients()
        self._clip_gradients()
        self._update()

    def get_state(self) -> OrderedDict:
        """The stepper's state as NumPy arrays (for checkpoints).

        Returns:
            OrderedDict of dotted names to arrays; scalars are 0-d arrays.
        """
        self._require_started('get_state')
        h = self.net.handler
        state = OrderedDict()
        for i, part in enumerate(self._parts):
            for key, array in part.state.items():
                state[f'part{i}.{key}'] = h.get_numpy_copy(array)
        for key, value in self._get_scalar_state().items():
            state[key] = np.asarray(value)
        return state

    def set_state(self, state: dict) -> None:
        """Restore a state made by :meth:`get_state` (after :meth:`start`).

        Raises:
            TrainingValidationError: if names or shapes do not match, or if
                an entry has a finite value beyond the range of the
                handler's dtype (a float64 checkpoint resumed on float16);
                nothing is restored then.
        """
        self._require_started('set_state')
        own = self.get_state()
        if set(state) != set(own):
            raise TrainingValidationError(
                f'{type(self).__name__}: cannot restore a state with entries '
                f'{sorted(state)}; this stepper has {sorted(own)}. Was it '
                'saved by a different stepper or network?'
            )
        self._check_state(state, own)
        self._restore_state(state)

    # ------------------------------------------------- copies, pickles ---

    def __getstate__(self) -> dict:
        """The state for ``copy.deepcopy`` and pickle.

        A started stepper's parts hold views into its network's parameters
        and gradients; copied one by one they would be arrays of their own
        and the copy would update nothing. So each part is kept as its range
        and its state arrays (NumPy copies), and :meth:`__setstate__` binds
        the parts anew to the copied network.
        """
        state = dict(self.__dict__)
        parts = state.get('_parts')
        state['_bound'] = None  # views of the network's memory: bound anew
        if parts is not None:
            self._follow_network()
            parts = self._parts
            h = self.net.handler
            state['_parts'] = None
            state['_copied_parts'] = [
                (
                    part.start,
                    part.stop,
                    [
                        (key, h.get_numpy_copy(array))
                        for key, array in part.state.items()
                    ],
                )
                for part in parts
            ]
        return state

    def __setstate__(self, state: dict) -> None:
        """Bind the copied parts to the copied network (see __getstate__)."""
        state = dict(state)
        copied = state.pop('_copied_parts', None)
        self.__dict__.update(state)
        if copied is None:
            return
        net = self.net
        self._parts = []
        for start, stop, arrays in copied:
            part = _Part(net, start, stop)
            for key, array in arrays:
                part.state[key] = net.handler.create_from_numpy(array)
            self._parts.append(part)
        self._bound = memory_of(net)

    # ------------------------------------------------------- internals ----

    def _bind(self, net, ranges) -> None:
        self.net = net
        self._parts = [_Part(net, start, stop) for start, stop in ranges]
        for part in self._parts:
            self._allocate_state(net.handler, part)
        self._reset_scalar_state()
        self._bound = memory_of(net)

    def _require_started(self, method: str = 'run') -> None:
        if self._parts is None:
            raise TrainingValidationError(
                f'{type(self).__name__}: call start(net) before {method}().'
            )
        self._follow_network()

    def _follow_network(self) -> None:
        """Bind the parts anew if the network's memory moved since.

        ``net.set_handler`` (to a GPU, another dtype) moves the parameters
        and gradients into new memory; the parts would go on updating the
        old. They are made again over the new memory, and the state (the
        velocities, the moment estimates) is carried over, so training goes
        on where it was; a state the new dtype cannot hold is refused
        before anything moves (see :meth:`_check_move`).
        """
        if self._memory_moved():
            self._move(self._check_move())

    def _memory_moved(self) -> bool:
        """Whether the network's memory moved since the parts were bound."""
        if getattr(self, '_bound', None) is None:  # pickled before this record
            self._bound = memory_of(self.net)
        return not same_memory(memory_of(self.net), self._bound)

    def _check_move(self, prefix: str = '') -> list | None:
        """Refuse moving a state entry the network's new dtype overflows.

        Only a move to a narrower dtype (float64 to float16) can overflow:
        then every entry is copied to the host and checked before anything
        moves, and the copies are returned for :meth:`_move`. Otherwise
        nothing is copied here (None), and :meth:`_move` copies one array
        at a time.

        Args:
            prefix: put before the entries' names in the message (a
                :class:`MultiStepper`'s ``'steppers.<pattern>.'``).

        Raises:
            TrainingValidationError: see :meth:`_check_representable`.
        """
        old_handler, dtype = self._bound[0], self.net.handler.dtype
        if not narrows(old_handler.dtype, dtype):
            return None
        copies = [
            [
                (key, old_handler.get_numpy_copy(array))
                for key, array in old.state.items()
            ]
            for old in self._parts
        ]
        for i, arrays in enumerate(copies):
            for key, array in arrays:
                self._check_representable(
                    f'{prefix}part{i}.{key}', array, dtype, 'move'
                )
        return copies

    def _move(self, copies: list | None = None) -> None:
        """Bind the parts to the network's new memory, carrying the state.

        Args:
            copies: :meth:`_check_move`'s host copies of the state, or None
                to copy each array as it moves.
        """
        net, old_handler = self.net, self._bound[0]
        parts = []
        for i, old in enumerate(self._parts):
            part = _Part(net, old.start, old.stop)
            arrays = (
                copies[i]
                if copies is not None
                else (
                    (key, old_handler.get_numpy_copy(array))
                    for key, array in old.state.items()
                )
            )
            for key, array in arrays:
                part.state[key] = net.handler.create_from_numpy(array)
            parts.append(part)
        self._parts = parts
        self._bound = memory_of(net)

    def _check_state(self, state: dict, own: dict, prefix: str = '') -> None:
        """Refuse a state :meth:`_restore_state` cannot restore whole.

        Args:
            state: entry names (as :meth:`get_state` names them) to values;
                the same names as ``own``.
            own: :meth:`get_state`'s result.
            prefix: put before the entries' names in the messages (a
                :class:`MultiStepper`'s ``'steppers.<pattern>.'``).

        Raises:
            TrainingValidationError: for an entry of another shape, or with
                a finite value beyond the range of the handler's dtype.
        """
        for key, value in state.items():
            value = np.asarray(value)
            if value.shape != own[key].shape:
                raise TrainingValidationError(
                    f'{type(self).__name__}: state entry {prefix + key!r} has '
                    f'shape {value.shape}, expected {own[key].shape}.'
                )
        dtype = self.net.handler.dtype
        for i, part in enumerate(self._parts):
            for key in part.state:
                value = np.asarray(state[f'part{i}.{key}'])
                if narrows(value.dtype, dtype):
                    self._check_representable(
                        f'{prefix}part{i}.{key}', value, dtype, 'restore'
                    )

    def _restore_state(self, state: dict) -> None:
        """Restore a state :meth:`_check_state` accepted."""
        h = self.net.handler
        for i, part in enumerate(self._parts):
            for key, array in part.state.items():
                h.set_from_numpy(array, np.asarray(state[f'part{i}.{key}']))
        scalars = self._get_scalar_state()  # by name: 'part...' may be one
        self._set_scalar_state({k: np.asarray(state[k])[()] for k in scalars})

    def _check_representable(self, key: str, array, dtype, action: str) -> None:
        """Refuse state entry ``key`` if a finite value overflows ``dtype``.

        Args:
            key: the entry's name in :meth:`get_state`.
            array: its values, a NumPy array.
            dtype: the dtype it is to be stored in.
            action: ``'move'`` (the network moved to a handler of
                ``dtype``) or ``'restore'`` (:meth:`set_state`).

        Raises:
            TrainingValidationError: naming the stepper, the entry, the
                index and value and the dtype.
        """
        found = find_overflow(array, dtype)
        if found is None:
            return
        index, value, what = found
        name = np.dtype(dtype).name
        if action == 'move':
            advice = (
                'The stepper keeps its state on the old handler: move the '
                'network back to it, or call start(net) to train on from a '
                'zero state.'
            )
        else:
            advice = 'Nothing was restored.'
        raise TrainingValidationError(
            f'{type(self).__name__}: cannot {action} state entry {key!r} to '
            f'dtype {name}: it holds {what} at index {index} ({value!r}), '
            f'which would become inf in {name}. {advice}'
        )

    def _allocate_state(self, handler, part: _Part) -> None:
        """Add zero-initialised state arrays to ``part.state``."""

    def _reset_scalar_state(self) -> None:
        """Reset scalar state (e.g. step counts) at start."""

    def _get_scalar_state(self) -> dict:
        return {}

    def _set_scalar_state(self, state: dict) -> None:
        """Restore scalar state from :meth:`_get_scalar_state`'s keys."""

    def _check_hyperparameters(self) -> None:
        """Check the declared hyperparameters' current values (before a step).

        Raises:
            TrainingValidationError: naming the stepper and the
                hyperparameter, e.g. a ``learning_rate`` that a schedule
                made negative, or one the network's handler cannot use
                (see :meth:`_check_for_handler`).
        """
        check_attributes(self)
        if self.net is not None:
            self._check_for_handler(self.net.handler)

    def _check_for_handler(self, handler) -> None:
        """Refuse hyperparameters that ``handler`` cannot compute with.

        Called at :meth:`start` and before each step, before anything
        changes (a schedule or ``set_handler`` may have changed the
        hyperparameter or the dtype); a :class:`MultiStepper` calls it for
        all its steppers before any of them updates. Nothing to check here;
        e.g. Adam refuses an ``epsilon`` that is 0 in float16. It must not
        allocate (it runs at each step).

        Raises:
            TrainingValidationError: naming the stepper, the hyperparameter,
                its value and what the dtype needs.
        """

    def _before_passes(self) -> None:
        """Work done before the forward pass (Nesterov's look-ahead)."""

    def _mask_gradients(self) -> None:
        h = self.net.handler
        for part in self._parts:
            if part.mask is not None:
                h.mult_tt(part.gradients, part.mask, part.gradients)

    def _squared_gradient_norm(self, *scales: float) -> float:
        """The sum of the squares of the gradients times ``scales``.

        The factors are applied in turn (a power of two the dtype cannot
        hold as one number comes as several, see :func:`_powers_of_two`).
        """
        h = self.net.handler
        total = 0.0
        for part in self._parts:
            if not scales:
                h.mult_tt(part.gradients, part.gradients, part.tmp)
            else:
                h.mult_st(scales[0], part.gradients, part.tmp)
                for factor in scales[1:]:
                    h.mult_st(factor, part.tmp, part.tmp)
                h.mult_tt(part.tmp, part.tmp, part.tmp)
            h.sum_t(part.tmp, None, part.norm)
            total += float(h.get_numpy_copy(part.norm)[0])
        return total

    def _gradient_norm(self) -> float:
        """The global L2 norm of the gradients.

        The squares are summed in the handler's dtype, where they overflow
        long before the gradients do (float16: from |g| near 256, float32:
        near 1.8e19); then the norm is computed again from the gradients
        scaled by a power of two (exact) found by :meth:`_scaled_norm`, so
        a large but finite gradient gets a finite norm, and is clipped
        rather than zeroed or left as it is. The squares of small gradients
        underflow (float16: 0 below |g| near 2.4e-4, subnormal below 7.8e-3);
        a sum below ``size`` times the dtype's smallest normal number may have
        lost a good part of itself there, and is taken again from gradients
        scaled up by :meth:`_scaled_up_norm`.
        """
        with np.errstate(over='ignore'):  # an overflow is handled below
            squared = self._squared_gradient_norm()
        size = sum(part.gradients.size for part in self._parts)
        if squared < size * float(np.finfo(self.net.handler.dtype).tiny):
            return self._scaled_up_norm(squared, size)
        if math.isfinite(squared) or not all(
            self.net.handler.is_fully_finite(part.gradients) for part in self._parts
        ):
            return math.sqrt(squared)
        return self._scaled_norm()

    def _scaled_norm(self) -> float:
        """The norm of finite gradients whose squares overflow the dtype.

        No fixed factor does for every dtype and gradient: one small enough
        for the largest float32 gradients (2**-80) makes float16 gradients
        0, and their norm 0. So the factor is found from the gradients: the
        largest power of two ``2**-e`` (exact) whose scaled squares sum to a
        finite number. The search starts from an ``e`` at which no finite
        gradients overflow (each scaled square is below ``2**(2 * (maxexp -
        e))``, so the sum of a part's ``size`` or fewer is below
        ``2**(maxexp - 1)``) and takes off the powers of two of ``e``, largest first,
        where the sum stays finite (``e = 0``, the first sum, overflowed).
        As ``2**(1 - e)`` overflows, the sum is above about a quarter of the
        dtype's largest number: the squares that count are far above the
        underflow. At most eleven passes (float64), in ``part.tmp``:
        nothing is allocated.
        """
        maxexp = int(np.finfo(self.net.handler.dtype).maxexp)
        size = max(part.gradients.size for part in self._parts)
        exponent = (maxexp + size.bit_length()) // 2 + 1
        squared = self._squared_gradient_norm(2.0**-exponent)
        for bit in reversed(range(exponent.bit_length())):
            smaller = exponent - (1 << bit)
            if smaller < 1:
                continue
            with np.errstate(over='ignore'):  # an overflow: keep the exponent
                candidate = self._squared_gradient_norm(2.0**-smaller)
            if math.isfinite(candidate):
                exponent, squared = smaller, candidate
        return math.sqrt(squared) * 2.0**exponent

    def _scaled_up_norm(self, squared: float, size: int) -> float:
        """The norm of ``size`` gradients whose squares may underflow the dtype.

        ``squared`` is their sum of squares as the dtype computed it. Each
        square lost at most half the dtype's smallest subnormal number to
        the rounding, so the exact sum is below ``bound = 2 * squared +
        size * 2**(lowest - 1)``; the gradients are scaled by the power of
        two (exact) that brings ``bound`` to about a quarter of the dtype's
        largest number (its sum surely finite), and the sum taken again,
        until it is at least ``size`` times the dtype's smallest normal
        number (what the squares can have lost is then within the dtype's
        precision of it). float32 and float64 take one pass (two for
        all-zero gradients); float16 one or two, more where the gradients
        are all zero: the scale stops where the square of the smallest
        subnormal would overflow, after ceil(32 / gain) passes (2 to 4 up
        to a million gradients). Nothing is allocated.
        """
        info = np.finfo(self.net.handler.dtype)
        maxexp, lowest = int(info.maxexp), int(info.minexp) - int(info.nmant)
        lost = math.ldexp(size, lowest - 1)
        enough = size * float(info.tiny)
        highest = (maxexp + 1) // 2 - lowest
        exponent = 0
        while squared < enough and exponent < highest:
            gain = (maxexp - 2 - math.frexp(2 * squared + lost)[1]) // 2
            if gain < 1:
                break  # float16, 3e7 gradients or more: the sum is near its top
            exponent += gain
            squared = self._squared_gradient_norm(*_powers_of_two(exponent, info.dtype))
        return math.ldexp(math.sqrt(squared), -exponent)

    def _scale_gradients(self, factor: float) -> None:
        """Multiply the gradients by ``factor`` (in [0, 1)).

        A factor below the dtype's smallest normal number (float16: 6.1e-5,
        where ``clip_norm / norm`` easily is) would lose its bits, or all
        of them, as one number of the dtype; it is applied as its fraction
        in [0.5, 1) and then powers of two the dtype holds exactly.
        """
        h = self.net.handler
        info = np.finfo(h.dtype)
        if factor >= float(info.tiny):
            steps: tuple[float, ...] = (factor,)
        else:
            fraction, exponent = math.frexp(factor)
            # below this every finite gradient becomes 0 anyway
            floor = int(info.minexp) - int(info.nmant) - int(info.maxexp) - 2
            steps = (fraction, *_powers_of_two(max(exponent, floor), h.dtype))
        for part in self._parts:
            for step in steps:
                h.mult_st(step, part.gradients, part.gradients)

    def _clip_gradients(self) -> None:
        if self.clip_norm is None:
            self.last_gradient_norm = None
            return
        norm = self._gradient_norm()
        self.last_gradient_norm = norm
        if norm > self.clip_norm:
            self._scale_gradients(float(self.clip_norm) / norm)

    def _update(self) -> None:
        raise NotImplementedError

    def __repr__(self):
        args = ', '.join(
            f'{k}={v!r}'
            for k, v in self.__dict__.items()
            if not k.startswith('_') and k not in ('net', 'last_gradient_norm')
        )
        return f'{type(self).__name__}({args})'
