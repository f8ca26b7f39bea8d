"""The GSI engine (registry name ``"gsi"``): GSI's filter-then-join pipeline (Zeng et al., ICDE
2020 §III-VI) on the shared graph layer, with the paper's ablations as constructor options.

    engine = GSI().prepare(data)                   # GSI-opt; GSI(structure="csr", ...) for ablations
    result = engine.match(query, limit=None, collect=False, timeout_s=10)

Per query: one launch filters every query vertex into a candidate bitset (:mod:`gsi.filter`,
§IV), the join order and linking edges are chosen on the host (:mod:`gsi.order`), and each join
iteration runs the Prealloc-Combine kernels of :mod:`gsi.join` (§V; load balance and duplicate
removal in :mod:`gsi.balance`, §VI). A query whose tables stay small joins every level in one
launch of one block (:mod:`gsi.fused`). Data-side state is built in :meth:`GSI.prepare`; buffers
come from a :class:`BufferPool` and only grow.

Beyond the released GSI: up to 64 query vertices; a buffer that cannot grow inside
``device_memory_limit`` makes the iteration run over slices of the current table (status ``oom``
only when one row's buffer cannot fit); without ``collect`` the last iteration only counts.
``timeout_s`` is checked before every slice of every level; with a deadline each level's slices
are sized so that its own kernels take about ``SLICE_SECONDS``. docs/decisions.md gives the
reasons for the one-launch join and the slice sizes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from common.engine.base import Engine
from common.engine.deadline import Deadline, Stop
from common.engine.result import MatchResult, Status
from common.errors import DeviceOutOfMemory
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.copies import download, fill, upload
from common.gpu.grid import grid_blocks
from common.gpu.pool import BufferPool
from common.gpu.runtime import simulator_active
from common.gpu.scan import exclusive_scan
from common.gpu.timers import PhaseTimer
from common.graph.model import Graph

from . import balance
from .filter import FILTERS, filter_kernel, make_compact_kernel, signature_table
from .fused import OUT_COUNT, OUT_ITER, OUT_JOINED, OUT_LEVEL, OUT_ROWS, OUT_SIZE, STEP_FIELDS, make_fused_kernel
from .join import CELL_GBA, CELL_OUT, CELLS, EDGE_FIELDS, LOAD_CLASSES, MAX_QUERY_VERTICES, make_kernels
from .layout import QI_EDGES, QI_IN, QI_LAB, QI_OUT, QI_SIG, QI_SIZE, QI_STEPS, query_info
from .order import SCORES, join_plan
from .pcsr import STRUCTURES, build_index

OUTPUTS = ("prealloc-combine", "two-step")
SET_OPS = ("naive", "gpu-friendly")
LOAD_BALANCE = (False, True, "histogram")

_SIM = simulator_active()
DEFAULT_BLOCK_THREADS = 64 if _SIM else 256
DEFAULT_MAX_BLOCKS = 2 if _SIM else 4096
# Initial join-buffer sizes (they grow on demand inside the memory budget).
DEFAULT_ROWS = 1 << 10 if _SIM else 1 << 20
DEFAULT_GBA = 1 << 12 if _SIM else 1 << 24
#: With a deadline: target seconds of one join slice (``_run_level``), on either backend.
SLICE_SECONDS = 0.05
#: With a deadline: rows of a level's first join slice (a simulated row is slow, a GPU's cheap: a
#: table of up to this many rows stays one slice, one launch per iteration; smaller first slices
#: cost heavy queries more launches and host round trips than their deadline gains).
FIRST_SLICE_ROWS = 1 if _SIM else 1 << 16
#: Tables of at most this many rows per block thread run their scans in one block (one launch,
#: the total left on the device): ``counts_scan`` and ``scan_link``.
SINGLE_BLOCK_ROUNDS = 16
#: ``scan_link`` also links when the new table has at most this many rows per block thread.
LINK_FUSE_ROUNDS = 64
#: Warps of the one-launch join's block (its kernel is held to 64 registers: 12 bytes spilled on sm_90).
FUSE_WARPS = 2 if _SIM else 32
#: Default ``fuse_rows``: rows per warp of a table whose remaining levels run in one launch.
FUSE_ROWS_PER_WARP = 8
#: The one-launch join stops before a level whose GBA has more than this many elements per row
#: of ``fuse_rows`` (a level's work in one block stays about that of ``fuse_rows`` light rows).
FUSE_GBA_PER_ROW = 16
#: The largest pooled join buffer (a table, GBA, a per-row array), whatever the card holds: a
#: level whose buffer would pass it runs over slices of its table, as under a memory limit
#: (docs/decisions.md, "GSI's join buffers at the default").
BUFFER_CAP_BYTES = 4 << 30
#: After a query, a pool that holds more than this goes back to its prepare-time buffers, so an
#: idle engine holds about its data-graph state (another engine in the process can grow).
POOL_KEEP_BYTES = 1 << 30



@dataclass
class _Query:
    """One query's join state (GSI keeps none on the engine)."""

    nq: int
    limit: int | None
    collect: bool
    deadline: Deadline
    slice_rows: list            # per level: rows of its next join slice (0: no slicing)
    plan: object = None
    count: int = 0
    rows_out: list = field(default_factory=list)
    iter_rows: list = field(default_factory=list)
    iter_gba: list = field(default_factory=list)
    chunks: int = 0
    nested_s: list = field(default_factory=list)    # per level: seconds of the current slice in later levels
    fit_rows: list = field(default_factory=list)    # per level: rows of the last slice memory allowed (0: any)
    fuse: bool = True          # small tables may go to the one-launch join (off once it refused a level)



