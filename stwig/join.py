"""GPU chained hash tables and the right-deep, fully pipelined join (Lin et al. 2014 §4.1-4.4, Alg. 2).

* **Hash tables (§4.2).** One chained table per build relation R_2..R_n, flattened into ``pool``
  (record j of table k at ``pool_off + j*(l+1)``: its l columns, then the next record of its
  chain) and ``head`` (``2^floor(log2 |R|)`` chain heads per table, -1 = none); one thread per
  record prepends it with ``atomic.exch``; one launch builds all tables. Both sides hash the sum
  of the *key* columns (a probe only knows those).
* **Join (§4.3, Alg. 2).** R_1 (attribute-major, §4.4) streams through the sub-joins in the
  plan's order; persistent threads take work units through a global cursor and run Alg. 2's DFS,
  ``imResult`` and ``itArray`` in dynamic shared memory laid out ``[slot][thread]`` (§4.4).
* **Injectivity, bounded launches, split probe, output** (our additions; docs/decisions.md,
  "STwig"): a newly bound column equal to a bound vertex is skipped unless ``homomorphic``; a
  thread out of its step budget saves its DFS state to a double-buffered queue the next launch
  resumes; a small R_1 is split into (R_1 row, build record) units up to ``split_levels`` deep;
  mode 0 counts, mode 1 writes each unit's count, mode 2 writes each unit's embeddings from the
  offsets the host computed from mode 1.

:func:`begin_unit`, :func:`run_unit` (around :func:`join_dfs`), :func:`save_state`,
:func:`restore_state` and :func:`expand_unit` are compiled as CUDA device functions here and with
``numba.njit`` by the CPU baseline (:mod:`stwig.cpu`), so both run the same algorithm.
"""

from __future__ import annotations

import numba
import numpy as np
from numba.extending import register_jitable

from common.errors import DeviceOutOfMemory
from common.gpu.copies import download, fill, upload
from common.gpu.grid import grid_blocks
from common.gpu.pool import BufferPool
from common.gpu.runtime import cuda, jit, simulator_active
from common.gpu.scan import block_exclusive_scan, exclusive_scan

from .order import JoinPlan

# Columns of the per-table metadata array ``tab`` (int64, one row per build relation).
ARITY, POOL_OFF, HEAD_OFF, MASK, NKEYS, NNEW, FIRST_NEW, REL_OFF, ROW_START, NROWS = range(10)
TAB_FIELDS = 10

#: Threads per block of the join and build kernels (the simulator runs one Python thread each).
JOIN_THREADS = 32 if simulator_active() else 256
#: Dynamic shared memory a block may use without an opt-in attribute (bytes).
SHARED_LIMIT = 48 * 1024


def table_layout(plan: JoinPlan, rows: list[int]) -> tuple[np.ndarray, int, int]:
    """(tab, pool entries, head entries) of the build tables in join order.

    ``rows[t]``: rows of STwig t's relation; the relations lie in one flat array as the
    explorers write them: R_1 (``l1 * rows[0]`` entries) first, then R_2.. row-major in STwig
    order, so ``tab[k, REL_OFF]`` is an offset into that array."""
    nt = plan.num_builds
    arity = [len(t.columns) for t in plan.twigs]
    rel_off = np.zeros(len(plan.twigs), np.int64)
    rel_off[0] = 0
    for t in range(1, len(plan.twigs)):
        rel_off[t] = rel_off[t - 1] + int(rows[t - 1]) * arity[t - 1]
    tab = np.zeros((max(nt, 1), TAB_FIELDS), np.int64)
    pool = head = start = 0
    for k, t in enumerate(plan.build_order):
        nrows = int(rows[t])
        buckets = 1 << (max(nrows, 1).bit_length() - 1)
        tab[k] = (arity[t], pool, head, buckets - 1, plan.nkeys[k], plan.nnew[k],
                  plan.first_new_slot[k], rel_off[t], start, nrows)
        pool += nrows * (arity[t] + 1)
        head += buckets
        start += nrows
    return tab, pool, head


