"""Candidate filtering and the candidate graph for gMatch (paper Sec. 3.1 step 2 and Sec. 3.5;
digest Sec. 3.5).

The paper filters small queries by degree on the GPU and adopts EGSM's candidate graph only for
its comparison with EGSM. CHOICE: one GPU pass per query computes the LDF + NLF filter (label,
degree, and per-label neighbour counts) and stores the result as a bitmap over query positions,
``cand_mask[v]`` bit d set iff data vertex v may match query position d (|V(Q)| <= 32, so one
uint32 per data vertex, allocated once in ``prepare``). The search kernels test that bit for every
task: an O(1) membership test in place of the authors' per-edge candidate-graph bitsets, which
need an O(sum |C(u)| * deg) index build per query. On an unlabelled graph NLF reduces to the
degree test.

Candidate graph (``GMatch(candidate_graph=True)``; the paper adopts EGSM's for its comparison with
EGSM, Sec. 3.5): :func:`build_candidate_graph` refines C(u) with two passes (matching order, then
reverse; v stays in C(u) iff every query neighbour u' of u has a candidate adjacent to v), writes
the refined bits back to ``cand_mask`` (so the BFS seeds come from refined sets), and for every
query edge (j, d), j an earlier position, stores a CSR over C(j): row i lists C(d) ∩ N(C(j)[i])
(sorted data vertex ids), plus a bitset over C(d) per row, so that "is v adjacent to the image of
j" is one bit test (bitmap set intersection) instead of a binary search. CHOICES where the paper
is silent: the build runs on the host with NumPy from the GPU's LDF/NLF bits (one copy each way,
timed as the ``index`` phase), not with the authors' GPU count/scan/fill passes; candidate
indices are kept as a dense (|V(Q)|, |V(G)|) int32 table ``cidx`` (rank of v in C(d), or -1),
which costs 4 |V(Q)| |V(G)| bytes per query instead of a hash of the candidate sets.

``qp`` is the packed per-query parameter block shared by every gMatch kernel (int32, shape
(QP_ROWS, 32), one host-to-device copy per query): see :func:`pack_query`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba
import numpy as np

from common.graph import Graph

from common.device import cuda, simulator_active

from .plan import MAX_QUERY_VERTICES, QueryPlan

# qp rows
QP_LABELS, QP_DEGREES, QP_BACKWARD, QP_RESTRICT, QP_QLABELS, QP_SIZES = 0, 1, 2, 3, 4, 5
QP_WORDS = 6                                # bitmap words per candidate-graph row of position d
# qp[QP_SIZES]: [0] |V(Q)|, [1] distinct labels, [2] 1 when the candidate graph is used
QP_NLF = 8                                  # rows 8..39: required neighbour count per (position, label slot)
QP_ROWS = QP_NLF + MAX_QUERY_VERTICES
FILTER_THREADS = 32 if simulator_active() else 256


def pack_query(plan: QueryPlan, query_labels_by_vertex: np.ndarray, adjacency_lists) -> np.ndarray:
    """The (QP_ROWS, 32) int32 parameter block: labels, degrees, backward and restriction masks,
    distinct labels, sizes and the NLF requirement of every position."""
    n = plan.size
    qp = np.zeros((QP_ROWS, MAX_QUERY_VERTICES), dtype=np.int32)
    qp[QP_LABELS, :n] = plan.labels
    qp[QP_DEGREES, :n] = plan.degrees
    qp[QP_BACKWARD, :n] = plan.backward.view(np.int32)
    qp[QP_RESTRICT, :n] = plan.restrict.view(np.int32)
    distinct = np.unique(plan.labels)
    qp[QP_QLABELS, :distinct.size] = distinct
    qp[QP_SIZES, 0] = n
    qp[QP_SIZES, 1] = distinct.size
    slot = {int(l): i for i, l in enumerate(distinct)}
    for d, u in enumerate(plan.order):
        for x in adjacency_lists[int(u)]:
            qp[QP_NLF + d, slot[int(query_labels_by_vertex[int(x)])]] += 1
    return qp


@cuda.jit
def filter_kernel(offsets, neighbors, labels, qp, cand_mask):
    """cand_mask[v] = bitmask of the query positions that data vertex v passes LDF + NLF for."""
    counts = cuda.local.array(MAX_QUERY_VERTICES, numba.int32)
    n = qp[QP_SIZES, 0]
    k = qp[QP_SIZES, 1]
    nv = cand_mask.size
    v = cuda.grid(1)
    stride = cuda.gridsize(1)
    while v < nv:
        lab = labels[v]
        lo = offsets[v]
        hi = offsets[v + 1]
        deg = hi - lo
        mask = numba.uint32(0)
        wanted = False
        for d in range(n):
            if qp[QP_LABELS, d] == lab and deg >= qp[QP_DEGREES, d]:
                wanted = True
        if wanted and k > 1:
            for i in range(k):
                counts[i] = 0
            for e in range(lo, hi):
                nl = labels[neighbors[e]]
                for i in range(k):
                    if qp[QP_QLABELS, i] == nl:
                        counts[i] += 1
        if wanted:
            for d in range(n):
                if qp[QP_LABELS, d] == lab and deg >= qp[QP_DEGREES, d]:
                    ok = True
                    if k > 1:
                        for i in range(k):
                            if counts[i] < qp[QP_NLF + d, i]:
                                ok = False
                    if ok:
                        mask |= numba.uint32(1) << numba.uint32(d)
        cand_mask[v] = mask
        v += stride


@dataclass(frozen=True)
class CandidateGraph:
    """Host arrays of one query's candidate graph (see the module docstring)."""

    cand_bits: np.ndarray       # uint32 per data vertex, refined
    cidx: np.ndarray            # (n, |V(G)|) int32 rank of v in C(d), -1 if v is not in C(d)
    offsets: np.ndarray         # int64, every edge's rows back to back (|C(j)| + 1 entries each)
    neighbors: np.ndarray       # int32 candidate vertices of every row
    bitmap: np.ndarray          # uint32 bitsets over C(d), rows back to back
    edge_bases: np.ndarray      # (32, 32, 2) int64: [d, j] = (first row, first bitmap word)
    words: np.ndarray           # int32 bitmap words per row, per position d
    sizes: np.ndarray           # |C(d)| after refinement


