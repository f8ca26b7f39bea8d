"""GPU chained hash tables and the right-deep, fully pipelined join (Lin et al. 2014 §4.1-4.4, Alg. 2).

* **Hash tables (§4.2).** One chained table per build relation R_2..R_n, all flattened into two
  int32 arrays: ``pool`` (record j of table k at ``pool_off + j*(l+1)``, its l columns then the
  index of the next record of its chain) and ``head`` (``2^floor(log2 |R|)`` chain heads per
  table, -1 = none). One thread per record copies it into the pool and prepends it to its chain
  with ``old = atomic.exch(head[h], j); next = old`` (the paper's "two assignments atomically";
  the kernel boundary publishes the links before the join reads them). All tables are built by
  one launch.
* **Hash value.** The paper hashes "the sum of a record's entities" with the low
  ``floor(log2 |R|)`` bits; a probe only knows the join-key columns, so both sides sum the
  *key* columns.
* **Join (§4.3, Alg. 2).** The probe relation R_1 (attribute-major, §4.4) streams through the
  sub-joins in the plan's join order. Each thread takes "the first unhandled record" of R_1 (a
  work unit) through a global atomic cursor (persistent threads), and runs the DFS of Alg. 2: ``imResult`` (one slot
  per query vertex) and ``itArray`` (one chain position per sub-join) live in dynamic shared
  memory laid out ``[slot][thread]`` (``slot * blockDim + tid``, so a lane always hits its own
  bank, §4.4). An iterator stores the next chain position to examine; ``match``/``next`` walk
  the chain to the next record whose keys equal the bound slots (collisions are skipped).
* **Injectivity [our addition].** The raw pipeline only equates shared query vertices
  (``homomorphic=True``); by default a record is skipped when a newly bound column equals a
  vertex already bound (slots are numbered in binding order, so that is a prefix loop).
* **Bounded launches [the paper is silent; needed for timeout_s].** The paper's threads run
  until R_1 is exhausted, so one launch can run unboundedly long. Here every thread gets a
  budget of *steps* per launch (one step = one chain record examined, or one unit started);
  a thread out of steps saves its resumable DFS state (unit, depth, result count so far,
  imResult and itArray) to a global queue and exits, and the next launch resumes the saved
  states (any thread may take any state) before taking new units. The queue is double-buffered
  (the launch reads one half, writes the other); it never holds more states than the launch has
  threads, so the grid is fixed for a whole pass. The host adapts the budget towards
  ``chunk_seconds`` per launch and checks ``timeout_s`` and ``limit`` between launches.
* **Split probe [a deviation from the paper, option ``split_probe``].** The paper gives each
  thread one R_1 record. When R_1 has few rows (|R_1| < ``split_rows``, by default 4 x the
  threads of a launch) a few deep DFSs leave the GPU idle, so the probe side is split at the
  first join level: a unit becomes a pair (R_1 row, matching record of the first build table),
  listed by a count pass, a device scan and a fill pass, and its DFS starts at the second
  sub-join. While there are still fewer units than ``split_rows`` the split repeats one level
  deeper (a unit = R_1 row + one matching record per split table), up to ``split_levels``
  levels (default 8), never past ``MAX_PAIRS`` units nor the device memory budget. ``split_probe=False`` is the paper's
  scheme.
* **Output [the paper is silent].** Mode 0 counts (one int64 atomic add per thread at exit,
  partial counts of saved units included); mode 1 writes each unit's count; mode 2 writes each
  unit's embeddings from the offset the host computed from mode 1 (exact batches, no overflow,
  deterministic placement; the count so far in a saved state is the write position).

:func:`begin_unit`, :func:`join_dfs`, :func:`save_state`, :func:`restore_state` and
:func:`expand_unit` are compiled as CUDA device functions here and with ``numba.njit`` by
the CPU baseline (:mod:`stwig.cpu`), so both run the same algorithm.
"""

from __future__ import annotations

import numba
import numpy as np

from common.device import DeviceMemoryBudget, cuda, fill, simulator_active
from common.errors import DeviceOutOfMemory
from common.scan import ScanWorkspace, exclusive_scan

from .decompose import JoinPlan

# Columns of the per-table metadata array ``tab`` (int64, one row per build relation).
ARITY, POOL_OFF, HEAD_OFF, MASK, NKEYS, NNEW, FIRST_NEW, REL_OFF, ROW_START, NROWS = range(10)
TAB_FIELDS = 10

