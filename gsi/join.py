"""GSI's join phase (GSI §V, Algorithms 3-4; SGSI §5, Algorithms 2-3): one join
iteration extends every row m_i of the intermediate table M by the candidates of the next query
vertex u, as CUDA kernels.

Prealloc-Combine (``output="prealloc-combine"``): ``row_counts_kernel`` gives each row the size
of N(v'_i, l0) for the first linking edge e0 (PCSR lookups only); one exclusive scan gives every
row its slice of one global buffer GBA; ``first_edge_kernel`` (a warp per row) reads N(v', l0) in
128-byte batches and keeps the elements that are not in the row (set subtraction: the row is
cached in shared memory) and are in C(u) (one read of the candidate bitset), compacting them by
ballot into a per-warp 128-byte shared-memory write cache that is flushed to GBA 32 words at a
time; ``intersect_kernel`` intersects each row's buffer in place with N(v'', l) of every other
linking edge (tile merge: 32 buffer elements and 32 neighbours in shared memory, each lane
binary-searches its element in the neighbour tile, the tile whose last element is smaller
advances); a second scan over the survivors sizes the new table and ``link_kernel`` writes it.

Ablations (GSI Tables V and VII): ``set_ops="naive"`` runs one kernel per set operation with a
thread per row and no shared memory (copy N(v', l0) filtered by C(u); subtract the row; one merge
intersection kernel per further linking edge); ``write_cache=False`` writes survivors straight
to global memory; ``output="two-step"`` is the join-twice scheme (GpSM/GunrockSM): a first pass
counts each row's results by checking every linking edge with binary searches, a scan places
them, a second pass redoes the same work and writes.

Choices where the paper is silent: all linking edges after e0 are intersected in one launch
(a warp loops over them) rather than one launch per edge; a warp per row in every variant but
the naive one; the instrumented load counters (``loads``) count warp-level global load requests
in four classes: neighbour-structure lookups (a PCSR group, a binary-search probe, an offset
read), neighbour-list batches (up to 32 consecutive ci words), candidate-bitset reads (one per
batch), and intermediate-table/buffer reads; thread-per-row kernels count each thread's loads.
The bitset reads of a batch are a gather, so one request can be several transactions on the GPU.
"""

from __future__ import annotations

import functools

import numpy as np

from common.cudasim import FULL_MASK
from common.device import cuda
from common.device_functions import lower_bound

from .pcsr import CSR, neighbor_range, warp_neighbor_range

MAX_QUERY_VERTICES = 64
MAX_LINK_EDGES = 2 * MAX_QUERY_VERTICES
INT32_MAX = np.int32(2 ** 31 - 1)
EDGE_FIELDS = 3           # (column, partition, edge label) per linking edge in ``qinfo``
LOAD_CLASSES = ("structure", "neighbors", "bitset", "table")


@cuda.jit(device=True)
def in_bitset(bits, base, x):
    return (bits[base + (x >> 5)] >> np.uint32(x & 31)) & np.uint32(1)


@cuda.jit(device=True)
def label_ok(structure, ci_label, k, label):
    """With the plain CSR a neighbour list holds every edge label: check this entry's."""
    return structure != CSR or ci_label[k] == label


@cuda.jit(device=True)
def emit(cache, w, pred, x, cached, written, out, out_base, use_cache):
    """Warp-compact the lanes' ``x`` where ``pred`` into out[out_base + written + ...] (through the
    128-byte write cache when ``use_cache``); returns the new (cached, written)."""
    lane = cuda.laneid
    mask = cuda.ballot_sync(FULL_MASK, pred)
    total = cuda.popc(mask)
    rank = cuda.popc(mask & ((1 << lane) - 1))
    if not use_cache:
        if pred:
            out[out_base + written + rank] = x
        return cached, written + total
    pos = cached + rank
    if pred and pos < 32:
        cache[w, pos] = x
    cuda.syncwarp(FULL_MASK)
    if cached + total >= 32:
        out[out_base + written + lane] = cache[w, lane]
        cuda.syncwarp(FULL_MASK)
        if pred and pos >= 32:
            cache[w, pos - 32] = x
        cuda.syncwarp(FULL_MASK)
        return cached + total - 32, written + 32
    return cached + total, written