#: Rows of the fixed-shape plan block uploaded per query (build tables; a query has <= 32
#: vertices, so <= 31 build relations) and its key/new-column width (columns of an STwig).
MAX_TABLES = 32
MAX_COLS = 32
# Offsets of the plan block (int64): tab (MAX_TABLES x TAB_FIELDS), then keycol, keyslot and
# newcol (MAX_TABLES x MAX_COLS each). Its shape never changes, so its device views are made once.
PLAN_TAB = 0
PLAN_KEYCOL = PLAN_TAB + MAX_TABLES * TAB_FIELDS
PLAN_KEYSLOT = PLAN_KEYCOL + MAX_TABLES * MAX_COLS
PLAN_NEWCOL = PLAN_KEYSLOT + MAX_TABLES * MAX_COLS
PLAN_SIZE = PLAN_NEWCOL + MAX_TABLES * MAX_COLS


def plan_block(plan: JoinPlan, tab: np.ndarray) -> np.ndarray:
    """The join's metadata (tab, keycol, keyslot, newcol) padded into one PLAN_SIZE int64 array."""
    block = np.zeros(PLAN_SIZE, np.int64)
    block[PLAN_TAB:PLAN_KEYCOL].reshape(MAX_TABLES, TAB_FIELDS)[:tab.shape[0]] = tab
    for start, part in ((PLAN_KEYCOL, plan.keycol), (PLAN_KEYSLOT, plan.keyslot),
                        (PLAN_NEWCOL, plan.newcol)):
        block[start:start + MAX_TABLES * MAX_COLS].reshape(MAX_TABLES, MAX_COLS)[
            :part.shape[0], :part.shape[1]] = part
    return block


# Registers of one thread's DFS (``io``, int64): depth, results of the unit so far, steps spent.
IO_DEPTH, IO_COUNT, IO_STEPS = range(3)
#: A saved DFS state is a row of int64: unit, depth, count, then imResult and itArray.
SV_UNIT, SV_DEPTH, SV_COUNT = range(3)
SAVED_HEADER = 3
# Fields of the join control array (int64): new-unit cursor, count, take cursors, saved counts.
C_CURSOR, C_SUM, C_TAKE, C_SAVED = 0, 1, 2, 4
CTRL_FIELDS = 8          # 6 used; a power of two, the size of its reused buffer (no slicing)
#: Most split-probe units kept; a split level that would make more is not taken.
MAX_PAIRS = 1 << 24
#: Columns of the split units' record array (the most split levels).
MAX_SPLIT_LEVELS = 8
#: Scratch imResult slots of a split pass (the engines take queries of <= 32 vertices).
MAX_QUERY_VERTICES = 32


def copy_record(rel, tab, keycol, t, j, pool):
    """Copy build record j of table t into its pool slot; returns its key hash (the sum of its
    key columns; the caller links the slot into chain ``hash & mask``)."""
    arity = tab[t, ARITY]
    src = tab[t, REL_OFF] + j * arity
    dst = tab[t, POOL_OFF] + j * (arity + 1)
    h = 0
    for c in range(arity):
        pool[dst + c] = rel[src + c]
    for q in range(tab[t, NKEYS]):
        h += rel[src + keycol[t, q]]
    return h


def begin_unit(u, depth, urow, urec, r1, nr1, l1, nq, nt, pool, head, tab, keyslot, newcol,
               st, base, stride, io):
    """Load work unit ``u`` into imResult and point the DFS at its first open sub-join.

    With ``depth`` 0 a unit is R_1 row ``u``; a split unit is R_1 row urow[u] with the records
    urec[u, k] of build tables k < depth, whose new columns are bound here (the DFS then
    starts at sub-join ``depth``). ``st[base + s*stride]`` is imResult slot s (s < nq),
    ``st[base + (nq+k)*stride]`` itArray[k]."""
    i = urow[u] if depth > 0 else u
    for c in range(l1):
        st[base + c * stride] = r1[c * nr1 + i]
    for k in range(depth):
        rb = tab[k, POOL_OFF] + urec[u, k] * (tab[k, ARITY] + 1)
        nbound = tab[k, FIRST_NEW]
        for j in range(tab[k, NNEW]):
            st[base + (nbound + j) * stride] = pool[rb + newcol[k, j]]
    d = depth
    if d < nt:
        h = 0
        for j in range(tab[d, NKEYS]):
            h += st[base + keyslot[d, j] * stride]
        st[base + (nq + d) * stride] = head[tab[d, HEAD_OFF] + (h & tab[d, MASK])]
    io[IO_DEPTH] = d
    io[IO_COUNT] = 0
    io[IO_STEPS] += 1


