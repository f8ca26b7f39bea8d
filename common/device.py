"""GPU helpers every engine shares (docs/design.md, "GPU, simulator and CPU"): the simulator-aware ``cuda``
module, device detection, device-timed phases, the device-memory budget, the deadline watch of a
running launch and kernel resources.

Engines write ``from common.device import cuda``: under Numba's CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) importing this module first installs the warp intrinsics the
simulator lacks (:mod:`common.cudasim`), so the same kernels run on a GPU and in CI.
"""

from __future__ import annotations

import contextlib
import functools
import importlib.metadata
import itertools
import math
import threading
import time
import weakref

import numpy as np
from numba import cuda

from . import cudasim
from .cudasim import FULL_MASK, WARP_SIZE, simulator_active
from .errors import DeviceOutOfMemory

cudasim.install()

from . import launch  # noqa: E402  (after the simulator's intrinsics are installed)
from .launch import jit  # noqa: E402


def gpu_available() -> bool:
    """True when a real CUDA GPU can be used (never under the simulator)."""
    return not simulator_active() and cuda.is_available()


def device_info() -> dict:
    """What ``gpusm info --device`` reports: the device, its memory and the numba-cuda version."""
    info: dict = {"numba_cuda": importlib.metadata.version("numba-cuda"),
                  "simulator": simulator_active()}
    if info["simulator"]:
        info.update(available=True, name="Numba CUDA simulator",
                    compute_capability=tuple(cuda.get_current_device().compute_capability),
                    total_memory=None, free_memory=None, multiprocessors=None)
        return info
    if not cuda.is_available():
        error = cuda.cuda_error()
        info.update(available=False, error=str(error) if error else "no CUDA GPU found")
        return info
    from numba.cuda.cudadrv import driver

    device = cuda.get_current_device()
    free, total = cuda.current_context().get_memory_info()
    name = device.name
    info.update(available=True, name=name.decode() if isinstance(name, bytes) else str(name),
                compute_capability=tuple(device.compute_capability),
                total_memory=int(total), free_memory=int(free),
                multiprocessors=int(device.MULTIPROCESSOR_COUNT),
                driver_version=tuple(driver.get_version()),
                runtime_version=tuple(cuda.runtime.get_version()))
    return info


@functools.lru_cache(maxsize=1)
def backend_label() -> str:
    """Where device work runs, for every output: the GPU's model name, or ``"simulator"``."""
    if simulator_active():
        return "simulator"
    try:
        name = cuda.get_current_device().name
        return name.decode() if isinstance(name, bytes) else str(name)
    except Exception as exc:                       # no usable device: say so, do not fail
        return f"no GPU ({type(exc).__name__})"


_SPARE_EVENTS: list = []            # timing events read already, reused (creating one is a numba call)


def _driver_event(timing: bool):
    """A numba event that also carries its driver handle (for the direct calls below)."""
    event = cuda.event(timing=timing)
    event.driver_handle = int(event.handle)
    return event


def _timing_event():
    try:
        return _SPARE_EVENTS.pop()
    except IndexError:
        return _driver_event(timing=True)


def _record(event, stream) -> None:
    """``event.record(stream)`` through the driver directly (not numba's wrapper)."""
    direct = launch._NUMBA
    if direct is None or direct.event_record(event.driver_handle, launch.stream_handle(stream))[0] != 0:
        event.record(stream)                  # numba's call raises the driver's error


def _synchronize(event) -> None:
    """Wait for ``event`` (the driver's call, not numba's wrapper)."""
    direct = launch._NUMBA
    if direct is None or direct.event_synchronize(event.driver_handle)[0] != 0:
        event.synchronize()


def _query(event) -> bool:
    """Whether the work before ``event`` has completed (the driver's call, not numba's wrapper)."""
    direct = launch._NUMBA
    if direct is not None:
        error = direct.event_query(event.driver_handle)[0]
        if error == 0:
            return True
        if int(error) == _NOT_READY:
            return False
    return event.query()                  # numba's call raises the driver's error


_NOT_READY = 600                          # CUDA_ERROR_NOT_READY


