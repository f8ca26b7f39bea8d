"""GSI engine (gsi/): counts equal the CPU reference's on tiny labelled graphs, undirected and
directed with edge labels, for every value of every ablation option and a sample of their
combinations; collect, limit, timeout, slicing under a memory limit, oom, long queries."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from _graphs import random_graph, reference, two_hubs
from common.engine.result import Status
from common.gpu.budget import DeviceMemoryBudget
from common.gpu.runtime import cuda
from common.graph.generate import random_walk_query
from common.graph.model import Graph
from gsi.engine import GSI


def undirected_view(graph: Graph) -> Graph:
    src, dst, _ = graph.edges()
    return Graph.from_edges(graph.num_vertices, src, dst, graph.labels)


def walk_query(data: Graph, k: int, seed: int, induced: bool = True) -> Graph:
    """A connected query cut from ``data`` by a random walk; for a directed graph every data arc
    between the walked vertices is kept with its direction and label."""
    if not data.directed:
        return random_walk_query(data, k, seed=seed, induced=induced)
    q = random_walk_query(undirected_view(data), k, seed=seed, induced=True)
    verts = np.asarray(q.meta["data_vertices"])
    pos = {int(v): i for i, v in enumerate(verts)}
    src, dst, lab = [], [], []
    for i, v in enumerate(verts):
        row = data.neighbors_of(int(v))
        for j, w in enumerate(row.tolist()):
            if w in pos:
                src.append(i)
                dst.append(pos[w])
                lab.append(0 if data.edge_labels is None else int(data.edge_labels[data.offsets[v] + j]))
    return Graph.from_edges(k, src, dst, data.labels[verts], lab if data.has_edge_labels else None,
                            directed=True, name=f"dwalk_{k}_s{seed}")


UNDIRECTED = random_graph(30, 90, 3, 2, False, 1)
DIRECTED = random_graph(30, 110, 3, 2, True, 2)


def queries(graph: Graph, sizes=(4, 5), seeds=(0,)):
    return [walk_query(graph, k, seed=s) for k in sizes for s in seeds]


def check_counts(engine: GSI, graph: Graph, qs) -> None:
    for q in qs:
        got, want = engine.match(q), reference(graph, q)
        assert got.status is Status.OK, (q.name, got)
        assert got.count == want.count, (q.name, engine.__dict__, got.stats)


@pytest.mark.slow_cases("undirected")
@pytest.mark.parametrize("graph", [UNDIRECTED, DIRECTED], ids=["undirected", "directed"])
def test_default_counts_and_embeddings(graph):
    engine = GSI().prepare(graph)
    for q in queries(graph, sizes=(3, 4, 6), seeds=(0, 1)):
        got, want = engine.match(q, collect=True), reference(graph, q, collect=True)
        assert got.count == want.count > 0
        assert got.embeddings.shape == (want.count, q.num_vertices)
        assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
        assert len(got.stats["candidate_sizes"]) == q.num_vertices
        assert got.stats["rows_per_iteration"][-1] == want.count


OPTION_VALUES = {
    "filter": ["label", "degree", "signature"],
    "structure": ["csr", "br", "cr", "pcsr"],
    "output": ["prealloc-combine", "two-step"],
    "set_ops": ["naive", "gpu-friendly"],
    "write_cache": [False, True],
    "load_balance": [False, True, "histogram"],
    "duplicate_removal": [False, True],
    "order_score": ["paper", "code"],
}
SINGLE = [(opt, v) for opt, values in OPTION_VALUES.items() for v in values]


@pytest.mark.parametrize("option,value", SINGLE, ids=[f"{o}={v}" for o, v in SINGLE])
def test_every_option_value(option, value):
    # Alternate the graphs so that every value meets an edge-labelled graph of each kind overall.
    graph = DIRECTED if SINGLE.index((option, value)) % 2 else UNDIRECTED
    kw = {option: value}
    if option == "load_balance" and value is True:
        kw.update(w3=33, w1=40)          # small thresholds so that the pool and queue layers run
    check_counts(GSI(**kw).prepare(graph), graph, queries(graph, sizes=(4,), seeds=(0, 1)))


def _sample_combinations(count: int, seed: int):
    names = list(OPTION_VALUES)
    every = list(itertools.product(*OPTION_VALUES.values()))
    rng = np.random.default_rng(seed)
    return [dict(zip(names, every[i])) for i in rng.choice(len(every), count, replace=False)]


COMBOS = _sample_combinations(5, seed=7)


@pytest.mark.parametrize("options", COMBOS, ids=[f"combo{i}" for i in range(len(COMBOS))])
def test_sampled_option_combinations(options):
    for graph in (UNDIRECTED, DIRECTED):
        check_counts(GSI(w3=33, w1=40, **options).prepare(graph), graph,
                     queries(graph, sizes=(5,), seeds=(2,)))


@pytest.mark.slow_cases("undirected")
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_load_balance_layers_and_duplicate_removal_on_hubs(directed):
    graph = two_hubs(directed)
    assert graph.max_degree > 32
    qs = queries(graph, sizes=(3,), seeds=(2,) if directed else (2, 3))
    base = GSI(load_balance=False, duplicate_removal=False, instrument=True).prepare(graph)
    lb = GSI(load_balance=True, duplicate_removal=False, w3=33, w1=34, instrument=True).prepare(graph)
    pool = GSI(load_balance=True, duplicate_removal=True, w3=33, w1=1000).prepare(graph)
    dr = GSI(load_balance=False, duplicate_removal=True, instrument=True).prepare(graph)
    queued = shared = 0
    for q in qs:
        want = reference(graph, q).count
        r_base, r_lb, r_dr = base.match(q), lb.match(q), dr.match(q)
        assert r_base.count == r_lb.count == r_dr.count == pool.match(q).count == want
        queued += r_lb.stats["lb_queued_rows"]
        assert r_dr.stats["loads_neighbors"] <= r_base.stats["loads_neighbors"]
        shared += r_base.stats["loads_neighbors"] - r_dr.stats["loads_neighbors"]
        assert r_base.stats["loads_total"] > 0
    if not directed:   # (the directed walks' e0 lists stay below w1 and share fewer hub rows)
        assert queued > 0
        assert shared > 0                  # duplicate removal skipped some neighbour-list loads


@pytest.mark.slow_cases("undirected")
@pytest.mark.parametrize("directed", [False, True], ids=["undirected", "directed"])
def test_other_linking_edges_in_their_own_launch_equal_fused(directed, monkeypatch):
    """A large table's other linking edges run in a launch after the block kernel (and ``heavy``):
    the same counts as fused into it, on queries with several linking edges per level."""
    from gsi import balance

    graph = two_hubs(directed)
    qs = [q for q in queries(graph, sizes=(3, 4), seeds=(2, 3)) if q.num_edges >= q.num_vertices]
    assert qs, "no query with a cycle (a level with two linking edges)"
    options = dict(load_balance=True, duplicate_removal=False, w3=33, w1=60, fuse_rows=0)
    fused = GSI(**options).prepare(graph)
    fused_counts = [fused.match(q).count for q in qs]
    launches = []
    original = balance._other_edges_kernel

    def counted(warps):
        kernel = original(warps)

        class Counting:
            def __getitem__(self, config):
                launches.append(config)
                return kernel[config]
        return Counting()

    monkeypatch.setattr(balance, "SEPARATE_EDGES_ROUNDS", 0)
    monkeypatch.setattr(balance, "_other_edges_kernel", counted)
    balance.make_balanced_kernels.cache_clear()
    try:
        separate = GSI(**options).prepare(graph)
        for q, want in zip(qs, fused_counts):
            got = separate.match(q)
            assert got.status is Status.OK
            assert got.count == want == reference(graph, q).count, q.name
    finally:
        balance.make_balanced_kernels.cache_clear()
    assert launches, "the separate launch never ran"


def test_histogram_thresholds_follow_the_work():
    from gsi.balance import histogram_thresholds
    small = np.zeros(64)
    small[0] = 10_000                       # only short rows: the warp layer takes everything
    w1, w3 = histogram_thresholds(small, sms=4, block_threads=256)
    assert w3 >= 31 and w1 > w3
    huge = np.zeros(4096)
    huge[4000] = 2                          # two enormous rows: the queued (per-row block) layer
    w1h, _ = histogram_thresholds(huge, sms=132, block_threads=256, t_launch=1.0)
    assert w1h < 4000 * 32


@pytest.mark.slow
def test_slices_under_a_memory_limit_and_oom():
    graph = UNDIRECTED
    q = walk_query(graph, 4, seed=0)
    want = reference(graph, q).count
    small = dict(initial_rows=64, initial_gba=1024, fuse_rows=0)    # level by level: slices
    probe = GSI(**small).prepare(graph)
    need = probe.budget.in_use
    # Room for the scratch buffers but not for whole tables: the join runs over slices.
    tight = GSI(device_memory_limit=need + 450, **small).prepare(graph)
    got = tight.match(q, collect=True)
    assert got.status is Status.OK and got.count == want
    assert got.stats["slices"] > GSI(fuse_rows=0).prepare(graph).match(q).stats["slices"]
    want_rows = sorted(map(tuple, reference(graph, q, collect=True).embeddings.tolist()))
    assert sorted(map(tuple, got.embeddings.tolist())) == want_rows
    # the one-launch join under the same kind of budget (its tables are preallocated)
    small.pop("fuse_rows")
    probe = GSI(**small).prepare(graph)
    fused = GSI(device_memory_limit=probe.budget.in_use + 450, **small).prepare(graph).match(q, collect=True)
    assert fused.status is Status.OK and sorted(map(tuple, fused.embeddings.tolist())) == want_rows
    # One row's candidate buffer (a hub's neighbours) cannot fit: status oom, never a crash.
    hub = two_hubs(False)
    starved = dict(initial_rows=1, initial_gba=2)
    probe = GSI(**starved).prepare(hub)
    limit = probe.budget.in_use + 8
    result = GSI(device_memory_limit=limit, **starved).prepare(hub).match(walk_query(hub, 3, seed=0))
    assert result.status is Status.OOM


def test_one_launch_join_left_out_where_the_limit_leaves_it_no_room():
    """Per-row arrays and GBA that take what a limit allows leave no room for the one-launch
    join's tables: prepare still succeeds, without that join, and counts stay exact."""
    graph = UNDIRECTED
    q = walk_query(graph, 4, seed=0)
    big = dict(initial_rows=1 << 12, initial_gba=1 << 14)
    lean = GSI(fuse_rows=0, **big).prepare(graph)
    engine = GSI(device_memory_limit=lean.budget.in_use + 6000, **big).prepare(graph)   # < its two 4 KiB tables
    assert engine.prepare_error is None and engine.fuse_rows == 0 < GSI().fuse_rows
    got = engine.match(q)
    assert got.status is Status.OK and got.count == reference(graph, q).count > 0