#: Threads per block of the join and build kernels (the simulator runs one Python thread each).
JOIN_THREADS = 32 if simulator_active() else 256
#: Dynamic shared memory a block may use without an opt-in attribute (bytes).
SHARED_LIMIT = 48 * 1024


def table_layout(plan: JoinPlan, rows: list[int]) -> tuple[np.ndarray, int, int, int]:
    """(tab, pool entries, head entries, relation entries) of the build tables in join order.

    ``rows[k]``: rows of STwig k+1's relation; the relations lie row-major one after another
    in STwig order (as the explorers write them)."""
    nt = plan.num_builds
    arity = [len(t.columns) for t in plan.twigs]
    rel_off = np.zeros(len(plan.twigs), np.int64)
    for t in range(2, len(plan.twigs)):
        rel_off[t] = rel_off[t - 1] + int(rows[t - 2]) * arity[t - 1]
    tab = np.zeros((max(nt, 1), TAB_FIELDS), np.int64)
    pool = head = start = 0
    for k, t in enumerate(plan.build_order):
        nrows = int(rows[t - 1])
        buckets = 1 << (max(nrows, 1).bit_length() - 1)
        tab[k] = (arity[t], pool, head, buckets - 1, plan.nkeys[k], plan.nnew[k],
                  plan.first_new_slot[k], rel_off[t], start, nrows)
        pool += nrows * (arity[t] + 1)
        head += buckets
        start += nrows
    rel = int(sum(int(r) * a for r, a in zip(rows, arity[1:])))
    return tab, pool, head, rel


# Registers of one thread's DFS (``io``, int64): depth, results of the unit so far, steps spent.
IO_DEPTH, IO_COUNT, IO_STEPS = range(3)
#: A saved DFS state is a row of int64: unit, depth, count, then imResult and itArray.
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


def save_state(saved, row, u, st, base, stride, io, width):
    """Store unit ``u``'s DFS state (depth, count, imResult and itArray) in ``saved[row]``."""
    saved[row, 0] = u
    saved[row, 1] = io[IO_DEPTH]
    saved[row, 2] = io[IO_COUNT]
    for s in range(width - SAVED_HEADER):
        saved[row, SAVED_HEADER + s] = st[base + s * stride]


def restore_state(saved, row, st, base, stride, io, width):
    """Load the DFS state stored by :func:`save_state`; returns its unit."""
    io[IO_DEPTH] = saved[row, 1]
    io[IO_COUNT] = saved[row, 2]
    for s in range(width - SAVED_HEADER):
        st[base + s * stride] = saved[row, SAVED_HEADER + s]
    return saved[row, 0]


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
_join_dfs_gpu = cuda.jit(device=True)(join_dfs)
_save_state_gpu = cuda.jit(device=True)(save_state)
_restore_state_gpu = cuda.jit(device=True)(restore_state)
_expand_unit_gpu = cuda.jit(device=True)(expand_unit)


@cuda.jit
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


@cuda.jit
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


@cuda.jit
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
        out_row = rowvals[u - lo] if mode == 2 else 0
        done = _join_dfs_gpu(st, tid, stride, io, budget, depth, nq, nt, pool, head, tab, keycol,
                             keyslot, newcol, homomorphic, mode == 2, out, out_row)
        if mode == 0:
            local += io[IO_COUNT]
            io[IO_COUNT] = 0
        if done:
            if mode == 1:
                rowvals[u - lo] = io[IO_COUNT]
        else:
            p = cuda.atomic.add(ctrl, C_SAVED + 1 - sel, 1)
            _save_state_gpu(queue, (1 - sel) * cap + p, u, st, tid, stride, io, width)
            break
    cuda.atomic.add(ctrl, C_SUM, local)


class DeviceBuffers:
    """Grow-and-reuse device buffers, each allocated through the engine's memory budget."""

    def __init__(self, budget: DeviceMemoryBudget):
        self.budget = budget
        self._arrays: dict[str, object] = {}

    def get(self, name: str, size: int, dtype, keep: int = 0):
        """A device array of at least ``size`` elements (its first ``keep`` kept when it grows)."""
        size = max(int(size), 1)
        current = self._arrays.get(name)
        if current is not None and current.size >= size and current.dtype == np.dtype(dtype):
            return current
        capacity = 1 << (size - 1).bit_length()
        if current is not None and not keep:
            self.budget.free(current)
            del self._arrays[name]
        array = self.budget.device_array(capacity, dtype, what=f"stwig {name}")
        if current is not None and keep:
            array[:keep].copy_to_device(current[:keep])
            self.budget.free(current)
        self._arrays[name] = array
        return array