def build_candidate_graph(data: Graph, row_of_entry: np.ndarray, cand_bits: np.ndarray,
                          plan: QueryPlan) -> CandidateGraph:
    """Refine the LDF/NLF candidate sets and build the per-query-edge CSR and bitmaps."""
    n = plan.size
    nv = data.num_vertices
    offsets = np.asarray(data.offsets, dtype=np.int64)
    neighbors = np.asarray(data.neighbors, dtype=np.int64)
    member = [((cand_bits >> np.uint32(d)) & 1).astype(bool) for d in range(n)]
    adjacent = [[j for j in range(n) if j != d and (
        (int(plan.backward[d]) >> j) & 1 or (int(plan.backward[j]) >> d) & 1)] for d in range(n)]
    for sweep in (range(n), range(n - 1, -1, -1)):
        for d in sweep:
            for j in adjacent[d]:
                if not member[d].any():
                    break
                hits = np.bincount(row_of_entry, weights=member[j][neighbors], minlength=nv)
                member[d] &= hits > 0
    sizes = np.array([int(m.sum()) for m in member], dtype=np.int64)
    cidx = np.full((n, nv), -1, dtype=np.int32)
    for d in range(n):
        cidx[d, member[d]] = np.arange(sizes[d], dtype=np.int32)
    words = np.zeros(MAX_QUERY_VERTICES, dtype=np.int32)
    words[:n] = (sizes + 31) // 32
    bases = np.zeros((MAX_QUERY_VERTICES, MAX_QUERY_VERTICES, 2), dtype=np.int64)
    all_off, all_nbr, all_bits = [], [], []
    row_base = entry_base = word_base = 0
    for d in range(1, n):
        for j in range(d):
            if not (int(plan.backward[d]) >> j) & 1:
                continue
            rows = np.flatnonzero(member[j])
            starts, lengths = offsets[rows], offsets[rows + 1] - offsets[rows]
            row_id = np.repeat(np.arange(rows.size), lengths)
            first = np.repeat(starts - np.concatenate(([0], np.cumsum(lengths)[:-1])), lengths)
            entries = neighbors[first + np.arange(row_id.size)] if row_id.size else row_id
            keep = member[d][entries]
            row_id, entries = row_id[keep], entries[keep]
            counts = np.bincount(row_id, minlength=rows.size)
            all_off.append(entry_base + np.concatenate(([0], np.cumsum(counts))))
            all_nbr.append(entries.astype(np.int32))
            bits = np.zeros(rows.size * int(words[d]), dtype=np.uint32)
            rank = cidx[d, entries].astype(np.int64)
            np.bitwise_or.at(bits, row_id * int(words[d]) + (rank >> 5),
                             (np.uint32(1) << (rank & 31).astype(np.uint32)))
            all_bits.append(bits)
            bases[d, j] = (row_base, word_base)
            row_base += rows.size + 1
            entry_base += int(counts.sum())
            word_base += bits.size
    cat = lambda parts, dtype: (np.concatenate(parts).astype(dtype) if parts else np.zeros(1, dtype))
    refined = np.zeros(nv, dtype=np.uint32)
    for d in range(n):
        refined[member[d]] |= np.uint32(1) << np.uint32(d)
    return CandidateGraph(refined, cidx, cat(all_off, np.int64), cat(all_nbr, np.int32),
                          cat(all_bits, np.uint32), bases, words, sizes)