def _elapsed_seconds(start, end) -> float:
    """Seconds between two recorded events, once ``end`` has completed."""
    direct = launch._NUMBA
    if direct is not None:
        error, ms = direct.event_elapsed(start.driver_handle, end.driver_handle)
        if error == 0:
            return ms / 1000.0
    return start.elapsed_time(end) / 1000.0


class PhaseTimer:
    """Seconds per named phase, taken with CUDA events on ``stream`` around the work.

    ``with timer.phase("filter"): ...`` records an event pair; entering a phase again adds to it.
    Reading :attr:`seconds` synchronises on the recorded events, so phases cost no host sync
    while they run. The simulator's events carry no time (numba-cuda returns -1), so there the
    phases are host wall-clock (``time.perf_counter``), which is what simulated work costs.
    """

    def __init__(self, stream=0):
        self.stream = stream
        self._use_events = not simulator_active()
        self._pending: list[tuple[str, object, object]] = []
        self._seconds: dict[str, float] = {}

    def phase(self, name: str) -> "_Phase":
        """``with timer.phase(name):`` times the block (a plain class: a generator-based context
        manager costs a few us of host time per use)."""
        return _Phase(self, name)

    def add(self, name: str, seconds: float) -> None:
        """Add host-measured seconds to a phase (e.g. work that never touches the device)."""
        self._seconds[name] = self._seconds.get(name, 0.0) + float(seconds)

    @property
    def seconds(self) -> dict[str, float]:
        if self._pending:                     # one stream: the last event ends after the others
            _synchronize(self._pending[-1][2])
        for name, start, end in self._pending:
            self.add(name, _elapsed_seconds(start, end))
            _SPARE_EVENTS.extend((start, end))
        self._pending.clear()
        return dict(self._seconds)

    def reset(self) -> None:
        self._pending.clear()
        self._seconds.clear()


class _Phase:
    """One timed block of a :class:`PhaseTimer`."""

    __slots__ = ("timer", "name", "start")

    def __init__(self, timer: PhaseTimer, name: str):
        self.timer, self.name = timer, name

    def __enter__(self):
        if self.timer._use_events:
            self.start = _timing_event()
            _record(self.start, self.timer.stream)
        else:
            self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> bool:
        timer = self.timer
        if timer._use_events:
            end = _timing_event()
            _record(end, timer.stream)
            timer._pending.append((self.name, self.start, end))
        else:
            timer.add(self.name, time.perf_counter() - self.start)
        return False


DeviceTimer = PhaseTimer


def _is_out_of_memory(exc: BaseException) -> bool:
    """Whether an allocation failure means the device (or, simulated, the host) is out of memory."""
    if isinstance(exc, MemoryError):
        return True
    code = getattr(exc, "code", None)
    return code is not None and (getattr(code, "name", "") == "CUDA_ERROR_OUT_OF_MEMORY"
                                 or int(code) == 2)


