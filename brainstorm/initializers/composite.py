"""Initializers built from other initializers: sparse connections, LSTM gates.

A sub-initializer may be an :class:`~brainstorm.initializers.Initializer` or
a number (a constant).
"""

from __future__ import annotations

import copy

import numpy as np

from brainstorm.arguments import AnyOf, Arg, Instance, Int
from brainstorm.arguments import Real as RealArg
from brainstorm.errors import InitializationError, ValidationError
from brainstorm.initializers.base import Initializer, evaluate_initializer
from brainstorm.initializers.dense import Gaussian

__all__ = ['SparseInputs', 'SparseOutputs', 'LstmOptInit']

#: An initializer or a number, where a sub-initializer goes.
_SUB_INITIALIZER = AnyOf(Instance(Initializer, example=lambda: Gaussian()), RealArg())


def _select_sub_initializer(self, layer, parameter_name: str):
    """This initializer with its sub-initializer's choice for the parameter.

    A sub-initializer that chooses per parameter (an ``LstmOptInit``
    picking the gate of an Lstm parameter) chooses here too; otherwise the
    initializer itself is returned.
    """
    select = getattr(self.sub_initializer, 'select_for', None)
    if select is None:
        return self
    chosen = select(layer, parameter_name)
    if chosen is self.sub_initializer:
        return self
    selected = copy.copy(self)
    selected.sub_initializer = chosen
    return selected


class SparseInputs(Initializer):
    """Sub-initializer values where each column keeps ``connections`` entries.

    For a parameter of shape ``(n_out, ...)`` each column (one input unit,
    all trailing axes flattened) keeps ``connections`` randomly chosen of its
    ``n_out`` entries; the others are zero.

    Args:
        sub_initializer: an Initializer or number giving the values.
        connections: non-zero entries per column (needs
            ``shape[0] >= connections``).
    """

    __arguments__ = {
        'sub_initializer': Arg(_SUB_INITIALIZER),
        'connections': Arg(Int(1)),
    }

    def __init__(self, sub_initializer: Initializer | float, connections: int = 15):
        super().__init__()
        self.sub_initializer = sub_initializer
        self.connections = connections

    select_for = _select_sub_initializer

    def __call__(self, shape):
        """Values of ``shape`` with ``connections`` entries kept per column."""
        self._check_at_least_2d(shape)
        if shape[0] < self.connections:
            raise InitializationError(
                f'SparseInputs: shape[0] must be at least connections='
                f'{self.connections}. Received: shape={tuple(shape)}'
            )
        values = evaluate_initializer(
            self.sub_initializer, shape, seed=self.rnd.generate_seed()
        )
        matrix = values.reshape(shape[0], -1)
        keep = np.zeros(matrix.shape, dtype=bool)
        for column in range(matrix.shape[1]):
            rows = self.rnd.choice(shape[0], self.connections, replace=False)
            keep[rows, column] = True
        return np.where(keep, matrix, 0.0).reshape(shape)


class SparseOutputs(Initializer):
    """Sub-initializer values where each row keeps ``connections`` entries.

    For a parameter of shape ``(n_out, ...)`` each row (one output unit, all
    trailing axes flattened) keeps ``connections`` randomly chosen entries;
    the others are zero.

    Args:
        sub_initializer: an Initializer or number giving the values.
        connections: non-zero entries per row (needs
            ``prod(shape[1:]) >= connections``).
    """

    __arguments__ = {
        'sub_initializer': Arg(_SUB_INITIALIZER),
        'connections': Arg(Int(1)),
    }

    def __init__(self, sub_initializer: Initializer | float, connections: int = 15):
        super().__init__()
        self.sub_initializer = sub_initializer
        self.connections = connections

    select_for = _select_sub_initializer

    def __call__(self, shape):
        """Values of ``shape`` with ``connections`` entries kept per row."""
        self._check_at_least_2d(shape)
        row_size = int(np.prod(shape[1:]))
        if row_size < self.connections:
            raise InitializationError(
                'SparseOutputs: the entries per row, prod(shape[1:]) = '
                f'{row_size}, must be at least connections={self.connections}. '
                f'Received: shape={tuple(shape)}'
            )
        values = evaluate_initializer(
            self.sub_initializer, shape, seed=self.rnd.generate_seed()
        )
        matrix = values.reshape(shape[0], row_size)
        keep = np.zeros(matrix.shape, dtype=bool)
        for row in range(matrix.shape[0]):
            columns = self.rnd.choice(row_size, self.connections, replace=False)
            keep[row, columns] = True
        return np.where(keep, matrix, 0.0).reshape(shape)