@cuda.jit(device=True)
def flush(cache, w, cached, written, out, out_base):
    """Write the cache's remaining ``cached`` words; returns the final count."""
    if cuda.laneid < cached:
        out[out_base + written + cuda.laneid] = cache[w, cuda.laneid]
    cuda.syncwarp(FULL_MASK)
    return written + cached


@cuda.jit(device=True)
def merge_in_place(btile, ntile, cache, w, gba, base, bp, size, ci, npos, e, written, structure,
                   ci_label, label, use_cache):
    """One warp: intersect gba[base+bp : base+size] with ci[npos:e] (both sorted) by 32 x 32 tile
    merges (each lane binary-searches its buffer element in the neighbour tile; the tile whose
    last element is smaller advances), writing survivors in place from gba[base+written]
    (written <= bp). Returns (written after the final flush, bp where the merge stopped, buffer
    tiles loaded, neighbour tiles loaded)."""
    lane = cuda.laneid
    cached = 0
    loaded_b = 0
    loaded_n = 0
    reload_b = True
    reload_n = True
    while bp < size and npos < e:
        if reload_b:
            btile[w, lane] = gba[base + bp + lane] if bp + lane < size else INT32_MAX
            loaded_b += 1
        if reload_n:
            ntile[w, lane] = ci[npos + lane] if npos + lane < e else INT32_MAX
            loaded_n += 1
        cuda.syncwarp(FULL_MASK)
        nvalid = e - npos
        if nvalid > 32:
            nvalid = 32
        bvalid = size - bp
        if bvalid > 32:
            bvalid = 32
        blast = btile[w, bvalid - 1]
        nlast = ntile[w, nvalid - 1]
        x = btile[w, lane]
        lo = 0
        hi = nvalid
        while lo < hi:
            mid = (lo + hi) >> 1
            if ntile[w, mid] < x:
                lo = mid + 1
            else:
                hi = mid
        pred = lane < bvalid and lo < nvalid and ntile[w, lo] == x
        if pred:
            pred = label_ok(structure, ci_label, npos + lo, label)
        cached, written = emit(cache, w, pred, x, cached, written, gba, base, use_cache)
        reload_b = blast <= nlast
        reload_n = nlast <= blast
        if reload_b:
            bp += 32
        if reload_n:
            npos += 32
        cuda.syncwarp(FULL_MASK)
    return flush(cache, w, cached, written, gba, base), bp, loaded_b, loaded_n


@cuda.jit(device=True)
def load_row(rowc, w, tab, row, width):
    c = cuda.laneid
    while c < width:
        rowc[w, c] = tab[row * width + c]
        c += 32
    cuda.syncwarp(FULL_MASK)


@cuda.jit(device=True)
def not_in_row(rowc, w, width, x):
    for c in range(width):
        if rowc[w, c] == x:
            return False
    return True


@cuda.jit(device=True)
def first_edge_keeps(structure, ci_label, k, label, bits, ubase, rowc, r, width, x):
    """Does neighbour x = ci[k] of the first linking edge survive: the right edge label (plain
    CSR only), in C(u) (one bitset read) and not already in row r (the set subtraction)?"""
    return (label_ok(structure, ci_label, k, label) and in_bitset(bits, ubase, x) != 0
            and not_in_row(rowc, r, width, x))


@cuda.jit(device=True)
def add_loads(loads, instrument, cls, amount):
    if instrument != 0 and amount != 0:
        cuda.atomic.add(loads, cls, amount)


@cuda.jit(device=True)
def warp_first_edge(rowc, cache, w, width, s, e, ci, ci_label, structure, label, bits, ubase, out,
                    base, use_cache):
    """One warp: out[base:] = (ci[s:e] with label, minus the row) ∩ C(u), in 32-element batches;
    returns (how many, batches read)."""
    lane = cuda.laneid
    cached = 0
    written = np.int64(0)
    batches = 0
    k = s
    while k < e:
        x = np.int32(-1)
        pred = False
        if k + lane < e:
            x = ci[k + lane]
            pred = first_edge_keeps(structure, ci_label, k + lane, label, bits, ubase, rowc, w, width, x)
        batches += 1
        cached, written = emit(cache, w, pred, x, cached, written, out, base, use_cache)
        k += 32
    return flush(cache, w, cached, written, out, base), batches


