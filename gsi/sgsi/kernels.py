"""SGSI's device kernels (Zeng et al., TKDE 2022 §6.3): a streamed chunk's bounds and reached
segments, Algorithm 4 for one segment (a warp per row), the offsets around GSI's
block-cooperative kernels, Algorithm 5 for one segment, the writers of the new table, and the
in-place count and write of the ``zero_copy`` join."""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from common.gpu.cudasim import FULL_MASK
from common.gpu.device_functions import lower_bound, warp_max, warp_sum
from common.gpu.runtime import cuda, jit

from ..join import (
    EDGE_FIELDS,
    MAX_QUERY_VERTICES,
    count_row_in_place,
    link_row,
    load_row,
    merge_in_place_galloping,
    warp_first_edge,
    write_row_in_place,
)
from ..pcsr import PCSR, warp_neighbor_range

#: The per-chunk demand slots after the reached-segment marks: the rows' longest first-edge
#: bound, and the words of the chunk's GBA.
LONGEST = 0
GBA_WORDS = 1
DEMAND_SLOTS = 2


class SGSIKernels(NamedTuple):
    bounds: object
    segment_first: object
    segment_prep: object
    segment_add: object
    segment_intersect: object
    link_part: object
    bucket_count: object
    bucket_link: object
    in_place_count: object
    in_place_write: object