class LstmOptInit(Initializer):
    """Separate initializers for the input block and the three gates of an LSTM.

    On an :func:`~brainstorm.layers.Lstm` layer (which keeps one parameter
    per gate: ``Wz Wi Wf Wo``, ``Rz ...``, ``bz ...`` and the peepholes
    ``pi pf po``) each parameter gets the initializer of its gate, e.g.
    ``net.initialize({'Lstm': LstmOptInit(Gaussian(0.1), 0, 1.0, 0)})``
    sets the forget-gate biases (and weights) to 1. A parameter of an Lstm
    that belongs to no gate is an error. On any other parameter (a layer
    that stacks the four gates) the first axis is split into four equal
    row blocks in the order input block (Z), input gate (I), forget gate
    (F), output gate (O).

    Args:
        input_block: Initializer or number for the input block rows.
        input_gate: Initializer or number for the input gate rows.
        forget_gate: Initializer or number for the forget gate rows.
        output_gate: Initializer or number for the output gate rows.

    Brainstorm 0.5 kept ``input_block`` as the attribute ``block_input``:
    that name still reads and sets it, and 0.5's descriptions (which hold
    ``block_input``) load.
    """

    __renamed_05__ = {'block_input': 'input_block'}

    __arguments__ = {
        'input_block': Arg(_SUB_INITIALIZER),
        'input_gate': Arg(_SUB_INITIALIZER),
        'forget_gate': Arg(_SUB_INITIALIZER),
        'output_gate': Arg(_SUB_INITIALIZER),
    }

    def __init__(
        self,
        input_block: Initializer | float = 0.0,
        input_gate: Initializer | float = 0.0,
        forget_gate: Initializer | float = 0.0,
        output_gate: Initializer | float = 0.0,
    ):
        super().__init__()
        self.input_block = input_block
        self.input_gate = input_gate
        self.forget_gate = forget_gate
        self.output_gate = output_gate

    @property
    def block_input(self) -> Initializer | float:
        """Brainstorm 0.5's name of ``input_block``."""
        return self.input_block

    @block_input.setter
    def block_input(self, value: Initializer | float) -> None:
        self.input_block = value

    def select_for(self, layer, parameter_name: str):
        """The initializer to use for ``parameter_name`` of ``layer``.

        Args:
            layer: the layer implementation whose parameter is initialized.
            parameter_name: the parameter's name.

        Returns:
            The gate's initializer on an Lstm (a layer with
            ``has_lstm_gates``), else this initializer.

        Raises:
            ValidationError: for an Lstm parameter that belongs to no gate.
        """
        if not getattr(layer, 'has_lstm_gates', False):
            return self
        gates = {
            'z': self.input_block,
            'i': self.input_gate,
            'f': self.forget_gate,
            'o': self.output_gate,
        }
        if len(parameter_name) == 2 and parameter_name[1] in gates:
            return gates[parameter_name[1]]
        raise ValidationError(
            f"LstmOptInit: parameter '{parameter_name}' of "
            f"{type(layer).__name__} '{layer.name}' belongs to no gate (gate "
            'parameters end in z, i, f or o). Use another initializer for '
            'it.'
        )

    def __call__(self, shape):
        """The four blocks of ``shape`` along axis 0, one per initializer."""
        if len(shape) < 1 or shape[0] % 4 != 0:
            raise InitializationError(
                f'LstmOptInit: shape[0] must be divisible by 4. '
                f'Received: shape={tuple(shape)}'
            )
        n = shape[0] // 4
        block_shape = (n,) + tuple(shape[1:])
        blocks = [
            evaluate_initializer(init, block_shape, seed=self.rnd.generate_seed())
            for init in (
                self.input_block,
                self.input_gate,
                self.forget_gate,
                self.output_gate,
            )
        ]
        return np.concatenate(blocks, axis=0)
