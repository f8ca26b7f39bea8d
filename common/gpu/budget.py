"""The device-memory budget of an engine: every allocation counted against a byte limit that
emulates the papers' smaller cards; an overflow raises :class:`~common.errors.DeviceOutOfMemory`."""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import weakref

import numpy as np

from ..errors import DeviceOutOfMemory
from .copies import fill
from .runtime import cuda, gpu_available


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
