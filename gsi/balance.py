"""Load balance (GSI §VI-A, SGSI §7) and duplicate removal (GSI §VI-B, Algorithm 5) for the first
linking edge of a join iteration, the set operation whose work |N(v'_i, l0)| is skewed.

The 4-layer scheme, with the work of row i = |N(v'_i, l0)|, mapped onto Numba (which has no
dynamic parallelism):

1. work > W1: the block queues the row (one atomic) and skips it; a follow-up launch
   (``heavy_kernel``) gives each queued row a whole block. Choice where the paper is silent: one
   block per queued row rather than ⌈work/1024⌉ blocks, since rows must come out sorted and
   several blocks writing one row would need another ordering pass.
2. and 3. W3 < work <= W1: the rows go into the block's task pool (SGSI's 1024-element pool):
   every round the block's threads take one pool element each (300 + 400 + 324, then 176, in
   SGSI's example), a block-wide scan of the survivors, segmented by row, keeps each row's output
   in order; a row larger than the block spans several rounds, which is layer 2 (a whole block
   per row) as a special case. W2 is therefore the block size.
4. work <= W3: a warp per row (:func:`gsi.join.warp_first_edge`).

Defaults W1 = 4096, W3 = 256 (GSI §VI-A). Launches are skipped where they cannot matter: the
engine uses the plain warp kernel when the partition's longest list is at most W3 (and duplicate
removal is off), and the follow-up launch only runs when that list exceeds W1. ``load_balance="histogram"`` chooses W1 and W3 per
iteration with SGSI's cost model over a histogram of the work in 32-wide intervals (built on the
device, one small copy back): the warp and multi-warp terms depend only on x3 and the block and
kernel terms only on x1, so the brute force over (x1, x3) separates into two 1-D minimisations.
Its constants (SGSI does not give their values): one block synchronisation t_sn = 1 and one
kernel launch t_kl = 50, in units of one warp step over 32 elements; |SMs| is the device's SM
count; intervals past ``HIST_BINS`` are pooled into the last one.

Duplicate removal: the warps of a block run the light rows' batches in lockstep; a row whose
vertex v' (same partition) already appears in an earlier warp of the block reads that warp's
batch from shared memory instead of global memory, so each distinct N(v', l0) batch is loaded once
per block (the "owner" is the first warp with that vertex).
"""

from __future__ import annotations

import functools

import numpy as np

from common.cudasim import FULL_MASK
from common.device import cuda, fill, simulator_active

from .join import (MAX_QUERY_VERTICES, add_loads, emit, first_edge_keeps, flush, load_row,
                   warp_first_edge)
from .pcsr import warp_neighbor_range

W1 = 4096
W3 = 256
HIST_BINS = 4096
T_SYNC = 1.0
T_LAUNCH = 50.0
_NO_LIMIT = np.int64(2 ** 62)