@functools.lru_cache(maxsize=None)
def make_kernels(warps: int):
    """The join kernels for blocks of ``warps`` warps (shared-memory shapes are compile-time)."""
    Q = MAX_QUERY_VERTICES
    R = 2 * MAX_LINK_EDGES        # (start, end) of every linking edge; a literal for shared shapes

    @cuda.jit
    def row_counts_kernel(tab, width, a, m, col, part, n, structure, meta, gl, keys, offs, ci,
                          ci_label, counts, qcount, loads, instrument):
        """counts[i] = |N(tab[a + i, col], part)| for i < m (a thread per row); also empties the
        load-balance queue of this iteration (saves a launch)."""
        i = cuda.grid(1)
        if i == 0:
            qcount[0] = 0
        stride = cuda.gridsize(1)
        total = 0
        while i < m:
            v = tab[(a + i) * width + col]
            s, e, ld = neighbor_range(structure, meta, gl, keys, offs, part, v, n)
            counts[i] = e - s
            total += ld
            i += stride
        add_loads(loads, instrument, 0, total)

    @cuda.jit
    def first_edge_kernel(tab, width, a, m, col, part, label, bits, ubase, F, gba, num, n,
                          structure, meta, gl, keys, offs, ci, ci_label, use_cache, loads, instrument):
        """num[i] = |(N(v', l0) minus row) ∩ C(u)|, written to gba[F[i]:] (a warp per row)."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        lane = cuda.laneid
        w = cuda.threadIdx.x // 32
        gw = cuda.blockIdx.x * warps + w
        nw = cuda.gridDim.x * warps
        l_struct = l_nbr = l_bits = 0
        i = gw
        while i < m:
            load_row(rowc, w, tab, a + i, width)
            s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, rowc[w, col], n)
            l_struct += ld
            written, batches = warp_first_edge(rowc, cache, w, width, s, e, ci, ci_label, structure,
                                               label, bits, ubase, gba, F[i], use_cache)
            l_nbr += batches
            l_bits += batches
            if lane == 0:
                num[i] = written
            i += nw
        if lane == 0:
            add_loads(loads, instrument, 0, l_struct)
            add_loads(loads, instrument, 1, l_nbr)
            add_loads(loads, instrument, 2, l_bits)

    @cuda.jit
    def intersect_kernel(tab, width, a, m, qinfo, e_lo, e_hi, F, gba, num, n, structure, meta, gl,
                         keys, offs, ci, ci_label, use_cache, loads, instrument):
        """gba[F[i]:F[i]+num[i]] ∩= N(v'', l) for the linking edges e_lo..e_hi-1 of ``qinfo``,
        in place, by 32 x 32 tile merges (a warp per row)."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        btile = cuda.shared.array((warps, 32), np.int32)
        ntile = cuda.shared.array((warps, 32), np.int32)
        lane = cuda.laneid
        w = cuda.threadIdx.x // 32
        gw = cuda.blockIdx.x * warps + w
        nw = cuda.gridDim.x * warps
        l_struct = l_nbr = l_tab = 0
        i = gw
        while i < m:
            load_row(rowc, w, tab, a + i, width)
            base = F[i]
            size = np.int64(num[i])
            for ed in range(e_lo, e_hi):
                if size == 0:
                    break
                col = qinfo[ed * 3]
                part = qinfo[ed * 3 + 1]
                label = qinfo[ed * 3 + 2]
                s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, rowc[w, col], n)
                l_struct += ld
                size, _, loaded_b, loaded_n = merge_in_place(btile, ntile, cache, w, gba, base, np.int64(0), size,
                                                             ci, s, e, np.int64(0), structure, ci_label,
                                                             label, use_cache)
                l_tab += loaded_b
                l_nbr += loaded_n
            if lane == 0:
                num[i] = size
            i += nw
        if lane == 0:
            add_loads(loads, instrument, 0, l_struct)
            add_loads(loads, instrument, 1, l_nbr)
            add_loads(loads, instrument, 3, l_tab)

    @cuda.jit
    def link_kernel(tab, width, a, m, buf, boff, num, P, out):
        """out[P[i] + k] = tab[a + i] + (buf[boff[i] + k],) for k < num[i] (a warp per row)."""
        lane = cuda.laneid
        w = cuda.threadIdx.x // 32
        i = cuda.blockIdx.x * warps + w
        nw = cuda.gridDim.x * warps
        new_width = width + 1
        while i < m:
            cnt = np.int64(num[i])
            src = (a + i) * width
            dst = P[i] * new_width
            b = boff[i]
            t = np.int64(lane)
            total = cnt * new_width
            while t < total:
                r = t // new_width
                c = t - r * new_width
                if c < width:
                    out[dst + t] = tab[src + c]
                else:
                    out[dst + t] = buf[b + r]
                t += 32
            i += nw

    # ------------------------------------------------------------------ naive set operations
    @cuda.jit
    def naive_first_kernel(tab, width, a, m, col, part, label, bits, ubase, F, gba, num, n,
                           structure, meta, gl, keys, offs, ci, ci_label, loads, instrument):
        """gba[F[i]:] = N(v', l0) ∩ C(u) (a thread per row)."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        l_struct = l_nbr = l_bits = 0
        while i < m:
            v = tab[(a + i) * width + col]
            s, e, ld = neighbor_range(structure, meta, gl, keys, offs, part, v, n)
            l_struct += ld
            c = np.int64(0)
            for k in range(s, e):
                x = ci[k]
                l_nbr += 1
                if label_ok(structure, ci_label, k, label):
                    l_bits += 1
                    if in_bitset(bits, ubase, x) != 0:
                        gba[F[i] + c] = x
                        c += 1
            num[i] = c
            i += stride
        add_loads(loads, instrument, 0, l_struct)
        add_loads(loads, instrument, 1, l_nbr)
        add_loads(loads, instrument, 2, l_bits)

    @cuda.jit
    def naive_subtract_kernel(tab, width, a, m, F, gba, num, loads, instrument):
        """Remove the row's own vertices from its buffer, in place (a thread per row)."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        l_tab = 0
        while i < m:
            row = (a + i) * width
            c = np.int64(0)
            for k in range(num[i]):
                x = gba[F[i] + k]
                l_tab += 1
                keep = True
                for j in range(width):
                    if tab[row + j] == x:
                        keep = False
                l_tab += width
                if keep:
                    gba[F[i] + c] = x
                    c += 1
            num[i] = c
            i += stride
        add_loads(loads, instrument, 3, l_tab)

    @cuda.jit
    def naive_intersect_kernel(tab, width, a, m, col, part, label, F, gba, num, n, structure,
                               meta, gl, keys, offs, ci, ci_label, loads, instrument):
        """gba[F[i]:F[i]+num[i]] ∩= N(v'', l) by a merge walk, in place (a thread per row)."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        l_struct = l_nbr = l_tab = 0
        while i < m:
            v = tab[(a + i) * width + col]
            s, e, ld = neighbor_range(structure, meta, gl, keys, offs, part, v, n)
            l_struct += ld
            base = F[i]
            size = np.int64(num[i])
            p = np.int64(0)
            c = np.int64(0)
            k = s
            while p < size and k < e:
                x = gba[base + p]
                y = ci[k]
                l_tab += 1
                l_nbr += 1
                if x < y:
                    p += 1
                elif y < x:
                    k += 1
                else:
                    if label_ok(structure, ci_label, k, label):
                        gba[base + c] = x
                        c += 1
                    p += 1
                    k += 1
            num[i] = c
            i += stride
        add_loads(loads, instrument, 0, l_struct)
        add_loads(loads, instrument, 1, l_nbr)
        add_loads(loads, instrument, 3, l_tab)

    # ------------------------------------------------------------------ join-twice (two-step)
    @cuda.jit(device=True)
    def all_edges_contain(qinfo, e_lo, e_hi, ranges, w, x, structure, ci, ci_label):
        """Whether x is in N(v'', l) of every linking edge e_lo+1..e_hi-1 (binary searches)."""
        for ed in range(e_lo + 1, e_hi):
            end = ranges[w, 2 * (ed - e_lo) + 1]
            lo = lower_bound(ci, ranges[w, 2 * (ed - e_lo)], end, x)
            if lo >= end or ci[lo] != x:
                return False
            if not label_ok(structure, ci_label, lo, qinfo[ed * 3 + 2]):
                return False
        return True

    @cuda.jit
    def check_warp_kernel(write, tab, width, a, m, qinfo, e_lo, e_hi, bits, ubase, P, out, num, n,
                          structure, meta, gl, keys, offs, ci, ci_label, use_cache, loads, instrument):
        """Join-twice pass (a warp per row): every candidate of e0 is checked against all
        linking edges; ``write == 0`` counts into num[i], ``write == 1`` writes to out[P[i]:]."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        ranges = cuda.shared.array((warps, R), np.int64)
        lane = cuda.laneid
        w = cuda.threadIdx.x // 32
        gw = cuda.blockIdx.x * warps + w
        nw = cuda.gridDim.x * warps
        l_struct = l_nbr = l_bits = 0
        i = gw
        while i < m:
            load_row(rowc, w, tab, a + i, width)
            for ed in range(e_lo, e_hi):
                s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, qinfo[ed * 3 + 1],
                                               rowc[w, qinfo[ed * 3]], n)
                l_struct += ld
                if lane == 0:
                    ranges[w, 2 * (ed - e_lo)] = s
                    ranges[w, 2 * (ed - e_lo) + 1] = e
            cuda.syncwarp(FULL_MASK)
            s = ranges[w, 0]
            e = ranges[w, 1]
            label = qinfo[e_lo * 3 + 2]
            base = P[i] if write != 0 else 0
            cached = 0
            written = np.int64(0)
            k = s
            while k < e:
                x = np.int32(-1)
                pred = False
                if k + lane < e:
                    x = ci[k + lane]
                    pred = first_edge_keeps(structure, ci_label, k + lane, label, bits,
                                            ubase, rowc, w, width, x)
                    if pred:
                        pred = all_edges_contain(qinfo, e_lo, e_hi, ranges, w, x, structure, ci, ci_label)
                l_nbr += 1 + 5 * (e_hi - e_lo - 1)
                l_bits += 1
                if write != 0:
                    cached, written = emit(cache, w, pred, x, cached, written, out, base, use_cache)
                else:
                    written += cuda.popc(cuda.ballot_sync(FULL_MASK, pred))
                k += 32
            if write != 0:
                written = flush(cache, w, cached, written, out, base)
            if lane == 0:
                num[i] = written
            cuda.syncwarp(FULL_MASK)
            i += nw
        if lane == 0:
            add_loads(loads, instrument, 0, l_struct)
            add_loads(loads, instrument, 1, l_nbr)
            add_loads(loads, instrument, 2, l_bits)

    @cuda.jit
    def check_thread_kernel(write, tab, width, a, m, qinfo, e_lo, e_hi, bits, ubase, P, out, num, n,
                            structure, meta, gl, keys, offs, ci, ci_label, loads, instrument):
        """Join-twice pass with a thread per row (naive set operations): each candidate of e0 is
        checked by a lookup and binary search per further linking edge."""
        i = cuda.grid(1)
        stride = cuda.gridsize(1)
        l_struct = l_nbr = l_bits = 0
        while i < m:
            row = (a + i) * width
            s, e, ld = neighbor_range(structure, meta, gl, keys, offs, qinfo[e_lo * 3 + 1],
                                      tab[row + qinfo[e_lo * 3]], n)
            l_struct += ld
            label = qinfo[e_lo * 3 + 2]
            c = np.int64(0)
            for k in range(s, e):
                x = ci[k]
                l_nbr += 1
                if not label_ok(structure, ci_label, k, label):
                    continue
                l_bits += 1
                if in_bitset(bits, ubase, x) == 0:
                    continue
                keep = True
                for j in range(width):
                    if tab[row + j] == x:
                        keep = False
                ed = e_lo + 1
                while keep and ed < e_hi:
                    s2, e2, ld = neighbor_range(structure, meta, gl, keys, offs, qinfo[ed * 3 + 1],
                                                tab[row + qinfo[ed * 3]], n)
                    l_struct += ld
                    lo = s2
                    hi = e2
                    while lo < hi:
                        mid = (lo + hi) >> 1
                        l_nbr += 1
                        if ci[mid] < x:
                            lo = mid + 1
                        else:
                            hi = mid
                    keep = lo < e2 and ci[lo] == x and label_ok(structure, ci_label, lo, qinfo[ed * 3 + 2])
                    ed += 1
                if keep:
                    if write != 0:
                        out[P[i] + c] = x
                    c += 1
            num[i] = c
            i += stride
        add_loads(loads, instrument, 0, l_struct)
        add_loads(loads, instrument, 1, l_nbr)
        add_loads(loads, instrument, 2, l_bits)

    return {name: obj for name, obj in locals().items() if name.endswith("_kernel")}