class DeviceMemoryBudget:
    """Accounts every device allocation of an engine against a byte limit.

    ``limit_bytes`` emulates a smaller card (the papers' 11/12/24 GB GPUs); ``None`` means the
    card's free memory when the budget is created on a GPU, and no limit under the simulator.
    An allocation that would pass the limit, or that the driver refuses for lack of memory,
    raises :class:`common.errors.DeviceOutOfMemory` naming what was being allocated. Arrays are
    tracked by identity: :meth:`free` (or leaving a :meth:`scope`) stops counting one, and an
    array that is garbage-collected is uncounted automatically.

    :attr:`peak` is a per-query figure (:meth:`reset_peak` at each query's start): bytes kept in a
    :class:`BufferPool` count only as far as the current query asked for them (``slack`` = bytes
    allocated but not demanded by this query), so the same query reports the same peak whatever
    ran before it.
    """

    def __init__(self, limit_bytes: int | None = None):
        if limit_bytes is None and gpu_available():
            limit_bytes = int(cuda.current_context().get_memory_info()[0])
        if limit_bytes is not None and limit_bytes < 0:
            raise ValueError(f"limit_bytes must be non-negative, got {limit_bytes}")
        self.limit = None if limit_bytes is None else int(limit_bytes)
        self._lock = threading.RLock()      # re-entrant: a finalizer may run inside
        self._live: dict[int, tuple[int, int, str, weakref.finalize]] = {}
        self._tokens = itertools.count()
        self._in_use = 0
        self._peak = 0
        self._slack = 0                     # pooled bytes the current query has not asked for
        self._pools: list[weakref.ref] = []
        self._scopes: list[list[int]] = []

    @property
    def in_use(self) -> int:
        return self._in_use

    @property
    def peak(self) -> int:
        return self._peak

    def reset_peak(self) -> None:
        """Start a new query: pooled buffers count as not demanded until it asks for them."""
        with self._lock:
            for ref in self._pools:
                pool = ref()
                if pool is not None:
                    self._slack += pool._forget_demand()
            self._peak = self._in_use - self._slack

    def _add_slack(self, nbytes: int) -> None:
        with self._lock:
            self._slack += nbytes
            self._peak = max(self._peak, self._in_use - self._slack)

    def live(self) -> dict[str, int]:
        """Bytes in use per allocation label."""
        out: dict[str, int] = {}
        with self._lock:
            for nbytes, _, what, _ in self._live.values():
                out[what] = out.get(what, 0) + nbytes
        return out

    def _reserve(self, nbytes: int, what: str) -> None:
        with self._lock:
            if self.limit is not None and self._in_use + nbytes > self.limit:
                raise DeviceOutOfMemory(nbytes, self._in_use, self.limit, what)
            self._in_use += nbytes
            self._peak = max(self._peak, self._in_use - self._slack)

    def _unreserve(self, nbytes: int) -> None:
        with self._lock:
            self._in_use -= nbytes

    def _allocate(self, nbytes: int, what: str, make):
        self._reserve(nbytes, what)
        try:
            array = make()
        except Exception as exc:
            self._unreserve(nbytes)
            if _is_out_of_memory(exc):
                limit = self.limit if self.limit is not None else self._in_use
                raise DeviceOutOfMemory(nbytes, self._in_use, limit, what) from exc
            raise
        token = next(self._tokens)
        finalizer = weakref.finalize(array, self._forget, id(array), token)
        with self._lock:
            self._live[id(array)] = (nbytes, token, what, finalizer)
        if self._scopes:
            self._scopes[-1].append(id(array))
        return array

    def _forget(self, key: int, token: int) -> None:
        with self._lock:
            entry = self._live.get(key)
            if entry is not None and entry[1] == token:
                del self._live[key]
                self._in_use -= entry[0]

    def device_array(self, shape, dtype, what: str = "", stream=0):
        """An uninitialised device array, counted against the budget."""
        dtype = np.dtype(dtype)
        shape = tuple(int(s) for s in np.atleast_1d(shape))
        nbytes = math.prod(shape) * dtype.itemsize
        return self._allocate(nbytes, what,
                              lambda: cuda.device_array(shape, dtype=dtype, stream=stream))

    def zeros(self, shape, dtype, what: str = "", stream=0):
        """A device array of zeros, counted against the budget (filled on the device)."""
        array = self.device_array(shape, dtype, what, stream)
        fill(array, 0, stream)
        return array

    def to_device(self, host_array, what: str = "", stream=0):
        """Copy a host array to a new device array, counted against the budget."""
        host_array = np.ascontiguousarray(host_array)
        return self._allocate(host_array.nbytes, what,
                              lambda: cuda.to_device(host_array, stream=stream))

    def free(self, array) -> None:
        """Stop counting ``array`` (the memory goes back once no reference to it is left)."""
        with self._lock:
            entry = self._live.pop(id(array), None)
            if entry is None:
                raise KeyError("array was not allocated through this budget or was freed")
            self._in_use -= entry[0]
        entry[3].detach()

    @contextlib.contextmanager
    def scope(self):
        """Free, on exit, every array allocated through the budget inside the block."""
        self._scopes.append([])
        try:
            yield self
        finally:
            for key in self._scopes.pop():
                with self._lock:
                    entry = self._live.pop(key, None)
                    if entry is not None:
                        self._in_use -= entry[0]
                if entry is not None:
                    entry[3].detach()


