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
  *key* columns (digest §4).
* **Join (§4.3, Alg. 2).** The probe relation R_1 (attribute-major, §4.4) streams through the
  sub-joins in the plan's join order. Each thread takes "the first unhandled record" of R_1 through a
  global atomic cursor (persistent threads), and runs the DFS of Alg. 2: ``imResult`` (one slot
  per query vertex) and ``itArray`` (one chain position per sub-join) live in dynamic shared
  memory laid out ``[slot][thread]`` (``slot * blockDim + tid``, so a lane always hits its own
  bank, §4.4). An iterator stores the next chain position to examine; ``match``/``next`` walk
  the chain to the next record whose keys equal the bound slots (collisions are skipped).
* **Injectivity [our addition].** The raw pipeline only equates shared query vertices
  (``homomorphic=True``); by default a record is skipped when a newly bound column equals a
  vertex already bound (slots are numbered in binding order, so that is a prefix loop).
* **Output [the paper is silent].** Mode 0 counts (one int64 atomic add per thread at exit);
  mode 1 writes each probe row's count; mode 2 writes each probe row's embeddings from the
  offset the host computed from mode 1 (exact batches, no overflow, deterministic placement).
  The host runs R_1 in chunks ``[lo, hi)`` of adaptively growing size so that ``timeout_s`` and
  ``limit`` are checked between launches.