@pytest.mark.slow
def test_more_than_32_query_vertices():
    # A 33-vertex path with alternating labels (a unique label at its end) in a 36-cycle: two
    # embeddings (the two directions around the cycle), checked by the reference.
    n, k = 36, 33
    labels = np.arange(n) % 2
    labels[0] = 2
    data = Graph.from_edges(n, np.arange(n), (np.arange(n) + 1) % n, labels, np.zeros(n, int))
    q_labels = np.arange(k) % 2
    q_labels[0] = 2
    q = Graph.from_edges(k, np.arange(k - 1), np.arange(1, k), q_labels)
    got = GSI().prepare(data).match(q, collect=True)
    want = reference(data, q, collect=True)
    assert got.status is Status.OK and got.count == want.count > 0
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))


def test_bad_options_are_refused():
    with pytest.raises(ValueError):
        GSI(structure="hash")
    with pytest.raises(ValueError):
        GSI(load_balance="sometimes")


def test_pcsr_lookup_with_overflow_chains():
    """Vertices chosen so that 20 of 40 keys hash to one bucket: the chain must find them all."""
    from common.gpu.device_functions import hash32_host
    from gsi.pcsr import build_index, neighbor_range, warp_neighbor_range

    n_keys = 40
    colliding = [v for v in range(200_000) if int(hash32_host(v, 17)) % n_keys == 0][:20]
    others = [v for v in range(200_000) if int(hash32_host(v, 17)) % n_keys != 0 and v not in colliding][:20]
    keys = np.array(sorted(colliding + others))
    n = int(keys.max()) + 1
    src, dst = keys[:-1], keys[1:]              # a path: every key has an edge
    data = Graph.from_edges(n, src, dst)
    index = build_index(data, "pcsr")
    assert index.meta[0] == n_keys
    d = index.to_device(DeviceMemoryBudget())
    probe = np.concatenate([keys, [1, 2]]).astype(np.int32)    # two vertices without edges
    out = np.zeros((probe.size, 4), np.int64)

    @cuda.jit
    def lookup(structure, meta, gl, keys_, offs, probe_, n_, out_):
        w = cuda.blockIdx.x
        v = probe_[w]
        s, e, _ = warp_neighbor_range(structure, meta, gl, keys_, offs, 0, v, n_)
        s2, e2, _ = neighbor_range(structure, meta, gl, keys_, offs, 0, v, n_)
        if cuda.laneid == 0:
            out_[w, 0] = s
            out_[w, 1] = e
            out_[w, 2] = s2
            out_[w, 3] = e2

    d_out = cuda.to_device(out)
    lookup[probe.size, 32](d.structure, d.meta, d.gl, d.keys, d.offs, cuda.to_device(probe), n, d_out)
    out = d_out.copy_to_host()
    assert np.array_equal(out[:, :2], out[:, 2:])
    for row, v in enumerate(probe.tolist()):
        got = np.sort(index.ci[out[row, 0]:out[row, 1]])
        assert np.array_equal(got, data.neighbors_of(v)), v


