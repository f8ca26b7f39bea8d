"""SGSI out of core (Zeng et al., TKDE 2022 §6.3, §7): the device state a prepared engine keeps
(segment metadata, slots, two arenas) and the depth-first join of one query over them.

Per query the filter (§3) streams the signature segments into the candidate bitsets, GSI's
Algorithm 1 orders the query, and the join runs depth first over device-resident tables in
chunks that fit two arenas (a words arena for tables and buffers, a per-row arena); a new table
that outgrows its room is written in parts, each joined on before the next. With ``zero_copy``
each chunk counts its rows' survivors in place, scans the counts and writes the survivors in a
second pass; without it the chunk streams the segments its rows reach through Algorithm 4
(first linking edge) and Algorithm 5 (every other one). What one match changes is its
:class:`_Query`; the engine keeps only what every query reuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from common.engine.deadline import Deadline, Stop
from common.engine.result import MatchResult, Status
from common.errors import DeviceOutOfMemory
from common.gpu import launch as _launch
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.copies import download, fill, upload
from common.gpu.grid import grid_blocks
from common.gpu.pool import BufferPool
from common.gpu.runtime import simulator_active
from common.gpu.scan import exclusive_scan
from common.gpu.timers import PhaseTimer
from common.graph.model import Graph

from .. import balance
from ..filter import SIG_WORDS, filter_kernel
from ..join import EDGE_FIELDS, MAX_QUERY_VERTICES
from ..layout import QI_EDGES, QI_IN, QI_LAB, QI_OUT, QI_SIG, query_info
from ..order import join_plan
from ..pcsr import GROUP_WORDS, META, PCSR
from .kernels import DEMAND_SLOTS, GBA_WORDS, LONGEST, make_sgsi_kernels
from .segments import InPlace, Segment, degree_bounds
from .streams import _Clock, _Streams

_SIM = simulator_active()
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


@dataclass
class _Query:
    """What one out-of-core match changes (the engine keeps only what every query reuses)."""

    limit: int | None
    collect: bool
    deadline: Deadline
    clock: _Clock
    iter_rows: list                 # rows of each table (rows_per_iteration)
    steps: list = field(default_factory=list)       # per join step: (vertex, e0, e_hi, edges)
    cap: list = field(default_factory=list)         # per join step: |C(vertex)|
    d_edges: object = None          # the linking edges on the device
    count: int = 0
    rows_out: list = field(default_factory=list)    # collected rows, in join order
    host_bytes: int = 0
    chunks: int = 0
    inplace_chunks: int = 0
    gba_splits: int = 0
    table_parts: int = 0
    counted_rows: int = 0
    found: int = 0                  # the in-place tally's count read so far


class OutOfCore:
    """The out-of-core half of :class:`~gsi.sgsi.SGSI`: prepare the segments, slots and arenas;
    match one query by the depth-first chunked join."""

    # ------------------------------------------------------------------ prepare
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
    def _match_out_of_core(self, query: Graph, *, limit, collect, timeout_s) -> MatchResult:
        """Filter, order and join ``query`` out of core; ``stats`` as :class:`~gsi.sgsi.SGSI` lists."""
        nq = query.num_vertices
        timer = PhaseTimer()
        clock = _Clock(self.streams, self.instrument)
        q = _Query(limit, collect, Deadline(timeout_s), clock, iter_rows=[0] * nq)
        if self.inplace is not None:
            fill(self.d_tally, 0)
        stats = {"mode": "out-of-core", "partitions": self.partitions,
                 "signature_segments": len(self.sig_segments), "candidate_sizes": [], "order": [],
                 "load_balance": self.load_balance}
        status, reason, order = Status.OK, "", list(range(nq))
        try:
            self._grow_bits(nq)
            self.scan_ws = self.pool.scan(self.scan_ws.capacity, np.int64)   # the join's scans: this query's demand
            with timer.phase("filter"):
                sizes = self._filter(q, query, nq)
            stats["candidate_sizes"] = sizes.tolist()
            stats["min_candidates"] = int(sizes.min())
            if sizes.min() > 0:
                with timer.phase("plan"):
                    plan = join_plan(query, sizes, lambda label, d: int(label) * self.directions + int(d),
                                     self.partition_edges, self.total_edges, self.order_score)
                    order = list(plan.order)
                    q.steps = self._upload_steps(q, plan)
                    q.cap = [int(sizes[step[0]]) for step in q.steps]
                with timer.phase("filter"):
                    start = self._start_column(q, plan.order[0])
                q.iter_rows[0] = start.size
                with timer.phase("enumerate"):
                    self._join(q, start, nq)
        except Stop as stop:
            status, reason = stop.status, stop.reason
        except DeviceOutOfMemory as exc:
            status, reason = Status.OOM, str(exc)
        embeddings = None
        if collect:
            with timer.phase("transfer"):
                rows = np.concatenate(q.rows_out) if q.rows_out else np.zeros((0, nq), np.int32)
                embeddings = np.empty_like(rows)
                embeddings[:, order] = rows
        comm, comp, stream_s = clock.totals()
        stats.update(order=order, rows_per_iteration=q.iter_rows, chunks=q.chunks, comm_s=comm,
                     comp_s=comp, bytes_h2d=clock.bytes_h2d, bytes_d2h=clock.bytes_d2h,
                     bytes_streamed=clock.bytes_streamed, segments_streamed=clock.streamed,
                     gba_splits=q.gba_splits, split_outputs=q.table_parts,
                     inplace_chunks=q.inplace_chunks, bytes_inplace=0, inplace_gbps=0.0,
                     counted_rows=q.counted_rows,
                     h2d_gbps=clock.bytes_streamed / stream_s / 1e9 if stream_s > 0 else 0.0)
        if self.inplace is not None:
            download(self.d_tally, self.h_tally)
            stats["bytes_inplace"] = 4 * int(self.h_tally[TALLY_FOUND + 1] + self.h_tally[TALLY_CHUNKS + 1])
            stats["inplace_gbps"] = stats["bytes_inplace"] / comp / 1e9 if comp > 0 else 0.0
        return MatchResult(self.name, q.count, status, reason=reason, embeddings=embeddings,
                           phases=timer.seconds, peak_device_bytes=self.budget.peak, stats=stats)

    def _upload_steps(self, q: _Query, plan) -> list:
        """Every join step's linking edges to the device (one copy); per step (vertex, e0, e_hi,
        edges) with e0..e_hi-1 its edges' indices there."""
        flat, steps = [], []
        for step in plan.steps:
            e0 = len(flat) // EDGE_FIELDS
            for edge in step.edges:
                flat.extend(int(x) for x in edge)
            steps.append((step.vertex, e0, len(flat) // EDGE_FIELDS, list(step.edges)))
        host = np.asarray(flat or [0], np.int32)
        q.d_edges = self.pool.get("linking edges", host.size, np.int32)
        upload(q.d_edges, host)
        q.clock.bytes_h2d += host.nbytes
        return steps

    def _filter(self, q: _Query, query: Graph, nq: int) -> np.ndarray:
        """Stream the signature segments through GSI's filter kernel into the bitsets; |C(u)|."""
        qi = query_info(self.h_qinfo, query, nq, True)
        clock = q.clock
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

    def _start_column(self, q: _Query, u: int) -> np.ndarray:
        """C(u_start) as the first column: its bitset row, decoded on the host."""
        words = np.empty(self.nwords, np.uint32)
        with q.clock.comm_default.phase("d2h"):
            download(self._view(self.d_bits, u * self.nwords, (u + 1) * self.nwords), words)
        q.clock.bytes_d2h += words.nbytes
        bits = np.unpackbits(words.view(np.uint8), bitorder="little")[:self.n]
        return np.flatnonzero(bits).astype(np.int32)

    # ------------------------------------------------------------------ the join, depth first
    def _add_count(self, q: _Query, found: int) -> None:
        """Count final rows; stop with ``limit`` once it is reached (the count capped at it)."""
        q.count += found
        if q.limit is not None and q.count >= q.limit:
            q.count = q.limit
            raise Stop(Status.LIMIT)

    def _finish(self, q: _Query, rows: np.ndarray) -> None:
        """Final rows (collect): keep them on the host, within ``host_memory_limit``."""
        if q.limit is not None:
            rows = rows[:max(0, q.limit - q.count)]
        q.host_bytes += rows.nbytes
        if q.host_bytes > self.host_memory_limit:
            raise Stop(Status.OOM, f"host memory: the collected embeddings passed host_memory_limit "
                        f"{self.host_memory_limit:,} bytes")
        q.rows_out.append(rows)

    def _join(self, q: _Query, start: np.ndarray, nq: int) -> None:
        """C(u_start) to the device in parts that leave the arenas room, each joined depth first."""
        if nq == 1:
            if q.collect:
                self._finish(q, start.reshape(-1, 1))
            self._add_count(q, start.size)
            return
        part = max(1, min(self.words_cap // 4, self.rows_cap // ROW_ARRAYS))
        for a in range(0, start.size, part):
            piece = start[a:a + part]
            with q.clock.comm_default.phase("h2d"):
                upload(self.d_words, piece)
            q.clock.bytes_h2d += piece.nbytes
            part0 = q.steps[0][3][0][1]
            buckets = None
            if self.segments[part0]:                # C(u_start) ascends: its buckets by search
                f, k = int(self._seg_first[part0]), len(self.segments[part0])
                buckets = np.zeros(k + 2, np.int64)
                buckets[1:k + 1] = np.searchsorted(piece, self._seg_hi[f:f + k], side="right")
                buckets[k + 1] = piece.size
            self._level(q, 0, 0, piece.size, piece.size, 0, self.words_cap, buckets)

    def _level(self, q: _Query, level: int, tb: int, rows: int, fw: int, fr: int, top: int, buckets=None) -> None:
        """Join the ``rows`` rows of table ``level`` (d_words[tb:], row-major) through all later
        levels; the words arena is free from ``fw`` to ``top`` (tables grow up from ``fw``, a
        chunk's GBA sits below ``top``), the per-row arena from ``fr`` on. ``buckets``: where the
        rows of each bucket of the first linking edge's partition start (the table grouped by
        the segment of that edge's vertex), or None."""
        last = level + 2 == len(q.steps) + 1
        if last and self._counts_last(q):
            self._count_last(q, level, tb, rows)
            return
        a = 0
        arrays = self.row_arrays
        while a < rows:
            q.deadline.check()
            # the per-row arrays are the chunk's own unless its new table is written in parts:
            # half of what is left (the later levels need the other half then), all where no
            # later level takes per-row arrays
            left = (self.rows_cap - fr) // arrays
            m = min(rows - a, left if self._ends_chunking(q, level) else left // 2)
            if m < 1:
                raise DeviceOutOfMemory(8 * arrays, self.budget.in_use, self.budget.limit or 0,
                                        f"per-row arrays of join iteration {level + 1} (raise device_memory_limit)")
            if self.inplace is not None:
                a += self._chunk_in_place(q, level, tb, a, m, fw, fr, top)
            else:
                a += self._chunk(q, level, tb, a, m, fw, fr, top, buckets)

    def _lists(self) -> tuple:
        """The in-place kernels' view of the mapped lists: (column index, offsets, bases, stride)."""
        ip = self.inplace
        return ip.lists, ip.offsets, ip.bases, ip.stride

    def _ends_chunking(self, q: _Query, level: int) -> bool:
        """Whether the join of table ``level`` is the last one in chunks: the last step, or the
        one before a last step counted in place (which takes neither per-row arrays nor a GBA)."""
        nq = len(q.steps) + 1
        return level + 2 == nq or (level + 3 == nq and self._counts_last(q))

    def _counts_last(self, q: _Query) -> bool:
        """Whether the last join step is counted in place (:meth:`_count_last`): count-only, with
        the graph mapped (``zero_copy``)."""
        return not q.collect and self.inplace is not None

    def _count_last(self, q: _Query, level: int, tb: int, rows: int) -> None:
        """The last join step of a count-only query, every linking edge's lists read in place: a
        warp per row of table ``level`` counts the row's extensions, so the step needs neither
        a GBA nor chunks. Launches of COUNT_ROWS rows, the count read back after each (the
        deadline and ``limit`` checked between them)."""
        vertex, e0, e_hi, _edges = q.steps[level]
        width = level + 1
        tab = self._view(self.d_words, tb, self.words_cap)
        sk, T, clock = self.sgsi_kernels, self.block_threads, q.clock
        tally = self._view(self.d_tally, TALLY_FOUND, TALLY_FOUND + 2)
        for r0 in range(0, rows, COUNT_ROWS):
            q.deadline.check()
            r1 = min(rows, r0 + COUNT_ROWS)
            with clock.comp_default.phase("kernels"):
                sk.in_place_count[grid_blocks(r1 - r0, self.warps, self.max_blocks), T](
                    tab, width, r0, r1 - r0, q.d_edges, e0, e_hi, self.d_bits, vertex * self.nwords,
                    *self._lists(), 0, tally, tally)
            with clock.comm_default.phase("d2h"):
                download(self.d_tally, self.h_tally)
            clock.bytes_d2h += self.h_tally.nbytes
            found = int(self.h_tally[TALLY_FOUND]) - q.found
            q.found += found
            q.counted_rows += r1 - r0
            q.iter_rows[level + 1] += found
            self._add_count(q, found)

    def _chunk_in_place(self, q: _Query, level: int, tb: int, a: int, m: int, fw: int, fr: int, top: int) -> int:
        """One join iteration over rows a..a+m-1 of table ``level`` with the graph read in place
        (``zero_copy``): each row's survivors counted, their offsets scanned, then found again and
        written as the new rows; no GBA, so the new table's parts are sized by the exact counts.
        Returns m."""
        vertex, e0, e_hi, _edges = q.steps[level]
        q.chunks += 1
        q.inplace_chunks += 1
        tab = self._view(self.d_words, tb, self.words_cap)
        num, P = (self._view(self.d_rows, fr + k * m, fr + (k + 1) * m) for k in range(IN_PLACE_ARRAYS))
        with q.clock.comp_default.phase("kernels"):
            self.sgsi_kernels.in_place_count[grid_blocks(m, self.warps, self.max_blocks), self.block_threads](
                tab, level + 1, a, m, q.d_edges, e0, e_hi, self.d_bits, vertex * self.nwords, *self._lists(), 1,
                num, self._view(self.d_tally, TALLY_CHUNKS, TALLY_CHUNKS + 2))
            out_rows = exclusive_scan(num, P, workspace=self.scan_ws, n=m)
        return self._emit(q, level, tab, a, m, IN_PLACE_ARRAYS * m, None, None, num, P, out_rows, 0, top - fw, fw, fr,
                          top)

    def _chunk(self, q: _Query, level: int, tb: int, a: int, m: int, fw: int, fr: int, top: int, buckets) -> int:
        """One join iteration over rows a..a+m-1 of table ``level`` (or the longest prefix whose
        GBA fits) by streaming the segments its rows reach (§6.3); returns the rows it joined. With
        ``buckets``, Algorithm 4's warp-per-row kernel runs each segment over the rows whose first
        linking vertex may lie in it."""
        clock, sk, T = q.clock, self.sgsi_kernels, self.block_threads
        vertex, e0, e_hi, edges = q.steps[level]
        col0, part0, lab0 = edges[0]
        width = level + 1
        nq = len(q.steps) + 1
        last = level == nq - 2
        q.chunks += 1
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
            sk.bounds[tg, T](tab, width, a, m, q.d_edges, e0, e_hi, self.d_deg, self.deg_rows, self.d_part_max,
                             self.n, q.cap[level], counts, Fx, num, self.d_seg_lo, self.d_seg_hi,
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
        gba_room = (avail - slots) if last and not q.collect else (avail - slots) // 2
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
            q.gba_splits += 1
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
            w1, w3 = self._thresholds(q, Fx, m, tg)           # SGSI+: one histogram copy per chunk

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
                counts, self.d_qcount, q.d_edges, 0, 0, self.d_loads, 0)
            if self.load_balance is not False and seg.max_list > w1:
                bk.heavy[wg, T, stream](tab, width, a, seg.sid, col0, lab0, self.d_bits, ubase, at, gba, out, self.n,
                                        PCSR, meta, slot, slot, meta, slot, slot, counts,
                                        self.d_qcount, q.d_edges, 0, 0, cache, self.d_loads, 0)
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
        return self._emit(q, level, tab, a, m, ROW_ARRAYS * alloc, gba, F, num, P, out_rows, total, avail, fw, fr, top)

    def _emit(self, q: _Query, level, tab, a, m, row_words, gba, F, num, P, out_rows, total, avail, fw, fr, top) -> int:
        """A chunk's ``out_rows`` new rows (``num`` per row, ``P`` their offsets; the survivors in
        the GBA, or with ``gba`` None found again in place; the chunk's per-row arrays take
        ``row_words`` from ``fr``): counted at the last level of a count-only query, else written
        whole or in parts that fit, each joined on. Returns m."""
        clock = q.clock
        width = level + 1
        nq = len(q.steps) + 1
        last = level == nq - 2
        q.iter_rows[level + 1] += out_rows
        if out_rows == 0:
            return m
        if last and not q.collect:
            self._add_count(q, out_rows)
            return m
        # the new table grows up from fw, below the GBA if any (the slots are free again); written whole,
        # the GBA and per-row arrays are free again for the later levels, and it may take
        # TABLE_SHARE of the room (the rest for them), all of it where no later level chunks
        room = avail - max(total, 1)
        room_rows = (room if self._ends_chunking(q, level) else int(room * TABLE_SHARE)) // (width + 1)
        if out_rows <= room_rows:
            self._write(q, level, tab, a, 0, m, gba, F, num, P, 0, out_rows, fw, fr, top)
            return m
        # the new table in parts that fit, each joined by the next level before the next part
        P_h = download(P, np.empty(m, np.int64))
        n_h = download(num, np.empty(m, np.int64))
        clock.bytes_d2h += 16 * m
        ends = P_h + n_h
        i0 = 0
        q.table_parts += 1
        while i0 < m:
            i1 = int(np.searchsorted(ends, P_h[i0] + room_rows, side="right"))
            if i1 <= i0:
                raise DeviceOutOfMemory(4 * (width + 1) * int(n_h[i0]), self.budget.in_use, self.budget.limit or 0,
                                        f"one row's output of join iteration {level + 1} (raise device_memory_limit)")
            q.deadline.check()
            self._write(q, level, tab, a, i0, i1, gba, F, num, P, int(P_h[i0]), int(ends[i1 - 1] - P_h[i0]), fw,
                        fr + row_words, top - max(total, 1))
            i0 = i1
        return m

    def _thresholds(self, q: _Query, bounds, m: int, tg: int) -> tuple[int, int]:
        """(W1, W3) of the chunk: SGSI+'s cost model over the histogram of the rows' ``bounds``
        |N(v', l0)| (one small copy back), else GSI's thresholds (none without load balance)."""
        if self.load_balance == "histogram":
            fill(self.d_hist, 0)
            self.balanced.histogram[tg, self.block_threads](bounds, m, self.d_hist)
            download(self.d_hist, self.h_hist)
            q.clock.bytes_d2h += self.h_hist.nbytes
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

    def _write(self, q: _Query, level, tab, a, i0, i1, gba, F, num, P, p0, rows, fo, fr, top) -> None:
        """Rows i0..i1-1's outputs (``rows`` rows) as table level+1 at d_words[fo:], then joined on
        with the arenas free from ``fr`` and between the table's end and ``top`` (or, at the last
        level, copied to the host)."""
        width = level + 1
        out = self._view(self.d_words, fo, self.words_cap)
        wg = grid_blocks(i1 - i0, self.warps, self.max_blocks)
        sk, T, clock = self.sgsi_kernels, self.block_threads, q.clock
        last = level + 2 == len(q.steps) + 1
        col, part = q.steps[level + 1][3][0][:2] if not last else (0, 0)
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
            self._level(q, level + 1, fo, rows, fo + rows * (width + 1), fr, top, buckets)
            return
        with clock.comp_default.phase("kernels"):
            if gba is None:
                vertex, e0, e_hi, _ = q.steps[level]
                sk.in_place_write[wg, T](tab, width, a, i0, i1, q.d_edges, e0, e_hi, self.d_bits,
                                         vertex * self.nwords, *self._lists(), P, p0, out,
                                         self._view(self.d_tally, TALLY_CHUNKS + 1, TALLY_CHUNKS + 2))
            else:
                sk.link_part[wg, T](tab, width, a, i0, i1, gba, F, num, P, p0, out)
        if last:
            host = np.empty((rows, width + 1), np.int32)
            with q.clock.comm_default.phase("d2h"):
                download(out, host.reshape(-1))
            q.clock.bytes_d2h += host.nbytes
            self._finish(q, host)
            self._add_count(q, rows)
            return
        self._level(q, level + 1, fo, rows, fo + rows * (width + 1), fr, top)