def first_slice(timeout_s: float | None) -> int:
    """Rows of a query's first join slice: :data:`FIRST_SLICE_ROWS` with a deadline, else 0
    (no slicing: each iteration takes its whole table, as far as memory allows)."""
    return 0 if timeout_s is None else FIRST_SLICE_ROWS


def adapt_slice(rows: int, took: float) -> int:
    """Join slice (rows) after one whose kernels took ``took`` seconds (read back, so the time
    is the device's too): quadrupled under a quarter of :data:`SLICE_SECONDS`, doubled under it,
    halved above twice that."""
    if took < SLICE_SECONDS / 4:
        return 4 * rows
    if took < SLICE_SECONDS:
        return 2 * rows
    if took > 2 * SLICE_SECONDS:
        return max(1, rows // 2)
    return rows

class GSI(Engine):
    """GSI (Zeng et al., ICDE 2020); the defaults are GSI-opt.

    Load balance and duplicate removal act on the Prealloc-Combine first-edge kernel with
    GPU-friendly set operations, where the paper applies them; with ``set_ops="naive"`` or
    ``output="two-step"`` they have no effect, as in the paper's GSI-b / +DS / +PC columns.
    Stats of every result: ``candidate_sizes``, ``order``, ``rows_per_iteration`` (the last =
    embeddings) and ``slices`` (join launches over table slices).

    Parameters
    ----------
    filter : {"label", "degree", "signature"}
        Candidate filter: labels, labels and degrees, or GSI's vertex signatures (Table IV).
    structure : {"csr", "br", "cr", "pcsr"}
        Neighbour structure of the data graph (Tables V-VI).
    output : {"prealloc-combine", "two-step"}
        Join output: one pass into preallocated space, or join-twice (Table V).
    set_ops : {"naive", "gpu-friendly"}
        A kernel per set operation and a thread per row, or the warp-per-row set operations (§V).
    write_cache : bool
        The 128-byte per-warp write cache (Table VII).
    load_balance : {False, True, "histogram"}
        Split heavy rows by the thresholds ``w1``/``w3`` (§VI), or by SGSI's cost model.
    duplicate_removal : bool
        Share N(v, l) reads among a block's rows (Algorithm 5).
    order_score : {"paper", "code"}
        Join-order score as the paper states it or as the released code computes it (:mod:`gsi.order`).
    w1, w3 : int
        Load-balance thresholds (§VI-A): a row with more work than ``w1`` is queued for the grid, one
        above ``w3`` goes to its block's task pool, the rest get a warp each.
    instrument : bool
        Count global-memory load requests into stats (``loads_*``), with GBA sizes per iteration; adds
        atomics and host round trips, so time without it.
    block_threads, max_blocks : int
        Launch shape of the join kernels.
    initial_rows, initial_gba : int
        First sizes of the join buffers (rows of the per-row arrays, elements of GBA); they grow.
    fuse_rows : int or None
        Tables of at most this many rows join in one launch of one block (:mod:`gsi.fused`); None:
        ``FUSE_ROWS_PER_WARP`` per warp; 0: level by level throughout.
    device_memory_limit : int or None
        Device-memory budget in bytes; buffers that cannot grow inside it make the join run in slices.
    """

    name = "gsi"
    limitations = {"homomorphic": "GSI's join keeps embeddings injective (GSI §V)",
                   "disconnected": "GSI joins along query edges from one start vertex (GSI §IV)"}
    contract_notes = {"simulator_peak": "the simulator's small starting join buffers grow on the first run of a "
                                        "query (to twice what it needs), so its first run peaks higher than its "
                                        "later runs"}
    kernel_packages = ("gsi", "common")
    max_query_vertices = MAX_QUERY_VERTICES

    def __init__(self, *, filter: str = "signature", structure: str = "pcsr",
                 output: str = "prealloc-combine", set_ops: str = "gpu-friendly",
                 write_cache: bool = True, load_balance: bool | str = True,
                 duplicate_removal: bool = True, order_score: str = "paper",
                 w1: int = balance.W1, w3: int = balance.W3, instrument: bool = False,
                 block_threads: int = DEFAULT_BLOCK_THREADS, max_blocks: int = DEFAULT_MAX_BLOCKS,
                 initial_rows: int = DEFAULT_ROWS, initial_gba: int = DEFAULT_GBA,
                 fuse_rows: int | None = None, device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        for opt, value, allowed in (("filter", filter, FILTERS), ("structure", structure, STRUCTURES),
                                    ("output", output, OUTPUTS), ("set_ops", set_ops, SET_OPS),
                                    ("load_balance", load_balance, LOAD_BALANCE),
                                    ("order_score", order_score, SCORES)):
            if value not in allowed or (opt == "load_balance" and not isinstance(value, (bool, str))):
                raise ValueError(f"unknown {opt} {value!r}; choose one of {allowed}")
        if block_threads % 32 or not 32 <= block_threads <= 1024:
            raise ValueError(f"block_threads must be a multiple of 32 in 32..1024, got {block_threads}")
        if not 32 < w3 < w1:
            raise ValueError(f"load-balance thresholds need 32 < w3 < w1, got w3={w3}, w1={w1}")
        self.filter, self.structure, self.output, self.set_ops = filter, structure, output, set_ops
        self.write_cache = bool(write_cache)
        self.load_balance = load_balance
        self.duplicate_removal = bool(duplicate_removal)
        self.order_score = order_score
        self.w1, self.w3 = int(w1), int(w3)
        self.instrument = bool(instrument)
        self.block_threads, self.max_blocks = int(block_threads), int(max_blocks)
        self.initial_rows, self.initial_gba = max(1, int(initial_rows)), max(1, int(initial_gba))
        if fuse_rows is not None and int(fuse_rows) < 0:
            raise ValueError(f"fuse_rows must be >= 0, got {fuse_rows}")
        self.fuse_rows = FUSE_ROWS_PER_WARP * FUSE_WARPS if fuse_rows is None else int(fuse_rows)
        if (output != "prealloc-combine" or set_ops != "gpu-friendly" or load_balance == "histogram"
                or instrument):
            self.fuse_rows = 0


    # ------------------------------------------------------------------ prepare
    def _prepare(self, data: Graph) -> None:
        self.budget = budget = DeviceMemoryBudget(self.device_memory_limit)
        self.pool = BufferPool(budget, prefix="gsi ")
        n = data.num_vertices
        self.n = n
        self.nwords = (n + 31) // 32
        self.index = build_index(data, self.structure)
        self.d_index = self.index.to_device(budget)
        sig = signature_table(data, column_first=True) if self.filter == "signature" else np.zeros(1, np.int32)
        self.d_sig = budget.to_device(sig, what="signature table")
        self.d_labels = budget.to_device(np.ascontiguousarray(data.labels, np.int32), what="labels")
        out_deg = data.degrees
        in_deg = np.diff(data.in_csr[0]).astype(np.int32) if data.directed else out_deg
        self.d_out_deg = budget.to_device(np.ascontiguousarray(out_deg, np.int32), what="out-degrees")
        self.d_in_deg = budget.to_device(np.ascontiguousarray(in_deg, np.int32), what="in-degrees")
        self.d_bits = budget.device_array(max(1, MAX_QUERY_VERTICES * self.nwords), np.uint32, what="candidate bitsets")
        self.d_sizes = budget.device_array(MAX_QUERY_VERTICES, np.int64, what="candidate sizes")
        self.d_qinfo = budget.device_array(QI_SIZE, np.int32, what="query info")
        self.d_loads = budget.zeros(len(LOAD_CLASSES), np.int64, what="load counters")
        self.d_cells = budget.zeros(CELLS, np.int64, what="join totals")
        self.h_cells = np.zeros(CELLS, np.int64)
        self.h_qinfo = np.zeros(QI_SIZE, np.int32)
        self.h_sizes = np.zeros(MAX_QUERY_VERTICES, np.int64)
        self.total_edges = int(data.neighbors.size)
        self.warps = self.block_threads // 32
        self.kernels = make_kernels(self.warps)
        self.compact = make_compact_kernel(self.block_threads)
        self.lb = balance.LoadBalancer(budget, warps=self.warps, load_balance=self.load_balance, w1=self.w1,
                                       w3=self.w3, duplicate_removal=self.duplicate_removal,
                                       write_cache=self.write_cache, max_blocks=self.max_blocks,
                                       instrument=self.instrument)
        self._table_levels: set[int] = set()
        self._rows_cap = 0
        self._grow_table(0, max(n, 1))
        self._grow_rows(max(self.initial_rows, self.fuse_rows), 0)
        self._grow_gba(self.initial_gba, 0)
        if self.fuse_rows:
            self._reserve_one_launch_join(budget)

    def _reserve_one_launch_join(self, budget) -> None:
        """The one-launch join's two tables and result cells; where the limit leaves no room for
        them after the per-row arrays and the GBA (which take what the budget allows), the
        engine runs without the one-launch join (``fuse_rows`` 0) instead of failing."""
        self.region_elems = self.fuse_rows * MAX_QUERY_VERTICES
        held = []
        try:
            for what in ("one-launch join table 0", "one-launch join table 1"):
                held.append(budget.device_array(self.region_elems, np.int32, what=what))
            self.d_fused_out = budget.device_array(OUT_SIZE, np.int64, what="one-launch join result")
        except DeviceOutOfMemory:
            for array in held:
                budget.free(array)
            self.fuse_rows = 0
            return
        self.d_regions = tuple(held)
        self.fused = make_fused_kernel(FUSE_WARPS)
        self.h_fused_out = np.zeros(OUT_SIZE, np.int64)

    def _release_working_memory(self) -> None:
        """After a query: a pool grown past :data:`POOL_KEEP_BYTES` goes back to the buffers
        :meth:`_prepare` made (table 0 and the one-launch join's tables stay as they are)."""
        if self.pool.nbytes <= POOL_KEEP_BYTES:
            return
        for level in sorted(lv for lv in self._table_levels if lv > 0):
            self.pool.free(f"table {level}")
            self._table_levels.discard(level)
        self.pool.free("GBA")
        self._grow_gba(self.initial_gba, 0)
        rows = max(self.initial_rows, self.fuse_rows)
        if self._rows_cap > rows:
            for name in ("counts", "F", "num", "P"):
                self.pool.free(name)
            self.pool.free_scans()
            self._rows_cap = 0
            self._grow_rows(rows, 0)

    # ------------------------------------------------------------------ buffers (BufferPool)
    def _get(self, name: str, size: int, dtype, release_above: int, cap: int = BUFFER_CAP_BYTES):
        """The pooled buffer ``name`` of at least ``size`` elements, or None if it would pass
        ``cap`` (:data:`BUFFER_CAP_BYTES`) or the budget refuses even after dropping the tables of levels
        above ``release_above`` (they hold no live rows while that level's slice is being joined)."""
        if size * np.dtype(dtype).itemsize > cap:
            return None
        for attempt in range(2):
            try:
                return self.pool.get(name, size, dtype, cap_bytes=cap)
            except DeviceOutOfMemory:
                deeper = [lv for lv in self._table_levels if lv > release_above]
                if attempt or not deeper:
                    return None
                for lv in deeper:
                    self.pool.free(f"table {lv}")
                    self._table_levels.discard(lv)
        return None

    @staticmethod
    def _targets(need: int, cap: int, floor: int = 1):
        """Capacities to try, largest first: double (or what is needed), what is needed, then
        halves of it down to one, so that a tight budget still gets a buffer to slice into."""
        yield max(need, 2 * cap, floor)
        size = need
        while size >= 1:
            yield size
            size //= 2

    def _grow_rows(self, rows: int, level: int) -> bool:
        """Per-row arrays (counts, F, num, P) and the scan workspace, for ``rows`` rows if the
        budget allows, else as many as it allows; True when ``rows`` fit."""
        if rows <= self._rows_cap:
            return True
        for target in self._targets(rows, self._rows_cap):
            arrays = [self._get(name, target, np.int64, level) for name in ("counts", "F", "num", "P")]
            scan = None
            if all(a is not None for a in arrays):
                try:
                    scan = self.pool.scan(target, np.int64)
                except DeviceOutOfMemory:
                    scan = None
            if scan is not None:
                self.d_counts, self.d_F, self.d_num, self.d_P = arrays
                self.scan_ws = scan
                self._rows_cap = min(min(a.size for a in arrays), scan.capacity)
                return self._rows_cap >= rows
            for name in ("counts", "F", "num", "P"):
                self.pool.free(name)
            self._rows_cap = 0
        raise DeviceOutOfMemory(32, self.budget.in_use, self.budget.limit or 0, "per-row join arrays")

    def _grow_gba(self, elements: int, level: int) -> bool:
        cap = self.pool.get("GBA", 1, np.int32).size if "GBA" in self.pool else 0
        if elements <= cap:
            return True
        for target in self._targets(elements, cap):
            gba = self._get("GBA", target, np.int32, level)
            if gba is not None:
                return gba.size >= elements
        raise DeviceOutOfMemory(4, self.budget.in_use, self.budget.limit or 0, "GBA")

    def _gba(self):
        return self.pool.get("GBA", 1, np.int32)

    def _table(self, level: int):
        return self.pool.get(f"table {level}", 1, np.int32)

    def _grow_table(self, level: int, rows: int) -> bool:
        width = level + 1
        cap = self._table_rows(level)
        if rows <= cap:
            return True
        # table 0 holds C(u_start), up to |V| rows, whatever the cap
        limit = BUFFER_CAP_BYTES if level else max(BUFFER_CAP_BYTES, 4 * rows)
        for target in self._targets(rows, cap, floor=1024):
            table = self._get(f"table {level}", target * width, np.int32, level, limit)
            if table is not None:
                self._table_levels.add(level)
                return table.size // width >= rows
        raise DeviceOutOfMemory(width * 4, self.budget.in_use, self.budget.limit or 0, f"table {level}")

    def _table_rows(self, level: int) -> int:
        if level not in self._table_levels or f"table {level}" not in self.pool:
            return 0
        return self._table(level).size // (level + 1)

    # ------------------------------------------------------------------ launch helpers
    def _warp_grid(self, m: int) -> int:
        return grid_blocks(m, self.warps, self.max_blocks)

    def _thread_grid(self, m: int) -> int:
        return grid_blocks(m, self.block_threads, self.max_blocks)

    def _scan(self, src, dst, m: int, want_total: bool = True) -> int:
        """Exclusive scan of src[:m] into dst[:m] with the pooled workspace; the total (-1 if not wanted)."""
        total = exclusive_scan(src, dst, workspace=self.scan_ws, n=m, want_total=want_total)
        return -1 if total is None else total

    def _cells(self) -> np.ndarray:
        """The totals single-block kernels left on the device (one copy back)."""
        return download(self.d_cells, self.h_cells)

    # ------------------------------------------------------------------ match
    def _filter(self, query: Graph, nq: int) -> np.ndarray:
        """Query info to the device, one filter launch into the candidate bitsets; |C(u)|."""
        qi = query_info(self.h_qinfo, query, nq, self.filter == "signature")
        upload(self.d_qinfo, qi[:QI_STEPS])
        fill(self.d_sizes, 0)
        blocks = grid_blocks(nq * self.nwords, self.warps, self.max_blocks)
        filter_kernel[blocks, self.block_threads](
            FILTERS.index(self.filter), self.n, self.nwords, nq, self.d_sig, self.d_labels, self.d_out_deg,
            self.d_in_deg, self.d_qinfo, QI_LAB, QI_OUT, QI_IN, QI_SIG, self.d_bits, self.d_sizes, 0,
            self.nwords)
        return download(self.d_sizes, self.h_sizes[:nq]).copy()

    def _plan(self, query: Graph, q: _Query, sizes: np.ndarray) -> None:
        """Algorithm 2's order and linking edges; the join steps and edges go to ``qinfo`` (one
        copy): step 0 is (u_start, 0, 0), step k (vertex, first edge, one past its last: indices
        of edge triples in ``qinfo``)."""
        qi = self.h_qinfo
        q.plan = join_plan(query, sizes, self.index.partition, self.index.partition_edges,
                           self.total_edges, self.order_score)
        qi[QI_STEPS:QI_STEPS + STEP_FIELDS] = (q.plan.order[0], 0, 0)
        pos = QI_EDGES // EDGE_FIELDS
        for k, step in enumerate(q.plan.steps, 1):
            at = QI_STEPS + k * STEP_FIELDS
            qi[at:at + STEP_FIELDS] = (step.vertex, pos, pos + len(step.edges))
            for edge in step.edges:
                qi[pos * EDGE_FIELDS:(pos + 1) * EDGE_FIELDS] = edge
                pos += 1
        upload(self.d_qinfo, qi[QI_STEPS:pos * EDGE_FIELDS], start=QI_STEPS)

    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        start_time = time.perf_counter()
        nq = query.num_vertices
        q = _Query(nq, limit, collect, Deadline(timeout_s, start_time),
                   [first_slice(timeout_s)] * nq, iter_rows=[0] * nq, iter_gba=[0] * nq, nested_s=[0.0] * nq,
                   fit_rows=[0] * nq)
        timer = PhaseTimer()
        if self.instrument:
            fill(self.d_loads, 0)
        self.lb.queued = 0
        with timer.phase("filter"):
            sizes = self._filter(query, nq)
        stats = {"candidate_sizes": sizes.tolist(), "min_candidates": int(sizes.min()), "order": [],
                 # the candidate sets as GSI keeps them here: one |V|-bit bitset per query vertex
                 "candidate_index_bytes": int(nq * self.nwords * 4),
                 "filter": self.filter, "structure": self.structure,
                 "output": self.output, "set_ops": self.set_ops, "load_balance": self.load_balance,
                 "duplicate_removal": self.duplicate_removal}
        status, reason = Status.OK, ""
        if sizes.min() == 0:
            return self._result(q, Status.OK, "", timer, stats)
        with timer.phase("plan"):
            self._plan(query, q, sizes)
            stats["order"] = list(q.plan.order)
        start_rows = int(sizes[q.plan.order[0]])
        q.iter_rows[0] = start_rows
        fused = nq > 1 and self._fusable(q, start_rows)
        if not fused:
            with timer.phase("filter"):
                self.compact[1, self.block_threads](self.d_bits, q.plan.order[0] * self.nwords, self.nwords,
                                                    self._table(0))
        with timer.phase("enumerate"):
            try:
                if nq == 1:
                    self._finish_rows(q, 0, self._table(0), start_rows)
                elif fused:
                    self._fused_join(q, 0, start_rows)
                else:
                    self._run_level(q, 0, start_rows)
            except Stop as stop:
                status, reason = stop.status, stop.reason
            except DeviceOutOfMemory as exc:
                status, reason = Status.OOM, str(exc)
        return self._result(q, status, reason, timer, stats)

    def _result(self, q: _Query, status, reason, timer, stats) -> MatchResult:
        embeddings = None
        if q.collect:
            with timer.phase("transfer"):
                rows = np.concatenate(q.rows_out) if q.rows_out else np.zeros((0, q.nq), np.int32)
                embeddings = np.empty_like(rows)
                if q.plan is not None:
                    embeddings[:, list(q.plan.order)] = rows
        stats["rows_per_iteration"] = q.iter_rows if q.plan is not None else []
        stats["slices"] = q.chunks
        if self.instrument:
            loads = self.d_loads.copy_to_host()
            for name, value in zip(LOAD_CLASSES, loads.tolist()):
                stats[f"loads_{name}"] = value
            stats["loads_total"] = int(loads.sum())
            stats["lb_queued_rows"] = self.lb.queued
            stats["gba_per_iteration"] = q.iter_gba if q.plan is not None else []
        return MatchResult(self.name, q.count, status, reason=reason, embeddings=embeddings,
                           phases=timer.seconds, peak_device_bytes=self.budget.peak, stats=stats)

    # ------------------------------------------------------------------ the join, slice by slice
    @staticmethod
    def _add_count(q: _Query, found: int) -> None:
        q.count += found
        if q.limit is not None and q.count >= q.limit:
            q.count = q.limit
            raise Stop(Status.LIMIT)

    def _finish_rows(self, q: _Query, level: int, table, rows: int) -> None:
        """Final rows: count them, and with ``collect`` copy them to the host."""
        if q.collect and rows:
            keep = rows if q.limit is None else min(rows, q.limit - q.count)
            host = download(table, np.empty((keep, level + 1), np.int32))
            q.rows_out.append(host)
        self._add_count(q, rows)

    def _fusable(self, q: _Query, rows: int) -> bool:
        """Whether a table of ``rows`` rows goes to the one-launch join (its per-row arrays hold them)."""
        return q.fuse and rows <= min(self.fuse_rows, self._rows_cap)

    def _join_from(self, q: _Query, level: int, rows: int) -> None:
        """The iterations from ``level`` (its table written, ``rows`` rows): in one launch while
        the tables are small (:meth:`_fused_join`), else level by level."""
        if self._fusable(q, rows):
            self._fused_join(q, level, rows)
        else:
            self._run_level(q, level, rows)

    def _fused_join(self, q: _Query, level0: int, rows0: int) -> None:
        """The join levels from ``level0`` (level 0: C(u_start) compacted in the same launch) in
        one launch (:mod:`gsi.fused`), then level by level from where it stopped (its table copied
        into that level's pooled table)."""
        q.deadline.check()
        compact = level0 == 0
        self.fused[1, 32 * FUSE_WARPS](
            self.d_bits, self.nwords, q.nq, self.d_qinfo, QI_STEPS, level0, rows0,
            self.d_regions[0] if compact else self._table(level0), int(compact), *self.d_regions,
            self.region_elems, self.fuse_rows, FUSE_GBA_PER_ROW * self.fuse_rows, self._rows_cap,
            self._gba().size, int(q.collect), self.d_counts, self.d_F, self._gba(), self.d_num, self.d_P, self.n,
            *self.d_index.args(), int(self.write_cache), self.d_fused_out)
        out = download(self.d_fused_out, self.h_fused_out)
        level, joined = int(out[OUT_LEVEL]), int(out[OUT_JOINED])
        q.chunks += joined
        for k in range(level0 + 1, level0 + joined + 1):
            q.iter_rows[k] += int(out[OUT_ITER + k])
        if level < 0:
            rows = int(out[OUT_COUNT])
            if q.collect:
                self._finish_rows(q, q.nq - 1, self.d_regions[(q.nq - 1) % 2], rows)
            else:
                self._add_count(q, rows)
            return
        rows = int(out[OUT_ROWS])
        if joined == 0:         # level0 itself too heavy for one block: no more tries (each costs a round trip)
            q.fuse = False
        if level > level0 or compact:               # the table is in a region: to its pooled table
            if not self._grow_table(level, rows):
                raise DeviceOutOfMemory(4 * rows * (level + 1), self.budget.in_use, self.budget.limit or 0,
                                        f"table {level}")
            elements = rows * (level + 1)
            self._table(level)[:elements].copy_to_device(self.d_regions[level % 2][:elements])
        self._run_level(q, level, rows)

    def _run_level(self, q: _Query, level: int, rows: int) -> None:
        """Extend the ``rows`` rows of table ``level`` through all later iterations.

        With a deadline, each level's slices start at :data:`FIRST_SLICE_ROWS` rows and grow
        while a slice's own kernels (the time spent in later levels left out) take under
        :data:`SLICE_SECONDS`, halving above twice that (:func:`adapt_slice`); the size a level
        learned is kept for its next table. The deadline is checked before every slice at every level, so it is overrun
        by about one slice of one level."""
        a = 0
        while a < rows:
            q.deadline.check()
            m = rows - a
            slice_rows = q.slice_rows[level]
            if slice_rows:
                m = min(m, slice_rows)
            if q.fit_rows[level]:
                m = min(m, q.fit_rows[level])
            if not self._grow_rows(m, level):
                m = self._rows_cap
            began = time.perf_counter()
            q.nested_s[level] = 0.0
            a += self._run_chunk(q, level, a, m)
            if slice_rows:
                own = time.perf_counter() - began - q.nested_s[level]
                q.slice_rows[level] = adapt_slice(slice_rows, own)

    def _split(self, q, level, a, m, offsets, sizes, capacity) -> int:
        """Run the longest prefix of rows a..a+m-1 whose buffers (exclusive ``offsets`` and
        ``sizes`` on the device) fit in ``capacity``; returns how many rows it ran. The level's
        later slices start at that many rows (``fit_rows``), so a level splits about once."""
        incl = download(offsets, np.empty(m, offsets.dtype)) + download(sizes, np.empty(m, sizes.dtype))
        j = int(np.searchsorted(incl, capacity, side="right"))
        if j == 0:
            raise DeviceOutOfMemory(int(incl[0]) * 4, self.budget.in_use, self.budget.limit or 0,
                                    f"one row of join iteration {level + 1}")
        q.fit_rows[level] = j
        return self._run_chunk(q, level, a, j)

    def _edges(self, level: int) -> tuple[int, int]:
        """Indices in ``qinfo`` of iteration ``level``'s linking edges e0 and one past its last
        (its join step, written by :meth:`_plan`)."""
        step = QI_STEPS + (level + 1) * STEP_FIELDS
        return int(self.h_qinfo[step + 1]), int(self.h_qinfo[step + 2])

    def _run_chunk(self, q: _Query, level: int, a: int, m: int) -> int:
        """One join iteration over rows a..a+m-1 of table ``level``; returns the rows it ran."""
        q.chunks += 1
        last = level + 2 == q.nq
        write = q.collect or not last
        if self.output == "prealloc-combine":
            done = self._prealloc_combine(q, level, a, m, write)
        else:
            done = self._two_step(q, level, a, m)
        if done[0] is None:
            return done[1]
        buf, boff, gba_total, out_total, linked = done
        if not linked and out_total and write and not self._grow_table(level + 1, out_total):
            return self._split(q, level, a, m, self.d_P, self.d_num, self._table_rows(level + 1))
        q.iter_rows[level + 1] += out_total
        if gba_total >= 0:
            q.iter_gba[level + 1] += gba_total
        if out_total == 0:
            return m
        if last and not q.collect:
            self._add_count(q, out_total)
            return m
        out = self._table(level + 1)
        if not linked:
            self.kernels.link[self._warp_grid(m), self.block_threads](
                self._table(level), level + 1, a, m, buf, boff, self.d_num, self.d_P, out)
        if last:
            self._finish_rows(q, level + 1, out, out_total)
        else:
            began = time.perf_counter()
            try:
                self._join_from(q, level + 1, out_total)
            finally:
                q.nested_s[level] += time.perf_counter() - began
        return m

    def _prealloc_combine(self, q: _Query, level: int, a: int, m: int, write: bool):
        """Prealloc-Combine for rows a..a+m-1: GBA offsets, the set operations, the survivors'
        offsets (and, for small tables, the new table: ``linked``). Returns (GBA, offsets, GBA
        size or -1 if not copied back, rows out, linked), or (None, rows run) after a split."""
        k, T = self.kernels, self.block_threads
        step = q.plan.steps[level]
        col0, part0, lab0 = step.edges[0]
        tab, width = self._table(level), level + 1
        idx = self.d_index.args()
        inst, loads = int(self.instrument), self.d_loads
        max_list = int(self.index.partition_max_list[part0])
        small = m <= SINGLE_BLOCK_ROUNDS * T
        # When m times the partition's longest list fits, GBA's size needs no host round trip.
        want_gba = self.instrument or m * max_list > self._gba().size
        gba_total = -1
        if small:
            k.counts_scan[1, T](tab, width, a, m, col0, part0, self.n, *idx, self.d_counts, self.d_F,
                                self.d_cells, self.lb.qcount, loads, inst)
            if want_gba:
                gba_total = int(self._cells()[CELL_GBA])
        else:
            k.row_counts[self._thread_grid(m), T](tab, width, a, m, col0, part0, self.n, *idx, self.d_counts,
                                                  self.lb.qcount, loads, inst)
            gba_total = self._scan(self.d_counts, self.d_F, m, want_total=want_gba)
        if gba_total >= 0 and not self._grow_gba(gba_total, level):
            return None, self._split(q, level, a, m, self.d_F, self.d_counts, self._gba().size)
        gba, F, num = self._gba(), self.d_F, self.d_num
        e0, e_hi = self._edges(level)
        ubase = step.vertex * self.nwords
        if self.set_ops == "naive":
            tg = self._thread_grid(m)
            # N(v', l0) ∩ C(u): the first edge e0 alone, written, the row not subtracted
            k.check_thread[tg, T](1, 0, tab, width, a, m, self.d_qinfo, e0, e0 + 1, self.d_bits, ubase, F, gba,
                                  num, self.n, *idx, loads, inst)
            k.naive_subtract[tg, T](tab, width, a, m, F, gba, num, loads, inst)
            for col, part, label in step.edges[1:]:
                k.naive_intersect[tg, T](tab, width, a, m, col, part, label, F, gba, num, self.n, *idx,
                                         loads, inst)
        elif self.lb.needed(max_list):
            self.lb.first_edge(tab, width, a, m, col0, part0, lab0, self.d_bits, ubase, F, gba, num, self.n,
                               idx, max_list, self.d_counts, self.d_qinfo, e0 + 1, e_hi, loads)
        else:
            k.first_edge[self._warp_grid(m), T](tab, width, a, m, col0, part0, lab0, self.d_bits, ubase, F,
                                                gba, num, self.n, *idx, int(self.write_cache), self.d_qinfo,
                                                e0 + 1, e_hi, loads, inst)
        bound = gba_total if gba_total >= 0 else m * max_list
        # The new table is written in the same launch when it surely fits: a table that holds the
        # bound already, or one grown to it (only without a memory limit, and only for such a
        # small bound: a table is never grown to what a level might produce, only to what it did).
        fuse_link = small and bound <= LINK_FUSE_ROUNDS * T
        if fuse_link and (not write or self._table_rows(level + 1) >= bound or (
                self.device_memory_limit is None and self._grow_table(level + 1, max(bound, 1)))):
            out = self._table(level + 1) if write else tab
            k.scan_link[1, T](tab, width, a, m, gba, F, num, self.d_P, out, self.d_cells, int(write))
            return gba, F, gba_total, int(self._cells()[CELL_OUT]), write
        return gba, F, gba_total, self._scan(num, self.d_P, m), False

    def _two_step(self, q: _Query, level: int, a: int, m: int):
        """Join-twice for rows a..a+m-1: count, scan, write (same return as _prealloc_combine)."""
        k, T = self.kernels, self.block_threads
        tab, width = self._table(level), level + 1
        idx = self.d_index.args()
        inst, loads = int(self.instrument), self.d_loads
        e0, e_hi = self._edges(level)
        ubase = q.plan.steps[level].vertex * self.nwords
        num = self.d_num

        def check(write, out):
            if self.set_ops == "naive":
                k.check_thread[self._thread_grid(m), T](write, 1, tab, width, a, m, self.d_qinfo, e0, e_hi,
                                                        self.d_bits, ubase, self.d_P, out, num, self.n, *idx,
                                                        loads, inst)
            else:
                k.check_warp[self._warp_grid(m), T](write, tab, width, a, m, self.d_qinfo, e0, e_hi,
                                                    self.d_bits, ubase, self.d_P, out, num, self.n, *idx,
                                                    int(self.write_cache), loads, inst)

        check(0, self._gba())
        out_total = self._scan(num, self.d_P, m)
        if not self._grow_gba(out_total, level):
            return None, self._split(q, level, a, m, self.d_P, num, self._gba().size)
        check(1, self._gba())
        return self._gba(), self.d_P, out_total, out_total, False
