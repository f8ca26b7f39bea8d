"""gMatch initialisation: the BFS seed pool (paper Sec. 3.1 step 3 and Sec. 3.6 "Initialisation").
Work stealing itself lives in the DFS kernel (:mod:`gmatch.enumerate`).

The search tree is expanded breadth-first on the GPU, one level per launch, until the pool holds
at least ``seed_pool`` partial matches (the paper's N, default 10^6 as in the authors' bitmap
build); warps of the DFS kernel then take seeds with an atomic counter.
CHOICES where the paper is silent:
* level 0 is every candidate of the first query vertex (over the candidate graph, simply the
  ranks 0..|C(0)|-1); each BFS launch gives one warp per partial match, whose lanes test its
  local candidates 32 at a time with the DFS's own check and task-group functions and append the
  valid ones with one warp-aggregated atomic per batch (no count/scan/fill passes: the order of
  seeds does not matter). One 8-byte read-back per level decides whether to go on.
* the BFS stops one position before the last enumerated one, so the DFS always has a level;
* the pool is two ping-pong buffers that grow when a level needs more room (the engine's
  ``_grow_pool``); a level past the largest buffer or the memory budget is discarded and the
  previous level is used as the pool (fewer, larger seeds; stealing then balances).
* a bounded pool (the data-graph probe's, past the paper) never grows: its launch is told to
  ``stop_past`` its capacity, whose warps leave once the level holds more rows than that, and the
  fill ends unfinished (the probe hands the query to the candidate graph), so that one level
  fanning out over hubs costs no more than the capacity's rows.
"""

from __future__ import annotations

import functools

from numba import int8, int32, int64

from common.gpu.cudasim import FULL_MASK as FULL
from common.gpu.runtime import cuda, jit

from .enumerate import SQ_ROWS, load_plan, search_functions, warp_append

SEED_WARPS = 8            # warps per block of the BFS launches (256 threads)


@jit
def seed_level0(cand_mask, out, capacity, counter):
    """out <- every data vertex that may match position 0 (warp-aggregated append)."""
    nv = cand_mask.size
    lane = cuda.threadIdx.x % 32
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    start = i - lane
    while start < nv:                       # warp-uniform loop bound
        v = start + lane
        ok = v < nv and (cand_mask[min(v, nv - 1)] & 1) != 0
        pos = warp_append(ok, counter, 0, lane)
        if ok and pos < capacity:
            out[pos] = v
        start += stride


@jit
def seed_indices(out, count):
    """out[i] <- i for the ``count`` candidate indices of position 0 (candidate-graph mode)."""
    i = cuda.grid(1)
    while i < count:
        out[i] = i
        i += cuda.gridsize(1)


@functools.lru_cache(maxsize=None)
def seed_expand_kernel(indexed: bool):
    """The BFS step over the data graph or, ``indexed``, the candidate graph."""
    fn = search_functions(indexed)
    validate, group, group_start = fn.validate, fn.group, fn.group_start
    CHECK_BIT = not indexed

    @jit
    def seed_expand(off, ent, bitmap, cset, eg, cand, qp, inp, rows, d, out, capacity, counter, stop_past):
        """Extend each of the ``rows`` partial matches of width d in ``inp`` by position d into
        ``out`` (width d + 1); one warp per row, 32 candidates per step. The row is the whole
        partial match (a stack of seed width d), so the DFS's task-group and check functions
        serve unchanged. With ``stop_past`` a warp takes no further row once ``counter`` has
        passed ``capacity`` (the level is incomplete and the caller discards it)."""
        G = (off, ent, bitmap, cset, eg, cand)
        sq = cuda.shared.array((SQ_ROWS, 32), int32)
        seed = cuda.shared.array((SEED_WARPS, 32, 1), int32)
        nopar = cuda.shared.array((SEED_WARPS, 32, 1), int8)
        load_plan(qp, sq, cuda.threadIdx.x)
        cuda.syncthreads()
        lane = cuda.threadIdx.x % 32
        w = cuda.threadIdx.x // 32
        warp = cuda.grid(1) // 32
        warps = cuda.gridsize(1) // 32
        row = int64(warp)
        while row < rows:
            if stop_past:                   # one read, broadcast: the warp leaves together
                past = int32(0)
                if lane == 0 and counter[0] > capacity:
                    past = int32(1)
                if cuda.shfl_sync(FULL, past, 0):
                    break
            if lane == 0:
                seed[w, d - 1, 0] = int32(row)
            cuda.syncwarp()
            key, skip, length = group(seed, nopar, w, d, inp, d, G, sq, d, 0)
            start = group_start(G, max(key, 0))
            b = 0
            while b < length:
                x = int32(-1)
                ok = False
                if b + lane < length:
                    x = ent[start + b + lane]
                    ok = True
                    if CHECK_BIT:
                        ok = ((cand[x] >> d) & 1) != 0
                    if ok:
                        ok = validate(seed, nopar, w, d, inp, d, G, sq, d, x, 0, skip)
                pos = warp_append(ok, counter, 0, lane)
                if ok and pos < capacity:
                    dst = pos * (d + 1)
                    for j in range(d):
                        out[dst + j] = inp[row * d + j]
                    out[dst + d] = x
                b += 32
            cuda.syncwarp()
            row += warps

    return seed_expand
