"""GSI's join for small tables in one launch (the paper is silent: GSI launches each iteration's
kernels from the host; docs/decisions.md, "GSI: the join of small tables in one launch").

``fused_join`` runs the level-by-level join's steps (:mod:`gsi.join`'s per-row device functions)
for the levels from ``level0`` on inside one block, with block barriers between the steps and
the row counts kept on the device:

1. with ``compact`` (``level0`` = 0), C(u_start) compacted from its bitset into the level-0
   table (:func:`gsi.filter.compact_bitset`); otherwise level0's table is ``tab_in``;
2. per level: each row's |N(v', l0)| and their exclusive scan (GBA offsets and size); the first
   and the other linking edges (:func:`gsi.join.first_edge_row`, a warp per row, no load balance
   or duplicate removal); the survivors' scan; the new table written.

Tables alternate between two regions the engine allocates once (level L in region L % 2). The
launch stops, leaving its state for the host's level-by-level path, before a level whose GBA
exceeds ``fuse_gba`` or the GBA buffer, or whose new table would not fit a region, and after
writing a table of more than ``fuse_rows`` rows; a level-by-level iteration whose new table has at
most ``fuse_rows`` rows hands the rest back (``level0`` > 0). Counts, statuses, tables and
embeddings equal the level-by-level path's (the same device functions, the same row order).

``out`` (int64): ``OUT_LEVEL`` the level the host goes on at (-1: done), ``OUT_ROWS`` its rows,
``OUT_COUNT`` the final table's rows when done, ``OUT_JOINED`` levels joined from ``level0``,
then from ``OUT_ITER`` the rows of every table written (index = level).
"""

from __future__ import annotations

import functools

import numpy as np

from common.device import cuda, jit

from .filter import compact_bitset
from .join import (
    EDGE_COL,
    EDGE_FIELDS,
    EDGE_LABEL,
    EDGE_PART,
    MAX_QUERY_VERTICES,
    block_row_counts,
    block_survivor_offsets,
    first_edge_row,
    link_row,
)

OUT_LEVEL, OUT_ROWS, OUT_COUNT, OUT_JOINED, OUT_ITER = 0, 1, 2, 3, 4
OUT_SIZE = OUT_ITER + MAX_QUERY_VERTICES
#: Fields of one join step in ``qinfo``: (query vertex, first linking edge, one past its last).
STEP_FIELDS = 3


@cuda.jit(device=True)
def stop_at(out, level, rows, joined):
    if cuda.threadIdx.x == 0:
        out[OUT_LEVEL] = level
        out[OUT_ROWS] = rows
        out[OUT_JOINED] = joined


@functools.lru_cache(maxsize=None)
def make_fused_kernel(warps: int):
    """The one-block join for blocks of ``warps`` warps (shared-memory shapes are compile-time)."""
    Q = MAX_QUERY_VERTICES

    @jit(max_registers=64)                 # blocks of up to 32 warps (72-80 registers unbounded)
    def fused_join(bits, nwords, nq, qinfo, steps, level0, m0, tab_in, compact, region0, region1, region_elems,
                   fuse_rows, fuse_gba, rows_cap, gba_cap, collect, counts, F, gba, num, P, n, structure, meta, gl,
                   keys, offs, ci, ci_label, use_cache, out):
        """The join levels from ``level0`` (its m0 rows in ``tab_in``; with ``compact``, level 0
        compacted from C(u_start) first) in one block; see the module docstring."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        btile = cuda.shared.array((warps, 32), np.int32)
        ntile = cuda.shared.array((warps, 32), np.int32)
        wsum = cuda.shared.array(warps, np.int64)
        tid = cuda.threadIdx.x
        w = tid // 32
        if compact != 0:            # level 0: C(u_start), the first vertex of the order, ascending
            compact_bitset(bits, qinfo[steps] * nwords, nwords, region0, wsum, warps)
            cuda.syncthreads()
        m = np.int64(m0)
        level = level0
        while True:
            tab = tab_in if level == level0 and compact == 0 else (region0 if level % 2 == 0 else region1)
            width = level + 1
            step = steps + STEP_FIELDS * (level + 1)
            ubase = qinfo[step] * nwords
            e0 = qinfo[step + 1]
            e_hi = qinfo[step + 2]
            col0 = qinfo[e0 * EDGE_FIELDS + EDGE_COL]
            part0 = qinfo[e0 * EDGE_FIELDS + EDGE_PART]
            lab0 = qinfo[e0 * EDGE_FIELDS + EDGE_LABEL]
            # each row's |N(v', l0)| and its GBA offset
            gba_total, _ = block_row_counts(tab, width, 0, m, col0, part0, n, structure, meta, gl, keys, offs,
                                            counts, F, wsum, warps)
            if gba_total > gba_cap or gba_total > fuse_gba:
                stop_at(out, level, m, level - level0)
                return
            cuda.syncthreads()
            # the first linking edge, then the other linking edges: each warp its own rows
            i = w
            while i < m:
                first_edge_row(rowc, cache, btile, ntile, w, tab, i, i, width, col0, part0, lab0, bits, ubase, F,
                               gba, num, n, structure, meta, gl, keys, offs, ci, ci_label, use_cache, qinfo,
                               e0 + 1, e_hi)
                i += warps
            cuda.syncthreads()
            rows = block_survivor_offsets(m, num, P, wsum, warps)       # the new table's row offsets
            last = level + 2 == nq
            if last and collect == 0:
                if tid == 0:
                    out[OUT_ITER + level + 1] = rows
                    out[OUT_COUNT] = rows
                stop_at(out, -1, 0, level + 1 - level0)
                return
            if rows * (width + 1) > region_elems:
                stop_at(out, level, m, level - level0)
                return
            cuda.syncthreads()                      # P of every row is visible to the whole block
            dst = region1 if level % 2 == 0 else region0
            i = tid // 32
            while i < m:
                link_row(tab, width, i, gba, F[i], np.int64(num[i]), P[i], dst)
                i += warps
            if tid == 0:
                out[OUT_ITER + level + 1] = rows
            level += 1
            if last or rows == 0:
                if tid == 0:
                    out[OUT_COUNT] = rows
                stop_at(out, -1, 0, level - level0)
                return
            if rows > fuse_rows or rows > rows_cap:
                stop_at(out, level, rows, level - level0)
                return
            m = rows
            cuda.syncthreads()                      # the new table is visible to the whole block

    return fused_join


__all__ = ["make_fused_kernel", "OUT_SIZE", "STEP_FIELDS"]
