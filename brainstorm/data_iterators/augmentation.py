"""Wrappers that change another iterator's data: noise, flips, padding, crops."""

from __future__ import annotations

import numpy as np

from brainstorm.arguments import (
    Arg,
    DictOf,
    Instance,
    Int,
    ListOf,
    Optional,
    Real,
)
from brainstorm.data_iterators.base import (
    DataIterator,
    _check_5d,
    _check_names,
)
from brainstorm.data_iterators.sources import _example_iterator
from brainstorm.errors import IteratorValidationError


def _with_defaults(values: dict | None, names: dict, default: float) -> dict:
    """``values`` with ``default`` for each of ``names`` it lacks.

    The constructors fill their optional dicts for every name. Restoring a
    description fills them too: Brainstorm 0.5 kept ``{}`` for None (and
    used the default for each name missing), so its descriptions hold
    ``{}``. Names of ``values`` beyond ``names`` are kept, for
    ``__validate__`` to refuse.
    """
    return {**dict.fromkeys(names, default), **(values or {})}


def _check_subset(owner: str, argument: str, names, within: str, known) -> None:
    """Refuse a name of ``argument`` that the dict ``within`` lacks."""
    for name in names:
        if name not in known:
            raise IteratorValidationError(
                f"{owner}: {argument} names '{name}' which is not in "
                f'{within} {sorted(known)}'
            )


def _padded_shapes(data_shapes: dict, size_dict: dict) -> dict:
    """``data_shapes`` with the images of ``size_dict`` padded (see :class:`Pad`).

    A name the data lacks, or whose data is not 5-D, is skipped:
    ``__validate__`` refuses it.
    """
    shapes = {name: tuple(shape) for name, shape in data_shapes.items()}
    for name, size in size_dict.items():
        if len(shapes.get(name, ())) == 5:
            t, b, h, w, c = shapes[name]
            shapes[name] = (t, b, h + 2 * int(size), w + 2 * int(size), c)
    return shapes


def _cropped_shapes(data_shapes: dict, shape_dict: dict) -> dict:
    """``data_shapes`` with the images of ``shape_dict`` cropped (:class:`RandomCrop`).

    A name the data lacks, or whose data is not 5-D, is skipped:
    ``__validate__`` refuses it.
    """
    shapes = {name: tuple(shape) for name, shape in data_shapes.items()}
    for name, (crop_h, crop_w) in shape_dict.items():
        if len(shapes.get(name, ())) == 5:
            t, b, _, _, c = shapes[name]
            shapes[name] = (t, b, int(crop_h), int(crop_w), c)
    return shapes


class AddGaussianNoise(DataIterator):
    """Add Gaussian noise to some of the data (into new arrays).

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        std_dict: data name -> standard deviation of the noise.
        mean_dict: data name -> mean of the noise (default 0); must have the
            same names as ``std_dict`` if given.
    """

    _wraps = 'same shapes'

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'std_dict': Arg(DictOf(Real(0))),
        'mean_dict': Arg(Optional(DictOf(Real()))),
    }

    def __init__(
        self,
        iter: DataIterator,
        std_dict: dict[str, float],
        mean_dict: dict[str, float] | None = None,
    ):
        if mean_dict is None:
            mean_dict = {name: 0.0 for name in std_dict}
        # the names are checked by __validate__
        super().__init__(dict(iter.data_shapes), iter.length)
        self.iter = iter
        self.std_dict = dict(std_dict)
        self.mean_dict = dict(mean_dict)

    def __init_from_description__(self, description: dict) -> None:
        # Brainstorm 0.5 described mean_dict=None as {}: mean 0 for all
        super().__init_from_description__(description)
        self.mean_dict = _with_defaults(self.mean_dict, self.std_dict, 0.0)

    def __validate__(self) -> None:
        """Check the names of ``std_dict`` and ``mean_dict`` against ``iter``.

        Run after the constructor and after restoring from a description.
        """
        owner = type(self).__name__
        _check_names(owner, 'std_dict', self.std_dict, self.iter)
        _check_names(owner, 'mean_dict', self.mean_dict, self.iter)
        if set(self.mean_dict) != set(self.std_dict):
            raise IteratorValidationError(
                f'{owner}: mean_dict and std_dict must name the same '
                f'data. Received: std_dict keys {sorted(self.std_dict)}, '
                f'mean_dict keys {sorted(self.mean_dict)}'
            )

    def __call__(self, handler=None):
        """Return a generator over the noisy batches of one pass."""
        for data in self.iter(handler):
            data = dict(data)
            for name, std in self.std_dict.items():
                values = data[name]
                noise = self.rnd.normal(self.mean_dict[name], std, size=values.shape)
                if np.issubdtype(values.dtype, np.floating):
                    noise = noise.astype(values.dtype)
                data[name] = values + noise
            yield data


