"""The gMatch engine (PVLDB 2026; digest papers/notes/gmatch.md): the only public entry of the package.

Pipeline per query (paper Sec. 3.1): RI order + symmetry breaking on the host (:mod:`gmatch.plan`),
LDF/NLF candidate bits on the GPU (:mod:`gmatch.candidates`), BFS seed pool
(:mod:`gmatch.balance`), then one persistent DFS launch (:mod:`gmatch.kernels`): fine-grained with
shared-memory stacks, batch exploration and intra-block work stealing, or the coarse-grained
Naive / Unroll-k baseline. The count is the number of unique embeddings times |Aut(Q)|.

Variants are constructor options (Tables 2, 5, 6, 8 and Figs. 11, 16):
``GMatch(granularity="fine"|"coarse", unroll=1|2|4|8, batch=True|False, work_stealing=True|False,
seed_pool=10**6)``. ``unroll`` is the coarse model's number of partial matches per warp step (1 =
Naive); the fine model ignores it (it takes ``roots_per_fetch`` seeds per fetch). ``batch`` and
``work_stealing`` belong to the fine model; the coarse baseline has neither (as in the paper).

CHOICES where the paper is silent:
* ``collect=True`` returns every ordered embedding: each unique embedding found is expanded by the
  explicit automorphism list (the host lists Aut(Q) only in that case). Without a limit, collecting
  runs the search twice (count, then write into an exactly sized buffer).
* ``limit`` counts ordered embeddings: the kernels stop once ceil(limit / |Aut(Q)|) unique ones are
  found (a stop flag polled by every warp each iteration when a limit is set).
* ``timeout_s``: the DFS is launched over up to 64 chunks of the seed pool with a deadline check
  between launches (and between BFS levels); without a timeout it is a single launch. A running
  launch is not interrupted, so one chunk with a heavy seed can overrun the deadline.
* Stack levels are a compile-time constant (8, 16 or 32 levels) with warps per block chosen so the
  stacks fit Numba's 48 KB static shared memory: 8, 6 and 3 warps.
"""

from __future__ import annotations

import math
import time

import numpy as np

from common.device import DeviceMemoryBudget, PhaseTimer, cuda, fill, simulator_active
from common.engine import Engine
from common.graph import Graph
from common.result import MatchResult, Status

from .balance import seed_expand, seed_level0
from .candidates import FILTER_THREADS, QP_ROWS, filter_kernel, pack_query
from .kernels import (C_COUNT, C_IDLE, C_ITERS, C_STEALS, C_STOP, CTRL_SIZE, coarse_kernel,
                      fine_kernel, reset_ctrl)
from .plan import MAX_QUERY_VERTICES, all_automorphisms, build_plan

SHARED_BUDGET = 45 * 1024          # static shared memory a fine-kernel block may use
SLOT_BYTES = 4 + 1 + 4 + 4 + 1     # mv, par, gsrc, glen, gskip per slot
LEVEL_BYTES = 32 * SLOT_BYTES + 3 * 4
SIM = simulator_active()
TIMEOUT_CHUNKS = 64                # DFS launches per query when a timeout is set


def stack_levels(n: int) -> int:
    """Compile-time stack depth for a query of n vertices."""
    for levels in (8, 16, MAX_QUERY_VERTICES):
        if n <= levels:
            return levels
    raise ValueError(f"query of {n} vertices exceeds {MAX_QUERY_VERTICES}")


