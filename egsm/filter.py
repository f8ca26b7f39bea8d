"""EGSM's three-step filter (paper §4, Algorithm 2).

Steps 1 and 2 (label filter, neighbour-label-count filter) are per-vertex tests: v is a
candidate of u iff L(v) = L(u), d(v) >= d(u) and NLC(v)[l] >= NLC(u)[l] for every label l of
N(u). ``candidate_kernel`` evaluates every query vertex of every query of a batch for every data
vertex in one launch and writes one bitmap word per (query, data vertex) (bit u = v in C(u), the
paper's B[u][v]) and |C(u)|.

Step 3 (the wedge filter, PruneCuckooTries) runs on the Cuckoo tries over the filtering order δ
and then reversed δ: each centre u keeps in every CT(u, a) exactly the u-values present in all of
them (§4.2). One block of ``prune_all_kernel`` runs every centre of both passes, consecutive
non-adjacent centres together with a block barrier between phases, when every centre has at most
``FUSED_PRUNE_CELLS`` cells; larger queries launch ``prune_kernel`` once per centre. The engine
runs step 3 only on indexes of at least ``wedge_filter_min_edges`` entries. docs/decisions.md
("EGSM's grouping and filter") gives the choices where the paper is silent.
"""

from __future__ import annotations

import numpy as np
from numba import int64, njit

from common.bitmasks import lowest_bit, popcount
from common.device import cuda, jit
from common.device_functions import lower_bound
from common.graph import Graph

from .cuckoo_trie import lookup, pair_of
from .layout import (
    C_LEVEL3,
    CAND_WIDTH,
    EMPTY,
    M_ADJ,
    M_CBASE,
    M_DEG,
    M_DELTA,
    M_EIDX,
    M_LAB,
    M_NLCCNT,
    M_NLCLAB,
    M_NLCOFF,
    M_NPHASE,
    M_NQ,
    M_PBASE,
    M_PHASE,
    MAXQ,
    META_SIZE,
)


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


@jit
def candidate_kernel(n, num_queries, offsets, labels, nlc_off, nlc_lab, nlc_cnt, metas, masks,
                     cand):
    """Steps 1-2 for a batch of queries in one launch (one thread per (query, data vertex)):
    masks[q * n + v] bit u set iff v passes the label and NLC filters for vertex u of query q
    (meta at metas[q * META_SIZE:]); |C(u)| is counted at cand[q * CAND_WIDTH + u] and the
    candidates' degree sum Σ d(v) at cand[q * CAND_WIDTH + MAXQ + u]."""
    for i in range(cuda.grid(1), n * num_queries, cuda.gridsize(1)):
        q = i // n
        v = i - q * n
        mb = q * META_SIZE
        nq = metas[mb + M_NQ]
        lab = labels[v]
        deg = offsets[v + 1] - offsets[v]
        lo = nlc_off[v]
        hi = nlc_off[v + 1]
        m = int64(0)
        for u in range(nq):
            if metas[mb + M_LAB + u] != lab or deg < metas[mb + M_DEG + u]:
                continue
            ok = True
            for j in range(metas[mb + M_NLCOFF + u], metas[mb + M_NLCOFF + u + 1]):
                want = metas[mb + M_NLCLAB + j]
                a = lower_bound(nlc_lab, lo, hi, want)
                if a == hi or nlc_lab[a] != want or nlc_cnt[a] < metas[mb + M_NLCCNT + j]:
                    ok = False
                    break
            if ok:
                m |= int64(1) << u
                cuda.atomic.add(cand, q * CAND_WIDTH + u, 1)
                cuda.atomic.add(cand, q * CAND_WIDTH + MAXQ + u, deg)
        masks[i] = m


@jit
def restrict_root_kernel(n, moff, masks, u0, lo, hi, cand, index):
    """root_range: clear bit u0 of masks[moff + v] for v outside [lo, hi), one off cand[index]
    per bit cleared."""
    bit = int64(1) << u0
    for v in range(cuda.grid(1), n, cuda.gridsize(1)):
        if (v < lo or v >= hi) and (masks[moff + v] & bit) != 0:
            masks[moff + v] = masks[moff + v] & ~bit
            cuda.atomic.add(cand, index, -1)


@cuda.jit(device=True)
def prune_cell(u, c, meta, keys, cnt, off, nbr, removed):
    """Prune for cell c of centre u: a key of u missing from any CT(u, a) leaves all of them,
    and its tuples leave the mirrored tries CT(a, u)."""
    nq = meta[M_NQ]
    adj = meta[M_ADJ + u]
    v = keys[meta[M_CBASE + u] + c]
    if v == EMPTY:
        return
    keep = True
    for a in range(nq):
        if (adj >> a) & 1 and cnt[pair_of(meta, u, a, c)] == 0:
            keep = False
    if keep:
        return
    for a in range(nq):
        if not (adj >> a) & 1:
            continue
        p = pair_of(meta, u, a, c)
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


