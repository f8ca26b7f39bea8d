"""The gMatch engine (Chen et al., PVLDB 2026; docs/papers.md): the only public entry of the package.

    engine = GMatch().prepare(data)            # GMatch(granularity="coarse", unroll=4) etc.: the baselines
    result = engine.match(query, timeout_s=10) # engine.match_batch(queries): up to 256 per launch

Pipeline per query (Sec. 3.1): RI order and symmetry breaking on the host (:mod:`gmatch.order`),
LDF/NLF candidate bits on the GPU and the refined candidate graph in compact indices
(:mod:`gmatch.filter`), the BFS seed pool (:mod:`gmatch.balance`), then one persistent DFS
launch (:mod:`gmatch.enumerate`): fine-grained with shared-memory stacks, batch exploration and
work stealing in and across blocks, or the coarse-grained Naive / Unroll-k baseline. The
count is the number of unique embeddings times |Aut(Q)|; ``collect=True`` expands each unique
embedding by the automorphism list, and ``limit`` stops once ceil(limit / |Aut(Q)|) unique ones
are found. ``timeout_s`` is checked between BFS levels, and the DFS launch runs through
:class:`common.gpu.watch.LaunchWatch`, which raises a stop flag the warps poll.

The paper's gMatch is ``GMatch(candidate_graph=False, leaf_counting=False)``, which the
experiments use; the options past the paper and the choices where it is silent are in
docs/decisions.md ("gMatch"). Memory statistics: ``max_stack_bytes`` (the launch's execution
stacks), ``steal_buffer_bytes`` (the global mailbox, warp states and hand-over records) and
``seed_pool_bytes`` (the seeds the BFS left in the pool).
"""

from __future__ import annotations

import math
import time

import numpy as np

from common.engine.base import Engine
from common.engine.deadline import Deadline
from common.engine.part import WHOLE, Part, order_branch_vertices
from common.engine.result import MatchResult, Status
from common.errors import DeviceOutOfMemory
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.copies import clear_bit_outside, download, fill, upload
from common.gpu.grid import grid_blocks
from common.gpu.launch import resident_blocks
from common.gpu.pool import BufferPool
from common.gpu.runtime import cuda, simulator_active
from common.gpu.timers import PhaseTimer
from common.gpu.watch import LaunchWatch
from common.graph.model import Graph
from common.graph.roots import cuts_below_root, plan_split

from .balance import SEED_WARPS, seed_expand_kernel, seed_indices, seed_level0
from .candidate_graph import DeviceCandidateGraph
from .enumerate import (
    BIG_COUNT,
    C_CAND,
    C_COUNT,
    C_COUNT_BIG,
    C_COUNT_HI,
    C_FINISHED,
    C_GSTEALS,
    C_IDLE,
    C_ITERS,
    C_LIMIT,
    C_SEED,
    C_SEED_HI,
    C_SEED_LO,
    C_STEALS,
    C_STOP,
    CTRL_SIZE,
    LEAF_CHECKS,
    LEAF_LAST,
    LEAF_ONE,
    LEAF_OUTPUT,
    LEAF_PRODUCT,
    MAILBOX,
    STEAL_BLOCK,
    STEAL_GLOBAL,
    STEAL_MAILBOX,
    coarse_kernel,
    fine_kernel,
    start_search,
    xfer_words,
)
from .filter import (
    FILTER_THREADS,
    QP_CSIZE,
    QP_ROWS,
    QP_SIZES,
    PartGraphs,
    build_candidate_graph,
    counted_positions,
    filter_host,
    filter_kernel,
    label_sorted_adjacency,
    pack_candidate_graph,
    pack_query,
)
from .options import (
    STEALING_SCOPES,
    CountingOptions,
    HubOptions,
    IndexOptions,
    SearchOptions,
    option_attributes,
)
from .order import MAX_QUERY_VERTICES, all_automorphisms, build_plan

SHARED_BUDGET = 46 * 1024          # static shared memory a fine-kernel block may use
SLOT_BYTES = 4 + 1 + 4 + 4 + 1     # mi, par, gsrc, glen, gskip per slot
LEVEL_BYTES = 32 * SLOT_BYTES + 3 * 4
CHECKS_BYTES = 32 * LEAF_CHECKS * 4   # the last level's checks rows per warp
SIM = simulator_active()
START_BLOCKS, START_THREADS = (1, 32) if SIM else (32, 256)
SEED_THREADS = 32 if SIM else 32 * SEED_WARPS
STACK_LEVELS = (4, 8, 12, 16, 24, MAX_QUERY_VERTICES)   # compiled stack depths
POOL_START = 1 << 22               # int32 elements of each seed-pool buffer before it grows
POOL_MAX = 1 << 28                 # a BFS level needing more falls back to the previous level
DIRECT_SHARE = 0.15                # of probe_s: the probe's first stage, a DFS from the root's label range
PROBE_SEEDS = 1 << 16              # seed-pool target of the probe's second stage (BFS pool, then DFS)
PROBE_POOL_ROWS = 1 << 20          # ... whose BFS stops the probe at a level of more rows
LOOK_SHARE = 0.15                  # of probe_s: the second stage's look (on to probe_s where two looks predict its end)
RUN_ON_SHARE = 0.1                 # ... and the second predicts a launch of at most this share of probe_s
HUB_AFTER_S = 0.05                 # seconds of whole search before a hub-rooted query is cut (hub_parts)
HUB_WHOLE_S = 0.8                  # ... unless its whole launch is predicted to end within this many seconds
HUB_LOOK_AGAIN = 2.0               # a prediction up to this many times hub_whole_s is made again one slice later,
HUB_SECOND_BOUND = 1.5             # ... and then kept whole within this many times hub_whole_s
WHOLE_PREDICTION = ("hub_whole_predicted_s", "hub_whole_looks")   # statistics of a whole search's prediction
PROBE_BET = ("probe_ran_on", "probe_look1_predicted_ms", "probe_look2_predicted_ms")   # the look's run-on
PROBE_STATS = ("probe_direct_ms", "probe_look_ms", "probe_pool_ms", "probe_past_end_ms",   # the probe's stages,
               "probe_pool_rows", "probe_pool_growths", "probe_pool_overflow", *PROBE_BET)  # the look's pool
BLOCK_QUERY_SLOTS = 1 << 16        # blocks a launch may have (block -> query map entries)
BATCH_QUERIES = 256                # queries per batched launch (at most the resident blocks)


def stack_levels(n: int) -> int:
    """Compile-time stack depth for a query of n vertices (the smallest compiled depth >= n)."""
    for levels in STACK_LEVELS:
        if n <= levels:
            return levels
    raise ValueError(f"query of {n} vertices exceeds {MAX_QUERY_VERTICES}")


def leaf_step(qp, emb_cap: int, limit_unique: int) -> int:
    """The fine kernel's leaf step for a search of plan ``qp``: write or limit the matches, count
    the last position (``qp[QP_SIZES, 5]``), multiply the countable leaves (positions
    ``qp[QP_SIZES, 2]`` on), or add one per match."""
    if emb_cap or limit_unique:
        return LEAF_OUTPUT
    if qp[QP_SIZES, 5]:
        return LEAF_LAST
    if qp[QP_SIZES, 2] < qp[QP_SIZES, 0]:
        return LEAF_PRODUCT
    return LEAF_ONE


