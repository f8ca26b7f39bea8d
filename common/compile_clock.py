"""Seconds Numba spends compiling in this process, so that a deadline can leave them out
(:meth:`common.engine.Engine.match_batch` runs a query again when it timed out while its kernels
compiled).

CPU functions (``numba.njit``) announce their compiles as ``numba:compile`` events; numba-cuda's
``CUDADispatcher.compile`` (0.30) announces none, so it is wrapped here: a call that finds no
compiled overload for its signature (a compile, or a load from the disk cache) is timed. A
compile nested in another (a device function typed inside its kernel) is counted once.
"""

from __future__ import annotations

import functools
import time

from numba.core import config, sigutils
from numba.core import event as numba_event


class CompileClock(numba_event.Listener):
    """Total seconds of (outermost) compiles seen: ``numba:compile`` events and CUDA kernels."""

    def __init__(self):
        self.seconds = 0.0
        self._depth = 0
        self._began = 0.0

    def on_start(self, event):
        if self._depth == 0:
            self._began = time.perf_counter()
        self._depth += 1

    def on_end(self, event):
        self._depth -= 1
        if self._depth == 0:
            self.seconds += time.perf_counter() - self._began


compile_clock = CompileClock()
numba_event.register("numba:compile", compile_clock)


def _time_cuda_compiles() -> None:
    """Wrap ``CUDADispatcher.compile`` (on a GPU; the simulator compiles nothing)."""
    if config.ENABLE_CUDASIM:
        return
    from numba.cuda.dispatcher import CUDADispatcher

    original = CUDADispatcher.compile
    if getattr(original, "times_compiles", False):
        return

    @functools.wraps(original)
    def compile(self, sig):
        argtypes, _ = sigutils.normalize_signature(sig)
        if self.specialized or argtypes in self.overloads:
            return original(self, sig)              # already compiled: nothing to time
        compile_clock.on_start(None)
        try:
            return original(self, sig)
        finally:
            compile_clock.on_end(None)

    compile.times_compiles = True
    CUDADispatcher.compile = compile


_time_cuda_compiles()
