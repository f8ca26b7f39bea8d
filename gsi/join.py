"""GSI's join phase (GSI §V, Algorithms 3-4; SGSI §5, Algorithms 2-3): one join iteration extends
every row m_i of the intermediate table M by the candidates of the next query vertex u.

Prealloc-Combine (``output="prealloc-combine"``): ``row_counts_kernel`` gives each row the size
of N(v'_i, l0) for the first linking edge e0; one exclusive scan gives every row its slice of one
global buffer GBA; ``first_edge_kernel`` (a warp per row) reads N(v', l0) in 128-byte batches and
keeps the elements not in the row and in C(u), compacting them by ballot into a per-warp
128-byte write cache flushed to GBA 32 words at a time; in the same launch
(:func:`intersect_row`) the warp intersects the row's buffer in place with N(v'', l) of every
other linking edge (a tile merge in shared memory); a second scan sizes the new table and
``link_kernel`` writes it.

Ablations (GSI Tables V and VII): ``set_ops="naive"`` (a kernel per set operation, a thread per
row, no shared memory), ``write_cache=False`` (survivors straight to global memory),
``output="two-step"`` (join-twice, as GpSM/GunrockSM: count with binary searches, scan, redo and
write). ``instrument`` counts warp-level global load requests (``loads``) in four classes:
neighbour-structure lookups, neighbour-list batches, candidate-bitset reads and
table/buffer reads (thread-per-row kernels count each thread's loads); a bitset read of a batch
is a gather, so one request can be several transactions. docs/decisions.md ("GSI's join")
gives the choices where the paper is silent.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from common.gpu.cudasim import FULL_MASK
from common.gpu.device_functions import lower_bound, lower_bound_probes, warp_seek
from common.gpu.runtime import cuda, jit
from common.gpu.scan import block_carry_scan

from .pcsr import CSR, neighbor_range, warp_neighbor_range

MAX_QUERY_VERTICES = 64
MAX_LINK_EDGES = 2 * MAX_QUERY_VERTICES
INT32_MAX = np.int32(2 ** 31 - 1)
EDGE_FIELDS = 3           # (column, partition, edge label) per linking edge in ``qinfo``
EDGE_COL, EDGE_PART, EDGE_LABEL = 0, 1, 2
LOAD_CLASSES = ("structure", "neighbors", "bitset", "table")
LOAD_STRUCTURE, LOAD_NEIGHBORS, LOAD_BITSET, LOAD_TABLE = 0, 1, 2, 3
# Slots of the engine's small int64 ``cells`` array that single-block kernels leave totals in.
CELL_GBA, CELL_OUT = 0, 1
CELLS = 2
#: :data:`merge_in_place_galloping` skips through the neighbour list after this many
#: consecutive neighbour tiles that held no match and lay wholly below the buffer tile.
SKIP_AFTER = 2
#: A :func:`tile_in_list` skip counted as the words of its two cheapest rounds of 32 probes.
SEEK_WORDS = 64


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


def _tile_merge(gallop: bool):
    """The tile merge, with (``gallop``) or without the skip through long neighbour lists (a
    compile-time choice: the one-launch join, held to 64 registers, keeps the plain merge)."""

    @cuda.jit(device=True)
    def merge(btile, ntile, cache, w, gba, base, bp, size, ci, npos, e, written, structure, ci_label, label,
              use_cache):
        """One warp: intersect gba[base+bp : base+size] with ci[npos:e] (both sorted) by 32 x 32
        tile merges (each lane binary-searches its buffer element in the neighbour tile; the tile
        whose last element is smaller advances), writing survivors in place from
        gba[base+written] (written <= bp). Returns (written after the final flush, bp where the
        merge stopped, buffer tiles loaded, neighbour tiles loaded)."""
        lane = cuda.laneid
        cached = 0
        loaded_b = 0
        loaded_n = 0
        reload_b = True
        reload_n = True
        misses = 0
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
            lo = lower_bound(ntile[w], 0, nvalid, x)
            pred = lane < bvalid and lo < nvalid and ntile[w, lo] == x
            if pred:
                pred = label_ok(structure, ci_label, npos + lo, label)
            if gallop:
                misses = misses + 1 if cuda.ballot_sync(FULL_MASK, pred) == 0 else 0
            cached, written = emit(cache, w, pred, x, cached, written, gba, base, use_cache)
            reload_b = blast <= nlast
            reload_n = nlast <= blast
            if reload_b:
                bp += 32
            if reload_n:
                npos += 32
            if gallop:
                # a neighbour list far longer than the buffer: after SKIP_AFTER tiles without a
                # match wholly below the buffer tile, gallop to the buffer's next element
                if not reload_n or reload_b:
                    misses = 0
                if misses >= SKIP_AFTER and npos < e:
                    after = cuda.ballot_sync(FULL_MASK, lane < bvalid and x > nlast)
                    key = cuda.shfl_sync(FULL_MASK, x, cuda.ffs(after) - 1)
                    npos = warp_seek(ci, npos, e, key)
                    misses = 0
            cuda.syncwarp(FULL_MASK)
        return flush(cache, w, cached, written, gba, base), bp, loaded_b, loaded_n

    return merge


#: GSI's tile merge (Algorithm 4's intersections), and the same merge skipping through a
#: neighbour list far longer than the buffer (:func:`common.gpu.device_functions.warp_seek`).
merge_in_place = _tile_merge(False)
merge_in_place_galloping = _tile_merge(True)


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
def add_load_counts(loads, instrument, structure, neighbors, bitset, table):
    """Add one thread's load counts of the four classes (a class of 0 adds nothing)."""
    add_loads(loads, instrument, LOAD_STRUCTURE, structure)
    add_loads(loads, instrument, LOAD_NEIGHBORS, neighbors)
    add_loads(loads, instrument, LOAD_BITSET, bitset)
    add_loads(loads, instrument, LOAD_TABLE, table)