class BufferPool:
    """Named grow-and-reuse device buffers of one engine, allocated through its budget.

    ``get(name, size, dtype)`` returns a buffer of at least ``size`` elements, reusing the one
    kept from earlier queries or replacing it by one ``growth`` times larger (the old contents
    are kept for the first ``keep`` elements). Each query's demand (the largest size it asked
    for per buffer) is what the budget's peak counts, not the capacity kept from an earlier,
    larger query. :meth:`scan` does the same for a :class:`common.scan.ScanWorkspace`.
    """

    def __init__(self, budget: DeviceMemoryBudget, prefix: str = "", growth: float = 1.5):
        self.budget = budget
        self.prefix = prefix
        self.growth = float(growth)
        self._arrays: dict[str, object] = {}
        self._views: dict[tuple, object] = {}    # (name, shape) -> view of the current buffer
        self._demand: dict[str, int] = {}        # bytes asked for by the current query
        self._scans: dict[str, object] = {}
        #: name -> (buffer, dtype as asked, elements, itemsize): get's quick path
        self._kept: dict[str, tuple] = {}
        budget._pools.append(weakref.ref(self))

    def _forget_demand(self) -> int:
        """A new query begins: return the bytes demanded so far (they become slack)."""
        total = sum(self._demand.values())
        self._demand = dict.fromkeys(self._demand, 0)
        return total

    def _demand_bytes(self, name: str, nbytes: int) -> None:
        old = self._demand.get(name, 0)
        if nbytes > old:
            self._demand[name] = nbytes
            self.budget._add_slack(old - nbytes)

    def get(self, name: str, size, dtype, keep: int = 0):
        """The whole buffer (at least ``size`` elements) for an int ``size``; for a shape, a view
        of its first elements in that shape."""
        if type(size) is int:                # the common case: a buffer kept at least this long
            kept = self._kept.get(name)
            if kept is not None and kept[1] is dtype and kept[2] >= size:
                self._demand_bytes(name, max(size, 1) * kept[3])
                return kept[0]
        requested = dtype
        dtype = np.dtype(dtype)
        shape = (int(size),) if isinstance(size, (int, np.integer)) else tuple(int(s) for s in size)
        elements = max(math.prod(shape), 1)
        current = self._arrays.get(name)
        if current is None or current.size < elements or current.dtype != dtype:
            capacity = elements if current is None else max(elements, int(current.size * self.growth))
            if current is not None and not keep:
                self.free(name)
            array = self.budget.device_array(capacity, dtype, what=f"{self.prefix}{name}")
            self.budget._add_slack(array.nbytes)
            if current is not None and keep:
                array[:keep].copy_to_device(current[:keep])
                self.free(name)
            self._arrays[name] = array
            self._demand.setdefault(name, 0)
            current = array
        self._demand_bytes(name, elements * dtype.itemsize)
        if len(shape) == 1:
            self._kept[name] = (current, requested, current.size, dtype.itemsize)
            return current               # the whole buffer: slicing costs as much as a launch
        return self._view(name, current, shape)

    def _view(self, name: str, current, shape: tuple):
        """``current[:prod(shape)]`` in ``shape``, made once per (buffer, shape): a slice or a
        reshape of a device array costs more host time than a launch."""
        view = self._views.get((name, shape))
        if view is None or view[0] is not current:
            if len(self._views) > 256:
                self._views.clear()
            view = (current, current[:math.prod(shape)].reshape(shape))
            self._views[(name, shape)] = view
        return view[1]

    def upload(self, name: str, host):
        """``host`` copied into the pooled buffer ``name``: a view of its first elements, host's shape."""
        host = np.ascontiguousarray(host)
        shape = host.shape
        current = self.get(name, host.size, host.dtype)
        upload(current, host)
        return self._view(name, current, shape)

    def scan(self, size: int, dtype=np.int64):
        """A :class:`common.scan.ScanWorkspace` for scans of at least ``size`` elements."""
        from .scan import ScanWorkspace

        key = np.dtype(dtype).str
        workspace = self._scans.get(key)
        if workspace is None or workspace.capacity < size:
            if workspace is not None:
                workspace.free(self.budget)
            capacity = size if workspace is None else max(int(size), int(workspace.capacity * self.growth))
            workspace = ScanWorkspace(capacity, dtype, self.budget)
            self._scans[key] = workspace
        return workspace

    def free(self, name: str) -> None:
        """Give buffer ``name`` back to the budget."""
        array = self._arrays.pop(name, None)
        self._kept.pop(name, None)
        if array is None:
            return
        self._views = {key: view for key, view in self._views.items() if key[0] != name}
        demanded = self._demand.pop(name, 0)
        self.budget._add_slack(demanded - array.nbytes)
        self.budget.free(array)

    def free_all(self) -> None:
        for name in list(self._arrays):
            self.free(name)
        for workspace in self._scans.values():
            workspace.free(self.budget)
        self._scans.clear()

    def __contains__(self, name: str) -> bool:
        return name in self._arrays