@functools.lru_cache(maxsize=None)
def make_balanced_kernels(warps: int) -> dict:
    """Block-cooperative first-edge kernels for blocks of ``warps`` warps."""
    Q = MAX_QUERY_VERTICES
    T = warps * 32

    @cuda.jit(device=True)
    def block_scan(pred, wtot, scan):
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

    @cuda.jit
    def block_first_edge_kernel(tab, width, a, m, col, part, label, bits, ubase, F, gba, num, n,
                                structure, meta, gl, keys, offs, ci, ci_label, use_cache, w1, w3,
                                dedup, queue, qcount, loads, instrument):
        """The first linking edge with layers 1-4 of the load balance and duplicate removal."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        batch = cuda.shared.array((warps, 32), np.int32)
        s_start = cuda.shared.array(warps, np.int64)
        s_work = cuda.shared.array(warps, np.int64)
        s_kind = cuda.shared.array(warps, np.int32)
        s_vert = cuda.shared.array(warps, np.int32)
        s_written = cuda.shared.array(warps, np.int64)
        wtot = cuda.shared.array(warps, np.int32)
        scan = cuda.shared.array(T, np.int32)
        tid = cuda.threadIdx.x
        lane = cuda.laneid
        w = tid // 32
        l_struct = l_nbr = l_bits = 0
        g = cuda.blockIdx.x
        while g * warps < m:
            i = g * warps + w
            if i < m:
                load_row(rowc, w, tab, a + i, width)
                v = rowc[w, col]
                s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, v, n)
                l_struct += ld
                if lane == 0:
                    work = e - s
                    kind = 1
                    if work > w1:
                        kind = 3
                        slot = cuda.atomic.add(qcount, 0, 1)
                        queue[slot] = i
                    elif work > w3:
                        kind = 2
                    s_start[w] = s
                    s_work[w] = work
                    s_kind[w] = kind
                    s_vert[w] = v
                    s_written[w] = 0
            elif lane == 0:
                s_kind[w] = 0
                s_work[w] = 0
                s_vert[w] = -1
            cuda.syncthreads()
            # ---- layers 2-3: the block's task pool, one element per thread per round
            pool = np.int64(0)
            for r in range(warps):
                if s_kind[r] == 2:
                    pool += s_work[r]
            rb = np.int64(0)
            while rb < pool:
                q = rb + tid
                r = -1
                first = np.int64(0)          # pool position of row r's first element
                acc = np.int64(0)
                for rr in range(warps):
                    if s_kind[rr] == 2:
                        if r < 0 and q < acc + s_work[rr]:
                            r = rr
                            first = acc
                        acc += s_work[rr]
                pred = False
                x = np.int32(-1)
                if r >= 0:
                    k = s_start[r] + (q - first)
                    x = ci[k]
                    pred = first_edge_keeps(structure, ci_label, k, label, bits,
                                            ubase, rowc, r, width, x)
                total = block_scan(pred, wtot, scan)
                if pred:
                    seg = first - rb
                    if seg < 0:
                        seg = 0
                    gba[F[g * warps + r] + s_written[r] + scan[tid] - scan[seg]] = x
                cuda.syncthreads()
                if tid < warps and s_kind[tid] == 2:
                    # this round's survivors of row tid: scan at its segment's end minus its start
                    acc = np.int64(0)
                    for rr in range(tid):
                        if s_kind[rr] == 2:
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
            if lane == 0 and s_kind[w] == 2:
                num[g * warps + w] = s_written[w]
                l_nbr += (s_work[w] + 31) // 32
                l_bits += (s_work[w] + 31) // 32
            # ---- layer 4: a warp per light row (with duplicate removal: lockstep batches)
            if dedup == 0:
                if s_kind[w] == 1:
                    written, batches = warp_first_edge(rowc, cache, w, width, s_start[w],
                                                       s_start[w] + s_work[w], ci, ci_label, structure,
                                                       label, bits, ubase, gba, F[i], use_cache)
                    l_nbr += batches
                    l_bits += batches
                    if lane == 0:
                        num[i] = written
            else:
                owner = w
                for r in range(w - 1, -1, -1):
                    if s_kind[r] == 1 and s_vert[r] == s_vert[w]:
                        owner = r
                rounds = np.int64(0)
                for r in range(warps):
                    if s_kind[r] == 1 and (s_work[r] + 31) // 32 > rounds:
                        rounds = (s_work[r] + 31) // 32
                mine = s_kind[w] == 1
                cached = 0
                written = np.int64(0)
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
                            pred = first_edge_keeps(structure, ci_label, k + lane, label, bits,
                                                    ubase, rowc, w, width, x)
                        l_bits += 1
                        cached, written = emit(cache, w, pred, x, cached, written, gba, F[i], use_cache)
                    cuda.syncthreads()
                if mine:
                    written = flush(cache, w, cached, written, gba, F[i])
                    if lane == 0:
                        num[i] = written
            cuda.syncthreads()
            g += cuda.gridDim.x
        if lane == 0:
            add_loads(loads, instrument, 0, l_struct)
            add_loads(loads, instrument, 1, l_nbr)
            add_loads(loads, instrument, 2, l_bits)

    @cuda.jit
    def heavy_kernel(tab, width, a, part, col, label, bits, ubase, F, gba, num, n, structure, meta,
                     gl, keys, offs, ci, ci_label, queue, qcount, loads, instrument):
        """Layer 1: a whole block for each queued row, rounds of one element per thread."""
        rowc = cuda.shared.array((1, Q), np.int32)
        wtot = cuda.shared.array(warps, np.int32)
        scan = cuda.shared.array(T, np.int32)
        tid = cuda.threadIdx.x
        lane = cuda.laneid
        w = tid // 32
        l_struct = l_nbr = 0
        h = cuda.blockIdx.x
        queued = qcount[0]
        while h < queued:
            i = queue[h]
            if w == 0:
                load_row(rowc, 0, tab, a + i, width)
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
                    pred = first_edge_keeps(structure, ci_label, k, label, bits,
                                            ubase, rowc, 0, width, x)
                total = block_scan(pred, wtot, scan)
                if pred:
                    gba[F[i] + written + scan[tid]] = x
                written += total
                l_nbr += 1
                cuda.syncthreads()
                k0 += T
            if tid == 0:
                num[i] = written
            cuda.syncthreads()
            h += cuda.gridDim.x
        if lane == 0:
            add_loads(loads, instrument, 0, l_struct)
            add_loads(loads, instrument, 1, l_nbr)
            add_loads(loads, instrument, 2, l_nbr)

    @cuda.jit
    def histogram_kernel(counts, m, hist):
        i = cuda.grid(1)
        while i < m:
            b = counts[i] // 32
            if b >= HIST_BINS:
                b = HIST_BINS - 1
            cuda.atomic.add(hist, b, 1)
            i += cuda.gridsize(1)

    return {"block_first_edge_kernel": block_first_edge_kernel, "heavy_kernel": heavy_kernel,
            "histogram_kernel": histogram_kernel}


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


def allocate(engine) -> None:
    """The queue length and the work histogram, allocated once in the engine's prepare."""
    engine._d_qcount = engine.budget.device_array(1, np.int64, what="load-balance queue length")
    engine._d_hist = engine.budget.device_array(HIST_BINS, np.int64, what="work histogram")
    engine._h_hist = np.zeros(HIST_BINS, np.int64)
    engine._sms = _sm_count()