@register_jitable
def join_dfs(st, base, stride, io, budget, dmin, nq, nt, pool, head, tab, keycol, keyslot, newcol,
             homomorphic, emit, out, out_row):
    """Alg. 2's DFS for one unit, resumed from (``io[IO_DEPTH]``, imResult, itArray) and run
    until the unit is exhausted (returns True) or ``io[IO_STEPS]`` reaches ``budget`` (returns
    False with the state saved in place: itArray[d] is the next chain record to examine).

    One step = one chain record examined. ``io[IO_COUNT]`` accumulates the unit's results; with
    ``emit`` result c is written (slot order) at row ``out_row + c`` of ``out`` (nq a row).
    ``dmin``: the shallowest sub-join the unit owns (its split depth)."""
    d = io[IO_DEPTH]
    count = io[IO_COUNT]
    steps = io[IO_STEPS]
    if d == nt:                               # a unit split down to the last table: one result
        if emit:
            o = out_row * nq
            for s in range(nq):
                out[o + s] = st[base + s * stride]
        io[IO_COUNT] = count + 1
        return True
    while True:
        rec = st[base + (nq + d) * stride]
        arity = tab[d, ARITY]
        poff = tab[d, POOL_OFF]
        nnew = tab[d, NNEW]
        nbound = tab[d, FIRST_NEW]
        while rec >= 0:                       # match()/next(): the next record with equal keys
            if steps >= budget:
                st[base + (nq + d) * stride] = rec
                io[IO_DEPTH] = d
                io[IO_COUNT] = count
                io[IO_STEPS] = steps
                return False
            steps += 1
            rb = poff + rec * (arity + 1)
            ok = True
            for j in range(tab[d, NKEYS]):
                if pool[rb + keycol[d, j]] != st[base + keyslot[d, j] * stride]:
                    ok = False
                    break
            if ok and not homomorphic:
                for j in range(nnew):
                    w = pool[rb + newcol[d, j]]
                    for s in range(nbound):
                        if st[base + s * stride] == w:
                            ok = False
                            break
                    if not ok:
                        break
            if ok:
                break
            rec = pool[rb + arity]
        if rec < 0:                           # sub-join d exhausted: back up
            if d == dmin:
                io[IO_COUNT] = count
                io[IO_STEPS] = steps
                return True
            d -= 1
            continue
        rb = poff + rec * (arity + 1)
        st[base + (nq + d) * stride] = pool[rb + arity]
        for j in range(nnew):
            st[base + (nbound + j) * stride] = pool[rb + newcol[d, j]]
        if d == nt - 1:
            if emit:
                o = (out_row + count) * nq
                for s in range(nq):
                    out[o + s] = st[base + s * stride]
            count += 1
        else:
            d += 1
            h = 0
            for j in range(tab[d, NKEYS]):
                h += st[base + keyslot[d, j] * stride]
            st[base + (nq + d) * stride] = head[tab[d, HEAD_OFF] + (h & tab[d, MASK])]


def run_unit(u, lo, st, base, stride, io, budget, depth, nq, nt, pool, head, tab, keycol, keyslot,
             newcol, homomorphic, mode, rowvals, out):
    """Run (or resume) unit ``u``'s DFS (:func:`join_dfs`) for a pass in output ``mode`` (0
    count, 1 each unit's count into ``rowvals[u - lo]``, 2 write its embeddings from row
    ``rowvals[u - lo]`` of ``out``). Returns (finished, results to add to the mode-0 total: the
    count so far, cleared in ``io``); an unfinished unit keeps its state in ``st`` and ``io``."""
    out_row = rowvals[u - lo] if mode == 2 else 0
    done = join_dfs(st, base, stride, io, budget, depth, nq, nt, pool, head, tab, keycol, keyslot,
                    newcol, homomorphic, mode == 2, out, out_row)
    counted = 0
    if mode == 0:
        counted = io[IO_COUNT]
        io[IO_COUNT] = 0
    if done and mode == 1:
        rowvals[u - lo] = io[IO_COUNT]
    return done, counted


