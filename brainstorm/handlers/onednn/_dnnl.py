"""A small ctypes binding of oneDNN's C API (``libdnnl.so.3``, oneDNN 3.x).

Only what :class:`~brainstorm.handlers.onednn.handler.OneDnnHandler`
needs: one CPU engine and stream, memory descriptors made from NumPy
shapes and strides, convolution, pooling, matmul, elementwise backward,
addition and reorder primitives, ReLU and sum post-ops, and their
execution on memory objects whose data handle is set to the NumPy
arrays of the network before each run (no copies).

The library comes from PyPI's ``onednn-cpu-gomp`` (it installs
``libdnnl.so.3`` under the environment's ``lib/``). :func:`library`
finds and loads it once; if it cannot, it raises
:class:`OneDnnUnavailable` saying why. The constants below are those of
oneDNN 3.x's ``dnnl_types.h`` and ``dnnl_common_types.h``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import site
import sys
import threading
from importlib import metadata
from pathlib import Path

import numpy as np

__all__ = ['OneDnnUnavailable', 'library', 'library_path']

# ------------------------------------------------------------------ constants
#: the sonames tried, newest first
SONAMES = ('libdnnl.so.3',)
#: the PyPI distribution that installs the library
DISTRIBUTION = 'onednn-cpu-gomp'
MAX_NDIMS = 12  # DNNL_MAX_NDIMS
SUCCESS = 0
CPU = 1  # dnnl_cpu
FORMAT_ANY = 1  # dnnl_format_tag_any
F32, S32, U8 = 3, 4, 6  # dnnl_data_type_t
FORWARD_TRAINING, FORWARD_INFERENCE = 64, 96
CONVOLUTION_DIRECT = 0x1
POOLING_MAX, POOLING_AVG_EXCLUDE_PADDING = 0x1FF, 0x3FF
ELTWISE_RELU = 0x20
ELTWISE_RELU_USE_DST_FOR_BWD = 0x100
ELTWISE_LOGISTIC_USE_DST_FOR_BWD = 0x104
BINARY_ADD = 0x1FFF0
SCRATCHPAD_MODE_USER = 1
QUERY_IMPL_INFO_STR = 8
QUERY_SRC_MD, QUERY_DIFF_SRC_MD = 129, 130
QUERY_WEIGHTS_MD, QUERY_DIFF_WEIGHTS_MD = 131, 132
QUERY_DST_MD, QUERY_DIFF_DST_MD = 133, 134
QUERY_WORKSPACE_MD, QUERY_SCRATCHPAD_MD = 135, 136
ARG_SRC, ARG_DST, ARG_WEIGHTS, ARG_BIAS = 1, 17, 33, 41
ARG_SRC_1 = 2
ARG_ATTR_SCALES = 4096  # | the argument: its scale
ARG_WORKSPACE, ARG_SCRATCHPAD = 64, 80
ARG_DIFF_SRC, ARG_DIFF_DST, ARG_DIFF_WEIGHTS, ARG_DIFF_BIAS = 129, 145, 161, 169
OMP_PAUSE_SOFT = 1  # omp_pause_soft of OpenMP's omp.h

_STATUS = {
    1: 'out of memory',
    2: 'invalid arguments',
    3: 'unimplemented',
    4: 'last implementation reached',
    5: 'runtime error',
    6: 'not required',
}

_DTYPES = {np.dtype(np.float32): F32, np.dtype(np.int32): S32, np.dtype(np.uint8): U8}

Dims = ctypes.c_int64 * MAX_NDIMS


class ExecArg(ctypes.Structure):
    """``dnnl_exec_arg_t``: an argument index and a memory object."""

    _fields_ = [('arg', ctypes.c_int), ('memory', ctypes.c_void_p)]


class OneDnnUnavailable(ImportError):
    """oneDNN's library could not be found or loaded (the message says why)."""


class OneDnnError(RuntimeError):
    """A oneDNN call failed (the message names the call and the status)."""


def dims(values) -> ctypes.Array:
    """A ``dnnl_dims_t`` holding ``values``."""
    out = Dims()
    for i, value in enumerate(values):
        out[i] = int(value)
    return out