def first_edge(engine, tab, width, a, m, col, part, label, ubase, F, gba, num, idx, max_list,
               stream=0) -> None:
    """Run the first linking edge of rows a..a+m-1 of ``tab`` with the engine's load-balance and
    duplicate-removal options, over the neighbour structure ``idx`` (kernel arguments) whose
    longest list is ``max_list``. ``engine.d_counts`` holds the rows' work sizes (from
    ``row_counts_kernel``, which also emptied the queue); it becomes the queue. The engine
    provides the options and the buffers named below (GSI and SGSI both do)."""
    kernels = engine.balanced
    T = engine.block_threads
    if engine.load_balance == "histogram":
        fill(engine._d_hist, 0, stream=stream)
        blocks = max(1, min(engine.max_blocks, (m + T - 1) // T))
        kernels["histogram_kernel"][blocks, T, stream](engine.d_counts, m, engine._d_hist)
        engine._d_hist.copy_to_host(engine._h_hist, stream=stream)
        if stream != 0:
            stream.synchronize()
        w1, w3 = histogram_thresholds(engine._h_hist, engine._sms, T)
    elif engine.load_balance:
        w1, w3 = engine.w1, engine.w3
    else:
        w1 = w3 = _NO_LIMIT
    inst = 1 if engine.instrument else 0
    queue = engine.d_counts
    grid = max(1, min(engine.max_blocks, (m + engine.warps - 1) // engine.warps))
    kernels["block_first_edge_kernel"][grid, T, stream](
        tab, width, a, m, col, part, label, engine.d_bits, ubase, F, gba, num, engine.n, *idx,
        int(engine.write_cache), np.int64(w1), np.int64(w3), int(engine.duplicate_removal), queue,
        engine._d_qcount, engine.d_loads, inst)
    if engine.instrument:
        engine._lb_queued += int(engine._d_qcount.copy_to_host()[0])
    if engine.load_balance and max_list > w1:   # else none queued
        kernels["heavy_kernel"][grid, T, stream](
            tab, width, a, part, col, label, engine.d_bits, ubase, F, gba, num, engine.n, *idx,
            queue, engine._d_qcount, engine.d_loads, inst)
