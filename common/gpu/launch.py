"""Kernel launches without numba-cuda's general argument marshalling, and the driver's copy,
memset and event calls that ``common.gpu.runtime`` makes directly (docs/decisions.md, "Kernel
launches through the driver, not numba-cuda's dispatcher", says why).

``@jit`` is ``cuda.jit`` for a kernel whose launches (``k[grid, block](*args)``,
``k[grid, block, stream](*args)``, ``k[grid, block, stream, shared_bytes](*args)``) reuse, on a
GPU:

* the compiled overload numba's dispatcher chose on the first launch with the same argument
  kinds (each device array's numba type, each scalar's Python or numpy type): numba's own
  typing and compilation, done once per kind, never guessed;
* each device array's launch words (pointer, size, shape, strides), computed once and kept on
  the array: a numba device array never changes its pointer or shape;
* one parameter block per overload: the words packed by ``struct`` into 8-byte slots and the
  slots' pointers, handed to the driver's ``cuLaunchKernel`` (cuda-bindings) directly.

A cooperative kernel (one that calls ``cuda.cg.this_grid().sync()``) launches the same way
through ``cuLaunchCooperativeKernel``; :func:`resident_blocks` gives the largest grid it may
have. Anything else (a host array numba would copy, an integer outside int64, a ``debug``
kernel, an argument without a plain launch word) and a launch the driver refuses go through the
dispatcher. Under the simulator ``@jit`` returns the dispatcher; ``GPUSM_FAST_LAUNCH=0`` turns
the quick path off. A process uses one GPU (the compiled function is kept for the context of
the first launch); packing and launching run under one lock per kernel.
"""

from __future__ import annotations

import ctypes
import functools
import os
import struct
import threading
from typing import NamedTuple

import numpy as np
from numba import cuda

from . import kernel_cache
from .cudasim import simulator_active

ENABLED = os.environ.get("GPUSM_FAST_LAUNCH", "1") != "0"
_INT64 = (-(1 << 63), 1 << 63)


def jit(function=None, **options):
    """``cuda.jit`` for a kernel (``@jit`` or ``@jit(max_registers=64)``); on a GPU the result
    launches through :class:`Kernel`, and its compiles are kept in gpusm's disk cache
    (:mod:`common.gpu.kernel_cache`; ``cache=False`` opts out). The simulator, which compiles
    nothing, drops ``max_registers``. Every kernel made here is listed in :data:`KERNELS`."""
    cache = options.pop("cache", True)
    if simulator_active():
        options.pop("max_registers", None)

    def wrap(py_function):
        dispatcher = cuda.jit(**options)(py_function)
        if cache and not simulator_active():
            kernel_cache.enable(dispatcher, options)
        kernel = dispatcher if _NUMBA is None else Kernel(dispatcher)
        KERNELS.append(KernelRecord(py_function, dict(options), cache, kernel))
        return kernel

    return wrap if function is None else wrap(function)


class KernelRecord(NamedTuple):
    """A kernel :func:`jit` made: its Python function, compile options, whether it is cached, and
    the kernel object :func:`jit` returned."""

    py_function: object
    options: dict
    cached: bool
    kernel: object


#: every kernel made by :func:`jit` in this process (factories add theirs when first called)
KERNELS: list[KernelRecord] = []


class _NumbaPieces(NamedTuple):
    """numba-cuda's launch pieces this module relies on, and the driver calls made directly."""

    device_array: type                # numba's device array class
    dispatcher_launch: type           # numba's configured launch (types, compiles, marshals)
    typeof: object                    # numba's argument typing: typeof(value) -> type
    normalize_dims: object            # (grid, block) -> 3-tuples, checked
    launch_kernel: object             # the driver's cuLaunchKernel (cuda-bindings)
    launch_cooperative: object        # the driver's cuLaunchCooperativeKernel
    memcpy_htod: object               # the driver's cuMemcpyHtoD (common.gpu.copies.upload)
    memcpy_dtoh: object               # the driver's cuMemcpyDtoH (common.gpu.copies.download)
    memset_d32: object                # the driver's cuMemsetD32Async (common.gpu.copies.fill)
    event_record: object              # the driver's cuEventRecord (common.gpu.timers.PhaseTimer)
    event_query: object               # the driver's cuEventQuery (common.gpu.watch.LaunchWatch)
    event_synchronize: object         # the driver's cuEventSynchronize
    event_elapsed: object             # the driver's cuEventElapsedTime