@cuda.jit(device=True)
def all_edges_contain(qinfo, e_lo, e_hi, ranges, w, x, structure, ci, ci_label):
    """Whether x is in N(v'', l) of every linking edge e_lo+1..e_hi-1 (binary searches in the
    ranges the warp looked up)."""
    for ed in range(e_lo + 1, e_hi):
        end = ranges[w, 2 * (ed - e_lo) + 1]
        lo = lower_bound(ci, ranges[w, 2 * (ed - e_lo)], end, x)
        if lo >= end or ci[lo] != x:
            return False
        if not label_ok(structure, ci_label, lo, qinfo[ed * EDGE_FIELDS + EDGE_LABEL]):
            return False
    return True


@cuda.jit(device=True)
def warp_first_edge(write, rowc, cache, ranges, w, width, s, e, ci, ci_label, structure, label, bits,
                    ubase, qinfo, e_lo, e_hi, out, base, use_cache):
    """One warp: out[base:] = (ci[s:e] with label, minus the row) ∩ C(u), in 32-element batches,
    each kept element also checked against the linking edges e_lo+1..e_hi-1 of ``qinfo`` (their
    ranges in ``ranges[w]``: :func:`all_edges_contain`; none when e_hi <= e_lo + 1); with
    write == 0 only counted. Returns (how many, batches read)."""
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
            if pred:
                pred = all_edges_contain(qinfo, e_lo, e_hi, ranges, w, x, structure, ci, ci_label)
        batches += 1
        if write != 0:
            cached, written = emit(cache, w, pred, x, cached, written, out, base, use_cache)
        else:
            written += cuda.popc(cuda.ballot_sync(FULL_MASK, pred))
        k += 32
    if write != 0:
        written = flush(cache, w, cached, written, out, base)
    return written, batches


@cuda.jit(device=True)
def edge_at(qinfo, ed):
    """Linking edge ``ed`` of ``qinfo``: (column of v'', partition, edge label)."""
    return (qinfo[ed * EDGE_FIELDS + EDGE_COL], qinfo[ed * EDGE_FIELDS + EDGE_PART],
            qinfo[ed * EDGE_FIELDS + EDGE_LABEL])