def test_buffer_cap_slices_without_a_limit_and_the_pool_is_trimmed_after(monkeypatch):
    """Without a memory limit, no pooled join buffer passes BUFFER_CAP_BYTES (a level that would
    runs over slices of its table, with exact counts and rows), and a pool grown past
    POOL_KEEP_BYTES goes back to its prepare-time size after the query."""
    import gsi.engine as engine_module

    graph = two_hubs(False)
    q = walk_query(graph, 4, seed=0)
    want = reference(graph, q, collect=True)
    assert want.count > 0
    free = GSI(fuse_rows=0).prepare(graph).match(q)
    monkeypatch.setattr(engine_module, "BUFFER_CAP_BYTES", 512)
    monkeypatch.setattr(engine_module, "POOL_KEEP_BYTES", 1)
    engine = GSI(fuse_rows=0, initial_rows=16, initial_gba=64).prepare(graph)
    kept = engine.pool.nbytes
    got = engine.match(q, collect=True)
    assert got.status is Status.OK and got.count == want.count
    assert sorted(map(tuple, got.embeddings.tolist())) == sorted(map(tuple, want.embeddings.tolist()))
    assert got.stats["slices"] > free.stats["slices"]
    capped = {name: a.nbytes for name, a in engine.pool._arrays.items() if name != "table 0"}
    assert engine.pool.nbytes <= kept, capped          # trimmed back after the query
    again = engine.match(q)                            # and answers again from there
    assert again.status is Status.OK and again.count == want.count


def test_a_level_bound_does_not_grow_the_next_table_without_a_limit(monkeypatch):
    """A level's bound (rows x longest list) sizes the next table only when it is small enough
    for the one-launch scan-and-link (LINK_FUSE_ROUNDS rows per thread): otherwise, without a
    memory limit too, a table is grown to the rows the level produced, never to its bound."""
    import gsi.engine as engine_module

    graph = random_graph(40, 200, 1, 1, False, 4)
    engine = GSI(fuse_rows=0, block_threads=32, initial_rows=64, initial_gba=256).prepare(graph)
    asked: list[tuple[int, int]] = []
    grow = engine._grow_table
    monkeypatch.setattr(engine, "_grow_table", lambda level, rows: asked.append((level, rows)) or grow(level, rows))
    q = walk_query(graph, 4, seed=0, induced=False)
    got = engine.match(q)
    assert got.status is Status.OK and got.count == reference(graph, q).count
    produced = got.stats["rows_per_iteration"]
    small_bound = engine_module.LINK_FUSE_ROUNDS * engine.block_threads
    for level, rows in asked:
        assert rows <= max(produced[level], small_bound), (level, rows, produced)