def _numba_pieces() -> _NumbaPieces | None:
    """The pieces, or None when this numba-cuda lacks them (then every kernel keeps the
    dispatcher's own launches)."""
    try:
        from cuda.bindings import driver
        from numba.cuda.cudadrv.devicearray import DeviceNDArray
        from numba.cuda.dispatcher import _LaunchConfiguration
        from numba.cuda.errors import normalize_kernel_dimensions
        from numba.cuda.typing.typeof import Purpose, typeof
    except ImportError:
        return None
    return _NumbaPieces(
        device_array=DeviceNDArray, dispatcher_launch=_LaunchConfiguration,
        typeof=lambda value: typeof(value, Purpose.argument), normalize_dims=normalize_kernel_dimensions,
        launch_kernel=driver.cuLaunchKernel, launch_cooperative=driver.cuLaunchCooperativeKernel,
        memcpy_htod=driver.cuMemcpyHtoD, memcpy_dtoh=driver.cuMemcpyDtoH,
        memset_d32=driver.cuMemsetD32Async, event_record=driver.cuEventRecord, event_query=driver.cuEventQuery,
        event_synchronize=driver.cuEventSynchronize, event_elapsed=driver.cuEventElapsedTime)


class Kernel:
    """A compiled-on-demand kernel whose launches skip numba-cuda's per-argument marshalling.

    Attributes other than launching (``compile``, ``overloads``, ``py_func``...) are the
    dispatcher's."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self._last: _Parameters | None = None   # the overload of the last quick launch
        self._overloads: dict = {}        # argument kinds -> _Parameters, or False: these kinds
        #                                   always go through the dispatcher

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
    def _numba_launch(self, launch, args) -> None:
        _NUMBA.dispatcher_launch(self.dispatcher, launch.griddim, launch.blockdim, launch.stream,
                                 launch.shared)(*args)

    def _first_launch(self, kinds, launch, args) -> None:
        """Launch through numba's dispatcher (which types, compiles and marshals), then remember
        the overload it used for these argument kinds when every argument has a plain launch word
        (a debug kernel keeps numba's launches)."""
        self._numba_launch(launch, args)
        if kinds is None or kinds in self._overloads:
            return
        overload = self.dispatcher.overloads.get(argument_types(args))
        entry = False
        if overload is not None and not overload.debug:
            codes = [_word_codes(t) for t in overload.argument_types]
            if all(c is not None for c in codes):
                entry = _Parameters(overload._codelibrary.get_cufunc().handle, codes, overload.cooperative)
        self._overloads[kinds] = entry


class _Parameters:
    """A compiled overload's handle and its parameter block: every launch word packed into an
    8-byte slot of one buffer, and the array of pointers to the slots that ``cuLaunchKernel``
    takes (the driver copies the parameters during the call, so one block serves every launch).
    The block keeps the last launch's words: a launch whose arguments are the last launch's
    objects except some (same kinds) repacks only those (``put``)."""

    __slots__ = ("handle", "cooperative", "putters", "pack", "buffer", "pointers", "_keep", "arg_packs",
                 "last_args")

    def __init__(self, handle, codes, cooperative=False):
        self.handle = handle
        self.cooperative = cooperative
        self.putters = tuple(_put_array if len(code) > 1 else _put_scalar for code in codes)
        slots = [_SLOT[c] for code in codes for c in code]
        self.pack = struct.Struct("=" + "".join(slots)).pack_into
        count = max(1, len(slots))
        self.buffer = ctypes.create_string_buffer(8 * count)
        base = ctypes.addressof(self.buffer)
        self._keep = (ctypes.c_void_p * count)(*[base + 8 * i for i in range(count)])
        self.pointers = ctypes.addressof(self._keep)
        packs, slot = [], 0
        for code in codes:           # (pack_into, byte offset, is an array) of each argument
            packs.append((struct.Struct("=" + "".join(_SLOT[c] for c in code)).pack_into, 8 * slot,
                          len(code) > 1))
            slot += len(code)
        self.arg_packs = tuple(packs)
        self.last_args: tuple | None = None

    def put_all(self, args) -> None:
        words = []
        for put, value in zip(self.putters, args):
            put(value, words)
        self.pack(self.buffer, 0, *words)
        self.last_args = tuple(value.__dict__["_launch_words"] if type(value) is _DEVICE_ARRAY else value
                               for value in args)

    def put(self, changed, keys) -> None:
        """Repack the arguments at positions ``changed``, whose kinds are the last launch's;
        ``keys`` are the new arguments as :func:`_changed` keeps them."""
        for i in changed:
            pack_into, offset, is_array = self.arg_packs[i]
            if is_array:
                pack_into(self.buffer, offset, *keys[i][2])
            else:
                pack_into(self.buffer, offset, keys[i])
        self.last_args = keys


class _Launch:
    """``kernel[grid, block, stream, shared]``: calling it launches."""

    __slots__ = ("kernel", "griddim", "blockdim", "stream", "shared")

    def __init__(self, kernel, griddim, blockdim, stream, shared):
        self.kernel, self.griddim, self.blockdim = kernel, griddim, blockdim
        self.stream, self.shared = stream, shared

    def __call__(self, *args):
        kernel = self.kernel
        (gx, gy, gz), (bx, by, bz) = self.griddim, self.blockdim
        with _PACKING:
            entry = kernel._last
            seen = None if entry is None else _changed(entry.last_args, args)
            if seen is not None:
                entry.put(*seen)
            else:
                kinds = _kinds(args)
                entry = kernel._overloads.get(kinds) if kinds is not None else None
                if entry:
                    entry.put_all(args)
                kernel._last = entry or None
            if entry and entry.cooperative:
                error = _NUMBA.launch_cooperative(entry.handle, gx, gy, gz, bx, by, bz, self.shared,
                                                  stream_handle(self.stream), entry.pointers)[0]
            elif entry:
                error = _NUMBA.launch_kernel(entry.handle, gx, gy, gz, bx, by, bz, self.shared,
                                             stream_handle(self.stream), entry.pointers, 0)[0]
        if not entry:
            kernel._first_launch(kinds, self, args)
        elif error != 0:
            kernel._numba_launch(self, args)      # numba's launch raises the driver's error


def _changed(last, args):
    """(positions that differ from the last launch, the new keys) when ``args`` keep the last
    launch's argument kinds (so its overload and parameter layout serve), else None. A key is a
    scalar's value or a device array's launch words (kept on the array: the same words object
    means the same array, and the parameter block holds no reference that would keep a freed
    array's memory alive)."""
    if len(last) != len(args):
        return None
    changed, keys = [], []
    for i, value in enumerate(args):
        before = last[i]
        kind = type(value)
        if kind is _DEVICE_ARRAY:
            value = value.__dict__.get("_launch_words") or _array_words(value)
            if value is not before:
                if type(before) is not tuple or value[0] != before[0]:
                    return None
                changed.append(i)
        elif value is not before:
            if kind is not type(before) or kind is tuple:
                return None
            if kind is int:
                if not _INT64[0] <= value < _INT64[1]:
                    return None
            elif kind not in _SCALARS:
                return None
            changed.append(i)
        keys.append(value)
    return changed, keys


_PACKING = threading.Lock()               # a parameter block is packed and launched by one thread at a time
_STREAMS: dict = {}


def stream_handle(stream):
    """The driver handle of numba's stream (0: the default stream), looked up once per stream."""
    if not stream:
        return 0
    known = _STREAMS.get(id(stream))
    if known is None or known[0] is not stream:
        known = (stream, stream.handle)
        _STREAMS[id(stream)] = known          # keeps the stream alive: its id stays its own
    return known[1]


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
    from its kept launch words (no ``numba.typeof`` per device array)."""
    if _NUMBA is None:
        import numba

        return tuple(numba.typeof(a) for a in args)
    return tuple((value.__dict__.get("_launch_words") or _array_words(value))[1]
                 if type(value) is _DEVICE_ARRAY else _NUMBA.typeof(value) for value in args)


@functools.lru_cache(maxsize=None)
def _resident(kernel, signature, threads: int) -> tuple[int, dict]:
    compiled = kernel.compile(signature)
    blocks = compiled.max_cooperative_grid_blocks(threads)
    return max(1, blocks), {"registers_per_thread": compiled.regs_per_thread,
                            "local_bytes_per_thread": compiled.local_mem_per_thread,
                            "shared_bytes_per_block": compiled.shared_mem_per_block}


def resident_blocks(kernel, args, threads: int) -> tuple[int, dict]:
    """Blocks of ``kernel`` (blocks of ``threads``) the whole GPU holds at once for these
    arguments, from the compiled kernel's registers and shared memory (the largest grid of a
    cooperative launch), and its resource use; looked up once per kernel and argument types,
    later calls by the arguments' kinds, as a quick launch finds its overload (no typing of the
    arguments on the per-query path).
    1 and {} under the simulator, whose cooperative grids have one block."""
    if simulator_active():
        return 1, {}
    kinds = _kinds(args) if _NUMBA else None
    known = None if kinds is None else _RESIDENT.get((kernel, kinds, threads))
    if known is None:
        known = _resident(kernel, argument_types(args), threads)
        if kinds is not None:
            _RESIDENT[(kernel, kinds, threads)] = known
    return known


_RESIDENT: dict = {}                      # (kernel, argument kinds, threads) -> resident_blocks' answer


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


def view(array, start: int, stop: int):
    """``array[start:stop]`` of a 1-D contiguous device array, its launch words derived from the
    parent's (numba's slice checks the context and types the new array on every call)."""
    if _NUMBA is None or type(array) is not _DEVICE_ARRAY or array.ndim != 1 or not array.is_c_contiguous():
        return array[start:stop]
    if not 0 <= start <= stop <= array.size:
        raise IndexError(f"view {start}:{stop} outside a device array of {array.size} elements")
    itemsize = array.dtype.itemsize
    kind, numba_type, words = array.__dict__.get("_launch_words") or _array_words(array)
    size = stop - start
    out = _DEVICE_ARRAY(shape=(size,), strides=(itemsize,), dtype=array.dtype, stream=array.stream,
                        gpu_data=array.gpu_data.view(start * itemsize, stop * itemsize))
    out.__dict__["_launch_words"] = (kind, numba_type, (0, 0, size, itemsize, words[4] + start * itemsize,
                                                        size, itemsize))
    return out


def device_pointer(array) -> int:
    """A device array's pointer, read from its kept launch words."""
    return (array.__dict__.get("_launch_words") or _array_words(array))[2][4]