def fine_warps(levels: int) -> int:
    """Warps per block of the fine kernel so that W stacks fit the shared-memory budget."""
    return max(1, min(8, SHARED_BUDGET // (levels * LEVEL_BYTES + 12)))


class GMatch(Engine):
    """gMatch: fine-grained warp DFS (or its coarse-grained baselines) over a prepared data graph."""

    name = "gmatch"
    supports_edge_labels = False
    supports_directed = False
    supports_homomorphic = False
    supports_disconnected = False
    max_query_vertices = MAX_QUERY_VERTICES

    def __init__(self, *, granularity: str = "fine", unroll: int = 1, batch: bool = True,
                 work_stealing: bool = True, seed_pool: int = 10**6, roots_per_fetch: int = 4,
                 warps_per_block: int | None = None, blocks: int | None = None,
                 symmetry_breaking: bool = True, device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        if granularity not in ("fine", "coarse"):
            raise ValueError(f"granularity must be 'fine' or 'coarse', got {granularity!r}")
        if unroll not in (1, 2, 4, 8):
            raise ValueError(f"unroll must be 1, 2, 4 or 8, got {unroll}")
        if granularity == "fine" and unroll != 1:
            raise ValueError("unroll applies to the coarse model only (granularity='coarse')")
        if int(seed_pool) < 1:
            raise ValueError(f"seed_pool must be positive, got {seed_pool}")
        if not 1 <= int(roots_per_fetch) <= 32:
            raise ValueError(f"roots_per_fetch must be in 1..32, got {roots_per_fetch}")
        if warps_per_block is not None and not 1 <= int(warps_per_block) <= 32:
            raise ValueError(f"warps_per_block must be in 1..32, got {warps_per_block}")
        if blocks is not None and int(blocks) < 1:
            raise ValueError(f"blocks must be positive, got {blocks}")
        self.granularity = granularity
        self.unroll = int(unroll)
        self.batch = bool(batch)
        self.work_stealing = bool(work_stealing) and granularity == "fine"
        self.seed_pool = int(seed_pool)
        self.roots_per_fetch = int(roots_per_fetch)
        self.warps_per_block = None if warps_per_block is None else int(warps_per_block)
        self.blocks = None if blocks is None else int(blocks)
        self.symmetry_breaking = bool(symmetry_breaking)

    # ------------------------------------------------------------------ prepare
    def _prepare(self, data: Graph) -> None:
        # Edge-labelled or directed data: the base class answers every query 'unsupported'.
        self._budget = budget = DeviceMemoryBudget(self.device_memory_limit)
        nv = data.num_vertices
        self._d_offsets = budget.to_device(np.asarray(data.offsets, dtype=np.int64), "offsets")
        self._d_neighbors = budget.to_device(np.asarray(data.neighbors, dtype=np.int32), "neighbors")
        self._d_labels = budget.to_device(np.asarray(data.labels, dtype=np.int32), "labels")
        self._d_cand = budget.device_array(max(nv, 1), np.uint32, "candidate bits")
        self._d_qp = budget.device_array((QP_ROWS, MAX_QUERY_VERTICES), np.int32, "query plan")
        self._d_ctrl = budget.zeros(CTRL_SIZE, np.int64, "control block")
        self._d_levels = budget.zeros(MAX_QUERY_VERTICES + 1, np.int64, "BFS level counters")
        self._pool_elements = max(nv + 1, 32 * self.seed_pool)
        self._d_pool = [budget.device_array(self._pool_elements, np.int32, "seed pool"),
                        budget.device_array(self._pool_elements, np.int32, "seed pool")]
        self._d_no_emb = budget.device_array((1, MAX_QUERY_VERTICES), np.int32, "no embeddings")
        self._fc = None
        self._max_degree = int(data.max_degree) if nv else 0
        self._sms = 1 if SIM else int(cuda.get_current_device().MULTIPROCESSOR_COUNT)

    # ------------------------------------------------------------------ launch shapes
    def _fine_shape(self, n: int, seeds: int) -> tuple[int, int, int]:
        levels = stack_levels(n)
        warps = self.warps_per_block or (2 if SIM else fine_warps(levels))
        per_block = warps * (levels * LEVEL_BYTES + 12)
        if self.blocks:
            blocks = self.blocks
        else:
            resident = max(1, min(64 // warps, (227 * 1024) // per_block))
            needed = math.ceil(seeds / (warps * self.roots_per_fetch))
            blocks = max(1, min(self._sms * resident, needed))
        return levels, warps, blocks

    def _coarse_shape(self, seeds: int) -> tuple[int, int]:
        warps = self.warps_per_block or (2 if SIM else 8)
        if self.blocks:
            return warps, self.blocks
        return warps, max(1, min(self._sms, math.ceil(seeds / (warps * self.unroll))))

    # ------------------------------------------------------------------ BFS seed pool
    def _seed_pool(self, n: int, deadline) -> tuple[object, int, int, bool]:
        """Fill the pool; returns (device buffer, rows, width, timed_out)."""
        nv = self.data.num_vertices
        threads = 32 if SIM else 256
        fill(self._d_levels, 0)
        blocks = max(1, min(1024, math.ceil(nv / threads)))
        cur, other = self._d_pool
        seed_level0[blocks, threads](self._d_cand, cur, self._pool_elements, self._d_levels[0:1])
        rows = int(self._d_levels[0:1].copy_to_host()[0])
        width = 1
        while width < n - 1 and 0 < rows < self.seed_pool:
            if deadline is not None and time.perf_counter() > deadline:
                return cur, rows, width, True
            capacity = self._pool_elements // (width + 1)
            counter = self._d_levels[width:width + 1]
            blocks = max(1, min(self._sms * 64, math.ceil(rows * 32 / threads)))
            seed_expand[blocks, threads](self._d_offsets, self._d_neighbors, self._d_cand, self._d_qp,
                                         cur, rows, width, other, capacity, counter)
            nxt = int(counter.copy_to_host()[0])
            if nxt > capacity:
                break
            cur, other = other, cur
            rows = nxt
            width += 1
        return cur, rows, width, False

    # ------------------------------------------------------------------ DFS
    def _dfs(self, n, pool, rows, width, emb, emb_cap, limit_unique, deadline):
        """Run the DFS over seeds [0, rows); returns (timed_out, launch stats)."""
        d = self._d_offsets, self._d_neighbors, self._d_cand, self._d_qp
        if self.granularity == "fine":
            levels, warps, blocks = self._fine_shape(n, rows)
            kernel = fine_kernel(levels, warps, self.batch, self.work_stealing, self.roots_per_fetch)
            extra = ()
            shape = {"stack_levels": levels, "warps_per_block": warps, "blocks": blocks,
                     "stack_shared_bytes": blocks * warps * levels * LEVEL_BYTES,
                     "stack_global_bytes": 0}
        else:
            warps, blocks = self._coarse_shape(rows)
            kernel = coarse_kernel(warps, self.unroll)
            capacity = max(self.unroll * max(self._max_degree, 1), 32)
            need = (blocks * warps, n, capacity)
            if self._fc is None or any(a < b for a, b in zip(self._fc[0].shape, need)):
                grow = need
                if self._fc is not None:
                    grow = tuple(max(a, b) for a, b in zip(self._fc[0].shape, need))
                    for array in self._fc:
                        self._budget.free(array)
                    self._fc = None
                self._fc = (self._budget.device_array(grow, np.int32, "coarse feasible sets"),
                            self._budget.device_array(grow, np.int32, "coarse parent indices"))
            extra = self._fc
            shape = {"warps_per_block": warps, "blocks": blocks, "stack_shared_bytes": 0,
                     "stack_global_bytes": 2 * blocks * warps * n * capacity * 4}
        chunk = rows if deadline is None else max(blocks * warps * 32, math.ceil(rows / TIMEOUT_CHUNKS))
        lo = 0
        first = True
        while lo < rows:
            if deadline is not None and time.perf_counter() > deadline:
                return True, shape
            hi = min(rows, lo + chunk)
            reset_ctrl[1, 32](self._d_ctrl, 0 if first else 1)
            first = False
            kernel[blocks, warps * 32](*d, pool, width, lo, hi, self._d_ctrl, emb, emb_cap,
                                       limit_unique, *extra)
            lo = hi
            if lo < rows and self._d_ctrl[C_STOP:C_STOP + 1].copy_to_host()[0]:
                break
        return False, shape

    def _search(self, n, limit_unique, emb_cap, deadline, timer):
        """BFS + DFS; returns (unique count, ctrl block, embeddings device array, timed_out, stats)."""
        emb = self._budget.device_array((emb_cap, n), np.int32, "embeddings") if emb_cap else self._d_no_emb
        with timer.phase("enumerate"):
            pool, rows, width, timed_out = self._seed_pool(n, deadline)
        stats = {"seeds": rows, "seed_width": width}
        ctrl = np.zeros(CTRL_SIZE, dtype=np.int64)
        if n == 1:
            ctrl[C_COUNT] = rows
            return rows, ctrl, pool, timed_out, stats
        if rows == 0 or timed_out:
            return 0, ctrl, emb, timed_out, stats
        with timer.phase("enumerate"):
            timed_out, shape = self._dfs(n, pool, rows, width, emb, emb_cap, limit_unique, deadline)
        stats.update(shape)
        with timer.phase("transfer"):
            ctrl = self._d_ctrl.copy_to_host()
        return int(ctrl[C_COUNT]), ctrl, emb, timed_out, stats

    # ------------------------------------------------------------------ match
    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic) -> MatchResult:
        start = time.perf_counter()
        deadline = None if timeout_s is None else start + timeout_s
        timer = PhaseTimer()
        n = query.num_vertices
        plan = build_plan(query, self.symmetry_breaking)
        adjacency = [query.neighbors[query.offsets[u]:query.offsets[u + 1]] for u in range(n)]
        qp = pack_query(plan, np.asarray(query.labels), adjacency)
        timer.add("plan", time.perf_counter() - start)
        aut = plan.automorphisms
        with timer.phase("filter"):
            self._d_qp.copy_to_device(qp)
            nv = self.data.num_vertices
            blocks = max(1, min(4096, math.ceil(nv / FILTER_THREADS)))
            filter_kernel[blocks, FILTER_THREADS](self._d_offsets, self._d_neighbors, self._d_labels,
                                                  self._d_qp, self._d_cand)
        limit_unique = 0 if limit is None else -(-limit // aut)
        emb_cap = 0
        if collect:
            if limit is None:
                unique, _, _, timed_out, _ = self._search(n, 0, 0, deadline, timer)
                if timed_out:
                    return self._result(timer, unique * aut, Status.TIMEOUT, np.zeros((0, n), np.int32), {})
                emb_cap = unique
            else:
                emb_cap = limit_unique
        unique, ctrl, emb, timed_out, stats = self._search(n, limit_unique, emb_cap, deadline, timer)
        total = unique * aut
        status = Status.OK
        if timed_out:
            status = Status.TIMEOUT
        elif limit is not None and total >= limit:
            status, total = Status.LIMIT, limit
        embeddings = None
        if collect:
            with timer.phase("transfer"):
                rows = emb[:min(unique, emb_cap if n > 1 else unique)].copy_to_host()
            embeddings = self._expand(plan, query, rows.reshape(-1, n), limit)
        iters = int(ctrl[C_ITERS])
        stats.update(order=plan.order.tolist(), automorphisms=aut, unique_embeddings=unique,
                     warp_iterations=iters, idle_lanes=int(ctrl[C_IDLE]),
                     idle_rate=(ctrl[C_IDLE] / (32.0 * iters)) if iters else 0.0,
                     steals=int(ctrl[C_STEALS]), granularity=self.granularity, unroll=self.unroll,
                     batch=self.batch, work_stealing=self.work_stealing, seed_pool=self.seed_pool)
        return self._result(timer, total, status, embeddings, stats)

    def _expand(self, plan, query: Graph, unique_rows: np.ndarray, limit) -> np.ndarray:
        """Ordered embeddings (column = query vertex) from unique rows (column = order position)."""
        n = plan.size
        by_vertex = np.empty_like(unique_rows)
        by_vertex[:, plan.order] = unique_rows
        sigmas = all_automorphisms(query) if self.symmetry_breaking else np.arange(n)[None, :]
        if sigmas.shape[0] != plan.automorphisms:
            raise AssertionError("automorphism count disagrees with the stabiliser chain")
        out = np.concatenate([by_vertex[:, sigma] for sigma in sigmas]) if by_vertex.size else by_vertex
        if limit is not None:
            out = out[:limit]
        return np.ascontiguousarray(out, dtype=np.int32).reshape(-1, n)

    def _result(self, timer, count, status, embeddings, stats) -> MatchResult:
        return MatchResult(self.name, int(count), status, embeddings=embeddings, phases=timer.seconds,
                           peak_device_bytes=self._budget.peak, stats=stats)