def library_path() -> list[Path]:
    """The places :func:`library` looks for ``libdnnl.so.3``, in order.

    First the folder where the installed ``onednn-cpu-gomp`` distribution
    put it, as its record of installed files says (right for every install
    scheme: a virtual environment, ``pip install --user``, a system's
    ``/usr/local``). Then the ``lib/`` folders of the running environment
    (``sys.prefix``), of the base installation and of the user's base
    (``site.getuserbase()``, where Python uses the user's site-packages),
    then ``$DNNLROOT/lib``; after those, the system's loader path.
    """
    places: list[Path] = _recorded_places()
    roots = [
        sys.prefix,
        sys.base_prefix,
        # the user's base only where Python uses its site-packages (not in
        # a virtual environment, nor with python -s)
        site.getuserbase() if site.ENABLE_USER_SITE else '',
        os.environ.get('DNNLROOT', ''),
    ]
    for root in roots:
        if root:
            for sub in ('lib', 'lib64'):
                place = Path(root) / sub
                if place not in places:
                    places.append(place)
    return places


def _recorded_places() -> list[Path]:
    """The folders of the ``libdnnl.so*`` files ``onednn-cpu-gomp`` installed."""
    try:
        files = metadata.files(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return []
    places: list[Path] = []
    for file in files:
        if file.name.startswith('libdnnl.so'):
            place = Path(os.path.normpath(file.locate())).parent
            if place not in places:
                places.append(place)
    return places


class Library:
    """The loaded library with one CPU engine and one in-order stream.

    Args:
        path: what ``ctypes.CDLL`` loads.
    """

    def __init__(self, path: str):
        self.path = path
        self.lib = lib = ctypes.CDLL(path)
        for name, restype in (
            ('dnnl_primitive_desc_query_md', ctypes.c_void_p),
            ('dnnl_memory_desc_get_size', ctypes.c_size_t),
            ('dnnl_memory_desc_equal', ctypes.c_int),
            ('dnnl_version', ctypes.c_void_p),
        ):
            getattr(lib, name).restype = restype
        lib.dnnl_primitive_desc_query_md.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int,
        ]
        lib.dnnl_memory_desc_get_size.argtypes = [ctypes.c_void_p]
        lib.dnnl_memory_desc_equal.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.dnnl_memory_set_data_handle.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.dnnl_primitive_execute.argtypes = [
            ctypes.c_void_p,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_void_p,
        ]
        self.engine = self._make('dnnl_engine_create', CPU, ctypes.c_size_t(0))
        self.stream = self._make('dnnl_stream_create', self.engine, ctypes.c_uint(1))

    @property
    def version(self) -> str:
        """OneDNN's version, like ``'3.2.0'``."""

        class Version(ctypes.Structure):
            _fields_ = [
                ('major', ctypes.c_int),
                ('minor', ctypes.c_int),
                ('patch', ctypes.c_int),
            ]

        v = ctypes.cast(self.lib.dnnl_version(), ctypes.POINTER(Version)).contents
        return f'{v.major}.{v.minor}.{v.patch}'

    @property
    def threads(self) -> int:
        """OpenMP's thread count for oneDNN's primitives (in this thread).

        GNU OpenMP's ``omp_get_max_threads``: ``OMP_NUM_THREADS``, else the
        cores available, at most ``OMP_THREAD_LIMIT`` (see
        :func:`ready_openmp`).
        """
        ready_openmp()
        return int(_gomp().omp_get_max_threads())

    def call(self, name: str, *args) -> None:
        """Call the C function ``name``; raise :class:`OneDnnError` on failure.

        Primitives plan their threads when they are made, so the calling
        thread's OpenMP settings are made ready first (:func:`ready_openmp`).
        """
        if not getattr(_openmp_ready, 'done', False):
            ready_openmp()
        status = getattr(self.lib, name)(*args)
        if status != SUCCESS:
            raise OneDnnError(
                f'oneDNN: {name} failed: {_STATUS.get(status, status)} '
                f'(status {status})'
            )

    def _make(self, name: str, *args) -> ctypes.c_void_p:
        """Call a creating function whose first argument receives a handle."""
        handle = ctypes.c_void_p()
        self.call(name, ctypes.byref(handle), *args)
        return handle

    # ---------------------------------------------------------------- memory

    def md(self, shape, strides, dtype) -> MemoryDesc:
        """A memory descriptor of ``shape`` with ``strides`` in elements."""
        handle = self._make(
            'dnnl_memory_desc_create_with_strides',
            ctypes.c_int(len(shape)),
            dims(shape),
            ctypes.c_int(_DTYPES[np.dtype(dtype)]),
            dims(strides),
        )
        return MemoryDesc(self, handle, owned=True)

    def md_any(self, shape, dtype) -> MemoryDesc:
        """A memory descriptor whose format the primitive chooses."""
        handle = self._make(
            'dnnl_memory_desc_create_with_tag',
            ctypes.c_int(len(shape)),
            dims(shape),
            ctypes.c_int(_DTYPES[np.dtype(dtype)]),
            ctypes.c_int(FORMAT_ANY),
        )
        return MemoryDesc(self, handle, owned=True)

    def memory(self, md: MemoryDesc) -> ctypes.c_void_p:
        """A memory object of ``md`` without data (set before each run)."""
        return self._make('dnnl_memory_create', md.handle, self.engine, None)

    def attr(self) -> Attributes:
        """Primitive attributes with a user-provided scratchpad."""
        attr = Attributes(self, self._make('dnnl_primitive_attr_create'))
        self.call(
            'dnnl_primitive_attr_set_scratchpad_mode',
            attr.handle,
            SCRATCHPAD_MODE_USER,
        )
        return attr

    def relu_attr(self) -> Attributes:
        """:meth:`attr` with a ReLU (``max(x, 0)``) post-op."""
        attr = self.attr()
        self._set_post_op(
            attr,
            'dnnl_post_ops_append_eltwise',
            ctypes.c_int(ELTWISE_RELU),
            ctypes.c_float(0.0),
            ctypes.c_float(0.0),
        )
        return attr

    def scales_attr(self, *args: int) -> Attributes:
        """:meth:`attr` with one run-time scale for each argument of ``args``.

        Each run then takes, for argument ``a``, a float32 scale as the
        argument ``ARG_ATTR_SCALES | a``.
        """
        attr = self.attr()
        for arg in args:
            self.call(
                'dnnl_primitive_attr_set_scales_mask',
                attr.handle,
                ctypes.c_int(arg),
                ctypes.c_int(0),  # one scale for the whole argument
            )
        return attr

    def add_sum_post_op(self, attr: Attributes) -> None:
        """Give ``attr`` a sum post-op: the result is added to the output."""
        self._set_post_op(
            attr,
            'dnnl_post_ops_append_sum',
            ctypes.c_float(1.0),
            ctypes.c_int32(0),
            ctypes.c_int(0),  # dnnl_data_type_undef: the output's type
        )

    def _set_post_op(self, attr: Attributes, append: str, *args) -> None:
        """Give ``attr`` the one post-op that the function ``append`` adds."""
        post_ops = self._make('dnnl_post_ops_create')
        try:
            self.call(append, post_ops, *args)
            self.call('dnnl_primitive_attr_set_post_ops', attr.handle, post_ops)
        finally:  # the attributes keep a copy
            self.lib.dnnl_post_ops_destroy(post_ops)

    def query_md(self, pd: ctypes.c_void_p, what: int, index: int = 0) -> MemoryDesc:
        """The memory descriptor primitive descriptor ``pd`` has for ``what``.

        It belongs to ``pd`` and lives as long as ``pd``.
        """
        handle = self.lib.dnnl_primitive_desc_query_md(pd, what, index)
        return MemoryDesc(self, ctypes.c_void_p(handle), owned=False)


