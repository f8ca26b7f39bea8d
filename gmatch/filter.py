"""Candidate filtering and the candidate graph for gMatch (paper Sec. 3.1 step 2 and Sec. 3.5).

One GPU pass per query computes the LDF + NLF filter (label, degree, per-label neighbour counts)
as a bitmap over query positions, ``cand_mask[v]`` bit d set iff data vertex v may match
position d (|V(Q)| <= 32: one uint32 per data vertex, allocated once in ``prepare``). CHOICE
where the paper is silent: a warp per data vertex, whose lanes split the neighbour list (a thread
per vertex left a hub's warp waiting on one thread's deg x |labels| loads). Over the
data graph the search kernels test that bit for every task.

Candidate graph (the authors' bitmap build, Sec. 3.5): :func:`build_candidate_graph` refines C(u)
with two passes (matching order, then reverse; v stays in C(u) iff every query neighbour u' of u
has a candidate adjacent to v) and, for every backward edge (j, d), stores one row per candidate
of j listing the ranks in C(d) of its neighbours there (sorted), plus a bitset over C(d) per row.
The search then carries ranks ("compact indices"): a row is found by arithmetic, an adjacency
test is one bit, and a data vertex is needed only for injectivity, restrictions and output.
CHOICES where the paper is silent: the default build runs on the device with count, scan and fill
passes as the authors do (:mod:`gmatch.candidate_graph`); this module's build
(``candidate_graph_build="host"``, a split query's parts, the device build's fallback and its
tests' oracle) runs on the host, compiled with Numba, from the GPU's LDF/NLF bits (one copy each
way, timed as the ``index`` phase). Both scan only the neighbours with
the wanted label (adjacency lists re-sorted by (label, id) once per data graph:
:func:`label_sorted_adjacency`); when the bitmaps would take more than the memory budget allows
(default at most 1 GiB), the search runs over the data graph instead (the authors' hash build is
not ported).

``qp`` is the packed per-query parameter block shared by every gMatch kernel (int32, shape
(QP_ROWS, 32), one host-to-device copy per query): see :func:`pack_query`.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np
from numba import njit

from common.engine.part import branch_outside_mask, check_branch_part, outside_mask
from common.gpu.cudasim import FULL_MASK
from common.gpu.runtime import cuda, jit, simulator_active
from common.graph.bitmasks import lowest_bit
from common.graph.model import Graph
from common.graph.sorted_ranges import label_range

from .order import MAX_QUERY_VERTICES, QueryPlan

# qp rows (int32, one column per order position)
QP_LABELS, QP_DEGREES, QP_BACKWARD, QP_RESTRICT, QP_QLABELS, QP_SIZES = 0, 1, 2, 3, 4, 5
QP_WORDS = 6        # bitmap words per candidate-graph row of position d
QP_SAME = 7         # earlier positions with d's label (injectivity checks)
QP_CBASE = 8        # where C(d) starts in the candidate graph's cand_set
QP_CSIZE = 9        # |C(d)|
QP_LEAFPAR = 10     # the neighbour (parent position) of counted leaf d (the lowest backward one)
QP_GLOW = 11        # lowest position the task group of d depends on
QP_NLF = 12         # rows 12..43: required neighbour count per (position, label slot)
QP_CCOUNT = QP_NLF + MAX_QUERY_VERTICES   # |C(d)| after LDF/NLF, added up by the filter kernel
QP_ROWS = QP_CCOUNT + 1
# qp[QP_SIZES]: [0] |V(Q)|, [1] distinct labels, [2] enumerated positions (|V(Q)| minus the
# counted positions), [3] lowest position a counted position depends on (a backward neighbour, a
# same-label or a restricting one), [4] unused, [5] 1 where the last position is counted
# (``count_last``; the search compiles its own kernel)
FILTER_THREADS = 32 if simulator_active() else 256
SWEEPS = 2                  # refinement passes (matching order, then reverse)


@njit(cache=True, nogil=True)
def _lowest(mask, default):
    """Lowest set bit of a uint32 mask as a position, ``default`` when none is set."""
    return lowest_bit(np.int64(mask)) if mask else default


@njit(cache=True, nogil=True)
def _pack(labels, degrees, backward, restrict, same, order, leaves, last, offsets, neighbors, vertex_labels):
    n = order.size
    qp = np.zeros((QP_ROWS, MAX_QUERY_VERTICES), np.int32)
    masks = qp.view(np.uint32)
    distinct = np.unique(labels)
    k = distinct.size
    for d in range(n):
        qp[QP_LABELS, d] = labels[d]
        qp[QP_DEGREES, d] = degrees[d]
        masks[QP_BACKWARD, d] = backward[d]
        masks[QP_RESTRICT, d] = restrict[d]
        masks[QP_SAME, d] = same[d]
        qp[QP_GLOW, d] = _lowest(backward[d] | restrict[d], d)
        u = order[d]
        for i in range(offsets[u], offsets[u + 1]):        # NLF: neighbours per label slot
            qp[QP_NLF + d, np.searchsorted(distinct, vertex_labels[neighbors[i]])] += 1
    qp[QP_QLABELS, :k] = distinct
    qp[QP_SIZES, 0] = n
    qp[QP_SIZES, 1] = k
    qp[QP_SIZES, 2] = n - leaves
    qp[QP_SIZES, 3] = n - leaves
    qp[QP_SIZES, 5] = 1 if last else 0
    for t in range(n - leaves, n):
        qp[QP_LEAFPAR, t] = _lowest(backward[t], -1)
        qp[QP_SIZES, 3] = min(qp[QP_SIZES, 3], _lowest(backward[t] | same[t] | restrict[t], t))
    return qp


def counted_positions(plan: QueryPlan, count_leaves: bool, count_last: bool) -> tuple[int, bool]:
    """(how many trailing positions of ``plan`` a count-only search counts, whether that is its
    last position): with ``count_leaves`` its countable leaves; else, with ``count_last``, the
    last position where it has one backward neighbour (|V(Q)| >= 3), counted as that
    neighbour's row length; else none. A last position with several backward neighbours is
    enumerated: counting it reads an intersection in one lane, which was slower than the warp's
    enumeration on every query measured (docs/decisions.md, "gMatch: count or enumerate the last
    position")."""
    n = int(plan.order.size)
    if count_leaves and plan.free_leaves:
        return int(plan.free_leaves), False
    if count_last and n >= 3 and int(plan.backward[n - 1]).bit_count() == 1:
        return 1, True
    return 0, False


def pack_query(plan: QueryPlan, query: Graph, count_leaves: bool = False, count_last: bool = False) -> np.ndarray:
    """The (QP_ROWS, 32) int32 parameter block: labels, degrees, backward, restriction and
    same-label masks, walk bounds, sizes, the NLF requirement of every position and the counted
    trailing positions (:func:`counted_positions`; the last one by one lane per partial match,
    :func:`gmatch.enumerate.search_functions` ``count_position``)."""
    leaves, last = counted_positions(plan, count_leaves, count_last)
    return _pack(plan.labels, plan.degrees, plan.backward, plan.restrict, plan.same_label, plan.order,
                 leaves, last, query.offsets, query.neighbors, query.labels)


def pack_candidate_graph(qp: np.ndarray, cg: CandidateGraph) -> None:
    """Add the candidate graph's per-position sizes to ``qp``."""
    qp[QP_WORDS] = cg.words
    qp[QP_CBASE] = cg.cand_base
    qp[QP_CSIZE, :cg.sizes.size] = cg.sizes


@jit
def filter_kernel(offsets, neighbors, labels, qps, cands):
    """cands[q, v] = bitmask of the query positions that data vertex v passes LDF + NLF for, for
    query q = blockIdx.y (one launch filters a batch). One warp per data vertex: lane d tests
    position d, the lanes split v's neighbour list 32 at a time and count its labels per query
    label slot with ballots, so a hub costs deg(v) / 32 steps, not deg(v) x |labels| loads of one
    thread that its warp waits for. Lane d adds its |C(d)| to qps[q, QP_CCOUNT, d] (zeroed by
    the host's upload)."""
    qp = qps[cuda.blockIdx.y]
    cand_mask = cands[cuda.blockIdx.y]
    n = qp[QP_SIZES, 0]
    k = qp[QP_SIZES, 1]
    lane = cuda.laneid
    warps = cuda.blockDim.x // 32
    v = cuda.blockIdx.x * warps + cuda.threadIdx.x // 32
    stride = cuda.gridDim.x * warps
    passed = 0                            # lane d: vertices that passed position d
    nv = cand_mask.size
    while v < nv:                         # v is the same for the whole warp
        lab = labels[v]
        lo = offsets[v]
        hi = offsets[v + 1]
        ok = lane < n and qp[QP_LABELS, lane] == lab and hi - lo >= qp[QP_DEGREES, lane]
        if cuda.ballot_sync(FULL_MASK, ok) != 0 and k > 1:
            count = 0                     # lane i < k: v's neighbours with query label slot i
            for base in range(lo, hi, 32):
                slot = -1
                if base + lane < hi:
                    nl = labels[neighbors[base + lane]]
                    for i in range(k):
                        if qp[QP_QLABELS, i] == nl:
                            slot = i
                for i in range(k):
                    found = cuda.popc(cuda.ballot_sync(FULL_MASK, slot == i))
                    if lane == i:
                        count += found
            for i in range(k):
                have = cuda.shfl_sync(FULL_MASK, count, i)
                if ok and have < qp[QP_NLF + lane, i]:
                    ok = False
        mask = cuda.ballot_sync(FULL_MASK, ok)
        if ok:
            passed += 1
        if lane == 0:
            cand_mask[v] = numba.uint32(mask)
        v += stride
    if lane < n and passed != 0:
        cuda.atomic.add(qp, (QP_CCOUNT, lane), passed)


@njit(cache=True, nogil=True)
def filter_host(offsets, neighbors, labels, qps, cands):
    """:func:`filter_kernel` on the host, with the same result (``cands`` and the QP_CCOUNT
    row of ``qps``, added to): the simulator's filter, whose warp-per-vertex ballots it runs
    thread by thread, took most of a query's time there."""
    for q in range(qps.shape[0]):
        qp = qps[q]
        n = qp[QP_SIZES, 0]
        k = qp[QP_SIZES, 1]
        passed = np.zeros(MAX_QUERY_VERTICES, np.int32)
        count = np.zeros(MAX_QUERY_VERTICES, np.int32)
        cands[q, labels.size:] = 0          # the one entry of an empty graph
        for v in range(labels.size):
            lab = labels[v]
            lo = offsets[v]
            hi = offsets[v + 1]
            mask = 0
            for d in range(n):
                if qp[QP_LABELS, d] == lab and hi - lo >= qp[QP_DEGREES, d]:
                    mask |= 1 << d
            if mask != 0 and k > 1:
                count[:k] = 0
                for e in range(lo, hi):
                    nl = labels[neighbors[e]]
                    for i in range(k):
                        if qp[QP_QLABELS, i] == nl:
                            count[i] += 1
                            break
                for d in range(n):
                    if (mask >> d) & 1:
                        for i in range(k):
                            if count[i] < qp[QP_NLF + d, i]:
                                mask &= ~(1 << d)
                                break
            for d in range(n):
                passed[d] += (mask >> d) & 1
            cands[q, v] = mask
        for d in range(n):
            qp[QP_CCOUNT, d] += passed[d]


@dataclass(frozen=True)
class CandidateGraph:
    """Host arrays of one query's candidate graph in compact indices (see the module docstring)."""

    cand_bits: np.ndarray       # uint32 per data vertex, refined: bit d = v in C(d)
    cand_set: np.ndarray        # int32, C(0), C(1), ... back to back, each sorted by vertex id
    cand_base: np.ndarray       # int32 (32,): where C(d) starts in cand_set
    sizes: np.ndarray           # int64 |C(d)| after refinement
    offsets: np.ndarray         # int32, every backward edge's rows back to back (+ 1 end entry)
    entries: np.ndarray         # int32 ranks in C(d) of the candidates adjacent to a row's vertex
    bitmap: np.ndarray          # uint32 bitsets over C(d), one per row, rows back to back
    edges: np.ndarray           # (2, 32, 32) int32: [0, d, j] first row, [1, d, j] first word
    words: np.ndarray           # int32 (32,) bitmap words per row of position d


def label_sorted_adjacency(data: Graph) -> tuple[np.ndarray, np.ndarray]:
    """Every adjacency list sorted by (label, id), and the label of every entry: the neighbours
    of v with label l are one contiguous range (found by two binary searches)."""
    offsets = np.asarray(data.offsets, dtype=np.int64)
    neighbors = np.asarray(data.neighbors, dtype=np.int32)
    labels = np.asarray(data.labels, dtype=np.int32)
    rows = np.repeat(np.arange(data.num_vertices, dtype=np.int64), np.diff(offsets))
    order = np.lexsort((neighbors, labels[neighbors], rows))
    sorted_neighbors = neighbors[order]
    return sorted_neighbors, labels[sorted_neighbors]


def adjacent_masks(backward, n: int) -> list[int]:
    """Per position d of a plan with backward masks ``backward``: its query neighbours, earlier
    (the backward mask) and later positions alike."""
    adjacent = [int(b) for b in backward[:n]]
    for d in range(n):
        for j in range(d):
            if (int(backward[d]) >> j) & 1:
                adjacent[j] |= 1 << d
    return adjacent


@numba.njit(cache=True, nogil=True)
def edge_layout(backward, sizes, words, n):
    """Where each backward edge (j, d) starts in the candidate graph (rows back to back, d
    ascending, then j): ``edges`` [0, d, j] its first row, [1, d, j] its first bitmap word; and
    the rows and words in all."""
    edges = np.zeros((2, 32, 32), np.int32)
    rows = 0
    total_words = 0
    for d in range(1, n):
        for j in range(d):
            if (backward[d] >> j) & 1:
                edges[0, d, j] = rows
                edges[1, d, j] = total_words
                rows += sizes[j]
                total_words += sizes[j] * words[d]
    return edges, rows, total_words


@numba.njit(cache=True, nogil=True)
def _not_built(bits, cand_set, base, sizes, edges, words):
    return (bits, cand_set, base, sizes, np.zeros(1, np.int32), np.zeros(1, np.int32),
            np.zeros(1, np.uint32), edges, words, False)


@numba.njit(cache=True, nogil=True)
def _refine_and_build(offsets, neighbors, entry_labels, qlabels, bits, n, adjacent, backward,
                      max_words, stop):
    """Two refinement sweeps over C(0..n-1), then the rows and bitmaps of every backward edge.
    Returns None-free arrays; ``ok`` is False when the bitmaps would exceed ``max_words`` or
    ``stop[0]`` was set (checked once per position and pass)."""
    nv = bits.size
    counts = np.zeros(n, np.int64)
    for v in range(nv):
        if bits[v] == 0:                  # most vertices are no position's candidate
            continue
        for d in range(n):
            if (bits[v] >> d) & 1:
                counts[d] += 1
    starts = np.zeros(n + 1, np.int64)
    for d in range(n):
        starts[d + 1] = starts[d] + counts[d]
    lists = np.empty(starts[n], np.int32)
    fill = starts[:n].copy()
    for v in range(nv):
        if bits[v] == 0:
            continue
        for d in range(n):
            if (bits[v] >> d) & 1:
                lists[fill[d]] = v
                fill[d] += 1
    for sweep in range(SWEEPS):
        for step in range(n):
            d = step if sweep == 0 else n - 1 - step
            if stop[0] != 0:
                break
            for i in range(starts[d], starts[d + 1]):
                v = lists[i]
                if not (bits[v] >> d) & 1:
                    continue
                for j in range(n):
                    if not (adjacent[d] >> j) & 1:
                        continue
                    hit = False
                    lo, hi = label_range(entry_labels, offsets[v], offsets[v + 1], qlabels[j])
                    for e in range(lo, hi):
                        if (bits[neighbors[e]] >> j) & 1:
                            hit = True
                            break
                    if not hit:
                        bits[v] &= ~np.uint32(1 << d)
                        break
    sizes = np.zeros(n, np.int64)
    base = np.zeros(32, np.int32)
    cand_set = np.empty(starts[n], np.int32)
    k = 0
    for d in range(n):
        base[d] = k
        for i in range(starts[d], starts[d + 1]):
            if (bits[lists[i]] >> d) & 1:
                cand_set[k] = lists[i]
                k += 1
        sizes[d] = k - base[d]
    cand_set = cand_set[:k]
    words = np.zeros(32, np.int32)
    for d in range(n):
        words[d] = (sizes[d] + 31) // 32
    edges, rows, total_words = edge_layout(backward, sizes, words, n)
    if total_words > max_words or stop[0] != 0:
        return _not_built(bits, cand_set, base, sizes, edges, words)
    # one pass writes the rows, growing ``entries`` by doubling (a counting pass would read
    # every row's adjacency twice)
    row_off = np.zeros(rows + 1, np.int32)
    entries = np.empty(max(rows, 16), np.int32)
    bitmap = np.zeros(max(total_words, 1), np.uint32)
    rank = np.full(nv, -1, np.int32)
    r = 0
    pos = 0
    for d in range(1, n):
        if stop[0] != 0 or pos >= 2**31 - 1:
            break
        for i in range(sizes[d]):
            rank[cand_set[base[d] + i]] = i
        for j in range(d):
            if not (backward[d] >> j) & 1:
                continue
            w0 = edges[1, d, j]
            for i in range(sizes[j]):
                v = cand_set[base[j] + i]
                row_off[r] = pos
                lo, hi = label_range(entry_labels, offsets[v], offsets[v + 1], qlabels[d])
                if pos + (hi - lo) > entries.size:
                    grown = np.empty(max(2 * entries.size, pos + (hi - lo)), np.int32)
                    grown[:pos] = entries[:pos]
                    entries = grown
                for e in range(lo, hi):
                    x = rank[neighbors[e]]
                    if x >= 0 and (bits[neighbors[e]] >> d) & 1:
                        entries[pos] = x
                        pos += 1
                        bitmap[w0 + i * words[d] + (x >> 5)] |= np.uint32(1) << np.uint32(x & 31)
                r += 1
        for i in range(sizes[d]):
            rank[cand_set[base[d] + i]] = -1
    if stop[0] != 0 or pos >= 2**31 - 1:
        return _not_built(bits, cand_set, base, sizes, edges, words)
    row_off[r] = pos
    entries = entries[:max(pos, 1)].copy()
    return bits, cand_set, base, sizes, row_off, entries, bitmap, edges, words, True


def build_candidate_graph(data: Graph, cand_bits: np.ndarray, plan: QueryPlan,
                          max_bitmap_bytes: int = 1 << 30, by_label=None, stop=None) -> CandidateGraph | None:
    """Refine the LDF/NLF candidate sets and build the per-backward-edge rows and bitmaps in
    compact indices; None when the bitmaps would take more than ``max_bitmap_bytes``, or once
    ``stop`` (a one-element int64 array another thread may set) is non-zero.
    ``by_label``: :func:`label_sorted_adjacency` of ``data`` (computed here when not given)."""
    neighbors, entry_labels = label_sorted_adjacency(data) if by_label is None else by_label
    n = plan.size
    backward = np.asarray(plan.backward, dtype=np.int64)
    adjacent = np.array(adjacent_masks(backward, n), np.int64)
    out = _refine_and_build(np.asarray(data.offsets, dtype=np.int64), neighbors, entry_labels,
                            np.asarray(plan.labels, dtype=np.int32),
                            np.array(cand_bits, dtype=np.uint32), n, adjacent, backward,
                            max_bitmap_bytes // 4, np.zeros(1, np.int64) if stop is None else stop)
    if not out[-1]:
        return None
    return CandidateGraph(*out[:-1])


def part_bits(bits: np.ndarray, root_range, branch_part, branch_at) -> np.ndarray:
    """A copy of the LDF/NLF bits ``bits`` restricted to one part of a split query: position 0
    only inside ``root_range`` = [lo, hi), and with ``branch_part`` = ((j, m), ...) position
    ``branch_at[i]`` only where ``v % m == j`` for level i (what the engine's filter does on the
    device)."""
    out = np.array(bits, dtype=np.uint32)
    if root_range is not None:
        out[outside_mask(out.size, root_range)] &= ~np.uint32(1)
    for at, part in zip(branch_at, check_branch_part(branch_part) or ()):
        out[branch_outside_mask(out.size, part)] &= ~np.uint32(1 << at)
    return out


@functools.lru_cache(maxsize=1)
def _builders() -> ThreadPoolExecutor:
    """The host threads that build the parts' candidate graphs (the build releases the GIL): half
    the cores, at most 8, leaving cores to the thread that watches the searches they run beside;
    a forked child makes its own (it inherits the pool but not its threads)."""
    return ThreadPoolExecutor(max_workers=max(1, min(8, (os.cpu_count() or 2) // 2)),
                              thread_name_prefix="gmatch-parts")


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_builders.cache_clear)


class PartGraphs:
    """The candidate graphs of a split query's parts, ``tasks`` = [(root_range, branch_part),
    ...] as :func:`common.graph.roots.split_tasks` plans them, built on host threads from the
    whole query's filter bits, in the parts' order, from its construction on (the candidate
    graph is a host build: part i + 1's is built while part i is searched, so only the first
    part waits for its own).

    :meth:`graph` waits for part i's (None: its bitmaps would not fit); :meth:`stop` abandons
    the builds still running or queued once no part will be searched."""

    def __init__(self, data: Graph, bits: np.ndarray, plan: QueryPlan, tasks, branch_at,
                 max_bitmap_bytes: int, by_label):
        self._stop = np.zeros(1, np.int64)

        def build(root_range, branch_part):
            return build_candidate_graph(data, part_bits(bits, root_range, branch_part, branch_at), plan,
                                         max_bitmap_bytes=max_bitmap_bytes, by_label=by_label, stop=self._stop)

        self._futures = [_builders().submit(build, root_range, branch_part) for root_range, branch_part in tasks]

    def graph(self, i: int, timeout_s: float | None) -> CandidateGraph | None:
        """Part i's candidate graph; raises TimeoutError when it is not built within ``timeout_s``."""
        return self._futures[i].result(timeout=None if timeout_s is None else max(0.0, timeout_s))

    def stop(self) -> None:
        self._stop[0] = 1
        for future in self._futures:
            future.cancel()
