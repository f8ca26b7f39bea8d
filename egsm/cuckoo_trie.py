"""Cuckoo tries: EGSM's candidate index (paper §3).

For every directed query edge (u, u') the trie CT(u, u') stores the relation R(u, u') keyed by the
u-side vertex, in three levels:

1. two bucketised cuckoo hash tables (m = 2, buckets of 8 int32 cells = one 32-byte transaction)
   holding the candidates C(u);
2. per cell, the start offset of N(v, u, u') (``off``, one entry per (edge, cell) pair);
3. the concatenated neighbour lists N(v, u, u') = {v' in N_G(v) : v' in C(u')}, each sorted.

As in the authors' code, every CT(u, .) of one u shares level 1 (same keys, cells and seeds), so
one cell index found for v answers "is v a key of CT(u, a)" for every neighbour a and gives v's
list in each. Insertion is one thread per key (CAS into an empty cell, else an exchange that moves
the victim to the other table, at most ``MAX_CUCKOO_LOOP`` times; a failed build rehashes with new
seeds); levels 2 and 3 are one warp per level-1 cell; deletion (filter step 3) keeps a live count
per pair and deletes a key eagerly; compaction drops removed slots and empty keys and lists each
trie's surviving keys (``proj_keys``: π_u R(u, u')). ``small_index_kernel`` builds a small
query's whole index in one cooperative launch. docs/decisions.md ("EGSM's cuckoo tries") gives
the choices where the paper is silent.
"""

from __future__ import annotations

from numba import int32, int64

from common.device import FULL_MASK, cuda, jit
from common.device_functions import hash32, lower_bound

from .layout import (
    BUCKET,
    C_CUCKOO_FAIL,
    C_KEYS,
    C_LEVEL3,
    C_SLOTS,
    EI_CARD,
    EI_PROJSTART,
    EI_REL,
    EMPTY,
    M_ADJ,
    M_CBASE,
    M_EIDX,
    M_ESRC,
    M_NB,
    M_NE,
    M_NQ,
    M_PBASE,
    M_SEED,
    MAXQ,
    SCAN_BLOCK,
    WARP,
)

MAX_CUCKOO_LOOP = 64


@cuda.jit(device=True)
def bucket_base(meta, u, table, key):
    """First cell of ``key``'s bucket in table ``table`` of query vertex ``u``."""
    nb = meta[M_NB + u]
    h = int64(hash32(key, meta[M_SEED + table])) % nb
    return meta[M_CBASE + u] + table * nb * BUCKET + h * BUCKET


@cuda.jit(device=True)
def lookup(keys, meta, u, key):
    """Global cell index of ``key`` in u's level 1, or -1 (two bucket probes at most)."""
    for table in range(2):
        base = bucket_base(meta, u, table, key)
        for c in range(BUCKET):
            if keys[base + c] == key:
                return base + c
    return -1


@cuda.jit(device=True)
def edge_of_pair(meta, p):
    """Directed edge whose pair range [pbase[e], pbase[e+1]) holds pair ``p``."""
    lo = 0
    hi = meta[M_NE]
    while hi - lo > 1:
        mid = (lo + hi) >> 1
        if meta[M_PBASE + mid] <= p:
            lo = mid
        else:
            hi = mid
    return lo


@cuda.jit(device=True)
def insert_keys(start, stride, n, moff, masks, meta, keys, ctrl):
    """Level 1: insert every data vertex v into the table of every u with v in C(u) (the
    query's bitmaps start at masks[moff]); thread ``start`` of ``stride`` takes every
    stride-th vertex."""
    nq = meta[M_NQ]
    for v in range(start, n, stride):
        m = masks[moff + v]
        if m == 0:
            continue
        for u in range(nq):
            if not (m >> u) & 1:
                continue
            cur = int32(v)
            table = 0
            placed = False
            for _ in range(MAX_CUCKOO_LOOP):
                base = bucket_base(meta, u, table, cur)
                for c in range(BUCKET):
                    if keys[base + c] == EMPTY:
                        if cuda.atomic.cas(keys, base + c, int32(EMPTY), cur) == EMPTY:
                            placed = True
                            break
                if placed:
                    break
                cur = cuda.atomic.exch(keys, base + cur % BUCKET, cur)
                if cur == EMPTY:
                    placed = True
                    break
                table = 1 - table
            if not placed:
                ctrl[C_CUCKOO_FAIL] = 1


