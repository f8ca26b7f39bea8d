"""The CPU STwig baseline behind the paper's speedups (Lin et al. 2014 §5; digest §6).

The paper compares against "the state-of-the-art STwig algorithm" on the CPU and says only
that decomposition and STwig matching ("Other") are shared by both sides, and that the CPU also
builds hash tables ("(Copy &) Hash"). Our baseline (digest §6, baselines A and B) is the same
pipeline compiled with ``numba.njit``: the same decomposition and exploration
(:mod:`stwig.explore`), the same head/pool chained tables built sequentially, and the same
right-deep iterator DFS (:func:`stwig.hashjoin.join_probe_row`, compiled for the CPU) over every
R_1 record, single-threaded (``parallel=False``, the primary baseline) or with ``prange`` over
blocks of R_1 records on all cores (``parallel=True``). Registered as ``stwig-cpu``.
"""

from __future__ import annotations

import contextlib
import time

import numba
import numpy as np
from numba import njit, prange

from .decompose import JoinPlan
from .engine import STwigPipeline
from .hashjoin import (ARITY, HEAD_OFF, MASK, NKEYS, NROWS, POOL_OFF, REL_OFF, join_probe_row,
                       table_layout)

_join_probe_row_cpu = njit(nogil=True, cache=True)(join_probe_row)

#: R_1 blocks per thread of the parallel variant (balances skewed probe rows).
PARALLEL_BLOCKS_PER_THREAD = 64


@njit(nogil=True, cache=True)
def _build_tables_cpu(rel, tab, keycol, nt, pool, head):
    """Sequential build of every chained table: copy each record, prepend it to its chain."""
    for t in range(nt):
        arity = tab[t, ARITY]
        for j in range(tab[t, NROWS]):
            src = tab[t, REL_OFF] + j * arity
            dst = tab[t, POOL_OFF] + j * (arity + 1)
            h = 0
            for c in range(arity):
                pool[dst + c] = rel[src + c]
            for q in range(tab[t, NKEYS]):
                h += rel[src + keycol[t, q]]
            slot = tab[t, HEAD_OFF] + (h & tab[t, MASK])
            pool[dst + arity] = head[slot]
            head[slot] = j


@njit(nogil=True, cache=True)
def _join_rows_cpu(r1, nr1, l1, lo, hi, nq, nt, pool, head, tab, keycol, keyslot, newcol,
                   homomorphic, mode, rowvals, out):
    """Alg. 2 over probe rows [lo, hi) on one thread; modes as the GPU kernel."""
    st = np.empty(nq + nt, np.int32)
    total = 0
    for i in range(lo, hi):
        out_row = rowvals[i - lo] if mode == 2 else 0
        c = _join_probe_row_cpu(i, r1, nr1, l1, nq, nt, pool, head, tab, keycol, keyslot, newcol,
                                homomorphic, st, 0, 1, mode == 2, out, out_row)
        if mode == 1:
            rowvals[i - lo] = c
        total += c
    return total