class Attributes:
    """A ``dnnl_primitive_attr_t``, destroyed with this object."""

    def __init__(self, lib: Library, handle: ctypes.c_void_p):
        self.lib, self.handle = lib, handle

    def __del__(self):
        if self.handle:
            self.lib.lib.dnnl_primitive_attr_destroy(self.handle)
            self.handle = None


class MemoryDesc:
    """A ``dnnl_memory_desc_t``; ``owned`` ones are destroyed with this object."""

    def __init__(self, lib: Library, handle: ctypes.c_void_p, owned: bool):
        self.lib, self.handle, self.owned = lib, handle, owned

    @property
    def size(self) -> int:
        """Bytes the memory of this descriptor takes."""
        return int(self.lib.lib.dnnl_memory_desc_get_size(self.handle))

    def __eq__(self, other) -> bool:
        return isinstance(other, MemoryDesc) and bool(
            self.lib.lib.dnnl_memory_desc_equal(self.handle, other.handle)
        )

    __hash__ = None  # type: ignore[assignment]

    def __del__(self):
        if self.owned and self.handle:
            self.lib.lib.dnnl_memory_desc_destroy(self.handle)
            self.handle = None


class Primitive:
    """A primitive descriptor, its primitive and its run-time arguments.

    Args:
        lib: the :class:`Library`.
        pd: the primitive descriptor handle (owned from now on).
        args: ``{argument index: memory descriptor}`` of the arguments
            the caller supplies arrays for, in :meth:`run`'s order.
    """

    def __init__(self, lib: Library, pd: ctypes.c_void_p, args: dict[int, MemoryDesc]):
        self.lib, self.pd = lib, pd
        self.primitive = lib._make('dnnl_primitive_create', pd)
        self.order = list(args)
        self.memories = [lib.memory(md) for md in args.values()]
        extra = []
        scratch = self.query_md(QUERY_SCRATCHPAD_MD)
        self.scratchpad_bytes = scratch.size
        if self.scratchpad_bytes:
            extra.append((ARG_SCRATCHPAD, lib.memory(scratch)))
        self.extra = extra
        every = list(zip(self.order, self.memories)) + extra
        self.args = (ExecArg * len(every))(*[ExecArg(a, m.value) for a, m in every])
        self.all_memories = [m for _, m in every]

    def query_md(self, what: int, index: int = 0) -> MemoryDesc:
        """The memory descriptor the primitive descriptor has for ``what``."""
        return self.lib.query_md(self.pd, what, index)

    @property
    def implementation(self) -> str:
        """The name of the implementation oneDNN chose (``'brg:avx512_core'``)."""
        name = ctypes.c_char_p()
        self.lib.call(
            'dnnl_primitive_desc_query',
            self.pd,
            QUERY_IMPL_INFO_STR,
            0,
            ctypes.byref(name),
        )
        return (name.value or b'').decode()

    def run(self, pointers, scratchpad: int = 0) -> None:
        """Execute on the data at ``pointers`` (in the order of ``args``).

        ``scratchpad`` is the address of at least ``scratchpad_bytes``
        bytes.
        """
        if not getattr(_openmp_ready, 'done', False):
            ready_openmp()
        lib = self.lib.lib
        for memory, pointer in zip(self.memories, pointers):
            lib.dnnl_memory_set_data_handle(memory, pointer)
        if self.extra:
            lib.dnnl_memory_set_data_handle(self.extra[0][1], scratchpad)
        status = lib.dnnl_primitive_execute(
            self.primitive, self.lib.stream, len(self.args), self.args
        )
        if status != SUCCESS:
            raise OneDnnError(
                f'oneDNN: executing {self.implementation} failed: '
                f'{_STATUS.get(status, status)} (status {status})'
            )

    def __del__(self):
        lib = getattr(self.lib, 'lib', None)
        if lib is None:  # pragma: no cover (interpreter shutdown)
            return
        for memory in getattr(self, 'all_memories', ()):
            lib.dnnl_memory_destroy(memory)
        if getattr(self, 'primitive', None):
            lib.dnnl_primitive_destroy(self.primitive)
        if self.pd:
            lib.dnnl_primitive_desc_destroy(self.pd)