@jit
def prune_kernel(u, meta, keys, cnt, off, nbr, removed, ctrl, min_edges):
    """Wedge filter around centre u, one thread per cell of u (a query with large C(u)); nothing
    when the level-3 total ctrl[C_LEVEL3] is under ``min_edges``."""
    if ctrl[C_LEVEL3] < min_edges:
        return
    cells = meta[M_CBASE + u + 1] - meta[M_CBASE + u]
    for c in range(cuda.grid(1), cells, cuda.gridsize(1)):
        prune_cell(u, c, meta, keys, cnt, off, nbr, removed)


@cuda.jit(device=True)
def centre_cells(meta, k):
    """Cells of the k-th centre of meta[M_DELTA:]."""
    u = meta[M_DELTA + k]
    return meta[M_CBASE + u + 1] - meta[M_CBASE + u]


@jit
def prune_all_kernel(meta, keys, cnt, off, nbr, removed, ctrl, min_edges):
    """Both passes of the wedge filter in one launch of one block: the phases of meta[M_PHASE:]
    in turn, a block barrier between two phases; the threads run the cells of all of a phase's
    centres at once (its centres touch disjoint tries, see :func:`prune_phases`). Nothing when
    the level-3 total ctrl[C_LEVEL3] is under ``min_edges``."""
    if ctrl[C_LEVEL3] < min_edges:
        return
    for ph in range(meta[M_NPHASE]):
        lo = meta[M_PHASE + ph]
        hi = meta[M_PHASE + ph + 1]
        total = int64(0)
        for k in range(lo, hi):
            total += centre_cells(meta, k)
        for i in range(cuda.threadIdx.x, total, cuda.blockDim.x):
            k = lo
            c = i
            while c >= centre_cells(meta, k):
                c -= centre_cells(meta, k)
                k += 1
            prune_cell(meta[M_DELTA + k], c, meta, keys, cnt, off, nbr, removed)
        cuda.syncthreads()


@njit(cache=True, nogil=True)
def prune_phases(nbr, centres):
    """Phase boundaries of the centres (positions into ``centres``, first 0, last len): each phase
    a maximal run of consecutive centres no two of which are equal or adjacent. Centre u reads
    and writes only CT(u, a) and CT(a, u) for a in N(u), so the centres of a phase touch disjoint
    tries and running them at once gives what running them in turn gives."""
    bounds = np.empty(centres.size + 1, np.int64)
    bounds[0] = 0
    count = 1
    current = np.int64(0)               # bitmap of the phase's centres
    for k in range(centres.size):
        u = centres[k]
        if current & (nbr[u] | np.int64(1) << u):
            bounds[count] = k
            count += 1
            current = 0
        current |= np.int64(1) << u
    bounds[count] = centres.size
    return bounds[:count + 1]


@njit(cache=True, nogil=True)
def filtering_order(nbr):
    """δ: BFS order from the largest-degree query vertex (ties: smallest id), neighbours in
    ascending id order."""
    n = nbr.size
    root, most = 0, -1
    for u in range(n):
        if popcount(nbr[u]) > most:
            root, most = u, popcount(nbr[u])
    order = np.empty(n, np.int64)
    order[0] = root
    seen = np.int64(1) << root
    head, tail = 0, 1
    while head < tail:
        fresh = nbr[order[head]] & ~seen
        head += 1
        seen |= fresh
        while fresh:
            order[tail] = lowest_bit(fresh)
            tail += 1
            fresh &= fresh - 1
    return order[:tail]


@njit(cache=True, nogil=True)
def write_wedge_order(meta):
    """The wedge filter's centres (δ, then reversed δ) and its one-block phases, into ``meta``
    (whose neighbour masks are written); returns the centres."""
    nq = meta[M_NQ]
    delta = filtering_order(meta[M_ADJ:M_ADJ + nq])
    centres = np.concatenate((delta, delta[::-1]))
    meta[M_DELTA:M_DELTA + centres.size] = centres
    phases = prune_phases(meta[M_ADJ:M_ADJ + nq], centres)
    meta[M_NPHASE] = phases.size - 1
    meta[M_PHASE:M_PHASE + phases.size] = phases
    return centres


__all__ = ["neighbour_label_counts", "candidate_kernel", "restrict_root_kernel", "prune_kernel",
           "prune_all_kernel", "prune_phases", "filtering_order", "write_wedge_order"]
