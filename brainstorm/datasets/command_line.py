"""The command-line options the examples share.

An example has settings whose defaults depend on the data it loaded (the
full data set or its offline fallback). It lists them per data set name,
adds one option per setting with :func:`add_settings_arguments` and, once
the data is loaded, takes the settings of that data set with the options
given on the command line in their place by :func:`choose_settings`::

    DEFAULTS = {'mnist': {'epochs': 500, 'batch_size': 100},
                'digits': {'epochs': 60, 'batch_size': 20}}
    parser = argparse.ArgumentParser()
    add_settings_arguments(parser, DEFAULTS, {'epochs': 'epochs',
                                              'batch_size': 'samples per update'})
    add_data_arguments(parser, 'MNIST.hdf5')
    args = parser.parse_args()
    data = load_mnist(args.data_dir).limit(args.limit)
    settings = choose_settings(args, DEFAULTS, data.name)
"""

import argparse
from collections.abc import Iterable

from brainstorm.datasets.base import DATA_DIR_VARIABLE
from brainstorm.errors import DatasetValidationError

__all__ = ['add_data_arguments', 'add_settings_arguments', 'choose_settings']


def add_data_arguments(
    parser: argparse.ArgumentParser, file_name: str
) -> argparse.ArgumentParser:
    """Add the options ``--data-dir`` and ``--limit`` the examples share.

    ``--data-dir`` defaults to None, which the loaders read as
    ``$BRAINSTORM_DATA_DIR``; pass ``args.data_dir`` to a loader and
    ``args.limit`` to :meth:`Dataset.limit`.

    Args:
        parser: the script's parser.
        file_name: the data file the script looks for, for the help text.

    Returns:
        ``parser``.
    """
    parser.add_argument(
        '--data-dir', help=f'folder holding {file_name} (default: ${DATA_DIR_VARIABLE})'
    )
    parser.add_argument(
        '--limit',
        type=_positive_int_argument,
        help='use at most this many training and validation samples (for quick runs)',
    )
    return parser


def _positive_int_argument(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f'expected a positive int. Received: {text!r}')
    return value


def add_settings_arguments(
    parser: argparse.ArgumentParser,
    defaults: dict[str, dict],
    descriptions: dict[str, str],
    positive: Iterable[str] = (),
) -> argparse.ArgumentParser:
    """Add an option per setting whose default depends on the data set.

    Setting ``batch_size`` becomes the option ``--batch-size``, of default
    None (so :func:`choose_settings` can tell that it was not given), of
    type int if all its defaults are ints (or None) and float otherwise, and
    with its description followed by the defaults, e.g.
    ``samples per update (mnist: 100, digits: 20)``. Where a default is
    None, ``--clip-norm none`` gives None (``args.clip_norm`` is None then,
    and :func:`choose_settings` takes it as given).

    Args:
        parser: the script's parser.
        defaults: data set name (:attr:`Dataset.name`) -> setting -> default
            (an int, a float or None). Every data set has the same settings.
        descriptions: setting -> its help text; every setting needs one.
        positive: the settings whose value must be positive (argparse
            refuses ``--batch-size 0`` as it refuses ``--limit 0``).

    Returns:
        ``parser``.

    Raises:
        DatasetValidationError: ``defaults`` is empty, the data sets differ
            in their settings, a setting has no description, or
            ``positive`` names no setting.
    """
    names = [tuple(settings) for settings in defaults.values()]
    if not names or any(set(n) != set(names[0]) for n in names):
        raise DatasetValidationError(
            f'add_settings_arguments: expected the same settings for every data '
            f'set. Received: {dict(zip(defaults, names))}'
        )
    positive = set(positive)
    if not positive <= set(names[0]):
        raise DatasetValidationError(
            f'add_settings_arguments: positive must name settings of '
            f'{sorted(names[0])}. Received: {sorted(positive - set(names[0]))}'
        )
    for setting in names[0]:
        if setting not in descriptions:
            raise DatasetValidationError(
                f'add_settings_arguments: expected a description of every '
                f'setting. Received none for {setting!r}'
            )
        values = [settings[setting] for settings in defaults.values()]
        given = [v for v in values if v is not None]
        kind = int if all(isinstance(v, int) for v in given) else float
        optional = len(given) < len(values)
        listed = ', '.join(f'{name}: {s[setting]}' for name, s in defaults.items())
        none = "; 'none' for None" if optional else ''
        parser.add_argument(
            '--' + setting.replace('_', '-'),
            type=_SettingType(kind, setting in positive, optional),
            action=_SettingAction,
            help=f'{descriptions[setting]} ({listed}{none})',
        )
    return parser


class _GivenNone:
    """What ``_SettingType`` makes of ``none`` for ``_SettingAction``."""

    def __repr__(self) -> str:
        return 'none'


_GIVEN_NONE = _GivenNone()

#: the attribute of the parsed options naming the settings given as none
_NONE_GIVEN = '_settings_given_as_none'


class _SettingAction(argparse.Action):
    """Store a setting; one given as ``none`` as None, noted as given."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = set(getattr(namespace, _NONE_GIVEN, ()))
        given.discard(self.dest)
        if values is _GIVEN_NONE:
            values = None
            given.add(self.dest)
        setattr(namespace, _NONE_GIVEN, given)
        setattr(namespace, self.dest, values)


class _SettingType:
    """The argparse type of a setting.

    Its kind (int or float), positive where the script asks, and ``none``
    (None) where a default is None.
    """

    def __init__(self, kind: type, positive: bool, optional: bool):
        self.kind, self.positive, self.optional = kind, positive, optional
        self.__name__ = kind.__name__  # argparse names the type in errors

    def __call__(self, text: str):
        if self.optional and text.lower() == 'none':
            return _GIVEN_NONE
        value = self.kind(text)  # a ValueError: argparse's 'invalid int value'
        if self.positive and not value > 0:
            raise argparse.ArgumentTypeError(
                f'expected a positive {self.kind.__name__}. Received: {text!r}'
            )
        return value


def choose_settings(args, defaults: dict[str, dict], name: str) -> dict:
    """The settings of data set ``name``, each replaced by its option if given.

    Args:
        args: the parsed options of :func:`add_settings_arguments`; an
            option that is None (not given) keeps the default, one given
            as ``none`` is None.
        defaults: as for :func:`add_settings_arguments`.
        name: the data set loaded (:attr:`Dataset.name`).

    Returns:
        a new dict: setting -> value.

    Raises:
        DatasetValidationError: ``defaults`` has no settings for ``name``.
    """
    if name not in defaults:
        raise DatasetValidationError(
            f'choose_settings: expected a data set of {sorted(defaults)}. '
            f'Received: {name!r}'
        )
    chosen = {}
    for setting, default in defaults[name].items():
        value = getattr(args, setting, None)
        if setting in getattr(args, _NONE_GIVEN, ()):
            default = None  # given as none
        chosen[setting] = default if value is None else value
    return chosen