def save_state(saved, row, u, st, base, stride, io, width):
    """Store unit ``u``'s DFS state (depth, count, imResult and itArray) in ``saved[row]``."""
    saved[row, SV_UNIT] = u
    saved[row, SV_DEPTH] = io[IO_DEPTH]
    saved[row, SV_COUNT] = io[IO_COUNT]
    for s in range(width - SAVED_HEADER):
        saved[row, SAVED_HEADER + s] = st[base + s * stride]


def restore_state(saved, row, st, base, stride, io, width):
    """Load the DFS state stored by :func:`save_state`; returns its unit."""
    io[IO_DEPTH] = saved[row, SV_DEPTH]
    io[IO_COUNT] = saved[row, SV_COUNT]
    for s in range(width - SAVED_HEADER):
        st[base + s * stride] = saved[row, SAVED_HEADER + s]
    return saved[row, SV_UNIT]


def expand_unit(u, depth, urow, urec, r1, nr1, l1, pool, head, tab, keycol, keyslot, newcol,
                homomorphic, st, write, start, nrow, nrec):
    """Split units of depth ``depth + 1`` made from unit ``u`` of depth ``depth`` (an R_1 row
    when ``depth`` is 0): one per record of build table ``depth`` that matches it (keys equal,
    and injective unless ``homomorphic``). Returns how many; with ``write`` stores them from
    ``start`` of ``nrow`` / ``nrec`` (chain order). ``st``: scratch of >= nq int32 slots."""
    i = urow[u] if depth > 0 else u
    for c in range(l1):
        st[c] = r1[c * nr1 + i]
    for k in range(depth):
        rb = tab[k, POOL_OFF] + urec[u, k] * (tab[k, ARITY] + 1)
        for j in range(tab[k, NNEW]):
            st[tab[k, FIRST_NEW] + j] = pool[rb + newcol[k, j]]
    h = 0
    for j in range(tab[depth, NKEYS]):
        h += st[keyslot[depth, j]]
    rec = head[tab[depth, HEAD_OFF] + (h & tab[depth, MASK])]
    arity = tab[depth, ARITY]
    nbound = tab[depth, FIRST_NEW]
    count = 0
    while rec >= 0:
        rb = tab[depth, POOL_OFF] + rec * (arity + 1)
        ok = True
        for j in range(tab[depth, NKEYS]):
            if pool[rb + keycol[depth, j]] != st[keyslot[depth, j]]:
                ok = False
                break
        if ok and not homomorphic:
            for j in range(tab[depth, NNEW]):
                w = pool[rb + newcol[depth, j]]
                for s in range(nbound):
                    if st[s] == w:
                        ok = False
                        break
                if not ok:
                    break
        if ok:
            if write:
                nrow[start + count] = i
                for k in range(depth):
                    nrec[start + count, k] = urec[u, k]
                nrec[start + count, depth] = rec
            count += 1
        rec = pool[rb + arity]
    return count


_copy_record_gpu = cuda.jit(device=True)(copy_record)
_begin_unit_gpu = cuda.jit(device=True)(begin_unit)
_run_unit_gpu = cuda.jit(device=True)(run_unit)
_save_state_gpu = cuda.jit(device=True)(save_state)
_restore_state_gpu = cuda.jit(device=True)(restore_state)
_expand_unit_gpu = cuda.jit(device=True)(expand_unit)


@jit
def _build_tables_gpu(rel, tab, keycol, nt, total_rows, pool, head):
    """One thread per build record: copy it into the pool and prepend it to its chain."""
    g = cuda.grid(1)
    step = cuda.gridsize(1)
    while g < total_rows:
        t = 0
        while t + 1 < nt and tab[t + 1, ROW_START] <= g:
            t += 1
        j = g - tab[t, ROW_START]
        h = _copy_record_gpu(rel, tab, keycol, t, j, pool)
        old = cuda.atomic.exch(head, tab[t, HEAD_OFF] + (h & tab[t, MASK]), numba.int32(j))
        pool[tab[t, POOL_OFF] + j * (tab[t, ARITY] + 1) + tab[t, ARITY]] = old
        g += step


@jit
def _expand_units_kernel(units, depth, urow, urec, r1, nr1, l1, pool, head, tab, keycol, keyslot,
                         newcol, homomorphic, write, offsets, nrow, nrec):
    """Split probe, one level: per unit, count (offsets[u] = count) or write its child units."""
    st = cuda.local.array(MAX_QUERY_VERTICES, numba.int32)
    u = cuda.grid(1)
    step = cuda.gridsize(1)
    while u < units:
        c = _expand_unit_gpu(u, depth, urow, urec, r1, nr1, l1, pool, head, tab, keycol, keyslot,
                             newcol, homomorphic, st, write, offsets[u] if write else 0, nrow, nrec)
        if not write:
            offsets[u] = c
        u += step


