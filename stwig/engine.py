"""The STwig engines (Lin et al. 2014): decomposition -> exploration -> hash build -> pipelined join.

    engine = STwig().prepare(data)             # STwigCPU(): the CPU baseline (registry "stwig-cpu")
    result = engine.match(query, timeout_s=10)

:class:`STwig` (registry ``stwig``) is the paper's GPU pipeline (§4), :class:`stwig.cpu.STwigCPU`
the CPU baseline; both share :class:`STwigPipeline`, which runs the steps and turns deadlines and
memory caps into statuses. Phases: **plan** (STwig decomposition, then the join order and plan
from the relations' sizes: :mod:`stwig.order`), **filter** (exploration, :mod:`stwig.explore`;
``stats["explore_s"]`` is the paper's "Other" bucket), **transfer** + **index** (the relations
copied and hashed, the paper's "(Copy &) Hash": ``stats["hash_s"]``), **enumerate** (the join,
``stats["join_s"]``). Every join launch is bounded by a step budget and saves unfinished DFS
states for the next (:mod:`stwig.join`), so ``timeout_s`` and ``limit`` are honoured within
about ``chunk_seconds``. The default match is injective; ``homomorphic=True`` is the raw
pipeline (label-preserving homomorphisms).

Statistics: ``order`` (the query vertices in the order the join plan binds them),
``candidate_sizes`` (distinct data vertices per query vertex after exploration), ``split_depth``.
:meth:`STwigPipeline.match_twigs` is :meth:`~common.engine.base.Engine.match` with a given
decomposition. The choices where the paper is silent are in docs/decisions.md ("STwig").
"""

from __future__ import annotations

import copy
import time
from abc import abstractmethod

import numpy as np

from common.engine.base import Engine
from common.engine.deadline import Deadline, Stop
from common.engine.result import MatchResult, Status
from common.errors import DeviceOutOfMemory
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.pool import BufferPool
from common.gpu.runtime import cuda, simulator_active
from common.gpu.timers import PhaseTimer
from common.graph.model import Graph

from .explore import MAX_LEAVES, CpuExplorer, GpuExplorer
from .join import JOIN_THREADS, MAX_SPLIT_LEVELS, GpuHashJoin
from .order import JoinPlan, Twig, check_twigs, compile_planning, decompose, estimated_order, join_plan

JOIN_ORDERS = ("estimate", "stwig")
#: Steps per thread of a query's first GPU join launch (~ a few ms on an H200; then adaptive).
FIRST_GPU_STEPS = 4096
#: The same in the simulator (one Python thread per CUDA thread: ~1e5x slower).
FIRST_SIMULATOR_STEPS = 256


def _candidate_sizes(twigs, rows, distinct, label_counts) -> list[int]:
    """Candidates per query vertex after exploration: the distinct values of its column in the
    latest relation holding it (its binding), 0 for the vertices of an empty relation, else
    (never explored) its label's frequency."""
    sizes = list(label_counts)
    for t, twig in enumerate(twigs):
        if t >= len(distinct):
            if rows[t] == 0:
                for x in twig.columns:
                    sizes[x] = 0
            break
        for c, x in enumerate(twig.columns):
            sizes[x] = int(distinct[t][c])
    return sizes


