"""Seconds Numba spends compiling in this process, so that a deadline can leave them out
(:meth:`common.engine.base.Engine.match_batch` runs a query again when it timed out while its kernels
compiled).

CPU functions (``numba.njit``) announce their compiles as ``numba:compile`` events; numba-cuda's
``CUDADispatcher.compile`` (0.30) announces none, so it is wrapped here: a call that finds no
compiled overload for its signature (a compile, or a load from the disk cache) is timed. A
compile nested in another (a device function typed inside its kernel) is counted once.

For CUDA kernels the clock also tells compiles from loads out of the disk cache
(:mod:`common.gpu.kernel_cache`): ``kernels_compiled`` and ``kernels_loaded`` count them,
``compiled_names`` names the kernels compiled, and ``load_seconds`` is the part of ``seconds``
spent loading.
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
        self.load_seconds = 0.0
        self.kernels_compiled = 0
        self.kernels_loaded = 0
        self.compiled_names: list[str] = []
        self._depth = 0
        self._began = 0.0

    def counts(self) -> dict:
        """Kernels compiled and loaded from the disk cache so far, and the seconds spent."""
        return {"kernels_compiled": self.kernels_compiled, "kernels_loaded": self.kernels_loaded,
                "compile_seconds": self.seconds - self.load_seconds, "load_seconds": self.load_seconds}

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
        hits = sum(self._cache_hits.values())
        began = time.perf_counter()
        compile_clock.on_start(None)
        try:
            return original(self, sig)
        finally:
            compile_clock.on_end(None)
            if sum(self._cache_hits.values()) > hits:
                compile_clock.kernels_loaded += 1
                compile_clock.load_seconds += time.perf_counter() - began
            else:
                compile_clock.kernels_compiled += 1
                compile_clock.compiled_names.append(self.py_func.__qualname__)

    compile.times_compiles = True
    CUDADispatcher.compile = compile


_time_cuda_compiles()