@jit
def _join_gpu(r1, nr1, l1, lo, hi, ctrl, sel, n_in, queue, cap, budget, depth, urow, urec, nq, nt,
              pool, head, tab, keycol, keyslot, newcol, homomorphic, mode, rowvals, out):
    """One bounded launch of Alg. 2 over work units [lo, hi) with persistent threads.

    A thread first resumes saved DFS states (rows ``sel*cap + q`` of ``queue``, q < n_in, taken
    through the cursor ctrl[C_TAKE + sel]), then takes new units through the cursor
    ctrl[C_CURSOR] (``GetNewRecordsOrQuit``), until it has spent ``budget`` steps; a thread out
    of steps saves its state to row ``(1-sel)*cap + p`` (p from ctrl[C_SAVED + 1 - sel]) and
    exits. Block 0 zeroes the cursors the next launch uses. Mode 0 adds counts to ctrl[C_SUM]
    (partial counts of saved units included), mode 1 writes each unit's count to rowvals, mode 2
    writes each unit's results from row rowvals[u - lo] of ``out``."""
    st = cuda.shared.array(0, dtype=numba.int32)
    io = cuda.local.array(3, numba.int64)
    tid = cuda.threadIdx.x
    stride = cuda.blockDim.x
    width = SAVED_HEADER + nq + nt
    if cuda.blockIdx.x == 0 and tid == 0:
        ctrl[C_TAKE + 1 - sel] = 0
        ctrl[C_SAVED + sel] = 0
    io[IO_STEPS] = 0
    local = numba.int64(0)
    resuming = n_in > 0
    while io[IO_STEPS] < budget:
        if resuming:
            q = cuda.atomic.add(ctrl, C_TAKE + sel, 1)
            if q >= n_in:
                resuming = False
                continue
            u = _restore_state_gpu(queue, sel * cap + q, st, tid, stride, io, width)
        else:
            u = lo + cuda.atomic.add(ctrl, C_CURSOR, 1)
            if u >= hi:
                break
            _begin_unit_gpu(u, depth, urow, urec, r1, nr1, l1, nq, nt, pool, head, tab, keyslot,
                            newcol, st, tid, stride, io)
        done, counted = _run_unit_gpu(u, lo, st, tid, stride, io, budget, depth, nq, nt, pool, head, tab,
                                      keycol, keyslot, newcol, homomorphic, mode, rowvals, out)
        local += counted
        if not done:
            p = cuda.atomic.add(ctrl, C_SAVED + 1 - sel, 1)
            _save_state_gpu(queue, (1 - sel) * cap + p, u, st, tid, stride, io, width)
            break
    cuda.atomic.add(ctrl, C_SUM, local)


#: Units a one-block split launch holds per level (its counts live in shared memory): while the
#: probe side is this small, every split level runs in one launch (count, block scan, fill).
SMALL_SPLIT_UNITS = 64 if simulator_active() else 4096
#: Most threads of a block, and their warps (the block scan's shared array holds one total per warp).
MAX_BLOCK_THREADS = 1024
MAX_BLOCK_WARPS = MAX_BLOCK_THREADS // 32
# Fields of the one-block split's report (int64): levels done, units, buffer set holding them.
SS_DEPTH, SS_UNITS, SS_SET = range(3)
SS_FIELDS = 4


