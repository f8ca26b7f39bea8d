"""EGSM engine (Sun & Luo, SIGMOD 2023): the public entry of the package.

    engine = EGSM().prepare(data)                # EGSM(variant="NoF3") etc.: the Table 4 variants
    result = engine.match(query, timeout_s=10)   # engine.match_batch(queries): a shared filter launch

Pipeline per query (§2): filter steps 1-2 (``filter.candidate_kernel``, §4), Cuckoo tries of
every directed query edge (``cuckoo_trie``, §3), the wedge filter (``filter.prune_kernel``, §4),
compaction, vertex grouping (``order.plan``, §5.3) and the hybrid BFS-DFS enumeration under the
queue budget (``enumerate.extend_kernel``, §5.4-§5.6). Load balancing (§5.6) is look-forward
splitting into a device record pool drained by the same launch (Numba has no dynamic
parallelism); look-backward splitting is not implemented.

``timeout_s`` (the paper has none) is checked between the index build's launches and before the
stages, which are queued back to back through :class:`common.gpu.watch.LaunchWatch`: it raises the
kernels' stop flag at the deadline, and a stopped query returns status ``timeout`` with the
partial count. ``match_batch`` runs filter steps 1-2 of up to ``layout.BATCH_MAX`` queries in
one launch; each query then indexes and enumerates alone with its own deadline.

Statistics (``MatchResult.stats``): ``candidate_sizes``, ``order``, ``groups``, candidate edges
per relation, candidate-index bytes, filtering seconds, ``wedge_filter_applied``, stage row
counts, whether the BFS-to-DFS fallback ran, cuckoo rebuilds. docs/decisions.md ("EGSM") gives
the choices where the paper is silent and their measurements.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from itertools import accumulate

import numpy as np

from common.engine.base import Engine
from common.engine.deadline import Deadline, Stop
from common.engine.part import Part
from common.engine.result import MatchResult, Status
from common.errors import DeviceOutOfMemory
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.copies import download, fill, upload
from common.gpu.grid import grid_blocks
from common.gpu.launch import resident_blocks
from common.gpu.pool import BufferPool
from common.gpu.runtime import cuda, simulator_active
from common.gpu.scan import exclusive_scan
from common.gpu.timers import PhaseTimer
from common.gpu.watch import LaunchWatch
from common.graph.bitmasks import bits, neighbour_masks
from common.graph.model import Graph

from . import layout as L
from .cuckoo_trie import (
    alive_kernel,
    compact_kernel,
    count_kernel,
    fill_kernel,
    insert_kernel,
    small_index_kernel,
    small_scan_kernel,
    table_sizes,
)
from .enumerate import extend_kernel
from .filter import (
    candidate_kernel,
    neighbour_label_counts,
    prune_all_kernel,
    prune_kernel,
    restrict_root_kernel,
    write_wedge_order,
)
from .layout import write_query_meta
from .order import plan as make_plan
from .order import query_shape

VARIANTS = {
    "default": {},
    "NoF3": {"wedge_filter": False},
    "DFS": {"mode": "dfs"},
    "BFS": {"mode": "bfs"},
    "Static": {"order": "static"},
    "NoLB": {"load_balance": False},
}
DEFAULT_POOL_BYTES = 6_000_000_000
SPLIT_THRESHOLD = 1024          # TH1 of the authors' code
# capacity of the split-record pool (records of REC_WIDTH int64); small in the simulator
SPLIT_RECORDS = 1024 if simulator_active() else 1 << 16
SIM_QUEUE_BYTES = 4 << 20
MAX_REBUILDS = 8
#: Hash seeds of table 0 and table 1 for each cuckoo build attempt (fixed: a query's index is
#: reproducible; drawn once, not per query, so no generator runs on the query's path).
CUCKOO_SEEDS = np.random.default_rng(0).integers(1, 2**31 - 1, size=(MAX_REBUILDS, 2))
BUILD_BLOCKS_MAX = 4096
#: Default ``wedge_filter_min_edges``: smaller candidate indexes skip the wedge filter.
WEDGE_MIN_EDGES = 1 << 15
#: Threads of the one-block wedge filter (all centres in one launch).
PRUNE_THREADS = 64 if simulator_active() else 1024
#: Largest cell count of a centre for the one-block wedge filter; above it, a launch per centre.
FUSED_PRUNE_CELLS = 8 * PRUNE_THREADS
#: Compacted lists sized by the level-3 total (an upper bound, no host read) up to this many
#: slots; above it the host reads the exact totals (one more copy, for heavy queries only).
BOUND_COMPACT_SLOTS = 16 << 20
#: Data-vertex bitmaps of one shared filter launch, at most (BATCH_MAX queries or fewer).
BATCH_MASK_WORDS = 8 << 20


def _blocks(work: int) -> int:
    return grid_blocks(work, L.BUILD_THREADS, BUILD_BLOCKS_MAX)


@dataclass
class _Query:
    """Host state of one query of a batch between the shared filter and its own search."""

    query: Graph
    meta: np.ndarray
    stats: dict = field(default_factory=dict)
    cand: list | None = None          # |C(u)| per query vertex
    level3_bound: int = 0            # Σ over directed edges (u, a) of Σ_{v in C(u)} d(v)
    centres: np.ndarray | None = None   # wedge filter: δ, then reversed δ
    shape: object = None             # order.query_shape, once computed
    filter_seconds: float = 0.0
    meta_on_device: bool = False     # d_meta holds meta[:M_CBASE] (a batch of one query)

    @property
    def nbr(self) -> np.ndarray:
        """The query's neighbour masks (a view of ``meta``)."""
        return self.meta[L.M_ADJ:L.M_ADJ + self.query.num_vertices]