class AddSaltNPepper(DataIterator):
    """Set random entries to 1 (salt) or 0 (pepper), in a copy of the data.

    For each entry ``u ~ U[0, 1)`` is drawn: ``u >= 1 - p * r`` sets it to 1
    and ``u < p * (1 - r)`` sets it to 0, so a fraction ``p`` of the entries
    is changed and ``r`` of those become 1.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        prob_dict: data name -> probability ``p`` in [0, 1].
        ratio_dict: data name -> salt ratio ``r`` in [0, 1] (default 0.5).
    """

    _wraps = 'same shapes'

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'prob_dict': Arg(DictOf(Real(0, 1))),
        'ratio_dict': Arg(Optional(DictOf(Real(0, 1)))),
    }

    def __init__(
        self,
        iter: DataIterator,
        prob_dict: dict[str, float],
        ratio_dict: dict[str, float] | None = None,
    ):
        # the names are checked by __validate__
        super().__init__(dict(iter.data_shapes), iter.length)
        self.iter = iter
        self.prob_dict = dict(prob_dict)
        self.ratio_dict = _with_defaults(ratio_dict, prob_dict, 0.5)

    def __init_from_description__(self, description: dict) -> None:
        # Brainstorm 0.5 described ratio_dict=None as {}: ratio 0.5 for all
        super().__init_from_description__(description)
        self.ratio_dict = _with_defaults(self.ratio_dict, self.prob_dict, 0.5)

    def __validate__(self) -> None:
        """Check the names of ``prob_dict`` and ``ratio_dict`` against ``iter``.

        Run after the constructor and after restoring from a description.
        """
        owner = type(self).__name__
        _check_names(owner, 'prob_dict', self.prob_dict, self.iter)
        _check_names(owner, 'ratio_dict', self.ratio_dict, self.iter)
        _check_subset(owner, 'ratio_dict', self.ratio_dict, 'prob_dict', self.prob_dict)

    def __call__(self, handler=None):
        """Return a generator over the noisy batches of one pass."""
        for data in self.iter(handler):
            data = dict(data)
            for name, prob in self.prob_dict.items():
                ratio = self.ratio_dict[name]
                values = np.array(data[name])
                u = self.rnd.uniform(size=values.shape)
                values[u >= 1 - prob * ratio] = 1
                values[u < prob * (1 - ratio)] = 0
                data[name] = values
            yield data


class Flip(DataIterator):
    """Randomly mirror images along their width axis.

    Each sample of 5-D data ``(T, B, H, W, C)`` is flipped along W (axis 3)
    with the given probability, the same way at all time steps. Flipped
    batches are new arrays; the source data is never changed.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        prob_dict: data name -> flip probability in [0, 1]; default
            ``{'default': 0.5}``.
    """

    _wraps = 'same shapes'

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'prob_dict': Arg(Optional(DictOf(Real(0, 1)))),
    }

    def __init__(self, iter: DataIterator, prob_dict: dict[str, float] | None = None):
        prob_dict = {'default': 0.5} if prob_dict is None else prob_dict
        # the names and shapes of the data are checked by __validate__
        super().__init__(dict(iter.data_shapes), iter.length)
        self.iter = iter
        self.prob_dict = dict(prob_dict)

    def __init_from_description__(self, description: dict) -> None:
        # None means the constructor's default, as it does there
        super().__init_from_description__(description)
        if self.prob_dict is None:
            self.prob_dict = {'default': 0.5}

    def __validate__(self) -> None:
        """Check that ``prob_dict`` names 5-D data of ``iter``.

        Run after the constructor and after restoring from a description.
        """
        owner = type(self).__name__
        _check_names(owner, 'prob_dict', self.prob_dict, self.iter)
        _check_5d(owner, self.prob_dict, self.iter)

    def __call__(self, handler=None):
        """Return a generator over the randomly flipped batches."""
        for data in self.iter(handler):
            data = dict(data)
            for name, prob in self.prob_dict.items():
                values = data[name]
                flip = self.rnd.uniform(size=values.shape[1]) < prob
                if flip.any():
                    flipped = np.array(values)
                    flipped[:, flip] = values[:, flip, :, ::-1]
                    data[name] = flipped
            yield data