@jit
def _split_small_gpu(units, depth, max_depth, split_rows, r1, nr1, l1, pool, head, tab, keycol,
                     keyslot, newcol, homomorphic, rows0, recs0, rows1, recs1, report):
    """Split levels while the units fit SMALL_SPLIT_UNITS, all in one block and one launch:
    per level each thread counts the child units of a run of units (expand_unit), a block
    scan (:func:`~common.gpu.scan.block_exclusive_scan`, so the block is whole warps) gives the
    offsets and the same threads write them (the units and their order are those of the
    count/scan/fill launches). The units of a level go to buffer set 0 or 1 in
    turn (set -1: the R_1 rows); ``report``: levels done, units, set holding them."""
    counts = cuda.shared.array(SMALL_SPLIT_UNITS, numba.int32)
    wsum = cuda.shared.array(MAX_BLOCK_WARPS, numba.int64)
    st = cuda.local.array(MAX_QUERY_VERTICES, numba.int32)
    tid = cuda.threadIdx.x
    nthreads = cuda.blockDim.x
    warps = nthreads // 32
    cur = -1
    while units < split_rows and depth < max_depth and units > 0:
        if cur == 0:
            src_row, src_rec, dst_row, dst_rec = rows0, recs0, rows1, recs1
        else:
            src_row, src_rec, dst_row, dst_rec = rows1, recs1, rows0, recs0
        per = (units + nthreads - 1) // nthreads
        lo = min(tid * per, units)
        hi = min(lo + per, units)
        mine = 0
        for u in range(lo, hi):
            c = _expand_unit_gpu(u, depth, src_row, src_rec, r1, nr1, l1, pool, head, tab, keycol,
                                 keyslot, newcol, homomorphic, st, False, 0, dst_row, dst_rec)
            c = min(c, SMALL_SPLIT_UNITS + 1)          # the sum only needs to exceed the cap
            counts[u] = c
            mine += c
        first, total = block_exclusive_scan(mine, wsum, warps)
        if total > SMALL_SPLIT_UNITS:
            break
        for u in range(lo, hi):
            _expand_unit_gpu(u, depth, src_row, src_rec, r1, nr1, l1, pool, head, tab, keycol,
                             keyslot, newcol, homomorphic, st, True, first, dst_row, dst_rec)
            first += counts[u]
        cuda.syncthreads()
        units = total
        depth += 1
        cur = 1 if cur == 0 else 0
    if tid == 0:
        report[SS_DEPTH] = depth
        report[SS_UNITS] = units
        report[SS_SET] = cur