class EGSM(Engine):
    """EGSM on the GPU (Numba CUDA kernels); the variants of the paper's Table 4 are options.

    Parameters
    ----------
    variant : {"default", "NoF3", "DFS", "BFS", "Static", "NoLB"}
        Table 4's variants: no wedge filter, u0 then one group, one vertex per group, static order
        inside groups, no load balancing; sets the defaults of the four options below.
    wedge_filter : bool or None
        Run the wedge filter (§4); None: the variant's choice.
    mode : {"bfs-dfs", "dfs", "bfs"} or None
        Vertex grouping of the enumeration (§5.3); None: the variant's choice.
    order : {"adaptive", "static"} or None
        Matching order inside a group (§5.4); None: the variant's choice.
    load_balance : bool or None
        Look-forward splitting of heavy levels (§5.6); None: the variant's choice.
    split_threshold : int
        TH1: a level whose s_min has more elements is split into 32-element records (§5.6).
    split_records : int
        Capacity of the split-record pool (records of 40 int64).
    wedge_filter_min_edges : int or None
        The wedge filter runs on a candidate index of at least this many level-3 entries; None:
        ``WEDGE_MIN_EDGES``; 0: always, as the paper. ``stats["wedge_filter_applied"]`` says if it ran.
    fused_index : bool
        Build a small query's index in one cooperative launch (``cuckoo_trie.small_index_kernel``);
        False: one launch per step, as the authors' code.
    queue_bytes : int or None
        Size of the cyclic partial-result queue; None: half the device-memory budget left after
        ``prepare``, at most 6 GB (the authors' pool), 4 MiB without a limit in the simulator.
    blocks : int or None
        Blocks of the enumeration kernel; None: 4 per SM (1 in the simulator).
    root_range : (int, int) or None
        The :attr:`default_part`'s: keep only the embeddings whose u0 (:meth:`EGSM.root_vertex`)
        maps into [lo, hi) (:mod:`common.engine.part`; ``match(query, part=...)`` chooses per
        call); C(u0) is restricted right after filter steps 1-2.
    device_memory_limit : int or None
        Device-memory budget in bytes; every device allocation goes through one ``DeviceMemoryBudget``.
    """

    name = "egsm"
    limitations = {"edge_labels": "EGSM's index holds vertex labels only (EGSM §4)",
                   "directed": "EGSM matches undirected graphs (EGSM §2)",
                   "homomorphic": "EGSM's search keeps embeddings injective (EGSM §5)",
                   "disconnected": "EGSM's matching order follows query edges (EGSM §5.1)"}
    contract_notes = {"simulator_launch": "the index build is one cooperative launch: the simulator runs it to its end"}
    kernel_packages = ("egsm", "common")
    max_query_vertices = L.MAXQ
    supports_parts = True                 # root ranges only: no branch parts

    def __init__(self, *, variant: str = "default", wedge_filter: bool | None = None,
                 mode: str | None = None, order: str | None = None, load_balance: bool | None = None,
                 split_threshold: int = SPLIT_THRESHOLD, split_records: int = SPLIT_RECORDS,
                 wedge_filter_min_edges: int | None = None, fused_index: bool = True,
                 queue_bytes: int | None = None, blocks: int | None = None,
                 root_range: tuple[int, int] | None = None, device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {list(VARIANTS)}, got {variant!r}")
        preset = VARIANTS[variant]
        self.variant = variant
        self.wedge_filter = bool(preset.get("wedge_filter", True) if wedge_filter is None else wedge_filter)
        self.mode = preset.get("mode", "bfs-dfs") if mode is None else mode
        self.order = preset.get("order", "adaptive") if order is None else order
        self.load_balance = bool(preset.get("load_balance", True) if load_balance is None else load_balance)
        self.wedge_filter_min_edges = WEDGE_MIN_EDGES if wedge_filter_min_edges is None else int(wedge_filter_min_edges)
        if self.wedge_filter_min_edges < 0:
            raise ValueError(f"wedge_filter_min_edges must be >= 0, got {wedge_filter_min_edges}")
        self.fused_index = bool(fused_index)
        if int(split_threshold) < 1 or int(split_records) < 1:
            raise ValueError("split_threshold and split_records must be positive")
        self.split_threshold = int(split_threshold)
        self.split_records = int(split_records)
        if self.mode not in ("bfs-dfs", "dfs", "bfs"):
            raise ValueError(f"mode must be 'bfs-dfs', 'dfs' or 'bfs', got {self.mode!r}")
        if self.order not in ("adaptive", "static"):
            raise ValueError(f"order must be 'adaptive' or 'static', got {self.order!r}")
        if queue_bytes is not None and int(queue_bytes) < 4:
            raise ValueError(f"queue_bytes must hold at least one int32, got {queue_bytes}")
        if blocks is not None and int(blocks) < 1:
            raise ValueError(f"blocks must be positive, got {blocks}")
        self.queue_bytes = None if queue_bytes is None else int(queue_bytes)
        self.blocks = None if blocks is None else int(blocks)
        self.default_part = Part(root_range=root_range)

    # ------------------------------------------------------------------ prepare
    def _prepare(self, data: Graph) -> None:
        self.budget = budget = DeviceMemoryBudget(self.device_memory_limit)
        self.pool = BufferPool(budget, prefix="egsm ")
        nlc_off, nlc_lab, nlc_cnt = neighbour_label_counts(data)
        self.d_offsets = budget.to_device(data.offsets.astype(np.int64), "data offsets")
        self.d_neighbors = budget.to_device(data.neighbors.astype(np.int32), "data neighbors")
        self.d_labels = budget.to_device(data.labels.astype(np.int32), "data labels")
        self.d_nlc_off = budget.to_device(nlc_off, "NLC offsets")
        self.d_nlc_lab = budget.to_device(nlc_lab if nlc_lab.size else np.zeros(1, np.int32), "NLC labels")
        self.d_nlc_cnt = budget.to_device(nlc_cnt if nlc_cnt.size else np.zeros(1, np.int32), "NLC counts")
        self.d_meta = budget.device_array(L.META_SIZE, np.int64, "query metadata")
        # ctrl and einfo are views of one array made once: one copy reads both, no slicing later
        self.d_state = budget.zeros(L.STATE_SIZE, np.int64, "counters and edge info")
        self.d_ctrl = self.d_state[L.S_CTRL:L.S_CTRL + L.CTRL_SIZE]
        self.d_einfo = self.d_state[L.S_EINFO:L.S_EINFO + L.EINFO_SIZE]
        self.d_stop = self.d_ctrl[L.C_STOP:L.C_STOP + 1]
        self.d_emb_dummy = budget.device_array(1, np.int32, "no embeddings")
        self.d_split = budget.to_device(   # flags 0: never a launch's epoch (they start at 1)
            np.zeros(self.split_records * L.REC_WIDTH if self.load_balance else 1, np.int64),
            "split records")
        self._epoch = 0
        sim = simulator_active()
        self.h_state = np.zeros(L.STATE_SIZE, np.int64) if sim else cuda.pinned_array(L.STATE_SIZE, np.int64)
        self.h_ctrl = self.h_state[L.S_CTRL:L.S_CTRL + L.CTRL_SIZE]
        self.h_einfo = self.h_state[L.S_EINFO:L.S_EINFO + L.EINFO_SIZE]
        if self.blocks is not None:
            self.enum_blocks = self.blocks
        elif sim:
            self.enum_blocks = 1
        else:
            self.enum_blocks = 4 * int(cuda.get_current_device().MULTIPROCESSOR_COUNT)
        if self.queue_bytes is not None:
            qbytes = self.queue_bytes
        elif budget.limit is None:
            qbytes = SIM_QUEUE_BYTES
        else:
            qbytes = min(DEFAULT_POOL_BYTES, (budget.limit - budget.in_use) // 2)
        self.d_queue = budget.device_array(max(1, qbytes // 4), np.int32, "BFS queue")
        self.data_n = data.num_vertices
        self._watch = LaunchWatch()

    def _read_ctrl(self) -> np.ndarray:
        return download(self.d_ctrl, self.h_ctrl)

    # ------------------------------------------------------------------ match
    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic, part: Part) -> MatchResult:
        return self._match_batch([query], limit=limit, collect=collect, timeout_s=timeout_s,
                                 homomorphic=homomorphic, part=part)[0]

    def _match_batch(self, queries, *, limit, collect, timeout_s, homomorphic, part: Part) -> list[MatchResult]:
        """Answer checked queries: filter steps 1-2 of up to ``BATCH_MAX`` queries in one launch
        with one copy back of every |C(u)|, then each query's index, grouping and enumeration in
        turn, each with its own deadline (started when its own search starts), peak, status,
        limit and embeddings."""
        results: list[MatchResult | None] = [None] * len(queries)
        chunk = max(1, min(L.BATCH_MAX, BATCH_MASK_WORDS // max(self.data_n, 1)))
        first = True
        for lo in range(0, len(queries), chunk):
            members = list(range(lo, min(lo + chunk, len(queries))))
            searched = [i for i in members if queries[i].num_edges > 0]
            for i in members:
                if queries[i].num_edges == 0:
                    results[i] = self._single_vertex(queries[i], limit, collect, part)
            if not searched:
                continue
            if not first:
                self.budget.reset_peak()
            first = False
            try:
                prepared = self._filter_batch([queries[i] for i in searched], part)
            except DeviceOutOfMemory as exc:
                for i in searched:
                    results[i] = MatchResult(self.name, 0, Status.OOM, reason=str(exc))
                continue
            masks_words = len(searched) * self.data_n
            for k, (i, state) in enumerate(zip(searched, prepared)):
                if k:
                    self.budget.reset_peak()
                    self.pool.get("candidate bitmaps", masks_words, np.int64)   # its share of the peak
                try:
                    results[i] = self._search(state, k * self.data_n, limit, collect, timeout_s)
                except DeviceOutOfMemory as exc:
                    results[i] = MatchResult(self.name, 0, Status.OOM, reason=str(exc))
        return results

    def _filter_batch(self, queries: list[Graph], part: Part) -> list[_Query]:
        """Filter steps 1-2 of every query in one launch (C(u0) only inside the part's root
        range); one copy back of all |C(u)| and of the candidates' degree sums (the level-3
        bound)."""
        start = time.perf_counter()
        states = []
        metas = np.zeros((len(queries), L.META_SIZE), np.int64)
        for query, meta in zip(queries, metas):
            write_query_meta(query.offsets, query.neighbors, query.labels, meta)
            states.append(_Query(query, meta, {"variant": self.variant}))
        n, b = self.data_n, len(queries)
        if b == 1:                            # the index kernels' metadata: one upload per query
            d_metas = self.d_meta
            upload(d_metas, metas[0])
            states[0].meta_on_device = True
        else:
            d_metas = self.pool.upload("batch metadata", metas.reshape(-1))
        masks = self.pool.get("candidate bitmaps", b * n, np.int64)
        d_cand = self.pool.get("candidate counts", b * L.CAND_WIDTH, np.int64)
        fill(d_cand, 0, count=b * L.CAND_WIDTH)
        candidate_kernel[_blocks(b * n), L.BUILD_THREADS](
            n, b, self.d_offsets, self.d_labels, self.d_nlc_off, self.d_nlc_lab, self.d_nlc_cnt,
            d_metas, masks, d_cand)
        root_range = part.root_range
        if root_range is not None:            # u0 only inside the root range
            for k, state in enumerate(states):
                state.shape = query_shape(state.nbr)
                u0 = state.shape.first_vertex
                restrict_root_kernel[_blocks(n), L.BUILD_THREADS](
                    n, k * n, masks, u0, root_range[0], root_range[1], d_cand, k * L.CAND_WIDTH + u0)
                state.stats["root_range"] = list(root_range)
        for state in states:                  # host work while the filter runs: the wedge order
            state.centres = write_wedge_order(state.meta)     # meta[M_DELTA:], uploaded with the index
        host = np.empty(b * L.CAND_WIDTH, np.int64)
        download(d_cand, host)
        seconds = (time.perf_counter() - start) / b
        for k, state in enumerate(states):
            row = host[k * L.CAND_WIDTH:(k + 1) * L.CAND_WIDTH]
            nq = state.query.num_vertices
            state.cand = row[:nq].tolist()
            state.level3_bound = int(state.meta[L.M_DEG:L.M_DEG + nq] @ row[L.MAXQ:L.MAXQ + nq])
            state.stats["candidate_sizes"] = list(state.cand)
            state.filter_seconds = seconds
            if b > 1:
                state.stats["batched_filter"] = b
        return states

    def _search(self, state: _Query, moff: int, limit, collect, timeout_s) -> MatchResult:
        """Index, grouping and enumeration of one filtered query (bitmaps at masks[moff:])."""
        # the deadline counts from the query's start: its share of the (batched) filter is spent
        deadline = Deadline(timeout_s, spent=state.filter_seconds)
        timer = PhaseTimer()
        timer.add("filter", state.filter_seconds)
        query, nbr, meta, stats, cand = state.query, state.nbr, state.meta, state.stats, state.cand
        nq, ne = query.num_vertices, query.neighbors.size

        def finish(count, status=Status.OK, embeddings=None, reason=""):
            phases = timer.seconds
            stats["filter_seconds"] = phases.get("filter", 0.0) + phases.get("index", 0.0)
            if "order" not in stats:        # stopped before grouping: the plan on |C(u)| |C(u')|
                rough = make_plan(nbr, np.outer(cand, cand), self.mode, state.shape)
                stats["order"] = [u for g in rough.groups for u in g]
            if collect and embeddings is None:
                embeddings = np.zeros((0, nq), np.int32)
            return MatchResult(self.name, count, status, reason=reason, embeddings=embeddings,
                               phases=phases, peak_device_bytes=self.budget.peak, stats=stats)

        if min(cand) == 0:
            return finish(0)
        if deadline.passed():
            return finish(0, Status.TIMEOUT, reason="deadline passed during the filter")
        # ---- Cuckoo tries + wedge filter (sizes in Python lists: nq <= 32) ---------------------
        buckets = table_sizes(cand)
        cells_of = [2 * L.BUCKET * int(b) for b in buckets]
        cbase = list(accumulate(cells_of, initial=0))
        pbase = list(accumulate((cells_of[u] for u in meta[L.M_ESRC:L.M_ESRC + ne].tolist()), initial=0))
        meta[L.M_CBASE:L.M_CBASE + nq + 1] = cbase
        meta[L.M_NB:L.M_NB + nq] = buckets
        meta[L.M_PBASE:L.M_PBASE + ne + 1] = pbase
        cells, pairs = cbase[-1], pbase[-1]
        rebuilds = 0
        while True:
            meta[L.M_SEED:L.M_SEED + 2] = CUCKOO_SEEDS[rebuilds]
            try:
                index = self._queue_index(meta, state.meta_on_device, state.centres, max(cells_of), cells,
                                          pairs, state.level3_bound, moff, timer, deadline)
            except Stop as stop:
                return finish(0, stop.status, reason=stop.reason)
            if state.shape is None:         # host work while the index kernels run
                state.shape = query_shape(nbr)
            built = self._read_index(index, meta)
            if built is not None:
                break
            rebuilds += 1
            if rebuilds >= MAX_REBUILDS:
                raise RuntimeError(f"cuckoo build failed {rebuilds} times for query {query.name!r}")
        total_slots, card, rel, rel_matrix = built
        stats.update(cuckoo_rebuilds=rebuilds, candidate_edges=rel,
                     wedge_filter_applied=self.wedge_filter and total_slots >= self.wedge_filter_min_edges,
                     candidate_edges_per_relation=sum(rel) / len(rel),
                     candidate_edges_before_wedge=int(total_slots),
                     candidate_index_bytes=4 * cells + 8 * (pairs + 1) + 4 * sum(rel) + 4 * sum(card))
        # ---- grouping ------------------------------------------------------------------------
        start = time.perf_counter()
        plan = make_plan(nbr, rel_matrix, self.mode, state.shape)
        stats["groups"] = [list(g) for g in plan.groups]
        stats["order"] = [u for g in plan.groups for u in g]
        if min(card) == 0:
            timer.add("plan", time.perf_counter() - start)
            return finish(0)
        masks = plan.stage_masks()
        u0 = plan.first_vertex
        first_edge = min((int(meta[L.M_EIDX + u0 * L.MAXQ + a]) for a in bits(int(nbr[u0]))),
                         key=lambda e: (card[e], e))
        timer.add("plan", time.perf_counter() - start)
        return self._enumerate(plan, masks, first_edge, card[first_edge], max(rel), nq, limit,
                               collect, deadline, timer, stats, finish)

    def root_vertex(self, query: Graph, *, homomorphic: bool = False) -> int:
        """u0, the query vertex a part's ``root_range`` restricts (the vertex itself for one vertex)."""
        if not query.num_edges:
            return 0
        return query_shape(neighbour_masks(query.offsets, query.neighbors)).first_vertex

    def _queue_index(self, meta, meta_on_device, centres, max_cells, cells, pairs, level3_bound, moff,
                     timer, deadline: Deadline):
        """Queue the launches that build all tries, run the wedge filter and compact
        (:meth:`_read_index` waits for them); returns (tries, level-3 total or None).
        ``level3_bound`` bounds the level-3 total (the candidates' degree sums): up to
        ``BOUND_COMPACT_SLOTS`` (and half the memory left) the lists are sized by it and the
        host reads nothing before the final ctrl + einfo copy. ``meta_on_device``: d_meta already
        holds meta up to M_CBASE (only the tables' sizes, the seeds and the wedge filter's order
        go). Raises :class:`~common.engine.deadline.Stop` (status ``timeout``)
        between launches once ``deadline`` has passed (host time only: no synchronisation)."""

        def check():
            deadline.check("deadline passed while building the index")

        pool, n, budget = self.pool, self.data_n, self.budget
        masks = pool.get("candidate bitmaps", moff + n, np.int64)
        bounded = level3_bound <= BOUND_COMPACT_SLOTS and (
            budget.limit is None or 12 * level3_bound < (budget.limit - budget.in_use) // 2)
        size = pairs + 1
        small = size <= L.SMALL_SCAN
        # skipped when the total is known to be under wedge_filter_min_edges (its bound, or the
        # total itself, on the host); when only the device knows it (ctrl[C_LEVEL3]), the kernels
        # compare it
        least = self.wedge_filter_min_edges
        prune = self.wedge_filter and level3_bound >= least
        with timer.phase("index"):
            if meta_on_device:
                upload(self.d_meta, meta[L.M_CBASE:], start=L.M_CBASE)
            else:
                upload(self.d_meta, meta)
            keys = pool.get("cuckoo keys", cells, np.int32)
            fill(self.d_ctrl, 0)
            fill(keys, L.EMPTY, count=cells)
            if self.fused_index and small and bounded and not prune:
                return self._queue_small_index(masks, moff, keys, cells, pairs, level3_bound), None
            insert_kernel[_blocks(n), L.BUILD_THREADS](n, moff, masks, self.d_meta, keys, self.d_ctrl)
            check()
            cnt, off, proj_pos = self._pair_arrays(size)
            off2 = pool.get("compacted offsets", size, np.int64)
            workspace = None if small else pool.scan(size, np.int64)
            count_kernel[_blocks(cells * L.WARP), L.BUILD_THREADS](
                size, pairs, self.d_meta, keys, masks, moff, self.d_offsets, self.d_neighbors, cnt)
            check()
            total_slots = None                  # known after the final copy (ctrl[C_LEVEL3])
            if small:                           # one launch, the total left in ctrl
                small_scan_kernel[1, L.SCAN_BLOCK](cnt, size, pairs, off, off, self.d_ctrl, 0)
                if not bounded:
                    total_slots = int(self._read_ctrl()[L.C_LEVEL3])
            else:
                total_slots = exclusive_scan(cnt, off, workspace=workspace, n=size)
            check()
            slots = level3_bound if total_slots is None else total_slots
            nbr = pool.get("level-3 lists", slots, np.int32)
            removed = pool.get("level-3 removed flags", slots, np.int32)
            fill_kernel[_blocks(cells * L.WARP), L.BUILD_THREADS](
                self.d_meta, keys, masks, moff, self.d_offsets, self.d_neighbors, off, nbr, removed)
            check()
        min_edges = least if total_slots is None else 0
        if prune and (total_slots is None or total_slots >= least):
            with timer.phase("filter"):
                if max_cells <= FUSED_PRUNE_CELLS:
                    prune_all_kernel[1, PRUNE_THREADS](self.d_meta, keys, cnt, off, nbr, removed, self.d_ctrl,
                                                       min_edges)
                else:
                    for u in centres:
                        cells_u = 2 * L.BUCKET * int(meta[L.M_NB + u])
                        prune_kernel[_blocks(cells_u), L.BUILD_THREADS](
                            u, self.d_meta, keys, cnt, off, nbr, removed, self.d_ctrl, min_edges)
                        check()
                check()
        with timer.phase("index"):
            exact = slots > BOUND_COMPACT_SLOTS
            if small:                       # both scans in one launch, no total needed
                small_scan_kernel[1, L.SCAN_BLOCK](cnt, size, pairs, proj_pos, off2, self.d_ctrl, 1)
                if exact:
                    ctrl = self._read_ctrl()
                    total_live, total_keys = int(ctrl[L.C_SLOTS]), int(ctrl[L.C_KEYS])
            else:
                alive = pool.get("alive pairs", size, np.int64)
                alive_kernel[_blocks(size), L.BUILD_THREADS](size, pairs, cnt, alive)
                total_keys = exclusive_scan(alive, proj_pos, workspace=workspace, n=size, want_total=exact)
                check()
                total_live = exclusive_scan(cnt, off2, workspace=workspace, n=size, want_total=exact)
            check()
            if not exact:                       # upper bounds: no host read before compaction
                total_live, total_keys = slots, pairs
            nbr2 = pool.get("compacted lists", total_live, np.int32)
            proj_keys = pool.get("compacted keys", total_keys, np.int32)
            compact_kernel[_blocks(pairs), L.BUILD_THREADS](
                pairs, self.d_meta, keys, cnt, off, nbr, removed, off2, nbr2, proj_pos,
                proj_keys, self.d_einfo)
        return (keys, off2, nbr2, proj_keys), total_slots

    def _pair_arrays(self, size):
        """The per-pair arrays of the index (``size`` = pairs + 1): level-2 counts and offsets,
        key positions."""
        pool = self.pool
        return (pool.get("level-2 counts", size, np.int32), pool.get("level-2 offsets", size, np.int64),
                pool.get("key positions", size, np.int64))

    def _queue_small_index(self, masks, moff, keys, cells, pairs, level3_bound):
        """Queue a small query's whole index as one cooperative launch (``small_index_kernel``:
        at most SMALL_SCAN pairs, lists sized by the level-3 bound, no wedge filter, so nothing
        to compact: the level-2 offsets and level-3 lists are the compacted ones); the grid covers
        the largest step (a thread per data vertex, a warp per level-1 cell) up to the blocks the
        GPU holds at once. Returns the tries."""
        pool, n = self.pool, self.data_n
        cnt, off, proj_pos = self._pair_arrays(pairs + 1)
        nbr = pool.get("level-3 lists", level3_bound, np.int32)
        removed = pool.get("level-3 removed flags", level3_bound, np.int32)
        proj_keys = pool.get("compacted keys", pairs, np.int32)
        args = (n, moff, masks, self.d_meta, keys, self.d_ctrl, pairs + 1, pairs, self.d_offsets, self.d_neighbors,
                cnt, off, nbr, removed, proj_pos, proj_keys, self.d_einfo)
        work = max(n, cells * L.WARP, pairs)
        blocks = min(resident_blocks(small_index_kernel, args, L.SCAN_BLOCK)[0], -(-work // L.SCAN_BLOCK))
        small_index_kernel[blocks, L.SCAN_BLOCK](*args)
        return keys, off, nbr, proj_keys

    def _read_index(self, queued, meta: np.ndarray):
        """Wait for :meth:`_queue_index`'s launches (one copy of ctrl + einfo); None if the
        cuckoo build failed, else (level-3 total, |π_u R(u, u')| and |R(u, u')| per directed
        edge as lists, and |R(u, u')| as a matrix for the grouping) and ``self.index`` set."""
        tries, total_slots = queued
        download(self.d_state, self.h_state)
        if self.h_ctrl[L.C_CUCKOO_FAIL]:
            return None                         # the next attempt clears the flag
        if total_slots is None:
            total_slots = int(self.h_ctrl[L.C_LEVEL3])
        einfo, nq, ne = self.h_einfo, int(meta[L.M_NQ]), int(meta[L.M_NE])
        self.index = tries
        rel = einfo[L.EI_REL:L.EI_REL + ne]
        matrix = np.zeros((nq, nq), np.int64)
        matrix[meta[L.M_ESRC:L.M_ESRC + ne], meta[L.M_EDST:L.M_EDST + ne]] = rel
        return total_slots, einfo[L.EI_CARD:L.EI_CARD + ne].tolist(), rel.tolist(), matrix

    def _enumerate(self, plan, masks, first_edge, first_card, largest_rel, nq, limit, collect,
                   deadline, timer, stats, finish):
        keys, off2, nbr2, proj_keys = self.index
        adaptive = self.order == "adaptive"
        limit_arg = 0 if limit is None else int(limit)
        emb_rows = 0
        emb = self.d_emb_dummy
        if collect:
            emb_rows = 1024 if limit is None else min(int(limit), 1 << 20)
            emb = self.pool.get("embeddings", emb_rows * nq, np.int32)
            emb_rows = emb.size // nq
        first_tasks = (first_card + L.WARP - 1) // L.WARP
        # every s_min is a level-3 list or a projection of some CT(u, a), so it has at most
        # max |R(u, a)| elements: at or below TH1 no level can split, and a warp out of main tasks
        # leaves at once instead of waiting for records that cannot come
        splits = self.load_balance and largest_rel > self.split_threshold
        split_cap = self.split_records if splits else 0
        split_threshold = self.split_threshold if splits else 0
        groups = plan.groups

        # stage 0 (GetFirstMatches, group {u0}) has exactly first_tasks warp tasks and never
        # splits: its grid is sized to them; later stages read row counts only the device knows
        first_blocks = grid_blocks(first_tasks, L.WARPS_PER_BLOCK, self.enum_blocks)

        def stage_launch(stage, slot, group_mask, mapped_before, final, fallback):
            """(kernel, grid, block, args) of one stage."""
            self._epoch += 1
            blocks = first_blocks if stage == 0 else self.enum_blocks
            return (extend_kernel, blocks, L.ENUM_THREADS,
                    (self.d_meta, self.d_einfo, keys, off2, nbr2, proj_keys, self.d_queue,
                     self.d_ctrl, emb, emb_rows, self.d_split, split_cap, split_threshold,
                     self._epoch, stage, slot, first_edge, first_tasks, group_mask, mapped_before,
                     final, fallback, limit_arg, adaptive, int(deadline.active)))

        def run(launches) -> bool:
            """Queue the stages back to back (a stage after an overflow or the stop flag leaves at
            once); True when the deadline stopped them (their output is then partial)."""
            if not deadline.active:
                for kernel, blocks, threads, args in launches:
                    kernel[blocks, threads](*args)
                return False
            return self._watch.run_all(launches, deadline.at, self.d_stop)

        with timer.phase("enumerate"):
            upload(self.d_meta, np.array(masks, np.int64), start=L.M_STAGEMASK)   # the rest is there
            before, launches = 0, []
            for s, group in enumerate(groups):
                gmask = sum(1 << u for u in group)
                launches.append(stage_launch(s, s, gmask, before, s == len(groups) - 1, False))
                before |= gmask
            timed_out = deadline.passed() or run(launches)
            ctrl = self._read_ctrl()
            overflow = int(ctrl[L.C_OVERFLOW])
            fallback_stage = -1
            if overflow and not timed_out:
                fallback_stage = overflow - 1
                before = masks[fallback_stage - 1] if fallback_stage > 0 else 0
                rest = ((1 << nq) - 1) & ~before
                if deadline.passed():
                    timed_out = True
                else:
                    timed_out = run([stage_launch(fallback_stage, L.FALLBACK_SLOT, rest, before, True, True)])
                    ctrl = self._read_ctrl()
            if ctrl[L.C_ERROR]:
                raise RuntimeError("EGSM planning error: a vertex group had no extendable vertex")
            total = int(ctrl[L.C_COUNT])
            if collect and not timed_out and total > emb_rows and (limit is None or emb_rows < limit):
                # the kernel kept counting past the buffer: rerun the last stage with room for all
                want = total if limit is None else min(total, int(limit))
                emb = self.pool.get("embeddings", want * nq, np.int32)
                emb_rows = emb.size // nq
                rerun = fallback_stage if fallback_stage >= 0 else len(groups) - 1
                slot = L.FALLBACK_SLOT if fallback_stage >= 0 else rerun
                before = masks[rerun - 1] if rerun > 0 else 0
                gmask = ((1 << nq) - 1) & ~before
                ctrl[L.C_COUNT] = 0
                ctrl[L.C_STOP] = 0
                for region in (L.C_TASK, L.C_SPLIT_RES, L.C_SPLIT_TAKE, L.C_REC_DONE, L.C_MAIN_DONE):
                    ctrl[region + slot] = 0
                upload(self.d_ctrl, ctrl)
                timed_out = run([stage_launch(rerun, slot, gmask, before, True, fallback_stage >= 0)])
                ctrl = self._read_ctrl()
                total = int(ctrl[L.C_COUNT])
        stats["stage_rows"] = ctrl[L.C_ROWS:L.C_ROWS + len(groups) - 1].tolist()
        stats["fallback_stage"] = fallback_stage
        stats["queue_bytes"] = int(self.d_queue.size * 4)
        stats["split_records"] = int(ctrl[L.C_SPLIT_RES:L.C_SPLIT_RES + L.MAXSTAGES + 2].sum())
        count = total if limit is None else min(total, int(limit))
        status = Status.OK
        if timed_out:
            status = Status.TIMEOUT
        elif limit is not None and total >= limit:
            status = Status.LIMIT
        embeddings = None
        if collect:
            with timer.phase("transfer"):
                rows = min(count, emb_rows)
                host = np.empty(rows * nq, np.int32)
                download(emb, host)
                embeddings = host.reshape(rows, nq)
        return finish(count, status, embeddings)

    def _single_vertex(self, query, limit, collect, part: Part):
        """A one-vertex query: every data vertex of its label (in the part's root range) is an
        embedding."""
        timer = PhaseTimer()
        start = time.perf_counter()
        label = int(query.labels[0])
        offsets = self.data.label_offsets
        vertices = self.data.vertices_by_label[offsets[label]:offsets[label + 1]]
        root_range = part.root_range
        if root_range is not None:
            vertices = vertices[(vertices >= root_range[0]) & (vertices < root_range[1])]
        timer.add("filter", time.perf_counter() - start)
        total = int(vertices.size)
        count = total if limit is None else min(total, int(limit))
        status = Status.LIMIT if limit is not None and total >= limit else Status.OK
        emb = vertices[:count].astype(np.int32).reshape(-1, 1) if collect else None
        return MatchResult(self.name, count, status, embeddings=emb, phases=timer.seconds,
                           peak_device_bytes=self.budget.peak,
                           stats={"variant": self.variant, "candidate_sizes": [total], "order": [0]})


__all__ = ["EGSM", "VARIANTS"]
