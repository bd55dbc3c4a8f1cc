"""One stepper per group of layers: :class:`MultiStepper`."""

from __future__ import annotations

from collections import OrderedDict

from brainstorm.arguments import Arg, DictOf, Instance, Optional, Str
from brainstorm.errors import TrainingValidationError
from brainstorm.structure.view_references import (
    pattern_matches as _pattern_matches,
)
from brainstorm.training.steppers.base import TrainingStepper, _Part
from brainstorm.training.steppers.sgd import SgdStepper
from brainstorm.training.utils import memory_of


class MultiStepper(TrainingStepper):
    """Different steppers for different layers (neon's multi-optimizer).

    Keys are layer-name patterns as in ``Network.initialize`` (``*``
    matches any run of identifier characters; ``'default'`` covers the
    layers no other pattern matches). Every layer with parameters must be
    covered by exactly one stepper (the same stepper object may appear
    under several patterns). The forward and backward passes run once per
    step; then each stepper updates its own part of the flat parameter
    array.

    Args:
        steppers: dict of layer-name pattern -> stepper.
        clip_norm: if set, the global gradient norm over the whole network
            is clipped before the steppers (which may also clip their own
            parts).

    Example:
        >>> from brainstorm.training.steppers import AdamStepper, MomentumStepper
        >>> stepper = MultiStepper({'Conv*': AdamStepper(0.001),
        ...                         'default': MomentumStepper(0.01, 0.9)})

    Attributes:
        assignment: after :meth:`start`, layer name -> pattern of its
            stepper.

    Example:
        >>> import numpy as np
        >>> import brainstorm as bs
        >>> bs.global_rnd.set_seed(1)
        >>> inp, out = bs.tools.get_in_out_layers('regression', 2, 1)
        >>> net = bs.Network.from_layer(inp >> out)
        >>> net.initialize(0.0)
        >>> data = bs.data_iterators.Minibatches(
        ...     4, default=np.ones((1, 8, 2)), targets=np.ones((1, 8, 1)))
        >>> trainer = bs.Trainer(bs.training.MultiStepper(
        ...     {'default': bs.training.SgdStepper(0.1)}), verbose=False)
        >>> trainer.add_hook(bs.hooks.StopAfterEpoch(2))
        >>> trainer.train(net, data)
        >>> bool(net.get('parameters').any())  # learned: no longer all 0
        True
    """

    __arguments__ = {
        'steppers': Arg(
            DictOf(
                Instance(TrainingStepper, example=lambda: SgdStepper()), nonempty=True
            )
        ),
        # only in descriptions: pattern -> the earlier pattern whose stepper
        # object it shares (a description writes each pattern's stepper out)
        'shared_steppers': Arg(
            Optional(DictOf(Str())),
            default=None,
            state=True,
            omit_default=True,
            doc='patterns sharing the stepper of an earlier pattern '
            '(descriptions only)',
        ),
    }

    __undescribed__ = {'assignment': None}

    def __init__(self, steppers: dict, clip_norm: float | None = None):
        # steppers is checked as declared (a non-empty dict of str patterns
        # to steppers); __validate__ refuses MultiSteppers among them
        self.steppers = OrderedDict(steppers)
        self.assignment: OrderedDict | None = None
        super().__init__(clip_norm)

    def __describe__(self) -> dict:
        """The description; patterns sharing a stepper say so.

        Each pattern's stepper is written out whole (as Brainstorm 0.5
        wrote it), and ``shared_steppers`` names, for each pattern whose
        stepper object an earlier pattern has, that pattern: the recreated
        MultiStepper shares it again (one state, one learning rate).
        """
        description = super().__describe__()
        first: dict = {}
        shared = OrderedDict()
        for pattern, stepper in self.steppers.items():
            if id(stepper) in first:
                shared[pattern] = first[id(stepper)]
            else:
                first[id(stepper)] = pattern
        if shared:
            description['shared_steppers'] = shared
        return description

    def __init_from_description__(self, description: dict) -> None:
        """Share the steppers ``shared_steppers`` names (not kept itself)."""
        super().__init_from_description__(description)
        shared = self.__dict__.pop('shared_steppers', None) or {}
        for pattern, first in shared.items():
            if (
                pattern not in self.steppers
                or first not in self.steppers
                or first == pattern
                or first in shared
            ):
                raise TrainingValidationError(
                    f'MultiStepper (from a description): shared_steppers maps '
                    f'{pattern!r} to {first!r}; each key must be a pattern of '
                    'steppers sharing the stepper of another pattern, which '
                    f'shares no other. Patterns: {list(self.steppers)}'
                )
            self.steppers[pattern] = self.steppers[first]

    def __validate__(self) -> None:
        for pattern, stepper in self.steppers.items():
            if isinstance(stepper, MultiStepper):
                raise TrainingValidationError(
                    f'MultiStepper: steppers[{pattern!r}] must be a stepper '
                    f'(not a MultiStepper). Received: {stepper!r}'
                )

    def _unique_steppers(self) -> OrderedDict:
        """Pattern -> stepper, each stepper object once (first pattern)."""
        result = OrderedDict()
        seen = set()
        for pattern, stepper in self.steppers.items():
            if id(stepper) not in seen:
                seen.add(id(stepper))
                result[pattern] = stepper
        return result

    def start(self, net) -> None:
        """Assign each layer with parameters to a stepper and start them.

        Raises:
            TrainingValidationError: for patterns matching no layer with
                parameters, layers matched by several steppers, and layers
                with no stepper.
        """
        with_params = [
            name for name, layer in net.layers.items() if layer.parameter_shapes
        ]
        patterns = [p for p in self.steppers if p != 'default']
        for pattern in patterns:
            if not any(_pattern_matches(pattern, n) for n in with_params):
                raise TrainingValidationError(
                    f"MultiStepper: pattern '{pattern}' matches no layer with "
                    f'parameters. Layers with parameters: {with_params}'
                )
        owner_pattern = {id(s): p for p, s in reversed(list(self.steppers.items()))}
        assignment = OrderedDict()
        for lname in with_params:
            matching = [p for p in patterns if _pattern_matches(p, lname)]
            chosen = {id(self.steppers[p]) for p in matching}
            if len(chosen) > 1:
                raise TrainingValidationError(
                    f"MultiStepper: layer '{lname}' is matched by patterns "
                    f'{matching} with different steppers; it needs exactly '
                    'one.'
                )
            if chosen:
                assignment[lname] = owner_pattern[chosen.pop()]
            elif 'default' in self.steppers:
                assignment[lname] = owner_pattern[id(self.steppers['default'])]
            else:
                raise TrainingValidationError(
                    f"MultiStepper: no stepper for layer '{lname}'. Add a "
                    "'default' or a pattern matching it."
                )
        for stepper in self._unique_steppers().values():
            stepper._check_for_handler(net.handler)  # before any is bound
        offset = net.layout['parameters']['@slice'][0]
        ranges: dict = {p: [] for p in self._unique_steppers()}
        for lname, pattern in assignment.items():
            node = net.layout[lname]['parameters']
            for key, child in node.items():
                if not key.startswith('@'):
                    start, stop = child['@slice']
                    ranges[pattern].append((start - offset, stop - offset))
        self.net = net
        self.assignment = assignment
        self._parts = [_Part(net, 0, int(net.buffer.parameters.shape[0]))]
        self._bound = memory_of(net)
        for pattern, stepper in self._unique_steppers().items():
            stepper._bind(net, _merge_ranges(ranges[pattern]))

    def run(self) -> None:
        """One step: all look-aheads, the passes once, then each update."""
        self._require_started()
        self._check_hyperparameters()
        steppers = list(self._unique_steppers().values())
        for stepper in steppers:
            stepper._check_hyperparameters()
        for stepper in steppers:
            stepper._before_passes()
        self.net.forward_pass(training_pass=True)
        self.net.backward_pass(input_deltas=False)
        for stepper in steppers:
            stepper._mask_gradients()
        self._clip_gradients()
        for stepper in steppers:
            stepper._clip_gradients()
            stepper._update()

    def _follow_network(self) -> None:
        """Its own part and each stepper's follow the network's memory.

        All or nothing: every stepper's state is checked against the new
        dtype (see :meth:`TrainingStepper._check_move`) before any moves.
        """
        moving = [
            (pattern, stepper)
            for pattern, stepper in self._unique_steppers().items()
            if stepper._memory_moved()
        ]
        copies = [
            stepper._check_move(f'steppers.{pattern}.') for pattern, stepper in moving
        ]
        super()._follow_network()
        for (_, stepper), copied in zip(moving, copies):
            stepper._move(copied)

    def get_state(self) -> OrderedDict:
        """The states of all steppers, prefixed ``'steppers.<pattern>.'``."""
        self._require_started('get_state')
        state = OrderedDict()
        for pattern, stepper in self._unique_steppers().items():
            for key, value in stepper.get_state().items():
                state[f'steppers.{pattern}.{key}'] = value
        return state

    def set_state(self, state: dict) -> None:
        """Restore a state made by :meth:`get_state`.

        All or nothing: every stepper's entries are checked (names,
        shapes, the range of the handler's dtype) before any is restored.

        Raises:
            TrainingValidationError: as :meth:`TrainingStepper.set_state`,
                naming entries as :meth:`get_state` does.
        """
        self._require_started('set_state')
        own = self.get_state()
        if set(state) != set(own):
            raise TrainingValidationError(
                f'MultiStepper: cannot restore a state with entries '
                f'{sorted(state)}; this stepper has {sorted(own)}.'
            )
        restores = []
        for pattern, stepper in self._unique_steppers().items():
            prefix = f'steppers.{pattern}.'
            sub_state, sub_own = (
                {
                    k[len(prefix) :]: v
                    for k, v in entries.items()
                    if k.startswith(prefix)
                }
                for entries in (state, own)
            )
            stepper._check_state(sub_state, sub_own, prefix)
            restores.append((stepper, sub_state))
        for stepper, sub_state in restores:
            stepper._restore_state(sub_state)

    def _update(self) -> None:
        raise AssertionError('MultiStepper updates through its steppers')


def _merge_ranges(ranges: list) -> list:
    merged: list = []
    for start, stop in sorted(ranges):
        if merged and merged[-1][1] == start:
            merged[-1] = (merged[-1][0], stop)
        else:
            merged.append((start, stop))
    return merged
