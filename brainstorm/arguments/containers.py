"""Checks of containers: lists, dicts, alternatives and numeric arrays.

Each checks its items with an inner check and reports where a bad item
sits (``[2]``, ``['a']``) in its error message.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Any

import numpy as np

from brainstorm.arguments.checks import (
    Check,
    Str,
    _inner,
    _is_description,
    _passes,
    _short,
)
from brainstorm.errors import DescriptionError


class ListOf(Check):
    """A list or tuple of values passing ``check``.

    Normalised to a list, or to a tuple with ``as_tuple``; optionally of a
    fixed ``length``.
    """

    def __init__(
        self,
        check: Check,
        nonempty: bool = False,
        as_tuple: bool = False,
        length: int | None = None,
    ) -> None:
        self.check, self.nonempty = check, nonempty
        self.as_tuple, self.length = as_tuple, length
        self.expected = (
            ('a non-empty ' if nonempty else 'a ')
            + (f'list of {length} ' if length else 'list of ')
            + f'({check.expected})'
        )

    @property
    def example(self) -> object:
        """A list of the inner example (``length`` items, or one)."""
        return [self.check.example] * (self.length or 1)

    @property
    def invalid_examples(self) -> tuple:
        """Non-lists, an invalid item among valid ones, and wrong lengths.

        With a fixed ``length`` n, lists of n - 1 and n + 1 valid items.
        """
        example = self.check.example
        good = [example] * ((self.length or 2) - 1)
        invalid = [5, 'x', {'a': example}]
        invalid += [good + [v] for v in self.check.invalid_examples[:2]]
        if self.nonempty:
            invalid.append([])
        if self.length:
            invalid.append(good)
            invalid.append([example] * (self.length + 1))
        return tuple(invalid)

    @property
    def kind(self) -> Any:
        """The inner check's kind."""
        return self.check.kind

    def normalize(self, value: Any) -> Any:
        """Return a list (or tuple) of the items normalised by the inner check."""
        if isinstance(value, np.ndarray) and value.ndim == 1:
            value = value.tolist()  # NumPy scalars become Python numbers
        if not isinstance(value, (list, tuple)):
            raise ValueError
        if (self.nonempty and not value) or (
            self.length is not None and len(value) != self.length
        ):
            raise ValueError
        result = [_inner(self.check, v, f'[{i}]') for i, v in enumerate(value)]
        return tuple(result) if self.as_tuple else result

    def restore(self, described: object) -> object:
        """Restore each item of a described list with the inner check."""
        if not isinstance(described, list):
            raise DescriptionError(f'expected a list. Received: {_short(described)}')
        return [self.check.restore(v) for v in described]


class DictOf(Check):
    """A dict of str keys to values passing ``check``."""

    def __init__(
        self, check: Check, nonempty: bool = False, keys: Check | None = None
    ) -> None:
        self.check, self.nonempty = check, nonempty
        self.keys = keys or Str()
        self.expected = (
            'a non-empty ' if nonempty else 'a '
        ) + f'dict of {self.keys.expected} to ({check.expected})'

    @property
    def example(self) -> object:
        """A one-item dict of the key and value examples."""
        return {self.keys.example: self.check.example}

    @property
    def invalid_examples(self) -> tuple:
        """Non-dicts, an invalid key and dicts with invalid values."""
        example = self.check.example
        bad_keys = [k for k in self.keys.invalid_examples if isinstance(k, Hashable)]
        invalid = [5, 'x', [example]] + [{k: example} for k in bad_keys[:1]]
        invalid += [{self.keys.example: v} for v in self.check.invalid_examples[:2]]
        if self.nonempty:
            invalid.append({})
        return tuple(invalid)

    @property
    def kind(self) -> Any:
        """The inner check's kind."""
        return self.check.kind

    def normalize(self, value: Any) -> Any:
        """Return a dict of the same type with keys and values normalised."""
        if not isinstance(value, dict) or (self.nonempty and not value):
            raise ValueError
        return type(value)(
            (_inner(self.keys, k, f' key {k!r}'), _inner(self.check, v, f'[{k!r}]'))
            for k, v in value.items()
        )

    def restore(self, described: object) -> object:
        """Restore each value of a described dict (without ``@type``)."""
        if not isinstance(described, dict) or '@type' in described:
            raise DescriptionError(f'expected a dict. Received: {_short(described)}')
        return {
            self.keys.normalize(k) if isinstance(k, str) else k: self.check.restore(v)
            for k, v in described.items()
        }


