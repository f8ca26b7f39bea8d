"""gMatch's candidate graph built on the GPU (paper Sec. 3.5: the authors build it with count,
scan and fill passes on the device), from the filter's bits where they already are: the same
arrays as the host build :func:`gmatch.filter.build_candidate_graph`, which stays the build of
a split query's parts, the fallback where the device build's arrays do not fit, and the oracle
of the tests. The default build (``candidate_graph_build="gpu"``).

1. **Refine** (:func:`refine_position_kernel`): ``SWEEPS`` passes over the positions (matching
   order, then reverse), one launch per position: a thread per data vertex clears bit d of v when
   a query neighbour j of d has no candidate among v's neighbours of j's label. A launch reads
   only the bits of positions other than d, which it does not change, so it computes what the
   host's loop over C(d) does.
2. **Count** (:func:`count_candidates_kernel`): each block of ``chunk`` vertices counts its
   candidates per position into ``block_counts`` (position-major), and one exclusive scan of it
   gives where each block's part of C(d) starts in ``cand_set`` (C(0), C(1), ... back to back).
   The host reads those offsets (|C(d)|, the rows, the bitmap's size against the budget).
3. **Place** (:func:`place_candidates_kernel`): each block writes its candidates in vertex
   order (a block scan of the bits per position).
4. **Rows** (:func:`candidate_rows_kernel`): a thread per row (backward edge (j, d), candidate i
   of C(j)) counts the neighbours of C(j)[i] in C(d) and sets their bits in its bitset (a rank is
   a binary search in C(d)); one scan of the row lengths gives the row offsets (the host reads the
   total); the same kernel then writes the rows.

CHOICE where the paper is silent: a thread per vertex and per row (a hub's long label range is
one thread's loop); two reads by the host per query (the block offsets and the entries' total).
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from common.gpu.copies import download, fill, upload
from common.gpu.device_functions import lower_bound
from common.gpu.grid import grid_blocks
from common.gpu.runtime import cuda, jit, simulator_active
from common.gpu.scan import block_exclusive_scan, exclusive_scan
from common.graph.sorted_ranges import label_range

from .filter import QP_CBASE, QP_CSIZE, QP_LABELS, QP_WORDS, SWEEPS, adjacent_masks, edge_layout, pack_candidate_graph
from .order import MAX_QUERY_VERTICES, QueryPlan

BUILD_THREADS = 64 if simulator_active() else 256
BUILD_WARPS = BUILD_THREADS // 32
#: the most blocks the count and place steps use (each block takes a contiguous chunk of vertices)
BUILD_BLOCKS = 8 if simulator_active() else 1024


@jit
def refine_position_kernel(offsets, neighbors, entry_labels, qp, bits, nv, d, adjacent):
    """Clear bit ``d`` of every vertex with that bit that lacks, for some position j of the mask
    ``adjacent`` (d's query neighbours), a neighbour of label ``qp[QP_LABELS, j]`` with bit j."""
    v = cuda.grid(1)
    stride = cuda.gridsize(1)
    bit = numba.uint32(1) << numba.uint32(d)
    while v < nv:
        word = bits[v]
        if word & bit:
            first, last = offsets[v], offsets[v + 1]
            for j in range(MAX_QUERY_VERTICES):
                if (adjacent >> j) & 1:
                    lo, hi = label_range(entry_labels, first, last, qp[QP_LABELS, j])
                    hit = False
                    for e in range(lo, hi):
                        if (bits[neighbors[e]] >> j) & 1:
                            hit = True
                            break
                    if not hit:
                        bits[v] = word & ~bit
                        break
        v += stride


@jit
def count_candidates_kernel(bits, nv, n, chunk, block_counts, blocks):
    """block_counts[d * blocks + b] = the vertices of block b's chunk with bit d (d < n)."""
    counts = cuda.shared.array(MAX_QUERY_VERTICES, numba.int32)
    t = cuda.threadIdx.x
    if t < MAX_QUERY_VERTICES:
        counts[t] = 0
    cuda.syncthreads()
    b = cuda.blockIdx.x
    end = min(nv, (b + 1) * chunk)
    v = b * chunk + t
    while v < end:
        word = bits[v]
        if word != 0:
            for d in range(n):
                if (word >> d) & 1:
                    cuda.atomic.add(counts, d, 1)
        v += cuda.blockDim.x
    cuda.syncthreads()
    if t < n:
        block_counts[t * blocks + b] = counts[t]


@jit
def place_candidates_kernel(bits, nv, n, chunk, block_starts, blocks, cand_set):
    """Block b writes the vertices of its chunk with bit d, in vertex order, from
    ``block_starts[d * blocks + b]`` on in ``cand_set``."""
    wsum = cuda.shared.array(BUILD_WARPS, numba.int64)
    written = cuda.local.array(MAX_QUERY_VERTICES, numba.int64)
    for d in range(n):
        written[d] = 0
    b = cuda.blockIdx.x
    end = min(nv, (b + 1) * chunk)
    for tile in range(b * chunk, end, cuda.blockDim.x):
        v = tile + cuda.threadIdx.x
        word = bits[v] if v < end else numba.uint32(0)
        if cuda.syncthreads_or(numba.int32(1 if word != 0 else 0)):
            for d in range(n):
                flag = numba.int64((word >> d) & 1)
                before, total = block_exclusive_scan(flag, wsum, BUILD_WARPS)
                if flag:
                    cand_set[block_starts[d * blocks + b] + written[d] + before] = v
                written[d] += total


@jit
def candidate_rows_kernel(offsets, neighbors, entry_labels, qp, bits, cand_set, edge_table, edge_count, rows,
                          row_len, bitmap, row_start, row_off, entries, write):
    """A thread per row r: edge k (``edge_table`` rows: first row, d, j, first bitmap word) and
    candidate i = r - first row of C(j). ``write`` 0: row_len[r] = its neighbours in C(d), their
    bits set in its bitset; 1: their ranks written from row_start[r] on in ``entries`` and the
    int32 ``row_off`` (the end entry too)."""
    r = cuda.grid(1)
    stride = cuda.gridsize(1)
    while r < rows:
        k = 0
        hi = edge_count
        while k < hi:                              # the last edge whose first row <= r
            mid = (k + hi) >> 1
            if edge_table[0, mid] <= r:
                k = mid + 1
            else:
                hi = mid
        k -= 1
        d = edge_table[1, k]
        j = edge_table[2, k]
        i = r - edge_table[0, k]
        v = cand_set[qp[QP_CBASE, j] + i]
        base = qp[QP_CBASE, d]
        size = qp[QP_CSIZE, d]
        lo, hi = label_range(entry_labels, offsets[v], offsets[v + 1], qp[QP_LABELS, d])
        word0 = edge_table[3, k] + i * qp[QP_WORDS, d]
        at = row_start[r] if write else numba.int64(0)
        count = 0
        for e in range(lo, hi):
            u = neighbors[e]
            if (bits[u] >> d) & 1:
                x = lower_bound(cand_set, base, base + size, u) - base
                if write:
                    entries[at + count] = x
                else:
                    bitmap[word0 + (x >> 5)] |= numba.uint32(1) << numba.uint32(x & 31)
                count += 1
        if write:
            row_off[r] = numba.int32(at)
            if r == rows - 1:
                row_off[rows] = numba.int32(at + count)
        else:
            row_len[r] = count
        r += stride


@dataclass(frozen=True)
class _Shape:
    """The host's part of a built candidate graph: what :func:`gmatch.filter.pack_candidate_graph`
    writes into the query's parameter block."""

    sizes: np.ndarray           # int64 |C(d)|
    cand_base: np.ndarray       # int32 (32,)
    words: np.ndarray           # int32 (32,)


ADJACENCY_BUFFERS = ("label-sorted neighbours", "label-sorted neighbour labels")
"""The pool's names of the label-sorted adjacency and its entries' labels."""


class DeviceCandidateGraph:
    """Builds one query's candidate graph on the device of an engine (its ``pool``) over a data
    graph of ``num_vertices`` vertices whose offsets are ``d_offsets``; ``sorted_adjacency()``
    gives the host's :func:`gmatch.filter.label_sorted_adjacency`, uploaded on the first build."""

    def __init__(self, pool, d_offsets, sorted_adjacency, num_vertices: int):
        self.pool = pool
        self.nv = int(num_vertices)
        self.d_offsets = d_offsets
        self.sorted_adjacency = sorted_adjacency
        self._d_adjacency = None
        self.chunk = max(BUILD_THREADS, -(-max(self.nv, 1) // BUILD_BLOCKS))
        self.chunk = -(-self.chunk // BUILD_THREADS) * BUILD_THREADS
        self.blocks = max(1, -(-max(self.nv, 1) // self.chunk))
        self._h_starts = np.zeros(MAX_QUERY_VERTICES * self.blocks + 1, np.int64)

    def _adjacency(self):
        """The label-sorted adjacency on the device: uploaded by the first build, then kept as
        pooled buffers, so that it counts in the peak of the queries that build a candidate graph
        (:class:`common.gpu.pool.BufferPool`) and not in those that end in the probe."""
        if self._d_adjacency is None:
            self._d_adjacency = tuple(self.pool.upload(name, array.astype(np.int32, copy=False))
                                      for name, array in zip(ADJACENCY_BUFFERS, self.sorted_adjacency()))
        else:                                    # this query's demand, the buffers as they are
            for name, array in zip(ADJACENCY_BUFFERS, self._d_adjacency):
                self.pool.get(name, array.size, np.int32)
        return self._d_adjacency

    def build(self, plan: QueryPlan, qp: np.ndarray, d_qp, d_bits, max_bitmap_bytes: int):
        """Refine ``d_bits`` in place and build the candidate graph; write its sizes into ``qp``
        and upload it to ``d_qp``. Returns (the graph tuple the search kernels take, statistics as
        the host build's), or (None, {}) when the bitmaps would take more than
        ``max_bitmap_bytes``."""
        neighbors, entry_labels = self._adjacency()
        n, nv, pool = plan.size, self.nv, self.pool
        backward = np.asarray(plan.backward, dtype=np.int64)
        adjacent = adjacent_masks(backward, n)
        upload(d_qp, qp)                                  # the refinement reads the positions' labels
        refine = refine_position_kernel[grid_blocks(nv, BUILD_THREADS), BUILD_THREADS]
        for sweep in range(SWEEPS):
            for step in range(n):
                d = step if sweep == 0 else n - 1 - step
                refine(self.d_offsets, neighbors, entry_labels, d_qp, d_bits, nv, d, adjacent[d])
        cells = n * self.blocks
        counts = pool.get("candidate graph block counts", cells + 1, np.int64)
        fill(counts, 0, count=cells + 1)
        count_candidates_kernel[self.blocks, BUILD_THREADS](d_bits, nv, n, self.chunk, counts, self.blocks)
        exclusive_scan(counts, n=cells + 1, workspace=pool.scan(cells + 1), want_total=False)
        starts = download(counts, self._h_starts[:cells + 1])
        cand_base = np.zeros(MAX_QUERY_VERTICES, np.int32)
        cand_base[:n] = starts[0:cells:self.blocks]
        sizes = np.diff(np.append(starts[0:cells:self.blocks], starts[cells])).astype(np.int64)
        words = np.zeros(MAX_QUERY_VERTICES, np.int32)
        words[:n] = (sizes + 31) // 32
        edges, rows, total_words = edge_layout(backward, sizes, words, n)
        rows, total_words = int(rows), int(total_words)
        table = [(edges[0, d, j], d, j, edges[1, d, j]) for d in range(1, n) for j in range(d)
                 if (int(backward[d]) >> j) & 1]
        if total_words > max_bitmap_bytes // 4:
            return None, {}
        pack_candidate_graph(qp, _Shape(sizes, cand_base, words))
        upload(d_qp, qp)
        total = int(starts[cells])
        cand_set = pool.get("candidate graph cand_set", max(total, 1), np.int32)
        place_candidates_kernel[self.blocks, BUILD_THREADS](d_bits, nv, n, self.chunk, counts, self.blocks, cand_set)
        d_table = pool.upload("candidate graph edge table", np.array(table, np.int32).T.copy()
                              if table else np.zeros((4, 1), np.int32))
        bitmap = pool.get("candidate graph bitmap", max(total_words, 1), np.uint32)
        fill(bitmap, 0, count=max(total_words, 1))
        row_len = pool.get("candidate graph row lengths", rows + 1, np.int64)
        fill(row_len, 0, count=rows + 1)
        row_off = pool.get("candidate graph offsets", rows + 1, np.int32)
        launch = candidate_rows_kernel[grid_blocks(rows, BUILD_THREADS), BUILD_THREADS]
        launch(self.d_offsets, neighbors, entry_labels, d_qp, d_bits, cand_set, d_table, len(table), rows,
               row_len, bitmap, row_len, row_off, row_off, 0)          # (no entries written yet)
        entries_total = exclusive_scan(row_len, n=rows + 1, workspace=pool.scan(rows + 1))
        if entries_total >= 2**31 - 1:
            return None, {}
        entries = pool.get("candidate graph entries", max(entries_total, 1), np.int32)
        if rows:
            launch(self.d_offsets, neighbors, entry_labels, d_qp, d_bits, cand_set, d_table, len(table), rows,
                   row_len, bitmap, row_len, row_off, entries, 1)
        else:
            fill(row_off, 0, count=1)
        d_edges = pool.upload("candidate graph edges", edges.reshape(-1))
        graph = (row_off, entries, bitmap, cand_set, d_edges, d_bits)
        stats = {"candidate_graph_sizes": sizes.tolist(), "candidate_edges": int(entries_total),
                 "candidate_graph_bytes": 4 * ((rows + 1) + max(entries_total, 1) + max(total_words, 1) + total)}
        return graph, stats
