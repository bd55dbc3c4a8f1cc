"""The error family of brainstorm: what it raises for bad input and failed writes.

Every error raised for bad user input is a :class:`ValidationError` (a
``ValueError``), subclassed by what was wrong: the network, a layer, a data
iterator, a shape template, the training set-up, a description or a data
set. Messages name the object and say what was expected and what was
received. A failed write raises :class:`FileWriteError` (an ``OSError``).

This module imports nothing from brainstorm, so every part of the package
can raise these errors.
"""

from __future__ import annotations

__all__ = [
    'ValidationError',
    'NetworkValidationError',
    'LayerValidationError',
    'IteratorValidationError',
    'StructureValidationError',
    'TrainingValidationError',
    'UnknownNameError',
    'NonFiniteError',
    'DescriptionError',
    'DatasetValidationError',
    'InitializationError',
    'FileWriteError',
    'FeatureJoinWarning',
]


class ValidationError(ValueError):
    """Base class of every error raised for bad user input.

    A ValueError, so code written for Brainstorm 0.5 (which raised plain
    ValueErrors for shape mismatches and bad arguments) still catches it
    with ``except ValueError``.
    """


class NetworkValidationError(ValidationError):
    """A network architecture, connection or data dict is malformed."""


class LayerValidationError(ValidationError):
    """A layer was given bad arguments, shapes or connections."""


class IteratorValidationError(ValidationError):
    """A data iterator was given inconsistent or malformed data."""


class StructureValidationError(ValidationError):
    """A shape template or buffer structure is malformed."""


class TrainingValidationError(ValidationError, ValueError):
    """A trainer, stepper, schedule, hook or checkpoint got bad input."""


class UnknownNameError(TrainingValidationError, KeyError):
    """A name (of a data iterator, log or layer) is not known."""

    def __str__(self):
        return str(self.args[0])


class NonFiniteError(ValidationError, FloatingPointError):
    """Training diverged: a NaN or infinite loss or parameter, or one too large.

    Too large means beyond the trainer's ``max_abs_parameter``. Raised by
    the :class:`~brainstorm.training.Trainer` (unless created with
    ``check_finite=False``); the message names the update, the first layer
    and buffer holding such a value and the last finite loss.
    """


class DescriptionError(ValidationError, TypeError):
    """A description (from a file or a dict) cannot be turned into an object.

    It is not a description, has an unknown or unexpected ``@type``, or a
    key the class does not declare.
    """


class DatasetValidationError(ValidationError):
    """A data set file is missing or not in the layout of the data scripts."""


class FileWriteError(OSError):
    """A file could not be written (full disk, file-size limit, no permission).

    Raised by every writer of brainstorm (network files, checkpoints, the
    files of hooks, :func:`~brainstorm.tools.extract_and_save`). Its
    message and ``filename`` name the file, ``errno`` is the operating
    system's error number where there is one, and the error it comes from
    is its ``__cause__``. The file keeps what it held before the write
    (nothing is written over it), and no temporary file is left behind.
    """

    def __str__(self) -> str:
        """The message (it names the file), without OSError's decorations."""
        return str(self.strerror) if self.strerror is not None else super().__str__()


class InitializationError(Exception):
    """An initializer cannot fill a parameter of the requested shape.

    Raising it makes :meth:`Network.initialize` use the fallback.
    """


class FeatureJoinWarning(UserWarning):
    """Several outputs with multi-dimensional features feed one input.

    The input sees their memory side by side: each source's features
    flattened, one source after the other, reshaped to the joined shape.
    That is their concatenation along the last axis only where every
    feature dimension but the last is 1. A layer that flattens its input
    (``FullyConnected``) learns from either order, so networks built so
    (and saved) keep working; a channel-wise join needs a ``Merge`` layer.
    """


def shown_number(value) -> str:
    """``value`` as an error message shows it.

    Short (``5``, ``1e+30``) where that is the value exactly, else with all
    its digits: a bad ``2.0000001`` must not read as the good ``2``.
    """
    value = float(value)
    short = f'{value:g}'
    return short if float(short) == value else repr(value)