:func:`join_probe_row` is one probe row's DFS; it is compiled as a CUDA device function here and
with ``numba.njit`` by the CPU baseline (:mod:`stwig.cpu`), so both run the same algorithm.
"""

from __future__ import annotations

import numba
import numpy as np

from common.device import DeviceMemoryBudget, cuda, fill, simulator_active

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


def join_probe_row(i, r1, nr1, l1, nq, nt, pool, head, tab, keycol, keyslot, newcol,
                   homomorphic, st, base, stride, emit, out, out_row):
    """Alg. 2 for probe record ``i`` of R_1: returns its number of results and, with ``emit``,
    writes them (slot order) from row ``out_row`` of ``out`` (flat, ``nq`` entries a row).

    ``st[base + s*stride]`` is imResult slot s (s < nq) and ``st[base + (nq+k)*stride]`` is
    itArray[k], the next chain position to examine in build table k."""
    for c in range(l1):
        st[base + c * stride] = r1[c * nr1 + i]
    count = 0
    d = 0
    h = 0
    for j in range(tab[0, NKEYS]):
        h += st[base + keyslot[0, j] * stride]
    st[base + nq * stride] = head[tab[0, HEAD_OFF] + (h & tab[0, MASK])]
    while True:
        rec = st[base + (nq + d) * stride]
        arity = tab[d, ARITY]
        poff = tab[d, POOL_OFF]
        nnew = tab[d, NNEW]
        nbound = tab[d, FIRST_NEW]
        while rec >= 0:                       # match()/next(): the next record with equal keys
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
            if d == 0:
                break
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
    return count


_join_probe_row_gpu = cuda.jit(device=True)(join_probe_row)


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
        arity = tab[t, ARITY]
        src = tab[t, REL_OFF] + j * arity
        dst = tab[t, POOL_OFF] + j * (arity + 1)
        h = 0
        for c in range(arity):
            pool[dst + c] = rel[src + c]
        for q in range(tab[t, NKEYS]):
            h += rel[src + keycol[t, q]]
        old = cuda.atomic.exch(head, tab[t, HEAD_OFF] + (h & tab[t, MASK]), numba.int32(j))
        pool[dst + arity] = old
        g += step


@cuda.jit
def _join_gpu(r1, nr1, l1, lo, hi, ctrl, cslot, nq, nt, pool, head, tab, keycol, keyslot, newcol,
              homomorphic, mode, rowvals, out):
    """Persistent threads over probe rows [lo, hi): ``GetNewRecordsOrQuit`` is an atomic cursor
    ctrl[cslot]; the launch zeroes the other cursor for the next launch; ctrl[2] sums counts."""
    st = cuda.shared.array(0, dtype=numba.int32)
    tid = cuda.threadIdx.x
    stride = cuda.blockDim.x
    if cuda.blockIdx.x == 0 and tid == 0:
        ctrl[1 - cslot] = 0
    local = numba.int64(0)
    while True:
        i = lo + cuda.atomic.add(ctrl, cslot, 1)
        if i >= hi:
            break
        out_row = rowvals[i - lo] if mode == 2 else 0
        c = _join_probe_row_gpu(i, r1, nr1, l1, nq, nt, pool, head, tab, keycol, keyslot, newcol,
                                homomorphic, st, tid, stride, mode == 2, out, out_row)
        if mode == 1:
            rowvals[i - lo] = c
        local += c
    cuda.atomic.add(ctrl, 2, local)


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
    """Device side of one query: hash tables for R_2..R_n and launches of Alg. 2 over R_1."""

    def __init__(self, budget: DeviceMemoryBudget, threads: int, blocks: int | None):
        self.buffers = DeviceBuffers(budget)
        self.threads = int(threads)
        self.blocks = blocks
        self.cslot = 0

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
             timer) -> None:
        """Copy (if host arrays) R_1 and the build relations to the device, then build the tables."""
        self.plan = plan
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
            self.ctrl = self.buffers.get("join control", 3, np.int64)
            fill(self.ctrl, 0)
            self.cslot = 0
            self.pool = self.buffers.get("hash pool", pool_size, np.int32)
            self.head = self.buffers.get("hash heads", head_size, np.int32)
            fill(self.head[:max(head_size, 1)], -1)
            total_rows = int(sum(rows))
            if self.nt and total_rows:
                blocks = min(self._grid(0, self.threads), (total_rows + self.threads - 1) // self.threads)
                _build_tables_gpu[blocks, self.threads](builds, self.tab, self.keycol, self.nt,
                                                        total_rows, self.pool, self.head)
        self._counted = 0

    def _launch(self, lo: int, hi: int, mode: int, rowvals, out) -> None:
        threads = self.join_threads
        grid = min(self._grid(self.shared, threads), (hi - lo + threads - 1) // threads)
        _join_gpu[grid, threads, 0, self.shared](
            self.r1, self.nr1, self.l1, lo, hi, self.ctrl, self.cslot, self.nq, self.nt,
            self.pool, self.head, self.tab, self.keycol, self.keyslot, self.newcol,
            self.homomorphic, mode, rowvals, out)
        self.cslot = 1 - self.cslot

    def count(self, lo: int, hi: int, timer) -> int:
        """Number of results of probe rows [lo, hi)."""
        dummy = self.buffers.get("row values", 1, np.int64)
        with timer.phase("enumerate"):
            self._launch(lo, hi, 0, dummy, self.buffers.get("output", 1, np.int32))
        total = int(self.ctrl[2:3].copy_to_host()[0])
        chunk, self._counted = total - self._counted, total
        return chunk

    def row_counts(self, lo: int, hi: int, timer) -> np.ndarray:
        """Per-probe-row result counts of rows [lo, hi) (int64)."""
        rowvals = self.buffers.get("row values", hi - lo, np.int64)
        with timer.phase("enumerate"):
            self._launch(lo, hi, 1, rowvals, self.buffers.get("output", 1, np.int32))
        with timer.phase("transfer"):
            counts = rowvals[:hi - lo].copy_to_host()
        self._counted = int(self.ctrl[2:3].copy_to_host()[0])
        return counts

    def write(self, lo: int, hi: int, offsets: np.ndarray, rows: int, timer) -> np.ndarray:
        """Results of probe rows [lo, hi) as (rows, nq) int32 in slot order; ``offsets`` from row_counts."""
        rowvals = self.buffers.get("row values", hi - lo, np.int64)
        out = self.buffers.get("output", rows * self.nq, np.int32)
        with timer.phase("transfer"):
            rowvals[:hi - lo].copy_to_device(np.ascontiguousarray(offsets, dtype=np.int64))
        with timer.phase("enumerate"):
            self._launch(lo, hi, 2, rowvals, out)
        with timer.phase("transfer"):
            result = out[:rows * self.nq].copy_to_host().reshape(rows, self.nq)
        self._counted = int(self.ctrl[2:3].copy_to_host()[0])
        return result
