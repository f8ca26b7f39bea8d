"""Kernel launches without numba-cuda's general argument marshalling (issue 14's fixed cost).

numba-cuda prepares every argument of every launch through its general path: a type lookup of
each argument, an ``InOut`` hint and a strided-memory-view shim per device array, module imports
inside the call, a performance-warning check per launch configuration. That costs 3-6 us per
device array on an H200 host; the engines' kernels take 5-25 arguments and a small query makes
5-50 launches, so marshalling was a third to half of a small query's time (docs/performance.md,
"Session 7").

``@jit`` is ``cuda.jit`` for a kernel whose launches (``k[grid, block](*args)``,
``k[grid, block, stream](*args)``, ``k[grid, block, stream, shared_bytes](*args)``) reuse, on a
GPU:

* the compiled overload numba's dispatcher chose on the first launch with the same argument
  kinds (each device array's numba type, each scalar's Python or numpy type): numba's own
  typing and compilation, done once per kind, never guessed;
* each device array's launch words (pointer, size, shape, strides), computed once and kept on
  the array: a numba device array never changes its pointer or shape;
* cuda.core's launch configuration per (grid, block, shared memory) and its stream per stream.

Anything else (a host array numba would copy, an integer outside int64, a kernel compiled with
``debug``, an argument type without a plain launch word) goes through the dispatcher as before.
Under the simulator ``@jit`` returns the dispatcher itself. ``GPUSM_FAST_LAUNCH=0`` turns the
quick path off (the ablation measured in docs/performance.md). A process uses one GPU (as every
gpusm process does: Dask workers are pinned one per GPU): the compiled function is kept for the
context of the first launch.
"""

from __future__ import annotations

import ctypes
import os
from typing import NamedTuple

import numpy as np
from numba import cuda

from .cudasim import simulator_active

ENABLED = os.environ.get("GPUSM_FAST_LAUNCH", "1") != "0"
_INT64 = (-(1 << 63), 1 << 63)
_CONFIGS_KEPT = 4096                      # launch configurations remembered per kernel


def jit(function=None, **options):
    """``cuda.jit`` for a kernel (``@jit`` or ``@jit(max_registers=64)``); on a GPU the result
    launches through :class:`Kernel`."""
    def wrap(py_function):
        dispatcher = cuda.jit(**options)(py_function)
        if _NUMBA is None:
            return dispatcher
        return Kernel(dispatcher)

    return wrap if function is None else wrap(function)


class _NumbaPieces(NamedTuple):
    """numba-cuda's launch pieces this module relies on."""

    cooperative_flag: str             # LaunchConfig's name for a cooperative launch
    to_core_stream: object            # numba stream (or 0) -> cuda.core stream
    device_array: type                # numba's device array class
    launch_config: type               # cuda.core's LaunchConfig
    dispatcher_launch: type           # numba's configured launch (types, compiles, marshals)
    launch: object                    # cuda.core's launch(stream, config, kernel, *words)
    typeof: object                    # numba's argument typing: typeof(value) -> type
    normalize_dims: object            # (grid, block) -> 3-tuples, checked


def _numba_pieces() -> _NumbaPieces | None:
    """The pieces, or None when this numba-cuda lacks them (then every kernel keeps the
    dispatcher's own launches)."""
    try:
        from numba.cuda import _compat
        from numba.cuda.cudadrv import driver
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        from numba.cuda.dispatcher import LaunchConfig, _LaunchConfiguration, launch
        from numba.cuda.errors import normalize_kernel_dimensions
        from numba.cuda.typing.typeof import Purpose, typeof
    except ImportError:
        return None
    return _NumbaPieces(
        cooperative_flag="is_cooperative" if _compat.CUDA_CORE_GE_1_0 else "cooperative_launch",
        to_core_stream=driver._to_core_stream, device_array=DeviceNDArray, launch_config=LaunchConfig,
        dispatcher_launch=_LaunchConfiguration, launch=launch,
        typeof=lambda value: typeof(value, Purpose.argument), normalize_dims=normalize_kernel_dimensions)