@njit(nogil=True, cache=True, parallel=True)
def _join_rows_parallel(r1, nr1, l1, lo, hi, nq, nt, pool, head, tab, keycol, keyslot, newcol,
                        homomorphic, mode, rowvals, out, blocks):
    """Alg. 2 over probe rows [lo, hi) with ``prange`` over ``blocks`` contiguous row blocks."""
    partial = np.zeros(blocks, np.int64)
    span = hi - lo
    for b in prange(blocks):
        st = np.empty(nq + nt, np.int32)
        total = 0
        for i in range(lo + span * b // blocks, lo + span * (b + 1) // blocks):
            out_row = rowvals[i - lo] if mode == 2 else 0
            c = _join_probe_row_cpu(i, r1, nr1, l1, nq, nt, pool, head, tab, keycol, keyslot,
                                    newcol, homomorphic, st, 0, 1, mode == 2, out, out_row)
            if mode == 1:
                rowvals[i - lo] = c
            total += c
        partial[b] = total
    return partial.sum()


class CpuHashJoin:
    """Host side of one query for the CPU baseline: the same tables and DFS as :class:`GpuHashJoin`."""

    def __init__(self, parallel: bool):
        self.parallel = bool(parallel)

    def load(self, plan: JoinPlan, r1, nr1: int, builds, rows: list[int], homomorphic: bool,
             timer) -> None:
        self.nq = plan.vertex_of_slot.size
        self.nt = plan.num_builds
        self.l1 = len(plan.twigs[0].columns)
        self.nr1 = int(nr1)
        self.r1 = r1
        self.homomorphic = bool(homomorphic)
        self.keycol, self.keyslot, self.newcol = plan.keycol, plan.keyslot, plan.newcol
        with timer.phase("index"):
            self.tab, pool_size, head_size, _ = table_layout(plan, rows)
            self.pool = np.empty(max(pool_size, 1), np.int32)
            self.head = np.full(max(head_size, 1), -1, np.int32)
            _build_tables_cpu(builds, self.tab, self.keycol, self.nt, self.pool, self.head)

    def _run(self, lo: int, hi: int, mode: int, rowvals, out, timer) -> int:
        args = (self.r1, self.nr1, self.l1, lo, hi, self.nq, self.nt, self.pool, self.head,
                self.tab, self.keycol, self.keyslot, self.newcol, self.homomorphic, mode,
                rowvals, out)
        with timer.phase("enumerate"):
            if self.parallel:
                blocks = max(1, min(hi - lo, numba.get_num_threads() * PARALLEL_BLOCKS_PER_THREAD))
                return int(_join_rows_parallel(*args, blocks))
            return int(_join_rows_cpu(*args))

    def count(self, lo: int, hi: int, timer) -> int:
        return self._run(lo, hi, 0, _NO_ROWS, _NO_OUTPUT, timer)

    def row_counts(self, lo: int, hi: int, timer) -> np.ndarray:
        counts = np.zeros(hi - lo, np.int64)
        self._run(lo, hi, 1, counts, _NO_OUTPUT, timer)
        return counts

    def write(self, lo: int, hi: int, offsets: np.ndarray, rows: int, timer) -> np.ndarray:
        out = np.empty(rows * self.nq, np.int32)
        self._run(lo, hi, 2, np.ascontiguousarray(offsets, dtype=np.int64), out, timer)
        return out.reshape(rows, self.nq)


_NO_ROWS = np.zeros(1, np.int64)
_NO_OUTPUT = np.zeros(1, np.int32)


class STwigCPU(STwigPipeline):
    """The CPU STwig baseline (registry name ``stwig-cpu``): ``parallel=False`` is the paper's
    single-threaded comparison point, ``parallel=True`` the multicore variant."""

    name = "stwig-cpu"

    def __init__(self, *, parallel: bool = False, join_order: str = "estimate",
                 max_relation_bytes: int = 4 << 30, collect_batch_rows: int = 1 << 22,
                 chunk_seconds: float = 0.05, device_memory_limit: int | None = None):
        super().__init__(join_order=join_order, max_relation_bytes=max_relation_bytes,
                         collect_batch_rows=collect_batch_rows, chunk_seconds=chunk_seconds,
                         device_memory_limit=device_memory_limit)
        self.parallel = bool(parallel)

    def _new_join(self):
        return CpuHashJoin(self.parallel)

    def _timer(self):
        return HostTimer()

    def _first_chunk(self) -> int:
        return 4096


class HostTimer:
    """PhaseTimer's interface with wall-clock seconds (the CPU baseline runs no device work)."""

    def __init__(self):
        self._seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def phase(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.add(name, time.perf_counter() - start)

    def add(self, name: str, seconds: float) -> None:
        self._seconds[name] = self._seconds.get(name, 0.0) + float(seconds)

    @property
    def seconds(self) -> dict[str, float]:
        return dict(self._seconds)
