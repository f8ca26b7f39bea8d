"""gMatch initialisation: the BFS seed pool (paper Sec. 3.1 step 3 and Sec. 3.6 "Initialisation";
digest Sec. 3.6 and 6.7). Work stealing itself lives in the DFS kernel (:mod:`gmatch.kernels`).

The search tree is expanded breadth-first on the GPU, one level per launch, until the pool holds
at least ``seed_pool`` partial matches (the paper's N, default 10^6 as in the authors' bitmap build);
warps of the DFS kernel then take seeds with an atomic counter.
CHOICES where the paper is silent:
* level 0 is every candidate of the first query vertex; each BFS launch gives one warp per partial
  match, whose lanes test its local candidates 32 at a time (the same fused check as the DFS) and
  append the valid ones with one warp-aggregated atomic per batch (no count/scan/fill passes: the
  order of seeds does not matter). One 8-byte read-back per level decides whether to go on.
* the BFS stops at position |V(Q)| - 2 at the latest, so the DFS always has one level to run;
* the pool is two preallocated ping-pong buffers of ``pool_elements`` int32 each (grown on demand,
  never per query): a level that overflows them is discarded and the previous level is used as the
  pool (fewer, larger seeds; stealing then balances).
"""

from __future__ import annotations

from numba import int32, int64

from common.device import cuda

from .candidates import QP_BACKWARD, QP_RESTRICT, QP_SIZES
from .kernels import BIG_DEGREE, NO_BOUND, group_length, row_length, source_row, visit, warp_append


@cuda.jit
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


@cuda.jit
def seed_expand(lc_off, lc_nbr, cidx, bitmap, eg, cand_mask, qp, inp, rows, d, out, capacity,
                counter):
    """Extend each of the ``rows`` partial matches of width d in ``inp`` by position d into ``out``
    (width d + 1); one warp per row, 32 candidates per step."""
    lc = (lc_off, lc_nbr, cidx, bitmap, eg)
    lane = cuda.threadIdx.x % 32
    warp = cuda.grid(1) // 32
    warps = cuda.gridsize(1) // 32
    n = qp[QP_SIZES, 0]
    back = qp[QP_BACKWARD, d]
    restr = qp[QP_RESTRICT, d]
    row = int64(warp)
    while row < rows:
        base_in = row * d
        best_deg = int64(BIG_DEGREE)
        src = int32(-1)
        skip = int32(-1)
        bound = int32(NO_BOUND)
        for j in range(d):
            vv = inp[base_in + j]
            if ((back >> j) & 1) != 0:
                row_src = source_row(lc, qp, j, d, vv)
                deg = row_length(lc, row_src)
                if deg < best_deg:
                    best_deg = deg
                    src = row_src
                    skip = j
            if ((restr >> j) & 1) != 0 and vv < bound:
                bound = vv
        length = group_length(lc, src, bound)
        lo = lc_off[max(src, 0)]
        b = 0
        while b < length:
            v = int32(-1)
            ok = False
            if b + lane < length:
                v = lc_nbr[lo + b + lane]
                ok = ((cand_mask[v] >> d) & 1) != 0
                j = d - 1
                while j >= 0 and ok:
                    # only the validity is used: the next level rebuilds task groups from its rows
                    ok, _deg, _src, _skip, _bound = visit(
                        inp[base_in + j], j, v, d, n, qp, lc, skip, ok,
                        int64(0), int32(-1), int32(-1), int32(NO_BOUND))
                    j -= 1
            pos = warp_append(ok, counter, 0, lane)
            if ok:
                if pos < capacity:
                    dst = pos * (d + 1)
                    for j in range(d):
                        out[dst + j] = inp[base_in + j]
                    out[dst + d] = v
            b += 32
        row += warps