def _intersect_row(merge):
    @cuda.jit(device=True)
    def intersect_row(rowc, btile, ntile, cache, w, qinfo, e_lo, e_hi, gba, base, size, n, structure,
                      meta, gl, keys, offs, ci, ci_label, use_cache):
        """One warp, one row (cached in rowc[w]): gba[base:base+size] ∩= N(v'', l) for the
        linking edges e_lo..e_hi-1, in place by tile merges. Returns (size, structure loads,
        neighbour tiles, buffer tiles)."""
        l_struct = l_nbr = l_tab = 0
        for ed in range(e_lo, e_hi):
            if size == 0:
                break
            col, part, label = edge_at(qinfo, ed)
            s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, rowc[w, col], n)
            l_struct += ld
            size, _, loaded_b, loaded_n = merge(btile, ntile, cache, w, gba, base, np.int64(0), size, ci, s, e,
                                               np.int64(0), structure, ci_label, label, use_cache)
            l_tab += loaded_b
            l_nbr += loaded_n
        return size, l_struct, l_nbr, l_tab

    return intersect_row


#: A row's intersections with the plain merge (the warp-per-row and one-launch joins) and with
#: the galloping one (the load-balanced kernels, whose rows include the hubs).
intersect_row = _intersect_row(merge_in_place)
intersect_row_galloping = _intersect_row(merge_in_place_galloping)


@cuda.jit(device=True)
def tile_in_list(ntile, w, keep, x, ci, npos, e):
    """One warp: which lanes' ``x`` (where ``keep``; ascending with the lane) occur in ci[npos:e]
    (sorted). Neighbour tiles are read from ``npos`` on; a tile wholly below the smallest
    unresolved element is skipped by :func:`common.gpu.device_functions.warp_seek`. Returns
    (found, where the next search may start: the tile that held the largest kept element, the
    words read: each tile's, and SEEK_WORDS per skip)."""
    lane = cuda.laneid
    found = False
    words = np.int64(0)
    mask = cuda.ballot_sync(FULL_MASK, keep)
    key = cuda.shfl_sync(FULL_MASK, x, cuda.ffs(mask) - 1)
    while mask != 0 and npos < e:
        ntile[w, lane] = ci[npos + lane] if npos + lane < e else INT32_MAX
        cuda.syncwarp(FULL_MASK)
        nvalid = e - npos
        if nvalid > 32:
            nvalid = 32
        nlast = ntile[w, nvalid - 1]
        words += nvalid
        if nlast < key:                            # nothing of the tile is wanted: gallop
            cuda.syncwarp(FULL_MASK)
            npos = warp_seek(ci, npos + nvalid, e, key)
            words += SEEK_WORDS
            continue
        if keep and not found:
            j = lower_bound(ntile[w], 0, nvalid, x)
            found = j < nvalid and ntile[w, j] == x
        cuda.syncwarp(FULL_MASK)
        mask = cuda.ballot_sync(FULL_MASK, keep and x > nlast)
        if mask != 0:
            key = cuda.shfl_sync(FULL_MASK, x, cuda.ffs(mask) - 1)
            npos += nvalid
    return keep and found, npos, words