def fine_warps(levels: int) -> int:
    """Warps per block of the fine kernel so that W stacks fit the shared-memory budget."""
    return max(1, min(8, SHARED_BUDGET // (levels * LEVEL_BYTES + CHECKS_BYTES + 12)))


@option_attributes
class GMatch(Engine):
    """gMatch: fine-grained warp DFS (or its coarse-grained baselines) over a prepared data graph.

    Parameters
    ----------
    granularity : {"fine", "coarse"}
        The fine-grained warp DFS or the coarse-grained baseline (Tables 2, 5, 6).
    unroll : {1, 2, 4, 8}
        The coarse model's partial matches per warp step (1 = Naive, else Unroll-k).
    batch : bool
        Batch exploration of the fine model.
    work_stealing : {"global", "block", "mailbox", False}
        The fine model's stealing: in-block through shared memory plus the global mailbox across
        blocks (the paper's full scheme), in-block only (the authors' code), every hand-over through
        global memory, or none; True means "global".
    seed_pool : int
        Target size of the BFS seed pool; it grows when a BFS level needs more room.
    roots_per_fetch : int
        Seeds a fine-model warp takes per fetch (1..32).
    warps_per_block : int or None
        Warps of a DFS block; None: as many as the stacks' shared memory allows.
    blocks : int or None
        Blocks of the DFS launch; None: the resident grid of the compiled kernel.
    symmetry_breaking : bool
        Enumerate one embedding per automorphism class and multiply by |Aut(Q)|.
    candidate_graph : {"auto", True, False}
        Search over the refined candidate graph (Sec. 3.5): "auto" searches a labelled data graph for
        ``probe_s`` over adjacency lists first and builds it only for a query still running.
    leaf_counting : bool
        Count degree-one query vertices that every automorphism fixes per partial match instead of
        enumerating them (count-only queries over the candidate graph).
    count_last : bool
        Count the last position of a count-only query without countable leaves, where it has one
        backward neighbour, as that neighbour's candidate-graph row length below its symmetry bound
        (minus the images already used) instead of enumerating it (its own fine-kernel variant); a
        last position with several backward neighbours is enumerated.
    split_groups : bool
        Work stealing may split one task group (a hub's row) of 64 or more untouched tasks, giving
        half of it to an idle warp.
    leaf_checks : bool
        The last enumerated level tests its candidates against a row of checks (adjacency keys,
        same-label images) written once per partial match of the level above, not by walking
        up the stack per candidate (where its tests fit ``LEAF_CHECKS`` entries).
    idle_stats : bool
        Compile the idle-lane count into the fine kernel (Tables 2 and 6); the coarse one always counts.
    max_registers : int or None
        Register cap of the fine kernel; None: the compiler's choice.
    probe_s : float
        Most seconds of the data-graph probe before the candidate graph (``candidate_graph="auto"``;
        :meth:`GMatch._probe`); ``match_batch`` gives a batch ``probe_s`` per query.
    candidate_graph_build : str
        Where a whole query's candidate graph is built: ``"gpu"`` (:mod:`gmatch.candidate_graph`,
        built where the filter's bits are; the host build where its arrays do not fit) or
        ``"host"`` (:func:`gmatch.filter.build_candidate_graph`, the bits copied down and the graph
        up). A split query's parts are built on the host.
    root_range : (int, int) or None
        The :attr:`default_part`'s (``match(query, part=...)`` chooses per call,
        :mod:`common.engine.part`): keep only the seeds whose position 0
        (:meth:`GMatch.root_vertex`) maps into [lo, hi); the parts of a partition add up to the
        whole count.
    branch_part : (int, int), ((int, int), (int, int)) or None
        The :attr:`default_part`'s: ``(j, m)`` keeps only the matches whose branch vertex (the
        first of :meth:`GMatch.branch_vertices`) maps to a data vertex v with ``v % m == j``; the
        m parts add up to the whole count. ``((j, m), (k, m2))`` also keeps only those whose
        second branch vertex maps to a w with ``w % m2 == k``.
    hub_parts : int
        0: off. Else a count-only query that counts positions (``leaf_counting``, ``count_last``),
        still running after the probe, whose root has a candidate heavier than ``1/hub_parts`` of
        the estimated work (:func:`common.graph.roots.root_work`), runs as the parts of
        :func:`common.graph.roots.plan_split` one after another on this GPU, each with the
        candidate graph refined to its root range and branch part.
    hub_after_s : float
        With ``hub_parts``: the whole query is searched first for this many seconds, and only a
        query still running then (and not kept whole, ``hub_whole_s``) is counted again as parts
        (0: parts straight after the probe).
    hub_whole_s : float
        With ``hub_parts``: a whole search still running after ``hub_after_s`` runs on to its
        end when, from the share of its seeds taken so far, it is predicted to end within this
        many seconds of its launch, or, predicted within ``HUB_LOOK_AGAIN`` times that, when a
        second prediction one ``hub_after_s`` later is within ``HUB_SECOND_BOUND`` times it
        (:meth:`GMatch._whole_extension`); 0: always cut.
    batch_queries : int
        Queries per launch of ``match_batch``.
    device_memory_limit : int or None
        Device-memory budget in bytes.

    Attributes
    ----------
    search : gmatch.options.SearchOptions
        ``granularity`` .. ``max_registers``, ``batch_queries``: how the DFS is launched.
    counting : gmatch.options.CountingOptions
        ``symmetry_breaking``, ``leaf_counting``, ``count_last``.
    index : gmatch.options.IndexOptions
        ``candidate_graph``, ``probe_s``.
    hubs : gmatch.options.HubOptions
        ``hub_parts``, ``hub_after_s``, ``hub_whole_s``.
    default_part : common.engine.part.Part
        ``root_range``, ``branch_part``.

    Each option is also a read-only attribute of its own name (``engine.probe_s`` is
    ``engine.index.probe_s``); the records are validated where the constructor builds them.
    """

    name = "gmatch"
    limitations = {"edge_labels": "gMatch's candidate graph holds vertex labels only (gMatch §3)",
                   "directed": "gMatch matches undirected graphs (gMatch §2)",
                   "homomorphic": "gMatch's set intersections keep embeddings injective (gMatch §3)",
                   "disconnected": "gMatch's matching order follows query edges (gMatch §3.2)"}
    contract_notes = {"simulator_launch": "simulated warps poll the stop flag every 32 iterations of a slow DFS"}
    kernel_packages = ("gmatch", "common")
    warmup_variants = ({}, {"candidate_graph": True})   # "auto" takes it only for queries slower than its probe
    warmup_by_query_size = True                          # stack levels 4, 8, 12, 16
    max_query_vertices = MAX_QUERY_VERTICES
    supports_parts = True
    supports_branch_parts = True

    def __init__(self, *, granularity: str = "fine", unroll: int = 1, batch: bool = True,
                 work_stealing: str | bool = "global", seed_pool: int = 10**6, roots_per_fetch: int = 4,
                 warps_per_block: int | None = None, blocks: int | None = None,
                 symmetry_breaking: bool = True, candidate_graph: bool | str = "auto",
                 leaf_counting: bool = True, count_last: bool = True,
                 split_groups: bool = True, leaf_checks: bool = True, idle_stats: bool = False,
                 max_registers: int | None = 64, probe_s: float = 0.005, candidate_graph_build: str = "gpu",
                 root_range: tuple[int, int] | None = None, branch_part: tuple | None = None,
                 hub_parts: int = 8, hub_after_s: float = HUB_AFTER_S, hub_whole_s: float = HUB_WHOLE_S,
                 batch_queries: int = BATCH_QUERIES,
                 device_memory_limit: int | None = None):
        super().__init__(device_memory_limit=device_memory_limit)
        self.search = SearchOptions(granularity=granularity, unroll=unroll, batch=batch,
                                    work_stealing=work_stealing, seed_pool=seed_pool,
                                    roots_per_fetch=roots_per_fetch, warps_per_block=warps_per_block,
                                    blocks=blocks, split_groups=split_groups, leaf_checks=leaf_checks,
                                    idle_stats=idle_stats, max_registers=max_registers,
                                    batch_queries=batch_queries)
        self.counting = CountingOptions(symmetry_breaking=symmetry_breaking, leaf_counting=leaf_counting,
                                        count_last=count_last)
        self.index = IndexOptions(candidate_graph=candidate_graph, probe_s=probe_s,
                                  candidate_graph_build=candidate_graph_build)
        self.hubs = HubOptions(hub_parts=hub_parts, hub_after_s=hub_after_s, hub_whole_s=hub_whole_s)
        self.default_part = Part(root_range, branch_part)

    # ------------------------------------------------------------------ prepare
    def _prepare(self, data: Graph) -> None:
        # Edge-labelled or directed data: the base class answers every query 'unsupported'.
        self.budget = budget = DeviceMemoryBudget(self.device_memory_limit)
        self.pool = BufferPool(budget, prefix="gmatch ")
        nv = data.num_vertices
        labels = np.asarray(data.labels, dtype=np.int32)
        d_offsets = budget.to_device(np.asarray(data.offsets, dtype=np.int64), "offsets")
        d_neighbors = budget.to_device(np.asarray(data.neighbors, dtype=np.int32), "neighbors")
        self._d_labels = budget.to_device(labels, "labels")
        if SIM:
            self._host_graph = (np.asarray(data.offsets, dtype=np.int64),
                                np.asarray(data.neighbors, dtype=np.int32), labels)
        # one query's blocks (a batch of one): row 0 of each, views made once
        self._d_cands = budget.device_array((1, max(nv, 1)), np.uint32, "candidate bits")
        self._d_qps = budget.device_array((1, QP_ROWS, MAX_QUERY_VERTICES), np.int32, "query plan")
        self._d_ctrls = budget.zeros((1, CTRL_SIZE), np.int64, "control block")
        self._d_cand, self._d_qp, self._d_ctrl = self._d_cands[0], self._d_qps[0], self._d_ctrls[0]
        self._d_stop = self._d_ctrl[C_STOP:C_STOP + 1]
        self._h_ctrl = cuda.pinned_array((1, CTRL_SIZE), np.int64)
        self._h_word = cuda.pinned_array(1, np.int64)         # one counter read back
        self._h_peek = cuda.pinned_array(CTRL_SIZE, np.int64)  # a running launch's control row
        self._d_block_query = budget.zeros(BLOCK_QUERY_SLOTS, np.int32, "block-to-query map")
        # label-range seeds of the probe: vertices sorted by label, where each label starts
        by_label = np.argsort(labels, kind="stable").astype(np.int32)
        self._label_start = np.searchsorted(labels[by_label], np.arange(int(labels.max(initial=0)) + 2))
        self._d_vertices_by_label = budget.to_device(by_label if nv else np.zeros(1, np.int32),
                                                     "vertices by label")
        self._d_levels = budget.zeros(MAX_QUERY_VERTICES + 1, np.int64, "BFS level counters")
        self._d_level = [self._d_levels[i:i + 1] for i in range(MAX_QUERY_VERTICES + 1)]   # sliced once
        start = max(nv + 1, min(32 * self.search.seed_pool, POOL_START, 4 * (nv + data.num_edges),
                                (budget.limit or 1 << 40) // 32))
        self._seed_start = start
        self._d_no_emb = budget.device_array((1, MAX_QUERY_VERTICES), np.int32, "no embeddings")
        self._watch = LaunchWatch()                          # stops a DFS launch at timeout_s
        self._begin_query()
        self._fc = None
        self._data_graph = (d_offsets, d_neighbors, budget.zeros(1, np.uint32, "no bitmap"),
                            budget.zeros(1, np.int32, "no candidate set"),
                            budget.zeros(2 * MAX_QUERY_VERTICES ** 2, np.int32,
                                         "no candidate-graph edges"), self._d_cand)
        self._by_label = None                 # label-sorted adjacency, built on the first query
        self._device_build = DeviceCandidateGraph(self.pool, d_offsets, self._sorted_adjacency, nv)
        self._labelled = np.unique(np.asarray(data.labels)).size > 1
        self._root_cuts: dict[tuple[int, int], bool] = {}   # (root label, root degree) -> cut below the root
        self._max_degree = int(data.max_degree) if nv else 0
        self._sms = 1 if SIM else int(cuda.get_current_device().MULTIPROCESSOR_COUNT)

    # ------------------------------------------------------------------ candidate graph
    def _max_bitmap_bytes(self) -> int:
        room = self.budget.limit - self.budget.in_use if self.budget.limit is not None else 1 << 40
        return min(1 << 30, room // 4)

    def _sorted_adjacency(self):
        if self._by_label is None:
            self._by_label = label_sorted_adjacency(self.data)
        return self._by_label

    def _build_candidate_graph(self, plan, bits):
        """Refine the filter's candidate ``bits`` and build the candidate graph in compact indices
        (None when its bitmaps would not fit)."""
        return build_candidate_graph(self.data, bits, plan, max_bitmap_bytes=self._max_bitmap_bytes(),
                                     by_label=self._sorted_adjacency())

    def _upload_candidate_graph(self, qp, cg):
        """Upload a built candidate graph ``cg`` and write its sizes into ``qp``. Returns (graph
        tuple for the kernels, statistics), or (None, {}) for no graph (the search then runs
        over the data graph)."""
        if cg is None:
            return None, {}
        pack_candidate_graph(qp, cg)
        upload = self.pool.upload
        graph = (upload("candidate graph offsets", cg.offsets), upload("candidate graph entries", cg.entries),
                 upload("candidate graph bitmap", cg.bitmap), upload("candidate graph cand_set", cg.cand_set),
                 upload("candidate graph edges", cg.edges.reshape(-1)), self._d_cand)
        return graph, {"candidate_graph_sizes": cg.sizes.tolist(), "candidate_edges": int(cg.entries.size),
                       "candidate_graph_bytes": int(cg.offsets.nbytes + cg.entries.nbytes
                                                    + cg.bitmap.nbytes + cg.cand_set.nbytes)}

    def _use_candidate_graph(self) -> bool:
        if self.index.candidate_graph == "auto":
            return self._labelled
        return bool(self.index.candidate_graph)

    # ------------------------------------------------------------------ launch shapes
    def _fine_shape(self, n: int, seeds: int, kernel, args, fit_to_seeds: bool = False):
        """(stack levels, warps per block, blocks, kernel resources) of a fine launch: the resident
        grid with global stealing (idle blocks are fed by stealing), else, or with
        ``fit_to_seeds`` (the probe's label-range stage), no more blocks than the seeds fill."""
        levels = stack_levels(n)
        warps = self.search.warps_per_block or (2 if SIM else fine_warps(levels))
        resident, resources = resident_blocks(kernel, args, warps * 32)
        if self.search.blocks:
            return levels, warps, self.search.blocks, resources
        needed = math.ceil(seeds / (warps * self.search.roots_per_fetch))
        if self.search.work_stealing in ("global", "mailbox") and not fit_to_seeds:
            needed = resident
        return levels, warps, max(1, min(resident, needed)), resources

    def _coarse_shape(self, seeds: int) -> tuple[int, int]:
        warps = self.search.warps_per_block or (2 if SIM else 8)
        if self.search.blocks:
            return warps, self.search.blocks
        return warps, grid_blocks(seeds, warps * self.search.unroll, self._sms)

    # ------------------------------------------------------------------ BFS seed pool
    def _begin_query(self) -> None:
        """A query's device buffers start at their prepared sizes, whatever an earlier query grew
        them to: the two seed-pool buffers (their capacity ``_seed_cap`` is what the kernels are
        given), the steal mailbox and the hand-over records. The pool keeps larger buffers but
        counts each query's own demand, so a query's growths and ``peak_device_bytes`` are its own."""
        self._seed_cap = [self._seed_start, self._seed_start]
        self._d_pool = [self.pool.get(f"seed pool {i}", self._seed_start, np.int32) for i in range(2)]
        self._d_mail = self.pool.get("steal mailbox", MAILBOX + 32, np.int32)
        self._d_xfer = self.pool.get("steal hand-over records", (1, 1), np.int32)

    def _grow_pool(self, index: int, elements: int) -> bool:
        """Grow seed-pool buffer ``index`` to ``elements`` int32; False when it may not."""
        if elements > POOL_MAX:
            return False
        name = f"seed pool {index}"
        try:
            self._d_pool[index] = self.pool.get(name, elements, np.int32, growth=1.0)
        except DeviceOutOfMemory:
            self._d_pool[index] = self.pool.get(name, self._seed_cap[index], np.int32, growth=1.0)
            return False
        self._seed_cap[index] = elements
        return True

    def _seed_pool(self, qp, graph, indexed: bool, deadline: Deadline, target: int, bounded: bool = False):
        """Fill the pool breadth-first until it holds ``target`` partial matches (at most one
        position short of the last enumerated one, ``qp``'s ne); ``bounded`` (the probe's pool):
        the buffers never grow, and a level of more than :data:`PROBE_POOL_ROWS` rows ends the
        fill unfinished (:mod:`gmatch.balance`); returns (device buffer, rows, width, stopped,
        pool growths, overflowed), ``stopped`` where the deadline passed or the bounded pool
        overflowed."""
        ne = int(qp[QP_SIZES, 2])
        fill(self._d_levels, 0)
        cur_i = 0
        if indexed:
            rows = int(qp[QP_CSIZE, 0])                     # |C(0)|
            if rows + 1 > self._seed_cap[0]:
                self._grow_pool(0, rows + 1)
            seed_indices[grid_blocks(rows, SEED_THREADS), SEED_THREADS](
                self._d_pool[0], rows)
        else:
            nv = self.data.num_vertices
            blocks = grid_blocks(nv, SEED_THREADS)
            seed_level0[blocks, SEED_THREADS](self._d_cand, self._d_pool[0], self._seed_cap[0],
                                               self._d_level[0])
            rows = int(download(self._d_level[0], self._h_word)[0])
        width = 1
        growths = 0
        expand = seed_expand_kernel(indexed)
        while width < ne - 1 and 0 < rows < target:
            if deadline.passed():
                return self._d_pool[cur_i], rows, width, True, growths, False
            out_i = 1 - cur_i
            counter = self._d_level[width]
            blocks = grid_blocks(rows * 32, SEED_THREADS, self._sms * 64)
            while True:
                capacity = self._seed_cap[out_i] // (width + 1)
                if bounded:
                    capacity = min(capacity, PROBE_POOL_ROWS)
                expand[blocks, SEED_THREADS](*graph, self._d_qp, self._d_pool[cur_i], rows, width,
                                             self._d_pool[out_i], capacity, counter, int(bounded))
                nxt = int(download(counter, self._h_word)[0])
                if nxt <= capacity or bounded or not self._grow_pool(out_i, nxt * (width + 1)):
                    break
                growths += 1
                fill(counter, 0)
            if nxt > capacity:
                if bounded:
                    return self._d_pool[cur_i], rows, width, True, growths, True
                break                                        # too large: keep the previous level
            cur_i = out_i
            rows = nxt
            width += 1
        return self._d_pool[cur_i], rows, width, False, growths, False

    def _steal_buffers(self, total_warps: int, levels: int) -> None:
        """The mailbox + warp states and the global hand-over records for ``total_warps`` warps
        with ``levels``-level stacks (pooled: kept across queries, each query's demand counted)."""
        self._d_mail = self.pool.get("steal mailbox", MAILBOX + total_warps, np.int32, growth=1.0)
        need = (total_warps, xfer_words(levels))
        if any(a < b for a, b in zip(self._d_xfer.shape, need)):
            grow = tuple(max(a, b) for a, b in zip(self._d_xfer.shape, need))
            self._d_xfer = self.pool.get("steal hand-over records", grow, np.int32, growth=1.0)

    # ------------------------------------------------------------------ DFS
    def _dfs(self, n, graph, indexed, pool, seed_lo, seed_hi, width, emb, emb_cap, limit_unique,
             deadline: Deadline, leaves: int, keep_whole: Deadline | None = None,
             probe_until: float | None = None):
        """Run the DFS over seeds [seed_lo, seed_hi) of ``pool`` with the leaf step ``leaves``
        (:func:`leaf_step`); with ``keep_whole`` (a hub query's whole search, ``deadline`` its
        slice), the launch may run on to ``keep_whole`` (:meth:`_whole_extension`); with
        ``probe_until`` (the probe's second stage, ``deadline`` its look), on to that time
        (:meth:`_probe_extension`); returns
        (timed_out, launch stats)."""
        opt = self.search
        watch = int(deadline.active)
        rows = seed_hi - seed_lo
        if opt.granularity == "fine":
            scope = STEALING_SCOPES[opt.work_stealing]
            levels = stack_levels(n)
            warps = opt.warps_per_block or (2 if SIM else fine_warps(levels))
            kernel = fine_kernel(levels, warps, opt.batch, scope, opt.roots_per_fetch, indexed,
                                 opt.idle_stats, opt.max_registers, leaves, opt.split_groups,
                                 opt.leaf_checks)
            global_scope = scope in (STEAL_GLOBAL, STEAL_MAILBOX)
            args = (*graph[:5], self._d_cands, self._d_qps, pool, width, self._d_ctrls, emb, emb_cap,
                    watch, self._d_stop, self._d_mail, self._d_xfer, self._d_block_query)
            levels, warps, blocks, resources = self._fine_shape(n, rows, kernel, args,
                                                                fit_to_seeds=pool is self._d_vertices_by_label)
            steal_bytes = 0
            if global_scope:
                self._steal_buffers(blocks * warps, levels)
                args = (*args[:14], self._d_mail, self._d_xfer, self._d_block_query)
                steal_bytes = blocks * warps * (xfer_words(levels) + 1) * 4 + MAILBOX * 4
            shape = {"stack_levels": levels, "warps_per_block": warps, "blocks": blocks,
                     "stack_shared_bytes": blocks * warps * levels * LEVEL_BYTES,
                     "stack_global_bytes": 0, "steal_buffer_bytes": steal_bytes, **resources}
        else:
            global_scope = False
            warps, blocks = self._coarse_shape(rows)
            kernel = coarse_kernel(warps, opt.unroll, indexed)
            capacity = max(opt.unroll * max(self._max_degree, 1), 32)
            need = (blocks * warps, n, capacity)
            fc = (self.pool.get("coarse feasible sets", need, np.int32),
                  self.pool.get("coarse parent indices", need, np.int32))
            args = (*graph, self._d_qp, pool, width, seed_lo, seed_hi, self._d_ctrl, emb, emb_cap,
                    limit_unique, watch, self._d_stop, *fc)
            shape = {"warps_per_block": warps, "blocks": blocks, "stack_shared_bytes": 0,
                     "stack_global_bytes": 2 * blocks * warps * n * capacity * 4,
                     "steal_buffer_bytes": 0}
        if deadline.passed():
            return True, shape
        start_search[START_BLOCKS, START_THREADS](self._d_ctrls, seed_lo, seed_hi, limit_unique, self._d_mail,
                                                  int(global_scope))
        if not deadline.active:
            kernel[blocks, warps * 32](*args)
            return False, shape
        extend = None
        if keep_whole is not None and opt.granularity == "fine":
            extend = self._whole_extension(rows, blocks * warps * opt.roots_per_fetch, keep_whole, shape)
        elif probe_until is not None:
            in_flight = blocks * warps * opt.roots_per_fetch if opt.granularity == "fine" else rows
            extend = self._probe_extension(rows, in_flight, probe_until, shape)
        return self._watch.run(kernel, blocks, warps * 32, args, deadline.at, self._d_stop, extend), shape

    def _predicted_s(self, seeds: int, in_flight: int, elapsed: float) -> float:
        """A running launch's predicted seconds from launch to end: the seeds taken beyond the
        first fetch of every warp (``in_flight``) read as the share done after ``elapsed``."""
        self._watch.peek(self._d_ctrls[0], self._h_peek)
        done = max(0, int(self._h_peek[C_SEED]) - in_flight) / (seeds - in_flight)
        return elapsed / done if done > 0 else math.inf

    def _probe_extension(self, seeds: int, in_flight: int, until: float, shape: dict):
        """The watch's ``extend`` for the probe's second stage at its look: where the seeds taken
        beyond the first fetch of every warp (``in_flight``) predict the launch's end by
        ``until``, it looks again after as long again since the launch and runs on to ``until``
        only if that second prediction agrees and is of a short launch (at most ``RUN_ON_SHARE``
        of ``probe_s``); a pool not much larger than one fetch per warp (a pool the BFS could not
        grow: little work left) runs on to ``until``; else stop (the candidate graph takes over).
        The short-launch bound is ours: on the H200 runs recorded, the run-ons that ended in the
        probe had been predicted at a few percent of ``probe_s`` and those that did not at a
        fifth of it or more (docs/decisions.md, "gMatch: a data-graph probe before the candidate
        graph, and its budget").
        ``shape["probe_ran_on"]``: whether it ran on;
        ``probe_look1_predicted_ms`` and ``probe_look2_predicted_ms``: each look's prediction of the
        launch's whole time."""
        looks, final = 0, False
        shape["probe_ran_on"] = False

        def run_on() -> float:
            nonlocal final
            final = True
            shape["probe_ran_on"] = True
            return until

        def extend(elapsed: float) -> float | None:
            nonlocal looks
            now = time.perf_counter()
            if final or now >= until:
                return None
            looks += 1
            if seeds <= 2 * in_flight:
                return run_on()
            predicted = self._predicted_s(seeds, in_flight, elapsed)
            shape[f"probe_look{min(looks, 2)}_predicted_ms"] = 1e3 * predicted
            if now - elapsed + predicted > until:
                return None
            if looks == 1 and now + elapsed < until:
                return now + elapsed
            if predicted > RUN_ON_SHARE * self.index.probe_s:
                return None
            return run_on()
        return extend

    def _whole_extension(self, seeds: int, in_flight: int, keep_whole: Deadline, shape: dict):
        """The watch's ``extend`` for a hub query's whole search at the end of its slice: the
        seeds taken beyond the first fetch of every warp (``in_flight``) are taken as done, and
        the launch runs on to ``keep_whole`` when that share predicts its end within
        ``hub_whole_s`` of the launch. A prediction up to ``HUB_LOOK_AGAIN`` times the bound is
        made again one slice (``hub_after_s``) later, and the launch kept when the second is
        within ``HUB_SECOND_BOUND`` times it. ``shape`` gets the last prediction
        (``hub_whole_predicted_s``) and how many were made (``hub_whole_looks``). Past the paper
        (gMatch runs one launch): on the hub queries measured, the share of the BFS seed pool
        taken followed the share of the count found, more closely the later it is read
        (docs/decisions.md, "gMatch: hub parts"); a pool not much larger than one fetch per warp
        predicts nothing (cut)."""
        looks, kept = 0, False

        def extend(elapsed: float) -> float | None:
            nonlocal looks, kept
            if kept or looks == 2 or seeds <= 2 * in_flight:    # keep_whole has passed, or no prediction
                return None
            predicted = self._predicted_s(seeds, in_flight, elapsed)
            looks += 1
            shape.update(hub_whole_predicted_s=predicted, hub_whole_looks=looks)
            if predicted <= self.hubs.hub_whole_s * (1.0 if looks == 1 else HUB_SECOND_BOUND):
                kept = True
                return keep_whole.earlier(math.inf)
            if looks == 1 and predicted <= HUB_LOOK_AGAIN * self.hubs.hub_whole_s:
                return keep_whole.earlier(time.perf_counter() + self.hubs.hub_after_s)
            return None
        return extend

    def _search(self, n, qp, graph, indexed, limit_unique, emb_cap, deadline: Deadline, timer,
                phase="enumerate", label_seeds=None, seed_target=None, keep_whole: Deadline | None = None,
                probe_until: float | None = None):
        """BFS + DFS, or with ``label_seeds`` = (lo, hi) a DFS straight from the root's label range
        of the vertices sorted by label (no BFS, no host round trip: the small-query probe);
        ``seed_target``: the pool's target (default ``seed_pool``); ``keep_whole`` and
        ``probe_until``: :meth:`_dfs`'s; returns (unique count, ctrl row, embeddings device array,
        timed_out, stats)."""
        emb = self.budget.device_array((emb_cap, n), np.int32, "embeddings") if emb_cap else self._d_no_emb
        if label_seeds is not None:
            pool, (seed_lo, seed_hi), width = self._d_vertices_by_label, label_seeds, 1
            timed_out, growths, overflowed = False, 0, False
        else:
            begin = time.perf_counter()
            with timer.phase(phase):
                pool, rows, width, timed_out, growths, overflowed = self._seed_pool(
                    qp, graph, indexed, deadline, min(self.search.seed_pool, seed_target or self.search.seed_pool),
                    bounded=seed_target is not None)
            pool_ms = 1e3 * (time.perf_counter() - begin)
            seed_lo, seed_hi = 0, rows
        rows = seed_hi - seed_lo
        stats = {"seeds": rows, "seed_width": width, "seed_pool_bytes": rows * width * 4,
                 "seed_pool_growths": growths, "seed_pool_overflow": overflowed, "max_stack_bytes": 0,
                 "steal_buffer_bytes": 0}
        if label_seeds is None:
            stats["seed_pool_ms"] = pool_ms
        ctrl = np.zeros(CTRL_SIZE, dtype=np.int64)
        if n == 1:
            ctrl[C_COUNT] = rows
            return rows, ctrl, pool, timed_out, stats
        if rows == 0 or timed_out:
            return 0, ctrl, emb, timed_out, stats
        with timer.phase(phase):
            timed_out, shape = self._dfs(n, graph, indexed, pool, seed_lo, seed_hi, width, emb, emb_cap,
                                         limit_unique, deadline, leaf_step(qp, emb_cap, limit_unique),
                                         keep_whole, probe_until)
        stats.update(shape)
        stats["max_stack_bytes"] = shape["stack_shared_bytes"] + shape["stack_global_bytes"]
        ctrl = self._control_row(timer)
        return unique_count(ctrl), ctrl, emb, timed_out, stats

    def _control_row(self, timer) -> np.ndarray:
        """A copy of the one-query launch's control row (waits for the launch)."""
        with timer.phase("transfer"):
            download(self._d_ctrls, self._h_ctrl)
        return self._h_ctrl[0].copy()

    # ------------------------------------------------------------------ match
    def _plan(self, query, count_leaves, count_last, timer, part: Part, plan=None):
        """Plan the query (or take ``plan``, built with ``defer_leaves=count_leaves``), upload its
        parameter block and filter the candidates on the GPU (of ``part``'s root range and
        branch classes)."""
        begin = time.perf_counter()
        if plan is None:
            plan = build_plan(query, self.counting.symmetry_breaking, defer_leaves=count_leaves)
        qp = pack_query(plan, query, count_leaves=count_leaves, count_last=count_last)
        timer.add("plan", time.perf_counter() - begin)
        with timer.phase("filter"):
            upload(self._d_qp, qp)
            self._filter(self._d_qps, self._d_cands)
            if part.root_range is not None:       # position 0 only inside the root range
                clear_bit_outside(self._d_cand, 0, *part.root_range)
            if part.branch_part is not None:      # each branch vertex, wherever this plan puts it
                for position, level in zip(self._branch_positions(plan, query), part.branch_part):
                    clear_bit_outside(self._d_cand, position, 0, self.data.num_vertices, part=level)
        return plan, qp

    def _filter(self, d_qps, d_cands) -> None:
        """LDF/NLF candidate bits of every query of ``d_qps`` (one launch)."""
        if SIM:                # the same bits on the host: the kernel's ballots crawl here
            qps, cands = d_qps.copy_to_host(), d_cands.copy_to_host()
            filter_host(*self._host_graph, qps, cands)
            d_qps.copy_to_device(qps)
            d_cands.copy_to_device(cands)
            return
        nv = self.data.num_vertices
        blocks = grid_blocks(nv, FILTER_THREADS // 32, max(1, 4096 // d_qps.shape[0]))
        filter_kernel[(blocks, d_qps.shape[0]), FILTER_THREADS](
            self._data_graph[0], self._data_graph[1], self._d_labels, d_qps, d_cands)

    def _label_seeds(self, query: Graph, plan) -> tuple[int, int]:
        """The range of the vertices-by-label array holding the root's label (position 0)."""
        label = int(query.labels[int(plan.order[0])])
        return int(self._label_start[label]), int(self._label_start[label + 1])

    def root_vertex(self, query: Graph, *, homomorphic: bool = False) -> int:
        """The query vertex at position 0 (the one a part's ``root_range`` restricts)."""
        return int(build_plan(query, self.counting.symmetry_breaking).order[0])

    def branch_vertices(self, query: Graph, *, homomorphic: bool = False) -> tuple[int, ...]:
        """The query vertices a part's ``branch_part`` levels restrict: positions 1, 2 of the plan
        without leaf deferral (the last position for a shorter query), found by vertex in every
        plan of the query."""
        return order_branch_vertices(build_plan(query, self.counting.symmetry_breaking).order)

    def _branch_positions(self, plan, query: Graph) -> list[int]:
        """Where ``plan`` puts the branch vertices (:meth:`branch_vertices`)."""
        return [int(np.flatnonzero(plan.order == v)[0]) for v in self.branch_vertices(query)]

    def _match(self, query: Graph, *, limit, collect, timeout_s, homomorphic, part: Part,
               probe_first: bool = True, hub_part=None) -> MatchResult:
        """One query (its ``part``); ``probe_first=False`` skips the data-graph probe (a batch
        already tried it); ``hub_part`` = (:class:`gmatch.filter.PartGraphs`, i): the query is
        hub part i of a split one (``part`` its root range and branch classes), whose candidate
        graph a host thread builds."""
        start = time.perf_counter()
        deadline = Deadline(timeout_s, start)
        self._begin_query()
        timer = PhaseTimer()
        n = query.num_vertices
        indexed = self._use_candidate_graph() and n > 1
        counting = indexed and self.search.granularity == "fine" and limit is None and not collect
        count_leaves = counting and self.counting.leaf_counting
        count_last = counting and self.counting.count_last
        probe = (indexed and self.index.candidate_graph == "auto" and limit is None and not collect
                 and self.index.probe_s > 0 and probe_first)
        plan, qp = self._plan(query, count_leaves and not probe, count_last and not probe, timer, part)
        aut = plan.automorphisms
        index_stats, probe_stats = {}, {}
        graph = self._data_graph
        if probe:
            unique, ctrl, stopped, stats = self._probe(query, plan, qp, n, deadline.earlier(start + self.index.probe_s),
                                                       timer)
            probe_stats = {key: stats[key] for key in PROBE_STATS}
            if not stopped or deadline.passed():
                status = Status.TIMEOUT if stopped else Status.OK
                stats.update(probe_finished=not stopped)
                return self._finish(timer, plan, qp, unique, ctrl, stats, status, False, part=part)
        # still running after a probe: the plan that counts what it can (countable leaves go last:
        # a new order), unless it counts nothing (then it is the plan probed, already filtered)
        if probe and (count_leaves or count_last):
            begin = time.perf_counter()
            counting_plan = build_plan(query, self.counting.symmetry_breaking, defer_leaves=count_leaves)
            timer.add("plan", time.perf_counter() - begin)
            if counted_positions(counting_plan, count_leaves, count_last)[0]:
                plan, qp = self._plan(query, count_leaves, count_last, timer, part, counting_plan)
        # a query that counts positions and whose root has a hub candidate is searched whole for
        # hub_after_s, then, if still running (and not kept whole), counted as its parts
        hub = (leaf_step(qp, 0, 0) != LEAF_ONE and (probe or not probe_first)
               and self._has_hub_parts(query, part))
        search_deadline = deadline
        if hub:
            whole_start = time.perf_counter()
            search_deadline = Deadline.at_time(deadline.earlier(whole_start + self.hubs.hub_after_s))
        hub_bits = None                           # the filter bits the parts' candidate graphs are cut from
        if indexed:
            begin = time.perf_counter()
            if hub_part is not None:
                try:
                    cg = hub_part[0].graph(hub_part[1], deadline.remaining())
                except TimeoutError:
                    timer.add("index", time.perf_counter() - begin)
                    return self._finish(timer, plan, qp, 0, np.zeros(CTRL_SIZE, np.int64), {},
                                        Status.TIMEOUT, indexed, part=part)
                graph, index_stats = self._upload_candidate_graph(qp, cg)
            else:
                on_gpu, fallback = self.index.candidate_graph_build == "gpu", ""
                bits = self._d_cand.copy_to_host() if hub or not on_gpu else None
                if hub:
                    if self.hubs.hub_after_s <= 0:
                        timer.add("index", time.perf_counter() - begin)
                        return self._match_parts(query, plan, bits, deadline, timer, homomorphic,
                                                 probe_stats=probe_stats)
                    hub_bits = bits
                built = time.perf_counter()
                if on_gpu:
                    try:
                        graph, index_stats = self._device_build.build(plan, qp, self._d_qp, self._d_cand,
                                                                      self._max_bitmap_bytes())
                    except DeviceOutOfMemory as exc:    # the device build's own arrays did not fit
                        bits, on_gpu = self._d_cand.copy_to_host(), False
                        fallback = f"built on the host: {exc}"
                if not on_gpu:
                    graph, index_stats = self._upload_candidate_graph(qp, self._build_candidate_graph(plan, bits))
                index_stats["candidate_graph_build_ms"] = 1e3 * (time.perf_counter() - built)
                if fallback:
                    index_stats["candidate_graph_build_fallback"] = fallback
            if graph is None:                     # bitmaps too large: search the data graph
                indexed, graph = False, self._data_graph
                qp = pack_query(plan, query)
            upload(self._d_qp, qp)
            timer.add("index", time.perf_counter() - begin)
        limit_unique = 0 if limit is None else -(-limit // aut)
        emb_cap = 0
        if collect:
            if limit is None:
                unique, _, _, timed_out, _ = self._search(n, qp, graph, indexed, 0, 0, deadline, timer)
                if timed_out:
                    return self._result(timer, unique * aut, Status.TIMEOUT, np.zeros((0, n), np.int32), {})
                emb_cap = unique
            else:
                emb_cap = limit_unique
        unique, ctrl, emb, timed_out, stats = self._search(
            n, qp, graph, indexed, limit_unique, emb_cap, search_deadline, timer,
            keep_whole=deadline if hub_bits is not None and self.hubs.hub_whole_s > 0 else None)
        if hub_bits is not None and timed_out and not deadline.passed():
            return self._match_parts(query, plan, hub_bits, deadline, timer, homomorphic,
                                     time.perf_counter() - whole_start,
                                     {key: stats[key] for key in WHOLE_PREDICTION if key in stats},
                                     probe_stats)
        stats.update(index_stats)
        stats.update(probe_stats)
        status = Status.TIMEOUT if timed_out else Status.OK
        if status is Status.OK and limit is not None and unique * aut >= limit:
            status = Status.LIMIT
        embeddings = None
        if collect:
            with timer.phase("transfer"):
                rows = download(emb, np.empty(min(unique, emb_cap if n > 1 else unique) * n, np.int32))
            embeddings = self._expand(plan, query, rows.reshape(-1, n), limit)
        return self._finish(timer, plan, qp, unique, ctrl, stats, status, indexed, embeddings, limit, part=part)

    def _probe(self, query: Graph, plan, qp, n: int, probe_end: float, timer):
        """The data-graph probe of ``candidate_graph="auto"`` (past the paper): most queries end
        over the data graph before an index would be built. First a DFS from the root's label
        range on a grid sized to it (no BFS, no host round trip; the fine kernel
        checks the seeds' LDF/NLF bit) for ``DIRECT_SHARE`` of ``probe_s``; then a BFS seed pool
        of ``PROBE_SEEDS`` (better balanced for hub-heavy roots) and a DFS over it, both within
        ``LOOK_SHARE`` of it, where the launch runs on to ``probe_end`` only if the share of its
        seeds taken predicts its end by then at two looks (:meth:`_probe_extension`). A query that goes on to
        the candidate graph has lost about ``DIRECT_SHARE + LOOK_SHARE`` of ``probe_s`` to the
        probe where its pool predicts (docs/decisions.md, "gMatch: a data-graph probe before the
        candidate graph, and its budget").
        Returns (unique count, ctrl row, stopped, statistics); the statistics name each stage's
        wall time, the look's seed pool (time, rows, growths of its buffers) and how far the probe
        ran past ``probe_end`` (:data:`PROBE_STATS`)."""
        unique, ctrl, stopped, stats = 0, np.zeros(CTRL_SIZE, np.int64), True, {}
        stages = dict.fromkeys(PROBE_STATS, 0.0) | dict.fromkeys(PROBE_BET, float("nan")) | {"probe_ran_on": False}
        begin = time.perf_counter()
        if self.search.granularity == "fine":
            direct_end = min(probe_end, begin + DIRECT_SHARE * self.index.probe_s)
            unique, ctrl, _, stopped, stats = self._search(
                n, qp, self._data_graph, False, 0, 0, Deadline.at_time(direct_end), timer, phase="probe",
                label_seeds=self._label_seeds(query, plan))
        looked = time.perf_counter()
        stages["probe_direct_ms"] = 1e3 * (looked - begin)
        if stopped and looked < probe_end:
            look = min(probe_end, looked + LOOK_SHARE * self.index.probe_s)
            unique, ctrl, _, stopped, stats = self._search(
                n, qp, self._data_graph, False, 0, 0, Deadline.at_time(look), timer, phase="probe",
                seed_target=PROBE_SEEDS, probe_until=probe_end)
            stages["probe_look_ms"] = 1e3 * (time.perf_counter() - looked)
            stages["probe_pool_ms"] = stats.get("seed_pool_ms", 0.0)
            stages["probe_pool_rows"] = stats.get("seeds", 0)
            stages["probe_pool_growths"] = stats.get("seed_pool_growths", 0)
            stages["probe_pool_overflow"] = stats.get("seed_pool_overflow", False)
            stages.update({key: stats[key] for key in PROBE_BET if key in stats})
        stages["probe_past_end_ms"] = max(0.0, 1e3 * (time.perf_counter() - probe_end))
        stats.update(stages)
        return unique, ctrl, stopped, stats

    def _has_hub_parts(self, query: Graph, part: Part) -> bool:
        """Whether ``hub_parts`` would cut the query below its root (a root candidate heavier
        than a share of the work); the parts themselves are planned only once the whole search
        is cut (:meth:`_match_parts`)."""
        if self.hubs.hub_parts < 2 or not part.whole:
            return False
        root = self.root_vertex(query)
        key = (int(query.labels[root]), int(query.degrees[root]))    # all the answer depends on
        if key not in self._root_cuts:
            self._root_cuts[key] = cuts_below_root(self.data, query, root, self.hubs.hub_parts)
        return self._root_cuts[key]

    def _match_parts(self, query: Graph, plan, bits: np.ndarray, deadline: Deadline, timer,
                     homomorphic, whole_s: float = 0.0, whole_prediction: dict | None = None,
                     probe_stats: dict | None = None) -> MatchResult:
        """Count ``query`` as its ``hub_parts`` (:func:`common.graph.roots.plan_split`: root
        ranges and branch parts), one after another, each with its own candidate graph cut from
        the whole query's filter ``bits`` (:class:`gmatch.filter.PartGraphs`); the phases are
        this call's (its probe, the abandoned whole search of ``whole_s`` seconds, the parts'
        planning as ``index``) plus the parts' (a part's ``index`` is its wait for its graph and
        the upload), the statistics those of its longest part and the whole search's prediction
        (``whole_prediction``, :data:`WHOLE_PREDICTION`) and the probe's stages (``probe_stats``,
        :data:`PROBE_STATS`); a part that stops (timeout, out of
        memory) stops the rest, and its status is the result's."""
        begin = time.perf_counter()                   # host work: the planning and the builds' queueing
        tasks, _ = plan_split(self.data, query, self.root_vertex(query), self.branch_vertices(query)[0],
                              self.hubs.hub_parts)
        graphs = PartGraphs(self.data, bits, plan, tasks, self._branch_positions(plan, query),
                            self._max_bitmap_bytes(), self._sorted_adjacency())
        timer.add("index", time.perf_counter() - begin)
        count, status, reason, parts = 0, Status.OK, "", []
        try:
            for i, (root_range, branch_part) in enumerate(tasks):
                if deadline.passed():
                    status, reason = Status.TIMEOUT, "the deadline passed between hub parts"
                    break
                part = self._match(query, limit=None, collect=False, timeout_s=deadline.remaining(),
                                   homomorphic=homomorphic, part=Part(root_range, branch_part),
                                   probe_first=False, hub_part=(graphs, i))
                parts.append(part)
                count += part.count
                if part.status is not Status.OK:
                    status, reason = part.status, part.reason
                    break
        finally:
            graphs.stop()
        phases = dict(timer.seconds)
        for part in parts:
            for name, seconds in part.phases.items():
                phases[name] = phases.get(name, 0.0) + seconds
        stats = dict(max(parts, key=lambda r: sum(r.phases.values())).stats) if parts else {}
        for key in ("root_range", "branch_part"):
            stats.pop(key, None)
        stats.update(whole_prediction or {})
        stats.update(probe_stats or {})
        stats.update(hub_parts=len(tasks), hub_parts_finished=len(parts), hub_whole_seconds=whole_s,
                     part_counts=[r.count for r in parts],
                     part_seconds=[sum(r.phases.values()) for r in parts])
        return MatchResult(self.name, count, status, reason=reason, phases=phases,
                           peak_device_bytes=self.budget.peak, stats=stats)

    # ------------------------------------------------------------------ batches
    def _match_batch(self, queries, *, limit, collect, timeout_s, homomorphic, part: Part):
        """Small queries in batches (past the paper): one filter launch, one DFS launch whose
        blocks each serve one query (in-block work stealing only), one copy of every query's
        control row back. A batch runs for at most ``probe_s`` per query (and never past
        ``timeout_s``); a query not finished by then is answered alone with its own full
        deadline, as :meth:`match` does past its probe (the batch was its probe). Batches are the
        probe of ``candidate_graph="auto"`` for many queries at once: ``collect``, a part of the
        queries, the coarse model, ``candidate_graph`` True or False, ``probe_s=0`` and
        ``batch_queries=1`` answer one query at a time."""
        if (collect or self.search.granularity != "fine" or self.search.batch_queries < 2 or len(queries) < 2
                or self.data.num_vertices == 0 or not part.whole
                or self.index.candidate_graph != "auto" or self.index.probe_s == 0):
            return super()._match_batch(queries, limit=limit, collect=collect, timeout_s=timeout_s,
                                        homomorphic=homomorphic, part=part)
        results: list[MatchResult] = [None] * len(queries)
        size = self._batch_size()
        for first in range(0, len(queries), size):
            chunk = list(range(first, min(first + size, len(queries))))
            for i, result in zip(chunk, self._run_batch([queries[i] for i in chunk], limit, timeout_s)):
                results[i] = result
        for i, partial in enumerate(results):
            if partial.status is not Status.TIMEOUT or not partial.stats.get("batch_unfinished"):
                continue
            # the batch was this query's probe over the data graph: on to the candidate graph,
            # within what is left of its own deadline (its clock started with its batch)
            left = None if timeout_s is None else timeout_s - partial.stats["batch_seconds"]
            if left is not None and left <= 0:
                partial.reason = "the deadline passed in its batch"
                continue
            self.budget.reset_peak()
            try:
                results[i] = self._match(queries[i], limit=limit, collect=False, timeout_s=left,
                                         homomorphic=homomorphic, part=part, probe_first=False)
            except DeviceOutOfMemory as exc:
                results[i] = MatchResult(self.name, 0, Status.OOM, reason=str(exc))
            results[i].stats["batch_tried"] = True
        return results

    def _batch_size(self) -> int:
        """Queries per batch: ``batch_queries``, within the block-to-query map and a memory share
        for the candidate bits (B x |V| words)."""
        per_query = 4 * max(1, self.data.num_vertices)
        room = (self.budget.limit - self.budget.in_use) // 8 if self.budget.limit is not None else 1 << 30
        return max(1, min(self.search.batch_queries, BLOCK_QUERY_SLOTS, room // per_query))

    def _run_batch(self, queries, limit, timeout_s) -> list[MatchResult]:
        """One batched launch over ``queries``; a query it did not finish gets status timeout,
        its partial count and ``stats["batch_unfinished"]`` (with the batch's seconds)."""
        start = time.perf_counter()
        self._begin_query()
        timer = PhaseTimer()
        count = len(queries)
        plans = []
        qps = np.zeros((count, QP_ROWS, MAX_QUERY_VERTICES), np.int32)
        control = np.zeros((count, CTRL_SIZE), np.int64)
        for b, query in enumerate(queries):
            n = query.num_vertices
            plan = build_plan(query, self.counting.symmetry_breaking)
            qps[b] = pack_query(plan, query)
            lo, hi = self._label_seeds(query, plan)
            limit_unique = 0 if limit is None else -(-limit // plan.automorphisms)
            control[b, C_SEED_LO], control[b, C_SEED_HI], control[b, C_LIMIT] = lo, hi, limit_unique
            if n == 1:                             # no DFS: every seed with bit 0 is an embedding
                control[b, C_SEED_HI] = lo
            plans.append(plan)
        timer.add("plan", time.perf_counter() - start)
        levels = stack_levels(max(q.num_vertices for q in queries))
        opt = self.search
        warps = opt.warps_per_block or (2 if SIM else fine_warps(levels))
        kernel = fine_kernel(levels, warps, opt.batch, STEAL_BLOCK, opt.roots_per_fetch, False,
                             opt.idle_stats, opt.max_registers, LEAF_ONE if limit is None else LEAF_OUTPUT,
                             opt.split_groups, opt.leaf_checks)
        pool = self.pool
        d_qps = pool.upload("batch query plans", qps)
        d_cands = pool.get("batch candidate bits", (count, max(1, self.data.num_vertices)), np.uint32)
        d_ctrls = pool.upload("batch control rows", control)
        d_halt = pool.get("batch halt flag", 1, np.int64)
        with timer.phase("filter"):
            fill(d_halt, 0)
            self._filter(d_qps, d_cands)
        args = (*self._data_graph[:5], d_cands, d_qps, self._d_vertices_by_label, 1, d_ctrls,
                self._d_no_emb, 0, 1, d_halt, self._d_mail, self._d_xfer, self._d_block_query)
        resident, _ = resident_blocks(kernel, args, warps * 32)
        seeds = control[:, C_SEED_HI] - control[:, C_SEED_LO]
        block_query = _blocks_per_query(seeds, max(resident, count), warps * self.search.roots_per_fetch)
        d_block_query = pool.upload("batch block-to-query map", block_query)
        args = (*args[:16], d_block_query)
        window = self.index.probe_s * count
        deadline = start + (window if timeout_s is None else min(window, timeout_s))
        with timer.phase("enumerate"):
            self._watch.run(kernel, block_query.size, warps * 32, args, deadline, d_halt)
        with timer.phase("transfer"):
            download(d_ctrls, control)
        elapsed = time.perf_counter() - start
        phases = {name: seconds / count for name, seconds in timer.seconds.items()}
        blocks_of = np.bincount(block_query, minlength=count)
        results: list[MatchResult | None] = []
        for b, (query, plan) in enumerate(zip(queries, plans)):
            ctrl = control[b]
            unique = unique_count(ctrl)
            if query.num_vertices == 1:
                unique = int(ctrl[C_CAND])
            finished = ctrl[C_FINISHED] == blocks_of[b] * warps or query.num_vertices == 1
            limited = limit is not None and unique * plan.automorphisms >= limit
            status = Status.LIMIT if limited else Status.OK if finished else Status.TIMEOUT
            stats = {"seeds": int(seeds[b]), "seed_width": 1, "batch_size": count,
                     "blocks": int(blocks_of[b]), "warps_per_block": warps, "stack_levels": levels}
            if status is Status.TIMEOUT:
                stats.update(batch_unfinished=True, batch_seconds=elapsed)
            result = self._finish(None, plan, qps[b], unique, ctrl, stats, status, False, limit=limit)
            result.phases = dict(phases)
            results.append(result)
        return results
    def _finish(self, timer, plan, qp, unique, ctrl, stats, status, indexed, embeddings=None,
                limit=None, part: Part = WHOLE) -> MatchResult:
        """The result of a search of ``part``: count (unique embeddings x |Aut(Q)|, cut at
        ``limit``) and statistics."""
        aut = plan.automorphisms
        reason = ""
        if ctrl[C_COUNT_BIG] and status in (Status.OK, Status.TIMEOUT):
            unique = max(unique, BIG_COUNT)
            status, reason = Status.OVERFLOW, (f"more than 2^124 unique embeddings: past the 128-bit count, "
                                               f"{unique} x {aut} automorphisms is a lower bound")
        total = unique * aut if status is not Status.LIMIT else limit
        iters = int(ctrl[C_ITERS])
        by_position = stats.pop("candidate_graph_sizes", None)
        if by_position is None:               # the filter's |C(d)| (the fine kernel copies them)
            by_position = ctrl[C_CAND:C_CAND + plan.size].tolist()
        candidate_sizes = [0] * plan.size
        for d, u in enumerate(plan.order.tolist()):
            candidate_sizes[u] = int(by_position[d])
        stats.update(order=plan.order.tolist(), candidate_sizes=candidate_sizes, automorphisms=aut,
                     unique_embeddings=unique, counted_leaves=plan.size - int(qp[QP_SIZES, 2]),
                     warp_iterations=iters,
                     steals=int(ctrl[C_STEALS]), global_steals=int(ctrl[C_GSTEALS]),
                     granularity=self.search.granularity, unroll=self.search.unroll, batch=self.search.batch,
                     work_stealing=self.search.work_stealing, seed_pool=self.search.seed_pool,
                     candidate_graph=indexed)
        stats.update(part.stats())
        if self.search.idle_stats or self.search.granularity == "coarse":
            stats.update(idle_lanes=int(ctrl[C_IDLE]),
                         idle_rate=(ctrl[C_IDLE] / (32.0 * iters)) if iters else 0.0)
        result = self._result(timer, total, status, embeddings, stats)
        result.reason = reason
        return result

    def _expand(self, plan, query: Graph, unique_rows: np.ndarray, limit) -> np.ndarray:
        """Ordered embeddings (column = query vertex) from unique rows (column = order position)."""
        n = plan.size
        by_vertex = np.empty_like(unique_rows)
        by_vertex[:, plan.order] = unique_rows
        sigmas = all_automorphisms(query) if self.counting.symmetry_breaking else np.arange(n)[None, :]
        if sigmas.shape[0] != plan.automorphisms:
            raise AssertionError("automorphism count disagrees with the stabiliser chain")
        out = np.concatenate([by_vertex[:, sigma] for sigma in sigmas]) if by_vertex.size else by_vertex
        if limit is not None:
            out = out[:limit]
        return np.ascontiguousarray(out, dtype=np.int32).reshape(-1, n)

    def _result(self, timer, count, status, embeddings, stats) -> MatchResult:
        return MatchResult(self.name, int(count), status, embeddings=embeddings,
                           phases={} if timer is None else timer.seconds,
                           peak_device_bytes=self.budget.peak, stats=stats)


def unique_count(ctrl) -> int:
    """The unique matches a control row counted: its 128-bit count (ctrl[C_COUNT_HI] * 2^64 +
    ctrl[C_COUNT] read as unsigned) as a Python int."""
    return (int(ctrl[C_COUNT_HI]) << 64) + (int(ctrl[C_COUNT]) & ((1 << 64) - 1))


def _blocks_per_query(seeds: np.ndarray, blocks: int, seeds_per_block: int) -> np.ndarray:
    """The block-to-query map of a batched launch: every query one block, the remaining blocks
    shared in proportion to the seeds, a query never more than it has seeds for."""
    count = seeds.size
    want = np.maximum(1, -(-np.maximum(seeds, 0) // max(1, seeds_per_block)))
    share = np.ones(count, np.int64)
    spare = blocks - count
    if spare > 0 and want.sum() > count:
        extra = np.floor(spare * (want - 1) / max(1, (want - 1).sum())).astype(np.int64)
        share += np.minimum(extra, want - 1)
    return np.repeat(np.arange(count, dtype=np.int32), share)