@jit
def insert_kernel(n, moff, masks, meta, keys, ctrl):
    """:func:`insert_keys` over the grid."""
    insert_keys(cuda.grid(1), cuda.gridsize(1), n, moff, masks, meta, keys, ctrl)


@cuda.jit(device=True)
def pair_of(meta, u, a, cell):
    """Pair index of u's level-1 cell ``cell`` (local to u) in CT(u, a): its level-2 entry."""
    return meta[M_PBASE + meta[M_EIDX + u * MAXQ + a]] + cell


@cuda.jit(device=True)
def key_of_cell(meta, g):
    """(u, local cell, u's neighbour bitmap) of global level-1 cell ``g``."""
    u = 0
    while meta[M_CBASE + u + 1] <= g:
        u += 1
    return u, g - meta[M_CBASE + u], meta[M_ADJ + u]


@cuda.jit(device=True)
def count_lists(start, stride, capacity, num_pairs, meta, keys, masks, moff, offsets, neighbors, cnt):
    """Level 2 sizes, one warp per level-1 cell (the paper's warp per key): the lanes read the
    key v's neighbour list once for every out-edge (u, a) of its u, and cnt[p] = |N(v, u, a)| for
    each of the cell's pairs p (0 for an empty cell); 0 past the last pair up to ``capacity``, so
    that a scan over the whole buffer ends with the total. Threads ``start`` of ``stride`` (a
    multiple of 32: warp ``start // 32`` of ``stride // 32``)."""
    lane = cuda.laneid
    for p in range(num_pairs + start, capacity, stride):
        cnt[p] = 0
    warps = stride // WARP
    nq = meta[M_NQ]
    for g in range(start // WARP, meta[M_CBASE + nq], warps):
        u, c, adj = key_of_cell(meta, g)
        v = keys[g]
        mine = 0                    # lane a counts edge (u, a)
        if v != EMPTY:
            for i0 in range(offsets[v], offsets[v + 1], WARP):
                i = i0 + lane
                m = masks[moff + neighbors[i]] if i < offsets[v + 1] else int64(0)
                for a in range(nq):
                    if (adj >> a) & 1:
                        hits = cuda.popc(cuda.ballot_sync(FULL_MASK, (m >> a) & 1 != 0))
                        if lane == a:
                            mine += hits
        if lane < nq and (adj >> lane) & 1:
            cnt[pair_of(meta, u, lane, c)] = mine


@jit
def count_kernel(capacity, num_pairs, meta, keys, masks, moff, offsets, neighbors, cnt):
    """:func:`count_lists` over the grid."""
    count_lists(cuda.grid(1), cuda.gridsize(1), capacity, num_pairs, meta, keys, masks, moff, offsets,
                neighbors, cnt)


@cuda.jit(device=True)
def fill_lists(start, stride, meta, keys, masks, moff, offsets, neighbors, off, nbr, removed):
    """Level 3, one warp per level-1 cell: the key v's neighbour list read once, N(v, u, a)
    (sorted) copied to nbr[off[p]:] for each of the cell's pairs p = (edge (u, a), cell) in the
    same pass (ballot ranks keep the order); the slots' REMOVED flags cleared. Threads as
    :func:`count_lists`."""
    lane = cuda.laneid
    warps = stride // WARP
    nq = meta[M_NQ]
    for g in range(start // WARP, meta[M_CBASE + nq], warps):
        v = keys[g]
        if v == EMPTY:
            continue
        u, c, adj = key_of_cell(meta, g)
        pos = int64(0)              # lane a: next slot of N(v, u, a)
        if lane < nq and (adj >> lane) & 1:
            pos = off[pair_of(meta, u, lane, c)]
        below = (int64(1) << lane) - 1
        for i0 in range(offsets[v], offsets[v + 1], WARP):
            i = i0 + lane
            w = neighbors[i] if i < offsets[v + 1] else int32(0)
            m = masks[moff + w] if i < offsets[v + 1] else int64(0)
            for a in range(nq):
                if (adj >> a) & 1:
                    hit = (m >> a) & 1 != 0
                    ballot = int64(cuda.ballot_sync(FULL_MASK, hit)) & 0xFFFFFFFF
                    base = cuda.shfl_sync(FULL_MASK, pos, a)
                    if hit:
                        slot = base + cuda.popc(ballot & below)
                        nbr[slot] = w
                        removed[slot] = 0
                    if lane == a:
                        pos += cuda.popc(ballot)


@jit
def fill_kernel(meta, keys, masks, moff, offsets, neighbors, off, nbr, removed):
    """:func:`fill_lists` over the grid."""
    fill_lists(cuda.grid(1), cuda.gridsize(1), meta, keys, masks, moff, offsets, neighbors, off, nbr, removed)


@cuda.jit(device=True)
def block_scan(cnt, n, num_pairs, out_a, out_b, ctrl, compact):
    """Exclusive scans of cnt[:n] by one block of SCAN_BLOCK threads (a thread per contiguous
    chunk, a shared-memory scan of the chunk sums). ``compact`` = 0: level-2 offsets to out_a,
    the total to ctrl[C_LEVEL3]; 1: key positions (scan of the alive flags cnt[p] > 0, p <
    num_pairs) to out_a and compacted offsets (scan of cnt) to out_b, in the same pass, their
    totals to ctrl[C_KEYS] and ctrl[C_SLOTS]."""
    sa = cuda.shared.array(SCAN_BLOCK, int64)
    sb = cuda.shared.array(SCAN_BLOCK, int64)
    tid = cuda.threadIdx.x
    per = (n + SCAN_BLOCK - 1) // SCAN_BLOCK
    lo = min(n, tid * per)
    hi = min(n, lo + per)
    a = int64(0)
    b = int64(0)
    for p in range(lo, hi):
        c = cnt[p]
        if p < num_pairs and c > 0:
            a += 1
        b += c
    sa[tid] = a
    sb[tid] = b
    cuda.syncthreads()
    d = 1
    while d < SCAN_BLOCK:                      # Hillis-Steele inclusive scan of the chunk sums
        va = int64(0)
        vb = int64(0)
        if tid >= d:
            va = sa[tid - d]
            vb = sb[tid - d]
        cuda.syncthreads()
        sa[tid] += va
        sb[tid] += vb
        cuda.syncthreads()
        d *= 2
    ra = sa[tid] - a
    rb = sb[tid] - b
    for p in range(lo, hi):
        c = cnt[p]
        if compact:
            out_a[p] = ra
            if p < num_pairs and c > 0:
                ra += 1
            out_b[p] = rb
        else:
            out_a[p] = rb
        rb += c
    if tid == SCAN_BLOCK - 1:
        if compact:
            ctrl[C_SLOTS] = sb[tid]
            ctrl[C_KEYS] = sa[tid]
        else:
            ctrl[C_LEVEL3] = sb[tid]


@jit
def small_scan_kernel(cnt, n, num_pairs, out_a, out_b, ctrl, compact):
    """:func:`block_scan` in one block of SCAN_BLOCK threads."""
    block_scan(cnt, n, num_pairs, out_a, out_b, ctrl, compact)


@jit
def alive_kernel(capacity, num_pairs, cnt, alive):
    """alive[p] = 1 if pair p still has a non-empty list (its key is in π_u R(u, u'))."""
    for p in range(cuda.grid(1), capacity, cuda.gridsize(1)):
        alive[p] = 1 if p < num_pairs and cnt[p] > 0 else 0


@cuda.jit(device=True)
def compact_lists(start, stride, num_pairs, meta, keys, cnt, off, nbr, removed, off2, nbr2, proj_pos,
                  proj_keys, einfo, copy_lists):
    """CompactCuckooTries: surviving slots to nbr2[off2[p]:] (when ``copy_lists``), surviving
    keys of each trie to proj_keys, and per edge |π_u R(u, u')|, its start in proj_keys and
    |R(u, u')|."""
    ne = meta[M_NE]
    for e in range(start, ne, stride):
        first = proj_pos[meta[M_PBASE + e]]
        einfo[EI_PROJSTART + e] = first
        einfo[EI_CARD + e] = proj_pos[meta[M_PBASE + e + 1]] - first
        einfo[EI_REL + e] = off2[meta[M_PBASE + e + 1]] - off2[meta[M_PBASE + e]]
    for p in range(start, num_pairs, stride):
        if cnt[p] == 0:
            continue
        e = edge_of_pair(meta, p)
        u = meta[M_ESRC + e]
        proj_keys[proj_pos[p]] = keys[meta[M_CBASE + u] + p - meta[M_PBASE + e]]
        if not copy_lists:
            continue
        pos = off2[p]
        for i in range(off[p], off[p + 1]):
            if removed[i] == 0:
                nbr2[pos] = nbr[i]
                pos += 1


@jit
def compact_kernel(num_pairs, meta, keys, cnt, off, nbr, removed, off2, nbr2, proj_pos,
                   proj_keys, einfo):
    """:func:`compact_lists` over the grid."""
    compact_lists(cuda.grid(1), cuda.gridsize(1), num_pairs, meta, keys, cnt, off, nbr, removed, off2, nbr2,
                  proj_pos, proj_keys, einfo, True)


@jit
def small_index_kernel(n, moff, masks, meta, keys, ctrl, capacity, num_pairs, offsets, neighbors, cnt, off,
                       nbr, removed, proj_pos, proj_keys, einfo):
    """A small query's whole index in one cooperative launch of SCAN_BLOCK-thread blocks
    (``capacity`` <= SMALL_SCAN pairs, no wedge filter), three grid barriers: the keys
    (``insert_keys``); the level-2 counts (``count_lists``); block 0 scans them once for both the
    level-2 offsets and the key positions (no deletion can come between, so the compacted
    offsets and lists are these: ``off`` and ``nbr`` serve as ``off2`` and ``nbr2``); then the
    level-3 lists (``fill_lists``) and, beside them, the projections and edge info
    (``compact_lists`` without its copy). ctrl gets the level-3 total, |R| and the key count as
    from the separate launches. Our choice where the paper is silent (it times kernels, not
    launches): six launches of a few microseconds of device work each cost a small query more
    host time than work."""
    grid = cuda.cg.this_grid()
    start, stride = cuda.grid(1), cuda.gridsize(1)
    insert_keys(start, stride, n, moff, masks, meta, keys, ctrl)
    grid.sync()
    count_lists(start, stride, capacity, num_pairs, meta, keys, masks, moff, offsets, neighbors, cnt)
    grid.sync()
    if cuda.blockIdx.x == 0:
        block_scan(cnt, capacity, num_pairs, proj_pos, off, ctrl, 1)
        if cuda.threadIdx.x == SCAN_BLOCK - 1:       # the thread that wrote ctrl[C_SLOTS]
            ctrl[C_LEVEL3] = ctrl[C_SLOTS]
    grid.sync()
    fill_lists(start, stride, meta, keys, masks, moff, offsets, neighbors, off, nbr, removed)
    compact_lists(start, stride, num_pairs, meta, keys, cnt, off, nbr, removed, off, nbr, proj_pos, proj_keys,
                  einfo, False)


@cuda.jit(device=True)
def list_contains(nbr, lo, hi, key):
    """Whether ``key`` is in the sorted list nbr[lo:hi]."""
    i = lower_bound(nbr, lo, hi, key)
    return i < hi and nbr[i] == key


def table_sizes(candidate_counts) -> list[int]:
    """Buckets per table for each query vertex: ceil(2 |C(u)| / 8), at least 1."""
    return [max(1, (2 * int(c) + BUCKET - 1) // BUCKET) for c in candidate_counts]


__all__ = ["MAX_CUCKOO_LOOP", "MAXQ", "lookup", "pair_of", "list_contains", "insert_kernel", "count_kernel",
           "fill_kernel", "small_scan_kernel", "alive_kernel", "compact_kernel", "small_index_kernel", "table_sizes"]
