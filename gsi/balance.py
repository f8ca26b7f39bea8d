"""Load balance (GSI §VI-A, SGSI §7) and duplicate removal (GSI §VI-B, Algorithm 5) for the first
linking edge of a join iteration, the set operation whose work |N(v'_i, l0)| is skewed.

The 4-layer scheme, with the work of row i = |N(v'_i, l0)|, on Numba (no dynamic parallelism):

1. work > W1: the block queues the row and skips it; a follow-up launch (``heavy_kernel``)
   gives each queued row a whole block, which also checks the row's other linking edges element
   by element (a binary search per edge, every warp).
2. and 3. W3 < work <= W1: the rows go into the block's task pool (SGSI's 1024-element pool);
   every round the block's threads take one pool element each, and a block-wide scan of the
   survivors, segmented by row, keeps each row's output in order (a row larger than the block
   spans several rounds: layer 2 as a special case, so W2 is the block size).
4. work <= W3: a warp per row (:func:`gsi.join.warp_first_edge`).

Defaults W1 = 4096, W3 = 256 (GSI §VI-A). ``load_balance="histogram"`` chooses W1 and W3 per
iteration with SGSI's cost model over a device-built histogram of the work in 32-wide intervals
(the brute force over (x1, x3) separates into two 1-D minimisations). Duplicate removal: a row
whose vertex v' already appears in an earlier warp of the block reads that warp's batch from
shared memory, so each distinct N(v', l0) batch is loaded once per block. docs/decisions.md
("GSI's load balance") gives the choices where the papers are silent.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from common.gpu.copies import fill
from common.gpu.cudasim import FULL_MASK
from common.gpu.grid import grid_blocks
from common.gpu.runtime import cuda, jit, simulator_active

from .join import (
    MAX_LINK_EDGES,
    MAX_QUERY_VERTICES,
    add_load_counts,
    all_edges_contain,
    edge_at,
    emit,
    first_edge_keeps,
    flush,
    intersect_row_galloping,
    load_row,
    warp_first_edge,
)
from .pcsr import warp_neighbor_range

W1 = 4096
W3 = 256
HIST_BINS = 4096
T_SYNC = 1.0
T_LAUNCH = 50.0
_NO_LIMIT = np.int64(2 ** 62)
#: Tables of more rows than this many rounds of a block run the other linking edges in their own
#: launch (:func:`_other_edges_kernel`) instead of fused into the block kernel.
SEPARATE_EDGES_ROUNDS = 16
# Layer of a row in the block kernel (``s_kind``): none (past the table), warp, pool, queued.
KIND_NONE, KIND_WARP, KIND_POOL, KIND_QUEUED = 0, 1, 2, 3


@cuda.jit(device=True)
def block_scan(pred, wtot, scan, warps):
    """Block-wide exclusive prefix of ``pred`` into scan[tid]; returns the block total."""
    lane = cuda.laneid
    w = cuda.threadIdx.x // 32
    mask = cuda.ballot_sync(FULL_MASK, pred)
    if lane == 0:
        wtot[w] = cuda.popc(mask)
    cuda.syncthreads()
    before = 0
    total = 0
    for r in range(warps):
        if r < w:
            before += wtot[r]
        total += wtot[r]
    scan[cuda.threadIdx.x] = before + cuda.popc(mask & ((1 << lane) - 1))
    cuda.syncthreads()
    return total


@cuda.jit(device=True)
def classify_row(i, m, rowc, w, tab, a, width, col, part, n, structure, meta, gl, keys, offs, w1, w3,
                 queue, qcount, s_start, s_work, s_kind, s_vert, s_written):
    """Step 1 of the load balance (one warp, row a + i): look up N(v', l0) and pick its layer by
    its work |N(v', l0)|: queued for a block (> w1), the block's pool (> w3), else a warp.
    Returns the structure loads."""
    ld = 0
    if i < m:
        load_row(rowc, w, tab, a + i, width)
        v = rowc[w, col]
        s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, v, n)
        if cuda.laneid == 0:
            work = e - s
            kind = KIND_WARP
            if work > w1:
                kind = KIND_QUEUED
                queue[cuda.atomic.add(qcount, 0, 1)] = i
            elif work > w3:
                kind = KIND_POOL
            s_start[w] = s
            s_work[w] = work
            s_kind[w] = kind
            s_vert[w] = v
            s_written[w] = 0
    elif cuda.laneid == 0:
        s_kind[w] = KIND_NONE
        s_work[w] = 0
        s_vert[w] = -1
    return ld


@cuda.jit(device=True)
def pool_position(q, s_kind, s_work, warps):
    """The pooled row holding pool element q and the pool position of its first element."""
    acc = np.int64(0)
    for r in range(warps):
        if s_kind[r] == KIND_POOL:
            if q < acc + s_work[r]:
                return r, acc
            acc += s_work[r]
    return -1, acc


@cuda.jit(device=True)
def pool_rows(g, rowc, width, label, bits, ubase, F, gba, ci, ci_label, structure, s_start, s_work,
              s_kind, s_written, wtot, scan, warps):
    """Layers 2-3: the block's task pool, one element per thread per round; a block scan
    segmented by row keeps each pooled row's output in order (s_written: its size)."""
    T = warps * 32
    tid = cuda.threadIdx.x
    pool = np.int64(0)
    for r in range(warps):
        if s_kind[r] == KIND_POOL:
            pool += s_work[r]
    rb = np.int64(0)
    while rb < pool:
        r, first = pool_position(rb + tid, s_kind, s_work, warps)
        pred = False
        x = np.int32(-1)
        if r >= 0:
            k = s_start[r] + (rb + tid - first)
            x = ci[k]
            pred = first_edge_keeps(structure, ci_label, k, label, bits, ubase, rowc, r, width, x)
        total = block_scan(pred, wtot, scan, warps)
        if pred:
            seg = first - rb
            if seg < 0:
                seg = 0
            gba[F[g * warps + r] + s_written[r] + scan[tid] - scan[seg]] = x
        cuda.syncthreads()
        if tid < warps and s_kind[tid] == KIND_POOL:
            # this round's survivors of row tid: scan at its segment's end minus its start
            acc = np.int64(0)
            for rr in range(tid):
                if s_kind[rr] == KIND_POOL:
                    acc += s_work[rr]
            lo = acc - rb
            hi = acc + s_work[tid] - rb
            if lo < T and hi > 0:
                if lo < 0:
                    lo = 0
                end = total if hi >= T else scan[hi]
                s_written[tid] += end - scan[lo]
        cuda.syncthreads()
        rb += T


@cuda.jit(device=True)
def dedup_warp_rows(rowc, cache, batch, w, width, label, bits, ubase, out, base, ci, ci_label,
                    structure, s_start, s_work, s_kind, s_vert, use_cache, warps):
    """Layer 4 with duplicate removal (Algorithm 5): the block's light rows run their batches in
    lockstep; a row reads the batch of the first warp with the same v' from shared memory.
    Returns (this warp's output size, neighbour batches loaded, bitset reads)."""
    lane = cuda.laneid
    owner = w
    for r in range(w - 1, -1, -1):
        if s_kind[r] == KIND_WARP and s_vert[r] == s_vert[w]:
            owner = r
    rounds = np.int64(0)
    for r in range(warps):
        if s_kind[r] == KIND_WARP and (s_work[r] + 31) // 32 > rounds:
            rounds = (s_work[r] + 31) // 32
    mine = s_kind[w] == KIND_WARP
    cached = 0
    written = np.int64(0)
    l_nbr = l_bits = 0
    for bt in range(rounds):
        k = s_start[w] + bt * 32
        live = mine and bt * 32 < s_work[w]
        if live and owner == w:
            if bt * 32 + lane < s_work[w]:
                batch[w, lane] = ci[k + lane]
            l_nbr += 1
        cuda.syncthreads()
        if live:
            pred = False
            x = np.int32(-1)
            if bt * 32 + lane < s_work[w]:
                x = batch[owner, lane]
                pred = first_edge_keeps(structure, ci_label, k + lane, label, bits, ubase, rowc, w, width, x)
            l_bits += 1
            cached, written = emit(cache, w, pred, x, cached, written, out, base, use_cache)
        cuda.syncthreads()
    if mine:
        written = flush(cache, w, cached, written, out, base)
    return written, l_nbr, l_bits


class BalanceKernels(NamedTuple):
    block_first_edge: object
    heavy: object
    histogram: object
    other_edges: object


@functools.lru_cache(maxsize=None)
def make_balanced_kernels(warps: int) -> BalanceKernels:
    """Block-cooperative first-edge kernels for blocks of ``warps`` warps."""
    return BalanceKernels(_block_kernel(warps), _heavy_kernel(warps), histogram_kernel, _other_edges_kernel(warps))


def _block_kernel(warps: int):
    Q = MAX_QUERY_VERTICES
    T = warps * 32

    @jit
    def block_first_edge(tab, width, a, m, col, part, label, bits, ubase, F, gba, num, n, structure,
                         meta, gl, keys, offs, ci, ci_label, use_cache, w1, w3, dedup, queue, qcount,
                         qinfo, e_lo, e_hi, loads, instrument):
        """The first linking edge with layers 1-4 of the load balance and duplicate removal, then
        (fused) the other linking edges e_lo..e_hi-1 of every row not queued for ``heavy``."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        batch = cuda.shared.array((warps, 32), np.int32)
        ntile = cuda.shared.array((warps, 32), np.int32)
        s_start = cuda.shared.array(warps, np.int64)
        s_work = cuda.shared.array(warps, np.int64)
        s_kind = cuda.shared.array(warps, np.int32)
        s_vert = cuda.shared.array(warps, np.int32)
        s_written = cuda.shared.array(warps, np.int64)
        wtot = cuda.shared.array(warps, np.int32)
        scan = cuda.shared.array(T, np.int32)
        w = cuda.threadIdx.x // 32
        l_struct = l_nbr = l_bits = l_tab = 0
        g = cuda.blockIdx.x
        while g * warps < m:
            i = g * warps + w
            l_struct += classify_row(i, m, rowc, w, tab, a, width, col, part, n, structure, meta, gl,
                                     keys, offs, w1, w3, queue, qcount, s_start, s_work, s_kind, s_vert,
                                     s_written)
            cuda.syncthreads()
            pool_rows(g, rowc, width, label, bits, ubase, F, gba, ci, ci_label, structure, s_start,
                      s_work, s_kind, s_written, wtot, scan, warps)
            kind = s_kind[w]
            size = np.int64(0)
            if kind == KIND_POOL:
                size = s_written[w]
                l_nbr += (s_work[w] + 31) // 32
                l_bits += (s_work[w] + 31) // 32
            if dedup == 0:
                if kind == KIND_WARP:
                    # no linking edge checked per element (e_hi = e_lo): intersect_row does them below
                    size, batches = warp_first_edge(1, rowc, cache, batch, w, width, s_start[w],
                                                    s_start[w] + s_work[w], ci, ci_label, structure, label,
                                                    bits, ubase, qinfo, e_lo, e_lo, gba, F[i], use_cache)
                    l_nbr += batches
                    l_bits += batches
            else:
                written, ln, lb = dedup_warp_rows(rowc, cache, batch, w, width, label, bits, ubase, gba,
                                                  F[i] if i < m else 0, ci, ci_label, structure, s_start,
                                                  s_work, s_kind, s_vert, use_cache, warps)
                l_nbr += ln
                l_bits += lb
                if kind == KIND_WARP:
                    size = written
            if kind == KIND_WARP or kind == KIND_POOL:
                size, ls, ln, lt = intersect_row_galloping(rowc, batch, ntile, cache, w, qinfo, e_lo, e_hi, gba,
                                                           F[i], size, n, structure, meta, gl, keys, offs, ci,
                                                           ci_label, use_cache)
                l_struct += ls
                l_nbr += ln
                l_tab += lt
                if cuda.laneid == 0:
                    num[i] = size
            cuda.syncthreads()
            g += cuda.gridDim.x
        if cuda.laneid == 0:
            add_load_counts(loads, instrument, l_struct, l_nbr, l_bits, l_tab)

    return block_first_edge


def _heavy_kernel(warps: int):
    Q = MAX_QUERY_VERTICES
    R = 2 * MAX_LINK_EDGES        # (start, end) of the first and every other linking edge
    T = warps * 32

    @jit
    def heavy(tab, width, a, part, col, label, bits, ubase, F, gba, num, n, structure, meta, gl, keys,
              offs, ci, ci_label, queue, qcount, qinfo, e_lo, e_hi, use_cache, loads, instrument):
        """Layer 1: a whole block for each queued row, rounds of one element per thread; each
        element that survives the first edge is checked against the other linking edges
        e_lo..e_hi-1 in the same round (binary searches, :func:`all_edges_contain`), so every
        warp of the block works on the row's intersections too."""
        rowc = cuda.shared.array((1, Q), np.int32)
        ranges = cuda.shared.array((1, R), np.int64)
        wtot = cuda.shared.array(warps, np.int32)
        scan = cuda.shared.array(T, np.int32)
        tid = cuda.threadIdx.x
        w = tid // 32
        l_struct = l_nbr = 0
        h = cuda.blockIdx.x
        while h < qcount[0]:
            i = queue[h]
            if w == 0:
                load_row(rowc, 0, tab, a + i, width)
                for ed in range(e_lo, e_hi):       # ranges[0, 2k]: edge e_lo - 1 + k (k = 0: the first edge)
                    col2, part2, _ = edge_at(qinfo, ed)
                    s2, e2, ld2 = warp_neighbor_range(structure, meta, gl, keys, offs, part2, rowc[0, col2], n)
                    l_struct += ld2
                    if cuda.laneid == 0:
                        ranges[0, 2 * (ed - e_lo + 1)] = s2
                        ranges[0, 2 * (ed - e_lo + 1) + 1] = e2
            cuda.syncthreads()
            s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, rowc[0, col], n)
            l_struct += ld
            written = np.int64(0)
            k0 = s
            while k0 < e:
                k = k0 + tid
                pred = False
                x = np.int32(-1)
                if k < e:
                    x = ci[k]
                    pred = first_edge_keeps(structure, ci_label, k, label, bits, ubase, rowc, 0, width, x)
                    if pred:
                        pred = all_edges_contain(qinfo, e_lo - 1, e_hi, ranges, 0, x, structure, ci, ci_label)
                total = block_scan(pred, wtot, scan, warps)
                if pred:
                    gba[F[i] + written + scan[tid]] = x
                written += total
                l_nbr += 1 + 5 * (e_hi - e_lo)
                cuda.syncthreads()
                k0 += T
            if tid == 0:
                num[i] = written
            cuda.syncthreads()
            h += cuda.gridDim.x
        if cuda.laneid == 0:
            add_load_counts(loads, instrument, l_struct, l_nbr, l_nbr, 0)

    return heavy


def _other_edges_kernel(warps: int):
    Q = MAX_QUERY_VERTICES

    @jit
    def other_edges(tab, width, a, m, F, gba, num, n, structure, meta, gl, keys, offs, ci, ci_label,
                    use_cache, qinfo, e_lo, e_hi, loads, instrument):
        """A warp per row: gba[F[i]:F[i] + num[i]] (the first edge's survivors) intersected in
        place with the linking edges e_lo..e_hi-1 (:func:`gsi.join.intersect_row_galloping`); num[i] = the
        result's size."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        btile = cuda.shared.array((warps, 32), np.int32)
        ntile = cuda.shared.array((warps, 32), np.int32)
        w = cuda.threadIdx.x // 32
        l_struct = l_nbr = l_tab = 0
        i = cuda.blockIdx.x * warps + w
        while i < m:
            load_row(rowc, w, tab, a + i, width)
            size = num[i]
            cuda.syncwarp(FULL_MASK)
            size, ls, ln, lt = intersect_row_galloping(rowc, btile, ntile, cache, w, qinfo, e_lo, e_hi, gba, F[i],
                                                       size, n, structure, meta, gl, keys, offs, ci, ci_label,
                                                       use_cache)
            l_struct += ls
            l_nbr += ln
            l_tab += lt
            if cuda.laneid == 0:
                num[i] = size
            i += cuda.gridDim.x * warps
        if cuda.laneid == 0:
            add_load_counts(loads, instrument, l_struct, l_nbr, 0, l_tab)

    return other_edges


@jit
def histogram_kernel(counts, m, hist):
    """hist[b] = rows whose work falls in the 32-wide interval b (the last bin pools the rest)."""
    i = cuda.grid(1)
    while i < m:
        b = counts[i] // 32
        if b >= HIST_BINS:
            b = HIST_BINS - 1
        cuda.atomic.add(hist, b, 1)
        i += cuda.gridsize(1)


def histogram_thresholds(hist: np.ndarray, sms: int, block_threads: int,
                         t_sync: float = T_SYNC, t_launch: float = T_LAUNCH) -> tuple[int, int]:
    """SGSI's cost model: (W1, W3) minimising the cost of the work histogram ``hist`` (rows per
    32-wide interval). Thresholds are inclusive upper bounds of the warp and pool layers."""
    hist = np.asarray(hist, dtype=np.float64)
    nz = np.flatnonzero(hist)
    b = int(nz[-1]) if nz.size else 0
    per_block = block_threads // 32                 # the paper's 32 warps of a 1024-thread block
    i = np.arange(b + 1, dtype=np.float64)
    h = hist[:b + 1]
    f_warp = i * np.ceil(h / (per_block * sms))
    f_mwarp = (1 + 2 * t_sync) * np.ceil(32 * i * np.ceil(h / sms) / block_threads)
    f_block = (1 + t_sync) * np.ceil(h / sms) * np.ceil(32 * i / block_threads)
    f_kernel = h * (t_launch + np.ceil(32 * i / (block_threads * sms)))
    top3 = min(per_block - 1, b)                    # x3 ranges over the sub-block intervals
    best3, cost3 = 0, np.inf
    for x3 in range(top3 + 1):
        c = f_warp[:x3 + 1].sum() + f_mwarp[x3 + 1:per_block].sum()
        if c < cost3:
            best3, cost3 = x3, c
    best1, cost1 = per_block, np.inf
    for x1 in range(per_block, max(b, per_block) + 1):
        c = f_block[per_block:x1 + 1].sum() + f_kernel[x1 + 1:].sum()
        if c < cost1:
            best1, cost1 = x1, c
    return 32 * (best1 + 1) - 1, 32 * (best3 + 1) - 1


def _sm_count() -> int:
    if simulator_active():
        return 1
    return int(cuda.get_current_device().MULTIPROCESSOR_COUNT)


class LoadBalancer:
    """An engine's load-balance state and launcher for the first linking edge (GSI and SGSI):
    the queue length and the work histogram, allocated once through the engine's budget.

    ``load_balance``: False | True (thresholds ``w1``/``w3``) | "histogram"; ``qcount`` is the
    device cell ``row_counts``/``counts_scan`` empty at each iteration; ``queued`` counts rows
    queued for whole blocks when ``instrument`` (a host round trip per iteration)."""

    def __init__(self, budget, *, warps: int, load_balance, w1: int, w3: int, duplicate_removal: bool,
                 write_cache: bool, max_blocks: int, instrument: bool = False):
        self.kernels = make_balanced_kernels(warps)
        self.warps, self.block_threads, self.max_blocks = warps, warps * 32, max_blocks
        self.load_balance, self.w1, self.w3 = load_balance, int(w1), int(w3)
        self.duplicate_removal, self.write_cache = bool(duplicate_removal), bool(write_cache)
        self.instrument = bool(instrument)
        self.qcount = budget.device_array(1, np.int64, what="load-balance queue length")
        self.d_hist = budget.device_array(HIST_BINS, np.int64, what="work histogram")
        self.h_hist = np.zeros(HIST_BINS, np.int64)
        self.h_queued = np.zeros(1, np.int64)
        self.sms = _sm_count()
        self.queued = 0

    def needed(self, max_list: int) -> bool:
        """Whether the block kernel is used (else the plain warp-per-row kernel does the same)."""
        return (self.load_balance == "histogram" or (bool(self.load_balance) and max_list > self.w3)
                or self.duplicate_removal)

    def thresholds(self, counts, m: int, stream=0) -> tuple[int, int]:
        if self.load_balance == "histogram":
            T = self.block_threads
            fill(self.d_hist, 0, stream=stream)
            blocks = grid_blocks(m, T, self.max_blocks)
            self.kernels.histogram[blocks, T, stream](counts, m, self.d_hist)
            self.d_hist.copy_to_host(self.h_hist, stream=stream)
            if stream != 0:
                stream.synchronize()
            return histogram_thresholds(self.h_hist, self.sms, T)
        if self.load_balance:
            return self.w1, self.w3
        return _NO_LIMIT, _NO_LIMIT

    def first_edge(self, tab, width, a, m, col, part, label, bits, ubase, F, gba, num, n, idx, max_list,
                   counts, qinfo, e_lo, e_hi, loads, stream=0) -> None:
        """Rows a..a+m-1 of ``tab``: the first linking edge (col, part, label) into gba[F[i]:] with
        the load balance and duplicate removal, then the linking edges e_lo..e_hi-1 of ``qinfo``
        (none when e_lo == e_hi); num[i] = each row's survivors. ``counts`` holds the rows' work
        sizes (row_counts / counts_scan, which also emptied the queue) and becomes the queue;
        ``idx`` is the neighbour structure's kernel arguments, ``max_list`` its longest list."""
        w1, w3 = self.thresholds(counts, m, stream)
        inst = int(self.instrument)
        T = self.block_threads
        grid = grid_blocks(m, self.warps, self.max_blocks)
        # A large table's other linking edges go to a launch of their own: fused, a warp's merge
        # holds the block's other warps at the block's next row round.
        separate = e_lo < e_hi and m > SEPARATE_EDGES_ROUNDS * T
        fused_hi = e_lo if separate else e_hi
        self.kernels.block_first_edge[grid, T, stream](
            tab, width, a, m, col, part, label, bits, ubase, F, gba, num, n, *idx, int(self.write_cache),
            np.int64(w1), np.int64(w3), int(self.duplicate_removal), counts, self.qcount, qinfo, e_lo, fused_hi,
            loads, inst)
        if self.instrument:
            self.qcount.copy_to_host(self.h_queued, stream=stream)
            if stream != 0:
                stream.synchronize()
            self.queued += int(self.h_queued[0])
        if self.load_balance and max_list > w1:   # else none queued
            self.kernels.heavy[grid, T, stream](
                tab, width, a, part, col, label, bits, ubase, F, gba, num, n, *idx, counts, self.qcount,
                qinfo, e_lo, fused_hi, int(self.write_cache), loads, inst)
        if separate:
            self.kernels.other_edges[grid, T, stream](
                tab, width, a, m, F, gba, num, n, *idx, int(self.write_cache), qinfo, e_lo, e_hi, loads, inst)
