"""SGSI, GSI's out-of-core pipeline (Zeng et al., TKDE 2022 §6-§7), registry name ``"sgsi"``: the
same filter, join order and Prealloc-Combine join as :class:`gsi.engine.GSI`, for data graphs
larger than the device (or than ``device_memory_limit``).

    engine = SGSI(device_memory_limit=64 << 20).prepare(data)    # SGSI(load_balance="histogram"): SGSI+
    result = engine.match(query)

:meth:`SGSI.prepare` cuts the signature table into vertex segments (§6.1) and each edge-label
PCSR partition into segments (§6.2) that fill one of two double-buffered slots. Per query: the
signature segments stream through the filter (§3); GSI's Algorithm 1 orders the query; the join
keeps the intermediate table column-major in host memory (§6.3) and processes it in chunks that
fit the working memory: Algorithm 4 (partitioned first edge) and Algorithm 5 (partitioned
intersection) stream the segments that hold the chunk's vertices, Algorithm 6 writes the next
table column by column. SGSI+ chooses W1 and W3 per segment with §7's cost model. ``stats``:
``partitions``, ``signature_segments``, ``comm_s`` and ``comp_s`` (summed device time of copies
and of kernels, which overlap), ``bytes_h2d``, ``bytes_d2h``, ``segments_streamed``, ``chunks``,
``rows_per_iteration``. The choices where the paper is silent are in docs/decisions.md ("SGSI").
"""

from __future__ import annotations

import functools
import os
import time
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit

from common.cudasim import FULL_MASK
from common.device import BufferPool, DeviceMemoryBudget, PhaseTimer, cuda, fill, jit, simulator_active
from common.device_functions import lower_bound
from common.engine import Engine
from common.errors import DeviceOutOfMemory
from common.graph import Graph
from common.result import MatchResult, Status
from common.scan import exclusive_scan

from . import balance
from .engine import (
    _QI_EDGES,
    _QI_IN,
    _QI_LAB,
    _QI_OUT,
    _QI_SIG,
    DEFAULT_BLOCK_THREADS,
    DEFAULT_MAX_BLOCKS,
    adapt_slice,
    first_slice,
    query_info,
)
from .filter import SIG_WORDS, filter_kernel, signature_table
from .join import MAX_QUERY_VERTICES, make_kernels, merge_in_place
from .order import SCORES, join_plan
from .pcsr import GROUP_WORDS, META, PCSR, _build_pcsr_partition, partition_lists, warp_neighbor_range

_SIM = simulator_active()
SIG_SEGMENT_WORDS = SIG_WORDS + 3          # signature words, label, out-degree, in-degree per vertex
SLOT_SHARE = 8                             # each of the two slots gets 1/8 of the budget
ROW_SHARE = 0.25                           # of the working memory: per-row arrays and table rows
ROW_BYTES = 6 * 8 + 8 + 8 * 4              # per-row int64 arrays, scan workspace, 8 table columns
_MIN_WORK_BYTES = 1 << 10
# Without device_memory_limit the join's working memory is capped (it is allocated at prepare).
DEFAULT_WORK_BYTES = (16 << 20) if _SIM else (4 << 30)


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
    append_offsets: object
    segment_intersect: object
    column: object


