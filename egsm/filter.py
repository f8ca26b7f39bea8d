"""EGSM's three-step filter (paper §4, Algorithm 2).

Steps 1 and 2 (label filter, neighbour-label-count filter) are per-vertex tests: v is a
candidate of u iff L(v) = L(u), d(v) >= d(u) and NLC(v)[l] >= NLC(u)[l] for every label l of
N(u). ``candidate_kernel`` evaluates every query vertex for every data vertex in one launch and
writes one bitmap word per data vertex (bit u = v in C(u), the paper's B[u][v]) and |C(u)|.
Step 3 (the wedge filter) runs on the Cuckoo tries: ``prune_kernel`` is PruneCuckooTries.

Choices where the paper is silent, recorded:

* NLC(v) is precomputed once per data graph as a sorted (label, count) list per vertex (all data
  labels), so a query only binary-searches the labels its vertices need; the authors build
  NLC(v) per query in shared memory counting only the query's labels. Same test.
* The degree test d(v) >= d(u) is implied by the NLC test (the counts sum to the degrees) and
  only short-cuts it.
* Filtering order δ: BFS from the query vertex of largest degree (ties: smallest id), the
  paper's "arbitrary vertex then BFS order"; the authors default to degeneracy order. Two
  passes (δ then reversed δ), no fixpoint, as the paper.
* One launch per centre u per pass applies both chains of Prune over ⟨N(u)⟩ at once: after the
  two chains every CT(u, a) keeps exactly the u-values present in all of them (§4.2), so one
  thread per key of u checks all of u's tries and, if the key is missing from one, deletes it
  from every CT(u, a) and deletes the mirrored tuples (v'', v) from CT(a, u). Keys are deleted
  eagerly when their list empties (our choice: prunes at least as much, never changes results).
"""

from __future__ import annotations

from collections import deque

import numpy as np
from numba import int64

from common.device import cuda
from common.device_functions import lower_bound
from common.graph import Graph

from .cuckoo_trie import lookup
from .layout import (C_CAND, EMPTY, M_ADJ, M_CBASE, M_DEG, M_EIDX, M_LAB, M_NLCCNT, M_NLCLAB,
                     M_NLCOFF, M_NQ, M_PBASE, MAXQ)


def neighbour_label_counts(data: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """NLC(v) of every data vertex as CSR: (offsets int64, labels int32 sorted per v, counts int32)."""
    n = data.num_vertices
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(data.offsets))
    num_labels = max(int(data.num_labels), 1)
    keys = rows * num_labels + data.labels[data.neighbors].astype(np.int64)
    unique, counts = np.unique(keys, return_counts=True)
    owner = unique // num_labels
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(owner, minlength=n), out=offsets[1:])
    return offsets, (unique % num_labels).astype(np.int32), counts.astype(np.int32)


@cuda.jit
def candidate_kernel(n, offsets, labels, nlc_off, nlc_lab, nlc_cnt, meta, masks, ctrl):
    """Steps 1-2: masks[v] bit u set iff v passes the label and NLC filters for u; |C(u)| is
    counted at ctrl[C_CAND + u]."""
    nq = meta[M_NQ]
    for v in range(cuda.grid(1), n, cuda.gridsize(1)):
        lab = labels[v]
        deg = offsets[v + 1] - offsets[v]
        lo = nlc_off[v]
        hi = nlc_off[v + 1]
        m = int64(0)
        for u in range(nq):
            if meta[M_LAB + u] != lab or deg < meta[M_DEG + u]:
                continue
            ok = True
            for j in range(meta[M_NLCOFF + u], meta[M_NLCOFF + u + 1]):
                want = meta[M_NLCLAB + j]
                a = lower_bound(nlc_lab, lo, hi, want)
                if a == hi or nlc_lab[a] != want or nlc_cnt[a] < meta[M_NLCCNT + j]:
                    ok = False
                    break
            if ok:
                m |= int64(1) << u
                cuda.atomic.add(ctrl, C_CAND + u, 1)
        masks[v] = m


@cuda.jit
def prune_kernel(u, meta, keys, cnt, off, nbr, removed):
    """Wedge filter around centre u: a key of u missing from any CT(u, a) leaves all of them,
    and its tuples leave the mirrored tries CT(a, u)."""
    nq = meta[M_NQ]
    first = meta[M_CBASE + u]
    cells = meta[M_CBASE + u + 1] - first
    adj = meta[M_ADJ + u]
    for c in range(cuda.grid(1), cells, cuda.gridsize(1)):
        v = keys[first + c]
        if v == EMPTY:
            continue
        keep = True
        for a in range(nq):
            if (adj >> a) & 1 and cnt[meta[M_PBASE + meta[M_EIDX + u * MAXQ + a]] + c] == 0:
                keep = False
        if keep:
            continue
        for a in range(nq):
            if not (adj >> a) & 1:
                continue
            p = meta[M_PBASE + meta[M_EIDX + u * MAXQ + a]] + c
            if cnt[p] == 0:
                continue
            cnt[p] = 0
            back = meta[M_PBASE + meta[M_EIDX + a * MAXQ + u]] - meta[M_CBASE + a]
            for s in range(off[p], off[p + 1]):
                w = nbr[s]
                cell = lookup(keys, meta, a, w)
                if cell < 0:
                    continue
                q = back + cell
                lo = lower_bound(nbr, off[q], off[q + 1], v)
                # a key of CT(a, u) deleted earlier (count 0) has no live slot left to delete
                if cnt[q] > 0 and lo < off[q + 1] and nbr[lo] == v:
                    if cuda.atomic.exch(removed, lo, 1) == 0:
                        cuda.atomic.add(cnt, q, -1)


def filtering_order(adjacency: list[list[int]], degrees: np.ndarray) -> list[int]:
    """δ: BFS order from the largest-degree query vertex (ties: smallest id)."""
    root = int(np.argmax(degrees))
    seen = {root}
    order = []
    queue = deque([root])
    while queue:
        u = queue.popleft()
        order.append(u)
        for a in adjacency[u]:
            if a not in seen:
                seen.add(a)
                queue.append(a)
    return order


__all__ = ["neighbour_label_counts", "candidate_kernel", "prune_kernel", "filtering_order"]