def _check_copy(d_array, host: np.ndarray, verb: str, start: int = 0) -> None:
    if host.dtype != d_array.dtype:
        raise TypeError(f"{verb}: host dtype {host.dtype} differs from the device array's {d_array.dtype}")
    if start < 0 or start + host.size > d_array.size:
        raise ValueError(f"{verb}: {host.size} elements do not fit a device array of {d_array.size} "
                         f"at element {start}")
    if not host.flags.c_contiguous or not d_array.is_c_contiguous():
        raise ValueError(f"{verb} needs contiguous arrays")


def upload(d_target, host, start: int = 0) -> None:
    """Copy ``host`` into ``d_target[start:start + host.size]`` (same dtype, both contiguous;
    returns once ``host`` may be reused). On a GPU this calls the driver directly, not numba's
    ``copy_to_device``, which slices the device array and re-checks both arrays
    (docs/decisions.md, "Small copies through the driver")."""
    host = np.ascontiguousarray(host)
    _check_copy(d_target, host, "upload", start)
    if host.size == 0:
        return
    direct = launch._NUMBA                 # None under the simulator or GPUSM_FAST_LAUNCH=0
    if direct is not None and direct.memcpy_htod(launch.device_pointer(d_target) + start * host.itemsize,
                                                 host.ctypes.data, host.nbytes)[0] == 0:
        return                           # else numba's path below raises its own error
    flat = d_target if d_target.ndim == 1 else d_target.reshape(d_target.size)
    flat[start:start + host.size].copy_to_device(host.reshape(-1))


def download(d_source, host: np.ndarray) -> np.ndarray:
    """Copy the first ``host.size`` elements of ``d_source`` into ``host`` (same dtype, both
    contiguous) after the work queued before it (default stream); returns ``host``. On a GPU
    this calls the driver directly, not numba's ``copy_to_host``."""
    _check_copy(d_source, host, "download")
    if host.size == 0:
        return host
    direct = launch._NUMBA
    if direct is not None and direct.memcpy_dtoh(host.ctypes.data, launch.device_pointer(d_source),
                                                 host.nbytes)[0] == 0:
        return host
    _first(d_source, host.size).copy_to_host(host.reshape(-1))
    return host


def _first(d_array, elements: int):
    """The first ``elements`` of a contiguous device array, flat (numba's copies want equal shapes)."""
    flat = d_array if d_array.ndim == 1 else d_array.reshape(d_array.size)
    return flat if elements == flat.size else flat[:elements]


@jit
def _fill_kernel(out, value, count):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < count:
        out[i] = value
        i += stride


FILL_THREADS = 32 if simulator_active() else 256


def _repeated_word(value, dtype) -> int | None:
    """The 32-bit word that ``value`` of ``dtype`` repeats (a 4- or 8-byte type), else None."""
    if dtype.itemsize not in (4, 8):
        return None
    if type(value) is int and dtype.kind in "iu" and (value == 0 or (value == -1 and dtype.kind == "i")):
        return 0 if value == 0 else 0xFFFFFFFF      # the common cases, without numpy
    words = np.array([value], dtype=dtype).view(np.uint32)
    return int(words[0]) if (words == words[0]).all() else None


