"""SGSI, GSI's out-of-core pipeline (Zeng et al., TKDE 2022 §6-§7), registry name ``"sgsi"``: the
same filter and join order as :class:`gsi.engine.GSI`, and its Prealloc-Combine join over
streamed segments or a two-pass join over the graph read in place, for data graphs larger than
the device (or than ``device_memory_limit``).

    engine = SGSI(device_memory_limit=64 << 20).prepare(data)    # SGSI(load_balance="histogram"): SGSI+
    result = engine.match(query)

When the graph's resident state fits half the limit, every partition is one resident segment and
the engine runs in-core GSI under the limit (``stats["mode"]`` ``"in-core"``). Otherwise
:meth:`SGSI.prepare` cuts the signature table into vertex segments (§6.1) and each edge-label
PCSR partition into segments (§6.2). Per query the filter (§3) fills the candidate bitsets, GSI's
Algorithm 1 orders the query, and the join (§6.3) runs depth first over device-resident tables
in chunks that fit two arenas (a words arena for tables and buffers, a per-row arena); a new
table that outgrows its room is written in parts, each joined on before the next.

With ``zero_copy`` (the default) the graph is mapped from host memory and read in place: the
filter reads the signature table in one launch, and each chunk counts every row's survivors,
scans the counts and writes the survivors as the new rows in a second pass (no GBA, so parts
are sized by exact counts); a count-only query's last iteration only counts. With
``zero_copy=False`` (the paper's §6) the segments stream through two double-buffered slots:
per chunk one launch bounds each row's GBA and marks the segments its vertices reach, then
Algorithm 4 (partitioned first edge) and Algorithm 5 (partitioned intersection) stream only
those segments, one launch per segment, and each new table is grouped by the segment of the
next step's first linking vertex (so a chunk reaches few of them). SGSI+ chooses W1 and W3 per
chunk with §7's cost model.

``stats``: ``mode``, ``partitions``, ``signature_segments``, ``comm_s`` and ``comp_s`` (with
``instrument``: summed device time of copies and of kernels, which overlap), ``bytes_h2d``,
``bytes_d2h``, ``bytes_streamed`` (graph segments copied), ``h2d_gbps`` (those bytes over their
copies' device time), ``segments_streamed``, ``chunks``, ``inplace_chunks`` (chunks joined in
place), ``bytes_inplace`` (the list bytes the in-place kernels read from mapped memory, a skip
through a list counted at its cheapest) and ``inplace_gbps`` (those bytes over the kernels'
device time, with ``instrument``), ``gba_splits``, ``split_outputs``, ``rows_per_iteration``,
``counted_rows`` (rows of the last table whose extensions were counted, not written).
The choices where the paper is silent are in docs/decisions.md ("SGSI").
"""

from __future__ import annotations

import contextlib
import functools
import os
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from common.engine.base import Engine
from common.engine.deadline import Deadline, Stop
from common.engine.result import MatchResult, Status
from common.errors import DeviceOutOfMemory
from common.gpu import launch as _launch
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.copies import download, fill, mapped, upload
from common.gpu.cudasim import FULL_MASK
from common.gpu.device_functions import lower_bound, warp_max, warp_sum
from common.gpu.grid import grid_blocks
from common.gpu.pool import BufferPool
from common.gpu.runtime import cuda, jit, simulator_active
from common.gpu.scan import exclusive_scan
from common.gpu.timers import PhaseTimer
from common.graph.model import Graph

from . import balance
from .engine import DEFAULT_BLOCK_THREADS, DEFAULT_MAX_BLOCKS, GSI
from .filter import SIG_WORDS, filter_kernel, signature_table
from .join import (
    EDGE_FIELDS,
    MAX_QUERY_VERTICES,
    count_row_in_place,
    link_row,
    load_row,
    merge_in_place_galloping,
    warp_first_edge,
    write_row_in_place,
)
from .layout import QI_EDGES, QI_IN, QI_LAB, QI_OUT, QI_SIG, query_info
from .order import SCORES, join_plan
from .pcsr import GROUP_WORDS, META, PCSR, _build_pcsr_partition, partition_lists, warp_neighbor_range

_SIM = simulator_active()
SIG_SEGMENT_WORDS = SIG_WORDS + 3          # signature words, label, out-degree, in-degree per vertex
SLOT_SHARE = 6                             # each of the two slots gets 1/6 of the budget
#: In core when the graph's resident state takes at most this share of device_memory_limit.
IN_CORE_SHARE = 0.5
#: Exact per-partition degrees (P x n words) when they take at most 1/DEGREE_SHARE of the budget.
DEGREE_SHARE = 4
ROW_SHARE = 0.25                           # of the working memory: the int64 per-row arena
TABLE_SHARE = 0.5                          # of the room above a new table: what it may take (not last)
ROW_ARRAYS = 6                             # per-row int64 arrays of a chunk: counts, F, num, P, Fx, numx
IN_PLACE_ARRAYS = 2                        # those of a chunk joined in place: num, P
_MIN_WORK_BYTES = 1 << 10
# Without device_memory_limit the join's working memory is capped (it is allocated at prepare).
DEFAULT_WORK_BYTES = (16 << 20) if _SIM else (4 << 30)
_VIEWS = 512                               # cached arena views (a view costs a launch's host time)
#: Rows of the last table per launch of the counted last step (the deadline is checked between).
COUNT_ROWS = 1 << 18
#: The in-place tallies (int64): the counted last step's matches and list words, then the
#: chunks' (count and write passes) matches (unused) and list words.
TALLY_FOUND, TALLY_CHUNKS, TALLIES = 0, 2, 4
#: The per-chunk demand slots after the reached-segment marks: the rows' longest first-edge
#: bound, and the words of the chunk's GBA.
LONGEST = 0
GBA_WORDS = 1
DEMAND_SLOTS = 2


@dataclass
class Segment:
    """One piece of the data graph that streams through a slot: a PCSR segment of partition
    ``partition`` over source vertices ``lo..hi`` (``partition`` -1: a signature segment of
    vertices ``lo..hi``). ``host`` holds its words (pinned); ``keys`` its PCSR groups."""

    sid: int
    partition: int
    lo: int
    hi: int
    keys: int
    host: np.ndarray
    max_list: int = 0
    flat: int = -1                 # index among all PCSR segments (partition order)

    @property
    def words(self) -> int:
        return int(self.host.size)