_loaded: Library | None = None
_failure: str | None = None
_load_lock = threading.Lock()


def _renew_load_lock() -> None:
    """Give a forked child a new loading lock.

    The parent's may have been held by a thread loading the library, which
    the child lacks.
    """
    global _load_lock
    _load_lock = threading.Lock()


os.register_at_fork(after_in_child=_renew_load_lock)


def _candidates() -> list[str]:
    found = []
    for place in library_path():
        for soname in SONAMES:
            if (place / soname).is_file():
                found.append(str(place / soname))
    return found + list(SONAMES)


def library() -> Library:
    """Load oneDNN once and return it.

    Raises:
        OneDnnUnavailable: if no ``libdnnl.so.3`` loads (the message lists
            the places tried and the loader's errors), or if the
            environment variable ``BRAINSTORM_NO_ONEDNN`` is set to a
            value other than ``''``, ``0``, ``false``, ``no`` or ``off``
            (in any case).
    """
    global _loaded, _failure
    switch = os.environ.get('BRAINSTORM_NO_ONEDNN', '').strip().lower()
    if switch not in ('', '0', 'false', 'no', 'off'):
        raise OneDnnUnavailable(
            'oneDNN is switched off by the environment variable BRAINSTORM_NO_ONEDNN'
        )
    with _load_lock:
        if _loaded is not None:
            return _loaded
        if _failure is not None:
            raise OneDnnUnavailable(_failure)
        _prepare_openmp()
        errors = []
        for candidate in _candidates():
            try:
                _loaded = Library(candidate)
                os.register_at_fork(before=_pause_openmp)
                return _loaded
            except (OSError, AttributeError, OneDnnError) as error:
                errors.append(f'{candidate}: {error}')
        places = ', '.join(str(p) for p in library_path())
        _failure = (
            'oneDNN (libdnnl.so.3) could not be loaded; install it with '
            '"pip install onednn-cpu-gomp" (Linux x86-64). Looked in '
            f'{places} and the system loader path: ' + '; '.join(errors)
        )
        raise OneDnnUnavailable(_failure)