class STwigPipeline(Engine):
    """Shared driver of the GPU engine and the CPU baseline (see the module docstring).

    Parameters
    ----------
    join_order : {"estimate", "stwig"}
        Join order by result-size prediction, or the decomposition's order.
    max_relation_bytes : int
        Relations larger than this in all give status ``oom``.
    collect_batch_rows : int
        With ``collect``, embeddings are written in batches of at most this many rows.
    chunk_seconds : float
        Target seconds of one join launch (CPU call) while the step budget adapts.
    split_probe : bool
        Split a small R_1 into (R_1 row, matching build record) units at the first join levels;
        False: one R_1 record per thread, as the paper.
    split_rows : int or None
        R_1 counts as small below this many rows; None: 4 x the threads of a launch.
    split_levels : int
        Deepest join level the probe split goes to.
    step_budget : int or None
        Fixed DFS steps per thread and launch; None: adapted towards ``chunk_seconds``.
    device_memory_limit : int or None
        Device-memory budget in bytes; device buffers past it give status ``oom``.
    """

    limitations = {"edge_labels": "STwig decomposes vertex-labelled queries (STwig §4)",
                   "directed": "STwig matches undirected graphs (STwig §2)",
                   "disconnected": "STwig joins twigs along shared vertices (STwig §5)"}
    #: why an STwig engine may answer a deadline with OOM: a star's first relation passes
    #: ``max_relation_bytes`` (4 GiB) about when a 0.5 s deadline falls
    contract_notes = {"deadline_cap": "the star's first STwig relation passes max_relation_bytes near the deadline"}
    max_query_vertices = MAX_LEAVES + 1

    def __init__(self, *, join_order: str = "estimate", max_relation_bytes: int = 4 << 30,
                 collect_batch_rows: int = 1 << 22, chunk_seconds: float = 0.05,
                 split_probe: bool = True, split_rows: int | None = None,
                 split_levels: int = MAX_SPLIT_LEVELS,
                 step_budget: int | None = None, device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if join_order not in JOIN_ORDERS:
            raise ValueError(f"join_order must be one of {JOIN_ORDERS}, got {join_order!r}")
        self.join_order = join_order
        if int(max_relation_bytes) <= 0 or int(collect_batch_rows) <= 0 or not chunk_seconds > 0:
            raise ValueError("max_relation_bytes, collect_batch_rows and chunk_seconds must be positive")
        if step_budget is not None and int(step_budget) < 1:
            raise ValueError(f"step_budget must be positive, got {step_budget}")
        if split_rows is not None and int(split_rows) < 0:
            raise ValueError(f"split_rows must be >= 0, got {split_rows}")
        if not 1 <= int(split_levels) <= MAX_SPLIT_LEVELS:
            raise ValueError(f"split_levels must lie in 1..{MAX_SPLIT_LEVELS}, got {split_levels}")
        self.max_relation_bytes = int(max_relation_bytes)
        self.collect_batch_rows = int(collect_batch_rows)
        self.chunk_seconds = float(chunk_seconds)
        self.split_probe = bool(split_probe)
        self.split_rows = None if split_rows is None else int(split_rows)
        self.split_levels = int(split_levels)
        self.step_budget = None if step_budget is None else int(step_budget)

    # ------------------------------------------------------------------ hooks
    @abstractmethod
    def _new_join(self):
        """The join back end: GpuHashJoin or CpuHashJoin (load / count / row_counts / write)."""

    @abstractmethod
    def _timer(self):
        """A phase timer (device events for the GPU engine, wall clock for the CPU baseline)."""

    @abstractmethod
    def _first_chunk(self) -> int:
        """Units of the first collect chunk (later ones adapt to ``chunk_seconds``)."""

    @abstractmethod
    def _first_steps(self) -> int:
        """Step budget per thread of the first join launch (later ones adapt to ``chunk_seconds``)."""

    def _explore(self, twigs, query, homomorphic, deadline, timer):
        """(relations, rows, distinct): R_1..R_n in one flat int32 array (R_1 attribute-major
        first, then the build relations row-major in STwig order), the rows of each (0 past an
        empty one) and the distinct values per column of each relation up to the first empty one."""
        start = time.perf_counter()
        try:
            relations, _, rows, distinct = self._cpu_explorer.explore(
                twigs, query.labels, homomorphic=homomorphic, deadline=deadline,
                max_bytes=self.max_relation_bytes)
        finally:                      # a timeout's row must show the time it spent exploring
            timer.add("filter", time.perf_counter() - start)
        return relations, rows, distinct

    # ------------------------------------------------------------------ engine contract
    def _prepare(self, data: Graph) -> None:
        self._cpu_explorer = CpuExplorer(data)
        self._warm_up()

    def _warm_up(self) -> None:
        """Compile the planning steps and every kernel once (count and collect) with the argument
        types of real calls: a copy of this engine, with the same options, runs a triangle query
        on a triangle."""
        if getattr(self, "_is_warm_up_copy", False):
            return
        tri = Graph.from_edges(3, [0, 1, 2], [1, 2, 0], [0, 0, 0])
        compile_planning(tri, tri.label_frequencies)
        clone = copy.copy(self)
        clone._is_warm_up_copy = True
        try:
            clone.prepare(tri)
            for collect in (False, True):
                clone.match_twigs(tri, [Twig(0, (1, 2)), Twig(1, (2,))], collect=collect)
        except DeviceOutOfMemory:
            pass        # a device budget too small for a triangle: compile on first use

    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        start = time.perf_counter()
        twigs = self._given_twigs
        if twigs is None:
            twigs = decompose(query, self.data.label_frequencies)
        return self._run(query, twigs, limit, collect, timeout_s, homomorphic, start)

    _given_twigs: list[Twig] | None = None

    def match_twigs(self, query: Graph, twigs: list[Twig], *, limit: int | None = None,
                    collect: bool = False, timeout_s: float | None = None,
                    homomorphic: bool = False) -> MatchResult:
        """Match ``query`` with a given STwig decomposition (as the paper's Fig. 1 example);
        otherwise exactly :meth:`match` (the base class's checks, statuses and peak)."""
        if self.data is None:
            raise RuntimeError("match_twigs() called before prepare(data)")
        if isinstance(query, Graph):
            check_twigs(query, twigs)
        self._given_twigs = list(twigs)
        try:
            return self.match(query, limit=limit, collect=collect, timeout_s=timeout_s,
                              homomorphic=homomorphic)
        finally:
            self._given_twigs = None

    # ------------------------------------------------------------------ the pipeline
    def _run(self, query, twigs, limit, collect, timeout_s, homomorphic, start) -> MatchResult:
        deadline = Deadline(timeout_s, start)
        nq = query.num_vertices
        timer = self._timer()
        timer.add("plan", time.perf_counter() - start)
        candidates = [int(c) for c in self.data.label_frequencies[query.labels]]
        stats = {"twigs": [[t.root, *t.leaves] for t in twigs], "num_twigs": len(twigs),
                 "candidate_sizes": candidates}
        status, count, pieces, plan = Status.OK, 0, [], None
        try:
            relations, rows, distinct = self._explore(twigs, query, homomorphic, deadline, timer)
            nr1 = rows[0]
            stats["relation_rows"] = list(rows)
            stats["candidate_sizes"] = _candidate_sizes(twigs, rows, distinct, candidates)
            began = time.perf_counter()
            order = None                # the plan is made once, after exploration
            if self.join_order == "estimate" and len(distinct) == len(twigs) > 2:
                order = estimated_order(twigs, rows, distinct)
            plan = join_plan(twigs, nq, order)
            stats["join_order"] = list(plan.build_order)
            timer.add("plan", time.perf_counter() - began)
            if min(rows) == 0:
                pass
            elif len(twigs) == 1:
                status, count, pieces = self._star(relations, nr1, plan, limit, collect)
            else:
                join = self._new_join()
                join.load(plan, relations, rows, homomorphic, timer,
                          self.split_rows if self.split_probe else 0, self.split_levels)
                stats["copy_s"] = timer.seconds.get("transfer", 0.0)
                stats["split_depth"] = join.depth
                stats["join_units"] = join.units
                status, count, pieces = self._join(join, limit, collect, deadline, stats)
        except Stop as stop:                 # the deadline passed while matching STwigs
            status = stop.status
            stats["timeout_in"] = "exploration"
        if plan is None:
            plan = join_plan(twigs, nq)
        stats["order"] = [int(v) for v in plan.vertex_of_slot]
        phases = timer.seconds
        stats["explore_s"] = phases.get("filter", 0.0)
        stats["hash_s"] = phases.get("index", 0.0) + stats.get("copy_s", 0.0)
        stats["join_s"] = phases.get("enumerate", 0.0)
        embeddings = None
        if collect:
            slots = np.concatenate(pieces) if pieces else np.zeros((0, nq), np.int32)
            if limit is not None:
                slots = slots[:limit]
            embeddings = np.empty_like(slots)
            embeddings[:, plan.vertex_of_slot] = slots
        return MatchResult(self.name, count, status, embeddings=embeddings, phases=phases,
                           peak_device_bytes=self.budget.peak if self.budget is not None else 0,
                           stats=stats)

    @staticmethod
    def _star(r1, nr1, plan: JoinPlan, limit, collect):
        """One STwig: its relation R_1 is the answer (slot order = R_1's column order)."""
        count = nr1 if limit is None else min(nr1, limit)
        status = Status.LIMIT if limit is not None and nr1 >= limit else Status.OK
        pieces = []
        if collect:
            size = len(plan.twigs[0].columns) * nr1
            host = r1[:size] if isinstance(r1, np.ndarray) else r1[:size].copy_to_host()
            pieces.append(np.ascontiguousarray(host.reshape(-1, nr1).T[:count]))
        return status, count, pieces

    def _join(self, join, limit, collect, deadline, stats):
        """Bounded launches over the work units until done, ``limit`` or ``deadline`` (checked
        between launches, each of which adapts its step budget towards ``chunk_seconds``).
        Counting is one pass; ``collect`` runs chunks of units: a per-unit count pass, then
        write passes of at most ``collect_batch_rows`` results."""
        steps = self.step_budget or self._first_steps()
        launches = 0

        def run_pass(lo, hi, mode, offsets=None, rows=0, stop_at=None) -> tuple[bool, int]:
            """(finished, mode-0 count); stops early at ``stop_at`` results or the deadline."""
            nonlocal steps, launches
            join.start(lo, hi, mode, offsets, rows)
            while True:
                began = time.perf_counter()
                done, total = join.launch(steps)
                elapsed = time.perf_counter() - began
                launches += 1
                if done or (stop_at is not None and total >= stop_at):
                    return True, total
                if deadline.passed():
                    return False, total
                if self.step_budget is None:
                    if elapsed < self.chunk_seconds / 2:
                        steps = min(2 * steps, 1 << 40)
                    elif elapsed > 2 * self.chunk_seconds:
                        steps = max(64, steps // 2)

        status, count, pieces = Status.OK, 0, []
        units = join.units
        if not collect:
            finished, count = run_pass(0, units, 0, stop_at=limit)
            if limit is not None and count >= limit:
                status, count = Status.LIMIT, limit
            elif not finished:
                status = Status.TIMEOUT
        else:
            lo, chunk = 0, self._first_chunk()
            while lo < units:
                hi = min(units, lo + chunk)
                began = time.perf_counter()
                finished, _ = run_pass(lo, hi, 1)
                if finished:
                    written, finished = self._write_batches(
                        run_pass, join, lo, hi, join.unit_counts(), pieces,
                        None if limit is None else limit - count)
                    count += written
                if not finished:
                    status = Status.TIMEOUT
                    break
                elapsed = time.perf_counter() - began
                lo = hi
                if limit is not None and count >= limit:
                    status, count = Status.LIMIT, limit
                    break
                if lo < units and deadline.passed():
                    status = Status.TIMEOUT
                    break
                if elapsed < self.chunk_seconds / 2:
                    chunk *= 2
                elif elapsed > 2 * self.chunk_seconds:
                    chunk = max(self._first_chunk(), chunk // 2)
        if status is Status.TIMEOUT:
            stats["timeout_in"] = "join"
        stats["join_launches"] = launches
        return status, count, pieces

    def _write_batches(self, run_pass, join, lo, hi, counts, pieces, wanted) -> tuple[int, bool]:
        """Write the results of units [lo, hi) in batches of <= collect_batch_rows (at least the
        first ``wanted``): (results written, finished before the deadline)."""
        ends = np.cumsum(counts)
        if wanted is not None and ends.size and int(ends[-1]) > wanted:
            hi = lo + int(np.searchsorted(ends, wanted)) + 1
            counts, ends = counts[:hi - lo], ends[:hi - lo]
        written, first = 0, lo
        while first < hi:
            base = int(ends[first - lo - 1]) if first > lo else 0
            last = first + max(1, int(np.searchsorted(ends[first - lo:], base + self.collect_batch_rows,
                                                      side="right")))
            last = min(last, hi)
            rows = int(ends[last - lo - 1]) - base
            if rows:
                offsets = ends[first - lo:last - lo] - counts[first - lo:last - lo] - base
                finished, _ = run_pass(first, last, 2, offsets, rows)
                if not finished:
                    return written, False
                pieces.append(join.written())
                written += rows
            first = last
        return written, True


class STwig(STwigPipeline):
    """GPU STwig (registry ``stwig``): CPU (or GPU) exploration, GPU hash build and join.

    The options of :class:`STwigPipeline` apply too.

    Parameters
    ----------
    exploration : {"cpu", "gpu"}
        STwig exploration on the CPU, as in the paper, or as a kernel.
    threads_per_block : int
        Threads of a join block.
    blocks : int or None
        Blocks of the join; None: enough to fill the device.
    """

    name = "stwig"
    contract_notes = {**STwigPipeline.contract_notes,
                      "simulator_peak": "in the simulator, capacity kept from an earlier, larger query counts in a "
                                        "later query's peak"}
    kernel_packages = ("stwig", "common")

    def __init__(self, *, exploration: str = "cpu", threads_per_block: int = JOIN_THREADS,
                 blocks: int | None = None, **options):
        super().__init__(**options)
        if exploration not in ("cpu", "gpu"):
            raise ValueError(f"exploration must be 'cpu' or 'gpu', got {exploration!r}")
        if int(threads_per_block) < 1 or int(threads_per_block) > 1024:
            raise ValueError(f"threads_per_block must lie in 1..1024, got {threads_per_block}")
        if blocks is not None and int(blocks) < 1:
            raise ValueError(f"blocks must be positive, got {blocks}")
        self.exploration = exploration
        self.threads_per_block = int(threads_per_block)
        self.blocks = None if blocks is None else int(blocks)

    def _prepare(self, data: Graph) -> None:
        self.budget = DeviceMemoryBudget(self.device_memory_limit)
        self.pool = BufferPool(self.budget, prefix="stwig ")
        self._gpu_explorer = (GpuExplorer(data, self.budget, self.pool)
                              if self.exploration == "gpu" else None)
        self._join_state = GpuHashJoin(self.pool, self.threads_per_block, self.blocks)
        super()._prepare(data)

    def _explore(self, twigs, query, homomorphic, deadline, timer):
        if self._gpu_explorer is None:
            return super()._explore(twigs, query, homomorphic, deadline, timer)
        return self._gpu_explorer.explore(twigs, query.labels, homomorphic=homomorphic,
                                          deadline=deadline, max_bytes=self.max_relation_bytes,
                                          timer=timer)

    def _new_join(self):
        return self._join_state

    def _timer(self):
        return PhaseTimer()

    def _first_chunk(self) -> int:
        if simulator_active():
            return 64
        return 4 * self.threads_per_block * cuda.get_current_device().MULTIPROCESSOR_COUNT

    def _first_steps(self) -> int:
        return FIRST_SIMULATOR_STEPS if simulator_active() else FIRST_GPU_STEPS