def _row_in_place(write: bool):
    """A row's join with every list read in place, counting (``write`` False) or also writing
    the new rows (a compile-time choice)."""

    @cuda.jit(device=True)
    def row_in_place(rowc, ranges, ntile, stile, w, tab, row, width, qinfo, e_lo, e_hi, bits, ubase, ci, offsets,
                     bases, stride, out, dst_row):
        """One warp, row ``row`` of ``tab`` (cached in rowc[w]): the survivors
        N(v'_1, l_1) ∩ ... ∩ N(v'_k, l_k) ∩ C(u) minus the row, over the linking edges
        e_lo..e_hi-1 (N(v, p) = ci[bases[p] + offsets[p * stride + v] : ... v + 1]; ``ranges[w]``:
        two words per edge), counted and, when
        writing, appended as new rows (the row extended by each) at out row ``dst_row`` on. The
        shortest list is read in 32-element batches; each batch's survivors are looked up in the
        other lists (:func:`tile_in_list`, whose cursors only move forward). Returns (the count,
        the list words read)."""
        lane = cuda.laneid
        best = -1
        best_len = np.int64(1) << 62
        for ed in range(e_lo, e_hi):
            col, part, _label = edge_at(qinfo, ed)
            at = part * stride + rowc[w, col]
            s = bases[part] + offsets[at]
            e = bases[part] + offsets[at + 1]
            if lane == 0:
                ranges[w, 2 * (ed - e_lo)] = s
                ranges[w, 2 * (ed - e_lo) + 1] = e
            if e - s < best_len:
                best, best_len = ed - e_lo, e - s
        cuda.syncwarp(FULL_MASK)
        count = np.int64(0)
        k = ranges[w, 2 * best]
        end = ranges[w, 2 * best + 1]
        words = end - k                           # the shortest list, read whole
        while k < end:
            x = INT32_MAX
            keep = False
            if k + lane < end:
                x = ci[k + lane]
                keep = in_bitset(bits, ubase, x) != 0 and not_in_row(rowc, w, width, x)
            for other in range(e_hi - e_lo):
                if other != best and cuda.ballot_sync(FULL_MASK, keep) != 0:
                    keep, npos, read = tile_in_list(ntile, w, keep, x, ci, ranges[w, 2 * other],
                                                    ranges[w, 2 * other + 1])
                    words += read
                    cuda.syncwarp(FULL_MASK)
                    if lane == 0:
                        ranges[w, 2 * other] = npos
                    cuda.syncwarp(FULL_MASK)
            mask = cuda.ballot_sync(FULL_MASK, keep)
            found = cuda.popc(mask)
            if write and found > 0:
                if keep:
                    stile[w, cuda.popc(mask & ((1 << lane) - 1))] = x
                cuda.syncwarp(FULL_MASK)
                link_row(tab, width, row, stile[w], 0, found, dst_row + count, out)
                cuda.syncwarp(FULL_MASK)
            count += found
            k += 32
        return count, words

    return row_in_place


#: A row's survivors counted (a count-only query's last step; the first pass of the in-place
#: join), and counted and written as new rows (its second pass).
count_row_in_place = _row_in_place(False)
write_row_in_place = _row_in_place(True)


@cuda.jit(device=True)
def link_row(tab, width, src_row, buf, b, cnt, dst_row, out):
    """One warp: out rows dst_row.. = row src_row of tab extended by each of buf[b:b+cnt]."""
    new_width = width + 1
    src = src_row * width
    dst = dst_row * new_width
    t = np.int64(cuda.laneid)
    total = cnt * new_width
    while t < total:
        r = t // new_width
        c = t - r * new_width
        if c < width:
            out[dst + t] = tab[src + c]
        else:
            out[dst + t] = buf[b + r]
        t += 32


@cuda.jit(device=True)
def scan_rows_round(i, m, value, dst, carry, wsum, warps):
    """:func:`block_carry_scan` over rows, thread t holding row i's ``value`` (0 past the last
    row m): dst[i] = its offset; returns the carry after the round."""
    offset, carry = block_carry_scan(value, carry, wsum, warps)
    if i < m:
        dst[i] = offset
    return carry


@cuda.jit(device=True)
def block_row_counts(tab, width, a, m, col, part, n, structure, meta, gl, keys, offs, counts, F, wsum, warps):
    """One block: counts[i] = |N(tab[a + i, col], part)| and their exclusive scan into F (GBA
    offsets), round after round; returns (the GBA size, this thread's structure loads)."""
    carry = np.int64(0)
    total_ld = 0
    r0 = 0
    while r0 < m:
        i = r0 + cuda.threadIdx.x
        c = np.int64(0)
        if i < m:
            s, e, ld = neighbor_range(structure, meta, gl, keys, offs, part, tab[(a + i) * width + col], n)
            c = e - s
            counts[i] = c
            total_ld += ld
        carry = scan_rows_round(i, m, c, F, carry, wsum, warps)
        r0 += warps * 32
    return carry, total_ld