class GpuHashJoin:
    """Device side of one query: hash tables for R_2..R_n, the work units (R_1 rows or split
    pairs) and bounded launches of Alg. 2 that save and resume DFS states. Device arrays come
    from the engine's :class:`~common.gpu.pool.BufferPool`; views of reused buffers are kept while
    their buffer is (slicing a device array costs about a launch)."""

    def __init__(self, pool: BufferPool, threads: int, blocks: int | None):
        self.pool = pool
        self.threads = int(threads)
        self.blocks = blocks
        self.small_split = True           # one launch for split levels of <= SMALL_SPLIT_UNITS
        self._views: dict[str, tuple] = {}
        self._sms = None
        self.host_ctrl = np.zeros(CTRL_FIELDS, np.int64)
        self.host_report = np.zeros(SS_FIELDS, np.int64)

    def _view(self, name: str, size: int, dtype, shape_of, buffer_name: str | None = None):
        """A view ``shape_of(buffer)`` of pooled buffer ``buffer_name`` (default ``name``; >= ``size``
        elements), kept as ``name`` and made again only when the buffer is replaced."""
        buffer = self.pool.get(buffer_name or name, size, dtype)
        kept = self._views.get(name)
        if kept is None or kept[0] is not buffer:
            kept = (buffer, shape_of(buffer))
            self._views[name] = kept
        return kept[1]

    def _records(self, name: str, units: int):
        """Pooled split records (``units`` x MAX_SPLIT_LEVELS int32, or more rows)."""
        def rows_of(buffer):
            rows = buffer.size // MAX_SPLIT_LEVELS
            return buffer[:rows * MAX_SPLIT_LEVELS].reshape(rows, MAX_SPLIT_LEVELS)
        return self._view(name, max(units, 1) * MAX_SPLIT_LEVELS, np.int32, rows_of)

    def _grid(self, shared_bytes: int, threads: int) -> int:
        if self.blocks is not None:
            return int(self.blocks)
        if simulator_active():
            return 1
        if self._sms is None:
            self._sms = int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
        per_sm = max(1, min(2048 // threads, (200 * 1024) // max(shared_bytes, 1)))
        return self._sms * per_sm

    def _upload_plan(self, plan: JoinPlan, tab: np.ndarray) -> None:
        """One copy of the plan block; tab/keycol/keyslot/newcol are fixed views of it."""
        def parts(buffer):
            return (buffer[PLAN_TAB:PLAN_KEYCOL].reshape(MAX_TABLES, TAB_FIELDS),
                    *(buffer[a:a + MAX_TABLES * MAX_COLS].reshape(MAX_TABLES, MAX_COLS)
                      for a in (PLAN_KEYCOL, PLAN_KEYSLOT, PLAN_NEWCOL)))
        self.tab, self.keycol, self.keyslot, self.newcol = self._view(
            "join plan", PLAN_SIZE, np.int64, parts)
        buffer = self._views["join plan"][0]
        host = plan_block(plan, tab)
        upload(buffer, host)

    def load(self, plan: JoinPlan, relations, rows: list[int], homomorphic: bool, timer,
             split_rows: int | None, split_levels: int) -> None:
        """Copy the relations (one flat array, R_1 first: :func:`table_layout`) to the device
        if they are on the host, and the plan, build the tables, then split the probe side while
        it has fewer units than ``split_rows`` (None: 4 x the threads of a launch; 0: never), by
        at most ``split_levels`` levels."""
        if plan.num_builds > MAX_TABLES or max(len(t.columns) for t in plan.twigs) > MAX_COLS:
            raise ValueError(f"a join plan takes at most {MAX_TABLES} build relations of at most "
                             f"{MAX_COLS} columns")
        self.plan = plan
        self.timer = timer
        self.homomorphic = bool(homomorphic)
        self.nq = plan.vertex_of_slot.size
        self.nt = plan.num_builds
        self.l1 = len(plan.twigs[0].columns)
        self.nr1 = int(rows[0])
        tab, pool_size, head_size = table_layout(plan, rows)
        slots = self.nq + max(self.nt, 1)
        fitting = SHARED_LIMIT // (4 * slots)
        self.join_threads = min(self.threads, max(32, fitting - fitting % 32))
        self.shared = slots * self.join_threads * 4
        with timer.phase("transfer"):
            if isinstance(relations, np.ndarray):
                device = self.pool.get("relations", relations.size, np.int32)
                upload(device, relations)
                relations = device
            self._upload_plan(plan, tab)
        self.r1 = relations
        with timer.phase("index"):
            self.ctrl = self.pool.get("join control", CTRL_FIELDS, np.int64)
            self.hash_pool = self.pool.get("hash pool", pool_size, np.int32)
            self.head = self.pool.get("hash heads", head_size, np.int32)
            fill(self.head, -1, count=head_size)
            total_rows = int(sum(rows[1:]))
            if self.nt and total_rows:
                blocks = min(self._grid(0, self.threads), (total_rows + self.threads - 1) // self.threads)
                _build_tables_gpu[blocks, self.threads](relations, self.tab, self.keycol, self.nt,
                                                        total_rows, self.hash_pool, self.head)
            if split_rows is None:
                split_rows = 4 * self.join_threads * self._grid(self.shared, self.join_threads)
            self._split(split_rows, split_levels)

    def _split_args(self):
        return (self.r1, self.nr1, self.l1, self.hash_pool, self.head, self.tab, self.keycol,
                self.keyslot, self.newcol, self.homomorphic)

    def _split_small(self, split_rows: int, levels: int) -> None:
        """The first split levels in one launch (:func:`_split_small_gpu`) and one copy back."""
        sets = []
        for i in (0, 1):
            sets.append(self._view(f"small split rows {i}", SMALL_SPLIT_UNITS, np.int32, lambda b: b))
            sets.append(self._records(f"small split records {i}", SMALL_SPLIT_UNITS))
        report = self.pool.get("split report", SS_FIELDS, np.int64)
        threads = min((self.threads + 31) // 32 * 32, MAX_BLOCK_THREADS)    # the block scan's whole warps
        _split_small_gpu[1, threads](self.units, self.depth, levels, split_rows, *self._split_args(),
                                     *sets, report)
        got = download(report, self.host_report)
        if int(got[SS_SET]) >= 0:
            self.urow, self.urec = sets[2 * int(got[SS_SET])], sets[2 * int(got[SS_SET]) + 1]
            self.depth, self.units = int(got[SS_DEPTH]), int(got[SS_UNITS])

    def _split(self, split_rows: int, levels: int) -> None:
        """Split the probe side level by level while it has fewer than ``split_rows`` units (at
        most ``levels`` levels, none past MAX_PAIRS units): while the units are few, in one
        launch (:meth:`_split_small`); then count + scan + fill launches per level."""
        self.depth, self.units = 0, self.nr1
        self.urow = self._view("split rows (none)", 1, np.int32, lambda b: b)
        self.urec = self._records("split records (none)", 1)
        levels = min(levels, self.nt)
        if self.small_split and 0 < self.units <= SMALL_SPLIT_UNITS and \
                self.units < split_rows and levels > 0:
            try:
                self._split_small(split_rows, levels)
            except DeviceOutOfMemory:
                pass                    # the split is optional
        while self.units < split_rows and self.depth < levels and self.units:
            units = self.units
            counts = self.pool.get("split counts", units, np.int64)
            scan = self.pool.scan(max(units, 1024))
            blocks = min(self._grid(0, self.threads), (units + self.threads - 1) // self.threads)
            args = (units, self.depth, self.urow, self.urec, *self._split_args())
            _expand_units_kernel[blocks, self.threads](*args, False, counts, self.urow, self.urec)
            new = int(exclusive_scan(counts, workspace=scan, n=units))
            if new > MAX_PAIRS:
                break
            side = self.depth % 2
            try:
                nrow = self.pool.get(f"split rows {side}", new, np.int32)
                nrec = self._records(f"split records {side}", new)
            except DeviceOutOfMemory:
                break                   # the split is optional: keep the units so far
            _expand_units_kernel[blocks, self.threads](*args, True, counts, nrow, nrec)
            self.urow, self.urec, self.units = nrow, nrec, new
            self.depth += 1

    def start(self, lo: int, hi: int, mode: int, offsets: np.ndarray | None = None,
              rows: int = 0) -> None:
        """Begin a pass over units [lo, hi): mode 0 counts, 1 counts per unit, 2 writes ``rows``
        results from ``offsets`` (per unit, from a mode-1 pass)."""
        self.lo, self.hi, self.mode = int(lo), int(hi), int(mode)
        threads = self.join_threads
        self.grid = grid_blocks(hi - lo, threads, self._grid(self.shared, threads))
        self.cap = self.grid * threads
        width = SAVED_HEADER + self.nq + self.nt
        # the whole buffer as rows of this width: a view per width, not per query's row count
        self.queue = self._view(f"saved DFS states {width}", 2 * self.cap * width, np.int64,
                                lambda buffer: buffer[:buffer.size // width * width].reshape(-1, width),
                                buffer_name="saved DFS states")
        self.sel, self.n_in = 0, 0
        fill(self.ctrl, 0)
        self.rowvals = self.pool.get("unit values", hi - lo, np.int64)
        self.out = self.pool.get("output", rows * self.nq, np.int32)
        if mode == 2:
            with self.timer.phase("transfer"):
                upload(self.rowvals, np.ascontiguousarray(offsets, dtype=np.int64))
        self.rows = int(rows)

    def launch(self, steps: int) -> tuple[bool, int]:
        """One launch of at most ``steps`` steps per thread: (pass finished, mode-0 count so far)."""
        with self.timer.phase("enumerate"):
            _join_gpu[self.grid, self.join_threads, 0, self.shared](
                self.r1, self.nr1, self.l1, self.lo, self.hi, self.ctrl, self.sel, self.n_in,
                self.queue, self.cap, int(steps), self.depth, self.urow, self.urec, self.nq,
                self.nt, self.hash_pool, self.head, self.tab, self.keycol, self.keyslot, self.newcol,
                self.homomorphic, self.mode, self.rowvals, self.out)
        ctrl = download(self.ctrl, self.host_ctrl)
        self.n_in = int(ctrl[C_SAVED + 1 - self.sel])
        self.sel = 1 - self.sel
        done = self.n_in == 0 and int(ctrl[C_CURSOR]) >= self.hi - self.lo
        return done, int(ctrl[C_SUM])

    def unit_counts(self) -> np.ndarray:
        """Per-unit result counts of a finished mode-1 pass (int64)."""
        with self.timer.phase("transfer"):
            return download(self.rowvals, np.empty(self.hi - self.lo, self.rowvals.dtype))

    def written(self) -> np.ndarray:
        """Results of a finished mode-2 pass as (rows, nq) int32 in slot order."""
        with self.timer.phase("transfer"):
            return download(self.out, np.empty((self.rows, self.nq), self.out.dtype))