@functools.lru_cache(maxsize=None)
def make_sgsi_kernels(warps: int) -> SGSIKernels:
    """The kernels SGSI adds to GSI's: the chunk's bounds and reached segments, Algorithm 4 for
    one segment (a warp per row), the offsets around GSI's block-cooperative kernels,
    Algorithm 5 for one segment, and the writer of part of the new table."""
    Q = MAX_QUERY_VERTICES
    Q2 = 2 * MAX_QUERY_VERTICES                 # two words (a list's range) per linking edge

    @jit
    def bounds_kernel(tab, width, a, m, edges, e_lo, e_hi, deg, deg_rows, part_max, n, cap, counts, raw, num,
                      seg_lo, seg_hi, seg_first, seg_count, marks, epoch, demand):
        """A thread per row: raw[i] = a bound of |N(v', l0)| (:func:`degree_bounds`), counts[i] =
        min(raw[i], cap) (the row's GBA: its survivors are distinct members of C(u), |C(u)| =
        ``cap``), num[i] = 0, and marks[s] = epoch for every segment s of a linking edge's
        partition whose source range holds that edge's vertex of the row; demand[LONGEST] = the
        longest bound and demand[GBA_WORDS] += the rows' counts (one atomic per warp)."""
        longest = np.int64(0)
        gba_words = np.int64(0)
        i = cuda.grid(1)
        while i < m:
            row = (a + i) * width
            num[i] = 0
            for ed in range(e_lo, e_hi):
                v = tab[row + edges[ed * EDGE_FIELDS]]
                p = edges[ed * EDGE_FIELDS + 1]
                if ed == e_lo:
                    bound = min(deg[np.int64(p % deg_rows) * n + v], part_max[p])
                    raw[i] = bound
                    counts[i] = min(np.int64(bound), cap)
                    gba_words += counts[i]
                    longest = max(longest, np.int64(bound))
                s = seg_first[p]
                end = s + seg_count[p]
                s = lower_bound(seg_hi, s, end, v)
                while s < end and seg_lo[s] <= v:
                    marks[s] = epoch
                    s += 1
            i += cuda.gridsize(1)
        cuda.syncwarp(FULL_MASK)
        longest = warp_max(longest)
        gba_words = warp_sum(gba_words)
        if cuda.laneid == 0 and longest > 0:
            cuda.atomic.max(demand, LONGEST, longest)
        if cuda.laneid == 0 and gba_words > 0:
            cuda.atomic.add(demand, GBA_WORDS, gba_words)

    @jit
    def segment_first_kernel(tab, width, a, r0, m, col, lo, hi, sid, label, bits, ubase, F, gba, num, n, meta, slot,
                             use_cache):
        """Algorithm 4 for one segment, a warp per row r0..m-1 whose v' lies in lo..hi: append
        (N_x(v', l0) minus the row) ∩ C(u) at gba[F[i] + num[i]] and add the count to num[i]."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        btile = cuda.shared.array((warps, 32), np.int32)
        w = cuda.threadIdx.x // 32
        i = r0 + cuda.blockIdx.x * warps + w
        while i < m:
            v = tab[(a + i) * width + col]
            if lo <= v and v <= hi:
                s, e, _ = warp_neighbor_range(PCSR, meta, slot, slot, meta, sid, v, n)
                if s < e:
                    load_row(rowc, w, tab, a + i, width)
                    before = num[i]
                    written, _ = warp_first_edge(1, rowc, cache, btile, w, width, s, e, slot, slot, PCSR, label,
                                                 bits, ubase, slot, 0, 0, gba, F[i] + before, use_cache)
                    if cuda.laneid == 0:
                        num[i] = before + written
            cuda.syncwarp(FULL_MASK)
            i += cuda.gridDim.x * warps

    @jit
    def segment_prep_kernel(F, num, Fx, m, qcount):
        """Before GSI's block-cooperative kernel on a segment: Fx = F + num (where it appends)
        and an empty queue of heavy rows."""
        i = cuda.grid(1)
        if i == 0:
            qcount[0] = 0
        while i < m:
            Fx[i] = F[i] + num[i]
            i += cuda.gridsize(1)

    @jit
    def segment_add_kernel(num, numx, m):
        """After it: num += what the segment appended."""
        i = cuda.grid(1)
        while i < m:
            num[i] += numx[i]
            i += cuda.gridsize(1)

    @jit
    def segment_intersect_kernel(tab, width, a, m, col, lo, hi, part, F, gba, num, rd, wr, n, meta, slot,
                                 use_cache):
        """Algorithm 5 for one segment (a warp per row whose v'' lies in lo..hi): merge
        gba[F+rd : F+num] with the segment's part of N(v'', l), writing survivors at F+wr; rd
        moves past the part's last neighbour."""
        cache = cuda.shared.array((warps, 32), np.int32)
        btile = cuda.shared.array((warps, 32), np.int32)
        ntile = cuda.shared.array((warps, 32), np.int32)
        lane = cuda.laneid
        w = cuda.threadIdx.x // 32
        i = cuda.blockIdx.x * warps + w
        nw = cuda.gridDim.x * warps
        while i < m:
            v = tab[(a + i) * width + col]
            if lo <= v and v <= hi:
                s, e, _ = warp_neighbor_range(PCSR, meta, slot, slot, meta, part, v, n)
                bp = rd[i]
                size = np.int64(num[i])
                if s < e and bp < size:
                    base = F[i]
                    written, bp, _, _ = merge_in_place_galloping(btile, ntile, cache, w, gba, base, bp, size, slot,
                                                                 s, e, wr[i], PCSR, slot, 0, use_cache)
                    # every buffer element up to the part's last neighbour has been consumed
                    nxt = size
                    if bp < size:
                        nxt = lower_bound(gba, base + bp, base + size, slot[e - 1] + 1) - base
                    if lane == 0:
                        rd[i] = nxt
                        wr[i] = written
            cuda.syncwarp(FULL_MASK)
            i += nw

    @jit
    def link_part_kernel(tab, width, a, i0, i1, gba, F, num, P, p0, out):
        """Rows i0..i1-1 of the chunk, a warp per row: out rows P[i] - p0 .. = the row extended
        by each of its survivors gba[F[i]:F[i] + num[i]] (Algorithm 6, row-major as GSI)."""
        i = i0 + cuda.blockIdx.x * warps + cuda.threadIdx.x // 32
        while i < i1:
            link_row(tab, width, a + i, gba, F[i], np.int64(num[i]), P[i] - p0, out)
            i += cuda.gridDim.x * warps

    @jit(device=True)
    def segment_key(v, seg_hi, first, count):
        """The bucket of vertex v: the first segment of the partition whose source range ends at
        or after v (``count`` past the last)."""
        return lower_bound(seg_hi, first, first + count, v) - first

    @jit
    def bucket_count_kernel(tab, width, a, i0, i1, gba, F, num, col, seg_hi, first, count, hist):
        """Rows i0..i1-1 of the chunk, a warp per row: hist[k] += the row's outputs whose column
        ``col`` (the next step's first linking vertex) falls in bucket k."""
        lane = cuda.laneid
        i = i0 + cuda.blockIdx.x * warps + cuda.threadIdx.x // 32
        while i < i1:
            cnt = np.int64(num[i])
            if col < width:
                if lane == 0 and cnt > 0:
                    cuda.atomic.add(hist, segment_key(tab[(a + i) * width + col], seg_hi, first, count), cnt)
            else:
                j = np.int64(lane)
                while j < cnt:
                    cuda.atomic.add(hist, segment_key(gba[F[i] + j], seg_hi, first, count), 1)
                    j += 32
            i += cuda.gridDim.x * warps

    @jit
    def bucket_link_kernel(tab, width, a, i0, i1, gba, F, num, col, seg_hi, first, count, cursor, out):
        """Rows i0..i1-1 of the chunk, a warp per row: each output row (the row extended by one
        survivor, Algorithm 6) goes to the next free row of its bucket (cursor[k], the bucket's
        start before the launch), so the new table is grouped by the segment of column ``col``."""
        lane = cuda.laneid
        i = i0 + cuda.blockIdx.x * warps + cuda.threadIdx.x // 32
        while i < i1:
            cnt = np.int64(num[i])
            if col < width:
                base = np.int64(0)
                if lane == 0 and cnt > 0:
                    key = segment_key(tab[(a + i) * width + col], seg_hi, first, count)
                    base = cuda.atomic.add(cursor, key, cnt)
                base = cuda.shfl_sync(FULL_MASK, base, 0)
                link_row(tab, width, a + i, gba, F[i], cnt, base, out)
            else:
                src = (a + i) * width
                j = np.int64(lane)
                while j < cnt:
                    v = gba[F[i] + j]
                    dst = cuda.atomic.add(cursor, segment_key(v, seg_hi, first, count), 1) * (width + 1)
                    for c in range(width):
                        out[dst + c] = tab[src + c]
                    out[dst + width] = v
                    j += 32
            cuda.syncwarp(FULL_MASK)
            i += cuda.gridDim.x * warps

    @jit
    def in_place_count_kernel(tab, width, a, m, edges, e_lo, e_hi, bits, ubase, ci, offsets, bases, stride, per_row,
                              counts, total):
        """Rows a..a+m-1 of the table, a warp per row, every linking edge's lists read in place
        (the graph mapped): total[0] += the rows' survivors (:func:`gsi.join.count_row_in_place`),
        total[1] += the list words read; with ``per_row``, counts[i] = row a+i's."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        ranges = cuda.shared.array((warps, Q2), np.int64)
        ntile = cuda.shared.array((warps, 32), np.int32)
        w = cuda.threadIdx.x // 32
        found = np.int64(0)
        words = np.int64(0)
        i = cuda.blockIdx.x * warps + w
        while i < m:
            load_row(rowc, w, tab, a + i, width)
            c, read = count_row_in_place(rowc, ranges, ntile, ntile, w, tab, a + i, width, edges, e_lo, e_hi, bits,
                                         ubase, ci, offsets, bases, stride, tab, 0)
            if per_row != 0 and cuda.laneid == 0:
                counts[i] = c
            found += c
            words += read
            cuda.syncwarp(FULL_MASK)
            i += cuda.gridDim.x * warps
        if cuda.laneid == 0 and found > 0:
            cuda.atomic.add(total, 0, found)
        if cuda.laneid == 0 and words > 0:
            cuda.atomic.add(total, 1, words)

    @jit
    def in_place_write_kernel(tab, width, a, i0, i1, edges, e_lo, e_hi, bits, ubase, ci, offsets, bases, stride, P, p0,
                              out, total):
        """Rows i0..i1-1 of the chunk (table rows a+i), a warp per row, lists read in place: the
        row's new rows at out row P[i] - p0 on (:func:`gsi.join.write_row_in_place`); total[0] +=
        the list words read."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        ranges = cuda.shared.array((warps, Q2), np.int64)
        ntile = cuda.shared.array((warps, 32), np.int32)
        stile = cuda.shared.array((warps, 32), np.int32)
        w = cuda.threadIdx.x // 32
        words = np.int64(0)
        i = i0 + cuda.blockIdx.x * warps + w
        while i < i1:
            load_row(rowc, w, tab, a + i, width)
            _, read = write_row_in_place(rowc, ranges, ntile, stile, w, tab, a + i, width, edges, e_lo, e_hi, bits,
                                         ubase, ci, offsets, bases, stride, out, P[i] - p0)
            words += read
            cuda.syncwarp(FULL_MASK)
            i += cuda.gridDim.x * warps
        if cuda.laneid == 0 and words > 0:
            cuda.atomic.add(total, 0, words)

    return SGSIKernels(bounds_kernel, segment_first_kernel, segment_prep_kernel, segment_add_kernel,
                       segment_intersect_kernel, link_part_kernel, bucket_count_kernel, bucket_link_kernel,
                       in_place_count_kernel, in_place_write_kernel)