class AnyOf(Check):
    """A value passing any one of ``checks`` (tried in order)."""

    def __init__(self, *checks: Check) -> None:
        self.checks = checks
        self.expected = ' or '.join(c.expected for c in checks)

    @property
    def invalid_examples(self) -> tuple:
        """The checks' invalid examples that no check accepts."""
        invalid: list[object] = []
        for check in self.checks:
            for bad in check.invalid_examples:
                if not any(_passes(c, bad) for c in self.checks) and not any(
                    bad is v for v in invalid
                ):
                    invalid.append(bad)
        return tuple(invalid)

    @property
    def kind(self) -> Any:
        """The kind of the one check that has one, a tuple of several, or None."""
        kinds = tuple(c.kind for c in self.checks if c.kind is not None)
        return kinds[0] if len(kinds) == 1 else (kinds or None)

    @property
    def example(self) -> object:
        """The first check's example."""
        return self.checks[0].example

    def normalize(self, value: Any) -> Any:
        """Return the result of the first check that accepts ``value``."""
        for check in self.checks:
            try:
                return check.normalize(value)
            except (ValueError, TypeError):
                pass
        raise ValueError

    def restore(self, described: object) -> object:
        """Restore with the check expecting a ``@type``, or the first that accepts."""
        if _is_description(described):
            for check in self.checks:
                if check.kind is not None:
                    return check.restore(described)
        errors = []
        for check in self.checks:
            try:
                return check.restore(described)
            except DescriptionError as err:
                errors.append(err)
        raise errors[0]


class NumericArray(Check):
    """A NumPy array (or nested lists) of real numbers.

    Not ragged, not masked, and finite unless ``finite=False``.

    With ``on_demand=True`` an array read on demand is also accepted and
    kept as it is, unread: an ``h5py.Dataset`` or any object with
    ``shape``, ``ndim``, a NumPy ``dtype`` and NumPy-style slicing (a
    ``np.memmap`` is a NumPy array, also kept). Its dtype and ndim are
    checked here; its values are the reader's business.
    """

    def __init__(
        self,
        min_ndim: int = 0,
        allow_bool: bool = True,
        finite: bool = True,
        on_demand: bool = False,
    ) -> None:
        self.min_ndim = min_ndim
        self.allow_bool = allow_bool
        self.finite = finite
        self.on_demand = on_demand
        self.expected = (
            'a numeric array of finite values' if finite else 'a numeric array'
        ) + (f' with at least {min_ndim} dimensions' if min_ndim else '')
        self.example = np.ones((2,) * max(min_ndim, 1))
        invalid = [
            'x',
            None,
            [[1.0], [1.0, 2.0]],
            np.ma.masked_array(self.example, mask=True),
            np.array(['a', 'b']),
            np.zeros(2, dtype=object),
        ]
        if finite:  # one NaN among finite values
            holed = self.example.copy()
            holed.flat[-1] = np.nan
            invalid.append(holed)
        if min_ndim:
            invalid.append(np.ones((2,) * (min_ndim - 1)))
        self.invalid_examples = tuple(invalid)

    def normalize(self, value: Any) -> Any:
        """Return ``value`` as an array once its dtype, ndim and values pass."""
        if isinstance(value, np.ma.MaskedArray):
            raise ValueError(
                'masked arrays are not supported (their mask '
                'would be lost); pass .filled(...) or a mask '
                'input'
            )
        if self.on_demand and _reads_on_demand(value):
            array = np.empty((0,) * int(value.ndim), dtype=np.dtype(value.dtype))
            self._check_dtype_and_ndim(array, value.shape)
            return value
        try:
            array = np.asarray(value)
        except (ValueError, TypeError):
            raise ValueError('ragged or malformed nested sequence') from None
        self._check_dtype_and_ndim(array, array.shape)
        if (
            self.finite
            and np.issubdtype(array.dtype, np.floating)
            and not np.isfinite(array).all()
        ):
            raise ValueError('it holds NaN or Inf')
        return value if isinstance(value, np.ndarray) else array

    def _check_dtype_and_ndim(self, array: np.ndarray, shape: tuple) -> None:
        if array.dtype == object or not (
            np.issubdtype(array.dtype, np.number)
            or (self.allow_bool and array.dtype == np.bool_)
        ):
            raise ValueError
        if np.issubdtype(array.dtype, np.complexfloating):
            raise ValueError
        if array.ndim < self.min_ndim:
            raise ValueError(f'it has shape {tuple(shape)}')


def _reads_on_demand(value: Any) -> bool:
    """True for an array-like object that is not in memory (h5py.Dataset).

    It has ``shape``, ``ndim``, a dtype NumPy understands and slicing,
    and is neither a NumPy array nor a nested list.
    """
    if isinstance(value, (np.ndarray, np.generic, list, tuple)):
        return False
    try:
        np.dtype(value.dtype)
        return (
            isinstance(value.ndim, int)
            and len(value.shape) == value.ndim
            and hasattr(value, '__getitem__')
        )
    except (AttributeError, TypeError):
        return False