class GpuHashJoin:
    """Device side of one query: hash tables for R_2..R_n, the work units (R_1 rows or split
    pairs) and bounded launches of Alg. 2 that save and resume DFS states."""

    def __init__(self, budget: DeviceMemoryBudget, threads: int, blocks: int | None):
        self.buffers = DeviceBuffers(budget)
        self.budget = budget
        self.threads = int(threads)
        self.blocks = blocks
        self.scan = None
        self.queue_view = None
        self.no_split = None
        self.host_ctrl = np.zeros(CTRL_FIELDS, np.int64)

    def _grid(self, shared_bytes: int, threads: int) -> int:
        if self.blocks is not None:
            return int(self.blocks)
        if simulator_active():
            return 1
        device = cuda.get_current_device()
        per_sm = max(1, min(2048 // threads, (200 * 1024) // max(shared_bytes, 1)))
        return int(device.MULTIPROCESSOR_COUNT) * per_sm

    def _small(self, name: str, host: np.ndarray):
        """Copy a small host array (plan metadata) into a reused device buffer of its shape."""
        host = np.ascontiguousarray(host)
        buffer = self.buffers.get(name, host.size, host.dtype)[:host.size]
        buffer.copy_to_device(host.reshape(-1))
        return buffer.reshape(host.shape)

    def load(self, plan: JoinPlan, r1, nr1: int, builds, rows: list[int], homomorphic: bool,
             timer, split_rows: int | None, split_levels: int) -> None:
        """Copy (if host arrays) R_1 and the build relations to the device, build the tables,
        then split the probe side while it has fewer units than ``split_rows`` (None: 4 x the
        threads of a launch; 0: never), by at most ``split_levels`` levels."""
        self.plan = plan
        self.timer = timer
        self.homomorphic = bool(homomorphic)
        self.nq = plan.vertex_of_slot.size
        self.nt = plan.num_builds
        self.l1 = len(plan.twigs[0].columns)
        self.nr1 = int(nr1)
        tab, pool_size, head_size, rel_size = table_layout(plan, rows)
        slots = self.nq + max(self.nt, 1)
        fitting = SHARED_LIMIT // (4 * slots)
        self.join_threads = min(self.threads, max(32, fitting - fitting % 32))
        self.shared = slots * self.join_threads * 4
        with timer.phase("transfer"):
            if isinstance(r1, np.ndarray):
                d_r1 = self.buffers.get("probe relation R_1", r1.size, np.int32)
                d_r1[:r1.size].copy_to_device(r1)
                r1 = d_r1
            if isinstance(builds, np.ndarray):
                d_rel = self.buffers.get("build relations", builds.size, np.int32)
                d_rel[:builds.size].copy_to_device(builds)
                builds = d_rel
            self.tab = self._small("plan table", tab)
            self.keycol = self._small("plan key columns", plan.keycol)
            self.keyslot = self._small("plan key slots", plan.keyslot)
            self.newcol = self._small("plan new columns", plan.newcol)
        self.r1 = r1
        with timer.phase("index"):
            self.ctrl = self.buffers.get("join control", CTRL_FIELDS, np.int64)
            self.pool = self.buffers.get("hash pool", pool_size, np.int32)
            self.head = self.buffers.get("hash heads", head_size, np.int32)
            fill(self.head[:max(head_size, 1)], -1)
            total_rows = int(sum(rows))
            if self.nt and total_rows:
                blocks = min(self._grid(0, self.threads), (total_rows + self.threads - 1) // self.threads)
                _build_tables_gpu[blocks, self.threads](builds, self.tab, self.keycol, self.nt,
                                                        total_rows, self.pool, self.head)
        if split_rows is None:
            split_rows = 4 * self.join_threads * self._grid(self.shared, self.join_threads)
        self._split(split_rows, split_levels, timer)

    def _split(self, split_rows: int, levels: int, timer) -> None:
        """Split the probe side level by level while it has fewer than ``split_rows`` units (at
        most ``levels`` levels, none past MAX_PAIRS units): count + scan + fill per level."""
        self.depth, self.units = 0, self.nr1
        if self.no_split is None:
            self.no_split = (self.buffers.get("split rows (none)", 1, np.int32),
                             self.buffers.get("split records (none)", MAX_SPLIT_LEVELS,
                                              np.int32).reshape(1, MAX_SPLIT_LEVELS))
        self.urow, self.urec = self.no_split
        with timer.phase("index"):
            while self.units < split_rows and self.depth < min(levels, self.nt) and self.units:
                units = self.units
                counts = self.buffers.get("split counts", units, np.int64)
                if self.scan is None or self.scan.capacity < units:
                    if self.scan is not None:
                        for level in self.scan.levels:
                            self.budget.free(level)
                    self.scan = ScanWorkspace(max(units, 1024), np.int64, self.budget)
                blocks = min(self._grid(0, self.threads), (units + self.threads - 1) // self.threads)
                args = (units, self.depth, self.urow, self.urec, self.r1, self.nr1, self.l1,
                        self.pool, self.head, self.tab, self.keycol, self.keyslot, self.newcol,
                        self.homomorphic)
                _expand_units_kernel[blocks, self.threads](*args, False, counts, self.urow, self.urec)
                new = int(exclusive_scan(counts, workspace=self.scan, n=units))
                if new > MAX_PAIRS:
                    break
                side = self.depth % 2
                try:
                    nrow = self.buffers.get(f"split rows {side}", new, np.int32)
                    nrec = self.buffers.get(f"split records {side}", max(new, 1) * MAX_SPLIT_LEVELS,
                                            np.int32)
                except DeviceOutOfMemory:
                    break                   # the split is optional: keep the units so far
                nrec = nrec[:max(new, 1) * MAX_SPLIT_LEVELS].reshape(max(new, 1), MAX_SPLIT_LEVELS)
                _expand_units_kernel[blocks, self.threads](*args, True, counts, nrow, nrec)
                self.urow, self.urec, self.units = nrow, nrec, new
                self.depth += 1

    def start(self, lo: int, hi: int, mode: int, offsets: np.ndarray | None = None,
              rows: int = 0) -> None:
        """Begin a pass over units [lo, hi): mode 0 counts, 1 counts per unit, 2 writes ``rows``
        results from ``offsets`` (per unit, from a mode-1 pass)."""
        self.lo, self.hi, self.mode = int(lo), int(hi), int(mode)
        threads = self.join_threads
        self.grid = max(1, min(self._grid(self.shared, threads), (hi - lo + threads - 1) // threads))
        self.cap = self.grid * threads
        width = SAVED_HEADER + self.nq + self.nt
        queue = self.buffers.get("saved DFS states", 2 * self.cap * width, np.int64)
        if self.queue_view is None or self.queue_view[0] is not queue or \
                self.queue_view[1].shape != (2 * self.cap, width):
            # A view costs about as much as a launch on a GPU: reuse it while the shape holds.
            view = queue[:2 * self.cap * width].reshape(2 * self.cap, width)
            self.queue_view = (queue, view)
        self.queue = self.queue_view[1]
        self.sel, self.n_in = 0, 0
        fill(self.ctrl, 0)
        self.rowvals = self.buffers.get("unit values", hi - lo, np.int64)
        self.out = self.buffers.get("output", rows * self.nq, np.int32)
        if mode == 2:
            with self.timer.phase("transfer"):
                self.rowvals[:hi - lo].copy_to_device(np.ascontiguousarray(offsets, dtype=np.int64))
        self.rows = int(rows)

    def launch(self, steps: int) -> tuple[bool, int]:
        """One launch of at most ``steps`` steps per thread: (pass finished, mode-0 count so far)."""
        with self.timer.phase("enumerate"):
            _join_gpu[self.grid, self.join_threads, 0, self.shared](
                self.r1, self.nr1, self.l1, self.lo, self.hi, self.ctrl, self.sel, self.n_in,
                self.queue, self.cap, int(steps), self.depth, self.urow, self.urec, self.nq,
                self.nt, self.pool, self.head, self.tab, self.keycol, self.keyslot, self.newcol,
                self.homomorphic, self.mode, self.rowvals, self.out)
        ctrl = self.ctrl.copy_to_host(self.host_ctrl)
        self.n_in = int(ctrl[C_SAVED + 1 - self.sel])
        self.sel = 1 - self.sel
        done = self.n_in == 0 and int(ctrl[C_CURSOR]) >= self.hi - self.lo
        return done, int(ctrl[C_SUM])

    def unit_counts(self) -> np.ndarray:
        """Per-unit result counts of a finished mode-1 pass (int64)."""
        with self.timer.phase("transfer"):
            return self.rowvals[:self.hi - self.lo].copy_to_host()

    def written(self) -> np.ndarray:
        """Results of a finished mode-2 pass as (rows, nq) int32 in slot order."""
        with self.timer.phase("transfer"):
            return self.out[:self.rows * self.nq].copy_to_host().reshape(self.rows, self.nq)