class Pad(DataIterator):
    """Pad images ``(T, B, H, W, C)`` by ``size`` on each side of H and W.

    The result is a new float64 array of shape
    ``(T, B, H + 2 size, W + 2 size, C)``.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        size_dict: data name -> padding size (int >= 0).
        value_dict: data name -> padding value (default 0).
    """

    _wraps = 'other shapes'

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'size_dict': Arg(DictOf(Int(0))),
        'value_dict': Arg(Optional(DictOf(Real()))),
    }

    def __init__(
        self,
        iter: DataIterator,
        size_dict: dict[str, int],
        value_dict: dict[str, float] | None = None,
    ):
        # the names and shapes of the data are checked by __validate__
        super().__init__(_padded_shapes(iter.data_shapes, size_dict), iter.length)
        self.iter = iter
        self.size_dict = {name: int(s) for name, s in size_dict.items()}
        self.value_dict = _with_defaults(value_dict, size_dict, 0.0)

    def __init_from_description__(self, description: dict) -> None:
        # Brainstorm 0.5 described value_dict=None as {}: padding with 0
        super().__init_from_description__(description)
        self.value_dict = _with_defaults(self.value_dict, self.size_dict, 0.0)

    def __validate__(self) -> None:
        """Check that ``size_dict`` names 5-D data of ``iter`` and ``value_dict`` some.

        Run after the constructor and after restoring from a description.
        """
        owner = type(self).__name__
        _check_names(owner, 'size_dict', self.size_dict, self.iter)
        _check_5d(owner, self.size_dict, self.iter)
        _check_names(owner, 'value_dict', self.value_dict, self.iter)
        _check_subset(owner, 'value_dict', self.value_dict, 'size_dict', self.size_dict)

    def _restored_data_shapes(self, wrapped: DataIterator) -> dict:
        """Those of ``wrapped``, with the padded images."""
        return _padded_shapes(wrapped.data_shapes, self.size_dict)

    def __call__(self, handler=None):
        """Return a generator over the padded batches."""
        for data in self.iter(handler):
            data = dict(data)
            for name, size in self.size_dict.items():
                values = data[name]
                t, b, h, w, c = values.shape
                padded = np.full(
                    (t, b, h + 2 * size, w + 2 * size, c),
                    self.value_dict[name],
                    dtype=np.float64,
                )
                padded[:, :, size : size + h, size : size + w] = values
                data[name] = padded
            yield data


class RandomCrop(DataIterator):
    """Crop a random ``(h, w)`` window out of images ``(T, B, H, W, C)``.

    Each sample gets its own corner, drawn uniformly from all valid corners
    (both ends inclusive), used at all time steps. The result is a new
    float64 array of shape ``(T, B, h, w, C)``.

    Args:
        iter: the wrapped iterator (kept as ``self.iter``).
        shape_dict: data name -> ``(h, w)`` with ``h <= H`` and ``w <= W``.
    """

    _wraps = 'other shapes'

    __arguments__ = {
        'iter': Arg(Instance(DataIterator, example=_example_iterator)),
        'shape_dict': Arg(DictOf(ListOf(Int(1), as_tuple=True, length=2))),
    }

    def __init__(self, iter: DataIterator, shape_dict: dict[str, tuple[int, int]]):
        # the names, shapes and sizes of the data are checked by __validate__
        super().__init__(_cropped_shapes(iter.data_shapes, shape_dict), iter.length)
        self.iter = iter
        self.shape_dict = {
            name: (int(c[0]), int(c[1])) for name, c in shape_dict.items()
        }

    def __validate__(self) -> None:
        """Check that ``shape_dict`` names 5-D data of ``iter`` and fits its images.

        Run after the constructor and after restoring from a description.
        """
        owner = type(self).__name__
        _check_names(owner, 'shape_dict', self.shape_dict, self.iter)
        _check_5d(owner, self.shape_dict, self.iter)
        for name, (crop_h, crop_w) in self.shape_dict.items():
            h, w = self.iter.data_shapes[name][2:4]
            if crop_h > h or crop_w > w:
                raise IteratorValidationError(
                    f"{owner}: crop {(crop_h, crop_w)} for data '{name}' is "
                    f'larger than its images ({h}, {w}): shape_dict must give '
                    f'(h, w) with h <= {h} and w <= {w}'
                )

    def _restored_data_shapes(self, wrapped: DataIterator) -> dict:
        """Those of ``wrapped``, with the cropped images."""
        return _cropped_shapes(wrapped.data_shapes, self.shape_dict)

    def __call__(self, handler=None):
        """Return a generator over the randomly cropped batches."""
        for data in self.iter(handler):
            data = dict(data)
            for name, (crop_h, crop_w) in self.shape_dict.items():
                values = data[name]
                t, b, h, w, c = values.shape
                tops = self.rnd.randint(0, h - crop_h + 1, size=b)
                lefts = self.rnd.randint(0, w - crop_w + 1, size=b)
                cropped = np.empty((t, b, crop_h, crop_w, c), dtype=np.float64)
                for i, (top, left) in enumerate(zip(tops, lefts)):
                    cropped[:, i] = values[
                        :, i, top : top + crop_h, left : left + crop_w
                    ]
                data[name] = cropped
            yield data