@functools.lru_cache(maxsize=None)
def make_sgsi_kernels(warps: int) -> SGSIKernels:
    """The kernels SGSI adds to GSI's: offsets of the next segment's appends, the partitioned
    intersection (Algorithm 5) and the column writer (Algorithm 6)."""

    @jit
    def append_offsets_kernel(F, num, num_seg, Fx, m, reset):
        """num += num_seg (num = 0 when ``reset``); Fx = F + num: where the next segment appends."""
        i = cuda.grid(1)
        while i < m:
            if reset != 0:
                num[i] = 0
            else:
                num[i] += num_seg[i]
            Fx[i] = F[i] + num[i]
            i += cuda.gridsize(1)

    @jit
    def segment_intersect_kernel(tab, width, m, col, part, F, gba, num, rd, wr, n, structure, meta,
                                 gl, keys, offs, ci, ci_label, use_cache):
        """Algorithm 5 for one segment (a warp per row): merge gba[F+rd : F+num] with the segment's
        part of N(v'', l), writing survivors at F+wr; rd moves past the part's last neighbour."""
        cache = cuda.shared.array((warps, 32), np.int32)
        btile = cuda.shared.array((warps, 32), np.int32)
        ntile = cuda.shared.array((warps, 32), np.int32)
        lane = cuda.laneid
        w = cuda.threadIdx.x // 32
        i = cuda.blockIdx.x * warps + w
        nw = cuda.gridDim.x * warps
        while i < m:
            v = tab[i * width + col]
            s, e, _ = warp_neighbor_range(structure, meta, gl, keys, offs, part, v, n)
            bp = rd[i]
            size = np.int64(num[i])
            if s < e and bp < size:
                base = F[i]
                written, bp, _, _ = merge_in_place(btile, ntile, cache, w, gba, base, bp, size, ci, s, e,
                                                   wr[i], structure, ci_label, 0, use_cache)
                # every buffer element up to the part's last neighbour has been consumed
                nxt = size
                if bp < size:
                    nxt = lower_bound(gba, base + bp, base + size, ci[e - 1] + 1) - base
                if lane == 0:
                    rd[i] = nxt
                    wr[i] = written
            cuda.syncwarp(FULL_MASK)
            i += nw

    @jit
    def column_kernel(tab, width, c, m, gba, F, num, P, out):
        """Algorithm 6, one column: out[P[i] + k] = tab[i, c] (c < width) or gba[F[i] + k]
        (c == width) for k < num[i] (a warp per row)."""
        lane = cuda.laneid
        w = cuda.threadIdx.x // 32
        i = cuda.blockIdx.x * warps + w
        nw = cuda.gridDim.x * warps
        while i < m:
            cnt = np.int64(num[i])
            dst = P[i]
            k = np.int64(lane)
            if c < width:
                value = tab[i * width + c]
                while k < cnt:
                    out[dst + k] = value
                    k += 32
            else:
                src = F[i]
                while k < cnt:
                    out[dst + k] = gba[src + k]
                    k += 32
            i += nw

    return SGSIKernels(append_offsets_kernel, segment_intersect_kernel, column_kernel)


class _Streams:
    """Two segment slots fed on a copy stream while kernels run on a compute stream (events
    order a slot's copy after the kernels that last read it and before the kernels that read
    it next); a slot still holding the segment asked for is not copied again."""

    def __init__(self, budget, slot_words: int):
        self.slots = [budget.device_array(slot_words, np.int32, what=f"segment slot {s}") for s in range(2)]
        self.holds = [-1, -1]
        if _SIM:
            self.copy = self.compute = 0
            self.ready = self.free = [None, None]
        else:
            self.copy, self.compute = cuda.stream(), cuda.stream()
            self.ready = [cuda.event(timing=False) for _ in range(2)]
            self.free = [cuda.event(timing=False) for _ in range(2)]

    def _load(self, seg: Segment, avoid: int, clock) -> int:
        for s in range(2):
            if self.holds[s] == seg.sid:
                return s
        s = 1 - avoid if avoid >= 0 else (0 if self.holds[0] == -1 or self.holds[1] != -1 else 1)
        if not _SIM:
            self.free[s].wait(self.copy)
        with clock.comm_copy.phase("h2d"):
            self.slots[s][:seg.words].copy_to_device(seg.host, stream=self.copy)
        if not _SIM:
            self.ready[s].record(self.copy)
        self.holds[s] = seg.sid
        clock.bytes_h2d += seg.words * 4
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
                self.ready[cur].wait(self.compute)
            with clock.comp_stream.phase("kernels"):
                launch(self.slots[cur], seg, self.compute)
            if not _SIM:
                self.free[cur].record(self.compute)
            cur = nxt


class _Clock:
    """Device time of copies and kernels (Table 7's communication and computation) and bytes."""

    def __init__(self, streams: _Streams):
        self.comm_copy = PhaseTimer(streams.copy)
        self.comm_default = PhaseTimer(0)
        self.comp_stream = PhaseTimer(streams.compute)
        self.comp_default = PhaseTimer(0)
        self.bytes_h2d = self.bytes_d2h = self.streamed = 0

    def totals(self) -> tuple[float, float]:
        comm = sum(self.comm_copy.seconds.values()) + sum(self.comm_default.seconds.values())
        comp = sum(self.comp_stream.seconds.values()) + sum(self.comp_default.seconds.values())
        return comm, comp


