"""Declared arguments: one place per class for what its arguments may be.

A class lists its arguments once, in ``__arguments__`` (merged along the
MRO)::

    class Hook(Describable):
        __arguments__ = {
            'name': Arg(Optional(Str()), attr='__name__'),
            'timescale': Arg(Choice('epoch', 'update')),
            'interval': Arg(Int(1)),
        }

        def __init__(self, name=None, timescale='epoch', interval=1): ...

Each bound is written once, in the check, and each default once: a
constructor argument's default is the signature's (``default=`` is only
for what the signature does not hold). Nothing else re-checks what the
declaration checks; :func:`check_attributes` checks the declared
attributes again where they may change later (a stepper's
``learning_rate`` set by a schedule).

The declarations are used

* by ``__init__``: :class:`~brainstorm.describable.Describable` wraps the
  ``__init__`` of every class that declares arguments, so each declared
  argument is checked (and normalised, e.g. ``np.int64(3)`` -> ``3``) when
  the constructor is called, before its body runs;
* by restoring from a description
  (:func:`~brainstorm.describable.create_from_description`): only declared
  attributes are taken, each goes through the same check, and a nested
  ``@type`` must be of the kind the check expects where it stands
  (:class:`Instance` gives the kind);
* by the tests: every check lists ``invalid_examples`` (values it must
  refuse) and an ``example`` (a value it accepts), from which the bad-input
  suite is generated.

A check is any object with ``expected`` (a phrase completing "must be
..."), ``example``, ``invalid_examples``, ``normalize(value)`` (return the
normalised value or raise ``ValueError``/``TypeError``) and
``restore(described)`` (turn a described value back into an object, refusing
descriptions of the wrong kind). The layer arguments of
:mod:`brainstorm.layers.attributes` are declarations of this package too
(``Kwarg`` is an :class:`Arg`, its constraints are checks).
"""

from brainstorm.arguments.checks import (
    MAX_INT,
    SEED,
    Bool,
    Callable,
    Check,
    Choice,
    FileName,
    FloatDtype,
    Instance,
    Int,
    Optional,
    Real,
    Str,
    Writable,
    register_restorer,
)
from brainstorm.arguments.containers import AnyOf, DictOf, ListOf, NumericArray
from brainstorm.arguments.declaring import (
    REQUIRED,
    Arg,
    check_arguments,
    check_attributes,
    check_value,
    checked_init,
    declare,
    declared_arguments,
    resolve_defaults,
)

__all__ = [
    'REQUIRED',
    'Arg',
    'Check',
    'Int',
    'Real',
    'Bool',
    'Str',
    'FileName',
    'Choice',
    'Optional',
    'Instance',
    'Callable',
    'Writable',
    'FloatDtype',
    'SEED',
    'ListOf',
    'DictOf',
    'AnyOf',
    'NumericArray',
    'check_arguments',
    'check_attributes',
    'declared_arguments',
    'resolve_defaults',
    'declare',
]