@cuda.jit(device=True)
def block_survivor_offsets(m, num, P, wsum, warps):
    """One block: the exclusive scan of the survivors num[:m] into P (the new table's row
    offsets); returns the new table's rows."""
    carry = np.int64(0)
    r0 = 0
    while r0 < m:
        i = r0 + cuda.threadIdx.x
        carry = scan_rows_round(i, m, np.int64(num[i]) if i < m else np.int64(0), P, carry, wsum, warps)
        r0 += warps * 32
    return carry


@cuda.jit(device=True)
def row_has(tab, row, width, x):
    """Whether row ``row`` of the table (``width`` columns, one thread reading it) holds x."""
    for j in range(width):
        if tab[row * width + j] == x:
            return True
    return False


@cuda.jit(device=True)
def naive_subtract_row(tab, row, width, gba, base, size):
    """One thread: remove row's own vertices from gba[base:base+size]; returns (size, loads)."""
    c = np.int64(0)
    l_tab = 0
    for k in range(size):
        x = gba[base + k]
        l_tab += 1 + width
        if not row_has(tab, row, width, x):
            gba[base + c] = x
            c += 1
    return c, l_tab


@cuda.jit(device=True)
def naive_intersect_row(v, part, label, gba, base, size, n, structure, meta, gl, keys, offs, ci,
                        ci_label):
    """One thread: gba[base:base+size] ∩= N(v, l) by a merge walk, in place; returns (size,
    structure loads, neighbours read, buffer reads)."""
    s, e, l_struct = neighbor_range(structure, meta, gl, keys, offs, part, v, n)
    p = np.int64(0)
    c = np.int64(0)
    k = s
    steps = 0
    while p < size and k < e:
        x = gba[base + p]
        y = ci[k]
        steps += 1
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
    return c, l_struct, steps, steps


@cuda.jit(device=True)
def check_row_warp(write, rowc, cache, ranges, w, width, qinfo, e_lo, e_hi, bits, ubase, out, base,
                   n, structure, meta, gl, keys, offs, ci, ci_label, use_cache):
    """Join-twice for one row (a warp): every candidate of e0 checked against all linking edges,
    counted (write == 0) or written to out[base:]; returns (how many, structure loads,
    neighbour loads, bitset loads)."""
    lane = cuda.laneid
    l_struct = 0
    for ed in range(e_lo, e_hi):
        col, part, _ = edge_at(qinfo, ed)
        s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, rowc[w, col], n)
        l_struct += ld
        if lane == 0:
            ranges[w, 2 * (ed - e_lo)] = s
            ranges[w, 2 * (ed - e_lo) + 1] = e
    cuda.syncwarp(FULL_MASK)
    label = qinfo[e_lo * EDGE_FIELDS + EDGE_LABEL]
    written, batches = warp_first_edge(write, rowc, cache, ranges, w, width, ranges[w, 0], ranges[w, 1],
                                       ci, ci_label, structure, label, bits, ubase, qinfo, e_lo, e_hi,
                                       out, base, use_cache)
    cuda.syncwarp(FULL_MASK)
    return written, l_struct, batches * (1 + 5 * (e_hi - e_lo - 1)), batches