@njit(cache=True)
def _cut_partition(degrees, cap_words):
    """Greedy footprint-balanced cut of a partition's lists (by source vertex, in order) into
    segments of at most ``cap_words`` words (32 per source vertex + 1 per edge). Returns pieces
    (segment, key index, first entry of the list, length)."""
    words = GROUP_WORDS * degrees.size + degrees.sum()
    pieces = np.empty((degrees.size + words // (cap_words - GROUP_WORDS) + 2, 4), np.int64)
    count = 0
    seg = 0
    used = 0
    for k in range(degrees.size):
        done = 0
        while done < degrees[k]:
            room = cap_words - used - GROUP_WORDS
            if room <= 0:
                seg += 1
                used = 0
                continue
            take = min(degrees[k] - done, room)
            pieces[count, 0] = seg
            pieces[count, 1] = k
            pieces[count, 2] = done
            pieces[count, 3] = take
            count += 1
            used += GROUP_WORDS + take
            done += take
    return pieces[:count]


def _signature_columns(data: Graph):
    """Per vertex: the signature words (row-major), label, out-degree and in-degree."""
    n = data.num_vertices
    out_deg = np.asarray(data.degrees, np.int32)
    in_deg = np.diff(data.in_csr[0]).astype(np.int32) if data.directed else out_deg
    return signature_table(data, column_first=False).reshape(n, SIG_WORDS), data.labels, out_deg, in_deg


def _signature_words(columns, v0: int, cnt: int) -> np.ndarray:
    """A signature segment's words, vertices v0..v0+cnt-1: the signature words column-first, then
    the labels, out-degrees and in-degrees (what the filter kernel reads)."""
    sig, labels, out_deg, in_deg = columns
    host = np.empty(cnt * SIG_SEGMENT_WORDS, np.int32)
    host[:SIG_WORDS * cnt] = sig[v0:v0 + cnt].T.reshape(-1)
    host[SIG_WORDS * cnt:(SIG_WORDS + 1) * cnt] = labels[v0:v0 + cnt]
    host[(SIG_WORDS + 1) * cnt:(SIG_WORDS + 2) * cnt] = out_deg[v0:v0 + cnt]
    host[(SIG_WORDS + 2) * cnt:] = in_deg[v0:v0 + cnt]
    return host


class InPlace(NamedTuple):
    """The data graph in mapped host memory, read by kernels in place (``zero_copy``): every
    edge-label partition's lists concatenated in vertex order (``lists``), each partition's list
    offsets (partition p, vertex v: lists[bases[p] + offsets[p * stride + v] : ... + v + 1]],
    stride n + 1) resident on the device when they fit ``max_bytes``, else mapped too, the
    signature table as one segment, and the host buffers behind them."""

    lists: object                  # device view of the mapped column index
    offsets: object                # int32 [P * stride]: device-resident or mapped
    bases: object                  # device int64 [P]: where each partition's lists start
    stride: int                    # n + 1
    resident_offsets: bool
    signatures: object             # device view of the whole signature segment
    whole: Segment                 # that segment (vertices 0..n-1)
    host: tuple                    # the mapped host buffers (kept alive)

    @classmethod
    def build(cls, data: Graph, lists, budget, max_bytes: int) -> "InPlace":
        n = data.num_vertices
        offsets = np.zeros(max(1, len(lists) * (n + 1)), np.int32)
        bases = np.zeros(max(1, len(lists)), np.int64)
        for p, (rows, nbrs) in enumerate(lists):
            if nbrs.size >= 2 ** 31:
                raise ValueError(f"edge-label partition {p} has {nbrs.size} entries: in-place offsets are int32")
            offsets[p * (n + 1):(p + 1) * (n + 1)] = np.searchsorted(rows, np.arange(n + 1))
            bases[p + 1:] += nbrs.size
        h_lists, d_lists = mapped(np.concatenate([nbrs for _, nbrs in lists] or [np.zeros(1, np.int32)]))
        resident = offsets.nbytes <= max_bytes
        h_off, d_off = (None, budget.to_device(offsets, what="in-place list offsets")) if resident \
            else mapped(offsets)
        h_sig, signatures = mapped(_signature_words(_signature_columns(data), 0, n))
        return cls(d_lists, d_off, budget.to_device(bases, what="in-place list offsets"), n + 1, resident,
                   signatures, Segment(-1, -1, 0, n - 1, 0, h_sig), (h_lists, h_off, h_sig))


def _pin(segments: list[Segment]) -> None:
    """Move every segment's words into one page-locked host buffer (asynchronous copies need
    pinned memory; one allocation, however many segments), each segment a view of it."""
    total = sum(seg.words for seg in segments)
    buffer = np.empty(total, np.int32) if _SIM else cuda.pinned_array(max(total, 1), np.int32)
    pos = 0
    for seg in segments:
        buffer[pos:pos + seg.words] = seg.host
        seg.host = buffer[pos:pos + seg.words]
        pos += seg.words




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


def _copy_async(slot, host: np.ndarray, stream) -> None:
    """host -> slot[:host.size] on ``stream``: the driver's asynchronous copy from pinned memory
    (numba's copy_to_device spends more host time per call: docs/decisions.md), numba's under
    the simulator."""
    direct = _launch._NUMBA
    if direct is not None:
        from cuda.bindings import driver

        if driver.cuMemcpyHtoDAsync(_launch.device_pointer(slot), host.ctypes.data, host.nbytes,
                                    _launch.stream_handle(stream))[0] == 0:
            return
    slot[:host.size].copy_to_device(host, stream=stream)


def _record(event, stream) -> None:
    """event.record(stream) through the driver (cheaper on the host than numba's call)."""
    direct = _launch._NUMBA
    if direct is None or direct.event_record(event.driver_handle, _launch.stream_handle(stream))[0] != 0:
        event.record(stream)


def _wait(event, stream) -> None:
    """stream waits for event, through the driver when it can."""
    direct = _launch._NUMBA
    if direct is not None:
        from cuda.bindings import driver

        if driver.cuStreamWaitEvent(_launch.stream_handle(stream), event.driver_handle, 0)[0] == 0:
            return
    event.wait(stream)


def _event():
    event = cuda.event(timing=False)
    event.driver_handle = int(event.handle)
    return event


class _Streams:
    """Two segment slots fed on a copy stream while kernels run on a compute stream (events
    order a slot's copy after the kernels that last read it and before the kernels that read
    it next). The join places the slots in its words arena for each chunk that streams
    (:meth:`place`); within a placement a slot still holding the segment asked for is not
    copied again."""

    def __init__(self, slot_words: int):
        self.slot_words = slot_words
        self.slots = [None, None]
        self.holds = [-1, -1]
        if _SIM:
            self.copy = self.compute = 0
            self.ready = self.free = [None, None]
        else:
            self.copy, self.compute = cuda.stream(), cuda.stream()
            self.ready = [_event() for _ in range(2)]
            self.free = [_event() for _ in range(2)]

    def place(self, view, arena, start: int) -> None:
        """The slots at arena[start : start + 2 * slot_words] (``view`` makes an arena view);
        what they held before is forgotten (the join may have written there since)."""
        S = self.slot_words
        self.slots = [view(arena, start, start + S), view(arena, start + S, start + 2 * S)]
        self.holds = [-1, -1]

    def _load(self, seg: Segment, avoid: int, clock) -> int:
        for s in range(2):
            if self.holds[s] == seg.sid:
                return s
        s = 1 - avoid if avoid >= 0 else (0 if self.holds[0] == -1 or self.holds[1] != -1 else 1)
        if not _SIM:
            _wait(self.free[s], self.copy)
        with clock.comm_copy.phase("h2d"):
            _copy_async(self.slots[s], seg.host, self.copy)
        if not _SIM:
            _record(self.ready[s], self.copy)
        self.holds[s] = seg.sid
        clock.bytes_h2d += seg.words * 4
        clock.bytes_streamed += seg.words * 4
        clock.streamed += 1
        return s

    def run(self, segments: list[Segment], launch, clock) -> None:
        """Call ``launch(slot array, segment, stream)`` for each segment in order, prefetching
        the next segment into the other slot while the current one's kernels run."""
        if not segments:
            return
        cur = self._load(segments[0], -1, clock)
        for j, seg in enumerate(segments):
            nxt = self._load(segments[j + 1], cur, clock) if j + 1 < len(segments) else -1
            if not _SIM:
                _wait(self.ready[cur], self.compute)
            with clock.comp_stream.phase("kernels"):
                launch(self.slots[cur], seg, self.compute)
            if not _SIM:
                _record(self.free[cur], self.compute)
            cur = nxt


class _Untimed:
    """A :class:`PhaseTimer` that times nothing (SGSI without ``instrument``)."""

    seconds: dict = {}

    def phase(self, name: str):
        return _NO_PHASE


_NO_PHASE = contextlib.nullcontext()


class _Clock:
    """Device time of copies and kernels (Table 7's communication and computation; with
    ``timed``, two events around every copy and launch) and bytes."""

    def __init__(self, streams: _Streams, timed: bool):
        make = PhaseTimer if timed else (lambda stream: _Untimed())
        self.comm_copy = make(streams.copy)
        self.comm_default = make(0)
        self.comp_stream = make(streams.compute)
        self.comp_default = make(0)
        self.bytes_h2d = self.bytes_d2h = self.streamed = self.bytes_streamed = 0

    def totals(self) -> tuple[float, float, float]:
        """(communication, computation, the segment copies' share of communication) seconds."""
        stream_s = sum(self.comm_copy.seconds.values())
        comm = stream_s + sum(self.comm_default.seconds.values())
        comp = sum(self.comp_stream.seconds.values()) + sum(self.comp_default.seconds.values())
        return comm, comp, stream_s


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def degree_bounds(data: Graph, lists, directions: int, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The per-row bound F of Algorithm 3 out of core (§6.3 leaves it open): (``deg``,
    ``part_max``), a row's bound in partition p being ``min(deg[(p % rows) * n + v], part_max[p])``
    with ``rows = deg.size // n``. Exact, ``deg`` holds |N(v, p)| per partition (P x n words) when
    that takes at most ``max_bytes``; otherwise it holds v's degree per direction (every label),
    which bounds each label's list, and ``part_max`` the longest list of each partition."""
    n = data.num_vertices
    part_max = np.zeros(max(1, len(lists)), np.int32)
    for p, (rows, _) in enumerate(lists):
        if rows.size:
            cuts = np.flatnonzero(np.diff(rows)) + 1
            part_max[p] = np.diff(np.concatenate(([0], cuts, [rows.size]))).max()
    if 4 * len(lists) * n <= max_bytes:
        deg = np.zeros(max(1, len(lists) * n), np.int32)
        for p, (rows, _) in enumerate(lists):
            if rows.size:
                keys, cnt = np.unique(rows, return_counts=True)
                deg[p * n + keys] = cnt
        return deg, part_max
    out_deg = np.asarray(data.degrees, np.int32)
    if directions == 1:
        return np.ascontiguousarray(out_deg), part_max
    return np.concatenate([out_deg, np.diff(data.in_csr[0]).astype(np.int32)]), part_max


def resident_bytes(data: Graph, lists=None) -> int:
    """Device bytes of the data graph held whole (GSI's layout): signature table, labels and
    degrees (SIG_SEGMENT_WORDS per vertex), every PCSR partition (a 128-byte group per source
    vertex, 4 bytes per entry) and 64 candidate bitsets."""
    words = data.num_vertices * SIG_SEGMENT_WORDS + MAX_QUERY_VERTICES * ((data.num_vertices + 31) // 32)
    for rows, _ in partition_lists(data) if lists is None else lists:
        words += rows.size + GROUP_WORDS * np.unique(rows).size
    return 4 * words


class SGSI(Engine):
    """SGSI (Zeng et al., TKDE 2022 §6-§7): GSI for graphs larger than the device memory.

    The signature filter, PCSR and Prealloc-Combine are fixed: they are what SGSI partitions.

    Parameters
    ----------
    load_balance : {True, "histogram", False}
        True: SGSI with GSI's thresholds ``w1``/``w3``; "histogram": SGSI+ (§7's cost model).
        In core and in the streamed join (``zero_copy=False``); the in-place join gives each
        row a warp.
    duplicate_removal : bool
        Share N(v, l) reads among a block's rows, as in :class:`gsi.engine.GSI` (in core and
        streamed).
    write_cache : bool
        The per-warp write cache, as in :class:`gsi.engine.GSI` (in core and streamed).
    order_score : {"paper", "code"}
        Join-order score, as in :class:`gsi.engine.GSI`.
    w1, w3 : int
        Load-balance thresholds of SGSI's four layers (GSI §VI-A).
    block_threads, max_blocks : int
        Launch shape of the join kernels.
    host_memory_limit : int or None
        Cap of the embeddings collected on the host in bytes (None: half the machine's memory);
        past it the query ends with status ``oom``.
    out_of_core : bool or None
        None: in core when the graph's resident state fits half of ``device_memory_limit``,
        else out of core; True/False force the mode.
    work_bytes : int or None
        Cap of the out-of-core join's working memory (its two arenas; None: what the limit leaves).
    slot_share : int
        Each of the two segment slots gets 1/slot_share of the budget (bigger slots: fewer
        segments and launches, less room for the join).
    zero_copy : bool
        Out of core, map the graph into the device's address space (host memory, no device
        memory) and read it in place: the filter reads the signature table, every join iteration
        counts each row's survivors and then writes them (no GBA), and a count-only query's last
        iteration only counts (docs/decisions.md). False: segments streamed, the paper's §6.
    instrument : bool
        Out of core, time copies and kernels apart (``stats`` ``comm_s``, ``comp_s``,
        ``h2d_gbps``: the paper's Table 7) with two CUDA events around each; without it they are 0.
    device_memory_limit : int or None
        The device bytes the engine may use (None: the device's free memory; out of core, 90% of
        it is planned for).
    """

    name = "sgsi"
    limitations = {"homomorphic": "SGSI joins as GSI does (SGSI §4)",
                   "disconnected": "SGSI joins along query edges from one start vertex (SGSI §4)"}
    contract_notes = {"simulator_peak": "as GSI's in the simulator: a query's first run peaks higher than its "
                                        "later runs"}
    variant_of = "gsi"
    kernel_packages = ("gsi", "common")
    max_query_vertices = MAX_QUERY_VERTICES

    def __init__(self, *, load_balance: bool | str = True, duplicate_removal: bool = True,
                 write_cache: bool = True, order_score: str = "paper", w1: int = balance.W1,
                 w3: int = balance.W3, block_threads: int = DEFAULT_BLOCK_THREADS,
                 max_blocks: int = DEFAULT_MAX_BLOCKS, host_memory_limit: int | None = None,
                 out_of_core: bool | None = None, work_bytes: int | None = None, slot_share: int = SLOT_SHARE,
                 zero_copy: bool = True, instrument: bool = False, device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if load_balance not in (False, True, "histogram") or not isinstance(load_balance, (bool, str)):
            raise ValueError(f"unknown load_balance {load_balance!r}; choose False, True or 'histogram'")
        if order_score not in SCORES:
            raise ValueError(f"unknown order_score {order_score!r}; choose one of {SCORES}")
        if block_threads % 32 or not 32 <= block_threads <= 1024:
            raise ValueError(f"block_threads must be a multiple of 32 in 32..1024, got {block_threads}")
        if not 32 < w3 < w1:
            raise ValueError(f"load-balance thresholds need 32 < w3 < w1, got w3={w3}, w1={w1}")
        if out_of_core not in (None, True, False):
            raise ValueError(f"out_of_core must be None, True or False, got {out_of_core!r}")
        self.load_balance = load_balance
        self.duplicate_removal = bool(duplicate_removal)
        self.write_cache = bool(write_cache)
        self.order_score = order_score
        self.w1, self.w3 = int(w1), int(w3)
        self.block_threads, self.max_blocks = int(block_threads), int(max_blocks)
        self.warps = self.block_threads // 32
        self.host_memory_limit = host_memory_limit if host_memory_limit is not None else _host_memory() // 2
        self.out_of_core = out_of_core
        if work_bytes is not None and int(work_bytes) < _MIN_WORK_BYTES:
            raise ValueError(f"work_bytes must be at least {_MIN_WORK_BYTES}, got {work_bytes}")
        self.work_bytes = None if work_bytes is None else int(work_bytes)
        if int(slot_share) < 3:
            raise ValueError(f"slot_share must be at least 3 (two slots and the join), got {slot_share}")
        self.slot_share = int(slot_share)
        self.zero_copy = bool(zero_copy)
        self.instrument = bool(instrument)
        self.inplace: InPlace | None = None
        self.incore: GSI | None = None

    # ------------------------------------------------------------------ partitioning
    @staticmethod
    def budget_for(device_memory_limit: int | None) -> int:
        """The device bytes SGSI plans with out of core: the limit, or 90% of the free device memory."""
        if device_memory_limit is not None:
            return int(device_memory_limit)
        if _SIM:
            return 1 << 28
        free, _total = cuda.current_context().get_memory_info()
        return int(free * 0.9)

    @staticmethod
    def plan_segments(data: Graph, slot_words: int, lists=None) -> tuple[list[Segment], list[list[Segment]]]:
        """Cut the signature table and every PCSR partition into segments of at most
        ``slot_words`` int32 words: (signature segments, PCSR segments per partition)."""
        n = data.num_vertices
        per_seg = (slot_words // SIG_SEGMENT_WORDS) // 32 * 32
        if per_seg < 32 or slot_words <= GROUP_WORDS:
            raise DeviceOutOfMemory(32 * SIG_SEGMENT_WORDS * 4, 0, slot_words * 4,
                                    "an SGSI segment slot of 32 signature rows (raise device_memory_limit)")
        columns = _signature_columns(data)
        sid = 0
        sig_segments = []
        for v0 in range(0, max(n, 1), per_seg):
            cnt = min(per_seg, n - v0)
            sig_segments.append(Segment(sid, -1, v0, v0 + cnt - 1, 0, _signature_words(columns, v0, cnt)))
            sid += 1
        pcsr_segments = []
        for p, (rows, nbrs) in enumerate(partition_lists(data) if lists is None else lists):
            keys, starts, degrees = np.unique(rows, return_index=True, return_counts=True)
            segs = []
            pieces = _cut_partition(degrees.astype(np.int64), slot_words) if keys.size else np.zeros((0, 4), np.int64)
            bounds = np.flatnonzero(np.diff(pieces[:, 0])) + 1
            for group in np.split(pieces, bounds) if pieces.size else []:
                k = group[:, 1]
                gl, ci = _build_pcsr_partition(keys[k].astype(np.int32), (starts[k] + group[:, 2]).astype(np.int64),
                                               group[:, 3].astype(np.int64), nbrs)
                ci = ci[:int(group[:, 3].sum())]          # (sized for the whole partition)
                host = np.concatenate([gl, ci])
                segs.append(Segment(sid, p, int(keys[k[0]]), int(keys[k[-1]]), int(k.size), host,
                                    int(group[:, 3].max())))
                sid += 1
            pcsr_segments.append(segs)
        _pin(sig_segments + [seg for segs in pcsr_segments for seg in segs])
        return sig_segments, pcsr_segments

    @classmethod
    def slot_words_for(cls, data: Graph, device_memory_limit: int | None, lists=None,
                       slot_share: int = SLOT_SHARE) -> int:
        """int32 words per segment slot: the largest piece (signature table or partition) if it
        fits in 1/8 of the budget, else 1/8 of the budget."""
        # a slot holds whole warps of signature rows: 32 at least, even for a tiny graph
        need = max((data.num_vertices + 31) // 32 * 32 * SIG_SEGMENT_WORDS, GROUP_WORDS + 1)
        for rows, _ in partition_lists(data) if lists is None else lists:
            need = max(need, rows.size + GROUP_WORDS * np.unique(rows).size)
        return int(min(need, cls.budget_for(device_memory_limit) // slot_share // 4))

    def _prepare(self, data: Graph) -> None:
        n = data.num_vertices
        self.n, self.nwords = n, (n + 31) // 32
        self.directions = 2 if data.directed else 1
        lists = partition_lists(data)
        self.incore = self.inplace = None
        if self.out_of_core is not True:
            need = resident_bytes(data, lists)
            limit = self.device_memory_limit
            if self.out_of_core is False or (limit is None and need <= self.budget_for(None) * IN_CORE_SHARE) \
                    or (limit is not None and need <= limit * IN_CORE_SHARE):
                try:
                    self._prepare_in_core(data, lists)
                    return
                except DeviceOutOfMemory:
                    if self.out_of_core is False:
                        raise
                    self.incore = None              # the device refused: stream instead
        self._prepare_out_of_core(data, lists)

    def _prepare_in_core(self, data: Graph, lists) -> None:
        """The whole graph resident: one segment per partition, never streamed, so SGSI's join
        is GSI's; run in-core GSI with the same options under the same limit."""
        self.incore = GSI(load_balance=self.load_balance, duplicate_removal=self.duplicate_removal,
                          write_cache=self.write_cache, order_score=self.order_score, w1=self.w1, w3=self.w3,
                          block_threads=self.block_threads, max_blocks=self.max_blocks,
                          device_memory_limit=self.device_memory_limit).prepare(data)
        if self.incore.prepare_error:
            raise DeviceOutOfMemory(resident_bytes(data, lists), 0, self.device_memory_limit or 0,
                                    f"SGSI in core ({self.incore.prepare_error})")
        self.budget = self.incore.budget
        self.sig_segments = []
        self.segments = [[] for _ in lists]
        self._partition_count = sum(1 for rows, _ in lists if rows.size)

    def _prepare_out_of_core(self, data: Graph, lists) -> None:
        total = self.budget_for(self.device_memory_limit)
        self.budget = budget = DeviceMemoryBudget(total)
        n = self.n
        slot_words = self.slot_words_for(data, self.device_memory_limit, lists, self.slot_share)
        try:
            self.sig_segments, self.segments = self.plan_segments(data, slot_words, lists)
        except DeviceOutOfMemory as exc:       # name the budget, not the slot cut from it
            raise DeviceOutOfMemory(exc.requested * self.slot_share, 0, total,
                                    f"SGSI out of core (each segment slot, 1/{self.slot_share} of the budget, "
                                    f"must hold 32 signature rows: {exc.requested:,} bytes; raise "
                                    "device_memory_limit)") from None
        self.flat = [s for segs in self.segments for s in segs]        # PCSR segments, partition order
        for k, seg in enumerate(self.flat):
            seg.flat = k
        self._partition_count = len(self.flat)
        all_segments = self.sig_segments + self.flat
        self.partition_edges = np.array([rows.size for rows, _ in lists], np.int64)
        self.total_edges = int(data.neighbors.size)
        meta = np.zeros(max(1, len(all_segments)) * META, np.int64)
        for seg in all_segments:
            if seg.partition >= 0:
                meta[seg.sid * META:(seg.sid + 1) * META] = (seg.keys, 0, GROUP_WORDS * seg.keys,
                                                             seg.partition % self.directions)
        # per partition: its segments' source ranges (sorted) and where they start in ``flat``
        counts = np.array([len(segs) for segs in self.segments], np.int32)
        first = np.zeros(max(1, counts.size), np.int32)
        first[1:counts.size] = np.cumsum(counts)[:-1]
        lo = np.array([s.lo for s in self.flat] or [0], np.int32)
        hi = np.array([s.hi for s in self.flat] or [-1], np.int32)
        self._seg_first, self._seg_hi = first, hi
        # per segment, the first bucket whose rows may reach it (a list cut across segments puts
        # its vertex's rows in the bucket of the first piece)
        self._key_lo = np.zeros(len(self.flat), np.int64)
        for p, segs in enumerate(self.segments):
            if segs:
                f = int(first[p])
                self._key_lo[f:f + len(segs)] = np.searchsorted(hi[f:f + len(segs)], lo[f:f + len(segs)])
        buckets = int(counts.max(initial=0)) + 1
        self.d_bucket = budget.device_array(buckets, np.int64, what="bucket counts")
        if not self.zero_copy:                       # the bounds kernel's (streamed chunks only)
            deg, part_max = degree_bounds(data, lists, self.directions, total // DEGREE_SHARE)
            self.deg_rows = deg.size // max(n, 1)
        # resident: segment metadata and ranges, degrees, bitsets, query info, counters
        self.d_meta = budget.to_device(meta, what="segment metadata")
        self.d_seg_lo = budget.to_device(lo, what="segment ranges")
        self.d_seg_hi = budget.to_device(hi, what="segment ranges")
        self.d_seg_first = budget.to_device(first, what="segment ranges")
        self.d_seg_count = budget.to_device(np.maximum(counts, 0) if counts.size else np.zeros(1, np.int32),
                                            what="segment ranges")
        # per streamed chunk: the segments its rows reach (marked with the chunk's epoch), then the
        # rows' longest first-edge bound and GBA words (DEMAND_SLOTS), downloaded in one copy
        self.d_marks = budget.zeros(len(self.flat) + DEMAND_SLOTS, np.int64, what="reached segments")
        self.h_marks = np.zeros(self.d_marks.size, np.int64)
        self.inplace = InPlace.build(data, lists, budget, total // DEGREE_SHARE) if self.zero_copy else None
        self._epoch = 0
        if not self.zero_copy:
            self.d_deg = budget.to_device(deg, what="degree bounds")
            self.d_part_max = budget.to_device(part_max, what="degree bounds")
        self.d_sizes = budget.device_array(MAX_QUERY_VERTICES, np.int64, what="candidate sizes")
        self.d_qinfo = budget.device_array(QI_EDGES, np.int32, what="query info")
        self.d_loads = budget.zeros(4, np.int64, what="load counters")
        self.h_qinfo = np.zeros(QI_EDGES, np.int32)
        self.h_sizes = np.zeros(MAX_QUERY_VERTICES, np.int64)
        self.pool = BufferPool(budget, prefix="sgsi ")
        self.d_bits, self._bits_rows = None, 0
        self._grow_bits(4)
        self.streams = _Streams(slot_words)
        # the load balance's queue length, and SGSI+'s work histogram (only SGSI+ needs one)
        self.d_qcount = budget.device_array(1, np.int64, what="load-balance queue length")
        # the in-place kernels' tallies: the last step's count and list words, the chunks' words
        self.d_tally = budget.zeros(TALLIES, np.int64, what="in-place tallies")
        self.h_tally = np.zeros(TALLIES, np.int64)
        if self.load_balance == "histogram":
            self.d_hist = budget.device_array(balance.HIST_BINS, np.int64, what="work histogram")
            self.h_hist = np.zeros(balance.HIST_BINS, np.int64)
            self.sms = balance._sm_count()
        self.balanced = balance.make_balanced_kernels(self.warps)
        self.sgsi_kernels = make_sgsi_kernels(self.warps)
        # the join's working memory: what is left after reserving bitsets for 16 query vertices
        # and the two segment slots (placed in the words arena by each chunk that streams)
        slot_bytes = 2 * 4 * slot_words
        work = total - budget.in_use - max(0, 16 - self._bits_rows) * self.nwords * 4 - slot_bytes
        if self.device_memory_limit is None:
            work = min(work, DEFAULT_WORK_BYTES)
        if self.work_bytes is not None:
            work = min(work, self.work_bytes)
        if work < _MIN_WORK_BYTES:
            raise DeviceOutOfMemory(_MIN_WORK_BYTES, budget.in_use, total,
                                    "SGSI's join after the segment slots, degrees and candidate bitsets "
                                    "(raise device_memory_limit)")
        row_bytes = int(work * ROW_SHARE)
        self.row_arrays = arrays = IN_PLACE_ARRAYS if self.inplace is not None else ROW_ARRAYS
        max_rows = max(1, row_bytes // (8 * arrays + 8))
        self.scan_ws = self.pool.scan(max_rows, np.int64)
        left = total - budget.in_use - max(0, 16 - self._bits_rows) * self.nwords * 4 - slot_bytes
        if self.device_memory_limit is None:
            left = min(left, DEFAULT_WORK_BYTES)
        if self.work_bytes is not None:
            left = min(left, self.work_bytes)
        self.rows_cap = max(arrays, min(max_rows * arrays, int(left * ROW_SHARE) // 8))
        self.words_cap = max(2, (left - 8 * self.rows_cap) // 4) + 2 * slot_words
        self.d_rows = budget.device_array(self.rows_cap, np.int64, what="per-row arena")
        self.d_words = budget.device_array(self.words_cap, np.int32, what="table and GBA arena")
        self._views: dict = {}

    def _grow_bits(self, nq: int) -> None:
        self.d_bits = self.pool.get("candidate bitsets", max(1, nq * self.nwords), np.uint32)
        self._bits_rows = self.d_bits.size // max(1, self.nwords)

    @property
    def partitions(self) -> int:
        """PCSR segments over all partitions (SGSI's partition count; in core, one per partition)."""
        return self._partition_count

    def _view(self, arena, start: int, stop: int):
        """arena[start:stop], cached (a view costs host time and its launch words)."""
        key = (id(arena), start, stop)
        view = self._views.get(key)
        if view is None:
            if len(self._views) >= _VIEWS:
                self._views.clear()
            view = self._views[key] = _launch.view(arena, start, stop)
        return view

    # ------------------------------------------------------------------ match
    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        if self.incore is not None:
            return self._match_in_core(query, limit=limit, collect=collect, timeout_s=timeout_s)
        self._deadline = Deadline(timeout_s)
        nq = query.num_vertices
        timer = PhaseTimer()
        clock = _Clock(self.streams, self.instrument)
        self._clock, self._limit, self._collect = clock, limit, collect
        self._count, self._chunks, self._rows_out, self._host_bytes = 0, 0, [], 0
        self._gba_splits = self._table_parts = self._inplace_chunks = 0
        self._counted_rows = self._found = 0
        if self.inplace is not None:
            fill(self.d_tally, 0)
        stats = {"mode": "out-of-core", "partitions": self.partitions,
                 "signature_segments": len(self.sig_segments), "candidate_sizes": [], "order": [],
                 "load_balance": self.load_balance}
        status, reason, order = Status.OK, "", list(range(nq))
        self._iter_rows = [0] * nq
        try:
            self._grow_bits(nq)
            with timer.phase("filter"):
                sizes = self._filter(query, nq)
            stats["candidate_sizes"] = sizes.tolist()
            stats["min_candidates"] = int(sizes.min())
            if sizes.min() > 0:
                with timer.phase("plan"):
                    plan = join_plan(query, sizes, lambda label, d: int(label) * self.directions + int(d),
                                     self.partition_edges, self.total_edges, self.order_score)
                    order = list(plan.order)
                    self._steps = self._upload_steps(plan)
                    self._cap = [int(sizes[step[0]]) for step in self._steps]
                with timer.phase("filter"):
                    start = self._start_column(plan.order[0])
                self._iter_rows[0] = start.size
                with timer.phase("enumerate"):
                    self._join(start, nq)
        except Stop as stop:
            status, reason = stop.status, stop.reason
        except DeviceOutOfMemory as exc:
            status, reason = Status.OOM, str(exc)
        embeddings = None
        if collect:
            with timer.phase("transfer"):
                rows = np.concatenate(self._rows_out) if self._rows_out else np.zeros((0, nq), np.int32)
                embeddings = np.empty_like(rows)
                embeddings[:, order] = rows
        comm, comp, stream_s = clock.totals()
        stats.update(order=order, rows_per_iteration=self._iter_rows, chunks=self._chunks, comm_s=comm,
                     comp_s=comp, bytes_h2d=clock.bytes_h2d, bytes_d2h=clock.bytes_d2h,
                     bytes_streamed=clock.bytes_streamed, segments_streamed=clock.streamed,
                     gba_splits=self._gba_splits, split_outputs=self._table_parts,
                     inplace_chunks=self._inplace_chunks, bytes_inplace=0, inplace_gbps=0.0,
                     counted_rows=self._counted_rows,
                     h2d_gbps=clock.bytes_streamed / stream_s / 1e9 if stream_s > 0 else 0.0)
        if self.inplace is not None:
            download(self.d_tally, self.h_tally)
            stats["bytes_inplace"] = 4 * int(self.h_tally[TALLY_FOUND + 1] + self.h_tally[TALLY_CHUNKS + 1])
            stats["inplace_gbps"] = stats["bytes_inplace"] / comp / 1e9 if comp > 0 else 0.0
        return MatchResult(self.name, self._count, status, reason=reason, embeddings=embeddings,
                           phases=timer.seconds, peak_device_bytes=self.budget.peak, stats=stats)

    def _match_in_core(self, query: Graph, *, limit, collect, timeout_s) -> MatchResult:
        # Not incore.match: that maps the embeddings to the data's own ids, and match() here maps them again.
        r = self.incore._search_batch([query], dict(limit=limit, collect=collect, timeout_s=timeout_s,
                                                    homomorphic=False))[0]
        stats = dict(r.stats)
        comp = sum(r.phases.get(k, 0.0) for k in ("filter", "plan", "enumerate"))
        stats.update(mode="in-core", partitions=self.partitions, signature_segments=0, comm_s=0.0, comp_s=comp,
                     bytes_h2d=0, bytes_d2h=0, bytes_streamed=0, segments_streamed=0, h2d_gbps=0.0,
                     inplace_chunks=0, bytes_inplace=0, inplace_gbps=0.0,
                     chunks=stats.get("slices", 0))
        return MatchResult(self.name, r.count, r.status, reason=r.reason, embeddings=r.embeddings,
                           phases=r.phases, peak_device_bytes=r.peak_device_bytes, stats=stats)

    def _upload_steps(self, plan) -> list:
        """Every join step's linking edges to the device (one copy); per step (vertex, e0, e_hi,
        edges) with e0..e_hi-1 its edges' indices there."""
        flat, steps = [], []
        for step in plan.steps:
            e0 = len(flat) // EDGE_FIELDS
            for edge in step.edges:
                flat.extend(int(x) for x in edge)
            steps.append((step.vertex, e0, len(flat) // EDGE_FIELDS, list(step.edges)))
        host = np.asarray(flat or [0], np.int32)
        self.d_edges = self.pool.get("linking edges", host.size, np.int32)
        upload(self.d_edges, host)
        self._clock.bytes_h2d += host.nbytes
        return steps

    def _filter(self, query: Graph, nq: int) -> np.ndarray:
        """Stream the signature segments through GSI's filter kernel into the bitsets; |C(u)|."""
        qi = query_info(self.h_qinfo, query, nq, True)
        clock = self._clock
        with clock.comm_default.phase("h2d"):
            upload(self.d_qinfo, qi)
        clock.bytes_h2d += qi.nbytes
        fill(self.d_sizes, 0)
        T = self.block_threads

        def launch(slot, seg, stream):
            cnt = seg.hi - seg.lo + 1
            words = (cnt + 31) // 32
            bounds = (0, SIG_WORDS * cnt, (SIG_WORDS + 1) * cnt, (SIG_WORDS + 2) * cnt, (SIG_WORDS + 3) * cnt)
            sig, labels, out_d, in_d = (self._view(slot, bounds[k], bounds[k + 1]) for k in range(4))
            blocks = grid_blocks(nq * words, self.warps, self.max_blocks)
            filter_kernel[blocks, T, stream](2, cnt, words, nq, sig, labels, out_d, in_d, self.d_qinfo,
                                             QI_LAB, QI_OUT, QI_IN, QI_SIG, self.d_bits, self.d_sizes,
                                             seg.lo // 32, self.nwords)

        if self.inplace is not None:               # one launch over the mapped signature table
            with clock.comp_stream.phase("kernels"):
                launch(self.inplace.signatures, self.inplace.whole, self.streams.compute)
        else:
            self.streams.place(self._view, self.d_words, self.words_cap - 2 * self.streams.slot_words)
            self.streams.run(self.sig_segments, launch, clock)
        with clock.comm_default.phase("d2h"):
            download(self.d_sizes, self.h_sizes)
        clock.bytes_d2h += self.h_sizes.nbytes
        return self.h_sizes[:nq].copy()

    def _start_column(self, u: int) -> np.ndarray:
        """C(u_start) as the first column: its bitset row, decoded on the host."""
        words = np.empty(self.nwords, np.uint32)
        with self._clock.comm_default.phase("d2h"):
            download(self._view(self.d_bits, u * self.nwords, (u + 1) * self.nwords), words)
        self._clock.bytes_d2h += words.nbytes
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:self.n]
        return np.flatnonzero(bits).astype(np.int32)

    # ------------------------------------------------------------------ the join, depth first
    def _add_count(self, found: int) -> None:
        """Count final rows; stop with ``limit`` once it is reached (the count capped at it)."""
        self._count += found
        if self._limit is not None and self._count >= self._limit:
            self._count = self._limit
            raise Stop(Status.LIMIT)

    def _finish(self, rows: np.ndarray) -> None:
        """Final rows (collect): keep them on the host, within ``host_memory_limit``."""
        if self._limit is not None:
            rows = rows[:max(0, self._limit - self._count)]
        self._host_bytes += rows.nbytes
        if self._host_bytes > self.host_memory_limit:
            raise Stop(Status.OOM, f"host memory: the collected embeddings passed host_memory_limit "
                        f"{self.host_memory_limit:,} bytes")
        self._rows_out.append(rows)

    def _join(self, start: np.ndarray, nq: int) -> None:
        """C(u_start) to the device in parts that leave the arenas room, each joined depth first."""
        if nq == 1:
            if self._collect:
                self._finish(start.reshape(-1, 1))
            self._add_count(start.size)
            return
        part = max(1, min(self.words_cap // 4, self.rows_cap // ROW_ARRAYS))
        for a in range(0, start.size, part):
            piece = start[a:a + part]
            with self._clock.comm_default.phase("h2d"):
                upload(self.d_words, piece)
            self._clock.bytes_h2d += piece.nbytes
            part0 = self._steps[0][3][0][1]
            buckets = None
            if self.segments[part0]:                # C(u_start) ascends: its buckets by search
                f, k = int(self._seg_first[part0]), len(self.segments[part0])
                buckets = np.zeros(k + 2, np.int64)
                buckets[1:k + 1] = np.searchsorted(piece, self._seg_hi[f:f + k], side="right")
                buckets[k + 1] = piece.size
            self._level(0, 0, piece.size, piece.size, 0, self.words_cap, buckets)

    def _level(self, level: int, tb: int, rows: int, fw: int, fr: int, top: int, buckets=None) -> None:
        """Join the ``rows`` rows of table ``level`` (d_words[tb:], row-major) through all later
        levels; the words arena is free from ``fw`` to ``top`` (tables grow up from ``fw``, a
        chunk's GBA sits below ``top``), the per-row arena from ``fr`` on. ``buckets``: where the
        rows of each bucket of the first linking edge's partition start (the table grouped by
        the segment of that edge's vertex), or None."""
        last = level + 2 == len(self._steps) + 1
        if last and self._counts_last():
            self._count_last(level, tb, rows)
            return
        a = 0
        arrays = self.row_arrays
        while a < rows:
            self._deadline.check()
            # the per-row arrays are the chunk's own unless its new table is written in parts:
            # half of what is left (the later levels need the other half then), all where no
            # later level takes per-row arrays
            left = (self.rows_cap - fr) // arrays
            m = min(rows - a, left if self._ends_chunking(level) else left // 2)
            if m < 1:
                raise DeviceOutOfMemory(8 * arrays, self.budget.in_use, self.budget.limit or 0,
                                        f"per-row arrays of join iteration {level + 1} (raise device_memory_limit)")
            if self.inplace is not None:
                a += self._chunk_in_place(level, tb, a, m, fw, fr, top)
            else:
                a += self._chunk(level, tb, a, m, fw, fr, top, buckets)

    def _lists(self) -> tuple:
        """The in-place kernels' view of the mapped lists: (column index, offsets, bases, stride)."""
        ip = self.inplace
        return ip.lists, ip.offsets, ip.bases, ip.stride

    def _ends_chunking(self, level: int) -> bool:
        """Whether the join of table ``level`` is the last one in chunks: the last step, or the
        one before a last step counted in place (which takes neither per-row arrays nor a GBA)."""
        nq = len(self._steps) + 1
        return level + 2 == nq or (level + 3 == nq and self._counts_last())

    def _counts_last(self) -> bool:
        """Whether the last join step is counted in place (:meth:`_count_last`): count-only, with
        the graph mapped (``zero_copy``)."""
        return not self._collect and self.inplace is not None

    def _count_last(self, level: int, tb: int, rows: int) -> None:
        """The last join step of a count-only query, every linking edge's lists read in place: a
        warp per row of table ``level`` counts the row's extensions, so the step needs neither
        a GBA nor chunks. Launches of COUNT_ROWS rows, the count read back after each (the
        deadline and ``limit`` checked between them)."""
        vertex, e0, e_hi, _edges = self._steps[level]
        width = level + 1
        tab = self._view(self.d_words, tb, self.words_cap)
        sk, T, clock = self.sgsi_kernels, self.block_threads, self._clock
        tally = self._view(self.d_tally, TALLY_FOUND, TALLY_FOUND + 2)
        for r0 in range(0, rows, COUNT_ROWS):
            self._deadline.check()
            r1 = min(rows, r0 + COUNT_ROWS)
            with clock.comp_default.phase("kernels"):
                sk.in_place_count[grid_blocks(r1 - r0, self.warps, self.max_blocks), T](
                    tab, width, r0, r1 - r0, self.d_edges, e0, e_hi, self.d_bits, vertex * self.nwords,
                    *self._lists(), 0, tally, tally)
            with clock.comm_default.phase("d2h"):
                download(self.d_tally, self.h_tally)
            clock.bytes_d2h += self.h_tally.nbytes
            found = int(self.h_tally[TALLY_FOUND]) - self._found
            self._found += found
            self._counted_rows += r1 - r0
            self._iter_rows[level + 1] += found
            self._add_count(found)

    def _chunk_in_place(self, level: int, tb: int, a: int, m: int, fw: int, fr: int, top: int) -> int:
        """One join iteration over rows a..a+m-1 of table ``level`` with the graph read in place
        (``zero_copy``): each row's survivors counted, their offsets scanned, then found again and
        written as the new rows; no GBA, so the new table's parts are sized by the exact counts.
        Returns m."""
        vertex, e0, e_hi, _edges = self._steps[level]
        self._chunks += 1
        self._inplace_chunks += 1
        tab = self._view(self.d_words, tb, self.words_cap)
        num, P = (self._view(self.d_rows, fr + k * m, fr + (k + 1) * m) for k in range(IN_PLACE_ARRAYS))
        with self._clock.comp_default.phase("kernels"):
            self.sgsi_kernels.in_place_count[grid_blocks(m, self.warps, self.max_blocks), self.block_threads](
                tab, level + 1, a, m, self.d_edges, e0, e_hi, self.d_bits, vertex * self.nwords, *self._lists(), 1,
                num, self._view(self.d_tally, TALLY_CHUNKS, TALLY_CHUNKS + 2))
            out_rows = exclusive_scan(num, P, workspace=self.scan_ws, n=m)
        return self._emit(level, tab, a, m, IN_PLACE_ARRAYS * m, None, None, num, P, out_rows, 0, top - fw, fw, fr,
                          top)

    def _chunk(self, level: int, tb: int, a: int, m: int, fw: int, fr: int, top: int, buckets) -> int:
        """One join iteration over rows a..a+m-1 of table ``level`` (or the longest prefix whose
        GBA fits) by streaming the segments its rows reach (§6.3); returns the rows it joined. With
        ``buckets``, Algorithm 4's warp-per-row kernel runs each segment over the rows whose first
        linking vertex may lie in it."""
        clock, sk, T = self._clock, self.sgsi_kernels, self.block_threads
        vertex, e0, e_hi, edges = self._steps[level]
        col0, part0, lab0 = edges[0]
        width = level + 1
        nq = len(self._steps) + 1
        last = level == nq - 2
        self._chunks += 1
        tab = self._view(self.d_words, tb, self.words_cap)
        alloc = m                                   # per-row arrays are carved for m rows
        counts, F, num, P, Fx, numx = (self._view(self.d_rows, fr + k * m, fr + (k + 1) * m)
                                       for k in range(ROW_ARRAYS))
        tg = grid_blocks(m, T, self.max_blocks)
        wg = grid_blocks(m, self.warps, self.max_blocks)
        self._epoch += 1
        epoch = self._epoch
        nseg = len(self.flat)
        demand = self._view(self.d_marks, nseg, nseg + DEMAND_SLOTS)
        fill(demand, 0)
        with clock.comp_default.phase("kernels"):
            sk.bounds[tg, T](tab, width, a, m, self.d_edges, e0, e_hi, self.d_deg, self.deg_rows, self.d_part_max,
                             self.n, self._cap[level], counts, Fx, num, self.d_seg_lo, self.d_seg_hi,
                             self.d_seg_first, self.d_seg_count, self._view(self.d_marks, 0, max(nseg, 1)), epoch,
                             demand)
        with clock.comm_default.phase("d2h"):
            download(self.d_marks, self.h_marks)
        clock.bytes_d2h += self.h_marks.nbytes
        reached = self.h_marks[:nseg] == epoch
        demands = self.h_marks[nseg:]
        total = int(demands[GBA_WORDS])
        # per linking edge: the segments the rows reach
        reach = [self._reached(part, reached) for _, part, _ in edges]
        avail = top - fw
        with clock.comp_default.phase("kernels"):
            exclusive_scan(counts, F, workspace=self.scan_ws, n=m, want_total=False)
        slots = 2 * self.streams.slot_words if any(reach) else 0
        # the GBA at the top, the slots (a chunk that streams) below it: the GBA gets half of the
        # room the slots leave (the new table needs the rest), all of it at the last level
        # without collect
        gba_room = (avail - slots) if last and not self._collect else (avail - slots) // 2
        if gba_room < 1:
            raise DeviceOutOfMemory(4 * (slots + 2), self.budget.in_use, self.budget.limit or 0,
                                    f"the segment slots of join iteration {level + 1} (raise device_memory_limit)")
        if total > gba_room:                     # the longest prefix whose buffers fit
            incl = download(F, np.empty(m, np.int64)) + download(counts, np.empty(m, np.int64))
            clock.bytes_d2h += 16 * m
            j = int(np.searchsorted(incl, gba_room, side="right"))
            if j == 0:
                raise DeviceOutOfMemory(4 * int(incl[0]), self.budget.in_use, self.budget.limit or 0,
                                        f"one row's GBA in join iteration {level + 1} (raise device_memory_limit)")
            m, total = j, int(incl[j - 1])
            self._gba_splits += 1
        gba = self._view(self.d_words, top - max(total, 1), top)
        if slots:
            self.streams.place(self._view, self.d_words, top - max(total, 1) - slots)
        ubase = vertex * self.nwords
        cache = int(self.write_cache)

        # Algorithm 4: the first linking edge, segment by segment
        heavy_any = self.load_balance == "histogram"
        first_segs = reach[0]
        spans = {}                              # segment -> the chunk's rows that may reach it
        if buckets is not None:
            f = int(self._seg_first[part0])
            for seg in first_segs:
                lo = max(int(buckets[self._key_lo[seg.flat]]), a) - a
                hi = min(int(buckets[seg.flat - f + 1]), a + m) - a
                spans[seg.sid] = (lo, hi)
            first_segs = [seg for seg in first_segs if spans[seg.sid][0] < spans[seg.sid][1]]
        longest = int(demands[LONGEST])
        heavy = {seg.sid: heavy_any or (self.load_balance is not False or self.duplicate_removal)
                 and min(seg.max_list, longest) > self.w3 for seg in first_segs}
        w1 = w3 = 0
        if any(heavy.values()):
            w1, w3 = self._thresholds(Fx, m, tg)           # SGSI+: one histogram copy per chunk

        def first(slot, seg, stream, meta=self.d_meta):
            if not heavy[seg.sid]:                  # a warp per row of the segment's buckets
                lo, hi = spans.get(seg.sid, (0, m))
                sk.segment_first[grid_blocks(hi - lo, self.warps, self.max_blocks), T, stream](
                    tab, width, a, lo, hi, col0, seg.lo, seg.hi, seg.sid, lab0, self.d_bits, ubase, F, gba, num,
                    self.n, meta, slot, cache)
                return
            bk = self.balanced                      # GSI's load-balanced kernels, over the chunk,
            sk.segment_prep[tg, T, stream](F, num, Fx, m, self.d_qcount)    # appending after
            at, out = Fx, numx                                                # earlier segments
            bk.block_first_edge[wg, T, stream](
                tab, width, a, m, col0, seg.sid, lab0, self.d_bits, ubase, at, gba, out, self.n, PCSR, meta,
                slot, slot, meta, slot, slot, cache, np.int64(w1), np.int64(w3), int(self.duplicate_removal),
                counts, self.d_qcount, self.d_edges, 0, 0, self.d_loads, 0)
            if self.load_balance is not False and seg.max_list > w1:
                bk.heavy[wg, T, stream](tab, width, a, seg.sid, col0, lab0, self.d_bits, ubase, at, gba, out, self.n,
                                        PCSR, meta, slot, slot, meta, slot, slot, counts,
                                        self.d_qcount, self.d_edges, 0, 0, cache, self.d_loads, 0)
            sk.segment_add[tg, T, stream](num, numx, m)

        self.streams.run(first_segs, first, clock)
        # Algorithm 5: every other linking edge, segment by segment, in place behind a cursor
        arrays = [num, Fx, numx]
        for k, (col, _part, _label) in enumerate(edges[1:], 1):
            cur, rd, wr = arrays
            fill(rd, 0, count=m)
            fill(wr, 0, count=m)

            def other(slot, seg, stream, meta=self.d_meta, col=col, cur=cur, rd=rd, wr=wr):
                sk.segment_intersect[wg, T, stream](tab, width, a, m, col, seg.lo, seg.hi, seg.sid, F, gba, cur, rd,
                                                    wr, self.n, meta, slot, cache)

            self.streams.run(reach[k], other, clock)
            arrays = [wr, rd, cur]
        num = arrays[0]
        with clock.comp_default.phase("kernels"):
            out_rows = exclusive_scan(num, P, workspace=self.scan_ws, n=m)
        return self._emit(level, tab, a, m, ROW_ARRAYS * alloc, gba, F, num, P, out_rows, total, avail, fw, fr, top)

    def _emit(self, level, tab, a, m, row_words, gba, F, num, P, out_rows, total, avail, fw, fr, top) -> int:
        """A chunk's ``out_rows`` new rows (``num`` per row, ``P`` their offsets; the survivors in
        the GBA, or with ``gba`` None found again in place; the chunk's per-row arrays take
        ``row_words`` from ``fr``): counted at the last level of a count-only query, else written
        whole or in parts that fit, each joined on. Returns m."""
        clock = self._clock
        width = level + 1
        nq = len(self._steps) + 1
        last = level == nq - 2
        self._iter_rows[level + 1] += out_rows
        if out_rows == 0:
            return m
        if last and not self._collect:
            self._add_count(out_rows)
            return m
        # the new table grows up from fw, below the GBA if any (the slots are free again); written whole,
        # the GBA and per-row arrays are free again for the later levels, and it may take
        # TABLE_SHARE of the room (the rest for them), all of it where no later level chunks
        room = avail - max(total, 1)
        room_rows = (room if self._ends_chunking(level) else int(room * TABLE_SHARE)) // (width + 1)
        if out_rows <= room_rows:
            self._write(level, tab, a, 0, m, gba, F, num, P, 0, out_rows, fw, fr, top)
            return m
        # the new table in parts that fit, each joined by the next level before the next part
        P_h = download(P, np.empty(m, np.int64))
        n_h = download(num, np.empty(m, np.int64))
        clock.bytes_d2h += 16 * m
        ends = P_h + n_h
        i0 = 0
        self._table_parts += 1
        while i0 < m:
            i1 = int(np.searchsorted(ends, P_h[i0] + room_rows, side="right"))
            if i1 <= i0:
                raise DeviceOutOfMemory(4 * (width + 1) * int(n_h[i0]), self.budget.in_use, self.budget.limit or 0,
                                        f"one row's output of join iteration {level + 1} (raise device_memory_limit)")
            self._deadline.check()
            self._write(level, tab, a, i0, i1, gba, F, num, P, int(P_h[i0]), int(ends[i1 - 1] - P_h[i0]), fw,
                        fr + row_words, top - max(total, 1))
            i0 = i1
        return m

    def _thresholds(self, bounds, m: int, tg: int) -> tuple[int, int]:
        """(W1, W3) of the chunk: SGSI+'s cost model over the histogram of the rows' ``bounds``
        |N(v', l0)| (one small copy back), else GSI's thresholds (none without load balance)."""
        if self.load_balance == "histogram":
            fill(self.d_hist, 0)
            self.balanced.histogram[tg, self.block_threads](bounds, m, self.d_hist)
            download(self.d_hist, self.h_hist)
            self._clock.bytes_d2h += self.h_hist.nbytes
            return balance.histogram_thresholds(self.h_hist, self.sms, self.block_threads)
        if self.load_balance:
            return self.w1, self.w3
        return int(balance._NO_LIMIT), int(balance._NO_LIMIT)

    def _reached(self, part: int, reached: np.ndarray) -> list[Segment]:
        """The segments of ``part`` that the chunk's rows reach, in order."""
        segs = self.segments[part]
        if not segs:
            return []
        s0 = segs[0].flat
        return [s for s, hit in zip(segs, reached[s0:s0 + len(segs)]) if hit]

    def _write(self, level, tab, a, i0, i1, gba, F, num, P, p0, rows, fo, fr, top) -> None:
        """Rows i0..i1-1's outputs (``rows`` rows) as table level+1 at d_words[fo:], then joined on
        with the arenas free from ``fr`` and between the table's end and ``top`` (or, at the last
        level, copied to the host)."""
        width = level + 1
        out = self._view(self.d_words, fo, self.words_cap)
        wg = grid_blocks(i1 - i0, self.warps, self.max_blocks)
        sk, T, clock = self.sgsi_kernels, self.block_threads, self._clock
        last = level + 2 == len(self._steps) + 1
        col, part = self._steps[level + 1][3][0][:2] if not last else (0, 0)
        if gba is not None and not last and self.segments[part]:
            # grouped by the segment of the next step's first linking vertex, so that the next
            # level's chunks each reach few of its segments
            f, k = int(self._seg_first[part]), len(self.segments[part])
            hist = self._view(self.d_bucket, 0, k + 1)
            fill(hist, 0)
            with clock.comp_default.phase("kernels"):
                sk.bucket_count[wg, T](tab, width, a, i0, i1, gba, F, num, col, self.d_seg_hi, f, k, hist)
            buckets = np.zeros(k + 2, np.int64)
            with clock.comm_default.phase("d2h"):
                np.cumsum(download(hist, np.empty(k + 1, np.int64)), out=buckets[1:])
            with clock.comm_default.phase("h2d"):
                upload(hist, buckets[:-1])
            clock.bytes_d2h += 8 * (k + 1)
            clock.bytes_h2d += 8 * (k + 1)
            with clock.comp_default.phase("kernels"):
                sk.bucket_link[wg, T](tab, width, a, i0, i1, gba, F, num, col, self.d_seg_hi, f, k, hist, out)
            self._level(level + 1, fo, rows, fo + rows * (width + 1), fr, top, buckets)
            return
        with clock.comp_default.phase("kernels"):
            if gba is None:
                vertex, e0, e_hi, _ = self._steps[level]
                sk.in_place_write[wg, T](tab, width, a, i0, i1, self.d_edges, e0, e_hi, self.d_bits,
                                         vertex * self.nwords, *self._lists(), P, p0, out,
                                         self._view(self.d_tally, TALLY_CHUNKS + 1, TALLY_CHUNKS + 2))
            else:
                sk.link_part[wg, T](tab, width, a, i0, i1, gba, F, num, P, p0, out)
        if last:
            host = np.empty((rows, width + 1), np.int32)
            with self._clock.comm_default.phase("d2h"):
                download(out, host.reshape(-1))
            self._clock.bytes_d2h += host.nbytes
            self._finish(host)
            self._add_count(rows)
            return
        self._level(level + 1, fo, rows, fo + rows * (width + 1), fr, top)
