"""Candidate filtering for gMatch (paper Sec. 3.1 step 2 and Sec. 3.5; digest Sec. 3.5).

The paper filters small queries by degree on the GPU and adopts EGSM's candidate graph only for
its comparison with EGSM. CHOICE: one GPU pass per query computes the LDF + NLF filter (label,
degree, and per-label neighbour counts) and stores the result as a bitmap over query positions,
``cand_mask[v]`` bit d set iff data vertex v may match query position d (|V(Q)| <= 32, so one
uint32 per data vertex, allocated once in ``prepare``). The search kernels test that bit for every
task: an O(1) membership test in place of the authors' per-edge candidate-graph bitsets, which
need an O(sum |C(u)| * deg) index build per query. On an unlabelled graph NLF reduces to the
degree test. Refinement passes of the candidate graph are not done (they only prune further).

``qp`` is the packed per-query parameter block shared by every gMatch kernel (int32, shape
(QP_ROWS, 32), one host-to-device copy per query): see :func:`pack_query`.
"""

from __future__ import annotations

import numba
import numpy as np

from common.device import cuda, simulator_active

from .plan import MAX_QUERY_VERTICES, QueryPlan

# qp rows
QP_LABELS, QP_DEGREES, QP_BACKWARD, QP_RESTRICT, QP_QLABELS, QP_SIZES = 0, 1, 2, 3, 4, 5
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
