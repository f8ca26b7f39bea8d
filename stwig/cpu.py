"""The CPU STwig baseline behind the paper's speedups (Lin et al. 2014 §5).

The paper compares against "the state-of-the-art STwig algorithm" on the CPU and says only
that decomposition and STwig matching ("Other") are shared by both sides, and that the CPU also
builds hash tables ("(Copy &) Hash"). Our baseline is the same
pipeline compiled with ``numba.njit``: the same decomposition and exploration
(:mod:`stwig.explore`), the same head/pool chained tables built sequentially, and the same
right-deep iterator DFS (:func:`stwig.join.join_dfs`, compiled for the CPU) over every
work unit, single-threaded (``parallel=False``, the primary baseline) or with ``prange`` over
blocks of units on all cores (``parallel=True``). Registered as ``stwig-cpu``.

Like the GPU join, each compiled call is bounded by a step budget per block (adapted towards
``chunk_seconds``) so that ``timeout_s`` is checked between calls (exploration too:
:mod:`stwig.explore`; overrun about one call, tens of ms); a block out of steps keeps
its DFS state in its own slot and resumes it on the next call. The split probe applies with
``split_rows`` = 4 x the blocks of a call by default (1 block single-threaded, so in practice
only where R_1 has fewer than 4 rows; ``split_probe=False`` never splits).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from common.gpu.grid import grid_blocks
from common.gpu.timers import PhaseTimer

from .engine import STwigPipeline
from .join import (
    ARITY,
    HEAD_OFF,
    IO_STEPS,
    MASK,
    MAX_PAIRS,
    MAX_SPLIT_LEVELS,
    NROWS,
    POOL_OFF,
    SAVED_HEADER,
    SV_UNIT,
    begin_unit,
    copy_record,
    expand_unit,
    restore_state,
    run_unit,
    save_state,
    table_layout,
)
from .order import JoinPlan

_copy_record_cpu = njit(nogil=True, cache=True)(copy_record)
_begin_unit_cpu = njit(nogil=True, cache=True)(begin_unit)
_run_unit_cpu = njit(nogil=True, cache=True)(run_unit)
_save_state_cpu = njit(nogil=True, cache=True)(save_state)
_restore_state_cpu = njit(nogil=True, cache=True)(restore_state)
_expand_unit_cpu = njit(nogil=True, cache=True)(expand_unit)

#: Unit blocks per thread of the parallel variant (balances skewed units).
PARALLEL_BLOCKS_PER_THREAD = 64


@njit(nogil=True, cache=True)
def _build_tables_cpu(rel, tab, keycol, nt, pool, head):
    """Sequential build of every chained table: copy each record, prepend it to its chain."""
    for t in range(nt):
        arity = tab[t, ARITY]
        for j in range(tab[t, NROWS]):
            h = _copy_record_cpu(rel, tab, keycol, t, j, pool)
            slot = tab[t, HEAD_OFF] + (h & tab[t, MASK])
            pool[tab[t, POOL_OFF] + j * (arity + 1) + arity] = head[slot]
            head[slot] = j


@njit(nogil=True, cache=True)
def _expand_units_cpu(units, depth, urow, urec, r1, nr1, l1, nq, pool, head, tab, keycol, keyslot,
                      newcol, homomorphic, max_units):
    """One split level (count, prefix sum, fill): (rows, records, number of new units); the
    arrays are empty when there would be more than ``max_units``."""
    offsets = np.zeros(units + 1, np.int64)
    st = np.empty(nq, np.int32)
    nrow = np.zeros(0, np.int32)
    nrec = np.zeros((0, urec.shape[1]), np.int32)
    for u in range(units):
        offsets[u + 1] = offsets[u] + _expand_unit_cpu(
            u, depth, urow, urec, r1, nr1, l1, pool, head, tab, keycol, keyslot, newcol,
            homomorphic, st, False, 0, nrow, nrec)
    if offsets[units] > max_units:
        return nrow, nrec, offsets[units]
    nrow = np.empty(offsets[units], np.int32)
    nrec = np.empty((offsets[units], urec.shape[1]), np.int32)
    for u in range(units):
        _expand_unit_cpu(u, depth, urow, urec, r1, nr1, l1, pool, head, tab, keycol, keyslot,
                         newcol, homomorphic, st, True, offsets[u], nrow, nrec)
    return nrow, nrec, offsets[units]


@njit(nogil=True, cache=True)
def _run_block(b, budget, saved, cursor, end, lo, depth, urow, urec, r1, nr1, l1, nq, nt, pool,
               head, tab, keycol, keyslot, newcol, homomorphic, mode, rowvals, out):
    """Block ``b`` of a pass: resume its saved state, then take its next units, until the unit
    range ends or ``budget`` steps are spent (the state is then saved in ``saved[b]``; unit -1
    = none). Returns the mode-0 count (partial counts of a saved unit included)."""
    width = SAVED_HEADER + nq + nt
    st = np.empty(nq + nt, np.int32)
    io = np.zeros(3, np.int64)
    total = 0
    while io[IO_STEPS] < budget:
        if saved[b, SV_UNIT] >= 0:
            u = _restore_state_cpu(saved, b, st, 0, 1, io, width)
            saved[b, SV_UNIT] = -1
        else:
            u = cursor[b]
            if u >= end[b]:
                break
            cursor[b] = u + 1
            _begin_unit_cpu(u, depth, urow, urec, r1, nr1, l1, nq, nt, pool, head, tab, keyslot,
                            newcol, st, 0, 1, io)
        done, counted = _run_unit_cpu(u, lo, st, 0, 1, io, budget, depth, nq, nt, pool, head, tab, keycol,
                                      keyslot, newcol, homomorphic, mode, rowvals, out)
        total += counted
        if not done:
            _save_state_cpu(saved, b, u, st, 0, 1, io, width)
            break
    return total


@njit(nogil=True, cache=True)
def _join_blocks_cpu(budget, saved, cursor, end, lo, depth, urow, urec, r1, nr1, l1, nq, nt, pool,
                     head, tab, keycol, keyslot, newcol, homomorphic, mode, rowvals, out):
    """One bounded call of Alg. 2 on one thread, block after block."""
    total = 0
    for b in range(cursor.size):
        total += _run_block(b, budget, saved, cursor, end, lo, depth, urow, urec, r1, nr1, l1,
                            nq, nt, pool, head, tab, keycol, keyslot, newcol, homomorphic, mode,
                            rowvals, out)
    return total


@njit(nogil=True, cache=True, parallel=True)
def _join_blocks_parallel(budget, saved, cursor, end, lo, depth, urow, urec, r1, nr1, l1, nq, nt,
                          pool, head, tab, keycol, keyslot, newcol, homomorphic, mode, rowvals,
                          out):
    """One bounded call of Alg. 2 with ``prange`` over the blocks (each its own saved state)."""
    partial = np.zeros(cursor.size, np.int64)
    for b in prange(cursor.size):
        partial[b] = _run_block(b, budget, saved, cursor, end, lo, depth, urow, urec, r1, nr1,
                                l1, nq, nt, pool, head, tab, keycol, keyslot, newcol,
                                homomorphic, mode, rowvals, out)
    return partial.sum()


class CpuHashJoin:
    """Host side of one query for the CPU baseline: the same tables, units and resumable DFS as
    :class:`~stwig.join.GpuHashJoin`; each block of units keeps its own saved state."""

    def __init__(self, parallel: bool):
        self.parallel = bool(parallel)

    def load(self, plan: JoinPlan, relations, rows: list[int], homomorphic: bool,
             timer, split_rows: int | None, split_levels: int) -> None:
        """As :meth:`GpuHashJoin.load <stwig.join.GpuHashJoin.load>` on the host: one flat
        relation array, R_1 first."""
        r1 = relations
        nr1 = rows[0]
        self.timer = timer
        self.nq = plan.vertex_of_slot.size
        self.nt = plan.num_builds
        self.l1 = len(plan.twigs[0].columns)
        self.nr1 = int(nr1)
        self.r1 = r1
        self.homomorphic = bool(homomorphic)
        self.keycol, self.keyslot, self.newcol = plan.keycol, plan.keyslot, plan.newcol
        self.max_blocks = numba.get_num_threads() * PARALLEL_BLOCKS_PER_THREAD if self.parallel else 1
        with timer.phase("index"):
            self.tab, pool_size, head_size = table_layout(plan, rows)
            self.hash_pool = np.empty(max(pool_size, 1), np.int32)
            self.head = np.full(max(head_size, 1), -1, np.int32)
            _build_tables_cpu(relations, self.tab, self.keycol, self.nt, self.hash_pool, self.head)
            if split_rows is None:
                split_rows = 4 * self.max_blocks
            self.depth, self.units = 0, self.nr1
            self.urow, self.urec = _NO_OUTPUT, np.zeros((1, MAX_SPLIT_LEVELS), np.int32)
            while self.units < split_rows and self.depth < min(split_levels, self.nt) and self.units:
                urow, urec, units = _expand_units_cpu(
                    self.units, self.depth, self.urow, self.urec, r1, self.nr1, self.l1, self.nq,
                    self.hash_pool, self.head, self.tab, self.keycol, self.keyslot, self.newcol,
                    self.homomorphic, MAX_PAIRS)
                if units > MAX_PAIRS:
                    break
                self.urow, self.urec, self.units = urow, urec, int(units)
                self.depth += 1

    def start(self, lo: int, hi: int, mode: int, offsets: np.ndarray | None = None,
              rows: int = 0) -> None:
        self.lo, self.hi, self.mode = int(lo), int(hi), int(mode)
        blocks = grid_blocks(hi - lo, 1, self.max_blocks)
        bounds = lo + (hi - lo) * np.arange(blocks + 1, dtype=np.int64) // blocks
        self.cursor, self.end = bounds[:-1].copy(), bounds[1:].copy()
        self.saved = np.full((blocks, SAVED_HEADER + self.nq + self.nt), -1, np.int64)
        self.total = 0
        if mode == 1:
            self.rowvals = np.zeros(hi - lo, np.int64)
        elif mode == 2:
            self.rowvals = np.ascontiguousarray(offsets, dtype=np.int64)
        else:
            self.rowvals = _NO_ROWS
        self.rows = int(rows)
        self.out = np.empty(rows * self.nq, np.int32) if mode == 2 else _NO_OUTPUT

    def launch(self, steps: int) -> tuple[bool, int]:
        run = _join_blocks_parallel if self.parallel else _join_blocks_cpu
        with self.timer.phase("enumerate"):
            self.total += int(run(int(steps), self.saved, self.cursor, self.end, self.lo,
                                  self.depth, self.urow, self.urec, self.r1, self.nr1, self.l1,
                                  self.nq, self.nt, self.hash_pool, self.head, self.tab, self.keycol,
                                  self.keyslot, self.newcol, self.homomorphic, self.mode,
                                  self.rowvals, self.out))
        done = bool((self.cursor >= self.end).all() and (self.saved[:, SV_UNIT] < 0).all())
        return done, self.total

    def unit_counts(self) -> np.ndarray:
        return self.rowvals

    def written(self) -> np.ndarray:
        return self.out.reshape(self.rows, self.nq)


_NO_ROWS = np.zeros(1, np.int64)
_NO_OUTPUT = np.zeros(1, np.int32)


class STwigCPU(STwigPipeline):
    """The CPU STwig baseline (registry name ``stwig-cpu``); the options of
    :class:`~stwig.engine.STwigPipeline` apply too.

    Parameters
    ----------
    parallel : bool
        False: single-threaded, the paper's comparison point; True: ``prange`` over blocks of
        units on all cores.
    """

    name = "stwig-cpu"
    variant_of = "stwig"
    uses_device = False

    def __init__(self, *, parallel: bool = False, **options):
        super().__init__(**options)
        self.parallel = bool(parallel)

    def _new_join(self):
        return CpuHashJoin(self.parallel)

    def _timer(self):
        return PhaseTimer(host=True)

    def _first_chunk(self) -> int:
        return 4096

    def _first_steps(self) -> int:
        return 1 << 16