class Kernel:
    """A compiled-on-demand kernel whose launches skip numba-cuda's per-argument marshalling.

    Attributes other than launching (``compile``, ``overloads``, ``py_func``...) are the
    dispatcher's."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self._overloads: dict = {}        # argument kinds -> (cufunc handle, cooperative, converters),
        #                                   or False: these kinds always go through the dispatcher
        self._configs: dict = {}          # (grid, block, shared bytes) -> cuda.core LaunchConfig

    def __getattr__(self, name):
        if name == "dispatcher":              # not yet set (unpickling): no recursion
            raise AttributeError(name)
        return getattr(self.dispatcher, name)

    def __repr__(self):
        return f"Kernel({self.dispatcher.py_func.__name__})"

    def __getitem__(self, configuration):
        if len(configuration) not in (2, 3, 4):
            raise ValueError("a launch takes [griddim, blockdim] (and optionally stream, shared bytes)")
        griddim, blockdim, *rest = configuration
        if type(griddim) is int and type(blockdim) is int:
            griddim, blockdim = (griddim, 1, 1), (blockdim, 1, 1)
        else:
            griddim, blockdim = _NUMBA.normalize_dims(griddim, blockdim)
        stream = rest[0] if rest else 0
        shared = rest[1] if len(rest) > 1 else 0
        return _Launch(self, griddim, blockdim, stream, shared)

    # ------------------------------------------------------------------ internals
    def _config(self, griddim, blockdim, shared, cooperative):
        key = (griddim, blockdim, shared, cooperative)
        config = self._configs.get(key)
        if config is None:
            config = _NUMBA.launch_config(grid=griddim, block=blockdim, shmem_size=shared,
                                          **{_NUMBA.cooperative_flag: cooperative})
            if len(self._configs) >= _CONFIGS_KEPT:
                self._configs.clear()
            self._configs[key] = config
        return config

    def _first_launch(self, kinds, launch, args) -> None:
        """Launch through numba's dispatcher (which types, compiles and marshals), then remember
        the overload it used for these argument kinds when every argument has a plain launch word."""
        _NUMBA.dispatcher_launch(self.dispatcher, launch.griddim, launch.blockdim, launch.stream,
                                 launch.shared)(*args)
        if kinds is None or kinds in self._overloads:
            return
        overload = self.dispatcher.overloads.get(argument_types(args))
        entry = False
        if overload is not None and not overload.debug:
            converters = [_converter(t) for t in overload.argument_types]
            if all(c is not None for c in converters):
                cufunc = overload._codelibrary.get_cufunc()
                entry = (cufunc.kernel, bool(overload.cooperative), tuple(converters))
        self._overloads[kinds] = entry


class _Launch:
    """``kernel[grid, block, stream, shared]``: calling it launches."""

    __slots__ = ("kernel", "griddim", "blockdim", "stream", "shared")

    def __init__(self, kernel, griddim, blockdim, stream, shared):
        self.kernel, self.griddim, self.blockdim = kernel, griddim, blockdim
        self.stream, self.shared = stream, shared

    def __call__(self, *args):
        kernel = self.kernel
        kinds = _kinds(args)
        entry = kernel._overloads.get(kinds) if kinds is not None else None
        if not entry:
            kernel._first_launch(kinds, self, args)
            return
        function, cooperative, converters = entry
        words = []
        for convert, value in zip(converters, args):
            convert(value, words)
        config = kernel._config(self.griddim, self.blockdim, self.shared, cooperative)
        _NUMBA.launch(_core_stream(self.stream), config, function, *words)


_STREAMS: dict = {}


def _core_stream(stream):
    """numba's stream (or 0) as cuda.core's, converted once per stream object."""
    core = _STREAMS.get(id(stream))
    if core is None or core[0] is not stream:
        core = (stream, _NUMBA.to_core_stream(stream))
        _STREAMS[id(stream)] = core          # keeps the stream alive: its id stays its own
    return core[1]


def _kinds(args):
    """The argument kinds that pick a compiled overload, or None when an argument needs numba's
    own path (a host array, an integer outside int64, an unknown type)."""
    kinds = []
    for value in args:
        kind = type(value)
        if kind is _DEVICE_ARRAY:         # an int per numba type: hashing numba types is slow
            kinds.append((value.__dict__.get("_launch_words") or _array_words(value))[0])
        elif kind is int:
            if not _INT64[0] <= value < _INT64[1]:
                return None
            kinds.append(int)
        elif kind in _SCALARS:
            kinds.append(kind)
        else:
            return None
    return tuple(kinds)


def argument_types(args) -> tuple:
    """numba's types of launch arguments (what picks a compiled overload), a device array's read
    from its kept launch words: ``numba.typeof`` costs ~3 us per device array."""
    if _NUMBA is None:
        import numba

        return tuple(numba.typeof(a) for a in args)
    return tuple((value.__dict__.get("_launch_words") or _array_words(value))[1]
                 if type(value) is _DEVICE_ARRAY else _NUMBA.typeof(value) for value in args)


def _array_words(array):
    """(kind, numba type, launch words) of a device array, kept on the array: the words
    numba-cuda's ``_prepare_args`` passes for it (meminfo, parent, size, itemsize, pointer, shape,
    strides); the kind is a small int naming the numba type."""
    shim = array._strided_memory_view_shim
    numba_type = _NUMBA.typeof(array)
    kind = _TYPE_KINDS.setdefault(numba_type, len(_TYPE_KINDS))
    words = (kind, numba_type, (0, 0, shim.size, shim.dtype.itemsize, shim.ptr, *shim.shape, *array.strides))
    array.__dict__["_launch_words"] = words
    return words


_TYPE_KINDS: dict = {}                    # numba array type -> its kind (an int)


def _put_array(value, words):
    words.extend(value.__dict__["_launch_words"][2])


def _converter(numba_type):
    """A function appending a value's launch words for an argument of ``numba_type``, or None."""
    from numba.cuda import types

    if isinstance(numba_type, types.Array):
        return _put_array
    if isinstance(numba_type, types.Integer):
        ctype = getattr(ctypes, f"c_{numba_type}")
        return lambda value, words: words.append(ctype(value))
    if numba_type == types.float64:
        return lambda value, words: words.append(ctypes.c_double(value))
    if numba_type == types.float32:
        return lambda value, words: words.append(ctypes.c_float(value))
    if numba_type == types.boolean:
        return lambda value, words: words.append(value)
    return None


_NUMBA = None if simulator_active() or not ENABLED else _numba_pieces()
_DEVICE_ARRAY = _NUMBA.device_array if _NUMBA else None
_SCALARS = frozenset((bool, float, *(getattr(np, name) for name in (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
    "bool_"))))
