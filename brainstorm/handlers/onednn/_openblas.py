"""How many threads NumPy's OpenBLAS uses, while oneDNN runs convolutions.

NumPy's OpenBLAS keeps worker threads that spin, waiting for work, for
about 0.1 s after each multi-threaded product. Meanwhile they hold a core
that oneDNN's OpenMP threads need: a convolution run right after a product
took up to twice as long (docs/cpu.rst). While a :func:`quiet` block runs
(in any thread), OpenBLAS runs every call on one thread, so its workers stay
asleep; :func:`all_threads` lets a big product inside use them all.

OpenBLAS's thread count is a setting of the whole process, so the blocks of
all threads are counted: the first one in sets one thread, the last one out
restores the count from before.

The library is found among the shared libraries the process has loaded
(``/proc/self/maps``), the one NumPy's wheel brings first. Where there
is none, or it lacks the functions (NumPy built on another BLAS, not
Linux), :func:`available` is False and the blocks do nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections.abc import Iterator

import numpy as np  # loads NumPy's OpenBLAS before the search

__all__ = ['available', 'thread_count', 'quiet', 'all_threads']

#: (get, set) function names of the builds we know of: plain, NumPy 2's
#: scipy-openblas, NumPy 1's 64-bit-integer build
_NAMES = (
    ('openblas_get_num_threads', 'openblas_set_num_threads'),
    ('scipy_openblas_get_num_threads64_', 'scipy_openblas_set_num_threads64_'),
    ('openblas_get_num_threads64_', 'openblas_set_num_threads64_'),
)

_lock = threading.Lock()
_functions: list = []  # [(get, set) or None] once searched
_depth = 0  # quiet blocks running, in all threads
_saved: int | None = None  # the count before the first of them
_own = threading.local()  # .depth: the quiet blocks of this thread


def _loaded_openblas_paths() -> list[str]:
    """Paths of the loaded shared libraries named like OpenBLAS."""
    try:
        with open('/proc/self/maps', encoding='utf-8', errors='replace') as maps:
            lines = maps.read().splitlines()
    except OSError:
        return []
    paths = []
    for line in lines:
        fields = line.split(maxsplit=5)
        path = fields[5] if len(fields) == 6 else ''
        name = os.path.basename(path).lower()
        if 'openblas' in name and '.so' in name and path not in paths:
            paths.append(path)
    return paths


def _find_functions():
    # NumPy's own copy (in numpy.libs/ or numpy/.libs/) before any other
    numpy_dir = os.path.dirname(np.__file__)
    paths = sorted(_loaded_openblas_paths(), key=lambda p: not p.startswith(numpy_dir))
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _NAMES:
            get = getattr(lib, get_name, None)
            set_ = getattr(lib, set_name, None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, []
                set_.restype, set_.argtypes = None, [ctypes.c_int]
                return get, set_
    return None


def _get_set():
    """``(get, set)``, or None; searched for once."""
    if not _functions:
        with _lock:
            if not _functions:
                _functions.append(_find_functions())
    return _functions[0]


def available() -> bool:
    """Whether NumPy's OpenBLAS thread count can be read and set."""
    return _get_set() is not None


def thread_count() -> int | None:
    """OpenBLAS's thread count now (None where not :func:`available`)."""
    functions = _get_set()
    return None if functions is None else int(functions[0]())


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Run OpenBLAS on one thread while this block (or another) runs.

    The count from before the first block is restored when the last one
    ends, also after an error.
    """
    global _depth, _saved
    functions = _get_set()
    if functions is None:
        yield
        return
    get, set_ = functions
    with _lock:
        if _depth == 0:
            _saved = int(get())
            set_(1)
        _depth += 1
        _own.depth = getattr(_own, 'depth', 0) + 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            _own.depth -= 1
            if _depth == 0:
                set_(_saved)
                _saved = None


@contextlib.contextmanager
def all_threads() -> Iterator[None]:
    """While :func:`quiet` blocks run: run this one on the count from before.

    Outside them it does nothing (checked without the lock first: the
    usual case, a product of a network without images, stays cheap).
    """
    functions = _get_set()
    if not _depth or functions is None:
        yield
        return
    with _lock:
        if _saved is not None:
            functions[1](_saved)
    try:
        yield
    finally:
        with _lock:
            if _depth:
                functions[1](1)


def _after_fork_in_child() -> None:
    """A forked child keeps only the forking thread's quiet blocks.

    The blocks of the parent's other threads never end in the child: their
    count, and the lock one of them may have held, start afresh, and with
    no block of its own open the child's OpenBLAS gets its count back.
    """
    global _lock, _depth, _saved
    _lock = threading.Lock()
    _depth = getattr(_own, 'depth', 0)
    if _depth == 0 and _saved is not None:  # saved: the functions were found
        _get_set()[1](_saved)
        _saved = None


os.register_at_fork(after_in_child=_after_fork_in_child)