def _prepare_openmp() -> None:
    """Let idle OpenMP threads sleep instead of spinning (unless set).

    oneDNN's threads are GNU OpenMP's; between two oneDNN primitives the
    step runs NumPy and OpenBLAS, whose own threads would compete with
    OpenMP threads spinning on the same cores. libgomp reads
    ``OMP_WAIT_POLICY`` when it is loaded, so this must come before.
    """
    os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE')


@functools.cache
def _gomp() -> ctypes.CDLL:
    """GNU OpenMP's library, which oneDNN's (onednn-cpu-gomp) loads."""
    return ctypes.CDLL('libgomp.so.1')


#: Per thread: whether :func:`ready_openmp` ran in it.
_openmp_ready = threading.local()


def ready_openmp() -> None:
    """Let OpenMP give oneDNN every thread its kernels plan for (this thread).

    oneDNN's kernels split their work into ``omp_get_max_threads()`` parts
    and some wait at a barrier for all of them. OpenMP may start fewer
    threads: with ``OMP_DYNAMIC=true`` (it may choose fewer), with
    ``OMP_THREAD_LIMIT`` below the thread count, or with
    ``OMP_MAX_ACTIVE_LEVELS=0`` (no parallel region at all). Such a kernel
    (the first backward convolution, for one) then waits for ever. These
    settings belong to each thread, so each thread that runs a primitive
    sets them once, before its first: dynamic adjustment off, the thread
    count at most the thread limit, one active level. Other OpenMP code
    that the same thread runs sees the same settings.
    """
    _openmp_ready.done = True
    try:
        gomp = _gomp()
    except OSError:  # a oneDNN built on another runtime (DNNLROOT)
        return
    if gomp.omp_get_dynamic():
        gomp.omp_set_dynamic(0)
    limit = gomp.omp_get_thread_limit()
    if gomp.omp_get_max_threads() > limit >= 1:
        gomp.omp_set_num_threads(limit)
    if gomp.omp_get_max_active_levels() < 1:
        gomp.omp_set_max_active_levels(1)


def _pause_openmp() -> None:
    """Free the forking thread's OpenMP worker threads (before each fork).

    GNU OpenMP keeps, for each thread that ran a parallel region, a pool of
    worker threads. A forked child inherits the pool's bookkeeping but not
    its threads, so the child's first oneDNN primitive would wait for them
    forever (``multiprocessing``'s ``fork`` start method, ``os.fork``).
    ``omp_pause_resource_all`` (OpenMP 5.0; GNU OpenMP since GCC 9) frees
    the pool of the calling thread: the child starts a new one, and so does
    the parent, at its next primitive. An older libgomp lacks the function;
    then nothing is done. The hook runs inside ``fork``, so it never raises.
    """
    try:
        pause = _gomp().omp_pause_resource_all
    except (OSError, AttributeError):
        return
    pause.argtypes, pause.restype = [ctypes.c_int], ctypes.c_int
    pause(OMP_PAUSE_SOFT)
