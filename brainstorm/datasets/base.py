"""The Dataset tuple and the names the loaders share."""

from typing import NamedTuple

import numpy as np

from brainstorm.errors import DatasetValidationError

__all__ = ['DATA_DIR_VARIABLE', 'INSTALL_HINT', 'Dataset']

DATA_DIR_VARIABLE = 'BRAINSTORM_DATA_DIR'
"""The environment variable naming the folder of the data files."""

INSTALL_HINT = 'pip install -e ".[examples]"'
"""How to install what the offline fallbacks need (scikit-learn)."""


class Dataset(NamedTuple):
    """Training and validation data of one data set (a named tuple)."""

    #: Which data it is (``'mnist'``, ``'cifar10'``, ``'hutter'``, or a
    #: fallback, ``'digits'`` or ``'python_text'``). Scripts choose their
    #: settings by it.
    name: str
    #: ``(inputs, targets)``: arrays of shape ``(T, N, ...)`` and
    #: ``(T, N, 1)``.
    training: tuple[np.ndarray, np.ndarray]
    #: ``(inputs, targets)``, as ``training``.
    validation: tuple[np.ndarray, np.ndarray]
    #: The number of classes (10 for images, the vocabulary size for text);
    #: targets lie in ``[0, nr_classes)``.
    nr_classes: int
    #: One sentence saying where the data came from, for printing.
    origin: str

    def limit(self, size: int | None) -> 'Dataset':
        """The first ``size`` samples of each part (for quick runs).

        Args:
            size: samples (axis 1) to keep of the training and of the
                validation data; None keeps everything.

        Returns:
            a Dataset of views into these arrays.

        Raises:
            DatasetValidationError: ``size`` is not a positive int.
        """
        if size is None:
            return self
        check_positive_int('Dataset.limit', 'size', size)
        (x, y), (vx, vy) = self.training, self.validation
        return self._replace(
            training=(x[:, :size], y[:, :size]), validation=(vx[:, :size], vy[:, :size])
        )


def check_positive_int(owner: str, name: str, value) -> None:
    """Raise DatasetValidationError naming ``owner`` unless ``value`` is an int > 0."""
    if (
        not isinstance(value, (int, np.integer))
        or isinstance(value, bool)
        or value <= 0
    ):
        raise DatasetValidationError(
            f'{owner}: {name} must be a positive int. Received: {name}={value!r}'
        )