@cuda.jit(device=True)
def check_row_thread(write, subtract, tab, row, width, qinfo, e_lo, e_hi, bits, ubase, out, base, n,
                     structure, meta, gl, keys, offs, ci, ci_label):
    """One thread, one row: each neighbour of the first linking edge e_lo with its label and in
    C(u), not in the row (when ``subtract``), and found by a lookup and binary search in every
    further linking edge e_lo+1..e_hi-1, is counted and (when ``write``) written to out[base:].
    Join-twice's pass (subtract 1), and with subtract 0 and e_hi = e_lo + 1 the naive first set
    operation N(v', l0) ∩ C(u). Returns (how many, structure, neighbour, bitset loads)."""
    col0, part0, label = edge_at(qinfo, e_lo)
    s, e, l_struct = neighbor_range(structure, meta, gl, keys, offs, part0, tab[row * width + col0], n)
    l_nbr = l_bits = 0
    c = np.int64(0)
    for k in range(s, e):
        x = ci[k]
        l_nbr += 1
        if not label_ok(structure, ci_label, k, label):
            continue
        l_bits += 1
        if in_bitset(bits, ubase, x) == 0:
            continue
        keep = subtract == 0 or not row_has(tab, row, width, x)
        ed = e_lo + 1
        while keep and ed < e_hi:
            col, part, lab = edge_at(qinfo, ed)
            s2, e2, ld = neighbor_range(structure, meta, gl, keys, offs, part, tab[row * width + col], n)
            l_struct += ld
            lo, probes = lower_bound_probes(ci, s2, e2, x)
            l_nbr += probes
            keep = lo < e2 and ci[lo] == x and label_ok(structure, ci_label, lo, lab)
            ed += 1
        if keep:
            if write != 0:
                out[base + c] = x
            c += 1
    return c, l_struct, l_nbr, l_bits


class JoinKernels(NamedTuple):
    """The join kernels for one block size (see :func:`make_kernels`)."""

    row_counts: object
    counts_scan: object
    first_edge: object
    link: object
    scan_link: object
    naive_subtract: object
    naive_intersect: object
    check_warp: object
    check_thread: object


def _offset_kernels(warps: int):
    """Prealloc-Combine's sizing and writing steps: row counts, scans, link."""

    @jit
    def row_counts(tab, width, a, m, col, part, n, structure, meta, gl, keys, offs, ci, ci_label,
                   counts, qcount, loads, instrument):
        """counts[i] = |N(tab[a + i, col], part)| (a thread per row); empties the load-balance
        queue of this iteration."""
        i = cuda.grid(1)
        if i == 0:
            qcount[0] = 0
        total = 0
        while i < m:
            s, e, ld = neighbor_range(structure, meta, gl, keys, offs, part, tab[(a + i) * width + col], n)
            counts[i] = e - s
            total += ld
            i += cuda.gridsize(1)
        add_loads(loads, instrument, LOAD_STRUCTURE, total)

    @jit
    def counts_scan(tab, width, a, m, col, part, n, structure, meta, gl, keys, offs, ci, ci_label,
                    counts, F, cells, qcount, loads, instrument):
        """One block: ``row_counts`` and the exclusive scan of the counts into F (GBA offsets) in
        one launch, the GBA size left in cells[CELL_GBA] (for tables of a few blocks' rows)."""
        wsum = cuda.shared.array(warps, np.int64)
        if cuda.threadIdx.x == 0:
            qcount[0] = 0
        total, total_ld = block_row_counts(tab, width, a, m, col, part, n, structure, meta, gl, keys, offs, counts,
                                           F, wsum, warps)
        if cuda.threadIdx.x == 0:
            cells[CELL_GBA] = total
        add_loads(loads, instrument, LOAD_STRUCTURE, total_ld)

    return row_counts, counts_scan


@cuda.jit(device=True)
def first_edge_row(rowc, cache, btile, ntile, w, tab, row, i, width, col, part, label, bits, ubase, F, gba,
                   num, n, structure, meta, gl, keys, offs, ci, ci_label, use_cache, qinfo, e_lo, e_hi):
    """One warp, row ``row`` of ``tab`` (index i of the iteration): gba[F[i]:] = (N(v', l0) minus
    the row) ∩ C(u), then intersected with the linking edges e_lo..e_hi-1 of ``qinfo``; num[i] =
    its size. Returns the (structure, neighbour, bitset, table) load counts."""
    load_row(rowc, w, tab, row, width)
    s, e, ld = warp_neighbor_range(structure, meta, gl, keys, offs, part, rowc[w, col], n)
    # no linking edge checked per element (e_hi = e_lo): intersect_row does them next
    written, batches = warp_first_edge(1, rowc, cache, btile, w, width, s, e, ci, ci_label, structure, label,
                                       bits, ubase, qinfo, e_lo, e_lo, gba, F[i], use_cache)
    size, ls, ln, lt = intersect_row(rowc, btile, ntile, cache, w, qinfo, e_lo, e_hi, gba, F[i], written, n,
                                     structure, meta, gl, keys, offs, ci, ci_label, use_cache)
    if cuda.laneid == 0:
        num[i] = size
    return ld + ls, batches + ln, batches, lt


