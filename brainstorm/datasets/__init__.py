"""The data sets of the examples, read from the data scripts' files or offline.

``data/create_mnist.py``, ``data/create_cifar10.py`` and
``data/create_hutter.py`` write ``MNIST.hdf5``, ``CIFAR-10.hdf5`` and
``HutterPrize.hdf5`` into ``$BRAINSTORM_DATA_DIR`` (layout:
:doc:`data_format`). :func:`load_mnist`, :func:`load_cifar10` and
:func:`load_hutter` read the training and validation parts of these files.
Where a file is missing they fall back to data that needs no download, so
that every example runs anywhere: the 1797 handwritten digits of 8x8 pixels
that come with scikit-learn (:func:`load_digits`, install it with
``pip install -e ".[examples]"``) or the English text of CPython's own help
topics (:func:`load_python_text`).

Every loader returns a :class:`Dataset`, whose arrays have the layout
brainstorm uses everywhere, time-major ``(T, B, ...)``: images
``(1, N, height, width, channels)``, text ``(sequence length, N, 1)`` and
targets ``(T, N, 1)`` class ids. The data is the same whether it comes from
a file or a fallback, only smaller in the latter case.

The examples share their command-line options through this package too:
:func:`add_data_arguments` (``--data-dir``, ``--limit``) and, for settings
whose defaults depend on the data set loaded, :func:`add_settings_arguments`
and :func:`choose_settings`.

The modules: :mod:`~brainstorm.datasets.base` (:class:`Dataset`),
:mod:`~brainstorm.datasets.files` (the data scripts' files),
:mod:`~brainstorm.datasets.fallbacks` (the offline data) and
:mod:`~brainstorm.datasets.command_line`; every public name is importable
from ``brainstorm.datasets``.

Example:
    >>> import brainstorm as bs
    >>> data = bs.datasets.load_digits()
    >>> inputs, targets = data.training
    >>> inputs.shape, targets.shape, data.nr_classes
    ((1, 1437, 8, 8, 1), (1, 1437, 1), 10)
"""

from brainstorm.datasets.base import DATA_DIR_VARIABLE, INSTALL_HINT, Dataset
from brainstorm.datasets.command_line import (
    add_data_arguments,
    add_settings_arguments,
    choose_settings,
)
from brainstorm.datasets.fallbacks import load_digits, load_python_text, to_streams
from brainstorm.datasets.files import (
    get_data_dir,
    load_cifar10,
    load_hutter,
    load_mnist,
    read_split,
)

__all__ = [
    'DATA_DIR_VARIABLE',
    'INSTALL_HINT',
    'Dataset',
    'get_data_dir',
    'read_split',
    'load_mnist',
    'load_cifar10',
    'load_hutter',
    'load_digits',
    'load_python_text',
    'to_streams',
    'add_data_arguments',
    'add_settings_arguments',
    'choose_settings',
]