def _put_array(value, words):
    words.extend(value.__dict__["_launch_words"][2])


def _put_scalar(value, words):
    words.append(value)


#: struct codes of one launch word, each padded to an 8-byte slot
_SLOT = {"q": "q", "Q": "Q", "i": "i4x", "I": "I4x", "h": "h6x", "H": "H6x", "b": "b7x", "B": "B7x",
         "d": "d", "f": "f4x", "?": "?7x"}


def _word_codes(numba_type):
    """The struct codes of an argument's launch words (a device array: 5 + 2 x ndim 8-byte words;
    a scalar: one code), or None when numba must marshal it."""
    from numba.cuda import types

    if isinstance(numba_type, types.Array):
        return "q" * (5 + 2 * numba_type.ndim)
    if isinstance(numba_type, types.Integer):
        return {(8, True): "b", (8, False): "B", (16, True): "h", (16, False): "H", (32, True): "i",
                (32, False): "I", (64, True): "q", (64, False): "Q"}.get((numba_type.bitwidth, numba_type.signed))
    if numba_type == types.float64:
        return "d"
    if numba_type == types.float32:
        return "f"
    if numba_type == types.boolean:
        return "?"
    return None


_NUMBA = None if simulator_active() or not ENABLED else _numba_pieces()
_DEVICE_ARRAY = _NUMBA.device_array if _NUMBA else None
_SCALARS = frozenset((bool, float, *(getattr(np, name) for name in (
    "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
    "bool_"))))