def _set_kernels(warps: int):
    """GPU-friendly set operations (a warp per row): the first edge, fused with the others."""
    Q = MAX_QUERY_VERTICES

    @jit
    def first_edge(tab, width, a, m, col, part, label, bits, ubase, F, gba, num, n, structure, meta,
                   gl, keys, offs, ci, ci_label, use_cache, qinfo, e_lo, e_hi, loads, instrument):
        """A warp per row: :func:`first_edge_row` (the other linking edges fused: one launch)."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        btile = cuda.shared.array((warps, 32), np.int32)
        ntile = cuda.shared.array((warps, 32), np.int32)
        w = cuda.threadIdx.x // 32
        l_struct = l_nbr = l_bits = l_tab = 0
        i = cuda.blockIdx.x * warps + w
        while i < m:
            ls, ln, lb, lt = first_edge_row(rowc, cache, btile, ntile, w, tab, a + i, i, width, col, part, label,
                                            bits, ubase, F, gba, num, n, structure, meta, gl, keys, offs, ci,
                                            ci_label, use_cache, qinfo, e_lo, e_hi)
            l_struct += ls
            l_nbr += ln
            l_bits += lb
            l_tab += lt
            i += cuda.gridDim.x * warps
        if cuda.laneid == 0:
            add_load_counts(loads, instrument, l_struct, l_nbr, l_bits, l_tab)

    return first_edge


def _link_kernels(warps: int):

    @jit
    def link(tab, width, a, m, buf, boff, num, P, out):
        """A warp per row: out[P[i] + k] = tab[a + i] + (buf[boff[i] + k],) for k < num[i]."""
        i = cuda.blockIdx.x * warps + cuda.threadIdx.x // 32
        while i < m:
            link_row(tab, width, a + i, buf, boff[i], np.int64(num[i]), P[i], out)
            i += cuda.gridDim.x * warps

    @jit
    def scan_link(tab, width, a, m, buf, boff, num, P, out, cells, write):
        """One block: the exclusive scan of num into P (new-table offsets, total in
        cells[CELL_OUT]) and, when ``write``, ``link`` of every row (for small tables whose output
        is known to fit ``out``)."""
        wsum = cuda.shared.array(warps, np.int64)
        tid = cuda.threadIdx.x
        rows = block_survivor_offsets(m, num, P, wsum, warps)
        if tid == 0:
            cells[CELL_OUT] = rows
        if write != 0:
            cuda.syncthreads()              # P of every row is visible to the whole block
            i = tid // 32
            while i < m:
                link_row(tab, width, a + i, buf, boff[i], np.int64(num[i]), P[i], out)
                i += warps

    return link, scan_link


def _naive_kernels(warps: int):
    """``set_ops="naive"``: a kernel per set operation, a thread per row (the first one,
    N(v', l0) ∩ C(u), is ``check_thread`` with write 1 and subtract 0)."""

    @jit
    def naive_subtract(tab, width, a, m, F, gba, num, loads, instrument):
        """A thread per row: remove the row's own vertices from its buffer, in place."""
        i = cuda.grid(1)
        l_tab = 0
        while i < m:
            c, lt = naive_subtract_row(tab, a + i, width, gba, F[i], num[i])
            num[i] = c
            l_tab += lt
            i += cuda.gridsize(1)
        add_loads(loads, instrument, LOAD_TABLE, l_tab)

    @jit
    def naive_intersect(tab, width, a, m, col, part, label, F, gba, num, n, structure, meta, gl, keys,
                        offs, ci, ci_label, loads, instrument):
        """A thread per row: gba[F[i]:F[i]+num[i]] ∩= N(v'', l) by a merge walk, in place."""
        i = cuda.grid(1)
        l_struct = l_nbr = l_tab = 0
        while i < m:
            c, ls, ln, lt = naive_intersect_row(tab[(a + i) * width + col], part, label, gba, F[i],
                                                np.int64(num[i]), n, structure, meta, gl, keys, offs,
                                                ci, ci_label)
            num[i] = c
            l_struct += ls
            l_nbr += ln
            l_tab += lt
            i += cuda.gridsize(1)
        add_load_counts(loads, instrument, l_struct, l_nbr, 0, l_tab)

    return naive_subtract, naive_intersect


def _two_step_kernels(warps: int):
    """``output="two-step"``: the join-twice passes."""
    Q = MAX_QUERY_VERTICES
    R = 2 * MAX_LINK_EDGES        # (start, end) of every linking edge; a literal for shared shapes

    @jit
    def check_warp(write, tab, width, a, m, qinfo, e_lo, e_hi, bits, ubase, P, out, num, n, structure,
                   meta, gl, keys, offs, ci, ci_label, use_cache, loads, instrument):
        """Join-twice pass, a warp per row: count into num[i] (write 0) or write to out[P[i]:]."""
        rowc = cuda.shared.array((warps, Q), np.int32)
        cache = cuda.shared.array((warps, 32), np.int32)
        ranges = cuda.shared.array((warps, R), np.int64)
        w = cuda.threadIdx.x // 32
        l_struct = l_nbr = l_bits = 0
        i = cuda.blockIdx.x * warps + w
        while i < m:
            load_row(rowc, w, tab, a + i, width)
            base = P[i] if write != 0 else 0
            c, ls, ln, lb = check_row_warp(write, rowc, cache, ranges, w, width, qinfo, e_lo, e_hi, bits,
                                           ubase, out, base, n, structure, meta, gl, keys, offs, ci,
                                           ci_label, use_cache)
            if cuda.laneid == 0:
                num[i] = c
            l_struct += ls
            l_nbr += ln
            l_bits += lb
            i += cuda.gridDim.x * warps
        if cuda.laneid == 0:
            add_load_counts(loads, instrument, l_struct, l_nbr, l_bits, 0)

    @jit
    def check_thread(write, subtract, tab, width, a, m, qinfo, e_lo, e_hi, bits, ubase, P, out, num, n,
                     structure, meta, gl, keys, offs, ci, ci_label, loads, instrument):
        """A thread per row (naive set operations): :func:`check_row_thread` of every row, its
        count into num[i], its elements (when ``write``) to out[P[i]:]."""
        i = cuda.grid(1)
        l_struct = l_nbr = l_bits = 0
        while i < m:
            base = P[i] if write != 0 else 0
            c, ls, ln, lb = check_row_thread(write, subtract, tab, a + i, width, qinfo, e_lo, e_hi, bits, ubase,
                                             out, base, n, structure, meta, gl, keys, offs, ci, ci_label)
            num[i] = c
            l_struct += ls
            l_nbr += ln
            l_bits += lb
            i += cuda.gridsize(1)
        add_load_counts(loads, instrument, l_struct, l_nbr, l_bits, 0)

    return check_warp, check_thread


@functools.lru_cache(maxsize=None)
def make_kernels(warps: int) -> JoinKernels:
    """The join kernels for blocks of ``warps`` warps (shared-memory shapes are compile-time);
    each maps rows onto warps or threads and calls the per-row steps above."""
    row_counts, counts_scan = _offset_kernels(warps)
    first_edge = _set_kernels(warps)
    link, scan_link = _link_kernels(warps)
    return JoinKernels(row_counts, counts_scan, first_edge, link, scan_link,
                       *_naive_kernels(warps), *_two_step_kernels(warps))