class _Stop(Exception):
    def __init__(self, status: Status, reason: str = ""):
        self.status, self.reason = status, reason


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


class SGSI(Engine):
    """SGSI (Zeng et al., TKDE 2022 §6-§7): GSI for graphs larger than the device memory.

    The signature filter, PCSR and Prealloc-Combine are fixed: they are what SGSI partitions.

    Parameters
    ----------
    load_balance : {True, "histogram", False}
        True: SGSI with GSI's thresholds ``w1``/``w3``; "histogram": SGSI+ (§7's cost model).
    duplicate_removal : bool
        Share N(v, l) reads among a block's rows, as in :class:`gsi.engine.GSI`.
    write_cache : bool
        The per-warp write cache, as in :class:`gsi.engine.GSI`.
    order_score : {"paper", "code"}
        Join-order score, as in :class:`gsi.engine.GSI`.
    w1, w3 : int
        Load-balance thresholds of SGSI's four layers (GSI §VI-A).
    block_threads, max_blocks : int
        Launch shape of the join kernels.
    host_memory_limit : int or None
        Cap of the host-resident intermediate table in bytes (None: half the machine's memory);
        past it the query ends with status ``oom``.
    device_memory_limit : int or None
        The device bytes the partitions are planned for (None: 90% of the device's free memory).
    """

    _slice_rows = 0                   # simulator: rows per join chunk (set per query)

    name = "sgsi"
    supports_edge_labels = True
    supports_directed = True
    supports_homomorphic = False
    supports_disconnected = False
    max_query_vertices = MAX_QUERY_VERTICES

    def __init__(self, *, load_balance: bool | str = True, duplicate_removal: bool = True,
                 write_cache: bool = True, order_score: str = "paper", w1: int = balance.W1,
                 w3: int = balance.W3, block_threads: int = DEFAULT_BLOCK_THREADS,
                 max_blocks: int = DEFAULT_MAX_BLOCKS, host_memory_limit: int | None = None,
                 device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if load_balance not in (False, True, "histogram") or not isinstance(load_balance, (bool, str)):
            raise ValueError(f"unknown load_balance {load_balance!r}; choose False, True or 'histogram'")
        if order_score not in SCORES:
            raise ValueError(f"unknown order_score {order_score!r}; choose one of {SCORES}")
        if block_threads % 32 or not 32 <= block_threads <= 1024:
            raise ValueError(f"block_threads must be a multiple of 32 in 32..1024, got {block_threads}")
        if not 32 < w3 < w1:
            raise ValueError(f"load-balance thresholds need 32 < w3 < w1, got w3={w3}, w1={w1}")
        self.load_balance = load_balance
        self.duplicate_removal = bool(duplicate_removal)
        self.write_cache = bool(write_cache)
        self.order_score = order_score
        self.w1, self.w3 = int(w1), int(w3)
        self.block_threads, self.max_blocks = int(block_threads), int(max_blocks)
        self.warps = self.block_threads // 32
        self.host_memory_limit = host_memory_limit if host_memory_limit is not None else _host_memory() // 2
        self.instrument = False

    # ------------------------------------------------------------------ partitioning
    @staticmethod
    def budget_for(device_memory_limit: int | None) -> int:
        """The device bytes SGSI plans with: the limit, or 90% of the free device memory."""
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
        sig = signature_table(data, column_first=False).reshape(n, SIG_WORDS)
        out_deg = np.asarray(data.degrees, np.int32)
        in_deg = np.diff(data.in_csr[0]).astype(np.int32) if data.directed else out_deg
        sid = 0
        sig_segments = []
        for v0 in range(0, max(n, 1), per_seg):
            cnt = min(per_seg, n - v0)
            host = np.empty(cnt * SIG_SEGMENT_WORDS, np.int32)
            host[:SIG_WORDS * cnt] = sig[v0:v0 + cnt].T.reshape(-1)       # column-first
            host[SIG_WORDS * cnt:(SIG_WORDS + 1) * cnt] = data.labels[v0:v0 + cnt]
            host[(SIG_WORDS + 1) * cnt:(SIG_WORDS + 2) * cnt] = out_deg[v0:v0 + cnt]
            host[(SIG_WORDS + 2) * cnt:] = in_deg[v0:v0 + cnt]
            sig_segments.append(Segment(sid, -1, v0, v0 + cnt - 1, 0, host))
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
    def slot_words_for(cls, data: Graph, device_memory_limit: int | None, lists=None) -> int:
        """int32 words per segment slot: the largest piece (signature table or partition) if it
        fits in 1/8 of the budget, else 1/8 of the budget."""
        # a slot holds whole warps of signature rows: 32 at least, even for a tiny graph
        need = max((data.num_vertices + 31) // 32 * 32 * SIG_SEGMENT_WORDS, GROUP_WORDS + 1)
        for rows, _ in partition_lists(data) if lists is None else lists:
            need = max(need, rows.size + GROUP_WORDS * np.unique(rows).size)
        return int(min(need, cls.budget_for(device_memory_limit) // SLOT_SHARE // 4))

    def _prepare(self, data: Graph) -> None:
        total = self.budget_for(self.device_memory_limit)
        self.budget = budget = DeviceMemoryBudget(total)
        n = data.num_vertices
        self.n, self.nwords = n, (n + 31) // 32
        lists = partition_lists(data)
        slot_words = self.slot_words_for(data, self.device_memory_limit, lists)
        self.sig_segments, self.segments = self.plan_segments(data, slot_words, lists)
        all_segments = self.sig_segments + [s for segs in self.segments for s in segs]
        self.segment_ranges = [(np.array([s.lo for s in segs], np.int64), np.array([s.hi for s in segs], np.int64))
                               for segs in self.segments]      # source-vertex range of each segment
        self.directions = 2 if data.directed else 1
        self.partition_edges = np.array([rows.size for rows, _ in lists], np.int64)
        self.degree_keys, self.degree_counts = [], []
        for rows, _ in lists:
            keys, counts = np.unique(rows, return_counts=True)
            self.degree_keys.append(keys)
            self.degree_counts.append(counts.astype(np.int64))
        self.total_edges = int(data.neighbors.size)
        meta = np.zeros(max(1, len(all_segments)) * META, np.int64)
        for seg in all_segments:
            if seg.partition >= 0:
                meta[seg.sid * META:(seg.sid + 1) * META] = (seg.keys, 0, GROUP_WORDS * seg.keys,
                                                             seg.partition % self.directions)
        # resident: segment metadata, candidate bitsets (grown per query size), query info, counters
        self.d_meta = budget.to_device(meta, what="segment metadata")
        self.d_sizes = budget.device_array(MAX_QUERY_VERTICES, np.int64, what="candidate sizes")
        self.d_qinfo = budget.device_array(_QI_EDGES, np.int32, what="query info")   # no linking edges
        self.d_loads = budget.zeros(4, np.int64, what="load counters")
        self.d_dummy32 = budget.zeros(1, np.int32, what="unused structure arrays")
        self.d_dummy64 = budget.zeros(1, np.int64, what="unused structure arrays")
        self.h_qinfo = np.zeros(_QI_EDGES, np.int32)
        self.h_sizes = np.zeros(MAX_QUERY_VERTICES, np.int64)
        self.pool = BufferPool(budget, prefix="sgsi ")
        self.d_bits, self._bits_rows = None, 0
        self._grow_bits(4)
        self.lb = balance.LoadBalancer(budget, warps=self.warps, load_balance=self.load_balance, w1=self.w1,
                                       w3=self.w3, duplicate_removal=self.duplicate_removal,
                                       write_cache=self.write_cache, max_blocks=self.max_blocks)
        self.streams = _Streams(budget, slot_words)
        self.kernels = make_kernels(self.warps)
        self.balanced = balance.make_balanced_kernels(self.warps)
        self.sgsi_kernels = make_sgsi_kernels(self.warps)
        # the join's working memory: what is left after reserving bitsets for 16 query vertices
        work = total - budget.in_use - max(0, 16 - self._bits_rows) * self.nwords * 4
        if self.device_memory_limit is None:
            work = min(work, DEFAULT_WORK_BYTES)
        if work < _MIN_WORK_BYTES:
            raise ValueError(f"device_memory_limit {total:,} leaves {work:,} bytes for SGSI's join "
                             f"after the segment slots and candidate bitsets: raise it")
        self.rows_cap = max(1, int(work * ROW_SHARE) // ROW_BYTES)
        self.gba_cap = max(1, (work - self.rows_cap * ROW_BYTES) // 8)
        self.tab_cap = self.rows_cap * 8
        rows = self.rows_cap
        self.d_F, self.d_Fx, self.d_num, self.d_numx, self.d_P, self.d_counts = (
            budget.device_array(rows, np.int64, what=f"per-row {name}")
            for name in ("F", "Fx", "num", "num_seg", "P", "counts"))
        self.scan_ws = self.pool.scan(rows, np.int64)
        self.d_tab = budget.device_array(self.tab_cap, np.int32, what="table chunk")
        self.d_gba = budget.device_array(self.gba_cap, np.int32, what="GBA")
        self.d_col = budget.device_array(self.gba_cap, np.int32, what="output column")

    def _grow_bits(self, nq: int) -> None:
        self.d_bits = self.pool.get("candidate bitsets", max(1, nq * self.nwords), np.uint32)
        self._bits_rows = self.d_bits.size // max(1, self.nwords)

    @property
    def partitions(self) -> int:
        """PCSR segments over all partitions (SGSI's partition count)."""
        return sum(len(segs) for segs in self.segments)

    # ------------------------------------------------------------------ match
    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        self._deadline = None if timeout_s is None else time.perf_counter() + timeout_s
        self._slice_rows = first_slice(timeout_s)                       # as GSI's _run_level
        nq = query.num_vertices
        timer = PhaseTimer()
        clock = _Clock(self.streams)
        self._clock, self._limit, self._collect = clock, limit, collect
        self._count, self._chunks, self._limited = 0, 0, False
        stats = {"partitions": self.partitions, "signature_segments": len(self.sig_segments),
                 "candidate_sizes": [], "order": [],
                 "load_balance": self.load_balance}
        status, reason, order, embeddings = Status.OK, "", list(range(nq)), None
        iter_rows = [0] * nq
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
                with timer.phase("filter"):
                    cols = [self._start_column(plan.order[0])]
                iter_rows[0] = cols[0].size
                with timer.phase("enumerate"):
                    cols = self._join(plan, cols, nq, iter_rows)
                if collect:
                    with timer.phase("transfer"):
                        embeddings = np.empty((cols[0].size if cols else 0, nq), np.int32)
                        for c, u in enumerate(order):
                            embeddings[:, u] = cols[c]
            if self._limited:
                status = Status.LIMIT
        except _Stop as stop:
            status, reason = stop.status, stop.reason
        if collect and embeddings is None:
            embeddings = np.zeros((0, nq), np.int32)
        comm, comp = clock.totals()
        stats.update(order=order, rows_per_iteration=iter_rows, chunks=self._chunks, comm_s=comm,
                     comp_s=comp, bytes_h2d=clock.bytes_h2d, bytes_d2h=clock.bytes_d2h,
                     segments_streamed=clock.streamed)
        return MatchResult(self.name, self._count, status, reason=reason, embeddings=embeddings,
                           phases=timer.seconds, peak_device_bytes=self.budget.peak, stats=stats)

    def _check_deadline(self) -> None:
        if self._deadline is not None and time.perf_counter() > self._deadline:
            raise _Stop(Status.TIMEOUT)

    def _filter(self, query: Graph, nq: int) -> np.ndarray:
        """Stream the signature segments through GSI's filter kernel into the bitsets; |C(u)|."""
        qi = query_info(self.h_qinfo, query, nq, True)
        clock = self._clock
        with clock.comm_default.phase("h2d"):
            self.d_qinfo.copy_to_device(qi)
        clock.bytes_h2d += qi.nbytes
        fill(self.d_sizes, 0)
        T = self.block_threads

        def launch(slot, seg, stream):
            cnt = seg.hi - seg.lo + 1
            words = (cnt + 31) // 32
            sig = slot[:SIG_WORDS * cnt]
            labels = slot[SIG_WORDS * cnt:(SIG_WORDS + 1) * cnt]
            out_d = slot[(SIG_WORDS + 1) * cnt:(SIG_WORDS + 2) * cnt]
            in_d = slot[(SIG_WORDS + 2) * cnt:(SIG_WORDS + 3) * cnt]
            blocks = max(1, min(self.max_blocks, (nq * words + self.warps - 1) // self.warps))
            filter_kernel[blocks, T, stream](2, cnt, words, nq, sig, labels, out_d, in_d, self.d_qinfo,
                                             _QI_LAB, _QI_OUT, _QI_IN, _QI_SIG, self.d_bits, self.d_sizes,
                                             seg.lo // 32, self.nwords)

        self.streams.run(self.sig_segments, launch, clock)
        with clock.comm_default.phase("d2h"):
            self.d_sizes.copy_to_host(self.h_sizes)
        clock.bytes_d2h += self.h_sizes.nbytes
        return self.h_sizes[:nq].copy()

    def _start_column(self, u: int) -> np.ndarray:
        """C(u_start) as the first column: its bitset row, decoded on the host."""
        with self._clock.comm_default.phase("d2h"):
            words = self.d_bits[u * self.nwords:(u + 1) * self.nwords].copy_to_host()
        self._clock.bytes_d2h += words.nbytes
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:self.n]
        return np.flatnonzero(bits).astype(np.int32)

    def _degrees(self, part: int, vertices: np.ndarray) -> np.ndarray:
        """|N(v, part)| of each vertex, from the host's per-partition degree lists."""
        keys, counts = self.degree_keys[part], self.degree_counts[part]
        if keys.size == 0:
            return np.zeros(vertices.size, np.int64)
        pos = np.minimum(np.searchsorted(keys, vertices), keys.size - 1)
        return np.where(keys[pos] == vertices, counts[pos], 0)

    def _segments_for(self, part: int, vertices: np.ndarray) -> list[Segment]:
        """The segments of ``part`` whose source-vertex range holds one of ``vertices``."""
        segs = self.segments[part]
        if not segs or vertices.size == 0:
            return []
        values = np.unique(vertices)
        lo, hi = self.segment_ranges[part]
        pos = np.searchsorted(values, lo)
        hit = (pos < values.size) & (values[np.minimum(pos, values.size - 1)] <= hi)
        return [s for s, h in zip(segs, hit) if h]

    def _join(self, plan, cols: list[np.ndarray], nq: int, iter_rows: list[int]) -> list[np.ndarray]:
        """Every join iteration over the host-resident column-major table; the final columns
        (empty lists when only counting)."""
        if nq == 1:
            self._add_count(cols[0].size)
            return [cols[0][:self._count]] if self._collect else []
        for level, step in enumerate(plan.steps):
            width = level + 1
            last = level == nq - 2
            write = self._collect or not last
            new_cols = [[] for _ in range(width + 1)]
            rows_total = cols[0].size
            out_rows = 0
            a = 0
            while a < rows_total:
                self._check_deadline()
                began = time.perf_counter()
                m, produced = self._run_chunk(step, cols, a, width, write, new_cols)
                if self._slice_rows:
                    self._slice_rows = adapt_slice(self._slice_rows, time.perf_counter() - began)
                out_rows += produced
                if write and out_rows * (width + 1) * 4 > self.host_memory_limit:
                    raise _Stop(Status.OOM, f"host memory: the table of iteration {level + 1} passed "
                                f"{out_rows:,} rows x {width + 1} columns, over host_memory_limit "
                                f"{self.host_memory_limit:,} bytes")
                a += m
                if last and self._add_count(produced):
                    break
            iter_rows[level + 1] = out_rows
            if not write:
                return []
            cols = [np.concatenate(parts) if parts else np.zeros(0, np.int32) for parts in new_cols]
            if out_rows == 0:
                return cols
        return [c[:self._count] for c in cols]

    def _add_count(self, found: int) -> bool:
        """Count final rows; True once ``limit`` is reached (the count is capped at it)."""
        self._count += found
        if self._limit is not None and self._count >= self._limit:
            self._count = self._limit
            self._limited = True
        return self._limited

    def _run_chunk(self, step, cols, a: int, width: int, write: bool, new_cols) -> tuple[int, int]:
        """Join rows a..a+m-1 (the largest prefix that fits) and write their output columns;
        returns (m, rows produced)."""
        clock, k, sk = self._clock, self.kernels, self.sgsi_kernels
        col0, part0, lab0 = step.edges[0]
        window = min(cols[0].size - a, self.rows_cap, max(1, self.tab_cap // width),
                     self._slice_rows or cols[0].size)
        counts = self._degrees(part0, cols[col0][a:a + window])
        incl = np.cumsum(counts)
        m = int(np.searchsorted(incl, self.gba_cap, side="right"))
        if m == 0:
            raise _Stop(Status.OOM, f"one row's neighbour list ({int(counts[0]):,} entries) exceeds the "
                        f"GBA of {self.gba_cap:,} entries that device_memory_limit leaves")
        self._chunks += 1
        rows = np.ascontiguousarray(np.stack([c[a:a + m] for c in cols], axis=1), np.int32).reshape(-1)
        F = np.ascontiguousarray(incl[:m] - counts[:m], np.int64)
        with clock.comm_default.phase("h2d"):
            self.d_tab[:rows.size].copy_to_device(rows)
            self.d_F[:m].copy_to_device(F)
        clock.bytes_h2d += rows.nbytes + F.nbytes
        tab, T = self.d_tab, self.block_threads
        wg = max(1, min(self.max_blocks, (m + self.warps - 1) // self.warps))
        tg = max(1, min(self.max_blocks, (m + T - 1) // T))
        ubase = step.vertex * self.nwords
        cache = int(self.write_cache)
        heavy = self.load_balance == "histogram" or self.load_balance is True
        with clock.comp_default.phase("kernels"):
            sk.append_offsets[tg, T](self.d_F, self.d_num, self.d_numx, self.d_Fx, m, 1)

        def first(slot, seg, stream):       # Algorithm 4 for one segment
            idx = (PCSR, self.d_meta, slot, self.d_dummy32, self.d_dummy64, slot, self.d_dummy32)
            if heavy or self.duplicate_removal:
                k.row_counts[tg, T, stream](tab, width, 0, m, col0, seg.sid, self.n, *idx, self.d_counts,
                                            self.lb.qcount, self.d_loads, 0)
                self.lb.first_edge(tab, width, 0, m, col0, seg.sid, lab0, self.d_bits, ubase, self.d_Fx,
                                   self.d_gba, self.d_numx, self.n, idx, seg.max_list, self.d_counts,
                                   self.d_qinfo, 0, 0, self.d_loads, stream)
            else:      # (no further linking edges here: Algorithm 5 streams them below)
                k.first_edge[wg, T, stream](tab, width, 0, m, col0, seg.sid, lab0, self.d_bits, ubase,
                                            self.d_Fx, self.d_gba, self.d_numx, self.n, *idx, cache,
                                            self.d_qinfo, 0, 0, self.d_loads, 0)
            sk.append_offsets[tg, T, stream](self.d_F, self.d_num, self.d_numx, self.d_Fx, m, 0)

        self.streams.run(self._segments_for(part0, cols[col0][a:a + m]), first, clock)
        for col, part, _label in step.edges[1:]:           # Algorithm 5, edge by edge
            rd, wr = self.d_numx, self.d_Fx
            fill(rd[:m], 0)
            fill(wr[:m], 0)

            def other(slot, seg, stream, col=col, rd=rd, wr=wr):
                idx = (PCSR, self.d_meta, slot, self.d_dummy32, self.d_dummy64, slot, self.d_dummy32)
                sk.segment_intersect[wg, T, stream](tab, width, m, col, seg.sid, self.d_F,
                                                              self.d_gba, self.d_num, rd, wr, self.n,
                                                              *idx, cache)

            self.streams.run(self._segments_for(part, cols[col][a:a + m]), other, clock)
            self.d_num, self.d_Fx = wr, self.d_num        # the survivors are the write cursors
        with clock.comp_default.phase("kernels"):
            total = exclusive_scan(self.d_num, self.d_P, workspace=self.scan_ws, n=m)
        if write and total:
            for c in range(width + 1):                    # Algorithm 6: a column at a time
                with clock.comp_default.phase("kernels"):
                    sk.column[wg, T](tab, width, c, m, self.d_gba, self.d_F, self.d_num,
                                               self.d_P, self.d_col)
                with clock.comm_default.phase("d2h"):
                    new_cols[c].append(self.d_col[:total].copy_to_host())
                clock.bytes_d2h += total * 4
        return m, int(total)