def fill(d_array, value, stream=0, count: int | None = None) -> None:
    """Set the first ``count`` elements (default: all) of a contiguous device array to ``value``:
    one driver memset when the value's bytes repeat a 32-bit word (0 and -1 of any 4- or 8-byte
    type), else one launch."""
    count = d_array.size if count is None else int(count)
    if not 0 <= count <= d_array.size:
        raise ValueError(f"fill count {count} outside the array's {d_array.size} elements")
    if count == 0:
        return
    direct = launch._NUMBA
    if direct is not None:
        dtype = d_array.dtype
        word = _repeated_word(value, dtype)
        if word is not None and direct.memset_d32(
                launch.device_pointer(d_array), word, count * (dtype.itemsize // 4),
                launch.stream_handle(stream))[0] == 0:
            return
    flat = d_array if d_array.ndim == 1 else d_array.reshape(d_array.size)   # a reshape costs as much as a launch
    blocks = min(1024, (count + FILL_THREADS - 1) // FILL_THREADS)
    _fill_kernel[blocks, FILL_THREADS, stream](flat, value, count)


@jit
def _clear_bit_kernel(masks, bit, keep, lo, hi, counter, index):
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < masks.size:
        if (i < lo or i >= hi) and (masks[i] & bit) != 0:
            masks[i] = masks[i] & keep
            if index >= 0:
                cuda.atomic.add(counter, index, -1)
        i += stride


def clear_bit_outside(d_masks, bit: int, lo: int, hi: int, counter=None, index: int = -1) -> None:
    """Clear bit ``bit`` of ``d_masks[v]`` for every v outside ``[lo, hi)`` (a root range,
    :mod:`common.roots`), subtracting one from ``counter[index]`` per bit cleared when given."""
    if d_masks.size == 0:
        return
    kind = np.dtype(d_masks.dtype).type
    width = 8 * np.dtype(d_masks.dtype).itemsize
    one = 1 << bit
    keep = kind(((1 << width) - 1) & ~one) if np.dtype(d_masks.dtype).kind == "u" else kind(~one)
    if counter is None:
        counter, index = d_masks, -1
    blocks = min(1024, (d_masks.size + FILL_THREADS - 1) // FILL_THREADS)
    _clear_bit_kernel[blocks, FILL_THREADS](d_masks, kind(one), keep, lo, hi, counter, index)


SPIN_S = 1e-3       # LaunchWatch polls without sleeping for this long after a launch


class LaunchWatch:
    """Stops a running kernel launch at a host deadline (the engines' ``timeout_s``).

    :meth:`run` launches a kernel on the watch's own stream and polls a completion event; once
    the deadline passes it copies 1 from a pinned host word into ``flag`` (a one-element int64
    device array the kernel polls) through a second stream, so the copy engine writes the flag
    while the kernel runs. The kernel must read the flag with an atomic (a plain load may be
    served from a stale L1 line) and leave when it is set; the caller clears it before the next
    watched launch. The simulator runs a launch synchronously, so there a thread raises the
    flag. Polling spins for the first ``SPIN_S`` (a sleep, however short, lasts longer than a
    small query's whole launch), then backs off from 20 us to 1 ms between event
    queries. The host time spent
    enqueueing the launch (Numba compiles a kernel on its first launch with new argument types)
    moves the deadline back: a cold kernel's compilation is not charged to the search. Launches
    without a deadline should not go through the watch (no stream, no polling).
    """

    def __init__(self):
        self._one = cuda.pinned_array(1, np.int64)
        self._one[0] = 1
        self._sim = simulator_active()
        self.stream = 0 if self._sim else cuda.stream()      # the watched launches
        self._side = 0 if self._sim else cuda.stream()       # the flag's copy
        self._done = None if self._sim else _driver_event(timing=False)

    def _raise(self, flag) -> None:
        flag.copy_to_device(self._one, stream=self._side)

    def _run_simulated(self, launch_all, deadline, flag) -> bool:
        """The simulator's launch returns when the kernel has ended, so a thread raises the flag.
        The simulator's atomics are read-modify-writes under a lock that a plain write does not
        take: a write landing inside a kernel's atomic read of the flag is overwritten with the
        old value, so the thread writes the flag again every millisecond until the launch ends."""
        ended, raised = threading.Event(), threading.Event()

        def keep_raising():
            if ended.wait(max(0.0, deadline - time.perf_counter())):
                return
            raised.set()
            while True:
                self._raise(flag)
                if ended.wait(1e-3):
                    return

        raiser = threading.Thread(target=keep_raising, name="LaunchWatch", daemon=True)
        raiser.start()
        try:
            launch_all()
        finally:
            ended.set()
            raiser.join()
        return raised.is_set()

    def run(self, kernel, griddim, blockdim, args, deadline: float, flag) -> bool:
        """Launch ``kernel[griddim, blockdim]`` with ``args``, raise ``flag`` once
        ``time.perf_counter()`` passes ``deadline``, return after the launch ends; True when the
        flag was raised (the launch's results are then partial), whether or not the kernel had
        already finished its work."""
        return self.run_all([(kernel, griddim, blockdim, args)], deadline, flag)

    def run_all(self, launches, deadline: float, flag) -> bool:
        """:meth:`run` for launches ``(kernel, griddim, blockdim, args)`` queued back to back on
        the watch's stream (no host round trip between them); every kernel must leave at once
        when it starts with the flag raised."""
        if flag.size != 1 or flag.dtype != np.int64:
            raise ValueError(f"flag must be a one-element int64 device array, got {flag.dtype} x {flag.size}")

        def launch_all():
            for kernel, griddim, blockdim, args in launches:
                kernel[griddim, blockdim, self.stream](*args)

        if self._sim:
            return self._run_simulated(launch_all, deadline, flag)
        enqueue = time.perf_counter()
        launch_all()
        # a kernel's first launch with new argument types compiles it: that is not search time
        deadline += time.perf_counter() - enqueue
        _record(self._done, self.stream)
        raised = False
        spin_until = time.perf_counter() + SPIN_S
        pause = 2e-5
        while not _query(self._done):
            now = time.perf_counter()
            if not raised and now > deadline:
                self._raise(flag)
                raised = True
            if now > spin_until:             # a short launch is caught while spinning
                time.sleep(pause)
                pause = min(2 * pause, 1e-3)
        if raised:
            self._side.synchronize()        # the flag has landed before the caller clears it
        return raised


_RESOURCE_GETTERS = {
    "registers_per_thread": "get_regs_per_thread",
    "shared_bytes_per_block": "get_shared_mem_per_block",
    "local_bytes_per_thread": "get_local_mem_per_thread",
    "const_bytes": "get_const_mem_size",
    "max_threads_per_block": "get_max_threads_per_block",
}


def kernel_resources(kernel, *signature_args) -> dict:
    """Registers, static shared memory, local (spill) memory, constant memory and the launchable
    block size of ``kernel`` compiled for ``signature_args`` (example arguments or Numba types),
    read from numba-cuda's dispatcher (``get_regs_per_thread`` etc.). Empty under the simulator,
    which compiles nothing."""
    if simulator_active():
        return {}
    from numba.core import types as core_types
    from numba.cuda import types as cuda_types

    type_classes = (cuda_types.Type, core_types.Type)
    argtypes = tuple(a if isinstance(a, type_classes) else kernel.typeof_pyval(a)
                     for a in signature_args)
    kernel.compile(argtypes)
    return {key: int(getattr(kernel, getter)()[argtypes])
            for key, getter in _RESOURCE_GETTERS.items()}


__all__ = [
    "cuda", "jit", "FULL_MASK", "WARP_SIZE", "simulator_active", "gpu_available", "device_info",
    "PhaseTimer", "DeviceTimer", "DeviceMemoryBudget", "BufferPool", "LaunchWatch", "fill", "kernel_resources",
]
